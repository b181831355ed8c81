/* jobs_sched: where a queued job waits, and the scheduling pass (see jobs.h).
 *
 * The queued jobs are kept in scheduling order (a scheduler_queue, updated whenever a
 * job enters or leaves PD), but only those that may start now are in that queue: a job
 * waiting for its begin time (--begin) is in a min-heap by begin time instead, and
 * enters the queue in the first pass at or after that time (the daemon's begin timer
 * makes one run then); a job waiting for its dependencies (deps_blocked) is in neither
 * until they are met. Their wait reason (BeginTime, Dependency) is set when they are
 * put aside. So 100,000 jobs submitted with a future --begin cost a pass nothing. */
#include "jobs_internal.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "policy/quota_state.h"
#include "util.h"

/* ---- where a queued job waits ---- */

/* Puts queued j aside when it cannot start for a reason no GPU or slot change alters:
 * blocked dependencies (no structure: a job's end updates its dependents) or a begin
 * time to come (the heap). True if it did. */
static bool sched_set_aside(struct jobs *t, struct job *j, double now)
{
    if (j->sched.user_wait) {
        j->wait_reason = SCHEDULER_REASON_USER_LOOKUP;
        return true;
    }
    if (j->sched.deps_blocked) {
        j->wait_reason = SCHEDULER_REASON_DEPENDENCY;
        j->expected_start = 0; /* unknown until they are met */
        return true;
    }
    if (j->begin_time > now && !t->hand_over_early) {
        j->wait_reason = SCHEDULER_REASON_BEGIN_TIME;
        j->expected_start = j->begin_time; /* not before it, under any policy */
        scheduler_begin_heap_push(&t->begin, j);
        return true;
    }
    return false;
}

/* j has become queued (or changed while queued, out of everything below): into the
 * queue, or aside (sched_set_aside). */
void jobs_sched_add(struct jobs *t, struct job *j)
{
    if (sched_set_aside(t, j, j->begin_time > 0 ? now_wall() : 0))
        return;
    if (t->bulk)
        t->queue_stale = true; /* rebuilt by jobs_bulk_end */
    else
        scheduler_queue_insert(&t->queue, j);
}

/* j, queued, leaves wherever jobs_sched_add put it. */
void jobs_sched_remove(struct jobs *t, struct job *j)
{
    if (j->sched.user_wait) { /* in neither */
        j->sched.user_wait = false;
        t->n_user_wait--;
        return;
    }
    if (scheduler_begin_heap_remove(&t->begin, j) == 0) {
        j->expected_start = 0;
        return;
    }
    if (t->bulk)
        t->queue_stale = true;
    else
        scheduler_queue_remove(&t->queue, j); /* -1 (nothing) for a job set aside */
}

/* Makes the queue hold the queued jobs that may start, in order, sorting once; those
 * waiting for their begin time or dependencies go aside (the heap is kept current
 * otherwise, even in bulk changes, so only jobs not in it are looked at). */
void jobs_queue_rebuild(struct jobs *t)
{
    struct job **cand = xmalloc((t->table_len ? t->table_len : 1) * sizeof(*cand));
    size_t n = 0;
    double now = now_wall();
    for (size_t i = 0; i < t->table_len; i++) {
        struct job *j = t->table[i];
        if (j->state == JOB_QUEUED && !j->sched.begin_heap_pos && !sched_set_aside(t, j, now))
            cand[n++] = j;
    }
    scheduler_queue_rebuild(&t->queue, cand, n);
    free(cand);
}

/* ---- the scheduling pass ---- */

void jobs_mark_dirty(struct jobs *t)
{
    t->dirty = true;
}

void jobs_user_wait(struct jobs *t, struct job *j)
{
    if (j->sched.user_wait)
        return;
    j->sched.user_wait = true;
    j->wait_reason = SCHEDULER_REASON_USER_LOOKUP;
    t->n_user_wait++;
}

void jobs_users_answered(struct jobs *t)
{
    for (size_t i = 0; t->n_user_wait && i < t->table_len; i++) {
        struct job *j = t->table[i];
        if (j->state == JOB_QUEUED && j->sched.user_wait) {
            jobs_sched_remove(t, j); /* clears user_wait */
            jobs_sched_add(t, j);
        }
    }
    t->dirty = true;
}

