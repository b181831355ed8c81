/* jsonrpc: JSON-RPC 2.0 as the Model Context Protocol carries it over stdio: one message
 * per line (newline-delimited JSON, no embedded newline), read with a bound on the line's
 * length, classified (request, notification, response) and answered. Pure apart from the
 * line reader and the writer, and unit-tested (tests/unit/test_jsonrpc.c). */
#ifndef GFLOW_MCP_JSONRPC_H
#define GFLOW_MCP_JSONRPC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util.h"

/* The error codes of JSON-RPC 2.0, and MCP's for an unknown resource. */
#define JSONRPC_PARSE_ERROR -32700
#define JSONRPC_INVALID_REQUEST -32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS -32602
#define JSONRPC_INTERNAL_ERROR -32603
#define MCP_RESOURCE_NOT_FOUND -32002

/* A line longer than this (4 MiB) is refused without being kept in memory. */
#define JSONRPC_LINE_MAX (4u << 20)

/* Reads newline-delimited lines from a file descriptor. */
struct jsonrpc_reader {
    int fd;
    size_t max;         /* the longest line kept */
    struct strbuf line; /* the line being read */
    char buf[65536];
    size_t pos, len; /* unread bytes are buf[pos..len) */
    bool overlong;   /* the current line passed max: its bytes are being dropped */
};
void jsonrpc_reader_init(struct jsonrpc_reader *r, int fd, size_t max);
void jsonrpc_reader_free(struct jsonrpc_reader *r);

enum jsonrpc_read {
    JSONRPC_LINE,     /* *line (NUL-terminated, without the newline) has *len bytes */
    JSONRPC_TOO_LONG, /* a line longer than max was read and dropped */
    JSONRPC_EOF,      /* end of input (a last line without a newline counts as a line) */
    JSONRPC_ERROR,    /* read failed: errno */
};
/* The next line; *line stays valid until the next call. */
enum jsonrpc_read jsonrpc_read_line(struct jsonrpc_reader *r, const char **line, size_t *len);

/* What one incoming message is. */
enum jsonrpc_kind {
    JSONRPC_REQUEST,      /* method and id: must be answered */
    JSONRPC_NOTIFICATION, /* method without id: never answered */
    JSONRPC_RESPONSE,     /* result or error with an id: an answer to us (we send none) */
    JSONRPC_INVALID,      /* not a message: *error is the error response to send */
};

struct jsonrpc_msg {
    enum jsonrpc_kind kind;
    json_t *root;       /* the parsed message (owned) */
    const json_t *id;   /* borrowed from root; NULL for a notification */
    const char *method; /* borrowed from root */
    json_t *params;     /* borrowed from root; NULL when absent */
};

/* Parses one line. An unparsable line, a batch (MCP 2025-06-18 has none) or an object
 * that is not a JSON-RPC 2.0 message is JSONRPC_INVALID with *error set to the response
 * to send (-32700 or -32600, with the id when one could be read). Free with
 * jsonrpc_msg_free. */
void jsonrpc_parse(const char *line, size_t len, struct jsonrpc_msg *msg, json_t **error);
void jsonrpc_msg_free(struct jsonrpc_msg *msg);

/* {"jsonrpc": "2.0", "id": id, "result": result}; result is stolen. */
json_t *jsonrpc_result(const json_t *id, json_t *result);
/* {"jsonrpc": "2.0", "id": id (null when NULL), "error": {"code", "message"}}. */
json_t *jsonrpc_error(const json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes msg as one line of compact JSON and flushes. -1 if out cannot be written. */
int jsonrpc_write(FILE *out, const json_t *msg);

/* A JSON string of len bytes of text that may not be valid UTF-8 (a job's log): every
 * byte that does not start a valid sequence becomes U+FFFD, and NUL bytes too. */
json_t *jsonrpc_text(const char *text, size_t len);

#endif
