/* scheduler: the scheduling pass, a pure function of (queued jobs in order, running jobs,
 * GPU state, policy, now) -> which queued jobs start now and on which GPUs, and why each
 * other queued job waits. It has no I/O so it is unit-tested and benchmarked directly.
 *
 * Order: higher priority first, then lower id (submission order). The order is kept
 * incrementally in a struct scheduler_queue by its owner (the daemon inserts a job when
 * it becomes PD and removes it when it leaves PD), so a pass walks it once and never
 * sorts. The daemon keeps jobs that wait for their begin time (a scheduler_begin_heap)
 * or their dependencies out of the queue; the pass still gives such jobs their reason
 * if it meets them. Greedy: a job that fits starts even if a job ahead of it waits.
 *
 * GPUs: a job asks for `gpus` GPUs. An exclusive job holds its GPUs wholly and, with
 * gpu_memory_mb, needs that much actually free on each (NVML's free memory, which
 * excludes the driver's reservation; total - used where free is unknown). A shared job
 * (shared, gpu_memory_mb > 0) shares a GPU only with other shared jobs, while the sum of
 * their declared gpu_memory_mb fits in the GPU's memory_total_mib less what is used by
 * other than gflow jobs (in->outside_mib: outside processes, ignored ones included, and
 * the driver's reservation; computed by the caller). Running jobs hold the GPUs in their
 * gpu_mask (NVML indices). A GPU is usable when its state is known (gpu_info_usable: not
 * lost, not unavailable), it is allowed by the policy and not in the unmanaged mask
 * (compute processes that belong to no running gflow job; computed by the caller). The
 * chosen GPUs are picked by gpualloc. */
#ifndef GFLOW_SCHEDULER_H
#define GFLOW_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fairshare.h"
#include "gpualloc.h"
#include "gpuinfo.h"
#include "job.h"
#include "reservation.h"

/* The allowed masks below take 0 as "every GPU". An exact set of allowed GPUs that
 * may be empty (gctl set-gpus, CUDA_VISIBLE_DEVICES naming none) goes through this: an
 * empty set becomes a bit no GPU has. */
static inline uint64_t scheduler_allowed_mask(uint64_t exact)
{
    return exact ? exact : 1ULL << 63;
}

struct scheduler_policy {
    int64_t max_running_jobs;            /* 0 = no limit */
    enum gpualloc_strategy gpu_strategy; /* default (zero) is topology */
    /* Bit i: the GPU with NVML index i may be used (gctl set-gpus, daemon.gpus,
     * CUDA_VISIBLE_DEVICES). 0 means all GPUs (an empty allowed set is not a setting). */
    uint64_t allowed_gpus;
    uint64_t random_seed; /* the random strategy's seed for this pass */
    /* Backfill (off: greedy, every job that fits starts). On: a GPU job that cannot start
     * for lack of GPUs (reason Resources or Priority) gets a reservation: the earliest
     * time (shadow time) at which enough GPUs are free for it, planned from the expected
     * ends of the running jobs and of those started in this pass (start_time +
     * time_limit, or + default_time_limit for a job without one; if that is past, now +
     * 1 s for a job with a time limit (it is being stopped) and now + default_time_limit
     * for one without), and which GPUs. The first backfill_depth such jobs get one (conservative
     * backfill; a later reservation plans after the earlier ones on their GPUs, it does
     * not fill holes before them). A job behind a reservation starts only if it does not
     * delay it: it ends (now + its time_limit) by the shadow time, or it uses no reserved
     * GPU. A job without a time limit is planned to run default_time_limit, and with
     * untimed_outside it is backfilled only outside the reservations (see below). A
     * reserved job's expected_start is its shadow time; a GPU job that waits for GPUs
     * behind a reservation gets the reason Priority (as Slurm). Host memory (Memory),
     * MIG instances and GPU memory are not planned: such jobs wait as in greedy. */
    bool backfill;
    int backfill_depth;        /* jobs that get a reservation; 0 means 1; at most 64 */
    double default_time_limit; /* seconds, for planning only; 0 means 24 h */
    /* How long backfill plans a job without a time limit (daemon.default_time_plan: a
     * percentile of recent run times or a duration, timeplan.h), in seconds; 0 means
     * default_time_limit. "default_time_limit" in the backfill comments here means this.
     * gctl reserve's windows keep default_time_limit: a promise to another user is not
     * planned on a percentile. */
    double untimed_plan;
    /* scheduler.backfill_untimed: false ("planned", the default) backfills a job without a
     * time limit like one whose limit is default_time_limit. It may then run past the
     * shadow time and delay the reserved job, but only by its own overrun: once the
     * shadow is closer than default_time_limit, no untimed job is backfilled onto the
     * reserved GPUs, so the reserved job waits at most for the jobs already running. True
     * ("outside") never lets an untimed job onto reserved GPUs: the reserved job is
     * never delayed, but while a big job waits every untimed job does too (on the
     * synthetic lab trace, where 30% of jobs have no limit, the mean wait grows from 10 h
     * to 4 days: docs/replay.md). */
    bool untimed_outside;
    /* The weights of the queue's order (fairshare.h): not used by the pass, which walks
     * in->queued as given; the caller orders it (fairshare_order) when they reorder. */
    struct priority_weights priority;
};

