/* routes: the REST API's table, its matching, and the helpers its handlers share (see
 * routes.h). */
#include "routes.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "ops/disk.h"
#include "util.h"

const char *route_query(const struct route_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

json_t *route_body_object(const struct route_req *r, struct reply *rep)
{
    json_error_t jerr;
    json_t *o = json_loadb(r->body, r->body_len, 0, &jerr);
    if (!o)
        reply_error(rep, 400, "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
                    jerr.text);
    else if (!json_is_object(o)) {
        reply_error(rep, 400, "the body must be a JSON object");
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* What a request does to what gflowd keeps, for the 507 of a full disk (disk.h): READS
 * nothing; WRITES the database; ADDS_JOBS also new log files; FREES (a cancel) goes
 * ahead even then, since it frees room and its change fits the room the database keeps. */
enum route_writes { ROUTE_READS, ROUTE_WRITES, ROUTE_ADDS_JOBS, ROUTE_FREES };

struct route {
    const char *method;
    /* Literal segments, and {job} or {reservation}: a positive id (route_req.id). */
    const char *path;
    route_fn *handler;
    /* Who may call: NULL, anyone who may use the daemon (a job's owner is checked by the
     * handler, which has the job); else only admins, and this says what they may do. */
    const char *admins_only;
    enum route_writes writes;
};

#define GPU_SETTINGS "change GPU settings"

/* First match wins: a literal path goes before a pattern that would take it as an id. */
static const struct route routes[] = {
    {"GET", "/v1/health", route_health, NULL, ROUTE_READS},
    {"GET", "/v1/status", route_status, NULL, ROUTE_READS},
    {"GET", "/metrics", route_metrics, NULL, ROUTE_READS},
    {"POST", "/v1/daemon/reload", route_reload, "reload the configuration", ROUTE_WRITES},
    {"GET", "/v1/events", route_events, NULL, ROUTE_READS},
    {"GET", "/v1/stats", route_stats, NULL, ROUTE_READS},
    {"GET", "/v1/usage", route_usage, NULL, ROUTE_READS},
    {"GET", "/v1/gpus", route_gpus, NULL, ROUTE_READS},
    {"GET", "/v1/gpus/samples", route_gpus_samples, NULL, ROUTE_READS},
    {"GET", "/v1/backend", route_backend, NULL, ROUTE_READS},
    {"GET", "/v1/gpus/allowed", route_gpus_allowed, NULL, ROUTE_READS},
    {"PUT", "/v1/gpus/allowed", route_gpus_allowed_set, GPU_SETTINGS, ROUTE_WRITES},
    {"GET", "/v1/gpus/ignored", route_gpus_ignored, NULL, ROUTE_READS},
    {"POST", "/v1/gpus/ignored", route_gpus_ignore, GPU_SETTINGS, ROUTE_WRITES},
    {"DELETE", "/v1/gpus/ignored", route_gpus_ignore, GPU_SETTINGS, ROUTE_WRITES},
    {"POST", "/v1/gpus/resume", route_gpus_resume, GPU_SETTINGS, ROUTE_WRITES},
    {"GET", "/v1/quotas", route_quotas, NULL, ROUTE_READS},
    {"PUT", "/v1/quotas", route_quotas_set, "change quotas", ROUTE_WRITES},
    {"DELETE", "/v1/quotas", route_quotas_clear, "change quotas", ROUTE_WRITES},
    {"GET", "/v1/jobs", route_list, NULL, ROUTE_READS},
    {"POST", "/v1/jobs", route_submit, NULL, ROUTE_ADDS_JOBS},
    {"POST", "/v1/jobs/cancel", route_bulk, NULL, ROUTE_FREES},
    {"POST", "/v1/jobs/hold", route_bulk, NULL, ROUTE_WRITES},
    {"POST", "/v1/jobs/release", route_bulk, NULL, ROUTE_WRITES},
    {"GET", "/v1/jobs/{job}", route_show, NULL, ROUTE_READS},
    {"PATCH", "/v1/jobs/{job}", route_update, NULL, ROUTE_WRITES},
    {"POST", "/v1/jobs/{job}/cancel", route_cancel, NULL, ROUTE_FREES},
    {"POST", "/v1/jobs/{job}/hold", route_hold, NULL, ROUTE_WRITES},
    {"POST", "/v1/jobs/{job}/release", route_release, NULL, ROUTE_WRITES},
    {"POST", "/v1/jobs/{job}/limit", route_limit, NULL, ROUTE_WRITES},
    {"POST", "/v1/jobs/{job}/redo", route_redo, NULL, ROUTE_ADDS_JOBS},
    {"GET", "/v1/jobs/{job}/log", route_log, NULL, ROUTE_READS},
    {"GET", "/v1/reservations", route_resv_list, NULL, ROUTE_READS},
    {"POST", "/v1/reservations", route_resv_create, NULL, ROUTE_WRITES},
    {"GET", "/v1/reservations/{reservation}", route_resv_show, NULL, ROUTE_READS},
    {"POST", "/v1/reservations/{reservation}/cancel", route_resv_cancel, NULL, ROUTE_WRITES},
};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

enum match { MATCH_NONE, MATCH_BAD_ID, MATCH };

/* Whether url fits pattern; an {id} segment must be a positive integer (*id) for MATCH,
 * and is MATCH_BAD_ID when it is anything else. */
static enum match match_path(const char *pattern, const char *url, int64_t *id)
{
    enum match m = MATCH;
    *id = 0;
    while (*pattern && *url) {
        if (*pattern == '{') {
            pattern = strchr(pattern, '}') + 1;
            size_t n = strcspn(url, "/");
            char *end;
            errno = 0;
            long long v = strtoll(url, &end, 10);
            if (!n || end != url + n || errno || v <= 0 || url[0] == '+' || url[0] == ' ')
                m = MATCH_BAD_ID;
            else
                *id = v;
            url += n;
        } else if (*pattern++ != *url++) {
            return MATCH_NONE;
        }
    }
    return *pattern || *url ? MATCH_NONE : m;
}

/* The id's name in a pattern ("job" of "{job}"), for the 400. */
static const char *id_name(const char *pattern, size_t *len)
{
    const char *open = strchr(pattern, '{');
    *len = open ? strcspn(open + 1, "}") : 0;
    return open ? open + 1 : "";
}

/* Whether the request changes nothing: a read, or a dry run (?dry_run=1, or a
 * submission's "dry_run": true). */
static bool request_is_read(const struct route_req *r, const struct route *rt)
{
    if (rt->writes == ROUTE_READS)
        return true;
    const char *dry = route_query(r, "dry_run");
    if (dry && strcmp(dry, "0") != 0)
        return true;
    if (rt->handler != route_submit || !r->body_len)
        return false;
    json_t *o = json_loadb(r->body, r->body_len, 0, NULL);
    bool dry_run = json_is_true(json_object_get(o, "dry_run"));
    json_decref(o);
    return dry_run;
}

/* 507 for a request that would write while a filesystem gflowd writes to is full. */
static bool refuse_for_space(const struct route_req *r, const struct route *rt, struct reply *rep)
{
    if (rt->writes == ROUTE_READS || rt->writes == ROUTE_FREES)
        return false;
    char *msg = NULL;
    if (disk_check_write(r->d->disk, rt->writes == ROUTE_ADDS_JOBS, &msg) == 0 ||
        request_is_read(r, rt)) {
        free(msg);
        return false;
    }
    reply_error(rep, 507, "not saved: %s", msg);
    free(msg);
    return true;
}

static void call(const struct route_req *r, const struct route *rt, int64_t id, struct reply *rep)
{
    if (rt->admins_only && (!r->who || !r->who->is_admin)) {
        reply_error(rep, 403,
                    "only root, the daemon's user or members of daemon.admin_group may %s",
                    rt->admins_only);
        return;
    }
    if (refuse_for_space(r, rt, rep))
        return;
    struct route_req with_id = *r;
    with_id.id = id;
    rt->handler(&with_id, rep);
}

/* 405 with the methods the path has: "use GET, PUT or DELETE for this path". */
static void wrong_method(const struct route_req *r, struct reply *rep)
{
    struct strbuf sb;
    strbuf_init(&sb);
    size_t n = 0, count = 0;
    int64_t id;
    for (size_t i = 0; i < N_ROUTES; i++)
        count += match_path(routes[i].path, r->url, &id) == MATCH;
    for (size_t i = 0; i < N_ROUTES; i++) {
        if (match_path(routes[i].path, r->url, &id) != MATCH)
            continue;
        n++;
        strbuf_adds(&sb, n == 1 ? "" : n == count ? " or " : ", ");
        strbuf_adds(&sb, routes[i].method);
    }
    reply_error(rep, 405, "use %s for this path", sb.buf);
    strbuf_free(&sb);
}

/* The table's entry for r's method and path, or NULL (*id: the path's id). */
static const struct route *route_of(const struct route_req *r, int64_t *id)
{
    for (size_t i = 0; i < N_ROUTES; i++) {
        if (match_path(routes[i].path, r->url, id) == MATCH && !strcmp(routes[i].method, r->method))
            return &routes[i];
    }
    return NULL;
}

bool routes_is_read(const struct route_req *r)
{
    int64_t id;
    const struct route *rt = route_of(r, &id);
    return rt && request_is_read(r, rt);
}

void routes_dispatch(const struct route_req *r, struct reply *rep)
{
    int64_t id;
    const struct route *rt = route_of(r, &id);
    if (rt) {
        call(r, rt, id, rep);
        return;
    }
    bool path_known = false;
    const struct route *bad_id = NULL;
    for (size_t i = 0; i < N_ROUTES; i++) {
        enum match m = match_path(routes[i].path, r->url, &id);
        path_known |= m == MATCH;
        if (m == MATCH_BAD_ID && !bad_id)
            bad_id = &routes[i];
    }
    if (path_known) {
        wrong_method(r, rep);
    } else if (bad_id) {
        size_t len;
        const char *name = id_name(bad_id->path, &len);
        reply_error(rep, 400, "invalid %.*s id in %s", (int)len, name, r->url);
    } else {
        reply_error(rep, 404, "no such endpoint: %s %s (see docs/api.md)", r->method, r->url);
    }
}
