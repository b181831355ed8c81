/* gbatch: submits a job to gflowd, like sbatch / gflow's gbatch.
 *
 *   gbatch [options] script.sh        a script job (its text is stored with the job)
 *   gbatch [options] command words... a command job (run by /bin/bash -c)
 *   gbatch [options] - < script       a script on standard input
 *
 * Options end at the first word that is not an option (getopt_long with '+'), so the
 * job's own arguments pass through untouched. A script may carry options of its own in
 * "# GFLOW --key value" lines; the command line wins over them. The job options (-J, -t,
 * --gpus, --depends-on, ...) are the ones gjob update and redo take too (jobopts.c);
 * arrays, sweeps and the submission's own switches are here. gbatch_new.c: the
 * 'new' and 'completion' subcommands; gbatch_input.c: the checks and inputs of a
 * submission; gbatch_print.c: what a submission prints. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "completion.h"
#include "files.h"
#include "gbatch_internal.h"
#include "job.h"
#include "jobopts.h"
#include "output.h"
#include "parse.h"
#include "util.h"

enum {
    OPT_DRY_RUN = 256,
    OPT_PARSABLE,
    OPT_ARRAY,
    OPT_MAX_CONCURRENT,
    OPT_PARAM,
    OPT_PARAM_FILE,
    OPT_NAME_TEMPLATE,
    OPT_NICE,
    OPT_AUTO_CLOSE,
    OPT_NOTIFY_EMAIL,
    OPT_NOTIFY_ON,
};

/* gbatch's own options; the job options it shares with gjob update/redo are jobopts'. */
static const struct option gbatch_own_longopts[] = {
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"array", required_argument, NULL, OPT_ARRAY},
    {"max-concurrent", required_argument, NULL, OPT_MAX_CONCURRENT},
    {"param", required_argument, NULL, OPT_PARAM},
    {"param-file", required_argument, NULL, OPT_PARAM_FILE},
    {"name-template", required_argument, NULL, OPT_NAME_TEMPLATE},
    {"parsable", no_argument, NULL, OPT_PARSABLE},
    {"project", required_argument, NULL, 'P'},
    {"nice", required_argument, NULL, OPT_NICE},
    {"auto-close", no_argument, NULL, OPT_AUTO_CLOSE},
    {"notify-email", required_argument, NULL, OPT_NOTIFY_EMAIL},
    {"notify-on", required_argument, NULL, OPT_NOTIFY_ON},
    CLI_COMMON_LONGOPTS,
    {NULL, 0, NULL, 0},
};

/* Both together, made once in main (the directives parse again with them). */
static struct option *gbatch_longopts;
static char *gbatch_shortopts;

