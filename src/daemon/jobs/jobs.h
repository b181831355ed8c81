/* jobs: the daemon's table of active jobs (PD, H, R) and every change made to a job.
 * Changes are written to the store inside the loop iteration's transaction; jobs_commit
 * commits them and then carries out what had to wait for the commit (signals to shims,
 * removal of finished jobs' files). Ended jobs live only in the store.
 *
 * Everything is in a struct jobs that works on a struct store alone: no loop, no GPUs,
 * no processes. The scheduling pass (jobs_sched.c) gets the machine's state as a
 * parameter, and the one thing that reaches outside (signalling a running job's shim
 * once a change is committed) goes through a callback the daemon registers
 * (jobs_set_signal_cb: the runner). So the dependency cascade (jobs_deps.c) and retries
 * are unit-tested on a store in a temp directory (tests/unit/test_jobs.c).
 *
 * The jobs room (src/daemon/jobs/, docs/design.md §3): this table, its scheduling glue
 * (jobs_sched.c), dependencies (jobs_deps.c), fair-share accounts (jobs_fairshare.c),
 * the counters of GET /metrics (jobs_counters.h), edits (jobedit.c) and the priority
 * breakdown (priority.c). It may call policy/ and store/ (and core, common, the
 * foundations at the top of src/daemon); the rooms above learn of its changes as
 * observers (jobs_observe), never by its calling them. */
#ifndef GFLOWD_JOBS_H
#define GFLOWD_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpualloc.h"
#include "job.h"
#include "scheduler.h"
#include "timeplan.h"

struct store;
struct jobs;

/* A submission or bulk change of this many jobs is a large transaction for the store. */
#define JOBS_LARGE 1000

struct jobs *jobs_new(struct store *store);
void jobs_free(struct jobs *t); /* the jobs too */
/* Loads the active jobs and groups from the store. 0, or -1 with *err. */
int jobs_load(struct jobs *t, char **err);
/* After a transaction was lost (store_transaction_lost, then store_rollback): forgets
 * every job in memory, with the changes and actions that waited for the commit, and
 * loads the table again from what the store has, as at start-up. Every job pointer
 * into the table is stale afterwards, and the runtime of each job (the runner's) is the
 * caller's to have taken off first. 0, or -1 with *err (t is then unchanged). */
int jobs_reload(struct jobs *t, char **err);

/* Called after a commit for each signal that waited for it (jobs_after_commit_signal)
 * whose job is still running. The daemon registers the runner's here; no callback, no
 * signals. */
typedef void (*jobs_signal_cb)(void *arg, struct job *j, int sig);
void jobs_set_signal_cb(struct jobs *t, jobs_signal_cb cb, void *arg);

/* The observers of job changes: how the rooms above the job table (notifications,
 * GET /v1/events) learn of them without the table calling them by name. Each is called,
 * in the order they were added, for each job event (job.h: submitted, started,
 * completed, ...) right after the change is written, inside the same transaction, so
 * that what it records (ops/notify.c's outbox rows) commits or is lost with the change;
 * and for the changes that are no job_event, with JOB_EVENT_COUNT (a job put back in the
 * queue by a preemption or a launch put off). At most JOBS_MAX_OBSERVERS. */
#define JOBS_MAX_OBSERVERS 4
typedef void (*jobs_event_cb)(void *arg, const struct job *j, enum job_event event);
void jobs_observe(struct jobs *t, jobs_event_cb cb, void *arg);
/* Removes the observer added with the same cb and arg. */
void jobs_unobserve(struct jobs *t, jobs_event_cb cb, void *arg);

struct job *jobs_get(const struct jobs *t, int64_t id);     /* active jobs only; NULL otherwise */
struct job **jobs_active(const struct jobs *t, size_t *n);  /* ascending by id */
struct job **jobs_running(const struct jobs *t, size_t *n); /* the R jobs, any order */
struct store *jobs_store(const struct jobs *t);
/* What the jobs did since the daemon started (GET /metrics). */
struct metrics_counters;
const struct metrics_counters *jobs_counters(const struct jobs *t);
/* The quota records (policy/quota_state.h), kept current by every job change. */
struct quotas *jobs_quotas(const struct jobs *t);
/* Many jobs changed by one request (bulk cancel, hold, release): between the two calls
 * ended jobs are dropped from the table and the queue is reordered once, at the end,
 * rather than per job. Only job changes (jobs_set_state, jobs_get) may come between;
 * no scheduling pass and no jobs_active. n: how many jobs it names (from JOBS_LARGE on,
 * the store is told to expect a large transaction, store_expect_large). */
void jobs_bulk_begin(struct jobs *t, size_t n);
void jobs_bulk_end(struct jobs *t);
/* How many active jobs (PD, H, R) user uid has. */
size_t jobs_active_of(const struct jobs *t, uint32_t uid);
/* The id the next submitted job gets. */
int64_t jobs_next_id(const struct jobs *t);

