/* jobcodec: a job's text forms at the edges: the JSON of the API (written directly,
 * not through jansson trees: listing 10,000 jobs is a hot path and this is several
 * times faster), the TSV lines `gqueue` reads, and reading both back in the CLI. */
#include "job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuinfo.h"
#include "parse.h"
#include "util.h"

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static const char *const field_names[JOB_FIELD_COUNT] = {
    "id",
    "name",
    "user",
    "uid",
    "state",
    "state_name",
    "priority",
    "time_limit",
    "submit_time",
    "start_time",
    "end_time",
    "exit_code",
    "signal",
    "signal_name",
    "oom",
    "reason",
    "command",
    "script_path",
    "workdir",
    "gpus",
    "gpu_ids",
    "shim_pid",
    "max_rss_kb",
    "gpu_memory_mb",
    "shared",
    "gpus_per_task",
    "depends_on",
    "depends_mode",
    "auto_cancel",
    "memory_mb",
    "conda_env",
    "signal_spec",
    "begin_time",
    "max_retries",
    "attempt",
    "retry_of",
    "group_id",
    "array_task",
    "max_concurrent",
    "umask",
    "mig_profile",
    "mig_count",
    "mig_devices",
    "project",
    "nice",
    "notify_email",
    "notify_on",
    "auto_close",
    "expected_start",
    "requeue",
    "requeue_count",
    "preempted_by",
    "effective_priority",
    "pty",
    "slurm_id",
};

const char *job_field_name(enum job_field f)
{
    return (unsigned)f < JOB_FIELD_COUNT ? field_names[f] : "?";
}

int job_field_parse(const char *name)
{
    for (int i = 0; i < JOB_FIELD_COUNT; i++)
        if (strcmp(name, field_names[i]) == 0)
            return i;
    return -1;
}

/* A value in TSV: tab, newline and backslash escaped; null is \N. */
static void append_tsv_string(struct strbuf *sb, const char *s)
{
    if (!s) {
        strbuf_adds(sb, "\\N");
        return;
    }
    while (*s) {
        size_t run = strcspn(s, "\t\n\\"); /* copied in one go: names, paths */
        strbuf_add(sb, s, run);
        s += run;
        if (!*s)
            break;
        strbuf_adds(sb, *s == '\t' ? "\\t" : *s == '\n' ? "\\n" : "\\\\");
        s++;
    }
}

static void append_null(struct strbuf *sb, bool tsv)
{
    strbuf_adds(sb, tsv ? "\\N" : "null");
}

/* Decimal digits without printf, which dominated the cost of listing many jobs. */
static void append_decimal(struct strbuf *sb, unsigned long long v, int min_digits)
{
    char buf[24];
    int n = 0;
    do {
        buf[sizeof(buf) - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v || n < min_digits);
    strbuf_add(sb, buf + sizeof(buf) - n, (size_t)n);
}

static void append_int(struct strbuf *sb, long long v, bool present, bool tsv)
{
    if (!present) {
        append_null(sb, tsv);
        return;
    }
    if (v < 0)
        strbuf_addc(sb, '-');
    append_decimal(sb, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v, 1);
}

/* Unix seconds with microseconds. */
static void append_time(struct strbuf *sb, double t, bool tsv)
{
    if (!(t > 0) || !isfinite(t)) {
        append_null(sb, tsv);
        return;
    }
    if (t >= 1e12) { /* past year 33000 (a --begin may say so): too large for the integers */
        strbuf_addf(sb, "%.6f", t);
        return;
    }
    unsigned long long us = (unsigned long long)(t * 1e6 + 0.5);
    append_decimal(sb, us / 1000000, 1);
    strbuf_addc(sb, '.');
    append_decimal(sb, us % 1000000, 6);
}

static void append_text(struct strbuf *sb, const char *v, bool tsv)
{
    if (tsv)
        append_tsv_string(sb, v);
    else
        strbuf_add_json_string(sb, v, JSON_STR_GFLOW);
}

/* A ','-joined list (notify_on): a JSON array of strings ([] for none), in TSV the text. */
static void append_list(struct strbuf *sb, const char *list, bool tsv)
{
    if (tsv) {
        append_tsv_string(sb, list);
        return;
    }
    strbuf_addc(sb, '[');
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        char *item = xstrndup(p, len);
        if (p != list)
            strbuf_addc(sb, ',');
        strbuf_add_json_string(sb, item, JSON_STR_GFLOW);
        free(item);
        p += len;
        if (*p == ',')
            p++;
    }
    strbuf_addc(sb, ']');
}

