/* config: gflow's settings. Sources in increasing precedence: built-in defaults, the
 * TOML file, environment variables GFLOW_<SECTION>__<KEY> (e.g.
 * GFLOW_DAEMON__KILL_GRACE_SECS=3), then command-line flags (applied by the caller with
 * config_set). Unknown keys and wrong types are errors that name the file, line and key. */
#ifndef GFLOW_CONFIG_H
#define GFLOW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "notifyconf.h"
#include "quota.h"
#include "timeplan.h"
#include "triage.h"

/* [limits]: what one request, one user and all of them together may take of a shared
 * daemon (docs/security.md). Each is a key limits.<name>. */
struct gflow_limits {
    int64_t max_request_bytes;          /* a request body (also daemon.max_request_bytes) */
    int64_t max_body_bytes_in_flight;   /* the bodies being received, all connections */
    int64_t max_body_bytes_per_user;    /* the bodies one uid is sending, all its connections */
    int64_t min_body_bytes_per_sec;     /* a body arriving slower is cut off (0: never) */
    int64_t body_rate_window_secs;      /* ...measured over this long */
    int64_t max_connections;            /* open connections, all users */
    int64_t max_connections_per_user;   /* open connections of one uid */
    int64_t idle_timeout_secs;          /* a connection that has sent no request yet */
    int64_t max_jobs_per_request;       /* jobs one submission makes (an array, a sweep) */
    int64_t max_active_jobs_per_user;   /* queued, held and running jobs of one uid */
    int64_t max_ids_per_request;        /* job ids one id list names (after clipping) */
    int64_t max_log_scan_bytes;         /* what gjob log --first/--last reads of a log */
    int64_t max_event_clients;          /* GET /v1/events streams, all users */
    int64_t max_event_clients_per_user; /* GET /v1/events streams of one uid */
    int64_t event_buffer_bytes;         /* what a stream may fall behind before it is dropped */
};

/* The choices of scheduler.backfill_untimed and backend.kind, in their tables' order. */
enum { CONFIG_UNTIMED_PLANNED, CONFIG_UNTIMED_OUTSIDE };
enum { CONFIG_BACKEND_LOCAL, CONFIG_BACKEND_SLURM };
/* The choices of reservations.who. */
enum { CONFIG_RESV_ADMINS, CONFIG_RESV_USERS };
/* The choices of daemon.stray: what a job's process on a GPU not its own does. */
enum { CONFIG_STRAY_BLOCK, CONFIG_STRAY_KILL, CONFIG_STRAY_WARN };

