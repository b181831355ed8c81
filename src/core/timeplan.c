/* timeplan: daemon.default_time_plan (see timeplan.h). */
#include "timeplan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "util.h"

int time_plan_parse(const char *s, struct time_plan *out, char **err)
{
    if (s[0] == 'p' || s[0] == 'P') {
        char *end;
        long v = s[1] >= '0' && s[1] <= '9' ? strtol(s + 1, &end, 10) : -1;
        if (v < 1 || v > 100 || *end) {
            *err = xasprintf("invalid default_time_plan '%s': a percentile is p1 to p100 (e.g. "
                             "p95), or give a duration (e.g. 24h, 08:00:00)",
                             s);
            return -1;
        }
        *out = (struct time_plan){(int)v, 0};
        return 0;
    }
    int64_t secs;
    char *why = NULL;
    if (parse_duration(s, &secs, &why) < 0) {
        free(why);
        *err = xasprintf("invalid default_time_plan '%s': use a percentile of recent run times "
                         "(e.g. p95) or a duration (e.g. 24h, 90m, 08:00:00)",
                         s);
        return -1;
    }
    *out = (struct time_plan){0, (double)secs};
    return 0;
}

void run_history_init(struct run_history *h)
{
    memset(h, 0, sizeof(*h));
}

/* The first position in a[0..n) whose value is >= v. */
static size_t lower_bound(const double *a, size_t n, double v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void run_history_add(struct run_history *h, double secs)
{
    if (!(secs > 0))
        return;
    if (h->n == TIME_PLAN_HISTORY) { /* the oldest leaves the sorted copy */
        size_t at = lower_bound(h->sorted, h->n, h->runs[h->next]);
        memmove(h->sorted + at, h->sorted + at + 1, (h->n - at - 1) * sizeof(*h->sorted));
        h->n--;
    }
    size_t at = lower_bound(h->sorted, h->n, secs);
    memmove(h->sorted + at + 1, h->sorted + at, (h->n - at) * sizeof(*h->sorted));
    h->sorted[at] = secs;
    h->n++;
    h->runs[h->next] = secs;
    h->next = (h->next + 1) % TIME_PLAN_HISTORY;
}

double run_history_percentile(struct run_history *h, int pct)
{
    if (h->n == 0)
        return 0;
    /* Nearest rank: ceil(pct/100 * n), 1-based. */
    size_t rank = ((size_t)pct * h->n + 99) / 100;
    return h->sorted[rank < 1 ? 0 : rank - 1];
}

double time_plan_value(const struct time_plan *p, struct run_history *h, double fallback)
{
    if (p->percentile == 0)
        return p->fixed > 0 ? p->fixed : fallback;
    if (!h || h->n < TIME_PLAN_MIN_RUNS)
        return fallback;
    double v = run_history_percentile(h, p->percentile);
    return v < 1 ? 1 : v;
}
