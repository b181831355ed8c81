/* listener: the Unix socket, accepting, and connection limits per uid (see listener.h). */
#include "listener.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon.h"
#include "files.h"
#include "log.h"
#include "loop.h"
#include "util.h"

/* Open connections of one uid. */
struct uid_count {
    uid_t uid;
    int64_t n;
};

struct listener {
    const struct gflowd *d;
    int fd;
    listener_accept_cb cb;
    void *arg;
    struct uid_count *uids; /* the uids with open connections */
    size_t n_uids, cap_uids;
    int64_t total;
};

static struct uid_count *uid_slot(struct listener *l, uid_t uid, bool create)
{
    for (size_t i = 0; i < l->n_uids; i++)
        if (l->uids[i].uid == uid)
            return &l->uids[i];
    if (!create)
        return NULL;
    if (l->n_uids == l->cap_uids) {
        l->cap_uids = l->cap_uids ? l->cap_uids * 2 : 16;
        l->uids = xrealloc(l->uids, l->cap_uids * sizeof(*l->uids));
    }
    l->uids[l->n_uids] = (struct uid_count){uid, 0};
    return &l->uids[l->n_uids++];
}

void listener_closed(struct listener *l, uid_t uid)
{
    struct uid_count *c = uid_slot(l, uid, false);
    if (!c)
        return;
    l->total--;
    if (--c->n == 0)
        *c = l->uids[--l->n_uids];
}

/* Answers a connection that may not be served with one HTTP error, then closes it.
 * Best effort and never blocking: the client reads it as the answer to its request. */
static void refuse(int fd, unsigned status, const char *reason, const char *msg)
{
    char body[512], head[256];
    int bn = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", msg);
    int hn = snprintf(head, sizeof(head),
                      "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                      "Content-Length: %d\r\nConnection: close\r\n\r\n",
                      status, reason, bn);
    if (send(fd, head, (size_t)hn, MSG_NOSIGNAL | MSG_DONTWAIT) == hn)
        (void)!send(fd, body, (size_t)bn, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    close(fd);
}

static void accept_cb(int lfd, uint32_t events, void *arg)
{
    struct listener *l = arg;
    const struct gflow_limits *lim = &l->d->cfg.limits;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                log_warn("accepting a connection: %s", strerror(errno));
            return; /* EMFILE and the like: the pending ones wait for the next wakeup */
        }
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
            close(fd);
            continue;
        }
        struct uid_count *c = uid_slot(l, cred.uid, true);
        if (l->total >= lim->max_connections) {
            log_warn("uid %u: connection refused: %lld open (limits.max_connections)",
                     (unsigned)cred.uid, (long long)l->total);
            refuse(fd, 503, "Service Unavailable",
                   "gflowd has too many open connections (limits.max_connections); retry soon");
        } else if (c->n >= lim->max_connections_per_user) {
            log_warn("uid %u: connection refused: %lld open (limits.max_connections_per_user)",
                     (unsigned)cred.uid, (long long)c->n);
            refuse(fd, 429, "Too Many Requests",
                   "too many open connections of yours to gflowd "
                   "(limits.max_connections_per_user); close some and retry");
        } else {
            c->n++;
            l->total++;
            l->cb(l->arg, fd, cred.uid);
            continue;
        }
        if (c->n == 0) /* made for this refusal only */
            *c = l->uids[--l->n_uids];
    }
}

/* The socket's directory: created if missing; a system daemon's must let every user in
 * whatever the umask (0755), a per-user daemon's is the user's own (0700). */
static int socket_dir(const struct gflowd *d, const char *path, char **err)
{
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    int rc = 0;
    if (slash && slash != dir) {
        *slash = '\0';
        struct stat st;
        bool existed = stat(dir, &st) == 0;
        unsigned mode = d->system ? 0755 : 0700;
        mode_t old_umask = umask(022); /* for the parents it makes too */
        if (!existed && (mkdir_p(dir, mode) < 0 || chmod(dir, mode) < 0)) {
            *err = xasprintf("cannot create %s: %s", dir, strerror(errno));
            rc = -1;
        } else if (existed && d->system && (st.st_mode & 0005) != 0005) {
            log_warn("%s is mode %03o: users other than root cannot reach the socket in it", dir,
                     (unsigned)(st.st_mode & 0777));
        }
        umask(old_umask);
    }
    free(dir);
    return rc;
}

struct listener *listener_start(const struct gflowd *d, listener_accept_cb cb, void *arg,
                                char **err)
{
    const char *path = d->paths.socket_path;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        *err = xasprintf("socket path too long: %s", path);
        return NULL;
    }
    strcpy(sa.sun_path, path);
    if (socket_dir(d, path, err) < 0)
        return NULL;
    unlink(path); /* a stale socket: the daemon lock is held, so no live daemon uses it */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chmod(path, d->system ? 0666 : 0600) < 0 || listen(fd, 4096) < 0) {
        *err = xasprintf("cannot listen on %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    struct listener *l = xcalloc(1, sizeof(*l));
    l->d = d;
    l->fd = fd;
    l->cb = cb;
    l->arg = arg;
    if (loop_add_fd(fd, EPOLLIN, accept_cb, l) < 0) {
        *err = xstrdup("cannot add the socket to the event loop");
        close(fd);
        free(l);
        return NULL;
    }
    return l;
}

void listener_stop(struct listener *l)
{
    if (!l)
        return;
    loop_del_fd(l->fd);
    close(l->fd);
    unlink(l->d->paths.socket_path);
    free(l->uids);
    free(l);
}
