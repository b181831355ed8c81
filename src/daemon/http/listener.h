/* listener: the daemon's Unix socket. It creates the socket (for a system daemon in a
 * directory every user can enter, the socket itself open to all: who is asking is the
 * kernel's word, SO_PEERCRED, not the file mode), accepts connections in the loop, and
 * keeps the count of open connections per uid: a connection beyond the connections'
 * reserve of descriptors (limits.max_connections at most, fdres.h) or beyond its uid's
 * share (limits.max_connections_per_user; for a uid other than the daemon's, also a
 * quarter of what the open-file limit allows connections) is answered with one HTTP
 * error and closed, so that no user, nor two or three together, can lock everyone else
 * out. Accepted connections go to a callback (api.c hands them to libmicrohttpd), which
 * reports their end with listener_closed. */
#ifndef GFLOWD_LISTENER_H
#define GFLOWD_LISTENER_H

#include <sys/types.h>

struct gflowd;
struct listener;

/* Called with each accepted connection (the callee owns fd) and its peer's uid. */
typedef void (*listener_accept_cb)(void *arg, int fd, uid_t uid);

/* Creates the socket at d->paths.socket_path and starts accepting. NULL + *err. */
struct listener *listener_start(struct gflowd *d, listener_accept_cb cb, void *arg, char **err);
/* A connection of uid that was handed to the callback has ended. */
void listener_closed(struct listener *l, uid_t uid);
/* Stops accepting and removes the socket. */
void listener_stop(struct listener *l);

#endif
