/* launch_shims: the processes that take a job once launch.c has prepared it: the
 * supervisor (one for the jobs that need no shim of their own), the standby shims
 * waiting for a job (each back for another once its job is over), else a shim started
 * for the job alone (vfork, exec). */
#include "launch.h"
#include "launch_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "exitfile.h"
#include "log.h"
#include "loop.h"
#include "pidfd.h"
#include "procinfo.h"
#include "runner.h"
#include "util.h"

/* The child of spawn_shim, sharing the daemon's memory until it execs: only system
 * calls, on its own frames. Sets *err to the errno of what failed and exits. */
__attribute__((noreturn)) static void spawn_child(char *const *argv, char *const *envp, int lock_fd,
                                                  int env_fd, volatile int *err)
{
    /* Above 4 first, so that no dup2 below overwrites another's source (/dev/null may
     * open as 3 or 4: it is on 0 before those are taken). */
    int lock = fcntl(lock_fd, F_DUPFD, 5);
    int env = fcntl(env_fd, F_DUPFD, 5);
    int null = open("/dev/null", O_RDONLY);
    if (lock < 0 || env < 0 || null < 0 || dup2(null, 0) < 0 || dup2(lock, 3) < 0 ||
        dup2(env, 4) < 0) {
        *err = errno;
        _exit(127);
    }
    close_range(5, ~0U, 0);
    /* What gflowd changed: SIGPIPE ignored, and every signal blocked (by spawn_shim). */
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(argv[0], argv, envp);
    *err = errno;
    _exit(127);
}

/* Starts the shim with the lock on fd 3 and the environment on fd 4, an empty signal
 * mask and default handling of every signal. With vfork: the daemon's page tables are
 * not copied as a fork per job would, and unlike posix_spawn, whose child queries and
 * resets all 64 signal actions one by one (~120 system calls while the daemon waits),
 * the child resets only the one gflowd changed (gflowd sets no handlers: signals come
 * through a signalfd). All signals are blocked around the vfork, so none is handled
 * in the child, which shares the daemon's memory until it execs. */
static pid_t spawn_shim(char *const *argv, int lock_fd, int env_fd)
{
    /* A fixed PATH, and the shim's own knobs from gflowd's environment
     * (GFLOW_SHIM_CGROUP, GFLOW_SHIM_MEMORY_METHOD: tests force a method with them). */
    struct strvec env;
    strvec_init(&env);
    strvec_push(&env, "PATH=/usr/local/bin:/usr/bin:/bin");
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "GFLOW_SHIM_", strlen("GFLOW_SHIM_")) == 0)
            strvec_push(&env, *e);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    volatile int err = 0;
    pid_t pid = vfork();
    if (pid == 0)
        spawn_child(argv, env.v, lock_fd, env_fd, &err);
    int e = pid < 0 ? errno : err;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    strvec_free(&env);
    if (pid > 0 && e) /* it exited without exec'ing */
        waitpid(pid, NULL, 0);
    if (e) {
        errno = e;
        return -1;
    }
    return pid;
}

/* ---- standby shims ---- */

/* Shims started ahead of their jobs (gflow-shim --standby, src/shim/standby.c): a job's
 * start hands one the arguments and fds instead of waiting for a shim's exec and start-up
 * (~1.5 ms here, the largest step between a submission and its job running), and a
 * standby whose job is over comes back (launch_standby_back) for the next one. At most
 * LAUNCH_IDLE_MAX wait; serve.c has one started a moment after a launch took the last. */

/* Reaps a standby that exits at the end of its socket. */
static void standby_reap_cb(int fd, uint32_t events, void *arg)
{
    (void)events;
    pid_t pid = (pid_t)(intptr_t)arg;
    if (waitpid(pid, NULL, WNOHANG) == 0)
        return; /* not yet reapable; epoll will tell again */
    loop_del_fd(fd);
    close(fd);
}

/* Closes a standby's socket, which ends it, and reaps it once it has exited: at once when
 * wait (it is idle or killed: a moment), else when its pidfd says so. */
static void standby_drop(pid_t pid, int sock, bool wait)
{
    close(sock);
    if (wait) {
        waitpid(pid, NULL, 0);
        return;
    }
    int pidfd = sys_pidfd_open(pid);
    if (pidfd >= 0 && fcntl(pidfd, F_SETFD, FD_CLOEXEC) == 0 &&
        loop_add_fd(pidfd, EPOLLIN, standby_reap_cb, (void *)(intptr_t)pid) == 0)
        return;
    if (pidfd >= 0)
        close(pidfd);
    waitpid(pid, NULL, 0); /* no pidfd now: wait for it (it exits at once) */
}

