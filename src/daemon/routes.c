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

#include "clock.h"
#include "gflow_build.h"
#include "gflow_commit.h"
#include "gflowd.h"
#include "gpu.h"
#include "jobs.h"
#include "log.h"
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
    /* Cheap on purpose: `gflowd up` asks for it, and GET /v1/gpus has the details. */
    const struct gpu_set *set = gpu_current();
    json_t *gpus = json_pack("{s:I, s:b, s:o, s:b}", "count", (json_int_t)set->n_gpus,
                             "simulated", set->simulated, "error",
                             gpu_error() ? json_string(gpu_error()) : json_null(),
                             "constrain_devices", gd.cfg.constrain_devices);
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
    "conda_env", "signal_spec", "begin_time", "max_retries",
    /* handled by route_submit: */ "array", "params", "name_template", "max_concurrent"};

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
    json_t *retries = json_object_get(spec, "max_retries");
    if (retries && (!json_is_integer(retries) || json_integer_value(retries) < 0 ||
                    json_integer_value(retries) > 1000)) {
        *err = xstrdup("'max_retries' must be an integer from 0 to 1000");
        goto bad;
    }
    j->max_retries = retries ? (int)json_integer_value(retries) : 0;
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
                                 scheduler_allowed_mask(gpu_visible()), &why) < 0) {
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

/* ---- arrays and sweeps: one spec expanded into many jobs ---- */

/* A submission's reply lists at most this many jobs (count, first_id, last_id: all). */
#define SUBMIT_REPLY_MAX_JOBS 1000

/* A copy of base for one task of an array or a sweep (the payload shared or copied). */
static struct job *task_of(const struct job *base)
{
    struct job *t = job_dup(base, false);
    t->script = base->script ? xstrdup(base->script) : NULL;
    t->env = base->env ? json_incref(base->env) : NULL;
    return t;
}

/* Expands base (from a spec with "array" or "params") into *out (malloc'd, n jobs);
 * base is consumed. *limit gets the array's %K (0 if none). 0, or -1 with *err. */
static int expand_spec(struct job *base, json_t *array, json_t *params, json_t *name_tmpl,
                       struct job ***out, size_t *n_out, int64_t *limit, char **err)
{
    struct job **jobs = NULL;
    size_t n = 0;
    *limit = 0;
    if (array) {
        int64_t *tasks;
        if (!json_is_string(array)) {
            *err = xstrdup("'array' must be a string such as \"1-10\", \"1-10:2\" or "
                           "\"1,3,7%2\"");
            goto fail;
        }
        if (parse_array_spec(json_string_value(array), &tasks, &n, limit, err) < 0)
            goto fail;
        jobs = xmalloc(n * sizeof(*jobs));
        size_t base_len = strlen(base->name);
        for (size_t i = 0; i < n; i++) {
            struct job *t = task_of(base);
            t->array_task = tasks[i];
            char *name = xmalloc(base_len + 24);
            memcpy(name, base->name, base_len);
            snprintf(name + base_len, 24, "_%lld", (long long)tasks[i]);
            free(t->name);
            t->name = name;
            jobs[i] = t;
        }
        free(tasks);
    } else {
        json_t *names = json_object_get(params, "names");
        json_t *rows = json_object_get(params, "rows");
        size_t nn = json_array_size(names);
        if (!json_is_object(params) || !json_is_array(names) || !json_is_array(rows) || !nn ||
            !json_array_size(rows) || (name_tmpl && !json_is_string(name_tmpl))) {
            *err = xstrdup("'params' must be {\"names\": [...], \"rows\": [[...], ...]} (values "
                           "as strings) and 'name_template' a string");
            goto fail;
        }
        char **pn = xcalloc(nn, sizeof(*pn)), **pv = xcalloc(nn, sizeof(*pv));
        for (size_t k = 0; k < nn; k++) {
            const char *s = json_string_value(json_array_get(names, k));
            if (!s || !param_name_valid(s)) {
                *err = xstrdup("params: each name must be letters, digits and '_', not starting "
                               "with a digit");
                free(pn);
                free(pv);
                goto fail;
            }
            pn[k] = (char *)s;
        }
        size_t nr = json_array_size(rows);
        jobs = xmalloc(nr * sizeof(*jobs));
        for (size_t r = 0; r < nr; r++) {
            json_t *row = json_array_get(rows, r);
            bool ok = json_is_array(row) && json_array_size(row) == nn;
            for (size_t k = 0; ok && k < nn; k++)
                ok = (pv[k] = (char *)json_string_value(json_array_get(row, k))) != NULL;
            if (!ok) {
                *err = xasprintf("params: row %zu must be a list of %zu strings", r + 1, nn);
                free(pn);
                free(pv);
                goto fail;
            }
            struct job *t = task_of(base);
            jobs[n++] = t;
            /* The job keeps its values and the templates (gjob update --param). */
            t->params = json_object();
            for (size_t k = 0; k < nn; k++)
                json_object_set_new(t->params, pn[k], json_string(pv[k]));
            if (name_tmpl)
                t->name_template = xstrdup(json_string_value(name_tmpl));
            if (base->command) {
                free(t->command);
                t->command = sweep_fill_command(base->command, pn, pv, nn);
                t->command_template = xstrdup(base->command);
            }
            if (base->script) {
                free(t->script);
                t->script = sweep_fill_command(base->script, pn, pv, nn);
                t->script_template = xstrdup(base->script);
            }
            free(t->name);
            t->name = name_tmpl ? sweep_fill_name(json_string_value(name_tmpl), pn, pv, nn)
                                : xasprintf("%s_%zu", base->name, r + 1);
            if (!valid_name(t->name)) {
                *err = xasprintf("params: row %zu: the name '%s' is not valid (1 to %d "
                                 "printable characters)", r + 1, t->name, MAX_NAME_LEN);
                free(pn);
                free(pv);
                goto fail;
            }
        }
        free(pn);
        free(pv);
    }
    job_free(base);
    *out = jobs;
    *n_out = n;
    return 0;
fail:
    for (size_t i = 0; i < n && jobs; i++)
        job_free(jobs[i]);
    free(jobs);
    job_free(base);
    return -1;
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
            if (strcmp(key, "jobs") && strcmp(key, "dry_run") && strcmp(key, "max_concurrent")) {
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
    /* Arrays, sweeps and --max-concurrent: one group for the whole submission. */
    json_t *first = json_array_get(specs, 0);
    json_t *array = json_object_get(first, "array"), *params = json_object_get(first, "params");
    json_t *name_tmpl = json_object_get(first, "name_template");
    json_t *max_conc = json_object_get(first, "max_concurrent");
    if (n > 1 || json_object_get(root, "jobs")) {
        for (size_t i = 0; i < n; i++) {
            json_t *sp = json_array_get(specs, i);
            if (json_object_get(sp, "array") || json_object_get(sp, "params") ||
                json_object_get(sp, "name_template") || json_object_get(sp, "max_concurrent"))
                err = xstrdup("'array', 'params', 'name_template' and 'max_concurrent' belong "
                              "to a single-spec submission (a batch takes 'max_concurrent' at "
                              "its top level)");
        }
        max_conc = json_object_get(root, "max_concurrent");
        array = params = name_tmpl = NULL;
    }
    if (!err && array && params)
        err = xstrdup("a submission is either an array ('array') or a sweep ('params'), not both");
    if (!err && name_tmpl && !params)
        err = xstrdup("'name_template' names the jobs of a sweep: it needs 'params'");
    if (!err && max_conc && (!json_is_integer(max_conc) || json_integer_value(max_conc) < 0))
        err = xstrdup("'max_concurrent' must be an integer >= 0 (0: no limit)");
    json_incref(array);
    json_incref(params);
    json_incref(name_tmpl);
    if (err)
        made = n;
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
    int64_t limit = json_is_integer(max_conc) ? (int64_t)json_integer_value(max_conc) : -1;
    json_decref(specs);
    json_decref(root);
    if (!err && (array || params)) {
        int64_t pct = 0;
        struct job **tasks;
        size_t n_tasks;
        int rc = expand_spec(jobs[0], array, params, name_tmpl, &tasks, &n_tasks, &pct, &err);
        made = 0;
        if (rc == 0) {
            free(jobs);
            jobs = tasks;
            n = made = n_tasks;
            if (limit < 0)
                limit = pct;
        }
    }
    json_decref(array);
    json_decref(params);
    json_decref(name_tmpl);
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
    /* A group (its id: the first job's) when the submission makes several jobs or limits
     * how many run at once. */
    int64_t group_id = 0;
    if (n > 1 || limit > 0) {
        group_id = jobs_next_id();
        if (!dry_run) {
            struct job_group *g = jobs_group(group_id, true);
            if (jobs_group_set_limit(g, limit > 0 ? limit : 0) < 0) {
                reply_error(rep, 500, "cannot store the submission's group; see gflowd.log");
                for (size_t k = 0; k < n; k++)
                    job_free(jobs[k]);
                free(jobs);
                json_decref(out);
                return;
            }
        }
    }
    /* Tasks that share the first job's environment and script store them once, with it
     * (store_get_job reads them from the group's first job). */
    json_t *leader_env = n > 1 ? json_incref(jobs[0]->env) : NULL;
    int64_t first_id = 0, last_id = 0;
    char *leader_script = n > 1 && jobs[0]->script ? xstrdup(jobs[0]->script) : NULL;
    char *leader_stmpl =
        n > 1 && jobs[0]->script_template ? xstrdup(jobs[0]->script_template) : NULL;
    char *leader_ctmpl =
        n > 1 && jobs[0]->command_template ? xstrdup(jobs[0]->command_template) : NULL;
    for (size_t i = 0; i < n; i++) {
        struct job *j = jobs[i];
        j->group_id = group_id;
        if (i > 0 && group_id && leader_env && j->env == leader_env) {
            json_decref(j->env);
            j->env = NULL;
            if (j->script && leader_script && strcmp(j->script, leader_script) == 0) {
                free(j->script);
                j->script = NULL;
            }
        }
        /* A sweep's templates, the same for every task: stored with the first. */
        if (i > 0 && group_id && j->script_template && leader_stmpl &&
            strcmp(j->script_template, leader_stmpl) == 0) {
            free(j->script_template);
            j->script_template = NULL;
        }
        if (i > 0 && group_id && j->command_template &&
            leader_ctmpl && strcmp(j->command_template, leader_ctmpl) == 0) {
            free(j->command_template);
            j->command_template = NULL;
        }
        if (dry_run) {
            json_t *o = json_pack("{s:n, s:s, s:s}", "id", "name", j->name, "state",
                                  job_state_short(j->state));
            if (j->command)
                json_object_set_new(o, "command", json_string(j->command));
            if (j->array_task >= 0)
                json_object_set_new(o, "array_task", json_integer(j->array_task));
            json_array_append_new(out, o);
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
            json_decref(leader_env);
            free(leader_script);
            free(leader_stmpl);
            free(leader_ctmpl);
            return;
        }
        if (i == 0)
            first_id = j->id;
        last_id = j->id;
        /* A large submission lists its first jobs only: count and ids say the rest. */
        if (i < SUBMIT_REPLY_MAX_JOBS)
            json_array_append_new(out, json_pack("{s:I, s:s, s:s}", "id", (json_int_t)j->id,
                                                 "name", j->name, "state",
                                                 job_state_short(j->state)));
    }
    free(jobs);
    json_decref(leader_env);
    free(leader_script);
    free(leader_stmpl);
    free(leader_ctmpl);
    json_t *reply = json_pack("{s:o}", "jobs", out);
    if (group_id > 0) {
        json_object_set_new(reply, "count", json_integer((json_int_t)n));
        if (!dry_run) {
            json_object_set_new(reply, "first_id", json_integer(first_id));
            json_object_set_new(reply, "last_id", json_integer(last_id));
        }
        json_object_set_new(reply, "group_id", dry_run ? json_null() : json_integer(group_id));
        json_object_set_new(reply, "max_concurrent", json_integer(limit > 0 ? limit : 0));
    }
    reply_json(rep, dry_run ? 200 : 201, reply);
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
    if (live) {
        j.wait_reason = live->wait_reason;
        j.group = live->group; /* its max_concurrent */
    }
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
    int64_t retried_as = 0;
    if (j.state == JOB_FAILED && store_retried_as(gd.store, id, &retried_as) == 0 && retried_as)
        json_object_set_new(o, "retried_as", json_integer(retried_as));
    else
        json_object_set_new(o, "retried_as", json_null());
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

/* POST /v1/jobs/{id}/limit {"max_concurrent": K}: how many jobs of the submission group
 * of job id (a group's id is its first job's id) may run at once; 0 = no limit. A job
 * submitted alone gets a group of its own. */
/* Sets the limit of j's group (gid; 0: j, an active job, is alone and gets a group of
 * its own, whose id is its own). 0, or -1 with the reply set. */
static int set_group_limit(struct job *j, int64_t gid, int64_t limit, struct reply *rep)
{
    if (gid == 0) {
        gid = j->id;
        j->group_id = gid;
        j->group = jobs_group(gid, true);
        if (j->state == JOB_RUNNING)
            j->group->running++;
        if (jobs_save(j) < 0) {
            reply_error(rep, 500, "cannot store job %lld; see gflowd.log", (long long)j->id);
            return -1;
        }
    }
    if (jobs_group_set_limit(jobs_group(gid, true), limit) < 0) {
        reply_error(rep, 500, "cannot store the limit; see gflowd.log");
        return -1;
    }
    return 0;
}

static void route_limit(int64_t id, const struct caller *who, const char *body, size_t len,
                        struct reply *rep)
{
    json_t *o = parse_body(body, len, rep);
    if (!o)
        return;
    json_t *k = json_object_get(o, "max_concurrent");
    if (!json_is_integer(k) || json_integer_value(k) < 0 || json_object_size(o) != 1) {
        reply_error(rep, 400, "the body must be {\"max_concurrent\": K} with K >= 0 (0: no limit)");
        json_decref(o);
        return;
    }
    int64_t limit = (int64_t)json_integer_value(k);
    json_decref(o);
    struct job *j = jobs_get(id);
    int64_t gid;
    uint32_t uid;
    const char *owner;
    struct job old;
    job_init(&old);
    if (j) {
        gid = j->group_id;
        uid = j->uid;
        owner = j->user;
    } else {
        if (load_job(id, false, &old, rep) < 0) {
            job_clear(&old);
            return;
        }
        gid = old.group_id;
        uid = old.uid;
        owner = old.user;
    }
    if (!may_act_on(who, uid)) {
        reply_error(rep, 403, "job %lld belongs to %s; only its owner or an admin may change "
                    "its limit", (long long)id, owner ? owner : "another user");
        job_clear(&old);
        return;
    }
    job_clear(&old);
    if (gid == 0 && !j) {
        reply_error(rep, 409, "job %lld has ended and belongs to no group; nothing to limit",
                    (long long)id);
        return;
    }
    if (set_group_limit(j, gid, limit, rep) == 0)
        reply_json(rep, 200, json_pack("{s:I, s:I}", "group_id",
                                       (json_int_t)(gid ? gid : id), "max_concurrent",
                                       (json_int_t)limit));
}

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

/* ---- update and redo ---- */


/* A job's spec (the fields of a submission) rebuilt from its stored record (with
 * payload): the base that gjob update and gjob redo change. */
static json_t *job_to_spec(const struct job *f)
{
    json_t *s = json_object();
    if (f->command) {
        json_object_set_new(s, "command", json_string(f->command));
    } else {
        json_object_set_new(s, "script", json_string(f->script ? f->script : ""));
        if (f->script_path)
            json_object_set_new(s, "script_path", json_string(f->script_path));
    }
    if (f->name)
        json_object_set_new(s, "name", json_string(f->name));
    json_object_set_new(s, "workdir", json_string(f->workdir ? f->workdir : ""));
    json_object_set_new(s, "env", f->env ? json_deep_copy(f->env) : json_object());
    json_object_set_new(s, "priority", json_integer(f->priority));
    json_object_set_new(s, "time_limit", json_integer(f->time_limit));
    json_object_set_new(s, "gpus", json_integer(f->gpus));
    if (f->gpus > 0) {
        json_object_set_new(s, "gpu_memory_mb", json_integer(f->gpu_memory_mb));
        json_object_set_new(s, "shared", json_boolean(f->shared));
        json_object_set_new(s, "gpus_per_task", json_integer(f->gpus_per_task));
    }
    json_object_set_new(s, "memory_mb", json_integer(f->memory_mb));
    if (f->conda_env)
        json_object_set_new(s, "conda_env", json_string(f->conda_env));
    if (f->warn_signal > 0 && f->time_limit > 0) {
        char *sig = format_signal_spec(f->warn_signal, f->warn_secs, f->warn_main_only);
        json_object_set_new(s, "signal_spec", json_string(sig));
        free(sig);
    }
    if (f->begin_time > 0)
        json_object_set_new(s, "begin_time", json_real(f->begin_time));
    json_object_set_new(s, "max_retries", json_integer(f->max_retries));
    json_t *deps = json_array();
    for (size_t i = 0; i < f->n_deps; i++)
        json_array_append_new(deps, json_pack("{s:I, s:s}", "id", (json_int_t)f->deps[i].id,
                                              "kind", job_dep_kind_name(f->deps[i].kind)));
    json_object_set_new(s, "depends_on", deps);
    json_object_set_new(s, "depends_mode", json_string(f->deps_any ? "any" : "all"));
    json_object_set_new(s, "auto_cancel", json_boolean(f->auto_cancel));
    return s;
}

/* Applies the changes in `over` (spec fields; null removes a field, e.g. conda_env) to
 * spec. 0, or -1 + *err. */
static int spec_merge(json_t *spec, json_t *over, bool allow_hold, char **err)
{
    const char *key;
    json_t *v;
    json_object_foreach(over, key, v) {
        if (!known_field(key) || !strcmp(key, "dry_run") || (!allow_hold && !strcmp(key, "hold"))) {
            *err = xasprintf("'%s' cannot be changed here", key);
            return -1;
        }
    }
    if (json_object_get(over, "command")) {
        json_object_del(spec, "script");
        json_object_del(spec, "script_path");
    } else if (json_object_get(over, "script")) {
        json_object_del(spec, "command");
        json_object_del(spec, "script_path");
    }
    json_t *g = json_object_get(over, "gpus");
    if (json_is_integer(g) && json_integer_value(g) == 0) {
        /* No GPUs: the per-GPU settings go too unless given again. */
        json_object_del(spec, "gpu_memory_mb");
        json_object_del(spec, "shared");
        json_object_del(spec, "gpus_per_task");
    }
    json_t *t = json_object_get(over, "time_limit");
    if (json_is_integer(t) && json_integer_value(t) == 0)
        json_object_del(spec, "signal_spec");
    json_object_foreach(over, key, v) {
        if (json_is_null(v))
            json_object_del(spec, key);
        else
            json_object_set(spec, key, v);
    }
    return 0;
}

/* A sweep's job in an update or a redo. f: the stored job (with payload); over: the
 * request's spec fields. Its "params" (new values for names the job already has) is
 * taken out of over; a command, script or name given in over becomes the new template;
 * and the command (or script) and name are filled again from the templates and values
 * (with sweep_fill_command's quoting) and put into over. carry (initialised) gets the
 * new values and templates, for the new job (sweep_move). A job not from a sweep
 * passes unchanged, unless over has "params". 0, or -1 + *err (a 400 message). */
static int sweep_rewrite(const struct job *f, json_t *over, struct job *carry, char **err)
{
    json_t *p = json_object_get(over, "params");
    if (!f->params) {
        if (p) {
            *err = xasprintf("job %lld has no parameters (only the jobs of a sweep, gbatch "
                             "--param, have them)", (long long)f->id);
            return -1;
        }
        return 0;
    }
    const char *key;
    json_t *v;
    if (p) {
        if (!json_is_object(p) || !json_object_size(p)) {
            *err = xstrdup("'params' must be an object of parameter names and values "
                           "(strings), e.g. {\"lr\": \"0.2\"}");
            return -1;
        }
        struct strbuf unknown, have;
        strbuf_init(&unknown);
        strbuf_init(&have);
        json_object_foreach(p, key, v) {
            if (!json_object_get(f->params, key))
                strbuf_addf(&unknown, "%s'%s'", unknown.len ? ", " : "", key);
            else if (!json_is_string(v)) {
                *err = xasprintf("params: the value of '%s' must be a string", key);
                strbuf_free(&unknown);
                strbuf_free(&have);
                return -1;
            }
        }
        if (unknown.len) {
            json_object_foreach(f->params, key, v)
                strbuf_addf(&have, "%s%s", have.len ? ", " : "", key);
            *err = xasprintf("job %lld has no parameter %s (its parameters: %s)",
                             (long long)f->id, unknown.buf, have.buf);
            strbuf_free(&unknown);
            strbuf_free(&have);
            return -1;
        }
        strbuf_free(&unknown);
        strbuf_free(&have);
    }
    carry->params = json_deep_copy(f->params);
    json_object_foreach(p, key, v)
        json_object_set(carry->params, key, v);
    json_t *cmd = json_object_get(over, "command"), *script = json_object_get(over, "script");
    json_t *name = json_object_get(over, "name");
    carry->command_template = f->command_template ? xstrdup(f->command_template) : NULL;
    carry->script_template = f->script_template ? xstrdup(f->script_template) : NULL;
    carry->name_template = f->name_template ? xstrdup(f->name_template) : NULL;
    if (json_is_string(cmd)) {
        free(carry->command_template);
        free(carry->script_template);
        carry->command_template = xstrdup(json_string_value(cmd));
        carry->script_template = NULL;
    } else if (json_is_string(script)) {
        free(carry->command_template);
        free(carry->script_template);
        carry->script_template = xstrdup(json_string_value(script));
        carry->command_template = NULL;
    }
    if (name) {
        free(carry->name_template);
        carry->name_template = json_is_string(name) ? xstrdup(json_string_value(name)) : NULL;
    }
    json_incref(p);
    json_object_del(over, "params");
    if (p || cmd || script || name) {
        size_t nn = json_object_size(carry->params), k = 0;
        char **pn = xcalloc(nn ? nn : 1, sizeof(*pn)), **pv = xcalloc(nn ? nn : 1, sizeof(*pv));
        json_object_foreach(carry->params, key, v) {
            pn[k] = (char *)key;
            pv[k++] = (char *)(json_is_string(v) ? json_string_value(v) : "");
        }
        if (carry->command_template && (p || cmd)) {
            char *text = sweep_fill_command(carry->command_template, pn, pv, nn);
            json_object_set_new(over, "command", json_string(text));
            free(text);
        } else if (carry->script_template && (p || script)) {
            char *text = sweep_fill_command(carry->script_template, pn, pv, nn);
            json_object_set_new(over, "script", json_string(text));
            free(text);
            if (!script && f->script_path)
                json_object_set_new(over, "script_path", json_string(f->script_path));
        }
        if (carry->name_template && (p || json_is_string(name))) {
            char *filled = sweep_fill_name(carry->name_template, pn, pv, nn);
            json_object_set_new(over, "name", json_string(filled));
            free(filled);
        }
        free(pn);
        free(pv);
    }
    json_decref(p);
    return 0;
}

/* Moves carry's sweep fields (sweep_rewrite) into the new job n. */
static void sweep_move(struct job *n, struct job *carry)
{
    n->params = carry->params;
    n->command_template = carry->command_template;
    n->script_template = carry->script_template;
    n->name_template = carry->name_template;
    carry->params = NULL;
    carry->command_template = carry->script_template = carry->name_template = NULL;
}

/* The fields gjob update reports, compared between the job's JSON before and after. */
static const char *const update_fields[] = {
    "params", "name", "command", "script_path", "workdir", "priority", "time_limit", "gpus",
    "gpu_memory_mb", "shared", "gpus_per_task", "memory_mb", "conda_env", "signal_spec",
    "begin_time", "max_retries", "depends_on", "depends_mode", "auto_cancel"};

static void route_update(int64_t id, const struct caller *who, const char *body, size_t len,
                         struct reply *rep)
{
    json_t *over = parse_body(body, len, rep);
    if (!over)
        return;
    if (!json_is_object(over) || json_object_size(over) == 0) {
        reply_error(rep, 400, "an update is a JSON object with the spec fields to change");
        json_decref(over);
        return;
    }
    json_t *mc = json_object_get(over, "max_concurrent");
    if (mc && (!json_is_integer(mc) || json_integer_value(mc) < 0)) {
        reply_error(rep, 400, "'max_concurrent' must be an integer >= 0 (0: no limit)");
        json_decref(over);
        return;
    }
    int64_t new_limit = mc ? (int64_t)json_integer_value(mc) : -1;
    json_object_del(over, "max_concurrent");
    struct job *j = own_active_job(id, who, "update", rep);
    if (!j) {
        json_decref(over);
        return;
    }
    if (j->state != JOB_QUEUED && j->state != JOB_HELD) {
        reply_error(rep, 409, "job %lld is %s (%s); only queued (PD) or held (H) jobs can be "
                              "updated ('gjob redo %lld' submits a changed copy)",
                    (long long)id, job_state_name(j->state), job_state_short(j->state),
                    (long long)id);
        json_decref(over);
        return;
    }
    struct job full;
    if (load_job(id, true, &full, rep) < 0) {
        job_clear(&full);
        json_decref(over);
        return;
    }
    json_t *spec = job_to_spec(&full);
    char *err = NULL;
    bool dry = false;
    struct job *n = NULL;
    struct job carry;
    job_init(&carry);
    /* A sweep's values and templates are in the payload: written with the command. */
    bool sweep_changed = full.params && (json_object_get(over, "params") ||
                                         json_object_get(over, "name"));
    if (sweep_rewrite(&full, over, &carry, &err) == 0 &&
        spec_merge(spec, over, false, &err) == 0)
        n = spec_to_job(spec, who, &dry, &err);
    if (n)
        sweep_move(n, &carry);
    job_clear(&carry);
    bool deps_changed = n && json_object_get(over, "depends_on");
    if (n && deps_changed && jobs_check_deps(n, id, &err) < 0) {
        job_free(n);
        n = NULL;
    }
    if (!n) {
        reply_error(rep, 400, "%s", err);
        free(err);
        json_decref(spec);
        json_decref(over);
        job_clear(&full);
        return;
    }
    bool what_changed = json_object_get(over, "command") || json_object_get(over, "script") ||
                        json_object_get(over, "script_path") || json_object_get(over, "workdir") ||
                        json_object_get(over, "env") || sweep_changed;
    json_t *before = job_to_json(&full, true, NULL);
    n->id = id;
    n->state = j->state;
    json_t *after = job_to_json(n, true, NULL);
    json_t *changes = json_array();
    for (size_t i = 0; i < sizeof(update_fields) / sizeof(update_fields[0]); i++) {
        json_t *a = json_object_get(before, update_fields[i]);
        json_t *b = json_object_get(after, update_fields[i]);
        if (!json_equal(a ? a : json_null(), b ? b : json_null()) && (a || b))
            json_array_append_new(changes, json_pack("{s:s, s:O, s:O}", "field", update_fields[i],
                                                     "old", a ? a : json_null(), "new",
                                                     b ? b : json_null()));
    }
    json_t *sa = json_object_get(before, "script"), *sb = json_object_get(after, "script");
    if (json_is_string(sb) && !json_equal(sa, sb) &&
        json_equal(json_object_get(before, "script_path"), json_object_get(after, "script_path")))
        json_array_append_new(changes, json_pack("{s:s, s:O, s:O}", "field", "script", "old",
                                                 json_object_get(before, "script_path"), "new",
                                                 json_object_get(after, "script_path")));
    if (json_object_get(over, "env") && !json_equal(json_object_get(before, "env"),
                                                   json_object_get(after, "env")))
        json_array_append_new(changes, json_pack("{s:s, s:s, s:s}", "field", "env", "old", "...",
                                                 "new", "..."));
    json_decref(before);
    json_decref(after);
    if (new_limit >= 0) { /* the limit belongs to the job's group: set it there */
        int64_t old_limit = j->group ? j->group->max_concurrent : 0;
        if (set_group_limit(j, j->group_id, new_limit, rep) < 0) {
            json_decref(changes);
            goto out;
        }
        if (old_limit != new_limit)
            json_array_append_new(changes, json_pack("{s:s, s:I, s:I}", "field",
                                                     "max_concurrent", "old",
                                                     (json_int_t)old_limit, "new",
                                                     (json_int_t)new_limit));
    }
    if (json_array_size(changes) && jobs_update(j, n, deps_changed, what_changed) < 0) {
        reply_error(rep, 500, "cannot store the update of job %lld; see gflowd.log", (long long)id);
        json_decref(changes);
    } else {
        json_t *o = state_reply(j);
        json_object_set_new(o, "changes", changes);
        reply_json(rep, 200, o);
    }
out:
    job_free(n);
    json_decref(spec);
    json_decref(over);
    job_clear(&full);
}

/* The new job of a redo from a stored job (with payload): its spec, the overrides, the
 * old dependency ids replaced by map (old -> new ids, n_map pairs). NULL + *err. */
static struct job *redo_job(const struct job *f, json_t *over, const int64_t (*map)[2],
                            size_t n_map, const struct caller *who, char **err)
{
    json_t *spec = job_to_spec(f);
    json_t *deps = json_object_get(spec, "depends_on");
    size_t i;
    json_t *d;
    json_array_foreach(deps, i, d) {
        json_int_t id = json_integer_value(json_object_get(d, "id"));
        for (size_t m = 0; m < n_map; m++)
            if (map[m][0] == id)
                json_object_set_new(d, "id", json_integer(map[m][1]));
    }
    bool dry = false;
    struct job *n = NULL;
    struct job carry;
    job_init(&carry);
    if (sweep_rewrite(f, over, &carry, err) == 0 &&
        (!over || spec_merge(spec, over, true, err) == 0))
        n = spec_to_job(spec, who, &dry, err);
    if (n)
        sweep_move(n, &carry);
    job_clear(&carry);
    json_decref(spec);
    if (n && n->n_deps && jobs_check_deps(n, jobs_next_id(), err) < 0) {
        job_free(n);
        n = NULL;
    }
    return n;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void route_redo(int64_t id, const struct caller *who, const char *body, size_t len,
                       struct reply *rep)
{
    json_t *over = len ? parse_body(body, len, rep) : json_object();
    if (!over)
        return;
    if (!json_is_object(over)) {
        reply_error(rep, 400, "a redo takes a JSON object: spec fields to change, and "
                              "\"cascade\": true|false");
        json_decref(over);
        return;
    }
    json_t *cascade = json_object_get(over, "cascade");
    if (cascade && !json_is_boolean(cascade)) {
        reply_error(rep, 400, "'cascade' must be true or false");
        json_decref(over);
        return;
    }
    bool do_cascade = json_is_true(cascade);
    json_object_del(over, "cascade");
    struct job f;
    if (load_job(id, true, &f, rep) < 0) {
        job_clear(&f);
        json_decref(over);
        return;
    }
    if (f.uid != who->uid) {
        reply_error(rep, 403, "job %lld belongs to %s; only its owner may redo it", (long long)id,
                    f.user);
        job_clear(&f);
        json_decref(over);
        return;
    }
    char *err = NULL;
    struct job *n = redo_job(&f, over, NULL, 0, who, &err);
    json_decref(over);
    if (!n) {
        reply_error(rep, 400, "%s", err);
        free(err);
        job_clear(&f);
        return;
    }
    job_clear(&f);
    if (jobs_submit(n) < 0) {
        reply_error(rep, 500, "cannot store the new job; see gflowd.log");
        job_free(n);
        return;
    }
    json_t *out = json_array();
    json_array_append_new(out, json_pack("{s:I, s:s, s:s, s:I}", "id", (json_int_t)n->id, "name",
                                         n->name, "state", job_state_short(n->state), "redo_of",
                                         (json_int_t)id));
    size_t n_map = 1, cap_map = 16;
    int64_t (*map)[2] = xmalloc(cap_map * sizeof(*map));
    map[0][0] = id;
    map[0][1] = n->id;
    if (do_cascade) {
        /* The jobs auto-cancelled because of it, transitively, in id order (a job's
         * dependencies have lower ids, so they are redone first). */
        size_t n_set = 0, cap_set = 16;
        int64_t *set = xmalloc(cap_set * sizeof(*set));
        int64_t *todo = xmalloc(sizeof(*todo));
        size_t n_todo = 1;
        todo[0] = id;
        while (n_todo) {
            int64_t e = todo[--n_todo];
            int64_t *ids = NULL;
            size_t n_ids = 0;
            if (store_dependents(gd.store, e, &ids, &n_ids) < 0)
                n_ids = 0;
            char want[48];
            snprintf(want, sizeof(want), "DependencyFailed:%lld", (long long)e);
            for (size_t k = 0; k < n_ids; k++) {
                struct job d;
                bool seen = false;
                for (size_t m = 0; m < n_set && !seen; m++)
                    seen = set[m] == ids[k];
                if (seen || store_get_job(gd.store, ids[k], &d, false) != 0) {
                    if (!seen)
                        job_clear(&d);
                    continue;
                }
                if (d.state == JOB_CANCELLED && d.reason && !strcmp(d.reason, want) &&
                    d.uid == who->uid) {
                    if (n_set == cap_set)
                        set = xrealloc(set, (cap_set *= 2) * sizeof(*set));
                    set[n_set++] = ids[k];
                    todo = xrealloc(todo, (n_todo + 1) * sizeof(*todo));
                    todo[n_todo++] = ids[k];
                }
                job_clear(&d);
            }
            free(ids);
        }
        free(todo);
        qsort(set, n_set, sizeof(*set), cmp_i64);
        for (size_t k = 0; k < n_set; k++) {
            struct job d;
            if (store_get_job(gd.store, set[k], &d, true) != 0) {
                job_clear(&d);
                continue;
            }
            int64_t because = strtoll(d.reason + strlen("DependencyFailed:"), NULL, 10);
            bool mapped = false;
            for (size_t m = 0; m < n_map && !mapped; m++)
                mapped = map[m][0] == because;
            struct job *c = NULL;
            if (mapped)
                c = redo_job(&d, NULL, (const int64_t(*)[2])map, n_map, who, &err);
            if (c && jobs_submit(c) < 0) {
                job_free(c);
                c = NULL;
            }
            if (!c) {
                log_info("redo --cascade of job %lld: job %lld not redone: %s", (long long)id,
                         (long long)set[k], err ? err : "its cause was not redone");
                free(err);
                err = NULL;
                job_clear(&d);
                continue;
            }
            if (n_map == cap_map)
                map = xrealloc(map, (cap_map *= 2) * sizeof(*map));
            map[n_map][0] = set[k];
            map[n_map][1] = c->id;
            n_map++;
            json_array_append_new(out, json_pack("{s:I, s:s, s:s, s:I}", "id", (json_int_t)c->id,
                                                 "name", c->name, "state",
                                                 job_state_short(c->state), "redo_of",
                                                 (json_int_t)set[k]));
            job_clear(&d);
        }
        free(set);
    }
    free(map);
    reply_json(rep, 201, json_pack("{s:o}", "jobs", out));
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
    if (!*action && strcmp(method, "PATCH") == 0) {
        route_update(id, who, body, body_len, rep);
    } else if (!*action) {
        if (is_method(method, "GET", rep))
            route_show(id, who, rep);
    } else if (strcmp(action, "redo") == 0) {
        if (is_method(method, "POST", rep))
            route_redo(id, who, body, body_len, rep);
    } else if (strcmp(action, "cancel") == 0) {
        if (is_method(method, "POST", rep))
            route_cancel(c, id, who, rep);
    } else if (strcmp(action, "hold") == 0 || strcmp(action, "release") == 0) {
        if (is_method(method, "POST", rep))
            route_hold_release(id, who, strcmp(action, "hold") == 0, body, body_len, rep);
    } else if (strcmp(action, "log") == 0) {
        if (is_method(method, "GET", rep))
            route_log(c, id, who, rep);
    } else if (strcmp(action, "limit") == 0) {
        if (is_method(method, "POST", rep))
            route_limit(id, who, body, body_len, rep);
    } else {
        reply_error(rep, 404, "no such endpoint: %s %s (see docs/api.md)", method, url);
    }
}
