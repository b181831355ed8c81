/* listener: the Unix socket, accepting, and connection limits per uid (see listener.h). */
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
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
    struct gflowd *d; /* its descriptors' reserves count the connections (fdres.h) */
    int fd;
    listener_accept_cb cb;
    void *arg;
    struct uid_count *uids;  /* the uids with open connections */
    size_t n_uids, cap_uids; /* all of them: d->fds.in_use[FDRES_CONNECTIONS] */
    int64_t max_total;       /* limits.max_connections, within the connections' reserve */
    int64_t max_other;       /* of a uid not the daemon's: its share of the reserve too */
    int spare_fd;            /* given up to accept (and refuse) a connection when out of fds */
    double warned_at;        /* when a refusal was last logged */
    int64_t unlogged;        /* refusals since then */
    struct loop_timer *resume_timer; /* accepting paused: out of descriptors */
};

/* How long accepting pauses when not even the spare descriptor lets a connection in. */
#define LISTENER_PAUSE_SECS 0.1

/* Refusals are logged at most every LISTENER_WARN_SECS: a user connecting in a loop
 * must not fill the disk with the daemon's log. */
#define LISTENER_WARN_SECS 10

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

/* uid: the peer's, or (uid_t)-1 when not known. */
static void warn_refusal(struct listener *l, uid_t uid, const char *why)
{
    double now = now_mono();
    if (l->warned_at > 0 && now - l->warned_at < LISTENER_WARN_SECS) {
        l->unlogged++;
        return;
    }
    char who[32] = "a connection";
    if (uid != (uid_t)-1)
        snprintf(who, sizeof(who), "uid %u", (unsigned)uid);
    log_warn("%s refused: %s (%lld more refused since the last such line)", who, why,
             (long long)l->unlogged);
    l->warned_at = now;
    l->unlogged = 0;
}

void listener_closed(struct listener *l, uid_t uid)
{
    struct uid_count *c = uid_slot(l, uid, false);
    if (!c)
        return;
    fdres_count(&l->d->fds, FDRES_CONNECTIONS, -1);
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
    /* A socket closed with unread input resets the connection, and the client would
     * lose the answer: read what the client has sent already (its request, usually). */
    char buf[4096];
    for (int i = 0; i < 16 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; i++)
        ;
    close(fd);
}

static void accept_cb(int lfd, uint32_t events, void *arg);

static void resume_cb(void *arg)
{
    struct listener *l = arg;
    l->resume_timer = NULL;
    if (l->spare_fd < 0)
        l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (loop_add_fd(l->fd, EPOLLIN, accept_cb, l) < 0)
        l->resume_timer = loop_add_timer(LISTENER_PAUSE_SECS, resume_cb, l);
}

/* Out of descriptors with no spare to refuse with, or out of memory: the pending
 * connections wait (the socket would otherwise wake the loop again at once, forever). */
static void pause_accepting(struct listener *l)
{
    warn_refusal(l, (uid_t)-1, "accepting paused for a moment");
    loop_del_fd(l->fd);
    l->resume_timer = loop_add_timer(LISTENER_PAUSE_SECS, resume_cb, l);
}

