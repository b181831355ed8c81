/* gpualloc: which GPUs a job gets, once the scheduling pass knows which GPUs it may use.
 * Pure: works on a bitmask of candidate GPUs (bit i = set->gpus[i], the position in the
 * gpu_set, not the NVML index) and the set's interconnect matrix.
 *
 * Strategies (daemon.gpu_allocation_strategy):
 *   topology   (default) a set whose worst pairwise link is closest (NVLink before one
 *              PCIe switch before ... before across NUMA nodes), placed best fit: in the
 *              group of candidates close enough to each other with the fewest members
 *              that still holds k (wider levels break ties), members taken from the
 *              tightest subgroups first, so a 1-GPU job goes into a partly used NVLink
 *              island and leaves whole islands whole. Remaining ties go to the lowest
 *              positions, so on a uniform machine (or with no link matrix) it equals
 *              sequential.
 *   sequential the lowest free positions.
 *   random     uniformly random free GPUs, from a caller-held seedable state. */
#ifndef GFLOW_GPUALLOC_H
#define GFLOW_GPUALLOC_H

#include <stdint.h>

#include "gpuinfo.h"

enum gpualloc_strategy {
    GPUALLOC_TOPOLOGY, /* default: the zero value */
    GPUALLOC_SEQUENTIAL,
    GPUALLOC_RANDOM,
};

const char *gpualloc_strategy_name(enum gpualloc_strategy s); /* "topology", ... */
/* 0, or -1 if s is not a strategy name (case-insensitive). */
int gpualloc_strategy_parse(const char *s, enum gpualloc_strategy *out);

/* Chooses k GPUs among the candidate positions (k >= 1, positions < set->n_gpus).
 * rng is the random strategy's state (any value; advanced on use; may be NULL for the
 * other strategies). Returns the chosen positions as a mask, or 0 if there are fewer
 * than k candidates. */
uint64_t gpualloc_choose(const struct gpu_set *set, uint64_t candidates, int k,
                         enum gpualloc_strategy strategy, uint64_t *rng);

/* The worst link between any two GPUs of mask (GPU_LINK_SELF for one GPU; unknown
 * pairs count as GPU_LINK_UNKNOWN, a missing matrix as GPU_LINK_SYSTEM). */
enum gpu_link gpualloc_worst_link(const struct gpu_set *set, uint64_t mask);

#endif
