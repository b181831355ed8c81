/* events_internal: what events.c (the events) and routes_events.c (the connections
 * that stream them) share. Not for other modules. */
#ifndef GFLOWD_EVENTS_INTERNAL_H
#define GFLOWD_EVENTS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "event_ring.h"
#include "events.h"
#include "util.h"

struct MHD_Connection;
struct loop_timer;

/* The event types a client may ask for (?types=); bit i is event_type_names[i]. The
 * stream's own "hello" and "resync" are always sent. */
extern const char *const event_type_names[];
#define EVENT_TYPE_COUNT 6
#define EVENT_TYPES_ALL ((1u << EVENT_TYPE_COUNT) - 1)
/* The bit of a type name, or -1. */
int event_type_bit(const char *name);

/* One client of GET /v1/events. */
struct event_sub {
    struct events *ev;
    struct MHD_Connection *conn;
    uid_t uid;
    char *user;    /* only this user's jobs; NULL: everyone's */
    int64_t *jobs; /* only these jobs (n_jobs 0: any) */
    size_t n_jobs;
    unsigned types;    /* bits of event_type_names */
    struct strbuf out; /* text not taken by libmicrohttpd yet, from out_pos on */
    size_t out_pos;
    bool suspended; /* waiting for text (its content reader suspended it) */
    int fd;         /* the connection's, watched while suspended: a client that hangs up */
    bool ending;    /* its stream ends once out is sent (dropped, or gflowd stops) */
    struct event_sub *prev, *next;
};

struct events {
    struct gflowd *d;
    char run[32]; /* this daemon run, the first part of every event id */
    struct event_ring ring;
    bool recording;        /* a client has connected: events are kept */
    struct event *pending; /* job events waiting for the commit */
    size_t n_pending, cap_pending;
    struct event_sub *subs;
    size_t n_subs;
    struct loop_timer *ping_timer, *kick_timer, *forget_timer;
    /* The GPUs as last told (bit i: GPU i). */
    bool gpu_known;
    size_t gpu_count;
    uint64_t gpu_busy, gpu_outside, gpu_allowed;
    /* Who holds each GPU, as a sum of its jobs' hashed ids: a GPU that goes straight
     * from one job to the next stays busy, and its holder's change is still told. */
    uint64_t gpu_holders[64];
};

/* Starts keeping events (the first client connects). */
void events_start_recording(struct events *ev);
/* Appends e to s's text if s's filters want it; a client that has fallen more than
 * limits.event_buffer_bytes behind is dropped with a "resync" event instead. */
void events_sub_send(struct event_sub *s, const struct event *e);
/* Appends a stream-only event (hello, resync), with "id: <run>-<seq>" when with_id. */
void events_sub_send_raw(struct event_sub *s, const char *type, bool with_id, uint64_t seq,
                         const char *data);
/* Resumes s (suspended), no longer watching its socket. */
void events_sub_resume(struct event_sub *s);
/* Resumes the clients that have text waiting, from the loop (never inside
 * libmicrohttpd's callbacks). */
void events_kick(struct events *ev);
/* A client came or went: the ping timer runs while there are clients; once the last
 * has been gone EVENTS_FORGET_SECS, events are no longer kept (events.h). */
void events_clients_changed(struct events *ev);

#endif
