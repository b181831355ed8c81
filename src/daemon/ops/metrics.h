/* metrics: what GET /metrics exposes (Prometheus text format 0.0.4, docs/operations.md).
 * The counters and histograms are kept by the jobs module as jobs change state and by
 * the scheduling pass (struct metrics_counters, since the daemon started, as Prometheus
 * counters are); metrics_render writes them with the gauges read at scrape time: jobs by
 * state and user, the history's totals, the queue, the daemon process, and one series per
 * GPU under the names of NVIDIA's DCGM exporter, so that dashboards made for it work. */
#ifndef GFLOWD_METRICS_H
#define GFLOWD_METRICS_H

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

/* Observations for the three histograms (seconds). */
void metrics_observe_wait(struct metrics_counters *m, double seconds);
void metrics_observe_run(struct metrics_counters *m, double seconds);
void metrics_observe_pass(struct metrics_counters *m, double seconds);

struct gflowd;
struct strbuf;
/* The whole exposition, appended to out. */
void metrics_render(const struct gflowd *d, struct strbuf *out);

#endif
