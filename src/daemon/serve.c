/* serve: the serving daemon. Sets up everything (its open-file limit, lock, data
 * directories, store, job table, GPUs, recovery of the running jobs, the HTTP server),
 * then runs the loop. Once per loop iteration, before it sleeps: the scheduling pass,
 * the group commit, the replies that waited for it, then the launches (a job is
 * committed as R before its shim is forked, so a crash can never start it twice). A
 * launch put off for lack of a resource holds launches (and so the pass) back for a
 * growing while. Also the timers that belong to no single module: the GPU poll, the
 * --begin wake-up, the idle checkpoint, the end of a launch hold.
 *
 * A full disk: while the data or log filesystem is full (disk.c) no pass runs, so no job
 * starts, and a timer looks again every second. A commit that SQLite rolls back (disk
 * full, I/O error) is undone in memory instead of the daemon exiting: the job table is
 * reloaded from the database, the requests that waited for that commit get an error
 * (reads are answered again), and what gflowd had recorded itself (a job's end, a time
 * limit) is redone from the jobs' files a second later (runner_reload). Nothing that
 * was acknowledged is lost, nothing lost was acknowledged, and gflowd carries on by
 * itself once there is room. */
#include "serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/slurm/slurm.h"
#include "clock.h"
#include "daemon.h"
#include "files.h"
#include "gflow_build.h"
#include "gpu/gpu.h"
#include "gpu/gpu_recent.h"
#include "gpu/gpu_samples.h"
#include "http/api.h"
#include "http/events.h"
#include "jobs/jobs.h"
#include "jobs/priority.h"
#include "lockfile.h"
#include "log.h"
#include "loop.h"
#include "ops/disk.h"
#include "ops/notify.h"
#include "ops/reload.h"
#include "ops/sdnotify.h"
#include "ops/startopts.h"
#include "ops/triage_run.h"
#include "parse.h"
#include "paths.h"
#include "policy/quota_state.h"
#include "policy/reservation_table.h"
#include "procinfo.h"
#include "run/cgleaf.h"
#include "run/gpuacct_run.h"
#include "run/gpufault.h"
#include "run/launch.h"
#include "run/preempt_run.h"
#include "run/runner.h"
#include "run/stray_run.h"
#include "store/store.h"
#include "userdb.h"
#include "util.h"

#define CHECKPOINT_IDLE_SECS 0.5
/* After a launch put off for lack of a resource, launches wait this long, doubling up
 * to the maximum while they keep failing. */
#define LAUNCH_HOLD_MIN_SECS 0.1
#define LAUNCH_HOLD_MAX_SECS 5.0
/* The next standby shim is started this long after the last one was handed a job: not
 * in the middle of that job's start, which it would compete with for the CPU. */
#define STANDBY_DELAY_SECS 0.01

/* The loop's state between iterations. */
struct server {
    struct gflowd *d;
    struct job **to_launch; /* committed as R, shims not forked yet */
    size_t to_launch_len;
    struct loop_timer *retry_timer, *checkpoint_timer, *poll_timer, *pass_timer;
    struct loop_timer *launch_timer;  /* launches held back until it fires */
    struct loop_timer *standby_timer; /* starts the next standby shim (launch.h) */
    double launch_hold;               /* how long the last hold was (0: none) */
    double pass_timer_at;
    double last_commit;
    int lost_in_a_row; /* transactions lost since the last commit that worked */
    /* History retention (daemon.keep_finished; -1: not by count, not by age). */
    struct loop_timer *prune_timer;
    int64_t keep_count, keep_age, prune_cursor;
    struct gpu_samples samples; /* GPU utilisation for gstats --gpu (d->samples) */
    struct gpu_recent recent;   /* the last 10 minutes, for the dashboard (d->recent) */
    /* While it starts: the daemon's lock (-1: not held yet), which a failed start empties
     * and releases before saying so, so that `gflowd up` returns with no holder named
     * (and a new start may follow at once); and whether gflowd is in its cgroup leaf,
     * whose controllers a failed start gives back. */
    int starting_lock_fd;
    bool in_leaf;
    struct sdnotify systemd; /* where READY=1 and STOPPING=1 go (sdnotify.h) */
};

