/* routes: the REST API of docs/api.md, one function per endpoint. */
#include <jansson.h>

#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gflow_build.h"
#include "gflowd.h"
#include "gpu.h"
#include "jobs.h"
#include "parse.h"
#include "runner.h"
#include "scheduler.h"
#include "store.h"
#include "util.h"

#define MAX_NAME_LEN 200

static const char *query(struct MHD_Connection *c, const char *key)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

/* ---- status ---- */

static void route_health(struct reply *rep)
{
    reply_json(rep, 200, json_pack("{s:s}", "status", "ok"));
}

static void route_status(struct reply *rep)
{
    int64_t counts[JOB_STATE_COUNT] = {0};
    store_count_states(gd.store, counts);
    json_t *c = json_object();
    for (int i = 0; i < JOB_STATE_COUNT; i++)
        json_object_set_new(c, job_state_short((enum job_state)i), json_integer(counts[i]));
    double now = now_wall();
    json_t *full = gpu_status_json();
    json_t *gpus = json_pack("{s:I, s:O, s:O, s:b}", "count",
                             (json_int_t)json_array_size(json_object_get(full, "gpus")), "simulated",
                             json_object_get(full, "simulated"), "error",
                             json_object_get(full, "error"), "constrain_devices",
                             gd.cfg.constrain_devices);
    json_decref(full);
    json_t *body =
               json_pack("{s:s, s:s, s:i, s:i, s:s, s:b, s:f, s:I, s:o, s:I, s:s, s:s, s:o}",
                         "version", GFLOW_VERSION, "commit", GFLOW_COMMIT, "pid", (int)getpid(),
                         "uid", (int)gd.uid, "user", gd.user, "system", gd.system, "started_at",
                         gd.started_at, "uptime_secs", (json_int_t)(now - gd.started_at),
                         "counts", c, "max_running_jobs", (json_int_t)gd.cfg.max_running_jobs,
                         "data_dir", gd.paths.data_dir, "socket", gd.paths.socket_path, "gpus",
                         gpus);
    json_object_set_new(body, "memory",
                        json_pack("{s:I, s:s}", "total_mb", (json_int_t)gd.mem_total_mb,
                                  "enforcement", gd.memory_enforcement));
    reply_json(rep, 200, body);
}

/* ---- submit ---- */

static const char *const spec_fields[] = {
    "command", "script",   "script_path", "name",          "workdir", "env",
    "priority", "time_limit", "hold",     "dry_run",       "gpus",    "gpu_memory_mb",
    "shared",  "gpus_per_task", "depends_on", "depends_mode", "auto_cancel", "memory_mb",
    "conda_env", "signal_spec", "begin_time"};

static bool known_field(const char *key)
{
    for (size_t i = 0; i < sizeof(spec_fields) / sizeof(spec_fields[0]); i++)
        if (strcmp(key, spec_fields[i]) == 0)
            return true;
    return false;
}

static char *default_name(const struct job *j)
{
    if (j->script) {
        if (!j->script_path || strcmp(j->script_path, "-") == 0)
            return xstrdup("stdin");
        char *p = xstrdup(j->script_path);
        char *name = xstrdup(basename(p));
        free(p);
        return name;
    }
    const char *s = j->command;
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strcspn(s, " \t\n;|&<>()'\"");
    char *word = xstrndup(s, n);
    char *slash = strrchr(word, '/');
    char *name = xstrdup(slash ? slash + 1 : word);
    free(word);
    if (!*name) {
        free(name);
        name = xstrdup("job");
    }
    return name;
}

