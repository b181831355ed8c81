/* subproc: children watched by the event loop (see subproc.h). */
#include "subproc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "loop.h"
#include "pidfd.h"

extern char **environ;

struct subproc {
    pid_t pid;
    int pidfd, out_fd; /* out_fd is -1 once the output has ended */
    struct strbuf out;
    struct loop_timer *kill_timer;
    subproc_done_cb done;
    void *arg;
};

static void close_output(struct subproc *p)
{
    if (p->out_fd < 0)
        return;
    loop_del_fd(p->out_fd);
    close(p->out_fd);
    p->out_fd = -1;
}

void subproc_forget(struct subproc *p)
{
    close_output(p);
    loop_del_fd(p->pidfd);
    close(p->pidfd);
    loop_cancel_timer(p->kill_timer);
    strbuf_free(&p->out);
    free(p);
}

/* Reads what the child has written, up to the end of its output. */
static void drain(struct subproc *p)
{
    char buf[8192];
    for (;;) {
        ssize_t got = read(p->out_fd, buf, sizeof(buf));
        if (got > 0) {
            strbuf_add(&p->out, buf, (size_t)got);
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        if (got == 0 || errno != EAGAIN)
            close_output(p);
        return;
    }
}

static void output_cb(int fd, uint32_t events, void *arg)
{
    drain(arg);
}

static void exited_cb(int fd, uint32_t events, void *arg)
{
    struct subproc *p = arg;
    int status = 0;
    pid_t w = waitpid(p->pid, &status, WNOHANG);
    if (w == 0)
        return;
    if (p->out_fd >= 0)
        drain(p); /* what it wrote before it exited */
    bool reaped = w == p->pid;
    p->done(p->arg, reaped, reaped ? status : 0, &p->out);
    subproc_forget(p);
}

static void kill_cb(void *arg)
{
    struct subproc *p = arg;
    p->kill_timer = NULL;
    sys_pidfd_send_signal(p->pidfd, SIGKILL, NULL);
}

/* posix_spawnp of spec with its output into out_w: the pid, or -1 with errno. The child
 * gets no blocked signals, and the default action for those gflowd handles or ignores. */
static pid_t spawn(const struct subproc_spec *spec, int out_w)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (spec->stdin_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, spec->stdin_fd, 0);
    else
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (spec->capture_stdout)
        posix_spawn_file_actions_adddup2(&fa, out_w, 1);
    else
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_w, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGHUP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int rc = posix_spawnp(&pid, spec->argv[0], &fa, &attr, spec->argv,
                          spec->envp ? spec->envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return pid;
}

struct subproc *subproc_start(const struct subproc_spec *spec, subproc_done_cb done, void *arg)
{
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return NULL;
    pid_t pid = spawn(spec, out[1]);
    int e = errno;
    close(out[1]);
    if (pid < 0) {
        close(out[0]);
        errno = e;
        return NULL;
    }
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    struct subproc *p = xcalloc(1, sizeof(*p));
    *p = (struct subproc){.pid = pid, .out_fd = out[0], .done = done, .arg = arg};
    strbuf_init(&p->out);
    p->pidfd = sys_pidfd_open(pid);
    if (p->pidfd < 0 || loop_add_fd(p->out_fd, EPOLLIN, output_cb, p) < 0 ||
        loop_add_fd(p->pidfd, EPOLLIN, exited_cb, p) < 0) {
        /* Cannot watch it: end it here (rare: out of file descriptors). */
        e = errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        loop_del_fd(p->out_fd);
        close(p->out_fd);
        if (p->pidfd >= 0)
            close(p->pidfd);
        free(p);
        errno = e;
        return NULL;
    }
    p->kill_timer = loop_add_timer(spec->timeout, kill_cb, p);
    return p;
}

bool subproc_wait(struct subproc *p, double secs)
{
    struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};
    double end = now_mono() + secs;
    for (;;) {
        double left = end - now_mono();
        int r = poll(&pfd, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
        if (r > 0) {
            exited_cb(p->pidfd, EPOLLIN, p); /* calls done, frees p */
            return true;
        }
        if (r == 0 || errno != EINTR || now_mono() >= end)
            return false;
    }
}
