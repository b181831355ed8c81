/* scheduler: the scheduling pass, a pure function of (active jobs, policy, now) -> which
 * queued jobs start now. It has no I/O so it is unit-tested and benchmarked directly.
 *
 * Order: higher priority first, then lower id (submission order). Jobs without GPUs
 * start at once, up to policy.max_running_jobs running (0 = no limit). Later issues
 * add GPUs, memory, dependencies and backfill here. */
#ifndef GFLOW_SCHEDULER_H
#define GFLOW_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"

struct scheduler_policy {
    int64_t max_running_jobs; /* 0 = no limit */
};

/* Reasons a queued job waits (static strings, shown in NODELIST(REASON)). */
#define SCHEDULER_REASON_PRIORITY "Priority"
#define SCHEDULER_REASON_MAX_RUNNING "MaxRunningJobs"

/* jobs: every active job (PD, H and R; any order; the array is reordered). Writes the
 * jobs to start into start[] (capacity n) in the order they should start, sets
 * wait_reason of every PD job that waits, and returns how many to start. */
size_t scheduler_pass(struct job **jobs, size_t n, const struct scheduler_policy *policy, double now,
                  struct job **start);

#endif
