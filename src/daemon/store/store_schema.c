/* store_schema: the store's tables and their migrations (store_migrate, at open).
 *
 * Tables (schema version in PRAGMA user_version, upgraded by store_migrate()):
 *   jobs         one column per field of struct job, except the payload.
 *   job_payload  script and env (JSON object text) by job id; for a sweep's job also its
 *                params (JSON object text) and the templates they fill
 *                (command_template, script_template, name_template). Kept out of jobs because
 *                a captured environment is 2-5 KB: inline, every jobs row fills a page
 *                of its own, and counting, sorting or scanning the history reads 10-20x
 *                more pages (measured 3-4x slower scans; bench/store_bench.c).
 *   envs         each distinct environment once (id, hash of the text, text): a payload
 *                row names its env by env_id (its env column is then NULL; rows written
 *                before schema 11 keep the text there). Jobs submitted from the same
 *                shell share one row instead of 2-5 KB each; pruning removes the rows no
 *                payload names any more.
 *   job_counts   jobs per state, so counts cost nothing at 100k jobs: kept by triggers on
 *                update and delete, and by store_commit for the jobs inserted.
 *   job_deps     dependencies (job_id, dep_id, kind), indexed by dep_id: which jobs
 *                depend on a given one. A job's own list is also in its depends_on
 *                column ("afterok:1,afterany:3"), so that reading jobs needs no join.
 *   settings     runtime controls that survive restarts.
 *   usage        fair-share accounts (kind 0 user, 1 project; name): decayed GPU-seconds
 *                of ended jobs as of `at`, and raw GPU-seconds (store_usage.c).
 *   reservations GPU reservations (gctl reserve), history included
 *                (policy/reservation_table.h).
 *   meta         next_job_id, so ids are never reused even if rows are deleted.
 *   gpu_samples  GPU utilisation as NVML reported it at each poll (gstats --gpu): a ring
 *                per GPU (gpu, slot), bounded by daemon.gpu_samples_max.
 *   notify_outbox notifications to deliver and their outcome (store_notify.c). */
#include "store_internal.h"

#include <sqlite3.h>
#include <stdio.h>

/* Schema migrations: migrations[v] upgrades user_version v to v + 1. Never edit a
 * released step; append one (ALTER TABLE jobs ADD COLUMN ..., then add the column to
 * `columns`). A step that needs code rather than SQL can get a function pointer here. */
