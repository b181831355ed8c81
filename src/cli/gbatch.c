/* gbatch: submits a job to gflowd, like sbatch / gflow's gbatch.
 *
 *   gbatch [options] script.sh        a script job (its text is stored with the job)
 *   gbatch [options] command words... a command job (run by /bin/bash -c)
 *   gbatch [options] - < script       a script on standard input
 *
 * Options end at the first word that is not an option (getopt_long with '+'), so the
 * job's own arguments pass through untouched. A script may carry options of its own in
 * "# GFLOW --key value" lines; the command line wins over them. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "files.h"
#include "gflow_build.h"
#include "job.h"
#include "output.h"
#include "parse.h"
#include "util.h"

extern char **environ;

struct gbatch_opts {
    char *name;
    int priority;
    int64_t time_limit;
    bool hold;
    int64_t gpus;          /* GPUs requested (-g/--gpus/--gres) */
    int64_t gpu_memory_mb; /* per GPU (--gpu-memory and its aliases) */
    bool shared;
    int64_t gpus_per_task; /* 0 or 1 */
    bool name_set, priority_set, time_set, hold_set;
    bool gpus_set, gpu_memory_set, shared_set, gpus_per_task_set;
    bool dry_run, parsable;
    json_t *deps;     /* [{"id", "kind"}], resolved ids; NULL if none given */
    int deps_mode;    /* 0 unset, 1 all, 2 any */
    bool no_auto_cancel, auto_cancel_set;
    int64_t memory_mb; /* host memory (--memory and its aliases) */
    bool memory_set;
    char *conda_env; /* --conda-env; "" = none (not even $CONDA_DEFAULT_ENV) */
    char *array;          /* --array (Slurm syntax, checked here, expanded by gflowd) */
    int64_t max_concurrent; /* --max-concurrent; -1 = not given */
    json_t *param_names;  /* --param / --param-file: names and one list of values each */
    json_t *param_values; /* [[v, ...], ...] per --param; NULL if none */
    char *param_file;
    char *name_template;
    char *signal_spec; /* --signal, canonical ("B:USR1@60"); NULL if none */
    double begin_time;  /* --begin, unix seconds */
    bool begin_set;
    int64_t max_retries; /* --max-retries */
    bool max_retries_set;
};

enum {
    OPT_DRY_RUN = 256,
    OPT_PARSABLE,
    OPT_SOCKET,
    OPT_GRES,
    OPT_SHARED,
    OPT_GPU_MEMORY,
    OPT_GPUS_PER_TASK,
    OPT_DEPENDS_ALL,
    OPT_DEPENDS_ANY,
    OPT_NO_AUTO_CANCEL,
    OPT_CONDA_ENV,
    OPT_SIGNAL,
    OPT_BEGIN,
    OPT_MAX_RETRIES
};

enum {
    OPT_ARRAY = 400,
    OPT_MAX_CONCURRENT,
    OPT_PARAM,
    OPT_PARAM_FILE,
    OPT_NAME_TEMPLATE
};

/* More GPUs than any machine has: a typo, refused before it reaches the daemon. */
#define GBATCH_GPUS_MAX 1024

