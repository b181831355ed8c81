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
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "files.h"
#include "gflow_build.h"
#include "gpuinfo.h"
#include "job.h"
#include "jobopts.h"
#include "output.h"
#include "parse.h"
#include "util.h"

enum { OPT_SOCKET = 256, OPT_FOLLOW };

static void gjob_help(void)
{
    printf("gjob - inspect and control gflow jobs\n"
           "\n"
           "Usage: gjob [--socket PATH] <command> [options] <job ids>\n"
           "\n"
           "Commands:\n"
           "  show, s <ids...>       show every field of the jobs (-o json for JSON)\n"
           "  log, l <id>            print a job's output: -f/--first N, -l/--last N lines,\n"
           "                         --follow to stream it until the job ends\n"
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
           "Shows every field of each job, one 'Key: value' per line, a blank line\n"
           "between jobs.\n"
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
           "Prints the job's output (stdout and stderr) as it was written.\n"
           "\n"
           "Options:\n"
           "  -f, --first N  only the first N lines\n"
           "  -l, --last N   only the last N lines\n"
           "      --follow   keep printing new output until the job has ended\n"
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

/* "123 KiB", "12.3 MiB", "1.50 GiB". */
static char *gjob_kib(int64_t kb)
{
    if (kb < 1024)
        return xasprintf("%lld KiB", (long long)kb);
    if (kb < 1024 * 1024)
        return xasprintf("%.1f MiB", kb / 1024.0);
    return xasprintf("%.2f GiB", kb / (1024.0 * 1024.0));
}

static void gjob_field(const char *key, const char *value)
{
    fputs(key, stdout);
    fputs(": ", stdout);
    for (const unsigned char *p = (const unsigned char *)(value ? value : "-"); *p; p++)
        putchar(*p == '\n' ? ' ' : *p);
    putchar('\n');
}

static void gjob_field_owned(const char *key, char *value)
{
    gjob_field(key, value);
    free(value);
}

/* A MIG job: "MIG: 1g.18gb:1", then one line per instance it holds with its memory
 * ("MIG 0: MIG-<uuid> 1g.18gb 2048/18176 MiB"). */
static void gjob_print_mig(const json_t *raw, const struct job *j)
{
    if (!j->mig_profile)
        return;
    gjob_field_owned("MIG", xasprintf("%s:%d", j->mig_profile, j->mig_count));
    size_t i;
    const json_t *m;
    json_array_foreach (json_object_get(raw, "mig_detail"), i, m) {
        const json_t *used = json_object_get(m, "memory_used_mib");
        char *key = xasprintf("MIG %zu", i);
        char *usedtxt = json_is_integer(used)
                            ? xasprintf("%lld", (long long)json_integer_value(used))
                            : xstrdup("?");
        gjob_field_owned(
            key, xasprintf("%s %s on GPU %lld, %s/%lld MiB",
                           json_string_value(json_object_get(m, "uuid")),
                           json_string_value(json_object_get(m, "profile")),
                           (long long)json_integer_value(json_object_get(m, "parent")), usedtxt,
                           (long long)json_integer_value(json_object_get(m, "memory_total_mib"))));
        free(usedtxt);
        free(key);
    }
}

/* The GPU request ("GPUs: 2 (shared, 20480 MiB each)"), the ids once allocated, and
 * one line per allocated GPU from gpus_detail ("GPU 0: GPU-<uuid> 00000000:3B:00.0")
 * so the physical GPU is never in doubt. Read from the raw reply: the shared and
 * memory fields are not part of every job form. */
static void gjob_print_gpus(const json_t *raw, const struct job *j)
{
    const json_t *mem = json_object_get(raw, "gpu_memory_mb");
    gjob_field_owned("GPUs",
                     output_gpu_request(j->gpus, json_is_true(json_object_get(raw, "shared")),
                                        json_is_integer(mem) ? json_integer_value(mem) : 0));
    const json_t *per_task = json_object_get(raw, "gpus_per_task");
    if (json_is_integer(per_task) && json_integer_value(per_task) > 0)
        gjob_field_owned("GPUsPerTask", xasprintf("%lld", (long long)json_integer_value(per_task)));
    gjob_field_owned("GPUIDs", j->gpu_mask ? gpu_mask_format(j->gpu_mask) : NULL);
    const json_t *detail = json_object_get(raw, "gpus_detail");
    size_t i;
    const json_t *g;
    json_array_foreach (detail, i, g) {
        const json_t *index = json_object_get(g, "index");
        const char *uuid = json_string_value(json_object_get(g, "uuid"));
        const char *bus = json_string_value(json_object_get(g, "pci_bus_id"));
        char *key = json_is_integer(index)
                        ? xasprintf("GPU %lld", (long long)json_integer_value(index))
                        : xstrdup("GPU ?");
        gjob_field_owned(key, xasprintf("%s %s", uuid ? uuid : "?", bus ? bus : "?"));
        free(key);
    }
    /* Processes of this job seen on GPUs it was not given (a program that ignores
     * CUDA_VISIBLE_DEVICES): worth a warning line. */
    const json_t *foreign = json_object_get(raw, "foreign_gpus");
    if (json_array_size(foreign)) {
        struct strbuf sb;
        strbuf_init(&sb);
        json_array_foreach (foreign, i, g)
            strbuf_addf(&sb, "%s%lld", i ? "," : "", (long long)json_integer_value(g));
        gjob_field_owned("ForeignGPUs",
                         xasprintf("%s (the job runs processes on GPUs it was not given)", sb.buf));
        strbuf_free(&sb);
    }
}

/* A sweep's parameters as "lr=0.1 bs=32" (each value shell-quoted if it needs it). */
static char *gjob_params_text(const json_t *params)
{
    struct strbuf sb;
    strbuf_init(&sb);
    const char *key;
    const json_t *v;
    json_object_foreach ((json_t *)params, key, v) {
        char *q = shell_quote(json_is_string(v) ? json_string_value(v) : "");
        strbuf_addf(&sb, "%s%s=%s", sb.len ? " " : "", key, q);
        free(q);
    }
    return strbuf_detach(&sb);
}

static void gjob_print_job(const json_t *raw, const struct job *j)
{
    gjob_field_owned("ID", xasprintf("%lld", (long long)j->id));
    gjob_field("Name", j->name);
    gjob_field("User", j->user);
    gjob_field_owned("State",
                     xasprintf("%s (%s)", job_display_state(j), job_display_state_name(j)));
    gjob_field_owned("Priority", xasprintf("%d", j->priority));
    if (j->command)
        gjob_field("Command", j->command);
    else
        gjob_field("Script", j->script_path);
    const json_t *params = json_object_get(raw, "params");
    if (json_is_object(params))
        gjob_field_owned("Params", gjob_params_text(params));
    gjob_field("WorkDir", j->workdir);
    gjob_field_owned("SubmitTime", output_time(j->submit_time));
    gjob_field_owned("StartTime", output_time(j->start_time));
    gjob_field_owned("EndTime", output_time(j->end_time));
    gjob_field_owned("Elapsed", output_job_elapsed(j, now_wall()));
    gjob_field_owned("TimeLimit", output_job_time_limit(j));
    gjob_field_owned("ExitCode", j->exit_code >= 0 ? xasprintf("%d", j->exit_code) : xstrdup("-"));
    const char *sig = json_string_value(json_object_get(raw, "signal_name"));
    if (j->signal > 0)
        gjob_field_owned("Signal",
                         xasprintf("%s (%d)", sig ? sig : job_signal_name(j->signal), j->signal));
    else
        gjob_field("Signal", "-");
    gjob_field("OOM", j->oom ? "yes" : "no");
    gjob_field_owned("Reason", output_job_reason(j));
    if (json_is_true(json_object_get(raw, "cancelling")))
        gjob_field("Cancelling", "yes");
    /* Retries: "Attempt: 2 of 4", then where it came from and what replaced it. */
    if (j->max_retries > 0 || j->attempt > 1 || j->retry_of > 0) {
        gjob_field_owned("Attempt", xasprintf("%d of %d", j->attempt, j->max_retries + 1));
        if (j->retry_of > 0)
            gjob_field_owned("RetryOf", xasprintf("%lld", (long long)j->retry_of));
        const json_t *next = json_object_get(raw, "retried_as");
        if (json_is_integer(next))
            gjob_field_owned("RetriedAs", xasprintf("%lld", (long long)json_integer_value(next)));
    }
    gjob_print_gpus(raw, j);
    gjob_print_mig(raw, j);
    gjob_field_owned("Memory", j->memory_mb > 0 ? xasprintf("%lld MiB", (long long)j->memory_mb)
                                                : xstrdup("-"));
    gjob_field("CondaEnv", j->conda_env);
    gjob_field("WarnSignal", json_string_value(json_object_get(raw, "signal_spec")));
    gjob_field_owned("BeginTime", output_time(j->begin_time));
    /* A job stored without one runs with gflowd's own (docs/usage.md). */
    const char *mask = json_string_value(json_object_get(raw, "umask"));
    gjob_field_owned("Umask", mask ? xstrdup(mask) : xstrdup("0077 (none given)"));
    gjob_field_owned("ShimPID",
                     j->shim_pid > 0 ? xasprintf("%lld", (long long)j->shim_pid) : xstrdup("-"));
    gjob_field_owned("MaxRSS", j->max_rss_kb > 0 ? gjob_kib(j->max_rss_kb) : xstrdup("-"));
    gjob_field("LogPath", json_string_value(json_object_get(raw, "log_path")));
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
                if (!first)
                    putchar('\n');
                first = false;
                gjob_print_job(reply, &j);
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
        {"first", required_argument, NULL, 'f'},
        {"last", required_argument, NULL, 'l'},
        {"follow", no_argument, NULL, OPT_FOLLOW},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int64_t first = -1, last = -1;
    bool follow = false;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:l:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
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
    if (optind >= argc)
        cli_die(CLI_EXIT_USAGE, "which job? e.g. 'gjob log 42' or 'gjob log @'");
    if (argc - optind > 1)
        cli_die(CLI_EXIT_USAGE, "'gjob log' shows one job's log; got %d arguments", argc - optind);
    if (first >= 0 && last >= 0)
        cli_die(CLI_EXIT_USAGE, "--first and --last cannot be used together");
    if (follow && (first >= 0 || last >= 0))
        cli_die(CLI_EXIT_USAGE, "--follow prints the whole log as it grows; it cannot "
                                "be combined with --first or --last");
    size_t n;
    int64_t *ids = cli_parse_ids(1, argv + optind, &n);
    if (n != 1)
        cli_die(CLI_EXIT_USAGE, "'gjob log' shows one job's log; '%s' names %zu jobs", argv[optind],
                n);

    struct strbuf path;
    strbuf_init(&path);
    strbuf_addf(&path, "/v1/jobs/%lld/log", (long long)ids[0]);
    if (first >= 0)
        strbuf_addf(&path, "?first=%lld", (long long)first);
    if (last >= 0)
        strbuf_addf(&path, "?last=%lld", (long long)last);
    if (follow)
        strbuf_adds(&path, "?follow=1");
    free(ids);

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
    OPT_UP_SCRIPT = 300,
    OPT_UP_NO_SHARED,
    OPT_UP_NO_DEPS,
    OPT_UP_AUTO_CANCEL,
    OPT_UP_MAX_CONCURRENT,
    OPT_UP_PARAM,
    OPT_UP_CASCADE
};

/* update's and redo's own options; the job options are jobopts'. */
static const struct option gjob_spec_own_longopts[] = {
    {"command", required_argument, NULL, 'c'},
    {"script", required_argument, NULL, OPT_UP_SCRIPT},
    {"no-shared", no_argument, NULL, OPT_UP_NO_SHARED},
    {"no-dependencies", no_argument, NULL, OPT_UP_NO_DEPS},
    {"auto-cancel", no_argument, NULL, OPT_UP_AUTO_CANCEL},
    {"max-concurrent", required_argument, NULL, OPT_UP_MAX_CONCURRENT},
    {"param", required_argument, NULL, OPT_UP_PARAM},
    {"cascade", no_argument, NULL, OPT_UP_CASCADE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Parses the options of gjob update / redo into a JSON object of spec fields.
 * redo: also --cascade. Returns optind. */
static int gjob_spec_parse(const char *cmd, int argc, char **argv, json_t *spec, bool redo,
                           void (*help)(void))
{
    char *usage = xasprintf("gjob %s", cmd);
    const struct jobopts_ctx ctx = {redo ? JOBOPTS_REDO : JOBOPTS_UPDATE, usage, NULL, 0};
    struct option *longopts = jobopts_longopts(gjob_spec_own_longopts);
    /* No '+': ids may come before the options, getopt permutes them. */
    char *shortopts = jobopts_shortopts(":", "c:h");
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (jobopts_apply(&ctx, c, optarg, spec))
            continue;
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
        case OPT_UP_SCRIPT: {
            size_t len;
            char *text = read_file(optarg, &len);
            if (!text)
                cli_die(CLI_EXIT_FAIL, "cannot read script %s: %s", optarg, strerror(errno));
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
    jobopts_help_line("-c, --command CMD",
                      "run CMD instead of the job's command or script (by /bin/bash)");
    jobopts_help_line("    --script FILE",
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
    printf("\nGPUs:\n");
    jobopts_help(JOBOPTS_GPUS, cmd);
    jobopts_help_line("    --no-shared", "do not share GPUs (undoes --shared)");
    printf("\nDependencies (X: a job id, @ for your latest job, @~N for the N-th before it):\n");
    jobopts_help(JOBOPTS_DEPS, cmd);
    jobopts_help_line("    --no-dependencies", "remove every dependency (the same as -d none)");
    jobopts_help_line("    --auto-cancel",
                      "cancel the job if a dependency can no longer be met (undoes "
                      "--no-auto-cancel)");
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
           "submission; prints the changed fields.\n"
           "Ids: 42, 1,3,5-7, @, @~N.\n"
           "\n");
    gjob_help_spec(false);
    printf("\n"
           "Examples:\n"
           "  gjob update 12 -p 50 -t 2:00:00\n"
           "  gjob update 12 --depends-on none       run without waiting for anything\n"
           "  gjob update 12 -c 'python train.py --lr 0.01'\n"
           "  gjob update 12 --param lr=0.2          a sweep's job: new value, new command\n");
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
}

/* "1:00:00" for time limits, "lr=0.1 bs=32" for params, else the JSON value as text. */
static char *gjob_change_text(const char *field, const json_t *v)
{
    if (!v || json_is_null(v))
        return xstrdup("-");
    if (!strcmp(field, "time_limit") && json_is_integer(v))
        return json_integer_value(v) ? format_duration(json_integer_value(v)) : xstrdup("none");
    if (!strcmp(field, "begin_time") && json_is_number(v))
        return json_number_value(v) > 0 ? output_time(json_number_value(v)) : xstrdup("-");
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (!strcmp(field, "params") && json_is_object(v))
        return gjob_params_text(v);
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
            const json_t *changes = json_object_get(reply, "changes");
            if (!json_array_size(changes)) {
                printf("Job %lld unchanged.\n", (long long)ids[i]);
            } else {
                printf("Job %lld updated: ", (long long)ids[i]);
                size_t k;
                const json_t *ch;
                json_array_foreach (changes, k, ch) {
                    const char *f = json_string_value(json_object_get(ch, "field"));
                    char *a = gjob_change_text(f, json_object_get(ch, "old"));
                    char *b = gjob_change_text(f, json_object_get(ch, "new"));
                    char *label = xstrdup(f ? f : "?");
                    for (char *p = label; *p; p++)
                        if (*p == '_')
                            *p = ' ';
                    printf("%s%s %s -> %s", k ? ", " : "", label, a, b);
                    free(label);
                    free(a);
                    free(b);
                }
                putchar('\n');
            }
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
