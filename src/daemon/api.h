/* api: the HTTP server (libmicrohttpd inside our epoll loop) on the Unix socket:
 * connection handling, identity from SO_PEERCRED, request size limits, and replies
 * held back until the loop iteration's changes are committed. The routes themselves
 * are in routes.c. */
#ifndef GFLOWD_API_H
#define GFLOWD_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct MHD_Connection;
struct MHD_Response;

/* Who is asking, from the kernel's peer credentials. */
struct caller {
    uid_t uid;
    gid_t gid;
    char *user;    /* login name, or the uid as text */
    bool is_admin; /* root, the daemon's own user (per-user daemon), or daemon.admin_group */
};

/* What a route answers. */
struct reply {
    unsigned status;
    struct MHD_Response *response;
};

/* Creates the socket and the server and registers them with the loop. 0 or -1 + *err. */
int api_start(char **err);
void api_stop(void);
/* Runs libmicrohttpd's own pending work (due at once per its timeout). Call before the
 * commit of each loop iteration, since it may answer requests. */
void api_poll(void);
/* Sends the replies that were waiting for the commit that just happened. */
void api_release_waiting(void);

/* Helpers for routes. */
void reply_json(struct reply *rep, unsigned status, json_t *body); /* steals body */
void reply_error(struct reply *rep, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Steals text; type NULL means text/plain. */
void reply_text(struct reply *rep, unsigned status, char *text, size_t len, const char *type);
/* Streams a job's log from offset until the job has ended (chunked). */
void reply_follow_log(struct reply *rep, struct MHD_Connection *c, long long job_id,
                      const char *path, unsigned long long offset);

/* Implemented in routes.c. */
void routes_dispatch(struct MHD_Connection *c, const struct caller *who, const char *method,
                     const char *url, const char *body, size_t body_len, struct reply *rep);

#endif
