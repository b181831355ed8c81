/* daemon: the context every part of gflowd works in, made once by serve.c and passed
 * explicitly (there is no global daemon state): the settings, the paths, the store,
 * the job table, the GPUs, the HTTP server, the filesystems' room, and the facts about this process that
 * the request handlers and the runner need. */
#ifndef GFLOWD_DAEMON_H
#define GFLOWD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgdelegate.h"
#include "config.h"
#include "fdres.h"
#include "paths.h"

struct store;
struct jobs;
struct gpus;
struct api;
struct events;
struct disk;
struct resv_table;
struct notifier;
struct launcher;
struct slurm_backend;
struct userdb;
struct gpu_recent;

struct gflowd {
    struct gflow_config cfg;
    struct gflow_paths paths;
    struct store *store;
    struct jobs *jobs;
    struct gpus *gpus;
    struct api *api;
    struct events *events;       /* GET /v1/events (events.h) */
    struct disk *disk;           /* room on the data and log filesystems */
    int log_dir_fd;              /* daemon.log_dir, held open (run/joblog.h); -1 before */
    struct resv_table *resv;     /* GPU reservations (gctl reserve; reservation_table.h) */
    struct gpu_samples *samples; /* GPU utilisation for gstats --gpu (gpu_samples.h) */
    struct gpu_recent *recent;   /* the GPUs' last 10 minutes, in memory (gpu_recent.h) */
    struct notifier *notifier;   /* webhooks and e-mail (notify.h) */
    struct launcher *launcher;   /* what launching keeps between jobs (run/launch.h) */
    struct slurm_backend *slurm; /* the slurm backend's state; NULL: jobs run here */
    struct userdb *userdb;       /* NSS lookups off the loop (userdb.h); NULL before the loop */
    bool system; /* started as root: serves every user, runs jobs as their submitters */
    uid_t uid;   /* the daemon's own uid */
    char *user;  /* and its login name */
    bool has_admin_gid;
    gid_t admin_gid;                /* daemon.admin_group */
    bool admin_group_pending;       /* its lookup has not answered: done again when it does */
    double started_at;              /* wall clock */
    char *shim_path;                /* gflow-shim next to gflowd, else the installed one */
    int64_t mem_total_mb;           /* MemTotal at start; 0 = unknown (no memory checks) */
    const char *memory_enforcement; /* how the shim holds jobs to --memory (its probe) */
    struct cgdelegate cgroup;       /* gflowd's leaf in a delegated cgroup v2 (cgleaf.c) */
    /* RLIMIT_NOFILE: the soft limit gflowd was started with, which its jobs get, and
     * whether gflowd raised its own to the hard limit. */
    int64_t nofile_soft;
    bool nofile_raised;
    struct fdres fds; /* the descriptors' reserves: jobs, connections, the daemon's own */
    /* How the settings were made, for gflowd reload: the config file (NULL: none; an
     * explicit -c must exist) and the flags' config keys and values, which win over it. */
    char *config_path;
    bool config_required;
    size_t n_flags;
    const char **flag_keys;
    const char **flag_values;
    /* Failed jobs' classes from their logs (ops/triage_run.h). */
    struct triage_runner *triage;
};

/* Whether jobs run under the slurm backend ([backend] kind = "slurm") instead of here. */
static inline bool daemon_on_slurm(const struct gflowd *d)
{
    return d->cfg.parsed.backend == CONFIG_BACKEND_SLURM;
}

#endif
