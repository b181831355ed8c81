/* scheduler: the scheduling pass (the queue order it walks, and the begin-time heap, are
 * in scheduler_queue.c; feasibility at submit in scheduler_feasible.c).
 *
 * The pass walks the queued jobs once, in order. It keeps the GPUs' occupancy as
 * bitmasks over positions in the gpu_set (at most 64 GPUs): GPUs held by exclusive jobs,
 * GPUs with shared jobs (and their declared memory), and the usable ones (allowed, state
 * known, no outside processes). A job fits when enough usable GPUs accept it; otherwise
 * its reason comes from a few more popcounts. Jobs with the same request (GPUs, shared,
 * memory) get the same answer until the next start changes the occupancy, so a small
 * cache keyed by request makes a queue of 10,000 waiting GPU jobs cost one lookup each. */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "quota.h"
#include "util.h"

/* ---- the pass ---- */

struct gpu_state {
    uint64_t excl;                        /* held by an exclusive job */
    uint64_t shared;                      /* has shared jobs */
    int64_t shared_mib[GPUINFO_MAX_GPUS]; /* their declared memory */
};

struct pass {
    const struct gpu_set *set;
    int n;                              /* GPUs considered (positions 0..n-1) */
    uint64_t all;                       /* positions 0..n-1, usable (state known) */
    uint64_t present;                   /* positions 0..n-1 */
    uint64_t allowed;                   /* positions */
    uint64_t unmanaged;                 /* positions */
    uint64_t no_share;                  /* positions: no shared job (exclusive mode) */
    int64_t free_mib[GPUINFO_MAX_GPUS]; /* NVML's free memory */
    /* Memory a shared job cannot have: used by other than gflow jobs (in->outside_mib). */
    int64_t outside_mib[GPUINFO_MAX_GPUS];
    struct gpu_state now, base; /* base: at the start of the pass */
};

static int popcount(uint64_t m)
{
    return __builtin_popcountll(m);
}

/* Position of NVML index idx in the set, or -1. */
static int pos_of_index(const struct pass *p, long idx)
{
    if (idx >= 0 && idx < p->n && p->set->gpus[idx].index == idx)
        return (int)idx;
    for (int i = 0; i < p->n; i++)
        if (p->set->gpus[i].index == idx)
            return i;
    return -1;
}

static uint64_t mask_from_indices(const struct pass *p, uint64_t indices)
{
    uint64_t out = 0;
    for (; indices; indices &= indices - 1) {
        int pos = pos_of_index(p, __builtin_ctzll(indices));
        if (pos >= 0)
            out |= 1ULL << pos;
    }
    return out;
}

static bool job_is_shared(const struct job *j)
{
    return j->shared && j->gpu_memory_mb > 0;
}

/* Marks the GPUs in j's gpu_mask as held by j. */
static void hold_gpus(struct pass *p, const struct job *j)
{
    for (uint64_t m = j->gpu_mask; m; m &= m - 1) {
        int pos = pos_of_index(p, __builtin_ctzll(m));
        if (pos < 0)
            continue;
        if (job_is_shared(j)) {
            p->now.shared |= 1ULL << pos;
            p->now.shared_mib[pos] += j->gpu_memory_mb;
        } else {
            p->now.excl |= 1ULL << pos;
        }
    }
}

/* GPUs not held by gflow jobs in a way that excludes j. */
static uint64_t gflow_free(const struct pass *p, const struct gpu_state *g, const struct job *j)
{
    return job_is_shared(j) ? ~(g->excl | p->no_share) : ~(g->excl | g->shared);
}

/* GPUs with memory for j: actually free memory for an exclusive job; for a shared one,
 * room beside the other shared jobs' declarations in what is not used outside gflow. */
static uint64_t memory_ok(const struct pass *p, const struct gpu_state *g, const struct job *j)
{
    if (j->gpu_memory_mb <= 0)
        return ~0ULL;
    uint64_t ok = 0;
    for (uint64_t a = p->all; a; a &= a - 1) {
        int i = __builtin_ctzll(a);
        int64_t room = job_is_shared(j)
                           ? p->set->gpus[i].memory_total_mib - p->outside_mib[i] - g->shared_mib[i]
                           : p->free_mib[i];
        if (room >= j->gpu_memory_mb)
            ok |= 1ULL << i;
    }
    return ok;
}

