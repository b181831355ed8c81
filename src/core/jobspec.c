/* jobspec: job specs checked into jobs, and jobs back into specs (see jobspec.h). */
#include "jobspec.h"
#include "slurmspec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "scheduler.h"
#include "sweep.h"
#include "util.h"

/* ---- one spec ---- */

/* The keys of job_fields.def a spec may give (JOB_SPEC) and the spec's own; "array" is
 * handled by route_submit, as are params, name_template and max_concurrent. */
static const struct {
    const char *name;
    int flags;
} job_keys[] = {
#define JOB_FIELD(ID, name, api, store, m, d, flags) {name, flags},
#define JOB_API_FIELD(ID, name, api, m, d, flags) {name, flags},
#define JOB_PAYLOAD(ID, name, store, m, flags) {name, flags},
#include "job_fields.def"
};
static const char *const spec_only_fields[] = {"hold", "dry_run", "array"};

/* The MIG request of a spec: mig_profile (a profile like "1g.18gb"; null or absent:
 * none) and mig_count (instances: 1, the default; more is refused, as a CUDA process
 * uses only the first MIG instance it is given), never together with whole GPUs. Sets
 * j->mig_profile and j->mig_count; 0, or -1 with *err. */
static int jobspec_mig(const json_t *spec, struct job *j, char **err)
{
    json_t *profile = json_object_get(spec, JOB_KEY_MIG_PROFILE);
    json_t *count = json_object_get(spec, JOB_KEY_MIG_COUNT);
    json_t *gpus = json_object_get(spec, JOB_KEY_GPUS);
    if (json_is_null(profile))
        profile = NULL;
    if (json_is_null(count))
        count = NULL;
    if (profile &&
        (!json_is_string(profile) || !gpu_mig_profile_valid(json_string_value(profile)))) {
        *err = xstrdup("'mig_profile' must be a MIG profile like \"1g.18gb\" or \"3g.71gb\"");
        return -1;
    }
    if (count && (!json_is_integer(count) || json_integer_value(count) < 1 ||
                  json_integer_value(count) > GPUINFO_MAX_MIGS)) {
        *err = xasprintf("'mig_count' must be an integer from 1 to %d", GPUINFO_MAX_MIGS);
        return -1;
    }
    if (count && !profile) {
        *err = xstrdup("a MIG instance count needs a profile: --mig PROFILE[:N]");
        return -1;
    }
    if (!profile)
        return 0;
    if (json_is_integer(gpus) && json_integer_value(gpus) > 0) {
        *err = xstrdup("--mig and --gpus cannot be combined: a job gets either MIG instances or "
                       "whole GPUs");
        return -1;
    }
    int n = count ? (int)json_integer_value(count) : 1;
    if (n > 1) { /* CUDA uses the first MIG device it is given, and no other */
        const char *p = json_string_value(profile);
        *err = xasprintf("--mig %s:%d: a CUDA process sees only one MIG instance; submit one job "
                         "per instance (--mig %s, e.g. with --array 1-%d)",
                         p, n, p, n);
        return -1;
    }
    j->mig_profile = xstrdup(json_string_value(profile));
    j->mig_count = n;
    return 0;
}

