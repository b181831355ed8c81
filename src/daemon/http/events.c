/* events: the events of GET /v1/events, from the change to the clients (events.h). */
#include "events.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "daemon.h"
#include "events_internal.h"
#include "gpu/gpu.h"
#include "jobs/jobs.h"
#include "log.h"
#include "loop.h"

/* A client that is dropped for falling behind is closed after this long if it does not
 * even read its "resync" event. */
#define EVENTS_DROP_TIMEOUT_SECS 5
/* A comment line this often keeps idle streams (and proxies) from timing out, and shows
 * up clients that have gone away. */
#define EVENTS_PING_SECS 15.0
/* Once the last client has been gone this long, events are no longer kept: a daemon
 * nobody watches any more pays nothing again (a client that comes back later with an
 * old id gets a resync). Long enough for a reconnect. */
#define EVENTS_FORGET_SECS 60.0

const char *const event_type_names[EVENT_TYPE_COUNT] = {
    "job_submitted", "job_started", "job_ended", "job_updated", "gpu", "daemon",
};

int event_type_bit(const char *name)
{
    for (int i = 0; i < EVENT_TYPE_COUNT; i++)
        if (strcmp(name, event_type_names[i]) == 0)
            return i;
    return -1;
}

struct events *events_new(struct gflowd *d)
{
    struct events *ev = xcalloc(1, sizeof(*ev));
    ev->d = d;
    /* The run: the start time in microseconds, so that an id of an earlier run is
     * never taken for one of this run. */
    snprintf(ev->run, sizeof(ev->run), "%llx", (unsigned long long)(d->started_at * 1e6));
    event_ring_init(&ev->ring, EVENTS_RING_SIZE);
    return ev;
}

static void pending_clear(struct events *ev)
{
    for (size_t i = 0; i < ev->n_pending; i++)
        event_clear(&ev->pending[i]);
    ev->n_pending = 0;
}

void events_free(struct events *ev)
{
    if (!ev)
        return;
    loop_cancel_timer(ev->ping_timer);
    loop_cancel_timer(ev->kick_timer);
    loop_cancel_timer(ev->forget_timer);
    pending_clear(ev);
    free(ev->pending);
    event_ring_free(&ev->ring);
    free(ev);
}

size_t events_clients(const struct events *ev)
{
    return ev ? ev->n_subs : 0;
}

/* ---- to the clients ---- */

static bool sub_wants(const struct event_sub *s, const struct event *e)
{
    int bit = event_type_bit(e->type);
    if (bit < 0 || !(s->types & (1u << bit)))
        return false;
    if (!e->job_id)
        return true;
    if (s->user && (!e->user || strcmp(s->user, e->user) != 0))
        return false;
    if (!s->n_jobs)
        return true;
    for (size_t i = 0; i < s->n_jobs; i++)
        if (s->jobs[i] == e->job_id)
            return true;
    return false;
}

static void sub_append(struct event_sub *s, const char *type, bool with_id, uint64_t seq,
                       const char *data, size_t data_len)
{
    if (with_id)
        strbuf_addf(&s->out, "id: %s-%llu\n", s->ev->run, (unsigned long long)seq);
    strbuf_addf(&s->out, "event: %s\ndata: ", type);
    strbuf_add(&s->out, data, data_len);
    strbuf_adds(&s->out, "\n\n");
}

void events_sub_send_raw(struct event_sub *s, const char *type, bool with_id, uint64_t seq,
                         const char *data)
{
    sub_append(s, type, with_id, seq, data, strlen(data));
}

/* s has fallen too far behind: what it has not taken yet is dropped, it gets a "resync"
 * event (re-read the state, then resume from that id) and its stream ends. */
static void sub_drop(struct event_sub *s)
{
    struct events *ev = s->ev;
    log_info("event client (uid %u) fell more than %lld bytes behind; dropped with a resync",
             (unsigned)s->uid, (long long)ev->d->cfg.limits.event_buffer_bytes);
    strbuf_reset(&s->out);
    s->out_pos = 0;
    char *data = xasprintf("{\"reason\":\"this client fell more than limits.event_buffer_bytes "
                           "behind; read the state again, then reconnect\","
                           "\"last_event_id\":\"%s-%llu\"}",
                           ev->run, (unsigned long long)ev->ring.last_seq);
    events_sub_send_raw(s, "resync", true, ev->ring.last_seq, data);
    free(data);
    s->ending = true;
    /* A client that does not read at all is not waited for: libmicrohttpd closes it
     * once it has made no progress for this long. */
    MHD_set_connection_option(s->conn, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned int)EVENTS_DROP_TIMEOUT_SECS);
}

