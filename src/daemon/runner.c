/* runner: shim launch, exit files, re-adoption and ending jobs (see runner.h). */
#include "runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "disk.h"
#include "exitfile.h"
#include "files.h"
#include "gpu.h"
#include "jobenv.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "procinfo.h"
#include "store.h"
#include "util.h"

/* Per running job, in job->runtime. */
struct run {
    struct gflowd *d;
    int64_t job_id;
    pid_t pid;
    int64_t start;  /* the shim's /proc start time */
    int pidfd;      /* -1 while an adopted shim's pid is not known yet */
    bool our_child; /* forked by this daemon, so we reap it */
    struct loop_timer *limit_timer;
    struct loop_timer *warn_timer;  /* --signal: SECS before the time limit */
    struct loop_timer *retry_timer; /* adoption waiting for the shim to write its pid */
};

static int sys_pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int sys_pidfd_send_signal(int pidfd, int sig)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* Queues SIGUSR1 with value to the shim (sigqueue through the pidfd): the shim
 * forwards signal value & 0xff to the job, to its main processes only when
 * SHIM_FORWARD_MAIN_ONLY is set (exitfile.h). */
static int sys_pidfd_queue(int pidfd, int value)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    si.si_signo = SIGUSR1;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_int = value;
    return (int)syscall(SYS_pidfd_send_signal, pidfd, SIGUSR1, &si, 0);
}

static char *job_file(const char *dir, int64_t id, const char *suffix)
{
    return xasprintf("%s/%lld%s", dir, (long long)id, suffix);
}

/* A write failed for want of space (not the job's fault: it may start later). */
static bool is_no_space(int e)
{
    return e == ENOSPC || e == EDQUOT;
}

char *runner_log_path(const struct gflowd *d, int64_t job_id)
{
    return job_file(d->paths.log_dir, job_id, ".log");
}

int runner_init(const struct gflowd *d, char **err)
{
    /* A system daemon's jobs run as their users, who must reach their own script in
     * run/; logs and exit files are read only by the daemon. */
    unsigned run_mode = d->system ? 0711 : 0700;
    const char *dirs[] = {d->paths.data_dir, d->paths.log_dir, d->paths.exit_dir};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        if (mkdir_p(dirs[i], 0700) < 0) {
            *err = xasprintf("cannot create %s: %s", dirs[i], strerror(errno));
            return -1;
        }
    }
    if (d->system)
        chmod(d->paths.data_dir, 0711);
    if (mkdir_p(d->paths.run_dir, run_mode) < 0 || chmod(d->paths.run_dir, run_mode) < 0) {
        *err = xasprintf("cannot create %s: %s", d->paths.run_dir, strerror(errno));
        return -1;
    }
    return 0;
}

static struct run *run_new(struct gflowd *d, struct job *j)
{
    struct run *r = xcalloc(1, sizeof(*r));
    r->d = d;
    r->job_id = j->id;
    r->pidfd = -1;
    j->runtime = r;
    return r;
}

static void run_free(struct job *j)
{
    struct run *r = j->runtime;
    if (!r)
        return;
    if (r->pidfd >= 0) {
        loop_del_fd(r->pidfd);
        close(r->pidfd);
    }
    loop_cancel_timer(r->limit_timer);
    loop_cancel_timer(r->warn_timer);
    loop_cancel_timer(r->retry_timer);
    free(r);
    j->runtime = NULL;
}

static void cleanup_files_after_commit(struct gflowd *d, int64_t id)
{
    jobs_after_commit_unlink(d->jobs, job_file(d->paths.exit_dir, id, ".json"));
    jobs_after_commit_unlink(d->jobs, job_file(d->paths.run_dir, id, ".lock"));
    jobs_after_commit_unlink(d->jobs, job_file(d->paths.run_dir, id, ".script"));
}

/* Ends j in a terminal state and schedules its files for removal. */
static void finish(struct gflowd *d, struct job *j, enum job_state state, enum job_reason reason,
                   const char *detail)
{
    run_free(j);
    /* Its GPUs are free now: re-read their memory and processes for the next pass
     * rather than waiting for the poll (the state change marks the pass due). */
    if (j->gpu_mask) {
        size_t n;
        struct job **running = jobs_running(d->jobs, &n);
        gpu_refresh(d->gpus, running, n);
    }
    if (jobs_set_state(d->jobs, j, state, reason, 0, detail) < 0)
        log_error("job %lld: refused transition to %s", (long long)j->id, job_state_short(state));
    cleanup_files_after_commit(d, j->id);
    char *why = job_reason_string(j);
    log_info("job %lld ended: %s%s%s", (long long)j->id, job_state_short(state), why ? " " : "",
             why ? why : "");
    free(why);
}

