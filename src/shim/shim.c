/* gflow-shim: the per-job supervisor. gflowd starts one per job; it outlives daemon
 * restarts and reports the job's outcome in an exit file.
 *
 *   gflow-shim --job-id N --exit-file PATH --log PATH --workdir DIR --env-file PATH
 *              --kill-grace SECS [--lock-fd FD] [--uid UID --gid GID --user NAME]
 *              [--tasks N --task-gpus GPU,GPU,...] [--deny-devices MINOR,MINOR,...]
 *              [--memory-limit MIB] [--conda-env NAME|PATH]
 *              (--command "shell command line" | --script PATH)
 *
 * Protocol with the daemon (its runner is written against exactly this):
 *
 *  1. The shim leaves the daemon's session (setsid). With --lock-fd, that fd is a file
 *     the daemon flock(LOCK_EX)ed before forking; the shim holds it for its whole life
 *     (close-on-exec, so the job does not) and writes "<pid> <starttime>\n" into it.
 *     A restarted daemon knows the shim is alive while the lock is held, and which
 *     process it is from pid + start time. The shim is a child subreaper, so whatever
 *     the job leaves behind (background or setsid'ed children) reparents to it.
 *  2. The job's environment is read from --env-file (NUL-separated KEY=VALUE entries),
 *     which is unlinked at once because it may hold secrets, or from the start of the
 *     file open on --env-fd (gflowd passes a memfd: no file to create or remove). The
 *     job gets exactly it (with --conda-env, plus the GFLOW_* variables of step 4).
 *  3. Job stdout and stderr are appended to --log (0600, owned by the job user), stdin
 *     is /dev/null. The shim writes to that log only the one-line reason why the job
 *     could not be started, the one line saying that device isolation is
 *     unavailable (step 7), and the one line saying that the job exceeded its memory
 *     limit (step 8).
 *  4. The job runs in its own process group, as --uid/--gid/--user when the shim is
 *     root, in --workdir: `/bin/bash -c COMMAND`, or the script itself when it starts
 *     with "#!", else `/bin/bash SCRIPT`. A job that cannot be started exits 125
 *     (credentials, chdir), 126 (cannot execute) or 127 (not found).
 *     With --conda-env NAME (an environment name, "base", or an absolute path to an
 *     environment) the job runs inside that conda environment, activated by the
 *     installation's own shell hook. Before anything starts, the shim finds conda
 *     from the job's environment: $CONDA_EXE (absolute), else $HOME/miniconda3,
 *     $HOME/anaconda3, $HOME/miniforge3, $HOME/mambaforge (each <dir>/bin/conda),
 *     else /opt/conda/bin/conda; the installation's base is the directory above the
 *     executable's bin/. It then checks that the environment exists: "base" is the
 *     base, a name is <base>/envs/NAME or $HOME/.conda/envs/NAME, a path is itself,
 *     and it must hold conda-meta/. If either is missing the job does not start:
 *     exit_code 125, the exit file's error and one line in the log say why ("conda
 *     not found: ..." or "conda environment 'NAME' not found (looked in ...)"). The
 *     job is then always `/bin/bash -c TEXT` (no direct exec), where TEXT evals
 *     `"$GFLOW_CONDA_EXE" shell.bash hook`, runs `conda activate "$GFLOW_CONDA_ENV"`
 *     (exit 125 with a line in the log if either fails), then runs
 *     `eval "$GFLOW_JOB_COMMAND"` for --command, or for --script
 *     `exec "$GFLOW_JOB_SCRIPT"` (shebang) or `exec /bin/bash "$GFLOW_JOB_SCRIPT"`.
 *     GFLOW_CONDA_EXE, GFLOW_CONDA_ENV and GFLOW_JOB_COMMAND or GFLOW_JOB_SCRIPT are
 *     added to the job's environment (replacing any the env file has), so that no
 *     name, path or command is ever pasted into shell text;
 *     GFLOW_CONDA_ENV is NAME as given, GFLOW_JOB_SCRIPT the script's path ("./"
 *     prepended to a relative one). Every copy of --tasks activates it.
 *     With --tasks N (default 1) the shim starts N copies of it, torchrun style
 *     (`--gpus-per-task 1`): same workdir, log and user, all in the first copy's
 *     process group. --task-gpus names one GPU per copy (N entries, as they go into
 *     CUDA_VISIBLE_DEVICES: indices or UUIDs); it is required when N > 1. When it is
 *     given, copy i gets the job environment with CUDA_VISIBLE_DEVICES=<its GPU>,
 *     RANK=LOCAL_RANK=i, WORLD_SIZE=LOCAL_WORLD_SIZE=N, MASTER_ADDR=127.0.0.1 and
 *     MASTER_PORT=<a TCP port of 127.0.0.1 that was free when the shim looked, the
 *     same for all copies>; NVIDIA_VISIBLE_DEVICES stays as the env file says. With
 *     neither option the job is the single process described above, unchanged.
 *  5. SIGTERM, SIGINT or SIGHUP to the shim (cancel, time limit) sends SIGTERM to the
 *     job's process group and to every descendant, then SIGKILL after --kill-grace
 *     seconds. SIGUSR1 sent with sigqueue/pidfd_send_signal carries a signal to pass on
 *     (Slurm's --signal before the time limit): value = SIG | SHIM_FORWARD_MAIN_ONLY
 *     (0x100) for the job's main process(es) only, else to all of its processes. When a copy of the job fails (non-zero exit or a signal) while others
 *     still run, they get the same treatment. Once every copy has exited, leftovers get
 *     it too (the wait ends early once none are left): nothing the job started
 *     outlives it.
 *  6. The outcome is written to --exit-file atomically (temp, fsync, rename, fsync dir):
 *       {"job_id": N, "exit_code": int|null, "signal": int|null, "oom": bool,
 *        "started_at": secs, "finished_at": secs, "max_rss_kb": int,
 *        "error": string|null[, "memory_enforcement": string]}
 *     and the shim exits 0. "oom" is true when the job was killed for exceeding
 *     --memory-limit (step 8); "memory_enforcement" is there only with --memory-limit.
 *     With several copies, exit_code/signal are those of the first copy that failed
 *     (exit_code 0 when all exited 0), max_rss_kb the largest of theirs; if a copy
 *     cannot even be forked, the others are stopped and exit_code is 125 with the
 *     error. If the shim fails before the job starts, it still writes
 *     an exit file (exit_code 125, error set) when it can, and exits 1 (2 for usage
 *     errors, which also print one line on stderr).
 *  7. With --deny-devices (daemon.constrain_devices: the minors of the NVIDIA GPUs,
 *     char major 195, that the job was not given), a root shim on a host where the
 *     cgroup v1 devices controller is mounted creates the cgroup gflow/job-<id> below
 *     its own devices cgroup (so a job never escapes a policy the shim is under),
 *     writes "c 195:<minor> rwm" to its devices.deny, and each copy of the job joins it
 *     in the forked child before it changes user and execs: no job process ever runs
 *     outside it, and open() of those nodes fails with EPERM. Once nothing of the job is
 *     left, the shim removes the cgroup. Where that cannot be done (not root, no v1
 *     devices controller - on cgroup v2 device access is controlled by an eBPF program,
 *     which gflow does not load -, or the cgroup cannot be created), the job runs anyway
 *     and its log gets one line "gflow-shim: device isolation unavailable: <reason>".
 *  8. With --memory-limit MIB (> 0), the job - all its processes, all its copies
 *     together - is held to that much memory, by the first of these that works:
 *     - "cgroup v2": the cgroup gflow-job-<id> below the shim's own cgroup in the
 *       unified hierarchy (the cgroup2 mount), if the memory controller is enabled
 *       for the shim's children or the shim can enable it (cgroup.subtree_control;
 *       the kernel refuses that while the shim's cgroup holds processes, unless it is
 *       the root); memory.max = MIB MiB, memory.swap.max = 0, memory.oom.group = 1
 *       where those exist.
 *     - "cgroup v1": the cgroup gflow/job-<id> below the shim's own cgroup in the v1
 *       memory hierarchy; memory.limit_in_bytes, and memory.memsw.limit_in_bytes the
 *       same where swap is accounted.
 *     - "watchdog": every 100 ms the shim sums the RSS (VmRSS) of every process of
 *       the job, its descendants.
 *     Each copy joins the cgroup in the forked child before exec, as in step 7 (a copy
 *     that cannot join exits 125). The cgroup's OOM-kill counter (memory.events or
 *     memory.oom_control "oom_kill"; on v1 kernels without it, memory.failcnt > 0 and
 *     the job killed by SIGKILL) is read every 100 ms and once after the job. When the
 *     job is found over its limit, all of it is SIGKILLed at once (so "signal" is 9
 *     unless the job's main process had already exited), "oom" is true, and its log
 *     gets one line "gflow-shim: job exceeded its memory limit of MIB MiB (<method>)".
 *     The cgroup is removed once nothing of the job is left. The method used goes into
 *     the exit file as "memory_enforcement". For tests, GFLOW_SHIM_MEMORY_METHOD=v2,
 *     v1 or watchdog in the shim's environment allows only that method; if it is
 *     unavailable, the job does not start (exit_code 125, the error says why).
 */
#include "clock.h"
#include "files.h"
#include "procinfo.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/timerfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    SHIM_EXIT_FAIL = 1,  /* the shim failed; the exit file says why */
    SHIM_EXIT_USAGE = 2, /* bad command line */
    JOB_EXIT_SETUP = 125,
    JOB_EXIT_NOEXEC = 126,
    JOB_EXIT_NOTFOUND = 127,
};

/* Once the grace is over, the tree is SIGKILLed again at this period until empty: a
 * process may fork between a /proc scan and the kill. */
#define SHIM_REKILL_NS (100L * 1000 * 1000)

/* Upper bound of --tasks: far above the GPUs of one machine, low enough that a typo
 * cannot fork thousands of processes. */
#define SHIM_MAX_TASKS 256

/* NVIDIA's character device major: /dev/nvidia<N> is 195:N, /dev/nvidiactl 195:255. */
#define SHIM_NVIDIA_MAJOR 195
/* Linux device minors have 20 bits. */
#define SHIM_MAX_MINOR ((1 << 20) - 1)

