/* web_conns: the dashboard's connections and their limits (see web_conns.h). With one
 * thread per connection, a connection is closed from outside by shutting its socket down:
 * its thread then reads the end and libmicrohttpd closes it (the descriptor stays its
 * own, so it cannot be reused under us while it is in the list). */
#include "web_conns.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "clock.h"
#include "util.h"

struct web_conn {
    int fd;
    double started; /* monotonic */
    bool trusted;
    bool shut; /* shut down already */
    struct web_conn *prev, *next;
};

/* Oldest first; guarded by lock (libmicrohttpd calls from its threads). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct web_conn *head, *tail;
static int untrusted;

static void shut(struct web_conn *wc)
{
    if (wc->shut)
        return;
    wc->shut = true;
    shutdown(wc->fd, SHUT_RDWR);
}

/* The oldest connection that has not shown the session and is not shut yet. */
static struct web_conn *oldest_untrusted(void)
{
    for (struct web_conn *wc = head; wc; wc = wc->next)
        if (!wc->trusted && !wc->shut)
            return wc;
    return NULL;
}

static void add(struct web_conn *wc)
{
    pthread_mutex_lock(&lock);
    wc->prev = tail;
    if (tail)
        tail->next = wc;
    else
        head = wc;
    tail = wc;
    if (++untrusted > WEB_CONNS_MAX_UNTRUSTED) {
        struct web_conn *old = oldest_untrusted();
        if (old && old != wc) {
            shut(old);
            untrusted--;
        }
    }
    pthread_mutex_unlock(&lock);
}

static void drop(struct web_conn *wc)
{
    pthread_mutex_lock(&lock);
    if (wc->prev)
        wc->prev->next = wc->next;
    else
        head = wc->next;
    if (wc->next)
        wc->next->prev = wc->prev;
    else
        tail = wc->prev;
    if (!wc->trusted && !wc->shut)
        untrusted--;
    pthread_mutex_unlock(&lock);
    free(wc);
}

void web_conns_notify_cb(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (*socket_context)
            drop(*socket_context);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    struct web_conn *wc = xcalloc(1, sizeof(*wc));
    wc->fd = ci->connect_fd;
    wc->started = now_mono();
    *socket_context = wc;
    add(wc);
}

void web_conns_trust(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct web_conn *wc = ci ? ci->socket_context : NULL;
    if (!wc)
        return;
    pthread_mutex_lock(&lock);
    if (!wc->trusted && !wc->shut)
        untrusted--;
    wc->trusted = true;
    pthread_mutex_unlock(&lock);
}

void web_conns_sweep(void)
{
    double now = now_mono();
    pthread_mutex_lock(&lock);
    for (struct web_conn *wc = head; wc; wc = wc->next) {
        if (wc->trusted || wc->shut)
            continue;
        if (now - wc->started < WEB_CONNS_HEADER_SECS)
            break; /* oldest first: the rest are younger */
        shut(wc);
        untrusted--;
    }
    pthread_mutex_unlock(&lock);
}
