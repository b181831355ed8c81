/* job: states, transitions, the job record and its JSON form (docs/api.md). */
#include "job.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"
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

/* ---- reasons ---- */

static const char *const reason_names[JOB_REASON_COUNT] = {
    [JOB_REASON_NONE] = "",
    [JOB_REASON_CANCELLED_BY_USER] = "CancelledByUser",
    [JOB_REASON_TIME_LIMIT] = "TimeLimit",
    [JOB_REASON_NON_ZERO_EXIT] = "NonZeroExitCode",
    [JOB_REASON_SIGNAL] = "Signal",
    [JOB_REASON_OUT_OF_MEMORY] = "OutOfMemory",
    [JOB_REASON_LAUNCH_FAILED] = "LaunchFailed",
    [JOB_REASON_SHIM_LOST] = "ShimLost",
    [JOB_REASON_DEPENDENCY_FAILED] = "DependencyFailed",
    [JOB_REASON_HELD_BY_USER] = "JobHeldUser",
    [JOB_REASON_OTHER] = "",
};

const char *job_reason_name(enum job_reason r)
{
    return (unsigned)r < JOB_REASON_COUNT ? reason_names[r] : "";
}

char *job_reason_text(enum job_reason r, int64_t job, const char *detail)
{
    switch (r) {
    case JOB_REASON_NONE:
        return NULL;
    case JOB_REASON_DEPENDENCY_FAILED:
        return xasprintf("DependencyFailed:%lld", (long long)job);
    case JOB_REASON_LAUNCH_FAILED:
    case JOB_REASON_SHIM_LOST:
        return detail && *detail ? xasprintf("%s: %s", reason_names[r], detail)
                                 : xstrdup(reason_names[r]);
    case JOB_REASON_OTHER:
        return xstrdup(detail ? detail : "");
    default:
        return xstrdup(job_reason_name(r));
    }
}

enum job_reason job_reason_parse(const char *text, int64_t *job, char **detail)
{
    *job = 0;
    *detail = NULL;
    if (!text || !*text)
        return JOB_REASON_NONE;
    for (int r = JOB_REASON_NONE + 1; r < JOB_REASON_COUNT; r++) {
        const char *name = reason_names[r];
        size_t n = strlen(name);
        if (!n || strncmp(text, name, n) != 0)
            continue;
        const char *rest = text + n;
        if (r == JOB_REASON_DEPENDENCY_FAILED) {
            if (*rest == ':' && parse_int64(rest + 1, job) == 0)
                return JOB_REASON_DEPENDENCY_FAILED;
        } else if (r == JOB_REASON_LAUNCH_FAILED || r == JOB_REASON_SHIM_LOST) {
            if (!*rest)
                return (enum job_reason)r;
            if (rest[0] == ':' && rest[1] == ' ') {
                *detail = xstrdup(rest + 2);
                return (enum job_reason)r;
            }
        } else if (!*rest) {
            return (enum job_reason)r;
        }
    }
    *detail = xstrdup(text);
    return JOB_REASON_OTHER;
}

/* ---- dependencies ---- */

static const char *const dep_kind_names[] = {"afterok", "afterany", "afternotok"};

const char *job_dep_kind_name(enum job_dep_kind k)
{
    return (unsigned)k < 3 ? dep_kind_names[k] : "afterok";
}

int job_dep_kind_parse(const char *s, enum job_dep_kind *out)
{
    for (int i = 0; i < 3; i++)
        if (strcasecmp(s, dep_kind_names[i]) == 0) {
            *out = (enum job_dep_kind)i;
            return 0;
        }
    return -1;
}

enum job_dep_status job_dep_status_for(enum job_dep_kind k, enum job_state s)
{
    if (!job_state_is_terminal(s))
        return JOB_DEP_PENDING;
    switch (k) {
    case JOB_DEP_AFTERANY:
        return JOB_DEP_MET;
    case JOB_DEP_AFTERNOTOK:
        return s == JOB_FINISHED ? JOB_DEP_NEVER : JOB_DEP_MET;
    case JOB_DEP_AFTEROK:
    default:
        return s == JOB_FINISHED ? JOB_DEP_MET : JOB_DEP_NEVER;
    }
}

