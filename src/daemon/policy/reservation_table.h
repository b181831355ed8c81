/* reservation_table: the daemon's GPU reservations (gctl reserve; the rules are in
 * src/core/reservation.h). Every reservation ever made is kept, in memory and in the
 * store's reservations table (a cancelled or completed one stays as history: gctl
 * reserve list --status completed); there are few. A --gpus N reservation gets its N
 * GPUs when it is made (reservation_pick_gpus), so the pass, the list and the overlap
 * checks all see fixed GPUs. */
#ifndef GFLOWD_RESERVATION_TABLE_H
#define GFLOWD_RESERVATION_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reservation.h"

struct store;

struct resv_table {
    struct resv *v; /* by id ascending */
    size_t n, cap;
    /* What the pass gets (resv_current), rebuilt on each call. */
    struct scheduler_reservation *cur;
    size_t cur_cap;
};

/* Loads every reservation from the store. 0, or -1 with *err. */
int resv_load(struct resv_table *t, struct store *s, char **err);
void resv_free(struct resv_table *t);

/* The reservations not cancelled and not over at now, for the scheduling pass (valid
 * until the next call or change). */
const struct scheduler_reservation *resv_current(struct resv_table *t, double now, size_t *n);
/* The next start or end after now of a reservation not cancelled (0: none): when a pass
 * must run again. */
double resv_next_change(const struct resv_table *t, double now);

/* Makes a reservation for user from start to end: on the GPUs of want_mask (--gpu-spec)
 * or on count of them (--gpus N), among the GPUs in `present`, clear of the other
 * reservations in that window; stored (inside the open transaction). The new one, or
 * NULL with *err (a refusal, one line) and *status (400 bad request, 409 a clash, 500
 * the store). */
const struct resv *resv_create(struct resv_table *t, struct store *s, const char *user,
                               uint64_t want_mask, int count, double start, double end,
                               uint64_t present, double now, int *status, char **err);
/* Marks r cancelled at now and stores it. 0, or -1 with *err. */
int resv_cancel(struct resv_table *t, struct store *s, struct resv *r, double now, char **err);
struct resv *resv_find(struct resv_table *t, int64_t id);

#endif