bool jobspec_known_field(const char *key)
{
    for (size_t i = 0; i < sizeof(job_keys) / sizeof(job_keys[0]); i++)
        if ((job_keys[i].flags & JOB_SPEC) && strcmp(key, job_keys[i].name) == 0)
            return true;
    for (size_t i = 0; i < sizeof(spec_only_fields) / sizeof(spec_only_fields[0]); i++)
        if (strcmp(key, spec_only_fields[i]) == 0)
            return true;
    return false;
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

/* Whether s has no control characters. */
static bool printable_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

/* project: trimmed of blanks, "" is none (as gflow); at most JOB_PROJECT_MAX bytes. */
static int jobspec_project(const json_t *v, struct job *j, char **err)
{
    if (!v || json_is_null(v))
        return 0;
    const char *s = json_string_value(v);
    if (!s || !printable_text(s)) {
        *err = xstrdup("--project must be text without control characters");
        return -1;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    size_t len = strlen(s);
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (len > JOB_PROJECT_MAX) {
        *err = xasprintf("--project: at most %d characters", JOB_PROJECT_MAX);
        return -1;
    }
    j->project = len ? xstrndup(s, len) : NULL;
    return 0;
}

/* notify_email: addresses joined by ','; each needs an '@' and no blanks. */
static int jobspec_notify_email(const json_t *v, struct job *j, char **err)
{
    if (!v || json_is_null(v))
        return 0;
    const char *s = json_string_value(v);
    bool ok = s && *s && strlen(s) <= 4096 && printable_text(s);
    for (const char *p = s; ok && *p;) {
        size_t len = strcspn(p, ",");
        const char *at = memchr(p, '@', len);
        ok = len > 0 && at && at > p && at < p + len - 1 && !memchr(p, ' ', len);
        p += len;
        if (*p == ',' && !*++p)
            ok = false;
    }
    if (!ok) {
        *err = xasprintf("--notify-email '%s' is not an e-mail address (name@host)", s ? s : "");
        return -1;
    }
    j->notify_email = xstrdup(s);
    return 0;
}

/* notify_on: a list of gflow's job event names. */
static int jobspec_notify_on(const json_t *v, struct job *j, char **err)
{
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v)) {
        *err = xstrdup("--notify-on must be a list of event names");
        return -1;
    }
    /* gflow's short names (begin, end, fail, timeout, all) become the canonical ones;
     * each event is kept once, in the order given. */
    uint32_t events = 0;
    struct strbuf sb;
    strbuf_init(&sb);
    size_t i;
    const json_t *e;
    json_array_foreach (v, i, e) {
        const char *name = json_string_value(e);
        const char *alias = name ? job_notify_event_alias(name) : NULL;
        int idx = name ? job_notify_event_index(alias ? alias : name) : -1;
        bool all = name && !strcmp(name, "all");
        if (idx < 0 && !all) {
            *err = xasprintf("--notify-on: unknown event '%s'; use %s (or begin, end, fail, "
                             "timeout, all)",
                             name ? name : "?", JOB_NOTIFY_EVENT_LIST);
            strbuf_free(&sb);
            return -1;
        }
        for (int k = 0; k < JOB_EVENT_COUNT; k++) {
            if ((all || k == idx) && !(events & (1u << k))) {
                events |= 1u << k;
                strbuf_addf(&sb, "%s%s", sb.len ? "," : "", job_notify_events[k]);
            }
        }
    }
    j->notify_on = sb.len ? strbuf_detach(&sb) : NULL;
    strbuf_free(&sb);
    return 0;
}

/* gflow's bookkeeping fields: project, nice, notify_email, notify_on, auto_close. */
static int jobspec_bookkeeping(const json_t *spec, struct job *j, char **err)
{
    const json_t *nice = json_object_get(spec, JOB_KEY_NICE);
    const json_t *auto_close = json_object_get(spec, JOB_KEY_AUTO_CLOSE);
    if (nice && (!json_is_integer(nice) || json_integer_value(nice) < 0 ||
                 json_integer_value(nice) > JOB_PRIORITY_MAX)) {
        *err = xstrdup("--nice must be an integer from 0 to 255 (gflow: the priority)");
        return -1;
    }
    if (auto_close && !json_is_boolean(auto_close)) {
        *err = xstrdup("'auto_close' must be true or false");
        return -1;
    }
    const json_t *requeue = json_object_get(spec, JOB_KEY_REQUEUE);
    if (requeue && !json_is_boolean(requeue)) {
        *err = xstrdup("'requeue' must be true or false");
        return -1;
    }
    j->requeue = json_is_true(requeue);
    const json_t *pty = json_object_get(spec, JOB_KEY_PTY);
    if (pty && !json_is_boolean(pty)) {
        *err = xstrdup("'pty' must be true or false");
        return -1;
    }
    j->pty = json_is_true(pty);
    j->nice = nice ? (int)json_integer_value(nice) : 0;
    j->auto_close = json_is_true(auto_close);
    if (jobspec_project(json_object_get(spec, JOB_KEY_PROJECT), j, err) < 0 ||
        jobspec_notify_email(json_object_get(spec, JOB_KEY_NOTIFY_EMAIL), j, err) < 0 ||
        jobspec_notify_on(json_object_get(spec, JOB_KEY_NOTIFY_ON), j, err) < 0)
        return -1;
    if (j->notify_email && !j->notify_on)
        j->notify_on = xstrdup(JOB_NOTIFY_DEFAULT);
    return 0;
}

