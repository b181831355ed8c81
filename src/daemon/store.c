/* store: the daemon's durable state in one SQLite database.
 *
 * Settings made at open: WAL journal, synchronous=NORMAL (a commit is durable against a
 * crash of the daemon, and against power loss up to the last checkpoint), automatic
 * checkpoints off (they stall a commit for 5-10 ms; the daemon calls store_checkpoint
 * when idle, and a WAL hook forces one only if the log grows past STORE_WAL_FORCE_PAGES
 * because the daemon never got idle), foreign keys on, a busy timeout.
 *
 * Room kept for commits on a full disk (reserve()): the WAL file is made
 * STORE_WAL_RESERVE bytes long at open, its blocks allocated. SQLite writes the log
 * from its start again after each complete checkpoint and never shrinks it below
 * journal_size_limit, and frames past the last valid one are ignored, so commits that
 * fit that space need no new blocks. The database file grows in allocated chunks of
 * STORE_CHUNK_BYTES (SQLITE_FCNTL_CHUNK_SIZE), so a checkpoint usually has room too.
 * When a commit fails anyway, SQLite rolls the transaction back (store_commit marks it
 * lost, and so does a statement that fails inside the transaction) and the daemon
 * undoes it in memory (serve.c).
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
 * Every column is listed once in store_row.c (store_columns), in table order, payload
 * last; the SQL of the hot statements (insert, update, get, load) is generated from
 * that list with numbered parameters ?N = column N, so the bind and read code cannot
 * drift. Listings and the small tables are store_list.c. */
#include "store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define STORE_BUSY_TIMEOUT_MS 5000
/* The WAL's reserved length, and the chunks the database file grows by. */
#define STORE_WAL_RESERVE (4 * 1024 * 1024)
#define STORE_CHUNK_BYTES (1024 * 1024)
/* The WAL file is truncated back to this size when it is reset after a checkpoint. */
#define STORE_JOURNAL_SIZE_LIMIT (16 * 1024 * 1024)
/* Safety net: a daemon that is never idle still checkpoints once the log is this long
 * (10,000 pages of 4 KiB = ~40 MB). */
#ifndef STORE_WAL_FORCE_PAGES
#define STORE_WAL_FORCE_PAGES 10000
#endif

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
};
/* The codes migration 6 writes are enum job_reason's. */
_Static_assert(JOB_REASON_LAUNCH_FAILED == 6 && JOB_REASON_SHIM_LOST == 7 &&
                   JOB_REASON_DEPENDENCY_FAILED == 8 && JOB_REASON_HELD_BY_USER == 9 &&
                   JOB_REASON_OTHER == 10,
               "migration 6 maps reason texts to these codes");
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

void store_set_err(struct store *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
}

/* A transaction the caller opened is lost when a statement in it or its COMMIT fails
 * for want of space or with an I/O error: SQLite has rolled it back by itself, or undone
 * just the failed statement, in which case the rest goes too (a change missing from what
 * is committed would go unnoticed). From then on changes and commits are refused until
 * the caller rolls back, so that no change made after it runs outside a transaction and
 * no reply claims the lost ones were saved. */
static void note_failure(struct store *s)
{
    if (!s->tx_open)
        return;
    int code = sqlite3_extended_errcode(s->db) & 0xff;
    bool rolled_back = sqlite3_get_autocommit(s->db);
    if (!rolled_back && (code == SQLITE_FULL || code == SQLITE_IOERR)) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        rolled_back = sqlite3_get_autocommit(s->db);
    }
    if (!rolled_back)
        return;
    s->tx_open = false;
    s->lost = true;
    s->lost_full = code == SQLITE_FULL;
    snprintf(s->lost_err, sizeof(s->lost_err), "%s", s->err);
}

/* What a job's move between PD, H and an end (CA) changes (store_update_state): its state,
 * reason, end and begin times, and the GPUs it gives back when queued again. */
static const int state_columns[] = {C_STATE,      C_END_TIME,   C_REASON,  C_REASON_CODE,
                                    C_REASON_JOB, C_BEGIN_TIME, C_GPU_IDS, C_MIG_UUIDS};

