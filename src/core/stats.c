/* stats: gstats' aggregation (stats.h). Groups are found by name through a small open
 * addressing table, so a million jobs cost a million lookups of a few probes each. */
#include "stats.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "util.h"

#define TOP_REASONS 3
#define NO_GROUP "(none)" /* a job without a project, or without GPUs (--by gpu) */

struct group {
    char *name;
    int64_t by_state[JOB_STATE_COUNT];
    double gpu_secs;
    double run_sum;
    int64_t n_run;
    double *waits;
    size_t n_waits, cap_waits;
    int64_t reasons[JOB_REASON_COUNT];
    double energy_wh;
    int64_t n_energy; /* jobs with a known energy */
};

struct stats {
    enum stats_by by;
    double since, until, now;
    struct group **groups;
    size_t n_groups, cap_groups;
    size_t *slots; /* index + 1 into groups; 0: empty. Size a power of two. */
    size_t n_slots;
    struct group total;
    /* Energy per user and per project (only their energy fields are used). */
    struct stats *energy_users, *energy_projects;
};

int stats_by_parse(const char *s, enum stats_by *out)
{
    static const char *const names[] = {"user", "project", "gpu"};
    for (int i = 0; i < 3; i++) {
        if (!strcmp(s, names[i])) {
            *out = (enum stats_by)i;
            return 0;
        }
    }
    return -1;
}

const char *stats_by_name(enum stats_by by)
{
    return by == STATS_BY_PROJECT ? "project" : by == STATS_BY_GPU ? "gpu" : "user";
}

struct stats *stats_new(enum stats_by by, double since, double until, double now)
{
    struct stats *s = xcalloc(1, sizeof(*s));
    s->by = by;
    s->since = since;
    s->until = until;
    s->now = now;
    s->n_slots = 64;
    s->slots = xcalloc(s->n_slots, sizeof(*s->slots));
    return s;
}

static void group_clear(struct group *g)
{
    free(g->name);
    free(g->waits);
}

void stats_free(struct stats *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_groups; i++) {
        group_clear(s->groups[i]);
        free(s->groups[i]);
    }
    free(s->groups);
    free(s->slots);
    group_clear(&s->total);
    stats_free(s->energy_users);
    stats_free(s->energy_projects);
    free(s);
}

