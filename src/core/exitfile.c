/* exitfile: the shim<->daemon protocol: exit file codec, lock file lines, verdicts (see
 * exitfile.h). */
#include "exitfile.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void exit_record_init(struct exit_record *rec)
{
    *rec = (struct exit_record){.job_id = -1, .exit_code = -1};
}

void exit_record_free(struct exit_record *rec)
{
    free(rec->error);
    free(rec->memory_enforcement);
    exit_record_init(rec);
}

/* s as valid UTF-8 (to free): every byte that starts no valid sequence becomes U+FFFD.
 * Error texts hold paths, which are bytes, not text. */
static char *utf8_clean(const char *s)
{
    struct strbuf sb;
    strbuf_init(&sb);
    size_t n = strlen(s);
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence_len(p + i, n - i);
        if (len) {
            strbuf_add(&sb, p + i, len);
            i += len;
        } else {
            strbuf_adds(&sb, "\xef\xbf\xbd");
            i++;
        }
    }
    return strbuf_detach(&sb);
}

/* A JSON string of s (cleaned to UTF-8), or null for NULL. */
static json_t *json_text(const char *s)
{
    if (!s)
        return json_null();
    char *clean = utf8_clean(s);
    json_t *v = json_string(clean);
    free(clean);
    return v;
}

/* A JSON number of seconds; 0 for what JSON cannot hold (NaN, infinities). */
static json_t *json_secs(double v)
{
    return json_real(isfinite(v) ? v : 0.0);
}

char *exit_record_encode(const struct exit_record *rec)
{
    json_t *j = json_object();
    json_object_set_new(j, "job_id", rec->job_id >= 0 ? json_integer(rec->job_id) : json_null());
    json_object_set_new(j, "exit_code",
                        rec->exit_code >= 0 ? json_integer(rec->exit_code) : json_null());
    json_object_set_new(j, "signal", rec->signal > 0 ? json_integer(rec->signal) : json_null());
    json_object_set_new(j, "oom", json_boolean(rec->oom));
    json_object_set_new(j, "started_at", json_secs(rec->started_at));
    json_object_set_new(j, "finished_at", json_secs(rec->finished_at));
    json_object_set_new(j, "max_rss_kb", json_integer(rec->max_rss_kb));
    json_object_set_new(j, "error", json_text(rec->error));
    if (rec->memory_enforcement)
        json_object_set_new(j, "memory_enforcement", json_text(rec->memory_enforcement));
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s)
        abort(); /* out of memory: what xmalloc does too */
    char *out = xasprintf("%s\n", s);
    free(s);
    return out;
}

char *exit_record_encode_max(const struct exit_record *rec, size_t max)
{
    char *text = exit_record_encode(rec);
    size_t keep = rec->error ? strlen(rec->error) : 0;
    struct exit_record cut = *rec;
    /* Cut in proportion (an escaped byte takes up to 6 in the text), then again until it
     * fits. */
    while (strlen(text) > max && keep > 0) {
        size_t len = strlen(text);
        size_t shorter = (size_t)((double)keep * (double)max / (double)len);
        keep = shorter < keep && shorter > 16 ? shorter - 16 : (keep > 64 ? keep - 64 : 0);
        cut.error = xstrndup(rec->error, keep);
        free(text);
        text = exit_record_encode(&cut);
        free(cut.error);
    }
    return text;
}

/* The integer at key if it is one within [min, max]; else dflt. */
static int64_t json_int_in(const json_t *o, const char *key, int64_t min, int64_t max, int64_t dflt)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        return dflt;
    json_int_t i = json_integer_value(v);
    return i >= min && i <= max ? (int64_t)i : dflt;
}

/* The number of seconds at key (integer or real, finite, >= 0); else 0. */
static double json_secs_at(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    double d = json_is_number(v) ? json_number_value(v) : 0.0;
    return isfinite(d) && d >= 0 ? d : 0.0;
}

/* A copy of the string at key, or NULL. */
static char *json_str_at(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? xstrdup(s) : NULL;
}

int exit_record_decode(const char *text, size_t len, struct exit_record *rec)
{
    exit_record_init(rec);
    json_error_t jerr;
    json_t *o = text ? json_loadb(text, len, 0, &jerr) : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        return -1;
    }
    rec->job_id = json_int_in(o, "job_id", 0, INT64_MAX, -1);
    /* Exit statuses are 0-255 and signals 1-255 (Linux has 64): anything else is not
     * one the shim wrote, so it reads as null. */
    rec->exit_code = (int)json_int_in(o, "exit_code", 0, 255, -1);
    rec->signal = (int)json_int_in(o, "signal", 1, 255, 0);
    rec->oom = json_is_true(json_object_get(o, "oom"));
    rec->started_at = json_secs_at(o, "started_at");
    rec->finished_at = json_secs_at(o, "finished_at");
    rec->max_rss_kb = json_int_in(o, "max_rss_kb", 0, INT64_MAX, 0);
    rec->error = json_str_at(o, "error");
    rec->memory_enforcement = json_str_at(o, "memory_enforcement");
    json_decref(o);
    return 0;
}