/* "context: sqlite's message" */
int store_db_err(struct store *s, const char *context)
{
    store_set_err(s, "%s: %s", context, sqlite3_errmsg(s->db));
    note_failure(s);
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
        store_set_err(s, "%s: %s", context, msg ? msg : sqlite3_errmsg(s->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int store_prepare(struct store *s, sqlite3_stmt **st, const char *sql)
{
    if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK) {
        store_set_err(s, "preparing \"%.200s\": %s", sql, sqlite3_errmsg(s->db));
        return -1;
    }
    return 0;
}

/* Resets a statement after use and drops its bindings, so no pointer into a caller's
 * job outlives the call. */
void store_finish(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Steps a statement that returns no rows. */
int store_step_done(struct store *s, sqlite3_stmt *st, const char *context)
{
    int rc = sqlite3_step(st);
    int ret = rc == SQLITE_DONE ? 0 : store_db_err(s, context);
    store_finish(st);
    return ret;
}

static int prepare_sb(struct store *s, sqlite3_stmt **st, struct strbuf *sb)
{
    int rc = store_prepare(s, st, sb->buf);
    strbuf_reset(sb);
    return rc;
}

static int prepare_statements(struct store *s)
{
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = 0;

    strbuf_adds(&sb, "INSERT INTO jobs(");
    store_add_column_list(&sb, C_LIGHT_COUNT);
    strbuf_adds(&sb, ") VALUES (");
    for (int c = 0; c < C_LIGHT_COUNT; c++)
        strbuf_addf(&sb, "%s?%d", c ? "," : "", c + 1);
    strbuf_adds(&sb, ")");
    rc |= prepare_sb(s, &s->st_insert, &sb);

    /* OR REPLACE: a payload row left by a job deleted with foreign keys off must not
     * block the new job. */
    strbuf_addf(&sb, "INSERT OR REPLACE INTO job_payload(job_id");
    for (int c = C_LIGHT_COUNT; c < C_COUNT; c++)
        strbuf_addf(&sb, ",%s", store_columns[c].name);
    strbuf_addf(&sb, ") VALUES (?%d", C_ID + 1);
    for (int c = C_LIGHT_COUNT; c < C_COUNT; c++)
        strbuf_addf(&sb, ",?%d", c + 1);
    strbuf_adds(&sb, ")");
    rc |= prepare_sb(s, &s->st_insert_payload, &sb);

    strbuf_adds(&sb, "UPDATE jobs SET ");
    bool first = true;
    for (int c = 0; c < C_COUNT; c++) {
        if (!store_columns[c].mutable)
            continue;
        strbuf_addf(&sb, "%s%s=?%d", first ? "" : ",", store_columns[c].name, c + 1);
        first = false;
    }
    strbuf_addf(&sb, " WHERE id=?%d", C_ID + 1);
    rc |= prepare_sb(s, &s->st_update, &sb);

    first = true;
    strbuf_adds(&sb, "UPDATE jobs SET ");
    for (size_t i = 0; i < sizeof(state_columns) / sizeof(state_columns[0]); i++) {
        int c = state_columns[i];
        strbuf_addf(&sb, "%s%s=?%d", first ? "" : ",", store_columns[c].name, c + 1);
        first = false;
    }
    strbuf_addf(&sb, " WHERE id=?%d", C_ID + 1);
    rc |= prepare_sb(s, &s->st_update_state, &sb);

    strbuf_adds(&sb, "SELECT ");
    store_add_column_list(&sb, C_LIGHT_COUNT);
    strbuf_adds(&sb, " FROM jobs WHERE id=?1");
    rc |= prepare_sb(s, &s->st_get, &sb);

    strbuf_adds(&sb, "SELECT ");
    store_add_column_list(&sb, C_COUNT);
    strbuf_adds(&sb, " FROM jobs LEFT JOIN job_payload ON job_id=id WHERE id=?1");
    rc |= prepare_sb(s, &s->st_get_full, &sb);

    strbuf_adds(&sb, "SELECT ");
    store_add_column_list(&sb, C_LIGHT_COUNT);
    strbuf_adds(&sb, " FROM jobs WHERE state IN (0,1,2) ORDER BY id");
    rc |= prepare_sb(s, &s->st_load_active, &sb);
    strbuf_free(&sb);

    rc |= store_prepare(s, &s->st_begin, "BEGIN IMMEDIATE");
    rc |= store_prepare(s, &s->st_commit, "COMMIT");
    rc |= store_prepare(s, &s->st_rollback, "ROLLBACK");
    rc |= store_prepare(s, &s->st_count, "SELECT state, n FROM job_counts");
    rc |= store_prepare(s, &s->st_dep_insert,
                        "INSERT OR IGNORE INTO job_deps(job_id, dep_id, kind) VALUES (?1, ?2, ?3)");
    rc |= store_prepare(s, &s->st_dependents,
                        "SELECT DISTINCT job_id FROM job_deps WHERE dep_id=?1 ORDER BY job_id");
    rc |= store_prepare(s, &s->st_state, "SELECT state FROM jobs WHERE id=?1");
    rc |= store_prepare(s, &s->st_meta_next,
                        "UPDATE meta SET value=?1 WHERE key='next_job_id' AND value<?1");
    rc |= store_prepare(s, &s->st_setting_get, "SELECT value FROM settings WHERE key=?1");
    rc |= store_prepare(s, &s->st_setting_set,
                        "INSERT INTO settings(key, value) VALUES (?1, ?2)"
                        " ON CONFLICT(key) DO UPDATE SET value=excluded.value");
    rc |= store_prepare(s, &s->st_setting_del, "DELETE FROM settings WHERE key=?1");
    return rc ? -1 : 0;
}

/* ---- opening ---- */

static int query_int(struct store *s, const char *sql, int64_t *out)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, sql);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_DONE)
        store_db_err(s, sql);
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
        store_set_err(s, "database schema version %lld is newer than this gflowd supports (%d)",
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
        return store_db_err(s, "setting journal_mode=WAL");
    if (sqlite3_step(st) == SQLITE_ROW)
        mode = store_col_str(st, 0);
    else
        store_db_err(s, "setting journal_mode=WAL");
    sqlite3_finalize(st);
    if (!mode)
        return -1;
    bool wal = strcmp(mode, "wal") == 0;
    if (!wal)
        store_set_err(s,
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

/* Room for commits on a full disk (top of this file). Best effort: a filesystem that is
 * full already, or cannot allocate ahead, gets none. */
static void reserve(struct store *s)
{
    int chunk = STORE_CHUNK_BYTES;
    sqlite3_file_control(s->db, "main", SQLITE_FCNTL_CHUNK_SIZE, &chunk);
    sqlite3_file *wal = NULL;
    if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) != SQLITE_OK ||
        !wal || !wal->pMethods)
        return; /* the WAL is not open (it is, once the schema was read) */
    sqlite3_int64 size = STORE_WAL_RESERVE;
    if (wal->pMethods->xFileControl(wal, SQLITE_FCNTL_CHUNK_SIZE, &chunk) != SQLITE_OK ||
        wal->pMethods->xFileControl(wal, SQLITE_FCNTL_SIZE_HINT, &size) != SQLITE_OK)
        store_set_err(s, "cannot reserve room for the write-ahead log");
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
    reserve(s);
    return s;
}

void store_close(struct store *s)
{
    if (!s)
        return;
    sqlite3_stmt *all[] = {
        s->st_begin,          s->st_commit,       s->st_rollback,   s->st_insert,
        s->st_insert_payload, s->st_update,       s->st_get,        s->st_get_full,
        s->st_load_active,    s->st_count,        s->st_meta_next,  s->st_setting_get,
        s->st_setting_set,    s->st_setting_del,  s->st_dep_insert, s->st_dependents,
        s->st_state,          s->st_update_state,
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

bool store_lost_for_space(const struct store *s)
{
    return s->lost && s->lost_full;
}

int store_refuse_if_lost(struct store *s)
{
    if (!s->lost)
        return 0;
    store_set_err(s, "the open transaction was lost (%s); roll it back first", s->lost_err);
    return -1;
}

const char *store_lost_error(const struct store *s)
{
    return s->lost ? s->lost_err : NULL;
}

int store_begin(struct store *s)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    if (!sqlite3_get_autocommit(s->db))
        return 0;
    if (store_step_done(s, s->st_begin, "beginning a transaction") < 0)
        return -1;
    s->tx_open = true;
    return 0;
}

int store_commit(struct store *s)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    if (sqlite3_get_autocommit(s->db))
        return 0;
    if (store_step_done(s, s->st_commit, "committing") == 0) {
        s->tx_open = false;
        return 0;
    }
    /* Still open (SQLITE_BUSY, say): the caller may retry the commit or roll back. Rolled
     * back by SQLite (I/O error, disk full): say so until the caller acknowledges
     * (store_db_err has marked it lost). */
    if (s->lost) {
        size_t len = strlen(s->err);
        snprintf(s->err + len, sizeof(s->err) - len, " (the transaction was rolled back)");
    }
    return -1;
}

void store_rollback(struct store *s)
{
    s->lost = false;
    s->lost_full = false;
    s->tx_open = false;
    if (sqlite3_get_autocommit(s->db))
        return;
    if (store_step_done(s, s->st_rollback, "rolling back") < 0)
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
        return store_db_err(s, "checkpointing");
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
        rc = store_bind_column(st, (enum col)c, j, env);
    if (rc != SQLITE_OK) {
        store_finish(st);
        return store_db_err(s, "binding a new job");
    }
    char context[64];
    snprintf(context, sizeof(context), "inserting job %lld", (long long)j->id);
    return store_step_done(s, st, context);
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
        if (store_step_done(s, s->st_dep_insert, "recording a dependency") < 0)
            return -1;
    }
    if (j->id < s->next_id)
        return 0;

    sqlite3_bind_int64(s->st_meta_next, 1, j->id + 1);
    if (store_step_done(s, s->st_meta_next, "recording the next job id") < 0)
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
        store_set_err(s, "inserting a job: invalid id %lld", (long long)j->id);
        return -1;
    }
    if (store_refuse_if_lost(s) < 0)
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

