/* quota_state: the daemon's quota records, the counters that core's quota rules
 * (src/core/quota.h) are checked against: the baseline from gflow.toml's [quota],
 * the runtime overrides of gctl quota (kept in the store as the setting
 * "quota_overrides", so they survive restarts), and one struct quota_usage per user and
 * per project that has active jobs or limits. Active jobs point at their user's and
 * project's records; jobs.c tells this module each job that enters the table and each
 * change of state, so the counts move by O(1) per start and end, and the scheduling
 * pass reads them without walking any job.
 *
 * max_gpu_hours: GPU-seconds in the current period (quota.period) of the ended jobs
 * (read from the store at start-up) and of the running ones so far. When the period
 * turns (quotas_tick) every count starts again from the running jobs.
 *
 * The policy room (src/daemon/policy/, docs/design.md §3): these quota records and the
 * reservation table (reservation_table.h), the daemon's state for core's rules. It may
 * call store/ only; the job table above it moves these counters. */
#ifndef GFLOWD_QUOTA_STATE_H
#define GFLOWD_QUOTA_STATE_H

#include <jansson.h>
#include <stdbool.h>

#include "job.h"
#include "quota.h"

struct store;
struct quotas;

struct quotas *quotas_new(void);
void quotas_free(struct quotas *q);

/* Sets the baseline (copied) and recomputes every record's limits. Its period counts
 * from quotas_load (start-up): the daemon does not change it while it runs. */
void quotas_set_config(struct quotas *q, const struct quota_config *c);
const struct quota_config *quotas_config(const struct quotas *q);
/* Reads the overrides and the ended jobs' GPU time in the current period from the store
 * (start-up, before the active jobs are added). 0, or -1 with *err. */
int quotas_load(struct quotas *q, struct store *s, double now, char **err);

/* The record of a user or project; NULL if there is none and !create. */
struct quota_usage *quotas_subject(struct quotas *q, enum quota_scope scope, const char *name,
                                   bool create);

/* j entered the table of active jobs (submitted or loaded): points it at its records and
 * counts it in its state. */
void quotas_job_added(struct quotas *q, struct job *j);
/* j moved from `from` to its current state (start_time, end_time set). */
void quotas_job_moved(struct quotas *q, struct job *j, enum job_state from);
/* Turns the period when now has reached its end. True if it did (limits may free up). */
bool quotas_tick(struct quotas *q, double now);

/* Runtime overrides (gctl quota set/clear): sets the limits given (>= 0 fields of l)
 * for a user or project (name; NULL: the default of the scope), or removes them (fields:
 * which limits, NULL = the whole entry; *removed, when not NULL: whether any of them was
 * set), and writes them to the store (in the open transaction). 0, or -1 with *err. */
int quotas_override_set(struct quotas *q, struct store *s, enum quota_scope scope, const char *name,
                        const struct quota_limits *l, char **err);
int quotas_override_clear(struct quotas *q, struct store *s, enum quota_scope scope,
                          const char *name, const bool *fields, bool *removed, char **err);

/* Whether a submission of n jobs for user (and n_project of them for project, which may
 * be NULL) stays within max_queued_jobs. NULL, or the refusal to show (caller frees):
 * "user alice has 10 queued jobs, the limit max_queued_jobs is 10; ...". */
char *quotas_check_submit(struct quotas *q, const char *user, size_t n, const char *project,
                          size_t n_project);

/* GET /v1/quotas: the period, the defaults, and each user and project with its effective
 * limits, the overrides set for it and what it uses now. user/project: only that one
 * (NULL: all). */
json_t *quotas_status_json(struct quotas *q, const char *user, const char *project, double now);

#endif