static bool valid_name(const char *s)
{
    if (!*s || strlen(s) > MAX_NAME_LEN)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

static bool valid_conda_env(const char *s)
{
    if (strlen(s) > 4096)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

/* Builds a job from one spec. NULL + *err (a 400 message) if the spec is bad. */
static struct job *spec_to_job(json_t *spec, const struct caller *who, bool *dry_run, char **err)
{
    if (!json_is_object(spec)) {
        *err = xstrdup("a job spec must be a JSON object");
        return NULL;
    }
    const char *key;
    json_t *v;
    json_object_foreach(spec, key, v) {
        if (!known_field(key)) {
            *err = xasprintf("unknown field '%s' in job spec", key);
            return NULL;
        }
    }
    struct job *j = job_new();
    json_t *command = json_object_get(spec, "command");
    json_t *script = json_object_get(spec, "script");
    json_t *script_path = json_object_get(spec, "script_path");
    json_t *name = json_object_get(spec, "name");
    json_t *workdir = json_object_get(spec, "workdir");
    json_t *env = json_object_get(spec, "env");
    json_t *prio = json_object_get(spec, "priority");
    json_t *limit = json_object_get(spec, "time_limit");
    json_t *hold = json_object_get(spec, "hold");
    json_t *dry = json_object_get(spec, "dry_run");

    if ((command && !json_is_string(command)) || (script && !json_is_string(script)) ||
        (script_path && !json_is_string(script_path)) || (name && !json_is_string(name)) ||
        (workdir && !json_is_string(workdir))) {
        *err = xstrdup("command, script, script_path, name and workdir must be strings");
        goto bad;
    }
    if (!!command == !!script) {
        *err = xstrdup("a job needs exactly one of 'command' or 'script'");
        goto bad;
    }
    if (command && !*json_string_value(command)) {
        *err = xstrdup("the command is empty");
        goto bad;
    }
    if (!workdir || json_string_value(workdir)[0] != '/') {
        *err = xstrdup("'workdir' must be an absolute directory path");
        goto bad;
    }
    if (env && !json_is_object(env)) {
        *err = xstrdup("'env' must be an object of strings");
        goto bad;
    }
    json_object_foreach(env, key, v) {
        if (!json_is_string(v) || !*key || strchr(key, '=')) {
            *err = xasprintf("env: '%s' must be a string with a name without '='", key);
            goto bad;
        }
    }
    if (prio && (!json_is_integer(prio) || json_integer_value(prio) < 0 ||
                 json_integer_value(prio) > JOB_PRIORITY_MAX)) {
        *err = xstrdup("'priority' must be an integer from 0 to 255");
        goto bad;
    }
    if (limit && (!json_is_integer(limit) || json_integer_value(limit) < 0)) {
        *err = xstrdup("'time_limit' must be a number of seconds >= 0");
        goto bad;
    }
    if ((hold && !json_is_boolean(hold)) || (dry && !json_is_boolean(dry))) {
        *err = xstrdup("'hold' and 'dry_run' must be true or false");
        goto bad;
    }
    json_t *gpus = json_object_get(spec, "gpus");
    json_t *gpu_mem = json_object_get(spec, "gpu_memory_mb");
    json_t *shared = json_object_get(spec, "shared");
    json_t *per_task = json_object_get(spec, "gpus_per_task");
    if ((gpus && (!json_is_integer(gpus) || json_integer_value(gpus) < 0 ||
                  json_integer_value(gpus) > GPUINFO_MAX_GPUS)) ||
        (gpu_mem && (!json_is_integer(gpu_mem) || json_integer_value(gpu_mem) < 0)) ||
        (per_task && (!json_is_integer(per_task) || json_integer_value(per_task) < 0 ||
                      json_integer_value(per_task) > 1)) ||
        (shared && !json_is_boolean(shared))) {
        *err = xasprintf("'gpus' (0 to %d), 'gpu_memory_mb' (>= 0), 'gpus_per_task' (0 or 1) "
                         "must be integers and 'shared' true or false", GPUINFO_MAX_GPUS);
        goto bad;
    }
    bool wants_gpus = gpus && json_integer_value(gpus) > 0;
    if (!wants_gpus && (json_is_true(shared) || (gpu_mem && json_integer_value(gpu_mem) > 0) ||
                        (per_task && json_integer_value(per_task) > 0))) {
        *err = xstrdup("'shared', 'gpu_memory_mb' and 'gpus_per_task' need 'gpus' (--gpus N)");
        goto bad;
    }
    if (json_is_true(shared) && !(gpu_mem && json_integer_value(gpu_mem) > 0)) {
        *err = xstrdup("a shared GPU job needs gpu_memory_mb (--gpu-memory): the share of each "
                       "GPU it may use");
        goto bad;
    }
    json_t *mem = json_object_get(spec, "memory_mb");
    if (mem && (!json_is_integer(mem) || json_integer_value(mem) < 0)) {
        *err = xstrdup("'memory_mb' must be an integer number of MiB >= 0 (0: no limit)");
        goto bad;
    }
    if (mem && gd.mem_total_mb > 0 && json_integer_value(mem) > gd.mem_total_mb) {
        *err = xasprintf("requests %lld MiB of memory but this machine has %lld MiB",
                         (long long)json_integer_value(mem), (long long)gd.mem_total_mb);
        goto bad;
    }
    json_t *conda = json_object_get(spec, "conda_env");
    if (conda && !json_is_null(conda) &&
        (!json_is_string(conda) || !valid_conda_env(json_string_value(conda)))) {
        *err = xstrdup("'conda_env' must be a conda environment name or path (no control "
                       "characters, at most 4096 bytes)");
        goto bad;
    }
    j->memory_mb = mem ? (int64_t)json_integer_value(mem) : 0;
    json_t *begin = json_object_get(spec, "begin_time");
    if (begin && !json_is_null(begin) && (!json_is_number(begin) || json_number_value(begin) < 0)) {
        *err = xstrdup("'begin_time' must be unix seconds (a number >= 0; 0: no wait)");
        goto bad;
    }
    j->begin_time = json_is_number(begin) ? json_number_value(begin) : 0;
    json_t *sigspec = json_object_get(spec, "signal_spec");
    if (sigspec && !json_is_null(sigspec)) {
        char *why = NULL;
        int sig;
        int64_t secs;
        bool main_only;
        if (!json_is_string(sigspec)) {
            *err = xstrdup("'signal_spec' must be a string \"[B:]SIG[@SECS]\"");
            goto bad;
        }
        if (parse_signal_spec(json_string_value(sigspec), &sig, &secs, &main_only, &why) < 0) {
            *err = why;
            goto bad;
        }
        if (!limit || json_integer_value(limit) <= 0) {
            *err = xstrdup("'signal_spec' (--signal) is sent before the time limit: it needs "
                           "'time_limit' (--time)");
            goto bad;
        }
        j->warn_signal = sig;
        j->warn_secs = secs;
        j->warn_main_only = main_only;
    }
    j->conda_env = json_is_string(conda) && *json_string_value(conda)
                       ? xstrdup(json_string_value(conda))
                       : NULL;
    json_t *deps = json_object_get(spec, "depends_on");
    json_t *mode = json_object_get(spec, "depends_mode");
    json_t *auto_cancel = json_object_get(spec, "auto_cancel");
    if (deps && !json_is_array(deps)) {
        *err = xstrdup("'depends_on' must be a list of {\"id\": N, \"kind\": \"afterok\"|"
                       "\"afterany\"|\"afternotok\"}");
        goto bad;
    }
    size_t di;
    json_t *dep;
    json_array_foreach(deps, di, dep) {
        json_t *id = json_is_integer(dep) ? dep : json_object_get(dep, "id");
        json_t *kind = json_is_object(dep) ? json_object_get(dep, "kind") : NULL;
        enum job_dep_kind k = JOB_DEP_AFTEROK;
        if (json_is_object(dep)) {
            json_object_foreach(dep, key, v) {
                if (strcmp(key, "id") && strcmp(key, "kind")) {
                    *err = xasprintf("depends_on: unknown field '%s'", key);
                    goto bad;
                }
            }
        }
        if (!json_is_integer(id) || json_integer_value(id) <= 0 ||
            (kind && (!json_is_string(kind) ||
                      job_dep_kind_parse(json_string_value(kind), &k) < 0))) {
            *err = xstrdup("depends_on: each entry needs 'id' (a job id) and optionally 'kind' "
                           "(afterok, afterany or afternotok; default afterok)");
            goto bad;
        }
        job_deps_add(j, (int64_t)json_integer_value(id), k);
    }
    if (mode && (!json_is_string(mode) || (strcmp(json_string_value(mode), "all") != 0 &&
                                           strcmp(json_string_value(mode), "any") != 0))) {
        *err = xstrdup("'depends_mode' must be \"all\" or \"any\"");
        goto bad;
    }
    if (auto_cancel && !json_is_boolean(auto_cancel)) {
        *err = xstrdup("'auto_cancel' must be true or false");
        goto bad;
    }
    j->deps_any = mode && strcmp(json_string_value(mode), "any") == 0;
    j->auto_cancel = !json_is_false(auto_cancel);
    if (name && !valid_name(json_string_value(name))) {
        *err = xasprintf("invalid job name: use 1 to %d printable characters", MAX_NAME_LEN);
        goto bad;
    }
    j->command = command ? xstrdup(json_string_value(command)) : NULL;
    j->script = script ? xstrdup(json_string_value(script)) : NULL;
    j->script_path = script_path ? xstrdup(json_string_value(script_path))
                                 : (script ? xstrdup("-") : NULL);
    j->name = name ? xstrdup(json_string_value(name)) : default_name(j);
    j->workdir = xstrdup(json_string_value(workdir));
    j->env = env ? json_incref(env) : json_object();
    j->priority = prio ? (int)json_integer_value(prio) : JOB_PRIORITY_DEFAULT;
    j->time_limit = limit ? (int64_t)json_integer_value(limit) : 0;
    j->gpus = gpus ? (int)json_integer_value(gpus) : 0;
    j->gpu_memory_mb = gpu_mem ? (int64_t)json_integer_value(gpu_mem) : 0;
    j->shared = json_is_true(shared);
    j->gpus_per_task = per_task && j->gpus > 0 ? (int)json_integer_value(per_task) : 0;
    char *why = NULL;
    if (scheduler_check_feasible(j, gpu_current(),
                                 /* 0 means all there: none visible is a bit no GPU has */
                                 gpu_visible() ? gpu_visible() : 1ULL << 63, &why) < 0) {
        *err = why;
        goto bad;
    }
    j->user = xstrdup(who->user);
    j->uid = who->uid;
    j->gid = who->gid;
    j->submit_time = now_wall();
    if (json_is_true(hold)) {
        j->state = JOB_HELD;
        j->reason = xstrdup("JobHeldUser");
    }
    if (json_is_true(dry))
        *dry_run = true;
    return j;
bad:
    job_free(j);
    return NULL;
}

static void route_submit(const struct caller *who, const char *body, size_t len,
                         struct reply *rep)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!root) {
        reply_error(rep, 400, "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
                    jerr.text);
        return;
    }
    bool dry_run = false;
    json_t *specs = json_object_get(root, "jobs");
    if (json_is_object(root) && specs) {
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v) {
            if (strcmp(key, "jobs") && strcmp(key, "dry_run")) {
                reply_error(rep, 400, "unknown field '%s' in a batch submission", key);
                json_decref(root);
                return;
            }
        }
        if (!json_is_array(specs) || json_array_size(specs) == 0) {
            reply_error(rep, 400, "'jobs' must be a non-empty array of job specs");
            json_decref(root);
            return;
        }
        dry_run = json_is_true(json_object_get(root, "dry_run"));
        json_incref(specs);
    } else {
        specs = json_pack("[O]", root);
    }
    size_t n = json_array_size(specs);
    struct job **jobs = xcalloc(n, sizeof(*jobs));
    char *err = NULL;
    size_t made = 0;
    for (; made < n; made++) {
        jobs[made] = spec_to_job(json_array_get(specs, made), who, &dry_run, &err);
        if (!jobs[made])
            break;
        /* Every entry is checked against the jobs that exist before this request. */
        if (jobs[made]->n_deps &&
            jobs_check_deps(jobs[made], jobs_next_id() + (int64_t)made, &err) < 0) {
            job_free(jobs[made]);
            break;
        }
    }
    json_decref(specs);
    json_decref(root);
    if (err) {
        if (n > 1)
            reply_error(rep, 400, "job %zu: %s", made + 1, err);
        else
            reply_error(rep, 400, "%s", err);
        free(err);
        for (size_t i = 0; i < made; i++)
            job_free(jobs[i]);
        free(jobs);
        return;
    }
    json_t *out = json_array();
    for (size_t i = 0; i < n; i++) {
        struct job *j = jobs[i];
        if (dry_run) {
            json_array_append_new(out, json_pack("{s:n, s:s, s:s}", "id", "name", j->name, "state",
                                                 job_state_short(j->state)));
            job_free(j);
            continue;
        }
        if (jobs_submit(j) < 0) {
            /* The jobs before it stay submitted (the transaction holds other requests'
             * changes too), but this reply says the request failed. */
            reply_error(rep, 500, "cannot store job %zu of the request; see gflowd.log", i + 1);
            for (size_t k = i; k < n; k++)
                job_free(jobs[k]);
            free(jobs);
            json_decref(out);
            return;
        }
        json_array_append_new(out, json_pack("{s:I, s:s, s:s}", "id", (json_int_t)j->id, "name",
                                             j->name, "state", job_state_short(j->state)));
    }
    free(jobs);
    reply_json(rep, dry_run ? 200 : 201, json_pack("{s:o}", "jobs", out));
}

