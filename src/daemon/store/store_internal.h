/* store_internal: what the store's files share (store.c: opening, errors, transactions;
 * store_schema.c: the tables and their migrations; store_job.c: the kept statements and
 * one job's rows; store_row.c: the column table; store_list.c: many jobs and the small
 * tables; store_ids.c: the ids' high-water mark). Not for the rest of the daemon: that is store.h. */
#ifndef GFLOWD_STORE_INTERNAL_H
#define GFLOWD_STORE_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>

#include "job.h"
#include "store.h"
#include "util.h"

/* The conditions of the partial indexes jobs_active (PD, H, R) and jobs_end (CD, F, CA,
 * TO), as queries must spell them for the planner to use those (store_schema.c, 18). */
#define STORE_ACTIVE "state < 3"
#define STORE_ENDED "state > 2"
_Static_assert(JOB_QUEUED == 0 && JOB_HELD == 1 && JOB_RUNNING == 2 && JOB_STATE_COUNT == 7,
               "STORE_ACTIVE and STORE_ENDED split the states here");

/* The columns of a job (job_fields.def): jobs' own, then the payload's (job_payload).
 * Every statement on job rows is generated from this list, with ?N = column N-1, so
 * binding and reading cannot drift apart. */
enum col {
#define JOB_FIELD(ID, ...) C_##ID,
#define JOB_COLUMN(ID, ...) C_##ID,
#include "job_fields.def"
    C_LIGHT_COUNT, /* the columns read without payload are those before this one */
    C_PAYLOAD_BASE = C_LIGHT_COUNT - 1, /* the payload's columns follow, from C_LIGHT_COUNT */
#define JOB_PAYLOAD(ID, ...) C_##ID,
#include "job_fields.def"
    C_COUNT
};

struct store_column {
    const char *name;
    bool mutable; /* written by store_update_job (the payload and submitter are fixed) */
};

extern const struct store_column store_columns[C_COUNT];

/* The chunks the database file grows by (SQLITE_FCNTL_CHUNK_SIZE), on every connection. */
#define STORE_CHUNK_BYTES (1024 * 1024)

struct store {
    sqlite3 *db;
    char err[512];
    int64_t next_id;
    /* Jobs inserted in the open transaction raised next_id: store_commit writes it to
     * meta then, once per transaction rather than once per job. */
    bool next_id_unsaved;
    /* The ids' high-water mark (store_ids.c): its file, and the ids below
     * ids_reserved that it covers. */
    char *ids_path;
    int64_t ids_reserved;
    /* Jobs inserted in the open transaction, by state: store_commit adds them to
     * job_counts with one statement per state (schema 22; a trigger per row was 10% of a
     * 100,000-task array's submission). */
    int64_t inserted[JOB_STATE_COUNT];
    /* A COMMIT (or a statement inside the transaction) failed and SQLite rolled the
     * transaction back by itself (I/O error, disk full): its changes are gone, but the
     * caller has not acknowledged that yet. lost_full: for want of space. */
    bool lost;
    bool lost_full;
    char lost_err[512];      /* the error that lost it */
    bool tx_open;            /* store_begin opened a transaction not committed or rolled back yet */
    bool cache_large;        /* store_expect_large: the larger cache until the transaction ends */
    int wal_pages;           /* the log's length after the last commit (wal_hook_cb) */
    struct store_ckpt *ckpt; /* the checkpoint thread (store_ckpt.c); NULL: none */

    sqlite3_stmt *st_begin, *st_commit, *st_rollback;
    sqlite3_stmt *st_insert, *st_insert_payload, *st_update;
    sqlite3_stmt *st_get, *st_get_full;
    sqlite3_stmt *st_load_active;
    sqlite3_stmt *st_dep_insert, *st_dependents, *st_state;
    sqlite3_stmt *st_count, *st_count_add;
    sqlite3_stmt *st_meta_next;
    sqlite3_stmt *st_setting_get, *st_setting_set, *st_setting_del;
    /* store_update_state: only what a change of state from PD or H writes. */
    sqlite3_stmt *st_update_state;
    sqlite3_stmt *st_env_find, *st_env_insert;
    /* store_notify.c: prepared on first use (a daemon without notifications never does). */
    sqlite3_stmt *st_notify_add;
};

