/* priority: the daemon's side of fair-share and the multifactor priority: the
 * scheduler.* settings turned into weights and the accounts' set-up, and a job's
 * priority breakdown for the API (GET /v1/usage is http/routes_usage.c's). */
#ifndef GFLOWD_PRIORITY_H
#define GFLOWD_PRIORITY_H

#include <jansson.h>

#include "config.h"
#include "fairshare.h"
#include "job.h"

struct gflowd;

/* The weights of scheduler.priority_weight_* and scheduler.priority_max_age. */
struct priority_weights priority_weights_of(const struct gflow_config *c);
/* Applies scheduler.fairshare_half_life and the shares to the daemon's accounts (at
 * start, on reload). */
void priority_configure(struct gflowd *d);
/* The priority breakdown of j now, for the API: {"effective", "weights": {...},
 * "factors": {...}}; null for a job that no longer waits (R or ended). */
json_t *priority_breakdown_json(struct gflowd *d, const struct job *j);

#endif
