/* runner: the life of a running job around its shim: launch (launch.c starts the
 * shim), the shim's end (its exit file, else its lock file and what is left of the job:
 * orphans.c), time limits and --signal, ending jobs on request (see runner.h);
 * re-adoption after a restart is runner_adopt.c. */
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "cpupin.h"
#include "daemon.h"
#include "exitfile.h"
#include "files.h"
#include "gpu/gpu.h"
#include "gpuacct_run.h"
#include "joblog.h"
#include "jobs/jobs.h"
#include "launch.h"
#include "log.h"
#include "loop.h"
#include "ops/disk.h"
#include "orphans.h"
#include "pidfd.h"
#include "procinfo.h"
#include "runner_internal.h"
#include "util.h"

/* How soon the daemon looks again at a lost shim's job: the next round of killing what
 * is left of it (orphans.c), or files it could not read for lack of a resource. */
#define RUNNER_ROUND_MIN_SECS 0.005 /* what was killed is usually gone by then */
#define RUNNER_ROUND_MAX_SECS 0.5   /* something that takes long to die (D state, frozen) */
#define RUNNER_STUCK_SECS 1.0       /* something left that it may not kill: it must end itself */
#define RUNNER_RETRY_MAX_SECS 2.0

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
    return sys_pidfd_send_signal(pidfd, SIGUSR1, &si);
}

char *run_job_file(const char *dir, int64_t id, const char *suffix)
{
    return xasprintf("%s/%lld%s", dir, (long long)id, suffix);
}

char *runner_log_path(const struct gflowd *d, int64_t job_id)
{
    return run_job_file(d->paths.log_dir, job_id, ".log");
}

int runner_init(struct gflowd *d, char **err)
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
    if (joblog_dir_open(d, err) < 0)
        return -1;
    if (d->system)
        chmod(d->paths.data_dir, 0711);
    if (mkdir_p(d->paths.run_dir, run_mode) < 0 || chmod(d->paths.run_dir, run_mode) < 0) {
        *err = xasprintf("cannot create %s: %s", d->paths.run_dir, strerror(errno));
        return -1;
    }
    return launch_init(d, err);
}

struct run *run_new(struct gflowd *d, struct job *j)
{
    struct run *r = xcalloc(1, sizeof(*r));
    r->d = d;
    r->job_id = j->id;
    r->pidfd = -1;
    r->sock = -1;
    j->daemon.runtime = r;
    return r;
}

/* Stops watching the shim's pidfd. */
void run_unwatch_shim(struct run *r)
{
    if (r->pidfd < 0)
        return;
    loop_del_fd(r->pidfd);
    close(r->pidfd);
    r->pidfd = -1;
    fdres_count(&r->d->fds, FDRES_JOBS, -1);
}

/* Stops listening to a standby's socket: closed, it ends the shim once its job is over. */
static void run_close_sock(struct run *r)
{
    if (r->sock < 0)
        return;
    loop_del_fd(r->sock);
    close(r->sock);
    r->sock = -1;
    fdres_count(&r->d->fds, FDRES_JOBS, -1);
}

/* Stops watching a shim and forgets it (its files stay). */
static void run_destroy(struct run *r)
{
    run_unwatch_shim(r);
    run_close_sock(r);
    if (r->sup)
        launch_supervisor_unuse(r->sup);
    loop_cancel_timer(r->limit_timer);
    loop_cancel_timer(r->warn_timer);
    loop_cancel_timer(r->kill_timer);
    loop_cancel_timer(r->retry_timer);
    loop_cancel_timer(r->gone_timer);
    orphans_free(r->orphans);
    exit_verdict_free(&r->verdict);
    gpuacct_run_free(r->acct);
    free(r);
}

static void run_free(struct job *j)
{
    if (!j->daemon.runtime)
        return;
    run_destroy(j->daemon.runtime);
    j->daemon.runtime = NULL;
}

static void keep_lock_cb(void *arg, int64_t id)
{
    launch_keep_lock(arg, id);
}