/* Pruning the history: PRUNE_ROWS jobs looked at per step, PRUNE_BUSY_SECS apart while
 * there is more to look at (the loop serves requests between steps); once the whole
 * history has been looked at, again after PRUNE_IDLE_COUNT_SECS (by count: a cheap look at
 * the counts first) or PRUNE_IDLE_AGE_SECS (by age: the history is read again). */
#define PRUNE_ROWS 1000
#define PRUNE_BUSY_SECS 0.02
#define PRUNE_FIRST_SECS 1.0
#define PRUNE_IDLE_COUNT_SECS 10.0
#define PRUNE_IDLE_AGE_SECS 300.0

static void report_ready(const struct serve_opts *o, const char *msg)
{
    if (o->ready_fd < 0)
        return;
    ssize_t w = write(o->ready_fd, msg, strlen(msg));
    (void)w;
    close(o->ready_fd);
}

static void startup_failed(struct server *s, const struct serve_opts *o, const char *msg)
{
    log_error("%s", msg);
    if (s->in_leaf)
        cgleaf_leave(s->d);
    if (s->starting_lock_fd >= 0) {
        if (ftruncate(s->starting_lock_fd, 0) < 0)
            log_warn("cannot empty the lock file: %s", strerror(errno));
        close(s->starting_lock_fd);
        s->starting_lock_fd = -1;
    }
    char *line = xasprintf("error: %s\n", msg);
    report_ready(o, line);
    free(line);
    exit(1);
}

/* ---- timers ---- */

static void retry_cb(void *arg)
{
    struct server *s = arg;
    s->retry_timer = NULL; /* the wake-up is all: the next iteration commits again */
}

static void checkpoint_cb(void *arg)
{
    struct server *s = arg;
    s->checkpoint_timer = NULL;
    double idle = now_mono() - s->last_commit;
    if (idle < CHECKPOINT_IDLE_SECS) {
        s->checkpoint_timer = loop_add_timer(CHECKPOINT_IDLE_SECS - idle, checkpoint_cb, s);
        return;
    }
    if (!store_in_transaction(s->d->store))
        store_checkpoint(s->d->store);
}

static void prune_cb(void *arg)
{
    struct server *s = arg;
    s->prune_timer = NULL;
    double before = s->keep_age >= 0 ? now_wall() - (double)s->keep_age : 0;
    int64_t n = store_prune(s->d->store, s->keep_count, before, &s->prune_cursor, PRUNE_ROWS);
    if (n < 0)
        log_error("pruning the history: %s", store_error(s->d->store));
    else if (n > 0)
        log_info("history: %lld finished job%s pruned (daemon.keep_finished)", (long long)n,
                 plural_s(n));
    double next = n >= 0 && s->prune_cursor ? PRUNE_BUSY_SECS
                  : s->keep_count >= 0      ? PRUNE_IDLE_COUNT_SECS
                                            : PRUNE_IDLE_AGE_SECS;
    s->prune_timer = loop_add_timer(next, prune_cb, s);
}

/* Every daemon.gpu_poll_interval_secs: outside processes and memory change without us.
 * The read runs on gpu.c's worker; its answer comes through gpu_ready_cb. */
static void poll_cb(void *arg)
{
    struct server *s = arg;
    size_t n;
    struct job **running = jobs_running(s->d->jobs, &n);
    if (gpu_refresh(s->d->gpus, running, n))
        jobs_mark_dirty(s->d->jobs);
    if (!daemon_on_slurm(s->d))
        stray_run(s->d);
    s->poll_timer = loop_add_timer((double)s->d->cfg.gpu_poll_interval_secs, poll_cb, s);
}

/* One utilisation sample per GPU per poll (reads that come sooner, after a job started
 * or ended, are not sampled). */
static void record_gpu_samples(struct server *s)
{
    struct gflowd *d = s->d;
    double now = now_mono();
    double half = d->cfg.gpu_poll_interval_secs * 0.5;
    if (s->recent.last <= 0 || now - s->recent.last >= half)
        gpu_recent_take(&s->recent, gpu_current(d->gpus), now, now_wall());
    if (disk_full(d->disk) ||
        (s->samples.last > 0 && now - s->samples.last < d->cfg.gpu_poll_interval_secs * 0.5))
        return;
    gpu_samples_take(&s->samples, d->store, gpu_current(d->gpus), now, now_wall());
}