/* The variables --task-gpus sets for each copy; the env file's values are replaced. */
static const char *const shim_task_vars[] = {"CUDA_VISIBLE_DEVICES", "RANK", "LOCAL_RANK",
                                             "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                             "MASTER_PORT"};
#define SHIM_N_TASK_VARS (sizeof(shim_task_vars) / sizeof(shim_task_vars[0]))

/* The variables --conda-env adds to the job's environment: the conda executable, the
 * environment, and the job itself (GFLOW_JOB_COMMAND or GFLOW_JOB_SCRIPT). */
#define SHIM_N_CONDA_VARS 3

struct shim_opts {
    int64_t job_id; /* -1 until parsed */
    const char *exit_file;
    const char *log_path;
    const char *workdir;
    const char *env_file;
    int env_fd; /* --env-fd: the environment comes on this fd instead (-1: none) */
    const char *command;
    const char *script;
    const char *user;
    double kill_grace; /* < 0 until parsed */
    int lock_fd;       /* -1 when not given */
    int64_t uid;       /* -1 when not given */
    int64_t gid;       /* -1 when not given */
    int ntasks;        /* --tasks: copies of the job to start */
    char **task_gpus;  /* --task-gpus split at commas, NULL-terminated; NULL when not given */
    int n_task_gpus;
    int *deny_minors; /* --deny-devices: GPU minors the job may not open; NULL if not given */
    int n_deny_minors;
    int64_t memory_limit_mb; /* --memory-limit in MiB, 0: none */
    const char *conda_env;   /* --conda-env: name or absolute path, NULL: none */
};

/* Everything the job child needs, prepared before fork so the child only makes
 * system calls. */
struct shim_exec {
    const char *path;
    const char *argv[4];
    /* A plain command (no shell syntax) is executed without a shell: its words and the
     * candidate paths of its program along the job's PATH, tried in order before the
     * shell as the fallback (builtins such as `exit`, `cd`). */
    char **direct_argv;
    char **direct_paths;
    char *direct_buf;
    char **envp;
    char *env_buf; /* envp points into it */
    /* With --task-gpus: one environment per copy, envp's entries (pointers into
     * env_buf) minus shim_task_vars, then that copy's own allocated variables from
     * index task_env_shared on. NULL otherwise: every copy gets envp. */
    char ***task_envp;
    size_t task_env_shared;
    int ntasks;
    pid_t pgid; /* the job's process group; 0 until the first copy is forked */
    const char *workdir;
    const char *user;
    bool set_creds;
    uid_t uid;
    gid_t gid;
    gid_t *groups;
    int ngroups;
    int log_fd;
    int null_fd;
    int report_fd; /* write end of a close-on-exec pipe: why the job did not start */
    int cgroup_procs_fd; /* the job's devices cgroup's cgroup.procs, -1: none (step 7) */
    int memcg_procs_fd;  /* the job's memory cgroup's cgroup.procs, -1: none (step 8) */
    /* With --conda-env: the GFLOW_* entries added to envp (step 4), allocated. */
    char *conda_vars[SHIM_N_CONDA_VARS];
};

/* One copy of the job. */
struct shim_task {
    pid_t pid;
    bool reaped;
    int status;      /* from wait4, once reaped */
    long max_rss_kb; /* ru_maxrss: kilobytes on Linux */
};

/* In a forwarded signal's value: only the job's main process(es), not all of it. */
#define SHIM_FORWARD_MAIN_ONLY 0x100

/* How --memory-limit is enforced (step 8). */
enum shim_mem_method {
    SHIM_MEM_NONE, /* no --memory-limit */
    SHIM_MEM_V2,
    SHIM_MEM_V1,
    SHIM_MEM_WATCHDOG,
};

/* The names the exit file and the job log use, by enum shim_mem_method. */
static const char *const shim_mem_method_names[] = {NULL, "cgroup v2", "cgroup v1",
                                                    "watchdog"};

/* The memory limit of the job and what became of it. */
struct shim_memlimit {
    enum shim_mem_method method;
    int64_t limit_mb; /* 0: none */
    char *dir;        /* the job's memory cgroup (v2, v1); NULL: none */
    bool oom;         /* the job was killed for memory */
};

/* The watchdog's sampling period; cgroup counters are read at the same period. */
#define SHIM_MEM_TICK_NS (100L * 1000 * 1000)

/* The supervision state. */
struct shim_run {
    pid_t self;
    pid_t pgid;              /* the job's process group: the first copy's pid */
    struct shim_task *tasks; /* the copies that were forked */
    int ntasks;
    int nreaped;
    int first_failed; /* index of the first copy that failed, -1: none yet */
    int sfd;          /* signalfd */
    int tfd;          /* timerfd: kill grace, then the re-kill period */
    int report_rd;    /* read end of the exec report pipe */
    double kill_grace;
    bool term_sent;  /* the tree got SIGTERM and the grace timer runs */
    bool kill_phase; /* the grace is over: SIGKILL until nothing is left */
    char *cgroup_dir; /* the job's devices cgroup (step 7), NULL: none */
    struct shim_memlimit mem;
    int mem_tfd; /* timerfd: the memory check period (-1 without --memory-limit) */
    int log_fd;  /* the job log, kept for the memory line (-1 without --memory-limit) */
};

/* What goes into the exit file. */
struct shim_outcome {
    int exit_code; /* -1: null */
    int signal;    /* 0: null */
    double started_at;
    double finished_at;
    long max_rss_kb;
    bool oom;
    const char *memory_enforcement; /* NULL: no --memory-limit, field left out */
    const char *error;
};

static const char shim_usage_text[] =
    "usage: gflow-shim --job-id N --exit-file PATH --log PATH --workdir DIR\n"
    "                  (--env-file PATH | --env-fd FD) --kill-grace SECS [--lock-fd FD]\n"
    "                  [--uid UID --gid GID --user NAME]\n"
    "                  [--tasks N --task-gpus GPU,GPU,...] [--deny-devices MINOR,...]\n"
    "                  [--memory-limit MIB] [--conda-env NAME|PATH]\n"
    "                  (--command \"shell command line\" | --script PATH)\n"
    "Runs and supervises one gflow job and writes its outcome to the exit file.\n"
    "--tasks N starts N copies of the job, copy i with CUDA_VISIBLE_DEVICES set to the\n"
    "i-th entry of --task-gpus and RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
    "MASTER_ADDR, MASTER_PORT as torchrun sets them; if one fails, the others are stopped.\n"
    "--deny-devices 1,3 puts the job in a cgroup v1 devices cgroup that denies it the\n"
    "NVIDIA devices 195:1 and 195:3 (when root and the controller is mounted).\n"
    "--memory-limit MIB holds the job, all its processes and copies together, to MIB MiB\n"
    "(cgroup v2 memory.max, else the cgroup v1 memory controller, else a watchdog over\n"
    "the job's RSS); a job over it is killed (SIGKILL) and its exit file says \"oom\": true.\n"
    "--conda-env NAME runs the job in that conda environment (a name, \"base\" or an\n"
    "absolute path), activated with the shell hook of the conda the job's CONDA_EXE names\n"
    "(else ~/miniconda3, ~/anaconda3, ~/miniforge3, ~/mambaforge, /opt/conda); if conda or\n"
    "the environment is missing, the job fails at once (exit code 125) saying so.\n"
    "Started by gflowd; not meant to be run by hand.\n";

/* ---- exit file ---------------------------------------------------------------- */

/* Writes the exit file atomically. 0 or -1 with errno set. */
static int shim_write_exit_file(const struct shim_opts *o, const struct shim_outcome *out)
{
    json_t *j = json_object();
    json_object_set_new(j, "job_id", o->job_id >= 0 ? json_integer(o->job_id) : json_null());
    json_object_set_new(j, "exit_code",
                        out->exit_code >= 0 ? json_integer(out->exit_code) : json_null());
    json_object_set_new(j, "signal", out->signal > 0 ? json_integer(out->signal) : json_null());
    json_object_set_new(j, "oom", json_boolean(out->oom));
    json_object_set_new(j, "started_at", json_real(out->started_at));
    json_object_set_new(j, "finished_at", json_real(out->finished_at));
    json_object_set_new(j, "max_rss_kb", json_integer(out->max_rss_kb));
    json_object_set_new(j, "error", out->error ? json_string(out->error) : json_null());
    if (out->memory_enforcement)
        json_object_set_new(j, "memory_enforcement", json_string(out->memory_enforcement));
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, s);
    strbuf_addc(&sb, '\n');
    free(s);
    int rc = write_file_atomic(o->exit_file, sb.buf, sb.len, 0644);
    int e = errno;
    strbuf_free(&sb);
    errno = e;
    return rc;
}

/* Reports a failure that kept the job from starting: stderr (the daemon's log, if
 * it kept one) and, when the exit file is known, exit_code 125 with the reason. */
static void shim_fail(const struct shim_opts *o, const char *msg)
{
    if (o->job_id >= 0)
        fprintf(stderr, "gflow-shim: job %lld: %s\n", (long long)o->job_id, msg);
    else
        fprintf(stderr, "gflow-shim: %s\n", msg);
    /* The env file may hold secrets and nobody else will remove it. */
    if (o->env_file)
        unlink(o->env_file);
    if (!o->exit_file)
        return;
    double now = now_wall();
    struct shim_outcome out = {
        .exit_code = JOB_EXIT_SETUP,
        .signal = 0,
        .started_at = now,
        .finished_at = now,
        .max_rss_kb = 0,
        .error = msg,
    };
    if (shim_write_exit_file(o, &out) < 0)
        fprintf(stderr, "gflow-shim: cannot write %s: %s\n", o->exit_file, strerror(errno));
}

/* ---- command line ------------------------------------------------------------- */

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
    OPT_DENY_DEVICES,
    OPT_MEMORY_LIMIT,
    OPT_CONDA_ENV,
};