void job_deps_add(struct job *j, int64_t id, enum job_dep_kind kind)
{
    for (size_t i = 0; i < j->n_deps; i++)
        if (j->deps[i].id == id && j->deps[i].kind == kind)
            return;
    j->deps = xrealloc(j->deps, (j->n_deps + 1) * sizeof(*j->deps));
    j->deps[j->n_deps++] = (struct job_dep){id, kind, JOB_DEP_PENDING};
}

char *job_deps_format(const struct job *j)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "");
    for (size_t i = 0; i < j->n_deps; i++)
        strbuf_addf(&sb, "%s%s:%lld", i ? "," : "", job_dep_kind_name(j->deps[i].kind),
                    (long long)j->deps[i].id);
    return strbuf_detach(&sb);
}

int job_deps_parse(struct job *j, const char *s)
{
    free(j->deps);
    j->deps = NULL;
    j->n_deps = 0;
    if (!s)
        return 0;
    char *copy = xstrdup(s), *save = NULL;
    int ret = 0;
    for (char *item = strtok_r(copy, ",", &save); item && ret == 0;
         item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        enum job_dep_kind kind;
        if (!colon) {
            ret = -1;
            break;
        }
        *colon = '\0';
        if (job_dep_kind_parse(item, &kind) < 0 || !colon[1]) {
            ret = -1;
            break;
        }
        for (char *p = colon + 1; *p;) {
            char *end;
            long long id = strtoll(p, &end, 10);
            if (end == p || id <= 0 || (*end && *end != ':')) {
                ret = -1;
                break;
            }
            job_deps_add(j, id, kind);
            p = *end ? end + 1 : end;
        }
    }
    free(copy);
    if (ret < 0) {
        free(j->deps);
        j->deps = NULL;
        j->n_deps = 0;
    }
    return ret;
}

enum job_deps_outcome job_deps_outcome(const struct job *j, int64_t *failed_id)
{
    size_t met = 0, never = 0;
    int64_t failed = 0;
    for (size_t i = 0; i < j->n_deps; i++) {
        if (j->deps[i].status == JOB_DEP_MET) {
            met++;
        } else if (j->deps[i].status == JOB_DEP_NEVER) {
            never++;
            if (!failed || j->deps_any)
                failed = j->deps[i].id;
        }
    }
    if (failed_id)
        *failed_id = failed;
    if (j->n_deps == 0)
        return JOB_DEPS_READY;
    if (j->deps_any)
        return met ? JOB_DEPS_READY : never == j->n_deps ? JOB_DEPS_FAILED : JOB_DEPS_WAIT;
    return never ? JOB_DEPS_FAILED : met == j->n_deps ? JOB_DEPS_READY : JOB_DEPS_WAIT;
}

void job_add_dependent(struct job *j, int64_t dependent)
{
    if (j->n_dependents == j->cap_dependents) {
        j->cap_dependents = j->cap_dependents ? j->cap_dependents * 2 : 4;
        j->dependents = xrealloc(j->dependents, j->cap_dependents * sizeof(*j->dependents));
    }
    j->dependents[j->n_dependents++] = dependent;
}

/* ---- the record ---- */

void job_init(struct job *j)
{
    memset(j, 0, sizeof(*j));
    j->state = JOB_QUEUED;
    j->auto_cancel = true;
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
    free(j->conda_env);
    free(j->deps);
    free(j->dependents);
    json_decref(j->env);
    json_decref(j->params);
    free(j->command_template);
    free(j->script_template);
    free(j->name_template);
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
    j->conda_env = dup_or_null(src->conda_env);
    j->script = with_payload ? dup_or_null(src->script) : NULL;
    j->env = with_payload && src->env ? json_deep_copy(src->env) : NULL;
    j->params = with_payload && src->params ? json_deep_copy(src->params) : NULL;
    j->command_template = with_payload ? dup_or_null(src->command_template) : NULL;
    j->script_template = with_payload ? dup_or_null(src->script_template) : NULL;
    j->name_template = with_payload ? dup_or_null(src->name_template) : NULL;
    j->deps = NULL;
    if (src->n_deps) {
        j->deps = xmalloc(src->n_deps * sizeof(*j->deps));
        memcpy(j->deps, src->deps, src->n_deps * sizeof(*j->deps));
    }
    j->dependents = NULL;
    j->n_dependents = j->cap_dependents = 0;
    j->runtime = NULL;
    return j;
}

