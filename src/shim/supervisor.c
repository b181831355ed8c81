/* supervisor: `gflow-shim --supervisor DIR`, one process that supervises many jobs at
 * once, so that a job costs no process of its own besides the job's (a shim's start and
 * exit cost as much CPU as a small job's: docs/design.md). gflowd starts one and hands
 * it the jobs a shim would run without --tasks, --pty, --memory-limit, --deny-devices or
 * hooks (--prolog, --epilog);
 * each job gets exactly what a shim of its own gives it (steps 1-6, 9 of main.c), with
 * these differences:
 *
 *  - Messages, on fd 3 (SOCK_SEQPACKET). The supervisor says "H" once it is set up
 *    (gflowd waits for it before it sends a job). A job is a standby's message (its arguments,
 *    NUL-terminated, with its lock and environment fds; those fds replace --lock-fd and
 *    --env-fd). "T<id>" ends job id (as SIGTERM to a shim of one job), "F<id> <value>"
 *    passes a signal on (as SIGUSR1's value). The supervisor says "D<id>" once job id's
 *    record is in its lock file and its lock fd is closed.
 *  - The lock file's second line is "supervisor: DIR/shim-<pid>.sock", a socket this
 *    process listens on: once gflowd's end of fd 3 is gone (gflowd stopped), a restarted
 *    gflowd connects there (same uid, or root), the supervisor says "H", and the
 *    messages go on over that connection (a job that ended before the "H" was told to
 *    nobody: its lock file says so); the supervisor exits once it has neither a gflowd
 *    nor a job.
 *  - The job's marker is GFLOW_SHIM_ID=<pid>:<start>:<job id>. Its processes are those
 *    of its cgroup, or where it has none, the supervisor's descendants with its marker.
 *  - No filesystem call on a job user's behalf is made here: the job is forked (not
 *    vforked) and its child opens the log, finds conda, reads the script and searches
 *    PATH itself (child.c), then passes the log back on a socket this loop watches;
 *    the relay starts on the job's output once the log is there. A mount that never
 *    answers stops that job's child alone.
 *  - Signals to the supervisor itself end nothing (gflowd ends jobs by message); a
 *    supervisor that dies leaves its jobs to gflowd's orphans.c, as a shim does.
 *
 * One loop (epoll) over the messages, the signalfd (SIGCHLD: reaping, dispatched by
 * pid), and each job's output relay and kill timer; a job whose main process is reaped
 * ends, as in supervise.c, once nothing of it is left. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "files.h"
#include "util.h"

const char *shim_supervisor_path;

/* What an epoll event is about. */
enum sup_kind { SUP_SIGNALS, SUP_GFLOWD, SUP_LISTEN, SUP_RELAY, SUP_TIMER, SUP_CHILD };
struct sup_watch {
    enum sup_kind kind;
    struct sup_job *job;
};

struct sup_job {
    struct sup_job *next;
    char *args; /* the message: argv's strings point into it */
    char **argv;
    struct shim_opts o;
    struct shim_run r;
    double started_at;
    int lookup_code; /* as shim_main's: what a 127 or 126 then means */
    char *lookup_error;
    char *report;  /* why the job did not start (the child's report), NULL: it did */
    bool relaying; /* the relay's pipe is watched: the log is there, or never will be */
    struct sup_watch relay_watch, timer_watch, child_watch;
};

static struct sup_job *jobs;
static int ep = -1, sig_fd = -1, gflowd_fd = -1, listen_fd = -1;
static struct sup_watch sig_watch = {SUP_SIGNALS, NULL}, gflowd_watch = {SUP_GFLOWD, NULL},
                        listen_watch = {SUP_LISTEN, NULL};

static int sup_watch(int fd, struct sup_watch *w)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static struct sup_job *sup_find(int64_t id)
{
    for (struct sup_job *j = jobs; j; j = j->next)
        if (j->o.job_id == id)
            return j;
    return NULL;
}