void events_sub_send(struct event_sub *s, const struct event *e)
{
    if (s->ending || !sub_wants(s, e))
        return;
    size_t behind = s->out.len - s->out_pos;
    if (behind && behind + e->data_len > (size_t)s->ev->d->cfg.limits.event_buffer_bytes) {
        sub_drop(s);
        return;
    }
    sub_append(s, e->type, true, e->seq, e->data, e->data_len);
}

void events_sub_resume(struct event_sub *s)
{
    if (!s->suspended)
        return;
    s->suspended = false;
    if (s->fd >= 0)
        loop_del_fd(s->fd);
    MHD_resume_connection(s->conn);
}

static void kick_cb(void *arg)
{
    struct events *ev = arg;
    ev->kick_timer = NULL;
    bool resumed = false;
    for (struct event_sub *s = ev->subs; s; s = s->next) {
        if (s->suspended && (s->out.len > s->out_pos || s->ending)) {
            events_sub_resume(s);
            resumed = true;
        }
    }
    if (resumed)
        api_run(ev->d->api);
}

void events_kick(struct events *ev)
{
    /* At once, but from the loop: this may be called inside libmicrohttpd's callbacks
     * (a reload's request), where it must not run again. */
    if (!ev->kick_timer)
        ev->kick_timer = loop_add_timer(0, kick_cb, ev);
}

static void ping_cb(void *arg)
{
    struct events *ev = arg;
    ev->ping_timer = NULL;
    for (struct event_sub *s = ev->subs; s; s = s->next)
        if (!s->ending)
            strbuf_adds(&s->out, ": ping\n\n");
    kick_cb(ev);
    events_clients_changed(ev);
}

/* Nobody has listened for EVENTS_FORGET_SECS: the events kept go, and no more are. */
static void forget_cb(void *arg)
{
    struct events *ev = arg;
    ev->forget_timer = NULL;
    if (ev->subs)
        return;
    ev->recording = false;
    ev->gpu_known = false;
    pending_clear(ev);
    event_ring_forget(&ev->ring);
}

void events_clients_changed(struct events *ev)
{
    if (ev->subs) {
        if (!ev->ping_timer)
            ev->ping_timer = loop_add_timer(EVENTS_PING_SECS, ping_cb, ev);
        loop_cancel_timer(ev->forget_timer);
        ev->forget_timer = NULL;
        return;
    }
    loop_cancel_timer(ev->ping_timer);
    ev->ping_timer = NULL;
    if (ev->recording && !ev->forget_timer)
        ev->forget_timer = loop_add_timer(EVENTS_FORGET_SECS, forget_cb, ev);
}

/* Numbers e, keeps it and hands it to the clients. */
static void publish(struct events *ev, struct event e)
{
    const struct event *kept = event_ring_push(&ev->ring, e);
    for (struct event_sub *s = ev->subs; s; s = s->next)
        events_sub_send(s, kept);
    if (ev->subs)
        events_kick(ev);
}

/* ---- from the daemon ---- */

/* The stream's name of a job event (JOB_EVENT_COUNT: a change that is no job event). */
static const char *job_event_type(enum job_event e)
{
    switch (e) {
    case JOB_EVENT_SUBMITTED:
        return "job_submitted";
    case JOB_EVENT_STARTED:
        return "job_started";
    case JOB_EVENT_COMPLETED:
    case JOB_EVENT_FAILED:
    case JOB_EVENT_CANCELLED:
    case JOB_EVENT_TIMEOUT:
        return "job_ended";
    default: /* updated, held, released, queued again */
        return "job_updated";
    }
}

void events_job_cb(void *arg, const struct job *j, enum job_event event)
{
    struct events *ev = arg;
    if (!ev->recording)
        return;
    const char *type = job_event_type(event);
    struct strbuf sb;
    strbuf_init(&sb);
    job_append_json(&sb, j); /* what GET /v1/jobs shows of it, to anyone */
    if (ev->n_pending == ev->cap_pending) {
        ev->cap_pending = ev->cap_pending ? ev->cap_pending * 2 : 16;
        ev->pending = xrealloc(ev->pending, ev->cap_pending * sizeof(*ev->pending));
    }
    struct event *e = &ev->pending[ev->n_pending++];
    *e = (struct event){.type = type, .job_id = j->id, .user = xstrdup(j->user ? j->user : "")};
    e->data_len = sb.len;
    e->data = strbuf_detach(&sb);
}

