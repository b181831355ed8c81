/* api: libmicrohttpd in our epoll loop, on the connections listener.c accepts.
 *
 * Each connection's caller is identified once, when it starts (auth.c). A connection
 * that has sent no request within limits.idle_timeout_secs is closed; once it has, it
 * may stay 120 s idle between requests. Each request's body is collected up to
 * limits.max_request_bytes (a larger Content-Length is refused with 413 before anything
 * of the body is read); the bodies one uid is sending stay within its share, all of them
 * within limits.max_body_bytes_in_flight (body_budget.h: else 429 or 503). A body must
 * keep arriving: one that brings less than limits.min_body_bytes_per_sec over a window of
 * limits.body_rate_window_secs is answered 408 and its connection closed (libmicrohttpd's
 * timeout is reset by every byte, so a trickle would hold its share for ever). Then
 * routes_dispatch answers it. If the
 * answer follows a change that is not committed yet, the connection is suspended with its
 * reply ready; api_release_waiting resumes it after the commit and libmicrohttpd calls us
 * again to queue that reply (two-phase handler, so keep-alive is kept). If that commit is
 * lost instead (the disk is full), the changes are undone (serve.c) and api_redo_waiting
 * answers again: a request that changed something gets an error, a read is answered anew
 * from what is now in memory.
 *
 * What a request means is the routes' (routes.c): this file knows no path but /metrics,
 * the one metrics.listen serves.
 *
 * A reply a handler defers (reply_defer: a long read such as GET /v1/stats) is computed
 * on a detached worker thread while its connection is suspended; the thread hands the
 * result back through a pipe the loop watches, and the connection is resumed with it. At
 * most API_MAX_WORKERS run at once (503 beyond). */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
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
#include "body_budget.h"
#include "clock.h"
#include "daemon.h"
#include "files.h"
#include "listener.h"
#include "log.h"
#include "loop.h"
#include "ops/metrics_listen.h"
#include "reply.h"
#include "routes.h"
#include "store/store.h"
#include "util.h"

#define STREAM_POLL_SECS 0.05
/* How long a connection may stay idle once it has sent a request (keep-alive). */
#define API_IDLE_AFTER_REQUEST_SECS 120
/* Deferred replies computed at once; each holds a read-only database connection. */
#define API_MAX_WORKERS 4
/* How often the bodies being received are looked at for their rate. */
#define API_RATE_CHECK_SECS 1.0
/* A body cut off for its rate is logged at most this often (a user may send many). */
#define API_RATE_WARN_SECS 10.0

/* One connection: who is on the other end (its socket context). */
struct conn {
    uid_t uid; /* as the listener counted it */
    struct caller who;
    bool identified;
    bool metrics_only; /* came through metrics.listen (TCP): GET /metrics only */
};

/* One request on a connection. */
struct request {
    struct api *api;
    const char *method, *url; /* libmicrohttpd's, valid until the request completes */
    struct strbuf body;
    uid_t uid;         /* whose budget the body is counted in ((uid_t)-1: metrics.listen) */
    uint64_t reserved; /* bytes of the body budget held for this body */
    unsigned refused;  /* 413, 429 or 503: the body is not kept, the answer is this status */
    /* While its body arrives: in api.receiving, with the bytes seen when its current
     * rate window began. */
    struct request *prev_receiving, *next_receiving;
    bool receiving;
    uint64_t received;
    double window_at;
    uint64_t window_bytes;
    bool answered; /* the refusal is answered without waiting for the body */
    bool cut;      /* cut off while its body arrived: its connection is to be closed */
    unsigned status;
    struct MHD_Response *response; /* ready, waiting for the commit */
    struct MHD_Connection *conn;
    struct request *next_waiting;
    struct deferred *deferred; /* its reply is being computed on a worker */
};

/* A deferred reply on its worker thread. The thread owns it until it writes its address
 * to the pipe; then the loop does (work_done_cb). */
struct deferred {
    struct request *request; /* NULL once the connection is gone */
    int notify_fd;           /* the pipe's write end */
    reply_work_fn fn;
    void *arg;
    void (*free_arg)(void *arg);
    unsigned status;
    json_t *body;
    struct deferred *next; /* in api.workers (the loop's thread only) */
};

