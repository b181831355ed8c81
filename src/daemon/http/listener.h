/* listener: the daemon's Unix socket. It creates the socket (for a system daemon in a
 * directory every user can enter, the socket itself open to all: who is asking is the
 * kernel's word, SO_PEERCRED, not the file mode), accepts connections in the loop, and
 * keeps the count of open connections per uid: a connection beyond limits.max_connections
 * or limits.max_connections_per_user is answered with one HTTP error and closed, so one
 * user cannot lock everyone else out. Accepted connections go to a callback (api.c hands
 * them to libmicrohttpd), which reports their end with listener_closed. */
#ifndef GFLOWD_LISTENER_H
#define GFLOWD_LISTENER_H

#include <sys/types.h>

struct gflowd;
struct listener;

/* Called with each accepted connection (the callee owns fd) and its peer's uid. */
typedef void (*listener_accept_cb)(void *arg, int fd, uid_t uid);

/* Creates the socket at d->paths.socket_path and starts accepting. NULL + *err. */
struct listener *listener_start(const struct gflowd *d, listener_accept_cb cb, void *arg,
                                char **err);
/* A connection of uid that was handed to the callback has ended. */
void listener_closed(struct listener *l, uid_t uid);
/* Stops accepting and removes the socket. */
void listener_stop(struct listener *l);

#endif
