/* routes_gpus: the GPU endpoints (docs/api.md): GET /v1/gpus, the allowed set
 * (gctl set-gpus) and the ignored outside processes (gctl gpu-process). Changes are for
 * admins only. */
#include "routes.h"

#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "gpu/gpu.h"
#include "gpu/gpu_report.h"
#include "jobs/jobs.h"
#include "reload.h"
#include "startopts.h"
#include "util.h"

void route_gpus(const struct route_req *r, struct reply *rep)
{
    size_t n;
    struct job **running = jobs_running(r->d->jobs, &n);
    reply_json(rep, 200,
               gpu_report_status(r->d->gpus, running, n, r->d->cfg.gpu_allocation_strategy));
}

static bool require_admin(const struct route_req *r, struct reply *rep)
{
    if (r->who->is_admin)
        return true;
    reply_error(rep, 403,
                "only root, the daemon's user or members of daemon.admin_group may "
                "change GPU settings");
    return false;
}

void route_gpus_allowed(const struct route_req *r, struct reply *rep)
{
    if (strcmp(r->method, "GET") == 0) {
        reply_json(rep, 200, gpu_allowed_json(r->d->gpus));
        return;
    }
    if (!route_method(r, "PUT", rep) || !require_admin(r, rep))
        return;
    json_t *o = route_body_object(r, rep);
    if (!o)
        return;
    json_t *g = json_object_get(o, "gpus");
    struct strbuf spec;
    strbuf_init(&spec);
    size_t i;
    json_t *v;
    if (json_is_string(g))
        strbuf_adds(&spec, json_string_value(g));
    json_array_foreach (g, i, v) {
        if (json_is_integer(v))
            strbuf_addf(&spec, "%s%lld", i ? "," : "", (long long)json_integer_value(v));
    }
    char *err = NULL;
    if (!spec.len) {
        reply_error(rep, 400, "'gpus' must be a list of GPU indices or \"all\"");
    } else if (gpu_set_allowed(r->d->gpus, spec.buf, &err) < 0) {
        reply_error(rep, 400, "%s", err);
    } else {
        jobs_mark_dirty(r->d->jobs);
        startopts_forget_gpus(r->d->paths.data_dir); /* a restart keeps this setting */
        reply_json(rep, 200, gpu_allowed_json(r->d->gpus));
    }
    free(err);
    strbuf_free(&spec);
    json_decref(o);
}

/* The GPU and the process, from the body (POST) or the query (DELETE). */
static int ignored_args(const struct route_req *r, json_t *o, int *gpu, long long *pid,
                        struct reply *rep)
{
    json_t *g = o ? json_object_get(o, "gpu") : NULL, *p = o ? json_object_get(o, "pid") : NULL;
    const char *qg = route_query(r, "gpu"), *qp = route_query(r, "pid");
    int64_t vg = -1, vp = -1;
    if (json_is_integer(g))
        vg = json_integer_value(g);
    else if (qg)
        parse_int64(qg, &vg);
    if (json_is_integer(p))
        vp = json_integer_value(p);
    else if (qp)
        parse_int64(qp, &vp);
    if (vg < 0 || vp <= 0) {
        reply_error(rep, 400, "give 'gpu' (an index) and 'pid' (a process id)");
        return -1;
    }
    *gpu = (int)vg;
    *pid = vp;
    return 0;
}

void route_gpus_ignored(const struct route_req *r, struct reply *rep)
{
    if (strcmp(r->method, "GET") == 0) {
        reply_json(rep, 200, gpu_ignored_json(r->d->gpus));
        return;
    }
    bool add = strcmp(r->method, "POST") == 0;
    if (!add && strcmp(r->method, "DELETE") != 0) {
        reply_error(rep, 405, "use GET, POST or DELETE for this path");
        return;
    }
    if (!require_admin(r, rep))
        return;
    json_t *o = add ? route_body_object(r, rep) : NULL;
    if (add && !o)
        return;
    int gpu;
    long long pid;
    char *err = NULL;
    if (ignored_args(r, o, &gpu, &pid, rep) == 0) {
        size_t n;
        struct job **running = jobs_running(r->d->jobs, &n);
        int rc = add ? gpu_ignore(r->d->gpus, gpu, pid, running, n, &err)
                     : gpu_unignore(r->d->gpus, gpu, pid, running, n, &err);
        if (rc < 0) {
            reply_error(rep, 404, "%s", err);
        } else {
            jobs_mark_dirty(r->d->jobs);
            reply_json(rep, 200, gpu_ignored_json(r->d->gpus));
        }
    }
    free(err);
    json_decref(o);
}

/* POST /v1/daemon/reload: gflowd reload, for admins (as SIGHUP). */
void route_reload(const struct route_req *r, struct reply *rep)
{
    if (!route_method(r, "POST", rep))
        return;
    if (!r->who->is_admin) {
        reply_error(rep, 403,
                    "only root, the daemon's user or members of daemon.admin_group may reload "
                    "the configuration");
        return;
    }
    char *err = NULL;
    json_t *report = daemon_reload(r->d, &err);
    if (report)
        reply_json(rep, 200, report);
    else
        reply_error(rep, 400, "%s; nothing changed", err);
    free(err);
}