/* Backfill's estimates (expected_start of the waiting jobs without a reservation) plan
 * this many jobs in, in queue order; the jobs after them get a lower bound (when the plan
 * so far has their GPUs free) that reads no time limit, so a pass over 100,000 waiting
 * jobs costs little more than one without estimates. */
#define SCHEDULER_ESTIMATE_MAX 10000
/* The most reservations a pass makes (backfill_depth above it counts as this). */
#define SCHEDULER_BACKFILL_MAX_DEPTH 64
/* Planning's default_time_limit when the policy gives 0: 24 h. */
#define SCHEDULER_DEFAULT_TIME_LIMIT (24.0 * 3600.0)

/* Reasons a queued job waits (static strings, shown in NODELIST(REASON)). When several
 * hold, the first that applies is given:
 *   Dependency      its dependencies are not met yet (deps_blocked, kept by the daemon:
 *                   the pass only skips such a job, it never looks at its deps);
 *   MaxRunningJobs  the running-jobs limit is reached (every job waits for it);
 *   BeginTime       its begin_time (--begin) is still to come;
 *   Memory          the job declares host memory (memory_mb) and the declared memory of
 *                   the running jobs (and of those starting in this pass) plus its own
 *                   exceeds memory_total_mb;
 *   Priority        the job would have fit, but jobs ahead of it in the order took the
 *                   GPUs in this pass;
 *   GpusUnavailable it would fit if the GPUs whose state NVML cannot tell (unavailable,
 *                   lost: ginfo shows why) were usable; checked first;
 *   GpuMemory       enough GPUs are free of gflow jobs, but not with enough memory: an
 *                   exclusive job's gpu_memory_mb is not actually free, or a shared job's
 *                   declared memory does not fit beside the shared jobs already there;
 *   Unmanaged       it would fit if outside processes were gone from their GPUs;
 *   GpusRestricted  it would fit if the allowed GPUs were wider;
 *   Resources       not enough free GPUs now. */
#define SCHEDULER_REASON_DEPENDENCY "Dependency"
#define SCHEDULER_REASON_MEMORY "Memory"
#define SCHEDULER_REASON_BEGIN_TIME "BeginTime"
#define SCHEDULER_REASON_PRIORITY "Priority"
#define SCHEDULER_REASON_MAX_RUNNING "MaxRunningJobs"
#define SCHEDULER_REASON_RESOURCES "Resources"
#define SCHEDULER_REASON_GPU_MEMORY "GpuMemory"
#define SCHEDULER_REASON_GPUS_RESTRICTED "GpusRestricted"
#define SCHEDULER_REASON_UNMANAGED "Unmanaged"
#define SCHEDULER_REASON_GPUS_UNAVAILABLE "GpusUnavailable"
/* Reservation: the job would fit now, but only on GPUs reserved for another user
 * (gctl reserve): during the reservation's window, or before it when the job would
 * still run at its start (reservation.h). Checked where Priority is. */
#define SCHEDULER_REASON_RESERVATION "Reservation"
/* JobArrayTaskLimit (Slurm's name): the job's group (j->sched.group) has max_concurrent > 0 and
 * that many of its jobs are running (group->running, kept by the caller) or starting in
 * this pass. Checked after BeginTime and before MaxRunningJobs. */