struct gflow_config {
    char *timezone; /* timezone (top level, gflow's): an IANA zone the commands show and read
                     * times in (timefmt.h); NULL = local time */
    /* [daemon] */
    char *socket_path;              /* daemon.socket_path; NULL = the default path */
    char *data_dir;                 /* daemon.data_dir; NULL = the default path */
    int64_t max_running_jobs;       /* daemon.max_running_jobs; 0 = no limit (default) */
    int64_t kill_grace_secs;        /* daemon.kill_grace_secs; default 10, >= 0 */
    char *admin_group;              /* daemon.admin_group; NULL = root only */
    char *log_level;                /* daemon.log_level: error|warn|info|debug; default info */
    char *gpus;                     /* daemon.gpus: "all" (default) or a list like "0,2-3" */
    char *nvml_library;             /* daemon.nvml_library; NULL = libnvidia-ml.so.1 */
    char *gpu_allocation_strategy;  /* topology (default) | sequential | random */
    int64_t gpu_poll_interval_secs; /* daemon.gpu_poll_interval_secs; default 10, >= 1 */
    int64_t gpu_samples_max;        /* daemon.gpu_samples_max: utilisation samples kept per
                                     * GPU for gstats --gpu (a ring); default 60480 */
    char *gpu_id_format;            /* CUDA_VISIBLE_DEVICES as "auto" (default: indices
                                     * unless one would be wrong: gpu/gpu_ids.c), "index" or
                                     * "uuid" */
    bool constrain_devices;         /* daemon.constrain_devices: deny jobs the GPUs they were not
                                * given through the cgroup v1 devices controller; default
                                * false */
    bool cpu_affinity;              /* daemon.cpu_affinity: pin GPU jobs to their GPUs' local
                                     * CPUs; default false */
    char *log_dir;                  /* daemon.log_dir: where job logs go; NULL = <data>/logs */
    int64_t max_log_bytes;          /* daemon.max_log_bytes: a job log's cap; default 1 GiB,
                                     * 0 = no cap */
    int64_t log_keep_on_full_disk;  /* daemon.log_keep_on_full_disk: a job that ends while
                                     * its log's filesystem is full keeps only this many
                                     * last bytes of its log; default 4 MiB, 0 = never cut */
    struct gflow_limits limits;     /* [limits] */
    char *source_path;              /* the file that was read, NULL if none */
    char *log_dir_relative;         /* daemon.log_dir as the file wrote it when that was a
                                     * relative path (log_dir is then made the file's
                                     * folder's, config_file.c); NULL otherwise */
    char *container;                /* daemon.container: auto (detect), yes, no */
    char *stray;                    /* daemon.stray: block (default), kill, warn */
    char *host_proc;                /* daemon.host_proc: the host's /proc as mounted in
                                     * gflowd's container (NVML gives host pids); NULL:
                                     * none */
    int64_t nvml_timeout_secs;      /* daemon.nvml_timeout_secs: a read taking longer makes
                                     * the GPUs unavailable; default 10, >= 1 */
    int64_t nvml_retry_max_secs;    /* daemon.nvml_retry_max_secs: the longest wait between
                                     * tries to open NVML; default 60, >= 1 */
    int64_t unowned_memory_mib;     /* daemon.unowned_memory_mib: a GPU with more memory
                                     * used by no listed process is busy; default 1024, 0:
                                     * not checked */
    char *keep_finished;            /* daemon.keep_finished: "90d" (age: s, m, h, d) or a
                                     * count ("100000") of finished jobs kept in the
                                     * history; NULL or "" = all (default) */
    /* gflow's keys (docs/usage.md "gflow's configuration keys"). */
    char *host;                        /* daemon.host: the dashboard's address (gflowd web);
                                     * NULL = 127.0.0.1 (gflow's API listens there) */
    int64_t port;                      /* daemon.port: the dashboard's port; 0 = its own
                                     * default (8080) */
    bool fair_share_enabled;           /* daemon.fair_share.enabled: gflow's fair-share (see
                                     * config_priority); off unless the table is given */
    int64_t fair_share_half_life_secs; /* daemon.fair_share.half_life_secs; default 7 days */
    char *known_projects;              /* projects.known_projects, joined by ','; "" = any */
    bool require_project;              /* projects.require_project: a job needs --project */
    /* daemon.default_time_plan: how long a job without --time is planned to run, for
     * backfill: "pN" (that percentile of the last 1,000 ended jobs' run times, or
     * scheduler.default_time_limit while fewer than 20 have ended) or a duration;
     * default "p95" (timeplan.h) */
    char *default_time_plan;
    /* executor.type: process (what we do) or tmux (accepted, with a warning: jobs here
     * run without tmux) */
    char *executor_type;
    /* [scheduler] */
    bool scheduler_backfill;            /* scheduler.backfill: default true */
    int64_t scheduler_backfill_depth;   /* scheduler.backfill_depth: jobs that get a
                                            * reservation; default 1, >= 1 */
    char *scheduler_default_time_limit; /* scheduler.default_time_limit: a job without a
                                            * time limit is planned to run this long ("24h",
                                            * parse_duration; default 24h) */
    /* [metrics] listen: "HOST:PORT" of a TCP port serving GET /metrics only; NULL or
     * "": none (the Unix socket serves it anyway). */
    char *metrics_listen;
    char *scheduler_backfill_untimed; /* scheduler.backfill_untimed: planned (default) |
                                         * outside (struct scheduler_policy) */