int job_set_signal_spec(struct job *j, const char *spec)
{
    j->warn_signal = 0;
    j->warn_secs = 0;
    j->warn_main_only = false;
    if (!spec || !*spec)
        return 0;
    char *err = NULL;
    int sig;
    int64_t secs;
    bool main_only;
    if (parse_signal_spec(spec, &sig, &secs, &main_only, &err) < 0) {
        free(err);
        return -1;
    }
    j->warn_signal = sig;
    j->warn_secs = secs;
    j->warn_main_only = main_only;
    return 0;
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

/* JSON text is written directly (not through jansson trees): listing 10,000 jobs is a
 * hot path and this is several times faster. */
static void append_string(struct strbuf *sb, const char *s)
{
    if (!s) {
        strbuf_adds(sb, "null");
        return;
    }
    strbuf_addc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const unsigned char *run = p;
        while (*p >= 0x20 && *p != '"' && *p != '\\' && *p != 0x7f)
            p++;
        if (p > run)
            strbuf_add(sb, run, (size_t)(p - run));
        if (!*p)
            break;
        switch (*p) {
        case '"':
            strbuf_adds(sb, "\\\"");
            break;
        case '\\':
            strbuf_adds(sb, "\\\\");
            break;
        case '\n':
            strbuf_adds(sb, "\\n");
            break;
        case '\t':
            strbuf_adds(sb, "\\t");
            break;
        default:
            strbuf_addf(sb, "\\u%04x", *p);
        }
    }
    strbuf_addc(sb, '"');
}

static const char *const field_names[JOB_FIELD_COUNT] = {
    "id",          "name",      "user",     "uid",       "state",      "state_name",
    "priority",    "time_limit", "submit_time", "start_time", "end_time", "exit_code",
    "signal",      "signal_name", "oom",    "reason",    "command",    "script_path",
    "workdir",     "gpus",      "gpu_ids",  "shim_pid",  "max_rss_kb", "gpu_memory_mb",
    "shared",      "gpus_per_task", "depends_on", "depends_mode", "auto_cancel",
    "memory_mb",   "conda_env", "signal_spec", "begin_time",
    "max_retries", "attempt",   "retry_of",
    "group_id",    "array_task", "max_concurrent",
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
    if (t <= 0) {
        append_null(sb, tsv);
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
        append_string(sb, v);
}

static const char *shown_reason(const struct job *j)
{
    if (!j->reason && j->state == JOB_QUEUED)
        return j->wait_reason;
    return j->reason;
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
        append_text(sb, job_state_short(j->state), tsv);
        break;
    case JOB_FIELD_STATE_NAME:
        append_text(sb, job_state_name(j->state), tsv);
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
        append_text(sb, shown_reason(j), tsv);
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
        append_text(sb, j->gpu_ids, tsv);
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
    if (j->end_request != JOB_END_NONE && j->state == JOB_RUNNING)
        strbuf_adds(sb, ",\"cancelling\":true");
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
    j->gpu_memory_mb = get_int(o, "gpu_memory_mb", 0);
    j->memory_mb = get_int(o, "memory_mb", 0);
    j->conda_env = get_str(o, "conda_env");
    job_set_signal_spec(j, json_string_value(json_object_get(o, "signal_spec")));
    j->begin_time = get_time(o, "begin_time");
    j->max_retries = (int)get_int(o, "max_retries", 0);
    j->attempt = (int)get_int(o, "attempt", 1);
    j->retry_of = get_int(o, "retry_of", 0);
    j->group_id = get_int(o, "group_id", 0);
    j->array_task = get_int(o, "array_task", -1);
    j->shared = json_is_true(json_object_get(o, "shared"));
    j->gpus_per_task = (int)get_int(o, "gpus_per_task", 0);
    j->shim_pid = get_int(o, "shim_pid", 0);
    j->max_rss_kb = get_int(o, "max_rss_kb", 0);
    size_t di;
    const json_t *dep;
    json_array_foreach(json_object_get(o, "depends_on"), di, dep) {
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
    char *w = v;
    for (char *r = v; *r; r++) {
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
    return v ? strtoll(v, NULL, 10) : dflt;
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
        if (v)
            job_state_parse(v, &j->state);
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
    case JOB_FIELD_REASON:
        j->reason = borrow ? v : dup_or_null(v);
        break;
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
        j->gpu_ids = borrow ? v : dup_or_null(v);
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