/* The jobs the pass chose whose user is not known yet (m->may_start) wait aside with
 * UserLookup: out of start[0..n) (the queue lost them all already). The pass runs again
 * (the GPUs they would have had may go to others). The number left. */
static size_t hold_unknown_users(struct jobs *t, const struct jobs_machine *m, struct job **start,
                                 size_t n)
{
    if (!m->may_start)
        return n;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (m->may_start(m->may_start_arg, start[i])) {
            start[kept++] = start[i];
        } else {
            jobs_user_wait(t, start[i]);
            t->dirty = true;
        }
    }
    return kept;
}

/* The jobs whose begin time has come go from the heap into the queue: one by one if
 * few, else appended and sorted once (inserting many in the middle of a long queue
 * would move it once per job). */
static void begin_due(struct jobs *t, double now)
{
    size_t n = 0, cap = 0;
    struct job **due = NULL;
    struct job *j;
    while ((j = scheduler_begin_heap_pop_due(&t->begin, now))) {
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            due = xrealloc(due, cap * sizeof(*due));
        }
        due[n++] = j;
    }
    if (n <= 64) {
        for (size_t i = 0; i < n; i++)
            scheduler_queue_insert(&t->queue, due[i]);
    } else {
        size_t all = t->queue.len + n;
        struct job **list = xmalloc(all * sizeof(*list));
        memcpy(list, t->queue.jobs, t->queue.len * sizeof(*list));
        memcpy(list + t->queue.len, due, n * sizeof(*list));
        scheduler_queue_rebuild(&t->queue, list, all);
        free(list);
    }
    free(due);
}

struct job *const *jobs_queued(const struct jobs *t, size_t *n)
{
    *n = t->queue.len;
    return t->queue.jobs;
}

/* The jobs the pass took out of the queue, start[0..n), become R as of now (the runner
 * launches them, or the backend hands them over); *started gets start, or NULL (freed)
 * when there are none. Returns n. */
static size_t mark_started(struct jobs *t, struct job **start, size_t n, double now,
                           struct job ***started)
{
    for (size_t i = 0; i < n; i++) {
        struct job *j = start[i];
        j->start_time = now;
        j->shim_pid = 0;
        j->shim_start = 0;
        jobs_set_state(t, j, JOB_RUNNING, JOB_REASON_NONE, 0, NULL);
    }
    if (n == 0) {
        free(start);
        return 0;
    }
    *started = start;
    return n;
}

/* Orders by scheduler_order (the queue's), for scheduler_queue_remove_many. */
static int queue_order_cmp(const void *a, const void *b)
{
    return scheduler_order(*(struct job *const *)a, *(struct job *const *)b);
}

