/* gflow-shim: what supervises a job. It outlives daemon restarts and reports the job's
 * outcome in an exit file. As below, one process supervises one job: gflowd starts it for
 * the job, or hands the job to one started ahead (--standby, standby.c), which then
 * serves job after job. gflowd hands the jobs that need none of --tasks, --pty,
 * --memory-limit, --deny-devices to one process that supervises many at once
 * (--supervisor, supervisor.c: what differs for its jobs is said there).
 *
 *   gflow-shim --job-id N (--exit-file PATH | --lock-fd FD) --log PATH --workdir DIR
 *              (--env-file PATH | --env-fd FD) --kill-grace SECS [--lock-fd FD]
 *              [--uid UID --gid GID --user NAME --groups GID,GID,...]
 *              [--tasks N --task-gpus GPU,GPU,... [--task-uuids UUID,...]]
 *              [--deny-devices MINOR|MAJOR:MINOR,...]
 *              [--memory-limit MIB] [--conda-env NAME|PATH] [--umask MODE]
 *              [--log-max-bytes N] [--nofile N] [--pty DIR]
 *              (--command "shell command line" | --script PATH)
 *
 * Protocol with the daemon (its runner is written against exactly this; the definitions
 * both sides share - the exit file's codec, the lock file's lines, the exit codes, the
 * forward flag, the verdict on a job - are in src/core/exitfile.h):
 *
 *  1. The shim leaves the daemon's session (setsid). With --lock-fd, that fd is a file
 *     the daemon flock(LOCK_EX)ed before forking; the shim holds it for its whole life
 *     (close-on-exec, so the job does not) and writes "<pid> <starttime>\n" into it.
 *     A restarted daemon knows the shim is alive while the lock is held, and which
 *     process it is from pid + start time. While it runs it appends "cgroup: <dir>\n"
 *     for the job's own cgroup (step 9), and "forwarded: <sig>\n"
 *     the first time it passes on a signal (step 5), so that a restarted daemon does
 *     not send the --signal warning again. When the shim fails (it exits 1 or 2, step
 *     6), it rewrites the file as the first line and a second one, "error: <reason>\n"
 *     (one line; "lost: <reason>\n" when the job did run and only its exit file could
 *     not be written), which the daemon reads once the lock is free if there is no exit
 *     file. The shim is a child subreaper, so whatever the job leaves behind
 *     (background or setsid'ed children) reparents to it. A daemon that finds the lock
 *     free and no exit file kills what is left of the job itself (the cgroups named in
 *     the lock file, and the processes carrying the marker of step 2 or in the shim's
 *     session) before it frees the job's GPUs.
 *  2. The job's environment is read from --env-file (NUL-separated KEY=VALUE entries),
 *     which is unlinked at once because it may hold secrets, or from the start of the
 *     file open on --env-fd (gflowd passes a memfd: no file to create or remove). The
 *     job gets exactly it, plus GFLOW_SHIM_ID=<shim pid>:<shim start time> (replacing
 *     any there: a job submitted from inside another job inherits that one's), the
 *     marker by which the job's processes are known wherever they go (with
 *     --conda-env, also the GFLOW_* variables of step 4).
 *  3. Job stdout and stderr go to the end of --log (0600, owned by the job user: created
 *     anew, never through a link, as the job user where others may write its directory;
 *     anything already at its name is moved aside, joblog.c; with --log-continue the
 *     job user's own file is appended to); stdin
 *     is /dev/null. With --pty DIR, all three are a pseudo-terminal whose master the
 *     shim reads into the log (a relay as below, without splice) and serves to
 *     `gjob attach` on the socket DIR/sock (attach.c); the job's first process leads a
 *     session of its own with that terminal as its controlling terminal. They are the write end of a pipe that the shim relays into the log
 *     (splice), so that with --log-max-bytes N (> 0) at most N bytes of the job's
 *     output are kept: then one line "gflow-shim: log truncated at N bytes ..." and the
 *     rest is read and dropped (the job is not stopped, and no other file it writes is
 *     limited). Output the log cannot take (its filesystem is full) is dropped too, and
 *     one line says how many bytes were lost once the log can be written again or the
 *     job is over. The log is complete before the exit file is written. The shim's own
 *     lines in that log are only the one-line reason why the job could not be started,
 *     the one line saying that device isolation is unavailable (step 7), the one line
 *     saying that the job exceeded its memory limit (step 8), and the two above.
 *  4. The job runs in its own process group, as --uid/--gid/--user when the shim is
 *     root (with the supplementary groups --groups lists; no credentials are changed
 *     when the shim already has that uid, gid and those groups, up to the primary
 *     one), with --umask if given (else the shim's own umask), with its soft
 *     RLIMIT_NOFILE set to --nofile when given (gflowd passes the limit it was started
 *     with, before it raised its own), in --workdir: `/bin/bash -c COMMAND` (or
 *     COMMAND's words executed directly when that is all bash would do: command.c),
 *     or the script itself when it starts
 *     with "#!", else `/bin/bash SCRIPT`. A job that cannot be started exits 125
 *     (credentials, chdir), 126 (cannot execute) or 127 (not found), and the exit
 *     file's error says why. For --command, bash itself is what cannot find (127) or
 *     execute (126) the command's first word; so the shim looks that word up before
 *     the job starts, as bash will (lookup.c: reserved words, builtins and exported
 *     functions are bash's own; a word with a slash is a file relative to --workdir;
 *     else it is searched along the job's PATH; with the job user's permissions), and
 *     when the deciding copy then exits with the code bash gives for what it found,
 *     the error is "command not found: NAME" or "not executable: NAME". Any other 127
 *     or 126 (`exit 127`, a program that exits so) is the job's own: error null.
 *     With --conda-env NAME (an environment name, "base", or an absolute path to an
 *     environment) the job runs inside that conda environment, activated by the
 *     installation's own shell hook. Before anything starts, the shim finds conda
 *     (a root shim makes this search, and the command's lookup above, with the job
 *     user's effective ids: what that user cannot see is not found) from the job's
 *     environment: $CONDA_EXE (absolute), else $HOME/miniconda3,
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
 *     same for all copies>; NVIDIA_VISIBLE_DEVICES and GFLOW_GPU_UUIDS stay as the env
 *     file says, unless --task-uuids (N entries) gives copy i its i-th entry in both. With
 *     neither option the job is the single process described above, unchanged.
 *  5. SIGTERM, SIGINT or SIGHUP to the shim (cancel, time limit) sends SIGTERM to the
 *     job's process group and to every descendant, then SIGKILL after --kill-grace
 *     seconds, and again every 100 ms until nothing is left. A descendant found under
 *     /proc is signalled through a pidfd, and only if it still has the start time it
 *     was found with, so a recycled pid is never signalled; the process group only
 *     while its leader is unreaped; SIGKILL also goes to the job's v2 cgroup at once
 *     (cgroup.kill, step 9). SIGUSR1 sent with sigqueue/pidfd_send_signal carries a signal to pass on
 *     (Slurm's --signal before the time limit): value = SIG | SHIM_FORWARD_MAIN_ONLY
 *     (0x100, src/core/exitfile.h) for the job's main process(es) only, else to all of
 *     its processes. When a copy of the job fails (non-zero exit or a signal) while
 *     others still run, they get the same treatment. Once every copy has exited,
 *     leftovers get it too (the wait ends early once none are left): nothing the job
 *     started outlives it.
 *  6. The outcome is written into the lock file at byte EXITFILE_RECORD_AT (8192), in
 *     the room the daemon reserved there before starting the shim (pwrite, fdatasync;
 *     the record's error is cut to fit EXITFILE_RESERVE; src/core/exitfile.h). With
 *     --exit-file it goes to that file instead, atomically (temp, fsync, rename, fsync
 *     dir), or, when that fails for want of space (ENOSPC, EDQUOT), in place into the
 *     file already there:
 *       {"job_id": N, "exit_code": int|null, "signal": int|null, "oom": bool,
 *        "started_at": secs, "finished_at": secs, "max_rss_kb": int,
 *        "error": string|null[, "memory_enforcement": string]}
 *     and the shim exits 0. "oom" is true when the job was killed for exceeding
 *     --memory-limit (step 8); "memory_enforcement" is there only with --memory-limit.
 *     With several copies, exit_code/signal are those of the first copy that failed
 *     (exit_code 0 when all exited 0), max_rss_kb the largest of theirs; if a copy
 *     cannot even be forked, the others are stopped and exit_code is 125 with the
 *     error. If the shim fails before the job starts, it still writes an exit file
 *     (exit_code 125, error set) when it can, and exits 1 (2 for usage errors); if the
 *     exit file cannot be written at the end, it exits 1. Whenever it exits 1 or 2, its
 *     reason is one line on stderr and the lock file's error line (step 1).
 *  7. With --deny-devices (daemon.constrain_devices: the minors of the NVIDIA GPUs,
 *     char major 195, that the job was not given, and MAJOR:MINOR of the other MIG
 *     instances' /dev/nvidia-caps nodes), a root shim on a host where the
 *     cgroup v1 devices controller is mounted creates the cgroup gflow/job-<id> below
 *     its own devices cgroup (so a job never escapes a policy the shim is under),
 *     writes "c 195:<minor> rwm" (or "c MAJOR:MINOR rwm") to its devices.deny, and each copy of the job joins it
 *     in the forked child before it changes user and execs: no job process ever runs
 *     outside it, and open() of those nodes fails with EPERM. Once nothing of the job is
 *     left, the shim removes the cgroup. Where that cannot be done (not root, no v1
 *     devices controller - on cgroup v2 device access is controlled by an eBPF program,
 *     which gflow does not load -, or the cgroup cannot be created), the job runs anyway
 *     and its log gets one line "gflow-shim: device isolation unavailable: <reason>".
 *  8. With --memory-limit MIB (> 0), the job - all its processes, all its copies
 *     together - is held to that much memory, by the first of these that works:
 *     - "cgroup v2": the job's own cgroup (step 9) when it is in the unified
 *       hierarchy, if the memory controller is enabled for the shim's children or the
 *       shim can enable it (cgroup.subtree_control; the kernel refuses that while the
 *       shim's cgroup holds processes, unless it is the root); memory.max = MIB MiB,
 *       memory.swap.max = 0, memory.oom.group = 1 where those exist.
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
 *     A v1 cgroup is removed once nothing of the job is left. The method used goes into
 *     the exit file as "memory_enforcement". Should the memory controller be turned
 *     off above a v2 job meanwhile (memory.events gone: a gflowd in a leaf of its
 *     service's cgroup gives the controllers back when it stops), the shim holds the
 *     job to its limit by the watchdog's sum until it is back, then writes memory.max
 *     and the rest again. For tests, GFLOW_SHIM_MEMORY_METHOD=v2,
 *     v1 or watchdog in the shim's environment allows only that method; if it is
 *     unavailable, the job does not start (exit_code 125, the error says why).
 *  9. Every job gets a cgroup of its own where one can be made, which each copy joins
 *     in the forked child before it changes user and execs (a copy that cannot join
 *     exits 125), so that everything the job starts stays in it: gflow-job-<id>.<shim
 *     pid> below the shim's own cgroup in the unified (cgroup2) hierarchy (below the
 *     cgroup GFLOW_SHIM_CGROUP_BASE names instead, when gflowd sets it: the service's
 *     cgroup, gflowd and its shims being in a leaf of it, src/common/cgdelegate.h), else
 *     gflow/job-<id>.<shim pid> below the shim's own cgroup of the v1 freezer
 *     hierarchy. No controller is needed; a non-root shim makes one only where its own
 *     cgroup is writable to it (a delegated subtree). Where none can be made the job
 *     runs without (the marker of step 2 still finds it). Its directory is a
 *     "cgroup:" line of the lock file (step 1); it is removed once nothing of the job
 *     is left. For tests, GFLOW_SHIM_CGROUP=v2, v1 or none in the shim's environment
 *     allows only that kind; if it is unavailable the job does not start (exit_code
 *     125, the error says why).
 * 10. With --prolog CMD (gflowd's [hooks] pre) `/bin/bash -c CMD` runs before the job,
 *     started as a copy of it would be (step 4, in its cgroups of steps 7-9), with
 *     GFLOW_HOOK=pre added, its output into the log after a line "gflow-shim: pre
 *     hook" (hook.c). When it does not exit 0 (or a cancel came meanwhile) the job is
 *     not started: the record has exit_code and signal null and "prolog_error" says
 *     why (one more line in the log too); a hook that could not be set up for a reason
 *     of the job's own (its user, workdir) is the job's failure (exit_code 125, error).
 *     With --epilog CMD the same runs after the job (after a failed pre hook too), with
 *     GFLOW_HOOK=post and GFLOW_JOB_EXIT_CODE (the deciding copy's code, 128+N for
 *     signal N; unset when the job never ran); a cancel then no longer stops anything;
 *     its failure is the record's "epilog_error", and "finished_at" stays the job's own
 *     end. --hook-timeout SECS (default 60, 0: none) stops either: SIGTERM, SIGKILL
 *     after the kill grace, a failure. Whatever a hook leaves running is killed, as a
 *     job's leftovers are (step 5).
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "util.h"

/* Blocks the signals the loop reads from a signalfd. Run first thing, so a cancel
 * that arrives during setup waits in the queue instead of killing the shim. */