/* "D<id>" to gflowd, if one is connected (else a restarted one reads the lock file). */
static void sup_say_done(int64_t id)
{
    char msg[SHIM_CTL_MAX];
    int n = exitfile_ctl_format(msg, SHIM_CTL_DONE, id, 0);
    if (gflowd_fd >= 0)
        send(gflowd_fd, msg, (size_t)n, MSG_NOSIGNAL);
}

/* Closes a watched fd, out of the epoll set first: a job forked meanwhile holds a copy
 * until it closes the others' fds, and the set keeps a closed fd whose file lives on. */
static void sup_close_watched(int *fd)
{
    if (*fd < 0)
        return;
    epoll_ctl(ep, EPOLL_CTL_DEL, *fd, NULL);
    close(*fd);
    *fd = -1;
}

static void sup_job_free(struct sup_job *j)
{
    sup_close_watched(&j->r.report_rd);
    sup_close_watched(&j->r.tfd);
    if (j->o.lock_fd >= 0)
        close(j->o.lock_fd); /* its flock ends with it */
    if (j->o.env_fd >= 0)
        close(j->o.env_fd);
    free(j->r.tasks);
    free(j->r.marker);
    free(j->lookup_error);
    free(j->report);
    shim_opts_free(&j->o);
    free(j->argv);
    free(j->args);
    free(j);
}

/* A job that could not be started: its record (exit code 125 and why), as a shim that
 * fails before the job. */
static void sup_job_failed(struct sup_job *j, struct shim_exec *ex, const char *err)
{
    shim_relay_close(&j->r.relay);
    shim_jobcg_end(&j->r.jobcg, j->o.job_id);
    shim_report_fail(&j->o, err, true);
    shim_prepare_free(ex);
    int64_t id = j->o.job_id;
    sup_job_free(j);
    if (id >= 0)
        sup_say_done(id);
}

/* Whether the job is of the kind a supervisor runs (gflowd sends only those). */
static const char *sup_unsupported(const struct shim_opts *o)
{
    if (o->ntasks != 1)
        return "--tasks";
    if (o->pty_dir)
        return "--pty";
    if (o->memory_limit_mb)
        return "--memory-limit";
    if (o->deny_minors)
        return "--deny-devices";
    if (o->exit_file)
        return "--exit-file";
    if (o->prolog || o->epilog)
        return o->prolog ? "--prolog" : "--epilog";
    return NULL;
}

/* The relay starts moving the job's output into its log. */
static void sup_job_relay(struct sup_job *j)
{
    if (j->relaying || j->r.relay.rd < 0)
        return;
    j->relaying = true;
    j->r.relay.ep = ep;
    sup_watch(j->r.relay.rd, &j->relay_watch);
}

/* What the job's child says (child.c): its log (in place of the relay's /dev/null) and
 * what an exit code of 127 or 126 will mean, or why it could not start; EOF once it
 * exec'd or exited. Reads what is there without waiting. */
static void sup_job_child(struct sup_job *j)
{
    while (j->r.report_rd >= 0) {
        char buf[PATH_MAX + 256];
        union {
            struct cmsghdr h;
            char space[CMSG_SPACE(sizeof(int))];
        } control;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = control.space,
                           .msg_controllen = sizeof(control.space)};
        ssize_t n = recvmsg(j->r.report_rd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            sup_close_watched(&j->r.report_rd);
            break;
        }
        buf[n] = '\0';
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
            h->cmsg_len == CMSG_LEN(sizeof(int))) {
            int fd;
            memcpy(&fd, CMSG_DATA(h), sizeof(fd));
            if (dup3(fd, j->r.relay.log_fd, O_CLOEXEC) < 0)
                fprintf(stderr, "gflow-shim: job %lld: cannot take its log: %s\n",
                        (long long)j->o.job_id, strerror(errno));
            close(fd);
            size_t code_len = strlen(buf);
            j->lookup_code = atoi(buf);
            if ((size_t)n > code_len + 1)
                j->lookup_error = xstrndup(buf + code_len + 1, (size_t)n - code_len - 1);
            sup_job_relay(j);
        } else if (!j->report) {
            j->report = xstrndup(buf, strcspn(buf, "\n"));
        }
    }
    sup_job_relay(j);
}

