/* reservation_table: the daemon's GPU reservations (gctl reserve; the rules are in
 * src/core/reservation.h). Every reservation ever made is kept, in memory and in the
 * store's reservations table (a cancelled or completed one stays as history: gctl
 * reserve list --status completed). A --gpus N reservation gets its N GPUs when it is
 * made (reservation_pick_gpus), so the pass, the list and the overlap checks all see
 * fixed GPUs.
 *
 * The live ones (not cancelled, not over) are also kept apart, sorted by start, for the
 * scheduling pass: kept up to date on each change rather than rebuilt from the history
 * each pass, so that a pass, a create and the pass timer stay cheap with 20,000 of them.
 *
 * Who may reserve ([reservations] who) and, for users, how much (max_gpus, max_duration,
 * max_ahead, max_per_user) is checked by resv_create; admins are not bound. */
#ifndef GFLOWD_RESERVATION_TABLE_H
#define GFLOWD_RESERVATION_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "reservation.h"

struct store;

struct resv_table {
    struct resv *v; /* by id ascending */
    size_t n, cap;
    /* The live ones for the pass (resv_current), by start then id. */
    struct scheduler_reservation *cur;
    size_t n_cur, cur_cap;
    double cur_min_end; /* the earliest end among cur: then one is over (0: none) */
    /* One copy of each holder's name, which cur's entries point to: the pass compares
     * holders by pointer first. */
    char **names;
    size_t n_names, names_cap;
};

/* Loads every reservation from the store. 0, or -1 with *err. */
int resv_load(struct resv_table *t, struct store *s, char **err);
void resv_free(struct resv_table *t);

/* The reservations not cancelled and not over at now, sorted by start, for the
 * scheduling pass (valid until the next call or change). */
const struct scheduler_reservation *resv_current(struct resv_table *t, double now, size_t *n);
/* The next start or end after now of a reservation not cancelled (0: none): when a pass
 * must run again. */
double resv_next_change(struct resv_table *t, double now);

/* What user holds at now: their pending and active reservations (*count) and the GPUs
 * these name together (*gpus, NVML indices). */
void resv_held_by(struct resv_table *t, const char *user, double now, size_t *count,
                  uint64_t *gpus);

/* A new reservation: for user, from start to end, on the GPUs of want_mask (--gpu-spec)
 * or on count of them (--gpus N). */
struct resv_request {
    const char *user;
    uint64_t want_mask;
    int count;
    double start, end;
};

/* Makes q among the GPUs in `present`, clear of the other reservations in that window;
 * stored (inside the open transaction). limits: the [reservations] limits q must keep
 * (a user's own request), or NULL (an admin's: unbound). The new one, or NULL with *err
 * (a refusal, one line) and *status (400 bad request, 403 over a limit, 409 a clash, 500
 * the store). */
const struct resv *resv_create(struct resv_table *t, struct store *s, const struct resv_request *q,
                               const struct gflow_config *limits, uint64_t present, double now,
                               int *status, char **err);
/* Marks r cancelled at now and stores it. 0, or -1 with *err. */
int resv_cancel(struct resv_table *t, struct store *s, struct resv *r, double now, char **err);
struct resv *resv_find(struct resv_table *t, int64_t id);

#endif