/* A streamed reply (reply_stream) whose source has nothing new: suspended, and polled
 * again STREAM_POLL_SECS later. */
struct stream {
    struct api *api;
    reply_stream_fn read;
    void *arg;
    void (*free_arg)(void *arg);
    struct MHD_Connection *conn;
    struct stream *next; /* in the suspended list */
};

struct api {
    struct gflowd *d;
    struct MHD_Daemon *mhd;
    struct listener *listener;
    uid_t adding_uid;               /* the connection being handed to libmicrohttpd */
    bool adding_started;            /* ...and libmicrohttpd has started it */
    bool adding_metrics;            /* ...and it came through metrics.listen */
    struct metrics_listen *metrics; /* NULL: metrics.listen not set */
    struct body_budget *bodies;     /* reserved by the bodies being received */
    struct request *receiving;      /* requests whose body is arriving */
    struct loop_timer *rate_timer;  /* looks at their rate while there are some */
    double rate_warned_at;
    int mhd_epoll_fd;
    struct request *waiting;
    struct stream *suspended_streams;
    struct loop_timer *stream_timer;
    int work_pipe[2]; /* deferred replies done: their addresses, from the workers */
    int n_workers;
    struct deferred *workers; /* running */
};

/* ---- streamed replies ---- */

static void stream_timer_cb(void *arg)
{
    struct api *a = arg;
    a->stream_timer = NULL;
    struct stream *f = a->suspended_streams;
    if (!f)
        return;
    a->suspended_streams = NULL;
    for (; f; f = f->next)
        MHD_resume_connection(f->conn);
    MHD_run(a->mhd);
}

static ssize_t stream_read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *f = cls;
    ssize_t n = f->read(f->arg, pos, buf, max);
    if (n != 0)
        return n > 0 ? n : MHD_CONTENT_READER_END_OF_STREAM;
    f->next = f->api->suspended_streams;
    f->api->suspended_streams = f;
    MHD_suspend_connection(f->conn);
    if (!f->api->stream_timer)
        f->api->stream_timer = loop_add_timer(STREAM_POLL_SECS, stream_timer_cb, f->api);
    return 0;
}

static void stream_free_cb(void *cls)
{
    struct stream *f = cls;
    fdres_count(&f->api->d->fds, FDRES_CONNECTIONS, -1);
    for (struct stream **p = &f->api->suspended_streams; *p; p = &(*p)->next) {
        if (*p == f) {
            *p = f->next;
            break;
        }
    }
    if (f->free_arg)
        f->free_arg(f->arg);
    free(f);
}

/* The response of a streamed reply, now that its connection is known. */
static void stream_response(struct api *a, struct MHD_Connection *c, struct reply *rep)
{
    struct stream *f = xcalloc(1, sizeof(*f));
    f->api = a;
    f->read = rep->stream;
    f->arg = rep->stream_arg;
    f->free_arg = rep->stream_free;
    rep->stream_arg = NULL;
    f->conn = c;
    /* Its source may hold a descriptor (a followed log's file): counted in the
     * connections' reserve, as a second connection of its caller (fdres.h). */
    fdres_count(&a->d->fds, FDRES_CONNECTIONS, 1);
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 64 * 1024, stream_read_cb, f, stream_free_cb);
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

