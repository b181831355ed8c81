/* routes: the REST API of docs/api.md as one table (routes.c): each entry a method, a
 * path pattern, its handler and who may call it. routes.c matches a request against it
 * and holds what every handler shares (query values, the JSON body); the handlers live
 * in routes_*.c by family: routes_daemon.c (health, status, metrics, reload),
 * routes_jobs.c (submit, show, cancel, hold, release, limit, update, redo), routes_log.c,
 * routes_list.c (GET /v1/jobs), routes_gpus.c, routes_quota.c, routes_usage.c,
 * routes_resv.c, routes_stats.c and routes_events.c.
 *
 * The HTTP room (src/daemon/http/) owns the socket, the transport (api.c), identities
 * (auth.c), replies, the routes and the event stream (events.c); it may call every
 * room below it (jobs, run, gpu, policy, store, ops, the slurm backend), and none of
 * them calls it: they raise events (jobs_observe, jobs.h). */
#ifndef GFLOWD_ROUTES_H
#define GFLOWD_ROUTES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "reply.h"

struct gflowd;
struct MHD_Connection;

/* One request, as a handler sees it. */
struct route_req {
    struct gflowd *d;
    struct MHD_Connection *conn;
    const struct caller *who; /* NULL on metrics.listen (GET /metrics only) */
    const char *method;
    const char *url;
    const char *body; /* never NULL */
    size_t body_len;
    int64_t id; /* the {job} or {reservation} of the path; 0: none */
};

/* Answers r in rep: the table's handler for its method and path, after the checks the
 * table names (admins only; 507 for a write while the disk is full); 405 for a known
 * path asked with another method, 400 for a malformed id, else 404. */
void routes_dispatch(const struct route_req *r, struct reply *rep);
/* Whether r changes nothing: a read, or a dry run (?dry_run=1, or a submission's
 * "dry_run": true); false for a path the table does not know. */
bool routes_is_read(const struct route_req *r);

/* Helpers for handlers. */
/* The value of ?key=..., or NULL. */
const char *route_query(const struct route_req *r, const char *key);
/* The body as a JSON object, or NULL with a 400 in rep. */
json_t *route_body_object(const struct route_req *r, struct reply *rep);

/* The handlers, by file. Each answers one entry of the table; a job's owner (the rest
 * of "who may call") is checked by its handler, which has the job. */
typedef void route_fn(const struct route_req *r, struct reply *rep);
/* routes_daemon.c */
route_fn route_health, route_status, route_metrics, route_reload;
/* routes_jobs.c */
route_fn route_submit, route_show, route_cancel, route_hold, route_release, route_limit,
    route_update, route_redo;
/* POST /v1/jobs/cancel|hold|release {"ids": [...]}: many jobs in one request. */
route_fn route_bulk;
/* Loads job id: 0 and *out filled, or -1 with the reply set (404, 500). */
struct job;
int route_load_job(const struct route_req *r, int64_t id, bool with_payload, struct job *out,
                   struct reply *rep);
/* routes_log.c */
route_fn route_log;
/* routes_list.c */
route_fn route_list;
/* routes_gpus.c */
route_fn route_backend, route_gpus, route_gpus_allowed, route_gpus_allowed_set, route_gpus_ignored,
    route_gpus_ignore, route_gpus_resume, route_gpus_samples;
/* routes_quota.c: GET/PUT/DELETE /v1/quotas; and the max_queued_jobs check of a
 * submission of jobs[0..n) (0, or -1 with a 429 in rep). */
route_fn route_quotas, route_quotas_set, route_quotas_clear;
int route_check_quota(const struct route_req *r, struct job *const *jobs, size_t n,
                      struct reply *rep);
/* routes_usage.c */
route_fn route_usage;
/* routes_resv.c: /v1/reservations and below (gctl reserve) */
route_fn route_resv_list, route_resv_create, route_resv_show, route_resv_cancel;
/* routes_stats.c: GET /v1/stats (gstats) */
route_fn route_stats;
/* routes_events.c: GET /v1/events */
route_fn route_events;

#endif
