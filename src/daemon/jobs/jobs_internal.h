/* jobs_internal: what jobs.h's files share (jobs.c: the table, job changes, loading,
 * the commit; jobs_sched.c: where a queued job waits, the scheduling pass; jobs_deps.c:
 * the dependencies between active jobs). Not for the rest of the daemon: that is jobs.h. */
#ifndef GFLOWD_JOBS_INTERNAL_H
#define GFLOWD_JOBS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fairshare.h"
#include "job.h"
#include "jobs.h"
#include "jobs_counters.h"
#include "scheduler.h"
#include "timeplan.h"

struct action; /* jobs.c: what waits for the commit */

struct jobs {
    struct store *store;
    struct job **table; /* the active jobs, ascending by id */
    size_t table_len, table_cap;
    struct job **run_list; /* R jobs, any order */
    size_t running, run_cap;
    struct scheduler_queue queue;      /* PD jobs that may start, in scheduling order */
    struct scheduler_begin_heap begin; /* PD jobs whose begin_time is to come */
    int64_t next_id;
    bool dirty;         /* something changed that may let a queued job start */
    size_t n_user_wait; /* queued jobs set aside for their user's lookup (user_wait) */
    bool planned;       /* the last pass ran with backfill (queued jobs have expected starts) */
    struct metrics_counters counters; /* GET /metrics */

    struct job **ended; /* left the table this iteration; freed by jobs_collect */
    size_t ended_len, ended_cap;
    struct action *actions; /* waiting for the commit */
    size_t actions_len, actions_cap;
    struct job **cascade; /* ended jobs whose dependents are still to be updated */
    size_t cascade_len, cascade_cap;
    bool cascading;

    /* Submission groups with a record in the daemon, ascending by id (groups are made
     * with growing ids, so a new one is appended). Kept for the daemon's life: small,
     * and a job copy may still point at its group. */
    struct job_group **groups;
    size_t groups_len, groups_cap;

    /* How many active jobs each user has (limits.max_active_jobs_per_user); a lab has
     * few users, so a short list searched in order. */
    struct user_count {
        uint32_t uid;
        size_t n;
    } * users;
    size_t users_len, users_cap;

    struct quotas *quotas; /* per-user and per-project limits and use (policy/quota_state.h) */

    /* The slurm backend (jobs_set_hand_over_early): a begin time and dependencies on
     * jobs already in Slurm are Slurm's to wait for. */
    bool hand_over_early;
    jobs_signal_cb signal_cb;
    void *signal_arg;
    struct jobs_observer {
        jobs_event_cb cb;
        void *arg;
    } observers[JOBS_MAX_OBSERVERS];
    size_t n_observers;

    /* Between jobs_bulk_begin and jobs_bulk_end: ended jobs stay in the table (jobs_get
     * skips them) and the queue is not kept in order, so that changing many jobs costs no
     * memmove per job; jobs_bulk_end compacts the table and rebuilds the queue once. */
    bool bulk;
    bool table_stale, queue_stale;
    /* The jobs whose state columns the bulk change changed, in order: written by
     * jobs_bulk_end, a run of consecutive ids with the same values in one statement. */
    struct job **bulk_saves;
    size_t bulk_saves_len, bulk_saves_cap;

    /* Fair-share accounts (jobs_fairshare.c), charged when a running job ends. */
    struct fairshare fs;

    /* The run times of the last jobs that ended (daemon.default_time_plan's percentile),
     * fed as running jobs end, first read from the store at load. */
    struct run_history runs;
};

/* jobs_sched.c. j has become queued (or changed while queued): into the queue, or
 * aside if it cannot start for a reason no GPU or slot change alters. */
void jobs_sched_add(struct jobs *t, struct job *j);
/* j, queued, leaves wherever jobs_sched_add put it. */
void jobs_sched_remove(struct jobs *t, struct job *j);
/* Makes the queue hold the queued jobs that may start, in order, sorting once (jobs_load,
 * jobs_bulk_end). */
void jobs_queue_rebuild(struct jobs *t);

/* jobs_deps.c. Recomputes j's deps_blocked after a change of its dependencies' statuses
 * (and cancels or marks j when they can no longer be met). */
void jobs_deps_update(struct jobs *t, struct job *j);
/* x has ended: updates its dependents, and theirs if they are cancelled in turn. */
void jobs_deps_job_ended(struct jobs *t, struct job *x);

/* jobs_fairshare.c. Loads the stored accounts into t->fs (jobs_load). 0, or -1 with *err. */
int jobs_fairshare_load(struct jobs *t, char **err);
/* j, running, has ended (end_time set): charges its run to its user and project, in the
 * store too. 0 or -1. */
int jobs_fairshare_charge(struct jobs *t, struct job *j);

#endif
