/* opts: gflow-shim's command line: the options, their values and the checks that they
 * form a complete invocation (usage errors exit SHIM_EXIT_USAGE). */
#include "shim.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "util.h"

/* Linux device minors have 20 bits. */
#define SHIM_MAX_MINOR ((1 << 20) - 1)

static const char shim_opts_usage_text[] =
    "usage: gflow-shim --job-id N (--exit-file PATH | --lock-fd FD) --log PATH --workdir DIR\n"
    "                  (--env-file PATH | --env-fd FD) --kill-grace SECS [--lock-fd FD]\n"
    "                  [--uid UID --gid GID --user NAME --groups GID,GID,...]\n"
    "                  [--tasks N --task-gpus GPU,GPU,... [--task-uuids UUID,...]]\n"
    "                  [--deny-devices MINOR|MAJOR:MINOR,...]\n"
    "                  [--memory-limit MIB] [--conda-env NAME|PATH] [--umask MODE]\n"
    "                  [--log-max-bytes N] [--log-keep-on-full N] [--log-continue]\n"
    "                  [--nofile N] [--pty DIR] [--cpus LIST]\n"
    "                  [--prolog CMD] [--epilog CMD] [--hook-timeout SECS]\n"
    "                  (--command \"shell command line\" | --script PATH)\n"
    "Runs and supervises one gflow job and writes its outcome to the exit file (without\n"
    "--exit-file: into the lock file of --lock-fd, at byte 8192).\n"
    "--tasks N starts N copies of the job, copy i with CUDA_VISIBLE_DEVICES set to the\n"
    "i-th entry of --task-gpus and RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
    "MASTER_ADDR, MASTER_PORT as torchrun sets them; if one fails, the others are stopped.\n"
    "--task-uuids gives copy i GFLOW_GPU_UUIDS and NVIDIA_VISIBLE_DEVICES = its i-th entry.\n"
    "--deny-devices 1,3,241:22 puts the job in a cgroup v1 devices cgroup that denies it\n"
    "the NVIDIA devices 195:1 and 195:3 and the device 241:22 (a MIG instance's\n"
    "/dev/nvidia-caps node) (when root and the controller is mounted).\n"
    "--memory-limit MIB holds the job, all its processes and copies together, to MIB MiB\n"
    "(cgroup v2 memory.max, else the cgroup v1 memory controller, else a watchdog over\n"
    "the job's RSS); a job over it is killed (SIGKILL) and its exit file says \"oom\": true.\n"
    "--conda-env NAME runs the job in that conda environment (a name, \"base\" or an\n"
    "absolute path), activated with the shell hook of the conda the job's CONDA_EXE names\n"
    "(else ~/miniconda3, ~/anaconda3, ~/miniforge3, ~/mambaforge, /opt/conda); if conda or\n"
    "the environment is missing, the job fails at once (exit code 125) saying so.\n"
    "--umask MODE (octal, e.g. 022) is the job's umask; without it the job keeps the\n"
    "shim's.\n"
    "--log PATH is created anew (O_EXCL, never through a link), as the job user where\n"
    "others may write its directory; a file already there is renamed PATH.replaced-TIME\n"
    "first. --log-continue (a requeued job's next run) appends to it instead when it is\n"
    "a plain file of the job user's own.\n"
    "--log-max-bytes N keeps at most N bytes of the job's output in the log; the rest is\n"
    "dropped after one line saying so (0 or absent: no cap).\n"
    "--log-keep-on-full N: when the job ends while its log's filesystem is full (its\n"
    "output or another's was lost for want of space), a log over N bytes keeps only its\n"
    "last N, after a first line saying how much was cut and why (absent: never cut).\n"
    "--pty DIR runs the job on a pseudo-terminal that the shim owns (its output still\n"
    "goes to the log) and serves it on the socket DIR/sock (DIR is made, owned by the job\n"
    "user, 0700) for `gjob attach`; not with --tasks > 1.\n"
    "--nofile N sets the job's soft limit of open files (RLIMIT_NOFILE) to N.\n"
    "--cpus 0-3,8 pins every process of the job to those CPUs: cpuset.cpus of its cgroup\n"
    "v2 where the cpuset controller can be enabled, and sched_setaffinity before exec.\n"
    "--prolog CMD runs `/bin/bash -c CMD` before the job as the job would run (its user,\n"
    "environment plus GFLOW_HOOK=pre, workdir, cgroups), its output in the log after a\n"
    "line \"gflow-shim: pre hook\"; if it fails the job is not started and the exit file's\n"
    "\"prolog_error\" says why. --epilog CMD runs likewise after the job (also after a\n"
    "cancel; GFLOW_HOOK=post, GFLOW_JOB_EXIT_CODE), its failure in \"epilog_error\".\n"
    "--hook-timeout SECS stops a hook running longer (SIGTERM, then SIGKILL after the\n"
    "kill grace): a failure (default 60; 0: no limit).\n"
    "--groups lists the job user's groups (as getgrouplist gives them), which the job\n"
    "gets: the shim never looks them up (it is linked statically, without NSS).\n"
    "gflow-shim --standby waits on fd 3 for a job's arguments and its lock and environment\n"
    "fds (gflowd's standby shim, started before its job), and for the next job after it.\n"
    "gflow-shim --supervisor DIR runs many jobs at once, each sent on fd 3 as to a standby\n"
    "(none with --tasks, --pty, --memory-limit, --deny-devices or hooks), and listens on\n"
    "DIR/shim-PID.sock for a restarted gflowd.\n"
    "Started by gflowd; not meant to be run by hand.\n";

