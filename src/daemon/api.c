/* api: libmicrohttpd in our epoll loop, on a Unix socket.
 *
 * Each request's body is collected (up to daemon.max_request_bytes, else 413), then
 * routes_dispatch answers it. If the answer follows a change that is not committed yet,
 * the connection is suspended with its reply ready; api_release_waiting resumes it after
 * the commit and libmicrohttpd calls us again to queue that reply (two-phase handler, so
 * keep-alive is kept). */
#include <jansson.h>

#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <microhttpd.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "files.h"
#include "gflowd.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
#include "store.h"
#include "util.h"

struct request {
    struct strbuf body;
    bool too_large;
    unsigned status;
    struct MHD_Response *response; /* ready, waiting for the commit */
    struct MHD_Connection *conn;
    struct request *next_waiting;
};

/* A client following a job's log. */
struct follower {
    long long job_id;
    char *path;
    int fd;
    unsigned long long offset;
    struct MHD_Connection *conn;
    bool suspended;
    struct follower *next; /* in the suspended list */
};

static struct MHD_Daemon *mhd;
static int listen_fd = -1;
static int mhd_epoll_fd = -1;
static struct request *waiting;
static struct follower *suspended_followers;
static struct loop_timer *follow_timer;

#define FOLLOW_POLL_SECS 0.05

/* ---- replies ---- */

static void set_response(struct reply *rep, unsigned status, struct MHD_Response *resp,
                         const char *type)
{
    if (rep->response)
        MHD_destroy_response(rep->response);
    rep->status = status;
    rep->response = resp;
    if (type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
}

void reply_json(struct reply *rep, unsigned status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    size_t len = strlen(text);
    text = xrealloc(text, len + 2);
    text[len++] = '\n';
    text[len] = '\0';
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback(len, text, free);
    set_response(rep, status, resp, "application/json");
}

void reply_error(struct reply *rep, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    reply_json(rep, status, json_pack("{s:s}", "error", msg));
    free(msg);
}

void reply_text(struct reply *rep, unsigned status, char *text, size_t len, const char *type)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer_with_free_callback(len, text, free);
    set_response(rep, status, resp, type ? type : "text/plain; charset=utf-8");
}

/* ---- log following ---- */

static void follow_timer_cb(void *arg)
{
    (void)arg;
    follow_timer = NULL;
    struct follower *f = suspended_followers;
    if (!f)
        return;
    suspended_followers = NULL;
    for (; f; f = f->next) {
        f->suspended = false;
        MHD_resume_connection(f->conn);
    }
    MHD_run(mhd);
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
    struct job *j = jobs_get(f->job_id);
    if (!j)
        return MHD_CONTENT_READER_END_OF_STREAM;
    f->suspended = true;
    f->next = suspended_followers;
    suspended_followers = f;
    MHD_suspend_connection(f->conn);
    if (!follow_timer)
        follow_timer = loop_add_timer(FOLLOW_POLL_SECS, follow_timer_cb, NULL);
    return 0;
}

static void follow_free_cb(void *cls)
{
    struct follower *f = cls;
    for (struct follower **p = &suspended_followers; *p; p = &(*p)->next) {
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

void reply_follow_log(struct reply *rep, struct MHD_Connection *c, long long job_id,
                      const char *path, unsigned long long offset)
{
    struct follower *f = xcalloc(1, sizeof(*f));
    f->job_id = job_id;
    f->path = xstrdup(path);
    f->fd = -1;
    f->offset = offset;
    f->conn = c;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, follow_read_cb, f,
                                          follow_free_cb);
    set_response(rep, 200, resp, "text/plain; charset=utf-8");
}

/* ---- identity ---- */

static bool in_admin_group(const char *user, gid_t gid)
{
    if (!gd.has_admin_gid)
        return false;
    if (gid == gd.admin_gid)
        return true;
    int n = 64;
    gid_t *groups = xmalloc((size_t)n * sizeof(gid_t));
    if (getgrouplist(user, gid, groups, &n) < 0) {
        groups = xrealloc(groups, (size_t)n * sizeof(gid_t));
        if (getgrouplist(user, gid, groups, &n) < 0)
            n = 0;
    }
    bool found = false;
    for (int i = 0; i < n && !found; i++)
        found = groups[i] == gd.admin_gid;
    free(groups);
    return found;
}

static int identify(struct MHD_Connection *c, struct caller *who)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return -1;
    who->uid = cred.uid;
    who->gid = cred.gid;
    struct passwd *pw = getpwuid(cred.uid);
    who->user = pw ? xstrdup(pw->pw_name) : xasprintf("%u", (unsigned)cred.uid);
    if (pw)
        who->gid = pw->pw_gid;
    who->is_admin = cred.uid == 0 || cred.uid == gd.uid ||
                    (pw && in_admin_group(pw->pw_name, pw->pw_gid));
    return 0;
}

/* ---- the handler ---- */

static void queue_or_wait(struct request *r, struct reply *rep)
{
    if (store_in_transaction(gd.store)) {
        r->status = rep->status;
        r->response = rep->response;
        r->next_waiting = waiting;
        waiting = r;
        MHD_suspend_connection(r->conn);
        return;
    }
    MHD_queue_response(r->conn, rep->status, rep->response);
    MHD_destroy_response(rep->response);
}