/* ---- list and show ---- */

struct list_ctx {
    struct strbuf out;
    size_t count;
    bool tsv;
    int fields[JOB_FIELD_COUNT];
    size_t n_fields;
};

static void emit(struct list_ctx *ctx, const struct job *j)
{
    if (ctx->tsv) {
        job_append_tsv(&ctx->out, j, ctx->fields, ctx->n_fields);
        return;
    }
    if (ctx->count++)
        strbuf_addc(&ctx->out, ',');
    job_append_json(&ctx->out, j);
}

/* format=tsv: a header line with the field names (fields=..., default all), then one
 * line per job. Much cheaper than JSON for a client to read 10,000 jobs. */
static int parse_format(struct MHD_Connection *c, struct list_ctx *ctx, char **err)
{
    const char *format = query(c, "format");
    if (!format || !strcmp(format, "json"))
        return 0;
    if (strcmp(format, "tsv") != 0) {
        *err = xasprintf("unknown format '%s': use json or tsv", format);
        return -1;
    }
    ctx->tsv = true;
    const char *fields = query(c, "fields");
    if (!fields || !*fields) {
        for (int f = 0; f < JOB_FIELD_COUNT; f++)
            ctx->fields[ctx->n_fields++] = f;
        return 0;
    }
    char *copy = xstrdup(fields), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int f = job_field_parse(tok);
        if (f < 0 || ctx->n_fields == JOB_FIELD_COUNT) {
            *err = xasprintf("unknown or repeated field '%s'", tok);
            free(copy);
            return -1;
        }
        ctx->fields[ctx->n_fields++] = f;
    }
    free(copy);
    return 0;
}

