/* jobs_counters: the counters and histograms of GET /metrics (see jobs_counters.h). */
#include "jobs_counters.h"

/* Bucket bounds (seconds) of the job histograms: a second to a week. */
const double jobs_counters_job_bounds[METRICS_BUCKETS - 1] = {
    1, 10, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400};
/* ... and of the scheduling pass: 10 us to a second. */
const double jobs_counters_pass_bounds[METRICS_BUCKETS - 1] = {1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3,
                                                               0.01, 0.05, 0.1,  0.5,  1};

static void observe(struct metrics_histogram *h, const double *bounds, double v)
{
    int b = 0;
    while (b < METRICS_BUCKETS - 1 && v > bounds[b])
        b++;
    h->buckets[b]++;
    h->count++;
    h->sum += v;
}

void metrics_observe_wait(struct metrics_counters *m, double seconds)
{
    observe(&m->wait, jobs_counters_job_bounds, seconds < 0 ? 0 : seconds);
}

void metrics_observe_run(struct metrics_counters *m, double seconds)
{
    observe(&m->run, jobs_counters_job_bounds, seconds < 0 ? 0 : seconds);
}

void metrics_observe_pass(struct metrics_counters *m, double seconds)
{
    observe(&m->pass, jobs_counters_pass_bounds, seconds);
}
