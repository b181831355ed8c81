/* store: the daemon's durable state in one SQLite database.
 *
 * Settings made at open: WAL journal, synchronous=NORMAL (a commit is durable against a
 * crash of the daemon, and against power loss up to the last checkpoint), automatic
 * checkpoints off (they stall a commit for 5-10 ms; the daemon calls store_checkpoint
 * when idle, and a WAL hook forces one only if the log grows past STORE_WAL_FORCE_PAGES
 * because the daemon never got idle), foreign keys on, a busy timeout.
 *
 * Tables (schema version in PRAGMA user_version, upgraded by migrate()):
 *   jobs         one column per field of struct job, except the payload.
 *   job_payload  script and env (JSON object text) by job id; for a sweep's job also its
 *                params (JSON object text) and the templates they fill
 *                (command_template, script_template, name_template). Kept out of jobs because
 *                a captured environment is 2-5 KB: inline, every jobs row fills a page
 *                of its own, and counting, sorting or scanning the history reads 10-20x
 *                more pages (measured 3-4x slower scans; bench/store_bench.c).
 *   job_counts   jobs per state, kept by triggers, so counts cost nothing at 100k jobs.
 *   job_deps     dependencies (job_id, dep_id, kind), indexed by dep_id: which jobs
 *                depend on a given one. A job's own list is also in its depends_on
 *                column ("afterok:1,afterany:3"), so that reading jobs needs no join.
 *   settings     runtime controls that survive restarts.
 *   meta         next_job_id, so ids are never reused even if rows are deleted.
 *
 * Every column is listed once in `columns` below, in table order, payload last; the
 * SQL of the hot statements (insert, update, get, load) is generated from that list
 * with numbered parameters ?N = column N, so the bind and read code cannot drift. */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "gpuinfo.h"
#include "parse.h"
#include "util.h"

#define STORE_BUSY_TIMEOUT_MS 5000
/* The WAL file is truncated back to this size when it is reset after a checkpoint. */
#define STORE_JOURNAL_SIZE_LIMIT (16 * 1024 * 1024)
/* Safety net: a daemon that is never idle still checkpoints once the log is this long
 * (10,000 pages of 4 KiB = ~40 MB). */
#ifndef STORE_WAL_FORCE_PAGES
#define STORE_WAL_FORCE_PAGES 10000
#endif

enum col {
    C_ID,
    C_NAME,
    C_USER,
    C_UID,
    C_GID,
    C_STATE,
    C_PRIORITY,
    C_TIME_LIMIT,
    C_COMMAND,
    C_SCRIPT_PATH,
    C_WORKDIR,
    C_SUBMIT_TIME,
    C_START_TIME,
    C_END_TIME,
    C_EXIT_CODE,
    C_SIGNAL,
    C_OOM,
    C_REASON,
    C_END_REQUEST,
    C_SHIM_PID,
    C_SHIM_START,
    C_MAX_RSS_KB,
    C_GPUS,
    C_GPU_IDS,
    C_MEMORY_MB,
    C_GPU_MEMORY_MB,
    C_SHARED,
    C_GROUP_ID,
    C_ARRAY_TASK,
    C_MAX_RETRIES,
    C_ATTEMPT,
    C_RETRY_OF,
    C_GPUS_PER_TASK,
    C_DEPENDS_ON,
    C_DEPENDS_ANY,
    C_AUTO_CANCEL,
    C_CONDA_ENV,
    C_SIGNAL_SPEC,
    C_BEGIN_TIME,
    C_REASON_CODE,
    C_REASON_JOB,
    C_LIGHT_COUNT, /* the columns read without payload are those before this one */
    C_SCRIPT = C_LIGHT_COUNT,
    C_ENV,
    C_PARAMS,
    C_COMMAND_TEMPLATE,
    C_SCRIPT_TEMPLATE,
    C_NAME_TEMPLATE,
    C_COUNT
};

/* mutable: written by store_update_job (the payload and the submitter's identity are
 * fixed at submission). */
static const struct {
    const char *name;
    bool mutable;
} columns[C_COUNT] = {
    [C_ID] = {"id", false},
    [C_NAME] = {"name", true},
    [C_USER] = {"user", false},
    [C_UID] = {"uid", false},
    [C_GID] = {"gid", false},
    [C_STATE] = {"state", true},
    [C_PRIORITY] = {"priority", true},
    [C_TIME_LIMIT] = {"time_limit", true},
    [C_COMMAND] = {"command", false},
    [C_SCRIPT_PATH] = {"script_path", false},
    [C_WORKDIR] = {"workdir", false},
    [C_SUBMIT_TIME] = {"submit_time", false},
    [C_START_TIME] = {"start_time", true},
    [C_END_TIME] = {"end_time", true},
    [C_EXIT_CODE] = {"exit_code", true},
    [C_SIGNAL] = {"signal", true},
    [C_OOM] = {"oom", true},
    [C_REASON] = {"reason", true}, /* the reason's detail (LaunchFailed: ...) */
    [C_END_REQUEST] = {"end_request", true},
    [C_SHIM_PID] = {"shim_pid", true},
    [C_SHIM_START] = {"shim_start", true},
    [C_MAX_RSS_KB] = {"max_rss_kb", true},
    [C_GPUS] = {"gpus", true},
    [C_GPU_IDS] = {"gpu_ids", true},
    [C_MEMORY_MB] = {"memory_mb", true},
    [C_GPU_MEMORY_MB] = {"gpu_memory_mb", true},
    [C_SHARED] = {"shared", true},
    [C_GROUP_ID] = {"group_id", true},
    [C_ARRAY_TASK] = {"array_task", true},
    [C_MAX_RETRIES] = {"max_retries", true},
    [C_ATTEMPT] = {"attempt", true},
    [C_RETRY_OF] = {"retry_of", true},
    [C_GPUS_PER_TASK] = {"gpus_per_task", true},
    [C_DEPENDS_ON] = {"depends_on", true},
    [C_DEPENDS_ANY] = {"depends_any", true},
    [C_AUTO_CANCEL] = {"auto_cancel", true},
    [C_CONDA_ENV] = {"conda_env", true},
    [C_SIGNAL_SPEC] = {"signal_spec", true},
    [C_BEGIN_TIME] = {"begin_time", true},
    [C_REASON_CODE] = {"reason_code", true},
    [C_REASON_JOB] = {"reason_job", true},
    [C_SCRIPT] = {"script", false},
    [C_ENV] = {"env", false},
    [C_PARAMS] = {"params", false},
    [C_COMMAND_TEMPLATE] = {"command_template", false},
    [C_SCRIPT_TEMPLATE] = {"script_template", false},
    [C_NAME_TEMPLATE] = {"name_template", false},
};

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
};
/* The codes migration 6 writes are enum job_reason's. */
_Static_assert(JOB_REASON_LAUNCH_FAILED == 6 && JOB_REASON_SHIM_LOST == 7 &&
                   JOB_REASON_DEPENDENCY_FAILED == 8 && JOB_REASON_HELD_BY_USER == 9 &&
                   JOB_REASON_OTHER == 10,
               "migration 6 maps reason texts to these codes");
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