static void gbatch_help(void)
{
    printf("gbatch - submit a job to the gflow scheduler\n"
           "\n"
           "Usage:\n"
           "  gbatch [options] <script>            submit a script file\n"
           "  gbatch [options] <command> [args...] submit a command (run by /bin/bash -c)\n"
           "  gbatch [options] [-] < script        submit a script read from standard input\n"
           "  gbatch new NAME                      write a job script template NAME.sh\n"
           "  gbatch completion SHELL              print a completion script: bash, elvish,\n"
           "                                       fish, powershell or zsh\n"
           "\n"
           "Options end at the first word that is not an option; everything after it\n"
           "belongs to the job. A single argument naming an existing file is a script.\n"
           "A first word 'new' or 'completion' is a subcommand; to submit a command of that\n"
           "name write 'gbatch -- new' or 'gbatch ./new'.\n"
           "\n"
           "Options:\n");
    jobopts_help(JOBOPTS_GENERAL, JOBOPTS_SUBMIT);
    printf("\nGPUs:\n");
    jobopts_help(JOBOPTS_GPUS, JOBOPTS_SUBMIT);
    printf("\nDependencies (X: a job id, @ for your latest job, @~N for the N-th before it):\n");
    jobopts_help(JOBOPTS_DEPS, JOBOPTS_SUBMIT);
    printf("\n"
           "Arrays and sweeps (one submission, many jobs of one group):\n"
           "      --array SPEC                 one job per task id: 1-10, 1-10:2 (a step),\n"
           "                                   1,3,7; %%K runs at most K at once (1-100%%4);\n"
           "                                   each sees GFLOW_ARRAY_TASK_ID and\n"
           "                                   SLURM_ARRAY_TASK_ID, named NAME_<task>\n"
           "                                   (no --name: gjob-<id>)\n"
           "      --param NAME=VALUES          one job per value (repeat for the cartesian\n"
           "                                   product): lr=0.1,0.01 or a range\n"
           "                                   start:stop[:step] (floats, stop included);\n"
           "                                   {NAME} in the command or script is replaced,\n"
           "                                   quoted so a value is never shell syntax\n"
           "      --param-file FILE.csv        one job per row, the header row names them\n"
           "      --name-template T            job names, e.g. 'lr{lr}_bs{bs}'\n"
           "      --max-concurrent K           at most K jobs of this submission run at once\n"
           "                                   (change it later with gctl set-limit)\n"
           "\n"
           "gflow's options (gbatch only, stored with the job):\n");
    jobopts_help_line("-c NAME", "the same as --conda-env NAME (gflow's short form)");
    jobopts_help_line("-P, --project NAME",
                      "a project code to group and filter jobs by (gqueue -P); at most 64 "
                      "characters, blanks around it dropped");
    jobopts_help_line("    --nice N", "the same as --priority N, as in gflow (recorded as nice)");
    jobopts_help_line("    --notify-email ADDR",
                      "e-mail ADDR about this job (repeat for more addresses), through the "
                      "local MTA (sendmail -t), sent as you");
    jobopts_help_line("    --notify-on EVENTS",
                      "the events to e-mail about, comma-separated: job_submitted, job_updated, "
                      "job_started, job_completed, job_failed, job_cancelled, job_timeout, "
                      "job_held, job_released, or gflow's begin, end, fail, timeout, all "
                      "(default with --notify-email: job_completed, job_failed, job_timeout, "
                      "job_cancelled)");
    jobopts_help_line("    --auto-close",
                      "gflow closes the job's tmux session when it succeeds; accepted and "
                      "stored (jobs here run without tmux)");
    printf("\n"
           "Other options:\n"
           "      --dry-run                    check and show what would be submitted, submit\n"
           "                                   nothing\n"
           "      --parsable                   print only the job ids, one per line\n"
           "      --socket PATH                the daemon's socket (default: $GFLOW_SOCKET,\n"
           "                                   the config, then the usual places)\n"
           "      --config FILE                the config file whose timezone (and\n"
           "                                   daemon.socket_path) to use; give it before\n"
           "                                   --begin\n"
           "  -h, --help                       show this help\n"
           "  -V, --version                    show the version\n"
           "\n");
    char *names = jobopts_names(JOBOPTS_SUBMIT);
    char *directives = xasprintf(
        "Script directives: lines '# GFLOW --key value' or '# GFLOW --key=value' in a script "
        "set the same options (%s, -c, --project, --nice, --notify-email, --notify-on, "
        "--auto-close, --array and --max-concurrent); options on the command line win over "
        "them. Any other option there (--param, --param-file, --name-template: a sweep is "
        "made on the command line) is an error naming its line. 'gbatch new NAME' writes a "
        "template with them.",
        names);
    jobopts_help_paragraph(directives);
    free(directives);
    free(names);
    printf("\n"
           "The job runs in the current directory with the current environment.\n"
           "Examples:\n"
           "  gbatch python train.py --lr 0.1\n"
           "  gbatch -t 2:00:00 -J sweep-1 train.sh\n"
           "  gbatch -t 4:00:00 --signal B:USR1@300 train.sh   checkpoint 5 min before\n"
           "  gbatch --gpus 2 python train.py\n"
           "  gbatch --gpus 1 --shared --gpu-memory 20G python eval.py\n"
           "  gbatch --gpus 4 --gpus-per-task 1 python ddp_train.py\n"
           "  gbatch --mig 1g.18gb python small.py      one MIG instance (see ginfo)\n"
           "  gbatch --memory 24G --conda-env torch python preprocess.py\n"
           "  gbatch --hold 'make -j8 && ./bench'\n"
           "  gbatch --begin 22:00 train.sh              tonight at 10 pm\n"
           "  gbatch --depends-on @ python eval.py       after your latest job succeeded\n"
           "  gbatch --dependency afternotok:12 notify.sh\n");
}

/* gflow's bookkeeping options: -P/--project, --nice, --auto-close, --notify-email,
 * --notify-on, into their spec fields (the daemon checks them again). */
