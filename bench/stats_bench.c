/* stats_bench: GET /v1/stats' aggregation (store_stats_read, what gstats asks for) over
 * 1M finished jobs in a throw-away database: 20 users, 5 projects, 8 GPUs, every state,
 * ended over 7 days. Prints the best of 3 runs per grouping, and the same for a one-day
 * period and one user.
 *
 * Usage: stats_bench [N_JOBS] (default 1000000); STATS_BENCH_KEEP=1 keeps the database,
 * STATS_BENCH_DB=PATH measures a kept one again (its jobs ended within 7 days of then). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"
#include "store/store_internal.h"

#define RUNS 3

static void die(const char *what, const char *why)
{
    fprintf(stderr, "stats_bench: %s: %s\n", what, why);
    exit(1);
}

/* n finished jobs, inserted straight into the jobs table (the store's own insert also
 * writes payload rows, which the statistics never read). */
static void fill(struct store *s, int64_t n, double now)
{
    static const char *const states_sql = "INSERT INTO jobs(id, name, user, state, submit_time,"
                                          " start_time, end_time, gpus, gpu_ids, reason_code,"
                                          " project) VALUES (?1, 'job', ?2, ?3, ?4, ?5, ?6, ?7,"
                                          " ?8, ?9, ?10)";
    sqlite3_stmt *st;
    sqlite3_exec(s->db, "PRAGMA cache_size=-262144", NULL, NULL, NULL); /* a faster fill */
    if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db, states_sql, -1, &st, NULL) != SQLITE_OK)
        die("insert", sqlite3_errmsg(s->db));
    static const int states[] = {JOB_FINISHED, JOB_FINISHED,  JOB_FINISHED, JOB_FINISHED,
                                 JOB_FAILED,   JOB_CANCELLED, JOB_TIMEOUT};
    static const int reasons[] = {
        0, 0, 0, 0, JOB_REASON_NON_ZERO_EXIT, JOB_REASON_CANCELLED_BY_USER, JOB_REASON_TIME_LIMIT};
    char user[16], project[16], gpu_ids[8];
    srand(1);
    for (int64_t i = 1; i <= n; i++) {
        int k = rand() % 7;
        double end = now - (double)(rand() % (7 * 86400));
        double run = 60 + rand() % 7200, wait = rand() % 600;
        snprintf(user, sizeof(user), "user%02d", rand() % 20);
        snprintf(project, sizeof(project), "proj%d", rand() % 5);
        snprintf(gpu_ids, sizeof(gpu_ids), "%d", rand() % 8);
        sqlite3_bind_int64(st, 1, i);
        sqlite3_bind_text(st, 2, user, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 3, states[k]);
        sqlite3_bind_double(st, 4, end - run - wait);
        sqlite3_bind_double(st, 5, end - run);
        sqlite3_bind_double(st, 6, end);
        sqlite3_bind_int(st, 7, 1);
        sqlite3_bind_text(st, 8, gpu_ids, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int(st, 9, reasons[k]);
        sqlite3_bind_text(st, 10, project, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) != SQLITE_DONE)
            die("insert", sqlite3_errmsg(s->db));
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        die("commit", sqlite3_errmsg(s->db));
}

static void bench(const char *label, const char *path, struct store_stats_query q)
{
    double best = 1e9;
    int64_t jobs = 0;
    for (int r = 0; r < RUNS; r++) {
        char *err = NULL;
        double t0 = now_mono();
        json_t *out = store_stats_read(path, &q, &err);
        double t = now_mono() - t0;
        if (!out)
            die(label, err);
        jobs = json_integer_value(json_object_get(json_object_get(out, "total"), "jobs"));
        json_decref(out);
        if (t < best)
            best = t;
    }
    printf("%-34s %8lld jobs  %7.1f ms\n", label, (long long)jobs, best * 1000);
}

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : 1000000;
    char dir[] = "/tmp/stats_bench.XXXXXX";
    const char *reuse = getenv("STATS_BENCH_DB"); /* a database a kept run left */
    if (!reuse && !mkdtemp(dir))
        die("mkdtemp", "failed");
    char *path = reuse ? xstrdup(reuse) : xasprintf("%s/gflow.db", dir);
    char *err = NULL;
    struct store *s = store_open(path, &err);
    if (!s)
        die("open", err);
    double now = now_wall();
    double t0 = now_mono();
    if (!reuse) {
        fill(s, n, now);
        printf("inserted %lld finished jobs in %.1f s\n", (long long)n, now_mono() - t0);
    }
    struct store_stats_query q = {.by = STATS_BY_USER,
                                  .since = now - 8 * 86400.0,
                                  .until = now + 1,
                                  .now = now,
                                  .buckets = 24};
    bench("7 days, by user", path, q);
    q.by = STATS_BY_PROJECT;
    bench("7 days, by project", path, q);
    q.by = STATS_BY_GPU;
    bench("7 days, by gpu", path, q);
    q.by = STATS_BY_USER;
    q.user = "user07";
    bench("7 days, one user (-u)", path, q);
    q.user = NULL;
    q.since = now - 86400;
    bench("1 day, by user", path, q);
    store_close(s);
    if (reuse || getenv("STATS_BENCH_KEEP")) {
        printf("kept %s\n", path);
        free(path);
        return 0;
    }
    char *cmd = xasprintf("rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "stats_bench: could not remove %s\n", dir);
    free(cmd);
    free(path);
    return 0;
}