/* A job's message (n bytes in buf, NUL-terminated arguments) with its lock and
 * environment fds: steps 1-4 as shim_main, then the job is supervised by the loop. */
static void sup_job_start(const char *buf, size_t n, const int fds[2])
{
    struct sup_job *j = xcalloc(1, sizeof(*j));
    j->args = xmalloc(n);
    memcpy(j->args, buf, n);
    int argc = 1;
    for (size_t i = 0; i < n; i++)
        argc += j->args[i] == '\0';
    j->argv = xcalloc((size_t)argc + 1, sizeof(char *));
    j->argv[0] = "gflow-shim";
    int k = 1;
    for (char *p = j->args; p < j->args + n; p += strlen(p) + 1)
        j->argv[k++] = p;
    struct shim_exec ex;
    shim_prepare_init(&ex);
    char *err = NULL;
    int pr = shim_opts_parse(k, j->argv, &j->o, &err);
    /* The fds that came with the message are the job's, whatever its arguments say. */
    j->o.lock_fd = fds[0];
    j->o.env_fd = fds[1];
    shim_supervise_init(&j->r, &j->o);
    const char *unsupported = pr == 0 ? sup_unsupported(&j->o) : NULL;
    if (pr == 0 && unsupported)
        err = xasprintf("%s is not for a supervisor", unsupported);
    else if (pr == 1)
        err = xstrdup("--help is not for a supervisor");
    int prepared = err ? -1 : shim_prepare(&j->o, &ex, &err);
    close(j->o.env_fd); /* read: it may hold secrets */
    j->o.env_fd = -1;
    if (prepared < 0 || shim_relay_open(&j->r.relay, &j->o, &ex, &err) < 0 ||
        shim_jobcg_setup(&j->o, &ex, &j->r.jobcg, &err) < 0) {
        sup_job_failed(j, &ex, err);
        free(err);
        return;
    }
    j->r.marker = xstrdup(ex.marker);
    j->started_at = now_wall();
    int started = shim_child_spawn(&ex, &j->r, &err);
    if (started == 0) {
        sup_job_failed(j, &ex, err);
        free(err);
        return;
    }
    shim_prepare_free(&ex); /* the job holds its own copies now */
    /* The job's child opens its log and passes it back (child.c), or says why it could
     * not start: its socket is watched, and the output waits in its pipe till then. */
    j->relay_watch = (struct sup_watch){SUP_RELAY, j};
    j->timer_watch = (struct sup_watch){SUP_TIMER, j};
    j->child_watch = (struct sup_watch){SUP_CHILD, j};
    if (sup_watch(j->r.report_rd, &j->child_watch) < 0)
        sup_job_child(j); /* cannot wait for it: the relay starts now */
    j->next = jobs;
    jobs = j;
}

/* SIGTERM to the job and its grace timer, made now (a job that ends by itself needs
 * none). */
static void sup_job_terminate(struct sup_job *j)
{
    if (j->r.tfd < 0) {
        j->r.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (j->r.tfd < 0 || sup_watch(j->r.tfd, &j->timer_watch) < 0) {
            /* No timer: SIGKILL at once rather than never. */
            fprintf(stderr, "gflow-shim: job %lld: timerfd: %s; killing it\n",
                    (long long)j->o.job_id, strerror(errno));
            shim_proctree_signal(&j->r, SIGKILL);
            return;
        }
    }
    shim_supervise_terminate(&j->r);
}

/* Step 6 for a job that is over (nothing of it left): its log complete, its cgroup
 * gone, its record in the lock file, then "D<id>". */
