/* proctree: the job's processes as /proc shows them: listing every process with its
 * parent and start time, finding the shim's descendants (everything the job started:
 * the shim is a subreaper), signalling them through pidfds (prockill.h: never a
 * recycled pid), and summing their RSS for the memory watchdog. */
#include "shim.h"

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "procinfo.h"
#include "prockill.h"
#include "util.h"

static int shim_proctree_cmp(const void *a, const void *b)
{
    pid_t x = ((const struct shim_proc *)a)->pid, y = ((const struct shim_proc *)b)->pid;
    return (x > y) - (x < y);
}

/* All processes with their parents, sorted by pid. */
static size_t shim_proctree_list(struct shim_proc **out)
{
    size_t n = 0, cap = 256;
    struct shim_proc *v = xmalloc(cap * sizeof(*v));
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int64_t pid;
        if (parse_int64(de->d_name, &pid) < 0 || pid <= 0 || pid > INT_MAX)
            continue;
        struct proc_stat st;
        if (proc_stat_read((pid_t)pid, &st) < 0)
            continue; /* gone meanwhile */
        if (n == cap) {
            cap *= 2;
            v = xrealloc(v, cap * sizeof(*v));
        }
        v[n++] = (struct shim_proc){(pid_t)pid, st.ppid, st.start};
    }
    if (d)
        closedir(d);
    qsort(v, n, sizeof(*v), shim_proctree_cmp);
    *out = v;
    return n;
}

/* Marks in desc[] the processes whose parent chain leads to root. As a subreaper the
 * shim adopts orphans, so this is everything the job started that still exists. */
static void shim_proctree_mark(const struct shim_proc *v, size_t n, pid_t root, bool *desc)
{
    bool changed = true;
    while (changed) {
        changed = false;
        for (size_t i = 0; i < n; i++) {
            if (desc[i])
                continue;
            bool hit = v[i].ppid == root;
            if (!hit) {
                struct shim_proc key = {.pid = v[i].ppid};
                const struct shim_proc *par = bsearch(&key, v, n, sizeof(*v), shim_proctree_cmp);
                hit = par && desc[par - v];
            }
            if (hit) {
                desc[i] = true;
                changed = true;
            }
        }
    }
}

size_t shim_proctree_descendants(pid_t root, struct shim_proc **out)
{
    struct shim_proc *v;
    size_t n = shim_proctree_list(&v);
    bool *desc = xcalloc(n ? n : 1, sizeof(*desc));
    shim_proctree_mark(v, n, root, desc);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (desc[i])
            v[k++] = v[i];
    free(desc);
    *out = v;
    return k;
}

/* A supervisor's job with a cgroup: the members of its cgroup.procs, with their start
 * times (those gone meanwhile left out). */
static size_t shim_proctree_cgroup(const char *dir, struct shim_proc **out)
{
    char *path = xasprintf("%s/cgroup.procs", dir);
    char *text = read_file(path, NULL);
    free(path);
    size_t n = 0, cap = 8;
    struct shim_proc *v = xmalloc(cap * sizeof(*v));
    for (char *p = text, *end; p && *p; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        struct proc_stat st;
        if (pid <= 0 || proc_stat_read((pid_t)pid, &st) < 0)
            continue;
        if (n == cap) {
            cap *= 2;
            v = xrealloc(v, cap * sizeof(*v));
        }
        v[n++] = (struct shim_proc){(pid_t)pid, st.ppid, st.start};
    }
    free(text);
    *out = v;
    return n;
}

size_t shim_proctree_of_job(const struct shim_run *r, struct shim_proc **out)
{
    if (!r->marker)
        return shim_proctree_descendants(r->self, out);
    if (r->jobcg.dir)
        return shim_proctree_cgroup(r->jobcg.dir, out);
    struct shim_proc *v;
    size_t n = shim_proctree_descendants(r->self, &v), k = 0;
    for (size_t i = 0; i < n; i++)
        if (proc_environ_has(v[i].pid, r->marker) == 1)
            v[k++] = v[i];
    *out = v;
    return k;
}

/* Sends sig to one descendant, through a pidfd and only if it is still the process the
 * scan found (same start time). A stopped process cannot act on SIGTERM, so it is
 * continued too. Its process group is not signalled: the group's id may belong to
 * someone else by now; a member forked since the scan is found by the next re-kill. */
static void shim_proctree_kill(const struct shim_proc *p, int sig)
{
    if (prockill_pid(p->pid, p->start, sig) == 1 && sig == SIGTERM)
        prockill_pid(p->pid, p->start, SIGCONT);
}

/* Sends sig (0: none) to the job's process group and every descendant of the shim.
 * Returns how many descendants exist, zombies included. */
size_t shim_proctree_signal(struct shim_run *r, int sig)
{
    /* While its leader is unreaped, the group id cannot be anyone else's: one kill
     * reaches the members forked since any scan. */
    if (sig && r->ntasks > 0 && !r->tasks[0].reaped) {
        /* Before the scan: the group is gone only after every member is. */
        kill(-r->pgid, sig);
        if (sig == SIGTERM)
            kill(-r->pgid, SIGCONT);
    }
    /* The kernel kills the whole cgroup at once, whatever forks meanwhile. */
    if (sig == SIGKILL && r->jobcg.version == 2)
        prockill_cgroup(r->jobcg.dir, SIGKILL, NULL);
    struct shim_proc *procs;
    size_t n = shim_proctree_of_job(r, &procs);
    for (size_t i = 0; sig && i < n; i++)
        shim_proctree_kill(&procs[i], sig);
    free(procs);
    return n;
}

/* VmRSS of pid in kB; 0 for a process without one (a zombie) or one that is gone. */
static long long shim_proctree_proc_rss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    char *buf = read_file(path, NULL);
    if (!buf)
        return 0;
    char *line = strstr(buf, "\nVmRSS:");
    long long kb = line ? strtoll(line + strlen("\nVmRSS:"), NULL, 10) : 0;
    free(buf);
    return kb;
}

/* The watchdog's measure of the job: the summed RSS of every descendant of root.
 * Pages shared between them count once per process, so this errs on the high side,
 * as a limit should. */
long long shim_proctree_rss_kb(pid_t root)
{
    struct shim_proc *procs;
    size_t n = shim_proctree_descendants(root, &procs);
    long long kb = 0;
    for (size_t i = 0; i < n; i++)
        kb += shim_proctree_proc_rss_kb(procs[i].pid);
    free(procs);
    return kb;
}
