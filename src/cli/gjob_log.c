/* gjob log: a job's output, whole or its --first/--last N lines, and --follow, which
 * streams it until the job leaves the queue and then prints the job's final state line
 * and exits with the job's status. The final state comes with the job's job_ended
 * event (GET /v1/events, subscribed before anything is read, so the end cannot slip
 * by); from an older gflowd without events it is polled.
 *
 * The log is the job's own output, printed as it is for its owner (colours, progress
 * bars) and to a pipe or file. Only an admin may read another user's log; printed on the
 * admin's terminal, that user's escape sequences (a clipboard write, a title that a
 * terminal reports back as input) are shown as visible escapes instead (termtext.h),
 * unless --raw asks for the bytes. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "client_events.h"
#include "clock.h"
#include "gjob_internal.h"
#include "job.h"
#include "parse.h"
#include "termtext.h"
#include "util.h"

static void gjob_help_log(void)
{
    printf("Usage: gjob log [options] <id | @ | @~N>\n"
           "\n"
           "Prints the job's output (stdout and stderr) as it was written. For a job that\n"
           "has not started yet it says so (exit status 0). Only a regular file owned by\n"
           "the job's owner is read: a link or another user's file put in its place is\n"
           "refused, with a message naming it (exit status 1).\n"
           "\n"
           "Options:\n"
           "  -f, --first N  only the first N lines\n"
           "  -l, --last N   only the last N lines\n"
           "      --raw      the bytes as they are, also on a terminal for a job of another\n"
           "                 user (whose control characters are otherwise shown escaped,\n"
           "                 e.g. \\x1b)\n"
           "      --follow   (or -f with no job id after it: 'gjob log -f 42', as tail -f)\n"
           "                 keep printing new output until the job has ended, then its\n"
           "                 final state on stderr ('gjob: job 5 ended: CD (Finished),\n"
           "                 exit code 0'); exits with the job's exit code: 0 for CD,\n"
           "                 1 for a signal, a time limit (TO) or a cancellation (CA),\n"
           "                 so that 'gjob log --follow @ && next' runs next on success\n"
           "  -h, --help     show this help\n");
}

/* ---- log ---- */

/* GET /v1/jobs/{id}, or die with the daemon's message. */
static json_t *gjob_get(int64_t id)
{
    char *path = xasprintf("/v1/jobs/%lld", (long long)id);
    json_t *job = cli_call("GET", path, NULL);
    free(path);
    return job;
}

static enum job_state gjob_state_of(const json_t *job)
{
    enum job_state st = JOB_QUEUED;
    job_state_parse(json_string_value(json_object_get(job, "state")), &st);
    return st;
}

static bool gjob_has_started(const json_t *job)
{
    return json_is_number(json_object_get(job, "start_time"));
}

/* "CD (Finished), exit code 0", "F (Failed), signal SIGKILL, reason Signal". */
static char *gjob_state_text(const json_t *job)
{
    enum job_state st = gjob_state_of(job);
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_addf(&sb, "%s (%s)", job_state_short(st), job_state_name(st));
    const char *sig = json_string_value(json_object_get(job, "signal_name"));
    const json_t *code = json_object_get(job, "exit_code");
    if (sig)
        strbuf_addf(&sb, ", signal %s", sig);
    else if (json_is_integer(code))
        strbuf_addf(&sb, ", exit code %lld", (long long)json_integer_value(code));
    const char *reason = json_string_value(json_object_get(job, "reason"));
    if (reason && st != JOB_FINISHED)
        strbuf_addf(&sb, ", reason %s", reason);
    return strbuf_detach(&sb);
}

/* What gjob log --follow exits with, so that 'gjob log -f @ && next' runs next only
 * after a success: 0 for CD, the job's exit code for a failed job, 1 for the rest (a
 * signal, a time limit, a cancellation). */
static int gjob_exit_status(const json_t *job)
{
    enum job_state st = gjob_state_of(job);
    const json_t *code = json_object_get(job, "exit_code");
    if (st == JOB_FINISHED)
        return 0;
    if (st == JOB_FAILED && json_is_integer(code) && json_integer_value(code) > 0 &&
        json_integer_value(code) < 256 && !json_is_integer(json_object_get(job, "signal")))
        return (int)json_integer_value(code);
    return CLI_EXIT_FAIL;
}