size_t jobs_schedule(struct jobs *t, const struct jobs_machine *m, double now,
                     struct job ***started, double *next_pass)
{
    *started = NULL;
    *next_pass = -1;
    if (quotas_tick(t->quotas, now)) /* a new period: GPU-hours count from 0 */
        t->dirty = true;
    if (!t->dirty)
        return 0;
    t->dirty = false;
    begin_due(t, now);
    /* The jobs put aside for their begin time wait for the earliest of theirs; the pass
     * adds any job in the queue whose begin time is to come (the clock went back). */
    double heap_next = scheduler_begin_heap_next(&t->begin);
    *next_pass = heap_next;
    if (t->queue.len == 0)
        return 0;
    if (t->planned && !m->backfill) /* backfill turned off: its plan is void */
        for (size_t i = 0; i < t->queue.len; i++)
            t->queue.jobs[i]->expected_start = 0;
    t->planned = m->backfill;
    struct job **start = xmalloc(t->queue.len * sizeof(*start));
    struct scheduler_policy policy = {
        .max_running_jobs = m->max_running_jobs,
        .allowed_gpus = m->allowed,
        .gpu_strategy = m->strategy,
        .random_seed = (uint64_t)(now * 1e6),
        .backfill = m->backfill,
        .backfill_depth = m->backfill_depth,
        .default_time_limit = m->default_time_limit,
        .untimed_plan = time_plan_value(&m->untimed_plan, &t->runs,
                                        m->default_time_limit > 0 ? m->default_time_limit
                                                                  : SCHEDULER_DEFAULT_TIME_LIMIT),
        .untimed_outside = m->untimed_outside,
        .priority = m->priority,
    };
    /* Held GPUs: a job that holds them, as the pass sees it, expected to end soon. */
    struct job holder;
    struct job **running = t->run_list;
    size_t n_running = t->running;
    if (m->held_gpus) {
        job_init(&holder);
        holder.state = JOB_RUNNING;
        holder.gpu_mask = m->held_gpus;
        holder.gpus = __builtin_popcountll(m->held_gpus);
        holder.start_time = now;
        holder.time_limit = 1;
        running = xmalloc((n_running + 1) * sizeof(*running));
        memcpy(running, t->run_list, n_running * sizeof(*running));
        running[n_running++] = &holder;
    }
    /* Fair-share or age weights: the pass walks the queue in effective-priority order,
     * sorted here (O(n log n)); else the queue's own order, with no sort. */
    struct job **ordered = NULL;
    if (priority_weights_reorder(&m->priority)) {
        ordered = xmalloc(t->queue.len * sizeof(*ordered));
        fairshare_order(&t->fs, &m->priority, t->queue.jobs, t->queue.len, t->run_list, t->running,
                        now, ordered);
    }
    struct scheduler_input in = {
        .queued = ordered ? ordered : t->queue.jobs,
        .n_queued = t->queue.len,
        .running = running,
        .n_running = n_running,
        .gpus = m->gpus,
        .unmanaged = m->unmanaged,
        .mig_unmanaged = m->mig_unmanaged,
        .memory_total_mb = m->memory_total_mb,
        .now = now,
        .next_pass = next_pass,
        .outside_mib = m->outside_mib,
        .reservations = m->reservations,
        .n_reservations = m->n_reservations,
        .closed = m->closed,
        .no_share = m->no_share,
    };
    double t0 = now_mono();
    size_t n = scheduler_pass(&in, &policy, start);
    if (running != t->run_list)
        free(running);
    metrics_observe_pass(&t->counters, now_mono() - t0);
    if (heap_next > 0 && (*next_pass == 0 || heap_next < *next_pass))
        *next_pass = heap_next;
    bool reordered = ordered != NULL;
    free(ordered);
    /* Out of the queue in one sweep (jobs_set_state then finds them gone), which needs
     * them in the queue's order; they start in the pass's. */
    if (reordered && n > 1) {
        struct job **by_queue = xmalloc(n * sizeof(*by_queue));
        memcpy(by_queue, start, n * sizeof(*by_queue));
        qsort(by_queue, n, sizeof(*by_queue), queue_order_cmp);
        scheduler_queue_remove_many(&t->queue, by_queue, n);
        free(by_queue);
    } else {
        scheduler_queue_remove_many(&t->queue, start, n);
    }
    n = hold_unknown_users(t, m, start, n);
    return mark_started(t, start, n, now, started);
}

/* ---- handing jobs to another scheduler (the slurm backend) ---- */

size_t jobs_hand_over(struct jobs *t, double now, struct job ***started, double *next_pass)
{
    *started = NULL;
    *next_pass = -1;
    if (!t->dirty)
        return 0;
    t->dirty = false;
    begin_due(t, now);
    *next_pass = scheduler_begin_heap_next(&t->begin);
    if (t->queue.len == 0)
        return 0;
    /* Only a group's throttle (--max-concurrent, an array's %K) is gflow's to keep: the
     * rest (GPUs, memory, order) is the other scheduler's. */
    static uint64_t epoch;
    epoch++;
    struct job **start = xmalloc(t->queue.len * sizeof(*start));
    size_t n = 0;
    for (size_t i = 0; i < t->queue.len; i++) {
        struct job *j = t->queue.jobs[i];
        struct job_group *g = j->sched.group;
        if (g && g->pass_epoch != epoch) {
            g->pass_epoch = epoch;
            g->pass_started = 0;
        }
        if (g && g->max_concurrent > 0 && g->running + g->pass_started >= g->max_concurrent) {
            j->wait_reason = SCHEDULER_REASON_GROUP_LIMIT;
            continue;
        }
        if (g)
            g->pass_started++;
        start[n++] = j;
    }
    scheduler_queue_remove_many(&t->queue, start, n);
    for (size_t i = 0; i < n; i++) { /* PD until Slurm has started it (slurm.c) */
        free(start[i]->backend_reason);
        start[i]->backend_reason = xstrdup("Slurm: not submitted yet");
        start[i]->backend_id = 0;
    }
    return mark_started(t, start, n, now, started);
}
