/* gjob: acts on existing jobs, like gflow's gjob.
 *
 *   gjob show <ids...>       every field of each job
 *   gjob log <id>            the job's output (--first/--last N lines, --follow)
 *   gjob hold <ids...>       queued -> held
 *   gjob release <ids...>    held -> queued
 *   gjob update <ids...>     change queued or held jobs (PATCH /v1/jobs/{id})
 *   gjob redo <id>           a new job from an old one (--cascade: its cancelled chain)
 *
 * Commands that take several ids go through all of them: a job that fails (unknown,
 * wrong state, not yours) gets one line on stderr and makes the exit status 1, and the
 * others are still processed. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "files.h"
#include "gflow_build.h"
#include "gpuinfo.h"
#include "job.h"
#include "jobopts.h"
#include "jobshow.h"
#include "output.h"
#include "parse.h"
#include "util.h"

enum { OPT_SOCKET = 256, OPT_FOLLOW, OPT_FIRST };

static void gjob_help(void)
{
    printf("gjob - inspect and control gflow jobs\n"
           "\n"
           "Usage: gjob [--socket PATH] <command> [options] <job ids>\n"
           "\n"
           "Commands:\n"
           "  show, s <ids...>       show every field of the jobs (-o json for JSON)\n"
           "  log, l <id>            print a job's output: -f/--first N, -l/--last N lines,\n"
           "                         --follow (gjob log -f <id>) to stream it until the job\n"
           "                         ends, exiting with the job's exit code\n"
           "  hold, h <ids...>       put queued jobs on hold\n"
           "  release, r <ids...>    release held jobs back to the queue; --at T: start\n"
           "                         them no earlier than T (see gjob release --help)\n"
           "  update, u <ids...> [options]\n"
           "                         change queued or held jobs (priority, time, command,\n"
           "                         GPUs, dependencies...; see gjob update --help)\n"
           "  redo <id|@> [options] [--cascade]\n"
           "                         submit a new job from an old one, with changes;\n"
           "                         --cascade also redoes the jobs cancelled because of\n"
           "                         it (see gjob redo --help)\n"
           "\n"
           "Job ids: 42, lists and ranges like 1,3,5-7, several arguments, @ for your\n"
           "latest job and @~N for the N-th before it.\n"
           "\n"
           "Options:\n"
           "      --socket PATH  the daemon's socket\n"
           "  -h, --help         show this help ('gjob <command> --help' for a command)\n"
           "  -V, --version      show the version\n");
}

static void gjob_help_show(void)
{
    printf("Usage: gjob show [options] <ids...>\n"
           "\n"
           "Shows every field of each job (all that -o json has), one 'Key: value' per\n"
           "line, named as gflow's gjob show names them where gflow has the field\n"
           "(SubmittedBy, GroupID, TaskID, WorkingDir, MemoryLimit, DependsOn, ...); a\n"
           "blank line between jobs. DependsOn lists each dependency with its kind and\n"
           "the state of the job it waits for ('5 (afterok: R, pending)').\n"
           "Ids: 42, 1,3,5-7, @, @~N; several arguments may be given.\n"
           "\n"
           "Options:\n"
           "  -o, --output FORMAT  table (the default 'Key: value' form) or json (an array\n"
           "                       of the jobs' full records)\n"
           "  -h, --help           show this help\n");
}

static void gjob_help_log(void)
{
    printf("Usage: gjob log [options] <id | @ | @~N>\n"
           "\n"
           "Prints the job's output (stdout and stderr) as it was written. For a job that\n"
           "has not started yet it says so (exit status 0).\n"
           "\n"
           "Options:\n"
           "  -f, --first N  only the first N lines\n"
           "  -l, --last N   only the last N lines\n"
           "      --follow   (or -f with no job id after it: 'gjob log -f 42', as tail -f)\n"
           "                 keep printing new output until the job has ended, then its\n"
           "                 final state on stderr ('gjob: job 5 ended: CD (Finished),\n"
           "                 exit code 0'); exits with the job's exit code: 0 for CD,\n"
           "                 1 for a signal, a time limit (TO) or a cancellation (CA),\n"
           "                 so that 'gjob log --follow @ && next' runs next on success\n"
           "  -h, --help     show this help\n");
}

static void gjob_help_ids(const char *cmd, const char *what)
{
    printf("Usage: gjob %s <ids...>\n"
           "\n"
           "%s\n"
           "Ids: 42, 1,3,5-7, @, @~N; several arguments may be given.\n"
           "\n"
           "Options:\n"
           "  -h, --help  show this help\n",
           cmd, what);
}

static void __attribute__((noreturn))
gjob_bad_option(const char *cmd, char **argv, int c, const struct option *longopts)
{
    cli_die(CLI_EXIT_USAGE, "%s for 'gjob %s'; see 'gjob %s --help'",
            cli_option_error(argv, c, longopts), cmd, cmd);
}

static int gjob_show(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    enum output_format fmt = OUTPUT_TABLE;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (output_format_parse(optarg, &fmt) < 0 || fmt == OUTPUT_CSV)
                cli_die(CLI_EXIT_USAGE,
                        "unknown output format '%s' for 'gjob show'; use table or json", optarg);
            break;
        case 'h':
            gjob_help_show();
            return 0;
        default:
            gjob_bad_option("show", argv, c, longopts);
        }
    }
    if (optind >= argc)
        cli_die(CLI_EXIT_USAGE, "which jobs? e.g. 'gjob show 42' or 'gjob show @'");
    size_t n;
    int64_t *ids = cli_parse_ids(argc - optind, argv + optind, &n);
    int status = 0;
    bool first = true;
    json_t *all = json_array();
    for (size_t i = 0; i < n; i++) {
        char *path = xasprintf("/v1/jobs/%lld", (long long)ids[i]);
        json_t *reply = NULL;
        if (cli_request_json("GET", path, NULL, NULL, &reply) < 0) {
            fflush(stdout);
            cli_warn("%s", cli_error_text(reply));
            status = CLI_EXIT_FAIL;
        } else if (fmt == OUTPUT_JSON) {
            json_array_append(all, reply);
        } else {
            struct job j;
            if (job_from_json(reply, &j) < 0) {
                cli_warn("gflowd sent job %lld in a form this gjob cannot read", (long long)ids[i]);
                status = CLI_EXIT_FAIL;
            } else {
                json_t *dep_states = jobshow_dep_states(reply);
                if (!first)
                    putchar('\n');
                first = false;
                jobshow_print(reply, &j, dep_states);
                json_decref(dep_states);
                job_clear(&j);
            }
        }
        json_decref(reply);
        free(path);
    }
    if (fmt == OUTPUT_JSON)
        output_json(all, stdout);
    json_decref(all);
    free(ids);
    return status;
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

/* The end of gjob log --follow: the log ends when the job has left the queue, so its
 * final state is stored or about to be; prints it and returns gjob_exit_status. */