/* Ends j as the verdict says, with what the exit record tells of the run. */
static void apply_verdict(struct gflowd *d, struct job *j, struct exit_verdict *v)
{
    finish(d, j, v->state, v->reason, v->detail);
    exit_verdict_free(v);
}

/* Reads the shim's exit file into j and ends it. Returns -1 if there is none. */
static int apply_exit_file(struct gflowd *d, struct job *j)
{
    char *path = job_file(d->paths.exit_dir, j->id, ".json");
    size_t len;
    char *text = read_file(path, &len);
    free(path);
    struct exit_record rec;
    if (!text || exit_record_decode(text, len, &rec) < 0) {
        free(text);
        return -1;
    }
    free(text);
    j->exit_code = rec.exit_code;
    j->signal = rec.signal;
    j->oom = rec.oom;
    if (rec.finished_at > 0)
        j->end_time = rec.finished_at;
    if (rec.max_rss_kb > 0)
        j->max_rss_kb = rec.max_rss_kb;
    struct exit_verdict v = exit_verdict_of(&rec, j->end_request);
    exit_record_free(&rec);
    apply_verdict(d, j, &v);
    return 0;
}

/* What job id's lock file says (a failing shim leaves its reason there). */
static void read_lock(const struct gflowd *d, int64_t id, struct exit_lock *lock)
{
    char *path = job_file(d->paths.run_dir, id, ".lock");
    size_t len = 0;
    char *text = read_file(path, &len);
    free(path);
    exitfile_lock_parse(text, len, lock);
    free(text);
}

/* The shim is gone: collect what it reported, in its exit file or else its lock file. */
static void shim_ended(struct gflowd *d, struct job *j, int wait_status, bool have_status)
{
    if (apply_exit_file(d, j) == 0)
        return;
    enum shim_end how = SHIM_END_UNKNOWN;
    int value = 0;
    if (have_status && WIFEXITED(wait_status)) {
        how = SHIM_END_EXITED;
        value = WEXITSTATUS(wait_status);
    } else if (have_status && WIFSIGNALED(wait_status)) {
        how = SHIM_END_SIGNALED;
        value = WTERMSIG(wait_status);
    }
    struct exit_lock lock;
    read_lock(d, j->id, &lock);
    struct exit_verdict v = exit_verdict_lost(how, value, &lock, j->end_request);
    exitfile_lock_free(&lock);
    apply_verdict(d, j, &v);
}

/* The shim's pidfd is readable: it has exited. */
static void pidfd_cb(int fd, uint32_t events, void *arg)
{
    struct run *r = arg;
    struct job *j = jobs_get(r->d->jobs, r->job_id);
    if (!j || j->runtime != r) {
        loop_del_fd(fd);
        return;
    }
    int status = 0;
    bool have_status = false;
    if (r->our_child) {
        pid_t w = waitpid(r->pid, &status, WNOHANG);
        if (w == 0)
            return; /* not yet reapable; epoll will tell again */
        have_status = w == r->pid;
    }
    shim_ended(r->d, j, status, have_status);
}

/* The job of a timer's run, if it still runs under that run. */
static struct job *timer_job(struct run *r)
{
    struct job *j = jobs_get(r->d->jobs, r->job_id);
    return j && j->state == JOB_RUNNING && j->runtime == r ? j : NULL;
}

static void limit_cb(void *arg)
{
    struct run *r = arg;
    r->limit_timer = NULL;
    struct job *j = timer_job(r);
    if (!j || j->end_request != JOB_END_NONE)
        return;
    log_info("job %lld reached its time limit", (long long)j->id);
    runner_request_end(r->d, j, JOB_END_TIMEOUT);
}