/* The NVML worker answered (a read, or NVML opening at last). */
static void gpu_ready_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct server *s = arg;
    size_t n;
    struct job **running = jobs_running(s->d->jobs, &n);
    if (gpu_collect(s->d->gpus, running, n))
        jobs_mark_dirty(s->d->jobs);
    if (!daemon_on_slurm(s->d)) {
        run_gpu_faults(s->d); /* a GPU lost under its jobs ends them */
        stray_run(s->d);
        gpuacct_run_read(s->d);
    }
    record_gpu_samples(s);
    events_gpus_read(s->d->events);
}

/* Xid errors came (gpu_xid.c's thread): a fatal one drains its GPU and ends its jobs. */
static void xid_ready_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct server *s = arg;
    if (gpu_xid_collect(s->d->gpus))
        jobs_mark_dirty(s->d->jobs);
    if (!daemon_on_slurm(s->d))
        run_gpu_faults(s->d);
}

/* One timer, at the earliest time the pass itself said it must run again (a --begin
 * time, backfill's plan changing), that makes the next loop iteration run a pass (no
 * polling). */
static void pass_cb(void *arg)
{
    struct server *s = arg;
    s->pass_timer = NULL;
    s->pass_timer_at = 0;
    jobs_mark_dirty(s->d->jobs);
}

static void arm_pass_timer(struct server *s, double at)
{
    if (at == s->pass_timer_at && (s->pass_timer || at == 0))
        return;
    loop_cancel_timer(s->pass_timer);
    s->pass_timer = NULL;
    s->pass_timer_at = at;
    if (at > 0) {
        double delay = at - now_wall();
        s->pass_timer = loop_add_timer(delay > 0 ? delay : 0, pass_cb, s);
    }
}

/* The launch hold is over: a pass may start jobs again. */
static void launch_cb(void *arg)
{
    struct server *s = arg;
    s->launch_timer = NULL;
    jobs_mark_dirty(s->d->jobs);
}

static void standby_cb(void *arg)
{
    struct server *s = arg;
    s->standby_timer = NULL;
    launch_standby_start(s->d);
}

/* A launch was put off for lack of a resource: none for a while, longer each time. */
static void hold_launches(struct server *s)
{
    s->launch_hold = s->launch_hold ? s->launch_hold * 2 : LAUNCH_HOLD_MIN_SECS;
    if (s->launch_hold > LAUNCH_HOLD_MAX_SECS)
        s->launch_hold = LAUNCH_HOLD_MAX_SECS;
    loop_cancel_timer(s->launch_timer);
    s->launch_timer = loop_add_timer(s->launch_hold, launch_cb, s);
    log_info("launches held back for %.1f s", s->launch_hold);
}

/* ---- each iteration ---- */

/* SQLite rolled the transaction back: memory holds changes the database does not. They
 * are undone by reloading the jobs from what was committed, as a restart would, without
 * one: the shims that run are still watched, the requests that waited get an error (a
 * read is answered again), and the runner redoes what gflowd recorded itself. */
static void undo_lost(struct server *s)
{
    struct gflowd *d = s->d;
    bool space = store_lost_for_space(d->store);
    /* While the disk stays full this repeats every second: said once, then at debug. */
    if (s->lost_in_a_row++ == 0)
        log_error("the database lost a transaction (%s); undoing it in memory and carrying "
                  "on (what gflowd recorded itself is redone until it can be saved)",
                  store_lost_error(d->store));
    else
        log_debug("the database lost a transaction again (%s)", store_lost_error(d->store));
    char *why;
    if (space) {
        disk_note_full(d->disk, d->paths.db_path);
        disk_full(d->disk);
        const char *problem = disk_problem(d->disk);
        why = xasprintf("not saved: %s",
                        problem ? problem : "the database's filesystem is full; free some space");
    } else {
        why = xasprintf("not saved: the database could not commit the change (%s); nothing "
                        "was changed, try again",
                        store_lost_error(d->store));
    }
    store_rollback(d->store);
    events_lost(d->events);
    gpu_samples_lost(d->samples);
    free(s->to_launch); /* committed as R in the lost transaction only */
    s->to_launch = NULL;
    s->to_launch_len = 0;
    if ((daemon_on_slurm(d) ? slurm_reload(d) : runner_reload(d)) < 0) {
        free(why); /* the loop stops; the waiting requests end with their connections */
        return;
    }
    resv_free(d->resv);
    char *resv_err = NULL;
    if (resv_load(d->resv, d->store, &resv_err) < 0) {
        log_error("%s", resv_err);
        free(resv_err);
    }
    gpu_settings_undo(d->gpus);
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    gpu_refresh(d->gpus, running, n);
    api_redo_waiting(d->api, space ? 507 : 503, why);
    free(why);
}