/* Why j, which does not fit now, waits. */
static const char *wait_reason(const struct pass *p, const struct job *j)
{
    int k = j->gpus;
    /* Only GPUs whose state is unknown stand between it and the machine it fits. */
    if (popcount(p->all & p->allowed) < k && popcount(p->present & p->allowed) >= k)
        return SCHEDULER_REASON_GPUS_UNAVAILABLE;
    uint64_t usable = p->all & p->allowed & ~p->unmanaged;
    if (popcount(usable & gflow_free(p, &p->base, j) & memory_ok(p, &p->base, j)) >= k)
        return SCHEDULER_REASON_PRIORITY;
    uint64_t gfree = gflow_free(p, &p->now, j);
    uint64_t mem = memory_ok(p, &p->now, j);
    if (popcount(usable & gfree) >= k)
        return SCHEDULER_REASON_GPU_MEMORY;
    /* Outside processes use memory too: without them an exclusive job would have it. */
    uint64_t mem_unmanaged = job_is_shared(j) ? mem : mem | p->unmanaged;
    if (popcount(p->all & p->allowed & gfree & mem_unmanaged) >= k)
        return SCHEDULER_REASON_UNMANAGED;
    if (popcount(p->all & ~p->unmanaged & gfree & mem) >= k)
        return SCHEDULER_REASON_GPUS_RESTRICTED;
    return SCHEDULER_REASON_RESOURCES;
}

/* The NVML indices of the positions in mask (positions index the gpu_set). */
static uint64_t nvml_mask(const struct pass *p, uint64_t positions)
{
    uint64_t m = 0;
    for (; positions; positions &= positions - 1) {
        int index = p->set->gpus[__builtin_ctzll(positions)].index;
        if (index >= 0 && index < GPUINFO_MAX_GPUS)
            m |= 1ULL << index;
    }
    return m;
}

/* Answers for requests already seen since the last start (which changes occupancy). */
#define REASON_CACHE_SIZE 64
struct reason_cache_entry {
    uint64_t epoch; /* 0 = empty */
    int gpus;
    bool shared;
    int64_t gpu_memory_mb;
    uint64_t blocked; /* the reserved GPUs the job may not use (backfill; else 0) */
    bool any;         /* the answer holds whatever blocked is: it does not fit anyway */
    const char *reason;
    /* The part of blocked that is other users' gctl reserve reservations: the same
     * blocked GPUs mean Reservation or Priority depending on it. */
    uint64_t rblocked;
};

static size_t cache_slot(const struct job *j, uint64_t blocked)
{
    uint64_t h = (uint64_t)j->gpus * 0x9E3779B97F4A7C15ULL ^
                 (uint64_t)j->gpu_memory_mb * 0xC2B2AE3D27D4EB4FULL ^ (uint64_t)job_is_shared(j) ^
                 blocked * 0x165667B19E3779F9ULL;
    return (size_t)(h >> 58) % REASON_CACHE_SIZE;
}

/* Whether c answers for j's request, with `blocked` GPUs reserved from it. */
static inline __attribute__((always_inline)) bool
cache_hit(const struct reason_cache_entry *c, uint64_t epoch, const struct job *j, uint64_t blocked)
{
    return c->epoch == epoch && c->gpus == j->gpus && c->shared == job_is_shared(j) &&
           c->gpu_memory_mb == j->gpu_memory_mb && (c->any || c->blocked == blocked);
}

static void pass_init(struct pass *p, const struct scheduler_input *in,
                      const struct scheduler_policy *policy)
{
    memset(p, 0, sizeof(*p));
    p->set = in->gpus;
    p->n = in->gpus
               ? (int)(in->gpus->n_gpus < GPUINFO_MAX_GPUS ? in->gpus->n_gpus : GPUINFO_MAX_GPUS)
               : 0;
    for (int i = 0; i < p->n; i++) {
        const struct gpu_info *g = &p->set->gpus[i];
        if (g->mig_enabled) /* a MIG GPU is used through its instances only */
            continue;
        p->present |= 1ULL << i;
        bool closed = g->index >= 0 && g->index < 64 && (in->closed >> g->index & 1);
        if (gpu_info_usable(g) && !closed)
            p->all |= 1ULL << i;
        /* NVML's free excludes the driver's reservation; without it, total - used (and
         * with unknown used memory, nothing to go by but the total). */
        p->free_mib[i] =
            g->memory_free_mib >= 0
                ? g->memory_free_mib
                : g->memory_total_mib - (g->memory_used_mib > 0 ? g->memory_used_mib : 0);
        p->outside_mib[i] = in->outside_mib && in->outside_mib[i] > 0 ? in->outside_mib[i] : 0;
    }
    p->allowed = policy->allowed_gpus ? mask_from_indices(p, policy->allowed_gpus) : ~0ULL;
    p->unmanaged = mask_from_indices(p, in->unmanaged);
    p->no_share = mask_from_indices(p, in->no_share);
    for (size_t i = 0; i < in->n_running; i++)
        hold_gpus(p, in->running[i]);
    p->base = p->now;
}

/* ---- backfill ---- */

/* A running job past its expected end is expected to end this much after now. */
#define BACKFILL_EPSILON 1.0

/* GPUs reserved for a blocked job from its shadow time until it would end. */
struct reservation {
    double shadow, until;
    uint64_t mask;    /* positions */
    bool strict;      /* its job has waited default_limit: see backfill_blocked */
    double strict_at; /* when it does */
};