/* The request's reply, in rep. */
static void build_reply(struct request *r, struct reply *rep)
{
    struct gflowd *d = r->api->d;
    const struct gflow_limits *lim = &d->cfg.limits;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct conn *cn = ci ? ci->socket_context : NULL;
    if (cn && cn->metrics_only) {
        struct route_req req = {
            .d = d, .conn = r->conn, .method = r->method, .url = r->url, .body = ""};
        if (strcmp(r->url, "/metrics") != 0)
            reply_error(rep, 403,
                        "only GET /metrics is served on metrics.listen; use the Unix "
                        "socket for the API");
        else
            routes_dispatch(&req, rep); /* no identity: the route reads none */
    } else if (!cn || !cn->identified) {
        reply_error(rep, 403, "cannot identify the caller (SO_PEERCRED failed)");
    } else if (!auth_may_use(d, &cn->who)) {
        reply_error(rep, 403,
                    "this gflowd serves only %s (uid %u); start your own with 'gflowd up'", d->user,
                    (unsigned)d->uid);
    } else if (!auth_known(d, &cn->who)) {
        reply_error(rep, 503,
                    "gflowd cannot tell who you are yet (%s): the user database (LDAP, SSSD) "
                    "is slow or down; retry in a moment",
                    cn->who.lookup_error);
    } else if (r->refused == 413) {
        reply_error(rep, 413,
                    "request body larger than limits.max_request_bytes (%lld bytes); an admin "
                    "can raise it in the [limits] section of gflow.toml",
                    (long long)lim->max_request_bytes);
    } else if (r->refused == 429) {
        reply_error(
            rep, 429,
            "you are sending too many request bodies at once (limits.max_body_bytes_per_user, "
            "%lld bytes); wait for your other requests to finish",
            (long long)body_budget_share(lim));
    } else if (r->refused == 503) {
        reply_error(rep, 503,
                    "gflowd is receiving too many large requests at once "
                    "(limits.max_body_bytes_in_flight, %lld bytes); retry in a moment",
                    (long long)lim->max_body_bytes_in_flight);
    } else {
        struct route_req req = {
            .d = d,
            .conn = r->conn,
            .who = &cn->who,
            .method = r->method,
            .url = r->url,
            .body = r->body.buf ? r->body.buf : "",
            .body_len = r->body.len,
        };
        routes_dispatch(&req, rep);
    }
    if (rep->stream)
        stream_response(r->api, r->conn, rep);
    if (!rep->response && !rep->work)
        reply_error(rep, 500, "internal error: no reply");
}

static void *work_main(void *arg)
{
    struct deferred *w = arg;
    w->body = w->fn(w->arg, &w->status);
    ssize_t n;
    do
        n = write(w->notify_fd, &w, sizeof(w)); /* < PIPE_BUF: written whole */
    while (n < 0 && errno == EINTR);
    return NULL;
}

/* Runs rep's work on a worker thread, the connection suspended until it is done. A 503
 * instead when too many run or no thread can start. */
static void start_work(struct request *r, struct reply *rep)
{
    struct api *a = r->api;
    if (a->n_workers >= API_MAX_WORKERS || a->work_pipe[1] < 0) {
        reply_error(
            rep, 503,
            "gflowd is busy with %d long requests (statistics, Slurm commands); retry in a moment",
            a->n_workers);
        return;
    }
    struct deferred *w = xcalloc(1, sizeof(*w));
    w->request = r;
    w->notify_fd = a->work_pipe[1];
    w->fn = rep->work;
    w->arg = rep->work_arg;
    w->free_arg = rep->work_free;
    rep->work_arg = NULL;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = loop_thread_create(&t, &attr, work_main, w);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        if (w->free_arg)
            w->free_arg(w->arg);
        free(w);
        reply_error(rep, 503, "cannot start a worker thread: %s; retry in a moment", strerror(rc));
        return;
    }
    a->n_workers++;
    w->next = a->workers;
    a->workers = w;
    r->deferred = w;
    MHD_suspend_connection(r->conn);
}

static void answer(struct request *r)
{
    struct reply rep = {0};
    build_reply(r, &rep);
    if (rep.work)
        start_work(r, &rep);
    if (!rep.work || rep.response)
        queue_or_wait(r, &rep);
    reply_clear(&rep);
}

/* Workers are done: their connections are resumed with the replies. */
static void work_done_cb(int fd, uint32_t events, void *arg)
{
    (void)events;
    struct api *a = arg;
    struct deferred *w;
    bool resumed = false;
    while (read(fd, &w, sizeof(w)) == (ssize_t)sizeof(w)) {
        a->n_workers--;
        for (struct deferred **p = &a->workers; *p; p = &(*p)->next) {
            if (*p == w) {
                *p = w->next;
                break;
            }
        }
        struct request *r = w->request;
        if (r) {
            struct reply rep = {0};
            if (w->body)
                reply_json(&rep, w->status, w->body);
            else
                reply_error(&rep, 500, "internal error: no reply");
            w->body = NULL;
            r->status = rep.status;
            r->response = rep.response;
            rep.response = NULL;
            reply_clear(&rep);
            r->deferred = NULL;
            MHD_resume_connection(r->conn);
            resumed = true;
        }
        json_decref(w->body);
        if (w->free_arg)
            w->free_arg(w->arg);
        free(w);
    }
    if (resumed)
        MHD_run(a->mhd);
}