static const char gbatch_shortopts[] = "+:J:n:p:t:g:d:m:HhV";
static const struct option gbatch_longopts[] = {
    {"name", required_argument, NULL, 'J'},
    {"job-name", required_argument, NULL, 'J'},
    {"priority", required_argument, NULL, 'p'},
    {"time", required_argument, NULL, 't'},
    {"time-limit", required_argument, NULL, 't'},
    {"timelimit", required_argument, NULL, 't'},
    {"hold", no_argument, NULL, 'H'},
    {"gpus", required_argument, NULL, 'g'},
    {"gres", required_argument, NULL, OPT_GRES},
    {"shared", no_argument, NULL, OPT_SHARED},
    {"gpu-memory", required_argument, NULL, OPT_GPU_MEMORY},
    {"max-gpu-mem", required_argument, NULL, OPT_GPU_MEMORY},
    {"max-gpu-memory", required_argument, NULL, OPT_GPU_MEMORY},
    {"gpus-per-task", required_argument, NULL, OPT_GPUS_PER_TASK},
    {"memory", required_argument, NULL, 'm'},
    {"mem", required_argument, NULL, 'm'},
    {"max-mem", required_argument, NULL, 'm'},
    {"max-memory", required_argument, NULL, 'm'},
    {"conda-env", required_argument, NULL, OPT_CONDA_ENV},
    {"signal", required_argument, NULL, OPT_SIGNAL},
    {"begin", required_argument, NULL, OPT_BEGIN},
    {"max-retries", required_argument, NULL, OPT_MAX_RETRIES},
    {"depends-on", required_argument, NULL, 'd'},
    {"dependency", required_argument, NULL, 'd'},
    {"depends-on-all", required_argument, NULL, OPT_DEPENDS_ALL},
    {"depends-on-any", required_argument, NULL, OPT_DEPENDS_ANY},
    {"no-auto-cancel", no_argument, NULL, OPT_NO_AUTO_CANCEL},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"array", required_argument, NULL, OPT_ARRAY},
    {"max-concurrent", required_argument, NULL, OPT_MAX_CONCURRENT},
    {"param", required_argument, NULL, OPT_PARAM},
    {"param-file", required_argument, NULL, OPT_PARAM_FILE},
    {"name-template", required_argument, NULL, OPT_NAME_TEMPLATE},
    {"parsable", no_argument, NULL, OPT_PARSABLE},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void gbatch_help(void)
{
    printf("gbatch - submit a job to the gflow scheduler\n"
           "\n"
           "Usage:\n"
           "  gbatch [options] <script>            submit a script file\n"
           "  gbatch [options] <command> [args...] submit a command (run by /bin/bash -c)\n"
           "  gbatch [options] [-] < script        submit a script read from standard input\n"
           "\n"
           "Options end at the first word that is not an option; everything after it\n"
           "belongs to the job. A single argument naming an existing file is a script.\n"
           "\n"
           "Options:\n"
           "  -J, -n, --name, --job-name NAME  job name (default: the script's file name,\n"
           "                                   or the command's first word)\n"
           "  -p, --priority N                 priority 0-255, higher runs first (default %d)\n"
           "  -t, --time, --time-limit T       time limit: MM, MM:SS, HH:MM:SS, D-HH,\n"
           "                                   D-HH:MM or D-HH:MM:SS (a bare number is\n"
           "                                   minutes); the job is stopped when it runs out\n"
           "      --begin T                    start no earlier than T: HH:MM[:SS] (today, or\n"
           "                                   tomorrow once passed), YYYY-MM-DD[THH:MM[:SS]]\n"
           "                                   or now+N[s|m|h|d]; it waits with reason\n"
           "                                   BeginTime until then\n"
           "      --signal [B:]SIG[@SECS]      send SIG (USR1, SIGUSR1 or a number) SECS\n"
           "                                   seconds (default 60) before the time limit,\n"
           "                                   e.g. to checkpoint; then SIGTERM, SIGKILL at\n"
           "                                   the limit as usual. B: only to the job's main\n"
           "                                   process (the batch shell), not to every\n"
           "                                   process it started. Needs --time\n"
           "  -H, --hold                       submit on hold; start it with 'gjob release'\n"
           "      --max-retries N              if the job fails (non-zero exit, killed by a\n"
           "                                   signal, OutOfMemory), run it again as a new\n"
           "                                   job (a new attempt), up to N times; jobs\n"
           "                                   waiting on it wait on the newest attempt.\n"
           "                                   Time limits and cancellations are not retried\n"
           "  -m, --memory M                   host memory for the job (512, 1024M, 24G; a\n"
           "                                   bare number is MiB): it waits (reason Memory)\n"
           "                                   until the memory declared by running jobs plus\n"
           "                                   M fits the machine, and is held to M (cgroup\n"
           "                                   v2, v1, else a watchdog; see 'gflowd status');\n"
           "                                   over it, it ends F with reason OutOfMemory\n"
           "      --mem, --max-mem, --max-memory M\n"
           "                                   the same as --memory\n"
           "      --conda-env NAME             activate this conda environment in the job's\n"
           "                                   shell (a command job uses $CONDA_DEFAULT_ENV\n"
           "                                   when this is not given; --conda-env '' for\n"
           "                                   none); if conda or the environment is missing\n"
           "                                   the job fails at once (LaunchFailed)\n"
           "\n"
           "GPUs:\n"
           "  -g, --gpus N                     N GPUs for this job alone (default 0: the\n"
           "                                   job sees CUDA_VISIBLE_DEVICES=\"\")\n"
           "      --gres N, --gres gpu:N       the same, as Slurm spells it\n"
           "      --gpu-memory M               GPU memory per GPU (512, 512M, 24G): an\n"
           "                                   exclusive job waits until M is actually free\n"
           "                                   on each GPU it gets; with --shared, the\n"
           "                                   share of each GPU it may use\n"
           "      --max-gpu-mem M, --max-gpu-memory M\n"
           "                                   the same as --gpu-memory\n"
           "      --shared                     share GPUs with other --shared jobs while\n"
           "                                   their --gpu-memory fits (needs --gpu-memory)\n"
           "      --gpus-per-task N            1: start one copy of the command per GPU,\n"
           "                                   each seeing one GPU, with RANK, LOCAL_RANK,\n"
           "                                   WORLD_SIZE, MASTER_ADDR and MASTER_PORT set\n"
           "                                   (like torchrun); 0: one copy (the default)\n"
           "\n"
           "Dependencies (X: a job id, @ for your latest job, @~N for the N-th before it):\n"
           "  -d, --depends-on X               start only after job X finished successfully\n"
           "                                   (CD); a list 1,2 means all of them\n"
           "      --dependency SPEC            the same, or Slurm's form: afterok:ID[:ID...],\n"
           "                                   afterany:ID (ended in any state), afternotok:ID\n"
           "                                   (failed, timed out or cancelled), joined by ','\n"
           "                                   (all must hold) or '?' (any one suffices)\n"
           "      --depends-on-all X,Y         after all of them finished successfully\n"
           "      --depends-on-any X,Y         after any one of them finished successfully\n"
           "      --no-auto-cancel             if a dependency can no longer be met, keep\n"
           "                                   waiting (reason DependencyFailed:<id>) instead\n"
           "                                   of being cancelled\n"
           "\n"
           "Arrays and sweeps (one submission, many jobs of one group):\n"
           "      --array SPEC                 one job per task id: 1-10, 1-10:2 (a step),\n"
           "                                   1,3,7; %%K runs at most K at once (1-100%%4);\n"
           "                                   each sees GFLOW_ARRAY_TASK_ID and\n"
           "                                   SLURM_ARRAY_TASK_ID, named NAME_<task>\n"
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
           "Other options:\n"
           "      --dry-run                    check and show what would be submitted, submit\n"
           "                                   nothing\n"
           "      --parsable                   print only the job id\n"
           "      --socket PATH                the daemon's socket (default: $GFLOW_SOCKET,\n"
           "                                   the config, then the usual places)\n"
           "  -h, --help                       show this help\n"
           "  -V, --version                    show the version\n"
           "\n"
           "Script directives: lines '# GFLOW --key value' or '# GFLOW --key=value' in a\n"
           "script set the same options (--name, --priority, --time, --hold, --gpus,\n"
           "--gres, --gpu-memory, --shared, --gpus-per-task, --memory, --conda-env, --signal,\n"
           "--begin, --max-retries,\n"
           "--depends-on and the other dependency options); options on the command line\n"
           "win over them.\n"
           "\n"
           "The job runs in the current directory with the current environment.\n"
           "Examples:\n"
           "  gbatch python train.py --lr 0.1\n"
           "  gbatch -t 2:00:00 -J sweep-1 train.sh\n"
           "  gbatch -t 4:00:00 --signal B:USR1@300 train.sh   checkpoint 5 min before\n"
           "  gbatch --gpus 2 python train.py\n"
           "  gbatch --gpus 1 --shared --gpu-memory 20G python eval.py\n"
           "  gbatch --gpus 4 --gpus-per-task 1 python ddp_train.py\n"
           "  gbatch --memory 24G --conda-env torch python preprocess.py\n"
           "  gbatch --hold 'make -j8 && ./bench'\n"
           "  gbatch --begin 22:00 train.sh              tonight at 10 pm\n"
           "  gbatch --depends-on @ python eval.py       after your latest job succeeded\n"
           "  gbatch --dependency afternotok:12 notify.sh\n",
           JOB_PRIORITY_DEFAULT);
}