struct store {
    sqlite3 *db;
    char err[512];
    int64_t next_id;
    /* A COMMIT failed and SQLite rolled the transaction back by itself (I/O error, disk
     * full): its changes are gone, but the caller has not acknowledged that yet. */
    bool lost;

    sqlite3_stmt *st_begin, *st_commit, *st_rollback;
    sqlite3_stmt *st_insert, *st_insert_payload, *st_update;
    sqlite3_stmt *st_get, *st_get_full;
    sqlite3_stmt *st_load_active;
    sqlite3_stmt *st_dep_insert, *st_dependents, *st_state;
    sqlite3_stmt *st_count;
    sqlite3_stmt *st_meta_next;
    sqlite3_stmt *st_setting_get, *st_setting_set, *st_setting_del;
};

static void set_err(struct store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(struct store *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
}

/* "context: sqlite's message" */
static int db_err(struct store *s, const char *context)
{
    set_err(s, "%s: %s", context, sqlite3_errmsg(s->db));
    return -1;
}

const char *store_error(struct store *s)
{
    return s->err;
}

static int exec(struct store *s, const char *sql, const char *context)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        set_err(s, "%s: %s", context, msg ? msg : sqlite3_errmsg(s->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int prepare(struct store *s, sqlite3_stmt **st, const char *sql)
{
    if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK) {
        set_err(s, "preparing \"%.200s\": %s", sql, sqlite3_errmsg(s->db));
        return -1;
    }
    return 0;
}

/* Resets a statement after use and drops its bindings, so no pointer into a caller's
 * job outlives the call. */
static void finish(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Steps a statement that returns no rows. */
static int step_done(struct store *s, sqlite3_stmt *st, const char *context)
{
    int rc = sqlite3_step(st);
    int ret = rc == SQLITE_DONE ? 0 : db_err(s, context);
    finish(st);
    return ret;
}

/* ---- binding and reading job rows ---- */

static int bind_text(sqlite3_stmt *st, int idx, const char *v)
{
    return v ? sqlite3_bind_text(st, idx, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, idx);
}

static int bind_column(sqlite3_stmt *st, enum col c, const struct job *j, const char *env)
{
    int i = (int)c + 1; /* ?N is column N-1 in every generated statement */
    switch (c) {
    case C_ID:
        return sqlite3_bind_int64(st, i, j->id);
    case C_NAME:
        return bind_text(st, i, j->name);
    case C_USER:
        return bind_text(st, i, j->user);
    case C_UID:
        return sqlite3_bind_int64(st, i, j->uid);
    case C_GID:
        return sqlite3_bind_int64(st, i, j->gid);
    case C_STATE:
        return sqlite3_bind_int(st, i, (int)j->state);
    case C_PRIORITY:
        return sqlite3_bind_int(st, i, j->priority);
    case C_TIME_LIMIT:
        return sqlite3_bind_int64(st, i, j->time_limit);
    case C_COMMAND:
        return bind_text(st, i, j->command);
    case C_SCRIPT_PATH:
        return bind_text(st, i, j->script_path);
    case C_WORKDIR:
        return bind_text(st, i, j->workdir);
    case C_SUBMIT_TIME:
        return sqlite3_bind_double(st, i, j->submit_time);
    case C_START_TIME:
        return sqlite3_bind_double(st, i, j->start_time);
    case C_END_TIME:
        return sqlite3_bind_double(st, i, j->end_time);
    case C_EXIT_CODE:
        return sqlite3_bind_int(st, i, j->exit_code);
    case C_SIGNAL:
        return sqlite3_bind_int(st, i, j->signal);
    case C_OOM:
        return sqlite3_bind_int(st, i, j->oom);
    case C_REASON:
        return bind_text(st, i, j->reason_detail);
    case C_REASON_CODE:
        return sqlite3_bind_int(st, i, (int)j->reason);
    case C_REASON_JOB:
        return sqlite3_bind_int64(st, i, j->reason_job);
    case C_END_REQUEST:
        return sqlite3_bind_int(st, i, (int)j->end_request);
    case C_SHIM_PID:
        return sqlite3_bind_int64(st, i, j->shim_pid);
    case C_SHIM_START:
        return sqlite3_bind_int64(st, i, j->shim_start);
    case C_MAX_RSS_KB:
        return sqlite3_bind_int64(st, i, j->max_rss_kb);
    case C_GPUS:
        return sqlite3_bind_int(st, i, j->gpus);
    case C_GPU_IDS:
        if (!j->gpu_mask)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i, gpu_mask_format(j->gpu_mask), -1, free);
    case C_MEMORY_MB:
        return sqlite3_bind_int64(st, i, j->memory_mb);
    case C_GPU_MEMORY_MB:
        return sqlite3_bind_int64(st, i, j->gpu_memory_mb);
    case C_SHARED:
        return sqlite3_bind_int(st, i, j->shared);
    case C_GROUP_ID:
        return sqlite3_bind_int64(st, i, j->group_id);
    case C_ARRAY_TASK:
        return sqlite3_bind_int64(st, i, j->array_task);
    case C_MAX_RETRIES:
        return sqlite3_bind_int(st, i, j->max_retries);
    case C_ATTEMPT:
        return sqlite3_bind_int(st, i, j->attempt);
    case C_RETRY_OF:
        return sqlite3_bind_int64(st, i, j->retry_of);
    case C_GPUS_PER_TASK:
        return sqlite3_bind_int(st, i, j->gpus_per_task);
    case C_DEPENDS_ON:
        if (!j->n_deps)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i, job_deps_format(j), -1, free);
    case C_DEPENDS_ANY:
        return sqlite3_bind_int(st, i, j->deps_any);
    case C_AUTO_CANCEL:
        return sqlite3_bind_int(st, i, j->auto_cancel);
    case C_CONDA_ENV:
        return bind_text(st, i, j->conda_env);
    case C_BEGIN_TIME:
        return sqlite3_bind_double(st, i, j->begin_time);
    case C_SIGNAL_SPEC:
        if (j->warn_signal <= 0)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i,
                                 format_signal_spec(j->warn_signal, j->warn_secs, j->warn_main_only),
                                 -1, free);
    case C_SCRIPT:
        return bind_text(st, i, j->script);
    case C_ENV:
        return bind_text(st, i, env);
    case C_PARAMS:
        if (!j->params)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i, json_dumps(j->params, JSON_COMPACT), -1, free);
    case C_COMMAND_TEMPLATE:
        return bind_text(st, i, j->command_template);
    case C_SCRIPT_TEMPLATE:
        return bind_text(st, i, j->script_template);
    case C_NAME_TEMPLATE:
        return bind_text(st, i, j->name_template);
    case C_COUNT:
        break;
    }
    return SQLITE_RANGE;
}

