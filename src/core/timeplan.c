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

void run_history_add(struct run_history *h, double secs)
{
    if (!(secs > 0))
        return;
    h->runs[h->next] = secs;
    h->next = (h->next + 1) % TIME_PLAN_HISTORY;
    if (h->n < TIME_PLAN_HISTORY)
        h->n++;
    h->cached_pct = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double run_history_percentile(struct run_history *h, int pct)
{
    if (h->n == 0)
        return 0;
    if (h->cached_pct == pct)
        return h->cached;
    double copy[TIME_PLAN_HISTORY];
    memcpy(copy, h->runs, h->n * sizeof(*copy));
    /* Nearest rank: ceil(pct/100 * n), 1-based. */
    size_t rank = ((size_t)pct * h->n + 99) / 100;
    if (rank < 1)
        rank = 1;
    qsort(copy, h->n, sizeof(*copy), cmp_double); /* 1,000 at most, once per change */
    h->cached = copy[rank - 1];
    h->cached_pct = pct;
    return h->cached;
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