/* Where options come from, for messages: NULL for the command line. */
struct gbatch_source {
    const char *file;
    int line;
};

static void __attribute__((format(printf, 2, 3), noreturn))
gbatch_opt_error(const struct gbatch_source *src, const char *fmt, ...)
{
    va_list ap;
    char *msg;
    va_start(ap, fmt);
    msg = xvasprintf(fmt, ap);
    va_end(ap);
    if (src)
        cli_die(CLI_EXIT_USAGE, "%s:%d: %s (in a '# GFLOW' directive)", src->file, src->line,
                   msg);
    cli_usage_error("%s", msg);
}

/* A GPU count for opt: a whole number 0..GBATCH_GPUS_MAX. */
static int64_t gbatch_gpu_count(const struct gbatch_source *src, const char *opt, const char *s)
{
    int64_t v;
    if (parse_int64(s, &v) < 0 || v < 0)
        gbatch_opt_error(src, "invalid GPU count '%s' for %s: use a whole number >= 0", s, opt);
    if (v > GBATCH_GPUS_MAX)
        gbatch_opt_error(src, "invalid GPU count '%s' for %s: at most %d", s, opt, GBATCH_GPUS_MAX);
    return v;
}

/* Slurm's --gres for GPUs: "N", "gpu" (one GPU) or "gpu:N". */
static int64_t gbatch_gres(const struct gbatch_source *src, const char *s)
{
    if (!strcmp(s, "gpu"))
        return 1;
    const char *count = s;
    if (str_starts_with(s, "gpu:")) {
        count = s + 4;
        if (strchr(count, ':'))
            gbatch_opt_error(src,
                             "invalid --gres '%s': GPU types are not supported (one machine, "
                             "one pool of GPUs); use --gres gpu:N",
                             s);
    } else if (*s && !(*s >= '0' && *s <= '9')) {
        gbatch_opt_error(src, "invalid --gres '%s': only GPUs can be requested; use --gres gpu:N",
                         s);
    }
    int64_t v;
    if (parse_int64(count, &v) < 0 || v < 0)
        gbatch_opt_error(src, "invalid --gres '%s': use gpu:N or N with a whole number N >= 0", s);
    if (v > GBATCH_GPUS_MAX)
        gbatch_opt_error(src, "invalid --gres '%s': at most %d GPUs", s, GBATCH_GPUS_MAX);
    return v;
}

/* One job reference of a dependency: an id, "@" or "@~N" (resolved by the daemon's
 * list of the caller's jobs). */
static int64_t gbatch_dep_id(const struct gbatch_source *src, const char *opt, const char *s)
{
    int64_t v;
    if (s[0] == '@') {
        if (!s[1])
            return cli_resolve_ref(0);
        if (s[1] == '~' && parse_int64(s + 2, &v) == 0 && v >= 0 && v < INT_MAX)
            return cli_resolve_ref((int)v);
    } else if (parse_int64(s, &v) == 0 && v > 0) {
        return v;
    }
    gbatch_opt_error(src, "invalid job '%s' for %s: use a job id, @ or @~N", s, opt);
}

static void gbatch_dep_add(struct gbatch_opts *o, int64_t id, enum job_dep_kind kind)
{
    if (!o->deps)
        o->deps = json_array();
    size_t i;
    json_t *d;
    json_array_foreach(o->deps, i, d) {
        if (json_integer_value(json_object_get(d, "id")) == id &&
            !strcmp(json_string_value(json_object_get(d, "kind")), job_dep_kind_name(kind)))
            return;
    }
    json_array_append_new(o->deps, json_pack("{s:I, s:s}", "id", (json_int_t)id, "kind",
                                             job_dep_kind_name(kind)));
}

/* A list of job references "1,3,@,@~2" (ranges 5-7 too), all with the same kind. */
static void gbatch_dep_list(struct gbatch_opts *o, const struct gbatch_source *src,
                            const char *opt, const char *list, enum job_dep_kind kind)
{
    if (!*list || list[0] == ',' || list[strlen(list) - 1] == ',' || strstr(list, ",,"))
        gbatch_opt_error(src, "invalid job list '%s' for %s: use e.g. 3, @ or 3,5", list, opt);
    char *copy = xstrdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *dash = tok[0] != '@' ? strchr(tok, '-') : NULL;
        if (dash) {
            *dash = '\0';
            int64_t a = gbatch_dep_id(src, opt, tok), b = gbatch_dep_id(src, opt, dash + 1);
            if (b < a || b - a > 100000)
                gbatch_opt_error(src, "invalid job range '%s-%s' for %s", tok, dash + 1, opt);
            for (int64_t id = a; id <= b; id++)
                gbatch_dep_add(o, id, kind);
        } else {
            gbatch_dep_add(o, gbatch_dep_id(src, opt, tok), kind);
        }
    }
    free(copy);
}

