/* job: states, transitions, the job record and its JSON form (docs/api.md). */
#include "job.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

static const char *const state_short[JOB_STATE_COUNT] = {"PD", "H", "R", "CD", "F", "CA", "TO"};
static const char *const state_long[JOB_STATE_COUNT] = {
    "Queued", "Hold", "Running", "Finished", "Failed", "Cancelled", "Timeout"};

const char *job_state_short(enum job_state s)
{
    return (unsigned)s < JOB_STATE_COUNT ? state_short[s] : "?";
}

const char *job_state_name(enum job_state s)
{
    return (unsigned)s < JOB_STATE_COUNT ? state_long[s] : "Unknown";
}

int job_state_parse(const char *s, enum job_state *out)
{
    for (int i = 0; i < JOB_STATE_COUNT; i++) {
        if (strcasecmp(s, state_short[i]) == 0 || strcasecmp(s, state_long[i]) == 0) {
            *out = (enum job_state)i;
            return 0;
        }
    }
    /* Common spellings of gflow and Slurm. */
    static const struct {
        const char *name;
        enum job_state state;
    } alias[] = {
        {"pending", JOB_QUEUED},   {"held", JOB_HELD},         {"completed", JOB_FINISHED},
        {"canceled", JOB_CANCELLED}, {"timedout", JOB_TIMEOUT}, {"cg", JOB_RUNNING},
    };
    for (size_t i = 0; i < sizeof(alias) / sizeof(alias[0]); i++) {
        if (strcasecmp(s, alias[i].name) == 0) {
            *out = alias[i].state;
            return 0;
        }
    }
    return -1;
}

bool job_state_is_terminal(enum job_state s)
{
    return s == JOB_FINISHED || s == JOB_FAILED || s == JOB_CANCELLED || s == JOB_TIMEOUT;
}

bool job_state_is_active(enum job_state s)
{
    return s == JOB_QUEUED || s == JOB_HELD || s == JOB_RUNNING;
}

bool job_transition_allowed(enum job_state from, enum job_state to)
{
    switch (from) {
    case JOB_QUEUED:
        return to == JOB_HELD || to == JOB_RUNNING || to == JOB_CANCELLED || to == JOB_FAILED;
    case JOB_HELD:
        return to == JOB_QUEUED || to == JOB_CANCELLED;
    case JOB_RUNNING:
        return to == JOB_FINISHED || to == JOB_FAILED || to == JOB_CANCELLED ||
               to == JOB_TIMEOUT || to == JOB_QUEUED;
    default:
        return false;
    }
}

void job_init(struct job *j)
{
    memset(j, 0, sizeof(*j));
    j->state = JOB_QUEUED;
    j->priority = JOB_PRIORITY_DEFAULT;
    j->exit_code = -1;
    j->array_task = -1;
    j->attempt = 1;
}

void job_clear(struct job *j)
{
    free(j->name);
    free(j->user);
    free(j->command);
    free(j->script);
    free(j->script_path);
    free(j->workdir);
    free(j->reason);
    free(j->gpu_ids);
    json_decref(j->env);
    job_init(j);
}

struct job *job_new(void)
{
    struct job *j = xmalloc(sizeof(*j));
    job_init(j);
    return j;
}

void job_free(struct job *j)
{
    if (!j)
        return;
    job_clear(j);
    free(j);
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

struct job *job_dup(const struct job *src, bool with_payload)
{
    struct job *j = job_new();
    *j = *src;
    j->name = dup_or_null(src->name);
    j->user = dup_or_null(src->user);
    j->command = dup_or_null(src->command);
    j->script_path = dup_or_null(src->script_path);
    j->workdir = dup_or_null(src->workdir);
    j->reason = dup_or_null(src->reason);
    j->gpu_ids = dup_or_null(src->gpu_ids);
    j->script = with_payload ? dup_or_null(src->script) : NULL;
    j->env = with_payload && src->env ? json_deep_copy(src->env) : NULL;
    j->runtime = NULL;
    return j;
}

const char *job_signal_name(int sig)
{
    static char buf[16];
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev) {
        snprintf(buf, sizeof(buf), "SIG%s", abbrev);
        return buf;
    }
    snprintf(buf, sizeof(buf), "SIG%d", sig);
    return buf;
}

static json_t *time_or_null(double t)
{
    return t > 0 ? json_real(t) : json_null();
}

static json_t *string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

