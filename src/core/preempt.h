/* preempt: which running jobs to stop so that a waiting job gets its GPUs (opt-in
 * preemption, scheduler.preempt). A pure function, like the scheduling pass: the daemon
 * decides when to ask (preempt_pick_head) and stops the victims itself.
 *
 * A victim is a running job that asked for it (gbatch --requeue), whose priority is at
 * most the threshold, that is not already being stopped (end_request) and holds whole
 * GPUs (MIG instances are not preempted). The rule, in this order:
 *   1. the fewest jobs whose GPUs, with those free now, make enough;
 *   2. among as many, lower priority first;
 *   3. then the most recently started first (it loses the least work), then the higher
 *      id.
 * The request is a count (any `gpus` of the `usable` GPUs) or an exact mask (each GPU
 * of it must be freed, e.g. for a reservation of given GPUs). */
#ifndef GFLOW_PREEMPT_H
#define GFLOW_PREEMPT_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"

struct preempt_request {
    int gpus;         /* count mode: GPUs needed (used when mask is 0) */
    uint64_t mask;    /* mask mode: these GPUs (NVML indices) must be free */
    uint64_t usable;  /* NVML indices that count once freed (allowed, state known,
                       * no outside processes); count mode only */
    uint64_t free;    /* NVML indices free now (usable and held by no job) */
    int max_priority; /* victims have priority <= this */
};

/* Whether j may be preempted for a request with this threshold. */
bool preempt_candidate(const struct job *j, int max_priority);

/* Writes the victims among running[0..n) into victims[] (capacity n), in the order of
 * the rule above, and returns how many; 0 when no set of candidates frees enough (or
 * nothing needs freeing). */
size_t preempt_select(const struct preempt_request *req, struct job *const *running, size_t n,
                      struct job **victims);

/* The queued job preemption acts for: the first of queued[0..n) (scheduling order,
 * after a pass) that waits for GPUs (any GPU reason: Resources, Priority, GpuMemory,
 * Unmanaged, GpusRestricted, GpusUnavailable), if it waits for free whole GPUs
 * (Resources or Priority; gpus > 0, not a MIG or shared job); else NULL. */
struct job *preempt_pick_head(struct job *const *queued, size_t n);

#endif