static void shim_main_block_signals(sigset_t *mask)
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
static void shim_main_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int n = open("/dev/null", O_RDWR);
        if (n >= 0 && n != fd)
            close(n);
    }
}

/* Writes rec (and frees it): SHIM_EXIT_OK, or SHIM_EXIT_FAIL when it cannot be written. */
static int shim_main_write(const struct shim_opts *o, struct exit_record *rec)
{
    int rc = SHIM_EXIT_OK;
    if (shim_report_exit(o, rec) < 0) {
        int e = errno;
        char *what = shim_report_exit_name(o);
        char *why = xasprintf("cannot write %s: %s", what, strerror(e));
        free(what);
        shim_report_fail(o, why, false);
        free(why);
        rc = SHIM_EXIT_FAIL;
    }
    exit_record_free(rec);
    return rc;
}

/* The post hook of a job that ran (its deciding copy's status as GFLOW_JOB_EXIT_CODE:
 * the exit code, or 128+N for signal N as a shell shows it), or did not (none). Why it
 * failed (to free), or NULL. */
static char *shim_main_post_hook(const struct shim_opts *o, struct shim_exec *ex,
                                 struct shim_run *r)
{
    if (!o->epilog)
        return NULL;
    char code[16];
    const char *exit_code = NULL;
    if (r->ntasks > 0) {
        int st = shim_supervise_deciding(r)->status;
        snprintf(code, sizeof(code), "%d",
                 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0));
        exit_code = code;
    }
    char *why = NULL;
    shim_hook_run(o, ex, r, SHIM_HOOK_POST, exit_code, &why);
    return why;
}

