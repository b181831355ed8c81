/* pressure: the queue's pressure (see pressure.h). */
#include "pressure.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* How many groups (users, projects) the summary lists. */
#define PRESSURE_GROUPS 10

size_t pressure_gpu_count(const json_t *gpu_ids)
{
    if (json_is_array(gpu_ids))
        return json_array_size(gpu_ids);
    const char *s = json_string_value(gpu_ids);
    if (!s || !*s)
        return 0;
    size_t n = 1;
    for (; *s; s++)
        n += *s == ',';
    return n;
}

const char *pressure_reason(const json_t *job)
{
    const char *reason = json_string_value(json_object_get(job, "reason"));
    if (reason && *reason)
        return reason;
    const char *st = json_string_value(json_object_get(job, "state"));
    return st && !strcmp(st, "H") ? "JobHeldUser" : "Resources";
}

/* Adds a job to the group name of groups ({name: {"queued", "running",
 * "requested_gpus"}}). */
static void group_add(json_t *groups, const char *name, bool queued, json_int_t gpus)
{
    json_t *g = json_object_get(groups, name);
    if (!g) {
        g = json_pack("{s:s, s:i, s:i, s:i}", "name", name, "queued", 0, "running", 0,
                      "requested_gpus", 0);
        json_object_set_new(groups, name, g);
    }
    const char *key = queued ? "queued" : "running";
    json_object_set_new(g, key, json_integer(json_integer_value(json_object_get(g, key)) + 1));
    if (queued)
        json_object_set_new(
            g, "requested_gpus",
            json_integer(json_integer_value(json_object_get(g, "requested_gpus")) + gpus));
}

static int group_cmp(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t gx = json_integer_value(json_object_get(x, "requested_gpus"));
    json_int_t gy = json_integer_value(json_object_get(y, "requested_gpus"));
    if (gx != gy)
        return gx > gy ? -1 : 1;
    json_int_t qx = json_integer_value(json_object_get(x, "queued"));
    json_int_t qy = json_integer_value(json_object_get(y, "queued"));
    if (qx != qy)
        return qx > qy ? -1 : 1;
    return strcmp(json_string_value(json_object_get(x, "name")),
                  json_string_value(json_object_get(y, "name")));
}

/* The groups as gflow lists them: most GPUs asked first, then most queued, by name; at
 * most PRESSURE_GROUPS. */
static json_t *group_list(json_t *groups)
{
    size_t n = json_object_size(groups), i = 0;
    json_t **all = xmalloc((n ? n : 1) * sizeof(*all));
    const char *key;
    json_t *g;
    json_object_foreach (groups, key, g)
        all[i++] = g;
    qsort(all, n, sizeof(*all), group_cmp);
    json_t *list = json_array();
    for (i = 0; i < n && i < PRESSURE_GROUPS; i++)
        json_array_append(list, all[i]);
    free(all);
    json_decref(groups);
    return list;
}

/* Why GPU g is not free: the daemon's reason, else its state and jobs. */
static json_t *gpu_reason(const json_t *g)
{
    const char *reason = json_string_value(json_object_get(g, "reason"));
    if (reason && *reason)
        return json_string(reason);
    const char *state = json_string_value(json_object_get(g, "state"));
    const json_t *jobs = json_object_get(g, "jobs");
    if (!json_array_size(jobs))
        return json_string(state ? state : "unavailable");
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_addf(&sb, "%s: job%s", state ? state : "busy", json_array_size(jobs) > 1 ? "s" : "");
    size_t i;
    const json_t *id;
    json_array_foreach (jobs, i, id)
        strbuf_addf(&sb, "%s %lld", i ? "," : "", (long long)json_integer_value(id));
    json_t *s = json_string(sb.buf);
    strbuf_free(&sb);
    return s;
}

json_t *pressure_build(const json_t *gpus, const json_t *jobs, const json_t *reservations,
                       double now)
{
    json_t *available = json_array(), *unavailable = json_array();
    size_t i;
    const json_t *g;
    const json_t *gpu_list = json_object_get(gpus, "gpus");
    json_array_foreach (gpu_list, i, g) {
        json_t *index = json_object_get(g, "index");
        const char *state = json_string_value(json_object_get(g, "state"));
        if (state && !strcmp(state, "idle"))
            json_array_append(available, index);
        else
            json_array_append_new(unavailable,
                                  json_pack("{s:O, s:o}", "index", index, "reason", gpu_reason(g)));
    }
    json_int_t running = 0, queued = 0, held = 0, asked = 0, held_gpus = 0;
    json_t *reasons = json_object(), *users = json_object(), *projects = json_object();
    const json_t *j;
    json_array_foreach (jobs, i, j) {
        const char *st = json_string_value(json_object_get(j, "state"));
        if (!st)
            continue;
        json_int_t n = json_integer_value(json_object_get(j, "gpus"));
        bool is_run = !strcmp(st, "R") || !strcmp(st, "CG");
        bool is_wait = !strcmp(st, "PD") || !strcmp(st, "H");
        if (!is_run && !is_wait)
            continue;
        if (is_run) {
            running++;
            size_t ids = pressure_gpu_count(json_object_get(j, "gpu_ids"));
            held_gpus += ids ? (json_int_t)ids : n;
        } else {
            if (st[0] == 'H')
                held++;
            else {
                queued++;
                asked += n;
            }
            const char *why = pressure_reason(j);
            json_object_set_new(
                reasons, why, json_integer(json_integer_value(json_object_get(reasons, why)) + 1));
        }
        const char *user = json_string_value(json_object_get(j, "user"));
        const char *project = json_string_value(json_object_get(j, "project"));
        group_add(users, user ? user : "?", is_wait, n);
        if (project && *project)
            group_add(projects, project, is_wait, n);
    }
    json_int_t active = 0;
    const json_t *r;
    json_array_foreach (reservations, i, r) {
        const char *status = json_string_value(json_object_get(r, "status"));
        double start = json_number_value(json_object_get(r, "start"));
        double end = json_number_value(json_object_get(r, "end"));
        const json_t *ca = json_object_get(r, "cancelled_at");
        bool cancelled = ca && !json_is_null(ca);
        if ((status && !strcmp(status, "active")) ||
            (!status && !cancelled && start <= now && now < end))
            active++;
    }
    return json_pack("{s:I, s:I, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:I, s:I}",
                     "generated_at", (json_int_t)now, "total_gpus",
                     (json_int_t)json_array_size(gpu_list), "available_gpus", available,
                     "unavailable_gpus", unavailable, "running_jobs", running, "queued_jobs",
                     queued, "held_jobs", held, "queued_requested_gpus", asked,
                     "running_allocated_gpus", held_gpus, "blocked_reasons", reasons, "users",
                     group_list(users), "projects", group_list(projects), "reservations_total",
                     (json_int_t)json_array_size(reservations), "reservations_active", active);
}
