/* metrics_listen: the TCP port of `[metrics] listen = "127.0.0.1:9400"`, for a Prometheus
 * server that cannot reach the Unix socket. It serves GET /metrics and nothing else
 * (api.c answers any other path with 403): no caller can be identified over TCP, so no
 * request that acts or reads a job is taken there. At most METRICS_LISTEN_MAX_CONNECTIONS
 * connections are open at once (a scraper needs one); more are closed at accept. */
#ifndef GFLOWD_METRICS_LISTEN_H
#define GFLOWD_METRICS_LISTEN_H

#define METRICS_LISTEN_MAX_CONNECTIONS 16

struct metrics_listen;

/* Called with each accepted connection (the callee owns fd). */
typedef void (*metrics_accept_cb)(void *arg, int fd);

/* Listens on spec, "HOST:PORT" ("127.0.0.1:9400", "[::1]:9400", "localhost:9400"), and
 * accepts in the loop. NULL + *err ("metrics.listen: ..."). */
struct metrics_listen *metrics_listen_start(const char *spec, metrics_accept_cb cb, void *arg,
                                            char **err);
/* A connection handed to the callback has ended. */
void metrics_listen_closed(struct metrics_listen *m);
void metrics_listen_stop(struct metrics_listen *m);

#endif
