/* routes: the dispatch of the REST API, the helpers its handlers share, and the
 * daemon's own endpoints (see routes.h). */
#include "routes.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cudavis.h"
#include "daemon.h"
#include "gflow_build.h"
#include "gflow_commit.h"
#include "gpu/gpu.h"
#include "jobs/priority.h"
#include "ops/disk.h"
#include "ops/metrics.h"
#include "store/store.h"
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

bool route_method(const struct route_req *r, const char *want, struct reply *rep)
{
    if (strcmp(r->method, want) == 0)
        return true;
    reply_error(rep, 405, "use %s for this path", want);
    return false;
}

/* ---- the daemon ---- */

static void route_health(struct reply *rep)
{
    reply_json(rep, 200, json_pack("{s:s}", "status", "ok"));
}

/* The daemon's own CUDA_VISIBLE_DEVICES and what CUDA makes of it; null when unset. */
static json_t *visible_devices_json(const struct gpus *g)
{
    const char *spec = gpu_visible_spec(g);
    if (!spec)
        return json_null();
    const struct cudavis *v = gpu_visible_read(g);
    json_t *mig = json_array();
    for (size_t i = 0; v && i < v->n_mig; i++)
        json_array_append_new(mig, json_string(v->mig[i]));
    char *not_yet = v ? NULL
                      : xasprintf("CUDA_VISIBLE_DEVICES=%s: not read yet (no GPUs known)",
                                  *spec ? spec : "\"\"");
    json_t *o =
        json_pack("{s:s, s:s, s:o, s:o}", "value", spec, "understood", v ? v->understood : not_yet,
                  "mig", mig, "warning", v && v->warning ? json_string(v->warning) : json_null());
    free(not_yet);
    return o;
}

/* The GPUs in MIG mode with how many instances of each profile they have:
 * [{"index": 0, "profiles": {"1g.18gb": 2, "3g.71gb": 1}}]. */
static json_t *mig_status_json(const struct gpu_set *set)
{
    json_t *out = json_array();
    for (size_t i = 0; i < set->n_gpus; i++) {
        if (!set->gpus[i].mig_enabled)
            continue;
        json_t *profiles = json_object();
        for (size_t m = 0; m < set->n_migs; m++) {
            if (set->migs[m].parent != set->gpus[i].index)
                continue;
            const char *p = set->migs[m].profile;
            json_object_set_new(profiles, p,
                                json_integer(json_integer_value(json_object_get(profiles, p)) + 1));
        }
        json_array_append_new(
            out, json_pack("{s:i, s:o}", "index", set->gpus[i].index, "profiles", profiles));
    }
    return out;
}

static void route_status(const struct gflowd *d, struct reply *rep)
{
    int64_t counts[JOB_STATE_COUNT] = {0};
    store_count_states(d->store, counts);
    json_t *c = json_object();
    for (int i = 0; i < JOB_STATE_COUNT; i++)
        json_object_set_new(c, job_state_short((enum job_state)i), json_integer(counts[i]));
    double now = now_wall();
    /* Cheap on purpose: `gflowd up` asks for it, and GET /v1/gpus has the details. */
    const struct gpu_set *set = gpu_current(d->gpus);
    const char *gpu_err = gpu_error(d->gpus);
    json_t *gpus = json_pack("{s:I, s:b, s:o, s:b}", "count", (json_int_t)set->n_gpus, "simulated",
                             set->simulated, "error", gpu_err ? json_string(gpu_err) : json_null(),
                             "constrain_devices", d->cfg.constrain_devices);
    json_object_set_new(gpus, "visible_devices", visible_devices_json(d->gpus));
    json_object_set_new(gpus, "nvml", json_string(gpu_nvml_state(d->gpus)));
    json_object_set_new(gpus, "id_format", json_string(gpu_id_format(d->gpus)));
    /* The GPUs no job gets because NVML cannot tell their state, with why. */
    json_t *unavailable = json_array();
    for (size_t i = 0; i < set->n_gpus; i++) {
        const char *why = gpu_unavailable_reason(d->gpus, i); /* a read that hangs */
        if (!why && !gpu_info_usable(&set->gpus[i]))
            why = set->gpus[i].unavailable[0] ? set->gpus[i].unavailable : "NVML: GPU is lost";
        if (why)
            json_array_append_new(
                unavailable, json_pack("{s:i, s:s}", "index", set->gpus[i].index, "reason", why));
    }
    json_object_set_new(gpus, "unavailable", unavailable);
    json_object_set_new(gpus, "mig", mig_status_json(set));
    json_t *body =
        json_pack("{s:s, s:s, s:i, s:i, s:s, s:b, s:f, s:I, s:o, s:I, s:s, s:s, s:o}", "version",
                  GFLOW_VERSION, "commit", GFLOW_COMMIT, "pid", (int)getpid(), "uid", (int)d->uid,
                  "user", d->user, "system", d->system, "started_at", d->started_at, "uptime_secs",
                  (json_int_t)(now - d->started_at), "counts", c, "max_running_jobs",
                  (json_int_t)d->cfg.max_running_jobs, "data_dir", d->paths.data_dir, "socket",
                  d->paths.socket_path, "gpus", gpus);
    json_object_set_new(body, "memory",
                        json_pack("{s:I, s:s}", "total_mb", (json_int_t)d->mem_total_mb,
                                  "enforcement", d->memory_enforcement));
    json_object_set_new(body, "log_dir", json_string(d->paths.log_dir));
    /* Why jobs wait and writes are refused (507) while the disk is full, else null. */
    const char *full = disk_full(d->disk) ? disk_problem(d->disk) : NULL;
    json_object_set_new(body, "disk_full", full ? json_string(full) : json_null());
    reply_json(rep, 200, body);
}

