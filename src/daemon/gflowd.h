/* gflowd: the daemon's process-wide settings, set up once by main.c. */
#ifndef GFLOWD_H
#define GFLOWD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "paths.h"

struct store;

struct gflowd {
    struct gflow_config cfg;
    struct gflow_paths paths;
    struct store *store;
    bool system;       /* started as root: serves every user, runs jobs as their submitters */
    uid_t uid;         /* the daemon's own uid */
    char *user;        /* and its login name */
    bool has_admin_gid;
    gid_t admin_gid;   /* daemon.admin_group */
    double started_at; /* wall clock */
    char *shim_path;   /* gflow-shim next to gflowd, else the installed one */
    int64_t mem_total_mb;           /* MemTotal at start; 0 = unknown (no memory checks) */
    const char *memory_enforcement; /* how the shim holds jobs to --memory (its probe) */
};

extern struct gflowd gd;

#endif
