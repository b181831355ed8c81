/* metrics: the figures a replay is judged by (docs/replay.md defines each). */
#ifndef GFLOW_REPLAY_METRICS_H
#define GFLOW_REPLAY_METRICS_H

#include <stdio.h>

#include "sim.h"
#include "trace.h"

/* Jobs of at least this many GPUs are the "big" ones, whose waits are shown apart. */
#define REPLAY_BIG_GPUS 4
/* Bounded slowdown's floor on the run time (Feitelson): short jobs do not dominate. */
#define REPLAY_SLOWDOWN_BOUND 10.0

/* The window of the fairness index: what each user got per hour. */
#define REPLAY_FAIR_WINDOW 3600.0

struct replay_waits {
    size_t jobs;
    double mean, p50, p95, p99; /* seconds; NAN when there are no jobs */
};

struct replay_metrics {
    size_t jobs;    /* started (skipped jobs are not counted anywhere) */
    size_t skipped; /* more GPUs than the machine has */
    struct replay_waits all, big;
    double max_wait;    /* seconds: the longest anyone waited (starvation) */
    double utilisation; /* GPU-seconds used / (GPUs x makespan), 0..1 */
    double makespan;    /* first submission to last end, seconds */
    double slowdown;    /* mean bounded slowdown */
    /* Jain's index over users' GPU-seconds, per REPLAY_FAIR_WINDOW window in which jobs
     * waited and two users or more had jobs waiting or running, averaged over those
     * windows (NAN: no such window). Over the whole trace every user gets the GPU-time
     * they asked for once all jobs have run, whatever the policy; fairness is what they
     * got while competing. */
    double jain;
    size_t contended_windows;
    double jain_total; /* the same over the whole trace's GPU-seconds (policy-blind) */
    size_t users;      /* users with started jobs (jobs without a user: one user) */
};

void replay_metrics_compute(const struct replay_trace *t, const struct replay_outcome *o,
                            struct replay_metrics *m);
/* The load the trace offers a machine of n_gpus: the GPU-seconds its jobs ask for (run
 * time, or time limit when shorter; jobs larger than the machine left out) over n_gpus x
 * the span of its arrivals. Above 1 the queue can only grow. 0 with fewer than 2 times. */
double replay_offered_load(const struct replay_trace *t, int n_gpus);
/* The p-th percentile (0 < p <= 100) of sorted[0..n) by the nearest-rank method: the
 * smallest value with at least p% of the values at or below it; NAN for n = 0. */
double replay_percentile(const double *sorted, size_t n, double p);
/* Writes the wait-time CDF of the started jobs as gnuplot data: a "# policy" comment,
 * then "wait_s fraction" lines (at most ~1000 points), then two blank lines (one data
 * set per policy, addressed by gnuplot's `index`). */
void replay_write_cdf(FILE *f, const char *policy, const struct replay_outcome *o);

#endif