static void accept_cb(int lfd, uint32_t events, void *arg)
{
    struct listener *l = arg;
    const struct gflow_limits *lim = &l->d->cfg.limits;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            /* Out of descriptors: refuse the connection with the spare one rather than
             * leave it pending; without one, pause. */
            if (l->spare_fd >= 0) {
                close(l->spare_fd);
                fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd >= 0)
                    refuse(fd, 503, "Service Unavailable",
                           "gflowd is out of file descriptors; retry soon");
                l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            }
            if (fd < 0) {
                pause_accepting(l);
                return;
            }
            warn_refusal(l, (uid_t)-1, "out of file descriptors");
            continue;
        }
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) { /* ENOMEM, ENOBUFS: wait a bit */
                log_warn("accepting a connection: %s", strerror(errno));
                pause_accepting(l);
            }
            return;
        }
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
            close(fd);
            continue;
        }
        struct uid_count *c = uid_slot(l, cred.uid, true);
        /* The reserve's use, which counts a followed log's file too (api.c). */
        if (l->d->fds.in_use[FDRES_CONNECTIONS] >= l->max_total) {
            warn_refusal(l, cred.uid, "limits.max_connections reached");
            refuse(fd, 503, "Service Unavailable",
                   "gflowd has too many open connections (limits.max_connections); retry soon");
        } else if (c->n >= lim->max_connections_per_user) {
            warn_refusal(l, cred.uid, "limits.max_connections_per_user reached");
            refuse(fd, 429, "Too Many Requests",
                   "too many open connections of yours to gflowd "
                   "(limits.max_connections_per_user); close some and retry");
        } else if (cred.uid != l->d->uid && c->n >= l->max_other) {
            warn_refusal(l, cred.uid, "its share of the connections' descriptors reached");
            char msg[256];
            snprintf(msg, sizeof(msg),
                     "too many open connections of yours to gflowd (%lld: a user's share of "
                     "what its open-file limit allows connections); close some and retry",
                     (long long)l->max_other);
            refuse(fd, 429, "Too Many Requests", msg);
        } else {
            c->n++;
            fdres_count(&l->d->fds, FDRES_CONNECTIONS, 1);
            l->cb(l->arg, fd, cred.uid);
            continue;
        }
        if (c->n == 0) /* made for this refusal only */
            *c = l->uids[--l->n_uids];
    }
}

/* Warns when users other than root cannot reach the socket below dir: that needs search
 * (x) permission for others on dir and on every folder above it; read (r) permission only
 * lists a folder, so 0711 lets everyone in. */
static void warn_unreachable(const char *dir)
{
    char *path = xstrdup(dir);
    for (;;) {
        struct stat st;
        if (stat(path, &st) == 0 && !(st.st_mode & S_IXOTH)) {
            log_warn("%s is mode %03o: users other than its owner and group cannot reach the "
                     "socket below it; give them search permission with 'chmod o+x %s'",
                     path, (unsigned)(st.st_mode & 0777), path);
            break;
        }
        char *slash = strrchr(path, '/');
        if (!slash || slash == path)
            break;
        *slash = '\0';
    }
    free(path);
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
        } else if (d->system) {
            warn_unreachable(dir);
        }
        umask(old_umask);
    }
    free(dir);
    return rc;
}

struct listener *listener_start(struct gflowd *d, listener_accept_cb cb, void *arg, char **err)
{
    const char *path = d->paths.socket_path;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        *err = xasprintf("socket path too long: %s", path);
        return NULL;
    }
    if (socket_dir(d, path, err) < 0)
        return NULL;
    /* Bound under a temporary name and renamed once listening: a client that finds the
     * socket can connect (else it could meet the window between bind and listen). */
    char *tmp = xasprintf("%s.new", path);
    const char *bound = strlen(tmp) < sizeof(sa.sun_path) ? tmp : path;
    strcpy(sa.sun_path, bound);
    unlink(bound); /* a stale socket: the daemon lock is held, so no live daemon uses it */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chmod(bound, d->system ? 0666 : 0600) < 0 || listen(fd, 4096) < 0 ||
        (bound != path && rename(bound, path) < 0)) {
        *err = xasprintf("cannot listen on %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(bound);
        free(tmp);
        return NULL;
    }
    free(tmp);
    struct listener *l = xcalloc(1, sizeof(*l));
    l->d = d;
    l->fd = fd;
    l->cb = cb;
    l->arg = arg;
    l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    l->max_total = d->cfg.limits.max_connections;
    l->max_other = INT64_MAX;
    if (d->fds.limit > 0) { /* the reserves are made (fdres.h) */
        l->max_other = d->fds.user_connections;
        if (d->fds.reserved[FDRES_CONNECTIONS] < l->max_total) {
            l->max_total = d->fds.reserved[FDRES_CONNECTIONS];
            log_info("at most %lld connection%s (limits.max_connections is %lld, the open file "
                     "limit %lld)",
                     (long long)l->max_total, plural_s((long long)l->max_total),
                     (long long)d->cfg.limits.max_connections, (long long)d->fds.limit);
        }
    }
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
    if (l->resume_timer)
        loop_cancel_timer(l->resume_timer);
    else
        loop_del_fd(l->fd);
    close(l->fd);
    if (l->spare_fd >= 0)
        close(l->spare_fd);
    unlink(l->d->paths.socket_path);
    free(l->uids);
    free(l);
}