static void gbatch_bookkeeping(const struct jobopts_ctx *ctx, int c, const char *arg, json_t *spec)
{
    json_t *v;
    switch (c) {
    case 'P': { /* blanks around it do not count, as in gflow */
        size_t len = strlen(arg);
        while (len && (arg[len - 1] == ' ' || arg[len - 1] == '\t'))
            len--;
        size_t lead = strspn(arg, " \t");
        if (len - (lead < len ? lead : len) > JOB_PROJECT_MAX || !(v = json_string(arg)))
            jobopts_error(ctx, "invalid --project: use text of at most %d characters",
                          JOB_PROJECT_MAX);
        json_object_set_new(spec, JOB_KEY_PROJECT, v);
        break;
    }
    case OPT_NICE: { /* gflow: an alias of --priority */
        int prio;
        char *err = NULL;
        if (parse_priority(arg, &prio, &err) < 0)
            jobopts_error(ctx, "--nice is the priority: %s", err);
        json_object_set_new(spec, JOB_KEY_PRIORITY, json_integer(prio));
        json_object_set_new(spec, JOB_KEY_NICE, json_integer(prio));
        break;
    }
    case OPT_AUTO_CLOSE:
        json_object_set_new(spec, JOB_KEY_AUTO_CLOSE, json_true());
        break;
    case OPT_NOTIFY_EMAIL: {
        const char *old = json_string_value(json_object_get(spec, JOB_KEY_NOTIFY_EMAIL));
        if (!*arg || strchr(arg, ' ') || !strchr(arg, '@'))
            jobopts_error(ctx, "invalid --notify-email '%s': use an address like name@host", arg);
        char *joined = old ? xasprintf("%s,%s", old, arg) : xstrdup(arg);
        if (!(v = json_string(joined)))
            jobopts_error(ctx, "--notify-email is not valid UTF-8");
        json_object_set_new(spec, JOB_KEY_NOTIFY_EMAIL, v);
        free(joined);
        break;
    }
    case OPT_NOTIFY_ON: {
        json_t *list = json_object_get(spec, JOB_KEY_NOTIFY_ON);
        if (!list) {
            list = json_array();
            json_object_set_new(spec, JOB_KEY_NOTIFY_ON, list);
        }
        char *copy = xstrdup(arg), *save = NULL;
        for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
            /* gflow's short names are stored as the canonical ones */
            const char *alias = job_notify_event_alias(e);
            if (alias)
                e = (char *)alias;
            if (!strcmp(e, "all")) {
                for (const char *const *n = job_notify_events; *n; n++)
                    json_array_append_new(list, json_string(*n));
                continue;
            }
            if (!job_notify_event_valid(e))
                jobopts_error(ctx,
                              "invalid --notify-on event '%s': use job_submitted, job_updated, "
                              "job_started, job_completed, job_failed, job_cancelled, "
                              "job_timeout, job_held, job_released, or gflow's begin, end, "
                              "fail, timeout, all",
                              e);
            json_array_append_new(list, json_string(e));
        }
        free(copy);
        if (!json_array_size(list))
            jobopts_error(ctx, "--notify-on needs at least one event, e.g. job_failed");
        break;
    }
    }
}

/* The long name of option c ("param" for --param), else the word as given. */
static const char *gbatch_long_name(int c, const char *given)
{
    for (const struct option *o = gbatch_longopts; o && o->name; o++)
        if (o->val == c)
            return o->name;
    return given + strspn(given, "-");
}

/* --param, --param-file and --name-template: the sweep made of the submission. */
static void gbatch_sweep_option(const struct jobopts_ctx *ctx, int c, const char *arg,
                                struct gbatch_opts *o)
{
    if (c == OPT_PARAM_FILE) {
        free(o->param_file);
        o->param_file = xstrdup(arg);
        return;
    }
    if (c == OPT_NAME_TEMPLATE) {
        free(o->name_template);
        o->name_template = xstrdup(arg);
        return;
    }
    char *pname, **vals, *err = NULL;
    size_t n;
    if (parse_param(arg, &pname, &vals, &n, &err) < 0)
        jobopts_error(ctx, "%s", err);
    if (!o->param_names) {
        o->param_names = json_array();
        o->param_values = json_array();
    }
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_string(vals[i]);
        if (!v)
            jobopts_error(ctx, "--param %s: a value is not valid UTF-8", pname);
        json_array_append_new(list, v);
        free(vals[i]);
    }
    free(vals);
    json_array_append_new(o->param_names, json_string(pname));
    json_array_append_new(o->param_values, list);
    free(pname);
}

