/* jobopts: the job options of gbatch, gjob update and gjob redo in one table (see
 * jobopts.h). Each row names the option and its aliases, the commands that take it, the
 * values that remove the field in update and redo, its help text, and its value parser;
 * getopt's tables and the help are made from the rows, so they cannot drift apart. */
#include "jobopts.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "gpuinfo.h"
#include "job.h"
#include "parse.h"
#include "util.h"

#define JO_STR_(x) #x
#define JO_STR(x) JO_STR_(x)

#define JO_ALL (JOBOPTS_SUBMIT | JOBOPTS_UPDATE | JOBOPTS_REDO)

enum {
    JOBOPT_BEGIN = JOBOPT_FIRST,
    JOBOPT_SIGNAL,
    JOBOPT_MAX_RETRIES,
    JOBOPT_CONDA_ENV,
    JOBOPT_GRES,
    JOBOPT_GPU_MEMORY,
    JOBOPT_SHARED,
    JOBOPT_GPUS_PER_TASK,
    JOBOPT_DEPENDS_ALL,
    JOBOPT_DEPENDS_ANY,
    JOBOPT_NO_AUTO_CANCEL,
    JOBOPT_UMASK,
    JOBOPT_MIG,
    JOBOPT_REQUEUE,
    JOBOPT_PTY,
    JOBOPT_CPUS_PER_GPU,
};

struct jobopt;
/* Parses arg into spec: 0, or -1 with ctx->error set. */
typedef int jobopt_parse_fn(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                            json_t *spec);

struct jobopt {
    int val;              /* what getopt_long returns: the first short letter, or JOBOPT_* */
    const char *shorts;   /* its short options; NULL for none */
    const char *longs[5]; /* its long names; the first is the one help and messages use */
    bool has_arg;
    unsigned cmds;        /* the commands that accept it (enum jobopts_cmd bits) */
    const char *clear[3]; /* update and redo: the values that remove the field */
    const char *cleared;  /* what removing it means, for the help */
    enum jobopts_section section;
    const char *arg;         /* the value's name in the help */
    const char *synopsis;    /* the help's names, where not made from shorts, longs, arg */
    const char *help;        /* what it does */
    const char *submit_help; /* appended in gbatch's help */
    const char *change_help; /* appended in the help of update and redo */
    jobopt_parse_fn *parse;
};

static jobopt_parse_fn jo_name, jo_priority, jo_time, jo_begin, jo_signal, jo_hold, jo_max_retries,
    jo_memory, jo_conda_env, jo_gpus, jo_gres, jo_gpu_memory, jo_shared, jo_gpus_per_task,
    jo_depends, jo_depends_mode, jo_no_auto_cancel, jo_umask, jo_mig, jo_requeue, jo_pty,
    jo_cpus_per_gpu;