/* Errors: the message store_error returns. */
void store_set_err(struct store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "context: sqlite's message"; returns -1. */
int store_db_err(struct store *s, const char *context);
/* Prepares a statement kept for the store's life. 0 or -1. */
int store_prepare(struct store *s, sqlite3_stmt **st, const char *sql);
/* Prepares a statement the first time it is needed (rare ones). 0 or -1. */
int store_adhoc(struct store *s, sqlite3_stmt **st, const char *sql);
/* Resets a statement after use and drops its bindings, so no pointer into a caller's
 * job outlives the call. */
void store_finish(sqlite3_stmt *st);
/* Steps a statement that returns no rows, then finishes it. 0 or -1. */
int store_step_done(struct store *s, sqlite3_stmt *st, const char *context);
/* -1 (with the error set) once a commit was lost until the daemon restarts. */
int store_refuse_if_lost(struct store *s);
/* Runs sql (one or more statements, no rows wanted); context prefixes the error. 0 or -1. */
int store_exec(struct store *s, const char *sql, const char *context);
/* Writes next_id to meta if inserts raised it in the open transaction (store_commit). */
int store_save_next_id(struct store *s);
/* The ids' high-water mark beside the database (store_ids.c): read at open (next_id
 * raised to it; 0, or -1 with the error set), made to cover next_id before each commit
 * (0, or -1 with the error set: nothing may be committed), the exact next id written at
 * close. */
int store_ids_open(struct store *s, const char *db_path);
int store_ids_reserve(struct store *s);
void store_ids_close(struct store *s);
/* Adds the jobs inserted in the open transaction to job_counts. 0, or -1 (store_db_err). */
int store_save_counts(struct store *s);
/* The checkpoint thread (store_ckpt.c): asks it for a checkpoint, false when there is
 * none (the caller checkpoints itself); stops it; how many checkpoints it ran (tests). */
bool store_ckpt_request(struct store *s);
void store_ckpt_stop(struct store *s);
uint64_t store_ckpt_done(struct store *s);
/* The first column of sql's first row into *out (left as it is when there is no row).
 * 0 or -1. */
int store_query_int(struct store *s, const char *sql, int64_t *out);

/* Opening (store_open), in this order: brings the schema up to date (store_schema.c),
 * then prepares the statements kept for the store's life (store_job.c). 0 or -1. */
int store_migrate(struct store *s);
int store_prepare_statements(struct store *s);

/* Binds text (NULL: SQL NULL) to ?idx, without a copy. */
int store_bind_text(sqlite3_stmt *st, int idx, const char *v);
/* A job's params (a sweep's values) as stored: json_dumps(params, JSON_COMPACT), the same
 * text, written by hand when every value is a string (a 100,000-job sweep dumps 100,000
 * of them: json_dumps took ~3,000 instructions for {"x":"1"}). Freed by the caller. */
char *store_params_text(const json_t *params);
/* Column i of the current row as a malloc'd string, NULL for SQL NULL. */
char *store_col_str(sqlite3_stmt *st, int i);
/* Binds column c of j to ?c+1 of st; env_id: the envs row of its environment (0: none;
 * store_job.c). */
int store_bind_column(sqlite3_stmt *st, enum col c, const struct job *j, int64_t env_id);
/* Fills j (initialised here) from the current row of a statement that selects columns
 * 0..C_LIGHT_COUNT-1, or every column with payload. 0 or -1. */
int store_read_job(struct store *s, sqlite3_stmt *st, struct job *j, bool payload);
/* Fills j (initialised here) from the current row of a statement that selects the n
 * light columns cols (enum col), in that order. */
void store_read_columns(sqlite3_stmt *st, const int *cols, size_t n, struct job *j);
/* Appends "id,name,...": what a SELECT reads for the first n columns (for the light
 * ones, which an INSERT lists too, their names). */
void store_add_column_list(struct strbuf *sb, int n);

#endif
