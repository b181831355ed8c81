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

/* Jain's index (sum x)^2 / (n sum x^2) of x[0..n); 1 when all are 0. */
static double jain_of(const double *x, size_t n)
{
    double sum = 0, sum_sq = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        sum_sq += x[i] * x[i];
    }
    return sum_sq > 0 ? sum * sum / ((double)n * sum_sq) : 1;
}

/* The user slot of job i: its user, or one slot after the names for jobs without. */
static size_t user_slot(const struct replay_trace *t, size_t i)
{
    return t->recs[i].user >= 0 ? (size_t)t->recs[i].user : t->n_names;
}

/* Jain's index over the users' GPU-seconds of the whole trace; *users: how many. */
static double jain_total(const struct replay_trace *t, const struct replay_outcome *o,
                         size_t *users)
{
    size_t slots = t->n_names + 1;
    double *gpu_s = xcalloc(slots, sizeof(*gpu_s));
    char *seen = xcalloc(slots, 1);
    for (size_t i = 0; i < o->n; i++) {
        if (!o->jobs[i].started)
            continue;
        gpu_s[user_slot(t, i)] += t->recs[i].gpus * o->jobs[i].run;
        seen[user_slot(t, i)] = 1;
    }
    *users = 0;
    for (size_t u = 0; u < slots; u++)
        if (seen[u])
            gpu_s[(*users)++] = gpu_s[u];
    double j = *users ? jain_of(gpu_s, *users) : NAN;
    free(gpu_s);
    free(seen);
    return j;
}

/* The windows [w0, w1] that the interval [a, b) (seconds from the start) touches. */
static void window_span(double a, double b, double width, size_t *w0, size_t *w1)
{
    *w0 = (size_t)(a / width);
    *w1 = b > a ? (size_t)(nextafter(b, a) / width) : *w0;
}

/* The windowed index of struct replay_metrics.jain. Per window: each user's GPU-seconds
 * (the overlap of their jobs' runs), whether they had a job waiting or running (a
 * difference array per user), and whether any job waited. */
static double jain_windowed(const struct replay_trace *t, const struct replay_outcome *o,
                            double first, double last, size_t *contended)
{
    size_t slots = t->n_names + 1;
    double width = REPLAY_FAIR_WINDOW;
    /* Wider windows for a very long trace with many users (memory: slots x windows). */
    while ((last - first) / width * (double)slots > 2e7)
        width *= 2;
    size_t nw = (size_t)((last - first) / width) + 1;
    double *gpu_s = xcalloc(slots * nw, sizeof(*gpu_s));
    int *active = xcalloc(slots * (nw + 1), sizeof(*active));
    int *waiting = xcalloc(nw + 1, sizeof(*waiting));
    for (size_t i = 0; i < o->n; i++) {
        const struct replay_job_result *r = &o->jobs[i];
        if (!r->started)
            continue;
        size_t u = user_slot(t, i), w0, w1;
        double submit = t->recs[i].submit - first, start = submit + r->wait, end = start + r->run;
        window_span(submit, end, width, &w0, &w1);
        active[u * (nw + 1) + w0]++;
        active[u * (nw + 1) + w1 + 1]--;
        if (r->wait > 0) {
            window_span(submit, start, width, &w0, &w1);
            waiting[w0]++;
            waiting[w1 + 1]--;
        }
        window_span(start, end, width, &w0, &w1);
        for (size_t w = w0; w <= w1 && end > start; w++) {
            double overlap = fmin(end, (double)(w + 1) * width) - fmax(start, (double)w * width);
            gpu_s[u * nw + w] += t->recs[i].gpus * fmax(overlap, 0);
        }
    }
    double sum = 0, *x = xmalloc(slots * sizeof(*x));
    int *users_active = xcalloc(slots, sizeof(*users_active));
    int waits = 0;
    *contended = 0;
    for (size_t w = 0; w < nw; w++) {
        waits += waiting[w];
        size_t n = 0;
        for (size_t u = 0; u < slots; u++) {
            users_active[u] += active[u * (nw + 1) + w];
            if (users_active[u] > 0)
                x[n++] = gpu_s[u * nw + w];
        }
        if (waits > 0 && n >= 2) {
            sum += jain_of(x, n);
            (*contended)++;
        }
    }
    free(users_active);
    free(x);
    free(waiting);
    free(active);
    free(gpu_s);
    return *contended ? sum / (double)*contended : NAN;
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
    m->jain_total = jain_total(t, o, &m->users);
    m->jain = m->jobs ? jain_windowed(t, o, first, last, &m->contended_windows) : NAN;
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
