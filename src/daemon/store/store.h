/* store: the daemon's durable state in SQLite (WAL, synchronous=NORMAL, automatic
 * checkpoints off: the daemon checkpoints from a timer when idle).
 *
 * Group commit: the daemon calls store_begin before its first change in a loop
 * iteration (it is a no-op when a transaction is already open) and store_commit once
 * before any reply of that iteration is sent. Every other function works inside
 * whatever transaction is open. Functions return 0 on success and -1 on a database
 * error (the message is in store_error).
 *
 * The store room (src/daemon/store/, docs/design.md §3): SQLite and nothing above it;
 * the lowest room, which may call only core, common and the loop. */
#ifndef GFLOW_STORE_H
#define GFLOW_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "stats.h"

struct store;

/* Opens (creating if needed, mode 0600) and migrates the database. NULL + *err on failure. */
struct store *store_open(const char *path, char **err);
void store_close(struct store *s);
const char *store_error(struct store *s);

int store_begin(struct store *s);
bool store_in_transaction(const struct store *s);
int store_commit(struct store *s);
/* After a failed commit: true if SQLite rolled the transaction back (disk full, I/O
 * error), so its changes are gone; false if it is still open and the commit may be
 * retried. */
bool store_transaction_lost(const struct store *s);
/* Whether it was lost for want of space (SQLITE_FULL), and the error that lost it (NULL
 * when none was lost). */
bool store_lost_for_space(const struct store *s);
const char *store_lost_error(const struct store *s);
void store_rollback(struct store *s);
/* The open transaction (opened if none is) will change many rows (a bulk change, a
 * large submission): until it is committed or rolled back, the page cache may grow well
 * beyond its usual 1 MiB (store.c says why). */
void store_expect_large(struct store *s);
/* PRAGMA wal_checkpoint(PASSIVE); called when the daemon is idle. With the checkpoint
 * thread it is only asked for (it runs there). */
int store_checkpoint(struct store *s);
/* The daemon's checkpoint thread (store_ckpt.c): from here on, checkpoints run on a
 * connection of its own, off the caller's thread; store_close stops it. 0, or -1
 * (store_error says why; checkpoints then run on the caller's thread, as without). */
int store_ckpt_start(struct store *s);

/* The next job id: one more than any id ever assigned (ids are never reused). */
int64_t store_next_job_id(struct store *s);
/* Inserts j with its id already set, including command/script/env payload and its
 * dependencies (job_deps), and records that the id is taken. leader (may be NULL): the
 * first job of j's group (its id is j->group_id), already inserted; the parts of j's
 * payload that are the leader's (the environment object it shares, the same script and
 * templates) are not written again but read from the leader by store_get_job: 100,000
 * tasks of an array store their environment once. */
int store_insert_job(struct store *s, const struct job *j, const struct job *leader);
/* Writes every mutable field of j (state, times, outcome, reason, end_request, shim
 * pid and start, max_rss_kb, priority, time_limit, name, gpu_ids, ...). Not the payload. */
int store_update_job(struct store *s, const struct job *j);
/* Writes only j's state, reason, end and begin times and GPUs (a move between PD, H and
 * CA changes nothing else); as store_update_job. The same values go to the jobs after j
 * up to id last (last == j->id: j alone), in one statement: each of them must exist
 * and be meant to get them (store_same_state), as a bulk change's run of jobs is. */
int store_update_state(struct store *s, const struct job *j, int64_t last);
/* Whether store_update_state of a would write what it writes for b (but the id). */
bool store_same_state(const struct job *a, const struct job *b);

typedef void (*store_job_cb)(struct job *j, void *arg); /* the callback owns j */

/* Every job in PD, H or R, in id order, without payload (script and env left NULL). */
int store_load_active(struct store *s, store_job_cb cb, void *arg);
/* One job; with_payload also loads script and env. Returns 0, 1 if there is no such
 * job, -1 on error. */
int store_get_job(struct store *s, int64_t id, struct job *out, bool with_payload);

/* The state of job id: 0, 1 if there is no such job, -1 on error. */
int store_job_state(struct store *s, int64_t id, enum job_state *out);
/* The ids of every job (any state) that depends on job id, ascending; *ids is
 * malloc'd (NULL when none). */
int store_dependents(struct store *s, int64_t id, int64_t **ids, size_t *n);
/* Rewrites j's dependencies (job_deps and the row) after they changed. */
int store_replace_deps(struct store *s, const struct job *j);
/* Rewrites what j runs (command, script_path, workdir; with payload also the script and
 * environment) after gjob update. */
