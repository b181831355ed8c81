/* reservation: the pure rules of GPU reservations (see reservation.h). */
#include "reservation.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

static bool holds(const struct scheduler_reservation *r, const char *user)
{
    return user && r->user && strcmp(r->user, user) == 0;
}

uint64_t reservation_blocked(const struct scheduler_reservation *r, size_t n, const char *user,
                             double now, double runtime)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!holds(&r[i], user) && r[i].end > now && now + runtime > r[i].start)
            m |= r[i].gpus;
    return m;
}

uint64_t reservation_held(const struct scheduler_reservation *r, size_t n, const char *user,
                          double now)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (holds(&r[i], user) && r[i].start <= now && now < r[i].end)
            m |= r[i].gpus;
    return m;
}

double reservation_free_from(const struct scheduler_reservation *r, size_t n, int index,
                             const char *user, double t, double runtime)
{
    if (index < 0 || index >= 64)
        return t;
    /* Each move lands at the end of a window, so n + 1 rounds settle it. */
    for (size_t round = 0; round <= n; round++) {
        bool moved = false;
        for (size_t i = 0; i < n; i++) {
            const struct scheduler_reservation *x = &r[i];
            if (holds(x, user) || !(x->gpus >> index & 1))
                continue;
            if (t < x->end && t + runtime > x->start) {
                t = x->end;
                moved = true;
            }
        }
        if (!moved)
            break;
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