/* A --pty job's attach directory, when its shim could not remove it (it was killed). */
static void remove_attach_dir_cb(void *arg, int64_t id)
{
    struct gflowd *d = arg;
    char *dir = run_job_file(d->paths.run_dir, id, ".attach");
    char *sock = xasprintf("%s/sock", dir);
    unlink(sock);
    rmdir(dir);
    free(sock);
    free(dir);
}

/* Once the commit is done: the job's files go, its lock file is kept for a next job
 * (launch_keep_lock) when keep_lock. */
static void cleanup_files_after_commit(struct gflowd *d, const struct job *j, bool keep_lock)
{
    int64_t id = j->id;
    if (j->pty) /* a shim that ended removed it already; one that was killed did not */
        jobs_after_commit_call(d->jobs, remove_attach_dir_cb, d, id);
    if (keep_lock)
        jobs_after_commit_call(d->jobs, keep_lock_cb, d, id);
    else
        jobs_after_commit_unlink(d->jobs, run_job_file(d->paths.run_dir, id, ".lock"));
    jobs_after_commit_unlink(d->jobs, run_job_file(d->paths.run_dir, id, ".script"));
}

/* j's shim is gone: no more watching; its GPUs are free now: have their memory and
 * processes read again rather than waiting for the poll (the state change marks the
 * pass due; the answer, from gpu.c's NVML thread, marks it due again). */
static void release(struct gflowd *d, struct job *j)
{
    gpuacct_run_end(d, j);
    run_free(j);
    if (j->gpu_mask || j->mig_uuids) {
        size_t n;
        struct job **running = jobs_running(d->jobs, &n);
        gpu_refresh(d->gpus, running, n);
    }
}

/* A preempted job (or a --requeue job whose GPU failed) has stopped: back to PD with
 * the same id (Slurm's requeue), counted; its next run appends to the same log. */
static void requeue_preempted(struct gflowd *d, struct job *j)
{
    bool fault = j->end_request == JOB_END_GPU_FAULT;
    char *why = fault ? job_reason_string(j) : NULL;
    release(d, j);
    j->requeue_count++;
    j->end_request = JOB_END_NONE;
    j->exit_code = -1;
    j->signal = 0;
    j->oom = false;
    j->start_time = 0;
    j->end_time = 0;
    j->shim_pid = 0;
    j->shim_start = 0;
    jobs_set_state(d->jobs, j, JOB_QUEUED, JOB_REASON_NONE, 0, NULL);
    cleanup_files_after_commit(d, j, true);
    if (fault)
        log_info("job %lld ended by %s; queued again (--requeue; requeued %d time%s)",
                 (long long)j->id, why, j->requeue_count, j->requeue_count == 1 ? "" : "s");
    else
        log_info("job %lld preempted for job %lld; queued again (requeued %d time%s)",
                 (long long)j->id, (long long)j->preempted_by, j->requeue_count,
                 j->requeue_count == 1 ? "" : "s");
    free(why);
}

/* Ends j in a terminal state and schedules its files for removal. */
static void finish(struct gflowd *d, struct job *j, enum job_state state, enum job_reason reason,
                   const char *detail)
{
    release(d, j);
    if (jobs_set_state(d->jobs, j, state, reason, 0, detail) < 0)
        log_error("job %lld: refused transition to %s", (long long)j->id, job_state_short(state));
    cleanup_files_after_commit(d, j, true); /* its shim is gone: nobody holds the lock */
    char *why = job_reason_string(j);
    log_info("job %lld ended: %s%s%s", (long long)j->id, job_state_short(state), why ? " " : "",
             why ? why : "");
    free(why);
}

/* Ends j as the verdict says, with what the exit record tells of the run. */
static void apply_verdict(struct gflowd *d, struct job *j, struct exit_verdict *v)
{
    if (v->reason == JOB_REASON_GPU_FAULT) { /* what failed is in the job's reason */
        free(v->detail);
        v->detail = xstrdup(j->reason == JOB_REASON_GPU_FAULT && j->reason_detail ? j->reason_detail
                                                                                  : "GPU failed");
        if (j->requeue)
            v->state = JOB_QUEUED;
    }
    if (v->state == JOB_QUEUED)
        requeue_preempted(d, j);
    else
        finish(d, j, v->state, v->reason, v->detail);
    exit_verdict_free(v);
}