/* Assigns j an id, writes it to the store and adds it to the table (taking ownership;
 * the payload is dropped from memory once written). 0 or -1. */
int jobs_submit(struct jobs *t, struct job *j);
/* Submits jobs[0..n) in order, as jobs_submit; when they form a group (group_id set to
 * the id the first one gets), the others store only the parts of their payload that
 * differ from the first one's (an array's environment is stored once). 0, or -1 when
 * jobs[*done] could not be stored (those before it are submitted and owned by t; the
 * rest are still the caller's). */
int jobs_submit_all(struct jobs *t, struct job **jobs, size_t n, size_t *done);
/* Writes j's mutable fields to the store. 0 or -1. */
int jobs_save(struct jobs *t, struct job *j);
/* The same, for a change its owner is to hear of (a "job_updated" event, the
 * notifications): the daemon noted something on a running job (its stray process). */
int jobs_save_updated(struct jobs *t, struct job *j);
/* Moves j to state `to` (which must be allowed) with the reason (detail copied, may be
 * NULL; reason_job: the job a DependencyFailed names). A terminal state records
 * end_time and removes j from the table; j stays readable until jobs_collect. Jobs
 * depending on j are updated, and those that can then never run are cancelled with it
 * (DependencyFailed:<id>), transitively; a failure with retries left is submitted again
 * as a new attempt first (its dependents move onto it). 0, or -1 if the transition is
 * refused or cannot be stored. */
int jobs_set_state(struct jobs *t, struct job *j, enum job_state to, enum job_reason reason,
                   int64_t reason_job, const char *detail);
/* Whether j (just failed) is retried as a new attempt (--max-retries). */
bool jobs_retryable(const struct job *j);
/* gjob update of j (PD or H) to the values of n (built and checked like a submission,
 * with its script and environment; its dependencies' statuses set by jobs_check_deps):
 * the queue order follows a new priority, and dependencies are rewired when
 * deps_changed; what_changed: the command/script/workdir/env are rewritten too. n's
 * strings and dependencies may be taken over; the caller frees n. 0 or -1. */
int jobs_update(struct jobs *t, struct job *j, struct job *n, bool deps_changed, bool what_changed);

/* The daemon's record of submission group id (job_group in job.h): NULL if there is
 * none and !create; with create, a new record (limit 0) is made. Jobs of the group
 * point at it while active (jobs_submit and jobs_load attach them). */
struct job_group *jobs_group(struct jobs *t, int64_t id, bool create);
/* Sets how many jobs of g may run at once (0 = no limit), in the store too. 0 or -1. */
int jobs_group_set_limit(struct jobs *t, struct job_group *g, int64_t max_concurrent);

/* Sets how many jobs of group gid may run at once (0 = no limit). gid 0: j, an active
 * job submitted alone, gets a group of its own (its id is j's). 0, or -1 with *err. */
int jobs_limit_group(struct jobs *t, struct job *j, int64_t gid, int64_t limit, char **err);

/* Checks j's dependencies before it is submitted (as job own_id): each must be an
 * existing job (so jobs of one request cannot depend on each other), and no cycle may
 * form. Sets each dependency's status from its job's state. 0, or -1 with *err (a 400
 * message naming the unknown ids). jobs_submit then registers j with the jobs it waits
 * for and cancels it at once if a dependency can never be met (auto_cancel). */
int jobs_check_deps(struct jobs *t, struct job *j, int64_t own_id, char **err);

/* A job that would be cancelled along with another (auto-cancel), and the job it
 * depends on that would take it along. */
struct jobs_cascade {
    int64_t id;
    int64_t because;
};
/* The active jobs that would be cancelled, transitively, if x were cancelled (those
 * with auto_cancel whose dependencies could then never be met), in the order the
 * cancellation reaches them. *out is malloc'd. Changes nothing. */
size_t jobs_cascade_preview(const struct jobs *t, const struct job *x, struct jobs_cascade **out);

