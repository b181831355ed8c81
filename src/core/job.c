/* job: states, transitions, the job record and its JSON form (docs/api.md). */
#include "job.h"

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
    /* Common spellings of gflow and Slurm, and CG (Cancelling), the display state of a
     * running job being cancelled. */
    static const struct {
        const char *name;
        enum job_state state;
    } alias[] = {
        {"pending", JOB_QUEUED},     {"held", JOB_HELD},        {"completed", JOB_FINISHED},
        {"canceled", JOB_CANCELLED}, {"timedout", JOB_TIMEOUT}, {"cg", JOB_RUNNING},
        {"cancelling", JOB_RUNNING},
    };
    for (size_t i = 0; i < sizeof(alias) / sizeof(alias[0]); i++) {
        if (strcasecmp(s, alias[i].name) == 0) {
            *out = alias[i].state;
            return 0;
        }
    }
    return -1;
}

bool job_state_is_cancelling_name(const char *s)
{
    return strcasecmp(s, "CG") == 0 || strcasecmp(s, "Cancelling") == 0;
}

bool job_is_cancelling(const struct job *j)
{
    return j->state == JOB_RUNNING && j->end_request == JOB_END_CANCEL;
}

bool job_backend_pending(const struct job *j)
{
    return j->state == JOB_RUNNING && j->backend_reason && !job_is_cancelling(j);
}

const char *job_display_state(const struct job *j)
{
    return job_is_cancelling(j)     ? "CG"
           : job_backend_pending(j) ? job_state_short(JOB_QUEUED)
                                    : job_state_short(j->state);
}

const char *job_display_state_name(const struct job *j)
{
    return job_is_cancelling(j)     ? "Cancelling"
           : job_backend_pending(j) ? job_state_name(JOB_QUEUED)
                                    : job_state_name(j->state);
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
        return to == JOB_FINISHED || to == JOB_FAILED || to == JOB_CANCELLED || to == JOB_TIMEOUT ||
               to == JOB_QUEUED;
    default:
        return false;
    }
}

