/* proctree: the job's processes as /proc shows them: listing every process with its
 * parent, finding the shim's descendants (everything the job started: the shim is a
 * subreaper), signalling them, and summing their RSS for the memory watchdog. */
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
#include "util.h"

struct shim_proc {
    pid_t pid;
    pid_t ppid;
};

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
        pid_t ppid = proc_parent((pid_t)pid);
        if (ppid < 0)
            continue; /* gone meanwhile */
        if (n == cap) {
            cap *= 2;
            v = xrealloc(v, cap * sizeof(*v));
        }
        v[n++] = (struct shim_proc){(pid_t)pid, ppid};
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

size_t shim_proctree_descendants(pid_t root, pid_t **out)
{
    struct shim_proc *v;
    size_t n = shim_proctree_list(&v);
    bool *desc = xcalloc(n ? n : 1, sizeof(*desc));
    shim_proctree_mark(v, n, root, desc);
    pid_t *pids = xmalloc((n ? n : 1) * sizeof(*pids));
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (desc[i])
            pids[k++] = v[i].pid;
    free(desc);
    free(v);
    *out = pids;
    return k;
}

/* Sends sig to one process and to its process group (unless that is the shim's own).
 * The group kill also reaches members forked since the scan. A stopped process cannot
 * act on SIGTERM, so it is continued too. */
static void shim_proctree_kill(pid_t pid, pid_t self_pgid, int sig)
{
    pid_t pgid = getpgid(pid);
    kill(pid, sig);
    if (pgid > 0 && pgid != self_pgid)
        kill(-pgid, sig);
    if (sig == SIGTERM) {
        kill(pid, SIGCONT);
        if (pgid > 0 && pgid != self_pgid)
            kill(-pgid, SIGCONT);
    }
}

/* Sends sig (0: none) to the job's process group and every descendant of the shim.
 * Returns how many descendants exist, zombies included. A pid may in theory be reused
 * between the scan and the kill; the window is a few microseconds, and most targets
 * are the shim's own children, whose pids cannot be reused before it reaps them. */
size_t shim_proctree_signal(struct shim_run *r, int sig)
{
    /* While its leader is unreaped, the group id cannot be anyone else's. Later, the
     * members left are reached through the scan, whose group kill uses their pgid. */
    if (sig && r->ntasks > 0 && !r->tasks[0].reaped) {
        /* Before the scan: the group is gone only after every member is. */
        kill(-r->pgid, sig);
        if (sig == SIGTERM)
            kill(-r->pgid, SIGCONT);
    }
    pid_t *pids;
    size_t n = shim_proctree_descendants(r->self, &pids);
    for (size_t i = 0; sig && i < n; i++)
        shim_proctree_kill(pids[i], r->self, sig);
    free(pids);
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
    pid_t *pids;
    size_t n = shim_proctree_descendants(root, &pids);
    long long kb = 0;
    for (size_t i = 0; i < n; i++)
        kb += shim_proctree_proc_rss_kb(pids[i]);
    free(pids);
    return kb;
}