static void warn_cb(void *arg)
{
    struct run *r = arg;
    r->warn_timer = NULL;
    struct job *j = timer_job(r);
    if (!j || j->end_request != JOB_END_NONE || r->pidfd < 0)
        return;
    int value = j->warn_signal | (j->warn_main_only ? SHIM_FORWARD_MAIN_ONLY : 0);
    if (sys_pidfd_queue(r->pidfd, value) < 0) {
        if (errno != ESRCH)
            log_warn("job %lld: queueing %s for the job: %m", (long long)j->id,
                     job_signal_name(j->warn_signal));
        return;
    }
    log_info("job %lld: sent %s%s, %lld s before its time limit", (long long)j->id,
             job_signal_name(j->warn_signal), j->warn_main_only ? " (main process)" : "",
             (long long)j->warn_secs);
}

/* The time limit's timer and, with --signal, the warning's (SECS before the limit).
 * When a job is re-adopted after a restart, its warning is armed again unless its
 * moment came before this daemon started: then the previous daemon sent it (or none
 * ran at that moment, and it is not sent late: a job is signalled at most once). */
static void arm_time_limit(struct job *j, struct run *r)
{
    if (j->time_limit <= 0)
        return;
    double now = now_wall();
    double delay = j->start_time + (double)j->time_limit - now;
    r->limit_timer = loop_add_timer(delay, limit_cb, r);
    if (j->warn_signal > 0 && !r->warn_timer) {
        double at = j->start_time + (double)j->time_limit - (double)j->warn_secs;
        if (at >= r->d->started_at || r->our_child)
            r->warn_timer = loop_add_timer(at > now ? at - now : 0, warn_cb, r);
    }
}

/* Starts watching the shim through a pidfd. 0, or -1 if it is already gone. */
static int watch_shim(struct run *r, pid_t pid)
{
    r->pid = pid;
    r->pidfd = sys_pidfd_open(pid);
    if (r->pidfd < 0)
        return -1;
    fcntl(r->pidfd, F_SETFD, FD_CLOEXEC);
    if (loop_add_fd(r->pidfd, EPOLLIN, pidfd_cb, r) < 0) {
        close(r->pidfd);
        r->pidfd = -1;
        return -1;
    }
    return 0;
}

/* ---- launch ---- */

/* The device minor of the GPU with NVML index i: the node /dev/nvidia<i> when it is an
 * NVIDIA character device (major 195), else i. The driver numbers its device nodes
 * in the order it probed the GPUs, and NVML indices follow the same (PCI) order, so
 * index i is /dev/nvidia<i> with minor i on the usual setups; the node is read because
 * that is what the job would open. */
static int gpu_minor(int index)
{
    char path[32];
    struct stat st;
    snprintf(path, sizeof(path), "/dev/nvidia%d", index);
    if (stat(path, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 195)
        return (int)minor(st.st_rdev);
    return index;
}

/* For daemon.constrain_devices: the minors of the GPUs the job was not given, "1,3",
 * as the shim's --deny-devices wants them; NULL when it was given them all. */
static char *denied_gpu_minors(const struct gflowd *d, const struct job *j)
{
    const struct gpu_set *set = gpu_current(d->gpus);
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < set->n_gpus; i++) {
        int index = set->gpus[i].index;
        if (index >= 0 && index < GPUINFO_MAX_GPUS && !(j->gpu_mask & (1ULL << index)))
            strbuf_addf(&sb, "%s%d", sb.len ? "," : "", gpu_minor(index));
    }
    if (sb.len == 0) {
        strbuf_free(&sb);
        return NULL;
    }
    return strbuf_detach(&sb);
}

/* Moves fd above the low numbers the shim's fds are placed on (3, 4). */
static int high_fd(int fd)
{
    if (fd < 0 || fd >= 10)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    return moved;
}

/* The shim's command line up to what the job runs (gflow-shim --help; the protocol is
 * in src/shim). */
