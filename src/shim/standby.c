/* standby: `gflow-shim --standby`, a shim gflowd starts before it has a job for it, so
 * that a job's start does not wait for the shim's exec and start-up. It waits on fd 3, a
 * SOCK_SEQPACKET socket, for one message: the arguments a shim would get (after argv[0],
 * each NUL-terminated) with the job's lock and environment fds attached (SCM_RIGHTS).
 * Those fds then become 3 and 4, as gflowd's own start of a shim gives them, and the shim
 * goes on as if started with those arguments, which it also writes over its own command
 * line (gflowd starts it with room for them: a third argument of spaces), so that ps and
 * /proc/PID/cmdline show the job's shim as they would have. While it waits it reads what no
 * job changes and the job's start needs (its own start time, the cgroup2 mount: 0.28 ms
 * of the shim's CPU up to the job's exec, docs/design.md). The end of the stream (gflowd
 * stopped, or closed its end) or anything malformed: the standby exits having done
 * nothing. */
#include "shim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exitfile.h"
#include "util.h"

int shim_standby_wait(int *argc, char ***argv)
{
    /* Longer argument lists are not sent to a standby (launch.c starts a shim instead). */
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
    /* What the job's start needs and no job changes, read while there is no job. */
    shim_report_self_start();
    shim_cgroup_mount_warm();
    ssize_t n;
    do
        n = recvmsg(3, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    struct cmsghdr *h = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
    if (!h || h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
        h->cmsg_len != CMSG_LEN(2 * sizeof(int)) || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
        buf[n - 1] != '\0')
        return -1;
    int fds[2];
    memcpy(fds, CMSG_DATA(h), sizeof(fds));
    /* Received fds are above 4 (0-4 are open: gflowd gives the standby /dev/null as 4). */
    if (dup2(fds[0], 3) < 0 || dup2(fds[1], 4) < 0)
        return -1;
    close(fds[0]);
    close(fds[1]);
    /* The command line's room: from argv[1] to the end of the last argument. What does
     * not fit is left out of ps (the shim itself reads buf). */
    char *room = (*argv)[1], *end = (*argv)[*argc - 1] + strlen((*argv)[*argc - 1]);
    size_t fit = (size_t)n < (size_t)(end - room) ? (size_t)n : (size_t)(end - room);
    memcpy(room, buf, fit);
    memset(room + fit, 0, (size_t)(end - room) - fit + 1);
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