/* ---- the lock file ---- */

#define LOCK_ERROR_PREFIX "error: "         /* the job never started */
#define LOCK_LOST_PREFIX "lost: "           /* the job ran; its outcome could not be recorded */
#define LOCK_CGROUP_PREFIX "cgroup: "       /* a cgroup that holds the job's processes */
#define LOCK_FORWARDED_PREFIX "forwarded: " /* the shim passed on a signal */

/* Whether s holds a byte that cannot be on one line of the file. */
static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

char *exitfile_lock_cgroup_line(const char *dir)
{
    if (!*dir || has_control(dir))
        return NULL;
    return xasprintf(LOCK_CGROUP_PREFIX "%s\n", dir);
}

char *exitfile_lock_forwarded_line(int sig)
{
    return xasprintf(LOCK_FORWARDED_PREFIX "%d\n", sig);
}

char *exitfile_lock_format(const struct exit_lock *lock)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_addf(&sb, "%lld %lld\n", (long long)lock->pid, (long long)lock->start);
    for (size_t i = 0; i < lock->n_cgroups; i++) {
        char *line = exitfile_lock_cgroup_line(lock->cgroups[i]);
        if (line && sb.len + strlen(line) < EXITFILE_LOCK_MAX / 2)
            strbuf_adds(&sb, line);
        free(line);
    }
    if (lock->forwarded > 0) {
        char *line = exitfile_lock_forwarded_line(lock->forwarded);
        strbuf_adds(&sb, line);
        free(line);
    }
    const char *error = lock->error;
    if (!error)
        return strbuf_detach(&sb);
    strbuf_adds(&sb, lock->job_ran ? LOCK_LOST_PREFIX : LOCK_ERROR_PREFIX);
    size_t room = EXITFILE_LOCK_MAX - 1 - sb.len; /* 1: the newline */
    size_t n = strlen(error);
    if (n > room) {
        n = room;
        /* Not in the middle of a UTF-8 sequence. */
        while (n > 0 && ((unsigned char)error[n] & 0xc0) == 0x80)
            n--;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)error[i];
        strbuf_addc(&sb, c < 0x20 || c == 0x7f ? ' ' : (char)c);
    }
    strbuf_addc(&sb, '\n');
    return strbuf_detach(&sb);
}

/* Strict decimal integer at *p, advancing it; 0 or -1. */
static int lock_number(const char **p, const char *end, int64_t *out)
{
    const char *s = *p;
    int64_t v = 0;
    if (s == end || *s < '0' || *s > '9')
        return -1;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (v > (INT64_MAX - (*s - '0')) / 10)
            return -1;
        v = v * 10 + (*s - '0');
    }
    *p = s;
    *out = v;
    return 0;
}

/* The first line, "<pid> <start>", between p and end (its newline excluded). */
static bool lock_pid_line(const char *p, const char *end, int64_t *pid, int64_t *start)
{
    int64_t a, b;
    if (lock_number(&p, end, &a) < 0 || a <= 0 || p == end || *p != ' ')
        return false;
    p++;
    if (lock_number(&p, end, &b) < 0 || p != end)
        return false;
    *pid = a;
    *start = b;
    return true;
}

/* The text after prefix if line l..le starts with it, else NULL. */
static char *lock_line_text(const char *l, const char *le, const char *prefix)
{
    size_t plen = strlen(prefix);
    if ((size_t)(le - l) < plen || memcmp(l, prefix, plen) != 0)
        return NULL;
    return xstrndup(l + plen, (size_t)(le - l) - plen);
}

/* Reads one line after the first into lock: a cgroup, the forwarded signal, the error. */
static void lock_other_line(const char *l, const char *le, struct exit_lock *lock)
{
    char *text;
    if (!lock->error && (text = lock_line_text(l, le, LOCK_ERROR_PREFIX))) {
        lock->error = text;
    } else if (!lock->error && (text = lock_line_text(l, le, LOCK_LOST_PREFIX))) {
        lock->error = text;
        lock->job_ran = true;
    } else if ((text = lock_line_text(l, le, LOCK_CGROUP_PREFIX))) {
        if (lock->n_cgroups < EXITFILE_LOCK_MAX_CGROUPS && text[0] == '/')
            lock->cgroups[lock->n_cgroups++] = text;
        else
            free(text);
    } else if ((text = lock_line_text(l, le, LOCK_FORWARDED_PREFIX))) {
        const char *p = text;
        int64_t sig;
        if (!lock->forwarded && lock_number(&p, text + strlen(text), &sig) == 0 && !*p && sig > 0 &&
            sig < 256)
            lock->forwarded = (int)sig;
        free(text);
    }
}