static const struct option shim_long_opts[] = {
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
    {"deny-devices", required_argument, NULL, OPT_DENY_DEVICES},
    {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
    {"conda-env", required_argument, NULL, OPT_CONDA_ENV},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Strict integer in [min, max]; 0 or -1. */
static int shim_parse_range(const char *s, int64_t min, int64_t max, int64_t *out)
{
    int64_t v;
    if (parse_int64(s, &v) < 0 || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Non-negative seconds, fractions allowed; 0 or -1. */
static int shim_parse_seconds(const char *s, double *out)
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
static void shim_set_err(char **err, char *msg)
{
    if (*err)
        free(msg);
    else
        *err = msg;
}

/* Splits --task-gpus at commas into o->task_gpus. Empty and repeated entries are
 * errors: each copy gets a GPU of its own. */
static void shim_parse_task_gpus(struct shim_opts *o, const char *arg, char **err)
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
                shim_set_err(err, xasprintf("bad --task-gpus '%s': %s twice", arg, id));
        if (!*id)
            shim_set_err(err, xasprintf("bad --task-gpus '%s': empty entry", arg));
        v[n++] = id;
        p += len;
        if (!*p)
            break;
    }
    if (o->task_gpus)
        for (char **g = o->task_gpus; *g; g++)
            free(*g);
    free(o->task_gpus);
    o->task_gpus = v;
    o->n_task_gpus = n;
}

/* Splits --deny-devices "1,3" into o->deny_minors: device minors, each an integer. */
static void shim_parse_deny_devices(struct shim_opts *o, const char *arg, char **err)
{
    size_t cap = 1;
    for (const char *c = arg; *c; c++)
        cap += *c == ',';
    int *v = xcalloc(cap, sizeof(*v));
    int n = 0;
    for (const char *p = arg;; p++) {
        size_t len = strcspn(p, ",");
        char *word = xstrndup(p, len);
        int64_t minor;
        if (shim_parse_range(word, 0, SHIM_MAX_MINOR, &minor) < 0)
            shim_set_err(err, xasprintf("bad --deny-devices '%s': '%s' is no device minor",
                                        arg, word));
        else
            v[n++] = (int)minor;
        free(word);
        p += len;
        if (!*p)
            break;
    }
    free(o->deny_minors);
    o->deny_minors = v;
    o->n_deny_minors = n;
}

/* Parses one option's value into o. */
static void shim_parse_opt(struct shim_opts *o, int c, const char *arg, char **err)
{
    int64_t v;
    switch (c) {
    case OPT_JOB_ID:
        if (shim_parse_range(arg, 0, INT64_MAX, &o->job_id) < 0)
            shim_set_err(err, xasprintf("bad --job-id '%s'", arg));
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
        if (shim_parse_range(arg, 0, INT_MAX, &v) < 0)
            shim_set_err(err, xasprintf("bad --env-fd '%s'", arg));
        else
            o->env_fd = (int)v;
        break;
    case OPT_KILL_GRACE:
        if (shim_parse_seconds(arg, &o->kill_grace) < 0)
            shim_set_err(err, xasprintf("bad --kill-grace '%s'", arg));
        break;
    case OPT_LOCK_FD:
        if (shim_parse_range(arg, 0, INT_MAX, &v) < 0)
            shim_set_err(err, xasprintf("bad --lock-fd '%s'", arg));
        else
            o->lock_fd = (int)v;
        break;
    case OPT_UID:
    case OPT_GID:
        /* (uid_t)-1 means "unchanged" to the kernel, so it is no valid id. */
        if (shim_parse_range(arg, 0, (int64_t)UINT32_MAX - 1, &v) < 0)
            shim_set_err(err, xasprintf("bad --%s '%s'", c == OPT_UID ? "uid" : "gid", arg));
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
        if (shim_parse_range(arg, 1, SHIM_MAX_TASKS, &v) < 0)
            shim_set_err(err, xasprintf("bad --tasks '%s' (1 to %d)", arg, SHIM_MAX_TASKS));
        else
            o->ntasks = (int)v;
        break;
    case OPT_TASK_GPUS:
        shim_parse_task_gpus(o, arg, err);
        break;
    case OPT_DENY_DEVICES:
        shim_parse_deny_devices(o, arg, err);
        break;
    case OPT_MEMORY_LIMIT:
        /* The byte count must fit the kernel's 64-bit limit files. */
        if (shim_parse_range(arg, 1, INT64_MAX / 1048576, &o->memory_limit_mb) < 0)
            shim_set_err(err, xasprintf("bad --memory-limit '%s' (MiB, > 0)", arg));
        break;
    case OPT_CONDA_ENV:
        if (!*arg)
            shim_set_err(err, xstrdup("bad --conda-env '' (a name or an absolute path)"));
        else
            o->conda_env = arg;
        break;
    }
}

/* Checks that the options form a complete invocation. */
static void shim_check_opts(const struct shim_opts *o, char **err)
{
    static const char *const names[] = {"--job-id",  "--exit-file", "--log",
                                        "--workdir", "--env-file or --env-fd",
                                        "--kill-grace"};
    const bool present[] = {o->job_id >= 0,     o->exit_file != NULL, o->log_path != NULL,
                            o->workdir != NULL, o->env_file || o->env_fd >= 0,
                            o->kill_grace >= 0};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!present[i])
            shim_set_err(err, xasprintf("missing %s", names[i]));
    if (!o->command == !o->script)
        shim_set_err(err, xstrdup("give exactly one of --command and --script"));
    bool any_id = o->uid >= 0 || o->gid >= 0 || o->user;
    bool all_id = o->uid >= 0 && o->gid >= 0 && o->user;
    if (any_id && !all_id)
        shim_set_err(err, xstrdup("--uid, --gid and --user go together"));
    if (o->ntasks > 1 && !o->task_gpus)
        shim_set_err(err, xasprintf("--tasks %d needs --task-gpus with %d GPUs", o->ntasks,
                                    o->ntasks));
    else if (o->task_gpus && o->n_task_gpus != o->ntasks)
        shim_set_err(err, xasprintf("--task-gpus names %d GPUs for --tasks %d", o->n_task_gpus,
                                    o->ntasks));
}

/* Parses argv into *o. Returns 0, 1 for --help, or -1 with *err set (caller frees).
 * Parsing goes on after an error so that the exit file and job id are known to
 * report it. */
static int shim_parse_args(int argc, char **argv, struct shim_opts *o, char **err)
{
    *o = (struct shim_opts){
        .job_id = -1, .kill_grace = -1, .lock_fd = -1, .env_fd = -1, .uid = -1, .gid = -1,
        .ntasks = 1};
    *err = NULL;
    opterr = 0; /* one line of our own instead of getopt's */
    int c;
    /* '+': stop at the first non-option; ':': report a missing argument as ':'. */
    while ((c = getopt_long(argc, argv, "+:h", shim_long_opts, NULL)) != -1) {
        if (c == 'h')
            return 1;
        if (c == ':')
            shim_set_err(err, xasprintf("option %s needs a value", argv[optind - 1]));
        else if (c == '?')
            shim_set_err(err, xasprintf("unknown option %s", argv[optind - 1]));
        else
            shim_parse_opt(o, c, optarg, err);
    }
    if (optind < argc)
        shim_set_err(err, xasprintf("unexpected argument '%s'", argv[optind]));
    shim_check_opts(o, err);
    return *err ? -1 : 0;
}

/* ---- setup -------------------------------------------------------------------- */

/* Blocks the signals the loop reads from a signalfd. Run first thing, so a cancel
 * that arrives during setup waits in the queue instead of killing the shim. */
static void shim_block_signals(sigset_t *mask)
{
    sigemptyset(mask);
    sigaddset(mask, SIGCHLD);
    sigaddset(mask, SIGTERM);
    sigaddset(mask, SIGINT);
    sigaddset(mask, SIGHUP);
    sigaddset(mask, SIGUSR1);
    sigprocmask(SIG_BLOCK, mask, NULL);
    /* An ignored signal is discarded even while blocked, and an ignored SIGCHLD makes
     * the kernel reap children itself (wait4 would then fail): the starter's
     * dispositions are not ours to keep. */
    signal(SIGCHLD, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    /* A write error is handled where it happens. */
    signal(SIGPIPE, SIG_IGN);
}

/* Opens /dev/null on any of fds 0-2 that is closed, so that later files never land on
 * them and get dup2()ed over or written to by accident. */
static void shim_ensure_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int n = open("/dev/null", O_RDWR);
        if (n >= 0 && n != fd)
            close(n);
    }
}

/* Writes "<pid> <starttime>\n" into the daemon's lock file, which the shim keeps open
 * (and so locked) until it exits. */
static int shim_write_lock(int fd, char **err)
{
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        *err = xasprintf("--lock-fd %d: %s", fd, strerror(errno));
        return -1;
    }
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "%ld %lld\n", (long)getpid(),
                     (long long)proc_start_time(getpid()));
    if (pwrite(fd, buf, (size_t)n, 0) != n || ftruncate(fd, n) < 0) {
        *err = xasprintf("cannot write lock file (fd %d): %s", fd, strerror(errno));
        return -1;
    }
    return 0;
}

