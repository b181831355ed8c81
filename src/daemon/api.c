/* api: libmicrohttpd in our epoll loop, on a Unix socket.
 *
 * Each request's body is collected (up to daemon.max_request_bytes, else 413), then
 * routes_dispatch answers it. If the answer follows a change that is not committed yet,
 * the connection is suspended with its reply ready; api_release_waiting resumes it after
 * the commit and libmicrohttpd calls us again to queue that reply (two-phase handler, so
 * keep-alive is kept). */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "auth.h"
#include "daemon.h"
#include "files.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "reply.h"
#include "routes.h"
#include "store.h"
#include "util.h"

#define FOLLOW_POLL_SECS 0.05

struct request {
    struct api *api;
    struct strbuf body;
    bool too_large;
    unsigned status;
    struct MHD_Response *response; /* ready, waiting for the commit */
    struct MHD_Connection *conn;
    struct request *next_waiting;
};

/* A client following a job's log. */
struct follower {
    struct api *api;
    int64_t job_id;
    char *path;
    int fd;
    uint64_t offset;
    struct MHD_Connection *conn;
    struct follower *next; /* in the suspended list */
};

struct api {
    struct gflowd *d;
    struct MHD_Daemon *mhd;
    int listen_fd;
    int mhd_epoll_fd;
    bool closed; /* a connection closed during the current MHD_run */
    struct request *waiting;
    struct follower *suspended_followers;
    struct loop_timer *follow_timer;
};

/* Runs libmicrohttpd's event processing. Out of file descriptors (a failed accept),
 * or at its connection limit, it takes its listening socket out of its epoll set and
 * puts it back only at the start of a later run, once a connection has closed; with
 * no other event that later run would never come, and the daemon would stay deaf to
 * new connections. So a run in which a connection closed is followed by another. */
static void api_run(struct api *a)
{
    a->closed = false;
    MHD_run(a->mhd);
    if (a->closed) {
        a->closed = false;
        MHD_run(a->mhd);
    }
}

static void connection_cb(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct api *a = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED)
        a->closed = true;
}

/* ---- log following ---- */

static void follow_timer_cb(void *arg)
{
    struct api *a = arg;
    a->follow_timer = NULL;
    struct follower *f = a->suspended_followers;
    if (!f)
        return;
    a->suspended_followers = NULL;
    for (; f; f = f->next)
        MHD_resume_connection(f->conn);
    api_run(a);
}

static ssize_t follow_read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct follower *f = cls;
    if (f->fd < 0)
        f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd >= 0) {
        ssize_t n = pread(f->fd, buf, max, (off_t)(f->offset + pos));
        if (n > 0)
            return n;
    }
    /* Nothing new. The job's output is complete once it has left the active table
     * (the shim writes the exit file only after every process of the job is gone). */
    if (!jobs_get(f->api->d->jobs, f->job_id))
        return MHD_CONTENT_READER_END_OF_STREAM;
    f->next = f->api->suspended_followers;
    f->api->suspended_followers = f;
    MHD_suspend_connection(f->conn);
    if (!f->api->follow_timer)
        f->api->follow_timer = loop_add_timer(FOLLOW_POLL_SECS, follow_timer_cb, f->api);
    return 0;
}

static void follow_free_cb(void *cls)
{
    struct follower *f = cls;
    for (struct follower **p = &f->api->suspended_followers; *p; p = &(*p)->next) {
        if (*p == f) {
            *p = f->next;
            break;
        }
    }
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    free(f);
}

/* The streaming response for a reply that asks to follow a log. */
static void follow_response(struct api *a, struct MHD_Connection *c, struct reply *rep)
{
    struct follower *f = xcalloc(1, sizeof(*f));
    f->api = a;
    f->job_id = rep->follow_job;
    f->path = rep->follow_path;
    rep->follow_path = NULL;
    f->fd = -1;
    f->offset = rep->follow_offset;
    f->conn = c;
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 64 * 1024, follow_read_cb, f, follow_free_cb);
    reply_response(rep, 200, resp, "text/plain; charset=utf-8");
}

/* ---- the handler ---- */

static void queue_or_wait(struct request *r, struct reply *rep)
{
    if (store_in_transaction(r->api->d->store)) {
        r->status = rep->status;
        r->response = rep->response;
        rep->response = NULL;
        r->next_waiting = r->api->waiting;
        r->api->waiting = r;
        MHD_suspend_connection(r->conn);
        return;
    }
    MHD_queue_response(r->conn, rep->status, rep->response);
}

static void answer(struct request *r, const char *method, const char *url)
{
    struct gflowd *d = r->api->d;
    struct reply rep = {0};
    struct caller who = {0};
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || auth_identify(d, ci->connect_fd, &who) < 0) {
        reply_error(&rep, 403, "cannot identify the caller (SO_PEERCRED failed)");
    } else if (!auth_may_use(d, &who)) {
        reply_error(&rep, 403,
                    "this gflowd serves only %s (uid %u); start your own with 'gflowd up'", d->user,
                    (unsigned)d->uid);
    } else if (r->too_large) {
        reply_error(&rep, 413, "request body larger than daemon.max_request_bytes (%lld bytes)",
                    (long long)d->cfg.max_request_bytes);
    } else {
        struct route_req req = {
            .d = d,
            .conn = r->conn,
            .who = &who,
            .method = method,
            .url = url,
            .body = r->body.buf ? r->body.buf : "",
            .body_len = r->body.len,
        };
        routes_dispatch(&req, &rep);
    }
    auth_caller_free(&who);
    if (rep.follow_path)
        follow_response(r->api, r->conn, &rep);
    if (!rep.response)
        reply_error(&rep, 500, "internal error: no reply");
    queue_or_wait(r, &rep);
    reply_clear(&rep);
}