/* The reason as the API shows it: the recorded one, else why a queued job waits. */
static void append_reason(struct strbuf *sb, const struct job *j, bool tsv)
{
    if (j->reason == JOB_REASON_NONE) {
        append_text(sb,
                    j->state == JOB_QUEUED   ? j->wait_reason
                    : job_backend_pending(j) ? j->backend_reason
                                             : NULL,
                    tsv);
        return;
    }
    char *text = job_reason_string(j);
    append_text(sb, text, tsv);
    free(text);
}

void job_append_field(struct strbuf *sb, const struct job *j, enum job_field f, bool tsv)
{
    switch (f) {
    case JOB_FIELD_ID:
        append_int(sb, j->id, true, tsv);
        break;
    case JOB_FIELD_NAME:
        append_text(sb, j->name, tsv);
        break;
    case JOB_FIELD_USER:
        append_text(sb, j->user, tsv);
        break;
    case JOB_FIELD_UID:
        append_int(sb, j->uid, true, tsv);
        break;
    case JOB_FIELD_STATE:
        append_text(sb, job_display_state(j), tsv);
        break;
    case JOB_FIELD_STATE_NAME:
        append_text(sb, job_display_state_name(j), tsv);
        break;
    case JOB_FIELD_PRIORITY:
        append_int(sb, j->priority, true, tsv);
        break;
    case JOB_FIELD_TIME_LIMIT:
        append_int(sb, j->time_limit, j->time_limit > 0, tsv);
        break;
    case JOB_FIELD_SUBMIT_TIME:
        append_time(sb, j->submit_time, tsv);
        break;
    case JOB_FIELD_START_TIME:
        append_time(sb, j->start_time, tsv);
        break;
    case JOB_FIELD_END_TIME:
        append_time(sb, j->end_time, tsv);
        break;
    case JOB_FIELD_EXIT_CODE:
        append_int(sb, j->exit_code, j->exit_code >= 0, tsv);
        break;
    case JOB_FIELD_SIGNAL:
        append_int(sb, j->signal, j->signal > 0, tsv);
        break;
    case JOB_FIELD_SIGNAL_NAME:
        append_text(sb, j->signal > 0 ? job_signal_name(j->signal) : NULL, tsv);
        break;
    case JOB_FIELD_OOM:
        strbuf_adds(sb, j->oom ? "true" : "false");
        break;
    case JOB_FIELD_REASON:
        append_reason(sb, j, tsv);
        break;
    case JOB_FIELD_COMMAND:
        append_text(sb, j->command, tsv);
        break;
    case JOB_FIELD_SCRIPT_PATH:
        append_text(sb, j->script_path, tsv);
        break;
    case JOB_FIELD_WORKDIR:
        append_text(sb, j->workdir, tsv);
        break;
    case JOB_FIELD_GPUS:
        append_int(sb, j->gpus, true, tsv);
        break;
    case JOB_FIELD_GPU_IDS:
        if (j->gpu_mask) {
            char *ids = gpu_mask_format(j->gpu_mask);
            append_text(sb, ids, tsv);
            free(ids);
        } else {
            append_null(sb, tsv);
        }
        break;
    case JOB_FIELD_SHIM_PID:
        append_int(sb, j->shim_pid, j->shim_pid > 0, tsv);
        break;
    case JOB_FIELD_MAX_RSS_KB:
        append_int(sb, j->max_rss_kb, j->max_rss_kb > 0, tsv);
        break;
    case JOB_FIELD_GPU_MEMORY_MB:
        append_int(sb, j->gpu_memory_mb, true, tsv);
        break;
    case JOB_FIELD_SHARED:
        strbuf_adds(sb, j->shared ? "true" : "false");
        break;
    case JOB_FIELD_GPUS_PER_TASK:
        append_int(sb, j->gpus_per_task, true, tsv);
        break;
    case JOB_FIELD_DEPENDS_ON:
        if (tsv) {
            for (size_t i = 0; i < j->n_deps; i++) {
                if (i)
                    strbuf_addc(sb, ',');
                strbuf_adds(sb, job_dep_kind_name(j->deps[i].kind));
                strbuf_addc(sb, ':');
                append_int(sb, j->deps[i].id, true, false);
            }
            break;
        }
        strbuf_addc(sb, '[');
        for (size_t i = 0; i < j->n_deps; i++) {
            strbuf_adds(sb, i ? ",{\"id\":" : "{\"id\":");
            append_int(sb, j->deps[i].id, true, false);
            strbuf_adds(sb, ",\"kind\":\"");
            strbuf_adds(sb, job_dep_kind_name(j->deps[i].kind));
            strbuf_adds(sb, "\"}");
        }
        strbuf_addc(sb, ']');
        break;
    case JOB_FIELD_DEPENDS_MODE:
        append_text(sb, j->deps_any ? "any" : "all", tsv);
        break;
    case JOB_FIELD_AUTO_CANCEL:
        strbuf_adds(sb, j->auto_cancel ? "true" : "false");
        break;
    case JOB_FIELD_MEMORY_MB:
        append_int(sb, j->memory_mb, true, tsv);
        break;
    case JOB_FIELD_CONDA_ENV:
        append_text(sb, j->conda_env, tsv);
        break;
    case JOB_FIELD_BEGIN_TIME:
        append_time(sb, j->begin_time, tsv);
        break;
    case JOB_FIELD_MAX_RETRIES:
        append_int(sb, j->max_retries, true, tsv);
        break;
    case JOB_FIELD_ATTEMPT:
        append_int(sb, j->attempt, true, tsv);
        break;
    case JOB_FIELD_RETRY_OF:
        append_int(sb, j->retry_of, j->retry_of > 0, tsv);
        break;
    case JOB_FIELD_GROUP_ID:
        append_int(sb, j->group_id, j->group_id > 0, tsv);
        break;
    case JOB_FIELD_ARRAY_TASK:
        append_int(sb, j->array_task, j->array_task >= 0, tsv);
        break;
    case JOB_FIELD_MAX_CONCURRENT:
        append_int(sb, j->group ? j->group->max_concurrent : 0, j->group != NULL, tsv);
        break;
    case JOB_FIELD_UMASK:
        if (j->umask >= 0) {
            char mask[8];
            format_umask(j->umask, mask);
            append_text(sb, mask, tsv);
        } else {
            append_null(sb, tsv);
        }
        break;
    case JOB_FIELD_MIG_PROFILE:
        append_text(sb, j->mig_profile, tsv);
        break;
    case JOB_FIELD_MIG_COUNT:
        append_int(sb, j->mig_count, true, tsv);
        break;
    case JOB_FIELD_MIG_DEVICES:
        append_text(sb, j->mig_uuids, tsv);
        break;
    case JOB_FIELD_PROJECT:
        append_text(sb, j->project, tsv);
        break;
    case JOB_FIELD_NICE:
        append_int(sb, j->nice, true, tsv);
        break;
    case JOB_FIELD_NOTIFY_EMAIL:
        append_text(sb, j->notify_email, tsv);
        break;
    case JOB_FIELD_NOTIFY_ON:
        append_list(sb, j->notify_on, tsv);
        break;
    case JOB_FIELD_AUTO_CLOSE:
        strbuf_adds(sb, j->auto_close ? "true" : "false");
        break;
    case JOB_FIELD_EXPECTED_START: /* a job that left the queue keeps its last plan */
        append_time(sb, j->state == JOB_QUEUED ? j->expected_start : 0, tsv);
        break;
    case JOB_FIELD_REQUEUE:
        strbuf_adds(sb, j->requeue ? "true" : "false");
        break;
    case JOB_FIELD_REQUEUE_COUNT:
        append_int(sb, j->requeue_count, true, tsv);
        break;
    case JOB_FIELD_PREEMPTED_BY:
        append_int(sb, j->preempted_by, j->preempted_by > 0, tsv);
        break;
    case JOB_FIELD_PTY:
        strbuf_adds(sb, j->pty ? "true" : "false");
        break;
    case JOB_FIELD_SLURM_ID:
        append_int(sb, j->backend_id, j->backend_id > 0, tsv);
        break;
    case JOB_FIELD_EFFECTIVE_PRIORITY:
        if (j->effective_priority >= 0 && isfinite(j->effective_priority))
            strbuf_addf(sb, "%.4f", j->effective_priority);
        else
            append_null(sb, tsv);
        break;
    case JOB_FIELD_SIGNAL_SPEC:
        if (j->warn_signal > 0) {
            char *spec = format_signal_spec(j->warn_signal, j->warn_secs, j->warn_main_only);
            append_text(sb, spec, tsv);
            free(spec);
        } else {
            append_null(sb, tsv);
        }
        break;
    default:
        append_null(sb, tsv);
    }
}

