/* orphans: finding and killing what is left of a job whose shim is gone (see orphans.h). */
#include "orphans.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exitfile.h"
#include "log.h"
#include "procinfo.h"
#include "prockill.h"
#include "util.h"

struct orphans {
    int64_t job_id;
    pid_t shim_pid;
    int64_t shim_start;
    char *marker;    /* GFLOW_SHIM_ID=<pid>:<start>, or <pid>:<start>:<job> for a supervisor's */
    bool supervisor; /* the shim served several jobs: its session is not this job's alone */
    char **cgroups;
    size_t n_cgroups;
    struct prockill_procs killed;
    bool stuck;
    bool warned_stuck;
};

struct orphans *orphans_new(int64_t job_id, pid_t shim_pid, int64_t shim_start, bool supervisor,
                            char *const *cgroups, size_t n_cgroups)
{
    struct orphans *o = xcalloc(1, sizeof(*o));
    o->job_id = job_id;
    o->shim_pid = shim_pid;
    o->shim_start = shim_start;
    o->supervisor = supervisor;
    o->marker = supervisor ? exitfile_job_marker(shim_pid, shim_start, job_id)
                           : exitfile_marker(shim_pid, shim_start);
    o->cgroups = xcalloc(n_cgroups ? n_cgroups : 1, sizeof(*o->cgroups));
    for (size_t i = 0; i < n_cgroups; i++)
        o->cgroups[i] = xstrdup(cgroups[i]);
    o->n_cgroups = n_cgroups;
    return o;
}

void orphans_free(struct orphans *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n_cgroups; i++)
        free(o->cgroups[i]);
    free(o->cgroups);
    free(o->marker);
    prockill_procs_free(&o->killed);
    free(o);
}

size_t orphans_killed(const struct orphans *o)
{
    return o->killed.n;
}

bool orphans_stuck(const struct orphans *o)
{
    return o->stuck;
}

/* Whether an error means the daemon could not look (out of file descriptors or memory),
 * so that nothing can be concluded: the round is tried again. Any other error (the
 * process is gone, it is another user's, the cgroup is no cgroup) means "not the job's":
 * a round that keeps failing on it must not hold the job's GPUs for ever. */
static bool orphans_short(int e)
{
    return e == EMFILE || e == ENFILE || e == ENOMEM || e == EAGAIN || e == EINTR;
}

/* Whether the shim's pid still names the shim's session: no other process has taken
 * the number (while a member of the session exists, the kernel does not hand it out). */
static bool orphans_session_is_jobs(const struct orphans *o)
{
    struct proc_stat st;
    if (proc_stat_read(o->shim_pid, &st) == 0)
        return st.start == o->shim_start;
    return errno == ENOENT || errno == ESRCH;
}

/* Whether pid, with stat st, is a process of the job: 1, 0, or -1 (cannot tell now). */
static int orphans_is_jobs(const struct orphans *o, pid_t pid, const struct proc_stat *st,
                           bool session_ok)
{
    /* Everything of the job started after the shim; this also keeps the daemon, its
     * parents and the machine's services out, unread. */
    if (st->start < o->shim_start || pid == o->shim_pid || pid == getpid())
        return 0;
    if (session_ok && st->sid == o->shim_pid)
        return 1;
    int has = proc_environ_has(pid, o->marker);
    if (has >= 0)
        return has;
    return orphans_short(errno) ? -1 : 0;
}

/* Kills the job's processes under /proc. Whether any is left; *unsure when some could
 * not be looked at. */
static bool orphans_scan(struct orphans *o, bool *unsure)
{
    DIR *dp = opendir("/proc");
    if (!dp) {
        if (orphans_short(errno))
            *unsure = true;
        return false;
    }
    bool session_ok = !o->supervisor && orphans_session_is_jobs(o);
    bool found = false;
    struct dirent *e;
    while ((e = readdir(dp))) {
        int64_t pid;
        if (parse_int64(e->d_name, &pid) < 0 || pid <= 0 || pid > INT_MAX)
            continue;
        struct proc_stat st;
        if (proc_stat_read((pid_t)pid, &st) < 0) {
            if (orphans_short(errno))
                *unsure = true;
            continue;
        }
        if (st.state == 'Z' || st.state == 'X')
            continue; /* dead already; its parent reaps it */
        int mine = orphans_is_jobs(o, (pid_t)pid, &st, session_ok);
        if (mine < 0)
            *unsure = true;
        if (mine <= 0)
            continue;
        found = true;
        int rc = prockill_pid((pid_t)pid, st.start, SIGKILL);
        if (rc == 1)
            prockill_procs_add(&o->killed, (pid_t)pid, st.start);
        else if (rc < 0 && errno == EPERM)
            o->stuck = true;
        else if (rc < 0 && orphans_short(errno))
            *unsure = true;
    }
    closedir(dp);
    return found;
}

int orphans_round(struct orphans *o)
{
    bool found = false, unsure = false;
    o->stuck = false;
    for (size_t i = 0; i < o->n_cgroups; i++) {
        ssize_t n = prockill_cgroup(o->cgroups[i], SIGKILL, &o->killed);
        if (n < 0 && errno == EPERM)
            o->stuck = true;
        if (n < 0 && (errno == EPERM || orphans_short(errno)))
            unsure = true;
        found |= n > 0;
    }
    found |= orphans_scan(o, &unsure);
    /* What the cgroup kill hit may still be dying; the kernel knows when it is gone. */
    for (size_t i = 0; i < o->n_cgroups && !found; i++) {
        int p = prockill_cgroup_populated(o->cgroups[i]);
        found |= p == 1;
        unsure |= p < 0 && orphans_short(errno);
    }
    if (o->stuck && !o->warned_stuck) {
        o->warned_stuck = true;
        log_warn("job %lld: a process left of it cannot be killed (not permitted); its GPUs "
                 "stay held until it ends",
                 (long long)o->job_id);
    }
    return !found && !unsure;
}

void orphans_remove_cgroups(struct orphans *o)
{
    for (size_t i = 0; i < o->n_cgroups; i++)
        if (prockill_cgroup_version(o->cgroups[i]) > 0 && rmdir(o->cgroups[i]) < 0 &&
            errno != ENOENT)
            log_warn("job %lld: cannot remove %s: %m", (long long)o->job_id, o->cgroups[i]);
}
