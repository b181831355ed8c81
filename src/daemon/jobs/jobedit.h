/* jobedit: changing jobs after their submission. gjob update (PATCH /v1/jobs/{id})
 * changes a queued or held job in place; gjob redo (POST /v1/jobs/{id}/redo) submits a
 * new job from an old one, and with cascade also redoes the jobs that were cancelled
 * because of it (DependencyFailed), wired to the new jobs. Both rebuild the job's spec
 * from its stored record, apply the changes and check the result exactly like a
 * submission (jobspec.c), so an edit can never make a job that could not be submitted.
 * Works on the job table and its store only, so it is unit-tested. */
#ifndef GFLOWD_JOBEDIT_H
#define GFLOWD_JOBEDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobspec.h"

struct jobs;
struct gflow_config;

struct jobedit_ctx {
    struct jobs *jobs;
    const struct jobspec_limits *limits; /* what this machine offers */
    const struct jobspec_owner *caller;  /* who asks, and now */
    int64_t max_active;                  /* limits.max_active_jobs_per_user; 0: none */
    const struct gflow_config *cfg;      /* [projects] policy of a redo; NULL: none */
};

/* Updates j (an active job the caller may act on) with the spec fields of over, and
 * with max_concurrent >= 0 the limit of its group. *changes: [{"field", "old", "new"}].
 * With dry_run every check runs and *changes is computed, but nothing is changed (a
 * preview: PATCH ?dry_run=1).
 * Returns 0, or the HTTP status of the failure with *err: 409 (j is not PD or H), 403
 * (a field only the owner may change, jobspec_owner_only_field), 400 (a change that is
 * not valid), 500 (the store failed). */
int jobedit_update(const struct jobedit_ctx *c, struct job *j, json_t *over, int64_t max_concurrent,
                   bool dry_run, json_t **changes, char **err);

/* Submits a new job from job id (the caller's own, in any state) changed by over (may
 * be NULL), and with cascade the jobs cancelled because of it, transitively, in id
 * order. *out: [{"id", "name", "state", "redo_of"}]. Returns 0, or the HTTP status with
 * *err: 404 (no such job), 403 (not the caller's), 429 (the caller has max_active
 * active jobs; the cascade stops there too), 400, 500. */
int jobedit_redo(const struct jobedit_ctx *c, int64_t id, json_t *over, bool cascade, json_t **out,
                 char **err);

#endif
