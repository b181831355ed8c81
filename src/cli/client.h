/* client: what every gflow command-line program shares: finding the daemon's socket, a
 * small HTTP/1.1 client over that Unix socket (Content-Length and chunked bodies, and a
 * streaming mode for `gjob log --follow`), JSON requests with jansson, the one-line error
 * conventions, and resolving job id arguments (`1,3,5-7`, `@`, `@~N`).
 *
 * The CLI links no libcurl on purpose (DESIGN.md §2): loading it costs more than a whole
 * request over the socket, and people submit sweeps from shell loops. One process makes
 * one connection, reused (keep-alive) for every request it sends. */
#ifndef GFLOW_CLIENT_H
#define GFLOW_CLIENT_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Exit statuses shared by the commands. */
#define CLIENT_EXIT_OK 0
#define CLIENT_EXIT_FAIL 1  /* the request failed, or some of the ids did */
#define CLIENT_EXIT_USAGE 2 /* bad command line */

/* Sets the program name used in messages (the base name of argv[0]). Call first. */
void client_init(const char *prog);

/* Overrides the socket search (a --socket flag); NULL keeps the search. */
void client_set_socket(const char *path);
/* The socket the client uses (found on first use, DESIGN.md §4). */
const char *client_socket_path(void);

/* Prints "<prog>: <message>" on stderr. */
void client_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "<prog>: <message>" on stderr and exits with status. */
void client_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* A usage error: the message, a pointer to --help, exit 2. */
void client_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Called with each piece of a streamed response body as it arrives. Return 0 to go on,
 * -1 to stop reading (the request then ends with success). */
typedef int (*client_chunk_cb)(const char *data, size_t len, void *arg);

struct client_response {
    int status;         /* HTTP status code */
    char *content_type; /* NULL if absent */
    struct strbuf body; /* the body, unless it was streamed to a callback */
};
void client_response_free(struct client_response *r);

/* After getopt_long returned c ('?' or ':'; the option string must start with ':'
 * after any '+'), says what was wrong: "unknown option --foo", "option -t needs a
 * value", "option --hold takes no value". Caller frees. */
char *client_option_error(char **argv, int c, const struct option *longopts);

/* Sends one request and reads its response. body may be NULL. When stream_cb is set and
 * the status is 2xx, the body goes to the callback as it arrives instead of into
 * r->body (error bodies are always collected). Returns 0, or -1 with *err set (caller
 * frees) when the daemon could not be reached or broke the protocol; connection
 * failures carry the "is it running?" hint. */
int client_request(const char *method, const char *path_query, const char *body, size_t body_len,
                   const char *content_type, struct client_response *r, client_chunk_cb stream_cb,
                   void *cb_arg, char **err);

/* A JSON request: body_json may be NULL (no body); it is not consumed. On a 2xx reply
 * returns 0 with *reply the parsed body (NULL if empty). On an error reply returns -1
 * with *reply the parsed body (usually {"error": ...}; a synthesised one otherwise).
 * *status gets the HTTP status (may be NULL). If the daemon cannot be reached the
 * program prints the connect message and exits 1. */
int client_request_json(const char *method, const char *path_query, json_t *body_json, int *status,
                        json_t **reply);

/* The "error" text of an error reply (never NULL). */
const char *client_error_text(const json_t *reply);

/* client_request_json that treats any error reply as fatal: prints "<prog>: <error>"
 * and exits 1. Returns the parsed 2xx reply (caller decrefs; may be NULL). */
json_t *client_call(const char *method, const char *path_query, json_t *body_json);

/* Appends "?key=value" or "&key=value" to a path, URL-encoding the value. */
void client_query_add(struct strbuf *path, const char *key, const char *value);
/* Percent-encodes s for use in a query value or path segment (caller frees). */
char *client_url_encode(const char *s);

/* Resolves "@" / "@~N" to the id of the caller's N-th most recent submission. A
 * reference that does not resolve is fatal (exit 1). */
int64_t client_resolve_ref(int back);

/* Parses job id arguments: each of args is an id list ("1,3,5-7") or a reference
 * ("@", "@~2"). Bad syntax is a usage error (exit 2). Returns a malloc'd array. */
int64_t *client_parse_ids(int argc, char **argv, size_t *n);

/* Closes the connection to the daemon (it is reopened on the next request). */
void client_close(void);

/* The end of a command: closes the connection and flushes stdout. Returns status, or 1
 * with a message if the output could not be written (a full disk, a closed pipe). */
int client_finish(int status);

#endif
