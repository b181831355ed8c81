/* exitfile_read: the daemon's side of the shim<->daemon protocol (exitfile.h): reading an
 * exit record, alone or from the lock file, and the verdict (state and reason) on a job
 * that ended. Apart from exitfile.c so that the shim, which only writes records, links
 * neither a JSON library nor the job model. */
#include "exitfile.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

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
    rec->log_lost_bytes = json_int_in(o, "log_lost_bytes", 0, INT64_MAX, 0);
    rec->error = json_str_at(o, "error");
    rec->memory_enforcement = json_str_at(o, "memory_enforcement");
    rec->prolog_error = json_str_at(o, "prolog_error");
    rec->epilog_error = json_str_at(o, "epilog_error");
    json_decref(o);
    return 0;
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
    else if (req == JOB_END_STRAY)
        *v = verdict(JOB_FAILED, JOB_REASON_GPU_STRAY, NULL);
    else if (req == JOB_END_PREEMPT) /* preempted: queued again, not ended */
        *v = verdict(JOB_QUEUED, JOB_REASON_NONE, NULL);
    else if (req == JOB_END_GPU_FAULT) /* the runner adds what failed, or queues it again */
        *v = verdict(JOB_FAILED, JOB_REASON_GPU_FAULT, NULL);
    else
        return false;
    return true;
}

/* The verdict on the job's own run, before the post hook's say. */
static struct exit_verdict job_verdict(const struct exit_record *rec)
{
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

struct exit_verdict exit_verdict_of(const struct exit_record *rec, enum job_end_request req)
{
    struct exit_verdict v;
    if (requested_end(req, &v))
        return v;
    if (rec->prolog_error)
        return verdict(JOB_FAILED, JOB_REASON_PROLOG_FAILED, xstrdup(rec->prolog_error));
    v = job_verdict(rec);
    /* A job that could not even start says more than what ran after it; otherwise the
     * admin's post hook failing is the job's reason, as Slurm's EpilogFailed (the job's
     * own outcome stays in its exit code and signal). */
    if (rec->epilog_error && v.reason != JOB_REASON_LAUNCH_FAILED) {
        exit_verdict_free(&v);
        v = verdict(JOB_FAILED, JOB_REASON_EPILOG_FAILED, xstrdup(rec->epilog_error));
    }
    return v;
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