static char *col_str(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? xstrndup((const char *)t, (size_t)sqlite3_column_bytes(st, i)) : NULL;
}

/* Reads result column i (= table column c) into j. */
static void read_column(sqlite3_stmt *st, enum col c, struct job *j)
{
    int i = (int)c;
    switch (c) {
    case C_ID:
        j->id = sqlite3_column_int64(st, i);
        break;
    case C_NAME:
        j->name = col_str(st, i);
        break;
    case C_USER:
        j->user = col_str(st, i);
        break;
    case C_UID:
        j->uid = (uint32_t)sqlite3_column_int64(st, i);
        break;
    case C_GID:
        j->gid = (uint32_t)sqlite3_column_int64(st, i);
        break;
    case C_STATE:
        j->state = (enum job_state)sqlite3_column_int(st, i);
        break;
    case C_PRIORITY:
        j->priority = sqlite3_column_int(st, i);
        break;
    case C_TIME_LIMIT:
        j->time_limit = sqlite3_column_int64(st, i);
        break;
    case C_COMMAND:
        j->command = col_str(st, i);
        break;
    case C_SCRIPT_PATH:
        j->script_path = col_str(st, i);
        break;
    case C_WORKDIR:
        j->workdir = col_str(st, i);
        break;
    case C_SUBMIT_TIME:
        j->submit_time = sqlite3_column_double(st, i);
        break;
    case C_START_TIME:
        j->start_time = sqlite3_column_double(st, i);
        break;
    case C_END_TIME:
        j->end_time = sqlite3_column_double(st, i);
        break;
    case C_EXIT_CODE:
        j->exit_code = sqlite3_column_int(st, i);
        break;
    case C_SIGNAL:
        j->signal = sqlite3_column_int(st, i);
        break;
    case C_OOM:
        j->oom = sqlite3_column_int(st, i) != 0;
        break;
    case C_REASON:
        j->reason_detail = col_str(st, i);
        break;
    case C_REASON_CODE: {
        int r = sqlite3_column_int(st, i);
        j->reason = r > 0 && r < JOB_REASON_COUNT ? (enum job_reason)r : JOB_REASON_NONE;
        break;
    }
    case C_REASON_JOB:
        j->reason_job = sqlite3_column_int64(st, i);
        break;
    case C_END_REQUEST:
        j->end_request = (enum job_end_request)sqlite3_column_int(st, i);
        break;
    case C_SHIM_PID:
        j->shim_pid = sqlite3_column_int64(st, i);
        break;
    case C_SHIM_START:
        j->shim_start = sqlite3_column_int64(st, i);
        break;
    case C_MAX_RSS_KB:
        j->max_rss_kb = sqlite3_column_int64(st, i);
        break;
    case C_GPUS:
        j->gpus = sqlite3_column_int(st, i);
        break;
    case C_GPU_IDS:
        j->gpu_mask = gpu_mask_parse((const char *)sqlite3_column_text(st, i));
        break;
    case C_MEMORY_MB:
        j->memory_mb = sqlite3_column_int64(st, i);
        break;
    case C_GPU_MEMORY_MB:
        j->gpu_memory_mb = sqlite3_column_int64(st, i);
        break;
    case C_SHARED:
        j->shared = sqlite3_column_int(st, i) != 0;
        break;
    case C_GROUP_ID:
        j->group_id = sqlite3_column_int64(st, i);
        break;
    case C_ARRAY_TASK:
        j->array_task = sqlite3_column_int64(st, i);
        break;
    case C_MAX_RETRIES:
        j->max_retries = sqlite3_column_int(st, i);
        break;
    case C_ATTEMPT:
        j->attempt = sqlite3_column_int(st, i);
        break;
    case C_RETRY_OF:
        j->retry_of = sqlite3_column_int64(st, i);
        break;
    case C_GPUS_PER_TASK:
        j->gpus_per_task = sqlite3_column_int(st, i);
        break;
    case C_DEPENDS_ON:
        job_deps_parse(j, (const char *)sqlite3_column_text(st, i));
        break;
    case C_DEPENDS_ANY:
        j->deps_any = sqlite3_column_int(st, i) != 0;
        break;
    case C_AUTO_CANCEL:
        j->auto_cancel = sqlite3_column_int(st, i) != 0;
        break;
    case C_CONDA_ENV:
        j->conda_env = col_str(st, i);
        break;
    case C_SIGNAL_SPEC:
        job_set_signal_spec(j, (const char *)sqlite3_column_text(st, i));
        break;
    case C_BEGIN_TIME:
        j->begin_time = sqlite3_column_double(st, i);
        break;
    case C_SCRIPT:
        j->script = col_str(st, i);
        break;
    case C_ENV:
    case C_PARAMS:
        break; /* parsed by read_job */
    case C_COMMAND_TEMPLATE:
        j->command_template = col_str(st, i);
        break;
    case C_SCRIPT_TEMPLATE:
        j->script_template = col_str(st, i);
        break;
    case C_NAME_TEMPLATE:
        j->name_template = col_str(st, i);
        break;
    case C_COUNT:
        break;
    }
}