/* What the scheduling pass needs to know about the machine. */
struct jobs_machine {
    const struct gpu_set *gpus; /* NULL: none */
    uint64_t allowed;           /* GPUs that may be used (scheduler_allowed_mask) */
    uint64_t unmanaged;         /* GPUs with processes outside gflow */
    int64_t memory_total_mb;    /* 0: unknown */
    int64_t max_running_jobs;   /* 0: no limit */
    enum gpualloc_strategy strategy;
    const int64_t *outside_mib; /* per GPU, memory not for shared jobs; NULL: none */
    uint64_t mig_unmanaged;     /* MIG instances (positions in gpus->migs) with outside processes */
    /* Backfill (scheduler.*; see struct scheduler_policy): off = greedy. */
    bool backfill;
    int backfill_depth;
    double default_time_limit; /* seconds; 0: the scheduler's default */
    /* daemon.default_time_plan: a job without --time is planned to run this long (the
     * percentile of the table's run history, or default_time_limit until it has one). */
    struct time_plan untimed_plan;
    bool untimed_outside; /* scheduler.backfill_untimed = "outside" */
    /* GPUs (NVML indices) no job may take in this pass: those kept for the job that
     * preempted others while they stop (run/preempt_run.h); 0: none. */
    uint64_t held_gpus;
    /* The queue's order (scheduler.priority_weight_*; fairshare.h): when the weights
     * reorder, the pass walks the queue sorted by effective priority. */
    struct priority_weights priority;
    /* GPU reservations not cancelled and not over, sorted by start (gctl reserve;
     * policy/reservation_table.h). */
    const struct scheduler_reservation *reservations;
    size_t n_reservations;
    uint64_t closed;   /* GPUs that take no new job (scheduler_input.closed) */
    uint64_t no_share; /* GPUs that take no shared job (scheduler_input.no_share) */
    /* Whether a job the pass chose may start now (NULL: all may): one that may not is
     * set aside, waiting with UserLookup, until jobs_users_answered. */
    bool (*may_start)(void *arg, const struct job *j);
    void *may_start_arg;
};

/* The queued jobs that may start, in scheduling order (after a pass, with their wait
 * reasons); those waiting for their begin time or dependencies are not among them. */
struct job *const *jobs_queued(const struct jobs *t, size_t *n);

/* Something changed that may let a queued job start. */
void jobs_mark_dirty(struct jobs *t);
/* j, about to become queued again (its launch found its user not known yet), waits for
 * its user's lookup (UserLookup) instead of in the queue. */
void jobs_user_wait(struct jobs *t, struct job *j);
/* User lookups answered: the jobs waiting for them (UserLookup) go back in the queue (the
 * pass sets aside again those whose user is still not known). */
void jobs_users_answered(struct jobs *t);
/* Runs the scheduling pass if anything changed since the last one; moves the jobs that
 * start to R (with their GPUs; not launched yet: the caller launches them once the
 * change is committed) and returns them in *started (the caller frees the array).
 * *next_pass: -1 when no pass ran, else when a pass must run again although nothing
 * changes (0: never): the earliest --begin time a job waits for, or when backfill's
 * plan changes (scheduler_input.next_pass). */
size_t jobs_schedule(struct jobs *t, const struct jobs_machine *m, double now,
                     struct job ***started, double *next_pass);

/* The slurm backend: a queued job is not set aside for its begin time (sbatch --begin
 * waits), nor for dependencies whose jobs are all in Slurm already (R with a Slurm id
 * and no retry left: sbatch --dependency waits). Set before jobs_load. */
void jobs_set_hand_over_early(struct jobs *t, bool on);
/* x (R) has just got its Slurm id: its dependents may now be handed over. */
void jobs_deps_handed_over(struct jobs *t, struct job *x);

/* The pass of the slurm backend (src/daemon/slurm.c): every queued job that may start
 * as far as gflow knows (dependencies met, begin time come, its group's throttle not
 * reached) moves to R, meaning handed to the other scheduler, and is returned like
 * jobs_schedule's started jobs (same *next_pass). */
size_t jobs_hand_over(struct jobs *t, double now, struct job ***started, double *next_pass);

/* Fair-share (jobs_fairshare.c): the accounts, charged as running jobs end. */
struct fairshare *jobs_fairshare(struct jobs *t);
/* Sets the usage half-life (seconds) and the configured shares ("alice=2,bob=1"; NULL or
 * "": none). 0, or -1 with *err (nothing changed). */
int jobs_fairshare_configure(struct jobs *t, double half_life, const char *user_shares,
                             const char *project_shares, char **err);
/* Updates the accounts' factors at now (with the running jobs' usage so far) and sets
 * the effective_priority of every queued and held job. O(active jobs x users). */
void jobs_priority_refresh(struct jobs *t, const struct priority_weights *w, double now);

/* Actions that must wait until the current transaction is committed. */
void jobs_after_commit_unlink(struct jobs *t, char *path); /* takes ownership of path */
void jobs_after_commit_signal(struct jobs *t, int64_t job_id, int sig);
void jobs_after_commit_call(struct jobs *t, void (*fn)(void *arg, int64_t job_id), void *arg,
                            int64_t job_id);
/* Commits the transaction (if any) and then runs the waiting actions. 0, or -1 if the
 * commit failed (it is retried on the next call; nothing waiting is done). */
int jobs_commit(struct jobs *t);
/* Frees jobs that ended during this iteration. */
void jobs_collect(struct jobs *t);

#endif