/* The job as its job_ended event shows it, or NULL when the stream has none for it
 * before the deadline (or broke). */
static json_t *gjob_ended_event(struct client_events *events, double deadline)
{
    struct client_event ev;
    char *err = NULL;
    for (;;) {
        double left = deadline - now_mono();
        if (left <= 0 || client_events_next(events, (int)(left * 1000) + 1, &ev, &err) != 1) {
            free(err);
            return NULL;
        }
        json_t *job = strcmp(ev.type, "job_ended") == 0 ? json_loads(ev.data, 0, NULL) : NULL;
        client_event_clear(&ev);
        if (job)
            return job;
    }
}

/* Subscribes to id's end (NULL: the daemon has no event stream). */
static struct client_events *gjob_watch_end(int64_t id)
{
    char *path = xasprintf("/v1/events?job=%lld&types=job_ended", (long long)id);
    int status;
    char *err = NULL;
    struct client_events *events = client_events_open(path, &status, &err);
    free(err);
    free(path);
    return events;
}

/* The end of gjob log --follow: the log ends when the job has left the queue, so its
 * final state is stored or about to be; prints it and returns gjob_exit_status. ended:
 * the job as read after subscribing, when it had ended already (no event will come for
 * it; NULL: it had not, and its job_ended event is on its way). */
static int gjob_follow_end(int64_t id, struct client_events *events, json_t *ended)
{
    double deadline = now_mono() + 10;
    json_t *job = ended ? json_incref(ended) : events ? gjob_ended_event(events, deadline) : NULL;
    if (!job)
        job = gjob_get(id);
    while (!job_state_is_terminal(gjob_state_of(job)) && now_mono() < deadline) {
        json_decref(job);
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        job = gjob_get(id);
    }
    char *text = gjob_state_text(job);
    fflush(stdout);
    cli_warn("job %lld ended: %s", (long long)id, text);
    free(text);
    int status = gjob_exit_status(job);
    json_decref(job);
    return status;
}

/* Where the log goes: stdout, as it is or escaped. */
struct gjob_out {
    int err;      /* the errno of a failed write; 0: none */
    bool escape;  /* another user's log on a terminal */
    char held[4]; /* the start of a UTF-8 sequence cut by the end of a piece */
    size_t nheld;
};

