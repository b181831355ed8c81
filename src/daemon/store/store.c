/* store: the daemon's durable state in one SQLite database: opening it (settings, the room
 * kept on a full disk), errors and statement helpers, transactions and checkpoints.
 *
 * Settings made at open: WAL journal, synchronous=NORMAL (a commit is durable against a
 * crash of the daemon, and against power loss up to the last checkpoint), automatic
 * checkpoints off (they stall a commit for 5-10 ms; the daemon calls store_checkpoint
 * when idle, and a WAL hook asks for one once the log grows past STORE_WAL_FORCE_PAGES,
 * wal_hook_cb; in gflowd both run on a thread of their own, store_ckpt.c), foreign keys
 * on, a busy timeout, and no cache
 * spill: a transaction keeps its dirty pages in memory until it commits, beyond
 * cache_size if it must (freed again after). With spills, the pages of a large
 * transaction went to the WAL again and again (a 100,000-job sweep: 592,374 pwrites
 * instead of 9,942, a third of the daemon's time). The cache itself is 1 MiB, not
 * SQLite's 2: a page it misses is a pread from the kernel's page cache (microseconds),
 * and with 10,000 queued jobs the daemon's RSS was 15.9 -> 15.0 MB, `gqueue -a` of them
 * no slower within the noise (3 alternations). A transaction known to be large
 * (store_expect_large: a bulk change, a large submission) gets a larger cache until it
 * ends: once the changed pages fill the cache, SQLite frees every clean page as soon as
 * it is released, so each statement read the b-trees' inner pages from the file again
 * (a third of the time of a bulk hold of 100,000 jobs beside 1,000,000 finished ones).
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
 * The schema and its migrations are store_schema.c; the statements kept for the store's
 * life and one job's rows, store_job.c; the column table, store_row.c; listings and the
 * small tables, store_list.c. */
#include "store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_TRIM_BYTES (8 * 1024 * 1024)
/* The page cache's size (KiB), and its size for a transaction known to be large (a bound:
 * the pages are allocated as they are read; 100,000 jobs held use ~70 MB). */
#define STORE_CACHE_KB 1024
#define STORE_CACHE_LARGE_KB (256 * 1024)
/* The WAL's reserved length (the chunks the database file grows by: store_internal.h). */
#define STORE_WAL_RESERVE (4 * 1024 * 1024)
/* The WAL file is truncated back to this size when it is reset after a checkpoint. */
#define STORE_JOURNAL_SIZE_LIMIT (16 * 1024 * 1024)
/* Safety net: a daemon that is never idle still checkpoints once the log is this long
 * (10,000 pages of 4 KiB = ~40 MB). */
#ifndef STORE_WAL_FORCE_PAGES
#define STORE_WAL_FORCE_PAGES 10000
#endif

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
    memset(s->inserted, 0, sizeof(s->inserted));
    s->lost = true;
    s->lost_full = code == SQLITE_FULL;
    snprintf(s->lost_err, sizeof(s->lost_err), "%s", s->err);
}

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

int store_exec(struct store *s, const char *sql, const char *context)
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

/* Runs one ad-hoc statement (rare operations: not worth a prepared statement). */
int store_adhoc(struct store *s, sqlite3_stmt **st, const char *sql)
{
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing a statement");
    return 0;
}

/* ---- opening ---- */

int store_query_int(struct store *s, const char *sql, int64_t *out)
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

/* After each commit, with the log's length in pages. With the checkpoint thread
 * (store_ckpt.c), a long log is handed to it at once. Without, the forced checkpoint
 * runs here and waits for a commit that finds the log long already before it: so a large
 * transaction (a 100,000-job submission writes ~10,000 pages) is not checkpointed while
 * its reply waits, the idle checkpoint takes it half a second later, and a daemon that is
 * never idle still checkpoints at the next commit (the log then holds at most
 * STORE_WAL_FORCE_PAGES pages and two transactions' worth). */