static size_t name_hash(const char *p, size_t len)
{
    size_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

static void slots_grow(struct stats *s)
{
    free(s->slots);
    s->n_slots *= 2;
    s->slots = xcalloc(s->n_slots, sizeof(*s->slots));
    for (size_t i = 0; i < s->n_groups; i++) {
        const char *n = s->groups[i]->name;
        size_t at = name_hash(n, strlen(n)) & (s->n_slots - 1);
        while (s->slots[at])
            at = (at + 1) & (s->n_slots - 1);
        s->slots[at] = i + 1;
    }
}

/* The group named by the len bytes at name, made on first use. */
static struct group *group_get(struct stats *s, const char *name, size_t len)
{
    size_t at = name_hash(name, len) & (s->n_slots - 1);
    for (; s->slots[at]; at = (at + 1) & (s->n_slots - 1)) {
        struct group *g = s->groups[s->slots[at] - 1];
        if (strlen(g->name) == len && !memcmp(g->name, name, len))
            return g;
    }
    if (s->n_groups == s->cap_groups) {
        s->cap_groups = s->cap_groups ? s->cap_groups * 2 : 16;
        s->groups = xrealloc(s->groups, s->cap_groups * sizeof(*s->groups));
    }
    struct group *g = xcalloc(1, sizeof(*g));
    g->name = xmalloc(len + 1);
    memcpy(g->name, name, len);
    g->name[len] = '\0';
    s->groups[s->n_groups++] = g;
    s->slots[at] = s->n_groups;
    if (s->n_groups * 2 > s->n_slots)
        slots_grow(s);
    return g;
}

/* How long j has run: to its end, or (running) to now but not past the period. */
static double run_secs(const struct stats *s, const struct stats_job *j)
{
    if (j->start_time <= 0)
        return 0;
    double end = j->end_time > 0 ? j->end_time : (s->now < s->until ? s->now : s->until);
    return end > j->start_time ? end - j->start_time : 0;
}

/* The part of j's energy a group with gpus of its GPUs' worth holds: all of it, but one
 * GPU's share in a group per GPU (gpus 1 of j->gpus). */
static double gpus_share_of(const struct stats_job *j, double gpus)
{
    return j->gpus > 1 && gpus < (double)j->gpus ? gpus / (double)j->gpus : 1.0;
}

/* Counts j in g, with gpus GPUs' worth of its run time. */
static void group_add(struct group *g, const struct stats_job *j, double run, double gpus)
{
    if (j->state >= 0 && j->state < JOB_STATE_COUNT)
        g->by_state[j->state]++;
    g->gpu_secs += run * gpus;
    if (j->start_time > 0 && j->submit_time > 0) {
        if (g->n_waits == g->cap_waits) {
            g->cap_waits = g->cap_waits ? g->cap_waits * 2 : 64;
            g->waits = xrealloc(g->waits, g->cap_waits * sizeof(*g->waits));
        }
        double wait = j->start_time - j->submit_time;
        g->waits[g->n_waits++] = wait > 0 ? wait : 0;
    }
    if (j->state != JOB_RUNNING && j->start_time > 0) {
        g->run_sum += run;
        g->n_run++;
    }
    bool bad_end = j->state == JOB_FAILED || j->state == JOB_CANCELLED || j->state == JOB_TIMEOUT;
    if (bad_end && j->reason >= 0 && j->reason < JOB_REASON_COUNT)
        g->reasons[j->reason]++;
    if (j->energy_known) {
        g->energy_wh += j->energy_wh * (gpus_share_of(j, gpus));
        g->n_energy++;
    }
}

/* j's energy in a group of the named kind (energy per user, per project). */
static void energy_add(struct stats **t, const char *name, double wh)
{
    if (!*t)
        *t = stats_new(STATS_BY_USER, 0, 0, 0);
    if (!name || !*name)
        name = NO_GROUP;
    struct group *g = group_get(*t, name, strlen(name));
    g->energy_wh += wh;
    g->n_energy++;
}

void stats_add(struct stats *s, const struct stats_job *j)
{
    if (j->energy_known) {
        energy_add(&s->energy_users, j->user, j->energy_wh);
        energy_add(&s->energy_projects, j->project, j->energy_wh);
    }
    double run = run_secs(s, j);
    group_add(&s->total, j, run, (double)j->gpus);
    if (s->by != STATS_BY_GPU) {
        const char *name = s->by == STATS_BY_USER ? j->user : j->project;
        if (!name || !*name)
            name = NO_GROUP;
        group_add(group_get(s, name, strlen(name)), j, run, (double)j->gpus);
        return;
    }
    const char *p = j->gpu_ids ? j->gpu_ids : "";
    bool any = false;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n) {
            group_add(group_get(s, p, n), j, run, 1.0);
            any = true;
        }
        p += n + (p[n] == ',');
    }
    if (!any)
        group_add(group_get(s, NO_GROUP, strlen(NO_GROUP)), j, run, 0.0);
}

static void swap(double *a, double *b)
{
    double t = *a;
    *a = *b;
    *b = t;
}

/* The value that would be v[k] were v sorted (Hoare's selection, median-of-three pivot):
 * linear on average, where sorting a million waits per group would not be. v is
 * reordered. */
static double select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < v[lo])
            swap(&v[mid], &v[lo]);
        if (v[hi] < v[lo])
            swap(&v[hi], &v[lo]);
        if (v[hi] < v[mid])
            swap(&v[hi], &v[mid]);
        double pivot = v[mid];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                swap(&v[i], &v[j]);
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

double stats_percentile(double *v, size_t n, double p)
{
    if (!n)
        return 0;
    double rank = ceil(p / 100.0 * (double)n);
    size_t at = rank < 1 ? 0 : (size_t)rank - 1;
    return select_kth(v, n, at < n ? at : n - 1);
}

/* A JSON number rounded to ms (or to 1e-6 for rates and hours), or null without data. */
static json_t *rounded(double v, double unit, bool have)
{
    /* Divided by the whole scale, not multiplied by the unit: 9 * 1e-3 is
     * 0.009000000000000001, 9 / 1000.0 the double nearest 0.009, printed "0.009". */
    double scale = round(1.0 / unit);
    return have ? json_real(round(v * scale) / scale) : json_null();
}

/* A failed or cancelled job's reason as gqueue shows it; "None" when it has none. */
static const char *reason_label(int r)
{
    const char *name = job_reason_name((enum job_reason)r);
    return *name ? name : r == JOB_REASON_OTHER ? "Other" : "None";
}