/* Ends j as its exit record says (and frees the record). */
static void apply_record(struct gflowd *d, struct job *j, struct exit_record *rec_)
{
    struct exit_record rec = *rec_;
    j->exit_code = rec.exit_code;
    j->signal = rec.signal;
    j->oom = rec.oom;
    if (rec.finished_at > 0)
        j->end_time = rec.finished_at;
    if (rec.max_rss_kb > 0)
        j->max_rss_kb = rec.max_rss_kb;
    j->log_lost_bytes = rec.log_lost_bytes;
    struct exit_verdict v = exit_verdict_of(&rec, j->end_request);
    exit_record_free(&rec);
    apply_verdict(d, j, &v);
}

/* Reads the exit file of a shim of a previous version (exits/<id>.json) into j and
 * ends it. 0; -1 if there is none (or it cannot be read at all); -2 (errno set) if it
 * cannot be read for lack of a resource (out of file descriptors, ...): look again
 * later, as "none" would end a job that finished as lost. */
int run_apply_exit_file(struct gflowd *d, struct job *j)
{
    char *path = run_job_file(d->paths.exit_dir, j->id, ".json");
    size_t len;
    char *text = read_file(path, &len);
    int e = errno;
    struct exit_record rec;
    if (!text) {
        free(path);
        errno = e;
        return launch_short_of(e) ? -2 : -1;
    }
    /* Read: it goes once the job's end is committed (a shim of this version writes no
     * such file, so ending a job costs no unlink for it; runner_sweep clears the rest). */
    jobs_after_commit_unlink(d->jobs, path);
    if (exit_record_decode(text, len, &rec) < 0) {
        free(text);
        return -1;
    }
    free(text);
    apply_record(d, j, &rec);
    return 0;
}

/* The text of job id's lock file (*text NULL when there is none). 0, also when there is
 * none; -1 with errno if it cannot be read for lack of a resource now. */
static int read_lock_text(const struct gflowd *d, int64_t id, char **text, size_t *len)
{
    char *path = run_job_file(d->paths.run_dir, id, ".lock");
    *len = 0;
    *text = read_file(path, len);
    int e = errno;
    free(path);
    errno = e;
    return *text || !launch_short_of(e) ? 0 : -1;
}

/* ---- the shim's end ---- */

static void collect(struct gflowd *d, struct job *j);

static void gone_cb(void *arg)
{
    struct run *r = arg;
    r->gone_timer = NULL;
    struct job *j = jobs_get(r->d->jobs, r->job_id);
    if (j && j->state == JOB_RUNNING && j->daemon.runtime == r)
        collect(r->d, j);
}

/* A file of the shim's could not be read for lack of a resource: again, later. */
static void collect_later(struct run *r, const char *what)
{
    if (r->gone_delay == 0)
        log_warn("job %lld: cannot read its %s now (%m); trying again", (long long)r->job_id, what);
    r->gone_delay = r->gone_delay ? r->gone_delay * 2 : 0.05;
    if (r->gone_delay > RUNNER_RETRY_MAX_SECS)
        r->gone_delay = RUNNER_RETRY_MAX_SECS;
    r->gone_timer = loop_add_timer(r->gone_delay, gone_cb, r);
}

/* The shim is gone without an exit record: from its lock file (text, len bytes; NULL:
 * none), the verdict and what may be left of the job. */
static void collect_lost(struct job *j, const char *text, size_t len)
{
    struct run *r = j->daemon.runtime;
    struct exit_lock lock;
    exitfile_lock_parse(text, len, &lock);
    enum shim_end how = SHIM_END_UNKNOWN;
    int value = 0;
    if (r->have_status && WIFEXITED(r->wait_status)) {
        how = SHIM_END_EXITED;
        value = WEXITSTATUS(r->wait_status);
    } else if (r->have_status && WIFSIGNALED(r->wait_status)) {
        how = SHIM_END_SIGNALED;
        value = WTERMSIG(r->wait_status);
    }
    r->verdict = exit_verdict_lost(how, value, &lock, j->end_request);
    r->lost = true;
    /* Without its pid the shim never got as far as starting anything. */
    if (lock.pid > 0) {
        log_info("job %lld: gflow-shim (pid %lld) is gone without an exit file; killing what "
                 "is left of the job",
                 (long long)j->id, (long long)lock.pid);
        r->orphans = orphans_new(j->id, (pid_t)lock.pid, lock.start, lock.supervisor != NULL,
                                 lock.cgroups, lock.n_cgroups);
    }
    exitfile_lock_free(&lock);
}