static void sup_job_end(struct sup_job *j)
{
    sup_job_child(j); /* its child is gone: what it said is all there, up to EOF */
    shim_relay_close(&j->r.relay);
    shim_jobcg_end(&j->r.jobcg, j->o.job_id);
    struct exit_record rec;
    shim_report_record(&j->r, &j->o, j->started_at, j->report, &rec);
    if (!rec.error && j->lookup_error && rec.exit_code == j->lookup_code) {
        rec.error = j->lookup_error; /* bash could not find or run the command */
        j->lookup_error = NULL;
    }
    if (shim_report_exit(&j->o, &rec) < 0) {
        int e = errno;
        char *what = shim_report_exit_name(&j->o);
        char *why = xasprintf("cannot write %s: %s", what, strerror(e));
        free(what);
        shim_report_fail(&j->o, why, false);
        free(why);
    }
    exit_record_free(&rec);
    int64_t id = j->o.job_id;
    struct sup_job **p = &jobs;
    while (*p != j)
        p = &(*p)->next;
    *p = j->next;
    sup_job_free(j);
    sup_say_done(id);
}

/* How many children the supervisor has, or -1 when the kernel does not say
 * (/proc/PID/task/PID/children needs CONFIG_PROC_CHILDREN). */
static long sup_children(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", (long)getpid(), (long)getpid());
    char *text = read_file(path, NULL);
    if (!text)
        return -1;
    long n = 0;
    for (char *p = text; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        n++;
        while (*p && *p != ' ')
            p++;
    }
    free(text);
    return n;
}

/* Ends the jobs whose main process is reaped once nothing of them is left; their
 * leftovers get SIGTERM and the grace timer (supervise.c). A leftover is a descendant
 * of the supervisor (a subreaper), so when its only children are the main processes of
 * jobs still running, nothing is left of any job: no look at a cgroup or /proc. */
static void sup_check_ends(void)
{
    long waiting = 0, unreaped = 0;
    for (struct sup_job *j = jobs; j; j = j->next) {
        if (j->r.nreaped == j->r.ntasks)
            waiting++;
        else
            unreaped++;
    }
    if (!waiting)
        return;
    long children = sup_children();
    bool none_left = children >= 0 && children <= unreaped;
    for (struct sup_job *j = jobs, *next; j; j = next) {
        next = j->next;
        if (j->r.nreaped < j->r.ntasks)
            continue;
        if (none_left || shim_proctree_signal(&j->r, 0) == 0)
            sup_job_end(j);
        else
            sup_job_terminate(j);
    }
}

static void sup_reap(void)
{
    for (;;) {
        int st;
        struct rusage ru;
        pid_t pid = wait4(-1, &st, WNOHANG, &ru);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        for (struct sup_job *j = jobs; j; j = j->next) {
            if (j->r.ntasks > 0 && j->r.tasks[0].pid == pid) {
                shim_supervise_reaped(&j->r, pid, st, &ru);
                break;
            }
        }
    }
}

static void sup_signals(void)
{
    struct signalfd_siginfo si;
    bool child = false;
    while (read(sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        child = child || si.ssi_signo == SIGCHLD;
    if (child)
        sup_reap();
}

/* gflowd is gone: no more jobs, until a restarted one connects. */
static void sup_gflowd_gone(void)
{
    close(gflowd_fd); /* leaves the epoll set with it */
    gflowd_fd = -1;
}

/* A message from gflowd: a job (with its fds), or T/F for a job. */
static void sup_message(void)
{
    static char buf[EXITFILE_STANDBY_MAX + 1];
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(2 * sizeof(int))];
    } control;
    struct iovec iov = {.iov_base = buf, .iov_len = EXITFILE_STANDBY_MAX};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.space,
                       .msg_controllen = sizeof(control.space)};
    ssize_t n = recvmsg(gflowd_fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        sup_gflowd_gone();
        return;
    }
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
        h->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
        int fds[2];
        memcpy(fds, CMSG_DATA(h), sizeof(fds));
        if (!(m.msg_flags & MSG_TRUNC) && buf[n - 1] == '\0') {
            sup_job_start(buf, (size_t)n, fds);
        } else {
            close(fds[0]);
            close(fds[1]);
        }
        return;
    }
    char what;
    int64_t id;
    int value;
    struct sup_job *j =
        exitfile_ctl_parse(buf, (size_t)n, &what, &id, &value) == 0 ? sup_find(id) : NULL;
    if (!j)
        return; /* over already: its "D" crossed this */
    if (what == SHIM_CTL_TERM)
        sup_job_terminate(j);
    else if (what == SHIM_CTL_FORWARD)
        shim_supervise_forward(&j->r, value);
}