/* ---- bodies: their budget and their rate ---- */

static void rate_cb(void *arg);

static void receiving_add(struct request *r)
{
    struct api *a = r->api;
    r->receiving = true;
    r->window_at = now_mono();
    r->next_receiving = a->receiving;
    if (a->receiving)
        a->receiving->prev_receiving = r;
    a->receiving = r;
    if (!a->rate_timer && a->d->cfg.limits.min_body_bytes_per_sec > 0)
        a->rate_timer = loop_add_timer(API_RATE_CHECK_SECS, rate_cb, a);
}

static void receiving_remove(struct request *r)
{
    if (!r->receiving)
        return;
    if (r->prev_receiving)
        r->prev_receiving->next_receiving = r->next_receiving;
    else
        r->api->receiving = r->next_receiving;
    if (r->next_receiving)
        r->next_receiving->prev_receiving = r->prev_receiving;
    r->prev_receiving = r->next_receiving = NULL;
    r->receiving = false;
}

/* Gives back the bytes of the budget a request's body held. */
static void release_body(struct request *r)
{
    body_budget_give(r->api->bodies, r->uid, r->reserved);
    r->reserved = 0;
    strbuf_free(&r->body);
}

/* Ends a request whose body is arriving, with an answer written on the connection
 * itself: libmicrohttpd is reading the body and has written nothing. The socket is shut
 * down, and the handler closes the connection at its next call (r->cut); its share of
 * the budget is given back now. */