static const char *const migrations[] = {
    /* 1: the initial schema. */
    "CREATE TABLE jobs ("
    " id INTEGER PRIMARY KEY,"
    " name TEXT,"
    " user TEXT,"
    " uid INTEGER NOT NULL DEFAULT 0,"
    " gid INTEGER NOT NULL DEFAULT 0,"
    " state INTEGER NOT NULL,"
    " priority INTEGER NOT NULL DEFAULT 10,"
    " time_limit INTEGER NOT NULL DEFAULT 0,"
    " command TEXT,"
    " script_path TEXT,"
    " workdir TEXT,"
    " submit_time REAL NOT NULL DEFAULT 0,"
    " start_time REAL NOT NULL DEFAULT 0,"
    " end_time REAL NOT NULL DEFAULT 0,"
    " exit_code INTEGER NOT NULL DEFAULT -1,"
    " signal INTEGER NOT NULL DEFAULT 0,"
    " oom INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT,"
    " end_request INTEGER NOT NULL DEFAULT 0,"
    " shim_pid INTEGER NOT NULL DEFAULT 0,"
    " shim_start INTEGER NOT NULL DEFAULT 0,"
    " max_rss_kb INTEGER NOT NULL DEFAULT 0,"
    " gpus INTEGER NOT NULL DEFAULT 0,"
    " gpu_ids TEXT,"
    " memory_mb INTEGER NOT NULL DEFAULT 0,"
    " gpu_memory_mb INTEGER NOT NULL DEFAULT 0,"
    " shared INTEGER NOT NULL DEFAULT 0,"
    " group_id INTEGER NOT NULL DEFAULT 0,"
    " array_task INTEGER NOT NULL DEFAULT -1,"
    " max_retries INTEGER NOT NULL DEFAULT 0,"
    " attempt INTEGER NOT NULL DEFAULT 1,"
    " retry_of INTEGER NOT NULL DEFAULT 0,"
    " gpus_per_task INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE TABLE job_payload ("
    " job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,"
    " script TEXT,"
    " env TEXT"
    ");"
    /* PD=0, H=1, R=2: the jobs the daemon works on, a small part of a long history.
     * Keyed on id so that they come out in id order without a sort. */
    "CREATE INDEX jobs_active ON jobs(id) WHERE state IN (0,1,2);"
    "CREATE INDEX jobs_user ON jobs(user, id);"
    "CREATE INDEX jobs_submit ON jobs(submit_time);"
    "CREATE TABLE job_deps ("
    " job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    " dep_id INTEGER NOT NULL REFERENCES jobs(id),"
    " kind TEXT NOT NULL,"
    " PRIMARY KEY (job_id, dep_id, kind)"
    ") WITHOUT ROWID;"
    "CREATE INDEX job_deps_dep ON job_deps(dep_id);"
    "CREATE TABLE job_counts (state INTEGER PRIMARY KEY, n INTEGER NOT NULL);"
    "CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN"
    " INSERT INTO job_counts(state, n) VALUES (new.state, 1)"
    "  ON CONFLICT(state) DO UPDATE SET n = n + 1;"
    " END;"
    "CREATE TRIGGER jobs_count_update AFTER UPDATE OF state ON jobs"
    " WHEN old.state IS NOT new.state BEGIN"
    " UPDATE job_counts SET n = n - 1 WHERE state = old.state;"
    " INSERT INTO job_counts(state, n) VALUES (new.state, 1)"
    "  ON CONFLICT(state) DO UPDATE SET n = n + 1;"
    " END;"
    "CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN"
    " UPDATE job_counts SET n = n - 1 WHERE state = old.state;"
    " END;"
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
    "INSERT INTO meta(key, value) VALUES ('next_job_id', 1);",
    /* 2: dependencies: the list (also in job_deps), its mode and auto-cancel. */
    "ALTER TABLE jobs ADD COLUMN depends_on TEXT;"
    "ALTER TABLE jobs ADD COLUMN depends_any INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN auto_cancel INTEGER NOT NULL DEFAULT 1;",
    /* 3: the conda environment a job activates, its --signal ("B:USR1@60") and its
     * --begin time (unix seconds, 0 = none). */
    "ALTER TABLE jobs ADD COLUMN conda_env TEXT;"
    "ALTER TABLE jobs ADD COLUMN signal_spec TEXT;"
    "ALTER TABLE jobs ADD COLUMN begin_time REAL NOT NULL DEFAULT 0;",
    /* 4: submission groups (arrays, sweeps, batches; jobs.group_id) and how many of each
     * group's jobs may run at once (0 = no limit). */
    "CREATE TABLE job_groups (id INTEGER PRIMARY KEY,"
    " max_concurrent INTEGER NOT NULL DEFAULT 0);",
    /* 5: a sweep's job keeps its parameter values (JSON object) and the unsubstituted
     * command, script and name templates, so that gjob update --param fills them again. */
    "ALTER TABLE job_payload ADD COLUMN params TEXT;"
    "ALTER TABLE job_payload ADD COLUMN command_template TEXT;"
    "ALTER TABLE job_payload ADD COLUMN script_template TEXT;"
    "ALTER TABLE job_payload ADD COLUMN name_template TEXT;",
    /* 6: a job's reason as a code (enum job_reason) and the job it names
     * (DependencyFailed); the reason column keeps only the free text (LaunchFailed's,
     * ShimLost's). Rows of earlier versions are converted from their text. */
    "ALTER TABLE jobs ADD COLUMN reason_code INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN reason_job INTEGER NOT NULL DEFAULT 0;"
    "UPDATE jobs SET reason_code = CASE"
    " WHEN reason IS NULL OR reason = '' THEN 0"
    " WHEN reason = 'CancelledByUser' THEN 1"
    " WHEN reason = 'TimeLimit' THEN 2"
    " WHEN reason = 'NonZeroExitCode' THEN 3"
    " WHEN reason = 'Signal' THEN 4"
    " WHEN reason = 'OutOfMemory' THEN 5"
    " WHEN reason = 'LaunchFailed' OR reason LIKE 'LaunchFailed: %' THEN 6"
    " WHEN reason = 'ShimLost' OR reason LIKE 'ShimLost: %' THEN 7"
    " WHEN reason GLOB 'DependencyFailed:[0-9]*' THEN 8"
    " WHEN reason = 'JobHeldUser' THEN 9"
    " ELSE 10 END;"
    "UPDATE jobs SET reason_job = CAST(substr(reason, 18) AS INTEGER) WHERE reason_code = 8;"
    "UPDATE jobs SET reason = NULLIF(substr(reason, 15), '') WHERE reason_code = 6;"
    "UPDATE jobs SET reason = NULLIF(substr(reason, 11), '') WHERE reason_code = 7;"
    "UPDATE jobs SET reason = NULL WHERE reason_code NOT IN (6, 7, 10);",
    /* 7: the umask a job runs with (the submitter's; -1: none given, 0077). */
    "ALTER TABLE jobs ADD COLUMN umask INTEGER NOT NULL DEFAULT -1;",
    /* 8: MIG requests (--mig PROFILE[:N]) and the instances (UUIDs) a running job holds. */
    "ALTER TABLE jobs ADD COLUMN mig_profile TEXT;"
    "ALTER TABLE jobs ADD COLUMN mig_count INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN mig_uuids TEXT;",
    /* 9: none. It was the index jobs_group, which made every array task's insert ~2.5x
     * dearer (100k array accepted 1.0 -> 2.8 s); history retention creates it on its
     * first round instead (store_prune), so only those who prune pay for it. */
    "DROP INDEX IF EXISTS jobs_group;",
    /* 10: a failed job's next attempt (gjob show), found without reading the history. */
    "CREATE INDEX IF NOT EXISTS jobs_retry ON jobs(retry_of) WHERE retry_of > 0;",
    /* 11: each distinct environment stored once (envs), named by job_payload.env_id. */
    "CREATE TABLE envs (id INTEGER PRIMARY KEY, hash INTEGER NOT NULL, text TEXT NOT NULL);"
    "CREATE INDEX envs_hash ON envs(hash);"
    "ALTER TABLE job_payload ADD COLUMN env_id INTEGER;"
    "CREATE INDEX job_payload_env ON job_payload(env_id) WHERE env_id IS NOT NULL;",
    /* 12: gflow's bookkeeping options (gbatch -P, --nice, --notify-email, --notify-on,
     * --auto-close): stored and shown, not acted on yet. */
    "ALTER TABLE jobs ADD COLUMN project TEXT;"
    "ALTER TABLE jobs ADD COLUMN nice INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN notify_email TEXT;"
    "ALTER TABLE jobs ADD COLUMN notify_on TEXT;"
    "ALTER TABLE jobs ADD COLUMN auto_close INTEGER NOT NULL DEFAULT 0;",
    /* 13: preemption (gbatch --requeue): whether a job may be preempted, how many times
     * it was requeued, and the job it was last stopped for. */
    "ALTER TABLE jobs ADD COLUMN requeue INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN requeue_count INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN preempted_by INTEGER NOT NULL DEFAULT 0;",
    /* 14 (quotas): ended GPU jobs by end time, so that start-up reads the GPU time of the
     * quota period (store_gpu_seconds_since) without scanning the history. Partial: a
     * queued job's insert only tests the condition. */
    "CREATE INDEX IF NOT EXISTS jobs_gpu_end ON jobs(end_time) WHERE state IN (3, 4, 5, 6) AND "
    "gpus > 0;",
    /* 15: fair-share usage per user and project (store_usage.c). */
    "CREATE TABLE usage (kind INTEGER NOT NULL, name TEXT NOT NULL, usage REAL NOT NULL,"
    " at REAL NOT NULL, raw REAL NOT NULL, PRIMARY KEY (kind, name)) WITHOUT ROWID;",
    /* 16: GPU reservations (gctl reserve; reservation_table.h), kept as history: gpus is
     * the mask of NVML indices, gpu_count the --gpus N asked for (0: --gpu-spec),
     * cancelled 0 or when. */
    "CREATE TABLE IF NOT EXISTS reservations (id INTEGER PRIMARY KEY, user TEXT NOT NULL,"
    " gpu_count INTEGER NOT NULL DEFAULT 0, gpus INTEGER NOT NULL, start REAL NOT NULL,"
    " end REAL NOT NULL, created REAL NOT NULL, cancelled REAL NOT NULL DEFAULT 0);",
    /* 17: gstats. Finished jobs by end time with every column the statistics read, so
     * that a period's jobs are one sequential read of the index, not a table lookup per
     * job (1M jobs: ~30 s of random reads without; bench/stats_bench.c). Partial: a job
     * enters it once, when it ends. And sampled GPU utilisation: a ring of at most
     * daemon.gpu_samples_max rows per GPU, slot = sample number modulo that. */
    "CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end_time, user, project, gpu_ids, state,"
    " submit_time, start_time, gpus, reason_code) WHERE state IN (3,4,5,6);"
    "CREATE TABLE IF NOT EXISTS gpu_samples (gpu INTEGER NOT NULL, slot INTEGER NOT NULL,"
    " time REAL NOT NULL, util INTEGER NOT NULL, PRIMARY KEY (gpu, slot)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS gpu_samples_time ON gpu_samples(time);",
    /* 18: the partial indexes' conditions as ranges (STORE_ACTIVE, STORE_ENDED). SQLite
     * tests an IN list of three or more values through a temporary b-tree it builds for
     * each evaluation, and every insert and state change evaluated three of them: a
     * third of a 100,000-task array's insert time. jobs_gpu_end goes: jobs_end covers
     * its query. */
    "DROP INDEX IF EXISTS jobs_gpu_end;"
    "DROP INDEX IF EXISTS jobs_active;"
    "CREATE INDEX jobs_active ON jobs(id) WHERE " STORE_ACTIVE ";"
    "DROP INDEX IF EXISTS jobs_end;"
    "CREATE INDEX jobs_end ON jobs(end_time, user, project, gpu_ids, state, submit_time,"
    " start_time, gpus, reason_code) WHERE " STORE_ENDED ";",
    /* 19: the notification outbox (store_notify.c): one row per destination, job and
     * event, written in the transaction that records the event, so that a notification
     * survives a crash (at-least-once). kind 0: webhook (dest is its URL, payload the
     * JSON without delivery id), 1: e-mail (dest the addresses, payload the message).
     * state 0 pending, 1 sent, 2 failed. Indexed for what the daemon asks: the pending
     * rows by due time and by user (the per-user cap), the done rows by age (pruning). */
    "CREATE TABLE IF NOT EXISTS notify_outbox (id INTEGER PRIMARY KEY,"
    " job_id INTEGER NOT NULL, event TEXT NOT NULL, kind INTEGER NOT NULL,"
    " dest TEXT NOT NULL, user TEXT, uid INTEGER NOT NULL DEFAULT 0,"
    " gid INTEGER NOT NULL DEFAULT 0, payload TEXT NOT NULL,"
    " attempts INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL,"
    " state INTEGER NOT NULL DEFAULT 0, last_error TEXT, created REAL NOT NULL,"
    " done_at REAL NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS notify_outbox_due ON notify_outbox(next_at) WHERE state = 0;"
    "CREATE INDEX IF NOT EXISTS notify_outbox_uid ON notify_outbox(uid) WHERE state = 0;"
    "CREATE INDEX IF NOT EXISTS notify_outbox_done ON notify_outbox(done_at) WHERE state != 0;",
    /* 20: gbatch --pty, the job runs on a terminal its shim serves to `gjob attach`. */
    "ALTER TABLE jobs ADD COLUMN pty INTEGER NOT NULL DEFAULT 0;",
    /* 21: the slurm backend (docs/slurm.md): the Slurm job id of a job handed to Slurm
     * (0: none, or not known yet) and, while Slurm has not started it, why (its pending
     * reason, shown as the PD job's REASON; NULL: none). */
    "ALTER TABLE jobs ADD COLUMN slurm_id INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN slurm_reason TEXT;",
    /* 22: store_commit adds a transaction's new jobs to job_counts, one statement per
     * state (store_save_counts), instead of a trigger once per row. A job inserted and
     * then changed or deleted in the same transaction is not in job_counts yet when the
     * other triggers take it off its state, so they count down with an upsert: the count
     * may be below zero until the commit adds the new jobs. */
    "DROP TRIGGER IF EXISTS jobs_count_insert;"
    "DROP TRIGGER IF EXISTS jobs_count_update;"
    "CREATE TRIGGER jobs_count_update AFTER UPDATE OF state ON jobs"
    " WHEN old.state IS NOT new.state BEGIN"
    " INSERT INTO job_counts(state, n) VALUES (old.state, -1)"
    "  ON CONFLICT(state) DO UPDATE SET n = n - 1;"
    " INSERT INTO job_counts(state, n) VALUES (new.state, 1)"
    "  ON CONFLICT(state) DO UPDATE SET n = n + 1;"
    " END;"
    "DROP TRIGGER IF EXISTS jobs_count_delete;"
    "CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN"
    " INSERT INTO job_counts(state, n) VALUES (old.state, -1)"
    "  ON CONFLICT(state) DO UPDATE SET n = n - 1;"
    " END;",
    /* 23: the bytes of a job's output its log could not take (its filesystem was full),
     * from the exit record. */
    "ALTER TABLE jobs ADD COLUMN log_lost_bytes INTEGER NOT NULL DEFAULT 0;",
    /* 24: a job's process seen on a GPU it was not given (daemon.stray), and what was
     * done about it. */
    "ALTER TABLE jobs ADD COLUMN stray TEXT;",
    /* 25: CPU pinning: --cpus-per-gpu, and the CPUs a job was pinned to. */
    "ALTER TABLE jobs ADD COLUMN cpus_per_gpu INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN cpus TEXT;"
    "ALTER TABLE jobs ADD COLUMN cpus_far INTEGER NOT NULL DEFAULT 0;",
    /* 26: what the slurm backend changed of what was asked (a limit rounded up to
     * Slurm's whole minutes). */
    "ALTER TABLE jobs ADD COLUMN slurm_note TEXT;",
    /* 27 (issue 30, GPU accounting): a job's GPU utilisation mean and peak, GPU memory
     * peak, energy and whether it sat on its GPUs; -1: unknown. */
    "ALTER TABLE jobs ADD COLUMN gpu_util_mean INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE jobs ADD COLUMN gpu_util_peak INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE jobs ADD COLUMN gpu_mem_peak_mb INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE jobs ADD COLUMN energy_wh REAL NOT NULL DEFAULT -1;"
    "ALTER TABLE jobs ADD COLUMN gpu_idle INTEGER NOT NULL DEFAULT -1;",
    /* 28: failure triage: a failed job's class from its log's tail, and the line that
     * showed it (core/triage.h). */
    "ALTER TABLE jobs ADD COLUMN failure_class TEXT;"
    "ALTER TABLE jobs ADD COLUMN failure_line TEXT;",
};
/* The codes migration 6 writes are enum job_reason's. */
_Static_assert(JOB_REASON_LAUNCH_FAILED == 6 && JOB_REASON_SHIM_LOST == 7 &&
                   JOB_REASON_DEPENDENCY_FAILED == 8 && JOB_REASON_HELD_BY_USER == 9 &&
                   JOB_REASON_OTHER == 10,
               "migration 6 maps reason texts to these codes");
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* Brings the schema to SCHEMA_VERSION, one step per transaction. */
int store_migrate(struct store *s)
{
    int64_t version = 0;
    if (store_query_int(s, "PRAGMA user_version", &version) < 0)
        return -1;
    if (version > SCHEMA_VERSION) {
        store_set_err(s, "database schema version %lld is newer than this gflowd supports (%d)",
                      (long long)version, SCHEMA_VERSION);
        return -1;
    }
    for (int v = (int)version; v < SCHEMA_VERSION; v++) {
        char context[64], bump[64];
        snprintf(context, sizeof(context), "migrating the schema to version %d", v + 1);
        snprintf(bump, sizeof(bump), "PRAGMA user_version=%d", v + 1);
        if (store_exec(s, "BEGIN IMMEDIATE", context) < 0)
            return -1;
        if (store_exec(s, migrations[v], context) < 0 || store_exec(s, bump, context) < 0 ||
            store_exec(s, "COMMIT", context) < 0) {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
    return 0;
}
