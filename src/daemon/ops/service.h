/* service: `gflowd service install|uninstall|status`, gflowd as a systemd service. The
 * unit runs `gflowd run` in the foreground (Type=notify: ready once its socket answers),
 * with KillMode=process (stopping or restarting gflowd leaves the jobs running) and
 * Delegate=yes (the job cgroups below it are gflowd's to manage). */
#ifndef GFLOWD_SERVICE_H
#define GFLOWD_SERVICE_H

#include <stdbool.h>

struct gflow_paths;

struct service_request {
    const char *action;              /* install, uninstall or status */
    bool system;                     /* the machine's unit, else the caller's user unit */
    const char *root;                /* --root DIR: files under DIR, NULL: under / */
    const char *const *daemon_args;  /* the options ExecStart passes on (NULL-terminated) */
    const struct gflow_paths *paths; /* the daemon's socket and data, for the messages */
};

/* Does the action and prints what it did; returns the exit status. */
int service_run(const struct service_request *r);

/* The text of the unit for a gflowd at exe started with args (already quoted). */
char *service_unit_text(bool system, const char *exec_start);

#endif
