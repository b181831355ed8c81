/* jobs: the daemon's table of active jobs (PD, H, R) and every change made to a job.
 * Changes are written to the store inside the loop iteration's transaction; jobs_commit
 * commits them and then carries out what had to wait for the commit (signals to shims,
 * removal of finished jobs' files). Ended jobs live only in the store. */
#ifndef GFLOWD_JOBS_H
#define GFLOWD_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

/* Loads the active jobs from the store. 0, or -1 with *err. */
int jobs_load(char **err);
void jobs_free_all(void);

struct job *jobs_get(int64_t id); /* active jobs only; NULL otherwise */
struct job **jobs_active(size_t *n);

/* Assigns j an id, writes it to the store and adds it to the table (taking ownership;
 * the payload is dropped from memory once written). 0 or -1. */
int jobs_submit(struct job *j);
/* Writes j's mutable fields to the store. 0 or -1. */
int jobs_save(struct job *j);
/* Moves j to state `to` (which must be allowed) with reason (copied, may be NULL).
 * A terminal state records end_time and removes j from the table; j stays readable
 * until the end of the loop iteration. Jobs depending on j are updated, and those
 * that can then never run are cancelled with it (DependencyFailed:<id>), transitively.
 * 0, or -1 if the transition is refused. */
int jobs_set_state(struct job *j, enum job_state to, const char *reason);
/* Whether j (just failed) is retried as a new attempt (--max-retries). */
bool jobs_retryable(const struct job *j);
/* gjob update of j (PD or H) to the values of n (built and checked like a submission,
 * with its script and environment; its dependencies' statuses set by jobs_check_deps):
 * the queue order follows a new priority, and dependencies are rewired when
 * deps_changed; what_changed: the command/script/workdir/env are rewritten too. n's
 * strings and dependencies may be taken over; the caller frees n. 0 or -1. */
int jobs_update(struct job *j, struct job *n, bool deps_changed, bool what_changed);

/* The daemon's record of submission group id (job_group in job.h): NULL if there is
 * none and !create; with create, a new record (limit 0) is made. Jobs of the group
 * point at it while active (jobs_submit and jobs_load attach them). */
struct job_group *jobs_group(int64_t id, bool create);
/* Sets how many jobs of g may run at once (0 = no limit), in the store too. 0 or -1. */
int jobs_group_set_limit(struct job_group *g, int64_t max_concurrent);

/* The id the next submitted job gets. */
int64_t jobs_next_id(void);
/* Checks j's dependencies before it is submitted (as job own_id): each must be an
 * existing job (so jobs of one request cannot depend on each other), and no cycle may
 * form. Sets each dependency's status from its job's state. 0, or -1 with *err (a 400
 * message naming the unknown ids). jobs_submit then registers j with the jobs it waits
 * for and cancels it at once if a dependency can never be met (auto_cancel). */
int jobs_check_deps(struct job *j, int64_t own_id, char **err);

/* A job that would be cancelled along with another (auto-cancel), and the job it
 * depends on that would take it along. */
struct jobs_cascade {
    int64_t id;
    int64_t because;
};
/* The active jobs that would be cancelled, transitively, if x were cancelled (those
 * with auto_cancel whose dependencies could then never be met), in the order the
 * cancellation reaches them. *out is malloc'd. Changes nothing. */
size_t jobs_cascade_preview(const struct job *x, struct jobs_cascade **out);

/* Something changed that may let a queued job start. */
void jobs_mark_dirty(void);
/* Runs the scheduling pass if anything changed; returns the jobs it moved to R
 * (not yet launched) in *started, which the caller frees. */
size_t jobs_schedule(struct job ***started);

/* Actions that must wait until the current transaction is committed. */
void jobs_after_commit_unlink(char *path); /* takes ownership of path */
void jobs_after_commit_signal(int64_t job_id, int sig);
/* Commits the transaction (if any) and then runs the waiting actions. 0, or -1 if the
 * commit failed (it is retried on the next call; nothing waiting is done). */
int jobs_commit(void);
/* Frees jobs that ended during this iteration. */
void jobs_collect(void);

#endif