    /* Preemption (docs/usage.md "Preemption"). */
    bool scheduler_preempt; /* scheduler.preempt: default false */
    /* scheduler.preempt_priority_gap: a job preempts --requeue jobs at least this much
     * lower in priority; default 10, >= 1 */
    int64_t scheduler_preempt_priority_gap;
    /* scheduler.preempt_grace: SIGTERM, then SIGKILL after this ("30s", parse_duration) */
    char *scheduler_preempt_grace;
    /* [quota]: per-user and per-project limits (quota.h), read by quota_config_from_toml
     * rather than the key table (its users and projects are named by the admin). */
    struct quota_config quota;
    /* [notifications]: webhooks and e-mail (notifyconf.h), read by
     * notify_config_from_toml like [quota]. */
    struct notify_config notify;
    /* Fair-share and the multifactor priority (docs/usage.md, "Fair-share and priority"). */
    char *scheduler_fairshare_half_life;         /* usage's half-life ("7d") */
    char *scheduler_fairshare_user_shares;       /* "alice=2,bob=1"; others have 1 */
    char *scheduler_fairshare_project_shares;    /* the same for projects */
    char *scheduler_priority_max_age;            /* the wait that gives the full age factor */
    int64_t scheduler_priority_weight_priority;  /* default 255 */
    int64_t scheduler_priority_weight_fairshare; /* default 0 */
    int64_t scheduler_priority_weight_age;       /* default 0 */
    /* [backend]: where jobs run (docs/slurm.md). "local" (default): this machine's GPUs,
     * through gflow-shim; "slurm": each job is submitted to Slurm with sbatch. */
    char *backend_kind;
    /* [reservations]: who may make GPU reservations (gctl reserve create) and, when users
     * may, how much one user may reserve (docs/usage.md "Reservations"). Admins are not
     * bound by the limits. */
    char *reservations_who;            /* "admins" (default) | "users" */
    int64_t reservations_max_gpus;     /* distinct GPUs of one user's pending and
                                        * active reservations together; default 2 */
    char *reservations_max_duration;   /* the longest reservation ("24h") */
    char *reservations_max_ahead;      /* how far ahead one may begin ("7d") */
    int64_t reservations_max_per_user; /* pending and active ones of a user; default 4 */
    /* The settings above that the daemon reads often, parsed once when their text is
     * set (config.c: at load, and so at every reload), so that nothing parses a setting
     * again on each scheduling pass. */
    struct gflow_parsed_settings {
        int64_t default_time_limit_secs;    /* scheduler.default_time_limit */
        struct time_plan default_time_plan; /* daemon.default_time_plan */
        int64_t preempt_grace_secs;         /* scheduler.preempt_grace */
        int64_t priority_max_age_secs;      /* scheduler.priority_max_age */
        int64_t fairshare_half_life_secs;   /* scheduler.fairshare_half_life */
        int gpu_allocation_strategy;        /* daemon.gpu_allocation_strategy: an enum
                                          * gpualloc_strategy */
        int backfill_untimed;               /* scheduler.backfill_untimed: a CONFIG_UNTIMED_* */
        int backend;                        /* backend.kind: a CONFIG_BACKEND_* */
        int reservations_who;               /* reservations.who: a CONFIG_RESV_* */
        int stray;                          /* daemon.stray: a CONFIG_STRAY_* */
        /* reservations.max_duration and reservations.max_ahead */
        int64_t reservations_max_duration_secs;
        int64_t reservations_max_ahead_secs;
        int64_t hooks_timeout_secs; /* hooks.timeout */
    } parsed;
    /* [hooks]: the admin's commands run before and after each job, as the job's user,
     * with its environment and workdir, in its log (docs/usage.md "Hooks"). "" = none. */
    char *hooks_pre;           /* hooks.pre: fails -> the job does not run, F PrologFailed */
    char *hooks_post;          /* hooks.post: fails -> F EpilogFailed (the exit code kept) */
    char *hooks_timeout;       /* hooks.timeout: each hook's limit ("60s"), then killed */
    char *backend_partition;   /* sbatch --partition; "" = Slurm's default */
    char *backend_account;     /* sbatch --account; "" = none */
    char *backend_qos;         /* sbatch --qos; "" = none */
    char *backend_sbatch_args; /* more sbatch options, split at spaces; "" = none */
    int64_t backend_poll_secs; /* how often Slurm's job states are read; default 5 */
    /* [triage]: a failed job's class from its log's tail (triage.h, docs/config.md). */
    int64_t triage_tail_bytes;   /* triage.tail_bytes: how much of the log's end is read;
                                  * default 65536 */
    int64_t triage_timeout_secs; /* triage.timeout_secs: a read taking longer (a hung
                                  * network filesystem) is given up; default 10 */
    struct triage_config triage; /* [[triage.classes]], read like [quota] */
    /* What the last load accepted but warns about (a gflow key that means nothing here),
     * one line each, for the daemon's log and gflowd's stderr at start. */
    char **warnings;
    size_t n_warnings;
};

/* The multifactor weights and half-life the daemon uses: the [scheduler] ones, or with
 * daemon.fair_share.enabled (gflow's fair-share: usage orders jobs within one priority)
 * and the weights left at their defaults, weights that make --priority always win and
 * fair-share break its ties; daemon.fair_share.half_life_secs when it is not the
 * default and scheduler.fairshare_half_life is. */
struct config_priority {
    int64_t weight_priority, weight_fairshare, weight_age;
    int64_t half_life_secs;
};
void config_priority(const struct gflow_config *c, struct config_priority *out);

/* projects.known_projects / require_project against a job's project (NULL or "": none).
 * 0, or -1 with *err a one-line refusal naming the setting. */
int config_check_project(const struct gflow_config *c, const char *project, char **err);

void config_init(struct gflow_config *c); /* defaults */
void config_free(struct gflow_config *c);

/* Parses text (TOML) and applies it to c, all or nothing; path names the source in
 * messages and becomes source_path. 0, or -1 with *err = "FILE:LINE: message". */
int config_load_text(struct gflow_config *c, const char *path, const char *text, size_t len,
                     char **err);

/* Applies GFLOW_<SECTION>__<KEY> variables from envp (NULL-terminated). A variable with
 * that shape naming an unknown key is an error. 0 or -1 with *err. */
int config_load_env(struct gflow_config *c, char *const *envp, char **err);

/* Sets "section.key" from its text form (as an environment variable or a flag gives it).
 * 0 or -1 with *err. */
int config_set(struct gflow_config *c, const char *dotted_key, const char *value, char **err);

/* The known keys, in the table's order (gflowd init writes them all; gflowd reload
 * compares them): the i-th key's dotted name and its default in text form (NULL: unset,
 * the daemon picks, e.g. a path), or NULL past the end. */
const char *config_key_name(size_t i);
const char *config_key_default(size_t i);
/* True if the i-th key is a TOML string (its value is written quoted). */
bool config_key_is_string(size_t i);

/* The value of "section.key" in c, in text form; NULL if unset or unknown. Malloc'd. */
char *config_get_text(const struct gflow_config *c, const char *dotted_key);

#endif