static void cut_off(struct request *r, unsigned status, const char *reason, const char *msg)
{
    receiving_remove(r);
    release_body(r);
    r->refused = status;
    r->answered = r->cut = true;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    char body[512], head[192];
    int bn = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", msg);
    int hn = snprintf(head, sizeof(head),
                      "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                      "Content-Length: %d\r\nConnection: close\r\n\r\n",
                      status, reason, bn);
    if (send(ci->connect_fd, head, (size_t)hn, MSG_NOSIGNAL | MSG_DONTWAIT) == hn)
        (void)!send(ci->connect_fd, body, (size_t)bn, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(ci->connect_fd, SHUT_RDWR);
}

/* A body slower than limits.min_body_bytes_per_sec: 408. */
static void cut_off_slow(struct request *r, double rate)
{
    struct api *a = r->api;
    const struct gflow_limits *lim = &a->d->cfg.limits;
    double now = now_mono();
    if (now - a->rate_warned_at >= API_RATE_WARN_SECS) {
        log_warn("uid %u: a request body arrived at %.0f bytes/s, under "
                 "limits.min_body_bytes_per_sec (%lld): cut off",
                 (unsigned)r->uid, rate, (long long)lim->min_body_bytes_per_sec);
        a->rate_warned_at = now;
    }
    char msg[256];
    snprintf(msg, sizeof(msg),
             "the request body arrived at %.0f bytes/s, under limits.min_body_bytes_per_sec "
             "(%lld over %lld s); send it at once",
             rate, (long long)lim->min_body_bytes_per_sec, (long long)lim->body_rate_window_secs);
    cut_off(r, 408, "Request Timeout", msg);
}

/* Every API_RATE_CHECK_SECS while bodies arrive: a body whose window is over has
 * brought at least limits.min_body_bytes_per_sec on average in it, or is cut off. */
static void rate_cb(void *arg)
{
    struct api *a = arg;
    const struct gflow_limits *lim = &a->d->cfg.limits;
    a->rate_timer = NULL;
    double now = now_mono();
    bool cut = false;
    for (struct request *r = a->receiving, *next; r; r = next) {
        next = r->next_receiving;
        double secs = now - r->window_at;
        if (secs < (double)lim->body_rate_window_secs)
            continue;
        double rate = (double)(r->received - r->window_bytes) / secs;
        if (rate < (double)lim->min_body_bytes_per_sec) {
            cut_off_slow(r, rate);
            cut = true;
        } else {
            r->window_at = now;
            r->window_bytes = r->received;
        }
    }
    if (a->receiving && lim->min_body_bytes_per_sec > 0)
        a->rate_timer = loop_add_timer(API_RATE_CHECK_SECS, rate_cb, a);
    if (cut)
        MHD_run(a->mhd);
}

/* The total is taken and uid wants room within its fair share of it: the newest body
 * still arriving of the uid most over its fair share is cut off with 503 (body_budget.h).
 * Whether one was. */
static bool make_room(struct api *a, uid_t uid, uint64_t n)
{
    uid_t victim;
    if (!body_budget_over_share(a->bodies, &a->d->cfg.limits, uid, n, &victim))
        return false;
    for (struct request *r = a->receiving; r; r = r->next_receiving) { /* newest first */
        if (r->uid != victim)
            continue;
        log_info("uid %u: a request body cut off to make room for uid %u "
                 "(limits.max_body_bytes_in_flight is shared fairly)",
                 (unsigned)victim, (unsigned)uid);
        cut_off(r, 503, "Service Unavailable",
                "your request bodies hold more than a fair share of "
                "limits.max_body_bytes_in_flight while other users wait; send fewer at once");
        return true;
    }
    return false;
}

/* Takes n bytes of the budget for r's body: 0, or the status of the refusal. */
static unsigned take_budget(struct request *r, uint64_t n)
{
    struct api *a = r->api;
    unsigned refused;
    while ((refused = body_budget_take(a->bodies, &a->d->cfg.limits, r->uid, n)) == 503 &&
           make_room(a, r->uid, n))
        ;
    return refused;
}

/* The first call for a request: its headers are in. Checks what its body may take
 * before any of it is read. */
static void request_begins(struct request *r, struct MHD_Connection *c)
{
    struct api *a = r->api;
    const struct gflow_limits *lim = &a->d->cfg.limits;
    /* It has sent a request: the short timeout for silent connections is over. */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned int)API_IDLE_AFTER_REQUEST_SECS);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    const struct conn *cn = ci ? ci->socket_context : NULL;
    r->uid = cn && !cn->metrics_only ? cn->uid : (uid_t)-1;
    const char *cl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0; /* chunked: as it arrives */
    if (want > (unsigned long long)lim->max_request_bytes)
        r->refused = 413;
    else
        r->refused = take_budget(r, want);
    if (r->refused)
        return;
    r->reserved = want;
    if (want > 0 ||
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
        receiving_add(r); /* a body follows: its rate is watched */
}

/* A piece of the body: kept, or dropped once the request is refused. */
static void request_data(struct request *r, const char *data, size_t n)
{
    struct api *a = r->api;
    const struct gflow_limits *lim = &a->d->cfg.limits;
    if (r->refused)
        return;
    r->received += n;
    uint64_t after = r->body.len + n;
    if (after > (uint64_t)lim->max_request_bytes) {
        r->refused = 413;
    } else if (after > r->reserved) { /* more than announced (or chunked) */
        r->refused = take_budget(r, after - r->reserved);
        if (!r->refused)
            r->reserved = after;
    }
    if (r->refused) {
        receiving_remove(r);
        release_body(r);
    } else {
        strbuf_add(&r->body, data, n);
    }
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
        r->method = method;
        r->url = url;
        *con_cls = r;
        request_begins(r, c);
        if (r->refused) { /* answered at once: none of the body is read */
            r->answered = true;
            answer(r);
        }
        return MHD_YES;
    }
    if (r->cut) /* its answer is on the socket already */
        return MHD_NO;
    if (*upload_size) {
        request_data(r, upload_data, *upload_size);
        *upload_size = 0;
        if (r->refused && !r->answered) { /* and the rest is not read either */
            r->answered = true;
            answer(r);
        }
        return MHD_YES;
    }
    if (r->response) { /* resumed after the commit */
        enum MHD_Result ret = MHD_queue_response(c, r->status, r->response);
        MHD_destroy_response(r->response);
        r->response = NULL;
        return ret;
    }
    if (r->answered) /* refused: its answer is queued or waiting */
        return MHD_YES;
    receiving_remove(r); /* the body is in */
    answer(r);
    return MHD_YES;
}

