/* test_store: the SQLite store of src/daemon/store/store*.c against a database in a temp dir:
 * round trips of every field, updates, loading, every listing filter and sort, counts,
 * settings, transactions, id persistence and the on-disk settings. */
/* cmocka.h needs these headers before it. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "files.h"
#include "job.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "util.h"

struct fixture {
    char dir[64];
    char path[128];
    struct store *s;
};

static struct store *open_ok(const char *path)
{
    char *err = NULL;
    struct store *s = store_open(path, &err);
    if (!s)
        fail_msg("store_open: %s", err);
    assert_null(err);
    return s;
}

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_store.XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/gflow.db", f->dir);
    f->s = open_ok(f->path);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    store_close(f->s);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    char mark[160]; /* the ids' high-water mark beside the database (store_ids.c) */
    snprintf(mark, sizeof(mark), "%s/next_job_id", f->dir);
    unlink(mark);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void reopen(struct fixture *f)
{
    store_close(f->s);
    f->s = open_ok(f->path);
}

/* A second, independent connection for looking at the file as another process would. */
static sqlite3 *peek_open(const char *path)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    return db;
}

static int64_t peek_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static char *peek_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    struct strbuf sb;
    strbuf_init(&sb);
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const char *t = (const char *)sqlite3_column_text(st, i);
            strbuf_addf(&sb, "%s|", t ? t : "NULL");
        }
        strbuf_addc(&sb, '\n');
    }
    sqlite3_finalize(st);
    return strbuf_detach(&sb);
}

static struct job *mkjob(int64_t id, enum job_state st, const char *user, int prio, double submit)
{
    struct job *j = job_new();
    j->id = id;
    j->state = st;
    j->user = xstrdup(user);
    j->priority = prio;
    j->submit_time = submit;
    j->name = xasprintf("job%03lld", (long long)id);
    j->command = xasprintf("echo %lld", (long long)id);
    j->workdir = xstrdup("/tmp");
    return j;
}

static void insert_ok(struct store *s, struct job *j)
{
    if (store_insert_job(s, j, NULL) != 0)
        fail_msg("insert %lld: %s", (long long)j->id, store_error(s));
}

static void insert_free(struct store *s, struct job *j)
{
    insert_ok(s, j);
    job_free(j);
}

/* A job with every field set to a distinctive non-default value. */
static struct job *full_job(int64_t id)
{
    struct job *j = job_new();
    j->id = id;
    j->name = xstrdup("train-résumé");
    j->user = xstrdup("alice");
    j->uid = 4000000000u;
    j->gid = 1001;
    j->state = JOB_HELD;
    j->priority = 200;
    j->time_limit = 3600;
    j->command = NULL;
    j->script = xstrdup("#!/bin/bash\necho 'hi' \"there\"\n");
    j->script_path = xstrdup("/home/alice/run.sh");
    j->workdir = xstrdup("/home/alice/work dir");
    j->env = json_pack("{s:s, s:s}", "PATH", "/usr/bin", "HOME", "/home/alice");
    j->submit_time = 1700000000.125;
    j->start_time = 1700000010.5;
    j->end_time = 1700000020.75;
    j->exit_code = 3;
    j->signal = 9;
    j->oom = true;
    job_set_reason(j, JOB_REASON_SHIM_LOST, 0, "gflow-shim killed by SIGKILL");
    j->end_request = JOB_END_TIMEOUT;
    j->shim_pid = 123456;
    j->shim_start = 987654321;
    j->max_rss_kb = 4096;
    j->gpus = 2;
    j->gpu_mask = 0x5;
    j->memory_mb = 16384;
    j->gpu_memory_mb = 8000;
    j->shared = true;
    j->group_id = 77;
    j->array_task = 5;
    j->max_retries = 3;
    j->attempt = 2;
    j->retry_of = 41;
    j->gpus_per_task = 1;
    j->deps_any = true;
    j->auto_cancel = false;
    j->conda_env = xstrdup("torch-env");
    j->warn_signal = 10;
    j->warn_secs = 90;
    j->warn_main_only = true;
    j->begin_time = 1764475200.5;
    j->umask = 027;
    return j;
}