/* Runs an UPDATE of job j whose columns were bound (rc: how binding went). */
static int store_step_update(struct store *s, sqlite3_stmt *st, int rc, const struct job *j)
{
    if (rc != SQLITE_OK) {
        store_finish(st);
        return store_db_err(s, "binding a job update");
    }
    char context[64];
    snprintf(context, sizeof(context), "updating job %lld", (long long)j->id);
    if (store_step_done(s, st, context) < 0)
        return -1;
    if (sqlite3_changes(s->db) == 0) {
        store_set_err(s, "updating job %lld: no such job", (long long)j->id);
        return -1;
    }
    return 0;
}

int store_update_job(struct store *s, const struct job *j)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st = s->st_update;
    int rc = SQLITE_OK;
    for (int c = 0; c < C_COUNT && rc == SQLITE_OK; c++) {
        if (c == C_ID || store_columns[c].mutable)
            rc = store_bind_column(st, (enum col)c, j, NULL);
    }
    return store_step_update(s, st, rc, j);
}

int store_update_state(struct store *s, const struct job *j)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st = s->st_update_state;
    int rc = store_bind_column(st, C_ID, j, NULL);
    for (size_t i = 0; i < sizeof(state_columns) / sizeof(state_columns[0]) && rc == SQLITE_OK; i++)
        rc = store_bind_column(st, (enum col)state_columns[i], j, NULL);
    return store_step_update(s, st, rc, j);
}