static void answer(struct request *r, const char *method, const char *url)
{
    struct reply rep = {0};
    struct caller who = {0};
    if (identify(r->conn, &who) < 0) {
        reply_error(&rep, 403, "cannot identify the caller (SO_PEERCRED failed)");
    } else if (!gd.system && who.uid != gd.uid) {
        reply_error(&rep, 403,
                    "this gflowd serves only %s (uid %u); start your own with 'gflowd up'",
                    gd.user, (unsigned)gd.uid);
    } else if (r->too_large) {
        reply_error(&rep, 413, "request body larger than daemon.max_request_bytes (%lld bytes)",
                    (long long)gd.cfg.max_request_bytes);
    } else {
        routes_dispatch(r->conn, &who, method, url, r->body.buf ? r->body.buf : "", r->body.len,
                        &rep);
    }
    free(who.user);
    if (!rep.response)
        reply_error(&rep, 500, "internal error: no reply");
    queue_or_wait(r, &rep);
}

static enum MHD_Result handler_cb(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    struct request *r = *con_cls;
    if (!r) {
        r = xcalloc(1, sizeof(*r));
        r->conn = c;
        *con_cls = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)gd.cfg.max_request_bytes)
            r->too_large = true;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!r->too_large && r->body.len + *upload_size > (size_t)gd.cfg.max_request_bytes) {
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
    struct request *r = *con_cls;
    if (!r)
        return;
    for (struct request **p = &waiting; *p; p = &(*p)->next_waiting) {
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

void api_release_waiting(void)
{
    if (store_in_transaction(gd.store))
        return;
    struct request *list = waiting;
    if (!list)
        return;
    waiting = NULL;
    while (list) {
        struct request *r = list;
        list = r->next_waiting;
        r->next_waiting = NULL;
        MHD_resume_connection(r->conn);
    }
    /* Resumed connections are taken up by the next MHD_run; nothing wakes epoll for them. */
    MHD_run(mhd);
}

/* ---- server ---- */

static void mhd_run_cb(int fd, uint32_t events, void *arg)
{
    MHD_run(mhd);
}

/* libmicrohttpd keeps work of its own (connections ready to write after a resume, idle
 * timeouts) that no epoll event announces; its timeout says when to run it again. */
static int mhd_timeout_ms(void)
{
    if (!mhd)
        return -1;
    MHD_UNSIGNED_LONG_LONG t;
    if (MHD_get_timeout(mhd, &t) != MHD_YES)
        return -1;
    return t > 60000 ? 60000 : (int)t;
}

void api_poll(void)
{
    MHD_UNSIGNED_LONG_LONG t;
    if (mhd && MHD_get_timeout(mhd, &t) == MHD_YES && t == 0)
        MHD_run(mhd);
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

static int open_socket(const char *path, char **err)
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
        mkdir_p(dir, gd.system ? 0755 : 0700);
    }
    free(dir);
    unlink(path); /* a stale socket: the daemon lock is held, so no live daemon uses it */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chmod(path, gd.system ? 0666 : 0600) < 0 || listen(fd, 4096) < 0) {
        *err = xasprintf("cannot listen on %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

int api_start(char **err)
{
    listen_fd = open_socket(gd.paths.socket_path, err);
    if (listen_fd < 0)
        return -1;
    mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0,
                           NULL, NULL, handler_cb, NULL,
                           MHD_OPTION_LISTEN_SOCKET, listen_fd,
                           MHD_OPTION_NOTIFY_COMPLETED, completed_cb, NULL,
                           MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
                           MHD_OPTION_CONNECTION_LIMIT, (unsigned int)4000,
                           MHD_OPTION_EXTERNAL_LOGGER, mhd_log_cb, NULL,
                           MHD_OPTION_END);
    if (!mhd) {
        *err = xstrdup("cannot start the HTTP server (libmicrohttpd)");
        close(listen_fd);
        listen_fd = -1;
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_EPOLL_FD);
    mhd_epoll_fd = di ? di->epoll_fd : -1;
    if (mhd_epoll_fd < 0 || loop_add_fd(mhd_epoll_fd, EPOLLIN, mhd_run_cb, NULL) < 0) {
        *err = xstrdup("cannot add the HTTP server to the event loop");
        return -1;
    }
    loop_set_timeout_source(mhd_timeout_ms);
    return 0;
}

void api_stop(void)
{
    if (!mhd)
        return;
    /* Suspended connections must be resumed before the server can stop. */
    loop_cancel_timer(follow_timer);
    follow_timer_cb(NULL);
    while (waiting) {
        struct request *r = waiting;
        waiting = r->next_waiting;
        MHD_resume_connection(r->conn);
    }
    loop_del_fd(mhd_epoll_fd);
    loop_set_timeout_source(NULL);
    MHD_run(mhd);
    MHD_stop_daemon(mhd);
    mhd = NULL;
    close(listen_fd);
    listen_fd = -1;
    unlink(gd.paths.socket_path);
}
