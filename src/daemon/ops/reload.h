/* reload: gflowd reload (SIGHUP, or POST /v1/daemon/reload): reads the config file and
 * the GFLOW_* environment again, with the daemon's own flags still winning, and applies
 * the settings that can change while jobs run. Jobs are not touched. */
#ifndef GFLOWD_RELOAD_H
#define GFLOWD_RELOAD_H

#include <jansson.h>

struct gflowd;

/* {"config": FILE|null, "applied": [keys], "restart_needed": [keys],
 * "kept": {"daemon.gpus": why}}; NULL with *err when the file is invalid (nothing
 * changes then). Logs what it did. */
json_t *daemon_reload(struct gflowd *d, char **err);
/* Looks up daemon.admin_group's gid (at start and on reload); a group that does not
 * exist leaves only root as admin, with a warning. */
void daemon_resolve_admin_group(struct gflowd *d);

#endif