/* The plan a pass with backfill keeps: when each GPU is expected to be free of the jobs
 * holding it (0: free now), and the reservations made so far. */
struct backfill {
    bool on;
    bool untimed_outside;
    int depth;
    double default_limit;
    double now;
    double end_excl[GPUINFO_MAX_GPUS];   /* latest expected end of its exclusive jobs */
    double end_shared[GPUINFO_MAX_GPUS]; /* ... of its shared jobs */
    double until[GPUINFO_MAX_GPUS];      /* latest end of the reservations on it */
    struct reservation res[SCHEDULER_BACKFILL_MAX_DEPTH];
    int n_res;
    /* gctl reserve's windows, planned as busy for other users' jobs. */
    const struct scheduler_reservation *windows;
    size_t n_windows;
    /* Estimates: the expected_start of every waiting job without a reservation (past
     * depth, or waiting for something else too), planned in queue order like a
     * reservation that binds nothing. Set up at the first such job: when each usable GPU
     * is planned free (sorted, no identities: O(GPUs) a job, not a look per GPU), and the
     * earliest planned end of a running job (for jobs without whole GPUs). */
    bool est_ready;
    int est_n;
    size_t est_count; /* jobs planned in so far (SCHEDULER_ESTIMATE_MAX) */
    double est_free[GPUINFO_MAX_GPUS];
    double first_end;
};

/* How long j is planned to run: its time limit, or the policy's default. */
static double planned_runtime(const struct backfill *b, const struct job *j)
{
    return j->time_limit > 0 ? (double)j->time_limit : b->default_limit;
}

/* Marks the GPUs at `positions` as held until `end`. */
static void backfill_hold(struct backfill *b, uint64_t positions, bool shared, double end)
{
    double *ends = shared ? b->end_shared : b->end_excl;
    for (; positions; positions &= positions - 1) {
        int pos = __builtin_ctzll(positions);
        if (end > ends[pos])
            ends[pos] = end;
    }
}

static void backfill_init(struct backfill *b, const struct pass *p,
                          const struct scheduler_input *in, const struct scheduler_policy *policy)
{
    b->on = policy->backfill && p->n > 0;
    b->n_res = 0;
    if (!b->on)
        return;
    b->depth = policy->backfill_depth <= 0 ? 1
               : policy->backfill_depth > SCHEDULER_BACKFILL_MAX_DEPTH
                   ? SCHEDULER_BACKFILL_MAX_DEPTH
                   : policy->backfill_depth;
    b->default_limit = policy->untimed_plan > 0         ? policy->untimed_plan
                       : policy->default_time_limit > 0 ? policy->default_time_limit
                                                        : SCHEDULER_DEFAULT_TIME_LIMIT;
    b->est_ready = false;
    b->est_count = 0;
    b->first_end = 0;
    b->untimed_outside = policy->untimed_outside;
    b->now = in->now;
    b->windows = in->reservations;
    b->n_windows = in->n_reservations;
    memset(b->end_excl, 0, sizeof(b->end_excl));
    memset(b->end_shared, 0, sizeof(b->end_shared));
    memset(b->until, 0, sizeof(b->until));
    for (size_t r = 0; r < in->n_running; r++) {
        const struct job *j = in->running[r];
        uint64_t positions = mask_from_indices(p, j->gpu_mask);
        if (!positions)
            continue;
        double start = j->start_time > 0 ? j->start_time : in->now;
        double end = start + planned_runtime(b, j);
        /* Past its planned end: a job with a time limit is about to be stopped; one
         * without may run on, planned for another default period (taking it as ending
         * now would hold a reservation's free GPUs idle for as long as it runs). */
        if (end <= in->now)
            end = in->now + (j->time_limit > 0 ? BACKFILL_EPSILON : b->default_limit);
        backfill_hold(b, positions, job_is_shared(j), end);
        if (b->first_end == 0 || end < b->first_end)
            b->first_end = end;
    }
}

/* When the plan changes with nothing else happening (0: never, or no reservation): a
 * running job without a time limit reaches its planned end (it is then planned for
 * another period, which moves shadow times), or a reservation turns strict. */
static double backfill_next_change(const struct backfill *b, const struct scheduler_input *in)
{
    if (!b->on || b->n_res == 0)
        return 0;
    double next = 0;
    for (size_t r = 0; r < in->n_running; r++) {
        const struct job *j = in->running[r];
        if (j->time_limit > 0 || !j->gpu_mask || j->start_time <= 0)
            continue;
        double end = j->start_time + b->default_limit;
        if (end > b->now && (next == 0 || end < next))
            next = end;
    }
    for (int r = 0; r < b->n_res; r++) {
        double at = b->res[r].strict_at;
        if (at > b->now && (next == 0 || at < next))
            next = at;
    }
    return next;
}

