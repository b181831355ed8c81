/* client: the HTTP/1.1 client over the daemon's Unix socket, shared by the commands and
 * by `gflowd up/down/status`: finding the socket (docs/design.md §4), requests with
 * Content-Length and chunked bodies, and a streaming mode for `gjob log --follow`.
 * It never prints or exits: errors come back to the caller (the command-line
 * conventions are src/cli/cli.h).
 *
 * The CLI links no libcurl on purpose (docs/design.md §2): loading it costs more than a whole
 * request over the socket, and people submit sweeps from shell loops. One process makes
 * one connection, reused (keep-alive) for every request it sends. */
#ifndef GFLOW_CLIENT_H
#define GFLOW_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The program name sent as User-Agent (the base name of argv[0]). Call first. */
void client_init(const char *prog);

/* Overrides the socket search (a --socket flag); NULL keeps the search. */
void client_set_socket(const char *path);
/* Reads this config file instead of the default one (a --config flag, as gflow's
 * commands take it); NULL: the default. */
void client_set_config(const char *path);
/* Applies the config's `timezone` to this process (timefmt_use_zone): the --config file
 * or the default one (the user's, /etc/gflow/gflow.toml for root), with GFLOW_TIMEZONE
 * over it; local time when neither sets one. 0, or -1 with *err if the config cannot be
 * read. */
int client_load_timezone(char **err);
/* The same for a socket that something else than a --socket flag named (source, static
 * text, says what in errors: gflowd names its configured socket). */
void client_set_socket_from(const char *path, const char *source);
/* The socket the client uses: the --socket flag, then GFLOW_SOCKET, then the config's
 * daemon.socket_path, then the per-user socket if a daemon answers there, then the
 * system socket. NULL with *err if the configuration cannot be read. */
const char *client_socket_path(char **err);
/* The last two steps of that search: user if a daemon answers there; else system if a
 * socket exists there (even one this user may not reach, so that errors name it and
 * the real cause); else user. Malloc'd. */
char *client_choose_socket(const char *user, const char *system);

/* The first line of the error of every program that finds no daemon listening, and of
 * one that finds a socket it may not use (followed by the reason). */
#define CLIENT_NOT_RUNNING "gflowd is not running: start it with 'gflowd up'"
#define CLIENT_UNREACHABLE "gflowd cannot be reached: "
/* The error of a failed connect() to path (errno e): CLIENT_NOT_RUNNING where no daemon
 * listens (ENOENT, ECONNREFUSED, ENOTDIR), else CLIENT_UNREACHABLE and the reason; the
 * details (the socket, errno, what named it, --socket / GFLOW_SOCKET) on the lines
 * below. Malloc'd. */
char *client_connect_error(const char *path, int e);
/* The same on one line, for an HTTP error body (gflowd web's 502): the first line, then
 * the socket and errno in parentheses. Malloc'd. */
char *client_connect_error_line(const char *path, int e);
/* Whether msg is such an error. It is printed as it is, without a program's name in
 * front, so that its first line reads the same from every program. */
bool client_is_connect_error(const char *msg);
/* Prints err on stderr: "<prog>: <err>", or err alone when it is a connect error. */
void client_print_error(const char *prog, const char *err);

/* Called with each piece of a streamed response body as it arrives. Return 0 to go on,
 * -1 to stop reading (the request then ends with success). */
typedef int (*client_chunk_cb)(const char *data, size_t len, void *arg);

struct client_response {
    int status;              /* HTTP status code */
    char *content_type;      /* NULL if absent */
    struct strbuf body;      /* the body, unless it was streamed to a callback */
    uint64_t content_length; /* the body's length as its header gave it, else 0 */
};
void client_response_free(struct client_response *r);

/* Sends one request and reads its response. body may be NULL. When stream_cb is set and
 * the status is 2xx, the body goes to the callback as it arrives instead of into
 * r->body (error bodies are always collected). Returns 0, or -1 with *err set (caller
 * frees) when the daemon could not be reached or broke the protocol; connection
 * failures carry the "is it running?" hint, and a change (not GET) whose answer never
 * came says that it may have been carried out and how to check. */
int client_request(const char *method, const char *path_query, const char *body, size_t body_len,
                   const char *content_type, struct client_response *r, client_chunk_cb stream_cb,
                   void *cb_arg, char **err);

/* Appends "?key=value" or "&key=value" to a path, URL-encoding the value. */
void client_query_add(struct strbuf *path, const char *key, const char *value);
/* Percent-encodes s for use in a query value or path segment (caller frees). */
char *client_url_encode(const char *s);

/* Closes the connection to the daemon (it is reopened on the next request). */
void client_close(void);

#endif