void job_append_json(struct strbuf *sb, const struct job *j)
{
    strbuf_addc(sb, '{');
    for (int f = 0; f < JOB_FIELD_COUNT; f++) {
        if (f)
            strbuf_addc(sb, ',');
        strbuf_addc(sb, '"');
        strbuf_adds(sb, field_names[f]);
        strbuf_adds(sb, "\":");
        job_append_field(sb, j, (enum job_field)f, false);
    }
    /* A preempted job being stopped is not cancelled: it will be queued again. */
    if (j->end_request != JOB_END_NONE && j->end_request != JOB_END_PREEMPT &&
        j->state == JOB_RUNNING)
        strbuf_adds(sb, ",\"cancelling\":true");
    if (j->end_request == JOB_END_PREEMPT && j->state == JOB_RUNNING)
        strbuf_adds(sb, ",\"preempting\":true");
    strbuf_addc(sb, '}');
}

void job_append_tsv(struct strbuf *sb, const struct job *j, const int *fields, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i)
            strbuf_addc(sb, '\t');
        job_append_field(sb, j, (enum job_field)fields[i], true);
    }
    strbuf_addc(sb, '\n');
}

json_t *job_to_json(const struct job *j, bool full, const char *log_dir)
{
    struct strbuf sb;
    strbuf_init(&sb);
    job_append_json(&sb, j);
    json_t *o = json_loadb(sb.buf, sb.len, 0, NULL);
    strbuf_free(&sb);
    if (full) {
        json_object_set_new(o, "script", j->script ? json_string(j->script) : json_null());
        json_object_set_new(o, "env", j->env ? json_incref(j->env) : json_object());
        json_object_set_new(o, "params", j->params ? json_incref(j->params) : json_null());
        if (log_dir)
            json_object_set_new(o, "log_path",
                                json_sprintf("%s/%lld.log", log_dir, (long long)j->id));
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

/* A JSON array of strings as one ','-joined string; NULL when empty or absent. */
static char *get_list(const json_t *o, const char *key)
{
    struct strbuf sb;
    strbuf_init(&sb);
    size_t i;
    const json_t *v;
    json_array_foreach (json_object_get(o, key), i, v) {
        if (json_is_string(v))
            strbuf_addf(&sb, "%s%s", sb.len ? "," : "", json_string_value(v));
    }
    if (!sb.len) {
        strbuf_free(&sb);
        return NULL;
    }
    return strbuf_detach(&sb);
}

/* A umask's text form back; -1 when absent or not one. */
static int read_umask(const char *s)
{
    int mask;
    char *err = NULL;
    if (!s || parse_umask(s, &mask, &err) < 0) {
        free(err);
        return -1;
    }
    return mask;
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
    if (job_state_is_cancelling_name(st))
        j->end_request = JOB_END_CANCEL;
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
    j->reason = job_reason_parse(json_string_value(json_object_get(o, "reason")), &j->reason_job,
                                 &j->reason_detail);
    j->command = get_str(o, "command");
    j->script = get_str(o, "script");
    j->script_path = get_str(o, "script_path");
    j->workdir = get_str(o, "workdir");
    j->gpus = (int)get_int(o, "gpus", 0);
    j->gpu_mask = gpu_mask_parse(json_string_value(json_object_get(o, "gpu_ids")));
    j->gpu_memory_mb = get_int(o, "gpu_memory_mb", 0);
    j->memory_mb = get_int(o, "memory_mb", 0);
    j->conda_env = get_str(o, "conda_env");
    job_set_signal_spec(j, json_string_value(json_object_get(o, "signal_spec")));
    j->begin_time = get_time(o, "begin_time");
    const json_t *eff = json_object_get(o, "effective_priority");
    j->effective_priority = json_is_number(eff) ? json_number_value(eff) : -1;
    j->umask = read_umask(json_string_value(json_object_get(o, "umask")));
    j->max_retries = (int)get_int(o, "max_retries", 0);
    j->attempt = (int)get_int(o, "attempt", 1);
    j->retry_of = get_int(o, "retry_of", 0);
    j->group_id = get_int(o, "group_id", 0);
    j->array_task = get_int(o, "array_task", -1);
    j->shared = json_is_true(json_object_get(o, "shared"));
    j->gpus_per_task = (int)get_int(o, "gpus_per_task", 0);
    j->shim_pid = get_int(o, "shim_pid", 0);
    j->max_rss_kb = get_int(o, "max_rss_kb", 0);
    j->mig_profile = get_str(o, "mig_profile");
    j->mig_count = (int)get_int(o, "mig_count", 0);
    j->mig_uuids = get_str(o, "mig_devices");
    j->project = get_str(o, "project");
    j->nice = (int)get_int(o, "nice", 0);
    j->notify_email = get_str(o, "notify_email");
    j->notify_on = get_list(o, "notify_on");
    j->auto_close = json_is_true(json_object_get(o, "auto_close"));
    j->expected_start = get_time(o, "expected_start");
    j->requeue = json_is_true(json_object_get(o, "requeue"));
    j->requeue_count = (int)get_int(o, "requeue_count", 0);
    j->preempted_by = get_int(o, "preempted_by", 0);
    j->pty = json_is_true(json_object_get(o, "pty"));
    j->backend_id = get_int(o, "slurm_id", 0);
    size_t di;
    const json_t *dep;
    json_array_foreach (json_object_get(o, "depends_on"), di, dep) {
        enum job_dep_kind kind = JOB_DEP_AFTEROK;
        const char *k = json_string_value(json_object_get(dep, "kind"));
        if (k)
            job_dep_kind_parse(k, &kind);
        if (json_is_integer(json_object_get(dep, "id")))
            job_deps_add(j, get_int(dep, "id", 0), kind);
    }
    const char *mode = json_string_value(json_object_get(o, "depends_mode"));
    j->deps_any = mode && strcmp(mode, "any") == 0;
    j->auto_cancel = !json_is_false(json_object_get(o, "auto_cancel"));
    if (json_is_true(json_object_get(o, "cancelling")))
        j->end_request = JOB_END_CANCEL;
    else if (json_is_true(json_object_get(o, "preempting")))
        j->end_request = JOB_END_PREEMPT;
    json_t *env = json_object_get(o, "env");
    if (json_is_object(env))
        j->env = json_incref(env);
    json_t *params = json_object_get(o, "params");
    if (json_is_object(params))
        j->params = json_incref(params);
    return 0;
}

/* Unescapes a TSV value in place; NULL for \N. */
static char *tsv_value(char *v)
{
    if (strcmp(v, "\\N") == 0)
        return NULL;
    char *w = strchr(v, '\\'); /* nearly every value has no escape: left as it is */
    if (!w)
        return v;
    for (char *r = w; *r; r++) {
        if (*r == '\\' && r[1]) {
            r++;
            *w++ = *r == 't' ? '\t' : *r == 'n' ? '\n' : *r;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return v;
}

static long long tsv_int(const char *v, long long dflt)
{
    if (!v)
        return dflt;
    /* A short run of digits (nearly every value) without strtoll's generality. */
    long long n = 0;
    const char *p = v;
    while (*p >= '0' && *p <= '9' && p - v < 18)
        n = n * 10 + (*p++ - '0');
    return !*p && p != v ? n : strtoll(v, NULL, 10);
}

static void set_field(struct job *j, enum job_field f, char *v, bool borrow)
{
    switch (f) {
    case JOB_FIELD_ID:
        j->id = tsv_int(v, 0);
        break;
    case JOB_FIELD_NAME:
        j->name = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_USER:
        j->user = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_UID:
        j->uid = (uint32_t)tsv_int(v, 0);
        break;
    case JOB_FIELD_STATE:
        if (v && job_state_parse(v, &j->state) == 0 && job_state_is_cancelling_name(v))
            j->end_request = JOB_END_CANCEL; /* "CG" */
        break;
    case JOB_FIELD_PRIORITY:
        j->priority = (int)tsv_int(v, JOB_PRIORITY_DEFAULT);
        break;
    case JOB_FIELD_TIME_LIMIT:
        j->time_limit = tsv_int(v, 0);
        break;
    case JOB_FIELD_SUBMIT_TIME:
        j->submit_time = v ? strtod(v, NULL) : 0;
        break;
    case JOB_FIELD_START_TIME:
        j->start_time = v ? strtod(v, NULL) : 0;
        break;
    case JOB_FIELD_END_TIME:
        j->end_time = v ? strtod(v, NULL) : 0;
        break;
    case JOB_FIELD_EXIT_CODE:
        j->exit_code = (int)tsv_int(v, -1);
        break;
    case JOB_FIELD_SIGNAL:
        j->signal = (int)tsv_int(v, 0);
        break;
    case JOB_FIELD_OOM:
        j->oom = v && strcmp(v, "true") == 0;
        break;
    case JOB_FIELD_REASON: {
        const char *detail; /* the end of v */
        j->reason = job_reason_parse_in(v, &j->reason_job, &detail);
        j->reason_detail = borrow || !detail ? (char *)detail : xstrdup(detail);
        break;
    }
    case JOB_FIELD_COMMAND:
        j->command = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_SCRIPT_PATH:
        j->script_path = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_WORKDIR:
        j->workdir = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_GPUS:
        j->gpus = (int)tsv_int(v, 0);
        break;
    case JOB_FIELD_GPU_IDS:
        j->gpu_mask = gpu_mask_parse(v);
        break;
    case JOB_FIELD_SHIM_PID:
        j->shim_pid = tsv_int(v, 0);
        break;
    case JOB_FIELD_MAX_RSS_KB:
        j->max_rss_kb = tsv_int(v, 0);
        break;
    case JOB_FIELD_GPU_MEMORY_MB:
        j->gpu_memory_mb = tsv_int(v, 0);
        break;
    case JOB_FIELD_SHARED:
        j->shared = v && strcmp(v, "true") == 0;
        break;
    case JOB_FIELD_GPUS_PER_TASK:
        j->gpus_per_task = (int)tsv_int(v, 0);
        break;
    case JOB_FIELD_DEPENDS_ON:
        job_deps_parse(j, v);
        break;
    case JOB_FIELD_DEPENDS_MODE:
        j->deps_any = v && strcmp(v, "any") == 0;
        break;
    case JOB_FIELD_AUTO_CANCEL:
        j->auto_cancel = !(v && strcmp(v, "false") == 0);
        break;
    case JOB_FIELD_MEMORY_MB:
        j->memory_mb = tsv_int(v, 0);
        break;
    case JOB_FIELD_CONDA_ENV:
        j->conda_env = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_SIGNAL_SPEC:
        job_set_signal_spec(j, v);
        break;
    case JOB_FIELD_BEGIN_TIME:
        j->begin_time = v ? strtod(v, NULL) : 0;
        break;
    case JOB_FIELD_MAX_RETRIES:
        j->max_retries = (int)tsv_int(v, 0);
        break;
    case JOB_FIELD_ATTEMPT:
        j->attempt = (int)tsv_int(v, 1);
        break;
    case JOB_FIELD_RETRY_OF:
        j->retry_of = tsv_int(v, 0);
        break;
    case JOB_FIELD_GROUP_ID:
        j->group_id = tsv_int(v, 0);
        break;
    case JOB_FIELD_ARRAY_TASK:
        j->array_task = tsv_int(v, -1);
        break;
    case JOB_FIELD_UMASK:
        j->umask = read_umask(v);
        break;
    case JOB_FIELD_MIG_PROFILE:
        j->mig_profile = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_MIG_COUNT:
        j->mig_count = (int)tsv_int(v, 0);
        break;
    case JOB_FIELD_MIG_DEVICES:
        j->mig_uuids = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_PROJECT:
        j->project = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_EFFECTIVE_PRIORITY:
        j->effective_priority = v ? strtod(v, NULL) : -1;
        break;
    case JOB_FIELD_NICE:
        j->nice = (int)tsv_int(v, 0);
        break;
    case JOB_FIELD_NOTIFY_EMAIL:
        j->notify_email = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_NOTIFY_ON:
        j->notify_on = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_AUTO_CLOSE:
        j->auto_close = v && strcmp(v, "true") == 0;
        break;
    case JOB_FIELD_EXPECTED_START:
        j->expected_start = v ? strtod(v, NULL) : 0;
        break;
    case JOB_FIELD_REQUEUE:
        j->requeue = v && strcmp(v, "true") == 0;
        break;
    case JOB_FIELD_REQUEUE_COUNT:
        j->requeue_count = (int)tsv_int(v, 0);
        break;
    case JOB_FIELD_PREEMPTED_BY:
        j->preempted_by = tsv_int(v, 0);
        break;
    case JOB_FIELD_PTY:
        j->pty = v && strcmp(v, "true") == 0;
        break;
    case JOB_FIELD_SLURM_ID:
        j->backend_id = tsv_int(v, 0);
        break;
    default: /* derived fields (state_name, signal_name) */
        break;
    }
}

int job_from_tsv(struct job *j, const int *fields, size_t n, char *line, bool borrow)
{
    job_init(j);
    char *p = line;
    for (size_t i = 0; i < n; i++) {
        if (!p)
            return -1;
        char *tab = strchr(p, '\t');
        if (tab)
            *tab = '\0';
        set_field(j, (enum job_field)fields[i], tsv_value(p), borrow);
        p = tab ? tab + 1 : NULL;
    }
    return 0;
}
