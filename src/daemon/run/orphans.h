/* orphans: what is left of a job whose shim is gone without an exit file.
 *
 * A shim that ends normally has killed everything the job started before it writes the
 * exit file. A shim that died (SIGKILL, the OOM killer, a crash) leaves the job running
 * unsupervised, on GPUs the daemon would hand to the next job. So before such a job
 * ends, the daemon kills what is left of it, in rounds, until a round finds nothing:
 *
 *  - the cgroup the shim named in the lock file (the job's own, step 9 of the shim
 *    protocol): every member, SIGKILL through cgroup.kill where the kernel has it;
 *  - every process under /proc that started after the shim and carries the job's marker
 *    (GFLOW_SHIM_ID=<shim pid>:<start>, exitfile.h) in its environment, which survives
 *    setsid and reparenting, or is in the shim's session while that session id can only
 *    be the shim's (no other process has the shim's pid; not for a supervisor's job,
 *    whose session all its jobs share): this is how a job is found
 *    where no cgroup could be made, and what it moved out of its cgroup.
 *
 * Every process is signalled through a pidfd after its start time is checked
 * (prockill.h): a recycled pid is never signalled. Everything needed is in the lock
 * file and the job's row, so a daemon restarted after the shim died does the same. A
 * root daemon reads every process's environment; a per-user one those of its own user,
 * which are the only ones it could kill anyway. */
#ifndef GFLOWD_ORPHANS_H
#define GFLOWD_ORPHANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct orphans;

/* Starts the cleanup after the shim (pid, start time) of job_id, with the cgroups its
 * lock file names (copied). supervisor: the shim served several jobs (its lock file's
 * "supervisor:" line), whose processes carry GFLOW_SHIM_ID=<pid>:<start>:<job> and share
 * its session: only this job's marker and cgroups are the job's. */
struct orphans *orphans_new(int64_t job_id, pid_t shim_pid, int64_t shim_start, bool supervisor,
                            char *const *cgroups, size_t n_cgroups);
/* One round: SIGKILL to every process of the job that is left. 1 when nothing is left;
 * 0 when something was found (or could not be checked: out of file descriptors, an
 * unreadable cgroup): call again later. */
int orphans_round(struct orphans *o);
/* How many processes the rounds so far have killed (each counted once). */
size_t orphans_killed(const struct orphans *o);
/* Whether the last round found a process it is not allowed to kill (EPERM): it keeps
 * the job's GPUs until it ends by itself. */
bool orphans_stuck(const struct orphans *o);
/* Once nothing is left: removes the job's cgroups (best effort). */
void orphans_remove_cgroups(struct orphans *o);
void orphans_free(struct orphans *o);

#endif
