/* body_budget: per-uid and total bytes of the bodies being received (see body_budget.h). */
#include "body_budget.h"

#include <stdbool.h>
#include <stdlib.h>

#include "util.h"

/* The bytes one uid's bodies hold. */
struct uid_bytes {
    uid_t uid;
    uint64_t bytes;
};

struct body_budget {
    uint64_t total;
    struct uid_bytes *uids; /* the uids holding some (a few at a time: a linear search) */
    size_t n_uids, cap_uids;
};

struct body_budget *body_budget_new(void)
{
    return xcalloc(1, sizeof(struct body_budget));
}

void body_budget_free(struct body_budget *b)
{
    if (!b)
        return;
    free(b->uids);
    free(b);
}

int64_t body_budget_share(const struct gflow_limits *lim)
{
    return lim->max_body_bytes_per_user > lim->max_request_bytes ? lim->max_body_bytes_per_user
                                                                 : lim->max_request_bytes;
}

static struct uid_bytes *uid_slot(struct body_budget *b, uid_t uid, bool create)
{
    for (size_t i = 0; i < b->n_uids; i++)
        if (b->uids[i].uid == uid)
            return &b->uids[i];
    if (!create)
        return NULL;
    if (b->n_uids == b->cap_uids) {
        b->cap_uids = b->cap_uids ? 2 * b->cap_uids : 8;
        b->uids = xrealloc(b->uids, b->cap_uids * sizeof(*b->uids));
    }
    b->uids[b->n_uids] = (struct uid_bytes){uid, 0};
    return &b->uids[b->n_uids++];
}

unsigned body_budget_take(struct body_budget *b, const struct gflow_limits *lim, uid_t uid,
                          uint64_t n)
{
    struct uid_bytes *u = uid_slot(b, uid, false);
    uint64_t held = u ? u->bytes : 0;
    if (held + n > (uint64_t)body_budget_share(lim))
        return 429;
    if (b->total + n > (uint64_t)lim->max_body_bytes_in_flight)
        return 503;
    if (!u)
        u = uid_slot(b, uid, true);
    u->bytes += n;
    b->total += n;
    return 0;
}

bool body_budget_over_share(const struct body_budget *b, const struct gflow_limits *lim, uid_t uid,
                            uint64_t n, uid_t *victim)
{
    uint64_t held = 0, most = 0;
    size_t uids = b->n_uids;
    const struct uid_bytes *top = NULL;
    bool found = false;
    for (size_t i = 0; i < b->n_uids; i++) {
        if (b->uids[i].uid == uid) {
            held = b->uids[i].bytes;
            found = true;
        } else if (b->uids[i].bytes > most) {
            most = b->uids[i].bytes;
            top = &b->uids[i];
        }
    }
    if (!found)
        uids++;
    uint64_t fair = (uint64_t)lim->max_body_bytes_in_flight / uids;
    if (!top || held + n > fair || most <= fair)
        return false;
    *victim = top->uid;
    return true;
}

void body_budget_give(struct body_budget *b, uid_t uid, uint64_t n)
{
    struct uid_bytes *u = uid_slot(b, uid, false);
    if (!u || n == 0)
        return;
    if (n > u->bytes) /* never: what is given back was taken */
        n = u->bytes;
    u->bytes -= n;
    b->total -= n;
    if (u->bytes == 0)
        *u = b->uids[--b->n_uids];
}