/* Every reserved GPU. */
static uint64_t backfill_reserved_mask(const struct backfill *b)
{
    uint64_t m = 0;
    for (int r = 0; r < b->n_res; r++)
        m |= b->res[r].mask;
    return m;
}

/* The reserved GPUs j may not use: those of every reservation whose shadow time it would
 * still run at. A job with a time limit ends by now + limit. One without is planned to
 * run default_limit: it may end at the shadow time itself, unless the reserved job has
 * waited default_limit already (r->strict); then it must end strictly before. Why: a
 * running job past its planned end makes the shadow exactly now + default_limit, so
 * untimed jobs could follow one another onto the reserved GPUs as each overruns, for
 * ever; strictly, none follows an overrunning job and the reserved job waits only for a
 * finite chain (the jobs running then, those backfilled while the shadow is further than
 * default_limit, and so on). Strict from the start costs the synthetic lab trace 15-35%
 * of its mean wait (docs/replay.md). With untimed_outside, an untimed job may run past
 * any shadow. */
static uint64_t backfill_blocked(const struct backfill *b, const struct job *j)
{
    bool untimed = j->time_limit <= 0;
    if (untimed && b->untimed_outside)
        return backfill_reserved_mask(b);
    double end = b->now + planned_runtime(b, j);
    uint64_t m = 0;
    for (int r = 0; r < b->n_res; r++) {
        const struct reservation *res = &b->res[r];
        if (end > res->shadow || (untimed && res->strict && end == res->shadow))
            m |= res->mask;
    }
    return m;
}

/* Reserves for j, which cannot start now, j->gpus GPUs among `usable` from the earliest
 * time that many are expected to be free for it (after the earlier reservations on
 * them): its shadow time, which becomes its expected_start. Of the GPUs free by then it
 * takes those that free up last, so GPUs free earlier stay open to backfill (the GPUs
 * it gets when it starts are chosen then, by gpualloc). False (nothing reserved) if
 * there are not enough GPUs. */
static void backfill_estimate_reserved(struct backfill *b, int k, double shadow, double until);

static bool backfill_reserve(struct backfill *b, const struct pass *p, uint64_t usable,
                             struct job *j)
{
    /* A GPU free of gflow jobs now but short of memory (outside use) is not counted on. */
    uint64_t mem_now = memory_ok(p, &p->now, j);
    double avail[GPUINFO_MAX_GPUS], sorted[GPUINFO_MAX_GPUS];
    int n = 0;
    for (uint64_t a = usable; a; a &= a - 1) {
        int pos = __builtin_ctzll(a);
        double t = b->end_excl[pos];
        if (!job_is_shared(j) && b->end_shared[pos] > t)
            t = b->end_shared[pos];
        if (t == 0 && !(mem_now >> pos & 1)) {
            usable &= ~(1ULL << pos);
            continue;
        }
        if (b->until[pos] > t)
            t = b->until[pos];
        avail[pos] = reservation_free_from(b->windows, b->n_windows, p->set->gpus[pos].index,
                                           j->user, t < b->now ? b->now : t, planned_runtime(b, j));
        int k = n++; /* insertion sort: at most 64 values */
        for (; k > 0 && sorted[k - 1] > avail[pos]; k--)
            sorted[k] = sorted[k - 1];
        sorted[k] = avail[pos];
    }
    if (j->gpus < 1 || n < j->gpus)
        return false;
    double shadow = sorted[j->gpus - 1];
    uint64_t mask = 0;
    for (int taken = 0; taken < j->gpus; taken++) {
        int best = -1;
        for (uint64_t a = usable & ~mask; a; a &= a - 1) {
            int pos = __builtin_ctzll(a);
            if (avail[pos] <= shadow && (best < 0 || avail[pos] > avail[best]))
                best = pos;
        }
        mask |= 1ULL << best;
    }
    struct reservation *r = &b->res[b->n_res++];
    double strict_at = j->submit_time + b->default_limit;
    *r = (struct reservation){shadow, shadow + planned_runtime(b, j), mask, b->now >= strict_at,
                              strict_at};
    for (uint64_t a = mask; a; a &= a - 1) {
        int pos = __builtin_ctzll(a);
        if (r->until > b->until[pos])
            b->until[pos] = r->until;
    }
    if (b->est_ready) /* jobs estimated before it (e.g. over a quota) planned it in */
        backfill_estimate_reserved(b, j->gpus, shadow, r->until);
    j->expected_start = shadow;
    return true;
}

/* Why GPU job j waits in a pass with backfill, given the reason without reservations
 * (NULL when it would fit but for them); reserves GPUs for it when it waits for GPUs and
 * fewer than depth jobs have a reservation. *reserved says whether it did. */
