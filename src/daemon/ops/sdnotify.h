/* sdnotify: systemd's readiness protocol (sd_notify(3)) without libsystemd. A unit of
 * Type=notify starts gflowd with NOTIFY_SOCKET set to a Unix datagram socket; the
 * daemon sends "READY=1" there once its socket answers, "STOPPING=1" when it begins to
 * stop. Without NOTIFY_SOCKET nothing is sent. */
#ifndef GFLOWD_SDNOTIFY_H
#define GFLOWD_SDNOTIFY_H

#include <sys/socket.h>
#include <sys/un.h>

/* Where to send (from NOTIFY_SOCKET); len 0: nowhere. */
struct sdnotify {
    struct sockaddr_un addr;
    socklen_t len;
};

/* Takes NOTIFY_SOCKET out of the environment (nothing the daemon starts inherits it)
 * and keeps it in n for sdnotify_send. Call once, early. */
void sdnotify_init(struct sdnotify *n);

/* Sends one message ("READY=1\nSTATUS=...") as a single datagram. 0 when sent or when
 * there is no socket to send to, -1 (errno set) when sending failed. */
int sdnotify_send(const struct sdnotify *n, const char *msg);

#endif