/* Step 1: own session, lock file, subreaper. */
static int shim_detach(const struct shim_opts *o, char **err)
{
    /* setsid fails only for a process group leader, which a fresh child of the daemon
     * never is. Started by hand from a shell, staying in the shell's session is what
     * the user expects (Ctrl-C cancels the job), so go on. */
    if (setsid() < 0 && errno != EPERM) {
        *err = xasprintf("setsid: %s", strerror(errno));
        return -1;
    }
    if (o->lock_fd >= 0 && shim_write_lock(o->lock_fd, err) < 0)
        return -1;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
        *err = xasprintf("cannot become a subreaper: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Step 2: reads the NUL-separated environment into ex->envp, then unlinks the file. */
/* The whole content of fd from offset 0 (the writer left the offset at the end). */
static char *shim_read_fd(int fd, size_t *len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    char tmp[16384];
    for (;;) {
        ssize_t n = pread(fd, tmp, sizeof(tmp), (off_t)sb.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            strbuf_free(&sb);
            return NULL;
        }
        if (n == 0)
            break;
        strbuf_add(&sb, tmp, (size_t)n);
    }
    *len = sb.len;
    return strbuf_detach(&sb);
}

static int shim_read_env(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    size_t len;
    const char *path = o->env_file ? o->env_file : "--env-fd";
    char *buf;
    if (o->env_file) {
        buf = read_file(path, &len);
        int read_errno = errno;
        /* Unlink even if reading failed: the file may hold secrets. */
        unlink(path);
        errno = read_errno;
    } else {
        buf = shim_read_fd(o->env_fd, &len);
        int read_errno = errno;
        close(o->env_fd);
        errno = read_errno;
    }
    if (!buf) {
        *err = xasprintf("cannot read env file %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = 0, cap = 16;
    char **envp = xmalloc(cap * sizeof(*envp));
    /* read_file NUL-terminates, so a last entry without its NUL ends there too. */
    for (char *p = buf; p < buf + len; p += strlen(p) + 1) {
        if (!*p)
            continue;
        if (*p == '=' || !strchr(p, '=')) {
            *err = xasprintf("env file %s: malformed entry (no KEY=)", path);
            free(envp);
            free(buf);
            return -1;
        }
        if (n + 2 > cap) {
            cap *= 2;
            envp = xrealloc(envp, cap * sizeof(*envp));
        }
        envp[n++] = p;
    }
    envp[n] = NULL;
    ex->envp = envp;
    ex->env_buf = buf;
    return 0;
}

/* Step 3: opens the job log for appending, owned by the job user. */
static int shim_open_log(const struct shim_opts *o, bool set_creds, char **err)
{
    int fd = open(o->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0) {
        *err = xasprintf("cannot open log %s: %s", o->log_path, strerror(errno));
        return -1;
    }
    if (set_creds && fchown(fd, (uid_t)o->uid, (gid_t)o->gid) < 0) {
        *err = xasprintf("cannot chown log %s: %s", o->log_path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Decides whether the job changes user: only a root shim can, and a non-root shim
 * asked to run as someone else must not quietly run the job as itself. */
static int shim_want_creds(const struct shim_opts *o, bool *set_creds, char **err)
{
    *set_creds = false;
    if (o->uid < 0)
        return 0;
    if (geteuid() == 0) {
        *set_creds = true;
        return 0;
    }
    if ((uid_t)o->uid == geteuid() && (gid_t)o->gid == getegid())
        return 0;
    *err = xasprintf("--uid %lld needs a root shim", (long long)o->uid);
    return -1;
}

/* Resolves the job user's supplementary groups now, because the NSS lookup
 * (initgroups) has no place in the child between fork and exec. */
static int shim_prepare_groups(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    int n = 32;
    gid_t *groups = xmalloc((size_t)n * sizeof(*groups));
    while (getgrouplist(o->user, (gid_t)o->gid, groups, &n) < 0) {
        int want = n;
        if (want <= 0 || want > 65536) {
            free(groups);
            *err = xasprintf("cannot list the groups of user %s", o->user);
            return -1;
        }
        groups = xrealloc(groups, (size_t)want * sizeof(*groups));
        n = want;
    }
    ex->groups = groups;
    ex->ngroups = n;
    return 0;
}

/* True when the file starts with "#!", i.e. the kernel can run it directly. */
static bool shim_has_shebang(const char *path)
{
    /* O_NONBLOCK: a FIFO must not hang the shim. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return false;
    char head[2];
    ssize_t n = read(fd, head, sizeof(head));
    close(fd);
    return n == 2 && head[0] == '#' && head[1] == '!';
}

/* Step 4 (before fork): chooses what to execute. */
/* The value of name in the job's environment, or NULL. */
static const char *shim_env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    return NULL;
}

/* Whether bash would run `command` as nothing but a program with literal arguments:
 * only characters without meaning to the shell, a first word that is neither an
 * assignment nor a reserved word, no exported function of that name and no BASH_ENV.
 * Then executing it directly gives the same result without the shell's start-up
 * (milliseconds per job). */
static bool shim_is_plain_command(const char *command, char *const *envp)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_./=:,+@%^- ";
    static const char *const reserved[] = {"time", "if", "then", "else", "elif", "fi",
                                           "case", "esac", "for", "select", "while",
                                           "until", "do", "done", "function", "coproc"};
    if (command[strspn(command, safe)] != '\0' || shim_env_get(envp, "BASH_ENV"))
        return false;
    const char *first = command + strspn(command, " ");
    size_t len = strcspn(first, " ");
    if (len == 0 || memchr(first, '=', len))
        return false;
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (strlen(reserved[i]) == len && strncmp(first, reserved[i], len) == 0)
            return false;
    char *func = xasprintf("BASH_FUNC_%.*s%%%%", (int)len, first);
    bool exported = shim_env_get(envp, func) != NULL;
    free(func);
    return !exported;
}

/* Splits a plain command into words and lists where its program may be. */
static void shim_prepare_direct(const char *command, struct shim_exec *ex)
{
    ex->direct_buf = xstrdup(command);
    size_t n = 0;
    ex->direct_argv = xcalloc(strlen(command) / 2 + 2, sizeof(char *));
    char *save = NULL;
    for (char *w = strtok_r(ex->direct_buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
        ex->direct_argv[n++] = w;
    const char *prog = ex->direct_argv[0];
    if (strchr(prog, '/')) {
        ex->direct_paths = xcalloc(2, sizeof(char *));
        ex->direct_paths[0] = xstrdup(prog);
        return;
    }
    const char *path = shim_env_get(ex->envp, "PATH");
    char *dirs = xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
    size_t cap = 2;
    for (const char *c = dirs; *c; c++)
        cap += *c == ':';
    ex->direct_paths = xcalloc(cap, sizeof(char *));
    size_t k = 0;
    char *dsave = NULL;
    for (char *d = strtok_r(dirs, ":", &dsave); d; d = strtok_r(NULL, ":", &dsave))
        if (*d == '/') /* relative PATH entries are left to the shell */
            ex->direct_paths[k++] = xasprintf("%s/%s", d, prog);
    free(dirs);
}

/* ---- conda (--conda-env, step 4) ---------------------------------------------- */

/* Where conda is looked for under the job's HOME after CONDA_EXE, in this order: the
 * installers' default directories (<dir>/bin/conda). */
static const char *const shim_conda_home_dirs[] = {"miniconda3", "anaconda3", "miniforge3",
                                                   "mambaforge"};
#define SHIM_CONDA_SYSTEM "/opt/conda/bin/conda"

/* What the job's shell runs before the job itself: the installation's hook, then the
 * activation. Names and paths come in through the environment only, never as shell
 * text, so nothing in them is parsed. The hook's output goes through a variable so
 * that a failing hook is noticed (`eval "$(false)"` succeeds). */
#define SHIM_CONDA_ACTIVATE                                                                \
    "gflow_conda_hook=$(\"$GFLOW_CONDA_EXE\" shell.bash hook) && "                          \
    "eval \"$gflow_conda_hook\" && conda activate \"$GFLOW_CONDA_ENV\" || { "                \
    "echo \"gflow-shim: cannot activate conda environment $GFLOW_CONDA_ENV\" >&2; "           \
    "exit 125; }; unset gflow_conda_hook; "

/* The job after the activation: eval keeps the command's shell semantics (quoting,
 * builtins, exit status) as `bash -c` would give them. */
static const char shim_conda_command_text[] = SHIM_CONDA_ACTIVATE "eval \"$GFLOW_JOB_COMMAND\"";
static const char shim_conda_exec_text[] = SHIM_CONDA_ACTIVATE "exec \"$GFLOW_JOB_SCRIPT\"";
static const char shim_conda_bash_text[] =
    SHIM_CONDA_ACTIVATE "exec /bin/bash \"$GFLOW_JOB_SCRIPT\"";

/* Whether path is an executable regular file. */
static bool shim_is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Whether dir is a conda environment: it holds conda-meta/. */
static bool shim_is_conda_env(const char *dir)
{
    char *meta = xasprintf("%s/conda-meta", dir);
    struct stat st;
    bool ok = stat(meta, &st) == 0 && S_ISDIR(st.st_mode);
    free(meta);
    return ok;
}

/* The job's conda executable (to free): CONDA_EXE, then the usual install places.
 * NULL with *err saying where it looked. */
static char *shim_find_conda(char *const *envp, char **err)
{
    struct strbuf looked;
    strbuf_init(&looked);
    const char *exe = shim_env_get(envp, "CONDA_EXE");
    if (exe && *exe) {
        /* Relative: the job's cwd is not the shim's, so it names nothing reliable. */
        if (exe[0] == '/' && shim_is_executable(exe)) {
            strbuf_free(&looked);
            return xstrdup(exe);
        }
        strbuf_addf(&looked, "CONDA_EXE=%s", exe);
    } else {
        strbuf_adds(&looked, "$CONDA_EXE (unset)");
    }
    const char *home = shim_env_get(envp, "HOME");
    size_t nplaces = sizeof(shim_conda_home_dirs) / sizeof(shim_conda_home_dirs[0]);
    for (size_t i = 0; i <= nplaces; i++) {
        char *cand;
        if (i < nplaces && home && home[0] == '/')
            cand = xasprintf("%s/%s/bin/conda", home, shim_conda_home_dirs[i]);
        else if (i == nplaces)
            cand = xstrdup(SHIM_CONDA_SYSTEM);
        else
            continue;
        if (shim_is_executable(cand)) {
            strbuf_free(&looked);
            return cand;
        }
        strbuf_addf(&looked, ", %s", cand);
        free(cand);
    }
    if (!home || home[0] != '/')
        strbuf_adds(&looked, "; $HOME unset or not absolute");
    *err = xasprintf("conda not found: set CONDA_EXE or install conda in ~/miniconda3 "
                     "(looked in %s)",
                     looked.buf);
    strbuf_free(&looked);
    return NULL;
}

/* The installation's base (to free): the directory above the executable's bin/. */
static char *shim_conda_base(const char *exe)
{
    char *base = xstrdup(exe);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(base, '/');
        if (slash)
            *slash = '\0';
    }
    if (!*base) {
        free(base);
        base = xstrdup("/");
    }
    return base;
}

/* Checks that the environment `name` exists for the conda at exe. 0, or -1 with *err
 * saying where it looked. */
static int shim_check_conda_env(const char *name, const char *exe, char *const *envp,
                                char **err)
{
    char *base = shim_conda_base(exe);
    const char *home = shim_env_get(envp, "HOME");
    char *cands[2] = {NULL, NULL};
    if (strcmp(name, "base") == 0)
        cands[0] = xstrdup(base);
    else if (name[0] == '/')
        cands[0] = xstrdup(name);
    /* A name is one path component, as conda's own names are. */
    else if (!strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
        cands[0] = xasprintf("%s/envs/%s", base, name);
        if (home && home[0] == '/')
            cands[1] = xasprintf("%s/.conda/envs/%s", home, name);
    }
    free(base);
    struct strbuf looked;
    strbuf_init(&looked);
    bool found = false, valid = cands[0] != NULL;
    for (size_t i = 0; i < 2 && cands[i]; i++) {
        found = found || shim_is_conda_env(cands[i]);
        strbuf_addf(&looked, "%s%s", i ? ", " : "", cands[i]);
        free(cands[i]);
    }
    if (!found) {
        if (valid)
            *err = xasprintf("conda environment '%s' not found (looked in %s)", name,
                             looked.buf);
        else
            *err = xasprintf("conda environment '%s' not found (neither a name nor an "
                             "absolute path)",
                             name);
    }
    strbuf_free(&looked);
    return found ? 0 : -1;
}

/* Replaces ex->envp by the job's environment without the variables of vars, then
 * vars ("KEY=value" entries that ex keeps). */
static void shim_env_set(struct shim_exec *ex, char *const *vars, size_t nvars)
{
    size_t n = 0;
    while (ex->envp[n])
        n++;
    char **env = xmalloc((n + nvars + 1) * sizeof(*env));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < nvars && !replaced; j++) {
            size_t klen = (size_t)(strchr(vars[j], '=') - vars[j]) + 1;
            replaced = strncmp(ex->envp[i], vars[j], klen) == 0;
        }
        if (!replaced)
            env[k++] = ex->envp[i];
    }
    for (size_t j = 0; j < nvars; j++)
        env[k++] = vars[j];
    env[k] = NULL;
    free(ex->envp);
    ex->envp = env;
}

/* With --conda-env: finds conda and the environment before anything starts, and adds
 * the GFLOW_* variables the job's shell reads. 0, or -1 with *err, which also goes to
 * the job log as its one line (step 3). */
static int shim_prepare_conda(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    if (!o->conda_env)
        return 0;
    char *exe = shim_find_conda(ex->envp, err);
    if (!exe || shim_check_conda_env(o->conda_env, exe, ex->envp, err) < 0) {
        free(exe);
        dprintf(ex->log_fd, "gflow-shim: %s\n", *err);
        return -1;
    }
    ex->conda_vars[0] = xasprintf("GFLOW_CONDA_EXE=%s", exe);
    ex->conda_vars[1] = xasprintf("GFLOW_CONDA_ENV=%s", o->conda_env);
    /* "./": exec in bash would search PATH for a name without a slash, and a path
     * starting with '-' would read as an option. */
    if (o->command)
        ex->conda_vars[2] = xasprintf("GFLOW_JOB_COMMAND=%s", o->command);
    else
        ex->conda_vars[2] = xasprintf("GFLOW_JOB_SCRIPT=%s%s",
                                      o->script[0] == '/' ? "" : "./", o->script);
    free(exe);
    shim_env_set(ex, ex->conda_vars, SHIM_N_CONDA_VARS);
    return 0;
}

/* Step 4 (before fork): the job's program and arguments. */
static void shim_prepare_argv(const struct shim_opts *o, struct shim_exec *ex)
{
    if (o->conda_env) {
        /* Always the shell: the activation must run first, in the job's own shell. */
        ex->path = "/bin/bash";
        ex->argv[0] = "bash";
        ex->argv[1] = "-c";
        if (o->command)
            ex->argv[2] = shim_conda_command_text;
        else if (shim_has_shebang(o->script) || access(o->script, F_OK) < 0)
            ex->argv[2] = shim_conda_exec_text; /* missing: bash says so, 127 */
        else
            ex->argv[2] = shim_conda_bash_text;
        ex->argv[3] = NULL;
        return;
    }
    if (o->command) {
        ex->path = "/bin/bash";
        ex->argv[0] = "bash";
        ex->argv[1] = "-c";
        ex->argv[2] = o->command;
        ex->argv[3] = NULL;
        if (shim_is_plain_command(o->command, ex->envp))
            shim_prepare_direct(o->command, ex);
    } else if (shim_has_shebang(o->script) || access(o->script, F_OK) < 0) {
        /* A missing script is exec'd anyway, so that the job fails the way any
         * missing program does: 127 and a line in its log. */
        ex->path = o->script;
        ex->argv[0] = o->script;
        ex->argv[1] = NULL;
    } else {
        ex->path = "/bin/bash";
        ex->argv[0] = "bash";
        ex->argv[1] = o->script;
        ex->argv[2] = NULL;
    }
}

/* Whether env entry e sets one of the variables --task-gpus gives each copy. */
static bool shim_is_task_var(const char *e)
{
    for (size_t i = 0; i < SHIM_N_TASK_VARS; i++) {
        size_t n = strlen(shim_task_vars[i]);
        if (strncmp(e, shim_task_vars[i], n) == 0 && e[n] == '=')
            return true;
    }
    return false;
}

/* A TCP port of 127.0.0.1 that is free now: the kernel's pick for port 0. Another
 * program may take it before the job binds it, a race torchrun accepts as well. */
static int shim_free_port(int *port, char **err)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        *err = xasprintf("cannot pick a MASTER_PORT: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    *port = ntohs(a.sin_port);
    return 0;
}

/* With --task-gpus: builds every copy's environment, the job's with the rank
 * variables of that copy in place of the env file's. */
static int shim_prepare_task_env(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    ex->ntasks = o->ntasks;
    if (!o->task_gpus)
        return 0;
    int port;
    if (shim_free_port(&port, err) < 0)
        return -1;
    size_t n = 0;
    while (ex->envp[n])
        n++;
    char world[16], master_port[16];
    snprintf(world, sizeof(world), "%d", o->ntasks);
    snprintf(master_port, sizeof(master_port), "%d", port);
    ex->task_envp = xcalloc((size_t)o->ntasks, sizeof(*ex->task_envp));
    for (int i = 0; i < o->ntasks; i++) {
        char rank[16];
        snprintf(rank, sizeof(rank), "%d", i);
        /* In the order of shim_task_vars. */
        const char *values[] = {o->task_gpus[i], rank, rank, world, world, "127.0.0.1",
                                master_port};
        _Static_assert(sizeof(values) / sizeof(values[0]) == SHIM_N_TASK_VARS,
                       "a value for each task variable");
        char **env = xmalloc((n + SHIM_N_TASK_VARS + 1) * sizeof(*env));
        size_t k = 0;
        for (size_t j = 0; j < n; j++)
            if (!shim_is_task_var(ex->envp[j]))
                env[k++] = ex->envp[j];
        ex->task_env_shared = k;
        for (size_t j = 0; j < SHIM_N_TASK_VARS; j++)
            env[k++] = xasprintf("%s=%s", shim_task_vars[j], values[j]);
        env[k] = NULL;
        ex->task_envp[i] = env;
    }
    return 0;
}

/* ---- the devices cgroup (step 7) ------------------------------------------------ */

/* Whether the comma-separated list opts holds word. */
static bool shim_has_option(const char *opts, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = opts;; p++) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, word, n) == 0)
            return true;
        p += len;
        if (!*p)
            return false;
    }
}

/* Undoes the octal escapes of a path in /proc/self/mountinfo ("\040" for a space). */
static void shim_unescape_mount_path(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* Finds a cgroup hierarchy in /proc/self/mountinfo: fstype "cgroup" with controller
 * among its super options (v1), or fstype "cgroup2" when controller is NULL (the
 * unified hierarchy). Sets its mount point and the cgroup its root shows (fields 5
 * and 4). 0, or -1 if none. */
static int shim_cgroup_mount(const char *controller, char **mount_point, char **mount_root)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int rc = -1;
    while (rc < 0 && getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS */
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        *sep = '\0';
        char fstype[32], source[PATH_MAX], super[1024];
        if (sscanf(sep + 3, "%31s %4095s %1023s", fstype, source, super) != 3)
            continue;
        if (controller ? strcmp(fstype, "cgroup") != 0 || !shim_has_option(super, controller)
                       : strcmp(fstype, "cgroup2") != 0)
            continue;
        char root[PATH_MAX], point[PATH_MAX];
        if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2)
            continue;
        shim_unescape_mount_path(root);
        shim_unescape_mount_path(point);
        *mount_root = xstrdup(root);
        *mount_point = xstrdup(point);
        rc = 0;
    }
    free(line);
    fclose(f);
    return rc;
}

