/* supervise: the loop (step 5): signals from the daemon (cancel, forwarded signals) on a
 * signalfd, the kill grace and re-kill period on a timerfd, the memory check tick, the
 * job's output (relay.c), the clients of `gjob attach` (attach.c, --pty),
 * reaping the copies (the first to fail decides and stops the others), and waiting for
 * leftovers until nothing of the job is left. */
#include "shim.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "procinfo.h"
#include "prockill.h"
#include "util.h"

/* --pty: the attach socket and its clients (attach.c keeps at most 16). */
#define SHIM_SUPERVISE_ATTACH_FDS 17

/* Arms the timer: first expiry after `first` seconds, then every interval_ns (0: once). */
void shim_supervise_arm(int tfd, double first, long interval_ns)
{
    struct itimerspec its = {0};
    its.it_value.tv_sec = (time_t)first;
    its.it_value.tv_nsec = (long)((first - (double)(time_t)first) * 1e9);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1; /* all zero would disarm it */
    its.it_interval.tv_nsec = interval_ns;
    timerfd_settime(tfd, 0, &its, NULL);
}

void shim_supervise_disarm(int tfd)
{
    if (tfd < 0)
        return;
    struct itimerspec none = {0};
    timerfd_settime(tfd, 0, &none, NULL);
    uint64_t ticks;
    if (read(tfd, &ticks, sizeof(ticks)) < 0) {
        /* nothing was pending */
    }
}

/* A cancel (a signal to the shim, or gflowd's word): noted, and the job or its pre hook
 * is stopped; a post hook runs on (it is bounded by its own timeout). */
static void shim_supervise_stop(struct shim_run *r)
{
    r->stop_asked = true;
    if (r->phase != SHIM_PHASE_POST)
        shim_supervise_terminate(r);
}

/* SIGTERM to everything and start the grace period. Only once: a second cancel must
 * not push the SIGKILL further away. */
void shim_supervise_terminate(struct shim_run *r)
{
    if (r->term_sent)
        return;
    r->term_sent = true;
    shim_proctree_signal(r, SIGTERM);
    shim_supervise_arm(r->tfd, r->kill_grace, 0);
}

void shim_supervise_kill_now(struct shim_run *r)
{
    r->term_sent = true;
    r->kill_phase = true;
    shim_supervise_arm(r->tfd, SHIM_REKILL_NS / 1e9, SHIM_REKILL_NS);
    shim_proctree_signal(r, SIGKILL);
}

/* The grace is over (or a re-kill tick): SIGKILL everything that is left. */
void shim_supervise_timer_fired(struct shim_run *r)
{
    uint64_t ticks;
    if (read(r->tfd, &ticks, sizeof(ticks)) < 0)
        return; /* spurious wakeup */
    if (!r->kill_phase) {
        r->kill_phase = true;
        shim_supervise_arm(r->tfd, SHIM_REKILL_NS / 1e9, SHIM_REKILL_NS);
    }
    shim_proctree_signal(r, SIGKILL);
}

/* Passes on a signal the daemon queued with SIGUSR1 (step 5), and notes the first in
 * the lock file, so that a restarted daemon does not send the --signal warning again. */
void shim_supervise_forward(struct shim_run *r, int value)
{
    int sig = value & 0xff;
    if (sig <= 0 || sig >= NSIG || r->phase == SHIM_PHASE_POST) /* the job is over */
        return;
    if (!r->forwarded) {
        r->forwarded = true;
        shim_report_lock_forwarded(r->lock_fd, sig);
    }
    if (value & SHIM_FORWARD_MAIN_ONLY) {
        for (int i = 0; i < r->ntasks; i++)
            if (!r->tasks[i].reaped)
                kill(r->tasks[i].pid, sig); /* unreaped children: their pids are ours */
        return;
    }
    /* Exactly once to every process: a signal the job handles (a checkpoint request)
     * must not run its handler twice, as the kill-everything path may. */
    bool group_alive = r->ntasks > 0 && !r->tasks[0].reaped;
    if (group_alive)
        kill(-r->pgid, sig);
    struct shim_proc *procs;
    size_t n = shim_proctree_of_job(r, &procs);
    for (size_t i = 0; i < n; i++) {
        struct proc_stat st;
        /* Members of the group got it above; pgid and start read together, then the
         * pidfd checks the start time again. */
        if (group_alive && proc_stat_read(procs[i].pid, &st) == 0 && st.start == procs[i].start &&
            st.pgid == r->pgid)
            continue;
        prockill_pid(procs[i].pid, procs[i].start, sig);
    }
    free(procs);
}

/* gflowd's word on a standby's socket (SHIM_CTL_*, standby.c), for this job only. At
 * its end (gflowd is gone) the job goes on; a restarted gflowd signals the shim instead. */
static void shim_supervise_control(struct shim_run *r)
{
    char msg[SHIM_CTL_MAX], what;
    int64_t id;
    int value;
    ssize_t n = recv(r->ctl_fd, msg, sizeof(msg), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        r->ctl_fd = -1; /* standby.c closes it */
        return;
    }
    if (exitfile_ctl_parse(msg, (size_t)n, &what, &id, &value) < 0 || id != r->job_id)
        return;
    if (what == SHIM_CTL_TERM)
        shim_supervise_stop(r);
    else if (what == SHIM_CTL_FORWARD)
        shim_supervise_forward(r, value);
}