static const char *backfill_wait(struct backfill *b, const struct pass *p, struct job *j,
                                 const char *reason, bool *reserved)
{
    *reserved = false;
    bool for_gpus = !reason || strcmp(reason, SCHEDULER_REASON_RESOURCES) == 0 ||
                    strcmp(reason, SCHEDULER_REASON_PRIORITY) == 0;
    if (!for_gpus)
        return reason;
    /* A job behind another's reservation waits for priority, as Slurm says. */
    const char *out = b->n_res > 0 || !reason ? SCHEDULER_REASON_PRIORITY : reason;
    if (b->n_res < b->depth)
        *reserved = backfill_reserve(b, p, p->all & p->allowed & ~p->unmanaged, j);
    return out;
}

/* Sorts the n values a[0..n) ascending (insertion sort: at most 64). */
static void sort_small(double *a, int n)
{
    for (int i = 1; i < n; i++) {
        double v = a[i];
        int k = i;
        for (; k > 0 && a[k - 1] > v; k--)
            a[k] = a[k - 1];
        a[k] = v;
    }
}

/* A reservation made after the estimates began (a job estimated ahead of it waits for
 * something besides GPUs): the estimates' plan holds k GPUs for it until `until`, those
 * planned free latest by its shadow time (the first k if fewer are). Rare: sorts. */
static void backfill_estimate_reserved(struct backfill *b, int k, double shadow, double until)
{
    int m = 0;
    while (m < b->est_n && b->est_free[m] <= shadow)
        m++;
    int from = m >= k ? m - k : 0;
    for (int i = from; i < from + k && i < b->est_n; i++)
        if (b->est_free[i] < until)
            b->est_free[i] = until;
    sort_small(b->est_free, b->est_n);
}

/* Sets up the estimates' plan from the GPUs' planned ends so far (running jobs, those
 * started in this pass, the reservations). */
static void backfill_estimate_init(struct backfill *b, const struct pass *p)
{
    b->est_n = 0;
    for (uint64_t a = p->all & p->allowed & ~p->unmanaged; a; a &= a - 1) {
        int pos = __builtin_ctzll(a);
        double t = b->end_excl[pos];
        if (b->end_shared[pos] > t)
            t = b->end_shared[pos];
        if (b->until[pos] > t)
            t = b->until[pos];
        b->est_free[b->est_n++] = t < b->now ? b->now : t;
    }
    sort_small(b->est_free, b->est_n);
    b->est_ready = true;
}

/* A job started in this pass after the estimates began: the GPUs planned free first
 * are pushed back by its run (which GPUs it took is not kept here). */
static void backfill_estimate_started(struct backfill *b, const struct job *j)
{
    if (!b->est_ready || j->gpus < 1)
        return;
    double run = planned_runtime(b, j);
    for (int i = 0; i < j->gpus && i < b->est_n; i++)
        b->est_free[i] += run;
    sort_small(b->est_free, b->est_n);
}

/* j waits without a reservation: its expected_start is when the plan has its GPUs free
 * (after every job ahead of it, reserved or estimated), and it takes them until it would
 * end, those free latest by then (as backfill_reserve: no filling of holes). A job
 * without whole GPUs (none, or MIG instances) gets the earliest planned end of a
 * running job (nothing frees before). A lower bound where something else holds it
 * (memory, a quota, the running-jobs limit...). O(GPUs). */
static inline __attribute__((always_inline)) void
backfill_estimate(struct backfill *b, const struct pass *p, struct job *j)
{
    if (j->expected_start > 0)
        return;
    if (j->gpus < 1 || j->mig_profile) {
        j->expected_start = b->first_end;
        return;
    }
    if (!b->est_ready)
        backfill_estimate_init(b, p);
    int k = j->gpus;
    if (k > b->est_n)
        return; /* not on the usable GPUs: no plan says when */
    double shadow = b->est_free[k - 1];
    /* Past SCHEDULER_ESTIMATE_MAX planned jobs, a lower bound that plans nothing in: it
     * reads no time limit (a memory line per job at 100,000 jobs). */
    if (b->est_count >= SCHEDULER_ESTIMATE_MAX) {
        j->expected_start = shadow;
        return;
    }
    b->est_count++;
    int m = k; /* GPUs free by the shadow time */
    while (m < b->est_n && b->est_free[m] <= shadow)
        m++;
    double until = shadow + planned_runtime(b, j);
    /* [m-k, m) become `until`, which is >= all before m: the values of [m, n) below it
     * move down k places and the k copies go after them (one merge step, no sort). */
    int at = m;
    while (at < b->est_n && b->est_free[at] < until)
        at++;
    memmove(b->est_free + m - k, b->est_free + m, (size_t)(at - m) * sizeof(*b->est_free));
    for (int i = at - k; i < at; i++)
        b->est_free[i] = until;
    j->expected_start = shadow;
}

/* ---- gctl reserve's reservations ---- */