/* The shim's own cgroup in the v1 hierarchy of controller ("5:devices:/a/b" in
 * /proc/self/cgroup gives "/a/b"), or in the unified hierarchy when controller is NULL
 * ("0::/a/b"); NULL if it has none. */
static char *shim_own_cgroup(const char *controller)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return NULL;
    char *line = NULL, *own = NULL;
    size_t cap = 0;
    while (!own && getline(&line, &cap, f) > 0) {
        char *ctrl = strchr(line, ':');
        char *path = ctrl ? strchr(ctrl + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        if (controller ? shim_has_option(ctrl + 1, controller)
                       : ctrl == line + 1 && line[0] == '0' && ctrl[1] == '\0')
            own = xstrdup(path);
    }
    free(line);
    fclose(f);
    return own;
}

/* The directory of the shim's own cgroup (of controller, NULL: unified) under the
 * mount point. A job's cgroup goes below it rather than below the hierarchy's root,
 * so that it inherits whatever policy and limits the shim is under (a service's, a
 * container's) and only narrows them. Falls back to the mount point when the shim's
 * cgroup is not under it. */
static char *shim_cgroup_base(const char *controller, const char *mount_point,
                              const char *mount_root)
{
    char *own = shim_own_cgroup(controller);
    const char *rel = "";
    size_t n = strlen(mount_root);
    if (own && strcmp(mount_root, "/") == 0)
        rel = own;
    else if (own && strncmp(own, mount_root, n) == 0 && (own[n] == '/' || !own[n]))
        rel = own + n;
    char *base = xasprintf("%s%s", mount_point, strcmp(rel, "/") == 0 ? "" : rel);
    free(own);
    return base;
}

/* Writes one "c 195:<minor> rwm" rule per denied minor to dir/devices.deny (the kernel
 * takes one rule per write). 0, or -1 with *why. */