/* Fills j (initialised here) from the current row of a statement that selects
 * columns 0..C_LIGHT_COUNT-1, or every column with payload. */
static int read_job(struct store *s, sqlite3_stmt *st, struct job *j, bool payload)
{
    job_init(j);
    int n = payload ? C_COUNT : C_LIGHT_COUNT;
    for (int c = 0; c < n; c++)
        read_column(st, (enum col)c, j);
    if (payload) {
        const char *env = (const char *)sqlite3_column_text(st, C_ENV);
        if (env) {
            json_error_t jerr;
            j->env = json_loads(env, JSON_REJECT_DUPLICATES, &jerr);
            if (!json_is_object(j->env)) {
                set_err(s, "job %lld: stored env is not a JSON object: %s", (long long)j->id,
                        jerr.text);
                job_clear(j);
                return -1;
            }
        }
        const char *params = (const char *)sqlite3_column_text(st, C_PARAMS);
        if (params) {
            json_error_t jerr;
            j->params = json_loads(params, JSON_REJECT_DUPLICATES, &jerr);
            if (!json_is_object(j->params)) {
                set_err(s, "job %lld: stored params are not a JSON object: %s",
                        (long long)j->id, jerr.text);
                job_clear(j);
                return -1;
            }
        }
    }
    return 0;
}

/* "id,name,...": the first n columns. */
static void add_column_list(struct strbuf *sb, int n)
{
    for (int c = 0; c < n; c++) {
        if (c)
            strbuf_addc(sb, ',');
        strbuf_adds(sb, columns[c].name);
    }
}

static int prepare_sb(struct store *s, sqlite3_stmt **st, struct strbuf *sb)
{
    int rc = prepare(s, st, sb->buf);
    strbuf_reset(sb);
    return rc;
}

static int prepare_statements(struct store *s)
{
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = 0;

    strbuf_adds(&sb, "INSERT INTO jobs(");
    add_column_list(&sb, C_LIGHT_COUNT);
    strbuf_adds(&sb, ") VALUES (");
    for (int c = 0; c < C_LIGHT_COUNT; c++)
        strbuf_addf(&sb, "%s?%d", c ? "," : "", c + 1);
    strbuf_adds(&sb, ")");
    rc |= prepare_sb(s, &s->st_insert, &sb);

    /* OR REPLACE: a payload row left by a job deleted with foreign keys off must not
     * block the new job. */
    strbuf_addf(&sb, "INSERT OR REPLACE INTO job_payload(job_id");
    for (int c = C_LIGHT_COUNT; c < C_COUNT; c++)
        strbuf_addf(&sb, ",%s", columns[c].name);
    strbuf_addf(&sb, ") VALUES (?%d", C_ID + 1);
    for (int c = C_LIGHT_COUNT; c < C_COUNT; c++)
        strbuf_addf(&sb, ",?%d", c + 1);
    strbuf_adds(&sb, ")");
    rc |= prepare_sb(s, &s->st_insert_payload, &sb);

    strbuf_adds(&sb, "UPDATE jobs SET ");
    bool first = true;
    for (int c = 0; c < C_COUNT; c++) {
        if (!columns[c].mutable)
            continue;
        strbuf_addf(&sb, "%s%s=?%d", first ? "" : ",", columns[c].name, c + 1);
        first = false;
    }
    strbuf_addf(&sb, " WHERE id=?%d", C_ID + 1);
    rc |= prepare_sb(s, &s->st_update, &sb);

    strbuf_adds(&sb, "SELECT ");
    add_column_list(&sb, C_LIGHT_COUNT);
    strbuf_adds(&sb, " FROM jobs WHERE id=?1");
    rc |= prepare_sb(s, &s->st_get, &sb);

    strbuf_adds(&sb, "SELECT ");
    add_column_list(&sb, C_COUNT);
    strbuf_adds(&sb, " FROM jobs LEFT JOIN job_payload ON job_id=id WHERE id=?1");
    rc |= prepare_sb(s, &s->st_get_full, &sb);

    strbuf_adds(&sb, "SELECT ");
    add_column_list(&sb, C_LIGHT_COUNT);
    strbuf_adds(&sb, " FROM jobs WHERE state IN (0,1,2) ORDER BY id");
    rc |= prepare_sb(s, &s->st_load_active, &sb);
    strbuf_free(&sb);

    rc |= prepare(s, &s->st_begin, "BEGIN IMMEDIATE");
    rc |= prepare(s, &s->st_commit, "COMMIT");
    rc |= prepare(s, &s->st_rollback, "ROLLBACK");
    rc |= prepare(s, &s->st_count, "SELECT state, n FROM job_counts");
    rc |= prepare(s, &s->st_dep_insert,
                  "INSERT OR IGNORE INTO job_deps(job_id, dep_id, kind) VALUES (?1, ?2, ?3)");
    rc |= prepare(s, &s->st_dependents,
                  "SELECT DISTINCT job_id FROM job_deps WHERE dep_id=?1 ORDER BY job_id");
    rc |= prepare(s, &s->st_state, "SELECT state FROM jobs WHERE id=?1");
    rc |= prepare(s, &s->st_meta_next,
                  "UPDATE meta SET value=?1 WHERE key='next_job_id' AND value<?1");
    rc |= prepare(s, &s->st_setting_get, "SELECT value FROM settings WHERE key=?1");
    rc |= prepare(s, &s->st_setting_set,
                  "INSERT INTO settings(key, value) VALUES (?1, ?2)"
                  " ON CONFLICT(key) DO UPDATE SET value=excluded.value");
    rc |= prepare(s, &s->st_setting_del, "DELETE FROM settings WHERE key=?1");
    return rc ? -1 : 0;
}

/* ---- opening ---- */

static int query_int(struct store *s, const char *sql, int64_t *out)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_err(s, sql);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_DONE)
        db_err(s, sql);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