/* Builds a job from one spec. */
struct job *jobspec_to_job(const json_t *spec, const struct jobspec_limits *lim,
                           const struct jobspec_owner *who, bool *dry_run, char **err)
{
    if (!json_is_object(spec)) {
        *err = xstrdup("a job spec must be a JSON object");
        return NULL;
    }
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)spec, key, v) {
        if (!jobspec_known_field(key)) {
            *err = xasprintf("unknown field '%s' in job spec", key);
            return NULL;
        }
    }
    struct job *j = job_new();
    json_t *command = json_object_get(spec, JOB_KEY_COMMAND);
    json_t *script = json_object_get(spec, JOB_KEY_SCRIPT);
    json_t *script_path = json_object_get(spec, JOB_KEY_SCRIPT_PATH);
    json_t *name = json_object_get(spec, JOB_KEY_NAME);
    json_t *workdir = json_object_get(spec, JOB_KEY_WORKDIR);
    json_t *env = json_object_get(spec, JOB_KEY_ENV);
    json_t *prio = json_object_get(spec, JOB_KEY_PRIORITY);
    json_t *limit = json_object_get(spec, JOB_KEY_TIME_LIMIT);
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
    json_object_foreach (env, key, v) {
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
    json_t *gpus = json_object_get(spec, JOB_KEY_GPUS);
    json_t *gpu_mem = json_object_get(spec, JOB_KEY_GPU_MEMORY_MB);
    json_t *shared = json_object_get(spec, JOB_KEY_SHARED);
    json_t *per_task = json_object_get(spec, JOB_KEY_GPUS_PER_TASK);
    if ((gpus && (!json_is_integer(gpus) || json_integer_value(gpus) < 0 ||
                  json_integer_value(gpus) > GPUINFO_MAX_GPUS)) ||
        (gpu_mem && (!json_is_integer(gpu_mem) || json_integer_value(gpu_mem) < 0)) ||
        (per_task && (!json_is_integer(per_task) || json_integer_value(per_task) < 0 ||
                      json_integer_value(per_task) > 1)) ||
        (shared && !json_is_boolean(shared))) {
        *err = xasprintf("'gpus' (0 to %d), 'gpu_memory_mb' (>= 0), 'gpus_per_task' (0 or 1) "
                         "must be integers and 'shared' true or false",
                         GPUINFO_MAX_GPUS);
        goto bad;
    }
    json_t *cpus_per_gpu = json_object_get(spec, JOB_KEY_CPUS_PER_GPU);
    if (cpus_per_gpu && (!json_is_integer(cpus_per_gpu) || json_integer_value(cpus_per_gpu) < 0 ||
                         json_integer_value(cpus_per_gpu) > JOB_CPUS_PER_GPU_MAX)) {
        *err = xasprintf("'cpus_per_gpu' must be an integer from 0 to %d (0: none)",
                         JOB_CPUS_PER_GPU_MAX);
        goto bad;
    }
    bool wants_gpus = gpus && json_integer_value(gpus) > 0;
    /* Named by the flags a user types (gbatch's messages, the same for API users). */
    const char *needs_gpus = json_is_true(shared)                           ? "--shared"
                             : gpu_mem && json_integer_value(gpu_mem) > 0   ? "--gpu-memory"
                             : per_task && json_integer_value(per_task) > 0 ? "--gpus-per-task"
                             : cpus_per_gpu && json_integer_value(cpus_per_gpu) > 0
                                 ? "--cpus-per-gpu"
                                 : NULL;
    if (!wants_gpus && needs_gpus) {
        *err = xasprintf("%s needs --gpus N", needs_gpus);
        goto bad;
    }
    if (json_is_true(shared) && !(gpu_mem && json_integer_value(gpu_mem) > 0)) {
        *err = xstrdup("--shared needs --gpu-memory (the share of each GPU the job may use)");
        goto bad;
    }
    if (jobspec_mig(spec, j, err) < 0 || jobspec_bookkeeping(spec, j, err) < 0)
        goto bad;
    json_t *mem = json_object_get(spec, JOB_KEY_MEMORY_MB);
    if (mem && (!json_is_integer(mem) || json_integer_value(mem) < 0)) {
        *err = xstrdup("'memory_mb' must be an integer number of MiB >= 0 (0: no limit)");
        goto bad;
    }
    if (mem && !lim->on_slurm && lim->memory_total_mb > 0 &&
        json_integer_value(mem) > lim->memory_total_mb) {
        *err = xasprintf("--memory asks for %lld MiB but this machine has %lld MiB",
                         (long long)json_integer_value(mem), (long long)lim->memory_total_mb);
        goto bad;
    }
    json_t *conda = json_object_get(spec, JOB_KEY_CONDA_ENV);
    if (conda && !json_is_null(conda) &&
        (!json_is_string(conda) || !valid_conda_env(json_string_value(conda)))) {
        *err = xstrdup("'conda_env' must be a conda environment name or path (no control "
                       "characters, at most 4096 bytes)");
        goto bad;
    }
    j->memory_mb = mem ? (int64_t)json_integer_value(mem) : 0;
    json_t *begin = json_object_get(spec, JOB_KEY_BEGIN_TIME);
    if (begin && !json_is_null(begin) && (!json_is_number(begin) || json_number_value(begin) < 0)) {
        *err = xstrdup("'begin_time' must be unix seconds (a number >= 0; 0: no wait)");
        goto bad;
    }
    j->begin_time = json_is_number(begin) ? json_number_value(begin) : 0;
    json_t *retries = json_object_get(spec, JOB_KEY_MAX_RETRIES);
    if (retries && (!json_is_integer(retries) || json_integer_value(retries) < 0 ||
                    json_integer_value(retries) > JOBSPEC_MAX_RETRIES)) {
        *err = xstrdup("'max_retries' must be an integer from 0 to 1000");
        goto bad;
    }
    j->max_retries = retries ? (int)json_integer_value(retries) : 0;
    json_t *mask = json_object_get(spec, JOB_KEY_UMASK);
    if (mask && !json_is_null(mask)) {
        char *why = NULL;
        if (!json_is_string(mask) || parse_umask(json_string_value(mask), &j->umask, &why) < 0) {
            free(why);
            *err = xstrdup("'umask' must be a string of 1 to 4 octal digits, at most \"0777\" "
                           "(e.g. \"0022\")");
            goto bad;
        }
    }
    json_t *sigspec = json_object_get(spec, JOB_KEY_SIGNAL_SPEC);
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
            *err = xstrdup("--signal needs --time (the signal is sent before the time limit)");
            goto bad;
        }
        j->warn_signal = sig;
        j->warn_secs = secs;
        j->warn_main_only = main_only;
    }
    j->conda_env = json_is_string(conda) && *json_string_value(conda)
                       ? xstrdup(json_string_value(conda))
                       : NULL;
    json_t *deps = json_object_get(spec, JOB_KEY_DEPENDS_ON);
    json_t *mode = json_object_get(spec, JOB_KEY_DEPENDS_MODE);
    json_t *auto_cancel = json_object_get(spec, JOB_KEY_AUTO_CANCEL);
    if (deps && !json_is_array(deps)) {
        *err = xstrdup("'depends_on' must be a list of {\"id\": N, \"kind\": \"afterok\"|"
                       "\"afterany\"|\"afternotok\"}");
        goto bad;
    }
    size_t di;
    json_t *dep;
    json_array_foreach (deps, di, dep) {
        json_t *id = json_is_integer(dep) ? dep : json_object_get(dep, "id");
        json_t *kind = json_is_object(dep) ? json_object_get(dep, "kind") : NULL;
        enum job_dep_kind k = JOB_DEP_AFTEROK;
        if (json_is_object(dep)) {
            json_object_foreach (dep, key, v) {
                if (strcmp(key, "id") && strcmp(key, "kind")) {
                    *err = xasprintf("depends_on: unknown field '%s'", key);
                    goto bad;
                }
            }
        }
        if (!json_is_integer(id) || json_integer_value(id) <= 0 ||
            (kind &&
             (!json_is_string(kind) || job_dep_kind_parse(json_string_value(kind), &k) < 0))) {
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
    if (name && !job_name_valid(json_string_value(name))) {
        *err = xasprintf("invalid job name: use 1 to %d printable characters", JOB_NAME_MAX);
        goto bad;
    }
    j->command = command ? xstrdup(json_string_value(command)) : NULL;
    j->script = script ? xstrdup(json_string_value(script)) : NULL;
    j->script_path =
        script_path ? xstrdup(json_string_value(script_path)) : (script ? xstrdup("-") : NULL);
    /* None given: the daemon names it gjob-<id> once it has its id (job_name_default). */
    j->name = name ? xstrdup(json_string_value(name)) : NULL;
    j->workdir = xstrdup(json_string_value(workdir));
    j->env = env ? json_incref(env) : json_object();
    j->priority = prio ? (int)json_integer_value(prio) : JOB_PRIORITY_DEFAULT;
    j->time_limit = limit ? (int64_t)json_integer_value(limit) : 0;
    j->gpus = gpus ? (int)json_integer_value(gpus) : 0;
    j->gpu_memory_mb = gpu_mem ? (int64_t)json_integer_value(gpu_mem) : 0;
    j->shared = json_is_true(shared);
    j->gpus_per_task = per_task && j->gpus > 0 ? (int)json_integer_value(per_task) : 0;
    j->cpus_per_gpu = cpus_per_gpu && j->gpus > 0 ? (int)json_integer_value(cpus_per_gpu) : 0;
    if (j->pty && j->gpus_per_task && j->gpus > 1) { /* the shim: one process, one terminal */
        *err = xstrdup("--pty runs one process on the job's terminal: not with --gpus-per-task");
        goto bad;
    }
    char *why = NULL;
    if (lim->on_slurm) { /* Slurm knows its nodes; what it cannot be told is refused */
        if ((why = slurmspec_refusal(j))) {
            *err = why;
            goto bad;
        }
    } else if (!(lim->gpus_pending && j->gpus > 0) &&
               scheduler_check_feasible(j, lim->gpus, lim->visible, &why) < 0) {
        *err = why;
        goto bad;
    }
    j->user = xstrdup(who->user);
    j->uid = who->uid;
    j->gid = who->gid;
    j->submit_time = who->now;
    if (json_is_true(hold)) {
        j->state = JOB_HELD;
        job_set_reason(j, JOB_REASON_HELD_BY_USER, 0, NULL);
    }
    if (json_is_true(dry))
        *dry_run = true;
    return j;
bad:
    job_free(j);
    return NULL;
}

/* ---- a whole submission ---- */

static void submission_clear(struct jobspec_submission *sub)
{
    for (size_t i = 0; i < sub->n; i++)
        job_free(sub->jobs[i]);
    free(sub->jobs);
    json_decref(sub->array);
    json_decref(sub->params);
    json_decref(sub->name_template);
    memset(sub, 0, sizeof(*sub));
    sub->max_concurrent = -1;
}

void jobspec_submission_free(struct jobspec_submission *sub)
{
    submission_clear(sub);
}

/* The submission-level fields: which spec list, the group's fields. 0 or -1 + *err. */
static int read_envelope(json_t *root, json_t **specs, struct jobspec_submission *sub, char **err)
{
    json_t *list = json_object_get(root, "jobs");
    json_t *first = root;
    json_t *max_conc;
    if (json_is_object(root) && list) {
        const char *key;
        json_t *v;
        json_object_foreach (root, key, v) {
            if (strcmp(key, "jobs") && strcmp(key, "dry_run") &&
                strcmp(key, JOB_KEY_MAX_CONCURRENT)) {
                *err = xasprintf("unknown field '%s' in a batch submission", key);
                return -1;
            }
        }
        if (!json_is_array(list) || json_array_size(list) == 0) {
            *err = xstrdup("'jobs' must be a non-empty array of job specs");
            return -1;
        }
        size_t i;
        json_t *sp;
        json_array_foreach (list, i, sp) {
            if (json_object_get(sp, "array") || json_object_get(sp, JOB_KEY_PARAMS) ||
                json_object_get(sp, JOB_KEY_NAME_TEMPLATE) ||
                json_object_get(sp, JOB_KEY_MAX_CONCURRENT)) {
                *err = xstrdup("'array', 'params', 'name_template' and 'max_concurrent' belong "
                               "to a single-spec submission (a batch takes 'max_concurrent' at "
                               "its top level)");
                return -1;
            }
        }
        sub->dry_run = json_is_true(json_object_get(root, "dry_run"));
        sub->batch = json_array_size(list) > 1;
        max_conc = json_object_get(root, JOB_KEY_MAX_CONCURRENT);
        *specs = json_incref(list);
    } else {
        sub->array = json_incref(json_object_get(first, "array"));
        sub->params = json_incref(json_object_get(first, JOB_KEY_PARAMS));
        sub->name_template = json_incref(json_object_get(first, JOB_KEY_NAME_TEMPLATE));
        max_conc = json_object_get(first, JOB_KEY_MAX_CONCURRENT);
        *specs = json_pack("[O]", root);
    }
    if (sub->array && sub->params) {
        *err = xstrdup("a submission is either an array ('array') or a sweep ('params'), not both");
        return -1;
    }
    if (sub->name_template && !sub->params) {
        *err = xstrdup("'name_template' names the jobs of a sweep: it needs 'params'");
        return -1;
    }
    if (max_conc && (!json_is_integer(max_conc) || json_integer_value(max_conc) < 0)) {
        *err = xstrdup("'max_concurrent' must be an integer >= 0 (0: no limit)");
        return -1;
    }
    sub->max_concurrent = max_conc ? (int64_t)json_integer_value(max_conc) : -1;
    return 0;
}

int jobspec_read_submission(json_t *root, const struct jobspec_limits *lim,
                            const struct jobspec_owner *who, struct jobspec_submission *out,
                            char **err)
{
    memset(out, 0, sizeof(*out));
    out->max_concurrent = -1;
    json_t *specs = NULL;
    int rc = read_envelope(root, &specs, out, err);
    json_decref(root);
    if (rc < 0) {
        json_decref(specs);
        submission_clear(out);
        return -1;
    }
    size_t n = json_array_size(specs);
    out->jobs = xcalloc(n, sizeof(*out->jobs));
    for (size_t i = 0; i < n; i++) {
        char *why = NULL;
        struct job *j = jobspec_to_job(json_array_get(specs, i), lim, who, &out->dry_run, &why);
        if (!j) {
            *err = out->batch ? xasprintf("job %zu: %s", i + 1, why) : xstrdup(why);
            free(why);
            json_decref(specs);
            submission_clear(out);
            return -1;
        }
        out->jobs[out->n++] = j;
    }
    json_decref(specs);
    return 0;
}

size_t jobspec_count(const struct jobspec_submission *sub)
{
    if (sub->params)
        return json_array_size(json_object_get(sub->params, "rows"));
    if (json_is_string(sub->array)) {
        int64_t *tasks, pct;
        size_t n;
        char *err = NULL;
        if (parse_array_spec(json_string_value(sub->array), &tasks, &n, &pct, &err) < 0) {
            free(err); /* jobspec_expand reports it */
            return 1;
        }
        free(tasks);
        return n;
    }
    return sub->n;
}

int jobspec_expand(struct jobspec_submission *sub, char **err)
{
    if (!sub->array && !sub->params)
        return 0;
    struct job **tasks;
    size_t n_tasks;
    int64_t pct = 0;
    struct job *base = sub->jobs[0];
    sub->jobs[0] = NULL;
    sub->n = 0;
    if (sweep_expand(base, sub->array, sub->params, sub->name_template, &tasks, &n_tasks, &pct,
                     err) < 0)
        return -1;
    free(sub->jobs);
    sub->jobs = tasks;
    sub->n = n_tasks;
    if (sub->max_concurrent < 0)
        sub->max_concurrent = pct;
    return 0;
}

bool jobspec_grouped(const struct jobspec_submission *sub)
{
    return sub->n > 1 || sub->max_concurrent > 0;
}

/* ---- a stored job as a spec; updates ---- */

json_t *jobspec_from_job(const struct job *f)
{
    json_t *s = json_object();
    if (f->command)
        json_object_set_new(s, JOB_KEY_COMMAND, json_string(f->command));
    else
        json_object_set_new(s, JOB_KEY_SCRIPT, json_string(f->script ? f->script : ""));
    if (f->script_path) /* a command may have one too (display only) */
        json_object_set_new(s, JOB_KEY_SCRIPT_PATH, json_string(f->script_path));
    if (f->name && !job_name_is_default(f->name, f->id)) /* a copy gets its own */
        json_object_set_new(s, JOB_KEY_NAME, json_string(f->name));
    json_object_set_new(s, JOB_KEY_WORKDIR, json_string(f->workdir ? f->workdir : ""));
    json_object_set_new(s, JOB_KEY_ENV, f->env ? json_deep_copy(f->env) : json_object());
    json_object_set_new(s, JOB_KEY_PRIORITY, json_integer(f->priority));
    json_object_set_new(s, JOB_KEY_TIME_LIMIT, json_integer(f->time_limit));
    json_object_set_new(s, JOB_KEY_GPUS, json_integer(f->gpus));
    if (f->gpus > 0) {
        json_object_set_new(s, JOB_KEY_GPU_MEMORY_MB, json_integer(f->gpu_memory_mb));
        json_object_set_new(s, JOB_KEY_SHARED, json_boolean(f->shared));
        json_object_set_new(s, JOB_KEY_GPUS_PER_TASK, json_integer(f->gpus_per_task));
        if (f->cpus_per_gpu > 0)
            json_object_set_new(s, JOB_KEY_CPUS_PER_GPU, json_integer(f->cpus_per_gpu));
    }
    if (f->mig_profile) {
        json_object_set_new(s, JOB_KEY_MIG_PROFILE, json_string(f->mig_profile));
        json_object_set_new(s, JOB_KEY_MIG_COUNT, json_integer(f->mig_count));
    }
    json_object_set_new(s, JOB_KEY_MEMORY_MB, json_integer(f->memory_mb));
    if (f->conda_env)
        json_object_set_new(s, JOB_KEY_CONDA_ENV, json_string(f->conda_env));
    if (f->warn_signal > 0 && f->time_limit > 0) {
        char *sig = format_signal_spec(f->warn_signal, f->warn_secs, f->warn_main_only);
        json_object_set_new(s, JOB_KEY_SIGNAL_SPEC, json_string(sig));
        free(sig);
    }
    if (f->begin_time > 0)
        json_object_set_new(s, JOB_KEY_BEGIN_TIME, json_real(f->begin_time));
    json_object_set_new(s, JOB_KEY_MAX_RETRIES, json_integer(f->max_retries));
    if (f->umask >= 0) {
        char mask[8];
        format_umask(f->umask, mask);
        json_object_set_new(s, JOB_KEY_UMASK, json_string(mask));
    }
    json_t *deps = json_array();
    for (size_t i = 0; i < f->n_deps; i++)
        json_array_append_new(deps, json_pack("{s:I, s:s}", "id", (json_int_t)f->deps[i].id, "kind",
                                              job_dep_kind_name(f->deps[i].kind)));
    json_object_set_new(s, JOB_KEY_DEPENDS_ON, deps);
    json_object_set_new(s, JOB_KEY_DEPENDS_MODE, json_string(f->deps_any ? "any" : "all"));
    json_object_set_new(s, JOB_KEY_AUTO_CANCEL, json_boolean(f->auto_cancel));
    if (f->project)
        json_object_set_new(s, JOB_KEY_PROJECT, json_string(f->project));
    if (f->nice)
        json_object_set_new(s, JOB_KEY_NICE, json_integer(f->nice));
    if (f->notify_email)
        json_object_set_new(s, JOB_KEY_NOTIFY_EMAIL, json_string(f->notify_email));
    if (f->notify_on) {
        json_t *events = json_array();
        char *copy = xstrdup(f->notify_on), *save = NULL;
        for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save))
            json_array_append_new(events, json_string(e));
        free(copy);
        json_object_set_new(s, JOB_KEY_NOTIFY_ON, events);
    }
    if (f->auto_close)
        json_object_set_new(s, JOB_KEY_AUTO_CLOSE, json_true());
    if (f->requeue)
        json_object_set_new(s, JOB_KEY_REQUEUE, json_true());
    if (f->pty)
        json_object_set_new(s, JOB_KEY_PTY, json_true());
    return s;
}