/* Slurm's form: "afterok:1:2,afterany:3" (all must hold) or "afterok:1?afternotok:2"
 * (any one suffices). */
static void gbatch_dep_slurm(struct gbatch_opts *o, const struct gbatch_source *src,
                             const char *spec)
{
    bool any = strchr(spec, '?') != NULL;
    if (any && strchr(spec, ','))
        gbatch_opt_error(src, "invalid --dependency '%s': join with ',' (all) or '?' (any), "
                              "not both",
                         spec);
    char *copy = xstrdup(spec), *save = NULL;
    for (char *item = strtok_r(copy, any ? "?" : ",", &save); item;
         item = strtok_r(NULL, any ? "?" : ",", &save)) {
        char *colon = strchr(item, ':');
        enum job_dep_kind kind;
        if (colon)
            *colon = '\0';
        if (job_dep_kind_parse(item, &kind) < 0)
            gbatch_opt_error(src, "unsupported dependency type '%s' in --dependency '%s': use "
                                  "afterok, afterany or afternotok",
                             item, spec);
        if (!colon || !colon[1])
            gbatch_opt_error(src, "no job id after '%s:' in --dependency '%s'", item, spec);
        char *isave = NULL;
        for (char *id = strtok_r(colon + 1, ":", &isave); id; id = strtok_r(NULL, ":", &isave))
            gbatch_dep_add(o, gbatch_dep_id(src, "--dependency", id), kind);
    }
    free(copy);
    if (any)
        o->deps_mode = 2;
}

/* Parses argv[0..argc) into o. Returns optind (the first non-option word). */
static int gbatch_parse(int argc, char **argv, struct gbatch_opts *o,
                        const struct gbatch_source *src)
{
    char *err = NULL;
    int c;
    optind = 0; /* glibc: full reinitialisation, the directives parse a second argv */
    opterr = 0;
    while ((c = getopt_long(argc, argv, gbatch_shortopts, gbatch_longopts, NULL)) != -1) {
        switch (c) {
        case 'J':
        case 'n':
            if (!*optarg)
                gbatch_opt_error(src, "the job name must not be empty");
            free(o->name);
            o->name = xstrdup(optarg);
            o->name_set = true;
            break;
        case 'p':
            if (parse_priority(optarg, &o->priority, &err) < 0)
                gbatch_opt_error(src, "%s", err);
            o->priority_set = true;
            break;
        case 't':
            if (parse_time_limit(optarg, &o->time_limit, &err) < 0)
                gbatch_opt_error(src, "%s", err);
            o->time_set = true;
            break;
        case 'H':
            o->hold = true;
            o->hold_set = true;
            break;
        case 'g':
            o->gpus = gbatch_gpu_count(src, "--gpus", optarg);
            o->gpus_set = true;
            break;
        case OPT_GRES:
            o->gpus = gbatch_gres(src, optarg);
            o->gpus_set = true;
            break;
        case OPT_SHARED:
            o->shared = true;
            o->shared_set = true;
            break;
        case OPT_GPU_MEMORY:
            if (parse_memory_mb(optarg, &o->gpu_memory_mb, &err) < 0)
                gbatch_opt_error(src, "--gpu-memory: %s", err);
            o->gpu_memory_set = true;
            break;
        case OPT_GPUS_PER_TASK: {
            int64_t v;
            if (parse_int64(optarg, &v) < 0 || (v != 0 && v != 1))
                gbatch_opt_error(src,
                                 "invalid value '%s' for --gpus-per-task: use 1 (one copy of "
                                 "the command per GPU) or 0 (one copy in all)",
                                 optarg);
            o->gpus_per_task = v;
            o->gpus_per_task_set = true;
            break;
        }
        case 'm':
            if (parse_memory_mb(optarg, &o->memory_mb, &err) < 0)
                gbatch_opt_error(src, "--memory: %s", err);
            o->memory_set = true;
            break;
        case OPT_BEGIN:
            if (parse_begin_time(optarg, now_wall(), &o->begin_time, &err) < 0)
                gbatch_opt_error(src, "--begin: %s", err);
            o->begin_set = true;
            break;
        case OPT_SIGNAL: {
            int sig;
            int64_t secs;
            bool main_only;
            if (parse_signal_spec(optarg, &sig, &secs, &main_only, &err) < 0)
                gbatch_opt_error(src, "--signal: %s", err);
            free(o->signal_spec);
            o->signal_spec = format_signal_spec(sig, secs, main_only);
            break;
        }
        case OPT_CONDA_ENV:
            free(o->conda_env);
            o->conda_env = xstrdup(optarg);
            break;
        case 'd':
            if (!strncasecmp(optarg, "after", 5))
                gbatch_dep_slurm(o, src, optarg);
            else
                gbatch_dep_list(o, src, "--depends-on", optarg, JOB_DEP_AFTEROK);
            break;
        case OPT_DEPENDS_ALL:
        case OPT_DEPENDS_ANY:
            gbatch_dep_list(o, src, c == OPT_DEPENDS_ALL ? "--depends-on-all" : "--depends-on-any",
                            optarg, JOB_DEP_AFTEROK);
            o->deps_mode = c == OPT_DEPENDS_ALL ? 1 : 2;
            break;
        case OPT_MAX_RETRIES:
            if (parse_int64(optarg, &o->max_retries) < 0 || o->max_retries < 0 ||
                o->max_retries > 1000)
                gbatch_opt_error(src, "invalid value '%s' for --max-retries: use 0 to 1000",
                                 optarg);
            o->max_retries_set = true;
            break;
        case OPT_ARRAY: {
            int64_t *tasks, k;
            size_t n;
            if (parse_array_spec(optarg, &tasks, &n, &k, &err) < 0)
                gbatch_opt_error(src, "--array: %s", err);
            free(tasks);
            free(o->array);
            o->array = xstrdup(optarg);
            break;
        }
        case OPT_MAX_CONCURRENT:
            if (parse_int64(optarg, &o->max_concurrent) < 0 || o->max_concurrent < 0)
                gbatch_opt_error(src, "invalid value '%s' for --max-concurrent: use a number of "
                                 "jobs >= 1 (0: no limit)", optarg);
            break;
        case OPT_PARAM: {
            char *pname, **vals;
            size_t n;
            if (parse_param(optarg, &pname, &vals, &n, &err) < 0)
                gbatch_opt_error(src, "%s", err);
            if (!o->param_names) {
                o->param_names = json_array();
                o->param_values = json_array();
            }
            json_t *list = json_array();
            for (size_t i = 0; i < n; i++) {
                json_t *v = json_string(vals[i]);
                if (!v)
                    gbatch_opt_error(src, "--param %s: a value is not valid UTF-8", pname);
                json_array_append_new(list, v);
                free(vals[i]);
            }
            free(vals);
            json_array_append_new(o->param_names, json_string(pname));
            json_array_append_new(o->param_values, list);
            free(pname);
            break;
        }
        case OPT_PARAM_FILE:
            free(o->param_file);
            o->param_file = xstrdup(optarg);
            break;
        case OPT_NAME_TEMPLATE:
            free(o->name_template);
            o->name_template = xstrdup(optarg);
            break;
        case OPT_NO_AUTO_CANCEL:
            o->no_auto_cancel = true;
            o->auto_cancel_set = true;
            break;
        case OPT_DRY_RUN:
        case OPT_PARSABLE:
        case OPT_SOCKET:
        case 'h':
        case 'V':
            if (src)
                gbatch_opt_error(src, "%s cannot be used in a script directive", argv[optind - 1]);
            if (c == OPT_DRY_RUN)
                o->dry_run = true;
            else if (c == OPT_PARSABLE)
                o->parsable = true;
            else if (c == OPT_SOCKET)
                client_set_socket(optarg);
            else if (c == 'h') {
                gbatch_help();
                exit(0);
            } else {
                printf("gbatch %s\n", GFLOW_VERSION);
                exit(0);
            }
            break;
        default:
            gbatch_opt_error(src, "%s", cli_option_error(argv, c, gbatch_longopts));
        }
    }
    return optind;
}

