/* priority: the daemon's side of fair-share and the multifactor priority: the
 * scheduler.* settings turned into weights and the accounts' set-up, a job's priority
 * breakdown for the API, and GET /v1/usage (the accounts, for gctl usage). */
#ifndef GFLOWD_PRIORITY_H
#define GFLOWD_PRIORITY_H

#include <jansson.h>

#include "config.h"
#include "fairshare.h"
#include "job.h"

struct gflowd;
struct route_req;
struct reply;

/* The weights of scheduler.priority_weight_* and scheduler.priority_max_age. */
struct priority_weights priority_weights_of(const struct gflow_config *c);
/* Applies scheduler.fairshare_half_life and the shares to the daemon's accounts (at
 * start, on reload). */
void priority_configure(struct gflowd *d);
/* The priority breakdown of j now, for the API: {"effective", "weights": {...},
 * "factors": {...}}; null for a job that no longer waits (R or ended). */
json_t *priority_breakdown_json(struct gflowd *d, const struct job *j);
/* GET /v1/usage: every account, users and projects (docs/api.md). */
void route_usage(const struct route_req *r, struct reply *rep);

#endif