static int gjob_write_all(struct gjob_out *out, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(STDOUT_FILENO, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            out->err = errno;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* How many bytes at the end of s (len) start a UTF-8 sequence that the next piece
 * completes (0 to 3). */
static size_t gjob_utf8_tail(const char *s, size_t len)
{
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        unsigned char c = (unsigned char)s[len - back];
        if ((c & 0xc0) == 0x80)
            continue; /* a continuation byte: its lead is further back */
        size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

/* client_chunk_cb: a piece of the log (len 0, NULL data: the end, for what is held). */
static int gjob_write_cb(const char *data, size_t len, void *arg)
{
    struct gjob_out *out = arg;
    if (!out->escape)
        return gjob_write_all(out, data, len);
    struct strbuf in, esc;
    strbuf_init(&in);
    strbuf_init(&esc);
    strbuf_add(&in, out->held, out->nheld);
    if (len)
        strbuf_add(&in, data, len);
    out->nheld = data ? gjob_utf8_tail(in.buf, in.len) : 0;
    if (out->nheld)
        memcpy(out->held, in.buf + in.len - out->nheld, out->nheld);
    termtext_escape(&esc, in.buf, in.len - out->nheld, TERMTEXT_KEEP_LAYOUT);
    int rc = gjob_write_all(out, esc.buf, esc.len);
    strbuf_free(&in);
    strbuf_free(&esc);
    return rc;
}

static int64_t gjob_lines_arg(const char *opt, const char *s)
{
    int64_t v;
    if (parse_int64(s, &v) < 0 || v < 0)
        cli_die(CLI_EXIT_USAGE, "invalid line count '%s' for %s: use a whole number >= 0", s, opt);
    return v;
}

int gjob_log(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"first", required_argument, NULL, OPT_FIRST},
        {"last", required_argument, NULL, 'l'},
        {"follow", no_argument, NULL, OPT_FOLLOW},
        {"raw", no_argument, NULL, OPT_RAW},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int64_t first = -1, last = -1;
    const char *short_f = NULL; /* -f's word: --first N, or the job of -f ID */
    bool follow = false, raw = false;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:l:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            short_f = optarg;
            break;
        case OPT_FIRST:
            first = gjob_lines_arg("--first", optarg);
            break;
        case 'l':
            last = gjob_lines_arg("--last", optarg);
            break;
        case OPT_FOLLOW:
            follow = true;
            break;
        case OPT_RAW:
            raw = true;
            break;
        case 'h':
            gjob_help_log();
            return 0;
        default:
            gjob_bad_option("log", argv, c, longopts);
        }
    }
    const char *which = optind < argc ? argv[optind] : NULL;
    if (short_f && !which) {
        /* 'gjob log -f 42': no job besides -f's word, so -f is tail's --follow. */
        which = short_f;
        follow = true;
    } else if (short_f) {
        first = gjob_lines_arg("-f/--first", short_f); /* gflow's -f N */
    }
    if (!which)
        cli_die(CLI_EXIT_USAGE, "which job? e.g. 'gjob log 42' or 'gjob log @'");
    if (argc - optind > 1)
        cli_die(CLI_EXIT_USAGE, "'gjob log' shows one job's log; got %d arguments", argc - optind);
    if (first >= 0 && last >= 0)
        cli_die(CLI_EXIT_USAGE, "--first and --last cannot be used together");
    if (follow && (first >= 0 || last >= 0))
        cli_die(CLI_EXIT_USAGE, "--follow prints the whole log as it grows; it cannot "
                                "be combined with --first or --last");
    size_t n;
    int64_t *ids = cli_parse_ids(1, (char **)&which, &n);
    if (n != 1)
        cli_die(CLI_EXIT_USAGE, "'gjob log' shows one job's log; '%s' names %zu jobs", which, n);

    int64_t id = ids[0];
    free(ids);
    struct client_events *events = follow ? gjob_watch_end(id) : NULL;
    json_t *job = gjob_get(id);
    json_t *ended = job_state_is_terminal(gjob_state_of(job)) ? json_incref(job) : NULL;
    const json_t *uid = json_object_get(job, "uid");
    struct gjob_out out = {.escape = !raw && isatty(STDOUT_FILENO) && json_is_integer(uid) &&
                                     json_integer_value(uid) != (json_int_t)getuid()};
    if (!gjob_has_started(job)) {
        enum job_state st = gjob_state_of(job);
        if (job_state_is_terminal(st)) { /* it never will */
            char *why = gjob_state_text(job);
            cli_warn("job %lld never started: %s", (long long)id, why);
            free(why);
            int status = follow ? gjob_exit_status(job) : 0;
            json_decref(job);
            json_decref(ended);
            client_events_close(events);
            return status;
        }
        cli_warn("job %lld has not started yet (%s)%s", (long long)id, job_state_short(st),
                 follow ? "; its log follows once it runs" : "");
        if (!follow) {
            json_decref(job);
            json_decref(ended);
            return 0;
        }
    }
    json_decref(job);

    struct strbuf path;
    strbuf_init(&path);
    strbuf_addf(&path, "/v1/jobs/%lld/log", (long long)id);
    if (first >= 0)
        strbuf_addf(&path, "?first=%lld", (long long)first);
    if (last >= 0)
        strbuf_addf(&path, "?last=%lld", (long long)last);
    if (follow)
        strbuf_adds(&path, "?follow=1");

    struct client_response r;
    char *err = NULL;
    if (client_request("GET", path.buf, NULL, 0, NULL, &r, gjob_write_cb, &out, &err) < 0)
        cli_die(CLI_EXIT_FAIL, "%s", err);
    strbuf_free(&path);
    if (out.nheld) /* a sequence the log ends within */
        gjob_write_cb(NULL, 0, &out);
    if (out.err)
        cli_die(CLI_EXIT_FAIL, "cannot write the log: %s", strerror(out.err));
    int status = 0;
    if (r.status < 200 || r.status >= 300) {
        json_t *j = json_loadb(r.body.buf ? r.body.buf : "", r.body.len, 0, NULL);
        const char *e = json_string_value(json_object_get(j, "error"));
        if (e)
            cli_warn("%s", e);
        else
            cli_warn("HTTP %d from gflowd", r.status);
        json_decref(j);
        status = CLI_EXIT_FAIL;
    } else if (follow) {
        status = gjob_follow_end(id, events, ended);
    }
    json_decref(ended);
    client_events_close(events);
    client_response_free(&r);
    return status;
}
