/* store_resv: the reservations table (gctl reserve; resv.h). */
#include <sqlite3.h>

#include "policy/reservation_table.h"
#include "store_internal.h"

int store_insert_resv(struct store *s, const struct resv *r)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO reservations(id, user, gpu_count, gpus, start, end, "
                           "created, cancelled) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                           -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to record a reservation");
    sqlite3_bind_int64(st, 1, r->id);
    sqlite3_bind_text(st, 2, r->user, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, r->gpu_count);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)r->gpus);
    sqlite3_bind_double(st, 5, r->start);
    sqlite3_bind_double(st, 6, r->end);
    sqlite3_bind_double(st, 7, r->created);
    sqlite3_bind_double(st, 8, r->cancelled);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "recording a reservation");
    return 0;
}

int store_cancel_resv(struct store *s, int64_t id, double when)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "UPDATE reservations SET cancelled = ?2 WHERE id = ?1", -1, &st,
                           NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to cancel a reservation");
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_double(st, 2, when);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "cancelling a reservation");
    return 0;
}

int store_load_resvs(struct store *s, store_resv_cb cb, void *arg)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id, user, gpu_count, gpus, start, end, created, cancelled "
                           "FROM reservations ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to load reservations");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct resv r = {
            .id = sqlite3_column_int64(st, 0),
            .user = store_col_str(st, 1),
            .gpu_count = sqlite3_column_int(st, 2),
            .gpus = (uint64_t)sqlite3_column_int64(st, 3),
            .start = sqlite3_column_double(st, 4),
            .end = sqlite3_column_double(st, 5),
            .created = sqlite3_column_double(st, 6),
            .cancelled = sqlite3_column_double(st, 7),
        };
        cb(&r, arg);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "loading reservations");
    return 0;
}
