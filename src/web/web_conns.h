/* web_conns: the dashboard's open connections, and which of them have shown the session
 * (a right token or the session cookie). Everything comes from 127.0.0.1, so a limit per
 * address would lock the owner out with the attacker; what is limited instead is the
 * connections that have not shown the session: at most WEB_CONNS_MAX_UNTRUSTED at once
 * (a new one closes the oldest), each closed after WEB_CONNS_HEADER_SECS. A connection
 * that never finishes its headers, or sends requests without the cookie, cannot take the
 * threads the owner's browser needs (docs/security.md, "Web dashboard"). */
#ifndef GFLOW_WEB_CONNS_H
#define GFLOW_WEB_CONNS_H

#include <microhttpd.h>

/* Seconds a connection has to show the session (its first request's headers included). */
#define WEB_CONNS_HEADER_SECS 10
/* Connections that have not shown it, at most. */
#define WEB_CONNS_MAX_UNTRUSTED 16

/* MHD_OPTION_NOTIFY_CONNECTION's callback (cls unused). Thread-safe. */
void web_conns_notify_cb(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode toe);
/* The connection has shown the session: it is no longer limited or timed. */
void web_conns_trust(struct MHD_Connection *c);
/* Closes the connections that have had WEB_CONNS_HEADER_SECS to show it (call it about
 * every second). */
void web_conns_sweep(void);

#endif