/* Applies the changes in over (see jobspec.h). */
int jobspec_merge(json_t *spec, const json_t *over, bool allow_hold, char **err)
{
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)over, key, v) {
        if (!jobspec_known_field(key) || !strcmp(key, "dry_run") ||
            (!allow_hold && !strcmp(key, "hold"))) {
            *err = xasprintf("'%s' cannot be changed here", key);
            return -1;
        }
    }
    if (json_object_get(over, JOB_KEY_COMMAND)) {
        json_object_del(spec, JOB_KEY_SCRIPT);
        json_object_del(spec, JOB_KEY_SCRIPT_PATH);
    } else if (json_object_get(over, JOB_KEY_SCRIPT)) {
        json_object_del(spec, JOB_KEY_COMMAND);
        json_object_del(spec, JOB_KEY_SCRIPT_PATH);
    }
    json_t *g = json_object_get(over, JOB_KEY_GPUS);
    if (json_is_integer(g) && json_integer_value(g) == 0) {
        /* No GPUs: the per-GPU settings go too unless given again. */
        json_object_del(spec, JOB_KEY_GPU_MEMORY_MB);
        json_object_del(spec, JOB_KEY_SHARED);
        json_object_del(spec, JOB_KEY_GPUS_PER_TASK);
        json_object_del(spec, JOB_KEY_CPUS_PER_GPU);
    }
    if (json_is_integer(g) && json_integer_value(g) > 0 &&
        !json_object_get(over, JOB_KEY_MIG_PROFILE)) {
        /* Whole GPUs instead of MIG instances. */
        json_object_del(spec, JOB_KEY_MIG_PROFILE);
        json_object_del(spec, JOB_KEY_MIG_COUNT);
    }
    json_t *mp = json_object_get(over, JOB_KEY_MIG_PROFILE);
    if (json_is_string(mp) && !json_object_get(over, JOB_KEY_GPUS))
        json_object_set_new(spec, JOB_KEY_GPUS, json_integer(0)); /* MIG instead of whole GPUs */
    if (json_is_null(mp))
        json_object_del(spec, JOB_KEY_MIG_COUNT);
    if (json_is_string(mp) && !json_object_get(over, JOB_KEY_MIG_COUNT))
        json_object_del(spec, JOB_KEY_MIG_COUNT); /* a new profile: N is given again or 1 */
    json_t *t = json_object_get(over, JOB_KEY_TIME_LIMIT);
    if (json_is_integer(t) && json_integer_value(t) == 0)
        json_object_del(spec, JOB_KEY_SIGNAL_SPEC);
    json_object_foreach ((json_t *)over, key, v) {
        if (json_is_null(v))
            json_object_del(spec, key);
        else
            json_object_set(spec, key, v);
    }
    return 0;
}