/* Splits a directive's text into words: blanks separate, quotes group ('...' and
 * "..." with \" inside). Returns -1 on an unterminated quote. */
static int gbatch_split_words(const char *s, char ***words, int *n)
{
    int cap = 8;
    *words = xmalloc((size_t)cap * sizeof(char *));
    *n = 0;
    struct strbuf w;
    strbuf_init(&w);
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        strbuf_reset(&w);
        strbuf_adds(&w, "");
        while (*p && *p != ' ' && *p != '\t') {
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                while (*p && *p != q) {
                    if (q == '"' && *p == '\\' && (p[1] == '"' || p[1] == '\\'))
                        p++;
                    strbuf_addc(&w, *p++);
                }
                if (!*p) {
                    strbuf_free(&w);
                    return -1;
                }
                p++;
            } else {
                strbuf_addc(&w, *p++);
            }
        }
        if (*n + 2 > cap) {
            cap *= 2;
            *words = xrealloc(*words, (size_t)cap * sizeof(char *));
        }
        (*words)[(*n)++] = strbuf_detach(&w);
    }
    strbuf_free(&w);
    (*words)[*n] = NULL;
    return 0;
}

/* Applies the "# GFLOW" lines of a script to o (options already set stay). */
static void gbatch_directives(const char *text, const char *file, struct gbatch_opts *o)
{
    struct gbatch_opts d = {.max_concurrent = -1};
    const char *line = text;
    for (int lineno = 1; *line; lineno++) {
        size_t len = strcspn(line, "\n");
        const char *rest = NULL;
        if (!strncmp(line, "# GFLOW", 7))
            rest = line + 7;
        else if (!strncmp(line, "#GFLOW", 6))
            rest = line + 6;
        if (rest && (rest == line + len || *rest == ' ' || *rest == '\t' || *rest == '\r')) {
            char *body = xstrndup(rest, (size_t)(line + len - rest));
            body[strcspn(body, "\r")] = '\0';
            struct gbatch_source src = {file, lineno};
            char **words;
            int n;
            if (gbatch_split_words(body, &words, &n) < 0)
                gbatch_opt_error(&src, "unterminated quote");
            /* getopt wants a program name in argv[0]. */
            char **argv = xmalloc((size_t)(n + 2) * sizeof(char *));
            argv[0] = "gbatch";
            memcpy(argv + 1, words, (size_t)(n + 1) * sizeof(char *));
            int first = gbatch_parse(n + 1, argv, &d, &src);
            if (first < n + 1)
                gbatch_opt_error(&src, "unexpected '%s': a directive holds only options",
                                 argv[first]);
            for (int i = 0; i < n; i++)
                free(words[i]);
            free(words);
            free(argv);
            free(body);
        }
        line += len;
        if (*line == '\n')
            line++;
    }
    if (d.name_set && !o->name_set) {
        o->name = d.name;
        o->name_set = true;
    } else {
        free(d.name);
    }
    if (d.priority_set && !o->priority_set) {
        o->priority = d.priority;
        o->priority_set = true;
    }
    if (d.time_set && !o->time_set) {
        o->time_limit = d.time_limit;
        o->time_set = true;
    }
    if (d.hold_set && !o->hold_set) {
        o->hold = d.hold;
        o->hold_set = true;
    }
    if (d.gpus_set && !o->gpus_set) {
        o->gpus = d.gpus;
        o->gpus_set = true;
    }
    if (d.gpu_memory_set && !o->gpu_memory_set) {
        o->gpu_memory_mb = d.gpu_memory_mb;
        o->gpu_memory_set = true;
    }
    if (d.shared_set && !o->shared_set) {
        o->shared = d.shared;
        o->shared_set = true;
    }
    if (d.gpus_per_task_set && !o->gpus_per_task_set) {
        o->gpus_per_task = d.gpus_per_task;
        o->gpus_per_task_set = true;
    }
    if (d.deps && !o->deps) {
        o->deps = d.deps;
        if (!o->deps_mode)
            o->deps_mode = d.deps_mode;
    } else {
        json_decref(d.deps);
    }
    if (d.auto_cancel_set && !o->auto_cancel_set) {
        o->no_auto_cancel = d.no_auto_cancel;
        o->auto_cancel_set = true;
    }
    if (d.memory_set && !o->memory_set) {
        o->memory_mb = d.memory_mb;
        o->memory_set = true;
    }
    if (d.conda_env && !o->conda_env)
        o->conda_env = d.conda_env;
    else
        free(d.conda_env);
    if (d.begin_set && !o->begin_set) {
        o->begin_time = d.begin_time;
        o->begin_set = true;
    }
    if (d.max_retries_set && !o->max_retries_set) {
        o->max_retries = d.max_retries;
        o->max_retries_set = true;
    }
    if (d.array && !o->array)
        o->array = xstrdup(d.array);
    free(d.array);
    if (d.max_concurrent >= 0 && o->max_concurrent < 0)
        o->max_concurrent = d.max_concurrent;
    if (d.signal_spec && !o->signal_spec)
        o->signal_spec = d.signal_spec;
    else
        free(d.signal_spec);
}

