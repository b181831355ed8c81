/* store_bench: the store's figures from DESIGN.md section 5 on a throw-away database:
 * 100k jobs inserted in groups of 1000, single-row commits/s, listing the 10k queued
 * jobs, loading the active ones, counts, a restart, and the memory it all takes.
 *
 * Usage: store_bench [--spread] [DIR]
 *   The queued jobs are the newest 10k (a queue behind a history), or with --spread every
 *   10th job (the worst case: queued rows scattered over the whole table). DIR defaults
 *   to a new directory under /tmp, removed at the end. NOENV=1 submits without env. */
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "job.h"
#include "store/store.h"
#include "util.h"

#define N_JOBS 100000
#define BATCH 1000
#define N_QUEUED 10000
#define RUNS 7

static void die(struct store *s, const char *what)
{
    fprintf(stderr, "store_bench: %s: %s\n", what, s ? store_error(s) : "");
    exit(1);
}

static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kb = strtol(line + n + 1, NULL, 10);
    }
    if (f)
        fclose(f);
    return kb;
}

/* A submitter's environment as gbatch captures it: ~40 variables, ~2.5 KB. */
static json_t *make_env(void)
{
    json_t *env = json_object();
    for (int i = 0; i < 40; i++) {
        char k[32], v[80];
        snprintf(k, sizeof(k), "VARIABLE_NUMBER_%02d", i);
        snprintf(v, sizeof(v), "/home/alice/.local/share/some/longish/path/value/%02d", i);
        json_object_set_new(env, k, json_string(v));
    }
    return env;
}

static const char *const users[] = {"alice", "bob", "carol", "dave", "erin"};

static bool spread;

static bool is_queued(int64_t id)
{
    return spread ? id % (N_JOBS / N_QUEUED) == 0 : id > N_JOBS - N_QUEUED && id <= N_JOBS;
}

static void fill_job(struct job *j, int64_t id, json_t *env, double t0)
{
    job_init(j);
    j->id = id;
    j->name = xasprintf("sweep-lr%lld", (long long)(id % 97));
    j->user = xstrdup(users[id % 5]);
    j->uid = 1000 + (uint32_t)(id % 5);
    j->gid = 1000;
    j->command = xasprintf("python train.py --lr 0.%03lld --seed %lld --epochs 10",
                           (long long)(id % 1000), (long long)id);
    j->workdir = xstrdup("/home/alice/projects/experiment");
    j->env = getenv("NOENV") ? NULL : json_incref(env);
    j->submit_time = t0 + (double)id * 0.01;
    j->gpus = 1;
    if (is_queued(id)) {
        j->state = JOB_QUEUED;
        job_set_reason(j, JOB_REASON_HELD_BY_USER, 0, NULL);
    } else {
        static const enum job_state done[] = {JOB_FINISHED, JOB_FINISHED, JOB_FAILED, JOB_CANCELLED,
                                              JOB_TIMEOUT};
        j->state = done[id % 5];
        j->start_time = j->submit_time + 1;
        j->end_time = j->start_time + (double)(id % 3600);
        j->exit_code = j->state == JOB_FINISHED ? 0 : 1;
        j->max_rss_kb = 123456;
        j->gpu_mask = 1;
    }
}

struct counter {
    size_t n;
};

static void count_cb(struct job *j, void *arg)
{
    ((struct counter *)arg)->n++;
    job_free(j);
}