/* Commit; on failure, come back in a second (nothing waiting is released meanwhile).
 * A transaction SQLite rolled back is undone in memory (undo_lost). */
static bool commit(struct server *s)
{
    bool had_changes = store_in_transaction(s->d->store);
    if (jobs_commit(s->d->jobs) < 0) {
        if (store_transaction_lost(s->d->store))
            undo_lost(s);
        if (!s->retry_timer)
            s->retry_timer = loop_add_timer(1.0, retry_cb, s);
        return false;
    }
    if (s->lost_in_a_row && had_changes) {
        log_info("the database commits again (after %d lost transaction%s)", s->lost_in_a_row,
                 s->lost_in_a_row == 1 ? "" : "s");
        s->lost_in_a_row = 0;
    }
    if (had_changes) {
        events_committed(s->d->events);
        gpu_samples_committed(&s->samples);
        notifier_after_commit(s->d->notifier);
        gpu_settings_committed(s->d->gpus);
        s->last_commit = now_mono();
        if (!s->checkpoint_timer)
            s->checkpoint_timer = loop_add_timer(CHECKPOINT_IDLE_SECS, checkpoint_cb, s);
    }
    return true;
}

/* How many jobs may run at once within the jobs' reserve of descriptors: those running
 * now, and as many more as the free part of the reserve holds at FDRES_JOB_FDS each,
 * less what the launches not made yet will take. Out of descriptors the daemon could
 * neither take a connection nor notice a job's end; jobs wait instead. */
static int64_t job_fd_cap(const struct server *s)
{
    struct gflowd *d = s->d;
    int64_t room = fdres_free(&d->fds, FDRES_JOBS);
    if (room == INT64_MAX)
        return INT64_MAX;
    size_t running;
    jobs_running(d->jobs, &running);
    room -= (int64_t)s->to_launch_len * FDRES_JOB_FDS;
    int64_t cap = (int64_t)running + (room > 0 ? room / FDRES_JOB_FDS : 0);
    return cap > 0 ? cap : 1;
}

/* The scheduling pass, on the GPUs and memory as they are now. None while the disk is
 * full: a job could not record its start or write its log; a timer looks again. */
static void schedule(struct server *s)
{
    struct gflowd *d = s->d;
    if (disk_full(d->disk)) {
        if (!s->retry_timer)
            s->retry_timer = loop_add_timer(1.0, retry_cb, s);
        return;
    }
    if (s->launch_timer)
        return; /* launches are held back: the pass waits (launch_cb marks it due) */
    struct job **started;
    double next_pass;
    size_t n;
    if (daemon_on_slurm(d)) { /* Slurm places them: every job that may start is handed over */
        n = jobs_hand_over(d->jobs, now_wall(), &started, &next_pass);
        if (next_pass >= 0)
            arm_pass_timer(s, next_pass);
        goto launch;
    }
    struct jobs_machine m = {
        .gpus = gpu_schedulable(d->gpus),
        .allowed = scheduler_allowed_mask(gpu_allowed(d->gpus)),
        .unmanaged = gpu_unmanaged(d->gpus),
        .memory_total_mb = d->mem_total_mb,
        .mig_unmanaged = gpu_mig_unmanaged(d->gpus),
        .max_running_jobs = d->cfg.max_running_jobs,
        .outside_mib = gpu_outside_mib(d->gpus),
        .closed = gpu_closed(d->gpus),
        .no_share = gpu_no_share(d->gpus),
        .backfill = d->cfg.scheduler_backfill,
        .backfill_depth = (int)(d->cfg.scheduler_backfill_depth < SCHEDULER_BACKFILL_MAX_DEPTH
                                    ? d->cfg.scheduler_backfill_depth
                                    : SCHEDULER_BACKFILL_MAX_DEPTH),
        .priority = priority_weights_of(&d->cfg),
        .may_start = launch_user_ready,
        .may_start_arg = d,
    };
    m.default_time_limit = (double)d->cfg.parsed.default_time_limit_secs;
    m.untimed_plan = d->cfg.parsed.default_time_plan;
    int64_t fd_cap = job_fd_cap(s);
    if (m.max_running_jobs == 0 || m.max_running_jobs > fd_cap)
        m.max_running_jobs = fd_cap;
    m.strategy = (enum gpualloc_strategy)d->cfg.parsed.gpu_allocation_strategy;
    m.untimed_outside = d->cfg.parsed.backfill_untimed == CONFIG_UNTIMED_OUTSIDE;
    double now = now_wall();
    m.reservations = resv_current(d->resv, now, &m.n_reservations);
    m.held_gpus = preemption_held_gpus(d, &m);
    n = jobs_schedule(d->jobs, &m, now, &started, &next_pass);
    if (next_pass >= 0) { /* a pass ran */
        /* A reservation's start or end changes what may run: a pass then too. */
        double change = resv_next_change(d->resv, now);
        if (change > 0 && (next_pass == 0 || change < next_pass))
            next_pass = change;
        arm_pass_timer(s, next_pass);
        preemption_run(d, &m);
    }
launch:
    if (!n)
        return;
    s->to_launch = xrealloc(s->to_launch, (s->to_launch_len + n) * sizeof(*s->to_launch));
    memcpy(s->to_launch + s->to_launch_len, started, n * sizeof(*started));
    s->to_launch_len += n;
    free(started);
}