static void shim_supervise_signals(struct shim_run *r)
{
    struct signalfd_siginfo si;
    while (read(r->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP)
            shim_supervise_stop(r);
        else if (si.ssi_signo == SIGUSR1 && si.ssi_code == SI_QUEUE)
            shim_supervise_forward(r, si.ssi_int);
    }
}

/* Whether a copy's wait status counts as a failure of the job. */
static bool shim_supervise_failed(int status)
{
    return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* Records that pid was reaped, if it is a copy of the job. The first copy to fail
 * decides the outcome, and the copies still running are stopped: the job failed. */
void shim_supervise_reaped(struct shim_run *r, pid_t pid, int status, const struct rusage *ru)
{
    for (int i = 0; i < r->ntasks; i++) {
        struct shim_task *t = &r->tasks[i];
        if (t->pid != pid || t->reaped)
            continue;
        t->reaped = true;
        t->status = status;
        t->max_rss_kb = ru->ru_maxrss;
        r->nreaped++;
        if (shim_supervise_failed(status) && r->first_failed < 0) {
            r->first_failed = i;
            if (r->nreaped < r->ntasks)
                shim_supervise_terminate(r);
        }
        return;
    }
}

/* Reaps every exited child; the job's copies give the status and rusage. */
static void shim_supervise_reap(struct shim_run *r)
{
    for (;;) {
        int st;
        struct rusage ru;
        pid_t pid = wait4(-1, &st, WNOHANG, &ru);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        shim_supervise_reaped(r, pid, st, &ru);
    }
}

/* After every copy exited: true once nothing is left. Leftovers get SIGTERM
 * and the grace timer. The last descendant to exit is always a child of the shim
 * (its parent would otherwise still be there), so its SIGCHLD wakes the loop. */
static bool shim_supervise_leftovers_gone(struct shim_run *r)
{
    /* Every live descendant has a chain of parents that ends at the shim (it is the
     * subreaper), so with no child left there is nothing left at all: the common case
     * needs no scan of /proc. */
    siginfo_t si;
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD)
        return true;
    if (shim_proctree_signal(r, 0) == 0)
        return true;
    shim_supervise_terminate(r);
    return false;
}

/* Step 5: waits for the job and cleans up after it. 0, or -1 with *err set. */
int shim_supervise_run(struct shim_run *r, char **err)
{
    for (;;) {
        shim_supervise_reap(r);
        if (r->nreaped == r->ntasks && shim_supervise_leftovers_gone(r))
            return 0;
        /* poll skips a negative fd: no memory tick without --memory-limit, no output
         * once every writer of the pipe is gone. */
        struct pollfd p[6 + SHIM_SUPERVISE_ATTACH_FDS] = {
            {.fd = r->sfd, .events = POLLIN},
            {.fd = r->tfd, .events = POLLIN},
            {.fd = r->mem_tfd, .events = POLLIN},
            {.fd = r->relay.rd, .events = POLLIN},
            {.fd = r->ctl_fd, .events = POLLIN},
            {.fd = r->phase == SHIM_PHASE_JOB ? -1 : r->hook_tfd, .events = POLLIN}};
        int na = r->attach ? shim_attach_pollfds(r->attach, p + 6, SHIM_SUPERVISE_ATTACH_FDS) : 0;
        if (poll(p, (nfds_t)(6 + na), -1) < 0) {
            if (errno == EINTR)
                continue;
            *err = xasprintf("poll: %s", strerror(errno));
            return -1;
        }
        if (p[0].revents)
            shim_supervise_signals(r);
        if (p[1].revents)
            shim_supervise_timer_fired(r);
        if (p[2].revents)
            shim_memlimit_tick(r);
        if (p[3].revents)
            shim_relay_pump(&r->relay);
        if (p[4].revents)
            shim_supervise_control(r);
        if (p[5].revents) { /* --hook-timeout: the hook is stopped, and has failed */
            shim_supervise_disarm(r->hook_tfd);
            r->hook_timed_out = true;
            shim_supervise_terminate(r);
        }
        if (na)
            shim_attach_events(r->attach, p + 6, na);
    }
}

/* Last resort when the loop itself failed: kill everything until nothing is left. */
void shim_supervise_kill_all(struct shim_run *r)
{
    while (shim_proctree_signal(r, SIGKILL) > 0) {
        int st;
        struct rusage ru;
        pid_t pid = wait4(-1, &st, 0, &ru);
        if (pid > 0) {
            shim_supervise_reaped(r, pid, st, &ru);
        } else if (pid < 0 && errno == ECHILD) {
            /* What is left is not ours to wait for: its parent is still dying. */
            struct timespec ts = {0, 10L * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

void shim_supervise_init(struct shim_run *r, const struct shim_opts *o)
{
    *r = (struct shim_run){.self = getpid(),
                           .first_failed = -1,
                           .sfd = -1,
                           .tfd = -1,
                           .report_rd = -1,
                           .kill_grace = o->kill_grace,
                           .mem_tfd = -1,
                           .relay = {.rd = -1, .log_fd = -1, .null_fd = -1},
                           .lock_fd = o->lock_fd,
                           .ctl_fd = -1,
                           .job_id = o->job_id,
                           .hook_tfd = -1};
}

/* Creates the signalfd and timerfd of the loop. */
int shim_supervise_open(struct shim_run *r, const sigset_t *mask, char **err)
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
const struct shim_task *shim_supervise_deciding(const struct shim_run *r)
{
    return &r->tasks[r->first_failed >= 0 ? r->first_failed : 0];
}
