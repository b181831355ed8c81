/* trace: reading CSV traces by column name, and the synthetic lab trace. */
#include "trace.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void replay_trace_init(struct replay_trace *t)
{
    memset(t, 0, sizeof(*t));
}

void replay_trace_free(struct replay_trace *t)
{
    for (size_t i = 0; i < t->n_names; i++)
        free(t->names[i]);
    free(t->names);
    free(t->recs);
    memset(t, 0, sizeof(*t));
}

/* The index of name in the trace's names, added if new. Linear: traces have few users. */
static int trace_intern(struct replay_trace *t, const char *name)
{
    for (size_t i = 0; i < t->n_names; i++)
        if (strcmp(t->names[i], name) == 0)
            return (int)i;
    if (t->n_names == t->cap_names) {
        t->cap_names = t->cap_names ? t->cap_names * 2 : 16;
        t->names = xrealloc(t->names, t->cap_names * sizeof(*t->names));
    }
    t->names[t->n_names] = xstrdup(name);
    return (int)t->n_names++;
}

static void trace_push(struct replay_trace *t, const struct replay_rec *r)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->recs = xrealloc(t->recs, t->cap * sizeof(*t->recs));
    }
    t->recs[t->n++] = *r;
}

/* ---- CSV ---- */

enum column { COL_SUBMIT, COL_GPUS, COL_RUNTIME, COL_TIME_LIMIT, COL_USER, COL_PROJECT, COL_COUNT };
static const char *const column_names[COL_COUNT] = {"submit_s",     "gpus", "runtime_s",
                                                    "time_limit_s", "user", "project"};
#define MAX_FIELDS 64

/* Splits line (modified) at commas into fields, trimmed of blanks and a trailing CR;
 * returns how many (at most MAX_FIELDS). */
static size_t csv_split(char *line, char **fields)
{
    size_t n = 0;
    for (char *p = line;; p++) {
        char *end = p + strcspn(p, ",");
        bool last = *end == '\0';
        *end = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strlen(p);
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\r' ||
                           p[len - 1] == '\n'))
            p[--len] = '\0';
        if (n < MAX_FIELDS)
            fields[n++] = p;
        if (last)
            return n;
        p = end;
    }
}

/* Seconds >= 0 from s (a whole field). */
static bool parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < 0)
        return false;
    *out = v;
    return true;
}

static bool parse_gpus(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 0 || v > 1000000)
        return false;
    *out = (int)v;
    return true;
}

/* Finds each known column's position in the header fields (-1: absent). */
static int header_columns(char **fields, size_t n, int *pos, const char *source, char **err)
{
    for (int c = 0; c < COL_COUNT; c++) {
        pos[c] = -1;
        for (size_t i = 0; i < n; i++)
            if (strcmp(fields[i], column_names[c]) == 0)
                pos[c] = (int)i;
    }
    for (int c = COL_SUBMIT; c <= COL_RUNTIME; c++)
        if (pos[c] < 0) {
            *err = xasprintf("%s: the header line has no column %s; a trace needs the columns "
                             "submit_s, gpus and runtime_s (time_limit_s, user and project are "
                             "optional)",
                             source, column_names[c]);
            return -1;
        }
    return 0;
}

/* One data line into r. */
static int csv_record(struct replay_trace *t, char **fields, size_t n, const int *pos,
                      const char *where, struct replay_rec *r, char **err)
{
    for (int c = 0; c < COL_COUNT; c++)
        if (pos[c] >= (int)n) {
            *err = xasprintf("%s: no value for %s (the line has %zu fields); give every line "
                             "the header's columns",
                             where, column_names[c], n);
            return -1;
        }
    *r = (struct replay_rec){.user = -1, .project = -1};
    const char *gpus = fields[pos[COL_GPUS]];
    if (!parse_gpus(gpus, &r->gpus)) {
        *err = xasprintf("%s: gpus is '%s'; give a whole number of GPUs >= 0", where, gpus);
        return -1;
    }
    const int secs[] = {COL_SUBMIT, COL_RUNTIME, COL_TIME_LIMIT};
    double *outs[] = {&r->submit, &r->runtime, &r->time_limit};
    for (int k = 0; k < 3; k++) {
        int c = secs[k];
        if (pos[c] < 0 || (c == COL_TIME_LIMIT && !fields[pos[c]][0]))
            continue;
        if (!parse_seconds(fields[pos[c]], outs[k])) {
            *err = xasprintf("%s: %s is '%s'; give a number of seconds >= 0", where,
                             column_names[c], fields[pos[c]]);
            return -1;
        }
    }
    if (pos[COL_USER] >= 0 && fields[pos[COL_USER]][0])
        r->user = trace_intern(t, fields[pos[COL_USER]]);
    if (pos[COL_PROJECT] >= 0 && fields[pos[COL_PROJECT]][0])
        r->project = trace_intern(t, fields[pos[COL_PROJECT]]);
    return 0;
}