/* The positions j may not start on: other users' reservations it would run into. */
static uint64_t reserved_from(const struct pass *p, const struct scheduler_input *in,
                              const struct reservation_index *ri,
                              const struct scheduler_policy *policy, const struct job *j)
{
    double runtime = j->time_limit > 0                ? (double)j->time_limit
                     : policy->default_time_limit > 0 ? policy->default_time_limit
                                                      : SCHEDULER_DEFAULT_TIME_LIMIT;
    return mask_from_indices(p, reservation_blocked(ri, j->user, in->now, runtime));
}

/* The positions of j's user's reservations that are active now (taken first). */
static uint64_t reserved_for(const struct pass *p, const struct reservation_index *ri,
                             const struct job *j)
{
    return mask_from_indices(p, reservation_held(ri, j->user));
}

/* ---- MIG instances ---- */

/* The instances' occupancy in a pass, as masks over positions in gpus->migs. */
struct mig_pass {
    const struct gpu_set *set;
    int n;
    uint64_t ok;        /* gpu_mig_usable: NVML reports it */
    uint64_t usable;    /* ok, on an allowed GPU */
    uint64_t unmanaged; /* outside processes */
    uint64_t held;      /* by running jobs and those started in this pass */
    uint64_t base_held; /* by running jobs */
};

/* The positions of the instances named in uuids ("MIG-a,MIG-b"). */
static uint64_t mig_mask_of(const struct gpu_set *set, const char *uuids)
{
    uint64_t m = 0;
    for (const char *p = uuids; p && *p;) {
        size_t len = strcspn(p, ",");
        for (size_t i = 0; set && i < set->n_migs && i < GPUINFO_MAX_MIGS; i++)
            if (strlen(set->migs[i].uuid) == len && strncmp(set->migs[i].uuid, p, len) == 0)
                m |= 1ULL << i;
        p += len;
        if (*p == ',')
            p++;
    }
    return m;
}

static void mig_pass_init(struct mig_pass *mp, const struct scheduler_input *in,
                          const struct scheduler_policy *policy)
{
    memset(mp, 0, sizeof(*mp));
    mp->set = in->gpus;
    size_t n = in->gpus ? in->gpus->n_migs : 0;
    mp->n = (int)(n < GPUINFO_MAX_MIGS ? n : GPUINFO_MAX_MIGS);
    for (int i = 0; i < mp->n; i++) {
        int parent = mp->set->migs[i].parent;
        bool usable = gpu_mig_usable(mp->set, &mp->set->migs[i]) &&
                      !(parent >= 0 && parent < 64 && (in->closed >> parent & 1));
        bool allowed = !policy->allowed_gpus ||
                       (parent >= 0 && parent < 64 && (policy->allowed_gpus >> parent & 1));
        if (usable)
            mp->ok |= 1ULL << i;
        if (usable && allowed)
            mp->usable |= 1ULL << i;
    }
    mp->unmanaged = in->mig_unmanaged;
    for (size_t r = 0; r < in->n_running; r++)
        mp->held |= mig_mask_of(mp->set, in->running[r]->mig_uuids);
    mp->base_held = mp->held;
}

/* The instances of j's profile. */
static uint64_t mig_matching(const struct mig_pass *mp, const struct job *j)
{
    uint64_t m = 0;
    for (int i = 0; i < mp->n; i++)
        if (strcmp(mp->set->migs[i].profile, j->mig_profile) == 0)
            m |= 1ULL << i;
    return m;
}

/* Takes j->mig_count free instances of j's profile, lowest positions first (so one GPU
 * fills up before the next); false when there are not enough. */
static bool mig_choose(struct mig_pass *mp, struct job *j)
{
    uint64_t cand = mig_matching(mp, j) & mp->usable & ~mp->unmanaged & ~mp->held;
    if (j->mig_count < 1 || popcount(cand) < j->mig_count)
        return false;
    struct strbuf sb;
    strbuf_init(&sb);
    for (int taken = 0; taken < j->mig_count; taken++) {
        int pos = __builtin_ctzll(cand);
        cand &= cand - 1;
        mp->held |= 1ULL << pos;
        strbuf_addf(&sb, "%s%s", taken ? "," : "", mp->set->migs[pos].uuid);
    }
    free(j->mig_uuids);
    j->mig_uuids = strbuf_detach(&sb);
    return true;
}

/* Why MIG job j, which does not fit now, waits (the reasons of whole-GPU jobs). */
static const char *mig_wait_reason(const struct mig_pass *mp, const struct job *j)
{
    uint64_t match = mig_matching(mp, j);
    int k = j->mig_count;
    if (popcount(match & mp->usable & ~mp->unmanaged & ~mp->base_held) >= k)
        return SCHEDULER_REASON_PRIORITY;
    if (popcount(match & mp->usable & ~mp->held) >= k)
        return SCHEDULER_REASON_UNMANAGED;
    if (popcount(match & mp->ok & ~mp->unmanaged & ~mp->held) >= k)
        return SCHEDULER_REASON_GPUS_RESTRICTED;
    if (popcount(match & ~mp->unmanaged & ~mp->held) >= k)
        return SCHEDULER_REASON_GPUS_UNAVAILABLE;
    return SCHEDULER_REASON_RESOURCES;
}

