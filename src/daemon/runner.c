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
#include "files.h"
#include "gflowd.h"
#include "gpu.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "procinfo.h"
#include "store.h"
#include "util.h"

/* Per running job, in job->runtime. */
struct run {
    int64_t job_id;
    pid_t pid;
    int pidfd;             /* -1 while an adopted shim's pid is not known yet */
    bool our_child;        /* forked by this daemon, so we reap it */
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
 * SHIM_FORWARD_MAIN_ONLY (0x100) is set. */
#define RUNNER_FORWARD_MAIN_ONLY 0x100
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

char *runner_log_path(int64_t job_id)
{
    return job_file(gd.paths.log_dir, job_id, ".log");
}

int runner_init(char **err)
{
    /* A system daemon's jobs run as their users, who must reach their own script in
     * run/; logs and exit files are read only by the daemon. */
    unsigned run_mode = gd.system ? 0711 : 0700;
    const char *dirs[] = {gd.paths.data_dir, gd.paths.log_dir, gd.paths.exit_dir};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        if (mkdir_p(dirs[i], 0700) < 0) {
            *err = xasprintf("cannot create %s: %s", dirs[i], strerror(errno));
            return -1;
        }
    }
    if (gd.system)
        chmod(gd.paths.data_dir, 0711);
    if (mkdir_p(gd.paths.run_dir, run_mode) < 0 || chmod(gd.paths.run_dir, run_mode) < 0) {
        *err = xasprintf("cannot create %s: %s", gd.paths.run_dir, strerror(errno));
        return -1;
    }
    return 0;
}