static json_t *top_reasons(const struct group *g)
{
    json_t *out = json_array();
    bool taken[JOB_REASON_COUNT] = {false};
    for (int k = 0; k < TOP_REASONS; k++) {
        int best = -1;
        for (int r = 0; r < JOB_REASON_COUNT; r++)
            if (!taken[r] && g->reasons[r] > 0 && (best < 0 || g->reasons[r] > g->reasons[best]))
                best = r;
        if (best < 0)
            break;
        taken[best] = true;
        json_array_append_new(out, json_pack("{s:s, s:I}", "reason", reason_label(best), "count",
                                             (json_int_t)g->reasons[best]));
    }
    return out;
}

static json_t *group_json(struct group *g, const char *name)
{
    int64_t ended = g->by_state[JOB_FINISHED] + g->by_state[JOB_FAILED] +
                    g->by_state[JOB_CANCELLED] + g->by_state[JOB_TIMEOUT];
    int64_t bad = g->by_state[JOB_FAILED] + g->by_state[JOB_TIMEOUT];
    double wait_sum = 0;
    for (size_t i = 0; i < g->n_waits; i++)
        wait_sum += g->waits[i];
    double mean_wait = g->n_waits ? wait_sum / (double)g->n_waits : 0;
    double p95 = stats_percentile(g->waits, g->n_waits, 95);
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "name", name, "jobs",
                          (json_int_t)(ended + g->by_state[JOB_RUNNING]), "running",
                          (json_int_t)g->by_state[JOB_RUNNING], "completed",
                          (json_int_t)g->by_state[JOB_FINISHED], "failed",
                          (json_int_t)g->by_state[JOB_FAILED], "cancelled",
                          (json_int_t)g->by_state[JOB_CANCELLED], "timeout",
                          (json_int_t)g->by_state[JOB_TIMEOUT], "ended", (json_int_t)ended);
    json_object_set_new(o, "gpu_hours", rounded(g->gpu_secs / 3600.0, 1e-6, true));
    json_object_set_new(o, "wait_mean_secs", rounded(mean_wait, 1e-3, g->n_waits > 0));
    json_object_set_new(o, "wait_p95_secs", rounded(p95, 1e-3, g->n_waits > 0));
    json_object_set_new(o, "run_mean_secs",
                        rounded(g->n_run ? g->run_sum / (double)g->n_run : 0, 1e-3, g->n_run > 0));
    json_object_set_new(o, "failure_rate",
                        rounded(ended ? (double)bad / (double)ended : 0, 1e-6, ended > 0));
    json_object_set_new(o, "top_reasons", top_reasons(g));
    json_object_set_new(o, "energy_kwh", rounded(g->energy_wh / 1000.0, 1e-6, g->n_energy > 0));
    return o;
}

static int energy_cmp(const void *pa, const void *pb)
{
    const struct group *a = *(struct group *const *)pa, *b = *(struct group *const *)pb;
    return strcmp(a->name, b->name);
}

/* [{"name", "energy_kwh", "jobs"}] by name. */
static json_t *energy_json(struct stats *t)
{
    json_t *out = json_array();
    if (!t)
        return out;
    if (t->n_groups > 1)
        qsort(t->groups, t->n_groups, sizeof(*t->groups), energy_cmp);
    for (size_t i = 0; i < t->n_groups; i++) {
        const struct group *g = t->groups[i];
        json_array_append_new(out, json_pack("{s:s, s:o, s:I}", "name", g->name, "energy_kwh",
                                             rounded(g->energy_wh / 1000.0, 1e-6, true), "jobs",
                                             (json_int_t)g->n_energy));
    }
    return out;
}

/* GPUs in index order, "(none)" last; users and projects by name. */
static int group_cmp(const void *pa, const void *pb, void *arg)
{
    const struct group *a = *(struct group *const *)pa, *b = *(struct group *const *)pb;
    if (*(const enum stats_by *)arg == STATS_BY_GPU) {
        bool na = !strcmp(a->name, NO_GROUP), nb = !strcmp(b->name, NO_GROUP);
        if (na != nb)
            return na - nb;
        long ia = strtol(a->name, NULL, 10), ib = strtol(b->name, NULL, 10);
        if (ia != ib)
            return ia < ib ? -1 : 1;
    }
    return strcmp(a->name, b->name);
}