/* The pre hook failed: the job is not started. The post hook still runs (it may undo
 * what the pre hook did), then the record: no exit code, prolog_error (taken). */
static int shim_main_no_job(const struct shim_opts *o, struct shim_exec *ex, struct shim_run *r,
                            char *prolog_error)
{
    char *epilog_error = shim_main_post_hook(o, ex, r);
    shim_prepare_free(ex);
    shim_devices_end(r, o->job_id);
    shim_memlimit_end(r, o->job_id);
    shim_relay_close(&r->relay);
    shim_attach_close(r->attach);
    shim_jobcg_end(&r->jobcg, o->job_id);
    struct exit_record rec;
    exit_record_init(&rec);
    rec.job_id = o->job_id;
    rec.started_at = rec.finished_at = now_wall();
    rec.log_lost_bytes = r->relay.dropped;
    rec.prolog_error = prolog_error;
    rec.epilog_error = epilog_error;
    const char *method = shim_memlimit_method_name(r->mem.method);
    rec.memory_enforcement = method ? xstrdup(method) : NULL;
    return shim_main_write(o, &rec);
}

/* Runs the job from its preparation to the exit file; the shim's exit status. */
static int shim_main(const struct shim_opts *o, const sigset_t *mask)
{
    struct shim_exec ex;
    shim_prepare_init(&ex);
    struct shim_run r;
    shim_supervise_init(&r, o);
    r.ctl_fd = shim_standby_sock();
    char *err = NULL;
    int prepared = shim_prepare(o, &ex, &err);
    if (o->env_fd >= 0)
        close(o->env_fd); /* read: it may hold secrets */
    if (prepared < 0 || shim_relay_open(&r.relay, o, &ex, &err) < 0 ||
        shim_supervise_open(&r, mask, &err) < 0 || shim_jobcg_setup(o, &ex, &r.jobcg, &err) < 0 ||
        shim_memlimit_setup(o, &ex, &r.jobcg, &r.mem, &err) < 0 ||
        shim_memlimit_open(&r, &ex, &err) < 0 ||
        (o->pty_dir && !(r.attach = shim_attach_open(o, &ex, &r.relay, &err)))) {
        shim_relay_close(&r.relay);
        shim_memlimit_end(&r, o->job_id);
        shim_jobcg_end(&r.jobcg, o->job_id);
        shim_report_fail(o, err, true);
        free(err);
        shim_prepare_free(&ex);
        return SHIM_EXIT_FAIL;
    }
    r.cgroup_dir = shim_devices_setup(o, &ex);
    /* [hooks] pre: the job starts only once it has exited 0. A hook that could not even
     * be set up (the job's user, workdir, cgroup) fails as the job would: LaunchFailed. */
    int started = 0;
    int wanted = ex.ntasks;
    double started_at = now_wall();
    if (o->prolog) {
        char *why = NULL;
        int hook = shim_hook_run(o, &ex, &r, SHIM_HOOK_PRE, NULL, &why);
        if (hook == SHIM_HOOK_FAILED)
            return shim_main_no_job(o, &ex, &r, why);
        if (hook == SHIM_HOOK_SETUP)
            err = why;
        else
            started_at = now_wall();
    }
    if (!err)
        started = shim_child_spawn(&ex, &r, &err);
    /* What an exit code of 127 or 126 will mean (lookup.c), kept past ex. */
    int lookup_code = ex.lookup_code;
    char *lookup_error = ex.lookup_error;
    ex.lookup_error = NULL;
    if (o->epilog) {
        /* The post hook runs as the job did: ex stays, less the job's ends of its
         * output, which the relay waits to see closed. */
        if (ex.out_fd >= 0)
            close(ex.out_fd);
        if (ex.pty_slave >= 0)
            close(ex.pty_slave);
        ex.out_fd = ex.pty_slave = -1;
    } else {
        shim_prepare_free(&ex); /* the job holds its own copies now */
    }
    if (started == 0) {
        shim_relay_close(&r.relay);
        shim_attach_close(r.attach);
        shim_devices_end(&r, o->job_id);
        shim_memlimit_end(&r, o->job_id);
        shim_jobcg_end(&r.jobcg, o->job_id);
        shim_report_fail(o, err, true);
        free(err);
        if (r.report_rd >= 0)
            close(r.report_rd);
        free(r.tasks);
        free(lookup_error);
        if (o->epilog)
            shim_prepare_free(&ex);
        return SHIM_EXIT_FAIL;
    }
    /* A job with a copy missing must not run on as if complete. */
    char *spawn_err = started < wanted ? err : NULL;
    err = NULL;
    if (spawn_err)
        shim_supervise_terminate(&r);
    shim_memlimit_start(&r);
    if (shim_supervise_run(&r, &err) < 0) {
        fprintf(stderr, "gflow-shim: job %lld: %s\n", (long long)o->job_id, err);
        shim_supervise_kill_all(&r);
    }
    /* The job's own OOM, before a post hook can add one of its own. */
    shim_memlimit_last_look(&r);
    bool oom = r.mem.oom;
    double finished_at = now_wall();
    char *epilog_error = shim_main_post_hook(o, &ex, &r);
    if (o->epilog)
        shim_prepare_free(&ex);
    shim_devices_end(&r, o->job_id); /* nothing of the job is left in it */
    shim_memlimit_end(&r, o->job_id);
    /* The log is complete before the exit file says the job is over. */
    shim_relay_close(&r.relay);
    shim_attach_close(r.attach);
    shim_jobcg_end(&r.jobcg, o->job_id);
    /* A failure of the shim's own outranks the child's report. */
    char *report = shim_child_report(r.report_rd);
    struct exit_record rec;
    shim_report_record(&r, o, started_at, spawn_err ? spawn_err : err ? err : report, &rec);
    if (o->epilog)
        rec.finished_at = finished_at; /* the job's end, not its post hook's */
    if (spawn_err) {
        rec.exit_code = JOB_EXIT_SETUP;
        rec.signal = 0;
    } else if (!rec.error && lookup_error && rec.exit_code == lookup_code) {
        /* bash could not find or execute the command: the job never started. */
        rec.error = lookup_error;
        lookup_error = NULL;
    }
    rec.oom = oom;
    rec.epilog_error = epilog_error;
    const char *method = shim_memlimit_method_name(r.mem.method);
    rec.memory_enforcement = method ? xstrdup(method) : NULL;
    int rc = shim_main_write(o, &rec);
    close(r.report_rd);
    free(report);
    free(err);
    free(spawn_err);
    free(lookup_error);
    free(r.tasks);
    return rc;
}

