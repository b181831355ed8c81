/* reservation_table: the daemon's GPU reservations (see reservation_table.h). */
#include "reservation_table.h"

#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "util.h"

static void append(struct resv_table *t, const struct resv *r)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->v = xrealloc(t->v, t->cap * sizeof(*t->v));
    }
    t->v[t->n++] = *r;
}

static void load_cb(struct resv *r, void *arg)
{
    append(arg, r);
}

int resv_load(struct resv_table *t, struct store *s, char **err)
{
    memset(t, 0, sizeof(*t));
    if (store_load_resvs(s, load_cb, t) < 0) {
        *err = xasprintf("loading the reservations: %s", store_error(s));
        return -1;
    }
    return 0;
}

void resv_free(struct resv_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].user);
    free(t->v);
    free(t->cur);
    memset(t, 0, sizeof(*t));
}

static bool resv_live(const struct resv *r, double now)
{
    return r->cancelled == 0 && r->end > now;
}

const struct scheduler_reservation *resv_current(struct resv_table *t, double now, size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct resv *r = &t->v[i];
        if (!resv_live(r, now))
            continue;
        if (*n == t->cur_cap) {
            t->cur_cap = t->cur_cap ? t->cur_cap * 2 : 8;
            t->cur = xrealloc(t->cur, t->cur_cap * sizeof(*t->cur));
        }
        t->cur[(*n)++] = (struct scheduler_reservation){r->id, r->user, r->start, r->end, r->gpus};
    }
    return t->cur;
}

double resv_next_change(const struct resv_table *t, double now)
{
    double next = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct resv *r = &t->v[i];
        if (!resv_live(r, now))
            continue;
        double at = r->start > now ? r->start : r->end;
        if (next == 0 || at < next)
            next = at;
    }
    return next;
}

const struct resv *resv_create(struct resv_table *t, struct store *s, const char *user,
                               uint64_t want_mask, int count, double start, double end,
                               uint64_t present, double now, int *status, char **err)
{
    size_t n;
    const struct scheduler_reservation *others = resv_current(t, now, &n);
    uint64_t gpus;
    int rc = reservation_pick_gpus(others, n, start, end, present, want_mask, count, &gpus, err);
    if (rc < 0) {
        *status = rc == -2 ? 409 : 400;
        return NULL;
    }
    struct resv r = {
        .id = t->n ? t->v[t->n - 1].id + 1 : 1,
        .user = xstrdup(user),
        .gpu_count = want_mask ? 0 : count,
        .gpus = gpus,
        .start = start,
        .end = end,
        .created = now,
    };
    if (store_begin(s) < 0 || store_insert_resv(s, &r) < 0) {
        *status = 500;
        *err = xasprintf("cannot record the reservation: %s", store_error(s));
        free(r.user);
        return NULL;
    }
    append(t, &r);
    return &t->v[t->n - 1];
}

int resv_cancel(struct resv_table *t, struct store *s, struct resv *r, double now, char **err)
{
    (void)t;
    if (store_begin(s) < 0 || store_cancel_resv(s, r->id, now) < 0) {
        *err = xasprintf("cannot record the cancellation: %s", store_error(s));
        return -1;
    }
    r->cancelled = now;
    return 0;
}

struct resv *resv_find(struct resv_table *t, int64_t id)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].id == id)
            return &t->v[i];
    return NULL;
}