/* User lookups answered (userdb.h): the jobs that waited for them (UserLookup) are tried
 * again, and an admin group a reload could not look up is looked up again. */
static void users_answered_cb(void *arg)
{
    struct gflowd *d = arg;
    jobs_users_answered(d->jobs);
    if (d->admin_group_pending)
        daemon_resolve_admin_group(d);
}

static void before_sleep(void *arg)
{
    struct server *s = arg;
    struct gflowd *d = s->d;
    api_poll(d->api);
    schedule(s);
    if (!commit(s))
        return;
    api_release_waiting(d->api);
    if (s->to_launch_len) {
        size_t count = s->to_launch_len;
        struct job **list = s->to_launch;
        s->to_launch = NULL;
        s->to_launch_len = 0;
        bool held = false;
        for (size_t i = 0; i < count; i++) {
            if (daemon_on_slurm(d)) {
                slurm_launch(d, list[i]);
            } else if (held) {
                runner_postpone(d, list[i]);
            } else if (!runner_launch(d, list[i])) {
                held = true;
                hold_launches(s);
            } else {
                s->launch_hold = 0;
            }
        }
        free(list);
        if (!daemon_on_slurm(d) && !launch_standby_ready(d) && !s->standby_timer)
            s->standby_timer = loop_add_timer(STANDBY_DELAY_SECS, standby_cb, s);
        if (!commit(s))
            return;
        api_release_waiting(d->api);
    }
    jobs_collect(d->jobs);
}

/* ---- set-up ---- */

/* SIGTERM/SIGINT stop the daemon; SIGHUP reloads the configuration (gflowd reload). */
static void signal_cb(int fd, uint32_t events, void *arg)
{
    (void)events;
    struct gflowd *d = arg;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            log_info("received %s; stopping (running jobs keep running)",
                     job_signal_name((int)si.ssi_signo));
            loop_stop();
        } else if (si.ssi_signo == SIGHUP) {
            log_info("received SIGHUP; reloading the configuration");
            char *err = NULL;
            json_t *report = daemon_reload(d, &err);
            if (report)
                events_daemon(d->events, "reloaded");
            json_decref(report);
            free(err);
        }
    }
}

static int setup_signals(struct gflowd *d)
{
    signal(SIGPIPE, SIG_IGN);
    /* An ignored signal never reaches a signalfd (nohup ignores SIGHUP, say). */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0 || loop_add_fd(fd, EPOLLIN, signal_cb, d) < 0)
        return -1;
    return fd;
}

/* How the shim holds jobs to --memory here, as the shim itself finds out (it tries a
 * throw-away cgroup): "cgroup v2", "cgroup v1" or "watchdog". */
