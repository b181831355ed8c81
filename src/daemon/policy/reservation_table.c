/* reservation_table: the daemon's GPU reservations (see reservation_table.h). */
#include "reservation_table.h"

#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "store/store.h"
#include "timefmt.h"
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

/* ---- the live ones, by start ------------------------------------------------------ */

static bool resv_live(const struct resv *r, double now)
{
    return r->cancelled == 0 && r->end > now;
}

static bool before(const struct scheduler_reservation *a, const struct scheduler_reservation *b)
{
    return a->start < b->start || (a->start == b->start && a->id < b->id);
}

static int cmp_start(const void *a, const void *b)
{
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

static void cur_note_end(struct resv_table *t, double end)
{
    if (t->cur_min_end == 0 || end < t->cur_min_end)
        t->cur_min_end = end;
}

/* Room in cur for one more. */
static void cur_grow(struct resv_table *t)
{
    if (t->n_cur == t->cur_cap) {
        t->cur_cap = t->cur_cap ? t->cur_cap * 2 : 16;
        t->cur = xrealloc(t->cur, t->cur_cap * sizeof(*t->cur));
    }
}

/* The one copy of user's name that cur points to (a few holders: a short list). */
static const char *intern(struct resv_table *t, const char *user)
{
    for (size_t i = 0; i < t->n_names; i++)
        if (strcmp(t->names[i], user) == 0)
            return t->names[i];
    if (t->n_names == t->names_cap) {
        t->names_cap = t->names_cap ? t->names_cap * 2 : 8;
        t->names = xrealloc(t->names, t->names_cap * sizeof(*t->names));
    }
    return t->names[t->n_names++] = xstrdup(user);
}

/* Adds r to cur at its place by start (a new one usually goes last: a binary search,
 * no move). */
static void cur_insert(struct resv_table *t, const struct resv *r)
{
    struct scheduler_reservation x = {r->id, intern(t, r->user), r->start, r->end, r->gpus};
    cur_grow(t);
    size_t lo = 0, hi = t->n_cur;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (before(&t->cur[mid], &x))
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&t->cur[lo + 1], &t->cur[lo], (t->n_cur - lo) * sizeof(*t->cur));
    t->cur[lo] = x;
    t->n_cur++;
    cur_note_end(t, r->end);
}

/* Drops from cur what is over at now (keeping the order). */
static void cur_drop_over(struct resv_table *t, double now)
{
    size_t k = 0;
    t->cur_min_end = 0;
    for (size_t i = 0; i < t->n_cur; i++) {
        if (t->cur[i].end <= now)
            continue;
        t->cur[k++] = t->cur[i];
        cur_note_end(t, t->cur[i].end);
    }
    t->n_cur = k;
}

int resv_load(struct resv_table *t, struct store *s, char **err)
{
    memset(t, 0, sizeof(*t));
    if (store_load_resvs(s, load_cb, t) < 0) {
        *err = xasprintf("loading the reservations: %s", store_error(s));
        return -1;
    }
    /* cur is kept for any time from now on; what is over already is dropped at the first
     * resv_current. */
    for (size_t i = 0; i < t->n; i++) {
        if (!resv_live(&t->v[i], 0))
            continue;
        cur_grow(t);
        const struct resv *r = &t->v[i];
        t->cur[t->n_cur++] =
            (struct scheduler_reservation){r->id, r->user, r->start, r->end, r->gpus};
        cur_note_end(t, r->end);
    }
    if (t->n_cur > 1)
        qsort(t->cur, t->n_cur, sizeof(*t->cur), cmp_start);
    return 0;
}

void resv_free(struct resv_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].user);
    free(t->v);
    free(t->cur);
    for (size_t i = 0; i < t->n_names; i++)
        free(t->names[i]);
    free(t->names);
    memset(t, 0, sizeof(*t));
}

const struct scheduler_reservation *resv_current(struct resv_table *t, double now, size_t *n)
{
    if (t->cur_min_end > 0 && t->cur_min_end <= now)
        cur_drop_over(t, now);
    *n = t->n_cur;
    return t->cur;
}

double resv_next_change(struct resv_table *t, double now)
{
    size_t n;
    const struct scheduler_reservation *c = resv_current(t, now, &n);
    /* By start: the ones begun (a few: windows on one GPU do not overlap) bring their
     * ends; the first not begun brings its start, and any later one starts later. */
    double next = 0;
    for (size_t i = 0; i < n; i++) {
        double at = c[i].start > now ? c[i].start : c[i].end;
        if (next == 0 || at < next)
            next = at;
        if (c[i].start > now)
            break;
    }
    return next;
}

void resv_held_by(struct resv_table *t, const char *user, double now, size_t *count, uint64_t *gpus)
{
    size_t n;
    const struct scheduler_reservation *c = resv_current(t, now, &n);
    *count = 0;
    *gpus = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(c[i].user, user) != 0)
            continue;
        (*count)++;
        *gpus |= c[i].gpus;
    }
}