/* In the order of the help. (Kept out of clang-format: one row per option reads as a table.) */
/* clang-format off */
static const struct jobopt jo_table[] = {
    {.val = 'J', .shorts = "Jn", .longs = {"name", "job-name"}, .has_arg = true, .cmds = JO_ALL,
     .arg = "NAME", .help = "job name",
     .submit_help = " (default, as gflow: gjob-<id>)",
     .parse = jo_name},
    {.val = 'p', .shorts = "p", .longs = {"priority"}, .has_arg = true, .cmds = JO_ALL,
     .arg = "N", .help = "priority 0-255, higher runs first",
     .submit_help = " (default " JO_STR(JOB_PRIORITY_DEFAULT) ")", .parse = jo_priority},
    {.val = 't', .shorts = "t", .longs = {"time", "time-limit", "timelimit"}, .has_arg = true,
     .cmds = JO_ALL, .clear = {"0"}, .cleared = "none", .arg = "T",
     .help = "time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (a bare number "
             "is minutes); the job is stopped when it runs out",
     .parse = jo_time},
    {.val = JOBOPT_BEGIN, .longs = {"begin"}, .has_arg = true, .cmds = JO_ALL,
     .clear = {"now"}, .cleared = "no wait", .arg = "T",
     .help = "start no earlier than T: HH:MM[:SS] (today, or tomorrow once passed), "
             "YYYY-MM-DD[THH:MM[:SS]] (in timezone; Z or +08:00 for another) or "
             "now+N[s|m|h|d] (also +N; a bare N is minutes, as in gflow); it waits with reason "
             "BeginTime until then",
     .parse = jo_begin},
    {.val = JOBOPT_SIGNAL, .longs = {"signal"}, .has_arg = true, .cmds = JO_ALL,
     .clear = {"", "none"}, .cleared = "none", .arg = "[B:]SIG[@SECS]",
     .help = "send SIG (USR1, SIGUSR1 or a number) SECS seconds (default 60) before the time "
             "limit, e.g. to checkpoint; then SIGTERM, SIGKILL at the limit as usual. B: only "
             "to the job's main process (the batch shell), not to every process it started. "
             "Needs --time",
     .parse = jo_signal},
    {.val = 'H', .shorts = "H", .longs = {"hold"}, .cmds = JOBOPTS_SUBMIT | JOBOPTS_REDO,
     .help = "submit on hold; start it with 'gjob release'", .parse = jo_hold},
    {.val = JOBOPT_MAX_RETRIES, .longs = {"max-retries"}, .has_arg = true, .cmds = JO_ALL,
     .arg = "N",
     .help = "if the job fails (non-zero exit, killed by a signal, OutOfMemory), run it again "
             "as a new job (a new attempt), up to N times (0 to 1000); jobs waiting on it "
             "wait on the newest attempt. Time limits and cancellations are not retried",
     .parse = jo_max_retries},
    {.val = 'm', .shorts = "m", .longs = {"memory", "mem", "max-mem", "max-memory"},
     .has_arg = true, .cmds = JO_ALL, .clear = {"0"}, .cleared = "no limit", .arg = "M",
     .help = "host memory for the job (512, 1024M, 24G; a bare number is MiB): it waits "
             "(reason Memory) until the memory declared by running jobs plus M fits the "
             "machine, and is held to M (cgroup v2, v1, else a watchdog; see 'gflowd status'); "
             "over it, it ends F with reason OutOfMemory",
     .parse = jo_memory},
    {.val = JOBOPT_CONDA_ENV, .longs = {"conda-env"}, .has_arg = true, .cmds = JO_ALL,
     .arg = "NAME",
     .help = "activate this conda environment in the job's shell ('' for none); if conda or "
             "the environment is missing the job fails at once (LaunchFailed)",
     .submit_help = "; a command job uses $CONDA_DEFAULT_ENV when this is not given",
     .parse = jo_conda_env},
    {.val = JOBOPT_UMASK, .longs = {"umask"}, .has_arg = true, .cmds = JO_ALL, .arg = "MODE",
     .help = "the umask the job runs with, in octal (022, 0077): the permissions files it "
             "creates do not get",
     .submit_help = " (default: this shell's umask)", .parse = jo_umask},
    {.val = JOBOPT_REQUEUE, .longs = {"requeue"}, .cmds = JO_ALL,
     .help = "the job may be preempted: with scheduler.preempt on, a job of much higher "
             "priority that waits for GPUs may stop it (SIGTERM, SIGKILL after "
             "scheduler.preempt_grace) and it is queued again with the same id, its log "
             "continued; see 'gjob show' (Requeued)",
     .parse = jo_requeue},
    {.val = JOBOPT_PTY, .longs = {"pty"}, .cmds = JO_ALL,
     .help = "run the job on a pseudo-terminal (its stdin, stdout and stderr) that "
             "'gjob attach ID' connects to, to type into it and watch it; its output still "
             "goes to the log",
     .parse = jo_pty},

    {.val = 'g', .shorts = "g", .longs = {"gpus"}, .has_arg = true, .cmds = JO_ALL,
     .section = JOBOPTS_GPUS, .arg = "N",
     .help = "N GPUs for this job alone, at most " JO_STR(GPUINFO_MAX_GPUS)
             "; with 0 the job sees CUDA_VISIBLE_DEVICES=\"\"",
     .submit_help = " (default 0)", .parse = jo_gpus},
    {.val = JOBOPT_GRES, .longs = {"gres"}, .has_arg = true, .cmds = JO_ALL,
     .section = JOBOPTS_GPUS, .synopsis = "--gres N, --gres gpu:N, --gres mig:PROFILE:N",
     .help = "the same as --gpus N, as Slurm spells it (--gres gpu is one GPU); "
             "mig:PROFILE[:1] is --mig PROFILE",
     .parse = jo_gres},
    {.val = JOBOPT_MIG, .longs = {"mig"}, .has_arg = true, .cmds = JO_ALL,
     .clear = {"none"}, .cleared = "no MIG instances", .section = JOBOPTS_GPUS,
     .arg = "PROFILE[:N]",
     .help = "one MIG instance of a MIG profile such as 1g.18gb or 3g.71gb (see ginfo) "
             "instead of whole GPUs; the job sees it as CUDA_VISIBLE_DEVICES=MIG-<uuid>. N above "
             "1 is refused: a CUDA process uses only one instance (submit one job per "
             "instance, e.g. --array 1-N). Not with --gpus",
     .parse = jo_mig},
    {.val = JOBOPT_GPU_MEMORY, .longs = {"gpu-memory", "max-gpu-mem", "max-gpu-memory"},
     .has_arg = true, .cmds = JO_ALL, .section = JOBOPTS_GPUS, .arg = "M",
     .help = "GPU memory per GPU (512, 512M, 24G): an exclusive job waits until M is actually "
             "free on each GPU it gets; with --shared, the share of each GPU it may use",
     .parse = jo_gpu_memory},
    {.val = JOBOPT_SHARED, .longs = {"shared"}, .cmds = JO_ALL, .section = JOBOPTS_GPUS,
     .help = "share GPUs with other --shared jobs while their --gpu-memory fits (needs "
             "--gpu-memory)",
     .parse = jo_shared},
    {.val = JOBOPT_GPUS_PER_TASK, .longs = {"gpus-per-task"}, .has_arg = true, .cmds = JO_ALL,
     .section = JOBOPTS_GPUS, .arg = "N",
     .help = "1: start one copy of the command per GPU, each seeing one GPU, with RANK, "
             "LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (like torchrun); 0: one "
             "copy (the default)",
     .parse = jo_gpus_per_task},
    {.val = JOBOPT_CPUS_PER_GPU, .longs = {"cpus-per-gpu"}, .has_arg = true, .cmds = JO_ALL,
     .clear = {"0"}, .cleared = "no pinning of its own", .section = JOBOPTS_GPUS, .arg = "N",
     .help = "pin the job to N CPUs per GPU, chosen among its GPUs' local CPUs (NUMA node) "
             "and not given to other pinned jobs where possible (cgroup v2 cpuset, else "
             "sched_setaffinity); 'gjob show' prints them (CPUs). Needs --gpus",
     .parse = jo_cpus_per_gpu},

    {.val = 'd', .shorts = "d", .longs = {"depends-on", "dependency"}, .has_arg = true,
     .cmds = JO_ALL, .clear = {"none", ""}, .cleared = "no dependencies",
     .section = JOBOPTS_DEPS, .arg = "X",
     .help = "start only after job X finished successfully (CD); a list 1,3,5-7 means all of "
             "them; or Slurm's form: afterok:ID[:ID...], afterany:ID (ended in any state), "
             "afternotok:ID (failed, timed out or cancelled), joined by ',' (all must hold) or "
             "'?' (any one suffices). Repeated, the lists add up",
     .change_help = ". The list replaces the job's dependencies", .parse = jo_depends},
    {.val = JOBOPT_DEPENDS_ALL, .longs = {"depends-on-all"}, .has_arg = true, .cmds = JO_ALL,
     .section = JOBOPTS_DEPS, .arg = "X,Y", .help = "after all of them finished successfully",
     .parse = jo_depends_mode},
    {.val = JOBOPT_DEPENDS_ANY, .longs = {"depends-on-any"}, .has_arg = true, .cmds = JO_ALL,
     .section = JOBOPTS_DEPS, .arg = "X,Y",
     .help = "after any one of them finished successfully", .parse = jo_depends_mode},
    {.val = JOBOPT_NO_AUTO_CANCEL, .longs = {"no-auto-cancel"}, .cmds = JO_ALL,
     .section = JOBOPTS_DEPS,
     .help = "if a dependency can no longer be met, keep waiting (reason "
             "DependencyFailed:<id>) instead of being cancelled",
     .parse = jo_no_auto_cancel},
};
/* clang-format on */