static void completed_cb(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct api *a = cls;
    struct request *r = *con_cls;
    if (!r)
        return;
    if (r->deferred) /* its worker's answer will find no one */
        r->deferred->request = NULL;
    for (struct request **p = &a->waiting; *p; p = &(*p)->next_waiting) {
        if (*p == r) {
            *p = r->next_waiting;
            break;
        }
    }
    if (r->response)
        MHD_destroy_response(r->response);
    receiving_remove(r);
    release_body(r);
    free(r);
    *con_cls = NULL;
}

/* A connection starts (identify its caller) or ends (let the listener count it). */
static void connection_cb(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct api *a = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn *cn = xcalloc(1, sizeof(*cn));
        cn->uid = a->adding_uid;
        cn->metrics_only = a->adding_metrics;
        a->adding_started = true;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        cn->identified =
            !cn->metrics_only && ci && auth_identify(a->d, ci->connect_fd, &cn->who) == 0;
        *socket_context = cn;
        return;
    }
    struct conn *cn = *socket_context;
    if (!cn)
        return;
    if (cn->metrics_only)
        metrics_listen_closed(a->metrics);
    else if (a->listener) /* NULL once stopping: nothing is counted any more */
        listener_closed(a->listener, cn->uid);
    auth_caller_free(&cn->who);
    free(cn);
    *socket_context = NULL;
}

/* The listener accepted a connection: libmicrohttpd takes it over. */
static void accepted_cb(void *arg, int fd, uid_t uid)
{
    struct api *a = arg;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    a->adding_uid = uid;
    a->adding_started = false;
    a->adding_metrics = false;
    if (MHD_add_connection(a->mhd, fd, (struct sockaddr *)&sa, sizeof(sa)) != MHD_YES) {
        log_warn("uid %u: libmicrohttpd could not take a connection: %s", (unsigned)uid,
                 strerror(errno));
        if (!a->adding_started) /* closed without a notification: no end will be told */
            listener_closed(a->listener, uid);
    }
}

/* A connection to metrics.listen: libmicrohttpd takes it over, for GET /metrics only. */
static void metrics_accepted_cb(void *arg, int fd)
{
    struct api *a = arg;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    a->adding_started = false;
    a->adding_metrics = true;
    if (MHD_add_connection(a->mhd, fd, (struct sockaddr *)&sa, sizeof(sa)) != MHD_YES &&
        !a->adding_started)
        metrics_listen_closed(a->metrics);
    a->adding_metrics = false;
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
    MHD_run(a->mhd);
}

void api_redo_waiting(struct api *a, unsigned status, const char *msg)
{
    struct request *list = a->waiting, *reads = NULL;
    a->waiting = NULL;
    bool resumed = false;
    while (list) {
        struct request *r = list;
        list = r->next_waiting;
        MHD_destroy_response(r->response);
        struct reply rep = {0};
        struct route_req req = {
            .d = a->d,
            .conn = r->conn,
            .method = r->method,
            .url = r->url,
            .body = r->body.buf ? r->body.buf : "",
            .body_len = r->body.len,
        };
        bool read = routes_is_read(&req);
        if (read)
            build_reply(r, &rep);
        else
            reply_error(&rep, status, "%s", msg);
        r->status = rep.status;
        r->response = rep.response;
        rep.response = NULL;
        reply_clear(&rep);
        if (read) { /* from what is in memory now: it waits for the next commit */
            r->next_waiting = reads;
            reads = r;
        } else { /* nothing of it was saved: that needs no commit to say */
            r->next_waiting = NULL;
            MHD_resume_connection(r->conn);
            resumed = true;
        }
    }
    a->waiting = reads;
    if (resumed)
        MHD_run(a->mhd);
    api_release_waiting(a);
}

/* ---- server ---- */

