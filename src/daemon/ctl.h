/* ctl: the control commands of gflowd, run by the user: up/start, down/stop, restart,
 * status. They talk to a running daemon through its lock file (which process it is) and
 * its socket (src/client). */
#ifndef GFLOWD_CTL_H
#define GFLOWD_CTL_H

#include <stdbool.h>

struct gflowd;
struct serve_opts;

/* Starts a detached daemon; returns 0 only once it has reported, over a pipe, that its
 * socket is listening, and the socket has answered a status request. */
int ctl_up(struct gflowd *d, const struct serve_opts *o);
/* Stops the daemon (SIGTERM, then SIGKILL after 10 s) through a pidfd, so never a
 * recycled pid. quiet_if_stopped: say nothing when none runs (restart). */
int ctl_down(const struct gflowd *d, bool quiet_if_stopped);
/* Prints whether the daemon runs, its version, pid, uptime, job counts, GPUs, memory
 * enforcement and paths; 1 if it does not run. */
int ctl_status(const struct gflowd *d);
/* gflowd reload: asks the running daemon to read its config again; prints what changed. */
int ctl_reload(const struct gflowd *d);

#endif