/* Brings the schema to SCHEMA_VERSION, one step per transaction. */
static int migrate(struct store *s)
{
    int64_t version = 0;
    if (query_int(s, "PRAGMA user_version", &version) < 0)
        return -1;
    if (version > SCHEMA_VERSION) {
        set_err(s, "database schema version %lld is newer than this gflowd supports (%d)",
                (long long)version, SCHEMA_VERSION);
        return -1;
    }
    for (int v = (int)version; v < SCHEMA_VERSION; v++) {
        char context[64], bump[64];
        snprintf(context, sizeof(context), "migrating the schema to version %d", v + 1);
        snprintf(bump, sizeof(bump), "PRAGMA user_version=%d", v + 1);
        if (exec(s, "BEGIN IMMEDIATE", context) < 0)
            return -1;
        if (exec(s, migrations[v], context) < 0 || exec(s, bump, context) < 0 ||
            exec(s, "COMMIT", context) < 0) {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
    return 0;
}

static int wal_hook_cb(void *arg, sqlite3 *db, const char *name, int pages)
{
    (void)arg;
    if (pages >= STORE_WAL_FORCE_PAGES)
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

static int configure(struct store *s)
{
    char *mode = NULL;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK)
        return db_err(s, "setting journal_mode=WAL");
    if (sqlite3_step(st) == SQLITE_ROW)
        mode = col_str(st, 0);
    else
        db_err(s, "setting journal_mode=WAL");
    sqlite3_finalize(st);
    if (!mode)
        return -1;
    bool wal = strcmp(mode, "wal") == 0;
    if (!wal)
        set_err(s,
                "the database cannot use WAL mode (journal_mode is '%s'); "
                "is it on a network filesystem?",
                mode);
    free(mode);
    if (!wal)
        return -1;

    char sql[256];
    snprintf(sql, sizeof(sql),
             "PRAGMA synchronous=NORMAL;"
             "PRAGMA wal_autocheckpoint=0;"
             "PRAGMA foreign_keys=ON;"
             "PRAGMA journal_size_limit=%d;",
             STORE_JOURNAL_SIZE_LIMIT);
    if (exec(s, sql, "configuring the database") < 0)
        return -1;
    /* After wal_autocheckpoint=0, which removed SQLite's own hook. */
    sqlite3_wal_hook(s->db, wal_hook_cb, NULL);
    return 0;
}

static int load_next_id(struct store *s)
{
    int64_t meta = 1, max_id = 0;
    if (query_int(s, "SELECT value FROM meta WHERE key='next_job_id'", &meta) < 0 ||
        query_int(s, "SELECT coalesce(max(id), 0) FROM jobs", &max_id) < 0)
        return -1;
    s->next_id = meta > max_id ? meta : max_id + 1;
    if (s->next_id < 1)
        s->next_id = 1;
    return 0;
}

struct store *store_open(const char *path, char **err)
{
    /* Create the file ourselves so it is 0600 whatever the umask; SQLite gives the
     * -wal and -shm files the database file's mode. */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        *err = xasprintf("cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    close(fd);

    struct store *s = xcalloc(1, sizeof(*s));
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &s->db, flags, NULL) != SQLITE_OK) {
        *err = xasprintf("cannot open database %s: %s", path,
                         s->db ? sqlite3_errmsg(s->db) : "out of memory");
        store_close(s);
        return NULL;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);

    if (configure(s) < 0 || migrate(s) < 0 || prepare_statements(s) < 0 || load_next_id(s) < 0) {
        *err = xasprintf("database %s: %s", path, s->err);
        store_close(s);
        return NULL;
    }
    return s;
}

void store_close(struct store *s)
{
    if (!s)
        return;
    sqlite3_stmt *all[] = {
        s->st_begin,          s->st_commit,      s->st_rollback,  s->st_insert,
        s->st_insert_payload, s->st_update,      s->st_get,       s->st_get_full,
        s->st_load_active,    s->st_count,       s->st_meta_next, s->st_setting_get,
        s->st_setting_set,    s->st_setting_del,  s->st_dep_insert, s->st_dependents,
        s->st_state,
    };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        sqlite3_finalize(all[i]);
    if (s->db) {
        if (!sqlite3_get_autocommit(s->db))
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(s->db); /* the last connection checkpoints and removes the WAL */
    }
    free(s);
}

/* ---- transactions ---- */

/* A failed commit whose transaction SQLite rolled back stays "open" for the caller until
 * it calls store_rollback: until then every change and commit fails, so that no reply
 * can claim the lost changes were saved (the daemon retries a failed commit). */
bool store_in_transaction(const struct store *s)
{
    return s->lost || !sqlite3_get_autocommit(s->db);
}

bool store_transaction_lost(const struct store *s)
{
    return s->lost;
}

static int refuse_if_lost(struct store *s)
{
    if (!s->lost)
        return 0;
    set_err(s, "a failed commit lost the open transaction; roll it back first");
    return -1;
}

int store_begin(struct store *s)
{
    if (refuse_if_lost(s) < 0)
        return -1;
    if (!sqlite3_get_autocommit(s->db))
        return 0;
    return step_done(s, s->st_begin, "beginning a transaction");
}

int store_commit(struct store *s)
{
    if (refuse_if_lost(s) < 0)
        return -1;
    if (sqlite3_get_autocommit(s->db))
        return 0;
    if (step_done(s, s->st_commit, "committing") == 0)
        return 0;
    /* Still open (SQLITE_BUSY, say): the caller may retry the commit or roll back. Rolled
     * back by SQLite (I/O error, disk full): say so until the caller acknowledges. */
    if (sqlite3_get_autocommit(s->db)) {
        s->lost = true;
        size_t len = strlen(s->err);
        snprintf(s->err + len, sizeof(s->err) - len, " (the transaction was rolled back)");
    }
    return -1;
}

void store_rollback(struct store *s)
{
    s->lost = false;
    if (sqlite3_get_autocommit(s->db))
        return;
    if (step_done(s, s->st_rollback, "rolling back") < 0)
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    /* next_id stays where it is: an id handed out in the rolled-back transaction is
     * skipped rather than reused, which is harmless and safer for the caller's memory. */
}

int store_checkpoint(struct store *s)
{
    if (!sqlite3_get_autocommit(s->db))
        return 0; /* the daemon is not idle after all; try at the next idle moment */
    int rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        return db_err(s, "checkpointing");
    return 0;
}

/* ---- jobs ---- */

int64_t store_next_job_id(struct store *s)
{
    return s->next_id;
}

/* Binds columns [from, to) of j and runs st. */
static int insert_columns(struct store *s, sqlite3_stmt *st, const struct job *j, const char *env,
                          int from, int to)
{
    int rc = sqlite3_bind_int64(st, C_ID + 1, j->id);
    for (int c = from; c < to && rc == SQLITE_OK; c++)
        rc = bind_column(st, (enum col)c, j, env);
    if (rc != SQLITE_OK) {
        finish(st);
        return db_err(s, "binding a new job");
    }
    char context[64];
    snprintf(context, sizeof(context), "inserting job %lld", (long long)j->id);
    return step_done(s, st, context);
}

static int insert_row(struct store *s, const struct job *j)
{
    if (insert_columns(s, s->st_insert, j, NULL, 0, C_LIGHT_COUNT) < 0)
        return -1;
    if (j->script || j->env || j->params) {
        char *env = j->env ? json_dumps(j->env, JSON_COMPACT) : NULL;
        int ret = insert_columns(s, s->st_insert_payload, j, env, C_LIGHT_COUNT, C_COUNT);
        free(env);
        if (ret < 0)
            return -1;
    }
    for (size_t i = 0; i < j->n_deps; i++) {
        sqlite3_bind_int64(s->st_dep_insert, 1, j->id);
        sqlite3_bind_int64(s->st_dep_insert, 2, j->deps[i].id);
        sqlite3_bind_text(s->st_dep_insert, 3, job_dep_kind_name(j->deps[i].kind), -1,
                          SQLITE_STATIC);
        if (step_done(s, s->st_dep_insert, "recording a dependency") < 0)
            return -1;
    }
    if (j->id < s->next_id)
        return 0;

    sqlite3_bind_int64(s->st_meta_next, 1, j->id + 1);
    if (step_done(s, s->st_meta_next, "recording the next job id") < 0)
        return -1;
    s->next_id = j->id + 1;
    return 0;
}

/* Whether two payload texts are the same (both absent counts as the same). */
static bool same_text(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* j as it is written beside its group's leader: the parts of the payload that are the
 * leader's are left out, and read_group_payload reads them from the leader. Tasks of an
 * array or a sweep share the leader's environment object (so a pointer comparison
 * decides, not a comparison of kilobytes of JSON per task). */
static struct job payload_beside(const struct job *j, const struct job *leader)
{
    struct job view = *j; /* shallow: only fields are cleared, nothing freed */
    if (leader->env && j->env == leader->env)
        view.env = NULL;
    if (j->script && same_text(j->script, leader->script))
        view.script = NULL;
    if (same_text(j->script_template, leader->script_template))
        view.script_template = NULL;
    if (same_text(j->command_template, leader->command_template))
        view.command_template = NULL;
    return view;
}

int store_insert_job(struct store *s, const struct job *j, const struct job *leader)
{
    struct job view;
    if (leader && j->group_id == leader->id && j->id != leader->id) {
        view = payload_beside(j, leader);
        j = &view;
    }
    if (j->id <= 0) {
        set_err(s, "inserting a job: invalid id %lld", (long long)j->id);
        return -1;
    }
    if (refuse_if_lost(s) < 0)
        return -1;
    /* The rows and next_job_id change together. */
    bool own = !store_in_transaction(s);
    if (own && store_begin(s) < 0)
        return -1;
    int ret = insert_row(s, j);
    if (own) {
        if (ret == 0)
            ret = store_commit(s);
        else
            store_rollback(s);
    }
    return ret;
}

int store_update_job(struct store *s, const struct job *j)
{
    if (refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st = s->st_update;
    int rc = SQLITE_OK;
    for (int c = 0; c < C_COUNT && rc == SQLITE_OK; c++) {
        if (c == C_ID || columns[c].mutable)
            rc = bind_column(st, (enum col)c, j, NULL);
    }
    if (rc != SQLITE_OK) {
        finish(st);
        return db_err(s, "binding a job update");
    }
    char context[64];
    snprintf(context, sizeof(context), "updating job %lld", (long long)j->id);
    if (step_done(s, st, context) < 0)
        return -1;
    if (sqlite3_changes(s->db) == 0) {
        set_err(s, "updating job %lld: no such job", (long long)j->id);
        return -1;
    }
    return 0;
}

/* The tasks of an array or a sweep usually share the first job's environment (and script):
 * it is stored once, with that job (the group's id), and read from there. */
static int read_group_payload(struct store *s, struct job *j)
{
    struct job leader;
    int rc = store_get_job(s, j->group_id, &leader, true);
    if (rc != 0) {
        if (rc > 0)
            set_err(s, "job %lld: the payload of its group %lld is missing", (long long)j->id,
                    (long long)j->group_id);
        return -1;
    }
    if (!j->env)
        j->env = json_incref(leader.env);
    if (!j->script && !j->command && leader.script)
        j->script = xstrdup(leader.script);
    if (j->params && !j->script_template && !j->command_template && leader.script_template)
        j->script_template = xstrdup(leader.script_template);
    if (j->params && j->command && !j->command_template && leader.command_template)
        j->command_template = xstrdup(leader.command_template);
    job_clear(&leader);
    return 0;
}

int store_get_job(struct store *s, int64_t id, struct job *out, bool with_payload)
{
    sqlite3_stmt *st = with_payload ? s->st_get_full : s->st_get;
    job_init(out);
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int ret;
    if (rc == SQLITE_ROW)
        ret = read_job(s, st, out, with_payload);
    else if (rc == SQLITE_DONE)
        ret = 1;
    else
        ret = db_err(s, "reading a job");
    finish(st);
    if (ret == 0 && with_payload && out->group_id && out->group_id != out->id &&
        (!out->env || (!out->script && !out->command) ||
         (out->params && !out->script_template && !out->command_template)) &&
        read_group_payload(s, out) < 0) {
        job_clear(out);
        return -1;
    }
    return ret;
}

int store_job_state(struct store *s, int64_t id, enum job_state *out)
{
    sqlite3_stmt *st = s->st_state;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW)
        *out = (enum job_state)sqlite3_column_int(st, 0);
    else if (rc == SQLITE_DONE)
        ret = 1;
    else
        ret = db_err(s, "reading a job's state");
    finish(st);
    return ret;
}

int store_dependents(struct store *s, int64_t id, int64_t **ids, size_t *n)
{
    sqlite3_stmt *st = s->st_dependents;
    size_t cap = 0;
    *ids = NULL;
    *n = 0;
    sqlite3_bind_int64(st, 1, id);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            *ids = xrealloc(*ids, cap * sizeof(**ids));
        }
        (*ids)[(*n)++] = sqlite3_column_int64(st, 0);
    }
    int ret = rc == SQLITE_DONE ? 0 : db_err(s, "reading dependents");
    finish(st);
    return ret;
}