/* GET /metrics: Prometheus' text format (metrics.h). */
static void route_metrics(const struct gflowd *d, struct reply *rep)
{
    struct strbuf sb;
    strbuf_init(&sb);
    metrics_render(d, &sb);
    size_t len = sb.len;
    reply_text(rep, 200, strbuf_detach(&sb), len, "text/plain; version=0.0.4; charset=utf-8");
}

/* ---- dispatch ---- */

/* /v1/jobs/{id}[/action] */
static void dispatch_job(const struct route_req *r, struct reply *rep)
{
    const char *p = r->url + strlen("/v1/jobs/");
    char *end;
    errno = 0;
    long long id = strtoll(p, &end, 10);
    if (end == p || errno || id <= 0 || (*end && *end != '/')) {
        reply_error(rep, 400, "invalid job id in %s", r->url);
        return;
    }
    const char *action = *end ? end + 1 : "";
    if (!*action && strcmp(r->method, "PATCH") == 0) {
        route_update(r, id, rep);
    } else if (!*action) {
        if (route_method(r, "GET", rep))
            route_show(r, id, rep);
    } else if (strcmp(action, "redo") == 0) {
        if (route_method(r, "POST", rep))
            route_redo(r, id, rep);
    } else if (strcmp(action, "cancel") == 0) {
        if (route_method(r, "POST", rep))
            route_cancel(r, id, rep);
    } else if (strcmp(action, "hold") == 0 || strcmp(action, "release") == 0) {
        if (route_method(r, "POST", rep))
            route_hold_release(r, id, strcmp(action, "hold") == 0, rep);
    } else if (strcmp(action, "log") == 0) {
        if (route_method(r, "GET", rep))
            route_log(r, id, rep);
    } else if (strcmp(action, "limit") == 0) {
        if (route_method(r, "POST", rep))
            route_limit(r, id, rep);
    } else {
        reply_error(rep, 404, "no such endpoint: %s %s (see docs/api.md)", r->method, r->url);
    }
}

void routes_dispatch(const struct route_req *r, struct reply *rep)
{
    const char *url = r->url;
    if (strcmp(url, "/v1/health") == 0) {
        if (route_method(r, "GET", rep))
            route_health(rep);
    } else if (strcmp(url, "/v1/status") == 0) {
        if (route_method(r, "GET", rep))
            route_status(r->d, rep);
    } else if (strcmp(url, "/metrics") == 0) {
        if (route_method(r, "GET", rep))
            route_metrics(r->d, rep);
    } else if (strcmp(url, "/v1/gpus") == 0) {
        if (route_method(r, "GET", rep))
            route_gpus(r, rep);
    } else if (strcmp(url, "/v1/gpus/allowed") == 0) {
        route_gpus_allowed(r, rep);
    } else if (strcmp(url, "/v1/gpus/ignored") == 0) {
        route_gpus_ignored(r, rep);
    } else if (strcmp(url, "/v1/quotas") == 0) {
        route_quotas(r, rep);
    } else if (strcmp(url, "/v1/usage") == 0) {
        route_usage(r, rep);
    } else if (strcmp(url, "/v1/daemon/reload") == 0) {
        route_reload(r, rep);
    } else if (strcmp(url, "/v1/events") == 0) {
        route_events(r, rep);
    } else if (strcmp(url, "/v1/stats") == 0) {
        if (route_method(r, "GET", rep))
            route_stats(r, rep);
    } else if (strcmp(url, "/v1/jobs") == 0) {
        if (strcmp(r->method, "POST") == 0)
            route_submit(r, rep);
        else if (route_method(r, "GET", rep))
            route_list(r, rep);
    } else if (strcmp(url, "/v1/jobs/cancel") == 0 || strcmp(url, "/v1/jobs/hold") == 0 ||
               strcmp(url, "/v1/jobs/release") == 0) {
        if (route_method(r, "POST", rep))
            route_bulk(r, url + strlen("/v1/jobs/"), rep);
    } else if (str_starts_with(url, "/v1/jobs/")) {
        dispatch_job(r, rep);
    } else if (str_starts_with(url, "/v1/reservations")) {
        route_reservations(r, rep);
    } else {
        reply_error(rep, 404, "no such endpoint: %s %s (see docs/api.md)", r->method, url);
    }
}
