/* slurm: the slurm backend ([backend] kind = "slurm", docs/slurm.md). The daemon runs no
 * job itself: each job that may start (jobs_hand_over) is submitted with sbatch from a
 * child process, its state is read back by a poll of `scontrol show job` every
 * backend.poll_secs, and a cancel is scancel. Nothing here waits on a command: each runs
 * as a child the loop watches.
 *
 * The backend/slurm room (docs/design.md §3): it may call run/, jobs/ and store/; only
 * the http room and the assembly call it. */
#ifndef GFLOWD_SLURM_H
#define GFLOWD_SLURM_H

#include <stdbool.h>

#include <jansson.h>

#include "job.h"

struct gflowd;
struct slurm_wait;

/* Starts the poll (after the jobs are loaded). The first poll also reconciles: an R job
 * Slurm does not know (gflowd stopped before its sbatch ran or answered) is submitted
 * then, one it knows by its comment tag is not submitted again. */
void slurm_start(struct gflowd *d);
void slurm_stop(struct gflowd *d);
/* Submits j (committed as R by jobs_hand_over) with sbatch. */
void slurm_launch(struct gflowd *d, struct job *j);
/* j is to end (gcancel, gjob update of a limit...): scancel (sig SIGTERM or SIGKILL), or
 * scancel --signal for another signal. */
void slurm_signal(struct gflowd *d, struct job *j, int sig);
/* gjob hold / release of j, an R job in Slurm that Slurm has not started
 * (job_backend_pending): scontrol uhold|release <its Slurm id>, run in the background
 * (the next poll shows Slurm's reason). NULL, or why it cannot be done (one line, a
 * 409; caller frees). */
char *slurm_hold(struct gflowd *d, struct job *j, bool hold, struct slurm_wait *w);
/* gjob update of j, an R job in Slurm: only its name, time limit and priority (nice) can
 * change there (scontrol update JobId=<id> JobName= TimeLimit= Nice=); gflow's record
 * follows once scontrol has succeeded. NULL, or why not (one line, a 409). */
char *slurm_update(struct gflowd *d, struct job *j, json_t *over, struct slurm_wait *w);
/* gcancel of j, an R job in Slurm: scancel, w (may be NULL) answered when it has
 * returned. NULL, or why scancel cannot be run (then w is not used). */
char *slurm_cancel(struct gflowd *d, struct job *j, struct slurm_wait *w);

/* Slurm counts time limits in minutes: on the slurm backend each of jobs[0..n) whose
 * limit is not whole minutes gets the next whole minute (what Slurm enforces, and what
 * gflow records). A JSON array of the warnings to pass on (one per limit rounded), or NULL
 * (none, or another backend). */
json_t *slurm_round_limits(const struct gflowd *d, struct job **jobs, size_t n);
/* secs rounded up to whole minutes (Slurm's unit). */
int64_t slurm_round_limit(int64_t secs);

/* A reply that waits for Slurm commands (scontrol hold/release/update, scancel) to have
 * returned: the route makes one (slurm_wait_new; NULL: no pipe, then nothing waits),
 * passes it to the backend's calls, each for the result at slurm_wait_at's index, sets
 * the reply's body with slurm_wait_set and, when slurm_wait_pending, defers its reply on
 * a worker thread (reply_defer(rep, slurm_wait_work, w, slurm_wait_release)) that sleeps
 * on a pipe the last command's end writes to: the event loop goes on meanwhile. A command
 * that fails turns its result into a 409 with its own error text; a cancel's result gets
 * "slurm": what Slurm did. Else the route answers at once and slurm_wait_release(w). */
struct slurm_wait *slurm_wait_new(void);
void slurm_wait_at(struct slurm_wait *w, size_t index);
/* body (stolen) with status; results: body's array of per-job results (NULL: body is
 * the one job's result). */
void slurm_wait_set(struct slurm_wait *w, json_t *body, unsigned status, json_t *results);
bool slurm_wait_pending(const struct slurm_wait *w);
json_t *slurm_wait_work(void *arg, unsigned *status); /* a reply_work_fn */
void slurm_wait_release(void *arg);                   /* its free_arg */

/* After a lost transaction: the jobs are read back from the store (their Slurm ids with
 * them), and the next poll reconciles them as after a restart. If the store cannot be
 * read, the loop fails (loop_fail): -1; else 0. */
int slurm_reload(struct gflowd *d);
/* The partition's nodes as last read (slurm_nodes.h); NULL when not on Slurm. */
struct slurm_nodes *slurm_backend_nodes(const struct gflowd *d);

/* The same as a jobs_signal_cb (arg: the daemon). */
void slurm_signal_cb(void *arg, struct job *j, int sig);

#endif
