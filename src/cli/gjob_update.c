/* gjob update and gjob redo: their options (gbatch's job options from jobopts, their own,
 * gflow's --clear-* ones) parsed into spec fields, their help, and the printing of what an
 * update changed. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "files.h"
#include "gjob_internal.h"
#include "job.h"
#include "jobopts.h"
#include "jobshow.h"
#include "output.h"
#include "parse.h"
#include "timefmt.h"
#include "util.h"

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
    OPT_UP_NO_REQUEUE,
    OPT_UP_NO_PTY,
};

/* update's and redo's own options, gflow's spellings among them; the job options are
 * jobopts'. */
static const struct option gjob_spec_own_longopts[] = {
    {"command", required_argument, NULL, 'c'},
    {"script", required_argument, NULL, 's'},
    {"memory-limit", required_argument, NULL, 'm'}, /* gflow's name of --memory */
    {"no-shared", no_argument, NULL, OPT_UP_NO_SHARED},
    {"no-requeue", no_argument, NULL, OPT_UP_NO_REQUEUE},
    {"no-pty", no_argument, NULL, OPT_UP_NO_PTY},
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
    {OPT_UP_CLEAR_CONDA_ENV, "--clear-conda-env", "-e/--conda-env", JOB_KEY_CONDA_ENV, true},
    {OPT_UP_CLEAR_TIME_LIMIT, "--clear-time-limit", "-t/--time", JOB_KEY_TIME_LIMIT, false},
    {OPT_UP_CLEAR_MEMORY_LIMIT, "--clear-memory-limit", "-m/--memory", JOB_KEY_MEMORY_MB, false},
    {OPT_UP_CLEAR_GPU_MEMORY_LIMIT, "--clear-gpu-memory-limit", "--gpu-memory", "gpu_memory_mb",
     false},
    {OPT_UP_CLEAR_MAX_CONCURRENT, "--clear-max-concurrent", "--max-concurrent", "max_concurrent",
     false},
    {OPT_UP_CLEAR_MAX_RETRIES, "--clear-max-retries", "--max-retries", JOB_KEY_MAX_RETRIES, false},
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
    struct jobopts_err error = {0};
    const struct jobopts_ctx ctx = {redo ? JOBOPTS_REDO : JOBOPTS_UPDATE, usage, NULL, 0, &error};
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
        if (c == OPT_UP_NO_REQUEUE || c == gjob_long_val(longopts, "requeue")) {
            const json_t *was = json_object_get(spec, JOB_KEY_REQUEUE);
            if (was && json_is_true(was) != (c != OPT_UP_NO_REQUEUE))
                jobopts_error(&ctx, "--requeue and --no-requeue cannot be used together");
        }
        if (c == OPT_UP_NO_PTY || c == gjob_long_val(longopts, "pty")) {
            const json_t *was = json_object_get(spec, JOB_KEY_PTY);
            if (was && json_is_true(was) != (c != OPT_UP_NO_PTY))
                jobopts_error(&ctx, "--pty and --no-pty cannot be used together");
        }
        int shared = jobopts_apply(&ctx, c, optarg, spec);
        if (shared < 0)
            jobopts_exit(&error);
        if (shared)
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
            json_object_set_new(spec, JOB_KEY_COMMAND, command);
            break;
        }
        case 's': {
            size_t len;
            char *text = read_file(optarg, &len);
            if (!text)
                cli_die(CLI_EXIT_USAGE, "cannot read the script %s given to --script: %s", optarg,
                        strerror(errno));
            char *path = realpath(optarg, NULL);
            json_object_set_new(spec, JOB_KEY_SCRIPT, json_stringn(text, len));
            json_object_set_new(spec, JOB_KEY_SCRIPT_PATH, json_string(path ? path : optarg));
            free(text);
            free(path);
            break;
        }
        case OPT_UP_NO_SHARED:
            json_object_set_new(spec, JOB_KEY_SHARED, json_false());
            break;
        case OPT_UP_NO_REQUEUE:
            json_object_set_new(spec, JOB_KEY_REQUEUE, json_false());
            break;
        case OPT_UP_NO_PTY:
            json_object_set_new(spec, JOB_KEY_PTY, json_false());
            break;
        case OPT_UP_NO_DEPS:
            json_object_set_new(spec, JOB_KEY_DEPENDS_ON, json_array());
            json_object_del(spec, JOB_KEY_DEPENDS_MODE);
            break;
        case OPT_UP_AUTO_CANCEL:
            json_object_set_new(spec, JOB_KEY_AUTO_CANCEL, json_true());
            break;
        case OPT_UP_MAX_CONCURRENT:
            if (redo)
                jobopts_error(&ctx, "--max-concurrent is for 'gjob update' and 'gctl set-limit'");
            if (parse_int64(optarg, &v) < 0 || v < 0)
                jobopts_error(&ctx, "invalid value '%s' for --max-concurrent: a whole number >= 0",
                              optarg);
            json_object_set_new(spec, JOB_KEY_MAX_CONCURRENT, json_integer(v));
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
            json_t *ps = json_object_get(spec, JOB_KEY_PARAMS);
            if (!ps) {
                ps = json_object();
                json_object_set_new(spec, JOB_KEY_PARAMS, ps);
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
    jobopts_help_line("    --no-requeue", "the job may no longer be preempted (undoes --requeue)");
    jobopts_help_line("    --no-pty", "the job runs without a terminal (undoes --pty)");
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
    {JOB_KEY_PARAMS, "--param"},
    {JOB_KEY_NAME, "--name"},
    {JOB_KEY_COMMAND, "--command"},
    {JOB_KEY_SCRIPT_PATH, "--script"},
    {JOB_KEY_SCRIPT, "--script"},
    {JOB_KEY_PRIORITY, "--priority"},
    {JOB_KEY_TIME_LIMIT, "--time"},
    {JOB_KEY_GPUS, "--gpus"},
    {JOB_KEY_GPU_MEMORY_MB, "--gpu-memory"},
    {JOB_KEY_SHARED, "--shared"},
    {JOB_KEY_GPUS_PER_TASK, "--gpus-per-task"},
    {JOB_KEY_CPUS_PER_GPU, "--cpus-per-gpu"},
    {JOB_KEY_MEMORY_MB, "--memory"},
    {JOB_KEY_CONDA_ENV, "--conda-env"},
    {JOB_KEY_SIGNAL_SPEC, "--signal"},
    {JOB_KEY_BEGIN_TIME, "--begin"},
    {JOB_KEY_MAX_RETRIES, "--max-retries"},
    {JOB_KEY_DEPENDS_ON, "--depends-on"},
    {JOB_KEY_AUTO_CANCEL, "--auto-cancel-on-dep-failure"},
    {JOB_KEY_UMASK, "--umask"},
    {JOB_KEY_REQUEUE, "--requeue"},
    {JOB_KEY_PTY, "--pty"},
    {JOB_KEY_MIG_PROFILE, "--mig"},
    {JOB_KEY_MIG_COUNT, "--mig"},
    {JOB_KEY_MAX_CONCURRENT, "--max-concurrent"},
};

