/* store_stats: what gstats reads (store.h, "Statistics"): the jobs of a period and the
 * GPU utilisation samples, read on a connection of the caller's own, opened read-only
 * (WAL lets it read what is committed while the daemon writes), so that a worker thread
 * can aggregate a million jobs without holding the daemon's event loop; and the samples'
 * ring, written on the daemon's connection.
 *
 * The jobs are aggregated in C (stats.c) in one pass over the covering index jobs_end
 * rather than with GROUP BY: the p95 wait needs every job's wait per group anyway, and
 * one read of the rows gives the counts, sums and waits together, where GROUP BY would
 * read them a second time (or sort them). 1M jobs: ~0.4 s (bench/stats_bench.c). */
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "gpuinfo.h"
#include "job.h"
#include "util.h"

#include "store_internal.h"

/* ---- the samples' ring (daemon's connection, inside its open transaction) ---- */

int store_gpu_samples_start(struct store *s, int64_t max, int64_t *next)
{
    sqlite3_stmt *st = NULL;
    int rc = store_adhoc(s, &st, "DELETE FROM gpu_samples WHERE slot >= ?1");
    if (rc == 0) {
        sqlite3_bind_int64(st, 1, max);
        rc = store_step_done(s, st, "trimming the GPU samples to daemon.gpu_samples_max");
        sqlite3_finalize(st);
    }
    int64_t last = -1;
    if (rc == 0)
        rc = store_query_int(s, "SELECT slot FROM gpu_samples ORDER BY time DESC LIMIT 1", &last);
    *next = last + 1;
    return rc;
}

int store_gpu_sample(struct store *s, int gpu, int64_t slot, double time, int util)
{
    sqlite3_stmt *st = NULL;
    if (store_refuse_if_lost(s) < 0 ||
        store_adhoc(s, &st,
                    "INSERT OR REPLACE INTO gpu_samples(gpu, slot, time, util)"
                    " VALUES (?1, ?2, ?3, ?4)") < 0)
        return -1;
    sqlite3_bind_int(st, 1, gpu);
    sqlite3_bind_int64(st, 2, slot);
    sqlite3_bind_double(st, 3, time);
    sqlite3_bind_int(st, 4, util);
    int rc = store_step_done(s, st, "recording a GPU sample");
    sqlite3_finalize(st);
    return rc;
}

/* ---- reading a period (any thread, a connection of its own) ---- */

/* The jobs a period holds: those that ended in it (an index range of jobs_end), and
 * those running that started before its end (jobs_active). */
static const char jobs_sql[] =
    "SELECT user, project, gpu_ids, state, submit_time, start_time, end_time, gpus, reason_code,"
    " energy_wh"
    " FROM jobs WHERE " STORE_ENDED " AND end_time >= ?1 AND end_time < ?2"
    " AND (?3 IS NULL OR user = ?3)"
    " UNION ALL "
    "SELECT user, project, gpu_ids, state, submit_time, start_time, end_time, gpus, reason_code,"
    " energy_wh"
    " FROM jobs WHERE " STORE_ACTIVE " AND state = 2 AND start_time < ?2"
    " AND (?3 IS NULL OR user = ?3)";

static const char samples_sql[] =
    "SELECT gpu, time, util, slot FROM gpu_samples WHERE time >= ?1 AND time < ?2";