bool launch_standby_ready(const struct gflowd *d)
{
    return d->launcher->n_idle > 0;
}

void launch_standby_start(const struct gflowd *d)
{
    struct launcher *l = d->launcher;
    if (l->n_idle > 0)
        return;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return;
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* Room for the job's arguments in its command line (ps shows them; standby.c). */
    static char room[EXITFILE_STANDBY_ROOM + 1];
    memset(room, ' ', EXITFILE_STANDBY_ROOM);
    char *argv[] = {d->shim_path, "--standby", room, NULL};
    pid_t pid = null < 0 ? -1 : spawn_shim(argv, sv[1], null);
    if (null >= 0)
        close(null);
    close(sv[1]);
    if (pid < 0) {
        log_debug("cannot start a standby shim: %s", strerror(errno));
        close(sv[0]);
        return;
    }
    l->idle[l->n_idle++] = (struct standby){pid, proc_start_time(pid), sv[0]};
}

void launch_standby_back(const struct gflowd *d, pid_t pid, int64_t start, int sock)
{
    struct launcher *l = d->launcher;
    if (l->n_idle < LAUNCH_IDLE_MAX)
        l->idle[l->n_idle++] = (struct standby){pid, start, sock};
    else
        standby_drop(pid, sock, false);
}

void launch_standby_stop(const struct gflowd *d)
{
    struct launcher *l = d->launcher;
    while (l && l->n_idle > 0) {
        l->n_idle--;
        standby_drop(l->idle[l->n_idle].pid, l->idle[l->n_idle].sock, true);
    }
}

/* Sends a job to a standby or the supervisor: argv (less argv[0]), each NUL-terminated,
 * with the two fds. 0, or -1 (errno) when the socket cannot take it now, or the
 * arguments are longer than a shim takes in a message (EXITFILE_STANDBY_MAX). */
static int send_job(int sock, char *const *argv, int lock_fd, int env_fd)
{
    struct strbuf args;
    strbuf_init(&args);
    for (char *const *a = argv + 1; *a; a++)
        strbuf_add(&args, *a, strlen(*a) + 1);
    int rc = -1;
    errno = E2BIG;
    if (args.len <= EXITFILE_STANDBY_MAX) {
        int fds[2] = {lock_fd, env_fd};
        union {
            struct cmsghdr h;
            char space[CMSG_SPACE(sizeof(fds))];
        } control;
        memset(&control, 0, sizeof(control));
        struct iovec iov = {.iov_base = args.buf, .iov_len = args.len};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = control.space,
                           .msg_controllen = sizeof(control.space)};
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(h), fds, sizeof(fds));
        if (sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)args.len)
            rc = 0;
    }
    strbuf_free(&args);
    return rc;
}

/* Hands argv and the two fds to a waiting standby, the last to come back (its pages are
 * the likeliest to be in memory): 0 with *taken, or -1 when there is none, the
 * arguments are too long for one, or each is gone (then it is reaped). */
static int standby_take(struct launcher *l, char *const *argv, int lock_fd, int env_fd,
                        struct standby *taken)
{
    while (l->n_idle > 0) {
        struct standby s = l->idle[--l->n_idle];
        if (send_job(s.sock, argv, lock_fd, env_fd) == 0) {
            *taken = s;
            return 0;
        }
        if (errno == E2BIG) {
            l->idle[l->n_idle++] = s;
            return -1;
        }
        log_debug("a standby shim is gone (%s)", strerror(errno));
        kill(s.pid, SIGKILL); /* our unreaped child: the pid is still its own */
        standby_drop(s.pid, s.sock, true);
    }
    return -1;
}

/* ---- the supervisor ---- */

/* gflow-shim --supervisor (src/shim/supervisor.c): one process that supervises the jobs
 * that need nothing a shim of their own gives (no --tasks, --pty, --memory-limit, hooks or
 * --deny-devices), so that a job costs no shim process. Ours (started by this daemon,
 * our child) takes new jobs; those of an earlier daemon, still running jobs it
 * adopted, are reached on their control socket (launch_supervisor_attach) until their
 * last job here is over. */
struct supervisor {
    struct supervisor *next;
    struct gflowd *d;
    pid_t pid;
    int64_t start;
    int sock;        /* -1 once it is gone */
    int pidfd;       /* ours, gone: waiting for it to be reapable; else -1 */
    bool ours;       /* our child, for new jobs */
    size_t users;    /* the runs that name it (job->daemon.runtime->sup) */
    size_t capacity; /* ours: the jobs its open-file limit (our own) leaves room for */
};