/* Ends a job whose shim is gone: by the exit record in its lock file (or, from a shim
 * of a previous version, in its exit file); else, once nothing of the job is left, by
 * its lock file's lines. Until then the job stays R and keeps its GPUs. */
static void collect(struct gflowd *d, struct job *j)
{
    struct run *r = j->daemon.runtime;
    if (!r->lost) {
        char *text;
        size_t len;
        if (read_lock_text(d, j->id, &text, &len) < 0) {
            collect_later(r, "lock file");
            return;
        }
        struct exit_record rec;
        if (exitfile_lock_record(text, len, &rec) == 0) {
            free(text);
            apply_record(d, j, &rec);
            return;
        }
        int rc = run_apply_exit_file(d, j);
        if (rc == 0 || rc == -2) {
            free(text);
            if (rc == -2)
                collect_later(r, "exit file");
            return;
        }
        collect_lost(j, text, len);
        free(text);
    }
    if (r->orphans && !orphans_round(r->orphans)) {
        r->round_delay = r->round_delay ? r->round_delay * 2 : RUNNER_ROUND_MIN_SECS;
        if (r->round_delay > RUNNER_ROUND_MAX_SECS)
            r->round_delay = RUNNER_ROUND_MAX_SECS;
        r->gone_timer = loop_add_timer(
            orphans_stuck(r->orphans) ? RUNNER_STUCK_SECS : r->round_delay, gone_cb, r);
        return;
    }
    size_t killed = 0;
    if (r->orphans) {
        killed = orphans_killed(r->orphans);
        orphans_remove_cgroups(r->orphans);
    }
    if (killed)
        log_warn("job %lld: its shim is gone; killed %zu process%s left of it (%.0f ms)",
                 (long long)j->id, killed, killed == 1 ? "" : "es",
                 (now_mono() - r->gone_at) * 1000);
    struct exit_verdict v = r->verdict;
    r->verdict = (struct exit_verdict){0};
    exit_verdict_add_killed(&v, killed);
    apply_verdict(d, j, &v);
}

/* The shim has ended (status: our child's wait status, when have_status): no more
 * watching, no more timers; then collect what it left. */
void run_shim_gone(struct gflowd *d, struct job *j, int status, bool have_status)
{
    struct run *r = j->daemon.runtime ? j->daemon.runtime : run_new(d, j);
    run_unwatch_shim(r);
    loop_cancel_timer(r->limit_timer);
    loop_cancel_timer(r->warn_timer);
    loop_cancel_timer(r->kill_timer);
    loop_cancel_timer(r->retry_timer);
    r->limit_timer = r->warn_timer = r->kill_timer = r->retry_timer = NULL;
    r->gone = true;
    r->have_status = have_status;
    r->wait_status = status;
    r->gone_at = now_mono();
    collect(d, j);
}

