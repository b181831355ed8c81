/* config_file: where the configuration comes from on this machine: the file (the
 * user's, or /etc/gflow/gflow.toml for the system daemon) and the process
 * environment. The settings themselves and their checks are core/config.c. */
#ifndef GFLOW_CONFIG_FILE_H
#define GFLOW_CONFIG_FILE_H

#include <stdbool.h>

#include "config.h"

#define CONFIG_SYSTEM_PATH "/etc/gflow/gflow.toml"

/* Reads path into c (keys absent from the file keep their values). When path is NULL
 * the default file is used if it exists (config_default_path). If must_exist and the
 * file is missing, that is an error. 0, or -1 with *err = "FILE:LINE: message". */
int config_load_file(struct gflow_config *c, const char *path, bool must_exist, char **err);

/* Defaults + file + this process's environment, the usual sequence (c need not be
 * initialised; free it with config_free, also after an error). A path given explicitly
 * must exist. */
int config_load(struct gflow_config *c, const char *path, char **err);

/* $XDG_CONFIG_HOME/gflow/gflow.toml (or ~/.config/...), or /etc/gflow/gflow.toml when
 * system is true; NULL for a user with no home (paths_home: no user file). Caller
 * frees. */
char *config_default_path(bool system);

#endif
