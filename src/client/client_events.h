/* client_events: GET /v1/events (Server-Sent Events, docs/api.md) on a connection of its
 * own, so that a command can follow events while it sends other requests with
 * client_request: gqueue -w redraws on job events, gjob log --follow learns the job's
 * end. It never prints or exits (src/client/client.h). */
#ifndef GFLOW_CLIENT_EVENTS_H
#define GFLOW_CLIENT_EVENTS_H

struct client_events;

/* One event: its type ("job_ended", "hello", "resync", ...), id ("" when it has
 * none) and data (JSON text, malloc'd). */
struct client_event {
    char type[32];
    char id[64];
    char *data;
};
void client_event_clear(struct client_event *ev);

/* Opens path_query (e.g. "/v1/events?job=12&types=job_ended"). NULL with *err when the
 * daemon cannot be reached or refuses; *status is the HTTP status then (0: no answer),
 * so that a command can fall back to polling when an older gflowd answers 404. */
struct client_events *client_events_open(const char *path_query, int *status, char **err);
/* The stream's socket, for poll() beside other descriptors. */
int client_events_fd(const struct client_events *s);
/* Whether an event is already read and waiting (poll() on the socket would not say). */
int client_events_buffered(const struct client_events *s);
/* The next event into *ev (clear it with client_event_clear): 1, or 0 when none came
 * within timeout_ms (-1: wait as long as it takes), or -1 with *err when the stream
 * ended or broke. */
int client_events_next(struct client_events *s, int timeout_ms, struct client_event *ev,
                       char **err);
void client_events_close(struct client_events *s);

#endif