static int shim_devcg_deny(const char *dir, const struct shim_opts *o, char **why)
{
    char *path = xasprintf("%s/devices.deny", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    int rc = fd < 0 ? -1 : 0;
    for (int i = 0; rc == 0 && i < o->n_deny_minors; i++) {
        char rule[64];
        int n = snprintf(rule, sizeof(rule), "c %d:%d rwm", SHIM_NVIDIA_MAJOR,
                         o->deny_minors[i]);
        if (write(fd, rule, (size_t)n) != n)
            rc = -1;
    }
    if (rc < 0)
        *why = xasprintf("cannot write %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}

/* Creates the job's devices cgroup, <shim's devices cgroup>/gflow/job-<id>, with its
 * denials, and opens its cgroup.procs for the children to join. Returns the cgroup's
 * directory, or NULL with *why. */
static char *shim_devcg_create(const struct shim_opts *o, int *procs_fd, char **why)
{
    if (geteuid() != 0) {
        *why = xstrdup("the shim does not run as root");
        return NULL;
    }
    char *mount_point, *mount_root;
    if (shim_cgroup_mount("devices", &mount_point, &mount_root) < 0) {
        *why = xstrdup("no cgroup v1 devices controller is mounted (on cgroup v2 device "
                       "access is controlled by an eBPF program, which gflow does not load)");
        return NULL;
    }
    char *base = shim_cgroup_base("devices", mount_point, mount_root);
    char *dir = xasprintf("%s/gflow/job-%lld", base, (long long)o->job_id);
    free(base);
    free(mount_point);
    free(mount_root);
    /* An empty leftover of a shim that died goes, so that the job gets exactly the
     * denials of this run; one still in use stays (rmdir fails) and is shared. */
    rmdir(dir);
    if (mkdir_p(dir, 0755) < 0) {
        *why = xasprintf("cannot create %s: %s", dir, strerror(errno));
        free(dir);
        return NULL;
    }
    if (shim_devcg_deny(dir, o, why) == 0) {
        char *procs = xasprintf("%s/cgroup.procs", dir);
        *procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (*procs_fd < 0)
            *why = xasprintf("cannot open %s: %s", procs, strerror(errno));
        free(procs);
        if (*procs_fd >= 0)
            return dir;
    }
    rmdir(dir);
    free(dir);
    return NULL;
}

/* Step 7 before fork: with --deny-devices, sets up the job's devices cgroup and
 * returns its directory; when that cannot be done, says so in the job's log (the job
 * runs anyway: isolation is only promised where the controller is available) and on
 * stderr, and returns NULL. */
static char *shim_devcg_setup(const struct shim_opts *o, struct shim_exec *ex)
{
    if (!o->deny_minors)
        return NULL;
    char *why = NULL;
    char *dir = shim_devcg_create(o, &ex->cgroup_procs_fd, &why);
    if (dir)
        return dir;
    char *line = xasprintf("gflow-shim: device isolation unavailable: %s\n", why);
    if (write(ex->log_fd, line, strlen(line)) < 0) {
        /* stderr below still says it */
    }
    fprintf(stderr, "gflow-shim: job %lld: device isolation unavailable: %s\n",
            (long long)o->job_id, why);
    free(line);
    free(why);
    return NULL;
}

/* After the job: removes one of its cgroups. A process the shim just reaped may still
 * count as a member for a moment (EBUSY), so it tries for about a second. */
static void shim_cgroup_remove(const char *dir, int64_t job_id)
{
    for (int i = 0; i < 100; i++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return;
        if (errno != EBUSY)
            break;
        struct timespec ts = {0, 10L * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "gflow-shim: job %lld: cannot remove %s: %s\n", (long long)job_id, dir,
            strerror(errno));
}

/* ---- the memory limit (step 8) ------------------------------------------------- */

/* Writes value to dir/file. 0, or -1 with errno set. */
static int shim_cg_write(const char *dir, const char *file, const char *value)
{
    char *path = xasprintf("%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    free(path);
    if (fd < 0)
        return -1;
    ssize_t len = (ssize_t)strlen(value);
    int rc = write(fd, value, (size_t)len) == len ? 0 : -1;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* The number in dir/file: the whole file when key is NULL (memory.failcnt), else the
 * one after "key " on its line (memory.events, memory.oom_control). -1 when the file
 * or the key is missing. */
static long long shim_cg_read_num(const char *dir, const char *file, const char *key)
{
    char *path = xasprintf("%s/%s", dir, file);
    char *buf = read_file(path, NULL);
    free(path);
    if (!buf)
        return -1;
    long long v = -1;
    size_t n = key ? strlen(key) : 0;
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!key || (strncmp(l, key, n) == 0 && l[n] == ' ')) {
            v = strtoll(l + n, NULL, 10);
            break;
        }
    }
    free(buf);
    return v;
}

/* Whether the space-separated list in dir/file (cgroup.controllers,
 * cgroup.subtree_control) holds word. */
static bool shim_cg_has_word(const char *dir, const char *file, const char *word)
{
    char *path = xasprintf("%s/%s", dir, file);
    char *buf = read_file(path, NULL);
    free(path);
    bool found = false;
    char *save = NULL;
    for (char *w = buf ? strtok_r(buf, " \n", &save) : NULL; w && !found;
         w = strtok_r(NULL, " \n", &save))
        found = strcmp(w, word) == 0;
    free(buf);
    return found;
}

/* One file of the job's memory cgroup to write; an optional one may be missing (no
 * swap accounting, an older kernel). */
struct shim_cg_setting {
    const char *file;
    const char *value;
    bool optional;
};

/* Creates dir (an empty leftover of a shim that died goes first, so that the job gets
 * exactly this run's limits), writes the settings in order and opens its cgroup.procs
 * for the children to join. 0, or -1 with *why and dir removed again. */
static int shim_memcg_make(const char *dir, const struct shim_cg_setting *set, size_t n,
                           int *procs_fd, char **why)
{
    rmdir(dir);
    if (mkdir_p(dir, 0755) < 0) {
        *why = xasprintf("cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (shim_cg_write(dir, set[i].file, set[i].value) == 0 ||
            (set[i].optional && errno == ENOENT))
            continue;
        *why = xasprintf("cannot write %s/%s: %s", dir, set[i].file, strerror(errno));
        rmdir(dir);
        return -1;
    }
    char *procs = xasprintf("%s/cgroup.procs", dir);
    *procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (*procs_fd < 0)
        *why = xasprintf("cannot open %s: %s", procs, strerror(errno));
    free(procs);
    if (*procs_fd >= 0)
        return 0;
    rmdir(dir);
    return -1;
}

/* cgroup v2: <the shim's own cgroup>/gflow-job-<id> with memory.max. A process may
 * only join a leaf, and a cgroup with processes in it (the shim's own, unless it is
 * the root) cannot enable controllers for its children: then the kernel refuses the
 * "+memory" below and the next method is tried. memory.oom.group makes the kernel
 * kill the whole job at once, as the other methods do. Returns the cgroup's
 * directory, or NULL with *why. */
static char *shim_memcg_v2_create(int64_t job_id, long long bytes, int *procs_fd, char **why)
{
    char *point, *root;
    if (shim_cgroup_mount(NULL, &point, &root) < 0) {
        *why = xstrdup("no cgroup2 hierarchy is mounted");
        return NULL;
    }
    char *base = shim_cgroup_base(NULL, point, root);
    free(point);
    free(root);
    char *dir = NULL;
    if (!shim_cg_has_word(base, "cgroup.controllers", "memory")) {
        *why = xasprintf("the memory controller is not available in %s (bound to cgroup v1, "
                         "or not delegated)", base);
    } else if (!shim_cg_has_word(base, "cgroup.subtree_control", "memory") &&
               shim_cg_write(base, "cgroup.subtree_control", "+memory") < 0) {
        *why = xasprintf("cannot enable the memory controller in %s/cgroup.subtree_control: %s",
                         base, strerror(errno));
    } else {
        char limit[32];
        snprintf(limit, sizeof(limit), "%lld", bytes);
        const struct shim_cg_setting set[] = {{"memory.max", limit, false},
                                              {"memory.swap.max", "0", true},
                                              {"memory.oom.group", "1", true}};
        dir = xasprintf("%s/gflow-job-%lld", base, (long long)job_id);
        if (shim_memcg_make(dir, set, sizeof(set) / sizeof(set[0]), procs_fd, why) < 0) {
            free(dir);
            dir = NULL;
        }
    }
    free(base);
    return dir;
}

/* cgroup v1: <the shim's own memory cgroup>/gflow/job-<id> with
 * memory.limit_in_bytes, and memory.memsw.limit_in_bytes the same (memory plus swap:
 * no swapping past the limit) where swap is accounted. Returns the cgroup's directory,
 * or NULL with *why. */
static char *shim_memcg_v1_create(int64_t job_id, long long bytes, int *procs_fd, char **why)
{
    char *point, *root;
    if (shim_cgroup_mount("memory", &point, &root) < 0) {
        *why = xstrdup("no cgroup v1 memory controller is mounted");
        return NULL;
    }
    char *base = shim_cgroup_base("memory", point, root);
    char *dir = xasprintf("%s/gflow/job-%lld", base, (long long)job_id);
    free(base);
    free(point);
    free(root);
    char limit[32];
    snprintf(limit, sizeof(limit), "%lld", bytes);
    /* The memsw limit may never be below the memory limit: memory first. */
    const struct shim_cg_setting set[] = {{"memory.limit_in_bytes", limit, false},
                                          {"memory.memsw.limit_in_bytes", limit, true}};
    if (shim_memcg_make(dir, set, sizeof(set) / sizeof(set[0]), procs_fd, why) < 0) {
        free(dir);
        return NULL;
    }
    return dir;
}

/* Step 8 before fork: with --memory-limit, picks how the limit is enforced (cgroup v2,
 * else cgroup v1, else the watchdog; or only the method GFLOW_SHIM_MEMORY_METHOD
 * names, for tests) and creates the job's memory cgroup. 0, or -1 with *err when the
 * forced method is unavailable. */
static int shim_mem_setup(const struct shim_opts *o, struct shim_exec *ex,
                          struct shim_memlimit *m, char **err)
{
    m->limit_mb = o->memory_limit_mb;
    if (!m->limit_mb)
        return 0;
    const char *force = getenv("GFLOW_SHIM_MEMORY_METHOD");
    if (force && !*force)
        force = NULL;
    if (force && strcmp(force, "v2") != 0 && strcmp(force, "v1") != 0 &&
        strcmp(force, "watchdog") != 0) {
        *err = xasprintf("GFLOW_SHIM_MEMORY_METHOD '%s' is none of v2, v1, watchdog", force);
        return -1;
    }
    long long bytes = (long long)m->limit_mb * 1048576;
    char *why = NULL;
    if (!force || strcmp(force, "v2") == 0) {
        m->dir = shim_memcg_v2_create(o->job_id, bytes, &ex->memcg_procs_fd, &why);
        m->method = SHIM_MEM_V2;
    }
    if (!m->dir && (!force || strcmp(force, "v1") == 0)) {
        free(why);
        why = NULL;
        m->dir = shim_memcg_v1_create(o->job_id, bytes, &ex->memcg_procs_fd, &why);
        m->method = SHIM_MEM_V1;
    }
    if (!m->dir && force && strcmp(force, "watchdog") != 0) {
        *err = xasprintf("memory enforcement %s unavailable: %s", force, why);
        free(why);
        return -1;
    }
    free(why);
    if (!m->dir)
        m->method = SHIM_MEM_WATCHDOG;
    return 0;
}

/* ---- the job child ------------------------------------------------------------ */

/* Reports why the job could not start, to its log and to the shim, and exits. */
__attribute__((noreturn)) static void shim_child_fail(const struct shim_exec *ex, int code,
                                                      const char *what, const char *arg, int e)
{
    char msg[PATH_MAX + 256];
    int n = snprintf(msg, sizeof(msg), "gflow-shim: %s %s: %s\n", what, arg, strerror(e));
    if (n < 0)
        _exit(code);
    if ((size_t)n >= sizeof(msg))
        n = (int)sizeof(msg) - 1;
    if (write(ex->log_fd, msg, (size_t)n) < 0) {
        /* nothing left to tell it to */
    }
    /* With the newline: copies share the pipe, and the shim keeps the first line. */
    if (write(ex->report_fd, msg, (size_t)n) < 0) {
        /* the exit code still says it */
    }
    _exit(code);
}

/* Restores the default action of sig. glibc's signal() refuses the two real-time
 * signals it reserves for itself (32, 33), yet a parent may have left them ignored and
 * the job would inherit that: those go through the system call directly. */
static void shim_default_signal(int sig)
{
    if (signal(sig, SIG_DFL) != SIG_ERR || errno != EINVAL)
        return;
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        unsigned long mask;
    } ksa = {SIG_DFL, 0, NULL, 0};
    syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
}

/* Runs in the forked child: becomes the job, or one copy of it with envp. Only
 * system calls from here on. */
__attribute__((noreturn)) static void shim_child(const struct shim_exec *ex, char *const *envp)
{
    /* Handlers are reset by exec, but ignored signals and the mask are inherited. */
    for (int s = 1; s < NSIG; s++)
        shim_default_signal(s);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, NULL);
    /* Own process group, or the first copy's: one kill(-pgid) reaches the whole job. */
    setpgid(0, ex->pgid);
    /* Step 7, while still root and before exec: the job never runs outside its devices
     * cgroup ("0" is the writer itself). Failing closed: a job that was to be
     * isolated must not run unisolated because joining went wrong. */
    if (ex->cgroup_procs_fd >= 0 && write(ex->cgroup_procs_fd, "0", 1) != 1)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot join the devices cgroup", "of the job",
                        errno);
    /* Step 8, likewise: a job process outside the memory cgroup escapes the limit. */
    if (ex->memcg_procs_fd >= 0 && write(ex->memcg_procs_fd, "0", 1) != 1)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot join the memory cgroup", "of the job",
                        errno);
    if (ex->set_creds) {
        if (setgroups((size_t)ex->ngroups, ex->groups) < 0)
            shim_child_fail(ex, JOB_EXIT_SETUP, "cannot set groups of user", ex->user, errno);
        if (setgid(ex->gid) < 0)
            shim_child_fail(ex, JOB_EXIT_SETUP, "cannot setgid for user", ex->user, errno);
        if (setuid(ex->uid) < 0)
            shim_child_fail(ex, JOB_EXIT_SETUP, "cannot setuid to user", ex->user, errno);
    }
    /* After setuid: the directory must be one the job user may enter. */
    if (chdir(ex->workdir) < 0)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot chdir to", ex->workdir, errno);
    if (dup2(ex->null_fd, 0) < 0 || dup2(ex->log_fd, 1) < 0 || dup2(ex->log_fd, 2) < 0)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot redirect output to", "log", errno);
    /* Whatever the daemon leaked to us without close-on-exec stays out of the job.
     * Best effort: kernels before 5.11 lack the flag, and the daemon opens its fds
     * close-on-exec anyway. */
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (ex->direct_paths) /* returns only if no candidate could be executed */
        for (char **p = ex->direct_paths; *p; p++)
            execve(*p, ex->direct_argv, envp);
    execve(ex->path, (char *const *)ex->argv, envp);
    int e = errno;
    shim_child_fail(ex, e == ENOENT || e == ENOTDIR ? JOB_EXIT_NOTFOUND : JOB_EXIT_NOEXEC,
                    "cannot execute", ex->path, e);
}

/* Step 4: forks the copies of the job into r->tasks, all in the first one's process
 * group. Returns how many were forked; when not all, *err says why. */
static int shim_spawn(struct shim_exec *ex, struct shim_run *r, char **err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        *err = xasprintf("pipe: %s", strerror(errno));
        return 0;
    }
    /* Read only once all copies are gone: many failing copies must not block on a full
     * pipe meanwhile (a lost line costs nothing, the first is what counts). */
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    ex->report_fd = p[1];
    r->tasks = xcalloc((size_t)ex->ntasks, sizeof(*r->tasks));
    int n;
    for (n = 0; n < ex->ntasks; n++) {
        pid_t pid = fork();
        if (pid == 0)
            shim_child(ex, ex->task_envp ? ex->task_envp[n] : ex->envp);
        if (pid < 0) {
            *err = xasprintf("cannot fork the job: %s", strerror(errno));
            break;
        }
        if (n == 0)
            ex->pgid = pid;
        /* Also in the parent, so that the job's pgid is set whichever runs first and a
         * kill(-pgid) right away cannot miss. EACCES: the child already exec'd. */
        setpgid(pid, ex->pgid);
        r->tasks[n].pid = pid;
    }
    close(p[1]);
    r->ntasks = n;
    r->pgid = ex->pgid;
    r->report_rd = p[0];
    return n;
}

/* Reads the child's reason for not starting, if any; the pipe is at EOF once every
 * copy exec'd or exited. Returns NULL or a string to free: the first copy's line. */
static char *shim_read_report(int fd)
{
    char buf[PATH_MAX + 256];
    size_t len = 0;
    while (len < sizeof(buf) - 1) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return len ? xstrndup(buf, strcspn(buf, "\n")) : NULL;
}

/* ---- supervision -------------------------------------------------------------- */

struct shim_proc {
    pid_t pid;
    pid_t ppid;
};

static int shim_proc_cmp(const void *a, const void *b)
{
    pid_t x = ((const struct shim_proc *)a)->pid, y = ((const struct shim_proc *)b)->pid;
    return (x > y) - (x < y);
}