int exitfile_lock_parse(const char *text, size_t len, struct exit_lock *lock)
{
    memset(lock, 0, sizeof(*lock));
    if (!text)
        return -1;
    if (len > EXITFILE_RECORD_AT)
        len = EXITFILE_RECORD_AT;
    const char *nul = memchr(text, '\0', len);
    if (nul)
        len = (size_t)(nul - text);
    const char *end = text + len;
    const char *eol = memchr(text, '\n', len);
    bool have_pid = lock_pid_line(text, eol ? eol : end, &lock->pid, &lock->start);
    for (const char *l = text; l < end;) {
        const char *le = memchr(l, '\n', (size_t)(end - l));
        if (!le)
            le = end;
        if (l != text || !have_pid)
            lock_other_line(l, le, lock);
        l = le + 1;
    }
    return have_pid ? 0 : -1;
}

int exitfile_lock_record(const char *text, size_t len, struct exit_record *rec)
{
    if (!text || len <= EXITFILE_RECORD_AT) {
        exit_record_init(rec);
        return -1;
    }
    /* A reused lock file holds NULs past the record. */
    const char *r = text + EXITFILE_RECORD_AT;
    return exit_record_decode(r, strnlen(r, len - EXITFILE_RECORD_AT), rec);
}

void exitfile_lock_free(struct exit_lock *lock)
{
    for (size_t i = 0; i < lock->n_cgroups; i++)
        free(lock->cgroups[i]);
    free(lock->error);
    memset(lock, 0, sizeof(*lock));
}

char *exitfile_marker(int64_t shim_pid, int64_t shim_start)
{
    return xasprintf(EXITFILE_MARKER_VAR "=%lld:%lld", (long long)shim_pid, (long long)shim_start);
}

/* ---- verdicts ---- */

void exit_verdict_free(struct exit_verdict *v)
{
    free(v->detail);
    v->detail = NULL;
}

static struct exit_verdict verdict(enum job_state state, enum job_reason reason, char *detail)
{
    return (struct exit_verdict){.state = state, .reason = reason, .detail = detail};
}

/* The verdict when the daemon asked the job to end: that request is why it ended,
 * whatever the job's last words were. Returns false when there was none. */
static bool requested_end(enum job_end_request req, struct exit_verdict *v)
{
    if (req == JOB_END_CANCEL)
        *v = verdict(JOB_CANCELLED, JOB_REASON_CANCELLED_BY_USER, NULL);
    else if (req == JOB_END_TIMEOUT)
        *v = verdict(JOB_TIMEOUT, JOB_REASON_TIME_LIMIT, NULL);
    else
        return false;
    return true;
}

struct exit_verdict exit_verdict_of(const struct exit_record *rec, enum job_end_request req)
{
    struct exit_verdict v;
    if (requested_end(req, &v))
        return v;
    if (rec->oom)
        return verdict(JOB_FAILED, JOB_REASON_OUT_OF_MEMORY, NULL);
    if (rec->error && *rec->error)
        return verdict(JOB_FAILED, JOB_REASON_LAUNCH_FAILED, xstrdup(rec->error));
    if (rec->signal > 0)
        return verdict(JOB_FAILED, JOB_REASON_SIGNAL, NULL);
    if (rec->exit_code == 0)
        return verdict(JOB_FINISHED, JOB_REASON_NONE, NULL);
    return verdict(JOB_FAILED, JOB_REASON_NON_ZERO_EXIT, NULL);
}

struct exit_verdict exit_verdict_lost(enum shim_end how, int value, const struct exit_lock *lock,
                                      enum job_end_request req)
{
    struct exit_verdict v;
    if (requested_end(req, &v))
        return v;
    if (lock && lock->error && *lock->error)
        return verdict(JOB_FAILED, lock->job_ran ? JOB_REASON_SHIM_LOST : JOB_REASON_LAUNCH_FAILED,
                       xstrdup(lock->error));
    switch (how) {
    case SHIM_END_EXITED:
        if (value == SHIM_EXIT_FAIL || value == SHIM_EXIT_USAGE)
            return verdict(JOB_FAILED, JOB_REASON_LAUNCH_FAILED,
                           xasprintf("gflow-shim exited with status %d before starting the "
                                     "job; see gflowd.log",
                                     value));
        return verdict(JOB_FAILED, JOB_REASON_SHIM_LOST,
                       xasprintf("gflow-shim exited with status %d without an exit file", value));
    case SHIM_END_SIGNALED:
        return verdict(JOB_FAILED, JOB_REASON_SHIM_LOST,
                       xasprintf("gflow-shim killed by %s", job_signal_name(value)));
    case SHIM_END_UNKNOWN:
    default:
        return verdict(JOB_FAILED, JOB_REASON_SHIM_LOST,
                       xstrdup("gflow-shim ended without an exit file"));
    }
}

void exit_verdict_add_killed(struct exit_verdict *v, size_t n)
{
    if (n == 0 || !v->detail)
        return;
    char *detail =
        xasprintf("%s; its %zu process%s killed", v->detail, n, n == 1 ? " was" : "es were");
    free(v->detail);
    v->detail = detail;
}