int store_update_what(struct store *s, const struct job *j, bool payload);
/* The id of the job that retried job id (its next attempt), 0 if none. */
int store_retried_as(struct store *s, int64_t id, int64_t *out);

struct store_query {
    const enum job_state *states; /* NULL/0 = every state */
    size_t n_states;
    /* Of the R jobs, only those being cancelled (the display state CG, job.h). */
    bool running_cancelling_only;
    const int64_t *ids; /* NULL/0 = every id */
    size_t n_ids;
    const char *user;     /* NULL = every user */
    const char *projects; /* "a,b": jobs of these projects (gqueue -P); NULL = any */
    double since;         /* submit_time >= since; 0 = no bound */
    enum job_sort sort;   /* by this key, then id (job.h) */
    bool descending;
    int64_t limit; /* > 0 first N, < 0 last N (after sorting), 0 = all */
    /* NULL: every light column is read; else JOB_FIELD_COUNT flags (job.h), and only the
     * columns those fields show are (with id and state): a TSV listing of 10,000 jobs
     * reads a few columns of each row, not all 40. */
    const bool *fields;
};
/* Jobs matching q, without payload, in the requested order. */
int store_list(struct store *s, const struct store_query *q, store_job_cb cb, void *arg);
/* How many jobs match q, its sort and limit aside. 0, or -1. */
int store_count(struct store *s, const struct store_query *q, int64_t *total);
/* Number of jobs per state. */
int store_count_states(struct store *s, int64_t counts[JOB_STATE_COUNT]);

/* Small key/value settings that must survive restarts (runtime controls). Returns 0,
 * 1 if the key is absent (*value NULL), -1 on error. Caller frees *value. */
int store_get_setting(struct store *s, const char *key, char **value);
int store_set_setting(struct store *s, const char *key, const char *value);

/* Fair-share accounts (store_usage.c; kind is enum fairshare_kind): every stored row,
 * and one written (made or replaced). 0 or -1. */
typedef void (*store_usage_cb)(int kind, const char *name, double usage, double at, double raw,
                               void *arg);
int store_load_usage(struct store *s, store_usage_cb cb, void *arg);
int store_put_usage(struct store *s, int kind, const char *name, double usage, double at,
                    double raw);

/* The run times (end - start, seconds) of the last `max` jobs that ran and ended on their
 * own or at their limit (CD, F, TO; not CA), newest first, for daemon.default_time_plan's
 * history (store_usage.c). A walk back along the index jobs_end: O(max). 0 or -1. */
typedef void (*store_run_cb)(double secs, void *arg);
int store_recent_runs(struct store *s, int64_t max, store_run_cb cb, void *arg);

/* Submission groups (job_groups): records group id with its max_concurrent (0 = no
 * limit), or changes the limit of an existing one. */
int store_set_group(struct store *s, int64_t id, int64_t max_concurrent);
typedef void (*store_group_cb)(int64_t id, int64_t max_concurrent, void *arg);
/* Every group with active (PD, H, R) jobs, ascending. */
int store_load_groups(struct store *s, store_group_cb cb, void *arg);
/* store_quota.c: the GPU-seconds (gpus x run time after `since`) of the ended jobs that
 * ran after since, per (user, project) pair (project NULL: none). 0 or -1. */
typedef void (*store_gpu_seconds_cb)(const char *user, const char *project, double gpu_seconds,
                                     void *arg);
int store_gpu_seconds_since(struct store *s, double since, store_gpu_seconds_cb cb, void *arg);
/* History retention (daemon.keep_finished): parses "90d" (an age: N followed by s, m, h
 * or d) or "100000" (a count); NULL or "" keeps everything (*count = *age = -1). 0, or -1
 * with *err. */
int store_keep_parse(const char *text, int64_t *count, int64_t *age_secs, char **err);
/* One small step of pruning finished jobs (CD, F, CA, TO): reads at most max_rows jobs
 * with ids above *cursor, oldest first, and deletes those beyond the newest keep_count
 * finished ones (keep_count >= 0) or ended before end_before (> 0), with their payload
 * and dependency rows. Kept regardless: a group's first job while other jobs of the group
 * remain (it holds their payload), and a job an active job depends on. *cursor moves on,
 * to 0 once the end is reached (the caller then waits longer). In the open transaction.
 * The number deleted, or -1. */
int64_t store_prune(struct store *s, int64_t keep_count, double end_before, int64_t *cursor,
                    int max_rows);

/* ---- Reservations (store_resv.c; policy/reservation_table.h) ---- */

