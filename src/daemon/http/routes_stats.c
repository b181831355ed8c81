/* routes_stats: GET /v1/stats (docs/api.md), gstats' numbers: the jobs of a period
 * grouped by user, project or GPU, or (gpu=1) the GPUs' sampled utilisation. The query
 * runs on a worker thread with a read-only connection of its own (reply_defer): a
 * million finished jobs take most of a second to aggregate, which the event loop must
 * not wait for. Everyone may read everyone's numbers, as gqueue shows everyone's jobs
 * (and Slurm's sreport everyone's usage); by default, as gflow's, the caller's jobs of
 * all time. */
#include "routes.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "gpu/gpu_samples.h"
#include "jobs/jobs.h"
#include "stats.h"
#include "store/store.h"
#include "util.h"

/* The GPU samples' default period (the jobs': all time). */
#define DEFAULT_GPU_PERIOD_SECS (7 * 86400.0)
#define DEFAULT_BUCKETS 24
#define MAX_BUCKETS 1000

struct stats_work {
    char *db_path;
    char *user;
    struct gpu_sample *pending; /* a copy: the loop goes on taking samples */
    struct store_stats_query q;
};

static void stats_work_free(void *arg)
{
    struct stats_work *w = arg;
    json_decref(w->q.running);
    free(w->db_path);
    free(w->user);
    free(w->pending);
    free(w);
}

/* On the worker thread. */
static json_t *stats_work_run(void *arg, unsigned *status)
{
    struct stats_work *w = arg;
    char *err = NULL;
    json_t *out = store_stats_read(w->db_path, &w->q, &err);
    if (out) {
        if (!w->q.gpu) /* whose jobs: gflow's "user", null for everyone's */
            json_object_set_new(out, "user", w->user ? json_string(w->user) : json_null());
        *status = 200;
        return out;
    }
    *status = 500;
    out = json_pack("{s:s}", "error", err ? err : "cannot read the statistics");
    free(err);
    return out;
}

/* ?key=seconds: 0 with *out untouched when absent; -1 with a 400 when not a time. */
static int query_time(const struct route_req *r, const char *key, double *out, struct reply *rep)
{
    const char *v = route_query(r, key);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    double t = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(t) || t < 0) {
        reply_error(rep, 400, "invalid %s '%s': use unix seconds", key, v);
        return -1;
    }
    *out = t;
    return 0;
}

/* The running jobs of q's user that held GPUs and sat on them so far. */
static json_t *running_idle(struct gflowd *d, const struct store_stats_query *q)
{
    json_t *out = json_array();
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    for (size_t i = 0; i < n; i++) {
        const struct job *j = running[i];
        if (j->gpu_idle == 1 && j->start_time < q->until &&
            (!q->user || (j->user && !strcmp(j->user, q->user))))
            json_array_append_new(out, store_idle_job_json(j, q->now));
    }
    return out;
}

void route_stats(const struct route_req *r, struct reply *rep)
{
    struct store_stats_query q = {
        .by = STATS_BY_USER, .now = now_wall(), .buckets = DEFAULT_BUCKETS};
    q.until = q.now;
    bool since_given = route_query(r, "since") != NULL;
    if (query_time(r, "since", &q.since, rep) < 0 || query_time(r, "until", &q.until, rep) < 0)
        return;
    const char *gpu = route_query(r, "gpu");
    q.gpu = gpu && strcmp(gpu, "0") != 0;
    const char *idle = route_query(r, "idle_gpus");
    q.idle = idle && strcmp(idle, "0") != 0;
    if (q.gpu && q.idle) {
        reply_error(rep, 400, "gpu and idle_gpus ask for different things; use one");
        return;
    }
    if (!since_given) /* all time (0), as gflow's; the GPUs' samples: a week */
        q.since = q.gpu ? q.until - DEFAULT_GPU_PERIOD_SECS : 0;
    if (q.since >= q.until) {
        reply_error(rep, 400, "since (%.0f) must be before until (%.0f)", q.since, q.until);
        return;
    }
    const char *by = route_query(r, "by");
    if (by && stats_by_parse(by, &q.by) < 0) {
        reply_error(rep, 400, "unknown by '%s': use user, project or gpu", by);
        return;
    }
    const char *buckets = route_query(r, "buckets");
    if (buckets) {
        char *end;
        long n = strtol(buckets, &end, 10);
        if (end == buckets || *end || n < 1 || n > MAX_BUCKETS) {
            reply_error(rep, 400, "invalid buckets '%s': use 1 to %d", buckets, MAX_BUCKETS);
            return;
        }
        q.buckets = (int)n;
    }
    const char *user = route_query(r, "user");
    struct stats_work *w = xcalloc(1, sizeof(*w));
    w->db_path = xstrdup(r->d->paths.db_path);
    if (!user || !*user) /* the caller's, as gflow's gstats */
        user = r->who ? r->who->user : NULL;
    if (user && strcmp(user, "all") != 0 && strcmp(user, "*") != 0)
        w->user = xstrdup(user);
    q.user = w->user;
    if (q.idle) /* the running ones' figures are in memory only: taken here */
        q.running = running_idle(r->d, &q);
    const struct gpu_samples *g = r->d->samples;
    if (q.gpu && g && g->n_pending) {
        w->pending = xmalloc(g->n_pending * sizeof(*w->pending));
        memcpy(w->pending, g->pending, g->n_pending * sizeof(*w->pending));
        q.pending = w->pending;
        q.n_pending = g->n_pending;
    }
    w->q = q;
    reply_defer(rep, stats_work_run, w, stats_work_free);
}