/* The supervisor's descriptors: those it keeps whatever it runs (and a job's while it
 * starts), and those each running job keeps there (lock, output pipe, log; a timer
 * when it is ended). */
#define SUPERVISOR_BASE_FDS 32
#define SUPERVISOR_JOB_FDS 4
static struct supervisor *supervisor_ours(struct gflowd *d);
/* When ours last exited before it was ready (launcher.supervisor_failed_at), another is
 * not started for a while. */
#define SUPERVISOR_RETRY_SECS 60.0

static void supervisor_free(struct supervisor *s)
{
    struct supervisor **p = &s->d->launcher->supervisors;
    while (*p != s)
        p = &(*p)->next;
    *p = s->next;
    if (s->sock >= 0) {
        loop_del_fd(s->sock);
        close(s->sock);
    }
    if (s->pidfd >= 0) {
        loop_del_fd(s->pidfd);
        close(s->pidfd);
    }
    free(s);
}

/* Ours has exited (its pidfd): its jobs are lost, with how it ended. */
static void supervisor_exit_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct supervisor *s = arg;
    int status;
    if (waitpid(s->pid, &status, WNOHANG) == 0)
        return; /* not yet reapable; epoll will tell again */
    runner_supervisor_gone(s->d, s, status, true);
    supervisor_free(s);
}

/* What the supervisor says: "D<id>", a job is over. The end of the socket: it is gone,
 * and so is the supervision of every job it had (ours: once it is reaped). */
static void supervisor_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct supervisor *s = arg;
    char msg[SHIM_CTL_MAX], what;
    int64_t id;
    int value;
    ssize_t n = recv(s->sock, msg, sizeof(msg), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0) {
        if (exitfile_ctl_parse(msg, (size_t)n, &what, &id, &value) == 0 && what == SHIM_CTL_DONE)
            runner_supervised_done(s->d, id);
        return;
    }
    if (s->ours || s->users)
        log_warn("the job supervisor (pid %ld) is gone", (long)s->pid);
    loop_del_fd(s->sock);
    close(s->sock);
    s->sock = -1;
    if (s->ours) {
        s->ours = false; /* no new jobs for it */
        s->pidfd = sys_pidfd_open(s->pid);
        if (s->pidfd >= 0 && fcntl(s->pidfd, F_SETFD, FD_CLOEXEC) == 0 &&
            loop_add_fd(s->pidfd, EPOLLIN, supervisor_exit_cb, s) == 0)
            return;
        int status;
        bool reaped = waitpid(s->pid, &status, 0) == s->pid; /* no pidfd: it is exiting */
        runner_supervisor_gone(s->d, s, status, reaped);
    } else {
        runner_supervisor_gone(s->d, s, 0, false);
    }
    supervisor_free(s);
}

static struct supervisor *supervisor_add(struct gflowd *d, pid_t pid, int64_t start, int sock,
                                         bool ours)
{
    struct supervisor *s = xcalloc(1, sizeof(*s));
    *s = (struct supervisor){d->launcher->supervisors, d, pid, start, sock, -1, ours, 0, 0};
    struct rlimit rl;
    if (ours && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > SUPERVISOR_BASE_FDS)
        s->capacity = (rl.rlim_cur - SUPERVISOR_BASE_FDS) / SUPERVISOR_JOB_FDS;
    if (loop_add_fd(sock, EPOLLIN, supervisor_cb, s) < 0) {
        close(sock);
        free(s);
        return NULL;
    }
    d->launcher->supervisors = s;
    return s;
}

void launch_supervisor_start(struct gflowd *d)
{
    supervisor_ours(d);
}

/* Ours, started if there is none. NULL when it cannot be started (then jobs get shims). */
static struct supervisor *supervisor_ours(struct gflowd *d)
{
    for (struct supervisor *s = d->launcher->supervisors; s; s = s->next)
        if (s->ours)
            return s;
    if (daemon_on_slurm(d) ||
        now_mono() - d->launcher->supervisor_failed_at < SUPERVISOR_RETRY_SECS)
        return NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return NULL;
    /* Room for a burst of jobs while it starts them (a full socket: they get shims). */
    int room = 4 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &room, sizeof(room));
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    char *argv[] = {d->shim_path, "--supervisor", d->paths.run_dir, NULL};
    pid_t pid = null < 0 ? -1 : spawn_shim(argv, sv[1], null);
    if (null >= 0)
        close(null);
    close(sv[1]);
    /* Its "H" says it is set up (a moment): no job goes to one that fails to start. */
    struct timeval wait = {.tv_sec = 2};
    char hello = 0;
    if (pid > 0 && (setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) < 0 ||
                    recv(sv[0], &hello, 1, 0) != 1 || hello != SHIM_CTL_HELLO)) {
        kill(pid, SIGKILL); /* our unreaped child: the pid is still its own */
        waitpid(pid, NULL, 0);
        pid = -1;
        errno = 0;
    }
    if (pid < 0) {
        log_warn("cannot start the job supervisor (%s); jobs get shims of their own for %.0f s",
                 errno ? strerror(errno) : "its reason is in gflowd's output",
                 SUPERVISOR_RETRY_SECS);
        d->launcher->supervisor_failed_at = now_mono();
        close(sv[0]);
        return NULL;
    }
    return supervisor_add(d, pid, proc_start_time(pid), sv[0], true);
}