struct resv;
int store_insert_resv(struct store *s, const struct resv *r);
int store_cancel_resv(struct store *s, int64_t id, double when);
typedef void (*store_resv_cb)(struct resv *r, void *arg); /* the callback owns r's fields */
int store_load_resvs(struct store *s, store_resv_cb cb, void *arg);

/* ---- The notification outbox (store_notify.c; notify.h) ---- */

enum store_notify_state { STORE_NOTIFY_PENDING, STORE_NOTIFY_SENT, STORE_NOTIFY_FAILED };
/* EMAIL: through sendmail; SMTP: through [[notifications.emails]][i], its dest
 * "emails[i] a@b,c@d" (the target and the recipients). */
enum store_notify_kind { STORE_NOTIFY_WEBHOOK, STORE_NOTIFY_EMAIL, STORE_NOTIFY_SMTP };
struct store_notify_row {
    int64_t id; /* set by store_notify_add */
    int64_t job_id;
    const char *event;
    int kind;         /* enum store_notify_kind */
    const char *dest; /* the webhook's URL, or the addresses */
    const char *user;
    uint32_t uid, gid; /* the submitter (e-mail is sent as them) */
    const char *payload;
    int attempts;   /* made so far */
    double next_at; /* when the next may start (unix seconds) */
};
/* Records a pending notification due at r->next_at; sets r->id. 0 or -1. */
int store_notify_add(struct store *s, struct store_notify_row *r);
/* How many notifications are pending, per uid (those with none are left out). 0 or -1. */
int store_notify_pending_by_uid(struct store *s, void (*cb)(uint32_t uid, int64_t n, void *arg),
                                void *arg);
/* The pending rows due at now, oldest first, at most limit (the row's strings live for
 * the callback only). 0 or -1. */
typedef void (*store_notify_cb)(const struct store_notify_row *r, void *arg);
int store_notify_due(struct store *s, double now, int limit, store_notify_cb cb, void *arg);
/* The earliest next_at after `after` of a pending row: 0, 1 if none, -1 on error. */
int store_notify_next_after(struct store *s, double after, double *out);
/* Records an attempt's outcome: the row's state, attempts, next due time, last error
 * (NULL: none) and when it was done (sent or failed; 0 while pending). 0 or -1. */
int store_notify_set(struct store *s, int64_t id, int state, int attempts, double next_at,
                     const char *last_error, double done_at);
int store_notify_count_pending(struct store *s, int64_t *n);
/* Deletes sent and failed rows done before `before`. How many, or -1. */
int64_t store_notify_prune(struct store *s, double before);

/* ---- Statistics (store_stats.c; gstats, GET /v1/stats) ---- */

/* GPU utilisation samples: a ring of max rows per GPU (daemon.gpu_samples_max). At
 * start: drops the slots a smaller max leaves out and says which slot comes next. */
int store_gpu_samples_start(struct store *s, int64_t max, int64_t *next);
/* Records GPU gpu's utilisation (percent) at time in slot (overwriting what was there). */
int store_gpu_sample(struct store *s, int gpu, int64_t slot, double time, int util);

/* A GPU utilisation sample: a row of the ring. */
struct gpu_sample {
    int gpu;
    int64_t slot;
    double time; /* unix seconds */
    int util;    /* percent */
};

struct store_stats_query {
    enum stats_by by;
    double since, until; /* the period [since, until) */
    double now;          /* running jobs' time is counted up to min(now, until) */
    const char *user;    /* NULL: every user */
    bool gpu;            /* the GPU samples instead of the jobs */
    /* gstats --idle-gpus instead: the jobs of the period that held GPUs and sat on them
     * (gpu_idle); `running` (taken) lists the running ones, from the daemon's memory. */
    bool idle;
    json_t *running;
    int buckets; /* slices of the samples' time series */
    /* Samples not written yet (gpu_samples.h), counted as if they were. */
    const struct gpu_sample *pending;
    size_t n_pending;
};
/* Reads the database at db_path on a read-only connection of its own (safe on any
 * thread, while the daemon writes): stats_json() of the period's jobs, or
 * stats_gpu_json() of its samples, or (idle) {"jobs": [...]}, the jobs that sat on their
 * GPUs (store_idle_job_json's objects, the running ones first, then the ended ones
 * latest first). NULL + *err on a database error. */
json_t *store_stats_read(const char *db_path, const struct store_stats_query *q, char **err);
/* One job of gstats --idle-gpus: {"id", "user", "name", "project", "state", "gpus",
 * "gpu_ids", "runtime_secs", "gpu_util_mean", "gpu_util_peak", "energy_wh"}. */
json_t *store_idle_job_json(const struct job *j, double now);

#endif
