/* metrics: waits, their percentiles, utilisation, bounded slowdown and fairness. */
#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double replay_percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return NAN;
    size_t rank = (size_t)ceil(p / 100.0 * (double)n - 1e-9);
    return sorted[rank ? rank - 1 : 0];
}

/* Sorts waits[0..n) and summarises them. */
static struct replay_waits waits_summary(double *waits, size_t n)
{
    struct replay_waits w = {.jobs = n, .mean = NAN};
    qsort(waits, n, sizeof(*waits), cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += waits[i];
    if (n)
        w.mean = sum / (double)n;
    w.p50 = replay_percentile(waits, n, 50);
    w.p95 = replay_percentile(waits, n, 95);
    w.p99 = replay_percentile(waits, n, 99);
    return w;
}

/* Jain's index (sum x)^2 / (n sum x^2) over the users' GPU-seconds; jobs without a
 * user count as one user. 1 when there is at most one user or nobody used a GPU. */
static double jain_index(const struct replay_trace *t, const struct replay_outcome *o,
                         size_t *users)
{
    size_t slots = t->n_names + 1; /* the last one: no user given */
    double *gpu_s = xcalloc(slots, sizeof(*gpu_s));
    char *seen = xcalloc(slots, 1);
    for (size_t i = 0; i < o->n; i++) {
        if (!o->jobs[i].started)
            continue;
        size_t u = t->recs[i].user >= 0 ? (size_t)t->recs[i].user : t->n_names;
        gpu_s[u] += t->recs[i].gpus * o->jobs[i].run;
        seen[u] = 1;
    }
    double sum = 0, sum_sq = 0;
    *users = 0;
    for (size_t u = 0; u < slots; u++)
        if (seen[u]) {
            (*users)++;
            sum += gpu_s[u];
            sum_sq += gpu_s[u] * gpu_s[u];
        }
    free(gpu_s);
    free(seen);
    return sum_sq > 0 ? sum * sum / ((double)*users * sum_sq) : 1;
}

void replay_metrics_compute(const struct replay_trace *t, const struct replay_outcome *o,
                            struct replay_metrics *m)
{
    memset(m, 0, sizeof(*m));
    m->skipped = o->skipped;
    double *all = xmalloc((o->n ? o->n : 1) * sizeof(*all));
    double *big = xmalloc((o->n ? o->n : 1) * sizeof(*big));
    size_t n_big = 0;
    double first = INFINITY, last = -INFINITY, gpu_s = 0, slowdown = 0;
    for (size_t i = 0; i < o->n; i++) {
        const struct replay_job_result *r = &o->jobs[i];
        if (!r->started)
            continue;
        const struct replay_rec *rec = &t->recs[i];
        all[m->jobs++] = r->wait;
        if (rec->gpus >= REPLAY_BIG_GPUS)
            big[n_big++] = r->wait;
        if (r->wait > m->max_wait)
            m->max_wait = r->wait;
        first = fmin(first, rec->submit);
        last = fmax(last, rec->submit + r->wait + r->run);
        gpu_s += rec->gpus * r->run;
        slowdown += fmax(1, (r->wait + r->run) / fmax(r->run, REPLAY_SLOWDOWN_BOUND));
    }
    m->all = waits_summary(all, m->jobs);
    m->big = waits_summary(big, n_big);
    m->makespan = m->jobs ? last - first : 0;
    m->utilisation = m->makespan > 0 ? gpu_s / (o->n_gpus * m->makespan) : 0;
    m->slowdown = m->jobs ? slowdown / (double)m->jobs : NAN;
    m->jain = jain_index(t, o, &m->users);
    free(all);
    free(big);
}

double replay_offered_load(const struct replay_trace *t, int n_gpus)
{
    double demand = 0, first = INFINITY, last = -INFINITY;
    for (size_t i = 0; i < t->n; i++) {
        const struct replay_rec *r = &t->recs[i];
        if (r->gpus > n_gpus)
            continue;
        double run = r->time_limit > 0 && r->time_limit < r->runtime ? r->time_limit : r->runtime;
        demand += r->gpus * run;
        first = fmin(first, r->submit);
        last = fmax(last, r->submit);
    }
    return last > first ? demand / (n_gpus * (last - first)) : 0;
}

void replay_write_cdf(FILE *f, const char *policy, const struct replay_outcome *o)
{
    double *w = xmalloc((o->n ? o->n : 1) * sizeof(*w));
    size_t n = 0;
    for (size_t i = 0; i < o->n; i++)
        if (o->jobs[i].started)
            w[n++] = o->jobs[i].wait;
    qsort(w, n, sizeof(*w), cmp_double);
    fprintf(f, "# policy %s: wait_s fraction_of_jobs_waiting_at_most (%zu jobs)\n", policy, n);
    /* Every job's point for small traces; 1000 evenly spaced ranks for large ones. */
    size_t step = n > 1000 ? n / 1000 : 1;
    for (size_t i = 0; i < n; i += step)
        fprintf(f, "%.3f %.6f\n", w[i], (double)(i + 1) / (double)n);
    if (n && (n - 1) % step)
        fprintf(f, "%.3f %.6f\n", w[n - 1], 1.0);
    fprintf(f, "\n\n");
    free(w);
}