/* All processes with their parents, sorted by pid. */
static size_t shim_list_procs(struct shim_proc **out)
{
    size_t n = 0, cap = 256;
    struct shim_proc *v = xmalloc(cap * sizeof(*v));
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int64_t pid;
        if (parse_int64(de->d_name, &pid) < 0 || pid <= 0 || pid > INT_MAX)
            continue;
        pid_t ppid = proc_parent((pid_t)pid);
        if (ppid < 0)
            continue; /* gone meanwhile */
        if (n == cap) {
            cap *= 2;
            v = xrealloc(v, cap * sizeof(*v));
        }
        v[n++] = (struct shim_proc){(pid_t)pid, ppid};
    }
    if (d)
        closedir(d);
    qsort(v, n, sizeof(*v), shim_proc_cmp);
    *out = v;
    return n;
}

/* Marks in desc[] the processes whose parent chain leads to root. As a subreaper the
 * shim adopts orphans, so this is everything the job started that still exists. */
static void shim_mark_descendants(const struct shim_proc *v, size_t n, pid_t root, bool *desc)
{
    bool changed = true;
    while (changed) {
        changed = false;
        for (size_t i = 0; i < n; i++) {
            if (desc[i])
                continue;
            bool hit = v[i].ppid == root;
            if (!hit) {
                struct shim_proc key = {.pid = v[i].ppid};
                const struct shim_proc *par = bsearch(&key, v, n, sizeof(*v), shim_proc_cmp);
                hit = par && desc[par - v];
            }
            if (hit) {
                desc[i] = true;
                changed = true;
            }
        }
    }
}

/* Sends sig to one process and to its process group (unless that is the shim's own).
 * The group kill also reaches members forked since the scan. A stopped process cannot
 * act on SIGTERM, so it is continued too. */
static void shim_kill_proc(pid_t pid, pid_t self_pgid, int sig)
{
    pid_t pgid = getpgid(pid);
    kill(pid, sig);
    if (pgid > 0 && pgid != self_pgid)
        kill(-pgid, sig);
    if (sig == SIGTERM) {
        kill(pid, SIGCONT);
        if (pgid > 0 && pgid != self_pgid)
            kill(-pgid, SIGCONT);
    }
}

/* Sends sig (0: none) to the job's process group and every descendant of the shim.
 * Returns how many descendants exist, zombies included. A pid may in theory be reused
 * between the scan and the kill; the window is a few microseconds, and most targets
 * are the shim's own children, whose pids cannot be reused before it reaps them. */
static size_t shim_signal_tree(struct shim_run *r, int sig)
{
    /* While its leader is unreaped, the group id cannot be anyone else's. Later, the
     * members left are reached through the scan, whose group kill uses their pgid. */
    if (sig && r->ntasks > 0 && !r->tasks[0].reaped) {
        /* Before the scan: the group is gone only after every member is. */
        kill(-r->pgid, sig);
        if (sig == SIGTERM)
            kill(-r->pgid, SIGCONT);
    }
    struct shim_proc *v;
    size_t n = shim_list_procs(&v);
    bool *desc = xcalloc(n ? n : 1, sizeof(*desc));
    shim_mark_descendants(v, n, r->self, desc);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!desc[i])
            continue;
        count++;
        if (sig)
            shim_kill_proc(v[i].pid, r->self, sig);
    }
    free(desc);
    free(v);
    return count;
}

/* Arms the timer: first expiry after `first` seconds, then every interval_ns (0: once). */
static void shim_arm_timer(int tfd, double first, long interval_ns)
{
    struct itimerspec its = {0};
    its.it_value.tv_sec = (time_t)first;
    its.it_value.tv_nsec = (long)((first - (double)(time_t)first) * 1e9);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1; /* all zero would disarm it */
    its.it_interval.tv_nsec = interval_ns;
    timerfd_settime(tfd, 0, &its, NULL);
}

/* SIGTERM to everything and start the grace period. Only once: a second cancel must
 * not push the SIGKILL further away. */
static void shim_terminate(struct shim_run *r)
{
    if (r->term_sent)
        return;
    r->term_sent = true;
    shim_signal_tree(r, SIGTERM);
    shim_arm_timer(r->tfd, r->kill_grace, 0);
}

/* The grace is over (or a re-kill tick): SIGKILL everything that is left. */
static void shim_timer_fired(struct shim_run *r)
{
    uint64_t ticks;
    if (read(r->tfd, &ticks, sizeof(ticks)) < 0)
        return; /* spurious wakeup */
    if (!r->kill_phase) {
        r->kill_phase = true;
        shim_arm_timer(r->tfd, SHIM_REKILL_NS / 1e9, SHIM_REKILL_NS);
    }
    shim_signal_tree(r, SIGKILL);
}

/* VmRSS of pid in kB; 0 for a process without one (a zombie) or one that is gone. */
static long long shim_proc_rss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    char *buf = read_file(path, NULL);
    if (!buf)
        return 0;
    char *line = strstr(buf, "\nVmRSS:");
    long long kb = line ? strtoll(line + strlen("\nVmRSS:"), NULL, 10) : 0;
    free(buf);
    return kb;
}

/* The watchdog's measure of the job: the summed RSS of every descendant of the shim.
 * Pages shared between them count once per process, so this errs on the high side,
 * as a limit should. */
static long long shim_tree_rss_kb(const struct shim_run *r)
{
    struct shim_proc *v;
    size_t n = shim_list_procs(&v);
    bool *desc = xcalloc(n ? n : 1, sizeof(*desc));
    shim_mark_descendants(v, n, r->self, desc);
    long long kb = 0;
    for (size_t i = 0; i < n; i++)
        if (desc[i])
            kb += shim_proc_rss_kb(v[i].pid);
    free(desc);
    free(v);
    return kb;
}

/* Whether the job is over its memory limit now: for the watchdog its RSS, for a
 * memory cgroup whether the kernel's OOM killer has struck in it. */
static bool shim_mem_over(const struct shim_run *r)
{
    switch (r->mem.method) {
    case SHIM_MEM_WATCHDOG:
        return shim_tree_rss_kb(r) > (long long)r->mem.limit_mb * 1024;
    case SHIM_MEM_V2:
        return shim_cg_read_num(r->mem.dir, "memory.events", "oom_kill") > 0;
    case SHIM_MEM_V1:
        /* "oom_kill N" exists since Linux 4.13; before, only the end can tell. */
        return shim_cg_read_num(r->mem.dir, "memory.oom_control", "oom_kill") > 0;
    case SHIM_MEM_NONE:
        break;
    }
    return false;
}

/* Records that the job was killed for memory, with its one line in the job log. */
static void shim_mem_record_oom(struct shim_run *r)
{
    r->mem.oom = true;
    char line[160];
    int n = snprintf(line, sizeof(line),
                     "gflow-shim: job exceeded its memory limit of %lld MiB (%s)\n",
                     (long long)r->mem.limit_mb, shim_mem_method_names[r->mem.method]);
    if (r->log_fd >= 0 && write(r->log_fd, line, (size_t)n) < 0) {
        /* the exit file still says it */
    }
}

/* The job went over its limit: all of it is SIGKILLed at once (no grace: it would
 * only go on allocating), then again at the re-kill period until nothing is left. A
 * memory cgroup's OOM killer may have taken one process only; the job ends as a
 * whole, whichever method caught it. */
static void shim_mem_exceeded(struct shim_run *r)
{
    shim_mem_record_oom(r);
    struct itimerspec off = {0};
    timerfd_settime(r->mem_tfd, 0, &off, NULL);
    r->term_sent = true;
    r->kill_phase = true;
    shim_arm_timer(r->tfd, SHIM_REKILL_NS / 1e9, SHIM_REKILL_NS);
    shim_signal_tree(r, SIGKILL);
}

/* The memory check period is over: is the job over its limit? */
static void shim_mem_tick(struct shim_run *r)
{
    uint64_t ticks;
    if (read(r->mem_tfd, &ticks, sizeof(ticks)) < 0)
        return; /* spurious wakeup */
    if (!r->mem.oom && shim_mem_over(r))
        shim_mem_exceeded(r);
}

/* Drains the signalfd; a cancel starts the termination. SIGCHLD needs no action here:
 * the loop reaps on every wakeup. */
/* Passes on a signal the daemon queued with SIGUSR1 (step 5). */
static void shim_forward(struct shim_run *r, int value)
{
    int sig = value & 0xff;
    if (sig <= 0 || sig >= NSIG)
        return;
    if (value & SHIM_FORWARD_MAIN_ONLY) {
        for (int i = 0; i < r->ntasks; i++)
            if (!r->tasks[i].reaped)
                kill(r->tasks[i].pid, sig);
        return;
    }
    /* Exactly once to every process: a signal the job handles (a checkpoint request)
     * must not run its handler twice, as the kill-everything path may. */
    bool group_alive = r->ntasks > 0 && !r->tasks[0].reaped;
    if (group_alive)
        kill(-r->pgid, sig);
    struct shim_proc *v;
    size_t n = shim_list_procs(&v);
    bool *desc = xcalloc(n ? n : 1, sizeof(*desc));
    shim_mark_descendants(v, n, r->self, desc);
    for (size_t i = 0; i < n; i++)
        if (desc[i] && !(group_alive && getpgid(v[i].pid) == r->pgid))
            kill(v[i].pid, sig);
    free(desc);
    free(v);
}

static void shim_read_signals(struct shim_run *r)
{
    struct signalfd_siginfo si;
    while (read(r->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP)
            shim_terminate(r);
        else if (si.ssi_signo == SIGUSR1 && si.ssi_code == SI_QUEUE)
            shim_forward(r, si.ssi_int);
    }
}

/* Whether a copy's wait status counts as a failure of the job. */
static bool shim_status_failed(int status)
{
    return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* Records that pid was reaped, if it is a copy of the job. The first copy to fail
 * decides the outcome, and the copies still running are stopped: the job failed. */
static void shim_task_reaped(struct shim_run *r, pid_t pid, int status, const struct rusage *ru)
{
    for (int i = 0; i < r->ntasks; i++) {
        struct shim_task *t = &r->tasks[i];
        if (t->pid != pid || t->reaped)
            continue;
        t->reaped = true;
        t->status = status;
        t->max_rss_kb = ru->ru_maxrss;
        r->nreaped++;
        if (shim_status_failed(status) && r->first_failed < 0) {
            r->first_failed = i;
            if (r->nreaped < r->ntasks)
                shim_terminate(r);
        }
        return;
    }
}

/* Reaps every exited child; the job's copies give the status and rusage. */
static void shim_reap(struct shim_run *r)
{
    for (;;) {
        int st;
        struct rusage ru;
        pid_t pid = wait4(-1, &st, WNOHANG, &ru);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        shim_task_reaped(r, pid, st, &ru);
    }
}

/* After every copy exited: true once nothing is left. Leftovers get SIGTERM
 * and the grace timer. The last descendant to exit is always a child of the shim
 * (its parent would otherwise still be there), so its SIGCHLD wakes the loop. */
static bool shim_leftovers_gone(struct shim_run *r)
{
    /* Every live descendant has a chain of parents that ends at the shim (it is the
     * subreaper), so with no child left there is nothing left at all: the common case
     * needs no scan of /proc. */
    siginfo_t si;
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD)
        return true;
    if (shim_signal_tree(r, 0) == 0)
        return true;
    shim_terminate(r);
    return false;
}

