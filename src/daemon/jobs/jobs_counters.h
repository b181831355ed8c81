/* jobs_counters: what the jobs did since the daemon started, kept by the job table as
 * jobs change state and by the scheduling pass, and rendered by ops/metrics.c for GET
 * /metrics (Prometheus counters and histograms). */
#ifndef GFLOWD_JOBS_COUNTERS_H
#define GFLOWD_JOBS_COUNTERS_H

#include <stdint.h>

#include "job.h"

#define METRICS_BUCKETS 12

/* A histogram: observations counted per bucket (not cumulative: made so when shown). */
struct metrics_histogram {
    uint64_t count;
    double sum;
    uint64_t buckets[METRICS_BUCKETS]; /* the last one: above every bound (+Inf) */
};

struct metrics_counters {
    uint64_t submitted;                                /* jobs accepted */
    uint64_t started;                                  /* jobs that went to R */
    uint64_t ended[JOB_STATE_COUNT][JOB_REASON_COUNT]; /* by final state and reason */
    struct metrics_histogram wait;                     /* submit to start, seconds */
    struct metrics_histogram run;                      /* start to end, seconds (jobs that ran) */
    struct metrics_histogram pass;                     /* a scheduling pass, seconds */
};

/* The buckets' upper bounds (seconds): of the job histograms (wait, run) and of the
 * pass's. */
extern const double jobs_counters_job_bounds[METRICS_BUCKETS - 1];
extern const double jobs_counters_pass_bounds[METRICS_BUCKETS - 1];

/* Observations for the three histograms (seconds). */
void metrics_observe_wait(struct metrics_counters *m, double seconds);
void metrics_observe_run(struct metrics_counters *m, double seconds);
void metrics_observe_pass(struct metrics_counters *m, double seconds);

#endif