int replay_trace_read(struct replay_trace *t, FILE *f, const char *source, char **err)
{
    char *line = NULL;
    size_t cap = 0;
    char *fields[MAX_FIELDS];
    int pos[COL_COUNT];
    bool have_header = false;
    int rc = 0;
    for (long lineno = 1; getline(&line, &cap, f) >= 0; lineno++) {
        if (line[strspn(line, " \t\r\n")] == '\0')
            continue; /* blank line */
        size_t n = csv_split(line, fields);
        if (!have_header) {
            if ((rc = header_columns(fields, n, pos, source, err)) < 0)
                break;
            have_header = true;
            continue;
        }
        char where[512];
        snprintf(where, sizeof(where), "%s:%ld", source, lineno);
        struct replay_rec r;
        if ((rc = csv_record(t, fields, n, pos, where, &r, err)) < 0)
            break;
        trace_push(t, &r);
    }
    if (rc == 0 && ferror(f)) {
        *err = xasprintf("cannot read %s: %s", source, strerror(errno));
        rc = -1;
    } else if (rc == 0 && !have_header) {
        *err = xasprintf("%s: empty; a trace starts with a header line such as "
                         "submit_s,gpus,runtime_s,time_limit_s,user,project",
                         source);
        rc = -1;
    }
    free(line);
    return rc;
}

int replay_trace_load(struct replay_trace *t, const char *path, char **err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        *err = xasprintf("cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = replay_trace_read(t, f, path, err);
    fclose(f);
    return rc;
}

/* ---- synthetic lab trace ---- */

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) /* in (0, 1) */
{
    return ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

static double rng_exponential(uint64_t *s, double mean)
{
    return -mean * log(rng_uniform(s));
}

/* Lognormal with the given median and shape (sigma of the log), in [10 s, 7 days]. */
static double rng_runtime(uint64_t *s, double median, double sigma)
{
    double normal = sqrt(-2 * log(rng_uniform(s))) * cos(2 * M_PI * rng_uniform(s));
    double v = median * exp(sigma * normal);
    return round(v < 10 ? 10 : v > 7 * 86400 ? 7 * 86400 : v);
}

/* Most users give a time limit: the run time with a margin, rounded up to whole hours. */
static double synth_time_limit(uint64_t *s, double runtime)
{
    if (rng_uniform(s) < 0.3)
        return 0;
    return ceil(runtime * (1.1 + 1.9 * rng_uniform(s)) / 3600) * 3600;
}

static int synth_gpus(uint64_t *s)
{
    double u = rng_uniform(s);
    return u < 0.65 ? 1 : u < 0.80 ? 2 : u < 0.93 ? 4 : 8;
}

void replay_trace_synthetic(struct replay_trace *t, size_t n, uint64_t seed)
{
    static const char *const users[] = {"alice", "bob", "carol", "dave", "erin"};
    static const char *const projects[] = {"vision", "vision", "nlp", "nlp", "sweep"};
    int user_ids[5], project_ids[5];
    for (int u = 0; u < 5; u++) {
        user_ids[u] = trace_intern(t, users[u]);
        project_ids[u] = trace_intern(t, projects[u]);
    }
    uint64_t s = seed;
    size_t first = t->n;
    double now = 0, demand = 0;
    while (t->n - first < n) {
        now += rng_exponential(&s, 1.0);
        /* erin, the bursty user: now and then a burst of 10-40 short 1-2 GPU jobs (a
         * sweep), submitted a second apart. */
        bool burst = rng_uniform(&s) < 0.04;
        size_t count = burst ? 10 + (size_t)(rng_uniform(&s) * 31) : 1;
        for (size_t k = 0; k < count && t->n - first < n; k++) {
            int u = burst ? 4 : (int)(rng_uniform(&s) * 4);
            struct replay_rec r = {
                .submit = now + (double)k, .user = user_ids[u], .project = project_ids[u]};
            r.gpus = burst ? (rng_uniform(&s) < 0.8 ? 1 : 2) : synth_gpus(&s);
            r.runtime = burst ? rng_runtime(&s, 1200, 1.0) : rng_runtime(&s, 3600, 1.5);
            r.time_limit = synth_time_limit(&s, r.runtime);
            demand += r.gpus * r.runtime;
            trace_push(t, &r);
        }
    }
    /* Scale the arrivals (drawn in unit steps) to the offered load on 8 GPUs. */
    double span = 0;
    for (size_t i = first; i < t->n; i++)
        span = fmax(span, t->recs[i].submit);
    double scale = span > 0 ? demand / (8 * REPLAY_SYNTH_LOAD) / span : 1;
    for (size_t i = first; i < t->n; i++)
        t->recs[i].submit = round(t->recs[i].submit * scale);
    replay_trace_sort(t); /* a burst's jobs may come after the next arrival */
}

void replay_trace_compress(struct replay_trace *t, double load)
{
    for (size_t i = 0; i < t->n; i++)
        t->recs[i].submit /= load;
}

void replay_trace_set_limits(struct replay_trace *t, enum replay_limits limits)
{
    if (limits == REPLAY_LIMITS_TRACE)
        return;
    for (size_t i = 0; i < t->n; i++)
        t->recs[i].time_limit = limits == REPLAY_LIMITS_EXACT ? ceil(t->recs[i].runtime) : 0;
}

/* Stable: a merge sort by submission time (qsort is not stable). */
static void sort_range(struct replay_rec *a, struct replay_rec *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    sort_range(a, tmp, h);
    sort_range(a + h, tmp, n - h);
    size_t i = 0, k = h, o = 0;
    while (i < h && k < n)
        tmp[o++] = a[k].submit < a[i].submit ? a[k++] : a[i++];
    while (i < h)
        tmp[o++] = a[i++];
    while (k < n)
        tmp[o++] = a[k++];
    memcpy(a, tmp, n * sizeof(*a));
}

void replay_trace_sort(struct replay_trace *t)
{
    struct replay_rec *tmp = xmalloc((t->n ? t->n : 1) * sizeof(*tmp));
    sort_range(t->recs, tmp, t->n);
    free(tmp);
}