/* Parses argv[0..argc) into o: the job options through jobopts, gbatch's own here.
 * ctx names the script and line for a "# GFLOW" directive. Returns optind (the first
 * non-option word). */
static int gbatch_parse(int argc, char **argv, struct gbatch_opts *o, const struct jobopts_ctx *ctx)
{
    char *err = NULL;
    int c;
    optind = 0; /* glibc: full reinitialisation, the directives parse a second argv */
    opterr = 0;
    while ((c = getopt_long(argc, argv, gbatch_shortopts, gbatch_longopts, NULL)) != -1) {
        if (c == 'c') /* gflow's gbatch -c; gjob's -c is --command */
            c = jobopts_val("conda-env");
        int shared = jobopts_apply(ctx, c, optarg, o->spec);
        if (shared < 0)
            jobopts_exit(ctx->error);
        if (shared)
            continue;
        switch (c) {
        case 'P':
        case OPT_NICE:
        case OPT_AUTO_CLOSE:
        case OPT_NOTIFY_EMAIL:
        case OPT_NOTIFY_ON:
            gbatch_bookkeeping(ctx, c, optarg, o->spec);
            break;
        case OPT_ARRAY: {
            int64_t *tasks, k;
            size_t n;
            if (parse_array_spec(optarg, &tasks, &n, &k, &err) < 0)
                jobopts_error(ctx, "--array: %s", err);
            free(tasks);
            free(o->array);
            o->array = xstrdup(optarg);
            break;
        }
        case OPT_MAX_CONCURRENT:
            if (parse_int64(optarg, &o->max_concurrent) < 0 || o->max_concurrent < 0)
                jobopts_error(ctx,
                              "invalid value '%s' for --max-concurrent: use a number of "
                              "jobs >= 1 (0: no limit)",
                              optarg);
            break;
        case OPT_PARAM:
        case OPT_PARAM_FILE:
        case OPT_NAME_TEMPLATE:
            /* A sweep is made on the command line: a directive's would be dropped. */
            if (ctx->file)
                jobopts_error(ctx,
                              "--%s cannot be used in a script directive; give it on gbatch's "
                              "command line",
                              gbatch_long_name(c, argv[optind - 1]));
            gbatch_sweep_option(ctx, c, optarg, o);
            break;
        case OPT_DRY_RUN:
        case OPT_PARSABLE:
        case CLI_OPT_SOCKET:
        case CLI_OPT_CONFIG:
        case 'h':
        case 'V':
            if (ctx->file)
                jobopts_error(ctx, "--%s cannot be used in a script directive",
                              gbatch_long_name(c, argv[optind - 1]));
            if (c == OPT_DRY_RUN)
                o->dry_run = true;
            else if (c == OPT_PARSABLE)
                o->parsable = true;
            else if (c == CLI_OPT_SOCKET)
                client_set_socket(optarg);
            else if (c == CLI_OPT_CONFIG)
                client_set_config(optarg);
            else if (c == 'h') {
                gbatch_help();
                exit(0);
            } else {
                cli_print_version("gbatch");
                exit(0);
            }
            break;
        default:
            jobopts_error(ctx, "%s", cli_option_error(argv, c, gbatch_longopts));
        }
    }
    return optind;
}

/* One directive's words into the options d (a bad one ends gbatch). */
static int gbatch_directive(int argc, char **argv, const struct jobopts_ctx *ctx, void *d)
{
    int first = gbatch_parse(argc, argv, d, ctx);
    if (first < argc)
        jobopts_error(ctx, "unexpected '%s': a directive holds only options", argv[first]);
    return 0;
}

