/* api: the HTTP server (libmicrohttpd inside our epoll loop) on the Unix socket:
 * connections, request bodies and their size limit, the caller's identity (auth.c),
 * replies held back until the loop iteration's changes are committed (or redone when
 * the commit is lost), 507 for writes while the disk is full, and log streams.
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
/* The commit they waited for was lost and its changes undone (call once memory is as the
 * database says): a request that changed something is answered status with msg at once,
 * a read is answered again from memory and waits, as ever, for the next commit if a
 * change is pending. */
void api_redo_waiting(struct api *a, unsigned status, const char *msg);
/* Runs libmicrohttpd now: connections resumed outside its callbacks (an event stream
 * with new text) are taken up only by its next run. Never from inside its callbacks. */
void api_run(struct api *a);

#endif
