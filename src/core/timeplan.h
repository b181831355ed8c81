/* timeplan: how long a job without --time is planned to run (daemon.default_time_plan).
 *
 * Backfill needs an end for every job; an untimed job has none. The plan is either a
 * fixed duration ("24h", "08:00:00") or a percentile of the run times of recent jobs
 * ("p95": the 95th percentile of the last TIME_PLAN_HISTORY jobs that ran and ended,
 * cancelled ones left out), falling back to a fixed duration (the caller's, i.e.
 * scheduler.default_time_limit) while fewer than TIME_PLAN_MIN_RUNS have ended. The
 * history is a ring the daemon feeds as jobs end, with a sorted copy kept beside it, so
 * a pass reads one double whatever the queue's length. */
#ifndef GFLOW_TIMEPLAN_H
#define GFLOW_TIMEPLAN_H

#include <stdbool.h>
#include <stddef.h>

/* The run times a percentile plan looks at: the last this many ended jobs. */
#define TIME_PLAN_HISTORY 1000
/* Fewer ended jobs than this in the history: the fallback duration is used. */
#define TIME_PLAN_MIN_RUNS 20

struct time_plan {
    int percentile; /* 1..100: that percentile of the history; 0: fixed */
    double fixed;   /* seconds, when percentile is 0 */
};

/* Parses "pN" (N a whole number 1..100) or a duration parse_duration reads ("24h",
 * "90m", "08:00:00"). 0, or -1 with *err (the caller frees it), one line saying what is
 * wrong and what is accepted. */
int time_plan_parse(const char *s, struct time_plan *out, char **err);

struct run_history {
    double runs[TIME_PLAN_HISTORY];   /* a ring: seconds each job ran */
    double sorted[TIME_PLAN_HISTORY]; /* the same n values, ascending */
    size_t n;                         /* filled, up to TIME_PLAN_HISTORY */
    size_t next;                      /* where the next run goes */
};

void run_history_init(struct run_history *h);
/* A job ran secs seconds and ended (secs <= 0 is ignored). The sorted copy is kept by
 * two binary searches and memmoves of at most 8 KB: about a microsecond. */
void run_history_add(struct run_history *h, double secs);
/* The nearest-rank percentile pct (1..100) of the history (smallest run with at least
 * pct% of the runs at or below it); 0 when it is empty. O(1): the replay asks before
 * every pass, and a job ends before most. */
double run_history_percentile(struct run_history *h, int pct);

/* The planned run time of an untimed job under plan p: the fixed duration, or the
 * percentile of h (at least 1 s), or fallback while h holds fewer than
 * TIME_PLAN_MIN_RUNS runs. */
double time_plan_value(const struct time_plan *p, struct run_history *h, double fallback);

#endif
