/* gpu_pidns: NVML's pids from the host's PID namespace turned into gflowd's own.
 *
 * When gflowd runs in a container with a PID namespace of its own, NVML may give the
 * host's pids: a job's process is then a pid that our /proc lacks, or names another
 * process. Our own /proc cannot tell: the NSpid line of /proc/<pid>/status lists a
 * process's pids from the namespace of that /proc mount down, so in the container it
 * starts at the container's pid. The host's /proc can: mounted in the container
 * (daemon.host_proc, e.g. "/host/proc", as monitoring agents mount it), its
 * <host pid>/status has NSpid: <host pid> ... <our pid> [<pids deeper down>], and the
 * entry at our depth (how many levels our own NSpid there has, less one) is the pid in
 * our namespace. The answer is checked (the same start time from both sides: a process
 * of a sibling container may have that pid here too) and kept, so a pid costs one read
 * of the host's /proc while its process lives. Only pids that are no job's as they are
 * (gpu_process_owner) are looked up. */
#include "gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "procinfo.h"
#include "util.h"

#define NSPID_MAX 32   /* nesting levels read; Linux allows 32 */
#define PIDNS_CACHE 64 /* host pids remembered (a ring) */

struct pidns_entry {
    long long host;
    pid_t local;
    int64_t start; /* the local process's start time: a dead one is looked up again */
};

/* The daemon's one setting (gpu_set_host_proc), and what was learnt with it. */
static struct {
    char *root; /* daemon.host_proc; NULL: none */
    int level;  /* our depth below the host's namespace; -1: not known yet */
    struct pidns_entry cache[PIDNS_CACHE];
    size_t next; /* the ring's next slot */
} pidns = {.level = -1};

void gpu_set_host_proc(const char *path)
{
    free(pidns.root);
    pidns.root = path && *path ? xstrdup(path) : NULL;
    pidns.level = -1;
    memset(pidns.cache, 0, sizeof(pidns.cache));
    pidns.next = 0;
}

/* The NSpid line of <root>/<pid>/status into out; how many, 0 when unreadable. */
static int read_nspid(const char *pid, long long *out)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s/status", pidns.root, pid);
    char *text = read_file(path, NULL);
    if (!text)
        return 0;
    int k = 0;
    char *line = strstr(text, "\nNSpid:");
    for (char *p = line ? line + 7 : NULL, *end; p && k < NSPID_MAX; p = end) {
        long long v = strtoll(p, &end, 10);
        if (end == p)
            break;
        out[k++] = v;
    }
    free(text);
    return k;
}

/* Start time (clock ticks since boot) of <root>/<pid>, -1 if unreadable. */
static int64_t host_start_time(long long pid)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%lld/stat", pidns.root, pid);
    char *text = read_file(path, NULL);
    char *p = text ? strrchr(text, ')') : NULL; /* the command may hold spaces */
    /* After the ')' come fields 3 (the state) on; the start time is field 22. */
    for (int field = 2; p && field < 22; field++)
        if ((p = strchr(p + 1, ' ')))
            p++;
    int64_t start = p ? strtoll(p, NULL, 10) : -1;
    free(text);
    return start;
}

/* Our depth below the host's namespace: "self" in the host's /proc is gflowd. */
static int our_level(void)
{
    if (pidns.level < 0) {
        long long ns[NSPID_MAX];
        int k = read_nspid("self", ns);
        pidns.level = k > 0 ? k - 1 : 0;
    }
    return pidns.level;
}

pid_t gpu_pidns_local(long long host)
{
    if (!pidns.root || host <= 0 || our_level() <= 0)
        return -1; /* no host view, or it is our own namespace's */
    for (size_t i = 0; i < PIDNS_CACHE; i++) {
        const struct pidns_entry *e = &pidns.cache[i];
        if (e->host == host && e->start > 0 && proc_start_time(e->local) == e->start)
            return e->local;
    }
    char name[32];
    snprintf(name, sizeof(name), "%lld", host);
    long long ns[NSPID_MAX];
    int k = read_nspid(name, ns);
    if (k <= our_level())
        return -1; /* not in our namespace (or gone) */
    pid_t local = (pid_t)ns[our_level()];
    int64_t start = proc_start_time(local);
    if (start < 0 || start != host_start_time(host))
        return -1; /* another process has that pid here */
    pidns.cache[pidns.next] = (struct pidns_entry){host, local, start};
    pidns.next = (pidns.next + 1) % PIDNS_CACHE;
    return local;
}
