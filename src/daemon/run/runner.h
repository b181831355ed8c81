/* runner: starts each job under gflow-shim, learns when it ends (pidfd of the shim and
 * the exit record it writes into its lock file), ends jobs on request (cancel, time limit) and, after a
 * daemon restart, re-adopts the shims still running and finalizes those that ended.
 *
 * A shim that is gone without an exit record (killed, crashed) may have left the job
 * running: the job stays R, holding its GPUs, while the daemon kills what is left of it
 * (orphans.h), and only then ends as the lock file says (ShimLost, with how many
 * processes were killed). A launch that fails for lack of a resource (file descriptors,
 * memory, processes) puts the job back in the queue instead of failing it.
 *
 * Exactly-once start: a job is committed as R before its shim is forked. The daemon
 * creates (or takes a spare one, launch.h) and flock()s run/<id>.lock before the fork and the shim inherits that lock and
 * writes "<pid> <starttime>" into it first thing. A restarted daemon that finds an R job
 * then knows: lock held -> the shim is alive (adopt it); lock free and an exit record
 * (in the lock file; from a shim of a previous version, exits/<id>.json) -> it ended
 * (finalize); lock free, file empty or absent -> the shim never started (queue
 * the job again); lock free with a pid and no exit record -> the shim died (ShimLost).
 *
 * The run room (src/daemon/run/, docs/design.md §3): the runner, launch and the
 * processes that take jobs (launch*.c), adoption, orphans, preemption (preempt_run.c) and
 * gflowd's cgroup leaf. It may call ops/, gpu/, jobs/, policy/ and store/. */
#ifndef GFLOWD_RUNNER_H
#define GFLOWD_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "job.h"

struct gflowd;

/* Creates the data directories and holds the logs' open (joblog.h: one that others may
 * write to without the sticky bit is refused). 0 or -1 with *err. */
int runner_init(struct gflowd *d, char **err);
/* Starts the shim for j, which must already be R and committed. On failure j ends as F
 * (LaunchFailed), except a failure for lack of a resource (EMFILE, ENFILE, EAGAIN,
 * ENOMEM): then j is queued again and this returns false, so that the caller holds
 * further launches back for a while. */
bool runner_launch(struct gflowd *d, struct job *j);
/* Puts j, committed as R but not launched, back in the queue: launches are held back. */
void runner_postpone(struct gflowd *d, struct job *j);
/* After a restart: re-adopts or finalizes every R job. */
void runner_recover(struct gflowd *d);
/* Removes files left behind by jobs that are no longer running. Only after the
 * recovery is committed: those files are what tells a job ran. */
void runner_sweep(const struct gflowd *d);
/* Ends a running job: records why (committed before the shim is signalled), then
 * SIGTERM to the shim, which escalates to SIGKILL after the kill grace. */
void runner_request_end(struct gflowd *d, struct job *j, enum job_end_request why);
/* After a lost transaction (rolled back in the store): reloads the job table from the
 * store (jobs_reload), keeping the watches of the shims that still run, and looks again
 * after a second at what the lost transaction had recorded: jobs whose end it recorded
 * are finalized from their exit or lock files (adopt, as after a restart), a time limit
 * whose request to end the job it recorded fires again. If the store cannot be read,
 * the table stays as it was and the loop fails (loop_fail): -1; else 0. */
int runner_reload(struct gflowd *d);
/* Forgets the running jobs' watches at daemon exit (the jobs keep running). */
void runner_shutdown(struct gflowd *d);
/* Preempts launched job j for job `by` (scheduler.preempt): records it (end_request
 * PREEMPT, preempted_by; committed first), then has the shim pass SIGTERM on to the
 * job's processes and SIGKILL after `grace` seconds. Once the job has ended it is
 * queued again with the same id (requeue_count + 1), its GPUs released. A cancel meanwhile
 * wins (the job ends CA). After a restart a job still being preempted gets SIGTERM
 * through its shim (which escalates after daemon.kill_grace_secs). */
void runner_preempt(struct gflowd *d, struct job *j, int64_t by, double grace);
/* Sends sig to the job's shim (through its pidfd, so never to a recycled pid). */
void runner_signal(struct job *j, int sig);

/* From the job supervisor (launch.h): job id is over, its record in its lock file; the
 * supervisor s is gone (its jobs are lost, as when a shim dies; status: its wait status,
 * when have_status). */
struct supervisor;
void runner_supervised_done(struct gflowd *d, int64_t id);
void runner_supervisor_gone(struct gflowd *d, struct supervisor *s, int status, bool have_status);
/* runner_signal in the form jobs_set_signal_cb registers. */
void runner_signal_cb(void *arg, struct job *j, int sig);
/* Path of the job's log (caller frees). */
char *runner_log_path(const struct gflowd *d, int64_t job_id);

#endif