#define JO_COUNT (sizeof(jo_table) / sizeof(jo_table[0]))

static void jo_vfail(const struct jobopts_ctx *ctx, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void jo_vfail(const struct jobopts_ctx *ctx, const char *fmt, va_list ap)
{
    char *msg = xvasprintf(fmt, ap);
    free(ctx->error->message);
    ctx->error->status = CLI_EXIT_USAGE;
    if (ctx->file)
        ctx->error->message =
            xasprintf("%s:%d: %s (in a '# GFLOW' directive)", ctx->file, ctx->line, msg);
    else
        ctx->error->message = xasprintf("%s; see '%s --help'", msg, ctx->usage);
    free(msg);
}

int jobopts_fail(const struct jobopts_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jo_vfail(ctx, fmt, ap);
    va_end(ap);
    return -1;
}

void jobopts_exit(const struct jobopts_err *error)
{
    cli_die(error->status, "%s", error->message);
}

void jobopts_error(const struct jobopts_ctx *ctx, const char *fmt, ...)
{
    struct jobopts_err error = {0};
    struct jobopts_ctx mine = *ctx;
    mine.error = &error;
    va_list ap;
    va_start(ap, fmt);
    jo_vfail(&mine, fmt, ap);
    va_end(ap);
    jobopts_exit(&error);
}

int jobopts_fail_err(const struct jobopts_ctx *ctx, const char *opt, char *err)
{
    if (opt)
        jobopts_fail(ctx, "%s: %s", opt, err);
    else
        jobopts_fail(ctx, "%s", err);
    free(err);
    return -1;
}

/* jo_fail_err after the option's name: "--begin: ...". */
static int jo_fail_opt(const struct jobopts_ctx *ctx, const struct jobopt *o, char *err)
{
    char *opt = xasprintf("--%s", o->longs[0]);
    jobopts_fail_err(ctx, opt, err);
    free(opt);
    return -1;
}

/* ---- getopt's tables ---- */

static const struct jobopt *jo_find(int c)
{
    for (size_t i = 0; i < JO_COUNT; i++) {
        const char *shorts = jo_table[i].shorts;
        if (jo_table[i].val == c || (c > 0 && c < 256 && shorts && strchr(shorts, c)))
            return &jo_table[i];
    }
    return NULL;
}

int jobopts_val(const char *long_name)
{
    for (size_t i = 0; i < JO_COUNT; i++)
        for (const char *const *l = jo_table[i].longs; *l; l++)
            if (!strcmp(*l, long_name))
                return jo_table[i].val;
    return -1;
}

struct option *jobopts_longopts(const struct option *extra)
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i < JO_COUNT; i++)
        for (const char *const *l = jo_table[i].longs; *l; l++)
            n++;
    for (const struct option *e = extra; e && e->name; e++)
        n++;
    struct option *all = xcalloc(n + 1, sizeof(*all));
    for (size_t i = 0; i < JO_COUNT; i++) {
        for (const char *const *l = jo_table[i].longs; *l; l++)
            all[k++] = (struct option){*l, jo_table[i].has_arg ? required_argument : no_argument,
                                       NULL, jo_table[i].val};
    }
    for (const struct option *e = extra; e && e->name; e++)
        all[k++] = *e;
    return all;
}