#define SCHEDULER_REASON_GROUP_LIMIT "JobArrayTaskLimit"
/* Quota: a running limit of the job's user or project (quota.h: max_running_jobs,
 * max_running_gpus, max_gpu_hours; gctl quota show) is reached, counting the jobs started
 * in this pass. Checked after JobArrayTaskLimit; other users' jobs keep starting. */
#define SCHEDULER_REASON_QUOTA "Quota"
/* UserLookup: the pass chose the job, but its user is not known yet (the user database,
 * e.g. LDAP, is slow or down; src/daemon/userdb.h): it waits, out of the queue, until an
 * answer comes, and is never failed for it. Set by the daemon, not by the pass. */
#define SCHEDULER_REASON_USER_LOOKUP "UserLookup"

/* The queued (PD) jobs in scheduling order: priority descending, then id ascending.
 * Insertion and removal are a binary search and a memmove; appending a new job (ids only
 * grow) behind the others of its priority moves nothing. A queued job's priority must not
 * change while it is in the queue (remove it, change it, insert it again). */
struct scheduler_queue {
    struct job **jobs;
    size_t len, cap;
};

void scheduler_queue_init(struct scheduler_queue *q);
void scheduler_queue_free(struct scheduler_queue *q); /* frees the array, not the jobs */
void scheduler_queue_insert(struct scheduler_queue *q, struct job *j);
/* 0, or -1 if j is not in the queue. Clears j->expected_start (a plan for its place). */
int scheduler_queue_remove(struct scheduler_queue *q, struct job *j);
/* Removes jobs[0..n), which must be in queue order (as scheduler_pass returns the jobs
 * to start), in one sweep; returns how many were removed. Removing the started jobs one
 * by one would move the rest of the queue once per job. */
size_t scheduler_queue_remove_many(struct scheduler_queue *q, struct job *const *jobs, size_t n);
/* Makes q the PD jobs among jobs[0..n) (any order), sorted once: for loading many jobs,
 * where inserting them one by one in random priority order would be quadratic. */
void scheduler_queue_rebuild(struct scheduler_queue *q, struct job *const *jobs, size_t n);
/* <0 if a goes before b in the scheduling order, >0 after, 0 same job id. */
int scheduler_order(const struct job *a, const struct job *b);

/* The queued jobs whose begin_time (--begin) is to come, which the daemon keeps out of
 * the queue (and so out of every pass) until their time: a min-heap by begin_time, then
 * id. Each job's begin_heap_pos is 1 + its position (0: not in the heap), so any job
 * leaves it (hold, cancel, a changed begin time or priority) in O(log n). The heap does
 * not own the jobs. */
struct scheduler_begin_heap {
    struct job **jobs;
    size_t len, cap;
};

void scheduler_begin_heap_init(struct scheduler_begin_heap *h);
/* Frees the array; the jobs are neither freed nor touched (they may be gone). */
void scheduler_begin_heap_free(struct scheduler_begin_heap *h);
void scheduler_begin_heap_push(struct scheduler_begin_heap *h, struct job *j);
/* 0, or -1 if j is not in the heap. */
int scheduler_begin_heap_remove(struct scheduler_begin_heap *h, struct job *j);
/* The earliest begin_time in the heap, 0 if it is empty. */
double scheduler_begin_heap_next(const struct scheduler_begin_heap *h);
/* Takes out and returns the job with the earliest begin_time if that is <= now, else
 * NULL (call until NULL to take every job whose time has come). */
struct job *scheduler_begin_heap_pop_due(struct scheduler_begin_heap *h, double now);