static const char *probe_memory_enforcement(const char *shim_path)
{
    static char method[64];
    char *quoted = shell_quote(shim_path);
    char *cmd = xasprintf("%s --probe-memory 2>/dev/null", quoted);
    free(quoted);
    FILE *f = popen(cmd, "r");
    free(cmd);
    if (!f || !fgets(method, sizeof(method), f))
        snprintf(method, sizeof(method), "unknown (gflow-shim --probe-memory failed)");
    if (f)
        pclose(f);
    method[strcspn(method, "\n")] = '\0';
    return method;
}

/* Raises the soft limit of open files to the hard one: every running job holds a pidfd,
 * and a launch needs a few more descriptors for a moment. The jobs get the limit gflowd
 * was started with (the shim's --nofile), as they would without it. */
static void raise_nofile(struct gflowd *d)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    d->nofile_soft = (int64_t)rl.rlim_cur;
    if (rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        log_warn("cannot raise the open-file limit from %llu: %m", (unsigned long long)was);
        return;
    }
    d->nofile_raised = true;
    log_info("open-file limit raised from %llu to %llu (jobs get %llu)", (unsigned long long)was,
             (unsigned long long)rl.rlim_max, (unsigned long long)was);
}

/* Splits the open-file limit into the reserves of fdres.h, once what the daemon holds
 * for itself is open (the store, NVML, the loop) and before the socket accepts. */
static void make_fd_reserves(struct gflowd *d)
{
    struct rlimit rl;
    int64_t open_now = fdres_open_now();
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || open_now < 0)
        return; /* no reserves: nothing is limited */
    /* The pidfds of jobs found running again are the jobs' (counted as they opened). */
    const char *warning =
        fdres_split(&d->fds, (int64_t)rl.rlim_cur, open_now - d->fds.in_use[FDRES_JOBS],
                    d->cfg.limits.max_connections);
    if (warning)
        log_warn("%s", warning);
    log_info("descriptors: limit %lld; reserved for the daemon %lld, connections %lld, jobs "
             "%lld (at most %d each); at most %lld connection%s of one user",
             (long long)d->fds.limit, (long long)d->fds.reserved[FDRES_DAEMON],
             (long long)d->fds.reserved[FDRES_CONNECTIONS], (long long)d->fds.reserved[FDRES_JOBS],
             FDRES_JOB_FDS, (long long)d->fds.user_connections,
             plural_s((long long)d->fds.user_connections));
    int64_t jobs = d->fds.reserved[FDRES_JOBS] / FDRES_JOB_FDS;
    if (jobs < 65536)
        log_info("at most %lld job%s run at once: the open-file limit is %lld (besides the "
                 "supervisor's, which hold none of the daemon's descriptors)",
                 (long long)jobs, plural_s(jobs), (long long)d->fds.limit);
}

static void start_gpus(struct server *sv, const struct serve_opts *o)
{
    struct gflowd *d = sv->d;
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    struct gpu_start_opts g = {
        .simulate = o->simulate_gpus,
        .flag_gpus = o->flag_gpus,
        .config_gpus = d->cfg.gpus,
        .nvml_library = d->cfg.nvml_library,
        .data_dir = d->paths.data_dir,
        .store = d->store,
        .running = running,
        .n_running = n,
        .gpu_id_format = d->cfg.gpu_id_format,
        .container = d->cfg.container,
        .constrain_devices = d->cfg.constrain_devices,
        .nvml_timeout_secs = d->cfg.nvml_timeout_secs,
        .unowned_memory_mib = d->cfg.unowned_memory_mib,
        .nvml_retry_max_secs = d->cfg.nvml_retry_max_secs,
        .off = daemon_on_slurm(d) && !o->simulate_gpus,
    };
    char *err = NULL;
    gpu_set_host_proc(d->cfg.host_proc); /* before the first read's owners */
    d->gpus = gpu_start(&g, &err);
    if (!d->gpus || gpu_check_flag(d->gpus, &err) < 0)
        startup_failed(sv, o, err);
    gpu_set_stray_mode(d->gpus, d->cfg.parsed.stray);
}

/* The commits of the way down, none after a failure (see serve). */
static void shutdown_commit(struct gflowd *d, bool failed)
{
    if (!failed)
        jobs_commit(d->jobs);
}

