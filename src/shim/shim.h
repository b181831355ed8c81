/* shim.h: what the files of gflow-shim share, private to src/shim: the options, the job
 * as prepared before fork, the supervision state, and the functions each file offers
 * the others (one section per file, named by its prefix). What the shim does, and its
 * protocol with the daemon, is described at the top of main.c; the protocol's shared
 * definitions (exit file, lock file, exit codes) are in src/core/exitfile.h. */
#ifndef GFLOW_SHIM_H
#define GFLOW_SHIM_H

#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pollfd;
struct rusage;
struct shim_attach;

#include "cpumask.h"
#include "exitfile.h"

/* Upper bound of --tasks: far above the GPUs of one machine, low enough that a typo
 * cannot fork thousands of processes. */
#define SHIM_MAX_TASKS 256

/* Once the grace is over, the tree is SIGKILLed again at this period until empty: a
 * process may fork between a /proc scan and the kill. */
#define SHIM_REKILL_NS (100L * 1000 * 1000)

/* The memory watchdog's sampling period; cgroup counters are read at the same period. */
#define SHIM_MEM_TICK_NS (100L * 1000 * 1000)

/* The variables --conda-env adds to the job's environment: the conda executable, the
 * environment, and the job itself (GFLOW_JOB_COMMAND or GFLOW_JOB_SCRIPT). */
#define SHIM_N_CONDA_VARS 3

/* The command line (opts.c). Strings point into argv. */
/* NVIDIA's character device major: /dev/nvidia<N> is 195:N, /dev/nvidiactl 195:255. */
#define SHIM_NVIDIA_MAJOR 195

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
    char **task_uuids; /* --task-uuids: each copy's GFLOW_GPU_UUIDS; NULL if not given */
    int n_task_uuids;
    int *deny_minors; /* --deny-devices: GPU minors the job may not open; NULL if not given */
    int *deny_majors; /* their majors: 195 (a GPU), or a /dev/nvidia-caps node's */
    int n_deny_minors;
    int64_t memory_limit_mb; /* --memory-limit in MiB, 0: none */
    const char *conda_env;   /* --conda-env: name or absolute path, NULL: none */
    int umask;               /* --umask: the job's umask, -1: the shim's own */
    int64_t log_max_bytes;   /* --log-max-bytes: the job log's cap, 0: none */
    int64_t log_keep;        /* --log-keep-on-full: the tail kept on a full disk, 0: none */
    bool log_continue;       /* --log-continue: append to the job user's own log */
    int64_t nofile;          /* --nofile: the job's soft RLIMIT_NOFILE (-1: as inherited) */
    gid_t *groups;           /* --groups: the job user's groups as gflowd resolved them */
    int ngroups;             /* -1: not given (the shim looks them up) */
    const char *pty_dir;     /* --pty: the attach directory; NULL: no terminal */
    bool pin_cpus;           /* --cpus given: the job runs on cpus only */
    struct cpumask cpus;
    const char *prolog;  /* --prolog: the pre hook's shell command (hook.c); NULL: none */
    const char *epilog;  /* --epilog: the post hook's */
    double hook_timeout; /* --hook-timeout: seconds each hook may take (0: no limit) */
};

/* Everything the job child needs, prepared before fork so the child only makes
 * system calls (prepare.c and the files it calls). */
