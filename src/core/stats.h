/* stats: the aggregation behind gstats (GET /v1/stats): jobs of a period grouped by user,
 * project or GPU, with counts by final state, GPU-hours, mean and p95 wait, mean run
 * time, failure rate and the commonest reasons; and GPU utilisation samples summarised
 * per GPU with a coarse time series. Pure code: the daemon feeds it rows from its store. */
#ifndef GFLOW_STATS_H
#define GFLOW_STATS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum stats_by { STATS_BY_USER, STATS_BY_PROJECT, STATS_BY_GPU };

/* "user", "project" or "gpu". 0, or -1 if unknown. */
int stats_by_parse(const char *s, enum stats_by *out);
const char *stats_by_name(enum stats_by by);

/* One job of the period, as the store has it (strings may be NULL). */
struct stats_job {
    const char *user;
    const char *project;
    const char *gpu_ids; /* "0,2" while or after it ran on GPUs; NULL or "" for none */
    int state;           /* enum job_state: R, CD, F, CA or TO */
    double submit_time, start_time, end_time; /* 0: not happened */
    int64_t gpus;
    int reason; /* enum job_reason */
    /* Its GPUs' energy (gpuacct.h), when energy_known; then user and project are wanted
     * whatever the grouping (energy per both). */
    bool energy_known;
    double energy_wh;
};

struct stats;
/* A period [since, until); now: the time running jobs' run time is counted up to (their
 * time so far, at most until). */
struct stats *stats_new(enum stats_by by, double since, double until, double now);
void stats_free(struct stats *s);
/* Counts one job in its group(s) (a job on two GPUs counts in both, with one GPU's share
 * of its GPU-hours each) and in the total. */
void stats_add(struct stats *s, const struct stats_job *j);
/* {"by": ..., "since": ..., "until": ..., "groups": [...], "total": {...}, "energy":
 * {"users": [...], "projects": [...]}}; groups sorted by name (GPUs by index); each
 * group and the total has energy_kwh (null when no job of it has a known energy), and
 * "energy" gives it per user and per project ({"name", "energy_kwh", "jobs": how many
 * had a known energy}) whatever the grouping. */
json_t *stats_json(const struct stats *s);

/* The p-th percentile (0 < p <= 100) of v[0..n) by nearest rank (the smallest value with
 * at least p% of the values at or below it); v is reordered. 0 when n is 0. */
double stats_percentile(double *v, size_t n, double p);

/* GPU utilisation samples. */
struct stats_gpu;
/* buckets: how many equal slices of [since, until) the time series has (>= 1). */
struct stats_gpu *stats_gpu_new(double since, double until, int buckets);
void stats_gpu_free(struct stats_gpu *g);
void stats_gpu_add(struct stats_gpu *g, int gpu, double time, int util);
/* {"since", "until", "bucket_secs", "gpus": [{"index", "samples", "mean", "max", "first",
 * "last", "series": [{"start", "samples", "mean", "max"}]}]}; slices without samples are
 * left out of a series. */
json_t *stats_gpu_json(const struct stats_gpu *g);

#endif