char *jobopts_shortopts(const char *prefix, const char *extra)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, prefix);
    for (size_t i = 0; i < JO_COUNT; i++) {
        for (const char *s = jo_table[i].shorts; s && *s; s++) {
            strbuf_addc(&sb, *s);
            if (jo_table[i].has_arg)
                strbuf_addc(&sb, ':');
        }
    }
    strbuf_adds(&sb, extra);
    return strbuf_detach(&sb);
}

/* "gbatch and 'gjob redo'": the commands of a cmds mask, for a message. */
static char *jo_cmd_names(unsigned cmds)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{JOBOPTS_SUBMIT, "gbatch"},
                 {JOBOPTS_UPDATE, "'gjob update'"},
                 {JOBOPTS_REDO, "'gjob redo'"}};
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (cmds & names[i].bit)
            strbuf_addf(&sb, "%s%s", sb.len ? " and " : "", names[i].name);
    }
    return strbuf_detach(&sb);
}

int jobopts_apply(const struct jobopts_ctx *ctx, int c, const char *arg, json_t *spec)
{
    const struct jobopt *o = jo_find(c);
    if (!o)
        return 0;
    if (!(o->cmds & ctx->cmd)) {
        char *names = jo_cmd_names(o->cmds);
        jobopts_fail(ctx, "--%s is for %s, not '%s'", o->longs[0], names, ctx->usage);
        free(names);
        return -1;
    }
    return o->parse(ctx, o, arg, spec) < 0 ? -1 : 1;
}