static void list_cb(struct job *j, void *arg)
{
    struct list_ctx *ctx = arg;
    if (j->state == JOB_QUEUED) {
        struct job *live = jobs_get(j->id);
        if (live)
            j->wait_reason = live->wait_reason;
    }
    emit(ctx, j);
    job_free(j);
}

/* ---- listing active jobs from memory (the common case: gqueue) ---- */

struct sort_spec {
    const char *key;
    bool descending;
    double now;
};

static double elapsed(const struct job *j, double now)
{
    if (j->start_time <= 0)
        return 0;
    return (j->end_time > 0 ? j->end_time : now) - j->start_time;
}

static int cmp_num(double a, double b)
{
    return (a > b) - (a < b);
}

static int cmp_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}

/* Same order as store_list: the key, then the id, both in the requested direction. */
static int job_cmp(const void *pa, const void *pb, void *arg)
{
    const struct job *a = *(struct job *const *)pa, *b = *(struct job *const *)pb;
    const struct sort_spec *s = arg;
    int c = 0;
    if (!strcmp(s->key, "name"))
        c = cmp_str(a->name, b->name);
    else if (!strcmp(s->key, "state"))
        c = cmp_num(a->state, b->state);
    else if (!strcmp(s->key, "priority"))
        c = cmp_num(a->priority, b->priority);
    else if (!strcmp(s->key, "user"))
        c = cmp_str(a->user, b->user);
    else if (!strcmp(s->key, "submit"))
        c = cmp_num(a->submit_time, b->submit_time);
    else if (!strcmp(s->key, "start"))
        c = cmp_num(a->start_time, b->start_time);
    else if (!strcmp(s->key, "end"))
        c = cmp_num(a->end_time, b->end_time);
    else if (!strcmp(s->key, "time"))
        c = cmp_num(elapsed(a, s->now), elapsed(b, s->now));
    if (!c)
        c = cmp_num((double)a->id, (double)b->id);
    return s->descending ? -c : c;
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static bool known_sort_key(const char *key)
{
    static const char *const keys[] = {"id",     "name",  "state", "priority", "user",
                                       "submit", "start", "end",   "time"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (!strcmp(key, keys[i]))
            return true;
    return false;
}

static bool only_active_states(const struct store_query *q)
{
    if (q->n_states == 0)
        return false;
    for (size_t i = 0; i < q->n_states; i++)
        if (!job_state_is_active(q->states[i]))
            return false;
    return true;
}

static bool matches(const struct job *j, const struct store_query *q, const int64_t *sorted_ids)
{
    bool state_ok = false;
    for (size_t i = 0; i < q->n_states && !state_ok; i++)
        state_ok = j->state == q->states[i];
    if (!state_ok || (q->user && cmp_str(j->user, q->user) != 0))
        return false;
    if (q->since > 0 && j->submit_time < q->since)
        return false;
    return !sorted_ids || bsearch(&j->id, sorted_ids, q->n_ids, sizeof(int64_t), cmp_id);
}

static void list_active(const struct store_query *q, struct list_ctx *ctx)
{
    size_t n;
    struct job **all = jobs_active(&n);
    int64_t *ids = NULL;
    if (q->n_ids) {
        ids = xmalloc(q->n_ids * sizeof(*ids));
        memcpy(ids, q->ids, q->n_ids * sizeof(*ids));
        qsort(ids, q->n_ids, sizeof(*ids), cmp_id);
    }
    struct job **hits = xmalloc((n ? n : 1) * sizeof(*hits));
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (matches(all[i], q, ids))
            hits[count++] = all[i];
    free(ids);
    struct sort_spec spec = {q->sort ? q->sort : "id", q->descending, now_wall()};
    if (strcmp(spec.key, "id") != 0 || spec.descending)
        qsort_r(hits, count, sizeof(*hits), job_cmp, &spec);
    size_t from = 0, to = count;
    if (q->limit > 0 && (size_t)q->limit < count)
        to = (size_t)q->limit;
    else if (q->limit < 0 && (size_t)-q->limit < count)
        from = count - (size_t)-q->limit;
    for (size_t i = from; i < to; i++)
        emit(ctx, hits[i]);
    free(hits);
}

static int parse_states(const char *s, enum job_state *states, size_t *n, char **err)
{
    *n = 0;
    char *copy = xstrdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        enum job_state st;
        if (job_state_parse(tok, &st) < 0) {
            *err = xasprintf("unknown state '%s': use PD, H, R, CD, F, CA or TO", tok);
            free(copy);
            return -1;
        }
        if (*n < 64)
            states[(*n)++] = st;
    }
    free(copy);
    return 0;
}

static void route_list(struct MHD_Connection *c, const struct caller *who, struct reply *rep)
{
    struct store_query q = {0};
    enum job_state states[64];
    int64_t *ids = NULL;
    char *err = NULL;
    const char *v;
    if ((v = query(c, "state")) && *v) {
        if (parse_states(v, states, &q.n_states, &err) < 0)
            goto bad;
        q.states = states;
    }
    if ((v = query(c, "id")) && *v) {
        if (parse_id_list(v, &ids, &q.n_ids, &err) < 0)
            goto bad;
        q.ids = ids;
    }
    v = query(c, "user");
    q.user = !v || !*v ? who->user : (strcmp(v, "all") == 0 ? NULL : v);
    if ((v = query(c, "since")) && *v) {
        char *end;
        q.since = strtod(v, &end);
        if (*end) {
            err = xasprintf("'since' must be unix seconds, not '%s'", v);
            goto bad;
        }
    }
    if ((v = query(c, "sort")) && *v) {
        q.descending = v[0] == '-';
        q.sort = q.descending ? v + 1 : v;
    }
    if ((v = query(c, "limit")) && *v && parse_int64(v, &q.limit) < 0) {
        err = xasprintf("'limit' must be an integer, not '%s'", v);
        goto bad;
    }
    if (q.sort && !known_sort_key(q.sort)) {
        err = xasprintf("unknown sort key '%s': use id, name, state, priority, user, submit, "
                        "start, end or time", q.sort);
        goto bad;
    }
    struct list_ctx ctx = {.count = 0};
    if (parse_format(c, &ctx, &err) < 0)
        goto bad;
    strbuf_init(&ctx.out);
    if (ctx.tsv) {
        for (size_t i = 0; i < ctx.n_fields; i++) {
            strbuf_adds(&ctx.out, job_field_name((enum job_field)ctx.fields[i]));
            strbuf_addc(&ctx.out, i + 1 < ctx.n_fields ? '\t' : '\n');
        }
    } else {
        strbuf_adds(&ctx.out, "{\"jobs\":[");
    }
    /* Active jobs are all in memory; only history needs the database. */
    if (only_active_states(&q))
        list_active(&q, &ctx);
    else if (store_list(gd.store, &q, list_cb, &ctx) < 0) {
        strbuf_free(&ctx.out);
        err = xstrdup(store_error(gd.store));
        goto bad;
    }
    if (!ctx.tsv)
        strbuf_adds(&ctx.out, "]}\n");
    free(ids);
    size_t len = ctx.out.len;
    reply_text(rep, 200, strbuf_detach(&ctx.out), len,
               ctx.tsv ? "text/tab-separated-values" : "application/json");
    return;
bad:
    reply_error(rep, 400, "%s", err);
    free(err);
    free(ids);
}

/* Loads job id for the caller: 0 and *out filled, or -1 with the reply set. */
static int load_job(int64_t id, bool with_payload, struct job *out, struct reply *rep)
{
    int rc = store_get_job(gd.store, id, out, with_payload);
    if (rc == 1) {
        reply_error(rep, 404, "job %lld not found; 'gqueue -a' lists your jobs", (long long)id);
        return -1;
    }
    if (rc < 0) {
        reply_error(rep, 500, "cannot read job %lld: %s", (long long)id, store_error(gd.store));
        return -1;
    }
    return 0;
}

static bool may_act_on(const struct caller *who, uint32_t owner_uid)
{
    return who->is_admin || who->uid == owner_uid;
}

static void route_show(int64_t id, const struct caller *who, struct reply *rep)
{
    struct job j;
    job_init(&j);
    if (load_job(id, true, &j, rep) < 0)
        return;
    struct job *live = jobs_get(id);
    if (live)
        j.wait_reason = live->wait_reason;
    if (!may_act_on(who, j.uid)) { /* others see the job, not its environment */
        json_decref(j.env);
        j.env = NULL;
        free(j.script);
        j.script = NULL;
    }
    json_t *o = job_to_json(&j, true, gd.paths.log_dir);
    int64_t *dependents = NULL;
    size_t n_dependents = 0;
    json_t *dl = json_array();
    if (store_dependents(gd.store, id, &dependents, &n_dependents) == 0)
        for (size_t i = 0; i < n_dependents; i++)
            json_array_append_new(dl, json_integer(dependents[i]));
    free(dependents);
    json_object_set_new(o, "dependents", dl);
    if (live && live->n_deps) {
        /* Where each dependency stands (pending, met, never). */
        static const char *const names[] = {"pending", "met", "never"};
        json_t *arr = json_object_get(o, "depends_on");
        for (size_t i = 0; i < live->n_deps && i < json_array_size(arr); i++)
            json_object_set_new(json_array_get(arr, i), "status",
                                json_string(names[live->deps[i].status]));
    }
    json_object_set_new(o, "gpus_detail", gpu_detail_json(j.gpu_ids));
    if (j.state == JOB_RUNNING)
        json_object_set_new(o, "foreign_gpus", gpu_foreign_json(j.id, j.gpu_ids));
    reply_json(rep, 200, o);
    job_clear(&j);
}

/* ---- cancel, hold, release ---- */

static struct job *own_active_job(int64_t id, const struct caller *who, const char *verb,
                                  struct reply *rep)
{
    struct job *j = jobs_get(id);
    if (!j) {
        struct job old;
        job_init(&old);
        if (load_job(id, false, &old, rep) == 0)
            reply_error(rep, 409, "job %lld has already ended (%s); nothing to %s", (long long)id,
                        job_state_short(old.state), verb);
        job_clear(&old);
        return NULL;
    }
    if (!may_act_on(who, j->uid)) {
        reply_error(rep, 403, "job %lld belongs to %s; only its owner or an admin may %s it",
                    (long long)id, j->user, verb);
        return NULL;
    }
    return j;
}

static json_t *state_reply(const struct job *j)
{
    json_t *o = json_pack("{s:I, s:s}", "id", (json_int_t)j->id, "state", job_state_short(j->state));
    if (j->state == JOB_RUNNING && j->end_request != JOB_END_NONE)
        json_object_set_new(o, "cancelling", json_true());
    return o;
}

/* The reply to a cancel: the job's state, and the jobs that its cancellation takes
 * along (auto-cancel of dependents; for a running job, once it has ended). */
static json_t *cancel_reply(const struct job *j, const struct jobs_cascade *also, size_t n)
{
    json_t *o = state_reply(j);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:I, s:I}", "id", (json_int_t)also[i].id,
                                             "depends_on", (json_int_t)also[i].because));
    json_object_set_new(o, "dependents_cancelled", arr);
    return o;
}

