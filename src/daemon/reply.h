/* reply: what a request handler answers: a status and a libmicrohttpd response built
 * from JSON, an error message ({"error": "..."}, docs/api.md) or text; or a log to
 * stream, which api.c turns into a response once it knows the connection. */
#ifndef GFLOWD_REPLY_H
#define GFLOWD_REPLY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct MHD_Response;

struct reply {
    unsigned status;
    struct MHD_Response *response;
    /* GET /v1/jobs/{id}/log?follow=1: the job's log from follow_offset on, until the job
     * has ended (follow_path NULL: not a stream). */
    int64_t follow_job;
    char *follow_path;
    uint64_t follow_offset;
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
/* Frees what the reply holds (a response not queued, the stream's path). */
void reply_clear(struct reply *rep);

#endif