static struct run *run_new(struct job *j)
{
    struct run *r = xcalloc(1, sizeof(*r));
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

static void cleanup_files_after_commit(int64_t id)
{
    jobs_after_commit_unlink(job_file(gd.paths.exit_dir, id, ".json"));
    jobs_after_commit_unlink(job_file(gd.paths.run_dir, id, ".lock"));
    jobs_after_commit_unlink(job_file(gd.paths.run_dir, id, ".script"));
}

/* Ends j in a terminal state and schedules its files for removal. */
static void finish(struct job *j, enum job_state state, const char *reason)
{
    run_free(j);
    /* Its GPUs are free now: re-read their memory and processes for the next pass
     * rather than waiting for the poll. */
    if (j->gpu_ids)
        gpu_refresh();
    if (jobs_set_state(j, state, reason) < 0)
        log_error("job %lld: refused transition to %s", (long long)j->id, job_state_short(state));
    cleanup_files_after_commit(j->id);
    log_info("job %lld ended: %s%s%s", (long long)j->id, job_state_short(state),
             reason ? " " : "", reason ? reason : "");
}

/* Reads the shim's exit file into j and picks the final state. Returns -1 if absent. */
static int apply_exit_file(struct job *j)
{
    char *path = job_file(gd.paths.exit_dir, j->id, ".json");
    json_error_t jerr;
    json_t *o = json_load_file(path, 0, &jerr);
    free(path);
    if (!o)
        return -1;
    json_t *code = json_object_get(o, "exit_code");
    json_t *sig = json_object_get(o, "signal");
    const char *error = json_string_value(json_object_get(o, "error"));
    j->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
    j->signal = json_is_integer(sig) ? (int)json_integer_value(sig) : 0;
    j->oom = json_is_true(json_object_get(o, "oom"));
    double fin = json_number_value(json_object_get(o, "finished_at"));
    if (fin > 0)
        j->end_time = fin;
    json_int_t rss = json_integer_value(json_object_get(o, "max_rss_kb"));
    if (rss > 0)
        j->max_rss_kb = rss;

    enum job_state state;
    char *reason = NULL;
    if (j->end_request == JOB_END_CANCEL) {
        state = JOB_CANCELLED;
        reason = xstrdup("CancelledByUser");
    } else if (j->end_request == JOB_END_TIMEOUT) {
        state = JOB_TIMEOUT;
        reason = xstrdup("TimeLimit");
    } else if (j->oom) {
        state = JOB_FAILED;
        reason = xstrdup("OutOfMemory");
    } else if (error && *error) {
        state = JOB_FAILED;
        reason = xasprintf("LaunchFailed: %s", error);
    } else if (j->signal > 0) {
        state = JOB_FAILED;
        reason = xstrdup("Signal");
    } else if (j->exit_code == 0) {
        state = JOB_FINISHED;
    } else {
        state = JOB_FAILED;
        reason = xstrdup("NonZeroExitCode");
    }
    json_decref(o);
    finish(j, state, reason);
    free(reason);
    return 0;
}

/* The shim is gone: collect what it reported. */
static void shim_ended(struct job *j, int wait_status, bool have_status)
{
    if (apply_exit_file(j) == 0)
        return;
    char *why;
    if (have_status && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 125)
        why = xstrdup("LaunchFailed: gflow-shim could not be started (see gflowd.log)");
    else if (have_status && WIFSIGNALED(wait_status))
        why = xasprintf("ShimLost: gflow-shim killed by %s", job_signal_name(WTERMSIG(wait_status)));
    else
        why = xstrdup("ShimLost: gflow-shim ended without an exit file");
    if (j->end_request == JOB_END_CANCEL)
        finish(j, JOB_CANCELLED, "CancelledByUser");
    else if (j->end_request == JOB_END_TIMEOUT)
        finish(j, JOB_TIMEOUT, "TimeLimit");
    else
        finish(j, JOB_FAILED, why);
    free(why);
}

static void pidfd_cb(int fd, uint32_t events, void *arg)
{
    struct run *r = arg;
    struct job *j = jobs_get(r->job_id);
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
    shim_ended(j, status, have_status);
}

static void limit_cb(void *arg)
{
    int64_t id = (int64_t)(intptr_t)arg;
    struct job *j = jobs_get(id);
    if (!j || j->state != JOB_RUNNING || !j->runtime)
        return;
    ((struct run *)j->runtime)->limit_timer = NULL;
    if (j->end_request != JOB_END_NONE)
        return;
    log_info("job %lld reached its time limit", (long long)id);
    runner_request_end(j, JOB_END_TIMEOUT);
}

static void warn_cb(void *arg)
{
    int64_t id = (int64_t)(intptr_t)arg;
    struct job *j = jobs_get(id);
    if (!j || j->state != JOB_RUNNING || !j->runtime)
        return;
    struct run *r = j->runtime;
    r->warn_timer = NULL;
    if (j->end_request != JOB_END_NONE || r->pidfd < 0)
        return;
    int value = j->warn_signal | (j->warn_main_only ? RUNNER_FORWARD_MAIN_ONLY : 0);
    if (sys_pidfd_queue(r->pidfd, value) < 0) {
        if (errno != ESRCH)
            log_warn("job %lld: queueing %s for the job: %m", (long long)id,
                     job_signal_name(j->warn_signal));
        return;
    }
    log_info("job %lld: sent %s%s, %lld s before its time limit", (long long)id,
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
    r->limit_timer = loop_add_timer(delay, limit_cb, (void *)(intptr_t)j->id);
    if (j->warn_signal > 0 && !r->warn_timer) {
        double at = j->start_time + (double)j->time_limit - (double)j->warn_secs;
        if (at >= gd.started_at || r->our_child)
            r->warn_timer = loop_add_timer(at > now ? at - now : 0, warn_cb,
                                           (void *)(intptr_t)j->id);
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

static void env_add(struct strbuf *sb, const char *key, const char *value)
{
    strbuf_adds(sb, key);
    strbuf_addc(sb, '=');
    strbuf_adds(sb, value);
    strbuf_addc(sb, '\0');
}

static bool env_overridden(const char *key)
{
    static const char *const ours[] = {
        "GFLOW_JOB_ID", "GFLOW_JOB_NAME", "GFLOW_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_ID",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER", "GFLOW_GPU_UUIDS", "NVIDIA_VISIBLE_DEVICES", "PYTHONUNBUFFERED"};
    for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
        if (strcmp(key, ours[i]) == 0)
            return true;
    if (gd.system)
        return !strcmp(key, "HOME") || !strcmp(key, "USER") || !strcmp(key, "LOGNAME") ||
               !strcmp(key, "SHELL");
    return false;
}

/* CUDA_VISIBLE_DEVICES: physical NVML indices, or UUIDs with daemon.gpu_id_format = uuid.
 * With CUDA_DEVICE_ORDER=PCI_BUS_ID the CUDA runtime numbers GPUs as NVML does. */
static const char *cuda_devices(const char *gpu_ids, const char *uuids)
{
    if (!gpu_ids)
        return "";
    return strcmp(gd.cfg.gpu_id_format, "uuid") == 0 ? uuids : gpu_ids;
}

/* The job's environment, NUL-separated: the submitter's, then ours (DESIGN.md §4). */
static void build_env(const struct job *j, const struct passwd *pw, struct strbuf *sb)
{
    const char *key;
    json_t *value;
    json_object_foreach(j->env, key, value) {
        if (json_is_string(value) && !env_overridden(key) && !strchr(key, '='))
            env_add(sb, key, json_string_value(value));
    }
    char id[32];
    snprintf(id, sizeof(id), "%lld", (long long)j->id);
    env_add(sb, "GFLOW_JOB_ID", id);
    env_add(sb, "GFLOW_JOB_NAME", j->name ? j->name : "");
    if (j->array_task >= 0) {
        snprintf(id, sizeof(id), "%lld", (long long)j->array_task);
        env_add(sb, "GFLOW_ARRAY_TASK_ID", id);
        env_add(sb, "SLURM_ARRAY_TASK_ID", id);
    }
    char *uuids = gpu_uuids_of(j->gpu_ids);
    env_add(sb, "CUDA_VISIBLE_DEVICES", cuda_devices(j->gpu_ids, uuids));
    env_add(sb, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    env_add(sb, "GFLOW_GPU_UUIDS", uuids);
    env_add(sb, "NVIDIA_VISIBLE_DEVICES", *uuids ? uuids : "none");
    free(uuids);
    env_add(sb, "PYTHONUNBUFFERED", "1");
    if (pw) {
        env_add(sb, "HOME", pw->pw_dir);
        env_add(sb, "USER", pw->pw_name);
        env_add(sb, "LOGNAME", pw->pw_name);
        env_add(sb, "SHELL", pw->pw_shell && *pw->pw_shell ? pw->pw_shell : "/bin/sh");
    }
}

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
static char *denied_gpu_minors(const struct job *j)
{
    const struct gpu_set *set = gpu_current();
    struct strbuf sb;
    strbuf_init(&sb);
    uint64_t given = gpu_ids_mask(j->gpu_ids);
    for (size_t i = 0; i < set->n_gpus; i++) {
        int index = set->gpus[i].index;
        if (index >= 0 && index < GPUINFO_MAX_GPUS && !(given & (1ULL << index)))
            strbuf_addf(&sb, "%s%d", sb.len ? "," : "", gpu_minor(index));
    }
    if (sb.len == 0) {
        strbuf_free(&sb);
        return NULL;
    }
    return strbuf_detach(&sb);
}

struct launch {
    char *argv[40];
    int argc;
    char *owned[24];
    int n_owned;
};

static void arg(struct launch *l, const char *s)
{
    l->argv[l->argc++] = (char *)s;
}

static char *keep(struct launch *l, char *s)
{
    l->owned[l->n_owned++] = s;
    return s;
}

static void launch_free(struct launch *l)
{
    for (int i = 0; i < l->n_owned; i++)
        free(l->owned[i]);
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

/* The job's environment in a memfd (no file on disk to create and remove) and, for a
 * script job, the script file. Returns the memfd, or -1 with *err. */
static int prepare_inputs(const struct job *full, const struct passwd *pw, struct launch *l,
                          char **err)
{
    struct strbuf env;
    strbuf_init(&env);
    build_env(full, pw, &env);
    int fd = high_fd(memfd_create("gflow-job-env", MFD_CLOEXEC));
    bool ok = fd >= 0 && (env.len == 0 || write(fd, env.buf, env.len) == (ssize_t)env.len);
    strbuf_free(&env);
    if (!ok) {
        *err = xasprintf("cannot pass the environment: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    arg(l, "--env-fd");
    arg(l, "4");
    if (full->script) {
        char *script_path = keep(l, job_file(gd.paths.run_dir, full->id, ".script"));
        if (write_file(script_path, full->script, strlen(full->script), 0700) < 0 ||
            (pw && chown(script_path, pw->pw_uid, pw->pw_gid) < 0)) {
            *err = xasprintf("cannot write %s: %s", script_path, strerror(errno));
            close(fd);
            return -1;
        }
        arg(l, "--script");
        arg(l, script_path);
    } else {
        arg(l, "--command");
        arg(l, full->command ? full->command : "true");
    }
    return fd;
}

/* Starts the shim with the lock on fd 3 and the environment on fd 4. posix_spawn
 * (vfork underneath) does not copy the daemon's page tables as a fork per job would,
 * and it gives the shim an empty signal mask and default handling of our signals. */
static pid_t spawn_shim(struct launch *l, int lock_fd, int env_fd)
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
    int rc = posix_spawn(&pid, l->argv[0], &fa, &attr, l->argv, shim_env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return pid;
}

void runner_launch(struct job *j)
{
    if (j->end_request != JOB_END_NONE) { /* cancelled while its launch waited for a commit */
        finish(j, j->end_request == JOB_END_TIMEOUT ? JOB_TIMEOUT : JOB_CANCELLED,
               j->end_request == JOB_END_TIMEOUT ? "TimeLimit" : "CancelledByUser");
        return;
    }
    struct job full;
    job_init(&full);
    char *err = NULL;
    struct launch l = {.argc = 0};
    int lock_fd = -1, env_fd = -1;
    if (store_get_job(gd.store, j->id, &full, true) != 0) {
        err = xasprintf("cannot read the job back: %s", store_error(gd.store));
        goto fail;
    }
    struct passwd *pw = NULL;
    if (gd.system) {
        pw = getpwuid(j->uid);
        if (!pw) {
            err = xasprintf("no user with uid %u", j->uid);
            goto fail;
        }
    }
    arg(&l, gd.shim_path);
    arg(&l, "--job-id");
    arg(&l, keep(&l, xasprintf("%lld", (long long)j->id)));
    arg(&l, "--exit-file");
    arg(&l, keep(&l, job_file(gd.paths.exit_dir, j->id, ".json")));
    arg(&l, "--log");
    arg(&l, keep(&l, runner_log_path(j->id)));
    arg(&l, "--workdir");
    arg(&l, keep(&l, xstrdup(full.workdir ? full.workdir : "/")));
    arg(&l, "--kill-grace");
    arg(&l, keep(&l, xasprintf("%lld", (long long)gd.cfg.kill_grace_secs)));
    arg(&l, "--lock-fd");
    arg(&l, "3");
    if (pw) {
        arg(&l, "--uid");
        arg(&l, keep(&l, xasprintf("%u", (unsigned)pw->pw_uid)));
        arg(&l, "--gid");
        arg(&l, keep(&l, xasprintf("%u", (unsigned)pw->pw_gid)));
        arg(&l, "--user");
        arg(&l, keep(&l, xstrdup(pw->pw_name)));
    }
    if (j->gpus_per_task && j->gpus > 1) { /* one copy of the command per GPU */
        char *uuids = gpu_uuids_of(j->gpu_ids);
        arg(&l, "--tasks");
        arg(&l, keep(&l, xasprintf("%d", j->gpus)));
        arg(&l, "--task-gpus");
        arg(&l, keep(&l, xstrdup(cuda_devices(j->gpu_ids, uuids))));
        free(uuids);
    }
    char *deny = gd.cfg.constrain_devices ? denied_gpu_minors(j) : NULL;
    if (deny) {
        arg(&l, "--deny-devices");
        arg(&l, keep(&l, deny));
    }
    if (j->memory_mb > 0) { /* held to it: cgroup v2, else v1, else a watchdog (the shim) */
        arg(&l, "--memory-limit");
        arg(&l, keep(&l, xasprintf("%lld", (long long)j->memory_mb)));
    }
    if (j->conda_env) { /* activated through the installation's shell hook (the shim) */
        arg(&l, "--conda-env");
        arg(&l, keep(&l, xstrdup(j->conda_env)));
    }
    env_fd = prepare_inputs(&full, pw, &l, &err);
    if (env_fd < 0)
        goto fail;
    l.argv[l.argc] = NULL;

    char *lock_path = job_file(gd.paths.run_dir, j->id, ".lock");
    lock_fd = high_fd(open(lock_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
        err = xasprintf("cannot lock %s: %s", lock_path, strerror(errno));
        free(lock_path);
        goto fail;
    }
    free(lock_path);
    pid_t pid = spawn_shim(&l, lock_fd, env_fd);
    if (pid < 0) {
        err = xasprintf("cannot start %s: %s", gd.shim_path, strerror(errno));
        goto fail;
    }
    close(lock_fd);
    close(env_fd);
    struct run *r = run_new(j);
    r->our_child = true;
    j->shim_pid = pid;
    j->shim_start = proc_start_time(pid);
    if (watch_shim(r, pid) < 0)
        log_error("job %lld: pidfd_open(%ld): %m", (long long)j->id, (long)pid);
    arm_time_limit(j, r);
    jobs_save(j);
    log_info("job %lld started (shim pid %ld)", (long long)j->id, (long)pid);
    job_clear(&full);
    launch_free(&l);
    return;
fail:
    if (lock_fd >= 0)
        close(lock_fd);
    if (env_fd >= 0)
        close(env_fd);
    log_error("job %lld: launch failed: %s", (long long)j->id, err);
    char *reason = xasprintf("LaunchFailed: %s", err);
    finish(j, JOB_FAILED, reason);
    free(reason);
    free(err);
    job_clear(&full);
    launch_free(&l);
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

void runner_request_end(struct job *j, enum job_end_request why)
{
    if (j->end_request == JOB_END_NONE) {
        j->end_request = why;
        jobs_save(j);
    }
    jobs_after_commit_signal(j->id, SIGTERM);
}

/* ---- recovery after a restart ---- */

static void adopt(struct job *j);

static void adopt_retry_cb(void *arg)
{
    struct job *j = jobs_get((int64_t)(intptr_t)arg);
    if (!j || j->state != JOB_RUNNING || !j->runtime)
        return;
    ((struct run *)j->runtime)->retry_timer = NULL;
    adopt(j);
}

/* Requeues a job whose shim never started: it has not run at all. */
static void requeue(struct job *j)
{
    run_free(j);
    j->start_time = 0;
    j->shim_pid = 0;
    j->shim_start = 0;
    log_info("job %lld: shim never started; queued again", (long long)j->id);
    jobs_set_state(j, JOB_QUEUED, NULL);
    cleanup_files_after_commit(j->id);
}

static void adopt(struct job *j)
{
    struct run *r = j->runtime ? j->runtime : run_new(j);
    char *lock_path = job_file(gd.paths.run_dir, j->id, ".lock");
    int fd = open(lock_path, O_RDWR | O_CLOEXEC);
    free(lock_path);
    if (fd < 0) {
        if (apply_exit_file(j) < 0)
            requeue(j);
        return;
    }
    char buf[64] = "";
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    long long pid = 0, start = 0;
    bool have_pid = sscanf(buf, "%lld %lld", &pid, &start) == 2 && pid > 0;
    bool alive = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd);
    if (!alive) {
        if (apply_exit_file(j) == 0)
            return;
        if (!have_pid)
            requeue(j);
        else
            shim_ended(j, 0, false);
        return;
    }
    if (!have_pid) { /* the shim is starting up: look again shortly */
        r->retry_timer = loop_add_timer(0.02, adopt_retry_cb, (void *)(intptr_t)j->id);
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
        r->retry_timer = loop_add_timer(0.02, adopt_retry_cb, (void *)(intptr_t)j->id);
        return;
    }
    j->shim_pid = pid;
    j->shim_start = start;
    arm_time_limit(j, r);
    if (j->end_request != JOB_END_NONE)
        runner_signal(j, SIGTERM);
    log_info("job %lld re-adopted (shim pid %lld)", (long long)j->id, pid);
}

/* Removes exit, lock, env and script files of jobs that are no longer running. */
static void sweep_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long long id = strtoll(e->d_name, &end, 10);
        if (end == e->d_name || *end != '.')
            continue;
        struct job *j = jobs_get(id);
        if (!j || j->state != JOB_RUNNING) {
            char *path = xasprintf("%s/%s", dir, e->d_name);
            unlink(path);
            free(path);
        }
    }
    closedir(d);
}

void runner_recover(void)
{
    size_t n;
    struct job **active = jobs_active(&n);
    /* adopt() may move jobs out of the table, so walk a copy. */
    if (n == 0)
        return;
    struct job **copy = xmalloc(n * sizeof(*copy));
    memcpy(copy, active, n * sizeof(*copy));
    for (size_t i = 0; i < n; i++)
        if (copy[i]->state == JOB_RUNNING)
            adopt(copy[i]);
    free(copy);
}

void runner_shutdown(void)
{
    size_t n;
    struct job **active = jobs_active(&n);
    for (size_t i = 0; i < n; i++)
        run_free(active[i]); /* the shims go on; a restarted daemon re-adopts them */
}

void runner_sweep(void)
{
    sweep_dir(gd.paths.exit_dir);
    sweep_dir(gd.paths.run_dir);
}