json_t *stats_json(const struct stats *s)
{
    struct stats *m = (struct stats *)s; /* the percentiles sort the waits in place */
    if (m->n_groups > 1)                 /* none: groups is NULL, which qsort_r may not be given */
        qsort_r(m->groups, m->n_groups, sizeof(*m->groups), group_cmp, &m->by);
    json_t *groups = json_array();
    for (size_t i = 0; i < m->n_groups; i++)
        json_array_append_new(groups, group_json(m->groups[i], m->groups[i]->name));
    /* The slots index the old order: nothing is added after the output. */
    /* since 0: all time, null as gflow's. */
    return json_pack("{s:s, s:o, s:f, s:f, s:o, s:o, s:{s:o, s:o}}", "by", stats_by_name(s->by),
                     "since", s->since > 0 ? json_real(s->since) : json_null(), "until", s->until,
                     "now", s->now, "groups", groups, "total", group_json(&m->total, "total"),
                     "energy", "users", energy_json(m->energy_users), "projects",
                     energy_json(m->energy_projects));
}

/* ---- GPU utilisation ---- */

struct gpu_bucket {
    int64_t samples;
    double sum;
    int max;
};

struct gpu_series {
    int index;
    int64_t samples;
    double sum;
    int max;
    double first, last;
    struct gpu_bucket *buckets;
};

struct stats_gpu {
    double since, until;
    int n_buckets;
    struct gpu_series *gpus;
    size_t n_gpus;
};

struct stats_gpu *stats_gpu_new(double since, double until, int buckets)
{
    struct stats_gpu *g = xcalloc(1, sizeof(*g));
    g->since = since;
    g->until = until > since ? until : since + 1;
    g->n_buckets = buckets >= 1 ? buckets : 1;
    return g;
}

void stats_gpu_free(struct stats_gpu *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_gpus; i++)
        free(g->gpus[i].buckets);
    free(g->gpus);
    free(g);
}

static struct gpu_series *gpu_series_get(struct stats_gpu *g, int index)
{
    for (size_t i = 0; i < g->n_gpus; i++)
        if (g->gpus[i].index == index)
            return &g->gpus[i];
    g->gpus = xrealloc(g->gpus, (g->n_gpus + 1) * sizeof(*g->gpus));
    struct gpu_series *s = &g->gpus[g->n_gpus++];
    memset(s, 0, sizeof(*s));
    s->index = index;
    s->buckets = xcalloc((size_t)g->n_buckets, sizeof(*s->buckets));
    return s;
}

void stats_gpu_add(struct stats_gpu *g, int gpu, double time, int util)
{
    if (time < g->since || time >= g->until || util < 0)
        return;
    struct gpu_series *s = gpu_series_get(g, gpu);
    if (!s->samples || time < s->first)
        s->first = time;
    if (!s->samples || time > s->last)
        s->last = time;
    s->samples++;
    s->sum += util;
    if (util > s->max)
        s->max = util;
    int b = (int)((time - g->since) / (g->until - g->since) * g->n_buckets);
    if (b >= g->n_buckets)
        b = g->n_buckets - 1;
    struct gpu_bucket *k = &s->buckets[b];
    k->samples++;
    k->sum += util;
    if (util > k->max)
        k->max = util;
}

static int series_cmp(const void *pa, const void *pb)
{
    const struct gpu_series *a = pa, *b = pb;
    return (a->index > b->index) - (a->index < b->index);
}

json_t *stats_gpu_json(const struct stats_gpu *g)
{
    if (g->n_gpus > 1) /* none: gpus is NULL, which qsort may not be given */
        qsort(g->gpus, g->n_gpus, sizeof(*g->gpus), series_cmp);
    double width = (g->until - g->since) / g->n_buckets;
    json_t *gpus = json_array();
    for (size_t i = 0; i < g->n_gpus; i++) {
        const struct gpu_series *s = &g->gpus[i];
        json_t *series = json_array();
        for (int b = 0; b < g->n_buckets; b++) {
            const struct gpu_bucket *k = &s->buckets[b];
            if (!k->samples)
                continue;
            json_array_append_new(
                series, json_pack("{s:f, s:I, s:o, s:i}", "start", g->since + b * width, "samples",
                                  (json_int_t)k->samples, "mean",
                                  rounded(k->sum / (double)k->samples, 0.01, true), "max", k->max));
        }
        json_array_append_new(gpus, json_pack("{s:i, s:I, s:o, s:i, s:f, s:f, s:o}", "index",
                                              s->index, "samples", (json_int_t)s->samples, "mean",
                                              rounded(s->sum / (double)s->samples, 0.01, true),
                                              "max", s->max, "first", s->first, "last", s->last,
                                              "series", series));
    }
    return json_pack("{s:f, s:f, s:f, s:o}", "since", g->since, "until", g->until, "bucket_secs",
                     width, "gpus", gpus);
}