static void shim_args(const struct gflowd *d, const struct job *j, const struct job *full,
                      const struct passwd *pw, const char *uuids, struct strvec *argv)
{
    strvec_push(argv, d->shim_path);
    strvec_push(argv, "--job-id");
    strvec_pushf(argv, "%lld", (long long)j->id);
    strvec_push(argv, "--exit-file");
    strvec_pushf(argv, "%s/%lld.json", d->paths.exit_dir, (long long)j->id);
    strvec_push(argv, "--log");
    strvec_pushf(argv, "%s/%lld.log", d->paths.log_dir, (long long)j->id);
    if (d->cfg.max_log_bytes > 0) {
        strvec_push(argv, "--log-max-bytes");
        strvec_pushf(argv, "%lld", (long long)d->cfg.max_log_bytes);
    }
    strvec_push(argv, "--workdir");
    strvec_push(argv, full->workdir ? full->workdir : "/");
    strvec_push(argv, "--kill-grace");
    strvec_pushf(argv, "%lld", (long long)d->cfg.kill_grace_secs);
    strvec_push(argv, "--lock-fd");
    strvec_push(argv, "3");
    strvec_push(argv, "--env-fd");
    strvec_push(argv, "4");
    if (pw) {
        strvec_push(argv, "--uid");
        strvec_pushf(argv, "%u", (unsigned)pw->pw_uid);
        strvec_push(argv, "--gid");
        strvec_pushf(argv, "%u", (unsigned)pw->pw_gid);
        strvec_push(argv, "--user");
        strvec_push(argv, pw->pw_name);
    }
    if (j->gpus_per_task && j->gpus > 1) { /* one copy of the command per GPU */
        strvec_push(argv, "--tasks");
        strvec_pushf(argv, "%d", j->gpus);
        strvec_push(argv, "--task-gpus");
        char *cuda =
            jobenv_cuda_devices(j->gpu_mask, uuids, strcmp(d->cfg.gpu_id_format, "uuid") == 0);
        strvec_push(argv, cuda);
        free(cuda);
    }
    char *deny = d->cfg.constrain_devices ? denied_gpu_minors(d, j) : NULL;
    if (deny) {
        strvec_push(argv, "--deny-devices");
        strvec_push(argv, deny);
        free(deny);
    }
    if (j->memory_mb > 0) { /* held to it: cgroup v2, else v1, else a watchdog (the shim) */
        strvec_push(argv, "--memory-limit");
        strvec_pushf(argv, "%lld", (long long)j->memory_mb);
    }
    /* The submitter's umask; a job stored without one keeps gflowd's own, 0077. */
    strvec_push(argv, "--umask");
    strvec_pushf(argv, "%04o", j->umask >= 0 ? (unsigned)j->umask : 077u);
    if (j->conda_env) { /* activated through the installation's shell hook (the shim) */
        strvec_push(argv, "--conda-env");
        strvec_push(argv, j->conda_env);
    }
}

/* The job's environment in a memfd (no file on disk to create and remove), and what
 * it runs: the command, or the script written to run/<id>.script. Returns the memfd,
 * or -1 with *err. */
static int prepare_inputs(const struct gflowd *d, const struct job *full, const struct passwd *pw,
                          const char *uuids, struct strvec *argv, char **err, bool *no_space)
{
    struct strbuf env;
    strbuf_init(&env);
    struct jobenv_input in = {
        .uuids = uuids,
        .uuid_format = strcmp(d->cfg.gpu_id_format, "uuid") == 0,
        .user = pw ? pw->pw_name : NULL,
        .home = pw ? pw->pw_dir : NULL,
        .shell = pw ? pw->pw_shell : NULL,
    };
    jobenv_build(full, &in, &env);
    int fd = high_fd(memfd_create("gflow-job-env", MFD_CLOEXEC));
    bool ok = fd >= 0 && (env.len == 0 || write(fd, env.buf, env.len) == (ssize_t)env.len);
    strbuf_free(&env);
    if (!ok) {
        *err = xasprintf("cannot pass the environment: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (full->script) {
        char *script_path = job_file(d->paths.run_dir, full->id, ".script");
        if (write_file(script_path, full->script, strlen(full->script), 0700) < 0 ||
            (pw && chown(script_path, pw->pw_uid, pw->pw_gid) < 0)) {
            *no_space = is_no_space(errno);
            *err = xasprintf("cannot write %s: %s", script_path, strerror(errno));
            free(script_path);
            close(fd);
            return -1;
        }
        strvec_push(argv, "--script");
        strvec_push(argv, script_path);
        free(script_path);
    } else {
        strvec_push(argv, "--command");
        strvec_push(argv, full->command ? full->command : "true");
    }
    return fd;
}

/* Starts the shim with the lock on fd 3 and the environment on fd 4. posix_spawn
 * (vfork underneath) does not copy the daemon's page tables as a fork per job would,
 * and it gives the shim an empty signal mask and default handling of our signals. */
static pid_t spawn_shim(char *const *argv, int lock_fd, int env_fd)
{
    static char *const shim_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, lock_fd, 3);
    posix_spawn_file_actions_adddup2(&fa, env_fd, 4);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 5);
    posix_spawnattr_init(&attr);
    sigset_t none, dflt;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGINT);
    sigaddset(&dflt, SIGHUP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv, shim_env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return pid;
}

