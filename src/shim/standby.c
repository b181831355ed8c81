/* standby: `gflow-shim --standby`, a shim gflowd starts before it has a job for it, so
 * that a job's start does not wait for the shim's exec and start-up, and which serves
 * job after job, so that a job's end costs no process's exit and its successor no
 * process's start (docs/design.md). It waits on fd 3, a SOCK_SEQPACKET socket (kept
 * above fd 4 from then on), for a job: the arguments a shim would get (after argv[0],
 * each NUL-terminated) with the job's lock and environment fds attached (SCM_RIGHTS).
 * Those fds then become 3 and 4, as gflowd's own start of a shim gives them, and the shim
 * runs the job as if started with those arguments, which it also writes over its own
 * command line (gflowd starts it with room for them: a third argument of spaces), so that
 * ps and /proc/PID/cmdline show the job's shim as they would have. While the job runs,
 * gflowd ends it or passes a signal on through the socket ("T<id>", "F<id> <value>":
 * supervise.c, exitfile.h), not by signals, which could reach the next job. Once the
 * job's record is in its lock file, the shim closes every fd the job had (the lock's is
 * its flock), says "D<id>", and waits for the next job; a shim whose job failed in the shim's own
 * way, or that cannot say so, exits as a shim of one job does.
 *
 * While it waits it reads what no job changes and the job's start needs (its own start
 * time, the cgroup2 mount: 0.28 ms of the shim's CPU up to the job's exec). The end of
 * the stream (gflowd stopped, or closed its end), SIGTERM, SIGINT or SIGHUP, or anything
 * malformed: the standby exits having done nothing. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "exitfile.h"
#include "util.h"

/* A standby runs at most this many jobs, then exits (gflowd starts another): what a job
 * may leave in the shim's memory stays bounded. */
#define SHIM_STANDBY_JOBS_MAX 1000

static int standby_sock = -1;
static unsigned standby_jobs;
/* The command line's room: from argv[1] to the end of the last argument. */
static char *room, *room_end;

int shim_standby_sock(void)
{
    return standby_sock;
}

/* Waits for the next message on the socket. The signals that end a shim are let through
 * while it waits without a job (their default action: exit), and SIGUSR1 queued for a
 * job that is over is dropped. n bytes, or -1 at the end of the stream. */
static ssize_t shim_standby_recv(struct msghdr *m)
{
    sigset_t waiting;
    sigprocmask(SIG_SETMASK, NULL, &waiting);
    sigdelset(&waiting, SIGTERM);
    sigdelset(&waiting, SIGINT);
    sigdelset(&waiting, SIGHUP);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    struct pollfd p = {.fd = standby_sock, .events = POLLIN};
    for (;;) {
        if (ppoll(&p, 1, NULL, &waiting) < 0 && errno != EINTR)
            return -1;
        ssize_t n = recvmsg(standby_sock, m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        struct timespec zero = {0, 0};
        while (sigtimedwait(&usr1, NULL, &zero) > 0)
            ;
        return n > 0 ? n : -1;
    }
}

int shim_standby_wait(int *argc, char ***argv)
{
    /* Longer argument lists are not sent to a standby (launch.c starts a shim instead). */
    static char buf[EXITFILE_STANDBY_MAX + 1];
    if (standby_sock < 0) {
        /* What the job's start needs and no job changes, read while there is no job. */
        shim_report_self_start();
        shim_cgroup_mount_warm();
        standby_sock = fcntl(3, F_DUPFD_CLOEXEC, 5);
        if (standby_sock < 0)
            return -1;
        close(3);
        room = (*argv)[1];
        room_end = (*argv)[*argc - 1] + strlen((*argv)[*argc - 1]);
    }
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(2 * sizeof(int))];
    } control;
    struct cmsghdr *h;
    ssize_t n;
    do { /* a control message for a job that is over is dropped */
        struct iovec iov = {.iov_base = buf, .iov_len = EXITFILE_STANDBY_MAX};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = control.space,
                           .msg_controllen = sizeof(control.space)};
        n = shim_standby_recv(&m);
        if (n < 0)
            return -1;
        h = CMSG_FIRSTHDR(&m);
        if (h && (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
            return -1;
    } while (!h);
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
        h->cmsg_len != CMSG_LEN(2 * sizeof(int)) || buf[n - 1] != '\0')
        return -1;
    int fds[2];
    memcpy(fds, CMSG_DATA(h), sizeof(fds));
    /* The received fds are the lowest free ones, in order: 3 and 4 once a job is over,
     * above 4 before the first (0-4 are open: gflowd gives the standby /dev/null as 4). */
    for (int i = 0; i < 2; i++) {
        if (fds[i] == 3 + i)
            continue;
        if (dup2(fds[i], 3 + i) < 0)
            return -1;
        close(fds[i]);
    }
    size_t fit = (size_t)n < (size_t)(room_end - room) ? (size_t)n : (size_t)(room_end - room);
    memcpy(room, buf, fit);
    memset(room + fit, 0, (size_t)(room_end - room) - fit + 1);
    int count = 1;
    for (ssize_t i = 0; i < n; i++)
        count += buf[i] == '\0';
    char **v = xcalloc((size_t)count + 1, sizeof(char *));
    v[0] = (*argv)[0];
    int k = 1;
    for (char *p = buf; p < buf + n; p += strlen(p) + 1)
        v[k++] = p;
    *argc = k;
    *argv = v;
    return 0;
}

int shim_standby_done(int64_t job_id)
{
    if (++standby_jobs == SHIM_STANDBY_JOBS_MAX)
        return -1;
    /* Every fd of the job's, the lock's first (its flock ends with it): no job leaves
     * one behind for the next. */
    syscall(SYS_close_range, 3, (unsigned)standby_sock - 1, 0);
    syscall(SYS_close_range, (unsigned)standby_sock + 1, ~0U, 0);
    static const char idle[] = "--standby";
    size_t fit =
        sizeof(idle) < (size_t)(room_end - room) ? sizeof(idle) : (size_t)(room_end - room);
    memcpy(room, idle, fit);
    memset(room + fit, 0, (size_t)(room_end - room) - fit + 1);
    char msg[SHIM_CTL_MAX];
    int n = exitfile_ctl_format(msg, SHIM_CTL_DONE, job_id, 0);
    return send(standby_sock, msg, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}