static int gjob_follow_end(int64_t id)
{
    double deadline = now_mono() + 10;
    json_t *job = gjob_get(id);
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

static int gjob_write_cb(const char *data, size_t len, void *arg)
{
    while (len > 0) {
        ssize_t n = write(STDOUT_FILENO, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *(int *)arg = errno;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int64_t gjob_lines_arg(const char *opt, const char *s)
{
    int64_t v;
    if (parse_int64(s, &v) < 0 || v < 0)
        cli_die(CLI_EXIT_USAGE, "invalid line count '%s' for %s: use a whole number >= 0", s, opt);
    return v;
}

static int gjob_log(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"first", required_argument, NULL, OPT_FIRST},
        {"last", required_argument, NULL, 'l'},
        {"follow", no_argument, NULL, OPT_FOLLOW},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int64_t first = -1, last = -1;
    const char *short_f = NULL; /* -f's word: --first N, or the job of -f ID */
    bool follow = false;
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
    json_t *job = gjob_get(id);
    if (!gjob_has_started(job)) {
        enum job_state st = gjob_state_of(job);
        if (job_state_is_terminal(st)) { /* it never will */
            char *why = gjob_state_text(job);
            cli_warn("job %lld never started: %s", (long long)id, why);
            free(why);
            int status = follow ? gjob_exit_status(job) : 0;
            json_decref(job);
            return status;
        }
        cli_warn("job %lld has not started yet (%s)%s", (long long)id, job_state_short(st),
                 follow ? "; its log follows once it runs" : "");
        if (!follow) {
            json_decref(job);
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
    int write_errno = 0;
    if (client_request("GET", path.buf, NULL, 0, NULL, &r, gjob_write_cb, &write_errno, &err) < 0)
        cli_die(CLI_EXIT_FAIL, "%s", err);
    strbuf_free(&path);
    if (write_errno)
        cli_die(CLI_EXIT_FAIL, "cannot write the log: %s", strerror(write_errno));
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
        status = gjob_follow_end(id);
    }
    client_response_free(&r);
    return status;
}

/* hold and release: one POST /v1/jobs/hold|release for all the ids. */
static int gjob_transition(const char *cmd, int argc, char **argv)
{
    static const struct option hold_opts[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct option release_opts[] = {
        {"at", required_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool hold = !strcmp(cmd, "hold");
    const struct option *longopts = hold ? hold_opts : release_opts;
    double at = -1;
    char *err = NULL;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') {
            if (hold)
                gjob_help_ids("hold", "Puts queued jobs on hold: they stay queued but do not "
                                      "start until released.");
            else
                printf("Usage: gjob release [--at T] <ids...>\n"
                       "\n"
                       "Releases held jobs back to the queue.\n"
                       "Ids: 42, 1,3,5-7, @, @~N; several arguments may be given.\n"
                       "\n"
                       "Options:\n"
                       "      --at T  released now, but started no earlier than T (reason\n"
                       "              BeginTime until then): HH:MM[:SS] (today, or tomorrow\n"
                       "              once passed), YYYY-MM-DD[THH:MM[:SS]] or now+N[s|m|h|d]\n"
                       "              (also +N; a bare N is minutes, as in gflow)\n"
                       "  -h, --help  show this help\n");
            return 0;
        }
        if (c == 'a') {
            if (parse_begin_time(optarg, now_wall(), &at, &err) < 0)
                cli_die(CLI_EXIT_USAGE, "--at: %s", err);
            continue;
        }
        gjob_bad_option(cmd, argv, c, longopts);
    }
    if (optind >= argc)
        cli_die(CLI_EXIT_USAGE, "which jobs? e.g. 'gjob %s 42' or 'gjob %s 3-7'", cmd, cmd);
    size_t n;
    int64_t *ids = cli_parse_ids(argc - optind, argv + optind, &n);
    int status = 0;
    json_t *body = json_object();
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_integer(ids[i]));
    json_object_set_new(body, "ids", arr);
    if (at >= 0)
        json_object_set_new(body, "begin_time", json_real(at));
    char *path = xasprintf("/v1/jobs/%s", cmd);
    json_t *all = NULL;
    if (cli_request_json("POST", path, body, NULL, &all) < 0)
        cli_die(CLI_EXIT_FAIL, "%s", cli_error_text(all));
    json_decref(body);
    free(path);
    const json_t *results = json_object_get(all, "results");
    for (size_t i = 0; i < n; i++) {
        const json_t *reply = json_array_get(results, i);
        if (!json_is_integer(reply)) { /* refused: bare ids are done */
            fflush(stdout);
            cli_warn("%s", cli_error_text(reply));
            status = CLI_EXIT_FAIL;
        } else {
            if (at >= 0) {
                char *when = output_time(at);
                printf("Job %lld released back to queue, to start at %s.\n", (long long)ids[i],
                       when);
                free(when);
            } else {
                printf(hold ? "Job %lld put on hold.\n" : "Job %lld released back to queue.\n",
                       (long long)ids[i]);
            }
        }
    }
    json_decref(all);
    free(ids);
    return status;
}

/* ---- update and redo: gbatch's job options (jobopts), sent as spec fields ---- */

enum {
    OPT_UP_NO_SHARED = 300,
    OPT_UP_NO_DEPS,
    OPT_UP_AUTO_CANCEL,
    OPT_UP_NO_AUTO_CANCEL,
    OPT_UP_MAX_CONCURRENT,
    OPT_UP_PARAM,
    OPT_UP_CASCADE,
    OPT_UP_CLEAR_CONDA_ENV,
    OPT_UP_CLEAR_TIME_LIMIT,
    OPT_UP_CLEAR_MEMORY_LIMIT,
    OPT_UP_CLEAR_GPU_MEMORY_LIMIT,
    OPT_UP_CLEAR_MAX_CONCURRENT,
    OPT_UP_CLEAR_MAX_RETRIES,
};

/* update's and redo's own options, gflow's spellings among them; the job options are
 * jobopts'. */
static const struct option gjob_spec_own_longopts[] = {
    {"command", required_argument, NULL, 'c'},
    {"script", required_argument, NULL, 's'},
    {"memory-limit", required_argument, NULL, 'm'}, /* gflow's name of --memory */
    {"no-shared", no_argument, NULL, OPT_UP_NO_SHARED},
    {"no-dependencies", no_argument, NULL, OPT_UP_NO_DEPS},
    {"clear-deps", no_argument, NULL, OPT_UP_NO_DEPS},
    {"auto-cancel", no_argument, NULL, OPT_UP_AUTO_CANCEL},
    {"auto-cancel-on-dep-failure", no_argument, NULL, OPT_UP_AUTO_CANCEL},
    {"no-auto-cancel-on-dep-failure", no_argument, NULL, OPT_UP_NO_AUTO_CANCEL},
    {"max-concurrent", required_argument, NULL, OPT_UP_MAX_CONCURRENT},
    {"param", required_argument, NULL, OPT_UP_PARAM},
    {"cascade", no_argument, NULL, OPT_UP_CASCADE},
    {"clear-conda-env", no_argument, NULL, OPT_UP_CLEAR_CONDA_ENV},
    {"clear-time-limit", no_argument, NULL, OPT_UP_CLEAR_TIME_LIMIT},
    {"clear-memory-limit", no_argument, NULL, OPT_UP_CLEAR_MEMORY_LIMIT},
    {"clear-gpu-memory-limit", no_argument, NULL, OPT_UP_CLEAR_GPU_MEMORY_LIMIT},
    {"clear-max-concurrent", no_argument, NULL, OPT_UP_CLEAR_MAX_CONCURRENT},
    {"clear-max-retries", no_argument, NULL, OPT_UP_CLEAR_MAX_RETRIES},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* gflow's --clear-* options: each removes one field, which the same command line may not
 * also set. */
static const struct gjob_clear {
    int opt;
    const char *name;   /* the option */
    const char *setter; /* the option that sets the field, for the message */
    const char *field;  /* the spec field */
    bool to_null;       /* null removes it, else 0 */
} gjob_clears[] = {
    {OPT_UP_CLEAR_CONDA_ENV, "--clear-conda-env", "-e/--conda-env", "conda_env", true},
    {OPT_UP_CLEAR_TIME_LIMIT, "--clear-time-limit", "-t/--time", "time_limit", false},
    {OPT_UP_CLEAR_MEMORY_LIMIT, "--clear-memory-limit", "-m/--memory", "memory_mb", false},
    {OPT_UP_CLEAR_GPU_MEMORY_LIMIT, "--clear-gpu-memory-limit", "--gpu-memory", "gpu_memory_mb",
     false},
    {OPT_UP_CLEAR_MAX_CONCURRENT, "--clear-max-concurrent", "--max-concurrent", "max_concurrent",
     false},
    {OPT_UP_CLEAR_MAX_RETRIES, "--clear-max-retries", "--max-retries", "max_retries", false},
};
#define GJOB_CLEARS (sizeof(gjob_clears) / sizeof(gjob_clears[0]))

/* The getopt value of a long option of longopts (jobopts' own values are private). */
static int gjob_long_val(const struct option *longopts, const char *name)
{
    for (const struct option *o = longopts; o->name; o++)
        if (!strcmp(o->name, name))
            return o->val;
    abort(); /* a name of jobopts' table that is gone: a bug */
}

/* Applies the --clear-* options given (after the others, so that setting and clearing
 * the same field is caught whatever the order). */
static void gjob_apply_clears(const struct jobopts_ctx *ctx, const bool *given, json_t *spec)
{
    for (size_t i = 0; i < GJOB_CLEARS; i++) {
        const struct gjob_clear *c = &gjob_clears[i];
        if (!given[i])
            continue;
        if (json_object_get(spec, c->field))
            jobopts_error(ctx, "%s and %s cannot be used together", c->setter, c->name);
        json_object_set_new(spec, c->field, c->to_null ? json_null() : json_integer(0));
    }
}

/* Parses the options of gjob update / redo into a JSON object of spec fields.
 * redo: also --cascade. Returns optind. */
static int gjob_spec_parse(const char *cmd, int argc, char **argv, json_t *spec, bool redo,
                           void (*help)(void))
{
    char *usage = xasprintf("gjob %s", cmd);
    const struct jobopts_ctx ctx = {redo ? JOBOPTS_REDO : JOBOPTS_UPDATE, usage, NULL, 0};
    struct option *longopts = jobopts_longopts(gjob_spec_own_longopts);
    /* No '+': ids may come before the options, getopt permutes them. */
    char *shortopts = jobopts_shortopts(":", "c:s:e:h");
    bool clears[GJOB_CLEARS] = {false};
    int auto_cancel = -1; /* -1: not given; 0, 1: the last given, to catch contradictions */
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (c == 'e') /* gflow's short -e for --conda-env */
            c = gjob_long_val(longopts, "conda-env");
        if (c == OPT_UP_NO_AUTO_CANCEL)
            c = gjob_long_val(longopts, "no-auto-cancel");
        if (c == gjob_long_val(longopts, "no-auto-cancel") || c == OPT_UP_AUTO_CANCEL) {
            int on = c == OPT_UP_AUTO_CANCEL;
            if (auto_cancel == !on)
                jobopts_error(&ctx, "--auto-cancel-on-dep-failure and "
                                    "--no-auto-cancel-on-dep-failure cannot be used together");
            auto_cancel = on;
        }
        if (jobopts_apply(&ctx, c, optarg, spec))
            continue;
        bool cleared = false;
        for (size_t i = 0; i < GJOB_CLEARS; i++) {
            if (gjob_clears[i].opt == c)
                clears[i] = cleared = true;
        }
        if (cleared) {
            if (c == OPT_UP_CLEAR_MAX_CONCURRENT && redo)
                jobopts_error(&ctx, "--clear-max-concurrent is for 'gjob update' and 'gctl "
                                    "set-limit'");
            continue;
        }
        int64_t v;
        switch (c) {
        case 'c': {
            if (!*optarg)
                jobopts_error(&ctx, "the command is empty");
            json_t *command = json_string(optarg);
            if (!command)
                jobopts_error(&ctx, "the command is not valid UTF-8 text");
            json_object_set_new(spec, "command", command);
            break;
        }
        case 's': {
            size_t len;
            char *text = read_file(optarg, &len);
            if (!text)
                cli_die(CLI_EXIT_USAGE, "cannot read the script %s given to --script: %s", optarg,
                        strerror(errno));
            char *path = realpath(optarg, NULL);
            json_object_set_new(spec, "script", json_stringn(text, len));
            json_object_set_new(spec, "script_path", json_string(path ? path : optarg));
            free(text);
            free(path);
            break;
        }
        case OPT_UP_NO_SHARED:
            json_object_set_new(spec, "shared", json_false());
            break;
        case OPT_UP_NO_DEPS:
            json_object_set_new(spec, "depends_on", json_array());
            json_object_del(spec, "depends_mode");
            break;
        case OPT_UP_AUTO_CANCEL:
            json_object_set_new(spec, "auto_cancel", json_true());
            break;
        case OPT_UP_MAX_CONCURRENT:
            if (redo)
                jobopts_error(&ctx, "--max-concurrent is for 'gjob update' and 'gctl set-limit'");
            if (parse_int64(optarg, &v) < 0 || v < 0)
                jobopts_error(&ctx, "invalid value '%s' for --max-concurrent: a whole number >= 0",
                              optarg);
            json_object_set_new(spec, "max_concurrent", json_integer(v));
            break;
        case OPT_UP_PARAM: {
            /* A sweep's job: one new value (not gbatch's list or range of values). */
            const char *eq = strchr(optarg, '=');
            char *pname = eq ? xstrndup(optarg, (size_t)(eq - optarg)) : NULL;
            if (!pname || !param_name_valid(pname))
                jobopts_error(&ctx,
                              "invalid --param '%s': use NAME=VALUE (NAME: letters, digits and "
                              "'_', not starting with a digit)",
                              optarg);
            json_t *value = json_string(eq + 1);
            if (!value)
                jobopts_error(&ctx, "--param %s: the value is not valid UTF-8", pname);
            json_t *ps = json_object_get(spec, "params");
            if (!ps) {
                ps = json_object();
                json_object_set_new(spec, "params", ps);
            }
            json_object_set_new(ps, pname, value);
            free(pname);
            break;
        }
        case OPT_UP_CASCADE:
            if (!redo)
                jobopts_error(&ctx, "--cascade is for 'gjob redo'");
            json_object_set_new(spec, "cascade", json_true());
            break;
        case 'h':
            help();
            exit(0);
        default:
            gjob_bad_option(cmd, argv, c, longopts);
        }
    }
    gjob_apply_clears(&ctx, clears, spec);
    free(shortopts);
    free(longopts);
    free(usage);
    return optind;
}

/* The options of update (redo false) or redo: the job options from jobopts' table, with
 * update's and redo's own in their groups. */
static void gjob_help_spec(bool redo)
{
    enum jobopts_cmd cmd = redo ? JOBOPTS_REDO : JOBOPTS_UPDATE;
    printf("Options:\n");
    jobopts_help(JOBOPTS_GENERAL, cmd);
    jobopts_help_line("    --memory-limit M", "the same as --memory (gflow's name)");
    jobopts_help_line("-e NAME", "the same as --conda-env NAME");
    jobopts_help_line("-c, --command CMD",
                      "run CMD instead of the job's command or script (by /bin/bash)");
    jobopts_help_line("-s, --script FILE",
                      "run this script file instead (its directives are not read)");
    jobopts_help_line("    --param NAME=VALUE",
                      "(a sweep's job, gbatch --param) a new value for one of its parameters "
                      "(repeatable); its command or script, and its name if the sweep had "
                      "--name-template, are filled in again from their templates, the value "
                      "safely quoted. For such a job -c, --script and -J are templates ({NAME})");
    if (!redo)
        jobopts_help_line("    --max-concurrent K",
                          "at most K jobs of the job's submission run at once, 0 for no limit "
                          "(as 'gctl set-limit')");
    printf("\nRemoving a setting (gflow's options; not together with the option that sets "
           "it):\n");
    jobopts_help_line("    --clear-time-limit", "no time limit (the same as -t 0)");
    jobopts_help_line("    --clear-memory-limit", "no memory limit (the same as -m 0)");
    jobopts_help_line("    --clear-gpu-memory-limit",
                      "no GPU memory per GPU (a --shared job needs one)");
    jobopts_help_line("    --clear-conda-env", "no conda environment (the same as -e '')");
    jobopts_help_line("    --clear-max-retries", "no retries (the same as --max-retries 0)");
    if (!redo)
        jobopts_help_line("    --clear-max-concurrent",
                          "no limit on the submission's running jobs (--max-concurrent 0)");
    printf("\nGPUs:\n");
    jobopts_help(JOBOPTS_GPUS, cmd);
    jobopts_help_line("    --no-shared", "do not share GPUs (undoes --shared)");
    printf("\nDependencies (X: a job id, @ for your latest job, @~N for the N-th before it):\n");
    jobopts_help(JOBOPTS_DEPS, cmd);
    jobopts_help_line("    --no-dependencies, --clear-deps",
                      redo ? "do not wait for the old job's dependencies (the same as -d none)"
                           : "remove every dependency (the same as -d none)");
    jobopts_help_line("    --auto-cancel, --auto-cancel-on-dep-failure",
                      "cancel the job if a dependency can no longer be met (undoes "
                      "--no-auto-cancel)");
    jobopts_help_line("    --no-auto-cancel-on-dep-failure", "the same as --no-auto-cancel");
    printf("\nOther options:\n");
    if (redo)
        jobopts_help_line("    --cascade",
                          "also redo the jobs that were cancelled because of this one "
                          "(DependencyFailed), transitively, wired to the new jobs");
    jobopts_help_line("-h, --help", "show this help");
}

static void gjob_help_update(void)
{
    printf("Usage: gjob update <ids...> [options]\n"
           "\n"
           "Changes queued (PD) or held (H) jobs; running and ended jobs cannot be changed\n"
           "(see 'gjob redo'). The options are gbatch's; the changes are checked like a\n"
           "submission; prints each change as the option that makes it, old -> new\n"
           "('--memory: none -> 1G').\n"
           "Ids: 42, 1,3,5-7, @, @~N.\n"
           "\n");
    gjob_help_spec(false);
    printf("\n"
           "Examples:\n"
           "  gjob update 12 -p 50 -t 2:00:00\n"
           "  gjob update 12 --depends-on none       run without waiting for anything\n"
           "  gjob update 12 -c 'python train.py --lr 0.01'\n"
           "  gjob update 12 --param lr=0.2          a sweep's job: new value, new command\n"
           "  gjob update 12-15 --clear-time-limit   several jobs at once\n");
}

static void gjob_help_redo(void)
{
    printf("Usage: gjob redo <id|@> [options]\n"
           "\n"
           "Submits a new job from an existing one (in any state): the same command or\n"
           "script, environment, directory and options, changed by the options given\n"
           "(gbatch's).\n"
           "\n");
    gjob_help_spec(true);
    printf("\n"
           "Examples:\n"
           "  gjob redo 42 -t 8:00:00                more time this round\n"
           "  gjob redo @ -e torch2 --clear-deps     another conda env, start at once\n"
           "  gjob redo 42 --cascade                 with what its failure cancelled\n");
}

/* The option that changes each field an update reports, as the user would type it. */
static const struct {
    const char *field, *option;
} gjob_change_options[] = {
    {"params", "--param"},
    {"name", "--name"},
    {"command", "--command"},
    {"script_path", "--script"},
    {"script", "--script"},
    {"priority", "--priority"},
    {"time_limit", "--time"},
    {"gpus", "--gpus"},
    {"gpu_memory_mb", "--gpu-memory"},
    {"shared", "--shared"},
    {"gpus_per_task", "--gpus-per-task"},
    {"memory_mb", "--memory"},
    {"conda_env", "--conda-env"},
    {"signal_spec", "--signal"},
    {"begin_time", "--begin"},
    {"max_retries", "--max-retries"},
    {"depends_on", "--depends-on"},
    {"auto_cancel", "--auto-cancel-on-dep-failure"},
    {"umask", "--umask"},
    {"mig_profile", "--mig"},
    {"mig_count", "--mig"},
    {"max_concurrent", "--max-concurrent"},
};

/* "--memory" for memory_mb; the field itself for one no option changes (workdir, env). */
static const char *gjob_change_option(const char *field, const json_t *new_value)
{
    if (!strcmp(field, "depends_mode")) /* --depends-on-all or --depends-on-any */
        return json_is_string(new_value) && !strcmp(json_string_value(new_value), "any")
                   ? "--depends-on-any"
                   : "--depends-on-all";
    for (size_t i = 0; i < sizeof(gjob_change_options) / sizeof(gjob_change_options[0]); i++)
        if (!strcmp(field, gjob_change_options[i].field))
            return gjob_change_options[i].option;
    return field;
}

/* A value as the option takes it: "1G" for sizes, "1:00:00" for time limits, "none"
 * where the field is unset, "lr=0.1 bs=32" for params, "yes"/"no", else the value. */
static char *gjob_change_text(const char *field, const json_t *v)
{
    if (!v || json_is_null(v))
        return xstrdup("none");
    if ((!strcmp(field, "memory_mb") || !strcmp(field, "gpu_memory_mb")) && json_is_integer(v))
        return jobshow_mib(json_integer_value(v));
    if (!strcmp(field, "time_limit") && json_is_integer(v))
        return json_integer_value(v) ? format_duration(json_integer_value(v)) : xstrdup("none");
    if (!strcmp(field, "max_concurrent") && json_is_integer(v) && json_integer_value(v) == 0)
        return xstrdup("none");
    if (!strcmp(field, "begin_time") && json_is_number(v))
        return json_number_value(v) > 0 ? output_time(json_number_value(v)) : xstrdup("none");
    if (json_is_boolean(v))
        return xstrdup(json_is_true(v) ? "yes" : "no");
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (!strcmp(field, "params") && json_is_object(v))
        return jobshow_params(v);
    if (!strcmp(field, "depends_on")) {
        struct strbuf sb;
        strbuf_init(&sb);
        size_t i;
        const json_t *d;
        json_array_foreach (v, i, d)
            strbuf_addf(&sb, "%s%s:%lld", i ? "," : "",
                        json_string_value(json_object_get(d, "kind")),
                        (long long)json_integer_value(json_object_get(d, "id")));
        if (!sb.len)
            strbuf_adds(&sb, "none");
        return strbuf_detach(&sb);
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    return s ? s : xstrdup("?");
}

/* "Job 5 updated: --memory: none -> 1G, --time: 10:00 -> none". */
static void gjob_print_changes(int64_t id, const json_t *changes)
{
    if (!json_array_size(changes)) {
        printf("Job %lld unchanged.\n", (long long)id);
        return;
    }
    printf("Job %lld updated: ", (long long)id);
    size_t k;
    const json_t *ch;
    json_array_foreach (changes, k, ch) {
        const char *f = json_string_value(json_object_get(ch, "field"));
        const json_t *new_value = json_object_get(ch, "new");
        char *a = gjob_change_text(f ? f : "", json_object_get(ch, "old"));
        char *b = gjob_change_text(f ? f : "", new_value);
        printf("%s%s: %s -> %s", k ? ", " : "", gjob_change_option(f ? f : "?", new_value), a, b);
        free(a);
        free(b);
    }
    putchar('\n');
}

static int gjob_update(int argc, char **argv)
{
    json_t *spec = json_object();
    /* Ids may come before or after the options: permute as getopt does. */
    int first = gjob_spec_parse("update", argc, argv, spec, false, gjob_help_update);
    if (first >= argc)
        cli_die(CLI_EXIT_USAGE, "which jobs? e.g. 'gjob update 42 --priority 50'");
    if (json_object_size(spec) == 0)
        cli_die(CLI_EXIT_USAGE, "nothing to change; see 'gjob update --help'");
    size_t n;
    int64_t *ids = cli_parse_ids(argc - first, argv + first, &n);
    int status = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = xasprintf("/v1/jobs/%lld", (long long)ids[i]);
        json_t *reply = NULL;
        if (cli_request_json("PATCH", path, spec, NULL, &reply) < 0) {
            fflush(stdout);
            cli_warn("%s", cli_error_text(reply));
            status = CLI_EXIT_FAIL;
        } else {
            gjob_print_changes(ids[i], json_object_get(reply, "changes"));
        }
        json_decref(reply);
        free(path);
    }
    free(ids);
    json_decref(spec);
    return status;
}

static int gjob_redo(int argc, char **argv)
{
    json_t *spec = json_object();
    int first = gjob_spec_parse("redo", argc, argv, spec, true, gjob_help_redo);
    if (first >= argc)
        cli_die(CLI_EXIT_USAGE, "which job? e.g. 'gjob redo 42' or 'gjob redo @'");
    size_t n;
    int64_t *ids = cli_parse_ids(argc - first, argv + first, &n);
    int status = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = xasprintf("/v1/jobs/%lld/redo", (long long)ids[i]);
        json_t *reply = NULL;
        if (cli_request_json("POST", path, spec, NULL, &reply) < 0) {
            fflush(stdout);
            cli_warn("%s", cli_error_text(reply));
            status = CLI_EXIT_FAIL;
        } else {
            size_t k;
            const json_t *jb;
            json_array_foreach (json_object_get(reply, "jobs"), k, jb) {
                const char *name = json_string_value(json_object_get(jb, "name"));
                printf("Submitted batch job %lld (%s) (redo of %lld)\n",
                       (long long)json_integer_value(json_object_get(jb, "id")), name ? name : "-",
                       (long long)json_integer_value(json_object_get(jb, "redo_of")));
            }
        }
        json_decref(reply);
        free(path);
    }
    free(ids);
    json_decref(spec);
    return status;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    cli_init(argv[0]);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hV", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_SOCKET:
            client_set_socket(optarg);
            break;
        case 'h':
            gjob_help();
            return 0;
        case 'V':
            printf("gjob %s\n", GFLOW_VERSION);
            return 0;
        default:
            cli_usage_error("%s", cli_option_error(argv, c, longopts));
        }
    }
    if (optind >= argc)
        cli_usage_error("no command given; use show, log, hold, release, update or redo");
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    int status;
    if (!strcmp(cmd, "show") || !strcmp(cmd, "s"))
        status = gjob_show(sub_argc, sub_argv);
    else if (!strcmp(cmd, "log") || !strcmp(cmd, "l"))
        status = gjob_log(sub_argc, sub_argv);
    else if (!strcmp(cmd, "hold") || !strcmp(cmd, "h"))
        status = gjob_transition("hold", sub_argc, sub_argv);
    else if (!strcmp(cmd, "release") || !strcmp(cmd, "r"))
        status = gjob_transition("release", sub_argc, sub_argv);
    else if (!strcmp(cmd, "update") || !strcmp(cmd, "u"))
        status = gjob_update(sub_argc, sub_argv);
    else if (!strcmp(cmd, "redo"))
        status = gjob_redo(sub_argc, sub_argv);
    else if (!strcmp(cmd, "help"))
        gjob_help(), status = 0;
    else
        cli_usage_error("unknown command '%s'; use show, log, hold, release, update or redo", cmd);
    return cli_finish(status);
}