static void mhd_run_cb(int fd, uint32_t events, void *arg)
{
    struct api *a = arg;
    MHD_run(a->mhd);
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

void api_run(struct api *a)
{
    if (a)
        MHD_run(a->mhd);
}

void api_poll(struct api *a)
{
    MHD_UNSIGNED_LONG_LONG t;
    if (MHD_get_timeout(a->mhd, &t) == MHD_YES && t == 0)
        MHD_run(a->mhd);
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

struct api *api_start(struct gflowd *d, char **err)
{
    struct api *a = xcalloc(1, sizeof(*a));
    a->d = d;
    a->mhd_epoll_fd = -1;
    a->work_pipe[0] = a->work_pipe[1] = -1;
    if (pipe2(a->work_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
        loop_add_fd(a->work_pipe[0], EPOLLIN, work_done_cb, a) < 0) {
        *err = xasprintf("cannot make the workers' pipe: %s", strerror(errno));
        free(a);
        return NULL;
    }
    a->mhd = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0,
        NULL, NULL, handler_cb, a, MHD_OPTION_NOTIFY_COMPLETED, completed_cb, a,
        MHD_OPTION_NOTIFY_CONNECTION, connection_cb, a, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)d->cfg.limits.idle_timeout_secs, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned int)d->cfg.limits.max_connections + 16, MHD_OPTION_EXTERNAL_LOGGER, mhd_log_cb,
        NULL, MHD_OPTION_END);
    if (!a->mhd) {
        *err = xstrdup("cannot start the HTTP server (libmicrohttpd)");
        free(a);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    a->mhd_epoll_fd = di ? di->epoll_fd : -1;
    if (a->mhd_epoll_fd < 0 || loop_add_fd(a->mhd_epoll_fd, EPOLLIN, mhd_run_cb, a) < 0) {
        *err = xstrdup("cannot add the HTTP server to the event loop");
        MHD_stop_daemon(a->mhd);
        free(a);
        return NULL;
    }
    a->listener = listener_start(d, accepted_cb, a, err);
    if (!a->listener) {
        loop_del_fd(a->mhd_epoll_fd);
        MHD_stop_daemon(a->mhd);
        free(a);
        return NULL;
    }
    if (d->cfg.metrics_listen && *d->cfg.metrics_listen) {
        a->metrics = metrics_listen_start(d->cfg.metrics_listen, metrics_accepted_cb, a, err);
        if (!a->metrics) {
            listener_stop(a->listener);
            loop_del_fd(a->mhd_epoll_fd);
            MHD_stop_daemon(a->mhd);
            free(a);
            return NULL;
        }
    }
    a->bodies = body_budget_new();
    loop_set_timeout_source(mhd_timeout_ms, a);
    return a;
}

/* At stop: the requests whose workers still run get a 503 now; the workers' results are
 * dropped (the pipe stays open for them: the process is ending). */
static void resume_workers_requests(struct api *a)
{
    loop_del_fd(a->work_pipe[0]);
    for (struct deferred *w = a->workers; w; w = w->next) {
        struct request *r = w->request;
        if (!r)
            continue;
        struct reply rep = {0};
        reply_error(&rep, 503, "gflowd is stopping");
        r->status = rep.status;
        r->response = rep.response;
        rep.response = NULL;
        r->deferred = NULL;
        w->request = NULL;
        MHD_resume_connection(r->conn);
    }
    if (a->n_workers == 0) {
        close(a->work_pipe[0]);
        close(a->work_pipe[1]);
    }
}

void api_stop(struct api *a)
{
    if (!a)
        return;
    listener_stop(a->listener); /* no new connections */
    a->listener = NULL;
    metrics_listen_stop(a->metrics);
    a->metrics = NULL;
    /* Suspended connections must be resumed before the server can stop. */
    loop_cancel_timer(a->stream_timer);
    stream_timer_cb(a);
    while (a->waiting) {
        struct request *r = a->waiting;
        a->waiting = r->next_waiting;
        MHD_resume_connection(r->conn);
    }
    resume_workers_requests(a);
    loop_del_fd(a->mhd_epoll_fd);
    loop_set_timeout_source(NULL, NULL);
    MHD_run(a->mhd);
    MHD_stop_daemon(a->mhd);
    loop_cancel_timer(a->rate_timer);
    body_budget_free(a->bodies);
    free(a);
}
