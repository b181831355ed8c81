/* serve: the serving daemon (gflowd run, and the child of gflowd up): set-up, the event
 * loop and its once-per-iteration work, and shutdown. */
#ifndef GFLOWD_SERVE_H
#define GFLOWD_SERVE_H

struct gflowd;

struct serve_opts {
    const char *simulate_gpus; /* --simulate-gpus N|FILE, NULL if none */
    const char *flag_gpus;     /* --gpus LIST, NULL if none */
    int ready_fd;              /* `up` waits on this pipe for "ok\n" or "error: ...\n"; -1: none */
};

/* Serves until SIGTERM/SIGINT; d holds the settings and paths. Returns the exit status;
 * a failed start-up reports on ready_fd and exits 1. */
int serve(struct gflowd *d, const struct serve_opts *o);

#endif