/* One figure: a label padded to a column, then the value. */
static void figure(const char *unit, double value, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void figure(const char *unit, double value, const char *fmt, ...)
{
    char label[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(label, sizeof(label), fmt, ap);
    va_end(ap);
    printf("%-42s %10.*f %s\n", label, value >= 100 ? 0 : 2, value, unit);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median wall time of RUNS listings of q, in ms; *n gets the number of jobs. */
static double time_list(struct store *s, const struct store_query *q, size_t *n)
{
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        struct counter c = {0};
        double a = now_mono();
        if (store_list(s, q, count_cb, &c) < 0)
            die(s, "list");
        t[r] = (now_mono() - a) * 1e3;
        *n = c.n;
    }
    qsort(t, RUNS, sizeof(t[0]), cmp_double);
    return t[RUNS / 2];
}

static double time_load(struct store *s, size_t *n)
{
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        struct counter c = {0};
        double a = now_mono();
        if (store_load_active(s, count_cb, &c) < 0)
            die(s, "load_active");
        t[r] = (now_mono() - a) * 1e3;
        *n = c.n;
    }
    qsort(t, RUNS, sizeof(t[0]), cmp_double);
    return t[RUNS / 2];
}

int main(int argc, char **argv)
{
    char dir[64] = "/tmp/store_bench.XXXXXX";
    int argi = 1;
    if (argi < argc && strcmp(argv[argi], "--spread") == 0) {
        spread = true;
        argi++;
    }
    bool own_dir = argi >= argc;
    if (own_dir && !mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char *path = xasprintf("%s/gflow.db", own_dir ? dir : argv[argi]);
    unlink(path);
    char *err = NULL;
    struct store *s = store_open(path, &err);
    if (!s) {
        fprintf(stderr, "store_bench: %s\n", err);
        return 1;
    }
    json_t *env = make_env();
    char *env_text = json_dumps(env, JSON_COMPACT);
    printf("sqlite %s, %d jobs (%d queued, %s), env %zu bytes per job\n", sqlite3_libversion(),
           N_JOBS, N_QUEUED, spread ? "every 10th" : "the newest",
           getenv("NOENV") ? (size_t)0 : strlen(env_text));
    free(env_text);
    double t0 = now_wall() - N_JOBS;
    struct job j;

    /* 1. 100k inserts, 1000 per transaction. */
    double a = now_mono();
    for (int64_t id = 1; id <= N_JOBS; id++) {
        if (store_begin(s) < 0)
            die(s, "begin");
        fill_job(&j, store_next_job_id(s), env, t0);
        if (store_insert_job(s, &j, NULL) < 0)
            die(s, "insert");
        job_clear(&j);
        if (id % BATCH == 0 && store_commit(s) < 0)
            die(s, "commit");
    }
    double dt = now_mono() - a;
    figure("jobs/s", N_JOBS / dt, "insert %d jobs, %d per commit", N_JOBS, BATCH);
    a = now_mono();
    if (store_checkpoint(s) < 0)
        die(s, "checkpoint");
    figure("ms", (now_mono() - a) * 1e3, "checkpoint after the load");

    /* 2. Single-row commits: one submission per transaction, then one state change per
     * transaction (the daemon's worst case: one request per loop iteration). */
    const int single = 20000;
    a = now_mono();
    for (int i = 0; i < single; i++) {
        if (store_begin(s) < 0)
            die(s, "begin");
        fill_job(&j, store_next_job_id(s), env, t0);
        if (store_insert_job(s, &j, NULL) < 0)
            die(s, "insert");
        job_clear(&j);
        if (store_commit(s) < 0)
            die(s, "commit");
    }
    dt = now_mono() - a;
    figure("commits/s", single / dt, "single-row commits (insert)");
    a = now_mono();
    for (int i = 0; i < single; i++) {
        int64_t id = N_JOBS + 1 + i;
        if (store_get_job(s, id, &j, false) != 0)
            die(s, "get");
        j.state = (j.state == JOB_QUEUED) ? JOB_HELD : JOB_QUEUED;
        if (store_begin(s) < 0 || store_update_job(s, &j) < 0 || store_commit(s) < 0)
            die(s, "update");
        job_clear(&j);
    }
    dt = now_mono() - a;
    figure("commits/s", single / dt, "single-row commits (get + update)");
    /* Put the extra rows back to terminal so the queued count stays 10k. */
    if (store_begin(s) < 0)
        die(s, "begin");
    for (int i = 0; i < single; i++) {
        int64_t id = N_JOBS + 1 + i;
        if (store_get_job(s, id, &j, false) != 0)
            die(s, "get");
        j.state = JOB_FINISHED;
        j.start_time = j.submit_time + 1;
        j.end_time = j.submit_time + 2;
        if (store_update_job(s, &j) < 0)
            die(s, "update");
        job_clear(&j);
    }
    if (store_commit(s) < 0 || store_checkpoint(s) < 0)
        die(s, "commit");

    /* 3. Reads. */
    size_t n = 0;
    enum job_state pd[] = {JOB_QUEUED};
    struct store_query q = {.states = pd, .n_states = 1};
    double ms = time_list(s, &q, &n);
    figure("ms", ms, "list PD (%zu jobs), by id", n);
    q.sort = JOB_SORT_PRIORITY;
    q.descending = true;
    ms = time_list(s, &q, &n);
    figure("ms", ms, "list PD (%zu jobs), by priority desc", n);
    enum job_state active[] = {JOB_QUEUED, JOB_HELD, JOB_RUNNING};
    q = (struct store_query){.states = active, .n_states = 3};
    ms = time_list(s, &q, &n);
    figure("ms", ms, "list PD+H+R (%zu jobs)", n);
    q = (struct store_query){.limit = -20};
    ms = time_list(s, &q, &n);
    figure("ms", ms, "list the last 20 of all jobs");
    q = (struct store_query){.user = "bob", .limit = -100};
    ms = time_list(s, &q, &n);
    figure("ms", ms, "list the last 100 of one user");
    q = (struct store_query){.sort = JOB_SORT_TIME, .descending = true, .limit = 20};
    ms = time_list(s, &q, &n);
    figure("ms", ms, "list the top 20 by elapsed time");
    q = (struct store_query){0};
    ms = time_list(s, &q, &n);
    figure("ms", ms, "list all (%zu jobs)", n);
    ms = time_load(s, &n);
    figure("ms", ms, "load_active (%zu jobs)", n);

    int64_t counts[JOB_STATE_COUNT];
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        a = now_mono();
        if (store_count_states(s, counts) < 0)
            die(s, "count");
        t[r] = (now_mono() - a) * 1e3;
    }
    qsort(t, RUNS, sizeof(t[0]), cmp_double);
    figure("ms", t[RUNS / 2], "count_states (%lld PD of %lld)", (long long)counts[JOB_QUEUED],
           (long long)(N_JOBS + single));

    a = now_mono();
    for (int i = 0; i < 10000; i++) {
        if (store_get_job(s, 1 + (i * 7919) % N_JOBS, &j, true) != 0)
            die(s, "get");
        job_clear(&j);
    }
    figure("us", (now_mono() - a) * 1e6 / 10000, "get_job with payload");

    /* What the env's JSON costs by itself (jansson), part of every insert and get above. */
    a = now_mono();
    for (int i = 0; i < 10000; i++)
        free(json_dumps(env, JSON_COMPACT));
    figure("us", (now_mono() - a) * 1e6 / 10000, "  of which env json_dumps");
    char *text = json_dumps(env, JSON_COMPACT);
    a = now_mono();
    for (int i = 0; i < 10000; i++)
        json_decref(json_loads(text, JSON_REJECT_DUPLICATES, NULL));
    figure("us", (now_mono() - a) * 1e6 / 10000, "  of which env json_loads");
    free(text);

    printf("memory: sqlite %lld KB now, %lld KB peak; process RSS %ld KB, peak %ld KB\n",
           (long long)sqlite3_memory_used() / 1024, (long long)sqlite3_memory_highwater(0) / 1024,
           status_kb("VmRSS"), status_kb("VmHWM"));

    /* 4. Restart: close, open, load the active jobs. */
    store_close(s);
    a = now_mono();
    s = store_open(path, &err);
    if (!s) {
        fprintf(stderr, "store_bench: %s\n", err);
        return 1;
    }
    struct counter c = {0};
    if (store_load_active(s, count_cb, &c) < 0)
        die(s, "load_active");
    figure("ms", (now_mono() - a) * 1e3, "restart: open + load_active (%zu jobs)", c.n);
    store_close(s);
    json_decref(env);

    if (own_dir) {
        const char *suffix[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
            char *p = xasprintf("%s%s", path, suffix[i]);
            unlink(p);
            free(p);
        }
        char *mark = xasprintf("%s/next_job_id", dir); /* the ids' high-water mark */
        unlink(mark);
        free(mark);
        rmdir(dir);
    }
    free(path);
    return 0;
}