int serve(struct gflowd *d, const struct serve_opts *o)
{
    char *err = NULL;
    struct server s = {.d = d, .starting_lock_fd = -1};
    umask(077);
    sdnotify_init(&s.systemd);
    /* A bad setting stops the start before the slow parts (a large history's load). */
    if (store_keep_parse(d->cfg.keep_finished, &s.keep_count, &s.keep_age, &err) < 0)
        startup_failed(&s, o, err);
    raise_nofile(d);
    d->started_at = now_wall();
    d->shim_path = paths_companion("gflow-shim", X_OK, "../libexec", GFLOW_LIBEXECDIR);
    d->mem_total_mb = proc_mem_total_mb();
    daemon_resolve_admin_group(d);
    if (mkdir_p(d->paths.data_dir, 0700) < 0) {
        err = xasprintf("cannot create %s: %s", d->paths.data_dir, strerror(errno));
        startup_failed(&s, o, err);
    }
    pid_t holder;
    int lock_fd = lockfile_acquire(d->paths.lock_path, &holder, &err);
    if (lock_fd < 0)
        startup_failed(&s, o, err);
    s.starting_lock_fd = lock_fd;
    /* Once this is the only gflowd, and before any shim starts (the probe's too). */
    cgleaf_enter(d);
    s.in_leaf = true;
    d->memory_enforcement = probe_memory_enforcement(d->shim_path);
    startopts_save(d, o->simulate_gpus, o->flag_gpus);
    if (d->cfg.log_dir_relative)
        log_info("daemon.log_dir \"%s\" in %s is relative to that file's folder: job logs "
                 "go to %s",
                 d->cfg.log_dir_relative, d->cfg.source_path ? d->cfg.source_path : "the file",
                 d->paths.log_dir);
    for (size_t i = 0; i < d->cfg.n_warnings; i++)
        log_warn("config: %s", d->cfg.warnings[i]);
    if (runner_init(d, &err) < 0)
        startup_failed(&s, o, err);
    d->disk = disk_new(d->paths.data_dir, d->paths.log_dir);
    d->store = store_open(d->paths.db_path, &err);
    if (!d->store)
        startup_failed(&s, o, err);
    if (store_ckpt_start(d->store) < 0)
        log_warn("checkpoints run on the loop's thread: %s", store_error(d->store));
    d->resv = xcalloc(1, sizeof(*d->resv));
    if (resv_load(d->resv, d->store, &err) < 0)
        startup_failed(&s, o, err);
    if (gpu_samples_start(&s.samples, d->store, d->cfg.gpu_samples_max) < 0)
        startup_failed(&s, o, store_error(d->store));
    d->samples = &s.samples;
    d->recent = &s.recent;
    if (loop_init() < 0 || setup_signals(d) < 0)
        startup_failed(&s, o, "cannot set up the event loop");
    d->jobs = jobs_new(d->store);
    d->userdb = userdb_new(users_answered_cb, d, &err);
    if (!d->userdb)
        startup_failed(&s, o, err);
    disk_set_jobs(d->disk, d->jobs);
    d->events = events_new(d);
    jobs_observe(d->jobs, events_job_cb, d->events);
    priority_configure(d);
    jobs_set_hand_over_early(d->jobs, daemon_on_slurm(d));
    if (daemon_on_slurm(d))
        jobs_set_signal_cb(d->jobs, slurm_signal_cb, d);
    else
        jobs_set_signal_cb(d->jobs, runner_signal_cb, NULL);
    quotas_set_config(jobs_quotas(d->jobs), &d->cfg.quota);
    if (jobs_load(d->jobs, &err) < 0)
        startup_failed(&s, o, err);
    /* Before runner_recover: the jobs that ended while gflowd was away notify too. */
    d->notifier = notifier_start(d);
    d->triage = triage_runner_start(d);
    start_gpus(&s, o);
    if (loop_add_fd(gpu_fd(d->gpus), EPOLLIN, gpu_ready_cb, &s) < 0)
        startup_failed(&s, o, "cannot watch the NVML thread");
    if (gpu_xid_fd(d->gpus) >= 0 && loop_add_fd(gpu_xid_fd(d->gpus), EPOLLIN, xid_ready_cb, &s) < 0)
        startup_failed(&s, o, "cannot watch the Xid thread");
    /* Also without NVML yet: gpu.c tries to open it on its own timer, and polls once
     * it is open. */
    s.poll_timer = loop_add_timer((double)d->cfg.gpu_poll_interval_secs, poll_cb, &s);
    if (s.keep_count >= 0 || s.keep_age >= 0)
        s.prune_timer = loop_add_timer(PRUNE_FIRST_SECS, prune_cb, &s);
    if (!daemon_on_slurm(d)) /* Slurm's jobs are found again by the first poll (slurm.h) */
        runner_recover(d);
    if (jobs_commit(d->jobs) < 0)
        startup_failed(&s, o, "cannot commit the recovered state");
    if (!daemon_on_slurm(d))
        runner_sweep(d);
    notifier_after_commit(d->notifier); /* jobs that ended while gflowd was away */
    make_fd_reserves(d);
    d->api = api_start(d, &err);
    if (!d->api)
        startup_failed(&s, o, err);
    loop_set_before_sleep(before_sleep, &s);
    log_info("gflowd %s started: pid %ld, socket %s, data %s%s", GFLOW_VERSION, (long)getpid(),
             d->paths.socket_path, d->paths.data_dir, d->system ? " (system daemon)" : "");
    if (daemon_on_slurm(d)) {
        slurm_start(d);
    } else {
        launch_supervisor_start(d);
        launch_standby_start(d);
    }
    s.starting_lock_fd = -1; /* started: the lock is held until the daemon exits */
    s.in_leaf = false;
    report_ready(o, "ok\n");
    /* The socket answers from here on: systemd (Type=notify) may start what needs it. */
    char *ready = xasprintf("READY=1\nMAINPID=%ld\nSTATUS=serving on %s", (long)getpid(),
                            d->paths.socket_path);
    if (sdnotify_send(&s.systemd, ready) < 0)
        log_warn("cannot tell systemd that gflowd is ready: %s", strerror(errno));
    free(ready);

    /* After loop_fail the job table may not be what the database holds (a lost
     * transaction it could not undo): nothing more is written, and gflowd exits 1. */
    bool failed = loop_run() < 0;

    sdnotify_send(&s.systemd, "STOPPING=1\nSTATUS=stopping; running jobs keep running");

    if (!failed && !disk_full(d->disk) && gpu_samples_flush(&s.samples, d->store) < 0)
        log_debug("recording GPU utilisation: %s", store_error(d->store));
    shutdown_commit(d, failed);
    events_stop(d->events);
    api_stop(d->api);
    d->api = NULL;
    userdb_free(d->userdb);
    d->userdb = NULL;
    events_free(d->events);
    d->events = NULL;
    shutdown_commit(d, failed);
    runner_shutdown(d);
    slurm_stop(d);
    notifier_stop(d->notifier);
    d->notifier = NULL;
    triage_runner_stop(d->triage);
    d->triage = NULL;
    shutdown_commit(d, failed);
    cgleaf_leave(d);
    loop_cancel_timer(s.poll_timer);
    loop_cancel_timer(s.pass_timer);
    loop_cancel_timer(s.checkpoint_timer);
    loop_cancel_timer(s.retry_timer);
    loop_cancel_timer(s.launch_timer);
    loop_cancel_timer(s.standby_timer);
    launch_standby_stop(d);
    launch_supervisor_stop(d);
    launch_free(d);
    loop_cancel_timer(s.prune_timer);
    loop_del_fd(gpu_fd(d->gpus));
    if (gpu_xid_fd(d->gpus) >= 0)
        loop_del_fd(gpu_xid_fd(d->gpus));
    gpu_stop(d->gpus);
    d->gpus = NULL;
    store_checkpoint(d->store);
    store_close(d->store);
    d->store = NULL;
    resv_free(d->resv);
    free(d->resv);
    d->resv = NULL;
    gpu_samples_free(&s.samples);
    d->samples = NULL;
    gpu_recent_free(&s.recent);
    d->recent = NULL;
    disk_free(d->disk);
    d->disk = NULL;
    jobs_free(d->jobs);
    d->jobs = NULL;
    free(s.to_launch);
    loop_free();
    log_info(failed ? "gflowd stopped after an error" : "gflowd stopped");
    close(lock_fd);
    return failed ? 1 : 0;
}
