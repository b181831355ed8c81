/* routes_daemon: the daemon's own endpoints (docs/api.md): GET /v1/health, GET
 * /v1/status (what `gflowd up` and `ginfo` show first), GET /metrics and POST
 * /v1/daemon/reload. */
#include "routes.h"

#include <stdlib.h>
#include <unistd.h>

#include "backend/slurm/slurm_nodes.h"
#include "clock.h"
#include "cudavis.h"
#include "daemon.h"
#include "events.h"
#include "gflow_build.h"
#include "gflow_commit.h"
#include "gpu/gpu.h"
#include "ops/disk.h"
#include "ops/metrics.h"
#include "ops/reload.h"
#include "store/store.h"
#include "util.h"

void route_health(const struct route_req *r, struct reply *rep)
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

/* The descriptors' reserves (fdres.h): {"limit": N, "daemon": {"reserved": N, "in_use":
 * N}, "connections": {...}, "jobs": {...}, "user_connections": N}; null without a limit. */
static json_t *descriptors_json(const struct fdres *fds)
{
    if (fds->limit == 0)
        return json_null();
    json_t *o = json_pack("{s:I, s:I}", "limit", (json_int_t)fds->limit, "user_connections",
                          (json_int_t)fds->user_connections);
    for (int c = 0; c < FDRES_CLASSES; c++)
        json_object_set_new(o, fdres_class_name((enum fdres_class)c),
                            json_pack("{s:I, s:I}", "reserved", (json_int_t)fds->reserved[c],
                                      "in_use",
                                      (json_int_t)fdres_in_use(fds, (enum fdres_class)c)));
    return o;
}

void route_status(const struct route_req *r, struct reply *rep)
{
    const struct gflowd *d = r->d;
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
    /* The drained GPUs (gctl gpu resume), with why. */
    json_t *drained = json_array();
    for (size_t i = 0; i < set->n_gpus; i++) {
        const char *why = gpu_drained(d->gpus, i);
        if (why)
            json_array_append_new(
                drained, json_pack("{s:i, s:s}", "index", set->gpus[i].index, "reason", why));
    }
    json_object_set_new(gpus, "drained", drained);
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
    json_object_set_new(body, "backend", backend_json(d));
    json_object_set_new(body, "descriptors", descriptors_json(&d->fds));
    /* Why jobs wait and writes are refused (507) while the disk is full, else null. */
    const char *full = disk_full(d->disk) ? disk_problem(d->disk) : NULL;
    json_object_set_new(body, "disk_full", full ? json_string(full) : json_null());
    /* The running job with the largest log while the logs' filesystem is full. */
    struct disk_flooder f = disk_flooder(d->disk);
    json_object_set_new(body, "log_flooder",
                        f.id ? json_pack("{s:I, s:s, s:I, s:I}", "id", (json_int_t)f.id, "user",
                                         f.user, "uid", (json_int_t)f.uid, "log_bytes",
                                         (json_int_t)f.log_bytes)
                             : json_null());
    reply_json(rep, 200, body);
}

/* GET /metrics: Prometheus' text format (metrics.h). */
void route_metrics(const struct route_req *r, struct reply *rep)
{
    const struct gflowd *d = r->d;
    struct strbuf sb;
    strbuf_init(&sb);
    metrics_render(d, events_clients(d->events), &sb);
    size_t len = sb.len;
    reply_text(rep, 200, strbuf_detach(&sb), len, "text/plain; version=0.0.4; charset=utf-8");
}

/* POST /v1/daemon/reload: gflowd reload, for admins (as SIGHUP). */
void route_reload(const struct route_req *r, struct reply *rep)
{
    char *err = NULL;
    json_t *report = daemon_reload(r->d, &err);
    if (report) {
        events_daemon(r->d->events, "reloaded");
        reply_json(rep, 200, report);
    } else
        reply_error(rep, 400, "%s; nothing changed", err);
    free(err);
}
