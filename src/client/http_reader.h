/* http_reader: one HTTP/1.x response read from the daemon's socket, for the commands'
 * requests (client.c), their event streams (client_events.c) and gflowd web's proxy
 * (src/web/web_proxy.c): a buffered reader that understands a status line, headers, and
 * a body framed by Content-Length, chunked transfer coding, or the end of the connection.
 * Reads block (a deadline comes from the socket's SO_RCVTIMEO, or from timeout_ms). */
#ifndef GFLOW_HTTP_READER_H
#define GFLOW_HTTP_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct http_reader {
    int fd;
    const char *peer; /* the socket's path, for messages */
    int idle_secs;    /* the socket's SO_RCVTIMEO, for messages */
    int timeout_ms;   /* how long each read may wait (poll), -1: as long as it takes */
    char buf[65536];
    size_t pos, len; /* unread bytes are buf[pos..len) */
};
/* A reader of fd with nothing buffered and no timeout of its own. */
void http_reader_init(struct http_reader *rd, int fd, const char *peer);

/* The head of a final (not 1xx) response. */
struct http_head {
    int status;
    bool chunked, have_len;
    bool keepalive; /* the connection may carry another request */
    uint64_t content_length;
    char *content_type; /* NULL if absent; to free */
};

/* Reads the head of the next final response, past any 1xx ones. *got_any tells whether
 * any byte arrived (a kept-alive connection the daemon closed shows none). 0, or -1
 * with *err (to free). */
int http_read_head(struct http_reader *rd, struct http_head *h, bool *got_any, char **err);

/* Called with each piece of a body as it arrives: 0 to go on, -1 to stop reading. */
typedef int (*http_chunk_cb)(const char *data, size_t len, void *arg);

/* Reads the body that h announces into sb, or to cb when set; clears h->keepalive when
 * the body ends with the connection or cb stopped it. 0, or -1 with *err. */
int http_read_body(struct http_reader *rd, struct http_head *h, struct strbuf *sb, http_chunk_cb cb,
                   void *arg, char **err);

#endif