enum {
    OPT_JOB_ID = 256,
    OPT_EXIT_FILE,
    OPT_LOG,
    OPT_WORKDIR,
    OPT_ENV_FILE,
    OPT_ENV_FD,
    OPT_KILL_GRACE,
    OPT_LOCK_FD,
    OPT_UID,
    OPT_GID,
    OPT_USER,
    OPT_COMMAND,
    OPT_SCRIPT,
    OPT_TASKS,
    OPT_TASK_GPUS,
    OPT_TASK_UUIDS,
    OPT_DENY_DEVICES,
    OPT_MEMORY_LIMIT,
    OPT_CONDA_ENV,
    OPT_UMASK,
    OPT_LOG_MAX_BYTES,
    OPT_LOG_KEEP_ON_FULL,
    OPT_NOFILE,
    OPT_GROUPS,
    OPT_PTY,
    OPT_CPUS,
    OPT_LOG_CONTINUE,
    OPT_PROLOG,
    OPT_EPILOG,
    OPT_HOOK_TIMEOUT,
};

static const struct option shim_opts_long[] = {
    {"job-id", required_argument, NULL, OPT_JOB_ID},
    {"exit-file", required_argument, NULL, OPT_EXIT_FILE},
    {"log", required_argument, NULL, OPT_LOG},
    {"workdir", required_argument, NULL, OPT_WORKDIR},
    {"env-file", required_argument, NULL, OPT_ENV_FILE},
    {"env-fd", required_argument, NULL, OPT_ENV_FD},
    {"kill-grace", required_argument, NULL, OPT_KILL_GRACE},
    {"lock-fd", required_argument, NULL, OPT_LOCK_FD},
    {"uid", required_argument, NULL, OPT_UID},
    {"gid", required_argument, NULL, OPT_GID},
    {"user", required_argument, NULL, OPT_USER},
    {"command", required_argument, NULL, OPT_COMMAND},
    {"script", required_argument, NULL, OPT_SCRIPT},
    {"tasks", required_argument, NULL, OPT_TASKS},
    {"task-gpus", required_argument, NULL, OPT_TASK_GPUS},
    {"task-uuids", required_argument, NULL, OPT_TASK_UUIDS},
    {"deny-devices", required_argument, NULL, OPT_DENY_DEVICES},
    {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
    {"conda-env", required_argument, NULL, OPT_CONDA_ENV},
    {"umask", required_argument, NULL, OPT_UMASK},
    {"log-max-bytes", required_argument, NULL, OPT_LOG_MAX_BYTES},
    {"log-keep-on-full", required_argument, NULL, OPT_LOG_KEEP_ON_FULL},
    {"nofile", required_argument, NULL, OPT_NOFILE},
    {"cpus", required_argument, NULL, OPT_CPUS},
    {"groups", required_argument, NULL, OPT_GROUPS},
    {"pty", required_argument, NULL, OPT_PTY},
    {"log-continue", no_argument, NULL, OPT_LOG_CONTINUE},
    {"prolog", required_argument, NULL, OPT_PROLOG},
    {"epilog", required_argument, NULL, OPT_EPILOG},
    {"hook-timeout", required_argument, NULL, OPT_HOOK_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Strict integer in [min, max]; 0 or -1. */
static int shim_opts_range(const char *s, int64_t min, int64_t max, int64_t *out)
{
    int64_t v;
    if (parse_int64(s, &v) < 0 || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Non-negative seconds, fractions allowed; 0 or -1. */
static int shim_opts_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0 || v > 1e9)
        return -1;
    *out = v;
    return 0;
}

/* Keeps the first error only: it is the one the user acts on. */
static void shim_opts_error(char **err, char *msg)
{
    if (*err)
        free(msg);
    else
        *err = msg;
}

/* --groups GID,GID,...: at least one (getgrouplist always gives the primary group). */
static void shim_opts_groups(struct shim_opts *o, const char *arg, char **err)
{
    size_t cap = 1;
    for (const char *c = arg; *c; c++)
        cap += *c == ',';
    free(o->groups);
    o->groups = xcalloc(cap, sizeof(gid_t));
    o->ngroups = 0;
    char *copy = xstrdup(arg);
    char *save = NULL;
    for (char *g = strtok_r(copy, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (shim_opts_range(g, 0, (int64_t)UINT32_MAX - 1, &v) < 0) {
            shim_opts_error(err, xasprintf("bad --groups '%s'", arg));
            break;
        }
        o->groups[o->ngroups++] = (gid_t)v;
    }
    free(copy);
    if (o->ngroups == 0)
        shim_opts_error(err, xasprintf("bad --groups '%s'", arg));
}

/* Splits --task-gpus (or --task-uuids) at commas into *out. Empty and repeated entries
 * are errors: each copy gets a GPU of its own. */
static void shim_opts_task_list(const char *opt, const char *arg, char ***out, int *n_out,
                                char **err)
{
    size_t cap = 2;
    for (const char *c = arg; *c; c++)
        cap += *c == ',';
    char **v = xcalloc(cap, sizeof(*v));
    int n = 0;
    for (const char *p = arg;; p++) {
        size_t len = strcspn(p, ",");
        char *id = xstrndup(p, len);
        for (int i = 0; i < n && *id; i++)
            if (strcmp(v[i], id) == 0)
                shim_opts_error(err, xasprintf("bad %s '%s': %s twice", opt, arg, id));
        if (!*id)
            shim_opts_error(err, xasprintf("bad %s '%s': empty entry", opt, arg));
        v[n++] = id;
        p += len;
        if (!*p)
            break;
    }
    if (*out)
        for (char **g = *out; *g; g++)
            free(*g);
    free(*out);
    *out = v;
    *n_out = n;
}

/* Splits --deny-devices "1,3,241:22" into o->deny_minors and o->deny_majors: an NVIDIA
 * GPU's minor (major 195), or MAJOR:MINOR (a MIG instance's /dev/nvidia-caps node). */
static void shim_opts_deny_devices(struct shim_opts *o, const char *arg, char **err)
{
    size_t cap = 1;
    for (const char *c = arg; *c; c++)
        cap += *c == ',';
    int *v = xcalloc(cap, sizeof(*v)), *majors = xcalloc(cap, sizeof(*majors));
    int n = 0;
    for (const char *p = arg;; p++) {
        size_t len = strcspn(p, ",");
        char *word = xstrndup(p, len);
        char *colon = strchr(word, ':');
        int64_t major = SHIM_NVIDIA_MAJOR, minor;
        if (colon)
            *colon = '\0';
        if ((colon && shim_opts_range(word, 1, SHIM_MAX_MINOR, &major) < 0) ||
            shim_opts_range(colon ? colon + 1 : word, 0, SHIM_MAX_MINOR, &minor) < 0) {
            if (colon)
                *colon = ':';
            shim_opts_error(err, xasprintf("bad --deny-devices '%s': '%s' is no device minor "
                                           "(or MAJOR:MINOR)",
                                           arg, word));
        } else {
            majors[n] = (int)major;
            v[n++] = (int)minor;
        }
        free(word);
        p += len;
        if (!*p)
            break;
    }
    free(o->deny_minors);
    free(o->deny_majors);
    o->deny_minors = v;
    o->deny_majors = majors;
    o->n_deny_minors = n;
}

/* Parses one option's value into o. */
static void shim_opts_one(struct shim_opts *o, int c, const char *arg, char **err)
{
    int64_t v;
    switch (c) {
    case OPT_JOB_ID:
        if (shim_opts_range(arg, 0, INT64_MAX, &o->job_id) < 0)
            shim_opts_error(err, xasprintf("bad --job-id '%s'", arg));
        break;
    case OPT_EXIT_FILE:
        o->exit_file = arg;
        break;
    case OPT_LOG:
        o->log_path = arg;
        break;
    case OPT_WORKDIR:
        o->workdir = arg;
        break;
    case OPT_ENV_FILE:
        o->env_file = arg;
        break;
    case OPT_ENV_FD:
        if (shim_opts_range(arg, 0, INT_MAX, &v) < 0)
            shim_opts_error(err, xasprintf("bad --env-fd '%s'", arg));
        else
            o->env_fd = (int)v;
        break;
    case OPT_KILL_GRACE:
        if (shim_opts_seconds(arg, &o->kill_grace) < 0)
            shim_opts_error(err, xasprintf("bad --kill-grace '%s'", arg));
        break;
    case OPT_LOCK_FD:
        if (shim_opts_range(arg, 0, INT_MAX, &v) < 0)
            shim_opts_error(err, xasprintf("bad --lock-fd '%s'", arg));
        else
            o->lock_fd = (int)v;
        break;
    case OPT_UID:
    case OPT_GID:
        /* (uid_t)-1 means "unchanged" to the kernel, so it is no valid id. */
        if (shim_opts_range(arg, 0, (int64_t)UINT32_MAX - 1, &v) < 0)
            shim_opts_error(err, xasprintf("bad --%s '%s'", c == OPT_UID ? "uid" : "gid", arg));
        else if (c == OPT_UID)
            o->uid = v;
        else
            o->gid = v;
        break;
    case OPT_USER:
        o->user = arg;
        break;
    case OPT_COMMAND:
        o->command = arg;
        break;
    case OPT_SCRIPT:
        o->script = arg;
        break;
    case OPT_TASKS:
        if (shim_opts_range(arg, 1, SHIM_MAX_TASKS, &v) < 0)
            shim_opts_error(err, xasprintf("bad --tasks '%s' (1 to %d)", arg, SHIM_MAX_TASKS));
        else
            o->ntasks = (int)v;
        break;
    case OPT_TASK_GPUS:
        shim_opts_task_list("--task-gpus", arg, &o->task_gpus, &o->n_task_gpus, err);
        break;
    case OPT_TASK_UUIDS:
        shim_opts_task_list("--task-uuids", arg, &o->task_uuids, &o->n_task_uuids, err);
        break;
    case OPT_DENY_DEVICES:
        shim_opts_deny_devices(o, arg, err);
        break;
    case OPT_MEMORY_LIMIT:
        /* The byte count must fit the kernel's 64-bit limit files. */
        if (shim_opts_range(arg, 1, INT64_MAX / 1048576, &o->memory_limit_mb) < 0)
            shim_opts_error(err, xasprintf("bad --memory-limit '%s' (MiB, > 0)", arg));
        break;
    case OPT_UMASK: {
        char *why = NULL;
        int mask;
        if (parse_umask(arg, &mask, &why) < 0) {
            shim_opts_error(err, xasprintf("bad --umask: %s", why));
            free(why);
        } else {
            o->umask = mask;
        }
        break;
    }
    case OPT_LOG_CONTINUE:
        o->log_continue = true;
        break;
    case OPT_LOG_MAX_BYTES:
        if (shim_opts_range(arg, 0, INT64_MAX, &o->log_max_bytes) < 0)
            shim_opts_error(err, xasprintf("bad --log-max-bytes '%s' (bytes, >= 0)", arg));
        break;
    case OPT_LOG_KEEP_ON_FULL:
        if (shim_opts_range(arg, 0, INT64_MAX, &o->log_keep) < 0)
            shim_opts_error(err, xasprintf("bad --log-keep-on-full '%s' (bytes, >= 0)", arg));
        break;
    case OPT_CONDA_ENV:
        if (!*arg)
            shim_opts_error(err, xstrdup("bad --conda-env '' (a name or an absolute path)"));
        else
            o->conda_env = arg;
        break;
    case OPT_NOFILE:
        if (shim_opts_range(arg, 1, INT64_MAX, &o->nofile) < 0)
            shim_opts_error(err, xasprintf("bad --nofile '%s' (> 0)", arg));
        break;
    case OPT_GROUPS:
        shim_opts_groups(o, arg, err);
        break;
    case OPT_CPUS:
        if (cpumask_parse(arg, &o->cpus) < 0 || cpumask_empty(&o->cpus))
            shim_opts_error(err, xasprintf("bad --cpus '%s' (a CPU list such as 0-3,8)", arg));
        else
            o->pin_cpus = true;
        break;
    case OPT_PROLOG:
    case OPT_EPILOG:
        if (!*arg)
            shim_opts_error(err, xasprintf("bad --%s '' (a shell command)",
                                           c == OPT_PROLOG ? "prolog" : "epilog"));
        else if (c == OPT_PROLOG)
            o->prolog = arg;
        else
            o->epilog = arg;
        break;
    case OPT_HOOK_TIMEOUT:
        if (shim_opts_seconds(arg, &o->hook_timeout) < 0)
            shim_opts_error(err, xasprintf("bad --hook-timeout '%s' (seconds, >= 0)", arg));
        break;
    case OPT_PTY:
        if (arg[0] != '/')
            shim_opts_error(err, xasprintf("bad --pty '%s' (an absolute directory)", arg));
        else
            o->pty_dir = arg;
        break;
    }
}

/* Checks that the options form a complete invocation. */
static void shim_opts_check(const struct shim_opts *o, char **err)
{
    static const char *const names[] = {"--job-id",  "--exit-file or --lock-fd", "--log",
                                        "--workdir", "--env-file or --env-fd",   "--kill-grace"};
    const bool present[] = {
        o->job_id >= 0,     o->exit_file != NULL || o->lock_fd >= 0, o->log_path != NULL,
        o->workdir != NULL, o->env_file || o->env_fd >= 0,           o->kill_grace >= 0};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!present[i])
            shim_opts_error(err, xasprintf("missing %s", names[i]));
    if (!o->command == !o->script)
        shim_opts_error(err, xstrdup("give exactly one of --command and --script"));
    bool any_id = o->uid >= 0 || o->gid >= 0 || o->user;
    bool all_id = o->uid >= 0 && o->gid >= 0 && o->user;
    if (any_id && !all_id)
        shim_opts_error(err, xstrdup("--uid, --gid and --user go together"));
    if (o->ngroups >= 0 && !all_id)
        shim_opts_error(err, xstrdup("--groups needs --uid, --gid and --user"));
    else if (all_id && o->ngroups < 0)
        shim_opts_error(err, xstrdup("--uid needs --groups (the user's groups, as "
                                     "getgrouplist gives them)"));
    if (o->ntasks > 1 && !o->task_gpus)
        shim_opts_error(
            err, xasprintf("--tasks %d needs --task-gpus with %d GPUs", o->ntasks, o->ntasks));
    else if (o->task_gpus && o->n_task_gpus != o->ntasks)
        shim_opts_error(err, xasprintf("--task-gpus names %d GPU%s for --tasks %d", o->n_task_gpus,
                                       plural_s(o->n_task_gpus), o->ntasks));
    if (o->task_uuids && o->n_task_uuids != o->n_task_gpus)
        shim_opts_error(err, xasprintf("--task-uuids names %d GPU%s, --task-gpus %d",
                                       o->n_task_uuids, plural_s(o->n_task_uuids), o->n_task_gpus));
    if (o->pty_dir && o->ntasks > 1)
        shim_opts_error(err, xstrdup("--pty runs one process on its terminal: not with --tasks"));
}

/* Parses argv into *o. Returns 0, 1 for --help, or -1 with *err set (caller frees).
 * Parsing goes on after an error so that the exit file and job id are known to
 * report it. */
int shim_opts_parse(int argc, char **argv, struct shim_opts *o, char **err)
{
    *o = (struct shim_opts){.job_id = -1,
                            .kill_grace = -1,
                            .lock_fd = -1,
                            .env_fd = -1,
                            .uid = -1,
                            .gid = -1,
                            .ntasks = 1,
                            .umask = -1,
                            .nofile = -1,
                            .ngroups = -1,
                            .hook_timeout = 60};
    *err = NULL;
    opterr = 0; /* one line of our own instead of getopt's */
    optind = 0; /* from the start: a standby parses one command line per job */
    int c;
    /* '+': stop at the first non-option; ':': report a missing argument as ':'. */
    while ((c = getopt_long(argc, argv, "+:h", shim_opts_long, NULL)) != -1) {
        if (c == 'h')
            return 1;
        if (c == ':')
            shim_opts_error(err, xasprintf("option %s needs a value", argv[optind - 1]));
        else if (c == '?')
            shim_opts_error(err, xasprintf("unknown option %s", argv[optind - 1]));
        else
            shim_opts_one(o, c, optarg, err);
    }
    if (optind < argc)
        shim_opts_error(err, xasprintf("unexpected argument '%s'", argv[optind]));
    shim_opts_check(o, err);
    return *err ? -1 : 0;
}

/* Frees what shim_opts_parse allocated in o. */
void shim_opts_free(struct shim_opts *o)
{
    if (o->task_gpus)
        for (char **g = o->task_gpus; *g; g++)
            free(*g);
    free(o->task_gpus);
    if (o->task_uuids)
        for (char **g = o->task_uuids; *g; g++)
            free(*g);
    free(o->task_uuids);
    free(o->deny_minors);
    free(o->deny_majors);
    free(o->groups);
}

void shim_opts_usage(void)
{
    fputs(shim_opts_usage_text, stdout);
}
