/* api: the HTTP server (libmicrohttpd inside our epoll loop) on the Unix socket:
 * connections, request bodies and their size limit, the caller's identity (auth.c),
 * replies held back until the loop iteration's changes are committed, and log streams.
 * What each request does is routes.c's. */
#ifndef GFLOWD_API_H
#define GFLOWD_API_H

struct gflowd;
struct api;

/* Creates the socket and the server and registers them with the loop. NULL + *err. */
struct api *api_start(struct gflowd *d, char **err);
/* Resumes what is suspended, stops the server and removes the socket. */
void api_stop(struct api *a);
/* Runs libmicrohttpd's own pending work (due at once per its timeout). Call before the
 * commit of each loop iteration, since it may answer requests. */
void api_poll(struct api *a);
/* Sends the replies that were waiting for the commit that just happened. */
void api_release_waiting(struct api *a);

#endif