/* Whether gflowd's end of its socket is gone (its EOF not read yet). */
static bool sup_gflowd_hung_up(void)
{
    struct pollfd p = {.fd = gflowd_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* A restarted gflowd connects: it takes the place of the one that is gone (never of
 * one still there). Only the supervisor's own user (or root). Its socket blocks for
 * sending, so that no "D" is lost while gflowd is busy. */
static void sup_accept(void)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
        (cred.uid != 0 && cred.uid != geteuid()) || (gflowd_fd >= 0 && !sup_gflowd_hung_up())) {
        close(fd);
        return;
    }
    if (gflowd_fd >= 0)
        sup_gflowd_gone();
    gflowd_fd = fd;
    sup_watch(gflowd_fd, &gflowd_watch);
    /* From here on each job's end is told to it: gflowd reads its jobs' lock files
     * after this, for those that ended before. */
    char hello = SHIM_CTL_HELLO;
    send(gflowd_fd, &hello, 1, MSG_NOSIGNAL);
}

/* The control socket a restarted gflowd connects to: DIR/shim-<pid>.sock. */
static int sup_listen(const char *dir, char **err)
{
    char *path = xasprintf("%s/shim-%ld.sock", dir, (long)getpid());
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path)) {
        *err = xasprintf("socket path too long: %s", path);
        free(path);
        return -1;
    }
    strcpy(a.sun_path, path);
    unlink(path); /* a dead supervisor's with our pid */
    listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(listen_fd, 4) < 0) {
        *err = xasprintf("cannot listen on %s: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    shim_supervisor_path = path;
    return 0;
}

int shim_supervisor_main(const char *dir, const sigset_t *mask)
{
    char *err = NULL;
    if (setsid() < 0 && errno != EPERM)
        err = xasprintf("setsid: %s", strerror(errno));
    else if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        err = xasprintf("cannot become a subreaper: %s", strerror(errno));
    else if (fcntl(3, F_SETFD, FD_CLOEXEC) < 0)
        err = xasprintf("fd 3: %s", strerror(errno));
    if (!err)
        sup_listen(dir, &err);
    shim_report_self_start();
    shim_cgroup_mount_warm();
    gflowd_fd = 3;
    close(4); /* gflowd's /dev/null: a standby's room for the environment */
    sig_fd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (!err &&
        (sig_fd < 0 || ep < 0 || sup_watch(sig_fd, &sig_watch) < 0 ||
         sup_watch(gflowd_fd, &gflowd_watch) < 0 || sup_watch(listen_fd, &listen_watch) < 0))
        err = xasprintf("signalfd/epoll: %s", strerror(errno));
    if (err) {
        fprintf(stderr, "gflow-shim: supervisor: %s\n", err);
        free(err);
        if (shim_supervisor_path)
            unlink(shim_supervisor_path);
        return SHIM_EXIT_FAIL;
    }
    char hello = SHIM_CTL_HELLO; /* set up: gflowd may send jobs */
    send(gflowd_fd, &hello, 1, MSG_NOSIGNAL);
    while (gflowd_fd >= 0 || jobs) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, -1);
        for (int i = 0; i < n; i++) {
            struct sup_watch *w = evs[i].data.ptr;
            switch (w->kind) {
            case SUP_SIGNALS:
                sup_signals();
                break;
            case SUP_GFLOWD:
                if (gflowd_fd >= 0)
                    sup_message();
                break;
            case SUP_LISTEN:
                sup_accept();
                break;
            case SUP_RELAY:
                if (w->job->r.relay.rd >= 0) /* not closed by an earlier event */
                    shim_relay_pump(&w->job->r.relay);
                break;
            case SUP_TIMER:
                shim_supervise_timer_fired(&w->job->r);
                break;
            case SUP_CHILD:
                sup_job_child(w->job);
                break;
            }
        }
        sup_check_ends();
    }
    unlink(shim_supervisor_path);
    return 0;
}
