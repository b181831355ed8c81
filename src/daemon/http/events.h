/* events: what GET /v1/events streams (docs/api.md): jobs submitted, started, ended and
 * updated, GPUs changing state, the daemon reloading and stopping. A job's change is
 * held until the loop's transaction commits (a lost transaction is undone, and so are
 * its events), then numbered, kept in a ring of the last EVENTS_RING_SIZE events (for
 * Last-Event-ID) and handed to every client whose filters want it. Nothing is kept
 * before a client connects, nor from a minute after the last one left (the ring is
 * emptied, with a gap in the numbers so that no old id resumes): a daemon nobody
 * watches pays nothing. The connections themselves are routes_events.c's. */
#ifndef GFLOWD_EVENTS_H
#define GFLOWD_EVENTS_H

#include <stddef.h>

#include "job.h"

struct events;
struct gflowd;
struct job;

#define EVENTS_RING_SIZE 4096

struct events *events_new(struct gflowd *d);
/* After api_stop: the streams are gone by then. */
void events_free(struct events *ev);

/* jobs_event_cb (an observer, jobs_observe): a job changed, in the open transaction. */
void events_job_cb(void *arg, const struct job *j, enum job_event event);
/* The transaction committed: its job events are published, then the GPUs' state is
 * compared with the last one told (a job started or ended, a setting changed). */
void events_committed(struct events *ev);
/* The transaction was lost and is undone: so are its events. */
void events_lost(struct events *ev);
/* The GPUs were read again (outside processes may have come or gone). */
void events_gpus_read(struct events *ev);
/* A "daemon" event with {"status": status} ("reloaded"). */
void events_daemon(struct events *ev, const char *status);
/* The daemon stops: a last "daemon" event {"status": "stopping"}, then every stream
 * ends (called before api_stop, which needs every connection resumed). */
void events_stop(struct events *ev);
/* How many clients are connected (gflow_event_clients in GET /metrics). */
size_t events_clients(const struct events *ev);

#endif