static int wal_hook_cb(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct store *s = arg;
    if (pages >= STORE_WAL_FORCE_PAGES && !store_ckpt_request(s) &&
        s->wal_pages >= STORE_WAL_FORCE_PAGES)
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    s->wal_pages = pages;
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
             "PRAGMA journal_size_limit=%d;"
             "PRAGMA cache_spill=OFF;"
             "PRAGMA cache_size=-%d;",
             STORE_JOURNAL_SIZE_LIMIT, STORE_CACHE_KB);
    if (store_exec(s, sql, "configuring the database") < 0)
        return -1;
    /* After wal_autocheckpoint=0, which removed SQLite's own hook. */
    sqlite3_wal_hook(s->db, wal_hook_cb, s);
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
    if (store_query_int(s, "SELECT value FROM meta WHERE key='next_job_id'", &meta) < 0 ||
        store_query_int(s, "SELECT coalesce(max(id), 0) FROM jobs", &max_id) < 0)
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

    /* No memory statistics: with them every allocation of SQLite's takes a global mutex
     * (7% of the daemon's time accepting a 100,000-job sweep). Only before SQLite is
     * initialised (the first open); later it says SQLITE_MISUSE, which changes nothing. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
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

    if (configure(s) < 0 || store_migrate(s) < 0 || store_prepare_statements(s) < 0 ||
        load_next_id(s) < 0 || store_ids_open(s, path) < 0) {
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
    store_ckpt_stop(s); /* its connection first: the last one removes the WAL */
    sqlite3_stmt *all[] = {
        s->st_begin,          s->st_commit,      s->st_rollback,     s->st_insert,
        s->st_insert_payload, s->st_update,      s->st_get,          s->st_get_full,
        s->st_load_active,    s->st_count,       s->st_count_add,    s->st_meta_next,
        s->st_setting_get,    s->st_setting_set, s->st_setting_del,  s->st_dep_insert,
        s->st_dependents,     s->st_state,       s->st_update_state, s->st_env_find,
        s->st_env_insert,     s->st_notify_add,
    };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        sqlite3_finalize(all[i]);
    if (s->db) {
        if (!sqlite3_get_autocommit(s->db))
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(s->db); /* the last connection checkpoints and removes the WAL */
    }
    store_ids_close(s);
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

/* The bytes SQLite's page cache holds. A large transaction keeps its pages there until
 * it commits (no spill), and they go back to malloc then; beyond STORE_TRIM_BYTES,
 * store_commit gives them back to the system too, so that one 100,000-job submission
 * does not leave the daemon ~20 MB larger. */
static int cache_used(struct store *s)
{
    int used = 0, peak;
    sqlite3_db_status(s->db, SQLITE_DBSTATUS_CACHE_USED, &used, &peak, 0);
    return used;
}

/* Sets the page cache's size (KiB) for this connection. */
static void cache_size(struct store *s, int kb)
{
    char sql[48];
    snprintf(sql, sizeof(sql), "PRAGMA cache_size=-%d", kb);
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return; /* only slower */
    s->cache_large = kb > STORE_CACHE_KB;
}

void store_expect_large(struct store *s)
{
    /* Opened here if need be, so that its commit (or rollback) certainly comes and puts
     * the usual cache back, even if nothing is changed in it after all. */
    if (store_begin(s) < 0)
        return;
    if (!s->cache_large)
        cache_size(s, STORE_CACHE_LARGE_KB);
}

/* Back to the usual cache once a large transaction ended: the pages beyond it are freed. */
static void cache_usual(struct store *s)
{
    if (s->cache_large)
        cache_size(s, STORE_CACHE_KB);
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
    bool large = cache_used(s) > STORE_TRIM_BYTES;
    if (store_ids_reserve(s) == 0 && store_save_next_id(s) == 0 && store_save_counts(s) == 0 &&
        store_step_done(s, s->st_commit, "committing") == 0) {
        s->tx_open = false;
        cache_usual(s);
        if (large)
            malloc_trim(0);
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
    memset(s->inserted, 0, sizeof(s->inserted));
    cache_usual(s);
    if (sqlite3_get_autocommit(s->db))
        return;
    if (store_step_done(s, s->st_rollback, "rolling back") < 0)
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    /* next_id stays where it is: an id handed out in the rolled-back transaction is
     * skipped rather than reused, which is harmless and safer for the caller's memory. */
}

int store_checkpoint(struct store *s)
{
    if (store_ckpt_request(s))
        return 0;
    if (!sqlite3_get_autocommit(s->db))
        return 0; /* the daemon is not idle after all; try at the next idle moment */
    int rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        return store_db_err(s, "checkpointing");
    return 0;
}