bool job_name_valid(const char *name)
{
    if (!*name || strlen(name) > JOB_NAME_MAX)
        return false;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

char *job_default_name(int64_t id)
{
    char *name = xmalloc(5 + 24); /* once per task of an array: no printf */
    memcpy(name, "gjob-", 5);
    format_int(name + 5, (long long)id);
    return name;
}

bool job_name_is_default(const char *name, int64_t id)
{
    char *def = job_default_name(id);
    bool same = name && strcmp(name, def) == 0;
    free(def);
    return same;
}

void job_name_default(struct job *j)
{
    if (!j->name)
        j->name = job_default_name(j->id);
}

char *job_name_fit(const char *name, const char *suffix)
{
    if (!*name)
        name = "job";
    size_t room = JOB_NAME_MAX - strlen(suffix), n = strlen(name);
    if (n > room) {
        n = room;
        while (n > 0 && ((unsigned char)name[n] & 0xc0) == 0x80)
            n--;
    }
    size_t ns = strlen(suffix);
    char *out = xmalloc(n + ns + 1); /* once per task of an array: no printf */
    memcpy(out, name, n);
    memcpy(out + n, suffix, ns + 1);
    for (unsigned char *p = (unsigned char *)out; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = '_';
    return out;
}

/* ---- sorting ---- */

static const char *const sort_names[JOB_SORT_COUNT] = {
    "id", "name", "state", "priority", "user", "submit", "start", "end", "time"};

const char *job_sort_name(enum job_sort k)
{
    return (unsigned)k < JOB_SORT_COUNT ? sort_names[k] : "id";
}

int job_sort_parse(const char *name, enum job_sort *out)
{
    for (int k = 0; k < JOB_SORT_COUNT; k++)
        if (strcmp(name, sort_names[k]) == 0) {
            *out = (enum job_sort)k;
            return 0;
        }
    return -1;
}

const char *job_sort_names(void)
{
    return "id, name, state, priority, user, submit, start, end or time";
}

double job_elapsed(const struct job *j, double now)
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

int job_sort_compare(const struct job *a, const struct job *b, enum job_sort key, double now)
{
    int c = 0;
    switch (key) {
    case JOB_SORT_NAME:
        c = cmp_str(a->name, b->name);
        break;
    case JOB_SORT_STATE:
        c = cmp_num(a->state, b->state);
        break;
    case JOB_SORT_PRIORITY:
        c = cmp_num(a->priority, b->priority);
        break;
    case JOB_SORT_USER:
        c = cmp_str(a->user, b->user);
        break;
    case JOB_SORT_SUBMIT:
        c = cmp_num(a->submit_time, b->submit_time);
        break;
    case JOB_SORT_START:
        c = cmp_num(a->start_time, b->start_time);
        break;
    case JOB_SORT_END:
        c = cmp_num(a->end_time, b->end_time);
        break;
    case JOB_SORT_TIME:
        c = cmp_num(job_elapsed(a, now), job_elapsed(b, now));
        break;
    default:
        break;
    }
    return c ? c : cmp_num((double)a->id, (double)b->id);
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
    [JOB_REASON_GPU_FAULT] = "GpuFault",
    [JOB_REASON_GPU_STRAY] = "GpuStray",
    [JOB_REASON_PROLOG_FAILED] = "PrologFailed",
    [JOB_REASON_EPILOG_FAILED] = "EpilogFailed",
};

const char *job_reason_name(enum job_reason r)
{
    return (unsigned)r < JOB_REASON_COUNT ? reason_names[r] : "";
}

char *job_reason_text(enum job_reason r, int64_t job, const char *detail)
{
    if (r == JOB_REASON_NONE)
        return NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    job_reason_append(&sb, r, job, detail);
    return strbuf_detach(&sb);
}

void job_reason_append(struct strbuf *sb, enum job_reason r, int64_t job, const char *detail)
{
    switch (r) {
    case JOB_REASON_NONE:
        return;
    case JOB_REASON_DEPENDENCY_FAILED:
        strbuf_addf(sb, "DependencyFailed:%lld", (long long)job);
        return;
    case JOB_REASON_LAUNCH_FAILED:
    case JOB_REASON_SHIM_LOST:
    case JOB_REASON_PROLOG_FAILED:
    case JOB_REASON_EPILOG_FAILED:
        strbuf_adds(sb, reason_names[r]);
        if (detail && *detail) {
            strbuf_adds(sb, ": ");
            strbuf_adds(sb, detail);
        }
        return;
    case JOB_REASON_OTHER:
        strbuf_adds(sb, detail ? detail : "");
        return;
    case JOB_REASON_GPU_FAULT: /* "GpuFault (Xid 79)" */
        strbuf_adds(sb, reason_names[r]);
        if (detail && *detail)
            strbuf_addf(sb, " (%s)", detail);
        return;
    default:
        strbuf_adds(sb, job_reason_name(r));
    }
}

enum job_reason job_reason_parse(const char *text, int64_t *job, char **detail)
{
    const char *in;
    enum job_reason r = job_reason_parse_in(text, job, &in);
    *detail = in ? xstrdup(in) : NULL;
    return r;
}

enum job_reason job_reason_parse_in(const char *text, int64_t *job, const char **detail)
{
    *job = 0;
    *detail = NULL;
    if (!text || !*text)
        return JOB_REASON_NONE;
    for (int r = JOB_REASON_NONE + 1; r < JOB_REASON_COUNT; r++) {
        const char *name = reason_names[r];
        if (name[0] != text[0]) /* most texts differ at once; "" never matches */
            continue;
        size_t n = strlen(name);
        if (strncmp(text, name, n) != 0)
            continue;
        const char *rest = text + n;
        if (r == JOB_REASON_DEPENDENCY_FAILED) {
            if (*rest == ':' && parse_int64(rest + 1, job) == 0)
                return JOB_REASON_DEPENDENCY_FAILED;
        } else if (r == JOB_REASON_LAUNCH_FAILED || r == JOB_REASON_SHIM_LOST ||
                   r == JOB_REASON_PROLOG_FAILED || r == JOB_REASON_EPILOG_FAILED) {
            if (!*rest)
                return (enum job_reason)r;
            if (rest[0] == ':' && rest[1] == ' ') {
                *detail = rest + 2;
                return (enum job_reason)r;
            }
        } else if (r == JOB_REASON_GPU_FAULT) {
            /* "GpuFault (Xid 79)": the detail is what is inside the parentheses, which
             * job_reason_parse_in cannot cut out of text: only the bare name here. */
            if (!*rest)
                return (enum job_reason)r;
        } else if (!*rest) {
            return (enum job_reason)r;
        }
    }
    *detail = text;
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

enum job_dep_kind job_dep_kind_of_json(const json_t *entry)
{
    enum job_dep_kind kind = JOB_DEP_AFTEROK;
    const char *k = json_string_value(json_object_get(entry, "kind"));
    if (k)
        job_dep_kind_parse(k, &kind);
    return kind;
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

/* ---- the record ---- */

void job_set_reason(struct job *j, enum job_reason r, int64_t job, const char *detail)
{
    char *copy = detail ? xstrdup(detail) : NULL; /* detail may be j's own */
    free(j->reason_detail);
    j->reason = r;
    j->reason_job = job;
    j->reason_detail = copy;
}

char *job_reason_string(const struct job *j)
{
    return job_reason_text(j->reason, j->reason_job, j->reason_detail);
}

void job_init(struct job *j)
{
    memset(j, 0, sizeof(*j));
    j->state = JOB_QUEUED;
    j->auto_cancel = true;
    j->priority = JOB_PRIORITY_DEFAULT;
    j->effective_priority = -1;
    j->exit_code = -1;
    j->array_task = -1;
    j->attempt = 1;
    j->umask = -1;
    job_gpu_use_clear(j);
}

void job_gpu_use_copy(struct job *to, const struct job *from)
{
    to->gpu_util_mean = from->gpu_util_mean;
    to->gpu_util_peak = from->gpu_util_peak;
    to->gpu_mem_peak_mb = from->gpu_mem_peak_mb;
    to->energy_wh = from->energy_wh;
    to->gpu_idle = from->gpu_idle;
}

void job_gpu_use_clear(struct job *j)
{
    j->gpu_util_mean = j->gpu_util_peak = -1;
    j->gpu_mem_peak_mb = -1;
    j->energy_wh = -1;
    j->gpu_idle = -1;
}

const char *const job_notify_events[] = {
    "job_submitted", "job_updated", "job_started", "job_completed", "job_failed",
    "job_cancelled", "job_timeout", "job_held",    "job_released",  NULL,
};
_Static_assert(sizeof(job_notify_events) / sizeof(job_notify_events[0]) == JOB_EVENT_COUNT + 1,
               "enum job_event follows job_notify_events");

bool job_notify_event_valid(const char *name)
{
    return job_notify_event_index(name) >= 0;
}

int job_notify_event_index(const char *name)
{
    for (int i = 0; job_notify_events[i]; i++)
        if (!strcmp(name, job_notify_events[i]))
            return i;
    return -1;
}

const char *job_notify_event_alias(const char *name)
{
    static const char *const aliases[][2] = {
        {"begin", "job_started"},
        {"end", "job_completed"},
        {"fail", "job_failed"},
        {"timeout", "job_timeout"},
    };
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (!strcmp(name, aliases[i][0]))
            return aliases[i][1];
    return NULL;
}

bool job_notify_on_has(const char *notify_on, enum job_event event)
{
    const char *name = job_notify_events[event];
    size_t n = strlen(name);
    for (const char *p = notify_on; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !memcmp(p, name, n))
            return true;
        p += len;
        if (*p == ',')
            p++;
    }
    return false;
}

void job_clear(struct job *j)
{
    free(j->name);
    free(j->user);
    free(j->command);
    free(j->script);
    free(j->script_path);
    free(j->workdir);
    free(j->reason_detail);
    free(j->conda_env);
    free(j->deps);
    json_decref(j->env);
    json_decref(j->params);
    free(j->command_template);
    free(j->script_template);
    free(j->name_template);
    free(j->mig_profile);
    free(j->mig_uuids);
    free(j->cpus);
    free(j->backend_reason);
    free(j->project);
    free(j->notify_email);
    free(j->notify_on);
    free(j->stray);
    free(j->backend_note);
    free(j->failure_class);
    free(j->failure_line);
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

bool job_reason_is_class(const struct job *j)
{
    return j->state == JOB_FAILED && j->failure_class && *j->failure_class &&
           (j->reason == JOB_REASON_NON_ZERO_EXIT || j->reason == JOB_REASON_SIGNAL);
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
    j->reason_detail = dup_or_null(src->reason_detail);
    j->conda_env = dup_or_null(src->conda_env);
    j->mig_profile = dup_or_null(src->mig_profile);
    j->mig_uuids = dup_or_null(src->mig_uuids);
    j->cpus = dup_or_null(src->cpus);
    j->backend_reason = dup_or_null(src->backend_reason);
    j->project = dup_or_null(src->project);
    j->notify_email = dup_or_null(src->notify_email);
    j->notify_on = dup_or_null(src->notify_on);
    j->stray = dup_or_null(src->stray);
    j->backend_note = dup_or_null(src->backend_note);
    j->failure_class = dup_or_null(src->failure_class);
    j->failure_line = dup_or_null(src->failure_line);
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
    /* The copy is no job of the daemon's table: none of its live records. */
    memset(&j->sched, 0, sizeof(j->sched));
    memset(&j->daemon, 0, sizeof(j->daemon));
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
    const char *abbrev = signal_name(sig);
    if (abbrev) {
        snprintf(buf, sizeof(buf), "SIG%s", abbrev);
        return buf;
    }
    snprintf(buf, sizeof(buf), "SIG%d", sig);
    return buf;
}