/* The tasks of an array or a sweep usually share the first job's environment (and script):
 * it is stored once, with that job (the group's id), and read from there. */
static int read_group_payload(struct store *s, struct job *j)
{
    struct job leader;
    int rc = store_get_job(s, j->group_id, &leader, true);
    if (rc != 0) {
        if (rc > 0)
            store_set_err(s, "job %lld: the payload of its group %lld is missing", (long long)j->id,
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
        ret = store_read_job(s, st, out, with_payload);
    else if (rc == SQLITE_DONE)
        ret = 1;
    else
        ret = store_db_err(s, "reading a job");
    store_finish(st);
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
        ret = store_db_err(s, "reading a job's state");
    store_finish(st);
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
    int ret = rc == SQLITE_DONE ? 0 : store_db_err(s, "reading dependents");
    store_finish(st);
    return ret;
}

/* ---- changes of a queued job (gjob update) and retry lineage ---- */

/* Runs one ad-hoc statement (rare operations: not worth a prepared statement). */
int store_adhoc(struct store *s, sqlite3_stmt **st, const char *sql)
{
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing a statement");
    return 0;
}

int store_replace_deps(struct store *s, const struct job *j)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (store_adhoc(s, &st, "DELETE FROM job_deps WHERE job_id=?1") < 0)
        return -1;
    sqlite3_bind_int64(st, 1, j->id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "replacing dependencies");
    for (size_t i = 0; i < j->n_deps; i++) {
        sqlite3_bind_int64(s->st_dep_insert, 1, j->id);
        sqlite3_bind_int64(s->st_dep_insert, 2, j->deps[i].id);
        sqlite3_bind_text(s->st_dep_insert, 3, job_dep_kind_name(j->deps[i].kind), -1,
                          SQLITE_STATIC);
        if (store_step_done(s, s->st_dep_insert, "recording a dependency") < 0)
            return -1;
    }
    return store_update_job(s, j);
}

int store_update_what(struct store *s, const struct job *j, bool payload)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (store_adhoc(s, &st, "UPDATE jobs SET command=?2, script_path=?3, workdir=?4 WHERE id=?1") <
        0)
        return -1;
    sqlite3_bind_int64(st, 1, j->id);
    store_bind_text(st, 2, j->command);
    store_bind_text(st, 3, j->script_path);
    store_bind_text(st, 4, j->workdir);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "updating a job's command");
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
    if (store_adhoc(s, &st,
                    "SELECT id FROM jobs WHERE retry_of=?1 AND retry_of > 0 "
                    "ORDER BY id LIMIT 1") < 0)
        return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_db_err(s, "reading a job's next attempt");
    return 0;
}
