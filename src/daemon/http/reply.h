/* reply: what a request handler answers: a status and a libmicrohttpd response built
 * from JSON, an error message ({"error": "..."}, docs/api.md) or text; or a log to
 * stream, which api.c turns into a response once it knows the connection. */
#ifndef GFLOWD_REPLY_H
#define GFLOWD_REPLY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct MHD_Response;

/* A long read done on a thread of its own (GET /v1/stats over a million jobs), so that
 * the event loop goes on meanwhile: it returns the reply's body and sets *status. It
 * must touch nothing of the daemon's but what arg holds. */
typedef json_t *(*reply_work_fn)(void *arg, unsigned *status);

struct reply {
    unsigned status;
    struct MHD_Response *response;
    /* GET /v1/jobs/{id}/log?follow=1: the job's log from follow_offset on, until the job
     * has ended (follow_path NULL: not a stream). */
    int64_t follow_job;
    char *follow_path;
    uint64_t follow_offset;
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
/* Streams job_id's log at path from offset until the job has ended (chunked). */
void reply_follow_log(struct reply *rep, int64_t job_id, const char *path, uint64_t offset);
/* The reply is fn's answer, computed on a worker thread (see reply_work_fn). */
void reply_defer(struct reply *rep, reply_work_fn fn, void *arg, void (*free_arg)(void *arg));
/* Frees what the reply holds (a response not queued, the stream's path). */
void reply_clear(struct reply *rep);

#endif