/* The pass, compiled twice (always inlined with a constant `backfill`), so the greedy
 * one has none of backfill's per-job work. */
static inline __attribute__((always_inline)) size_t pass_walk(const struct scheduler_input *in,
                                                              const struct scheduler_policy *policy,
                                                              struct job **start,
                                                              const bool backfill)
{
    struct pass p;
    pass_init(&p, in, policy);
    struct mig_pass mp;
    bool mig_started = false; /* mp is set up at the first MIG job */
    struct reason_cache_entry cache[REASON_CACHE_SIZE];
    memset(cache, 0, sizeof(cache));
    uint64_t epoch = 1;
    uint64_t rng = policy->random_seed;
    int64_t running = (int64_t)in->n_running;
    size_t nstart = 0, i = 0;
    /* Host memory: what the running jobs declared; jobs that declare none count 0. */
    int64_t mem_used = 0;
    for (size_t r = 0; r < in->n_running; r++)
        mem_used += in->running[r]->memory_mb > 0 ? in->running[r]->memory_mb : 0;

    struct backfill bf;
    backfill_init(&bf, &p, in, policy);
    /* The reservations read once for the pass: a job's blocked GPUs are then one look
     * per reserved GPU, however many there are. */
    struct reservation_index ri;
    if (in->n_reservations)
        reservation_index_build(&ri, in->reservations, in->n_reservations, in->now);

    /* Groups' counts of jobs started in this pass are valid for this epoch only. */
    static uint64_t pass_epoch_counter;
    uint64_t pass_epoch = ++pass_epoch_counter;
    double next_pass = 0;
    for (; i < in->n_queued; i++) {
        struct job *j = in->queued[i];
        if (backfill) /* greedy leaves it alone */
            j->expected_start = 0;
        if (j->sched.deps_blocked) {
            j->wait_reason = SCHEDULER_REASON_DEPENDENCY;
            continue;
        }
        if (j->begin_time > in->now) {
            j->wait_reason = SCHEDULER_REASON_BEGIN_TIME;
            if (backfill) /* not before it */
                j->expected_start = j->begin_time;
            if (next_pass == 0 || j->begin_time < next_pass)
                next_pass = j->begin_time;
            continue;
        }
        struct job_group *g = j->sched.group;
        if (g && g->max_concurrent > 0) {
            if (g->pass_epoch != pass_epoch) {
                g->pass_epoch = pass_epoch;
                g->pass_started = 0;
            }
            if (g->running + g->pass_started >= g->max_concurrent) {
                j->wait_reason = SCHEDULER_REASON_GROUP_LIMIT;
                if (backfill && bf.on)
                    backfill_estimate(&bf, &p, j);
                continue;
            }
        }
        if ((j->sched.quota_user || j->sched.quota_project) &&
            quota_blocks(j, in->now, pass_epoch)) {
            j->wait_reason = SCHEDULER_REASON_QUOTA;
            if (backfill && bf.on)
                backfill_estimate(&bf, &p, j);
            continue;
        }
        if (policy->max_running_jobs > 0 && running >= policy->max_running_jobs)
            break;
        if (j->memory_mb > 0 && in->memory_total_mb > 0 &&
            mem_used + j->memory_mb > in->memory_total_mb) {
            j->wait_reason = SCHEDULER_REASON_MEMORY;
            if (backfill && bf.on)
                backfill_estimate(&bf, &p, j);
            continue;
        }
        if (j->mig_profile) {
            if (!mig_started) {
                mig_pass_init(&mp, in, policy);
                mig_started = true;
            }
            if (!mig_choose(&mp, j)) {
                j->wait_reason = mig_wait_reason(&mp, j);
                if (backfill && bf.on)
                    backfill_estimate(&bf, &p, j);
                continue;
            }
        }
        if (j->mig_profile || j->gpus <= 0) { /* its instances chosen above, or no GPUs */
            j->gpu_mask = 0;
            j->wait_reason = NULL;
            start[nstart++] = j;
            if (g)
                g->pass_started++;
            quota_pass_started(j, pass_epoch);
            running++;
            mem_used += j->memory_mb > 0 ? j->memory_mb : 0;
            continue;
        }
        /* With backfill, the reserved GPUs it would delay are not its to take. A job
         * whose request does not fit even without reservations finds its answer in the
         * request's slot (any: its time limit is not even read). */
        uint64_t blocked = 0;
        /* Other users' reservations (gctl reserve) block GPUs too. */
        uint64_t rblocked = in->n_reservations ? reserved_from(&p, in, &ri, policy, j) : 0;
        struct reason_cache_entry *c = &cache[cache_slot(j, 0)];
        if (((backfill && bf.n_res) || rblocked) && !cache_hit(c, epoch, j, ~0ULL)) {
            blocked = (backfill && bf.n_res ? backfill_blocked(&bf, j) : 0) | rblocked;
            c = &cache[cache_slot(j, blocked)];
        }
        if (cache_hit(c, epoch, j, blocked) && (c->any || c->rblocked == rblocked)) {
            j->wait_reason = c->reason;
            if (backfill && bf.on)
                backfill_estimate(&bf, &p, j);
            continue;
        }
        uint64_t cand =
            p.all & p.allowed & ~p.unmanaged & gflow_free(&p, &p.now, j) & memory_ok(&p, &p.now, j);
        uint64_t chosen = 0, mine = in->n_reservations ? reserved_for(&p, &ri, j) : 0;
        if (mine && popcount(cand & ~blocked & mine) >= j->gpus) /* its own first */
            chosen =
                gpualloc_choose(p.set, cand & ~blocked & mine, j->gpus, policy->gpu_strategy, &rng);
        if (!chosen && j->gpus <= p.n)
            chosen = gpualloc_choose(p.set, cand & ~blocked, j->gpus, policy->gpu_strategy, &rng);
        if (!chosen) {
            bool fits_but_reserved = blocked && j->gpus <= p.n && popcount(cand) >= j->gpus;
            const char *reason = fits_but_reserved ? NULL : wait_reason(&p, j);
            if (fits_but_reserved && popcount(cand & ~rblocked) < j->gpus)
                reason = SCHEDULER_REASON_RESERVATION;
            bool reserved = false;
            if (backfill && bf.on)
                reason = backfill_wait(&bf, &p, j, reason, &reserved);
            j->wait_reason = reason;
            if (reserved) {
                epoch++; /* the jobs behind it see the reservation */
                continue;
            }
            if (backfill && bf.on)
                backfill_estimate(&bf, &p, j);
            bool any = (backfill || rblocked) && (j->gpus > p.n || popcount(cand) < j->gpus);
            c = &cache[cache_slot(j, any ? 0 : blocked)];
            *c = (struct reason_cache_entry){
                epoch, j->gpus, job_is_shared(j),  j->gpu_memory_mb, any ? 0 : blocked,
                any,   reason,  any ? 0 : rblocked};
            continue;
        }
        for (uint64_t a = chosen; a; a &= a - 1) {
            int pos = __builtin_ctzll(a);
            if (job_is_shared(j)) {
                p.now.shared |= 1ULL << pos;
                p.now.shared_mib[pos] += j->gpu_memory_mb;
            } else {
                p.now.excl |= 1ULL << pos;
            }
        }
        epoch++;
        if (backfill && bf.on) {
            backfill_hold(&bf, chosen, job_is_shared(j), in->now + planned_runtime(&bf, j));
            backfill_estimate_started(&bf, j);
        }
        j->gpu_mask = nvml_mask(&p, chosen);
        j->wait_reason = NULL;
        start[nstart++] = j;
        if (g)
            g->pass_started++;
        quota_pass_started(j, pass_epoch);
        running++;
        mem_used += j->memory_mb > 0 ? j->memory_mb : 0;
    }
    /* The running-jobs limit is reached: nothing more can start. */
    for (; i < in->n_queued; i++) {
        struct job *j = in->queued[i];
        if (backfill) /* greedy leaves it alone */
            j->expected_start = 0;
        if (j->sched.deps_blocked) {
            j->wait_reason = SCHEDULER_REASON_DEPENDENCY;
            continue;
        } else if (j->begin_time > in->now) {
            j->wait_reason = SCHEDULER_REASON_BEGIN_TIME;
            if (backfill)
                j->expected_start = j->begin_time;
            if (next_pass == 0 || j->begin_time < next_pass)
                next_pass = j->begin_time;
            continue;
        } else if (j->sched.group && j->sched.group->max_concurrent > 0 &&
                   j->sched.group->running + (j->sched.group->pass_epoch == pass_epoch
                                                  ? j->sched.group->pass_started
                                                  : 0) >=
                       j->sched.group->max_concurrent) {
            j->wait_reason = SCHEDULER_REASON_GROUP_LIMIT;
        } else {
            j->wait_reason = SCHEDULER_REASON_MAX_RUNNING;
        }
        if (backfill && bf.on)
            backfill_estimate(&bf, &p, j);
    }
    double replan = backfill_next_change(&bf, in);
    if (replan > 0 && (next_pass == 0 || replan < next_pass))
        next_pass = replan;
    if (in->next_pass)
        *in->next_pass = next_pass;
    return nstart;
}

size_t scheduler_pass(const struct scheduler_input *in, const struct scheduler_policy *policy,
                      struct job **start)
{
    return policy->backfill ? pass_walk(in, policy, start, true)
                            : pass_walk(in, policy, start, false);
}