/* The shim's pidfd is readable: it has exited. */
static void pidfd_cb(int fd, uint32_t events, void *arg)
{
    struct run *r = arg;
    struct job *j = jobs_get(r->d->jobs, r->job_id);
    if (!j || j->daemon.runtime != r) {
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
    run_shim_gone(r->d, j, status, have_status);
}

/* A standby's socket is readable: its job is over (SHIM_CTL_DONE), the record in the lock
 * file; the shim waits for its next job. Or the socket's end: the shim is gone, which
 * its pidfd tells. */
static void sock_cb(int fd, uint32_t events, void *arg)
{
    (void)events;
    struct run *r = arg;
    char msg[SHIM_CTL_MAX], what;
    int64_t id;
    int value;
    ssize_t n = recv(fd, msg, sizeof(msg), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    struct job *j = jobs_get(r->d->jobs, r->job_id);
    if (n <= 0 || exitfile_ctl_parse(msg, (size_t)n, &what, &id, &value) < 0 ||
        what != SHIM_CTL_DONE || id != r->job_id || !j || j->daemon.runtime != r || r->gone) {
        run_close_sock(r);
        return;
    }
    char *text;
    size_t len;
    struct exit_record rec;
    if (read_lock_text(r->d, j->id, &text, &len) < 0 || exitfile_lock_record(text, len, &rec) < 0) {
        free(text);
        run_close_sock(r); /* the shim exits: its pidfd tells, and collect() looks again */
        return;
    }
    free(text);
    struct gflowd *d = r->d; /* r is gone once the record is applied */
    pid_t pid = r->pid;
    int64_t start = r->start;
    loop_del_fd(fd);
    r->sock = -1; /* the standby's again */
    fdres_count(&d->fds, FDRES_JOBS, -1);
    run_unwatch_shim(r);
    r->gone = true;
    apply_record(d, j, &rec);
    launch_standby_back(d, pid, start, fd);
}

/* Whether the job's shim hears of it on a socket (the supervisor's, a standby's) rather
 * than by signals, which a shim that runs job after job could get for the wrong one. */
static bool run_has_ctl(const struct run *r)
{
    return r->sup || r->sock >= 0;
}

/* Says what (SHIM_CTL_TERM, _FORWARD with value) about the job on that socket. */
static int run_ctl_send(struct run *r, char what, int value)
{
    return r->sup ? launch_supervisor_send(r->sup, what, r->job_id, value)
                  : launch_ctl_send(r->sock, what, r->job_id, value);
}

/* Queues SIGUSR1 with value to the shim, or says it on its socket. */
static int shim_queue(struct run *r, int value)
{
    return run_has_ctl(r) ? run_ctl_send(r, SHIM_CTL_FORWARD, value)
                          : sys_pidfd_queue(r->pidfd, value);
}

/* Whether the run's shim can be told anything: watched, or the supervisor's job. */
static bool run_reachable(const struct run *r)
{
    return r->pidfd >= 0 || r->sup;
}

void runner_supervised_done(struct gflowd *d, int64_t id)
{
    struct job *j = jobs_get(d->jobs, id);
    struct run *r = j && j->state == JOB_RUNNING ? j->daemon.runtime : NULL;
    if (!r || !r->sup || r->gone)
        return;
    run_shim_gone(d, j, 0, false); /* reads the record from the lock file */
}

void runner_supervisor_gone(struct gflowd *d, struct supervisor *s, int status, bool have_status)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    struct job **copy = xmalloc((n ? n : 1) * sizeof(*copy));
    memcpy(copy, running, n * sizeof(*copy));
    for (size_t i = 0; i < n; i++) {
        struct run *r = copy[i]->daemon.runtime;
        if (!r || r->sup != s)
            continue;
        r->sup = NULL; /* s goes with this */
        if (!r->gone)
            run_shim_gone(d, copy[i], status, have_status);
    }
    free(copy);
}

/* ---- time limits and --signal ---- */

/* The job of a timer's run, if it still runs under that run. */
struct job *run_timer_job(struct run *r)
{
    struct job *j = jobs_get(r->d->jobs, r->job_id);
    return j && j->state == JOB_RUNNING && j->daemon.runtime == r && !r->gone ? j : NULL;
}

static void limit_cb(void *arg)
{
    struct run *r = arg;
    r->limit_timer = NULL;
    struct job *j = run_timer_job(r);
    if (!j || j->end_request != JOB_END_NONE)
        return;
    log_info("job %lld reached its time limit", (long long)j->id);
    runner_request_end(r->d, j, JOB_END_TIMEOUT);
}

/* Sends the --signal warning (through the shim, which notes it in the lock file). */
static void send_warning(struct run *r, struct job *j, bool late)
{
    if (j->end_request != JOB_END_NONE || !run_reachable(r))
        return;
    int value = j->warn_signal | (j->warn_main_only ? SHIM_FORWARD_MAIN_ONLY : 0);
    if (shim_queue(r, value) < 0) {
        if (errno != ESRCH && errno != EPIPE)
            log_warn("job %lld: queueing %s for the job: %m", (long long)j->id,
                     job_signal_name(j->warn_signal));
        return;
    }
    log_info("job %lld: sent %s%s, %s", (long long)j->id, job_signal_name(j->warn_signal),
             j->warn_main_only ? " (main process)" : "",
             late ? "late: its moment passed while gflowd was down" : "before its time limit");
}

static void warn_cb(void *arg)
{
    struct run *r = arg;
    r->warn_timer = NULL;
    struct job *j = run_timer_job(r);
    if (j)
        send_warning(r, j, false);
}

/* The time limit's timer and, with --signal, the warning's (SECS before the limit),
 * unless the shim says it has passed a warning on already (warned: the lock file's
 * "forwarded" line; a job is warned once). A re-adopted job whose warning's moment
 * passed while no daemon ran gets it at once, before anything else; if its time limit
 * passed too, the limit's timer fires on the next loop iteration, so the SIGTERM that
 * ends it follows the warning. */
void run_arm_time_limit(struct job *j, struct run *r, bool warned)
{
    if (j->time_limit <= 0)
        return;
    double now = now_wall();
    double limit_at = j->start_time + (double)j->time_limit;
    if (j->warn_signal > 0 && !warned && !r->warn_timer) {
        double at = limit_at - (double)j->warn_secs;
        if (at <= now && !r->our_child)
            send_warning(r, j, true);
        else
            r->warn_timer = loop_add_timer(at > now ? at - now : 0, warn_cb, r);
    }
    r->limit_timer = loop_add_timer(limit_at - now, limit_cb, r);
}

/* ---- launch ---- */

/* Starts watching the shim through a pidfd. 0, or -1 if it is already gone (or no
 * pidfd can be opened now: errno). */
int run_watch_shim(struct run *r, pid_t pid)
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
    fdres_count(&r->d->fds, FDRES_JOBS, 1); /* the jobs' reserve (fdres.h) */
    return 0;
}