/* The fields gjob update reports, compared between the job's JSON before and after. */
static const char *const update_fields[] = {
    JOB_KEY_PARAMS,        JOB_KEY_NAME,         JOB_KEY_COMMAND,       JOB_KEY_SCRIPT_PATH,
    JOB_KEY_WORKDIR,       JOB_KEY_PRIORITY,     JOB_KEY_TIME_LIMIT,    JOB_KEY_GPUS,
    JOB_KEY_GPU_MEMORY_MB, JOB_KEY_SHARED,       JOB_KEY_GPUS_PER_TASK, JOB_KEY_MEMORY_MB,
    JOB_KEY_CONDA_ENV,     JOB_KEY_SIGNAL_SPEC,  JOB_KEY_BEGIN_TIME,    JOB_KEY_MAX_RETRIES,
    JOB_KEY_DEPENDS_ON,    JOB_KEY_DEPENDS_MODE, JOB_KEY_AUTO_CANCEL,   JOB_KEY_UMASK};
/* And the MIG request and --requeue (kept apart so the table above stays as it was). */
static const char *const update_fields_mig[] = {JOB_KEY_MIG_PROFILE, JOB_KEY_MIG_COUNT,
                                                JOB_KEY_REQUEUE, JOB_KEY_PTY, JOB_KEY_CPUS_PER_GPU};