/* Collects the rows of st (light columns) into a growing array. */
struct job_vec {
    struct job **v;
    size_t n, cap;
};

static void job_vec_push(struct job_vec *jv, struct job *j)
{
    if (jv->n == jv->cap) {
        jv->cap = jv->cap ? jv->cap * 2 : 64;
        jv->v = xrealloc(jv->v, jv->cap * sizeof(*jv->v));
    }
    jv->v[jv->n++] = j;
}

static void job_vec_free(struct job_vec *jv)
{
    for (size_t i = 0; i < jv->n; i++)
        job_free(jv->v[i]);
    free(jv->v);
}

int store_load_active(struct store *s, store_job_cb cb, void *arg)
{
    /* Read everything first, then call back: at start-up the callback re-adopts jobs and
     * may well update them, which must not happen under a running SELECT. */
    struct job_vec jv = {0};
    sqlite3_stmt *st = s->st_load_active;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct job *j = xmalloc(sizeof(*j));
        read_job(s, st, j, false);
        job_vec_push(&jv, j);
    }
    if (rc != SQLITE_DONE) {
        db_err(s, "loading the active jobs");
        finish(st);
        job_vec_free(&jv);
        return -1;
    }
    finish(st);
    for (size_t i = 0; i < jv.n; i++)
        cb(jv.v[i], arg);
    free(jv.v);
    return 0;
}