/* Our shim's pidfd could not be opened (out of file descriptors): until it can, the
 * shim is unwatched but cannot be lost (an unreaped child keeps its pid). */
static void watch_retry_cb(void *arg)
{
    struct run *r = arg;
    r->retry_timer = NULL;
    struct job *j = run_timer_job(r);
    if (j && run_watch_shim(r, r->pid) < 0)
        r->retry_timer = loop_add_timer(0.1, watch_retry_cb, r);
}

/* Puts a job that was committed as R but never launched back in the queue. */
void run_put_back(struct gflowd *d, struct job *j)
{
    run_free(j);
    j->start_time = 0;
    j->shim_pid = 0;
    j->shim_start = 0;
    free(j->cpus);
    j->cpus = NULL;
    j->cpus_far = 0;
    jobs_set_state(d->jobs, j, JOB_QUEUED, JOB_REASON_NONE, 0, NULL);
    cleanup_files_after_commit(d, j, false);
}

void runner_postpone(struct gflowd *d, struct job *j)
{
    log_info("job %lld: launch put off (launches wait for resources); queued again",
             (long long)j->id);
    run_put_back(d, j);
}

bool runner_launch(struct gflowd *d, struct job *j)
{
    if (j->end_request == JOB_END_PREEMPT) { /* preempted before it was launched */
        requeue_preempted(d, j);
        return true;
    }
    if (j->end_request == JOB_END_GPU_FAULT) { /* its GPU failed before the launch */
        struct exit_verdict v = {JOB_FAILED, JOB_REASON_GPU_FAULT, NULL};
        apply_verdict(d, j, &v);
        return true;
    }
    if (j->end_request != JOB_END_NONE) { /* cancelled while its launch waited for a commit */
        bool timeout = j->end_request == JOB_END_TIMEOUT;
        finish(d, j, timeout ? JOB_TIMEOUT : JOB_CANCELLED,
               timeout ? JOB_REASON_TIME_LIMIT : JOB_REASON_CANCELLED_BY_USER, NULL);
        return true;
    }
    pid_t pid;
    int64_t start;
    int sock;
    struct supervisor *sup;
    char *err;
    job_gpu_use_clear(j); /* a new run's figures (a requeued job had some) */
    free(j->cpus);        /* chosen afresh for each run (saved with the start below) */
    j->cpus = cpupin_choose(d, j, &j->cpus_far);
    enum launch_result lr = launch_shim(d, j, &pid, &start, &sock, &sup, &err);
    if (lr == LAUNCH_USER_LOOKUP) { /* never failed for it: waits for the answer */
        log_info("job %lld: launch put off: %s; queued again, waiting for its user (UserLookup)",
                 (long long)j->id, err);
        free(err);
        jobs_user_wait(d->jobs, j);
        run_put_back(d, j);
        return false;
    }
    if (lr == LAUNCH_SHORT || lr == LAUNCH_NO_SPACE) { /* not the job's fault */
        log_warn("job %lld: launch put off: %s; queued again", (long long)j->id, err);
        free(err);
        if (lr == LAUNCH_NO_SPACE) /* no job starts until there is room */
            disk_note_full(d->disk, d->paths.data_dir);
        run_put_back(d, j);
        return false;
    }
    if (lr == LAUNCH_FAILED) {
        log_error("job %lld: launch failed: %s", (long long)j->id, err);
        finish(d, j, JOB_FAILED, JOB_REASON_LAUNCH_FAILED, err);
        free(err);
        return true;
    }
    struct run *r = run_new(d, j);
    r->our_child = true;
    j->shim_pid = pid;
    j->shim_start = start;
    r->start = start;
    if (sock >= 0 && loop_add_fd(sock, EPOLLIN, sock_cb, r) < 0)
        close(sock); /* the shim exits once its job is over, as a shim of one job does */
    else if (sock >= 0) {
        r->sock = sock;
        fdres_count(&d->fds, FDRES_JOBS, 1);
    }
    if (sup) { /* its socket says when the job is over */
        r->sup = sup;
        launch_supervisor_use(sup);
    } else if (run_watch_shim(r, pid) < 0) {
        log_warn("job %lld: pidfd_open(%ld): %m; trying again", (long long)j->id, (long)pid);
        r->retry_timer = loop_add_timer(0.1, watch_retry_cb, r);
    }
    run_arm_time_limit(j, r, false);
    jobs_save(d->jobs, j);
    log_info("job %lld started (shim pid %ld)", (long long)j->id, (long)pid);
    if (j->gpu_mask) { /* a first reading for its accounting soon, not at the next poll */
        size_t n;
        struct job **running = jobs_running(d->jobs, &n);
        gpu_refresh(d->gpus, running, n);
    }
    return true;
}