/* Takes the lock (fd 3 of the shim) and reserves the room for the shim's lock lines
 * and exit record (src/core/exitfile.h), so that a job whose filesystem fills up while
 * it runs still has its outcome recorded. The lock's fd, or -1 with *err (*no_space:
 * for want of space, and then the job simply starts later). A reservation that fails
 * for another reason is only logged: the shim reports what it cannot write, as ever. */
static int prepare_lock_and_exit(const struct gflowd *d, int64_t id, char **err, bool *no_space)
{
    char *lock_path = job_file(d->paths.run_dir, id, ".lock");
    char *exit_path = job_file(d->paths.exit_dir, id, ".json");
    int fd = high_fd(open(lock_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    const char *what = NULL;
    int rc;
    if (fd < 0 || flock(fd, LOCK_EX) < 0) {
        *err = xasprintf("cannot lock %s: %s", lock_path, strerror(errno));
        *no_space = is_no_space(errno);
    } else if ((rc = posix_fallocate(fd, 0, EXITFILE_LOCK_MAX)) != 0) {
        errno = rc;
        what = lock_path;
    } else if (reserve_file(exit_path, EXITFILE_RESERVE, 0600) < 0) {
        what = exit_path;
    }
    if (what && is_no_space(errno)) {
        *err = xasprintf("cannot reserve room for %s: %s", what, strerror(errno));
        *no_space = true;
    } else if (what) {
        log_warn("job %lld: cannot reserve room for %s: %s", (long long)id, what, strerror(errno));
    }
    free(lock_path);
    free(exit_path);
    if (*err && fd >= 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void requeue(struct gflowd *d, struct job *j, const char *why);

void runner_launch(struct gflowd *d, struct job *j)
{
    if (j->end_request != JOB_END_NONE) { /* cancelled while its launch waited for a commit */
        bool timeout = j->end_request == JOB_END_TIMEOUT;
        finish(d, j, timeout ? JOB_TIMEOUT : JOB_CANCELLED,
               timeout ? JOB_REASON_TIME_LIMIT : JOB_REASON_CANCELLED_BY_USER, NULL);
        return;
    }
    struct job full;
    job_init(&full);
    char *err = NULL, *uuids = NULL;
    struct strvec argv;
    strvec_init(&argv);
    int lock_fd = -1, env_fd = -1;
    bool no_space = false;
    if (store_get_job(d->store, j->id, &full, true) != 0) {
        err = xasprintf("cannot read the job back: %s", store_error(d->store));
        goto fail;
    }
    struct passwd *pw = NULL;
    if (d->system) {
        pw = getpwuid(j->uid);
        if (!pw) {
            err = xasprintf("no user with uid %u", j->uid);
            goto fail;
        }
    }
    uuids = gpu_uuids(d->gpus, j->gpu_mask);
    full.gpu_mask = j->gpu_mask; /* chosen by the pass that started it */
    shim_args(d, j, &full, pw, uuids, &argv);
    env_fd = prepare_inputs(d, &full, pw, uuids, &argv, &err, &no_space);
    if (env_fd < 0)
        goto fail;
    lock_fd = prepare_lock_and_exit(d, j->id, &err, &no_space);
    if (lock_fd < 0)
        goto fail;
    pid_t pid = spawn_shim(argv.v, lock_fd, env_fd);
    if (pid < 0) {
        err = xasprintf("cannot start %s: %s", d->shim_path, strerror(errno));
        goto fail;
    }
    close(lock_fd);
    close(env_fd);
    struct run *r = run_new(d, j);
    r->our_child = true;
    j->shim_pid = pid;
    j->shim_start = proc_start_time(pid);
    r->start = j->shim_start;
    if (watch_shim(r, pid) < 0)
        log_error("job %lld: pidfd_open(%ld): %m", (long long)j->id, (long)pid);
    arm_time_limit(j, r);
    jobs_save(d->jobs, j);
    log_info("job %lld started (shim pid %ld)", (long long)j->id, (long)pid);
    goto out;
fail:
    if (lock_fd >= 0)
        close(lock_fd);
    if (env_fd >= 0)
        close(env_fd);
    if (no_space) { /* not the job's fault: it starts once there is room */
        disk_note_full(d->disk, d->paths.data_dir);
        requeue(d, j, err);
        goto out;
    }
    log_error("job %lld: launch failed: %s", (long long)j->id, err);
    finish(d, j, JOB_FAILED, JOB_REASON_LAUNCH_FAILED, err);
out:
    free(err);
    free(uuids);
    job_clear(&full);
    strvec_free(&argv);
}

/* ---- ending ---- */

void runner_signal(struct job *j, int sig)
{
    struct run *r = j->runtime;
    if (!r || r->pidfd < 0)
        return;
    if (sys_pidfd_send_signal(r->pidfd, sig) < 0 && errno != ESRCH)
        log_warn("job %lld: signal %d: %m", (long long)j->id, sig);
}

void runner_signal_cb(void *arg, struct job *j, int sig)
{
    runner_signal(j, sig);
}

void runner_request_end(struct gflowd *d, struct job *j, enum job_end_request why)
{
    if (j->end_request == JOB_END_NONE) {
        j->end_request = why;
        jobs_save(d->jobs, j);
    }
    jobs_after_commit_signal(d->jobs, j->id, SIGTERM);
}

/* ---- recovery after a restart ---- */

static void adopt(struct gflowd *d, struct job *j);

static void adopt_retry_cb(void *arg)
{
    struct run *r = arg;
    r->retry_timer = NULL;
    struct job *j = timer_job(r);
    if (j)
        adopt(r->d, j);
}

/* Requeues a job whose shim never started: it has not run at all. */
static void requeue(struct gflowd *d, struct job *j, const char *why)
{
    run_free(j);
    j->start_time = 0;
    j->shim_pid = 0;
    j->shim_start = 0;
    log_info("job %lld: %s; queued again", (long long)j->id, why);
    jobs_set_state(d->jobs, j, JOB_QUEUED, JOB_REASON_NONE, 0, NULL);
    cleanup_files_after_commit(d, j->id);
}

static void adopt(struct gflowd *d, struct job *j)
{
    struct run *r = j->runtime ? j->runtime : run_new(d, j);
    char *lock_path = job_file(d->paths.run_dir, j->id, ".lock");
    int fd = open(lock_path, O_RDWR | O_CLOEXEC);
    free(lock_path);
    if (fd < 0) {
        if (apply_exit_file(d, j) < 0)
            requeue(d, j, "shim never started");
        return;
    }
    char buf[EXITFILE_LOCK_MAX];
    ssize_t n = pread(fd, buf, sizeof(buf), 0);
    struct exit_lock lock;
    bool have_pid = exitfile_lock_parse(buf, n > 0 ? (size_t)n : 0, &lock) == 0;
    int64_t pid = lock.pid, start = lock.start;
    exitfile_lock_free(&lock);
    bool alive = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd);
    if (!alive) {
        if (apply_exit_file(d, j) == 0)
            return;
        if (!have_pid)
            requeue(d, j, "shim never started");
        else
            shim_ended(d, j, 0, false);
        return;
    }
    if (!have_pid) { /* the shim is starting up: look again shortly */
        r->retry_timer = loop_add_timer(0.02, adopt_retry_cb, r);
        return;
    }
    if (proc_start_time((pid_t)pid) != start || watch_shim(r, (pid_t)pid) < 0 ||
        proc_start_time((pid_t)pid) != start) {
        /* Not the process that holds the lock: it ended between the checks. */
        if (r->pidfd >= 0) {
            loop_del_fd(r->pidfd);
            close(r->pidfd);
            r->pidfd = -1;
        }
        r->retry_timer = loop_add_timer(0.02, adopt_retry_cb, r);
        return;
    }
    j->shim_pid = pid;
    j->shim_start = start;
    r->start = start;
    arm_time_limit(j, r);
    if (j->end_request != JOB_END_NONE)
        runner_signal(j, SIGTERM);
    log_info("job %lld re-adopted (shim pid %lld)", (long long)j->id, (long long)pid);
}

/* Removes exit, lock, env and script files of jobs that are no longer running. */
static void sweep_dir(const struct gflowd *d, const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *e;
    while ((e = readdir(dp))) {
        char *end;
        long long id = strtoll(e->d_name, &end, 10);
        if (end == e->d_name || *end != '.')
            continue;
        struct job *j = jobs_get(d->jobs, id);
        if (!j || j->state != JOB_RUNNING) {
            char *path = xasprintf("%s/%s", dir, e->d_name);
            unlink(path);
            free(path);
        }
    }
    closedir(dp);
}

void runner_recover(struct gflowd *d)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    /* adopt() may move jobs out of the table, so walk a copy. */
    if (n == 0)
        return;
    struct job **copy = xmalloc(n * sizeof(*copy));
    memcpy(copy, running, n * sizeof(*copy));
    for (size_t i = 0; i < n; i++)
        adopt(d, copy[i]);
    free(copy);
}

/* ---- a lost transaction ---- */

/* What a lost transaction undid and gflowd must do again waits this long: the disk may
 * still be full, and each try that fails costs a reload. */
#define RUNNER_REDO_SECS 1.0

/* Stops watching a shim whose job is gone from the table (its files stay). */
static void run_drop(struct run *r)
{
    if (r->pidfd >= 0) {
        loop_del_fd(r->pidfd);
        close(r->pidfd);
    }
    loop_cancel_timer(r->limit_timer);
    loop_cancel_timer(r->warn_timer);
    loop_cancel_timer(r->retry_timer);
    free(r);
}

void runner_reload(struct gflowd *d)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    struct run **runs = xcalloc(n ? n : 1, sizeof(*runs));
    size_t n_runs = 0;
    for (size_t i = 0; i < n; i++) {
        if (running[i]->runtime)
            runs[n_runs++] = running[i]->runtime;
        running[i]->runtime = NULL;
    }
    char *err = NULL;
    if (jobs_reload(d->jobs, &err) < 0) {
        log_error("cannot read the jobs back from the database (%s); exiting so that a restart "
                  "recovers them (running jobs keep running)",
                  err);
        exit(1);
    }
    running = jobs_running(d->jobs, &n);
    for (size_t i = 0; i < n; i++) {
        struct job *j = running[i];
        struct run *r = NULL;
        for (size_t k = 0; k < n_runs && !r; k++) {
            if (runs[k] && runs[k]->job_id == j->id) {
                r = runs[k];
                runs[k] = NULL;
            }
        }
        if (!r) {
            /* Its end (or its launch's failure) was undone: the shim has gone, and its
             * exit or lock file says how the job ended; look again shortly. */
            r = run_new(d, j);
            r->retry_timer = loop_add_timer(RUNNER_REDO_SECS, adopt_retry_cb, r);
            continue;
        }
        j->runtime = r;
        if (r->pid > 0 && (j->shim_pid != r->pid || j->shim_start != r->start)) {
            j->shim_pid = r->pid; /* its launch was recorded in the lost transaction */
            j->shim_start = r->start;
            jobs_save(d->jobs, j);
        }
        /* A time limit whose request to end the job was undone is due again. */
        if (!r->limit_timer && j->time_limit > 0 && j->end_request == JOB_END_NONE)
            r->limit_timer = loop_add_timer(RUNNER_REDO_SECS, limit_cb, r);
    }
    for (size_t k = 0; k < n_runs; k++) {
        if (!runs[k])
            continue;
        log_warn("job %lld: its shim (pid %ld) is no longer running in the database's view; "
                 "no longer watched",
                 (long long)runs[k]->job_id, (long)runs[k]->pid);
        run_drop(runs[k]);
    }
    free(runs);
}

void runner_shutdown(struct gflowd *d)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    for (size_t i = 0; i < n; i++)
        run_free(running[i]); /* the shims go on; a restarted daemon re-adopts them */
}

void runner_sweep(const struct gflowd *d)
{
    sweep_dir(d, d->paths.exit_dir);
    sweep_dir(d, d->paths.run_dir);
}
