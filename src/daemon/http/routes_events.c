/* routes_events: GET /v1/events, the connections that stream events (docs/api.md).
 *
 * Each client has a buffer of text libmicrohttpd has not taken yet. Its content reader
 * hands that over; with nothing to hand over it suspends the connection, and events.c
 * resumes it when text arrives (from the loop, never inside libmicrohttpd's
 * callbacks). So the loop never waits for a client: a client that stops reading only
 * lets its buffer grow, up to limits.event_buffer_bytes, and is then dropped with a
 * "resync" event. A stream starts with a "hello" event; a Last-Event-ID (the header, or
 * ?last_event_id=) of this run whose successors are all still in the ring gets exactly
 * the events it missed, any other gets a "resync" (read the state again). Filters:
 * ?user=NAME|all (default: the caller's own jobs, as GET /v1/jobs), ?job=ID[,ID] (any
 * user's, unless user is given too), ?types=job_started,... Jobs are shown as GET
 * /v1/jobs shows them to anyone (no environment or script: docs/security.md); GPU and
 * daemon events go to everyone. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/epoll.h>

#include "api.h"
#include "daemon.h"
#include "events_internal.h"
#include "gflow_build.h"
#include "loop.h"
#include "parse.h"
#include "routes.h"

#define EVENTS_READ_BLOCK 16384

/* A suspended client hung up: libmicrohttpd, which does not watch a suspended
 * connection, would only notice at the next ping. Its stream ends now. */
static void sub_gone_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct event_sub *s = arg;
    s->ending = true;
    events_sub_resume(s);
    api_run(s->ev->d->api);
}

static ssize_t sub_read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct event_sub *s = cls;
    size_t left = s->out.len - s->out_pos;
    if (left) {
        size_t n = left < max ? left : max;
        memcpy(buf, s->out.buf + s->out_pos, n);
        s->out_pos += n;
        if (s->out_pos == s->out.len) {
            strbuf_reset(&s->out);
            s->out_pos = 0;
        }
        return (ssize_t)n;
    }
    if (s->ending)
        return MHD_CONTENT_READER_END_OF_STREAM;
    s->suspended = true;
    MHD_suspend_connection(s->conn);
    if (s->fd >= 0 && loop_add_fd(s->fd, EPOLLRDHUP, sub_gone_cb, s) < 0)
        s->fd = -1; /* not watched: the next ping finds it gone */
    return 0;
}

/* The connection is gone (libmicrohttpd destroys the response with it). */
static void sub_free_cb(void *cls)
{
    struct event_sub *s = cls;
    struct events *ev = s->ev;
    if (s->suspended && s->fd >= 0)
        loop_del_fd(s->fd);
    if (s->prev)
        s->prev->next = s->next;
    else
        ev->subs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    ev->n_subs--;
    events_clients_changed(ev);
    strbuf_free(&s->out);
    free(s->user);
    free(s->jobs);
    free(s);
}

/* ?types=a,b into bits; -1 with *err on an unknown name. */
static int parse_types(const char *list, unsigned *types, char **err)
{
    *types = 0;
    char *copy = xstrdup(list), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int bit = event_type_bit(t);
        if (bit < 0) {
            struct strbuf names;
            strbuf_init(&names);
            for (int i = 0; i < EVENT_TYPE_COUNT; i++)
                strbuf_addf(&names, "%s%s", i ? ", " : "", event_type_names[i]);
            *err = xasprintf("unknown event type '%s' in ?types=; known: %s", t, names.buf);
            strbuf_free(&names);
            free(copy);
            return -1;
        }
        *types |= 1u << bit;
    }
    free(copy);
    if (!*types) {
        *err = xstrdup("?types= names no event type; e.g. ?types=job_started,job_ended");
        return -1;
    }
    return 0;
}

/* Reads the request's filters into s. 0, or -1 with a 400 in rep. */
static int read_filters(const struct route_req *r, struct event_sub *s, struct reply *rep)
{
    const char *user = route_query(r, "user");
    const char *job = route_query(r, "job");
    const char *types = route_query(r, "types");
    char *err = NULL;
    if (job && parse_id_list(job, &s->jobs, &s->n_jobs, &err) < 0) {
        reply_error(rep, 400, "invalid ?job=: %s; e.g. ?job=12,14", err);
        free(err);
        return -1;
    }
    s->types = EVENT_TYPES_ALL;
    if (types && parse_types(types, &s->types, &err) < 0) {
        reply_error(rep, 400, "%s", err);
        free(err);
        return -1;
    }
    if (user && *user)
        s->user = strcmp(user, "all") == 0 ? NULL : xstrdup(user);
    else if (!job) /* the caller's own jobs, as GET /v1/jobs */
        s->user = xstrdup(r->who->user);
    return 0;
}