struct shim_exec {
    const char *path;
    const char *argv[4];
    /* A plain command (no shell syntax) is executed without a shell: its words and the
     * candidate paths of its program along the job's PATH, tried in order before the
     * shell as the fallback (builtins such as `exit`, `cd`). */
    char **direct_argv;
    char **direct_paths;
    size_t direct_first; /* direct_paths before this one are not there (lookup.c) */
    char *direct_buf;
    char **envp;
    char *env_buf; /* envp points into it */
    /* With --task-gpus: one environment per copy, envp's entries (pointers into
     * env_buf) minus the task variables, then that copy's own allocated variables from
     * index task_env_shared on. NULL otherwise: every copy gets envp. */
    char ***task_envp;
    size_t task_env_shared;
    int ntasks;
    pid_t pgid; /* the job's process group; 0 until the first copy is forked */
    const char *workdir;
    const char *user;
    int umask; /* -1: keep the shim's */
    bool set_creds;
    uid_t uid;
    gid_t gid;
    gid_t *groups;
    int ngroups;
    int log_fd;
    int out_fd;    /* the job's stdout and stderr: the write end of the relay's pipe */
    int pty_slave; /* --pty: the terminal's slave, the job's stdin, stdout and stderr; -1 */
    int null_fd;
    int report_fd;       /* write end of a close-on-exec pipe: why the job did not start */
    int jobcg_procs_fd;  /* the job's own cgroup's cgroup.procs, -1: none (step 9) */
    int cgroup_procs_fd; /* the job's devices cgroup's cgroup.procs, -1: none (step 7) */
    int memcg_procs_fd;  /* the job's memory cgroup's cgroup.procs, -1: none (step 8) */
    /* The job's marker, EXITFILE_MARKER_VAR=<pid>:<start>, added to its environment. */
    char *marker;
    int64_t nofile; /* --nofile, -1: none */
    /* --cpus: the CPUs every copy of the job is pinned to (sched_setaffinity before
     * exec, which its processes inherit; the job's cgroup v2 cpuset too where it can). */
    bool pin_cpus;
    cpu_set_t cpus;
    /* With --conda-env: the GFLOW_* entries added to envp (step 4), allocated. */
    char *conda_vars[SHIM_N_CONDA_VARS];
    /* With --conda-env: the environment's directory and the installation's base, where
     * the activation puts programs on PATH (allocated; NULL without). */
    char *conda_prefix;
    char *conda_base;
    /* --command (lookup.c): when its first word cannot be found or executed, the exit
     * code bash will return for that (127, 126) and the exit file's error that code then
     * means (allocated); 0 and NULL when any status is the job's own. */
    int lookup_code;
    char *lookup_error;
    /* A supervisor's job: the log, conda, the command and its lookup are prepared in
     * the job's own process after fork (shim_prepare_files, child.c), which passes the
     * log and the lookup's answer back on report_fd; log_fd is /dev/null until then. */
    bool files_in_child;
    const struct shim_opts *opts;
    /* The signals the shim ignores when it forks the job (bit s-1 for signal s; from
     * /proc/self/status), which the job would inherit; all 64 when that is unknown. */
    uint64_t sig_ignored;
};

/* One copy of the job. */
struct shim_task {
    pid_t pid;
    bool reaped;
    int status;      /* from wait4, once reaped */
    long max_rss_kb; /* ru_maxrss: kilobytes on Linux */
};

/* How --memory-limit is enforced (step 8). */
enum shim_mem_method {
    SHIM_MEM_NONE, /* no --memory-limit */
    SHIM_MEM_V2,
    SHIM_MEM_V1,
    SHIM_MEM_WATCHDOG,
};

/* The memory limit of the job and what became of it. */
struct shim_memlimit {
    enum shim_mem_method method;
    int64_t limit_mb; /* 0: none */
    char *dir;        /* the job's memory cgroup (v2, v1); NULL: none */
    bool own_dir;     /* dir was made for the limit (v1), not the job's cgroup (v2) */
    bool oom;         /* the job was killed for memory */
    bool lapsed;      /* v2: the memory controller was turned off above the job (a
                       * gflowd restarting in a leaf): memory.max to write again */
    bool looked;      /* the last look after the job was taken (a post hook's own OOM
                       * is not the job's) */
};

/* The job's output on its way to the log (relay.c). */
struct shim_relay {
    int rd;          /* the pipe's read end; -1 once every writer is gone */
    int log_fd;      /* the job log */
    int null_fd;     /* /dev/null, where dropped output goes; -1 until needed */
    int64_t max;     /* --log-max-bytes, 0: no cap */
    int64_t written; /* the job's bytes in the log */
    bool truncated;  /* the cap was reached and the line saying so written */
    int64_t lost;    /* bytes dropped because the log could not take them, not told yet */
    int lost_errno;  /* why */
    int64_t dropped; /* all the bytes lost so (the exit record's log_lost_bytes) */
    int64_t keep;    /* --log-keep-on-full, 0: never cut */
    bool can_splice; /* false once splice said the log's filesystem cannot */
    /* The supervisor's epoll set watching rd (0: none), left before rd is closed: a job
     * forked meanwhile may hold a copy of rd until it closes it, and a closed fd whose
     * file lives on stays in the set, with this job's pointer. */
    int ep;
    /* --pty: rd is (a copy of) the terminal's master, whose end is EIO, not EOF; every
     * byte read is also handed to the attached clients (attach.c). NULL: a pipe. */
    struct shim_attach *tap;
};