/* The GPU options that only make sense together, checked once the command line and
 * the directives are merged. */
static void gbatch_check_gpus(const struct gbatch_opts *o)
{
    if (o->shared && !o->gpu_memory_set)
        cli_usage_error("--shared needs --gpu-memory (the share of each GPU this job may use)");
    if (o->shared && o->gpus == 0)
        cli_usage_error("--shared needs --gpus N (the number of GPUs to share)");
    if (o->gpu_memory_set && o->gpus == 0)
        cli_usage_error("--gpu-memory is per GPU; it needs --gpus N");
    if (o->gpus_per_task == 1 && o->gpus == 0)
        cli_usage_error("--gpus-per-task 1 starts one copy per GPU; it needs --gpus N");
}

/* Checks that script text can travel as a JSON string. */
static void gbatch_check_text(const char *text, size_t len, const char *what)
{
    if (memchr(text, '\0', len))
        cli_die(CLI_EXIT_FAIL, "%s is not a text file (it contains NUL bytes)", what);
    json_t *s = json_stringn(text, len);
    if (!s)
        cli_die(CLI_EXIT_FAIL, "%s is not valid UTF-8 text; gflow stores scripts as text",
                   what);
    json_decref(s);
}

static char *gbatch_read_stdin(size_t *len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    char buf[65536];
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            cli_die(CLI_EXIT_FAIL, "cannot read the script from standard input: %s",
                       strerror(errno));
        if (n == 0)
            break;
        strbuf_add(&sb, buf, (size_t)n);
    }
    *len = sb.len;
    strbuf_adds(&sb, ""); /* make sure buf is allocated */
    return strbuf_detach(&sb);
}

static json_t *gbatch_environment(void)
{
    json_t *env = json_object();
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            continue;
        char *key = xstrndup(*e, (size_t)(eq - *e));
        json_t *v = json_string(eq + 1);
        if (v) /* a value that is not UTF-8 cannot travel in JSON; leave it out */
            json_object_set_new_nocheck(env, key, v);
        free(key);
    }
    return env;
}

static void gbatch_print_dry_run(const json_t *spec, const json_t *reply)
{
    const json_t *job = json_array_get(json_object_get(reply, "jobs"), 0);
    const char *name = json_string_value(json_object_get(job, "name"));
    if (!name)
        name = json_string_value(json_object_get(spec, "name"));
    const char *state = json_string_value(json_object_get(job, "state"));
    const json_t *prio = json_object_get(spec, "priority");
    const json_t *tl = json_object_get(spec, "time_limit");
    char *limit = json_is_integer(tl) && json_integer_value(tl) > 0
                      ? format_duration(json_integer_value(tl))
                      : xstrdup("UNLIMITED");
    printf("Dry run: nothing was submitted. The job would be:\n");
    printf("  Name:      %s\n", name ? name : "(chosen by the daemon)");
    if (json_object_get(spec, "command"))
        printf("  Command:   %s\n", json_string_value(json_object_get(spec, "command")));
    else
        printf("  Script:    %s\n", json_string_value(json_object_get(spec, "script_path")));
    printf("  Priority:  %lld\n",
           json_is_integer(prio) ? (long long)json_integer_value(prio) : JOB_PRIORITY_DEFAULT);
    printf("  TimeLimit: %s\n", limit);
    const json_t *gpus = json_object_get(spec, "gpus");
    char *gpu_req = output_gpu_request(json_is_integer(gpus) ? json_integer_value(gpus) : 0,
                                       json_is_true(json_object_get(spec, "shared")),
                                       json_integer_value(json_object_get(spec, "gpu_memory_mb")));
    printf("  GPUs:      %s%s\n", gpu_req,
           json_integer_value(json_object_get(spec, "gpus_per_task")) > 0
               ? ", one copy of the command per GPU (--gpus-per-task 1)"
               : "");
    free(gpu_req);
    const json_t *deps = json_object_get(spec, "depends_on");
    if (json_array_size(deps)) {
        printf("  Depends:   ");
        size_t i;
        const json_t *d;
        json_array_foreach(deps, i, d) {
            printf("%s%s:%lld", i ? "," : "", json_string_value(json_object_get(d, "kind")),
                   (long long)json_integer_value(json_object_get(d, "id")));
        }
        const char *mode = json_string_value(json_object_get(spec, "depends_mode"));
        printf(" (%s)%s\n", mode && !strcmp(mode, "any") ? "any one" : "all",
               json_is_false(json_object_get(spec, "auto_cancel")) ? ", no auto-cancel" : "");
    }
    const json_t *begin = json_object_get(spec, "begin_time");
    if (begin) {
        char *when = output_time(json_number_value(begin));
        printf("  Begin:     %s\n", when);
        free(when);
    }
    const char *sigspec = json_string_value(json_object_get(spec, "signal_spec"));
    if (sigspec)
        printf("  Signal:    %s (before the time limit)\n", sigspec);
    const json_t *mem = json_object_get(spec, "memory_mb");
    if (json_integer_value(mem) > 0)
        printf("  Memory:    %lld MiB\n", (long long)json_integer_value(mem));
    const char *conda = json_string_value(json_object_get(spec, "conda_env"));
    if (conda)
        printf("  CondaEnv:  %s\n", conda);
    const json_t *retries = json_object_get(spec, "max_retries");
    if (json_integer_value(retries) > 0)
        printf("  Retries:   up to %lld\n", (long long)json_integer_value(retries));
    printf("  WorkDir:   %s\n", json_string_value(json_object_get(spec, "workdir")));
    printf("  State:     %s\n", state                                         ? state
                                : json_is_true(json_object_get(spec, "hold")) ? "H"
                                                                              : "PD");
    free(limit);
}