static void assert_str_eq_or_null(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

/* Every field except script and env. */
static void assert_light_equal(const struct job *a, const struct job *b)
{
    assert_int_equal(a->id, b->id);
    assert_str_eq_or_null(a->name, b->name);
    assert_str_eq_or_null(a->user, b->user);
    assert_int_equal(a->uid, b->uid);
    assert_int_equal(a->gid, b->gid);
    assert_int_equal(a->state, b->state);
    assert_int_equal(a->priority, b->priority);
    assert_int_equal(a->time_limit, b->time_limit);
    assert_str_eq_or_null(a->command, b->command);
    assert_str_eq_or_null(a->script_path, b->script_path);
    assert_str_eq_or_null(a->workdir, b->workdir);
    assert_true(a->submit_time == b->submit_time);
    assert_true(a->start_time == b->start_time);
    assert_true(a->end_time == b->end_time);
    assert_int_equal(a->exit_code, b->exit_code);
    assert_int_equal(a->signal, b->signal);
    assert_int_equal(a->oom, b->oom);
    assert_int_equal(a->reason, b->reason);
    assert_int_equal(a->reason_job, b->reason_job);
    assert_str_eq_or_null(a->reason_detail, b->reason_detail);
    assert_int_equal(a->end_request, b->end_request);
    assert_int_equal(a->shim_pid, b->shim_pid);
    assert_int_equal(a->shim_start, b->shim_start);
    assert_int_equal(a->max_rss_kb, b->max_rss_kb);
    assert_int_equal(a->gpus, b->gpus);
    assert_int_equal(a->gpu_mask, b->gpu_mask);
    assert_int_equal(a->memory_mb, b->memory_mb);
    assert_int_equal(a->gpu_memory_mb, b->gpu_memory_mb);
    assert_int_equal(a->shared, b->shared);
    assert_int_equal(a->group_id, b->group_id);
    assert_int_equal(a->array_task, b->array_task);
    assert_int_equal(a->max_retries, b->max_retries);
    assert_int_equal(a->attempt, b->attempt);
    assert_int_equal(a->retry_of, b->retry_of);
    assert_int_equal(a->gpus_per_task, b->gpus_per_task);
    assert_int_equal(a->n_deps, b->n_deps);
    for (size_t i = 0; i < a->n_deps; i++) {
        assert_int_equal(a->deps[i].id, b->deps[i].id);
        assert_int_equal(a->deps[i].kind, b->deps[i].kind);
    }
    assert_int_equal(a->deps_any, b->deps_any);
    assert_int_equal(a->auto_cancel, b->auto_cancel);
    if (a->conda_env || b->conda_env) {
        assert_non_null(a->conda_env);
        assert_non_null(b->conda_env);
        assert_string_equal(a->conda_env, b->conda_env);
    }
    assert_int_equal(a->warn_signal, b->warn_signal);
    assert_int_equal(a->warn_secs, b->warn_secs);
    assert_int_equal(a->warn_main_only, b->warn_main_only);
    assert_true(a->begin_time == b->begin_time);
    assert_int_equal(a->umask, b->umask);
}

/* ---- collecting callback results ---- */

struct ids {
    int64_t v[256];
    size_t n;
    bool payload_seen;
};

static void collect_cb(struct job *j, void *arg)
{
    struct ids *ids = arg;
    if (ids->n < sizeof(ids->v) / sizeof(ids->v[0]))
        ids->v[ids->n++] = j->id;
    if (j->script || j->env)
        ids->payload_seen = true;
    job_free(j);
}

static void assert_ids(const struct ids *got, const int64_t *want, size_t n)
{
    if (got->n != n) {
        for (size_t i = 0; i < got->n; i++)
            print_message("got[%zu] = %lld\n", i, (long long)got->v[i]);
        fail_msg("got %zu jobs, want %zu", got->n, n);
    }
    for (size_t i = 0; i < n; i++) {
        if (got->v[i] != want[i])
            fail_msg("position %zu: got job %lld, want %lld", i, (long long)got->v[i],
                     (long long)want[i]);
    }
    assert_false(got->payload_seen);
}

#define IDS(...)                                                                                   \
    ((const int64_t[]){__VA_ARGS__}), (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static void list_is(struct store *s, const struct store_query *q, const int64_t *want, size_t n)
{
    struct ids got = {0};
    if (store_list(s, q, collect_cb, &got) != 0)
        fail_msg("store_list: %s", store_error(s));
    assert_ids(&got, want, n);
}

/* ---- tests ---- */

static void test_open_pragmas_and_schema(void **state)
{
    struct fixture *f = *state;
    struct stat st;
    insert_free(f->s, mkjob(1, JOB_QUEUED, "bob", 10, 1));
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char wal[160];
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    assert_int_equal(stat(wal, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    sqlite3 *db = peek_open(f->path);
    char *mode = peek_text(db, "PRAGMA journal_mode");
    assert_string_equal(mode, "wal|\n");
    free(mode);
    assert_int_equal(peek_int(db, "PRAGMA user_version"), 28);
    assert_int_equal(peek_int(db, "SELECT value FROM meta WHERE key='next_job_id'"), 2);
    char *objs = peek_text(db, "SELECT type, name FROM sqlite_schema WHERE name NOT LIKE "
                               "'sqlite_%' ORDER BY type, name");
    assert_string_equal(objs, "index|envs_hash|\n"
                              "index|gpu_samples_time|\n"
                              "index|job_deps_dep|\n"
                              "index|job_payload_env|\n"
                              "index|jobs_active|\n"
                              "index|jobs_end|\n"
                              "index|jobs_retry|\n"
                              "index|jobs_submit|\n"
                              "index|jobs_user|\n"
                              "index|notify_outbox_done|\n"
                              "index|notify_outbox_due|\n"
                              "index|notify_outbox_uid|\n"
                              "table|envs|\n"
                              "table|gpu_samples|\n"
                              "table|job_counts|\n"
                              "table|job_deps|\n"
                              "table|job_groups|\n"
                              "table|job_payload|\n"
                              "table|jobs|\n"
                              "table|meta|\n"
                              "table|notify_outbox|\n"
                              "table|reservations|\n"
                              "table|settings|\n"
                              "table|usage|\n"
                              "trigger|jobs_count_delete|\n"
                              "trigger|jobs_count_update|\n");
    free(objs);
    /* One column per field of struct job, payload apart. */
    objs = peek_text(db, "SELECT group_concat(name, ' ') FROM pragma_table_info('jobs')");
    assert_string_equal(
        objs, "id name user uid gid state priority time_limit command "
              "script_path workdir submit_time start_time end_time exit_code "
              "signal oom reason end_request shim_pid shim_start max_rss_kb "
              "gpus gpu_ids memory_mb gpu_memory_mb shared group_id "
              "array_task max_retries attempt retry_of gpus_per_task "
              "depends_on depends_any auto_cancel conda_env signal_spec "
              "begin_time reason_code reason_job umask mig_profile mig_count mig_uuids "
              "project nice notify_email notify_on auto_close requeue requeue_count "
              "preempted_by pty slurm_id slurm_reason log_lost_bytes stray cpus_per_gpu cpus "
              "cpus_far slurm_note gpu_util_mean gpu_util_peak gpu_mem_peak_mb energy_wh "
              "gpu_idle failure_class failure_line|\n");
    free(objs);
    /* The payload: a sweep's values and templates after script and env (step 5). */
    objs = peek_text(db, "SELECT group_concat(name, ' ') FROM pragma_table_info('job_payload')");
    assert_string_equal(objs, "job_id script env params command_template script_template "
                              "name_template env_id|\n");
    free(objs);
    /* The active-jobs query is served by the partial index. */
    char *plan = peek_text(db, "EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE state IN (?) "
                               "AND state < 3 ORDER BY id");
    assert_non_null(strstr(plan, "jobs_active"));
    free(plan);
    /* A failed job's next attempt too, by its own partial index. */
    plan = peek_text(db, "EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE retry_of=?1 AND "
                         "retry_of > 0 ORDER BY id LIMIT 1");
    assert_non_null(strstr(plan, "jobs_retry"));
    free(plan);
    /* Quotas' GPU time of the period (store_gpu_seconds_since) reads the ended GPU jobs
     * by end time through gstats' jobs_end, which covers the query. */
    plan = peek_text(db, "EXPLAIN QUERY PLAN SELECT user, project, SUM(gpus * (end_time - "
                         "MAX(start_time, ?1))) FROM jobs WHERE state > 2 AND gpus > 0"
                         " AND start_time > 0 AND end_time > ?1 GROUP BY user, project");
    assert_non_null(strstr(plan, "COVERING INDEX jobs_end"));
    free(plan);
    /* gstats' period (store_stats.c) is one read of its covering index, no table lookup. */
    plan = peek_text(db, "EXPLAIN QUERY PLAN SELECT user, project, gpu_ids, state, submit_time,"
                         " start_time, end_time, gpus, reason_code FROM jobs WHERE state > 2"
                         " AND end_time >= ?1 AND end_time < ?2"
                         " AND (?3 IS NULL OR user = ?3)");
    assert_non_null(strstr(plan, "COVERING INDEX jobs_end"));
    free(plan);
    sqlite3_close(db);
}

/* Step 22: the insert trigger of job_counts goes (store_commit counts new jobs), so a
 * database made before it does not count its new jobs twice. */
static void test_migrate_counts_without_insert_trigger(void **state)
{
    struct fixture *f = *state;
    insert_free(f->s, mkjob(1, JOB_QUEUED, "u", 10, 1));
    store_close(f->s);
    sqlite3 *db = peek_open(f->path);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN"
                                  " INSERT INTO job_counts(state, n) VALUES (new.state, 1)"
                                  "  ON CONFLICT(state) DO UPDATE SET n = n + 1;"
                                  " END; ALTER TABLE jobs DROP COLUMN log_lost_bytes;"
                                  " ALTER TABLE jobs DROP COLUMN stray;"
                                  " ALTER TABLE jobs DROP COLUMN cpus_per_gpu;"
                                  " ALTER TABLE jobs DROP COLUMN cpus;"
                                  " ALTER TABLE jobs DROP COLUMN cpus_far;"
                                  " ALTER TABLE jobs DROP COLUMN slurm_note;"
                                  " ALTER TABLE jobs DROP COLUMN gpu_util_mean;"
                                  " ALTER TABLE jobs DROP COLUMN gpu_util_peak;"
                                  " ALTER TABLE jobs DROP COLUMN gpu_mem_peak_mb;"
                                  " ALTER TABLE jobs DROP COLUMN energy_wh;"
                                  " ALTER TABLE jobs DROP COLUMN gpu_idle;"
                                  " ALTER TABLE jobs DROP COLUMN failure_class;"
                                  " ALTER TABLE jobs DROP COLUMN failure_line;"
                                  " PRAGMA user_version=21",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    f->s = open_ok(f->path);
    insert_free(f->s, mkjob(2, JOB_QUEUED, "u", 10, 1));
    int64_t c[JOB_STATE_COUNT];
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_QUEUED], 2);
    db = peek_open(f->path);
    assert_int_equal(peek_int(db, "SELECT count(*) FROM sqlite_schema WHERE name = "
                                  "'jobs_count_insert'"),
                     0);
    assert_int_equal(peek_int(db, "SELECT n FROM job_counts WHERE state = 0"), 2);
    sqlite3_close(db);
}

static void test_refuses_newer_schema(void **state)
{
    struct fixture *f = *state;
    sqlite3 *db = peek_open(f->path);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    store_close(f->s);
    char *err = NULL;
    f->s = store_open(f->path, &err);
    assert_null(f->s);
    assert_non_null(err);
    assert_non_null(strstr(err, "newer"));
    free(err);
    /* Let teardown work. */
    db = peek_open(f->path);
    sqlite3_exec(db, "PRAGMA user_version=28", NULL, NULL, NULL);
    sqlite3_close(db);
    f->s = open_ok(f->path);
}

/* SQL that takes a database back from schema 21 (slurm_id, slurm_reason go), 20 (pty goes), 19 (the notification outbox stays: its step
 * makes it only if it is missing), 18 (jobs_gpu_end is gone; step 18 makes jobs_active
 * and jobs_end again), 17 (gstats' index and samples) through 12 and 11 (environments
 * stored once, in envs) to 10 (each payload row holds its environment's text), for the
 * tests of the steps before it. */
#define BACK_BEFORE_ENVS                                                                           \
    "DROP INDEX jobs_end; DROP TABLE gpu_samples; ALTER TABLE jobs DROP COLUMN log_lost_bytes;"    \
    "ALTER TABLE jobs DROP COLUMN stray;"                                                          \
    "ALTER TABLE jobs DROP COLUMN cpus_per_gpu; ALTER TABLE jobs DROP COLUMN cpus;"                \
    "ALTER TABLE jobs DROP COLUMN cpus_far; ALTER TABLE jobs DROP COLUMN slurm_note;"              \
    "ALTER TABLE jobs DROP COLUMN gpu_util_mean; ALTER TABLE jobs DROP COLUMN gpu_util_peak;"      \
    "ALTER TABLE jobs DROP COLUMN gpu_mem_peak_mb; ALTER TABLE jobs DROP COLUMN energy_wh;"        \
    "ALTER TABLE jobs DROP COLUMN gpu_idle;"                                                       \
    "ALTER TABLE jobs DROP COLUMN failure_class; ALTER TABLE jobs DROP COLUMN failure_line;"       \
    "ALTER TABLE jobs DROP COLUMN requeue; ALTER TABLE jobs DROP COLUMN requeue_count;"            \
    "ALTER TABLE jobs DROP COLUMN preempted_by; ALTER TABLE jobs DROP COLUMN pty;"                 \
    "ALTER TABLE jobs DROP COLUMN slurm_id; ALTER TABLE jobs DROP COLUMN slurm_reason;"            \
    "DROP TABLE usage; DROP TABLE reservations;"                                                   \
    "ALTER TABLE jobs DROP COLUMN project; ALTER TABLE jobs DROP COLUMN nice;"                     \
    "ALTER TABLE jobs DROP COLUMN notify_email; ALTER TABLE jobs DROP COLUMN notify_on;"           \
    "ALTER TABLE jobs DROP COLUMN auto_close;"                                                     \
    "UPDATE job_payload SET env = (SELECT text FROM envs WHERE envs.id = env_id) "                 \
    "WHERE env_id IS NOT NULL;"                                                                    \
    "DROP INDEX job_payload_env; ALTER TABLE job_payload DROP COLUMN env_id;"                      \
    "DROP TABLE envs;"

/* Step 7 of the schema: jobs stored before it have no umask (-1: they run with 0077, as
 * they did). */
static void test_migrate_umask(void **state)
{
    struct fixture *f = *state;
    struct job *j = full_job(1);
    assert_int_equal(store_insert_job(f->s, j, NULL), 0);
    job_free(j);
    store_close(f->s);
    sqlite3 *db = peek_open(f->path);
    assert_int_equal(sqlite3_exec(db,
                                  BACK_BEFORE_ENVS "ALTER TABLE jobs DROP COLUMN umask;"
                                                   "ALTER TABLE jobs DROP COLUMN mig_profile;"
                                                   "ALTER TABLE jobs DROP COLUMN mig_count;"
                                                   "ALTER TABLE jobs DROP COLUMN mig_uuids;"
                                                   "PRAGMA user_version=6",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    f->s = open_ok(f->path);
    struct job got;
    assert_int_equal(store_get_job(f->s, 1, &got, false), 0);
    assert_int_equal(got.umask, -1);
    assert_string_equal(got.conda_env, "torch-env"); /* the rest as it was */
    job_clear(&got);
}

/* Step 8 of the schema: jobs stored before it ask for no MIG instances and hold none;
 * a MIG job's request and the instances it holds survive a reopen (a daemon restart). */
static void test_migrate_and_keep_mig(void **state)
{
    struct fixture *f = *state;
    struct job *j = full_job(1);
    assert_int_equal(store_insert_job(f->s, j, NULL), 0);
    job_free(j);
    store_close(f->s);
    sqlite3 *db = peek_open(f->path);
    assert_int_equal(sqlite3_exec(db,
                                  BACK_BEFORE_ENVS "ALTER TABLE jobs DROP COLUMN mig_profile;"
                                                   "ALTER TABLE jobs DROP COLUMN mig_count;"
                                                   "ALTER TABLE jobs DROP COLUMN mig_uuids;"
                                                   "PRAGMA user_version=7",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    f->s = open_ok(f->path);
    struct job got;
    assert_int_equal(store_get_job(f->s, 1, &got, false), 0);
    assert_null(got.mig_profile);
    assert_int_equal(got.mig_count, 0);
    assert_null(got.mig_uuids);
    job_clear(&got);

    j = full_job(2);
    j->gpus = 0;
    j->gpu_mask = 0;
    j->mig_profile = xstrdup("1g.18gb");
    j->mig_count = 2;
    assert_int_equal(store_insert_job(f->s, j, NULL), 0);
    j->state = JOB_RUNNING;
    j->mig_uuids = xstrdup("MIG-aaaa,MIG-bbbb");
    assert_int_equal(store_begin(f->s), 0);
    assert_int_equal(store_update_job(f->s, j), 0);
    assert_int_equal(store_commit(f->s), 0);
    job_free(j);
    store_close(f->s);
    f->s = open_ok(f->path);
    assert_int_equal(store_get_job(f->s, 2, &got, false), 0);
    assert_string_equal(got.mig_profile, "1g.18gb");
    assert_int_equal(got.mig_count, 2);
    assert_string_equal(got.mig_uuids, "MIG-aaaa,MIG-bbbb");
    job_clear(&got);
}

/* Step 6 of the schema: a reason written as text by an older version becomes a code,
 * the job it names and the free text. */
static void test_migrate_reasons(void **state)
{
    struct fixture *f = *state;
    static const char *const texts[] = {"CancelledByUser",
                                        "DependencyFailed:42",
                                        "LaunchFailed: cannot chdir to /x: gone",
                                        "ShimLost: gflow-shim killed by SIGKILL",
                                        "JobHeldUser",
                                        "Resources?",
                                        NULL};
    for (int i = 0; i < 7; i++)
        insert_free(f->s, mkjob(i + 1, JOB_CANCELLED, "bob", 10, 1));
    store_close(f->s);
    sqlite3 *db = peek_open(f->path);
    for (int i = 0; i < 7; i++) {
        char *sql = sqlite3_mprintf("UPDATE jobs SET reason = %Q WHERE id = %d", texts[i], i + 1);
        assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_free(sql);
    }
    /* Back to the schema of version 5. */
    assert_int_equal(sqlite3_exec(db,
                                  BACK_BEFORE_ENVS "ALTER TABLE jobs DROP COLUMN reason_code;"
                                                   "ALTER TABLE jobs DROP COLUMN reason_job;"
                                                   "ALTER TABLE jobs DROP COLUMN umask;"
                                                   "ALTER TABLE jobs DROP COLUMN mig_profile;"
                                                   "ALTER TABLE jobs DROP COLUMN mig_count;"
                                                   "ALTER TABLE jobs DROP COLUMN mig_uuids;"
                                                   "PRAGMA user_version=5",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    f->s = open_ok(f->path);
    static const struct {
        enum job_reason code;
        int64_t job;
        const char *detail;
    } want[] = {
        {JOB_REASON_CANCELLED_BY_USER, 0, NULL},
        {JOB_REASON_DEPENDENCY_FAILED, 42, NULL},
        {JOB_REASON_LAUNCH_FAILED, 0, "cannot chdir to /x: gone"},
        {JOB_REASON_SHIM_LOST, 0, "gflow-shim killed by SIGKILL"},
        {JOB_REASON_HELD_BY_USER, 0, NULL},
        {JOB_REASON_OTHER, 0, "Resources?"},
        {JOB_REASON_NONE, 0, NULL},
    };
    for (int i = 0; i < 7; i++) {
        struct job got;
        assert_int_equal(store_get_job(f->s, i + 1, &got, false), 0);
        assert_int_equal(got.reason, want[i].code);
        assert_int_equal(got.reason_job, want[i].job);
        assert_str_eq_or_null(got.reason_detail, want[i].detail);
        /* The text at the API is what the older version stored. */
        char *text = job_reason_string(&got);
        assert_str_eq_or_null(text, texts[i]);
        free(text);
        job_clear(&got);
    }
}

static void test_open_bad_path(void **state)
{
    (void)state;
    char *err = NULL;
    assert_null(store_open("/nonexistent-dir/x/gflow.db", &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "/nonexistent-dir/x/gflow.db"));
    free(err);
}

/* A sweep's values and templates: stored in the payload, read with it, rewritten by
 * store_update_what (which keeps script and env). */
static void test_sweep_payload(void **state)
{
    struct fixture *f = *state;
    struct job *j = mkjob(3, JOB_HELD, "alice", 10, 1);
    j->params = json_pack("{s:s, s:s}", "lr", "0.1", "bs", "32");
    j->command_template = strdup("echo {lr} {bs}");
    j->name_template = strdup("r{lr}");
    insert_ok(f->s, j);
    struct job got;
    assert_int_equal(store_get_job(f->s, 3, &got, true), 0);
    assert_true(json_equal(got.params, j->params));
    assert_string_equal(got.command_template, "echo {lr} {bs}");
    assert_string_equal(got.name_template, "r{lr}");
    assert_null(got.script_template);
    json_object_set_new(got.params, "lr", json_string("0.5"));
    got.env = json_pack("{s:s}", "A", "1");
    assert_int_equal(store_update_what(f->s, &got, true), 0);
    job_clear(&got);
    assert_int_equal(store_get_job(f->s, 3, &got, false), 0);
    assert_null(got.params);
    job_clear(&got);
    assert_int_equal(store_get_job(f->s, 3, &got, true), 0);
    assert_string_equal(json_string_value(json_object_get(got.params, "lr")), "0.5");
    assert_string_equal(got.command_template, "echo {lr} {bs}");
    assert_string_equal(json_string_value(json_object_get(got.env, "A")), "1");
    job_clear(&got);
    job_free(j);
}

/* The jobs of a group store only what differs from the first one's payload; the rest
 * is read from it. */
static void test_group_payload(void **state)
{
    struct fixture *f = *state;
    json_t *env = json_pack("{s:s}", "HOME", "/home/bob");
    struct job *jobs[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = mkjob(10 + i, JOB_QUEUED, "bob", 10, 1);
        free(jobs[i]->command);
        jobs[i]->command = NULL;
        jobs[i]->script = strdup("#!/bin/sh\necho hi\n");
        jobs[i]->group_id = 10;
        jobs[i]->env = json_incref(env);
    }
    /* The third has an environment of its own (same content, another object). */
    json_decref(jobs[2]->env);
    jobs[2]->env = json_pack("{s:s}", "HOME", "/home/other");
    for (int i = 0; i < 3; i++)
        if (store_insert_job(f->s, jobs[i], i ? jobs[0] : NULL) != 0)
            fail_msg("insert: %s", store_error(f->s));
    sqlite3 *db = peek_open(f->path);
    /* Job 11 has no payload row of its own; 12 stores its environment, not the script. */
    char *rows = peek_text(db, "SELECT job_id, script IS NOT NULL, env_id IS NOT NULL FROM "
                               "job_payload ORDER BY job_id");
    assert_string_equal(rows, "10|1|1|\n12|0|1|\n");
    free(rows);
    sqlite3_close(db);
    for (int i = 0; i < 3; i++) {
        struct job got;
        assert_int_equal(store_get_job(f->s, 10 + i, &got, true), 0);
        assert_string_equal(got.script, "#!/bin/sh\necho hi\n");
        assert_true(json_equal(got.env, jobs[i]->env));
        job_clear(&got);
    }
    for (int i = 0; i < 3; i++)
        job_free(jobs[i]);
    json_decref(env);
}

/* Schema 11: each distinct environment is stored once (envs), however many jobs carry it;
 * each job reads its own back; pruning removes those no job names any more. */
static void test_envs_stored_once(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 4; i++) {
        struct job *j = mkjob(i + 1, JOB_CANCELLED, "bob", 10, 1);
        j->end_time = 2;
        j->env = json_pack("{s:s,s:s}", "HOME", "/home/bob", "SHELL", i == 3 ? "zsh" : "sh");
        insert_free(f->s, j);
    }
    sqlite3 *db = peek_open(f->path);
    assert_int_equal(peek_int(db, "SELECT count(*) FROM envs"), 2);
    assert_int_equal(peek_int(db, "SELECT count(*) FROM job_payload WHERE env IS NULL AND "
                                  "env_id IS NOT NULL"),
                     4);
    /* A row written before schema 11 holds the text itself: job 1 as such a row. */
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE job_payload SET env = (SELECT text FROM envs WHERE "
                                  "envs.id = env_id), env_id = NULL WHERE job_id = 1",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    for (int i = 0; i < 4; i++) {
        struct job got;
        assert_int_equal(store_get_job(f->s, i + 1, &got, true), 0);
        assert_string_equal(json_string_value(json_object_get(got.env, "SHELL")),
                            i == 3 ? "zsh" : "sh");
        job_clear(&got);
    }
    /* All but the newest pruned: the zsh environment stays, the sh one goes. */
    int64_t cursor = 0;
    assert_int_equal(store_prune(f->s, 1, 0, &cursor, 1000), 3);
    assert_int_equal(store_commit(f->s), 0);
    db = peek_open(f->path);
    char *left = peek_text(db, "SELECT text FROM envs");
    assert_string_equal(left, "{\"HOME\":\"/home/bob\",\"SHELL\":\"zsh\"}|\n");
    free(left);
    sqlite3_close(db);
}

static void test_insert_get(void **state)
{
    struct fixture *f = *state;
    struct job *j = full_job(7);
    insert_ok(f->s, j);

    struct job got;
    assert_int_equal(store_get_job(f->s, 7, &got, true), 0);
    assert_light_equal(&got, j);
    assert_string_equal(got.script, j->script);
    assert_true(json_equal(got.env, j->env));
    job_clear(&got);

    assert_int_equal(store_get_job(f->s, 7, &got, false), 0);
    assert_light_equal(&got, j);
    assert_null(got.script);
    assert_null(got.env);
    job_clear(&got);

    /* Defaults and NULLs round-trip as such. */
    struct job *d = job_new();
    d->id = 8;
    insert_ok(f->s, d);
    assert_int_equal(store_get_job(f->s, 8, &got, true), 0);
    assert_light_equal(&got, d);
    assert_null(got.script);
    assert_null(got.env);
    job_clear(&got);
    job_free(d);

    assert_int_equal(store_get_job(f->s, 9, &got, true), 1);
    assert_int_equal(store_get_job(f->s, 9, &got, false), 1);

    /* The same id twice is an error that names the job, and the store goes on working. */
    assert_int_equal(store_insert_job(f->s, j, NULL), -1);
    assert_non_null(strstr(store_error(f->s), "job 7"));
    assert_non_null(strstr(store_error(f->s), "UNIQUE"));
    assert_false(store_in_transaction(f->s));
    assert_int_equal(store_get_job(f->s, 7, &got, false), 0);
    job_clear(&got);
    job_free(j);

    struct job *bad = job_new();
    assert_int_equal(store_insert_job(f->s, bad, NULL), -1); /* id 0 */
    job_free(bad);
}

static void test_update(void **state)
{
    struct fixture *f = *state;
    struct job *j = full_job(3);
    insert_ok(f->s, j);

    struct job *u = job_dup(j, false);
    u->state = JOB_RUNNING;
    free(u->name);
    u->name = xstrdup("renamed");
    u->priority = 1;
    u->time_limit = 60;
    u->start_time = 1800000000.5;
    u->end_time = 0;
    u->exit_code = -1;
    u->signal = 0;
    u->oom = false;
    job_set_reason(u, JOB_REASON_DEPENDENCY_FAILED, 2, NULL);
    u->end_request = JOB_END_CANCEL;
    u->shim_pid = 99;
    u->shim_start = 98;
    u->max_rss_kb = 97;
    u->gpus = 1;
    u->gpu_mask = 1ULL << 3;
    u->memory_mb = 1;
    u->gpu_memory_mb = 2;
    u->shared = false;
    u->group_id = 0;
    u->array_task = -1;
    u->max_retries = 0;
    u->attempt = 1;
    u->retry_of = 0;
    assert_int_equal(store_update_job(f->s, u), 0);

    struct job got;
    assert_int_equal(store_get_job(f->s, 3, &got, true), 0);
    assert_light_equal(&got, u);
    /* The payload and the submitter are fixed: an update does not touch them. */
    free(u->user);
    u->user = xstrdup("mallory");
    u->uid = 0;
    u->command = xstrdup("rm -rf /");
    u->submit_time = 5;
    free(u->workdir);
    u->workdir = xstrdup("/");
    assert_int_equal(store_update_job(f->s, u), 0);
    job_clear(&got);
    assert_int_equal(store_get_job(f->s, 3, &got, true), 0);
    assert_string_equal(got.user, "alice");
    assert_int_equal(got.uid, 4000000000u);
    assert_null(got.command);
    assert_true(got.submit_time == j->submit_time);
    assert_string_equal(got.workdir, j->workdir);
    assert_string_equal(got.script, j->script);
    assert_true(json_equal(got.env, j->env));
    assert_string_equal(got.name, "renamed");
    job_clear(&got);

    u->id = 4;
    assert_int_equal(store_update_job(f->s, u), -1);
    assert_non_null(strstr(store_error(f->s), "no such job"));
    job_free(u);
    job_free(j);
}

static void test_load_active(void **state)
{
    struct fixture *f = *state;
    enum job_state st[] = {JOB_FINISHED, JOB_QUEUED,    JOB_RUNNING, JOB_FAILED,
                           JOB_HELD,     JOB_CANCELLED, JOB_TIMEOUT, JOB_QUEUED};
    /* Inserted out of id order; loaded in id order. */
    int64_t ids[] = {5, 3, 8, 1, 2, 4, 7, 6};
    for (int i = 0; i < 8; i++) {
        struct job *j = mkjob(ids[i], st[i], "u", 10, 1);
        j->script = xstrdup("big");
        j->env = json_object();
        insert_free(f->s, j);
    }
    struct ids got = {0};
    assert_int_equal(store_load_active(f->s, collect_cb, &got), 0);
    assert_ids(&got, IDS(2, 3, 6, 8));
}

/* The callback may update jobs while loading (re-adoption at start-up does). */
static void update_cb(struct job *j, void *arg)
{
    struct store *s = arg;
    j->state = JOB_QUEUED;
    j->shim_pid = 0;
    assert_int_equal(store_update_job(s, j), 0);
    job_free(j);
}

static void test_load_active_callback_updates(void **state)
{
    struct fixture *f = *state;
    for (int i = 1; i <= 100; i++)
        insert_free(f->s, mkjob(i, JOB_RUNNING, "u", 10, 1));
    assert_int_equal(store_begin(f->s), 0);
    assert_int_equal(store_load_active(f->s, update_cb, f->s), 0);
    assert_int_equal(store_commit(f->s), 0);
    int64_t counts[JOB_STATE_COUNT];
    assert_int_equal(store_count_states(f->s, counts), 0);
    assert_int_equal(counts[JOB_QUEUED], 100);
    assert_int_equal(counts[JOB_RUNNING], 0);
}

/* Fixture for the listings:
 * id state user  prio submit start end  (elapsed)
 *  1 CD   alice   10   100    110   150   40
 *  2 PD   bob     20   200      0     0    0
 *  3 R    alice    5   300    now-1000 0  ~1000
 *  4 F    carol   10   400    410   420   10
 *  5 H    bob     20   500      0     0    0
 *  6 CA   alice   30   600      0   650    0   (cancelled while queued)
 *  7 PD   o'b     10   700      0     0    0  */
static void insert_list_fixture(struct store *s)
{
    struct job *j;
    j = mkjob(1, JOB_FINISHED, "alice", 10, 100);
    j->start_time = 110, j->end_time = 150;
    insert_free(s, j);
    insert_free(s, mkjob(2, JOB_QUEUED, "bob", 20, 200));
    j = mkjob(3, JOB_RUNNING, "alice", 5, 300);
    j->start_time = now_wall() - 1000;
    insert_free(s, j);
    j = mkjob(4, JOB_FAILED, "carol", 10, 400);
    j->start_time = 410, j->end_time = 420;
    insert_free(s, j);
    insert_free(s, mkjob(5, JOB_HELD, "bob", 20, 500));
    j = mkjob(6, JOB_CANCELLED, "alice", 30, 600);
    j->end_time = 650;
    insert_free(s, j);
    j = mkjob(7, JOB_QUEUED, "o'b\"; DROP TABLE jobs; --", 10, 700);
    free(j->name);
    j->name = xstrdup("aaa");
    insert_free(s, j);
}

static void test_list_filters(void **state)
{
    struct fixture *f = *state;
    insert_list_fixture(f->s);
    struct store_query q = {0};
    list_is(f->s, &q, IDS(1, 2, 3, 4, 5, 6, 7));

    enum job_state pd[] = {JOB_QUEUED};
    q = (struct store_query){.states = pd, .n_states = 1};
    list_is(f->s, &q, IDS(2, 7));
    enum job_state active[] = {JOB_RUNNING, JOB_HELD, JOB_QUEUED};
    q = (struct store_query){.states = active, .n_states = 3};
    list_is(f->s, &q, IDS(2, 3, 5, 7));
    enum job_state mixed[] = {JOB_FAILED, JOB_HELD};
    q = (struct store_query){.states = mixed, .n_states = 2};
    list_is(f->s, &q, IDS(4, 5));
    enum job_state to[] = {JOB_TIMEOUT};
    q = (struct store_query){.states = to, .n_states = 1};
    list_is(f->s, &q, NULL, 0);

    int64_t ids[] = {6, 1, 99, 3};
    q = (struct store_query){.ids = ids, .n_ids = 4};
    list_is(f->s, &q, IDS(1, 3, 6));
    q = (struct store_query){.ids = ids, .n_ids = 4, .states = mixed, .n_states = 2};
    list_is(f->s, &q, NULL, 0);

    q = (struct store_query){.user = "alice"};
    list_is(f->s, &q, IDS(1, 3, 6));
    q = (struct store_query){.user = "o'b\"; DROP TABLE jobs; --"};
    list_is(f->s, &q, IDS(7));
    q = (struct store_query){.user = "nobody"};
    list_is(f->s, &q, NULL, 0);

    q = (struct store_query){.since = 400};
    list_is(f->s, &q, IDS(4, 5, 6, 7));
    q = (struct store_query){.since = 400, .user = "alice", .ids = ids, .n_ids = 4};
    list_is(f->s, &q, IDS(6));

    /* Many ids in one query (more than SQLite's parameter limit). */
    int64_t *many = xmalloc(40000 * sizeof(*many));
    for (int i = 0; i < 40000; i++)
        many[i] = 40000 - i;
    q = (struct store_query){.ids = many, .n_ids = 40000, .states = pd, .n_states = 1};
    list_is(f->s, &q, IDS(2, 7));
    free(many);

    /* Bad queries. */
    struct ids got = {0};
    q = (struct store_query){.sort = (enum job_sort)99};
    assert_int_equal(store_list(f->s, &q, collect_cb, &got), -1);
    assert_non_null(strstr(store_error(f->s), "invalid sort key"));
    enum job_state bogus[] = {(enum job_state)42};
    q = (struct store_query){.states = bogus, .n_states = 1};
    assert_int_equal(store_list(f->s, &q, collect_cb, &got), -1);
    assert_non_null(strstr(store_error(f->s), "state"));
    assert_int_equal(got.n, 0);
    q = (struct store_query){0};
    list_is(f->s, &q, IDS(1, 2, 3, 4, 5, 6, 7));
}

/* A listing that names its fields reads their columns (and id, state), nothing else;
 * one with a field stored nowhere (max_concurrent) reads every column. */
static void one_job_cb(struct job *j, void *arg)
{
    struct job **out = arg;
    *out = j;
}

static void test_list_fields(void **state)
{
    struct fixture *f = *state;
    struct job *full = full_job(42);
    insert_free(f->s, full_job(42));
    bool want[JOB_FIELD_COUNT] = {[JOB_FIELD_NAME] = true, [JOB_FIELD_REASON] = true};
    struct store_query q = {.fields = want};
    struct job *j = NULL;
    assert_int_equal(store_list(f->s, &q, one_job_cb, &j), 0);
    assert_non_null(j);
    assert_int_equal(j->id, 42);
    assert_string_equal(j->name, full->name);
    assert_int_equal(j->state, full->state);
    assert_int_equal(j->reason, JOB_REASON_SHIM_LOST);
    assert_string_equal(j->reason_detail, "gflow-shim killed by SIGKILL");
    assert_null(j->workdir); /* not asked for */
    assert_int_equal(j->gpus, 0);
    assert_int_equal(j->exit_code, -1);
    job_free(j);

    memset(want, 0, sizeof(want));
    want[JOB_FIELD_MAX_CONCURRENT] = true;
    j = NULL;
    assert_int_equal(store_list(f->s, &q, one_job_cb, &j), 0);
    assert_non_null(j);
    assert_light_equal(j, full);
    job_free(full);
    job_free(j);
}

static void test_list_sort(void **state)
{
    struct fixture *f = *state;
    insert_list_fixture(f->s);
    struct store_query q = {.sort = JOB_SORT_ID};
    list_is(f->s, &q, IDS(1, 2, 3, 4, 5, 6, 7));
    q.descending = true;
    list_is(f->s, &q, IDS(7, 6, 5, 4, 3, 2, 1));

    q = (struct store_query){.sort = JOB_SORT_NAME};
    list_is(f->s, &q, IDS(7, 1, 2, 3, 4, 5, 6));
    q = (struct store_query){.sort = JOB_SORT_STATE};
    list_is(f->s, &q, IDS(2, 7, 5, 3, 1, 4, 6));
    q.descending = true;
    list_is(f->s, &q, IDS(6, 4, 1, 3, 5, 7, 2));
    /* Equal priorities keep id order (reversed when descending). */
    q = (struct store_query){.sort = JOB_SORT_PRIORITY};
    list_is(f->s, &q, IDS(3, 1, 4, 7, 2, 5, 6));
    q.descending = true;
    list_is(f->s, &q, IDS(6, 5, 2, 7, 4, 1, 3));
    q = (struct store_query){.sort = JOB_SORT_USER};
    list_is(f->s, &q, IDS(1, 3, 6, 2, 5, 4, 7));
    q = (struct store_query){.sort = JOB_SORT_SUBMIT, .descending = true};
    list_is(f->s, &q, IDS(7, 6, 5, 4, 3, 2, 1));
    q = (struct store_query){.sort = JOB_SORT_START};
    list_is(f->s, &q, IDS(2, 5, 6, 7, 1, 4, 3));
    q = (struct store_query){.sort = JOB_SORT_END, .descending = true};
    list_is(f->s, &q, IDS(6, 4, 1, 7, 5, 3, 2));
    /* Elapsed: not started 0 (2,5,6,7), finished end-start (4: 10, 1: 40), running
     * now-start (3: ~1000). */
    q = (struct store_query){.sort = JOB_SORT_TIME};
    list_is(f->s, &q, IDS(2, 5, 6, 7, 4, 1, 3));
    q.descending = true;
    list_is(f->s, &q, IDS(3, 1, 4, 7, 6, 5, 2));
    /* No sort key is the default. */
    q = (struct store_query){0};
    list_is(f->s, &q, IDS(1, 2, 3, 4, 5, 6, 7));
    /* Sorting composes with filters. */
    enum job_state pdh[] = {JOB_QUEUED, JOB_HELD};
    q = (struct store_query){
        .states = pdh, .n_states = 2, .sort = JOB_SORT_PRIORITY, .descending = true};
    list_is(f->s, &q, IDS(5, 2, 7));
}

static void test_list_limit(void **state)
{
    struct fixture *f = *state;
    insert_list_fixture(f->s);
    struct store_query q = {.limit = 3};
    list_is(f->s, &q, IDS(1, 2, 3));
    q.limit = -3;
    list_is(f->s, &q, IDS(5, 6, 7));
    q.limit = 100;
    list_is(f->s, &q, IDS(1, 2, 3, 4, 5, 6, 7));
    q.limit = -100;
    list_is(f->s, &q, IDS(1, 2, 3, 4, 5, 6, 7));
    q.limit = INT64_MIN;
    list_is(f->s, &q, IDS(1, 2, 3, 4, 5, 6, 7));
    q = (struct store_query){.descending = true, .limit = 2};
    list_is(f->s, &q, IDS(7, 6));
    q.limit = -2;
    list_is(f->s, &q, IDS(2, 1));
    q = (struct store_query){.sort = JOB_SORT_TIME, .limit = -2};
    list_is(f->s, &q, IDS(1, 3));
    q = (struct store_query){.sort = JOB_SORT_PRIORITY, .descending = true, .limit = 2};
    list_is(f->s, &q, IDS(6, 5));
    q.limit = -2;
    list_is(f->s, &q, IDS(1, 3));
    enum job_state pd[] = {JOB_QUEUED};
    q = (struct store_query){.states = pd, .n_states = 1, .limit = -1};
    list_is(f->s, &q, IDS(7));
}

static void test_counts(void **state)
{
    struct fixture *f = *state;
    int64_t c[JOB_STATE_COUNT];
    assert_int_equal(store_count_states(f->s, c), 0);
    for (int i = 0; i < JOB_STATE_COUNT; i++)
        assert_int_equal(c[i], 0);
    insert_list_fixture(f->s);
    assert_int_equal(store_count_states(f->s, c), 0);
    int64_t want[JOB_STATE_COUNT] = {
        [JOB_QUEUED] = 2, [JOB_HELD] = 1,      [JOB_RUNNING] = 1, [JOB_FINISHED] = 1,
        [JOB_FAILED] = 1, [JOB_CANCELLED] = 1, [JOB_TIMEOUT] = 0};
    for (int i = 0; i < JOB_STATE_COUNT; i++)
        assert_int_equal(c[i], want[i]);
    struct job j;
    assert_int_equal(store_get_job(f->s, 3, &j, false), 0);
    j.state = JOB_TIMEOUT;
    assert_int_equal(store_update_job(f->s, &j), 0);
    job_clear(&j);
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_RUNNING], 0);
    assert_int_equal(c[JOB_TIMEOUT], 1);
    /* An update that keeps the state keeps the counts. */
    assert_int_equal(store_get_job(f->s, 2, &j, false), 0);
    j.priority = 99;
    assert_int_equal(store_update_job(f->s, &j), 0);
    job_clear(&j);
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_QUEUED], 2);
    /* Rolled-back changes leave the counts as they were. */
    assert_int_equal(store_begin(f->s), 0);
    insert_free(f->s, mkjob(50, JOB_QUEUED, "u", 10, 1));
    store_rollback(f->s);
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_QUEUED], 2);
    /* Jobs inserted in an open transaction count at once, and are in job_counts (no
     * trigger since schema 22: store_commit adds them) once it is committed. */
    assert_int_equal(store_begin(f->s), 0);
    insert_free(f->s, mkjob(51, JOB_QUEUED, "u", 10, 1));
    insert_free(f->s, mkjob(52, JOB_QUEUED, "u", 10, 1));
    insert_free(f->s, mkjob(53, JOB_HELD, "u", 10, 1));
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_QUEUED], 4);
    assert_int_equal(c[JOB_HELD], 2);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_QUEUED], 4);
    assert_int_equal(c[JOB_HELD], 2);
    {
        sqlite3 *peek = peek_open(f->path);
        assert_int_equal(peek_int(peek, "SELECT n FROM job_counts WHERE state = 0"), 4);
        assert_int_equal(peek_int(peek, "SELECT sum(n) FROM job_counts"),
                         peek_int(peek, "SELECT count(*) FROM jobs"));
        sqlite3_close(peek);
    }
    /* A job inserted and started in one transaction: the update's trigger counts it
     * off PD before the commit counts it in. */
    assert_int_equal(store_begin(f->s), 0);
    insert_free(f->s, mkjob(55, JOB_QUEUED, "u", 10, 1));
    assert_int_equal(store_get_job(f->s, 55, &j, false), 0);
    j.state = JOB_RUNNING;
    assert_int_equal(store_update_job(f->s, &j), 0);
    job_clear(&j);
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_QUEUED], 4);
    assert_int_equal(c[JOB_RUNNING], 1);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_QUEUED], 4);
    assert_int_equal(c[JOB_RUNNING], 1);
    /* A job inserted on its own (no transaction open) is counted by its own commit. */
    insert_free(f->s, mkjob(54, JOB_QUEUED, "u", 10, 1));
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_QUEUED], 5);
    {
        sqlite3 *peek = peek_open(f->path);
        assert_int_equal(peek_int(peek, "SELECT n FROM job_counts WHERE state = 0"), 5);
        sqlite3_close(peek);
    }

    /* The counts follow rows deleted behind the store's back (a future purge), and
     * deleting a job deletes its payload. */
    struct job *p = full_job(60);
    p->state = JOB_FINISHED;
    insert_free(f->s, p);
    sqlite3 *db = peek_open(f->path);
    assert_int_equal(sqlite3_exec(db,
                                  "PRAGMA foreign_keys=ON; DELETE FROM jobs WHERE id IN (1, 2, 60)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(peek_int(db, "SELECT count(*) FROM job_payload"), 0);
    assert_int_equal(peek_int(db, "SELECT sum(n) FROM job_counts"),
                     peek_int(db, "SELECT count(*) FROM jobs"));
    sqlite3_close(db);
    assert_int_equal(store_count_states(f->s, c), 0);
    assert_int_equal(c[JOB_QUEUED], 4);
    assert_int_equal(c[JOB_FINISHED], 0);
}

static void test_settings(void **state)
{
    struct fixture *f = *state;
    char *v = (char *)"junk";
    assert_int_equal(store_get_setting(f->s, "paused", &v), 1);
    assert_null(v);
    assert_int_equal(store_set_setting(f->s, "paused", "true"), 0);
    assert_int_equal(store_set_setting(f->s, "gpu_limit", "2"), 0);
    assert_int_equal(store_set_setting(f->s, "paused", "false"), 0);
    assert_int_equal(store_get_setting(f->s, "paused", &v), 0);
    assert_string_equal(v, "false");
    free(v);
    reopen(f);
    assert_int_equal(store_get_setting(f->s, "gpu_limit", &v), 0);
    assert_string_equal(v, "2");
    free(v);
    assert_int_equal(store_set_setting(f->s, "gpu_limit", NULL), 0);
    assert_int_equal(store_get_setting(f->s, "gpu_limit", &v), 1);
    assert_null(v);
    assert_int_equal(store_set_setting(f->s, "k'ey", "va'lue"), 0);
    assert_int_equal(store_get_setting(f->s, "k'ey", &v), 0);
    assert_string_equal(v, "va'lue");
    free(v);
}

static void test_ids_never_reused(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(store_next_job_id(f->s), 1);
    for (int i = 0; i < 5; i++) {
        int64_t id = store_next_job_id(f->s);
        assert_int_equal(id, i + 1);
        insert_free(f->s, mkjob(id, JOB_QUEUED, "u", 10, 1));
    }
    assert_int_equal(store_next_job_id(f->s), 6);
    reopen(f);
    assert_int_equal(store_next_job_id(f->s), 6);

    /* Even if history is purged behind the store's back, ids keep counting. */
    store_close(f->s);
    f->s = NULL;
    sqlite3 *db = peek_open(f->path);
    assert_int_equal(sqlite3_exec(db, "DELETE FROM jobs WHERE id >= 4", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    f->s = open_ok(f->path);
    assert_int_equal(store_next_job_id(f->s), 6);

    /* A lower id inserted later does not move the counter back. */
    insert_free(f->s, mkjob(4, JOB_QUEUED, "u", 10, 1));
    assert_int_equal(store_next_job_id(f->s), 6);
    /* An explicit higher id moves it forward, durably. */
    insert_free(f->s, mkjob(100, JOB_QUEUED, "u", 10, 1));
    assert_int_equal(store_next_job_id(f->s), 101);
    reopen(f);
    assert_int_equal(store_next_job_id(f->s), 101);
}

/* The database emptied or put back from a backup: ids go on from the high-water mark
 * beside it (exactly after a clean close, from the reserved block after a crash). */
static void test_ids_survive_a_lost_database(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 5; i++)
        insert_free(f->s, mkjob(store_next_job_id(f->s), JOB_QUEUED, "u", 10, 1));
    store_close(f->s);
    f->s = NULL;
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    f->s = open_ok(f->path);
    assert_int_equal(store_next_job_id(f->s), 6);

    /* Ids handed out in a commit are covered before it: a crash (no close) and the
     * database lost again still go on above them. */
    assert_int_equal(store_begin(f->s), 0);
    insert_free(f->s, mkjob(store_next_job_id(f->s), JOB_QUEUED, "u", 10, 1));
    assert_int_equal(store_commit(f->s), 0);
    char mark_path[160];
    snprintf(mark_path, sizeof(mark_path), "%s/next_job_id", f->dir);
    char *mark = read_file(mark_path, NULL);
    assert_non_null(mark);
    assert_true(atoll(mark) > 6);
    free(mark);

    /* A mark that is not a number stops the open with a reason naming the file. */
    store_close(f->s);
    assert_int_equal(write_file(mark_path, "x\n", 2, 0600), 0);
    char *err = NULL;
    f->s = store_open(f->path, &err);
    assert_null(f->s);
    assert_non_null(strstr(err, "next_job_id"));
    free(err);
    mark = read_file(mark_path, NULL); /* left as it was, for the operator */
    assert_string_equal(mark, "x\n");
    free(mark);
    unlink(mark_path);
    f->s = open_ok(f->path);
}

static void test_transactions(void **state)
{
    struct fixture *f = *state;
    assert_false(store_in_transaction(f->s));
    assert_int_equal(store_commit(f->s), 0); /* nothing open: a no-op */
    store_rollback(f->s);                    /* likewise */

    assert_int_equal(store_begin(f->s), 0);
    assert_true(store_in_transaction(f->s));
    assert_int_equal(store_begin(f->s), 0); /* already open: a no-op */
    insert_free(f->s, mkjob(1, JOB_QUEUED, "u", 10, 1));
    insert_free(f->s, mkjob(2, JOB_QUEUED, "u", 10, 1));
    assert_true(store_in_transaction(f->s));
    /* Another connection does not see the group before it is committed. */
    sqlite3 *db = peek_open(f->path);
    assert_int_equal(peek_int(db, "SELECT count(*) FROM jobs"), 0);
    assert_int_equal(store_commit(f->s), 0);
    assert_false(store_in_transaction(f->s));
    assert_int_equal(peek_int(db, "SELECT count(*) FROM jobs"), 2);

    /* Rollback discards inserts, updates and settings of the group. */
    assert_int_equal(store_begin(f->s), 0);
    int64_t id = store_next_job_id(f->s);
    assert_int_equal(id, 3);
    insert_free(f->s, mkjob(id, JOB_QUEUED, "u", 10, 1));
    struct job *u = mkjob(1, JOB_RUNNING, "u", 10, 1);
    assert_int_equal(store_update_job(f->s, u), 0);
    job_free(u);
    assert_int_equal(store_set_setting(f->s, "paused", "true"), 0);
    store_rollback(f->s);
    assert_false(store_in_transaction(f->s));
    struct job got;
    assert_int_equal(store_get_job(f->s, 3, &got, false), 1);
    assert_int_equal(store_get_job(f->s, 1, &got, false), 0);
    assert_int_equal(got.state, JOB_QUEUED);
    job_clear(&got);
    char *v;
    assert_int_equal(store_get_setting(f->s, "paused", &v), 1);
    /* The id handed out in the rolled-back group is skipped, not reused. */
    assert_true(store_next_job_id(f->s) >= 3);
    assert_int_equal(peek_int(db, "SELECT count(*) FROM jobs"), 2);

    /* A failed statement inside a group does not end the group. */
    assert_int_equal(store_begin(f->s), 0);
    insert_free(f->s, mkjob(10, JOB_QUEUED, "u", 10, 1));
    struct job *dup = mkjob(1, JOB_QUEUED, "u", 10, 1);
    assert_int_equal(store_insert_job(f->s, dup, NULL), -1);
    job_free(dup);
    assert_true(store_in_transaction(f->s));
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(peek_int(db, "SELECT count(*) FROM jobs"), 3);
    sqlite3_close(db);

    /* Checkpoints: skipped inside a group, done outside. */
    assert_int_equal(store_begin(f->s), 0);
    assert_int_equal(store_checkpoint(f->s), 0);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(store_checkpoint(f->s), 0);
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : 0;
}

/* A COMMIT that fails because the disk is full (here: a file size limit, below the room
 * the store reserves in its WAL, which it would otherwise write into) loses the
 * transaction; the store keeps saying so, refusing changes, until it is rolled back. */
static void test_commit_failure(void **state)
{
    struct fixture *f = *state;
    insert_free(f->s, mkjob(1, JOB_QUEUED, "u", 10, 1));
    char wal[160];
    snprintf(wal, sizeof(wal), "%s-wal", f->path);

    assert_int_equal(store_begin(f->s), 0);
    struct job *big = mkjob(2, JOB_QUEUED, "u", 10, 1);
    big->script = xmalloc(1 << 20); /* fits the page cache: written at COMMIT */
    memset(big->script, '#', (1 << 20) - 1);
    big->script[(1 << 20) - 1] = '\0';
    insert_free(f->s, big);

    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    assert_true(file_size(wal) >= 4 * 1024 * 1024); /* the reserve */
    lim.rlim_cur = 256 * 1024;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = store_commit(f->s);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);

    assert_int_equal(rc, -1);
    assert_non_null(strstr(store_error(f->s), "committing"));
    assert_non_null(strstr(store_error(f->s), "rolled back"));
    /* Not acknowledged yet: still "in a transaction", and nothing can pretend to commit. */
    assert_true(store_in_transaction(f->s));
    assert_int_equal(store_commit(f->s), -1);
    assert_int_equal(store_begin(f->s), -1);
    struct job *j3 = mkjob(3, JOB_QUEUED, "u", 10, 1);
    assert_int_equal(store_insert_job(f->s, j3, NULL), -1);
    assert_int_equal(store_set_setting(f->s, "k", "v"), -1);
    assert_non_null(strstr(store_error(f->s), "roll"));
    /* Reads still work. */
    struct job got;
    assert_int_equal(store_get_job(f->s, 1, &got, false), 0);
    job_clear(&got);

    store_rollback(f->s);
    assert_false(store_in_transaction(f->s));
    assert_int_equal(store_get_job(f->s, 2, &got, false), 1);
    insert_ok(f->s, j3);
    job_free(j3);
    reopen(f);
    assert_int_equal(store_get_job(f->s, 3, &got, false), 0);
    job_clear(&got);
    assert_int_equal(store_get_job(f->s, 2, &got, false), 1);
}

/* A statement that fails inside a transaction for the same reason loses the whole
 * transaction too: the changes before it are gone, and the changes after it are refused
 * rather than made outside any transaction. The daemon's connection never spills its
 * page cache to the WAL (a statement then writes nothing: store.c); the test turns
 * spilling on to make a statement write, and fail. */
static void test_statement_failure_loses_the_transaction(void **state)
{
    struct fixture *f = *state;
    insert_free(f->s, mkjob(1, JOB_QUEUED, "u", 10, 1));
    assert_int_equal(store_exec(f->s, "PRAGMA cache_spill=ON", "spilling"), 0);
    assert_int_equal(store_begin(f->s), 0);
    insert_free(f->s, mkjob(2, JOB_QUEUED, "u", 10, 1));
    struct job *big = mkjob(3, JOB_QUEUED, "u", 10, 1);
    big->script = xmalloc(6 << 20); /* more than the page cache holds */
    memset(big->script, '#', (6 << 20) - 1);
    big->script[(6 << 20) - 1] = '\0';

    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 256 * 1024;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = store_insert_job(f->s, big, NULL);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    job_free(big);

    assert_int_equal(rc, -1);
    assert_true(store_transaction_lost(f->s));
    assert_true(store_in_transaction(f->s));
    struct job *j4 = mkjob(4, JOB_QUEUED, "u", 10, 1);
    assert_int_equal(store_insert_job(f->s, j4, NULL), -1); /* not in autocommit mode */
    assert_int_equal(store_commit(f->s), -1);
    store_rollback(f->s);
    struct job got;
    assert_int_equal(store_get_job(f->s, 2, &got, false), 1); /* before the failure: gone */
    assert_int_equal(store_get_job(f->s, 4, &got, false), 1);
    assert_int_equal(store_get_job(f->s, 1, &got, false), 0); /* committed before: kept */
    job_clear(&got);
    insert_ok(f->s, j4);
    job_free(j4);
}

/* Committed data survives a reopen; and the last close leaves the file consistent. */
static void test_reopen_keeps_everything(void **state)
{
    struct fixture *f = *state;
    struct job *j = full_job(12);
    insert_ok(f->s, j);
    reopen(f);
    struct job got;
    assert_int_equal(store_get_job(f->s, 12, &got, true), 0);
    assert_light_equal(&got, j);
    assert_string_equal(got.script, j->script);
    assert_true(json_equal(got.env, j->env));
    job_clear(&got);
    job_free(j);
    assert_int_equal(store_next_job_id(f->s), 13);
}

/* Dependencies round-trip in the job row and are indexed by the job depended on. */
static void test_dependencies(void **state)
{
    struct fixture *f = *state;
    insert_free(f->s, mkjob(1, JOB_FINISHED, "alice", 10, 1));
    insert_free(f->s, mkjob(2, JOB_QUEUED, "alice", 10, 2));
    struct job *j = mkjob(3, JOB_QUEUED, "alice", 10, 3);
    job_deps_add(j, 1, JOB_DEP_AFTEROK);
    job_deps_add(j, 2, JOB_DEP_AFTERNOTOK);
    j->deps_any = true;
    j->auto_cancel = false;
    insert_ok(f->s, j);
    struct job *k = mkjob(4, JOB_QUEUED, "alice", 10, 4);
    job_deps_add(k, 2, JOB_DEP_AFTERANY);
    insert_free(f->s, k);

    struct job got;
    assert_int_equal(store_get_job(f->s, 3, &got, false), 0);
    assert_light_equal(&got, j);
    job_clear(&got);
    assert_int_equal(store_get_job(f->s, 4, &got, false), 0);
    assert_int_equal(got.n_deps, 1);
    assert_true(got.auto_cancel);
    assert_false(got.deps_any);
    job_clear(&got);

    int64_t *ids;
    size_t n;
    assert_int_equal(store_dependents(f->s, 2, &ids, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 4);
    free(ids);
    assert_int_equal(store_dependents(f->s, 4, &ids, &n), 0);
    assert_int_equal(n, 0);
    assert_null(ids);

    enum job_state st;
    assert_int_equal(store_job_state(f->s, 1, &st), 0);
    assert_int_equal(st, JOB_FINISHED);
    assert_int_equal(store_job_state(f->s, 99, &st), 1);
    job_free(j);
}

/* How many of the log's frames were copied into the database (nBackfill in the -shm
 * file, after the two copies of the WAL index header), and how many there are. */
static void wal_frames(const char *db_path, uint32_t *backfilled, uint32_t *frames)
{
    char shm[160];
    snprintf(shm, sizeof(shm), "%s-shm", db_path);
    FILE *fp = fopen(shm, "rb");
    assert_non_null(fp);
    unsigned char head[100];
    assert_int_equal(fread(head, 1, sizeof(head), fp), sizeof(head));
    fclose(fp);
    memcpy(frames, head + 16, 4);     /* WalIndexHdr.mxFrame */
    memcpy(backfilled, head + 96, 4); /* WalCkptInfo.nBackfill */
}

/* Commits a transaction of 1,100 jobs with a 40 KB script each: ~11,000 pages, more than
 * the log's length that forces a checkpoint (STORE_WAL_FORCE_PAGES). */
static void large_commit(struct store *s, int64_t first)
{
    char *script = xmalloc(40001);
    memset(script, '#', 40000);
    script[40000] = '\0';
    assert_int_equal(store_begin(s), 0);
    for (int64_t id = first; id < first + 1100; id++) {
        struct job *j = mkjob(id, JOB_HELD, "u", 10, 1);
        j->script = xstrdup(script);
        insert_free(s, j);
    }
    assert_int_equal(store_commit(s), 0);
    free(script);
}

/* A large transaction is not checkpointed as it commits (its reply would wait for it):
 * the next commit, finding the log long already, checkpoints it. */
static void test_forced_checkpoint_waits_a_commit(void **state)
{
    struct fixture *f = *state;
    uint32_t done, frames;
    large_commit(f->s, 1);
    wal_frames(f->path, &done, &frames);
    assert_true(frames >= 10000);
    assert_int_equal(done, 0);
    insert_free(f->s, mkjob(5000, JOB_HELD, "u", 10, 1));
    wal_frames(f->path, &done, &frames);
    assert_true(frames > 10000);
    assert_int_equal(done, frames);
}

/* With the checkpoint thread, a large transaction's log is copied into the database
 * without another commit and off the committing thread; an idle checkpoint is only asked
 * for; closing the store stops the thread (and removes the log, the last connection). */
static void test_checkpoint_thread(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(store_ckpt_start(f->s), 0);
    large_commit(f->s, 1);
    uint32_t done = 0, frames = 0;
    double deadline = now_mono() + 20;
    while (now_mono() < deadline) {
        wal_frames(f->path, &done, &frames);
        if (frames >= 10000 && done == frames)
            break;
        usleep(10 * 1000);
    }
    assert_true(frames >= 10000);
    assert_int_equal(done, frames);
    assert_true(store_ckpt_done(f->s) >= 1);
    uint64_t before = store_ckpt_done(f->s);
    insert_free(f->s, mkjob(5000, JOB_HELD, "u", 10, 1));
    assert_int_equal(store_checkpoint(f->s), 0);
    deadline = now_mono() + 20;
    while (store_ckpt_done(f->s) == before && now_mono() < deadline)
        usleep(10 * 1000);
    assert_true(store_ckpt_done(f->s) > before);
    store_close(f->s);
    char wal[160];
    snprintf(wal, sizeof(wal), "%s-wal", f->path);
    assert_int_equal(access(wal, F_OK), -1);
    f->s = open_ok(f->path);
    struct job j;
    assert_int_equal(store_get_job(f->s, 5000, &j, false), 0);
    job_clear(&j);
}

/* A large transaction has the larger page cache until it ends, however it ends, and the
 * hint opens one if none is open (so that its end, and the usual cache, certainly come). */
static void test_cache_for_large(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(peek_int(f->s->db, "PRAGMA cache_size"), -1024);
    store_expect_large(f->s);
    assert_true(store_in_transaction(f->s));
    assert_int_equal(peek_int(f->s->db, "PRAGMA cache_size"), -262144);
    insert_free(f->s, mkjob(1, JOB_HELD, "u", 10, 1));
    store_expect_large(f->s); /* again: the same */
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(peek_int(f->s->db, "PRAGMA cache_size"), -1024);
    store_expect_large(f->s);
    store_rollback(f->s);
    assert_false(store_in_transaction(f->s));
    assert_int_equal(peek_int(f->s->db, "PRAGMA cache_size"), -1024);
    store_expect_large(f->s); /* nothing changed in it: committed all the same */
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(peek_int(f->s->db, "PRAGMA cache_size"), -1024);
}

/* A sweep's params are stored as json_dumps would write them, whatever the values hold. */
static void test_params_text(void **state)
{
    (void)state;
    json_t *p = json_object();
    json_object_set_new(p, "x", json_string("1"));
    json_object_set_new(p, "lr", json_string("a \"quoted\" \\ back/slash"));
    json_object_set_new(p, "ctl", json_string("\x01\b\f\n\r\t\x1f\x7f end"));
    json_object_set_new(p, "utf8", json_string("caf\xc3\xa9 \xf0\x9f\x99\x82 \xe2\x80\xa8"));
    json_object_set_new(p, "empty", json_string(""));
    char *want = json_dumps(p, JSON_COMPACT), *got = store_params_text(p);
    assert_string_equal(got, want);
    free(want);
    free(got);
    json_object_set_new(p, "n", json_integer(3)); /* not all strings: jansson's text */
    want = json_dumps(p, JSON_COMPACT);
    got = store_params_text(p);
    assert_string_equal(got, want);
    free(want);
    free(got);
    json_decref(p);
    p = json_object();
    got = store_params_text(p);
    assert_string_equal(got, "{}");
    free(got);
    json_decref(p);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_open_pragmas_and_schema),
        T(test_refuses_newer_schema),
        T(test_migrate_counts_without_insert_trigger),
        T(test_migrate_reasons),
        T(test_migrate_umask),
        T(test_migrate_and_keep_mig),
        T(test_statement_failure_loses_the_transaction),
        T(test_group_payload),
        T(test_envs_stored_once),
        cmocka_unit_test(test_open_bad_path),
        T(test_insert_get),
        T(test_sweep_payload),
        T(test_update),
        T(test_load_active),
        T(test_load_active_callback_updates),
        T(test_list_filters),
        T(test_list_fields),
        T(test_list_sort),
        T(test_list_limit),
        T(test_counts),
        T(test_settings),
        T(test_ids_never_reused),
        T(test_ids_survive_a_lost_database),
        T(test_transactions),
        T(test_commit_failure),
        T(test_reopen_keeps_everything),
        T(test_dependencies),
        T(test_forced_checkpoint_waits_a_commit),
        T(test_checkpoint_thread),
        cmocka_unit_test(test_params_text),
        T(test_cache_for_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