/* Applies the "# GFLOW" lines of a script to o (options already set stay). */
static void gbatch_directives(const char *text, const char *file, struct gbatch_opts *o)
{
    struct gbatch_opts d = {.spec = json_object(), .max_concurrent = -1};
    struct jobopts_err error = {0};
    if (jobopts_each_directive(text, file, gbatch_directive, &d, &error) < 0)
        jobopts_exit(&error);
    jobopts_merge(o->spec, d.spec);
    json_decref(d.spec);
    if (d.array && !o->array)
        o->array = d.array;
    else
        free(d.array);
    if (d.max_concurrent >= 0 && o->max_concurrent < 0)
        o->max_concurrent = d.max_concurrent;
    /* A directive cannot give --param, --param-file or --name-template (gbatch_parse). */
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    gbatch_longopts = jobopts_longopts(gbatch_own_longopts);
    gbatch_shortopts = jobopts_shortopts("+:", "hVc:P:");
    if (argc > 1 && !strcmp(argv[1], "new"))
        return gbatch_new(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "completion"))
        return completion_main("gbatch", argc - 2, argv + 2);
    struct gbatch_opts o = {.spec = json_object(), .max_concurrent = -1};
    struct jobopts_err error = {0};
    const struct jobopts_ctx ctx = {JOBOPTS_SUBMIT, "gbatch", NULL, 0, &error};
    int first = gbatch_parse(argc, argv, &o, &ctx);
    int nwords = argc - first;
    char **words = argv + first;
    if (nwords > 0 && gbatch_is_subcommand(words[0]) && strcmp(argv[first - 1], "--") != 0)
        cli_usage_error("'%s' is a gbatch subcommand and takes no options before it; to "
                        "submit a command named %s write 'gbatch [options] -- %s' or './%s'",
                        words[0], words[0], words[0], words[0]);
    if (nwords > 0 && strcmp(words[0], "-") != 0)
        gbatch_check_path(nwords, words);

    json_t *spec = o.spec;
    char *script = NULL;
    size_t script_len = 0;
    char *script_path = NULL;
    bool stdin_script =
        (nwords == 1 && !strcmp(words[0], "-")) || (nwords == 0 && !isatty(STDIN_FILENO));
    struct stat st;

    if (nwords == 0 && !stdin_script)
        cli_usage_error("no command or script given; usage: gbatch [options] "
                        "<script | command [args...]>");
    if (stdin_script) {
        script = gbatch_read_stdin(&script_len);
        if (script_len == 0)
            cli_die(CLI_EXIT_USAGE, "the script on standard input is empty; give a "
                                    "command or a script file instead (see 'gbatch --help')");
        gbatch_check_text(script, script_len, "the script on standard input");
        script_path = xstrdup("-");
        gbatch_directives(script, "<stdin>", &o);
    } else if (nwords == 1 && stat(words[0], &st) == 0 && S_ISREG(st.st_mode)) {
        script = read_file(words[0], &script_len);
        if (!script)
            cli_die(CLI_EXIT_FAIL, "cannot read script %s: %s", words[0], strerror(errno));
        gbatch_check_text(script, script_len, words[0]);
        script_path = realpath(words[0], NULL);
        if (!script_path)
            cli_die(CLI_EXIT_FAIL, "cannot resolve the path of %s: %s", words[0], strerror(errno));
        gbatch_directives(script, words[0], &o);
    } else {
        char *command = shell_join(nwords, words);
        if (!*command)
            cli_usage_error("the command is empty");
        json_t *c = json_string(command);
        if (!c)
            cli_die(CLI_EXIT_FAIL, "the command is not valid UTF-8 text");
        json_object_set_new(spec, JOB_KEY_COMMAND, c);
        free(command);
    }
    if (script) {
        json_object_set_new(spec, JOB_KEY_SCRIPT, json_stringn(script, script_len));
        json_t *p = json_string(script_path);
        if (!p)
            cli_die(CLI_EXIT_FAIL, "the script's path is not valid UTF-8");
        json_object_set_new(spec, JOB_KEY_SCRIPT_PATH, p);
    }

    gbatch_check_gpus(spec);

    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        cli_die(CLI_EXIT_FAIL, "cannot determine the current directory: %s", strerror(errno));
    json_t *wd = json_string(cwd);
    if (!wd)
        cli_die(CLI_EXIT_FAIL, "the current directory's path is not valid UTF-8");
    json_object_set_new(spec, JOB_KEY_WORKDIR, wd);
    json_object_set_new(spec, JOB_KEY_ENV, jobopts_environment());
    /* The job creates its files as this shell would (unless --umask says otherwise). */
    if (!json_object_get(spec, JOB_KEY_UMASK)) {
        mode_t mask = umask(0);
        umask(mask);
        char text[8];
        format_umask((int)mask, text);
        json_object_set_new(spec, JOB_KEY_UMASK, json_string(text));
    }
    const json_t *time_limit = json_object_get(spec, JOB_KEY_TIME_LIMIT);
    if (json_is_string(json_object_get(spec, JOB_KEY_SIGNAL_SPEC)) &&
        json_integer_value(time_limit) <= 0)
        cli_usage_error("--signal sends SIG before the time limit; it needs --time");
    /* A command job runs in the submitting shell's conda environment unless told
     * otherwise (--conda-env '' is null: none); a script says what it needs itself (a
     * directive). */
    if (!json_object_get(spec, JOB_KEY_CONDA_ENV) && !script) {
        const char *conda = getenv("CONDA_DEFAULT_ENV");
        if (conda && *conda) {
            json_t *c = json_string(conda);
            if (!c)
                cli_usage_error("the conda environment's name is not valid UTF-8");
            json_object_set_new(spec, JOB_KEY_CONDA_ENV, c);
        }
    }
    if (json_is_null(json_object_get(spec, JOB_KEY_CONDA_ENV)))
        json_object_del(spec, JOB_KEY_CONDA_ENV);
    json_t *rows = gbatch_sweep_rows(&o);
    if (o.array && rows)
        cli_usage_error("--array and --param/--param-file cannot be combined");
    if (o.name_template && !rows)
        cli_usage_error("--name-template names the jobs of a sweep: it needs --param or "
                        "--param-file");
    if (o.array)
        json_object_set_new(spec, "array", json_string(o.array));
    if (rows) {
        json_object_set_new(spec, JOB_KEY_PARAMS, rows);
        if (o.name_template) {
            json_t *t = json_string(o.name_template);
            if (!t)
                cli_usage_error("the name template is not valid UTF-8");
            json_object_set_new(spec, JOB_KEY_NAME_TEMPLATE, t);
        }
    }
    if (o.max_concurrent >= 0)
        json_object_set_new(spec, JOB_KEY_MAX_CONCURRENT, json_integer(o.max_concurrent));
    if (o.dry_run)
        json_object_set_new(spec, "dry_run", json_true());

    json_t *reply = cli_call("POST", "/v1/jobs", spec);
    const json_t *list = json_object_get(reply, "jobs");
    if (o.dry_run && (o.array || rows)) {
        size_t i;
        const json_t *jb;
        cli_printf("Dry run: nothing was submitted. Would submit %zu job%s:\n",
                   json_array_size(list), plural_s((long long)json_array_size(list)));
        json_array_foreach (list, i, jb) {
            const char *cmd = json_string_value(json_object_get(jb, JOB_KEY_COMMAND));
            cli_printf("  [%zu] %s: %s\n", i + 1,
                       json_string_value(json_object_get(jb, JOB_KEY_NAME)),
                       cmd ? cmd : json_string_value(json_object_get(spec, JOB_KEY_SCRIPT_PATH)));
        }
    } else if (!o.dry_run && json_is_integer(json_object_get(reply, "count")) &&
               json_integer_value(json_object_get(reply, "count")) > 1) {
        gbatch_print_many(reply, o.parsable);
    } else if (o.dry_run) {
        gbatch_print_dry_run(spec, reply);
    } else {
        const json_t *job = json_array_get(json_object_get(reply, "jobs"), 0);
        const json_t *id = json_object_get(job, JOB_KEY_ID);
        if (!json_is_integer(id))
            cli_die(CLI_EXIT_FAIL, "gflowd accepted the job but sent no job id");
        const char *name = json_string_value(json_object_get(job, JOB_KEY_NAME));
        if (o.parsable)
            cli_printf("%lld\n", (long long)json_integer_value(id));
        else
            cli_printf("Submitted batch job %lld (%s)\n", (long long)json_integer_value(id),
                       name ? name : "-");
    }
    if (!o.dry_run)
        gbatch_print_notes(spec, o.parsable);
    size_t wi;
    const json_t *w;
    json_array_foreach (json_object_get(reply, "warnings"), wi, w) /* e.g. Slurm's minutes */
        cli_warn("warning: %s", json_string_value(w));
    json_decref(reply);
    json_decref(spec);
    free(script);
    free(script_path);
    free(cwd);
    free(o.array);
    free(o.param_file);
    free(o.name_template);
    json_decref(o.param_names);
    json_decref(o.param_values);
    free(gbatch_longopts);
    free(gbatch_shortopts);
    return cli_finish(0);
}