/* ---- ending ---- */

void runner_signal(struct job *j, int sig)
{
    struct run *r = j->daemon.runtime;
    if (!r || !run_reachable(r))
        return;
    if (run_has_ctl(r) && sig == SIGTERM) {
        if (run_ctl_send(r, SHIM_CTL_TERM, 0) < 0)
            log_warn("job %lld: cannot tell its shim to end it: %m", (long long)j->id);
        return;
    }
    if (sys_pidfd_send_signal(r->pidfd, sig, NULL) < 0 && errno != ESRCH)
        log_warn("job %lld: signal %d: %m", (long long)j->id, sig);
}

void runner_signal_cb(void *arg, struct job *j, int sig)
{
    runner_signal(j, sig);
}

void runner_request_end(struct gflowd *d, struct job *j, enum job_end_request why)
{
    /* A cancel wins over a preemption in progress: the job ends instead of being queued
     * again. */
    if (j->end_request == JOB_END_NONE ||
        (j->end_request == JOB_END_PREEMPT && why == JOB_END_CANCEL)) {
        j->end_request = why;
        jobs_save(d->jobs, j);
    }
    jobs_after_commit_signal(d->jobs, j->id, SIGTERM);
}

/* ---- preemption ---- */

/* Passes sig on to the job's processes through the shim (which stays to report). */
static void forward_signal(struct run *r, struct job *j, int sig)
{
    if (!run_reachable(r) || shim_queue(r, sig) == 0 || errno == ESRCH || errno == EPIPE)
        return;
    log_warn("job %lld: queueing %s for the job: %m", (long long)j->id, job_signal_name(sig));
}