static bool listed(const char *key, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(key, list[i]))
            return true;
    return false;
}

#define LISTED(key, list) listed(key, list, sizeof(list) / sizeof(list[0]))

const char *jobspec_fixed_field(const json_t *over, bool *known)
{
    /* Changed, but reported otherwise (jobspec_changes) or set on the group. */
    static const char *const also[] = {JOB_KEY_SCRIPT, JOB_KEY_ENV, JOB_KEY_MAX_CONCURRENT};
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)over, key, v) {
        if (!LISTED(key, update_fields) && !LISTED(key, update_fields_mig) && !LISTED(key, also)) {
            *known = jobspec_known_field(key);
            return key;
        }
    }
    return NULL;
}

static json_t *change(const char *field, json_t *old, json_t *new)
{
    return json_pack("{s:s, s:O, s:O}", "field", field, "old", old ? old : json_null(), "new",
                     new ? new : json_null());
}

json_t *jobspec_changes(const struct job *before_job, const struct job *after_job,
                        const json_t *over)
{
    json_t *before = job_to_json(before_job, true, NULL);
    json_t *after = job_to_json(after_job, true, NULL);
    json_t *changes = json_array();
    for (size_t i = 0; i < sizeof(update_fields) / sizeof(update_fields[0]); i++) {
        json_t *a = json_object_get(before, update_fields[i]);
        json_t *b = json_object_get(after, update_fields[i]);
        if (!json_equal(a ? a : json_null(), b ? b : json_null()) && (a || b))
            json_array_append_new(changes, change(update_fields[i], a, b));
    }
    for (size_t i = 0; i < sizeof(update_fields_mig) / sizeof(update_fields_mig[0]); i++) {
        json_t *a = json_object_get(before, update_fields_mig[i]);
        json_t *b = json_object_get(after, update_fields_mig[i]);
        if (!json_equal(a ? a : json_null(), b ? b : json_null()) && (a || b))
            json_array_append_new(changes, change(update_fields_mig[i], a, b));
    }
    /* A new script from the same path shows as a change of the script. */
    json_t *sa = json_object_get(before, JOB_KEY_SCRIPT),
           *sb = json_object_get(after, JOB_KEY_SCRIPT);
    if (json_is_string(sb) && !json_equal(sa, sb) &&
        json_equal(json_object_get(before, JOB_KEY_SCRIPT_PATH),
                   json_object_get(after, JOB_KEY_SCRIPT_PATH)))
        json_array_append_new(changes,
                              change(JOB_KEY_SCRIPT, json_object_get(before, JOB_KEY_SCRIPT_PATH),
                                     json_object_get(after, JOB_KEY_SCRIPT_PATH)));
    if (json_object_get(over, JOB_KEY_ENV) &&
        !json_equal(json_object_get(before, JOB_KEY_ENV), json_object_get(after, JOB_KEY_ENV)))
        json_array_append_new(changes, json_pack("{s:s, s:s, s:s}", "field", JOB_KEY_ENV, "old",
                                                 "...", "new", "..."));
    json_decref(before);
    json_decref(after);
    return changes;
}

const char *jobspec_owner_only_field(const json_t *over)
{
    static const char *const fields[] = {JOB_KEY_COMMAND, JOB_KEY_SCRIPT, JOB_KEY_SCRIPT_PATH,
                                         JOB_KEY_WORKDIR, JOB_KEY_ENV,    JOB_KEY_CONDA_ENV,
                                         JOB_KEY_PARAMS,  JOB_KEY_UMASK};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (json_object_get(over, fields[i]))
            return fields[i];
    return NULL;
}

bool jobspec_changes_what(const json_t *over)
{
    static const char *const what[] = {JOB_KEY_COMMAND, JOB_KEY_SCRIPT, JOB_KEY_SCRIPT_PATH,
                                       JOB_KEY_WORKDIR, JOB_KEY_ENV};
    for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++)
        if (json_object_get(over, what[i]))
            return true;
    return false;
}