/* The SQL of each sort key of job.h (a fixed list: nothing a caller sends is ever
 * pasted into SQL); NULL: the id alone. "?" in time's expression is the current time. */
static const char *const sort_sql[JOB_SORT_COUNT] = {
    [JOB_SORT_ID] = NULL,
    [JOB_SORT_NAME] = "name",
    [JOB_SORT_STATE] = "state",
    [JOB_SORT_PRIORITY] = "priority",
    [JOB_SORT_USER] = "user",
    [JOB_SORT_SUBMIT] = "submit_time",
    [JOB_SORT_START] = "start_time",
    [JOB_SORT_END] = "end_time",
    [JOB_SORT_TIME] = "CASE WHEN start_time > 0 THEN (CASE WHEN end_time > 0 THEN end_time"
                      " ELSE ? END) - start_time ELSE 0 END",
};

/* Builds the listing query for q; *now_param tells whether the sort expression takes the
 * current time. Returns -1 with the error set for a bad query. */
static int build_list_sql(struct store *s, const struct store_query *q, bool reverse,
                          struct strbuf *sb, bool *now_param)
{
    if ((unsigned)q->sort >= JOB_SORT_COUNT) {
        set_err(s, "listing jobs: invalid sort key %d", (int)q->sort);
        return -1;
    }
    const char *expr = sort_sql[q->sort];
    *now_param = expr && strchr(expr, '?') != NULL;

    strbuf_adds(sb, "SELECT ");
    add_column_list(sb, C_LIGHT_COUNT);
    strbuf_adds(sb, " FROM jobs");
    const char *glue = " WHERE ";
    if (q->states && q->n_states) {
        bool all_active = true;
        strbuf_addf(sb, "%sstate IN (", glue);
        for (size_t i = 0; i < q->n_states; i++) {
            if ((unsigned)q->states[i] >= JOB_STATE_COUNT) {
                set_err(s, "listing jobs: invalid state %d", (int)q->states[i]);
                return -1;
            }
            all_active = all_active && job_state_is_active(q->states[i]);
            strbuf_adds(sb, i ? ",?" : "?");
        }
        strbuf_adds(sb, ")");
        /* A constant copy of the partial index's condition, so the planner may use it
         * (it cannot know what the parameters will hold). */
        if (all_active)
            strbuf_adds(sb, " AND state IN (0,1,2)");
        glue = " AND ";
    }
    if (q->ids && q->n_ids) {
        /* One parameter whatever the number of ids: a JSON array. */
        strbuf_addf(sb, "%sid IN (SELECT value FROM json_each(?))", glue);
        glue = " AND ";
    }
    if (q->user) {
        strbuf_addf(sb, "%suser = ?", glue);
        glue = " AND ";
    }
    if (q->since > 0) {
        strbuf_addf(sb, "%ssubmit_time >= ?", glue);
        glue = " AND ";
    }
    /* Ties are broken by id in the same direction, so descending is exactly ascending
     * reversed. */
    const char *dir = q->descending != reverse ? " DESC" : "";
    strbuf_adds(sb, " ORDER BY ");
    if (expr)
        strbuf_addf(sb, "%s%s, ", expr, dir);
    strbuf_addf(sb, "id%s", dir);
    if (q->limit != 0)
        strbuf_adds(sb, " LIMIT ?");
    return 0;
}