/* The job's own cgroup (step 9). */
struct shim_jobcg {
    char *dir;   /* NULL: none could be made */
    int version; /* 2 or 1; 0 without one */
};

/* What the loop supervises: the job, or a hook before or after it (hook.c). */
enum shim_phase { SHIM_PHASE_JOB, SHIM_PHASE_PRE, SHIM_PHASE_POST };

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
    bool term_sent;   /* the tree got SIGTERM and the grace timer runs */
    bool kill_phase;  /* the grace is over: SIGKILL until nothing is left */
    char *cgroup_dir; /* the job's devices cgroup (step 7), NULL: none */
    struct shim_jobcg jobcg;
    struct shim_memlimit mem;
    int mem_tfd; /* timerfd: the memory check period (-1 without --memory-limit) */
    struct shim_relay relay;
    int lock_fd;                /* --lock-fd (-1: none) */
    bool forwarded;             /* a signal was passed on (and the lock file says so) */
    struct shim_attach *attach; /* --pty: the terminal and its clients; NULL: none */
    int ctl_fd;                 /* a standby's socket (SHIM_CTL_*); -1: none */
    int64_t job_id;             /* what the messages on it name */
    /* A supervisor's job (supervisor.c): its marker entry. Its processes are then its
     * cgroup's, or where it has none, the supervisor's descendants with this marker
     * (the supervisor's other jobs are its descendants too). NULL: the shim's own job. */
    char *marker;
    /* Hooks (hook.c): what the loop runs now; a cancel came (SIGTERM, SIGINT, SIGHUP or
     * gflowd's word), which the post hook outlives; the hook's timeout timerfd (-1: none
     * yet), and whether it fired. */
    enum shim_phase phase;
    bool stop_asked;
    int hook_tfd;
    bool hook_timed_out;
};

/* ---- supervisor.c: gflow-shim --supervisor, one process for many jobs ---- */
/* Set in a supervisor: the socket gflowd reaches it on, which its jobs' lock files name
 * ("supervisor:" line) and their markers then name the job too. NULL in a shim of one job. */
extern const char *shim_supervisor_path;
/* Runs the supervisor: jobs from gflowd's socket on fd 3 (mask: the signals blocked for
 * the signalfd), the control socket in dir. Its exit status. */
int shim_supervisor_main(const char *dir, const sigset_t *mask);

/* ---- standby.c: gflow-shim --standby, started before its jobs ---- */
/* Waits on gflowd's socket (fd 3 at first) for the next job's arguments and fds; then argc
 * and argv are the shim's command line (argv[0] kept; the first call's argv names the
 * room for it) and fds 3 and 4 the lock and the environment. -1: no job came. */
int shim_standby_wait(int *argc, char ***argv);
/* gflowd's socket, on which a standby's job hears SHIM_CTL_TERM and _FORWARD; -1 when
 * this shim is not a standby. */
int shim_standby_sock(void);
/* Job id's record is written: closes the job's fds and tells gflowd. 0, or -1 when the
 * shim is to exit instead (it cannot tell gflowd, or has run its last job). */
int shim_standby_done(int64_t job_id);

/* ---- opts.c: the command line ---- */
/* Parses argv into *o. Returns 0, 1 for --help, or -1 with *err set (caller frees).
 * Parsing goes on after an error so that the exit file and job id are known to
 * report it. */
int shim_opts_parse(int argc, char **argv, struct shim_opts *o, char **err);
/* Frees what shim_opts_parse allocated in o. */
void shim_opts_free(struct shim_opts *o);
/* Prints --help's text on stdout. */
void shim_opts_usage(void);

