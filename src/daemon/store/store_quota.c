/* store_quota: what the quota records need from the store (policy/quota_state.c): the
 * GPU-seconds that ended jobs used since a time, per user and project, to rebuild
 * max_gpu_hours' usage at start-up. The runtime overrides are a setting
 * (store_get_setting). */
#include "store_internal.h"

int store_gpu_seconds_since(struct store *s, double since, store_gpu_seconds_cb cb, void *arg)
{
    sqlite3_stmt *st;
    /* Ended states (CD, F, CA, TO); the part of each run after `since`. */
    if (store_adhoc(s, &st,
                    "SELECT user, project, SUM(gpus * (end_time - MAX(start_time, ?1))) FROM jobs"
                    " WHERE " STORE_ENDED " AND gpus > 0 AND start_time > 0"
                    " AND end_time > ?1 GROUP BY user, project") < 0)
        return -1;
    sqlite3_bind_double(st, 1, since);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        cb((const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
           sqlite3_column_double(st, 2), arg);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "reading the GPU time used in the quota period");
    return 0;
}
