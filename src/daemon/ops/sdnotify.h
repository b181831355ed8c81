/* sdnotify: systemd's readiness protocol (sd_notify(3)) without libsystemd. A unit of
 * Type=notify starts gflowd with NOTIFY_SOCKET set to a Unix datagram socket; the
 * daemon sends "READY=1" there once its socket answers, "STOPPING=1" when it begins to
 * stop. Without NOTIFY_SOCKET nothing is sent. */
#ifndef GFLOWD_SDNOTIFY_H
#define GFLOWD_SDNOTIFY_H

/* Takes NOTIFY_SOCKET out of the environment (nothing the daemon starts inherits it)
 * and remembers it for sdnotify_send. Call once, early. */
void sdnotify_init(void);

/* Sends one message ("READY=1\nSTATUS=...") as a single datagram. 0 when sent or when
 * there is no socket to send to, -1 (errno set) when sending failed. */
int sdnotify_send(const char *msg);

#endif
