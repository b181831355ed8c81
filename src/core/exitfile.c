/* exitfile: the shim<->daemon protocol (exitfile.h), the parts both sides use: the exit
 * record's encoder, the lock file's lines. The daemon's own part (reading records, the
 * verdict on a job that ended) is exitfile_read.c. */
#include "exitfile.h"

#include <inttypes.h>
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
    free(rec->prolog_error);
    free(rec->epilog_error);
    exit_record_init(rec);
}

/* A JSON string of s (cleaned to UTF-8: error texts hold paths, which are bytes, not
 * text), or null for NULL. */
static void json_put_text(struct strbuf *sb, const char *s)
{
    if (!s) {
        strbuf_adds(sb, "null");
        return;
    }
    struct strbuf clean;
    strbuf_init(&clean);
    strbuf_add_utf8_clean(&clean, s, strlen(s));
    strbuf_add_json_string(sb, clean.buf ? clean.buf : "", JSON_STR_GFLOW);
    strbuf_free(&clean);
}

/* A JSON number of seconds, the shortest text that reads back as the same double, with
 * a fraction ("0.0", not "0") as a real; 0.0 for what JSON cannot hold (NaN, infinities). */
static void json_put_secs(struct strbuf *sb, double v)
{
    if (!isfinite(v))
        v = 0.0;
    char text[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(text, sizeof(text), "%.*g", prec, v);
        if (strtod(text, NULL) == v)
            break;
    }
    strbuf_adds(sb, text);
    if (!strpbrk(text, ".eEn"))
        strbuf_adds(sb, ".0");
}

/* An integer, or null when it is negative (not set). */
static void json_put_int_or_null(struct strbuf *sb, int64_t v)
{
    if (v < 0)
        strbuf_adds(sb, "null");
    else
        strbuf_addf(sb, "%" PRId64, v);
}

/* Written by hand, not with jansson: the shim, which only writes records, then links no
 * JSON library (it starts once per job; every library it loads costs each job). */
char *exit_record_encode(const struct exit_record *rec)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "{\"job_id\":");
    json_put_int_or_null(&sb, rec->job_id);
    strbuf_adds(&sb, ",\"exit_code\":");
    json_put_int_or_null(&sb, rec->exit_code);
    strbuf_adds(&sb, ",\"signal\":");
    json_put_int_or_null(&sb, rec->signal > 0 ? rec->signal : -1);
    strbuf_adds(&sb, rec->oom ? ",\"oom\":true" : ",\"oom\":false");
    strbuf_adds(&sb, ",\"started_at\":");
    json_put_secs(&sb, rec->started_at);
    strbuf_adds(&sb, ",\"finished_at\":");
    json_put_secs(&sb, rec->finished_at);
    strbuf_addf(&sb, ",\"max_rss_kb\":%" PRId64, rec->max_rss_kb);
    if (rec->log_lost_bytes > 0) /* left out when none: the records daemons of before read */
        strbuf_addf(&sb, ",\"log_lost_bytes\":%" PRId64, rec->log_lost_bytes);
    strbuf_adds(&sb, ",\"error\":");
    json_put_text(&sb, rec->error);
    if (rec->memory_enforcement) {
        strbuf_adds(&sb, ",\"memory_enforcement\":");
        json_put_text(&sb, rec->memory_enforcement);
    }
    if (rec->prolog_error) { /* left out when none, as above */
        strbuf_adds(&sb, ",\"prolog_error\":");
        json_put_text(&sb, rec->prolog_error);
    }
    if (rec->epilog_error) {
        strbuf_adds(&sb, ",\"epilog_error\":");
        json_put_text(&sb, rec->epilog_error);
    }
    strbuf_adds(&sb, "}\n");
    return strbuf_detach(&sb);
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

/* ---- the lock file ---- */

#define LOCK_ERROR_PREFIX "error: "           /* the job never started */
#define LOCK_LOST_PREFIX "lost: "             /* the job ran; its outcome could not be recorded */
#define LOCK_CGROUP_PREFIX "cgroup: "         /* a cgroup that holds the job's processes */
#define LOCK_FORWARDED_PREFIX "forwarded: "   /* the shim passed on a signal */
#define LOCK_SUPERVISOR_PREFIX "supervisor: " /* the shim serves several jobs: its socket */

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
    if (lock->supervisor)
        strbuf_addf(&sb, LOCK_SUPERVISOR_PREFIX "%s\n", lock->supervisor);
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
    } else if (!lock->supervisor && (text = lock_line_text(l, le, LOCK_SUPERVISOR_PREFIX))) {
        if (text[0] == '/')
            lock->supervisor = text;
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

void exitfile_lock_free(struct exit_lock *lock)
{
    for (size_t i = 0; i < lock->n_cgroups; i++)
        free(lock->cgroups[i]);
    free(lock->error);
    free(lock->supervisor);
    memset(lock, 0, sizeof(*lock));
}

char *exitfile_marker(int64_t shim_pid, int64_t shim_start)
{
    return xasprintf(EXITFILE_MARKER_VAR "=%lld:%lld", (long long)shim_pid, (long long)shim_start);
}

char *exitfile_job_marker(int64_t shim_pid, int64_t shim_start, int64_t job_id)
{
    return xasprintf(EXITFILE_MARKER_VAR "=%lld:%lld:%lld", (long long)shim_pid,
                     (long long)shim_start, (long long)job_id);
}

int exitfile_ctl_format(char *buf, char what, int64_t id, int value)
{
    return what == SHIM_CTL_FORWARD
               ? snprintf(buf, SHIM_CTL_MAX, "%c%lld %d", what, (long long)id, value)
               : snprintf(buf, SHIM_CTL_MAX, "%c%lld", what, (long long)id);
}

int exitfile_ctl_parse(const char *msg, size_t n, char *what, int64_t *id, int *value)
{
    char buf[SHIM_CTL_MAX];
    if (n < 2 || n >= sizeof(buf))
        return -1;
    memcpy(buf, msg, n);
    buf[n] = '\0';
    *what = buf[0];
    *value = 0;
    const char *p = buf + 1;
    if (lock_number(&p, buf + n, id) < 0)
        return -1;
    if (*what == SHIM_CTL_FORWARD) {
        int64_t v;
        if (*p++ != ' ' || lock_number(&p, buf + n, &v) < 0 || v > INT32_MAX)
            return -1;
        *value = (int)v;
    }
    return *p || (*what != SHIM_CTL_TERM && *what != SHIM_CTL_FORWARD && *what != SHIM_CTL_DONE)
               ? -1
               : 0;
}
