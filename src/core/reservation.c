/* reservation: the pure rules of GPU reservations (see reservation.h). */
#include "reservation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* Whether a and b name the same holder (NULL holds nothing). The daemon hands the pass
 * one string per holder, so the same holder is mostly the same pointer. */
static bool same_user(const char *a, const char *b)
{
    if (a == b)
        return a != NULL;
    return a && b && strcmp(a, b) == 0;
}

void reservation_index_build(struct reservation_index *x, const struct scheduler_reservation *r,
                             size_t n, double now)
{
    x->gpus = 0;
    for (size_t i = 0; i < n; i++) {
        for (uint64_t m = r[i].gpus; m; m &= m - 1) {
            int g = __builtin_ctzll(m);
            if (!(x->gpus >> g & 1)) { /* the first window seen on GPU g */
                x->gpus |= 1ULL << g;
                x->first[g] = r[i].start;
                x->first_user[g] = r[i].user;
                x->other[g] = INFINITY;
                x->active_user[g] = NULL;
            } else if (r[i].start < x->first[g]) {
                /* A new earliest: the old one is the earliest of another holder, unless
                 * both are the same holder's. */
                if (!same_user(r[i].user, x->first_user[g]) && x->first[g] < x->other[g])
                    x->other[g] = x->first[g];
                x->first[g] = r[i].start;
                x->first_user[g] = r[i].user;
            } else if (r[i].start < x->other[g] && !same_user(r[i].user, x->first_user[g])) {
                x->other[g] = r[i].start;
            }
            if (r[i].start <= now && now < r[i].end)
                x->active_user[g] = r[i].user;
        }
    }
}

uint64_t reservation_blocked(const struct reservation_index *x, const char *user, double now,
                             double runtime)
{
    uint64_t m = 0;
    for (uint64_t g = x->gpus; g; g &= g - 1) {
        int i = __builtin_ctzll(g);
        double first = same_user(user, x->first_user[i]) ? x->other[i] : x->first[i];
        if (now + runtime > first)
            m |= 1ULL << i;
    }
    return m;
}

uint64_t reservation_held(const struct reservation_index *x, const char *user)
{
    uint64_t m = 0;
    for (uint64_t g = x->gpus; g; g &= g - 1) {
        int i = __builtin_ctzll(g);
        if (same_user(user, x->active_user[i]))
            m |= 1ULL << i;
    }
    return m;
}

double reservation_free_from(const struct scheduler_reservation *r, size_t n, int index,
                             const char *user, double t, double runtime)
{
    if (index < 0 || index >= 64)
        return t;
    /* By start: a window that begins after the job would end ends the walk, as every
     * later one begins later still; one it overlaps moves it past its end. Whether a
     * window is the user's own is asked once per run of one holder's windows. */
    const char *holder = NULL;
    bool own = false;
    for (size_t i = 0; i < n && r[i].start < t + runtime; i++) {
        const struct scheduler_reservation *x = &r[i];
        if (!(x->gpus >> index & 1) || t >= x->end)
            continue;
        if (x->user != holder || !holder) {
            holder = x->user;
            own = same_user(holder, user);
        }
        if (!own)
            t = x->end;
    }
    return t;
}

static const char *const status_names[] = {"pending", "active", "completed", "cancelled"};

const char *reservation_status_name(enum reservation_status s)
{
    return (unsigned)s < 4 ? status_names[s] : "unknown";
}

int reservation_status_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (name && strcasecmp(name, status_names[i]) == 0)
            return i;
    return -1;
}

enum reservation_status reservation_status_at(double start, double end, double cancelled_at,
                                              double now)
{
    if (cancelled_at > 0)
        return RESERVATION_CANCELLED;
    if (now < start)
        return RESERVATION_PENDING;
    return now < end ? RESERVATION_ACTIVE : RESERVATION_COMPLETED;
}

/* "0,2,3" for an index mask (malloc'd). */
static char *index_list(uint64_t m)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (; m; m &= m - 1)
        strbuf_addf(&sb, "%s%d", sb.len ? "," : "", __builtin_ctzll(m));
    return strbuf_detach(&sb);
}

int reservation_pick_gpus(const struct scheduler_reservation *others, size_t n, double start,
                          double end, uint64_t present, uint64_t want_mask, int count,
                          uint64_t *out, char **err)
{
    *out = 0;
    *err = NULL;
    if (!present) {
        *err = xstrdup("this machine has no GPUs to reserve");
        return -1;
    }
    uint64_t taken = 0;
    for (size_t i = 0; i < n; i++)
        if (others[i].start < end && start < others[i].end)
            taken |= others[i].gpus;
    if (want_mask) {
        uint64_t missing = want_mask & ~present;
        if (missing) {
            char *list = index_list(missing), *there = index_list(present);
            *err = xasprintf("--gpu-spec: no GPU %s on this machine (its GPUs: %s)", list, there);
            free(list);
            free(there);
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t clash = want_mask & others[i].gpus;
            if (clash && others[i].start < end && start < others[i].end) {
                char *list = index_list(clash);
                *err =
                    xasprintf("GPU %s already reserved in that window by reservation %lld "
                              "(%s); pick other GPUs or another time",
                              list, (long long)others[i].id, others[i].user ? others[i].user : "?");
                free(list);
                return -2;
            }
        }
        *out = want_mask;
        return 0;
    }
    uint64_t free_gpus = present & ~taken;
    int n_present = __builtin_popcountll(present), n_free = __builtin_popcountll(free_gpus);
    if (count < 1) {
        *err = xasprintf("--gpus %d: reserve at least 1 GPU", count);
        return -1;
    }
    if (count > n_present) {
        *err = xasprintf("--gpus %d: this machine has %d GPU%s", count, n_present,
                         n_present == 1 ? "" : "s");
        return -1;
    }
    if (count > n_free) {
        *err = xasprintf("--gpus %d: only %d of the %d GPUs are free of other reservations in "
                         "that window; ask for fewer or another time (gctl reserve list)",
                         count, n_free, n_present);
        return -2;
    }
    for (int k = 0; k < count; k++) {
        int top = 63 - __builtin_clzll(free_gpus);
        *out |= 1ULL << top;
        free_gpus &= ~(1ULL << top);
    }
    return 0;
}