/* ---- the value parsers, one per option ---- */

/* Whether arg removes the field: only in update and redo, only the option's words. */
static bool jo_clears(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg)
{
    if (ctx->cmd == JOBOPTS_SUBMIT)
        return false;
    for (const char *const *w = o->clear; *w; w++)
        if (!strcmp(arg, *w))
            return true;
    return false;
}

static int jo_set_text(const struct jobopts_ctx *ctx, json_t *spec, const char *field,
                       const char *arg, const char *what)
{
    json_t *v = json_string(arg);
    if (!v)
        return jobopts_fail(ctx, "%s is not valid UTF-8", what);
    json_object_set_new(spec, field, v);
    return 0;
}

static int jo_name(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                   json_t *spec)
{
    (void)o;
    if (!*arg)
        return jobopts_fail(ctx, "the job name must not be empty");
    return jo_set_text(ctx, spec, JOB_KEY_NAME, arg, "the job name");
}

static int jo_priority(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                       json_t *spec)
{
    (void)o;
    int prio;
    char *err = NULL;
    if (parse_priority(arg, &prio, &err) < 0)
        return jobopts_fail_err(ctx, NULL, err);
    json_object_set_new(spec, JOB_KEY_PRIORITY, json_integer(prio));
    return 0;
}

/* "0", "0:00", "00:00:00", "0-0": a time limit of zero in any of its forms. */
static bool jo_zero_duration(const char *s)
{
    return s[0] == '0' && strspn(s, "0:-") == strlen(s);
}

static int jo_time(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                   json_t *spec)
{
    int64_t secs = 0;
    char *err = NULL;
    /* update and redo: zero is "no limit", however it is written. */
    bool zero = ctx->cmd != JOBOPTS_SUBMIT && jo_zero_duration(arg);
    if (!zero && !jo_clears(ctx, o, arg) && parse_time_limit(arg, &secs, &err) < 0)
        return jobopts_fail_err(ctx, NULL, err);
    json_object_set_new(spec, JOB_KEY_TIME_LIMIT, json_integer(secs));
    return 0;
}

static int jo_begin(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                    json_t *spec)
{
    double at = 0;
    char *err = NULL;
    if (!jo_clears(ctx, o, arg) && parse_begin_time(arg, now_wall(), &at, &err) < 0)
        return jo_fail_opt(ctx, o, err);
    json_object_set_new(spec, JOB_KEY_BEGIN_TIME, json_real(at));
    return 0;
}

static int jo_signal(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                     json_t *spec)
{
    if (jo_clears(ctx, o, arg)) {
        json_object_set_new(spec, JOB_KEY_SIGNAL_SPEC, json_null());
        return 0;
    }
    int sig;
    int64_t secs;
    bool main_only;
    char *err = NULL;
    if (parse_signal_spec(arg, &sig, &secs, &main_only, &err) < 0)
        return jo_fail_opt(ctx, o, err);
    char *canonical = format_signal_spec(sig, secs, main_only);
    json_object_set_new(spec, JOB_KEY_SIGNAL_SPEC, json_string(canonical));
    free(canonical);
    return 0;
}

static int jo_hold(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                   json_t *spec)
{
    (void)ctx, (void)o, (void)arg;
    json_object_set_new(spec, "hold", json_true());
    return 0;
}