struct scheduler_input {
    struct job *const *queued; /* PD jobs in scheduling order (a scheduler_queue) */
    size_t n_queued;
    struct job *const *running; /* R jobs, any order; their gpu_mask holds GPUs */
    size_t n_running;
    const struct gpu_set *gpus; /* NULL: no GPUs */
    uint64_t unmanaged;         /* bit i: GPU with NVML index i has outside processes */
    int64_t memory_total_mb;    /* the machine's memory (MemTotal); 0 = unknown, no check */
    /* Out (may be NULL): when the caller must run a pass again although nothing else
     * changes, 0 if never: the earliest begin_time of the jobs that wait for it (their
     * reason is BeginTime) or, with reservations (backfill), the next time the plan
     * changes by itself (a running job without a time limit reaches its planned end, a
     * reserved job has waited default_time_limit). */
    double *next_pass;
    double now;
    /* Per position in gpus: MiB of the GPU's memory taken by other than gflow jobs (total
     * - free - what the running jobs' processes use), which shared jobs cannot pack
     * into; NULL: none. */
    const int64_t *outside_mib;
    /* Bit i: MIG instance gpus->migs[i] has processes of no running job (outside ones). */
    uint64_t mig_unmanaged;
    /* GPU reservations not cancelled and not over (gctl reserve; reservation.h): another
     * user's job does not start on their GPUs if it would run inside their window (it
     * waits with Reservation when it fits nowhere else); the holder's job takes its
     * active reservations' GPUs first; backfill plans jobs around the windows. Whole-GPU
     * jobs only: MIG and GPU-less jobs are not affected. Sorted by start (backfill's
     * plan walks them in that order and stops at the first past a job's end). */
    const struct scheduler_reservation *reservations;
    size_t n_reservations;
    /* Bit i: the GPU with NVML index i takes no new job (drained, or compute mode
     * Prohibited): as a GPU whose state is unknown (reason GpusUnavailable), its MIG
     * instances too. Its running jobs run on. */
    uint64_t closed;
    /* Bit i: the GPU with NVML index i takes no shared job (compute mode
     * EXCLUSIVE_PROCESS: a second process cannot open it). Shared jobs go elsewhere or
     * wait (Resources, or what else stands in their way). */
    uint64_t no_share;
};

/* MIG jobs (j->mig_profile set) take j->mig_count free instances of their profile: free
 * means not held by a running job (their mig_uuids) or one started in this pass, with
 * no outside processes, on a GPU that is allowed and not lost. The pass sets a started
 * MIG job's mig_uuids (malloc'd, the old value freed) and leaves its gpu_mask 0; a GPU
 * in MIG mode is never given to a job that asks for whole GPUs. A MIG job that waits
 * gets the reasons above: Priority, Unmanaged, GpusRestricted, GpusUnavailable (its
 * instances' state is unknown to NVML) or Resources. */

/* Writes the jobs to start into start[] (capacity in->n_queued) in the order they should
 * start, sets each one's gpu_mask (0 for a job without GPUs) and clears its
 * wait_reason, sets wait_reason of every other queued job and, with backfill, the
 * expected_start of every queued job, and returns how many start. expected_start (greedy
 * leaves it as it is): a reserved job's shadow time; for every other waiting job an
 * estimate, planned in queue order after the reservations as if each took its GPUs when
 * the plan has them free (no filling of holes, gctl reserve's windows not counted), a
 * lower bound where it waits for something else too (memory, quota, array limit,
 * running-jobs limit); a job without whole GPUs gets the earliest planned end of a
 * running job; begin_time for a job whose begin time is to come; 0 for one blocked by
 * its dependencies, one that does not fit on the usable GPUs, or when the machine has
 * no GPUs. O(GPUs) more per waiting job; past SCHEDULER_ESTIMATE_MAX estimated jobs a
 * lower bound that plans nothing in (O(1)).
 * Nothing else is changed (the caller moves the jobs to R). */
size_t scheduler_pass(const struct scheduler_input *in, const struct scheduler_policy *policy,
                      struct job **start);

/* Whether j's request can ever be met on this machine, checked at submit: j->gpus within
 * the GPUs in `allowed` (NVML-index mask, 0 = all; meant for the fixed restriction such
 * as the daemon's CUDA_VISIBLE_DEVICES, not the runtime one that only makes jobs wait),
 * gpu_memory_mb within their memory, and a shared job declares its memory. Unavailable
 * GPUs (gpu_info_usable false) and GPUs in MIG mode do not count for j->gpus. A MIG job
 * needs j->mig_count instances of its profile (on usable GPUs in `allowed`); the refusal
 * names the profiles there are. 0, or -1 with *reason (the caller frees it), e.g.
 * "requests 5 GPUs but this machine has 4", "requests 6 GPUs but only 4 of the 6 GPUs
 * are usable (GPU 2, 5: NVML: GPU is lost)". */
int scheduler_check_feasible(const struct job *j, const struct gpu_set *gpus, uint64_t allowed,
                             char **reason);

#endif
