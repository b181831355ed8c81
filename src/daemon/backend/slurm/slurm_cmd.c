/* slurm_cmd: the slurm backend's commands as children (see slurm_cmd.h). */
#include "slurm_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "pidfd.h"

extern char **environ;

/* A Slurm command that takes longer is killed (and counts as failed). */
#define SLURM_CMD_TIMEOUT_SECS 60.0

void child_free(struct child *c)
{
    loop_cancel_timer(c->kill_timer);
    strbuf_free(&c->out);
    json_decref(c->update);
    if (c->script_path) {
        unlink(c->script_path);
        free(c->script_path);
    }
    free(c);
}

static void child_exited_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct child *c = arg;
    int status = 0;
    pid_t w = waitpid(c->pid, &status, WNOHANG);
    if (w == 0)
        return;
    loop_del_fd(c->pidfd);
    close(c->pidfd);
    bool ok = w == c->pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    c->done(c, ok);
    child_free(c);
}

static void child_output_cb(int fd, uint32_t events, void *arg)
{
    (void)events;
    struct child *c = arg;
    char buf[8192];
    ssize_t got;
    while ((got = read(fd, buf, sizeof(buf))) > 0)
        strbuf_add(&c->out, buf, (size_t)got);
    if (got < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    /* EOF: the command is done writing; its exit comes through its pidfd. */
    loop_del_fd(fd);
    close(fd);
    c->out_fd = -1;
    if (loop_add_fd(c->pidfd, EPOLLIN, child_exited_cb, c) < 0) {
        log_error("slurm: cannot watch a command's exit; waiting for it");
        waitpid(c->pid, NULL, 0);
        close(c->pidfd);
        c->done(c, false);
        child_free(c);
    }
}

static void child_kill_cb(void *arg)
{
    struct child *c = arg;
    c->kill_timer = NULL;
    sys_pidfd_send_signal(c->pidfd, SIGKILL, NULL);
}

/* Runs argv (found in PATH) with envp (NULL: the daemon's), calling done when it has
 * exited. 0, or -1 (done is not called). */
int child_run(struct child *c, char *const *argv, char *const *envp)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawnp(&c->pid, argv[0], &fa, &attr, argv, envp ? envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        errno = rc;
        return -1;
    }
    c->out_fd = p[0];
    fcntl(c->out_fd, F_SETFL, O_NONBLOCK);
    c->pidfd = sys_pidfd_open(c->pid);
    if (c->pidfd < 0 || loop_add_fd(c->out_fd, EPOLLIN, child_output_cb, c) < 0) {
        int e = errno;
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        if (c->pidfd >= 0)
            close(c->pidfd);
        close(c->out_fd);
        errno = e;
        return -1;
    }
    c->kill_timer = loop_add_timer(SLURM_CMD_TIMEOUT_SECS, child_kill_cb, c);
    return 0;
}

struct child *child_new(struct gflowd *d, int64_t job_id, child_done_cb done)
{
    struct child *c = xcalloc(1, sizeof(*c));
    c->d = d;
    c->job_id = job_id;
    c->done = done;
    c->out_fd = c->pidfd = -1;
    strbuf_init(&c->out);
    return c;
}

/* The first line of a command's output, for a log line or a job's reason. */
char *first_line(const struct child *c)
{
    const char *s = c->out.len ? c->out.buf : "";
    size_t n = strcspn(s, "\n");
    return xasprintf("%.*s", (int)(n > 300 ? 300 : n), s);
}