/* ---- report.c: what the shim tells the daemon (exit file, lock file, stderr) ---- */
/* Step 1: writes the lock file's first line into the daemon's lock fd and makes the fd
 * close-on-exec. in_lock: the exit record goes into the lock file too (no --exit-file),
 * whose room must stay allocated. 0, or -1 with *err. */
int shim_report_lock(int fd, bool in_lock, char **err);
/* This process's start time (/proc/self/stat), read once: the lock line, the marker and
 * the error line all need it. */
int64_t shim_report_self_start(void);
/* Appends "cgroup: <dir>" to the lock file (best effort: without it a daemon that
 * finds the shim gone looks for the job's processes by their marker alone). */
void shim_report_lock_cgroup(const struct shim_opts *o, const char *dir);
/* Appends "forwarded: <sig>" to the lock file, the first time only. */
void shim_report_lock_forwarded(int lock_fd, int sig);
/* Writes rec into the lock file's room for it (src/core/exitfile.h); with --exit-file,
 * to that file atomically, else (no space) into its reserved room. 0 or -1 with errno
 * set. */
int shim_report_exit(const struct shim_opts *o, const struct exit_record *rec);
/* Where the record goes, in words, for messages (caller frees). */
char *shim_report_exit_name(const struct shim_opts *o);
/* Reports a failure of the shim's own, which makes it exit SHIM_EXIT_FAIL or
 * SHIM_EXIT_USAGE: one line on stderr, and msg as the lock file's error line. With
 * before_job, also the exit file (exit_code JOB_EXIT_SETUP with msg as the error). */
void shim_report_fail(const struct shim_opts *o, const char *msg, bool before_job);
/* The exit record of a job that ran: exit code or signal of the deciding copy, times,
 * peak memory, error (copied; may be NULL). */
void shim_report_record(const struct shim_run *r, const struct shim_opts *o, double started_at,
                        const char *error, struct exit_record *rec);

/* ---- prepare.c: steps 1-4 up to the fork ---- */
/* Leaves the session, writes the lock, reads the environment, opens the log, resolves
 * the job user and prepares conda, argv, the command's lookup and the copies'
 * environments. 0 or -1 with *err; ex holds what it did either way (shim_prepare_free). */
int shim_prepare(const struct shim_opts *o, struct shim_exec *ex, char **err);
/* The filesystem calls made on the job user's behalf (the log, conda, the script, the
 * command's lookup): in shim_prepare for a shim of one job, in the job's own process
 * after fork for a supervisor's (child.c). 0 or -1 with *err. */
int shim_prepare_files(const struct shim_opts *o, struct shim_exec *ex, char **err);
/* The ids a root shim had before shim_prepare_as_user, to return to. */
struct shim_prepare_ids {
    gid_t egid;
    gid_t *groups;
    int ngroups;
    bool switched;
};
/* A root shim takes the job user's effective gid, groups and uid (real and saved uid
 * stay 0) for checks made as the job user; nothing without set_creds. 0 or -1 with
 * *err (then shim_prepare_as_root still puts back whatever changed). */
int shim_prepare_as_user(const struct shim_exec *ex, struct shim_prepare_ids *saved, char **err);
/* Back to the shim's own ids. 0, or -1 (with *err when err is not NULL). */
int shim_prepare_as_root(struct shim_prepare_ids *saved, char **err);

/* ---- hook.c: the admin's pre and post hooks (--prolog, --epilog) ---- */
enum shim_hook { SHIM_HOOK_PRE, SHIM_HOOK_POST };
/* What shim_hook_run says: the hook exited 0; it failed (*why: how); it could not be
 * started for a reason that is the job's own set-up's (*why: its user, workdir,
 * cgroup...: the job would fail the same way). */
#define SHIM_HOOK_OK 0
#define SHIM_HOOK_FAILED (-1)
#define SHIM_HOOK_SETUP (-2)
/* Runs the pre or post hook as the job runs (ex: the job as prepared, its fds still
 * open), its output into the log, under r's loop with the job's own tasks put aside.
 * exit_code: GFLOW_JOB_EXIT_CODE's value for the post hook of a job that ran (NULL:
 * none). A SHIM_HOOK_* with *why set (caller frees) unless OK; *why also goes to the
 * log. */
