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
size_t jobs_running_count(void);

/* Assigns j an id, writes it to the store and adds it to the table (taking ownership;
 * the payload is dropped from memory once written). 0 or -1. */
int jobs_submit(struct job *j);
/* Writes j's mutable fields to the store. 0 or -1. */
int jobs_save(struct job *j);
/* Moves j to state `to` (which must be allowed) with reason (copied, may be NULL).
 * A terminal state records end_time and removes j from the table; j stays readable
 * until the end of the loop iteration. 0, or -1 if the transition is refused. */
int jobs_set_state(struct job *j, enum job_state to, const char *reason);

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