static void route_cancel(struct MHD_Connection *c, int64_t id, const struct caller *who,
                         struct reply *rep)
{
    struct job *j = own_active_job(id, who, "cancel", rep);
    if (!j)
        return;
    struct jobs_cascade *also;
    size_t n_also = jobs_cascade_preview(j, &also);
    const char *dry = query(c, "dry_run");
    if (dry && strcmp(dry, "0") != 0) {
        reply_json(rep, 200, cancel_reply(j, also, n_also));
        free(also);
        return;
    }
    if (j->state == JOB_RUNNING) {
        runner_request_end(j, JOB_END_CANCEL);
    } else {
        j->end_time = now_wall();
        jobs_set_state(j, JOB_CANCELLED, "CancelledByUser");
    }
    reply_json(rep, 200, cancel_reply(j, also, n_also));
    free(also);
}

/* release takes an optional body {"begin_time": unix seconds}: released now, but
 * not started before then (gjob release --at). */
static void route_hold_release(int64_t id, const struct caller *who, bool hold,
                               const char *body, size_t body_len, struct reply *rep)
{
    double begin = -1;
    if (!hold && body_len) {
        json_error_t jerr;
        json_t *o = json_loadb(body, body_len, 0, &jerr);
        json_t *b = json_object_get(o, "begin_time");
        const char *key;
        json_t *v;
        bool ok = json_is_object(o) && (!b || (json_is_number(b) && json_number_value(b) >= 0));
        json_object_foreach(o, key, v) {
            if (strcmp(key, "begin_time") != 0)
                ok = false;
        }
        if (b && ok)
            begin = json_number_value(b);
        json_decref(o);
        if (!ok) {
            reply_error(rep, 400, "a release takes no body or {\"begin_time\": unix seconds}");
            return;
        }
    }
    struct job *j = own_active_job(id, who, hold ? "hold" : "release", rep);
    if (!j)
        return;
    enum job_state from = hold ? JOB_QUEUED : JOB_HELD;
    if (j->state != from) {
        reply_error(rep, 409, "job %lld is %s (%s); only %s jobs can be %s", (long long)id,
                    job_state_name(j->state), job_state_short(j->state),
                    hold ? "queued (PD)" : "held (H)", hold ? "held" : "released");
        return;
    }
    if (begin >= 0)
        j->begin_time = begin;
    jobs_set_state(j, hold ? JOB_HELD : JOB_QUEUED, hold ? "JobHeldUser" : NULL);
    reply_json(rep, 200, state_reply(j));
}

