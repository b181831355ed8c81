/* routes: the REST API of docs/api.md. routes.c maps method and path to a handler and
 * holds what every handler shares (query values, the JSON body, the method check) and
 * the daemon's own endpoints (health, status); the handlers of a family live in
 * routes_jobs.c (submit, show, cancel, hold, release, limit, update, redo, log),
 * routes_list.c (GET /v1/jobs) and routes_gpus.c (GPUs and their runtime controls). */
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
    const struct caller *who;
    const char *method;
    const char *url;
    const char *body; /* never NULL */
    size_t body_len;
};

/* Answers r in rep (every path; unknown ones with 404). */
void routes_dispatch(const struct route_req *r, struct reply *rep);

/* Helpers for handlers. */
/* The value of ?key=..., or NULL. */
const char *route_query(const struct route_req *r, const char *key);
/* The body as a JSON object, or NULL with a 400 in rep. */
json_t *route_body_object(const struct route_req *r, struct reply *rep);
/* Whether the method is want; if not, a 405 in rep. */
bool route_method(const struct route_req *r, const char *want, struct reply *rep);

/* routes_jobs.c */
void route_submit(const struct route_req *r, struct reply *rep);
void route_show(const struct route_req *r, int64_t id, struct reply *rep);
void route_cancel(const struct route_req *r, int64_t id, struct reply *rep);
void route_hold_release(const struct route_req *r, int64_t id, bool hold, struct reply *rep);
/* POST /v1/jobs/cancel|hold|release {"ids": [...]}: many jobs in one request. */
void route_bulk(const struct route_req *r, const char *action, struct reply *rep);
void route_limit(const struct route_req *r, int64_t id, struct reply *rep);
void route_update(const struct route_req *r, int64_t id, struct reply *rep);
void route_redo(const struct route_req *r, int64_t id, struct reply *rep);
void route_log(const struct route_req *r, int64_t id, struct reply *rep);
/* routes_list.c */
void route_list(const struct route_req *r, struct reply *rep);
/* routes_gpus.c */
void route_gpus(const struct route_req *r, struct reply *rep);
void route_gpus_allowed(const struct route_req *r, struct reply *rep);
void route_gpus_ignored(const struct route_req *r, struct reply *rep);
void route_reload(const struct route_req *r, struct reply *rep);
/* routes_quota.c: GET/PUT/DELETE /v1/quotas; and the max_queued_jobs check of a
 * submission of jobs[0..n) (0, or -1 with a 429 in rep). */
struct job;
void route_quotas(const struct route_req *r, struct reply *rep);
int route_check_quota(const struct route_req *r, struct job *const *jobs, size_t n,
                      struct reply *rep);
/* routes_resv.c: /v1/reservations and below (gctl reserve) */
void route_reservations(const struct route_req *r, struct reply *rep);
/* routes_stats.c: GET /v1/stats (gstats) */
void route_stats(const struct route_req *r, struct reply *rep);
/* events_stream.c */
void route_events(const struct route_req *r, struct reply *rep);

#endif
