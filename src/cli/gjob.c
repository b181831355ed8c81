/* gjob: acts on existing jobs, like gflow's gjob.
 *
 *   gjob show <ids...>       every field of each job
 *   gjob log <id>            the job's output (--first/--last N lines, --follow)
 *   gjob why <id>            why it waits or failed (gjob_why.c)
 *   gjob hold <ids...>       queued -> held
 *   gjob release <ids...>    held -> queued
 *   gjob update <ids...>     change queued or held jobs (PATCH /v1/jobs/{id})
 *   gjob redo <id>           a new job from an old one (--cascade: its cancelled chain)
 *   gjob attach <id>         the terminal of a --pty job (gjob_attach.c)
 *
 * Commands that take several ids go through all of them: a job that fails (unknown,
 * wrong state, not yours) gets one line on stderr and makes the exit status 1, and the
 * others are still processed.
 *
 * This file holds the dispatch, show, hold and release; gjob log is in gjob_log.c, update
 * and redo in gjob_update.c (gjob_internal.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "clock.h"
#include "completion.h"
#include "gjob_internal.h"
#include "job.h"
#include "jobshow.h"
#include "output.h"
#include "parse.h"
#include "util.h"

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
           "  why, w <id>            explain a job: why it waits (reason, place in the\n"
           "                         queue, expected start) or why it failed (failure\n"
           "                         class, matched log line, last log lines)\n"
           "  attach, a <id>         connect this terminal to a running 'gbatch --pty' job\n"
           "                         (Ctrl-b d detaches; see gjob attach --help)\n"
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
           "  close-sessions, close  gflow's command to close its jobs' tmux sessions: jobs\n"
           "                         here have none, so it says so and exits 0\n"
           "  completion <shell>     print a completion script: bash, elvish, fish,\n"
           "                         powershell or zsh\n"
           "\n"
           "Job ids: 42, lists and ranges like 1,3,5-7, several arguments, @ for your\n"
           "latest job and @~N for the N-th before it.\n"
           "\n"
           "Options:\n"
           "      --socket PATH  the daemon's socket\n"
           "      --config FILE  the config file whose timezone (and\n"
           "                     daemon.socket_path) to use\n"
           "  -h, --help         show this help ('gjob <command> --help' for a command)\n"
           "  -V, --version      show the version\n");
}

static void gjob_help_show(void)
{
    printf("Usage: gjob show [options] <ids...>\n"
           "\n"
           "Shows each job as gflow does: headings (Job Details, Parameters, Resources,\n"
           "Execution, Dependencies, Timing, then Outcome, GPU Use and Supervision) over\n"
           "'  Key=Value' lines, named as gflow's gjob show names them (SubmittedBy,\n"
           "GroupID, TaskID, WorkingDir, MemoryLimit, DependsOn, ...). A field with\n"
           "nothing to say (no limit, not started) is left out; -v shows it as '-'.\n"
           "Submitted says how long the job waited, Started how long it has run so far,\n"
           "Finished its run time. GPU Use: its GPUs' utilisation (mean, peak), memory\n"
           "peak and energy, so far while it runs. DependsOn lists each dependency with\n"
           "its kind and the\n"
           "state of the job it waits for ('5 (afterok: R, pending)'). Jobs are separated\n"
           "by a line of '='.\n"
           "Ids: 42, 1,3,5-7, @, @~N; several arguments may be given.\n"
           "\n"
           "Options:\n"
           "  -v, --verbose        every field, '-' for those with nothing to say\n"
           "  -o, --output FORMAT  table (the default Key=Value form) or json (an array\n"
           "                       of the jobs' full records)\n"
           "  -h, --help           show this help\n");
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

void __attribute__((noreturn))
gjob_bad_option(const char *cmd, char **argv, int c, const struct option *longopts)
{
    cli_die(CLI_EXIT_USAGE, "%s for 'gjob %s'; see 'gjob %s --help'",
            cli_option_error(argv, c, longopts), cmd, cmd);
}

static int gjob_show(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    enum output_format fmt = OUTPUT_TABLE;
    bool verbose = false;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'v':
            verbose = true;
            break;
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
                if (!first) /* gflow's separator */
                    printf("\n%s\n\n", "================================================"
                                       "================================");
                first = false;
                jobshow_print(reply, &j, dep_states, verbose);
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
                       "              once passed), YYYY-MM-DD[THH:MM[:SS]] (Z or +08:00 for\n"
                       "              another zone than the configured one) or now+N[s|m|h|d]\n"
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
                cli_printf("Job %lld released back to queue, to start at %s.\n", (long long)ids[i],
                           when);
                free(when);
            } else {
                cli_printf(hold ? "Job %lld put on hold.\n" : "Job %lld released back to queue.\n",
                           (long long)ids[i]);
            }
        }
    }
    json_decref(all);
    free(ids);
    return status;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    cli_init(argv[0]);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hV", longopts, NULL)) != -1) {
        switch (c) {
        default:
            cli_common_option(c, argv, longopts, "gjob", gjob_help);
        }
    }
    if (optind >= argc)
        cli_usage_error(
            "no command given; use show, log, why, attach, hold, release, update, redo, "
            "close-sessions or completion");
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    int status;
    if (!strcmp(cmd, "show") || !strcmp(cmd, "s"))
        status = gjob_show(sub_argc, sub_argv);
    else if (!strcmp(cmd, "log") || !strcmp(cmd, "l"))
        status = gjob_log(sub_argc, sub_argv);
    else if (!strcmp(cmd, "why") || !strcmp(cmd, "w"))
        status = gjob_why(sub_argc, sub_argv);
    else if (!strcmp(cmd, "hold") || !strcmp(cmd, "h"))
        status = gjob_transition("hold", sub_argc, sub_argv);
    else if (!strcmp(cmd, "release") || !strcmp(cmd, "r"))
        status = gjob_transition("release", sub_argc, sub_argv);
    else if (!strcmp(cmd, "update") || !strcmp(cmd, "u"))
        status = gjob_update(sub_argc, sub_argv);
    else if (!strcmp(cmd, "redo"))
        status = gjob_redo(sub_argc, sub_argv);
    else if (!strcmp(cmd, "attach") || !strcmp(cmd, "a"))
        status = gjob_attach(sub_argc, sub_argv);
    else if (!strcmp(cmd, "completion"))
        status = completion_main("gjob", sub_argc - 1, sub_argv + 1);
    else if (!strcmp(cmd, "close-sessions") || !strcmp(cmd, "close"))
        status = gjob_close_sessions(sub_argc, sub_argv);
    else if (!strcmp(cmd, "help"))
        gjob_help(), status = 0;
    else
        cli_usage_error("unknown command '%s'; use show, log, why, attach, hold, release, update, "
                        "redo, close-sessions or completion",
                        cmd);
    return cli_finish(status);
}
