/* event_ring: the last events of GET /v1/events, kept in memory so that a client that
 * reconnects with Last-Event-ID gets what it missed. A fixed number of slots; the
 * oldest event gives way to the newest. Pure data: no loop, no connections
 * (tests/unit/test_event_ring.c). */
#ifndef GFLOWD_EVENT_RING_H
#define GFLOWD_EVENT_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One event. Its strings are the ring's once pushed. */
struct event {
    uint64_t seq;     /* 1, 2, ... in this daemon run; set by event_ring_push */
    const char *type; /* a static name: "job_started", "gpu", ... */
    int64_t job_id;   /* 0: not a job's event */
    char *user;       /* the job's owner; NULL: not a job's event */
    char *data;       /* the JSON text sent as the event's data */
    size_t data_len;
};

struct event_ring {
    struct event *slots;
    size_t cap, len, head; /* head: the slot of the oldest event */
    uint64_t last_seq;     /* the newest event's, 0 before the first */
};

void event_ring_init(struct event_ring *r, size_t cap);
void event_ring_free(struct event_ring *r);
/* Adds e (taking its strings), numbered last_seq + 1; the oldest event is dropped when
 * the ring is full. Returns the event as kept, valid until the ring drops it. */
const struct event *event_ring_push(struct event_ring *r, struct event e);
/* The oldest seq kept (last_seq + 1 when empty). */
uint64_t event_ring_oldest(const struct event_ring *r);
/* Event seq, or NULL when it is not kept (too old, or not yet). */
const struct event *event_ring_get(const struct event_ring *r, uint64_t seq);
/* Whether every event after seq is still kept: a client that saw seq can be given
 * exactly what it missed. */
bool event_ring_can_resume(const struct event_ring *r, uint64_t seq);
/* Forgets every event and leaves a gap in the numbers: no id given so far can be
 * resumed (event_ring_can_resume), since what follows is not kept from its start. */
void event_ring_forget(struct event_ring *r);
/* Frees an event's strings. */
void event_clear(struct event *e);

#endif