/* ---- logs ---- */

/* Byte length of the first n lines of fd. */
static off_t first_lines_len(int fd, int64_t n)
{
    char buf[65536];
    off_t pos = 0;
    ssize_t got;
    while (n > 0 && (got = pread(fd, buf, sizeof(buf), pos)) > 0) {
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] == '\n' && --n == 0)
                return pos + i + 1;
        }
        pos += got;
    }
    return pos;
}

/* Offset where the last n lines of a file of the given size begin. */
static off_t last_lines_start(int fd, off_t size, int64_t n)
{
    char buf[65536];
    off_t end = size;
    bool skip_final_newline = true;
    while (end > 0) {
        off_t start = end > (off_t)sizeof(buf) ? end - (off_t)sizeof(buf) : 0;
        ssize_t got = pread(fd, buf, (size_t)(end - start), start);
        if (got <= 0)
            return 0;
        for (ssize_t i = got - 1; i >= 0; i--) {
            if (buf[i] != '\n')
                continue;
            if (skip_final_newline && start + i == size - 1)
                continue;
            if (--n == 0)
                return start + i + 1;
        }
        skip_final_newline = false;
        end = start;
    }
    return 0;
}

static int query_count(struct MHD_Connection *c, const char *key, int64_t *out, char **err)
{
    const char *v = query(c, key);
    if (!v)
        return 0;
    if (parse_int64(v, out) < 0 || *out < 0) {
        *err = xasprintf("'%s' must be a whole number >= 0, not '%s'", key, v);
        return -1;
    }
    return 1;
}