int shim_hook_run(const struct shim_opts *o, struct shim_exec *ex, struct shim_run *r,
                  enum shim_hook which, const char *exit_code, char **why);

/* ---- joblog.c: the job's log (step 3) ---- */
/* Opens o->log_path relative to its directory, never through a link, created anew
 * (O_EXCL) as the job user where others may write the directory, whatever was there
 * moved aside (NAME.replaced-TIME); with --log-continue, the job user's own plain file
 * is appended to. The fd at the log's end, or -1 with *err. */
int shim_joblog_open(const struct shim_opts *o, struct shim_exec *ex, char **err);

/* An empty ex (no fds), for shim_prepare. */
void shim_prepare_init(struct shim_exec *ex);
/* Frees and closes what shim_prepare put in ex. */
void shim_prepare_free(struct shim_exec *ex);

/* ---- env.c: the job's environment ---- */
/* Step 2: reads the NUL-separated environment into ex->envp (from --env-file, which is
 * unlinked, or --env-fd, which is closed). 0 or -1 with *err. */
int shim_env_read(const struct shim_opts *o, struct shim_exec *ex, char **err);
/* The value of name in envp, or NULL. */
const char *shim_env_get(char *const *envp, const char *name);
/* Replaces ex->envp by the job's environment without the variables of vars, then
 * vars ("KEY=value" entries that ex keeps). */
void shim_env_set(struct shim_exec *ex, char *const *vars, size_t nvars);
/* With --task-gpus: builds every copy's environment (step 4). 0 or -1 with *err. */
int shim_env_tasks(const struct shim_opts *o, struct shim_exec *ex, char **err);

/* ---- conda.c: --conda-env ---- */
/* Finds conda and the environment before anything starts and adds the GFLOW_* variables
 * the job's shell reads. 0, or -1 with *err, which also goes to the job log. */
int shim_conda_prepare(const struct shim_opts *o, struct shim_exec *ex, char **err);
/* The `bash -c` text that activates the environment and then runs the job. */
const char *shim_conda_text(const struct shim_opts *o);

/* ---- command.c: what the job executes ---- */
/* True when the file starts with "#!", i.e. the kernel can run it directly. */
bool shim_command_has_shebang(const char *path);
/* Step 4 (before fork): the job's program and arguments. */
void shim_command_prepare(const struct shim_opts *o, struct shim_exec *ex);

/* ---- lookup.c: whether a --command's first word can be found and executed ---- */
/* Before fork: takes the command's first word apart as bash would and looks it up as
 * bash will (builtins, functions, the job's PATH from its workdir, the job user's
 * permissions), setting ex->lookup_code and ex->lookup_error when bash will not be
 * able to run it. */
void shim_lookup_prepare(const struct shim_opts *o, struct shim_exec *ex);
/* Whether word is one of bash's reserved words or builtins (bash 5.2). */
bool shim_lookup_is_bash_word(const char *word);

/* ---- cgroup.c: cgroup hierarchies and files ---- */
/* Finds a cgroup hierarchy in /proc/self/mountinfo: v1 with controller, or the unified
 * one (cgroup2) when controller is NULL. 0 with its mount point and the cgroup its root
 * shows (to free), or -1 if none. */
int shim_cgroup_mount(const char *controller, char **mount_point, char **mount_root);
/* Reads the unified hierarchy's mount once for the rest of this process (a standby does
 * it while it waits, off the job's start). */
void shim_cgroup_mount_warm(void);
/* The directory of the shim's own cgroup (of controller, NULL: unified) under the mount
 * point (to free). */
char *shim_cgroup_base(const char *controller, const char *mount_point, const char *mount_root);
/* Writes value to dir/file. 0, or -1 with errno set. */
int shim_cgroup_write(const char *dir, const char *file, const char *value);
/* Opens dir/cgroup.procs for writing: 0 with *procs_fd, or -1 with *why. */
int shim_cgroup_open_procs(const char *dir, int *procs_fd, char **why);
/* The number in dir/file (the whole file, or after "key " on its line); -1 if missing. */
long long shim_cgroup_read_num(const char *dir, const char *file, const char *key);
/* After the job: removes one of its cgroups (retrying while it is busy). */
void shim_cgroup_remove(const char *dir, int64_t job_id);