/* The sweep's rows: the cartesian product of the --param-file rows (if any) and each
 * --param's values, as {"names": [...], "rows": [[...], ...]}; NULL without a sweep. */
static json_t *gbatch_sweep_rows(const struct gbatch_opts *o)
{
    if (!o->param_names && !o->param_file)
        return NULL;
    json_t *names = json_array(), *rows = json_array();
    json_array_append_new(rows, json_array());
    if (o->param_file) {
        size_t len;
        char *text = read_file(o->param_file, &len);
        if (!text)
            cli_die(CLI_EXIT_FAIL, "cannot read %s: %s", o->param_file, strerror(errno));
        char **header, **cells, *err = NULL;
        size_t nc, nr;
        if (parse_csv(text, &header, &nc, &cells, &nr, &err) < 0)
            cli_usage_error("--param-file %s: %s", o->param_file, err);
        json_t *csv_rows = json_array();
        for (size_t c = 0; c < nc; c++) {
            if (!param_name_valid(header[c]))
                cli_usage_error("--param-file %s: the column name '%s' must be letters, "
                                   "digits and '_', not starting with a digit", o->param_file,
                                   header[c]);
            json_array_append_new(names, json_string(header[c]));
        }
        for (size_t r = 0; r < nr; r++) {
            json_t *row = json_array();
            for (size_t c = 0; c < nc; c++) {
                json_t *v = json_string(cells[r * nc + c]);
                if (!v)
                    cli_usage_error("--param-file %s: row %zu is not valid UTF-8",
                                       o->param_file, r + 1);
                json_array_append_new(row, v);
            }
            json_array_append_new(csv_rows, row);
        }
        for (size_t i = 0; i < nc * (nr + 1); i++)
            free(header[i]);
        free(header);
        free(text);
        if (!nr)
            cli_usage_error("--param-file %s has no rows below its header", o->param_file);
        json_decref(rows);
        rows = csv_rows;
    }
    size_t pi;
    json_t *pname;
    json_array_foreach(o->param_names, pi, pname) {
        json_t *vals = json_array_get(o->param_values, pi);
        json_array_append(names, pname);
        json_t *next = json_array();
        size_t ri, vi;
        json_t *row, *v;
        json_array_foreach(rows, ri, row) {
            json_array_foreach(vals, vi, v) {
                json_t *r2 = json_copy(row);
                json_array_append(r2, v);
                json_array_append_new(next, r2);
            }
        }
        json_decref(rows);
        rows = next;
        if (json_array_size(rows) > 1000000)
            cli_usage_error("the sweep has more than 1,000,000 jobs");
    }
    size_t a, b;
    json_t *x, *y;
    json_array_foreach(names, a, x) {
        json_array_foreach(names, b, y) {
            if (b > a && json_equal(x, y))
                cli_usage_error("the parameter '%s' is given twice", json_string_value(x));
        }
    }
    return json_pack("{s:o, s:o}", "names", names, "rows", rows);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    struct gbatch_opts o = {.priority = JOB_PRIORITY_DEFAULT, .max_concurrent = -1};
    int first = gbatch_parse(argc, argv, &o, NULL);
    int nwords = argc - first;
    char **words = argv + first;

    json_t *spec = json_object();
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
            cli_die(CLI_EXIT_FAIL, "cannot resolve the path of %s: %s", words[0],
                       strerror(errno));
        gbatch_directives(script, words[0], &o);
    } else {
        char *command = shell_join(nwords, words);
        if (!*command)
            cli_usage_error("the command is empty");
        json_t *c = json_string(command);
        if (!c)
            cli_die(CLI_EXIT_FAIL, "the command is not valid UTF-8 text");
        json_object_set_new(spec, "command", c);
        free(command);
    }
    if (script) {
        json_object_set_new(spec, "script", json_stringn(script, script_len));
        json_t *p = json_string(script_path);
        if (!p)
            cli_die(CLI_EXIT_FAIL, "the script's path is not valid UTF-8");
        json_object_set_new(spec, "script_path", p);
    }

    gbatch_check_gpus(&o);

    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        cli_die(CLI_EXIT_FAIL, "cannot determine the current directory: %s", strerror(errno));
    json_t *wd = json_string(cwd);
    if (!wd)
        cli_die(CLI_EXIT_FAIL, "the current directory's path is not valid UTF-8");
    json_object_set_new(spec, "workdir", wd);
    if (o.name_set) {
        json_t *n = json_string(o.name);
        if (!n)
            cli_usage_error("the job name is not valid UTF-8");
        json_object_set_new(spec, "name", n);
    }
    json_object_set_new(spec, "env", gbatch_environment());
    if (o.priority_set)
        json_object_set_new(spec, "priority", json_integer(o.priority));
    if (o.time_set)
        json_object_set_new(spec, "time_limit", json_integer(o.time_limit));
    if (o.hold)
        json_object_set_new(spec, "hold", json_true());
    if (o.gpus_set)
        json_object_set_new(spec, "gpus", json_integer(o.gpus));
    if (o.gpu_memory_set)
        json_object_set_new(spec, "gpu_memory_mb", json_integer(o.gpu_memory_mb));
    if (o.shared)
        json_object_set_new(spec, "shared", json_true());
    if (o.gpus_per_task_set)
        json_object_set_new(spec, "gpus_per_task", json_integer(o.gpus_per_task));
    if (o.deps && json_array_size(o.deps))
        json_object_set(spec, "depends_on", o.deps);
    if (o.deps_mode)
        json_object_set_new(spec, "depends_mode", json_string(o.deps_mode == 2 ? "any" : "all"));
    if (o.no_auto_cancel)
        json_object_set_new(spec, "auto_cancel", json_false());
    if (o.memory_set)
        json_object_set_new(spec, "memory_mb", json_integer(o.memory_mb));
    if (o.begin_set)
        json_object_set_new(spec, "begin_time", json_real(o.begin_time));
    if (o.max_retries_set)
        json_object_set_new(spec, "max_retries", json_integer(o.max_retries));
    if (o.signal_spec) {
        if (!o.time_set || o.time_limit <= 0)
            cli_usage_error("--signal sends SIG before the time limit; it needs --time");
        json_object_set_new(spec, "signal_spec", json_string(o.signal_spec));
    }
    /* A command job runs in the submitting shell's conda environment unless told
     * otherwise; a script says what it needs itself (a directive). */
    const char *conda = o.conda_env;
    if (!conda && !script)
        conda = getenv("CONDA_DEFAULT_ENV");
    if (conda && *conda) {
        json_t *c = json_string(conda);
        if (!c)
            cli_usage_error("the conda environment's name is not valid UTF-8");
        json_object_set_new(spec, "conda_env", c);
    }
    json_t *rows = gbatch_sweep_rows(&o);
    if (o.array && rows)
        cli_usage_error("--array and --param/--param-file cannot be combined");
    if (o.name_template && !rows)
        cli_usage_error("--name-template names the jobs of a sweep: it needs --param or "
                           "--param-file");
    if (o.array)
        json_object_set_new(spec, "array", json_string(o.array));
    if (rows) {
        json_object_set_new(spec, "params", rows);
        if (o.name_template) {
            json_t *t = json_string(o.name_template);
            if (!t)
                cli_usage_error("the name template is not valid UTF-8");
            json_object_set_new(spec, "name_template", t);
        }
    }
    if (o.max_concurrent >= 0)
        json_object_set_new(spec, "max_concurrent", json_integer(o.max_concurrent));
    if (o.dry_run)
        json_object_set_new(spec, "dry_run", json_true());

    json_t *reply = cli_call("POST", "/v1/jobs", spec);
    const json_t *list = json_object_get(reply, "jobs");
    if (o.dry_run && (o.array || rows)) {
        size_t i;
        const json_t *jb;
        printf("Dry run: nothing was submitted. Would submit %zu job(s):\n", json_array_size(list));
        json_array_foreach(list, i, jb) {
            const char *cmd = json_string_value(json_object_get(jb, "command"));
            printf("  [%zu] %s: %s\n", i + 1, json_string_value(json_object_get(jb, "name")),
                   cmd ? cmd : json_string_value(json_object_get(spec, "script_path")));
        }
    } else if (!o.dry_run && json_is_integer(json_object_get(reply, "count")) &&
               json_integer_value(json_object_get(reply, "count")) > 1) {
        long long first_id = json_integer_value(json_object_get(reply, "first_id"));
        long long last = json_integer_value(json_object_get(reply, "last_id"));
        long long count = json_integer_value(json_object_get(reply, "count"));
        if (o.parsable)
            printf("%lld\n", first_id);
        else
            printf("Submitted %lld batch jobs %lld-%lld (group %lld)\n", count, first_id, last,
                   (long long)json_integer_value(json_object_get(reply, "group_id")));
    } else if (o.dry_run) {
        gbatch_print_dry_run(spec, reply);
    } else {
        const json_t *job = json_array_get(json_object_get(reply, "jobs"), 0);
        const json_t *id = json_object_get(job, "id");
        if (!json_is_integer(id))
            cli_die(CLI_EXIT_FAIL, "gflowd accepted the job but sent no job id");
        const char *name = json_string_value(json_object_get(job, "name"));
        if (o.parsable)
            printf("%lld\n", (long long)json_integer_value(id));
        else
            printf("Submitted batch job %lld (%s)\n", (long long)json_integer_value(id),
                   name ? name : "-");
    }
    json_decref(reply);
    json_decref(spec);
    free(script);
    free(script_path);
    free(cwd);
    free(o.name);
    free(o.conda_env);
    free(o.signal_spec);
    free(o.array);
    free(o.param_file);
    free(o.name_template);
    json_decref(o.param_names);
    json_decref(o.param_values);
    json_decref(o.deps);
    return cli_finish(0);
}