json_t *job_to_json(const struct job *j, bool full, const char *log_dir)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(j->id));
    json_object_set_new(o, "name", string_or_null(j->name));
    json_object_set_new(o, "user", string_or_null(j->user));
    json_object_set_new(o, "uid", json_integer(j->uid));
    json_object_set_new(o, "state", json_string(job_state_short(j->state)));
    json_object_set_new(o, "state_name", json_string(job_state_name(j->state)));
    json_object_set_new(o, "priority", json_integer(j->priority));
    json_object_set_new(o, "time_limit",
                        j->time_limit > 0 ? json_integer(j->time_limit) : json_null());
    json_object_set_new(o, "submit_time", time_or_null(j->submit_time));
    json_object_set_new(o, "start_time", time_or_null(j->start_time));
    json_object_set_new(o, "end_time", time_or_null(j->end_time));
    json_object_set_new(o, "exit_code", j->exit_code >= 0 ? json_integer(j->exit_code) : json_null());
    json_object_set_new(o, "signal", j->signal > 0 ? json_integer(j->signal) : json_null());
    json_object_set_new(o, "signal_name",
                        j->signal > 0 ? json_string(job_signal_name(j->signal)) : json_null());
    json_object_set_new(o, "oom", json_boolean(j->oom));
    const char *reason = j->reason;
    if (!reason && j->state == JOB_QUEUED)
        reason = j->wait_reason;
    json_object_set_new(o, "reason", string_or_null(reason));
    json_object_set_new(o, "command", string_or_null(j->command));
    json_object_set_new(o, "script_path", string_or_null(j->script_path));
    json_object_set_new(o, "workdir", string_or_null(j->workdir));
    json_object_set_new(o, "gpus", json_integer(j->gpus));
    json_object_set_new(o, "gpu_ids", string_or_null(j->gpu_ids));
    json_object_set_new(o, "shim_pid", j->shim_pid > 0 ? json_integer(j->shim_pid) : json_null());
    json_object_set_new(o, "max_rss_kb", j->max_rss_kb > 0 ? json_integer(j->max_rss_kb) : json_null());
    if (j->end_request != JOB_END_NONE && j->state == JOB_RUNNING)
        json_object_set_new(o, "cancelling", json_true());
    if (full) {
        json_object_set_new(o, "script", string_or_null(j->script));
        json_object_set_new(o, "env", j->env ? json_incref(j->env) : json_object());
        if (log_dir)
            json_object_set_new(o, "log_path", json_sprintf("%s/%lld.log", log_dir, (long long)j->id));
    }
    return o;
}

static char *get_str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
}

static int64_t get_int(const json_t *o, const char *key, int64_t dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static double get_time(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : 0;
}

int job_from_json(const json_t *o, struct job *j)
{
    if (!json_is_object(o))
        return -1;
    job_init(j);
    j->id = get_int(o, "id", 0);
    const char *st = json_string_value(json_object_get(o, "state"));
    if (!st || job_state_parse(st, &j->state) < 0)
        return -1;
    j->name = get_str(o, "name");
    j->user = get_str(o, "user");
    j->uid = (uint32_t)get_int(o, "uid", 0);
    j->priority = (int)get_int(o, "priority", JOB_PRIORITY_DEFAULT);
    j->time_limit = get_int(o, "time_limit", 0);
    j->submit_time = get_time(o, "submit_time");
    j->start_time = get_time(o, "start_time");
    j->end_time = get_time(o, "end_time");
    j->exit_code = (int)get_int(o, "exit_code", -1);
    j->signal = (int)get_int(o, "signal", 0);
    j->oom = json_is_true(json_object_get(o, "oom"));
    j->reason = get_str(o, "reason");
    j->command = get_str(o, "command");
    j->script = get_str(o, "script");
    j->script_path = get_str(o, "script_path");
    j->workdir = get_str(o, "workdir");
    j->gpus = (int)get_int(o, "gpus", 0);
    j->gpu_ids = get_str(o, "gpu_ids");
    j->shim_pid = get_int(o, "shim_pid", 0);
    j->max_rss_kb = get_int(o, "max_rss_kb", 0);
    if (json_is_true(json_object_get(o, "cancelling")))
        j->end_request = JOB_END_CANCEL;
    json_t *env = json_object_get(o, "env");
    if (json_is_object(env))
        j->env = json_incref(env);
    return 0;
}