/* ---- a user's limits ([reservations]) ---------------------------------------------- */

/* Why q breaks a limit that does not depend on its GPUs (how long, how far ahead, how
 * many at once; `held` of the user's own), or NULL. */
static char *over_time_or_count(const struct gflow_config *c, const struct resv_request *q,
                                size_t held, double now)
{
    int64_t duration = (int64_t)(q->end - q->start);
    if (duration > c->parsed.reservations_max_duration_secs) {
        char *d = format_duration(duration);
        char *msg = xasprintf("--duration %s is longer than users may reserve: at most %s "
                              "(reservations.max_duration = \"%s\"); ask an admin for longer",
                              d, c->reservations_max_duration, c->reservations_max_duration);
        free(d);
        return msg;
    }
    int64_t ahead = (int64_t)(q->start - now);
    if (ahead > c->parsed.reservations_max_ahead_secs) {
        char *a = format_duration(ahead);
        char *msg = xasprintf("--start is %s ahead; users may begin a reservation at most %s "
                              "ahead (reservations.max_ahead = \"%s\"); pick an earlier start "
                              "or ask an admin",
                              a, c->reservations_max_ahead, c->reservations_max_ahead);
        free(a);
        return msg;
    }
    if ((int64_t)held >= c->reservations_max_per_user)
        return xasprintf("you hold %zu reservation%s (pending or active); users may hold at "
                         "most %lld at once (reservations.max_per_user = %lld); cancel one "
                         "or ask an admin",
                         held, held == 1 ? "" : "s", (long long)c->reservations_max_per_user,
                         (long long)c->reservations_max_per_user);
    return NULL;
}

/* Why reserving `gpus` GPUs in all (the user's pending and active reservations with the
 * new one) is over reservations.max_gpus, or NULL. */
static char *over_gpus(const struct gflow_config *c, int gpus)
{
    if (gpus <= c->reservations_max_gpus)
        return NULL;
    return xasprintf("this would make %d GPU%s reserved for you (with your other pending and "
                     "active reservations); users may hold at most %lld "
                     "(reservations.max_gpus = %lld); ask an admin for more",
                     gpus, plural_s(gpus), (long long)c->reservations_max_gpus,
                     (long long)c->reservations_max_gpus);
}

/* ---- making and cancelling ---------------------------------------------------------- */

const struct resv *resv_create(struct resv_table *t, struct store *s, const struct resv_request *q,
                               const struct gflow_config *limits, uint64_t present, double now,
                               int *status, char **err)
{
    size_t held = 0;
    uint64_t held_gpus = 0;
    if (limits) {
        resv_held_by(t, q->user, now, &held, &held_gpus);
        /* --gpus N: at least N, whichever it gets; --gpu-spec: known now. */
        int at_least = q->want_mask ? __builtin_popcountll(q->want_mask | held_gpus) : q->count;
        if ((*err = over_time_or_count(limits, q, held, now)) ||
            (*err = over_gpus(limits, at_least))) {
            *status = 403;
            return NULL;
        }
    }
    size_t n;
    const struct scheduler_reservation *others = resv_current(t, now, &n);
    uint64_t gpus;
    int rc = reservation_pick_gpus(others, n, q->start, q->end, present, q->want_mask, q->count,
                                   &gpus, err);
    if (rc < 0) {
        *status = rc == -2 ? 409 : 400;
        return NULL;
    }
    if (limits && (*err = over_gpus(limits, __builtin_popcountll(gpus | held_gpus)))) {
        *status = 403;
        return NULL;
    }
    struct resv r = {
        .id = t->n ? t->v[t->n - 1].id + 1 : 1,
        .user = xstrdup(q->user),
        .gpu_count = q->want_mask ? 0 : q->count,
        .gpus = gpus,
        .start = q->start,
        .end = q->end,
        .created = now,
    };
    if (store_begin(s) < 0 || store_insert_resv(s, &r) < 0) {
        *status = 500;
        *err = xasprintf("cannot record the reservation: %s", store_error(s));
        free(r.user);
        return NULL;
    }
    append(t, &r);
    cur_insert(t, &r);
    return &t->v[t->n - 1];
}

int resv_cancel(struct resv_table *t, struct store *s, struct resv *r, double now, char **err)
{
    if (store_begin(s) < 0 || store_cancel_resv(s, r->id, now) < 0) {
        *err = xasprintf("cannot record the cancellation: %s", store_error(s));
        return -1;
    }
    r->cancelled = now;
    for (size_t i = 0; i < t->n_cur; i++) {
        if (t->cur[i].id != r->id)
            continue;
        memmove(&t->cur[i], &t->cur[i + 1], (t->n_cur - i - 1) * sizeof(*t->cur));
        t->n_cur--;
        break;
    }
    return 0;
}

struct resv *resv_find(struct resv_table *t, int64_t id)
{
    size_t lo = 0, hi = t->n; /* v is by id ascending */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->v[lo].id == id ? &t->v[lo] : NULL;
}
