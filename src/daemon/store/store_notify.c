/* store_notify: the notification outbox (notify_outbox, schema 18; store.h). */
#include <sqlite3.h>

#include "store_internal.h"

int store_notify_add(struct store *s, struct store_notify_row *r)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    if (!s->st_notify_add &&
        store_prepare(s, &s->st_notify_add,
                      "INSERT INTO notify_outbox(job_id, event, kind, dest, user, uid, gid, "
                      "payload, attempts, next_at, state, created) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9, 0, ?9)") < 0)
        return -1;
    sqlite3_stmt *st = s->st_notify_add;
    sqlite3_bind_int64(st, 1, r->job_id);
    sqlite3_bind_text(st, 2, r->event, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, r->kind);
    sqlite3_bind_text(st, 4, r->dest, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, r->user, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, r->uid);
    sqlite3_bind_int64(st, 7, r->gid);
    sqlite3_bind_text(st, 8, r->payload, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 9, r->next_at);
    if (store_step_done(s, st, "recording a notification") < 0)
        return -1;
    r->id = sqlite3_last_insert_rowid(s->db);
    return 0;
}

int store_notify_pending_by_uid(struct store *s, void (*cb)(uint32_t uid, int64_t n, void *arg),
                                void *arg)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT uid, count(*) FROM notify_outbox WHERE state = 0 GROUP BY uid",
                           -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to count the notifications pending");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        cb((uint32_t)sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), arg);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : store_db_err(s, "counting the notifications pending");
}

int store_notify_due(struct store *s, double now, int limit, store_notify_cb cb, void *arg)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id, job_id, event, kind, dest, user, uid, gid, payload, "
                           "attempts, next_at FROM notify_outbox WHERE state = 0 AND "
                           "next_at <= ?1 ORDER BY next_at, id LIMIT ?2",
                           -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to read the notifications due");
    sqlite3_bind_double(st, 1, now);
    sqlite3_bind_int(st, 2, limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_notify_row r = {
            .id = sqlite3_column_int64(st, 0),
            .job_id = sqlite3_column_int64(st, 1),
            .event = (const char *)sqlite3_column_text(st, 2),
            .kind = sqlite3_column_int(st, 3),
            .dest = (const char *)sqlite3_column_text(st, 4),
            .user = (const char *)sqlite3_column_text(st, 5),
            .uid = (uint32_t)sqlite3_column_int64(st, 6),
            .gid = (uint32_t)sqlite3_column_int64(st, 7),
            .payload = (const char *)sqlite3_column_text(st, 8),
            .attempts = sqlite3_column_int(st, 9),
            .next_at = sqlite3_column_double(st, 10),
        };
        cb(&r, arg);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : store_db_err(s, "reading the notifications due");
}

int store_notify_next_after(struct store *s, double after, double *out)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT min(next_at) FROM notify_outbox WHERE state = 0 AND "
                           "next_at > ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to read the next notification");
    sqlite3_bind_double(st, 1, after);
    int rc = sqlite3_step(st), ret = 1;
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        *out = sqlite3_column_double(st, 0);
        ret = 0;
    } else if (rc != SQLITE_ROW) {
        ret = store_db_err(s, "reading the next notification");
    }
    sqlite3_finalize(st);
    return ret;
}

int store_notify_set(struct store *s, int64_t id, int state, int attempts, double next_at,
                     const char *last_error, double done_at)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "UPDATE notify_outbox SET state = ?2, attempts = ?3, next_at = ?4, "
                           "last_error = ?5, done_at = ?6 WHERE id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to record a delivery");
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, state);
    sqlite3_bind_int(st, 3, attempts);
    sqlite3_bind_double(st, 4, next_at);
    sqlite3_bind_text(st, 5, last_error, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 6, done_at);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : store_db_err(s, "recording a delivery");
}

int store_notify_count_pending(struct store *s, int64_t *n)
{
    *n = 0;
    return store_query_int(s, "SELECT count(*) FROM notify_outbox WHERE state = 0", n);
}

int64_t store_notify_prune(struct store *s, double before)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "DELETE FROM notify_outbox WHERE state != 0 AND done_at < ?1", -1,
                           &st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to prune notifications");
    sqlite3_bind_double(st, 1, before);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "pruning notifications");
    return sqlite3_changes(s->db);
}