/* "--memory" for memory_mb; the field itself for one no option changes (workdir, env). */
static const char *gjob_change_option(const char *field, const json_t *new_value)
{
    if (!strcmp(field, JOB_KEY_DEPENDS_MODE)) /* --depends-on-all or --depends-on-any */
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
    if ((!strcmp(field, JOB_KEY_MEMORY_MB) || !strcmp(field, JOB_KEY_GPU_MEMORY_MB)) &&
        json_is_integer(v))
        return jobshow_mib(json_integer_value(v));
    if (!strcmp(field, JOB_KEY_TIME_LIMIT) && json_is_integer(v))
        return json_integer_value(v) ? format_duration(json_integer_value(v)) : xstrdup("none");
    if (!strcmp(field, JOB_KEY_MAX_CONCURRENT) && json_is_integer(v) && json_integer_value(v) == 0)
        return xstrdup("none");
    if (!strcmp(field, JOB_KEY_BEGIN_TIME) && json_is_number(v))
        return json_number_value(v) > 0 ? output_time(json_number_value(v)) : xstrdup("none");
    if (json_is_boolean(v))
        return xstrdup(json_is_true(v) ? "yes" : "no");
    if (json_is_string(v))
        return xstrdup(json_string_value(v));
    if (!strcmp(field, JOB_KEY_PARAMS) && json_is_object(v))
        return jobshow_params(v);
    if (!strcmp(field, JOB_KEY_DEPENDS_ON)) {
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
        cli_printf("Job %lld unchanged.\n", (long long)id);
        return;
    }
    cli_printf("Job %lld updated: ", (long long)id);
    size_t k;
    const json_t *ch;
    json_array_foreach (changes, k, ch) {
        const char *f = json_string_value(json_object_get(ch, "field"));
        const json_t *new_value = json_object_get(ch, "new");
        char *a = gjob_change_text(f ? f : "", json_object_get(ch, "old"));
        char *b = gjob_change_text(f ? f : "", new_value);
        cli_printf("%s%s: %s -> %s", k ? ", " : "", gjob_change_option(f ? f : "?", new_value), a,
                   b);
        free(a);
        free(b);
    }
    putchar('\n');
}

int gjob_update(int argc, char **argv)
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

int gjob_redo(int argc, char **argv)
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
                cli_printf("Submitted batch job %lld (%s) (redo of %lld)\n",
                           (long long)json_integer_value(json_object_get(jb, "id")),
                           name ? name : "-",
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