int store_list(struct store *s, const struct store_query *q, store_job_cb cb, void *arg)
{
    static const struct store_query everything;
    if (!q)
        q = &everything;
    /* limit < 0 (the last N): read the first N in the opposite order, call back reversed. */
    bool reverse = q->limit < 0;
    int64_t limit = q->limit == INT64_MIN ? INT64_MAX : (q->limit < 0 ? -q->limit : q->limit);
    struct strbuf sb;
    strbuf_init(&sb);
    bool now_param = false;
    if (build_list_sql(s, q, reverse, &sb, &now_param) < 0) {
        strbuf_free(&sb);
        return -1;
    }
    sqlite3_stmt *st;
    /* Per call: SQLite caches nothing across prepares, but preparing is ~20 us. */
    if (sqlite3_prepare_v2(s->db, sb.buf, -1, &st, NULL) != SQLITE_OK) {
        db_err(s, "preparing the job listing");
        strbuf_free(&sb);
        return -1;
    }

    int p = 1, rc = SQLITE_OK;
    if (q->states && q->n_states) {
        for (size_t i = 0; i < q->n_states && rc == SQLITE_OK; i++)
            rc = sqlite3_bind_int(st, p++, (int)q->states[i]);
    }
    if (q->ids && q->n_ids && rc == SQLITE_OK) {
        strbuf_reset(&sb);
        strbuf_addc(&sb, '[');
        for (size_t i = 0; i < q->n_ids; i++)
            strbuf_addf(&sb, "%s%lld", i ? "," : "", (long long)q->ids[i]);
        strbuf_addc(&sb, ']');
        rc = sqlite3_bind_text(st, p++, sb.buf, (int)sb.len, SQLITE_STATIC);
    }
    if (q->user && rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, p++, q->user, -1, SQLITE_STATIC);
    if (q->since > 0 && rc == SQLITE_OK)
        rc = sqlite3_bind_double(st, p++, q->since);
    if (now_param && rc == SQLITE_OK)
        rc = sqlite3_bind_double(st, p++, now_wall());
    if (q->limit != 0 && rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, p++, limit);
    if (rc != SQLITE_OK) {
        db_err(s, "binding the job listing");
        sqlite3_finalize(st);
        strbuf_free(&sb);
        return -1;
    }

    /* Rows go to the callback as they are read; the statement is this call's own, so a
     * callback that calls into the store does no harm (but should not change jobs). */
    struct job_vec jv = {0};
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct job *j = xmalloc(sizeof(*j));
        read_job(s, st, j, false);
        if (reverse)
            job_vec_push(&jv, j);
        else
            cb(j, arg);
    }
    int ret = 0;
    if (rc != SQLITE_DONE) {
        ret = db_err(s, "listing jobs");
        job_vec_free(&jv);
    } else {
        for (size_t i = jv.n; i-- > 0;)
            cb(jv.v[i], arg);
        free(jv.v);
    }
    sqlite3_finalize(st);
    strbuf_free(&sb);
    return ret;
}

int store_count_states(struct store *s, int64_t counts[JOB_STATE_COUNT])
{
    for (int i = 0; i < JOB_STATE_COUNT; i++)
        counts[i] = 0;
    sqlite3_stmt *st = s->st_count;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int state = sqlite3_column_int(st, 0);
        if (state >= 0 && state < JOB_STATE_COUNT)
            counts[state] = sqlite3_column_int64(st, 1);
    }
    int ret = rc == SQLITE_DONE ? 0 : db_err(s, "counting jobs");
    finish(st);
    return ret;
}

/* ---- settings ---- */

int store_get_setting(struct store *s, const char *key, char **value)
{
    *value = NULL;
    sqlite3_stmt *st = s->st_setting_get;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    int ret;
    if (rc == SQLITE_ROW) {
        *value = col_str(st, 0);
        ret = *value ? 0 : 1;
    } else if (rc == SQLITE_DONE) {
        ret = 1;
    } else {
        ret = db_err(s, "reading a setting");
    }
    finish(st);
    return ret;
}

/* A NULL value removes the key. */
int store_set_setting(struct store *s, const char *key, const char *value)
{
    if (refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st = value ? s->st_setting_set : s->st_setting_del;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (value)
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    return step_done(s, st, "writing a setting");
}

/* ---- changes of a queued job (gjob update) and retry lineage ---- */

/* Runs one ad-hoc statement (rare operations: not worth a prepared statement). */
static int adhoc(struct store *s, sqlite3_stmt **st, const char *sql)
{
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return db_err(s, "preparing a statement");
    return 0;
}

int store_replace_deps(struct store *s, const struct job *j)
{
    if (refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (adhoc(s, &st, "DELETE FROM job_deps WHERE job_id=?1") < 0)
        return -1;
    sqlite3_bind_int64(st, 1, j->id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_err(s, "replacing dependencies");
    for (size_t i = 0; i < j->n_deps; i++) {
        sqlite3_bind_int64(s->st_dep_insert, 1, j->id);
        sqlite3_bind_int64(s->st_dep_insert, 2, j->deps[i].id);
        sqlite3_bind_text(s->st_dep_insert, 3, job_dep_kind_name(j->deps[i].kind), -1,
                          SQLITE_STATIC);
        if (step_done(s, s->st_dep_insert, "recording a dependency") < 0)
            return -1;
    }
    return store_update_job(s, j);
}

int store_update_what(struct store *s, const struct job *j, bool payload)
{
    if (refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (adhoc(s, &st, "UPDATE jobs SET command=?2, script_path=?3, workdir=?4 WHERE id=?1") < 0)
        return -1;
    sqlite3_bind_int64(st, 1, j->id);
    bind_text(st, 2, j->command);
    bind_text(st, 3, j->script_path);
    bind_text(st, 4, j->workdir);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_err(s, "updating a job's command");
    if (!payload)
        return 0;
    /* The whole payload row (script, env, a sweep's params and templates). */
    char *env = j->env ? json_dumps(j->env, JSON_COMPACT) : NULL;
    int ret = insert_columns(s, s->st_insert_payload, j, env, C_LIGHT_COUNT, C_COUNT);
    free(env);
    return ret;
}

int store_retried_as(struct store *s, int64_t id, int64_t *out)
{
    sqlite3_stmt *st;
    *out = 0;
    if (adhoc(s, &st, "SELECT id FROM jobs WHERE retry_of=?1 ORDER BY id LIMIT 1") < 0)
        return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_err(s, "reading a job's next attempt");
    return 0;
}

/* ---- submission groups ---- */

int store_set_group(struct store *s, int64_t id, int64_t max_concurrent)
{
    if (refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO job_groups(id, max_concurrent) VALUES (?1, ?2)"
                           " ON CONFLICT(id) DO UPDATE SET max_concurrent=excluded.max_concurrent",
                           -1, &st, NULL) != SQLITE_OK)
        return db_err(s, "preparing to record a group");
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, max_concurrent);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_err(s, "recording a group");
    return 0;
}

int store_load_groups(struct store *s, store_group_cb cb, void *arg)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id, max_concurrent FROM job_groups WHERE id IN"
                           " (SELECT group_id FROM jobs WHERE state IN (0,1,2)) ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return db_err(s, "preparing to load groups");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        cb(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), arg);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return db_err(s, "loading groups");
    return 0;
}
