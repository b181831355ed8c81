/* event_ring: a fixed array used as a circular buffer (event_ring.h). */
#include "event_ring.h"

#include <stdlib.h>

#include "util.h"

void event_ring_init(struct event_ring *r, size_t cap)
{
    r->cap = cap ? cap : 1;
    r->slots = xcalloc(r->cap, sizeof(*r->slots));
    r->len = r->head = 0;
    r->last_seq = 0;
}

void event_clear(struct event *e)
{
    free(e->user);
    free(e->data);
    e->user = e->data = NULL;
}

void event_ring_free(struct event_ring *r)
{
    for (size_t i = 0; i < r->len; i++)
        event_clear(&r->slots[(r->head + i) % r->cap]);
    free(r->slots);
    r->slots = NULL;
    r->len = r->head = 0;
}

const struct event *event_ring_push(struct event_ring *r, struct event e)
{
    e.seq = ++r->last_seq;
    size_t at;
    if (r->len == r->cap) { /* the oldest gives way */
        at = r->head;
        event_clear(&r->slots[at]);
        r->head = (r->head + 1) % r->cap;
    } else {
        at = (r->head + r->len) % r->cap;
        r->len++;
    }
    r->slots[at] = e;
    return &r->slots[at];
}

void event_ring_forget(struct event_ring *r)
{
    for (size_t i = 0; i < r->len; i++)
        event_clear(&r->slots[(r->head + i) % r->cap]);
    r->len = r->head = 0;
    r->last_seq++; /* the gap: the oldest kept is now past every id given */
}

uint64_t event_ring_oldest(const struct event_ring *r)
{
    return r->last_seq - r->len + 1;
}

const struct event *event_ring_get(const struct event_ring *r, uint64_t seq)
{
    uint64_t oldest = event_ring_oldest(r);
    if (seq < oldest || seq > r->last_seq)
        return NULL;
    return &r->slots[(r->head + (size_t)(seq - oldest)) % r->cap];
}

bool event_ring_can_resume(const struct event_ring *r, uint64_t seq)
{
    return seq <= r->last_seq && seq + 1 >= event_ring_oldest(r);
}
