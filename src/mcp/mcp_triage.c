/* mcp_triage: triage_job, gflow's "why is this job pending / why did it fail" tool. It
 * answers from what gflowd knows, all read as the user who runs gflow-mcp: the job's
 * record (state, reason, exit code, signal, OOM), the tail of its log (bounded: the last
 * lines, at most max_bytes, through the daemon's log API), for a waiting job the queue
 * (the pressure, the jobs ahead of it, when backfill expects it to start), and for a job
 * that ended badly what the caller's last failures looked like (their reasons and last
 * log lines), so that a pattern shows. A failed job's class and matched line come from
 * gflowd's failure triage (core/triage.h: failure_class, failure_line). It changes
 * nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jsonrpc.h"
#include "mcp.h"
#include "pressure.h"

/* gflow's defaults: the last 80 lines, at most 20000 bytes of them. */
#define TRIAGE_LINES 80
#define TRIAGE_BYTES 20000
/* The caller's recent failures shown, and the log lines of each. */
#define TRIAGE_FAILURES 5
#define TRIAGE_FAILURE_LINES 3
#define TRIAGE_FAILURE_BYTES 1024

/* clang-format off */
const char mcp_triage_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"job_id\"], "
    "\"properties\": {\"job_id\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"description\": \"the job id\"},"
    "\"last_lines\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"maximum\": " MCP_STR(MCP_LOG_LINES_MAX) ", "
    "\"description\": \"log lines to read (default 80)\"},"
    "\"tail_lines\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"maximum\": " MCP_STR(MCP_LOG_LINES_MAX) ", "
    "\"description\": \"the same as last_lines\"},"
    "\"max_bytes\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"maximum\": " MCP_STR(MCP_LOG_BYTES_MAX) ", "
    "\"description\": \"at most this many bytes of them (default 20000)\"}}}";
/* clang-format on */

char *mcp_clean_log(const char *text, size_t len)
{
    struct strbuf out;
    strbuf_init(&out);
    strbuf_reserve(&out, len + 1);
    size_t line_start = 0; /* where the current line begins in out */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == 0x1b) { /* ESC [ params final, or ESC and one byte */
            if (i + 1 < len && text[i + 1] == '[') {
                i += 2;
                while (i < len &&
                       !((unsigned char)text[i] >= 0x40 && (unsigned char)text[i] <= 0x7e))
                    i++;
            } else if (i + 1 < len && text[i + 1] == ']') { /* OSC ... BEL or ESC \ */
                i += 2;
                while (i < len && text[i] != '\a' && !(text[i] == 0x1b && i + 1 < len))
                    i++;
                if (i < len && text[i] == 0x1b)
                    i++;
            } else {
                i++;
            }
            continue;
        }
        if (c == '\r') {
            if (i + 1 < len && text[i + 1] == '\n')
                continue;         /* CRLF is a line end */
            out.len = line_start; /* the line is written again */
            out.buf[out.len] = '\0';
            continue;
        }
        strbuf_addc(&out, (char)c);
        if (c == '\n')
            line_start = out.len;
    }
    return strbuf_detach(&out);
}

/* "0,2" (or [0, 2]) as [0, 2]; null for none. */
static json_t *gpu_id_list(const json_t *ids)
{
    if (json_is_array(ids))
        return json_incref((json_t *)ids);
    const char *s = json_string_value(ids);
    if (!s || !*s)
        return json_null();
    json_t *list = json_array();
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s)
            break;
        json_array_append_new(list, json_integer(v));
        s = *end == ',' ? end + 1 : end;
    }
    return list;
}