static int jo_max_retries(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                          json_t *spec)
{
    int64_t v;
    if (parse_int64(arg, &v) < 0 || v < 0 || v > 1000)
        return jobopts_fail(ctx, "invalid value '%s' for --%s: use 0 to 1000", arg, o->longs[0]);
    json_object_set_new(spec, JOB_KEY_MAX_RETRIES, json_integer(v));
    return 0;
}

/* --memory and --gpu-memory: a size in MiB; 0 only where it clears. */
static int jo_size(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                   json_t *spec, const char *field)
{
    int64_t mb = 0;
    char *err = NULL;
    if (!jo_clears(ctx, o, arg) && parse_memory_mb(arg, &mb, &err) < 0)
        return jo_fail_opt(ctx, o, err);
    json_object_set_new(spec, field, json_integer(mb));
    return 0;
}

static int jo_memory(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                     json_t *spec)
{
    return jo_size(ctx, o, arg, spec, JOB_KEY_MEMORY_MB);
}

static int jo_gpu_memory(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                         json_t *spec)
{
    return jo_size(ctx, o, arg, spec, JOB_KEY_GPU_MEMORY_MB);
}

/* '' is "no environment" everywhere: for gbatch also not $CONDA_DEFAULT_ENV. */
static int jo_conda_env(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                        json_t *spec)
{
    (void)o;
    if (*arg)
        return jo_set_text(ctx, spec, JOB_KEY_CONDA_ENV, arg, "the conda environment's name");
    json_object_set_new(spec, JOB_KEY_CONDA_ENV, json_null());
    return 0;
}

static int jo_umask(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                    json_t *spec)
{
    int mask;
    char *err = NULL;
    if (parse_umask(arg, &mask, &err) < 0)
        return jo_fail_opt(ctx, o, err);
    char text[8];
    format_umask(mask, text);
    json_object_set_new(spec, JOB_KEY_UMASK, json_string(text));
    return 0;
}

/* More GPUs than the daemon can ever manage is a typo: refused before it is sent. */
static int jo_gpu_count(const struct jobopts_ctx *ctx, const char *opt, const char *arg, int64_t *v)
{
    if (parse_int64(arg, v) < 0 || *v < 0)
        return jobopts_fail(ctx, "invalid GPU count '%s' for %s: use a whole number >= 0", arg,
                            opt);
    if (*v > GPUINFO_MAX_GPUS)
        return jobopts_fail(ctx, "invalid GPU count '%s' for %s: at most %d", arg, opt,
                            GPUINFO_MAX_GPUS);
    return 0;
}

static int jo_gpus(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                   json_t *spec)
{
    (void)o;
    int64_t v;
    if (jo_gpu_count(ctx, "--gpus", arg, &v) < 0)
        return -1;
    json_object_set_new(spec, JOB_KEY_GPUS, json_integer(v));
    return 0;
}

/* "PROFILE[:N]" into mig_profile and mig_count; opt and shown (the value as given) are
 * for errors. */
static int jo_mig_request(const struct jobopts_ctx *ctx, const char *opt, const char *shown,
                          const char *arg, json_t *spec)
{
    char profile[GPUINFO_MIG_PROFILE_MAX];
    const char *colon = strchr(arg, ':');
    size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
    int64_t n = 1;
    if (len >= sizeof(profile))
        len = sizeof(profile) - 1;
    memcpy(profile, arg, len);
    profile[len] = '\0';
    if (!gpu_mig_profile_valid(profile))
        return jobopts_fail(ctx, "invalid %s '%s': use a MIG profile like 1g.18gb, optionally :N",
                            opt, shown);
    if (colon && (parse_int64(colon + 1, &n) < 0 || n < 1 || n > GPUINFO_MAX_MIGS))
        return jobopts_fail(ctx, "invalid %s '%s': the count after ':' must be 1 to %d", opt, shown,
                            GPUINFO_MAX_MIGS);
    json_object_set_new(spec, JOB_KEY_MIG_PROFILE, json_string(profile));
    json_object_set_new(spec, JOB_KEY_MIG_COUNT, json_integer(n));
    return 0;
}

