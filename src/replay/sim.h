/* sim: replays a trace through the real scheduling pass (scheduler_pass and the GPU
 * allocator of src/core) in virtual time: an event loop over submissions and ends, no
 * processes and no sleeping. At each event time the submitted jobs are queued, the
 * ended ones free their GPUs, and one pass runs; the jobs it starts end at
 * start + run time, or at start + time limit when the limit is shorter. */
#ifndef GFLOW_REPLAY_SIM_H
#define GFLOW_REPLAY_SIM_H

#include <stdbool.h>
#include <stddef.h>

#include "scheduler.h"
#include "timeplan.h"
#include "trace.h"

/* Virtual time starts here, not at 0, because a job's start_time 0 means "not started"
 * to the code that reads jobs (as the daemon's unix times never are). */
#define REPLAY_EPOCH 1e9

/* The policies the replay knows, in the order --policy all runs them (NULL-ended). */
extern const char *const replay_policy_names[];
/* The scheduler settings of a policy by name: the one place that maps a name to a
 * struct scheduler_policy. 0, or -1 if the name is unknown. */
int replay_policy(const char *name, struct scheduler_policy *out);
/* A policy's untimed_plan that says "plan untimed jobs as the daemon does": from the
 * run times of the jobs ended so far in the replay (daemon.default_time_plan's default,
 * computed before each pass as jobs_schedule does). */
#define REPLAY_UNTIMED_PLAN_HISTORY (-1.0)
/* --time-plan: the daemon.default_time_plan of the policies that plan as the daemon
 * (backfill, backfill+fairshare) instead of the daemon's default. */
void replay_set_time_plan(const struct time_plan *plan);

/* The fair-share policies' usage half-life (seconds; --half-life): 1 h by default,
 * shorter than the daemon's 7 days because the fairness index (JAIN) is measured per
 * hour, and a week's memory holds back in this hour a user who ran much last week. */
#define REPLAY_HALF_LIFE_DEFAULT 3600.0
void replay_set_half_life(double secs);

/* What happened to one job of the trace (same index as the trace's records). */
struct replay_job_result {
    bool skipped; /* asked for more GPUs than the machine has: never queued */
    bool started;
    double wait; /* seconds from submission to start */
    double run;  /* seconds it ran: its run time, or its time limit if shorter */
};

struct replay_outcome {
    struct replay_job_result *jobs; /* trace->n of them */
    size_t n;
    size_t skipped;   /* jobs asking more GPUs than the machine has */
    size_t unstarted; /* queued jobs the policy never started (0 unless it is broken) */
    size_t passes;    /* scheduling passes run */
    int n_gpus;
};

/* Replays trace t (sorted by submission) on a machine of n_gpus identical GPUs (1 to
 * GPUINFO_MAX_GPUS) under policy; out is filled (free it with replay_outcome_free). */
void replay_simulate(const struct replay_trace *t, int n_gpus,
                     const struct scheduler_policy *policy, struct replay_outcome *out);
void replay_outcome_free(struct replay_outcome *out);

#endif
