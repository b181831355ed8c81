/* routes_gpus: the GPU endpoints (docs/api.md): GET /v1/gpus, the allowed set
 * (gctl set-gpus) and the ignored outside processes (gctl gpu-process). Changes are for
 * admins only. */
#include "routes.h"

#include <stdlib.h>
#include <string.h>

#include "backend/slurm/slurm_nodes.h"
#include "clock.h"
#include "daemon.h"
#include "gpu/gpu.h"
#include "gpu/gpu_recent.h"
#include "gpu/gpu_report.h"
#include "jobs/jobs.h"
#include "ops/startopts.h"
#include "util.h"

void route_gpus(const struct route_req *r, struct reply *rep)
{
    size_t n;
    struct job **running = jobs_running(r->d->jobs, &n);
    json_t *o =
        gpu_report_status(r->d->gpus, running, n, r->d->cfg.gpu_allocation_strategy, r->d->userdb);
    /* Under Slurm the GPUs are its nodes' (slurm_nodes.h), not this machine's. */
    if (json_is_object(o))
        json_object_set_new(o, "backend", backend_json(r->d));
    reply_json(rep, 200, o);
}

/* GET /v1/gpus/samples: the sparklines' samples (gpu_recent.h), to anyone. */
void route_gpus_samples(const struct route_req *r, struct reply *rep)
{
    json_t *o = gpu_recent_json(r->d->recent, now_mono());
    json_object_set_new(o, "interval_secs", json_integer(r->d->cfg.gpu_poll_interval_secs));
    reply_json(rep, 200, o);
}

/* GET /v1/backend: where jobs run, and under Slurm the partition's nodes and GPUs. */
void route_backend(const struct route_req *r, struct reply *rep)
{
    reply_json(rep, 200, backend_json(r->d));
}

void route_gpus_allowed(const struct route_req *r, struct reply *rep)
{
    reply_json(rep, 200, gpu_allowed_json(r->d->gpus));
}

void route_gpus_allowed_set(const struct route_req *r, struct reply *rep)
{
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
    reply_json(rep, 200, gpu_ignored_json(r->d->gpus));
}

/* POST adds an ignored process, DELETE removes one. */
void route_gpus_ignore(const struct route_req *r, struct reply *rep)
{
    bool add = strcmp(r->method, "POST") == 0;
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

/* POST /v1/gpus/resume {"gpu": N, "force": bool}: gctl gpu resume. */
void route_gpus_resume(const struct route_req *r, struct reply *rep)
{
    json_t *o = route_body_object(r, rep);
    if (!o)
        return;
    json_t *g = json_object_get(o, "gpu");
    char *err = NULL;
    if (!json_is_integer(g) || json_integer_value(g) < 0 || json_integer_value(g) > 1000000) {
        reply_error(rep, 400, "'gpu' must be a GPU index, e.g. {\"gpu\": 0}");
    } else if (gpu_resume(r->d->gpus, (int)json_integer_value(g),
                          json_is_true(json_object_get(o, "force")), &err) < 0) {
        reply_error(rep, 409, "%s", err);
    } else {
        jobs_mark_dirty(r->d->jobs);
        reply_json(rep, 200,
                   json_pack("{s:I, s:b}", "gpu", (json_int_t)json_integer_value(g), "resumed", 1));
    }
    free(err);
    json_decref(o);
}