static enum MHD_Result handler_cb(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    struct api *a = cls;
    struct request *r = *con_cls;
    if (!r) {
        r = xcalloc(1, sizeof(*r));
        r->api = a;
        r->conn = c;
        *con_cls = r;
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)a->d->cfg.max_request_bytes)
            r->too_large = true;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!r->too_large && r->body.len + *upload_size > (size_t)a->d->cfg.max_request_bytes) {
            r->too_large = true;
            strbuf_free(&r->body);
        }
        if (!r->too_large)
            strbuf_add(&r->body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->response) { /* resumed after the commit */
        enum MHD_Result ret = MHD_queue_response(c, r->status, r->response);
        MHD_destroy_response(r->response);
        r->response = NULL;
        return ret;
    }
    answer(r, method, url);
    return MHD_YES;
}

static void completed_cb(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct api *a = cls;
    struct request *r = *con_cls;
    if (!r)
        return;
    for (struct request **p = &a->waiting; *p; p = &(*p)->next_waiting) {
        if (*p == r) {
            *p = r->next_waiting;
            break;
        }
    }
    if (r->response)
        MHD_destroy_response(r->response);
    strbuf_free(&r->body);
    free(r);
    *con_cls = NULL;
}

void api_release_waiting(struct api *a)
{
    if (store_in_transaction(a->d->store))
        return;
    struct request *list = a->waiting;
    if (!list)
        return;
    a->waiting = NULL;
    while (list) {
        struct request *r = list;
        list = r->next_waiting;
        r->next_waiting = NULL;
        MHD_resume_connection(r->conn);
    }
    /* Resumed connections are taken up by the next MHD_run; nothing wakes epoll for them. */
    api_run(a);
}

/* ---- server ---- */

static void mhd_run_cb(int fd, uint32_t events, void *arg)
{
    struct api *a = arg;
    api_run(a);
}

/* libmicrohttpd keeps work of its own (connections ready to write after a resume, idle
 * timeouts) that no epoll event announces; its timeout says when to run it again. */
static int mhd_timeout_ms(void *arg)
{
    struct api *a = arg;
    MHD_UNSIGNED_LONG_LONG t;
    if (MHD_get_timeout(a->mhd, &t) != MHD_YES)
        return -1;
    return t > 60000 ? 60000 : (int)t;
}

void api_poll(struct api *a)
{
    MHD_UNSIGNED_LONG_LONG t;
    if (MHD_get_timeout(a->mhd, &t) == MHD_YES && t == 0)
        api_run(a);
}

static void mhd_log_cb(void *cls, const char *fmt, va_list ap)
{
    if (log_threshold < LOG_DEBUG)
        return;
    char *msg = xvasprintf(fmt, ap);
    size_t n = strlen(msg);
    if (n && msg[n - 1] == '\n')
        msg[n - 1] = '\0';
    log_debug("http: %s", msg);
    free(msg);
}

static int open_socket(const struct gflowd *d, const char *path, char **err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        *err = xasprintf("socket path too long: %s", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        mkdir_p(dir, d->system ? 0755 : 0700);
    }
    free(dir);
    unlink(path); /* a stale socket: the daemon lock is held, so no live daemon uses it */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chmod(path, d->system ? 0666 : 0600) < 0 || listen(fd, 4096) < 0) {
        *err = xasprintf("cannot listen on %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

struct api *api_start(struct gflowd *d, char **err)
{
    struct api *a = xcalloc(1, sizeof(*a));
    a->d = d;
    a->mhd_epoll_fd = -1;
    a->listen_fd = open_socket(d, d->paths.socket_path, err);
    if (a->listen_fd < 0) {
        free(a);
        return NULL;
    }
    a->mhd = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler_cb, a,
        MHD_OPTION_LISTEN_SOCKET, a->listen_fd, MHD_OPTION_NOTIFY_COMPLETED, completed_cb, a,
        MHD_OPTION_NOTIFY_CONNECTION, connection_cb, a, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)120, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)4000,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log_cb, NULL, MHD_OPTION_END);
    if (!a->mhd) {
        *err = xstrdup("cannot start the HTTP server (libmicrohttpd)");
        close(a->listen_fd);
        free(a);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    a->mhd_epoll_fd = di ? di->epoll_fd : -1;
    if (a->mhd_epoll_fd < 0 || loop_add_fd(a->mhd_epoll_fd, EPOLLIN, mhd_run_cb, a) < 0) {
        *err = xstrdup("cannot add the HTTP server to the event loop");
        MHD_stop_daemon(a->mhd);
        close(a->listen_fd);
        free(a);
        return NULL;
    }
    loop_set_timeout_source(mhd_timeout_ms, a);
    return a;
}

void api_stop(struct api *a)
{
    if (!a)
        return;
    /* Suspended connections must be resumed before the server can stop. */
    loop_cancel_timer(a->follow_timer);
    follow_timer_cb(a);
    while (a->waiting) {
        struct request *r = a->waiting;
        a->waiting = r->next_waiting;
        MHD_resume_connection(r->conn);
    }
    loop_del_fd(a->mhd_epoll_fd);
    loop_set_timeout_source(NULL, NULL);
    api_run(a);
    MHD_stop_daemon(a->mhd);
    close(a->listen_fd);
    unlink(a->d->paths.socket_path);
    free(a);
}
