/* preempt: victim selection for opt-in preemption (see preempt.h). */
#include "preempt.h"

#include <stdlib.h>
#include <string.h>

#include "scheduler.h"
#include "util.h"

static int popcount(uint64_t m)
{
    return __builtin_popcountll(m);
}

bool preempt_candidate(const struct job *j, int max_priority)
{
    /* A shared job holds a GPU with others: stopping it alone frees nothing. */
    return j->state == JOB_RUNNING && j->requeue && j->priority <= max_priority &&
           j->end_request == JOB_END_NONE && j->gpu_mask != 0 && !j->mig_profile &&
           !(j->shared && j->gpu_memory_mb > 0);
}

/* The rule's order: lower priority, then later start, then higher id first. */
static int victim_order(const void *pa, const void *pb)
{
    const struct job *a = *(struct job *const *)pa, *b = *(struct job *const *)pb;
    if (a->priority != b->priority)
        return a->priority < b->priority ? -1 : 1;
    if (a->start_time != b->start_time)
        return a->start_time > b->start_time ? -1 : 1;
    return a->id > b->id ? -1 : a->id < b->id ? 1 : 0;
}

/* The sum of the k largest of v[from..n). */
static int largest_sum(const int *v, size_t from, size_t n, int k)
{
    int *copy = xmalloc((n - from + 1) * sizeof(*copy));
    size_t m = 0;
    for (size_t i = from; i < n; i++) {
        size_t at = m++; /* insertion sort, descending: candidates are few */
        for (; at > 0 && copy[at - 1] < v[i]; at--)
            copy[at] = copy[at - 1];
        copy[at] = v[i];
    }
    int sum = 0;
    for (size_t i = 0; i < m && (int)i < k; i++)
        sum += copy[i];
    free(copy);
    return sum;
}

/* Count mode: the fewest candidates that free `need` usable GPUs, chosen greedily in
 * the rule's order (taking one only if the rest can still be made up with the slots
 * left, so the count stays the fewest). */
static size_t select_count(struct job **cand, size_t m, uint64_t usable, int need,
                           struct job **victims)
{
    int *gain = xmalloc((m ? m : 1) * sizeof(*gain));
    for (size_t i = 0; i < m; i++)
        gain[i] = popcount(cand[i]->gpu_mask & usable);
    int slots = 0;
    while ((size_t)slots < m && largest_sum(gain, 0, m, slots) < need)
        slots++;
    size_t n = 0;
    if (largest_sum(gain, 0, m, slots) >= need) {
        for (size_t i = 0; i < m && need > 0; i++) {
            if (gain[i] == 0)
                continue;
            int rest = need - gain[i];
            if (rest > 0 && largest_sum(gain, i + 1, m, slots - 1) < rest)
                continue;
            victims[n++] = cand[i];
            need = rest;
            slots--;
        }
    }
    free(gain);
    return need <= 0 ? n : 0;
}

/* Mask mode: every candidate holding a GPU of `need`; 0 if one of them is held by a job
 * that may not be preempted (or by nothing, yet not free). */
static size_t select_mask(struct job **cand, size_t m, uint64_t need, struct job **victims)
{
    uint64_t covered = 0;
    size_t n = 0;
    for (size_t i = 0; i < m; i++) {
        if (cand[i]->gpu_mask & need) {
            victims[n++] = cand[i];
            covered |= cand[i]->gpu_mask & need;
        }
    }
    return covered == need ? n : 0;
}

size_t preempt_select(const struct preempt_request *req, struct job *const *running, size_t n,
                      struct job **victims)
{
    struct job **cand = xmalloc((n ? n : 1) * sizeof(*cand));
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (preempt_candidate(running[i], req->max_priority))
            cand[m++] = running[i];
    qsort(cand, m, sizeof(*cand), victim_order);
    size_t out = 0;
    if (req->mask) {
        uint64_t need = req->mask & ~req->free;
        if (need)
            out = select_mask(cand, m, need, victims);
    } else {
        int need = req->gpus - popcount(req->free & req->usable);
        if (need > 0)
            out = select_count(cand, m, req->usable, need, victims);
    }
    free(cand);
    return out;
}

/* Whether a wait reason is about GPUs (of any kind): the job waits for the machine,
 * not for something of its own (dependencies, begin time, array limit, memory). */
static bool waits_for_gpus(const char *r)
{
    static const char *const gpu_reasons[] = {
        SCHEDULER_REASON_RESOURCES,       SCHEDULER_REASON_PRIORITY,
        SCHEDULER_REASON_GPU_MEMORY,      SCHEDULER_REASON_UNMANAGED,
        SCHEDULER_REASON_GPUS_RESTRICTED, SCHEDULER_REASON_GPUS_UNAVAILABLE};
    for (size_t i = 0; r && i < sizeof(gpu_reasons) / sizeof(gpu_reasons[0]); i++)
        if (strcmp(r, gpu_reasons[i]) == 0)
            return true;
    return false;
}

struct job *preempt_pick_head(struct job *const *queued, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct job *j = queued[i];
        const char *r = j->wait_reason;
        if (!waits_for_gpus(r))
            continue;
        /* Only a lack of free GPUs is helped by stopping jobs: not memory short on them,
         * outside processes (which may be a stopped job's, not yet seen gone) or GPUs
         * that may not or cannot be used. */
        if (strcmp(r, SCHEDULER_REASON_RESOURCES) != 0 && strcmp(r, SCHEDULER_REASON_PRIORITY) != 0)
            return NULL;
        if (j->gpus <= 0 || j->mig_profile || (j->shared && j->gpu_memory_mb > 0))
            return NULL;
        return queued[i];
    }
    return NULL;
}
