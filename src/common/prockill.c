/* prockill: signalling processes without ever hitting a recycled pid: one process named
 * by pid and start time, every member of a cgroup, and whether a cgroup is empty (see
 * prockill.h). */
#include "prockill.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "files.h"
#include "pidfd.h"
#include "procinfo.h"
#include "util.h"

/* How many pidfds a cgroup kill holds open at once: a daemon short of file descriptors
 * still gets through a large job in rounds. */
#define PROCKILL_BATCH 64

void prockill_procs_add(struct prockill_procs *p, pid_t pid, int64_t start)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].pid == pid && p->v[i].start == start)
            return;
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->v = xrealloc(p->v, p->cap * sizeof(*p->v));
    }
    p->v[p->n++] = (struct prockill_proc){pid, start};
}

void prockill_procs_free(struct prockill_procs *p)
{
    free(p->v);
    memset(p, 0, sizeof(*p));
}

/* Whether a process in state is still a process (not a zombie waiting for its parent). */
static bool prockill_live(char state)
{
    return state != 'Z' && state != 'X';
}

int prockill_pid(pid_t pid, int64_t start, int sig)
{
    int fd = sys_pidfd_open(pid);
    if (fd < 0)
        return errno == ESRCH ? 0 : -1;
    int rc = 0;
    struct proc_stat st;
    if (proc_stat_read(pid, &st) < 0) {
        rc = errno == ENOENT || errno == ESRCH ? 0 : -1;
    } else if (st.start == start) {
        if (sys_pidfd_send_signal(fd, sig, NULL) == 0)
            rc = 1;
        else
            rc = errno == ESRCH ? 0 : -1;
    }
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int prockill_cgroup_version(const char *dir)
{
    struct statfs fs;
    if (statfs(dir, &fs) < 0)
        return -1;
    if (fs.f_type == CGROUP2_SUPER_MAGIC)
        return 2;
    if (fs.f_type == CGROUP_SUPER_MAGIC)
        return 1;
    errno = ENOTDIR;
    return -1;
}

static int prockill_pid_cmp(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

ssize_t prockill_cgroup_members(const char *dir, pid_t **pids)
{
    char *path = xasprintf("%s/cgroup.procs", dir);
    size_t len;
    char *text = read_file(path, &len);
    free(path);
    *pids = NULL;
    if (!text)
        return -1;
    size_t n = 0, cap = 16;
    pid_t *v = xmalloc(cap * sizeof(*v));
    for (char *p = text, *end; *p; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p) {
            end = p + 1;
            continue;
        }
        if (pid <= 0)
            continue;
        if (n == cap) {
            cap *= 2;
            v = xrealloc(v, cap * sizeof(*v));
        }
        v[n++] = (pid_t)pid;
    }
    free(text);
    qsort(v, n, sizeof(*v), prockill_pid_cmp);
    *pids = v;
    return (ssize_t)n;
}

/* Writes "1" to dir/cgroup.kill. 0, or -1 with errno (ENOENT: the kernel has none). */
static int prockill_cgroup_kill_file(const char *dir)
{
    char *path = xasprintf("%s/cgroup.kill", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    free(path);
    if (fd < 0)
        return -1;
    int rc = write(fd, "1", 1) == 1 ? 0 : -1;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* One round of the member-by-member kill: pidfds for pids[0..n) (as many as can be
 * opened at once), then cgroup.procs again, and the signal to those still in it. The
 * number of pids dealt with (the rest waits for the next round), or -1 with errno. */
static ssize_t prockill_cgroup_batch(const char *dir, const pid_t *pids, size_t n, int sig,
                                     struct prockill_procs *hit, size_t *live)
{
    struct {
        pid_t pid;
        int fd;
    } open_fds[PROCKILL_BATCH];
    size_t done = 0, opened = 0;
    for (; done < n && opened < PROCKILL_BATCH; done++) {
        int fd = sys_pidfd_open(pids[done]);
        if (fd >= 0) {
            open_fds[opened].pid = pids[done];
            open_fds[opened++].fd = fd;
        } else if (errno != ESRCH) {
            if (opened == 0)
                return -1;
            break; /* out of descriptors: deal with these first */
        }
    }
    pid_t *now;
    ssize_t m = prockill_cgroup_members(dir, &now);
    int e = errno;
    for (size_t i = 0; i < opened; i++) {
        pid_t pid = open_fds[i].pid;
        struct proc_stat st;
        if (m > 0 && bsearch(&pid, now, (size_t)m, sizeof(*now), prockill_pid_cmp) &&
            proc_stat_read(pid, &st) == 0 && prockill_live(st.state) &&
            sys_pidfd_send_signal(open_fds[i].fd, sig, NULL) == 0) {
            (*live)++;
            if (hit)
                prockill_procs_add(hit, pid, st.start);
        }
        close(open_fds[i].fd);
    }
    free(now);
    if (m < 0 && e != ENOENT) {
        errno = e;
        return -1;
    }
    return (ssize_t)done;
}

ssize_t prockill_cgroup(const char *dir, int sig, struct prockill_procs *hit)
{
    int version = prockill_cgroup_version(dir);
    if (version < 0)
        return errno == ENOENT ? 0 : -1;
    pid_t *pids;
    ssize_t n = prockill_cgroup_members(dir, &pids);
    if (n < 0)
        return errno == ENOENT ? 0 : -1;
    size_t live = 0;
    if (sig == SIGKILL && version == 2) {
        /* What is there is counted first: killed, it is soon a zombie. */
        struct prockill_procs seen = {0};
        for (ssize_t i = 0; i < n; i++) {
            struct proc_stat st;
            if (proc_stat_read(pids[i], &st) == 0 && prockill_live(st.state))
                prockill_procs_add(&seen, pids[i], st.start);
        }
        if (prockill_cgroup_kill_file(dir) == 0) {
            /* The kernel kills them all, and whatever forks meanwhile. */
            for (size_t i = 0; hit && i < seen.n; i++)
                prockill_procs_add(hit, seen.v[i].pid, seen.v[i].start);
            live = seen.n;
            prockill_procs_free(&seen);
            free(pids);
            return (ssize_t)live;
        }
        prockill_procs_free(&seen); /* no cgroup.kill (before Linux 5.14): one by one */
    }
    for (size_t i = 0; i < (size_t)n;) {
        ssize_t done = prockill_cgroup_batch(dir, pids + i, (size_t)n - i, sig, hit, &live);
        if (done < 0) {
            int e = errno;
            free(pids);
            errno = e;
            return -1;
        }
        i += (size_t)done;
    }
    free(pids);
    return (ssize_t)live;
}

int prockill_cgroup_populated(const char *dir)
{
    int version = prockill_cgroup_version(dir);
    if (version < 0)
        return errno == ENOENT ? 0 : -1;
    if (version == 2) {
        char *path = xasprintf("%s/cgroup.events", dir);
        char *text = read_file(path, NULL);
        free(path);
        if (!text)
            return errno == ENOENT ? 0 : -1;
        char *p = strstr(text, "populated ");
        int rc = p && (p == text || p[-1] == '\n') ? p[strlen("populated ")] == '1' : -1;
        free(text);
        if (rc < 0)
            errno = EIO;
        return rc;
    }
    pid_t *pids;
    ssize_t n = prockill_cgroup_members(dir, &pids);
    if (n < 0)
        return errno == ENOENT ? 0 : -1;
    int rc = 0;
    for (ssize_t i = 0; i < n && !rc; i++) {
        struct proc_stat st;
        if (proc_stat_read(pids[i], &st) == 0)
            rc = prockill_live(st.state);
        else if (errno != ENOENT && errno != ESRCH)
            rc = -1; /* cannot tell: not empty as far as anyone knows */
    }
    free(pids);
    return rc;
}