struct supervisor *launch_supervisor_attach(struct gflowd *d, const char *path, pid_t pid,
                                            int64_t start)
{
    for (struct supervisor *s = d->launcher->supervisors; s; s = s->next)
        if (s->pid == pid && s->start == start)
            return s;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path))
        return NULL;
    strcpy(a.sun_path, path);
    /* Its "H" says it took the connection: a job that ends from then on is told here;
     * the caller reads the lock files again for those that ended before. */
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct timeval wait = {.tv_sec = 2};
    char hello = 0;
    errno = 0;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) < 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || recv(fd, &hello, 1, 0) != 1 ||
        hello != SHIM_CTL_HELLO) {
        log_warn("cannot reach the job supervisor (pid %ld) at %s: %s", (long)pid, path,
                 hello   ? "unexpected answer"
                 : errno ? strerror(errno)
                         : "refused");
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    log_info("reached the job supervisor of an earlier gflowd (pid %ld)", (long)pid);
    return supervisor_add(d, pid, start, fd, false);
}

void launch_supervisor_use(struct supervisor *s)
{
    s->users++;
}

void launch_supervisor_unuse(struct supervisor *s)
{
    /* An earlier daemon's, with no job of ours left: closing its socket ends it. */
    if (--s->users == 0 && !s->ours && s->pidfd < 0)
        supervisor_free(s);
}

int launch_ctl_send(int sock, char what, int64_t id, int value)
{
    if (sock < 0) {
        errno = EPIPE;
        return -1;
    }
    char msg[SHIM_CTL_MAX];
    int n = exitfile_ctl_format(msg, what, id, value);
    return send(sock, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n ? 0 : -1;
}

int launch_supervisor_send(struct supervisor *s, char what, int64_t id, int value)
{
    return launch_ctl_send(s->sock, what, id, value);
}

void launch_supervisor_stop(const struct gflowd *d)
{
    struct launcher *l = d->launcher;
    while (l && l->supervisors) {
        l->supervisors->ours = false; /* not killed: it goes on with its jobs */
        supervisor_free(l->supervisors);
    }
}

/* Whether the job needs a shim of its own (options the supervisor does not take; the
 * hooks run in the shim's own loop before and after the job). */
static bool needs_own_shim(char *const *argv)
{
    static const char *const own[] = {"--tasks",        "--pty",    "--memory-limit",
                                      "--deny-devices", "--prolog", "--epilog"};
    for (char *const *a = argv + 1; *a; a++)
        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
            if (strcmp(*a, own[i]) == 0)
                return true;
    return false;
}

/* Hands the job to our supervisor: 0 with it in *sup, or -1 (it gets a shim). */
static int supervisor_take(struct gflowd *d, char *const *argv, int lock_fd, int env_fd,
                           struct supervisor **sup)
{
    if (needs_own_shim(argv))
        return -1;
    struct supervisor *s = supervisor_ours(d);
    if (!s || s->users >= s->capacity || send_job(s->sock, argv, lock_fd, env_fd) < 0)
        return -1;
    *sup = s;
    return 0;
}

pid_t launch_hand_over(struct gflowd *d, char *const *argv, int lock_fd, int env_fd, int64_t *start,
                       int *sock, struct supervisor **sup)
{
    struct standby taken;
    if (supervisor_take(d, argv, lock_fd, env_fd, sup) == 0) {
        *start = (*sup)->start;
        return (*sup)->pid;
    }
    if (standby_take(d->launcher, argv, lock_fd, env_fd, &taken) == 0) {
        *start = taken.start;
        *sock = taken.sock;
        return taken.pid;
    }
    pid_t pid = spawn_shim(argv, lock_fd, env_fd);
    *start = pid > 0 ? proc_start_time(pid) : 0;
    return pid;
}
