/* prockill: signalling processes so that a recycled pid is never hit, for the shim's
 * kill path and for the daemon's cleanup after a lost shim.
 *
 * A pid read from /proc or from a cgroup may belong to another process a moment later:
 * the one that had it exits, is reaped, and the number is handed out again. So every
 * signal goes through a pidfd (pidfd_open, then pidfd_send_signal): the pidfd names the
 * process that held the pid when it was opened, and once that process is gone the
 * signal fails with ESRCH instead of reaching a newcomer. Between listing and opening
 * the pid may already have changed hands; so after opening, the process is checked to
 * be the one listed: the same start time (/proc/PID/stat), or still a member of the
 * cgroup. If the process holding the pid at the check is the one meant, it held the pid
 * since the listing, so it is the one the pidfd names.
 *
 * A cgroup v2 with cgroup.kill (Linux 5.14) is killed by the kernel in one step,
 * processes forked meanwhile included. */
#ifndef GFLOW_PROCKILL_H
#define GFLOW_PROCKILL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Processes that were signalled, each named by pid and start time. */
struct prockill_procs {
    struct prockill_proc {
        pid_t pid;
        int64_t start;
    } * v;
    size_t n, cap;
};
/* Adds (pid, start) unless it is there already. */
void prockill_procs_add(struct prockill_procs *p, pid_t pid, int64_t start);
void prockill_procs_free(struct prockill_procs *p);

/* Sends sig to pid if it is still the process that started at `start` (clock ticks
 * since boot). 1 when sent; 0 when that process is gone (or pid is another's now); -1
 * with errno when it could not be done (EPERM, EMFILE for the pidfd, ...). */
int prockill_pid(pid_t pid, int64_t start, int sig);

/* What dir is: 2 a cgroup v2 directory, 1 a cgroup v1 one; -1 with errno when it is
 * neither (ENOTDIR: no cgroup file system there) or cannot be looked at (ENOENT: gone). */
int prockill_cgroup_version(const char *dir);

/* The processes in dir/cgroup.procs into *pids (to free; zombies included in v1).
 * Their number, or -1 with errno. */
ssize_t prockill_cgroup_members(const char *dir, pid_t **pids);

/* Sends sig to every process of the cgroup at dir: SIGKILL through cgroup.kill where the
 * kernel has it (the whole subtree at once), otherwise to each member through a pidfd
 * checked against cgroup.procs. Adds the live members it signalled to *hit (may be
 * NULL). The number of live members found, or -1 with errno (cannot read the cgroup, out
 * of file descriptors: nothing can be concluded). */
ssize_t prockill_cgroup(const char *dir, int sig, struct prockill_procs *hit);

/* Whether any process is left in the cgroup at dir (cgroup.events "populated" on v2,
 * which counts its descendants too and no zombies; a live member of cgroup.procs on
 * v1). 1, 0 (also when dir is gone), or -1 with errno. */
int prockill_cgroup_populated(const char *dir);

#endif