/* ---- jobcg.c: the job's own cgroup (step 9) ---- */
/* Makes the job's cgroup (v2, else v1; none where neither can be made) and says so in
 * the lock file. 0, or -1 with *err when the kind GFLOW_SHIM_CGROUP forces is
 * unavailable. */
int shim_jobcg_setup(const struct shim_opts *o, struct shim_exec *ex, struct shim_jobcg *cg,
                     char **err);
/* Removes the job's cgroup, if it has one. */
void shim_jobcg_end(struct shim_jobcg *cg, int64_t job_id);

/* ---- cpus.c: --cpus, the CPUs the job is pinned to ---- */
/* Before fork: the CPUs as the child's sched_setaffinity takes them, and cpuset.cpus in
 * the job's cgroup v2 where the cpuset controller can be enabled for it (else the
 * affinity alone holds the job: a process of it may widen its own affinity). */
void shim_cpus_setup(const struct shim_opts *o, struct shim_exec *ex, const struct shim_jobcg *cg);

/* ---- devices.c: --deny-devices (step 7) ---- */
/* Sets up the job's devices cgroup and returns its directory; when that cannot be
 * done, says so in the job's log and on stderr and returns NULL. */
char *shim_devices_setup(const struct shim_opts *o, struct shim_exec *ex);
/* Removes the job's devices cgroup, if it has one. */
void shim_devices_end(struct shim_run *r, int64_t job_id);

/* ---- memlimit.c: --memory-limit (step 8) ---- */
/* Picks how the limit is enforced: the job's own cgroup when it is v2 and can take the
 * memory controller, else a v1 memory cgroup made for it, else the watchdog. 0, or -1
 * with *err when the method forced by GFLOW_SHIM_MEMORY_METHOD is unavailable. */
int shim_memlimit_setup(const struct shim_opts *o, struct shim_exec *ex,
                        const struct shim_jobcg *cg, struct shim_memlimit *m, char **err);
/* The method's name for the exit file and the log ("cgroup v2", ...; NULL for none). */
const char *shim_memlimit_method_name(enum shim_mem_method method);
/* The memory check timer. 0, or -1 with *err. */
int shim_memlimit_open(struct shim_run *r, const struct shim_exec *ex, char **err);
/* Arms the memory check timer once the job runs. */
void shim_memlimit_start(struct shim_run *r);
/* The memory check period is over: is the job over its limit? */
void shim_memlimit_tick(struct shim_run *r);
/* Once the job is over: a last look at the OOM counters (once; before a post hook). */
void shim_memlimit_last_look(struct shim_run *r);
/* After the job: the last look if not taken yet, then the cgroup is removed. */
void shim_memlimit_end(struct shim_run *r, int64_t job_id);

/* ---- proctree.c: the job's processes under /proc ---- */
/* A process found under /proc. */
struct shim_proc {
    pid_t pid;
    pid_t ppid;
    int64_t start; /* its start time: with the pid, it names the process for good */
};
/* Every live descendant of root (to free; zombies included), sorted by pid. */
size_t shim_proctree_descendants(pid_t root, struct shim_proc **out);
/* The job's processes (to free; zombies included): the shim's descendants, or for a
 * supervisor's job those of its cgroup or with its marker (struct shim_run). */
size_t shim_proctree_of_job(const struct shim_run *r, struct shim_proc **out);
/* Sends sig (0: none) to the job: its process group while the group's leader is
 * unreaped, every descendant of the shim through a pidfd (never a recycled pid), and
 * with SIGKILL its v2 cgroup at once (cgroup.kill). Returns how many descendants exist,
 * zombies included. */
size_t shim_proctree_signal(struct shim_run *r, int sig);
/* The summed RSS (kB) of every descendant of root. */
long long shim_proctree_rss_kb(pid_t root);

