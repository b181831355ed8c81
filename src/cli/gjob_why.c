/* gjob why: one job explained in a few lines. A waiting job from its reason (why the
 * scheduling pass left it), its place among the waiting jobs (the ones ahead of it by
 * effective priority, then id: the order the pass tries them) and when backfill expects
 * it to start; a failed job from its failure class, the log line that showed it and its
 * log's last lines (GET /v1/jobs/{id}/log?last=N, as gjob log reads it); a running or
 * finished job in one line. -o json gives the same facts as one object. Read only. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "clock.h"
#include "gjob_internal.h"
#include "job.h"
#include "output.h"
#include "pressure.h"
#include "termtext.h"
#include "timefmt.h"
#include "util.h"

/* The jobs ahead that are named (the count says how many there are in all). */
#define WHY_AHEAD_SHOWN 5

static void gjob_help_why(void)
{
    printf("Usage: gjob why [options] <id | @ | @~N>\n"
           "\n"
           "Explains one job. A pending (PD) or held (H) job: why it waits (its reason,\n"
           "e.g. Resources, Priority, Dependency, BeginTime, Quota), its place among the\n"
           "waiting jobs and the jobs ahead of it (by effective priority, then id), the\n"
           "GPUs it asks against those free, and its expected start (from backfill's\n"
           "plan; unknown without one). A failed (F) job: its failure class (CudaOOM,\n"
           "NcclError, PythonException: <type>, Segfault, CommandNotFound,\n"
           "Killed (SIGKILL), HostOOM, or a [[triage.classes]] of the config), the log\n"
           "line that showed it, a hint, and the last lines of its log. A running or\n"
           "finished job: one line.\n"
           "\n"
           "Options:\n"
           "  -n, --lines N      log lines shown for a failed job (default 10; 0: none)\n"
           "  -o, --output FMT   table (default) or json\n"
           "  -h, --help         show this help\n");
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static json_int_t num(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

/* A waiting job's rank: its effective priority (its priority when none). */
static double rank(const json_t *j)
{
    const json_t *e = json_object_get(j, "effective_priority");
    return json_is_number(e) ? json_number_value(e) : (double)num(j, "priority");
}

/* Whether a comes before b in the pass's order. */
static bool before(const json_t *a, const json_t *b)
{
    double ra = rank(a), rb = rank(b);
    return ra > rb || (ra == rb && num(a, "id") < num(b, "id"));
}

static int cmp_order(const void *x, const void *y)
{
    const json_t *a = *(const json_t *const *)x, *b = *(const json_t *const *)y;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* What a waiting job's reason means, in a phrase (NULL: nothing to add). */
static const char *wait_text(const char *reason)
{
    static const struct {
        const char *prefix, *text;
    } texts[] = {
        {"Resources", "not enough free GPUs or memory for it now"},
        {"Priority", "jobs ahead of it come first; backfill holds GPUs for them"},
        {"Dependency", "a job it depends on has not ended as required yet"},
        {"DependencyFailed", "a job it depends on failed: it will not start unless redone"},
        {"BeginTime", "it was asked not to start before its begin time"},
        {"JobHeldUser", "it is on hold: 'gjob release' lets it run"},
        {"Quota", "a quota of its user or project is used up"},
        {"MaxRunningJobs", "daemon.max_running_jobs jobs run already"},
        {"JobArrayTaskLimit", "its array's max_concurrent tasks run already"},
        {"Reservation", "its GPUs are reserved for someone else"},
        {"Memory", "not enough host memory free for its --memory"},
    };
    for (size_t i = 0; reason && i < sizeof(texts) / sizeof(texts[0]); i++)
        if (!strncmp(reason, texts[i].prefix, strlen(texts[i].prefix)))
            return texts[i].text;
    return NULL;
}

/* What to try after a failure of this class (NULL: nothing). */
static const char *failure_hint(const char *cls)
{
    if (!cls)
        return NULL;
    if (!strcmp(cls, "CudaOOM"))
        return "the GPU ran out of memory: use a smaller batch or model, or more GPUs";
    if (!strcmp(cls, "HostOOM"))
        return "the job ran out of host memory: redo it with a larger --memory";
    if (!strcmp(cls, "NcclError"))
        return "a collective failed or timed out: check every rank's log and the GPUs' links";
    if (!strcmp(cls, "Segfault"))
        return "a process crashed (SIGSEGV): check native extensions and library versions";
    if (!strcmp(cls, "CommandNotFound"))
        return "a command was not found: check its name, PATH or the conda environment";
    if (!strncmp(cls, "PythonException: ", 17))
        return "the program raised an exception: see its traceback in the log";
    if (!strncmp(cls, "Killed (", 8))
        return "something sent the job a signal: another user, a script or the kernel";
    return NULL;
}

/* The queue around waiting job `job`: {"position", "waiting", "ahead": [...], "jobs_ahead",
 * "free_gpus", "total_gpus"}, or NULL when the daemon would not say. */
static json_t *queue_of(const json_t *job)
{
    json_t *jobs = NULL, *gpus = NULL;
    if (cli_request_json("GET", "/v1/jobs?state=PD,H,R&user=all", NULL, NULL, &jobs) < 0 ||
        cli_request_json("GET", "/v1/gpus", NULL, NULL, &gpus) < 0) {
        json_decref(jobs);
        json_decref(gpus);
        return NULL;
    }
    const json_t *list = json_object_get(jobs, "jobs");
    json_t *p = pressure_build(gpus, list, NULL, now_wall());
    size_t n = 0, i;
    const json_t *o;
    const json_t **waiting = xcalloc(json_array_size(list) + 1, sizeof(*waiting));
    json_array_foreach (list, i, o) {
        const char *st = str(o, "state");
        if (st && !strcmp(st, "PD"))
            waiting[n++] = o;
    }
    qsort(waiting, n, sizeof(*waiting), cmp_order);
    json_int_t id = num(job, "id");
    json_t *ahead = json_array();
    size_t pos = 0;
    for (size_t k = 0; k < n && num(waiting[k], "id") != id; k++) {
        pos++;
        if (json_array_size(ahead) < WHY_AHEAD_SHOWN)
            json_array_append_new(
                ahead, json_pack("{s:I, s:O, s:O, s:I, s:f}", "id", num(waiting[k], "id"), "name",
                                 json_object_get(waiting[k], "name"), "user",
                                 json_object_get(waiting[k], "user"), "gpus",
                                 num(waiting[k], "gpus"), "priority", rank(waiting[k])));
    }
    bool queued = str(job, "state") && !strcmp(str(job, "state"), "PD");
    json_t *out =
        json_pack("{s:o, s:I, s:I, s:o, s:I, s:O}", "position",
                  queued ? json_integer((json_int_t)pos + 1) : json_null(), "waiting",
                  (json_int_t)n, "jobs_ahead", (json_int_t)(queued ? pos : n), "ahead", ahead,
                  "free_gpus", (json_int_t)json_array_size(json_object_get(p, "available_gpus")),
                  "total_gpus", json_object_get(p, "total_gpus"));
    free(waiting);
    json_decref(p);
    json_decref(jobs);
    json_decref(gpus);
    return out;
}

/* The last n lines of id's log, or NULL (and *why) when it cannot be read. */
static char *log_tail(int64_t id, int64_t n, char **why)
{
    char *path = xasprintf("/v1/jobs/%lld/log?last=%lld", (long long)id, (long long)n);
    struct client_response r;
    char *err = NULL;
    *why = NULL;
    char *text = NULL;
    if (client_request("GET", path, NULL, 0, NULL, &r, NULL, NULL, &err) < 0) {
        *why = err;
    } else {
        strbuf_addc(&r.body, '\0');
        if (r.status == 200) {
            text = xstrdup(r.body.buf);
        } else {
            json_t *e = json_loads(r.body.buf, 0, NULL);
            *why = xstrdup(str(e, "error") ? str(e, "error") : "the daemon refused it");
            json_decref(e);
        }
        client_response_free(&r);
    }
    free(path);
    return text;
}

/* The one-line summary and the facts, for both outputs. */
static json_t *explain(const json_t *job, int64_t lines)
{
    json_int_t id = num(job, "id");
    const char *st = str(job, "state"), *reason = str(job, "reason");
    enum job_state state = JOB_QUEUED;
    job_state_parse(st, &state);
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_addf(&sb, "Job %lld (%s) ", (long long)id, str(job, "name") ? str(job, "name") : "");
    json_t *out =
        json_pack("{s:I, s:O, s:O, s:O}", "job_id", id, "state", json_object_get(job, "state"),
                  "state_name", json_object_get(job, "state_name"), "reason",
                  json_object_get(job, "reason") ? json_object_get(job, "reason") : json_null());
    double now = now_wall();
    if (state == JOB_QUEUED || state == JOB_HELD) {
        strbuf_addf(&sb, "is %s (%s)", state == JOB_HELD ? "held" : "pending", st);
        const char *why = reason ? reason : state == JOB_HELD ? "JobHeldUser" : "Resources";
        strbuf_addf(&sb, ": %s", why);
        const char *text = wait_text(why);
        if (text)
            strbuf_addf(&sb, " (%s)", text);
        json_object_set_new(out, "explanation", text ? json_string(text) : json_null());
        json_t *q = queue_of(job);
        if (q)
            json_object_set_new(out, "queue", q);
        const json_t *exp = json_object_get(job, "expected_start");
        json_object_set_new(out, "expected_start",
                            json_is_number(exp) ? json_deep_copy(exp) : json_null());
        json_object_set_new(out, "gpus", json_integer(num(job, "gpus")));
        json_object_set(out, "depends_on", json_object_get(job, "depends_on"));
    } else if (state == JOB_FAILED) {
        const char *cls = str(job, "failure_class");
        strbuf_addf(&sb, "failed (F): %s", cls ? cls : reason ? reason : "unknown reason");
        json_object_set(out, "failure_class", json_object_get(job, "failure_class"));
        json_object_set(out, "failure_line", json_object_get(job, "failure_line"));
        json_object_set(out, "exit_code", json_object_get(job, "exit_code"));
        json_object_set(out, "signal_name", json_object_get(job, "signal_name"));
        const char *hint = failure_hint(cls);
        json_object_set_new(out, "hint", hint ? json_string(hint) : json_null());
        char *err = NULL;
        char *tail = lines > 0 ? log_tail(id, lines, &err) : NULL;
        json_object_set_new(out, "log_tail", tail ? json_string(tail) : json_null());
        if (err)
            json_object_set_new(out, "log_error", json_string(err));
        free(tail);
        free(err);
    } else if (state == JOB_RUNNING) {
        double start = json_number_value(json_object_get(job, "start_time"));
        char *ran = format_duration((int64_t)(start > 0 && now > start ? now - start : 0));
        const char *gpus = str(job, "gpu_ids");
        strbuf_addf(&sb, "is running (%s) for %s%s%s", st, ran, gpus ? " on GPUs " : "",
                    gpus ? gpus : "");
        free(ran);
    } else {
        double start = json_number_value(json_object_get(job, "start_time"));
        double end = json_number_value(json_object_get(job, "end_time"));
        strbuf_addf(&sb, "%s (%s)",
                    state == JOB_FINISHED    ? "finished"
                    : state == JOB_CANCELLED ? "was cancelled"
                                             : "timed out",
                    st);
        if (state == JOB_FINISHED && json_is_integer(json_object_get(job, "exit_code")))
            strbuf_addf(&sb, " with exit code %lld", (long long)num(job, "exit_code"));
        else if (reason)
            strbuf_addf(&sb, ": %s", reason);
        if (start > 0 && end >= start) {
            char *ran = format_duration((int64_t)(end - start));
            strbuf_addf(&sb, " after %s", ran);
            free(ran);
        }
    }
    json_object_set_new(out, "summary", json_string(sb.buf));
    strbuf_free(&sb);
    return out;
}

static void line(const char *key, const char *value)
{
    char *safe = termtext_dup(value, 0);
    printf("  %s: %s\n", key, safe);
    free(safe);
}

static void print_table(const json_t *w)
{
    char *summary = termtext_dup(str(w, "summary"), 0);
    printf("%s\n", summary);
    free(summary);
    const json_t *q = json_object_get(w, "queue");
    if (q) {
        struct strbuf sb;
        strbuf_init(&sb);
        if (json_is_integer(json_object_get(q, "position")))
            strbuf_addf(&sb, "position %lld of %lld waiting job%s", (long long)num(q, "position"),
                        (long long)num(q, "waiting"), num(q, "waiting") == 1 ? "" : "s");
        else
            strbuf_addf(&sb, "%lld job%s waiting", (long long)num(q, "waiting"),
                        num(q, "waiting") == 1 ? "" : "s");
        size_t i;
        const json_t *a;
        json_array_foreach (json_object_get(q, "ahead"), i, a) {
            strbuf_addf(&sb, "%s%lld (%s, %lld GPU%s)",
                        i ? ", " : "; ahead of it: ", (long long)num(a, "id"),
                        str(a, "user") ? str(a, "user") : "?", (long long)num(a, "gpus"),
                        num(a, "gpus") == 1 ? "" : "s");
        }
        json_int_t more =
            num(q, "jobs_ahead") - (json_int_t)json_array_size(json_object_get(q, "ahead"));
        if (json_is_integer(json_object_get(q, "position")) && more > 0)
            strbuf_addf(&sb, " and %lld more", (long long)more);
        line("Queue", sb.buf);
        strbuf_free(&sb);
        char *gpus = xasprintf("asks %lld, %lld of %lld free", (long long)num(w, "gpus"),
                               (long long)num(q, "free_gpus"), (long long)num(q, "total_gpus"));
        line("GPUs", gpus);
        free(gpus);
    }
    if (json_object_get(w, "expected_start")) {
        const json_t *e = json_object_get(w, "expected_start");
        char *text = json_is_number(e)
                         ? output_time(json_number_value(e))
                         : xstrdup("unknown (backfill has no plan for it: scheduler.backfill is "
                                   "off, or it cannot place it)");
        line("ExpectedStart", text);
        free(text);
    }
    if (json_object_get(w, "failure_line") || json_object_get(w, "exit_code")) {
        const char *cls = str(w, "failure_class");
        if (cls)
            line("FailureClass", cls);
        if (str(w, "failure_line"))
            line("FailureLine", str(w, "failure_line"));
        if (str(w, "signal_name"))
            line("Signal", str(w, "signal_name"));
        else if (json_is_integer(json_object_get(w, "exit_code"))) {
            char code[32];
            snprintf(code, sizeof(code), "%lld", (long long)num(w, "exit_code"));
            line("ExitCode", code);
        }
        if (str(w, "hint"))
            line("Hint", str(w, "hint"));
        if (str(w, "log_error"))
            line("Log", str(w, "log_error"));
        const char *tail = str(w, "log_tail");
        if (tail && *tail) {
            printf("  Last log lines:\n");
            const char *p = tail;
            while (*p) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                struct strbuf sb;
                strbuf_init(&sb);
                termtext_escape(&sb, p, len, 0);
                printf("    %s\n", sb.buf ? sb.buf : "");
                strbuf_free(&sb);
                p += len + (nl ? 1 : 0);
            }
        }
    }
}

int gjob_why(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"lines", required_argument, NULL, 'n'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    enum output_format fmt = OUTPUT_TABLE;
    int64_t lines = 10;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":n:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            char *end;
            lines = strtoll(optarg, &end, 10);
            if (end == optarg || *end || lines < 0 || lines > 10000)
                cli_die(CLI_EXIT_USAGE,
                        "invalid line count '%s' for --lines: use a whole number from 0 to 10000",
                        optarg);
            break;
        }
        case 'o':
            if (output_format_parse(optarg, &fmt) < 0 ||
                (fmt != OUTPUT_TABLE && fmt != OUTPUT_JSON))
                cli_die(CLI_EXIT_USAGE,
                        "unknown output format '%s' for 'gjob why'; use table or json", optarg);
            break;
        case 'h':
            gjob_help_why();
            return 0;
        default:
            gjob_bad_option("why", argv, c, longopts);
        }
    }
    if (optind >= argc)
        cli_die(CLI_EXIT_USAGE, "which job? e.g. 'gjob why 42' or 'gjob why @'");
    if (argc - optind > 1)
        cli_die(CLI_EXIT_USAGE, "'gjob why' explains one job; got %d arguments", argc - optind);
    size_t n;
    int64_t *ids = cli_parse_ids(1, argv + optind, &n);
    if (n != 1)
        cli_die(CLI_EXIT_USAGE, "'gjob why' explains one job; '%s' names %zu jobs", argv[optind],
                n);
    char *path = xasprintf("/v1/jobs/%lld", (long long)ids[0]);
    free(ids);
    json_t *job = cli_call("GET", path, NULL);
    free(path);
    json_t *w = explain(job, lines);
    if (fmt == OUTPUT_JSON)
        output_json(w, stdout);
    else
        print_table(w);
    json_decref(w);
    json_decref(job);
    return 0;
}