static char *db_error(sqlite3 *db, const char *what)
{
    return xasprintf("%s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
}

static int read_jobs(sqlite3 *db, const struct store_stats_query *q, json_t **out, char **err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, jobs_sql, -1, &st, NULL) != SQLITE_OK) {
        *err = db_error(db, "reading the jobs");
        return -1;
    }
    sqlite3_bind_double(st, 1, q->since);
    sqlite3_bind_double(st, 2, q->until);
    if (q->user)
        sqlite3_bind_text(st, 3, q->user, -1, SQLITE_STATIC);
    struct stats *s = stats_new(q->by, q->since, q->until, q->now);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        /* Only the grouping's text column is read (each costs a conversion), and both
         * names for a job with an energy (energy per user and per project). */
        double energy = sqlite3_column_double(st, 9);
        bool both = energy >= 0;
        struct stats_job j = {
            .user =
                both || q->by == STATS_BY_USER ? (const char *)sqlite3_column_text(st, 0) : NULL,
            .project =
                both || q->by == STATS_BY_PROJECT ? (const char *)sqlite3_column_text(st, 1) : NULL,
            .energy_known = both,
            .energy_wh = energy,
            .gpu_ids = q->by == STATS_BY_GPU ? (const char *)sqlite3_column_text(st, 2) : NULL,
            .state = sqlite3_column_int(st, 3),
            .submit_time = sqlite3_column_double(st, 4),
            .start_time = sqlite3_column_double(st, 5),
            .end_time = sqlite3_column_double(st, 6),
            .gpus = sqlite3_column_int64(st, 7),
            .reason = sqlite3_column_int(st, 8),
        };
        stats_add(s, &j);
    }
    if (rc != SQLITE_DONE) {
        *err = db_error(db, "reading the jobs");
        sqlite3_finalize(st);
        stats_free(s);
        return -1;
    }
    sqlite3_finalize(st);
    *out = stats_json(s);
    stats_free(s);
    return 0;
}

/* By GPU and slot, then time. */
static int sample_cmp(const void *a, const void *b)
{
    const struct gpu_sample *x = a, *y = b;
    if (x->gpu != y->gpu)
        return x->gpu < y->gpu ? -1 : 1;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return (x->time > y->time) - (x->time < y->time);
}

/* The samples not written yet as the ring will hold them: sorted by GPU and slot, the
 * latest of each slot only. *n: how many. */
static struct gpu_sample *pending_ring(const struct store_stats_query *q, size_t *n)
{
    *n = 0;
    if (!q->n_pending)
        return NULL;
    struct gpu_sample *p = xmalloc(q->n_pending * sizeof(*p));
    memcpy(p, q->pending, q->n_pending * sizeof(*p));
    qsort(p, q->n_pending, sizeof(*p), sample_cmp);
    for (size_t i = 0; i < q->n_pending; i++) {
        if (*n && p[*n - 1].gpu == p[i].gpu && p[*n - 1].slot == p[i].slot)
            (*n)--; /* a later sample overwrites the slot */
        p[(*n)++] = p[i];
    }
    return p;
}

/* The sample of key's GPU and slot in p (pending_ring's), or NULL. */
static const struct gpu_sample *pending_ring_find(const struct gpu_sample *p, size_t n,
                                                  const struct gpu_sample *key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p[mid].gpu < key->gpu || (p[mid].gpu == key->gpu && p[mid].slot < key->slot))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && p[lo].gpu == key->gpu && p[lo].slot == key->slot ? &p[lo] : NULL;
}

static int read_samples(sqlite3 *db, const struct store_stats_query *q, json_t **out, char **err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, samples_sql, -1, &st, NULL) != SQLITE_OK) {
        *err = db_error(db, "reading the GPU samples");
        return -1;
    }
    sqlite3_bind_double(st, 1, q->since);
    sqlite3_bind_double(st, 2, q->until);
    struct stats_gpu *g = stats_gpu_new(q->since, q->until, q->buckets);
    size_t n_pending;
    struct gpu_sample *pending = pending_ring(q, &n_pending);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct gpu_sample row = {.gpu = sqlite3_column_int(st, 0),
                                 .slot = sqlite3_column_int64(st, 3)};
        /* A slot that a sample not written yet overwrites is not counted. */
        if (!pending_ring_find(pending, n_pending, &row))
            stats_gpu_add(g, row.gpu, sqlite3_column_double(st, 1), sqlite3_column_int(st, 2));
    }
    for (size_t i = 0; i < n_pending; i++) {
        const struct gpu_sample *p = &pending[i];
        if (p->time >= q->since && p->time < q->until)
            stats_gpu_add(g, p->gpu, p->time, p->util);
    }
    free(pending);
    if (rc != SQLITE_DONE) {
        *err = db_error(db, "reading the GPU samples");
        sqlite3_finalize(st);
        stats_gpu_free(g);
        return -1;
    }
    sqlite3_finalize(st);
    *out = stats_gpu_json(g);
    stats_gpu_free(g);
    return 0;
}