static int jo_mig(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                  json_t *spec)
{
    if (jo_clears(ctx, o, arg)) {
        json_object_set_new(spec, JOB_KEY_MIG_PROFILE, json_null());
        return 0;
    }
    return jo_mig_request(ctx, "--mig", arg, arg, spec);
}

/* Slurm's --gres for GPUs: "N", "gpu" (one GPU), "gpu:N" or "mig:PROFILE[:N]". */
static int jo_gres(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                   json_t *spec)
{
    (void)o;
    int64_t v = 1;
    const char *count = arg;
    if (!strcmp(arg, "gpu")) {
        json_object_set_new(spec, JOB_KEY_GPUS, json_integer(v));
        return 0;
    }
    if (str_starts_with(arg, "mig:")) /* Slurm's mig:PROFILE:N (the MIG device plugin) */
        return jo_mig_request(ctx, "--gres", arg, arg + 4, spec);
    if (str_starts_with(arg, "gpu:")) {
        count = arg + 4;
        if (strchr(count, ':'))
            return jobopts_fail(ctx,
                                "invalid --gres '%s': GPU types are not supported (one machine, "
                                "one pool of GPUs); use --gres gpu:N",
                                arg);
    } else if (*arg && !(*arg >= '0' && *arg <= '9')) {
        return jobopts_fail(ctx,
                            "invalid --gres '%s': only GPUs can be requested; use --gres gpu:N "
                            "or --gres mig:PROFILE:N",
                            arg);
    }
    if (parse_int64(count, &v) < 0 || v < 0)
        return jobopts_fail(ctx, "invalid --gres '%s': use gpu:N or N with a whole number N >= 0",
                            arg);
    if (v > GPUINFO_MAX_GPUS)
        return jobopts_fail(ctx, "invalid --gres '%s': at most %d GPUs", arg, GPUINFO_MAX_GPUS);
    json_object_set_new(spec, JOB_KEY_GPUS, json_integer(v));
    return 0;
}

static int jo_requeue(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                      json_t *spec)
{
    (void)ctx, (void)o, (void)arg;
    json_object_set_new(spec, JOB_KEY_REQUEUE, json_true());
    return 0;
}

static int jo_pty(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                  json_t *spec)
{
    (void)ctx, (void)o, (void)arg;
    json_object_set_new(spec, JOB_KEY_PTY, json_true());
    return 0;
}

static int jo_shared(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                     json_t *spec)
{
    (void)ctx, (void)o, (void)arg;
    json_object_set_new(spec, JOB_KEY_SHARED, json_true());
    return 0;
}

static int jo_gpus_per_task(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                            json_t *spec)
{
    int64_t v;
    if (parse_int64(arg, &v) < 0 || (v != 0 && v != 1))
        return jobopts_fail(ctx,
                            "invalid value '%s' for --%s: use 1 (one copy of the command per "
                            "GPU) or 0 (one copy in all)",
                            arg, o->longs[0]);
    json_object_set_new(spec, JOB_KEY_GPUS_PER_TASK, json_integer(v));
    return 0;
}

static int jo_cpus_per_gpu(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                           json_t *spec)
{
    int64_t v;
    if (parse_int64(arg, &v) < 0 || v < 0 || v > JOB_CPUS_PER_GPU_MAX)
        return jobopts_fail(ctx,
                            "invalid value '%s' for --%s: use a number of CPUs per GPU from 1 "
                            "to %d (0: none)",
                            arg, o->longs[0], JOB_CPUS_PER_GPU_MAX);
    json_object_set_new(spec, JOB_KEY_CPUS_PER_GPU, json_integer(v));
    return 0;
}

static int jo_depends(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                      json_t *spec)
{
    if (jo_clears(ctx, o, arg)) {
        json_object_set_new(spec, JOB_KEY_DEPENDS_ON, json_array());
        json_object_del(spec, JOB_KEY_DEPENDS_MODE);
        return 0;
    }
    return jobopts_deps(ctx, "--depends-on", arg, true, NULL, spec);
}

