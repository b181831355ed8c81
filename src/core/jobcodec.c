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

#define JOB_FIELD(ID, name, ...) const char JOB_KEY_##ID[] = name;
#define JOB_API_FIELD(ID, name, ...) const char JOB_KEY_##ID[] = name;
#define JOB_PAYLOAD(ID, name, ...) const char JOB_KEY_##ID[] = name;
#include "job_fields.def"

#define JOB_LABEL(ID, label, header)                                                               \
    const char JOB_LABEL_##ID[] = label, JOB_HEADER_##ID[] = header;
#include "job_fields.def"

static const char *const field_names[JOB_FIELD_COUNT] = {
#define JOB_FIELD(ID, ...) JOB_KEY_##ID,
#define JOB_API_FIELD(ID, ...) JOB_KEY_##ID,
#include "job_fields.def"
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

/* A measure (energy): 3 decimals, null below 0. */
static void append_real(struct strbuf *sb, double v, bool tsv)
{
    if (!(v >= 0) || !isfinite(v)) {
        append_null(sb, tsv);
        return;
    }
    strbuf_addf(sb, "%.3f", v);
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
    if (job_reason_is_class(j)) {
        append_text(sb, j->failure_class, tsv);
        return;
    }
    char *text = job_reason_string(j);
    append_text(sb, text, tsv);
    free(text);
}

/* The cases of job_append_field for the plain kinds of job_fields.def. */
#define APPEND_TEXT(ID, m, d)                                                                      \
    case JOB_FIELD_##ID:                                                                           \
        append_text(sb, j->m, tsv);                                                                \
        break;
#define APPEND_INT(ID, m, d)                                                                       \
    case JOB_FIELD_##ID:                                                                           \
        append_int(sb, j->m, true, tsv);                                                           \
        break;
#define APPEND_OPT_INT(ID, m, d)                                                                   \
    case JOB_FIELD_##ID:                                                                           \
        append_int(sb, j->m, j->m > (d), tsv);                                                     \
        break;
#define APPEND_BOOL(ID, m, d)                                                                      \
    case JOB_FIELD_##ID:                                                                           \
        strbuf_adds(sb, j->m ? "true" : "false");                                                  \
        break;
#define APPEND_TIME(ID, m, d)                                                                      \
    case JOB_FIELD_##ID:                                                                           \
        append_time(sb, j->m, tsv);                                                                \
        break;
#define APPEND_OPT_BOOL(ID, m, d)                                                                  \
    case JOB_FIELD_##ID:                                                                           \
        if (j->m < 0)                                                                              \
            append_null(sb, tsv);                                                                  \
        else                                                                                       \
            strbuf_adds(sb, j->m ? "true" : "false");                                              \
        break;
#define APPEND_REAL(ID, m, d)                                                                      \
    case JOB_FIELD_##ID:                                                                           \
        append_real(sb, j->m, tsv);                                                                \
        break;
#define APPEND_SPECIAL(ID, m, d)

/* A dependency list: [{"id":1,"kind":"afterok"}], in TSV "afterok:1". */
static void append_deps(struct strbuf *sb, const struct job *j, bool tsv)
{
    if (tsv) {
        for (size_t i = 0; i < j->n_deps; i++) {
            if (i)
                strbuf_addc(sb, ',');
            strbuf_adds(sb, job_dep_kind_name(j->deps[i].kind));
            strbuf_addc(sb, ':');
            append_int(sb, j->deps[i].id, true, false);
        }
        return;
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
}

void job_append_field(struct strbuf *sb, const struct job *j, enum job_field f, bool tsv)
{
    switch (f) {
#define JOB_FIELD(ID, name, api, store, m, d, flags) APPEND_##api(ID, m, d)
#define JOB_API_FIELD(ID, name, api, m, d, flags) APPEND_##api(ID, m, d)
#include "job_fields.def"
    case JOB_FIELD_STATE:
        append_text(sb, job_display_state(j), tsv);
        break;
    case JOB_FIELD_STATE_NAME:
        append_text(sb, job_display_state_name(j), tsv);
        break;
    case JOB_FIELD_SIGNAL_NAME:
        append_text(sb, j->signal > 0 ? job_signal_name(j->signal) : NULL, tsv);
        break;
    case JOB_FIELD_REASON:
        append_reason(sb, j, tsv);
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
    case JOB_FIELD_DEPENDS_ON:
        append_deps(sb, j, tsv);
        break;
    case JOB_FIELD_DEPENDS_MODE:
        append_text(sb, j->deps_any ? "any" : "all", tsv);
        break;
    case JOB_FIELD_MAX_CONCURRENT:
        append_int(sb, j->sched.group ? j->sched.group->max_concurrent : 0, j->sched.group != NULL,
                   tsv);
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
    case JOB_FIELD_NOTIFY_ON:
        append_list(sb, j->notify_on, tsv);
        break;
    case JOB_FIELD_EXPECTED_START: /* a job that left the queue keeps its last plan */
        append_time(sb, j->state == JOB_QUEUED ? j->expected_start : 0, tsv);
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
        json_object_set_new(o, JOB_KEY_SCRIPT, j->script ? json_string(j->script) : json_null());
        json_object_set_new(o, JOB_KEY_ENV, j->env ? json_incref(j->env) : json_object());
        json_object_set_new(o, JOB_KEY_PARAMS, j->params ? json_incref(j->params) : json_null());
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

static double get_real(const json_t *o, const char *key, double dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* true 1, false 0, else dflt (unknown). */
static int get_opt_bool(const json_t *o, const char *key, int dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
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

/* A boolean that is dflt unless the other value is given. */
static bool get_bool(const json_t *o, const char *key, bool dflt)
{
    const json_t *v = json_object_get(o, key);
    return dflt ? !json_is_false(v) : json_is_true(v);
}

/* The reads of job_from_json for the plain kinds of job_fields.def. */
#define GET_TEXT(m, name, d) j->m = get_str(o, name);
#define GET_INT(m, name, d) j->m = (__typeof__(j->m))get_int(o, name, d);
#define GET_OPT_INT GET_INT
#define GET_BOOL(m, name, d) j->m = get_bool(o, name, d);
#define GET_TIME(m, name, d) j->m = get_time(o, name);
#define GET_REAL(m, name, d) j->m = get_real(o, name, d);
#define GET_OPT_BOOL(m, name, d) j->m = get_opt_bool(o, name, d);
#define GET_SPECIAL(m, name, d)

int job_from_json(const json_t *o, struct job *j)
{
    if (!json_is_object(o))
        return -1;
    job_init(j);
    const char *st = json_string_value(json_object_get(o, JOB_KEY_STATE));
    if (!st || job_state_parse(st, &j->state) < 0)
        return -1;
    if (job_state_is_cancelling_name(st))
        j->end_request = JOB_END_CANCEL;
#define JOB_FIELD(ID, name, api, store, m, d, flags) GET_##api(m, name, d)
#define JOB_API_FIELD(ID, name, api, m, d, flags) GET_##api(m, name, d)
#include "job_fields.def"
    j->reason = job_reason_parse(json_string_value(json_object_get(o, JOB_KEY_REASON)),
                                 &j->reason_job, &j->reason_detail);
    j->script = get_str(o, JOB_KEY_SCRIPT);
    j->gpu_mask = gpu_mask_parse(json_string_value(json_object_get(o, JOB_KEY_GPU_IDS)));
    job_set_signal_spec(j, json_string_value(json_object_get(o, JOB_KEY_SIGNAL_SPEC)));
    const json_t *eff = json_object_get(o, JOB_KEY_EFFECTIVE_PRIORITY);
    j->effective_priority = json_is_number(eff) ? json_number_value(eff) : -1;
    j->umask = read_umask(json_string_value(json_object_get(o, JOB_KEY_UMASK)));
    j->notify_on = get_list(o, JOB_KEY_NOTIFY_ON);
    j->expected_start = get_time(o, JOB_KEY_EXPECTED_START);
    size_t di;
    const json_t *dep;
    json_array_foreach (json_object_get(o, JOB_KEY_DEPENDS_ON), di, dep) {
        enum job_dep_kind kind = job_dep_kind_of_json(dep);
        if (json_is_integer(json_object_get(dep, "id")))
            job_deps_add(j, get_int(dep, "id", 0), kind);
    }
    const char *mode = json_string_value(json_object_get(o, JOB_KEY_DEPENDS_MODE));
    j->deps_any = mode && strcmp(mode, "any") == 0;
    if (json_is_true(json_object_get(o, "cancelling")))
        j->end_request = JOB_END_CANCEL;
    else if (json_is_true(json_object_get(o, "preempting")))
        j->end_request = JOB_END_PREEMPT;
    json_t *env = json_object_get(o, JOB_KEY_ENV);
    if (json_is_object(env))
        j->env = json_incref(env);
    json_t *params = json_object_get(o, JOB_KEY_PARAMS);
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

/* A boolean that is dflt unless the other value is given. */
static bool tsv_bool(const char *v, bool dflt)
{
    return v && strcmp(v, dflt ? "false" : "true") == 0 ? !dflt : dflt;
}

/* The cases of set_field for the plain kinds of job_fields.def. */
#define SET_TEXT(ID, m, d)                                                                         \
    case JOB_FIELD_##ID:                                                                           \
        j->m = borrow ? v : dup_or_null(v);                                                        \
        break;
#define SET_INT(ID, m, d)                                                                          \
    case JOB_FIELD_##ID:                                                                           \
        j->m = (__typeof__(j->m))tsv_int(v, d);                                                    \
        break;
#define SET_OPT_INT SET_INT
#define SET_BOOL(ID, m, d)                                                                         \
    case JOB_FIELD_##ID:                                                                           \
        j->m = tsv_bool(v, d);                                                                     \
        break;
#define SET_TIME(ID, m, d)                                                                         \
    case JOB_FIELD_##ID:                                                                           \
        j->m = v ? strtod(v, NULL) : 0;                                                            \
        break;
#define SET_REAL(ID, m, d)                                                                         \
    case JOB_FIELD_##ID:                                                                           \
        j->m = v ? strtod(v, NULL) : (d);                                                          \
        break;
#define SET_OPT_BOOL(ID, m, d)                                                                     \
    case JOB_FIELD_##ID:                                                                           \
        j->m = !v ? (d) : strcmp(v, "true") == 0;                                                  \
        break;
#define SET_SPECIAL(ID, m, d)

static void set_field(struct job *j, enum job_field f, char *v, bool borrow)
{
    switch (f) {
#define JOB_FIELD(ID, name, api, store, m, d, flags) SET_##api(ID, m, d)
#define JOB_API_FIELD(ID, name, api, m, d, flags) SET_##api(ID, m, d)
#include "job_fields.def"
    case JOB_FIELD_STATE:
        if (v && job_state_parse(v, &j->state) == 0 && job_state_is_cancelling_name(v))
            j->end_request = JOB_END_CANCEL; /* "CG" */
        break;
    case JOB_FIELD_REASON: {
        const char *detail; /* the end of v */
        j->reason = job_reason_parse_in(v, &j->reason_job, &detail);
        j->reason_detail = borrow || !detail ? (char *)detail : xstrdup(detail);
        break;
    }
    case JOB_FIELD_GPU_IDS:
        j->gpu_mask = gpu_mask_parse(v);
        break;
    case JOB_FIELD_DEPENDS_ON:
        job_deps_parse(j, v);
        break;
    case JOB_FIELD_DEPENDS_MODE:
        j->deps_any = v && strcmp(v, "any") == 0;
        break;
    case JOB_FIELD_SIGNAL_SPEC:
        job_set_signal_spec(j, v);
        break;
    case JOB_FIELD_UMASK:
        j->umask = read_umask(v);
        break;
    case JOB_FIELD_EFFECTIVE_PRIORITY:
        j->effective_priority = v ? strtod(v, NULL) : -1;
        break;
    case JOB_FIELD_NOTIFY_ON:
        j->notify_on = borrow ? v : dup_or_null(v);
        break;
    case JOB_FIELD_EXPECTED_START:
        j->expected_start = v ? strtod(v, NULL) : 0;
        break;
    default: /* derived fields (state_name, signal_name, max_concurrent) */
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