/* Step 5: waits for the job and cleans up after it. 0, or -1 with *err set. */
static int shim_supervise(struct shim_run *r, char **err)
{
    for (;;) {
        shim_reap(r);
        if (r->nreaped == r->ntasks && shim_leftovers_gone(r))
            return 0;
        /* poll skips a negative fd: no memory tick without --memory-limit. */
        struct pollfd p[3] = {{.fd = r->sfd, .events = POLLIN},
                              {.fd = r->tfd, .events = POLLIN},
                              {.fd = r->mem_tfd, .events = POLLIN}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            *err = xasprintf("poll: %s", strerror(errno));
            return -1;
        }
        if (p[0].revents)
            shim_read_signals(r);
        if (p[1].revents)
            shim_timer_fired(r);
        if (p[2].revents)
            shim_mem_tick(r);
    }
}

/* Last resort when the loop itself failed: kill everything until nothing is left. */
static void shim_kill_all_blocking(struct shim_run *r)
{
    while (shim_signal_tree(r, SIGKILL) > 0) {
        int st;
        struct rusage ru;
        pid_t pid = wait4(-1, &st, 0, &ru);
        if (pid > 0) {
            shim_task_reaped(r, pid, st, &ru);
        } else if (pid < 0 && errno == ECHILD) {
            /* What is left is not ours to wait for: its parent is still dying. */
            struct timespec ts = {0, 10L * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

/* ---- main --------------------------------------------------------------------- */

static void shim_exec_free(struct shim_exec *ex)
{
    free(ex->direct_argv);
    if (ex->direct_paths)
        for (char **p = ex->direct_paths; *p; p++)
            free(*p);
    free(ex->direct_paths);
    free(ex->direct_buf);
    if (ex->task_envp) {
        for (int i = 0; i < ex->ntasks; i++) {
            char **env = ex->task_envp[i];
            for (size_t j = ex->task_env_shared; env && env[j]; j++)
                free(env[j]);
            free(env);
        }
        free(ex->task_envp);
    }
    free(ex->envp);
    for (size_t i = 0; i < SHIM_N_CONDA_VARS; i++)
        free(ex->conda_vars[i]);
    free(ex->env_buf);
    free(ex->groups);
    if (ex->log_fd >= 0)
        close(ex->log_fd);
    if (ex->null_fd >= 0)
        close(ex->null_fd);
    if (ex->cgroup_procs_fd >= 0)
        close(ex->cgroup_procs_fd);
    if (ex->memcg_procs_fd >= 0)
        close(ex->memcg_procs_fd);
}

/* Steps 1-4 up to the fork. Returns 0 or -1 with *err set; fills ex. */
static int shim_prepare(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    if (shim_detach(o, err) < 0 || shim_read_env(o, ex, err) < 0 ||
        shim_want_creds(o, &ex->set_creds, err) < 0)
        return -1;
    if (ex->set_creds) {
        ex->uid = (uid_t)o->uid;
        ex->gid = (gid_t)o->gid;
        ex->user = o->user;
        if (shim_prepare_groups(o, ex, err) < 0)
            return -1;
    }
    ex->log_fd = shim_open_log(o, ex->set_creds, err);
    if (ex->log_fd < 0)
        return -1;
    ex->null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (ex->null_fd < 0) {
        *err = xasprintf("cannot open /dev/null: %s", strerror(errno));
        return -1;
    }
    ex->workdir = o->workdir;
    if (shim_prepare_conda(o, ex, err) < 0)
        return -1;
    shim_prepare_argv(o, ex);
    return shim_prepare_task_env(o, ex, err);
}

/* Creates the signalfd and timerfd of the loop. */
static int shim_open_loop_fds(struct shim_run *r, const sigset_t *mask, char **err)
{
    r->sfd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
    r->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (r->sfd < 0 || r->tfd < 0) {
        *err = xasprintf("signalfd/timerfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The copy whose status is the job's: the first that failed, else the first (which,
 * like all, exited 0). */
static const struct shim_task *shim_deciding_task(const struct shim_run *r)
{
    return &r->tasks[r->first_failed >= 0 ? r->first_failed : 0];
}

/* The outcome of a job that ran: exit code or signal, times and peak memory. */
static struct shim_outcome shim_outcome_of(const struct shim_run *r, double started_at,
                                           const char *error)
{
    struct shim_outcome out = {
        .exit_code = -1,
        .signal = 0,
        .started_at = started_at,
        .finished_at = now_wall(),
        .max_rss_kb = 0,
        .error = error,
    };
    for (int i = 0; i < r->ntasks; i++)
        if (r->tasks[i].max_rss_kb > out.max_rss_kb)
            out.max_rss_kb = r->tasks[i].max_rss_kb;
    int status = shim_deciding_task(r)->status;
    if (WIFEXITED(status))
        out.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        out.signal = WTERMSIG(status);
    return out;
}

/* Removes the job's devices cgroup, if it has one. */
static void shim_devcg_end(struct shim_run *r, int64_t job_id)
{
    if (!r->cgroup_dir)
        return;
    shim_cgroup_remove(r->cgroup_dir, job_id);
    free(r->cgroup_dir);
    r->cgroup_dir = NULL;
}

/* With --memory-limit: the memory check timer, and the job log kept open for the line
 * saying the job exceeded its limit. 0, or -1 with *err. */
static int shim_mem_open(struct shim_run *r, const struct shim_exec *ex, char **err)
{
    if (!r->mem.limit_mb)
        return 0;
    r->mem_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    r->log_fd = fcntl(ex->log_fd, F_DUPFD_CLOEXEC, 3);
    if (r->mem_tfd < 0 || r->log_fd < 0) {
        *err = xasprintf("memory limit timerfd/log: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* After the job: a memory cgroup's counters may show an OOM kill the last check did not
 * see; then the cgroup is removed. Without the oom_kill counter (cgroup v1 before
 * Linux 4.13), a job that hit its limit (failcnt) and died of SIGKILL counts as killed
 * for memory. */
static void shim_mem_end(struct shim_run *r, int64_t job_id)
{
    if (!r->mem.dir)
        return;
    if (!r->mem.oom && r->ntasks > 0) {
        bool oom = shim_mem_over(r);
        int st = shim_deciding_task(r)->status;
        if (!oom && r->mem.method == SHIM_MEM_V1 &&
            shim_cg_read_num(r->mem.dir, "memory.oom_control", "oom_kill") < 0)
            oom = shim_cg_read_num(r->mem.dir, "memory.failcnt", NULL) > 0 &&
                  WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
        if (oom)
            shim_mem_record_oom(r);
    }
    shim_cgroup_remove(r->mem.dir, job_id);
    free(r->mem.dir);
    r->mem.dir = NULL;
}

static int shim_main(const struct shim_opts *o, const sigset_t *mask)
{
    struct shim_exec ex = {
        .log_fd = -1, .null_fd = -1, .report_fd = -1, .cgroup_procs_fd = -1, .memcg_procs_fd = -1};
    struct shim_run r = {.self = getpid(),
                         .first_failed = -1,
                         .sfd = -1,
                         .tfd = -1,
                         .report_rd = -1,
                         .kill_grace = o->kill_grace,
                         .mem_tfd = -1,
                         .log_fd = -1};
    char *err = NULL;
    if (shim_prepare(o, &ex, &err) < 0 || shim_open_loop_fds(&r, mask, &err) < 0 ||
        shim_mem_setup(o, &ex, &r.mem, &err) < 0 || shim_mem_open(&r, &ex, &err) < 0) {
        shim_mem_end(&r, o->job_id);
        shim_fail(o, err);
        free(err);
        shim_exec_free(&ex);
        return SHIM_EXIT_FAIL;
    }
    r.cgroup_dir = shim_devcg_setup(o, &ex);
    double started_at = now_wall();
    int wanted = ex.ntasks;
    int started = shim_spawn(&ex, &r, &err);
    shim_exec_free(&ex); /* the job holds its own copies now */
    if (started == 0) {
        shim_devcg_end(&r, o->job_id);
        shim_mem_end(&r, o->job_id);
        shim_fail(o, err);
        free(err);
        if (r.report_rd >= 0)
            close(r.report_rd);
        free(r.tasks);
        return SHIM_EXIT_FAIL;
    }
    /* A job with a copy missing must not run on as if complete. */
    char *spawn_err = started < wanted ? err : NULL;
    err = NULL;
    if (spawn_err)
        shim_terminate(&r);
    if (r.mem_tfd >= 0)
        shim_arm_timer(r.mem_tfd, SHIM_MEM_TICK_NS / 1e9, SHIM_MEM_TICK_NS);
    if (shim_supervise(&r, &err) < 0) {
        fprintf(stderr, "gflow-shim: job %lld: %s\n", (long long)o->job_id, err);
        shim_kill_all_blocking(&r);
    }
    shim_devcg_end(&r, o->job_id); /* nothing of the job is left in it */
    shim_mem_end(&r, o->job_id);
    /* A failure of the shim's own outranks the child's report. */
    char *report = shim_read_report(r.report_rd);
    struct shim_outcome out =
        shim_outcome_of(&r, started_at, spawn_err ? spawn_err : err ? err : report);
    if (spawn_err) {
        out.exit_code = JOB_EXIT_SETUP;
        out.signal = 0;
    }
    out.oom = r.mem.oom;
    out.memory_enforcement = shim_mem_method_names[r.mem.method];
    int rc = 0;
    if (shim_write_exit_file(o, &out) < 0) {
        fprintf(stderr, "gflow-shim: job %lld: cannot write %s: %s\n", (long long)o->job_id,
                o->exit_file, strerror(errno));
        rc = SHIM_EXIT_FAIL;
    }
    close(r.report_rd);
    if (r.log_fd >= 0)
        close(r.log_fd);
    free(report);
    free(err);
    free(spawn_err);
    free(r.tasks);
    return rc;
}

/* Frees what shim_parse_args allocated in o. */
static void shim_opts_free(struct shim_opts *o)
{
    if (o->task_gpus)
        for (char **g = o->task_gpus; *g; g++)
            free(*g);
    free(o->task_gpus);
    free(o->deny_minors);
}

/* gflow-shim --probe-memory: prints how a job's --memory-limit would be held here
 * ("cgroup v2", "cgroup v1" or "watchdog") by trying it with a throw-away cgroup, so that
 * `gflowd status` reports what the shim really does. */
static int shim_probe_memory(void)
{
    struct shim_opts o = {.job_id = 0, .memory_limit_mb = 1, .lock_fd = -1, .env_fd = -1};
    struct shim_exec ex = {.memcg_procs_fd = -1};
    struct shim_memlimit m = {0};
    char *err = NULL;
    if (shim_mem_setup(&o, &ex, &m, &err) < 0) {
        printf("unavailable: %s\n", err);
        free(err);
        return 1;
    }
    printf("%s\n", shim_mem_method_names[m.method]);
    if (ex.memcg_procs_fd >= 0)
        close(ex.memcg_procs_fd);
    if (m.dir)
        shim_cgroup_remove(m.dir, 0);
    free(m.dir);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--probe-memory") == 0)
        return shim_probe_memory();
    sigset_t mask;
    shim_block_signals(&mask);
    shim_ensure_std_fds();
    struct shim_opts o;
    char *err;
    int pr = shim_parse_args(argc, argv, &o, &err);
    if (pr == 1) {
        fputs(shim_usage_text, stdout);
        shim_opts_free(&o);
        return 0;
    }
    if (pr < 0) {
        /* One line on stderr; the exit file too when its path is known, because the
         * daemon waits for it. */
        shim_fail(&o, err);
        free(err);
        shim_opts_free(&o);
        return SHIM_EXIT_USAGE;
    }
    int rc = shim_main(&o, &mask);
    shim_opts_free(&o);
    return rc;
}