/* A job id spread over 64 bits (splitmix64's finaliser), summed per GPU: the sum of a
 * set of jobs does not depend on their order. */
static uint64_t holder_hash(int64_t id)
{
    uint64_t x = (uint64_t)id + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Compares the GPUs with how they were last told; a "gpu" event for each that changed
 * (busy or free, its jobs, outside processes, allowed). The first look only remembers. */
static void gpus_compare(struct events *ev)
{
    struct gflowd *d = ev->d;
    if (!ev->recording || !d->gpus)
        return;
    const struct gpu_set *set = gpu_current(d->gpus);
    size_t count = set ? set->n_gpus : 0;
    if (count > 64)
        count = 64;
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    uint64_t busy = 0, holders[64] = {0};
    for (size_t i = 0; i < n; i++) {
        uint64_t mask = running[i]->gpu_mask | gpu_mig_parents(d->gpus, running[i]->mig_uuids);
        busy |= mask;
        for (size_t g = 0; g < count; g++)
            if (mask & (1ull << g))
                holders[g] += holder_hash(running[i]->id);
    }
    uint64_t outside = gpu_unmanaged(d->gpus), allowed = gpu_allowed(d->gpus);
    uint64_t changed =
        (busy ^ ev->gpu_busy) | (outside ^ ev->gpu_outside) | (allowed ^ ev->gpu_allowed);
    for (size_t g = 0; g < count; g++)
        if (holders[g] != ev->gpu_holders[g])
            changed |= 1ull << g;
    memcpy(ev->gpu_holders, holders, sizeof(holders));
    bool first = !ev->gpu_known;
    if (count != ev->gpu_count)
        changed = ~0ull;
    ev->gpu_known = true;
    ev->gpu_count = count;
    ev->gpu_busy = busy;
    ev->gpu_outside = outside;
    ev->gpu_allowed = allowed;
    if (first)
        return;
    for (size_t g = 0; g < count; g++) {
        uint64_t bit = 1ull << g;
        if (!(changed & bit))
            continue;
        struct strbuf sb;
        strbuf_init(&sb);
        strbuf_addf(&sb, "{\"index\":%zu,\"busy\":%s,\"jobs\":[", g, busy & bit ? "true" : "false");
        bool any = false;
        for (size_t i = 0; i < n; i++) {
            const struct job *j = running[i];
            if (!((j->gpu_mask | gpu_mig_parents(d->gpus, j->mig_uuids)) & bit))
                continue;
            strbuf_addf(&sb, "%s%lld", any ? "," : "", (long long)j->id);
            any = true;
        }
        strbuf_addf(&sb, "],\"outside_processes\":%s,\"allowed\":%s}",
                    outside & bit ? "true" : "false", allowed & bit ? "true" : "false");
        struct event e = {.type = "gpu", .data_len = sb.len};
        e.data = strbuf_detach(&sb);
        publish(ev, e);
    }
}

void events_start_recording(struct events *ev)
{
    if (ev->recording)
        return;
    ev->recording = true;
    gpus_compare(ev); /* the state from which changes are told */
}

void events_committed(struct events *ev)
{
    if (!ev || !ev->recording)
        return;
    for (size_t i = 0; i < ev->n_pending; i++)
        publish(ev, ev->pending[i]); /* the ring takes the strings */
    ev->n_pending = 0;
    gpus_compare(ev);
}

void events_lost(struct events *ev)
{
    if (ev)
        pending_clear(ev);
}

void events_gpus_read(struct events *ev)
{
    if (ev)
        gpus_compare(ev);
}

void events_daemon(struct events *ev, const char *status)
{
    if (!ev || !ev->recording)
        return;
    struct event e = {.type = "daemon"};
    e.data = xasprintf("{\"status\":\"%s\"}", status);
    e.data_len = strlen(e.data);
    publish(ev, e);
}

void events_stop(struct events *ev)
{
    if (!ev)
        return;
    events_daemon(ev, "stopping");
    loop_cancel_timer(ev->ping_timer);
    ev->ping_timer = NULL;
    loop_cancel_timer(ev->kick_timer);
    ev->kick_timer = NULL;
    loop_cancel_timer(ev->forget_timer);
    ev->forget_timer = NULL;
    for (struct event_sub *s = ev->subs; s; s = s->next) {
        s->ending = true;
        events_sub_resume(s); /* api_stop runs libmicrohttpd once more, then closes */
    }
}