static void route_log(struct MHD_Connection *c, int64_t id, const struct caller *who,
                      struct reply *rep)
{
    struct job j;
    job_init(&j);
    if (load_job(id, false, &j, rep) < 0)
        return;
    uint32_t owner = j.uid;
    job_clear(&j);
    if (!may_act_on(who, owner)) {
        reply_error(rep, 403, "job %lld belongs to another user; only its owner or an admin may "
                    "read its log", (long long)id);
        return;
    }
    int64_t first = 0, last = 0, offset = 0, length = 0;
    char *err = NULL;
    int has_first = query_count(c, "first", &first, &err);
    int has_last = has_first < 0 ? -1 : query_count(c, "last", &last, &err);
    int has_offset = has_last < 0 ? -1 : query_count(c, "offset", &offset, &err);
    int has_length = has_offset < 0 ? -1 : query_count(c, "length", &length, &err);
    if (has_length < 0) {
        reply_error(rep, 400, "%s", err);
        free(err);
        return;
    }
    char *path = runner_log_path(id);
    const char *follow = query(c, "follow");
    if (follow && strcmp(follow, "0") != 0) {
        reply_follow_log(rep, c, id, path, (unsigned long long)offset);
        free(path);
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
        if (fd >= 0)
            close(fd);
        reply_text(rep, 200, xstrdup(""), 0, NULL);
        return;
    }
    off_t start = 0, len = st.st_size;
    if (has_first) {
        len = first_lines_len(fd, first);
    } else if (has_last) {
        start = last ? last_lines_start(fd, st.st_size, last) : st.st_size;
        len = st.st_size - start;
    } else if (has_offset || has_length) {
        start = offset < st.st_size ? offset : st.st_size;
        len = st.st_size - start;
        if (has_length && length < len)
            len = length;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_fd_at_offset64((uint64_t)len, fd, (uint64_t)start);
    if (!resp) {
        close(fd);
        reply_error(rep, 500, "cannot send the log");
        return;
    }
    if (rep->response)
        MHD_destroy_response(rep->response);
    rep->status = 200;
    rep->response = resp;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
}

static bool is_method(const char *method, const char *want, struct reply *rep)
{
    if (strcmp(method, want) == 0)
        return true;
    reply_error(rep, 405, "use %s for this path", want);
    return false;
}

/* ---- GPUs ---- */

static bool require_admin(const struct caller *who, struct reply *rep)
{
    if (who->is_admin)
        return true;
    reply_error(rep, 403, "only root, the daemon's user or members of daemon.admin_group may "
                          "change GPU settings");
    return false;
}

static json_t *parse_body(const char *body, size_t len, struct reply *rep)
{
    json_error_t jerr;
    json_t *o = json_loadb(body, len, 0, &jerr);
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

static void route_gpus_allowed(const char *method, const struct caller *who, const char *body,
                               size_t len, struct reply *rep)
{
    if (strcmp(method, "GET") == 0) {
        reply_json(rep, 200, gpu_allowed_json());
        return;
    }
    if (!is_method(method, "PUT", rep) || !require_admin(who, rep))
        return;
    json_t *o = parse_body(body, len, rep);
    if (!o)
        return;
    json_t *g = json_object_get(o, "gpus");
    struct strbuf spec;
    strbuf_init(&spec);
    size_t i;
    json_t *v;
    if (json_is_string(g))
        strbuf_adds(&spec, json_string_value(g));
    json_array_foreach(g, i, v) {
        if (json_is_integer(v))
            strbuf_addf(&spec, "%s%lld", i ? "," : "", (long long)json_integer_value(v));
    }
    char *err = NULL;
    if (!spec.len)
        reply_error(rep, 400, "'gpus' must be a list of GPU indices or \"all\"");
    else if (gpu_set_allowed(spec.buf, &err) < 0)
        reply_error(rep, 400, "%s", err);
    else
        reply_json(rep, 200, gpu_allowed_json());
    free(err);
    strbuf_free(&spec);
    json_decref(o);
}

static int ignored_args(struct MHD_Connection *c, json_t *o, int *gpu, long long *pid,
                        struct reply *rep)
{
    json_t *g = o ? json_object_get(o, "gpu") : NULL, *p = o ? json_object_get(o, "pid") : NULL;
    const char *qg = query(c, "gpu"), *qp = query(c, "pid");
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

static void route_gpus_ignored(struct MHD_Connection *c, const char *method,
                               const struct caller *who, const char *body, size_t len,
                               struct reply *rep)
{
    if (strcmp(method, "GET") == 0) {
        reply_json(rep, 200, gpu_ignored_json());
        return;
    }
    bool add = strcmp(method, "POST") == 0;
    if (!add && strcmp(method, "DELETE") != 0) {
        reply_error(rep, 405, "use GET, POST or DELETE for this path");
        return;
    }
    if (!require_admin(who, rep))
        return;
    json_t *o = add ? parse_body(body, len, rep) : NULL;
    if (add && !o)
        return;
    int gpu;
    long long pid;
    char *err = NULL;
    if (ignored_args(c, o, &gpu, &pid, rep) == 0) {
        if ((add ? gpu_ignore(gpu, pid, &err) : gpu_unignore(gpu, pid, &err)) < 0)
            reply_error(rep, 404, "%s", err);
        else
            reply_json(rep, 200, gpu_ignored_json());
    }
    free(err);
    json_decref(o);
}

/* ---- dispatch ---- */


void routes_dispatch(struct MHD_Connection *c, const struct caller *who, const char *method,
                     const char *url, const char *body, size_t body_len, struct reply *rep)
{
    if (strcmp(url, "/v1/health") == 0) {
        if (is_method(method, "GET", rep))
            route_health(rep);
        return;
    }
    if (strcmp(url, "/v1/status") == 0) {
        if (is_method(method, "GET", rep))
            route_status(rep);
        return;
    }
    if (strcmp(url, "/v1/gpus") == 0) {
        if (is_method(method, "GET", rep))
            reply_json(rep, 200, gpu_status_json());
        return;
    }
    if (strcmp(url, "/v1/gpus/allowed") == 0) {
        route_gpus_allowed(method, who, body, body_len, rep);
        return;
    }
    if (strcmp(url, "/v1/gpus/ignored") == 0) {
        route_gpus_ignored(c, method, who, body, body_len, rep);
        return;
    }
    if (strcmp(url, "/v1/jobs") == 0) {
        if (strcmp(method, "POST") == 0)
            route_submit(who, body, body_len, rep);
        else if (is_method(method, "GET", rep))
            route_list(c, who, rep);
        return;
    }
    if (!str_starts_with(url, "/v1/jobs/")) {
        reply_error(rep, 404, "no such endpoint: %s %s (see docs/api.md)", method, url);
        return;
    }
    const char *p = url + strlen("/v1/jobs/");
    char *end;
    errno = 0;
    long long id = strtoll(p, &end, 10);
    if (end == p || errno || id <= 0 || (*end && *end != '/')) {
        reply_error(rep, 400, "invalid job id in %s", url);
        return;
    }
    const char *action = *end ? end + 1 : "";
    if (!*action) {
        if (is_method(method, "GET", rep))
            route_show(id, who, rep);
    } else if (strcmp(action, "cancel") == 0) {
        if (is_method(method, "POST", rep))
            route_cancel(c, id, who, rep);
    } else if (strcmp(action, "hold") == 0 || strcmp(action, "release") == 0) {
        if (is_method(method, "POST", rep))
            route_hold_release(id, who, strcmp(action, "hold") == 0, body, body_len, rep);
    } else if (strcmp(action, "log") == 0) {
        if (is_method(method, "GET", rep))
            route_log(c, id, who, rep);
    } else {
        reply_error(rep, 404, "no such endpoint: %s %s (see docs/api.md)", method, url);
    }
}