/* 0 when the caller may open one more stream, else -1 with a 429 or 503 in rep. */
static int check_limits(const struct route_req *r, const struct events *ev, struct reply *rep)
{
    const struct gflow_limits *lim = &r->d->cfg.limits;
    if ((int64_t)ev->n_subs >= lim->max_event_clients) {
        reply_error(rep, 503,
                    "gflowd already streams events to %zu clients (limits.max_event_clients); "
                    "retry later",
                    ev->n_subs);
        return -1;
    }
    int64_t mine = 0;
    for (const struct event_sub *s = ev->subs; s; s = s->next)
        mine += s->uid == r->who->uid;
    if (mine >= lim->max_event_clients_per_user) {
        reply_error(rep, 429,
                    "you already have %lld event streams open "
                    "(limits.max_event_clients_per_user); close one first",
                    (long long)mine);
        return -1;
    }
    return 0;
}

/* The first events of s's stream: hello, then what it missed since last_id or a resync. */
static void start_stream(const struct route_req *r, struct event_sub *s, const char *last_id)
{
    struct events *ev = s->ev;
    const struct event_ring *ring = &ev->ring;
    uint64_t last = ring->last_seq, seen = 0;
    const char *why = NULL;
    if (last_id && *last_id) {
        size_t run_len = strlen(ev->run);
        int64_t n = -1;
        if (strncmp(last_id, ev->run, run_len) != 0 || last_id[run_len] != '-' ||
            parse_int64(last_id + run_len + 1, &n) < 0 || n < 0)
            why = "the Last-Event-ID is not one of this gflowd run (it restarted)";
        else if (!event_ring_can_resume(ring, (uint64_t)n))
            why = (uint64_t)n > last ? "the Last-Event-ID is not one of this gflowd run"
                                     : "the events after the Last-Event-ID are no longer kept";
        else
            seen = (uint64_t)n;
    }
    bool resume = last_id && *last_id && !why;
    char *hello = xasprintf("{\"run\":\"%s\",\"last_event_id\":\"%s-%llu\",\"user\":\"%s\","
                            "\"admin\":%s,\"version\":\"%s\"}",
                            ev->run, ev->run, (unsigned long long)last, r->who->user,
                            r->who->is_admin ? "true" : "false", GFLOW_VERSION);
    /* Its id makes a client that reconnects resume from here, unless it resumes an
     * earlier id now. */
    events_sub_send_raw(s, "hello", !resume, last, hello);
    free(hello);
    if (why) {
        char *data = xasprintf("{\"reason\":\"%s; read the state again\",\"last_event_id\":"
                               "\"%s-%llu\"}",
                               why, ev->run, (unsigned long long)last);
        events_sub_send_raw(s, "resync", true, last, data);
        free(data);
    } else if (resume) {
        for (uint64_t q = seen + 1; q <= last && !s->ending; q++)
            events_sub_send(s, event_ring_get(ring, q));
    }
}

void route_events(const struct route_req *r, struct reply *rep)
{
    struct events *ev = r->d->events;
    if (!ev) {
        reply_error(rep, 503, "gflowd is starting or stopping; retry in a moment");
        return;
    }
    if (check_limits(r, ev, rep) < 0)
        return;
    struct event_sub *s = xcalloc(1, sizeof(*s));
    s->ev = ev;
    s->conn = r->conn;
    s->uid = r->who->uid;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? ci->connect_fd : -1;
    strbuf_init(&s->out);
    if (read_filters(r, s, rep) < 0) {
        free(s->user);
        free(s->jobs);
        free(s);
        return;
    }
    events_start_recording(ev);
    const char *last_id = route_query(r, "last_event_id");
    if (!last_id)
        last_id = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Last-Event-ID");
    s->next = ev->subs;
    if (ev->subs)
        ev->subs->prev = s;
    ev->subs = s;
    ev->n_subs++;
    start_stream(r, s, last_id);
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, EVENTS_READ_BLOCK, sub_read_cb, s, sub_free_cb);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    reply_response(rep, 200, resp, "text/event-stream");
    events_clients_changed(ev);
}
