/* paths: where gflow keeps its files (docs/design.md §4).
 * Per-user daemon: data $XDG_DATA_HOME/gflow (~/.local/share/gflow), socket
 * $XDG_RUNTIME_DIR/gflow/gflowd.sock (else <data>/gflowd.sock).
 * System daemon (root): /var/lib/gflow and /run/gflow/gflowd.sock. */
#ifndef GFLOW_PATHS_H
#define GFLOW_PATHS_H

#include <stdbool.h>

#include "config.h"

#define GFLOW_SYSTEM_DATA_DIR "/var/lib/gflow"
#define GFLOW_SYSTEM_SOCKET "/run/gflow/gflowd.sock"

struct gflow_paths {
    bool system;
    char *data_dir;
    char *socket_path;
    char *db_path;    /* <data>/gflow.db */
    char *log_dir;    /* daemon.log_dir, else <data>/logs */
    char *exit_dir;   /* <data>/exits: exit files written by the shims */
    char *run_dir;    /* <data>/run: per-job lock, env and script files */
    char *lock_path;  /* <data>/gflowd.lock: pid and start time of the daemon */
    char *daemon_log; /* <data>/gflowd.log */
};

/* Fills p from the config (its data_dir/socket_path/log_dir override) and the environment. */
void paths_resolve(struct gflow_paths *p, const struct gflow_config *cfg, bool system);
void paths_free(struct gflow_paths *p);

/* The calling user's home: HOME, else /etc/passwd's entry (never NSS: passwd_file.h);
 * NULL when neither says. Caller frees. */
char *paths_home(void);
/* The per-user defaults for the calling user (ignoring any config). Caller frees. With
 * no home (paths_home) and no XDG variable to go by, the program ends with a one-line
 * error that asks for HOME. */
char *paths_user_data_dir(void);
char *paths_user_socket(void);

/* The file the running program was started from (to free), or NULL with errno. */
char *paths_self_exe(void);
/* A file that comes with gflow (gflow-shim, gflow-notify, the NVML simulator), to free:
 * name beside the running program (a build directory), else in the directory `relocated`
 * names relative to that one (NULL: none; "../libexec": an install moved as a whole),
 * else in installed_dir. Each is taken if access(mode) allows it; the last one always. */
char *paths_companion(const char *name, int mode, const char *relocated, const char *installed_dir);

#endif
