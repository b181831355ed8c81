/* reply: what a request handler answers: a status and a libmicrohttpd response built
 * from JSON, an error message ({"error": "..."}, docs/api.md) or text; or a body to
 * stream (a log being followed), which api.c turns into a response once it knows the
 * connection. */
#ifndef GFLOWD_REPLY_H
#define GFLOWD_REPLY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct MHD_Response;

/* A body produced piece by piece (a log being followed): puts up to max bytes at
 * position pos of the body in buf and returns how many; 0 when there is nothing yet
 * (the transport asks again a moment later), -1 at the end. */
typedef ssize_t (*reply_stream_fn)(void *arg, uint64_t pos, char *buf, size_t max);

/* A long read done on a thread of its own (GET /v1/stats over a million jobs), so that
 * the event loop goes on meanwhile: it returns the reply's body and sets *status. It
 * must touch nothing of the daemon's but what arg holds. */
typedef json_t *(*reply_work_fn)(void *arg, unsigned *status);

struct reply {
    unsigned status;
    struct MHD_Response *response;
    /* A streamed body (reply_stream; NULL: none): the transport owns stream_arg once
     * it has made the response, and frees it with stream_free. */
    reply_stream_fn stream;
    void *stream_arg;
    void (*stream_free)(void *arg);
    /* Deferred work (reply_defer): api.c runs work(work_arg) on a worker thread, the
     * connection waiting, and frees work_arg with work_free once it is answered. */
    reply_work_fn work;
    void *work_arg;
    void (*work_free)(void *arg);
};

/* Each of these replaces whatever the reply held. */
void reply_json(struct reply *rep, unsigned status, json_t *body); /* steals body */
void reply_error(struct reply *rep, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Steals text; type NULL means text/plain. */
void reply_text(struct reply *rep, unsigned status, char *text, size_t len, const char *type);
/* A response made elsewhere (e.g. from a file descriptor), with its content type. */
void reply_response(struct reply *rep, unsigned status, struct MHD_Response *resp,
                    const char *type);
/* A 200 whose body fn produces (chunked, text/plain); arg is freed with free_arg. */
void reply_stream(struct reply *rep, reply_stream_fn fn, void *arg, void (*free_arg)(void *arg));
/* The reply is fn's answer, computed on a worker thread (see reply_work_fn). */
void reply_defer(struct reply *rep, reply_work_fn fn, void *arg, void (*free_arg)(void *arg));
/* Frees what the reply holds (a response not queued, a stream's or a work's arg). */
void reply_clear(struct reply *rep);

#endif