/* gflow-shim --probe-memory: prints how a job's --memory-limit would be held here
 * ("cgroup v2", "cgroup v1" or "watchdog") by trying it with a throw-away cgroup, so that
 * `gflowd status` reports what the shim really does. */
static int shim_main_probe_memory(void)
{
    struct shim_opts o = {.job_id = 0, .memory_limit_mb = 1, .lock_fd = -1, .env_fd = -1};
    struct shim_exec ex;
    shim_prepare_init(&ex);
    struct shim_jobcg cg = {0};
    struct shim_memlimit m = {0};
    char *err = NULL;
    int rc = 0;
    if (shim_jobcg_setup(&o, &ex, &cg, &err) < 0 ||
        shim_memlimit_setup(&o, &ex, &cg, &m, &err) < 0) {
        printf("unavailable: %s\n", err);
        free(err);
        rc = 1;
    } else {
        printf("%s\n", shim_memlimit_method_name(m.method));
    }
    if (ex.jobcg_procs_fd >= 0)
        close(ex.jobcg_procs_fd);
    if (ex.memcg_procs_fd >= 0)
        close(ex.memcg_procs_fd);
    if (m.dir && m.own_dir)
        shim_cgroup_remove(m.dir, 0);
    free(m.dir);
    shim_jobcg_end(&cg, 0);
    return rc;
}