static void preempt_kill_cb(void *arg)
{
    struct run *r = arg;
    r->kill_timer = NULL;
    struct job *j = run_timer_job(r);
    if (!j || j->end_request != JOB_END_PREEMPT)
        return;
    log_info("job %lld: still running %g s after the preemption's SIGTERM; sending SIGKILL",
             (long long)j->id, r->preempt_grace);
    forward_signal(r, j, SIGKILL);
}

/* Once the preemption is committed: SIGTERM now, SIGKILL after the grace. */
static void preempt_term_cb(void *arg, int64_t id)
{
    struct gflowd *d = arg;
    struct job *j = jobs_get(d->jobs, id);
    if (!j || j->state != JOB_RUNNING || j->end_request != JOB_END_PREEMPT || !j->daemon.runtime)
        return;
    struct run *r = j->daemon.runtime;
    if (r->gone)
        return;
    forward_signal(r, j, SIGTERM);
    loop_cancel_timer(r->kill_timer);
    r->kill_timer = loop_add_timer(r->preempt_grace, preempt_kill_cb, r);
}

void runner_preempt(struct gflowd *d, struct job *j, int64_t by, double grace)
{
    struct run *r = j->daemon.runtime;
    if (!r || j->end_request != JOB_END_NONE)
        return;
    j->end_request = JOB_END_PREEMPT;
    j->preempted_by = by;
    jobs_save(d->jobs, j);
    r->preempt_grace = grace;
    jobs_after_commit_call(d->jobs, preempt_term_cb, d, j->id);
}

void runner_shutdown(struct gflowd *d)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    gpuacct_run_save(d); /* the next daemon goes on from these figures */
    for (size_t i = 0; i < n; i++)
        run_free(running[i]); /* the shims go on; a restarted daemon re-adopts them */
}

/* ---- a lost transaction ---- */

/* What a lost transaction undid and gflowd must do again waits this long: the disk may
 * still be full, and each try that fails costs a reload. */
#define RUNNER_REDO_SECS 1.0

int runner_reload(struct gflowd *d)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    struct run **runs = xcalloc(n ? n : 1, sizeof(*runs));
    size_t n_runs = n;
    for (size_t i = 0; i < n; i++) {
        runs[i] = running[i]->daemon.runtime;
        running[i]->daemon.runtime = NULL;
    }
    char *err = NULL;
    if (jobs_reload(d->jobs, &err) < 0) {
        loop_fail("cannot read the jobs back from the database (%s); exiting so that a restart "
                  "recovers them (running jobs keep running)",
                  err);
        free(err);
        for (size_t i = 0; i < n; i++) /* the table is unchanged: its watches go back */
            running[i]->daemon.runtime = runs[i];
        free(runs);
        return -1;
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
            run_adopt_later(r, RUNNER_REDO_SECS);
            continue;
        }
        j->daemon.runtime = r;
        if (r->pid > 0 && (j->shim_pid != r->pid || j->shim_start != r->start)) {
            j->shim_pid = r->pid; /* its launch was recorded in the lost transaction */
            j->shim_start = r->start;
            jobs_save(d->jobs, j);
        }
        /* A time limit whose request to end the job was undone is due again. */
        if (!r->gone && !r->limit_timer && j->time_limit > 0 && j->end_request == JOB_END_NONE)
            r->limit_timer = loop_add_timer(RUNNER_REDO_SECS, limit_cb, r);
    }
    for (size_t k = 0; k < n_runs; k++) {
        if (!runs[k])
            continue;
        log_warn("job %lld: its shim (pid %ld) is no longer running in the database's view; "
                 "no longer watched",
                 (long long)runs[k]->job_id, (long)runs[k]->pid);
        run_destroy(runs[k]);
    }
    free(runs);
    return 0;
}