static int jo_depends_mode(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                           json_t *spec)
{
    char *opt = xasprintf("--%s", o->longs[0]);
    int r = jobopts_deps(ctx, opt, arg, false, o->val == JOBOPT_DEPENDS_ANY ? "any" : "all", spec);
    free(opt);
    return r;
}

static int jo_no_auto_cancel(const struct jobopts_ctx *ctx, const struct jobopt *o, const char *arg,
                             json_t *spec)
{
    (void)ctx, (void)o, (void)arg;
    json_object_set_new(spec, JOB_KEY_AUTO_CANCEL, json_false());
    return 0;
}

/* ---- help ---- */

#define JO_HELP_COL 35   /* where an option's text starts */
#define JO_HELP_WIDTH 84 /* the longest line */

/* Prints text's words from column col, wrapped to lines that start at column indent. */
static void jo_wrap(const char *text, int col, int indent)
{
    bool first = true;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        int len = (int)strcspn(p, " ");
        if (!len)
            break;
        if (!first && col + 1 + len > JO_HELP_WIDTH) {
            putchar('\n');
            col = 0;
            first = true;
        }
        if (first) {
            col += printf("%*s", indent > col ? indent - col : 0, "");
        } else {
            putchar(' ');
            col++;
        }
        col += printf("%.*s", len, p);
        first = false;
        p += len;
    }
    putchar('\n');
}

void jobopts_help_line(const char *names, const char *text)
{
    int col = printf("  %s", names);
    if (col > JO_HELP_COL - 2) {
        putchar('\n');
        col = 0;
    }
    jo_wrap(text, col, JO_HELP_COL);
}

void jobopts_help_paragraph(const char *text)
{
    jo_wrap(text, 0, 0);
}

static void jo_help_entry(const struct jobopt *o, enum jobopts_cmd cmd)
{
    struct strbuf names, text;
    strbuf_init(&names);
    strbuf_init(&text);
    if (!o->shorts)
        strbuf_adds(&names, "    ");
    if (o->synopsis) {
        strbuf_adds(&names, o->synopsis);
    } else {
        for (const char *s = o->shorts; s && *s; s++)
            strbuf_addf(&names, "-%c, ", *s);
        strbuf_addf(&names, "--%s%s%s", o->longs[0], o->arg ? " " : "", o->arg ? o->arg : "");
    }
    strbuf_adds(&text, o->help);
    if (cmd == JOBOPTS_SUBMIT && o->submit_help)
        strbuf_adds(&text, o->submit_help);
    if (cmd != JOBOPTS_SUBMIT && o->clear[0]) {
        strbuf_adds(&text, " (");
        for (const char *const *w = o->clear; *w; w++)
            strbuf_addf(&text, "%s%s", w == o->clear ? "" : " or ", **w ? *w : "''");
        strbuf_addf(&text, ": %s)", o->cleared);
    }
    if (cmd != JOBOPTS_SUBMIT && o->change_help)
        strbuf_adds(&text, o->change_help);
    jobopts_help_line(names.buf, text.buf);
    if (o->longs[1] && !o->synopsis) {
        strbuf_reset(&names);
        strbuf_adds(&names, "    ");
        for (const char *const *l = o->longs + 1; *l; l++)
            strbuf_addf(&names, "%s--%s", l == o->longs + 1 ? "" : ", ", *l);
        if (o->arg)
            strbuf_addf(&names, " %s", o->arg);
        strbuf_reset(&text);
        strbuf_addf(&text, "the same as --%s", o->longs[0]);
        jobopts_help_line(names.buf, text.buf);
    }
    strbuf_free(&names);
    strbuf_free(&text);
}

void jobopts_help(enum jobopts_section section, enum jobopts_cmd cmd)
{
    for (size_t i = 0; i < JO_COUNT; i++) {
        if (jo_table[i].section == section && (jo_table[i].cmds & cmd))
            jo_help_entry(&jo_table[i], cmd);
    }
}

char *jobopts_names(enum jobopts_cmd cmd)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < JO_COUNT; i++) {
        if (jo_table[i].cmds & cmd)
            strbuf_addf(&sb, "%s--%s", sb.len ? ", " : "", jo_table[i].longs[0]);
    }
    return strbuf_detach(&sb);
}

json_t *jobopts_environment(void)
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
