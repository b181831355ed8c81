/* web_proxy: one request of the dashboard passed on to the daemon's Unix socket, its
 * answer streamed back (an event stream or a followed log is never buffered). */
#ifndef GFLOW_WEB_PROXY_H
#define GFLOW_WEB_PROXY_H

#include <microhttpd.h>
#include <stddef.h>

/* Sends METHOD path_query (with body, content_type and last_event_id when not NULL) to
 * the daemon at socket_path on a connection of its own, and makes the response that
 * streams its answer back. NULL with *err (caller frees) when the daemon cannot be
 * reached or answered no HTTP; *status gets the daemon's status. */
struct MHD_Response *web_proxy(const char *socket_path, const char *method, const char *path_query,
                               const char *body, size_t body_len, const char *content_type,
                               const char *last_event_id, unsigned *status, char **err);

#endif