/* The shim from its command line on; *job_id: the job's (-1 if unknown). */
static int shim_main_args(int argc, char **argv, int64_t *job_id)
{
    sigset_t mask;
    shim_main_block_signals(&mask);
    shim_main_std_fds();
    struct shim_opts o;
    char *err;
    int pr = shim_opts_parse(argc, argv, &o, &err);
    if (pr == 1) {
        shim_opts_usage();
        shim_opts_free(&o);
        return 0;
    }
    if (pr < 0) {
        /* One line on stderr; the exit file too when its path is known, because the
         * daemon waits for it. */
        shim_report_fail(&o, err, true);
        free(err);
        shim_opts_free(&o);
        return SHIM_EXIT_USAGE;
    }
    int rc = shim_main(&o, &mask);
    *job_id = o.job_id;
    shim_opts_free(&o);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--probe-memory") == 0)
        return shim_main_probe_memory();
    if (argc == 3 && strcmp(argv[1], "--supervisor") == 0) {
        sigset_t mask;
        shim_main_block_signals(&mask);
        shim_main_std_fds();
        return shim_supervisor_main(argv[2], &mask);
    }
    int64_t job_id;
    if (argc < 2 || strcmp(argv[1], "--standby") != 0)
        return shim_main_args(argc, argv, &job_id);
    for (;;) {
        int job_argc = argc;
        char **job_argv = argv;
        if (shim_standby_wait(&job_argc, &job_argv) < 0)
            return 0;
        int rc = shim_main_args(job_argc, job_argv, &job_id);
        free(job_argv); /* the array standby.c made (its strings are static) */
        if (rc != SHIM_EXIT_OK || shim_standby_done(job_id) < 0)
            return rc;
    }
}
