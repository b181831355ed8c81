/* store_usage: the fair-share accounts (table usage, one row per user or project that
 * has been charged): decayed GPU-seconds of ended jobs as of a time, and the raw total.
 * Written in the transaction that ends a job, so an account never misses or doubles a
 * job across restarts (running jobs are never stored: see src/core/fairshare.h). Also the
 * recent run times daemon.default_time_plan starts from. */
#include "store_internal.h"

#include <sqlite3.h>

int store_load_usage(struct store *s, store_usage_cb cb, void *arg)
{
    sqlite3_stmt *st;
    if (store_adhoc(s, &st, "SELECT kind, name, usage, at, raw FROM usage ORDER BY kind, name") < 0)
        return -1;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        cb(sqlite3_column_int(st, 0), name ? name : "", sqlite3_column_double(st, 2),
           sqlite3_column_double(st, 3), sqlite3_column_double(st, 4), arg);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : store_db_err(s, "reading the usage accounts");
}

int store_put_usage(struct store *s, int kind, const char *name, double usage, double at,
                    double raw)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (store_adhoc(s, &st,
                    "INSERT INTO usage(kind, name, usage, at, raw) VALUES (?1, ?2, ?3, ?4, ?5)"
                    " ON CONFLICT(kind, name) DO UPDATE SET usage=excluded.usage,"
                    " at=excluded.at, raw=excluded.raw") < 0)
        return -1;
    sqlite3_bind_int(st, 1, kind);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, usage);
    sqlite3_bind_double(st, 4, at);
    sqlite3_bind_double(st, 5, raw);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : store_db_err(s, "writing a usage account");
}

int store_recent_runs(struct store *s, int64_t max, store_run_cb cb, void *arg)
{
    sqlite3_stmt *st;
    /* The index's own WHERE (state IN (3,4,5,6)) spelled out, so SQLite may use it. */
    if (store_adhoc(s, &st,
                    "SELECT end_time - start_time FROM jobs WHERE state IN (3, 4, 5, 6) AND"
                    " state <> 5 AND start_time > 0 AND end_time > start_time"
                    " ORDER BY end_time DESC LIMIT ?1") < 0)
        return -1;
    sqlite3_bind_int64(st, 1, max);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        cb(sqlite3_column_double(st, 0), arg);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : store_db_err(s, "reading recent run times");
}