static double num(const json_t *job, const char *key)
{
    const json_t *v = json_object_get(job, key);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* How the job's process ended, in words (gflow cannot say; we record it). */
static char *exit_note(const json_t *job)
{
    const char *st = json_string_value(json_object_get(job, "state"));
    const json_t *code = json_object_get(job, "exit_code");
    const char *sig = json_string_value(json_object_get(job, "signal_name"));
    if (json_is_true(json_object_get(job, "oom")))
        return xstrdup("killed by the out-of-memory killer");
    if (sig)
        return xasprintf("ended by signal %s", sig);
    if (json_is_integer(code))
        return xasprintf("exited with status %lld", (long long)json_integer_value(code));
    if (st && (!strcmp(st, "PD") || !strcmp(st, "H")))
        return xstrdup("not started yet");
    if (st && (!strcmp(st, "R") || !strcmp(st, "CG")))
        return xstrdup("still running");
    return xstrdup("the job never ran, or its exit status is unknown");
}

static void hint(json_t *hints, const char *text)
{
    size_t i;
    const json_t *h;
    json_array_foreach (hints, i, h) {
        if (!strcmp(json_string_value(h), text))
            return;
    }
    json_array_append_new(hints, json_string(text));
}

static bool has(const char *s, const char *what)
{
    return s && strstr(s, what);
}

/* gflow's hints by state and reason, with ours for what we record, and what the log
 * suggests. */
static json_t *retry_hints(const json_t *job, const char *log)
{
    json_t *hints = json_array();
    const char *st = json_string_value(json_object_get(job, "state"));
    const char *reason = json_string_value(json_object_get(job, "reason"));
    st = st ? st : "";
    if (!strcmp(st, "PD")) {
        if (has(reason, "Dependency"))
            hint(hints, "inspect dependency jobs before retrying or changing dependencies");
        else if (has(reason, "Memory"))
            hint(hints, "lower memory request or wait for memory pressure to clear");
        else if (has(reason, "Resources") || has(reason, "Priority") || has(reason, "Gpu") ||
                 has(reason, "Reservation"))
            hint(hints,
                 "check get_queue_pressure for GPU availability, reservations, and running jobs");
        else if (has(reason, "Quota") || has(reason, "MaxRunningJobs") ||
                 has(reason, "JobArrayTaskLimit"))
            hint(hints, "the job waits for a limit (quota, running-job cap or its group's "
                        "max_concurrent): it starts when other jobs end");
        else if (has(reason, "BeginTime"))
            hint(hints, "the job waits for its begin time");
        else
            hint(hints, "check get_queue_pressure before changing the job");
    } else if (!strcmp(st, "F") || !strcmp(st, "TO")) {
        hint(hints, "review the log excerpt before using redo_job");
        if (json_integer_value(json_object_get(job, "max_retries")) > 0) {
            char *h = xasprintf("job has max_retries=%lld configured; check whether automatic "
                                "retries already ran",
                                (long long)json_integer_value(json_object_get(job, "max_retries")));
            hint(hints, h);
            free(h);
        }
        if (!strcmp(st, "TO"))
            hint(hints, "the job reached its time limit: redo_job with a larger time_limit_secs");
        if (json_is_true(json_object_get(job, "oom")))
            hint(hints, "the job ran out of host memory: redo_job with a larger memory_limit_mb");
        if (has(reason, "DependencyFailed"))
            hint(hints, "a job it depended on failed: fix that one, then redo_job with cascade");
        if (has(reason, "LaunchFailed"))
            hint(hints, "the job could not be started: check its directory, script and "
                        "conda environment");
        const char *cls = json_string_value(json_object_get(job, "failure_class"));
        if (has(cls, "CudaOOM"))
            hint(hints, "failure class CudaOOM: the GPU ran out of memory; redo_job with a "
                        "smaller batch or more GPUs");
        else if (has(cls, "NcclError"))
            hint(hints, "failure class NcclError: a collective failed or timed out; check "
                        "every rank's log and the GPUs' links");
        else if (has(cls, "PythonException"))
            hint(hints, "failure class PythonException: fix the exception the traceback "
                        "shows before redo_job");
        else if (has(cls, "CommandNotFound"))
            hint(hints, "failure class CommandNotFound: check the command name, PATH or conda "
                        "environment");
        else if (has(cls, "Segfault"))
            hint(hints, "failure class Segfault: a process crashed; check native extensions "
                        "and library versions");
    } else if (!strcmp(st, "CA")) {
        hint(hints, "confirm why the job was cancelled before resubmitting");
    } else if (!strcmp(st, "H")) {
        hint(hints, "release_job can make this job schedulable after user confirmation");
    } else if (!strcmp(st, "R") || !strcmp(st, "CG")) {
        hint(hints, "job is still running; inspect logs instead of retrying");
    } else if (!strcmp(st, "CD")) {
        hint(hints, "job finished successfully; retry is usually unnecessary");
    }
    if (log) {
        char *lower = xstrdup(log);
        for (char *p = lower; *p; p++)
            *p = (char)((*p >= 'A' && *p <= 'Z') ? *p + 32 : *p);
        if (strstr(lower, "out of memory") || strstr(lower, "cuda oom"))
            hint(hints, "log suggests OOM; consider requesting more memory or reducing workload");
        if (strstr(lower, "no space left"))
            hint(hints, "log suggests disk pressure; free space before retrying");
        if (strstr(lower, "command not found"))
            hint(hints, "log suggests environment or PATH setup failure");
        free(lower);
    }
    return hints;
}

/* The last lines of job id's log, at most max bytes, cleaned; NULL when it cannot be
 * read (*why says so). */
static char *log_tail(int64_t id, int64_t lines, size_t max, bool *cut, char **why)
{
    struct strbuf text;
    strbuf_init(&text);
    char *query = xasprintf("last=%lld", (long long)lines);
    int status;
    *cut = false;
    int rc = mcp_daemon_log(id, query, max, true, &text, cut, &status, why);
    free(query);
    char *clean = rc < 0 ? NULL : mcp_clean_log(text.buf ? text.buf : "", text.len);
    strbuf_free(&text);
    return clean;
}

/* For a waiting job: the queue around it. */
static json_t *queue_context(const json_t *job)
{
    json_t *gpus = NULL, *jobs = NULL, *resv = NULL;
    char *err = NULL;
    json_t *out = NULL;
    if (mcp_daemon_json("GET", "/v1/gpus", NULL, &gpus, NULL, &err) < 0 ||
        mcp_daemon_json("GET", "/v1/jobs?state=PD,H,R&user=all", NULL, &jobs, NULL, &err) < 0 ||
        mcp_daemon_json("GET", "/v1/reservations", NULL, &resv, NULL, &err) < 0) {
        out = json_pack("{s:s}", "error", err);
        free(err);
        goto done;
    }
    out = json_object();
    json_t *p = pressure_build(gpus, json_object_get(jobs, "jobs"),
                               json_object_get(resv, "reservations"), now_wall());
    /* The queued jobs that come before this one: a higher effective priority, or the
     * same and an earlier id. */
    double prio = num(job, "effective_priority");
    if (!json_is_number(json_object_get(job, "effective_priority")))
        prio = num(job, "priority");
    json_int_t id = json_integer_value(json_object_get(job, "id"));
    json_int_t ahead = 0, ahead_gpus = 0;
    size_t i;
    const json_t *o;
    json_array_foreach (json_object_get(jobs, "jobs"), i, o) {
        const char *st = json_string_value(json_object_get(o, "state"));
        if (!st || strcmp(st, "PD") || json_integer_value(json_object_get(o, "id")) == id)
            continue;
        double op = json_is_number(json_object_get(o, "effective_priority"))
                        ? num(o, "effective_priority")
                        : num(o, "priority");
        if (op > prio || (op == prio && json_integer_value(json_object_get(o, "id")) < id)) {
            ahead++;
            ahead_gpus += json_integer_value(json_object_get(o, "gpus"));
        }
    }
    json_object_set_new(out, "jobs_ahead", json_integer(ahead));
    json_object_set_new(out, "gpus_asked_ahead", json_integer(ahead_gpus));
    json_object_set_new(
        out, "free_gpus",
        json_integer((json_int_t)json_array_size(json_object_get(p, "available_gpus"))));
    json_object_set(out, "total_gpus", json_object_get(p, "total_gpus"));
    const json_t *expected = json_object_get(job, "expected_start");
    json_object_set_new(out, "expected_start", expected ? json_deep_copy(expected) : json_null());
    json_object_set_new(out, "pressure", p);
done:
    json_decref(gpus);
    json_decref(jobs);
    json_decref(resv);
    return out;
}

/* The caller's latest failed and timed-out jobs other than this one, each with its
 * reason, exit and last log lines. */
static json_t *recent_failures(const json_t *job)
{
    char *path = xasprintf("/v1/jobs?state=F,TO&sort=-id&limit=%d", TRIAGE_FAILURES + 1);
    json_t *list = NULL;
    char *err = NULL;
    int rc = mcp_daemon_json("GET", path, NULL, &list, NULL, &err);
    free(path);
    if (rc < 0) {
        free(err);
        return json_array();
    }
    json_int_t self = json_integer_value(json_object_get(job, "id"));
    json_t *out = json_array();
    size_t i;
    const json_t *f;
    json_array_foreach (json_object_get(list, "jobs"), i, f) {
        json_int_t id = json_integer_value(json_object_get(f, "id"));
        if (id == self || json_array_size(out) == TRIAGE_FAILURES)
            continue;
        bool cut;
        char *why = NULL;
        char *tail = log_tail(id, TRIAGE_FAILURE_LINES, TRIAGE_FAILURE_BYTES, &cut, &why);
        free(why);
        char *note = exit_note(f);
        json_t *entry = json_pack(
            "{s:I, s:O, s:O, s:O, s:s, s:O, s:o}", "job_id", id, "name", json_object_get(f, "name"),
            "state", json_object_get(f, "state_name"), "reason", json_object_get(f, "reason"),
            "exit", note, "end_time", json_object_get(f, "end_time"), "log_tail",
            tail ? jsonrpc_text(tail, strlen(tail)) : json_null());
        free(note);
        free(tail);
        if (entry) {
            const json_t *cls = json_object_get(f, "failure_class");
            json_object_set_new(entry, "failure_class", cls ? json_deep_copy(cls) : json_null());
            json_array_append_new(out, entry);
        }
    }
    json_decref(list);
    return out;
}

/* The last non-empty line of text, or NULL; caller frees. */
static char *last_line(const char *text)
{
    if (!text)
        return NULL;
    size_t end = strlen(text);
    while (end && (text[end - 1] == '\n' || text[end - 1] == ' '))
        end--;
    size_t start = end;
    while (start && text[start - 1] != '\n')
        start--;
    return end > start ? xstrndup(text + start, end - start) : NULL;
}

/* One sentence a person can read: the state and reason, and for a waiting job the
 * queue, for one that ended how and its last log line. */
static json_t *summary(const json_t *job, const char *note, const char *log, const json_t *queue)
{
    struct strbuf sb;
    strbuf_init(&sb);
    const char *reason = json_string_value(json_object_get(job, "reason"));
    strbuf_addf(&sb, "Job %lld is %s", (long long)json_integer_value(json_object_get(job, "id")),
                json_string_value(json_object_get(job, "state_name")));
    if (reason)
        strbuf_addf(&sb, " (%s)", reason);
    if (queue && json_object_get(queue, "free_gpus")) {
        long long asked = (long long)json_integer_value(json_object_get(job, "gpus"));
        strbuf_addf(&sb, ": it asks %lld GPU%s, %lld of %lld free; %lld queued job%s ahead of it",
                    asked, asked == 1 ? "" : "s",
                    (long long)json_integer_value(json_object_get(queue, "free_gpus")),
                    (long long)json_integer_value(json_object_get(queue, "total_gpus")),
                    (long long)json_integer_value(json_object_get(queue, "jobs_ahead")),
                    json_integer_value(json_object_get(queue, "jobs_ahead")) == 1 ? "" : "s");
    } else if (!queue) {
        strbuf_addf(&sb, ": %s", note);
        const char *matched = json_string_value(json_object_get(job, "failure_line"));
        const char *cls = json_string_value(json_object_get(job, "failure_class"));
        if (cls && (!reason || strcmp(reason, cls)))
            strbuf_addf(&sb, "; failure class %s", cls);
        char *line = matched ? NULL : last_line(log);
        if (matched)
            strbuf_addf(&sb, "; its log showed: %s", matched);
        else if (line)
            strbuf_addf(&sb, "; its log ends with: %s", line);
        free(line);
    }
    json_t *s = jsonrpc_text(sb.buf, sb.len);
    strbuf_free(&sb);
    return s;
}

void mcp_tool_triage_job(const json_t *args, struct mcp_reply *reply)
{
    int64_t id = mcp_arg_int(args, "job_id", 0);
    int64_t lines = mcp_arg_int(args, "last_lines", mcp_arg_int(args, "tail_lines", TRIAGE_LINES));
    size_t max = (size_t)mcp_arg_int(args, "max_bytes", TRIAGE_BYTES);
    char *path = xasprintf("/v1/jobs/%lld", (long long)id);
    json_t *job = NULL;
    char *err = NULL;
    int rc = mcp_daemon_json("GET", path, NULL, &job, NULL, &err);
    free(path);
    if (rc < 0) {
        reply->error = err;
        return;
    }
    json_object_del(job, "env"); /* secrets stay out, as in show_job */
    const char *st = json_string_value(json_object_get(job, "state"));
    st = st ? st : "";
    bool waiting = !strcmp(st, "PD") || !strcmp(st, "H");
    bool cut = false;
    char *why = NULL;
    char *log = waiting ? NULL : log_tail(id, lines, max, &cut, &why);
    double now = now_wall();
    double submit = num(job, "submit_time"), start = num(job, "start_time");
    double end = num(job, "end_time");
    json_t *runtime = start > 0 ? json_real((end > 0 ? end : now) - start) : json_null();
    json_t *wait = submit > 0 ? json_real((start > 0 ? start : now) - submit) : json_null();
    char *note = exit_note(job);
    const json_t *code = json_object_get(job, "exit_code");
    json_t *out = json_pack(
        "{s:I, s:O, s:O, s:O, s:o, s:o, s:o, s:O, s:s, s:O, s:o, s:o, s:b}", "job_id",
        (json_int_t)id, "state", json_object_get(job, "state_name"), "state_code",
        json_object_get(job, "state"), "reason",
        json_object_get(job, "reason") ? json_object_get(job, "reason") : json_null(),
        "requested_gpus", json_integer(json_integer_value(json_object_get(job, "gpus"))), "gpu_ids",
        gpu_id_list(json_object_get(job, "gpu_ids")), "runtime_secs", runtime, "exit_status",
        json_is_integer(code) ? code : json_null(), "exit_status_note", note, "log_path",
        json_object_get(job, "log_path") ? json_object_get(job, "log_path") : json_null(),
        "log_excerpt", log ? jsonrpc_text(log, strlen(log)) : json_null(), "retry_hints",
        retry_hints(job, log), "log_truncated", cut);
    json_object_set_new(out, "wait_secs", wait);
    /* Failure triage's verdict (null: none, or not a failure). */
    const json_t *cls = json_object_get(job, "failure_class");
    const json_t *matched = json_object_get(job, "failure_line");
    json_object_set_new(out, "failure_class", cls ? json_deep_copy(cls) : json_null());
    json_object_set_new(out, "failure_line", matched ? json_deep_copy(matched) : json_null());
    json_t *queue = waiting ? queue_context(job) : NULL;
    json_object_set_new(out, "summary", summary(job, note, log, queue));
    if (why)
        json_object_set_new(out, "log_error", json_string(why));
    if (queue)
        json_object_set_new(out, "queue", queue);
    if (!strcmp(st, "F") || !strcmp(st, "TO") || !strcmp(st, "CA"))
        json_object_set_new(out, "recent_failures", recent_failures(job));
    json_object_set_new(out, "job", job);
    free(note);
    free(log);
    free(why);
    reply->structured = out;
}