json_t *store_idle_job_json(const struct job *j, double now)
{
    double end = j->end_time > 0 ? j->end_time : now;
    double run = j->start_time > 0 && end > j->start_time ? end - j->start_time : 0;
    char *ids = gpu_mask_format(j->gpu_mask);
    json_t *o = json_pack(
        "{s:I, s:s?, s:s?, s:s?, s:s, s:i, s:s?, s:f, s:o, s:o, s:o}", "id", (json_int_t)j->id,
        "user", j->user, "name", j->name, "project", j->project, "state", job_state_short(j->state),
        "gpus", j->gpus, "gpu_ids", *ids ? ids : NULL, "runtime_secs", round(run * 1000) / 1000,
        "gpu_util_mean", j->gpu_util_mean >= 0 ? json_integer(j->gpu_util_mean) : json_null(),
        "gpu_util_peak", j->gpu_util_peak >= 0 ? json_integer(j->gpu_util_peak) : json_null(),
        "energy_wh",
        j->energy_wh >= 0 ? json_real(round(j->energy_wh * 1000) / 1000) : json_null());
    free(ids);
    return o;
}

/* The ended jobs of the period that sat on their GPUs, latest first. */
static const char idle_sql[] =
    "SELECT id, user, name, project, state, gpus, gpu_ids, start_time, end_time, gpu_util_mean,"
    " gpu_util_peak, energy_wh"
    " FROM jobs WHERE " STORE_ENDED " AND end_time >= ?1 AND end_time < ?2"
    " AND (?3 IS NULL OR user = ?3) AND gpu_idle = 1 ORDER BY end_time DESC";

static int read_idle(sqlite3 *db, const struct store_stats_query *q, json_t **out, char **err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, idle_sql, -1, &st, NULL) != SQLITE_OK) {
        *err = db_error(db, "reading the jobs");
        return -1;
    }
    sqlite3_bind_double(st, 1, q->since);
    sqlite3_bind_double(st, 2, q->until);
    if (q->user)
        sqlite3_bind_text(st, 3, q->user, -1, SQLITE_STATIC);
    json_t *jobs = q->running ? json_incref(q->running) : json_array();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct job j;
        job_init(&j);
        j.id = sqlite3_column_int64(st, 0);
        j.user = (char *)sqlite3_column_text(st, 1);
        j.name = (char *)sqlite3_column_text(st, 2);
        j.project = (char *)sqlite3_column_text(st, 3);
        j.state = (enum job_state)sqlite3_column_int(st, 4);
        j.gpus = sqlite3_column_int(st, 5);
        j.gpu_mask = gpu_mask_parse((const char *)sqlite3_column_text(st, 6));
        j.start_time = sqlite3_column_double(st, 7);
        j.end_time = sqlite3_column_double(st, 8);
        j.gpu_util_mean = sqlite3_column_int(st, 9);
        j.gpu_util_peak = sqlite3_column_int(st, 10);
        j.energy_wh = sqlite3_column_double(st, 11);
        json_array_append_new(jobs, store_idle_job_json(&j, q->now));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        *err = db_error(db, "reading the jobs");
        json_decref(jobs);
        return -1;
    }
    *out =
        json_pack("{s:o, s:f, s:f, s:o}", "since", q->since > 0 ? json_real(q->since) : json_null(),
                  "until", q->until, "now", q->now, "jobs", jobs);
    return 0;
}

json_t *store_stats_read(const char *db_path, const struct store_stats_query *q, char **err)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(db_path, &db, flags, NULL) != SQLITE_OK) {
        *err = db_error(db, "opening the database to read statistics");
        sqlite3_close(db);
        return NULL;
    }
    /* No mmap: a connection opened per request would fault every page in anew, which
     * measured twice as slow as reading them (bench/stats_bench.c). */
    sqlite3_busy_timeout(db, 5000);
    json_t *out = NULL;
    if (q->gpu)
        read_samples(db, q, &out, err);
    else if (q->idle)
        read_idle(db, q, &out, err);
    else
        read_jobs(db, q, &out, err);
    sqlite3_close(db);
    return out;
}