/* ---- relay.c: the job's output into the log, capped (step 3) ---- */
/* Before fork: the pipe the job writes to (its write end in ex->out_fd, which the copies
 * get as stdout and stderr) and the relay's own copy of the log. 0, or -1 with *err. */
int shim_relay_open(struct shim_relay *rl, const struct shim_opts *o, struct shim_exec *ex,
                    char **err);
/* Moves what the pipe holds into the log (or drops it past the cap, or when the log
 * cannot take it) without waiting; closes the read end once every writer is gone. */
void shim_relay_pump(struct shim_relay *rl);
/* A line of the shim's own into the log, after the job's output that came before it. */
void shim_relay_line(struct shim_relay *rl, const char *line);
/* The same, on a line of its own: after a newline when the log does not end with one. */
void shim_relay_line_start(struct shim_relay *rl, const char *line);
/* After the job: moves what is left, says how much was lost if any, closes its fds. */
void shim_relay_close(struct shim_relay *rl);

/* ---- attach.c: --pty, the job's terminal and the clients of `gjob attach` ---- */
/* Before fork: opens the pseudo-terminal (its slave, owned by the job user, in
 * ex->pty_slave), makes the attach directory and listens on its socket. The relay reads
 * the master (a copy in rl->rd). NULL with *err when that cannot be done. */
struct shim_attach *shim_attach_open(const struct shim_opts *o, struct shim_exec *ex,
                                     struct shim_relay *rl, char **err);
/* How many pollfds the attach needs now, and fills them into p. */
int shim_attach_pollfds(struct shim_attach *a, struct pollfd *p, int room);
/* Handles what poll found on the fds shim_attach_pollfds gave. */
void shim_attach_events(struct shim_attach *a, const struct pollfd *p, int n);
/* The job's terminal output, from the relay: to every client, and to the replay ring. */
void shim_attach_output(struct shim_attach *a, const uint8_t *buf, size_t n);
/* After the job: END to every client (best effort), then the socket, its directory and
 * the terminal are gone. */
void shim_attach_close(struct shim_attach *a);

/* ---- child.c: the job's copies, from fork to exec ---- */
/* Step 4: forks the copies of the job into r->tasks, all in the first one's process
 * group. Returns how many were forked; when not all, *err says why. */
int shim_child_spawn(struct shim_exec *ex, struct shim_run *r, char **err);
/* The first copy's reason for not starting, if any (to free), once the pipe is at EOF. */
char *shim_child_report(int fd);

/* ---- supervise.c: the loop (step 5) ---- */
/* The state of o's job before anything is started (no fds, no copies). */
void shim_supervise_init(struct shim_run *r, const struct shim_opts *o);
/* Creates the signalfd and timerfd of the loop. 0, or -1 with *err. */
int shim_supervise_open(struct shim_run *r, const sigset_t *mask, char **err);
/* Arms a timerfd: first expiry after `first` seconds, then every interval_ns (0: once). */
void shim_supervise_arm(int tfd, double first, long interval_ns);
/* Disarms a timerfd (-1: none) and drops an expiry not read yet. */
void shim_supervise_disarm(int tfd);
/* SIGTERM to everything and start the grace period (once). */
void shim_supervise_terminate(struct shim_run *r);
/* SIGKILL to everything now, and again at the re-kill period until nothing is left. */
void shim_supervise_kill_now(struct shim_run *r);
/* Waits for the job and cleans up after it. 0, or -1 with *err set. */
int shim_supervise_run(struct shim_run *r, char **err);
/* Last resort when the loop itself failed: kill everything until nothing is left. */
void shim_supervise_kill_all(struct shim_run *r);
/* The grace or re-kill timer (r->tfd) is readable. */
void shim_supervise_timer_fired(struct shim_run *r);
/* Passes on a signal (value: SIG | SHIM_FORWARD_MAIN_ONLY) to the job. */
void shim_supervise_forward(struct shim_run *r, int value);
/* Records that pid was reaped (status, rusage), if it is a copy of the job. */
void shim_supervise_reaped(struct shim_run *r, pid_t pid, int status, const struct rusage *ru);
/* The copy whose status is the job's: the first that failed, else the first. */
const struct shim_task *shim_supervise_deciding(const struct shim_run *r);

#endif
