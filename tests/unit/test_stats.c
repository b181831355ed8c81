/* test_stats: gstats' aggregation (src/core/stats.c): the percentile, grouping by user,
 * project and GPU, GPU-hours with running jobs' time so far, waits, failure rate, top
 * reasons, and the utilisation samples' summary and time series. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "stats.h"

static int double_cmp(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return a < b ? -1 : a > b;
}

static void test_percentile(void **state)
{
    (void)state;
    double none[1] = {0};
    assert_float_equal(stats_percentile(none, 0, 95), 0, 0);
    double one[] = {7};
    assert_float_equal(stats_percentile(one, 1, 95), 7, 0);
    /* Nearest rank: of 1..20, the 95th percentile is the 19th value. */
    double v[20];
    for (int i = 0; i < 20; i++)
        v[i] = 20 - i; /* unsorted on purpose */
    assert_float_equal(stats_percentile(v, 20, 95), 19, 0);
    assert_float_equal(stats_percentile(v, 20, 100), 20, 0);
    assert_float_equal(stats_percentile(v, 20, 50), 10, 0);
    double w[] = {5, 1, 3};
    assert_float_equal(stats_percentile(w, 3, 95), 5, 0);
    /* The selection agrees with sorting, duplicates and all. */
    srand(7);
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + (size_t)(rand() % 300);
        double a[300], sorted[300];
        for (size_t i = 0; i < n; i++)
            a[i] = sorted[i] = rand() % (round % 2 ? 5 : 1000);
        qsort(sorted, n, sizeof(double), double_cmp);
        double p = 1 + rand() % 100;
        size_t rank = (size_t)ceil(p / 100.0 * (double)n);
        assert_float_equal(stats_percentile(a, n, p), sorted[rank - 1], 0);
    }
}

static const json_t *group(const json_t *out, const char *name)
{
    size_t i;
    const json_t *g;
    json_array_foreach (json_object_get(out, "groups"), i, g) {
        if (!strcmp(json_string_value(json_object_get(g, "name")), name))
            return g;
    }
    fail_msg("no group %s", name);
    return NULL;
}

static double num(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

static int64_t count(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

/* Submitted at 0 + wait, run for run seconds from then. */
static struct stats_job job(const char *user, const char *project, const char *gpu_ids, int state,
                            double wait, double run, int64_t gpus, int reason)
{
    struct stats_job j = {.user = user,
                          .project = project,
                          .gpu_ids = gpu_ids,
                          .state = state,
                          .submit_time = 1000,
                          .gpus = gpus,
                          .reason = reason};
    j.start_time = 1000 + wait;
    j.end_time = state == JOB_RUNNING ? 0 : j.start_time + run;
    return j;
}

static void add_all(struct stats *s)
{
    struct stats_job jobs[] = {
        job("alice", "p1", "0", JOB_FINISHED, 10, 3600, 1, JOB_REASON_NONE),
        job("alice", "p1", "0,1", JOB_FAILED, 20, 1800, 2, JOB_REASON_NON_ZERO_EXIT),
        job("alice", NULL, "1", JOB_TIMEOUT, 30, 600, 1, JOB_REASON_TIME_LIMIT),
        job("bob", "p2", "1", JOB_CANCELLED, 40, 60, 1, JOB_REASON_CANCELLED_BY_USER),
        job("bob", "p2", "0", JOB_RUNNING, 50, 0, 1, JOB_REASON_NONE),
    };
    for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++)
        stats_add(s, &jobs[i]);
    /* Cancelled while queued: no wait, no run time. */
    struct stats_job queued = {.user = "bob",
                               .project = "p2",
                               .state = JOB_CANCELLED,
                               .submit_time = 1000,
                               .end_time = 1100,
                               .reason = JOB_REASON_CANCELLED_BY_USER};
    stats_add(s, &queued);
}

static void test_by_user(void **state)
{
    (void)state;
    /* now = 1050 + 7200: bob's running job has run 2 h so far. */
    struct stats *s = stats_new(STATS_BY_USER, 0, 1e9, 1050 + 7200);
    add_all(s);
    json_t *out = stats_json(s);
    const json_t *a = group(out, "alice");
    assert_int_equal(count(a, "jobs"), 3);
    assert_int_equal(count(a, "completed"), 1);
    assert_int_equal(count(a, "failed"), 1);
    assert_int_equal(count(a, "timeout"), 1);
    assert_int_equal(count(a, "ended"), 3);
    /* 1 x 1 h + 2 x 0.5 h + 1 x 600 s */
    assert_float_equal(num(a, "gpu_hours"), 1 + 1 + 600.0 / 3600, 1e-5);
    assert_float_equal(num(a, "wait_mean_secs"), 20, 1e-9);
    assert_float_equal(num(a, "wait_p95_secs"), 30, 1e-9);
    assert_float_equal(num(a, "run_mean_secs"), (3600 + 1800 + 600) / 3.0, 1e-3);
    assert_float_equal(num(a, "failure_rate"), 2.0 / 3, 1e-6);
    const json_t *reasons = json_object_get(a, "top_reasons");
    assert_int_equal(json_array_size(reasons), 2);

    const json_t *b = group(out, "bob");
    assert_int_equal(count(b, "jobs"), 3);
    assert_int_equal(count(b, "running"), 1);
    assert_int_equal(count(b, "cancelled"), 2);
    assert_float_equal(num(b, "gpu_hours"), (60 + 7200) / 3600.0, 1e-5);
    assert_float_equal(num(b, "wait_mean_secs"), 45, 1e-9); /* the queued one has none */
    assert_float_equal(num(b, "run_mean_secs"), 60, 1e-9);  /* ended jobs that ran */
    assert_float_equal(num(b, "failure_rate"), 0, 0);
    const json_t *r0 = json_array_get(json_object_get(b, "top_reasons"), 0);
    assert_string_equal(json_string_value(json_object_get(r0, "reason")), "CancelledByUser");
    assert_int_equal(count(r0, "count"), 2);

    const json_t *t = json_object_get(out, "total");
    assert_int_equal(count(t, "jobs"), 6);
    assert_float_equal(num(t, "gpu_hours"), num(a, "gpu_hours") + num(b, "gpu_hours"), 1e-5);
    assert_float_equal(num(t, "failure_rate"), 2.0 / 5, 1e-6);
    json_decref(out);
    stats_free(s);
}

static void test_running_time_stops_at_until(void **state)
{
    (void)state;
    struct stats *s = stats_new(STATS_BY_USER, 0, 1050 + 3600, 1050 + 7200);
    struct stats_job j = job("bob", NULL, "0", JOB_RUNNING, 50, 0, 2, JOB_REASON_NONE);
    stats_add(s, &j);
    json_t *out = stats_json(s);
    assert_float_equal(num(group(out, "bob"), "gpu_hours"), 2.0, 1e-6);
    assert_true(json_is_null(json_object_get(group(out, "bob"), "run_mean_secs")));
    assert_true(json_is_null(json_object_get(group(out, "bob"), "failure_rate")));
    json_decref(out);
    stats_free(s);
}

static void test_by_project_and_gpu(void **state)
{
    (void)state;
    struct stats *s = stats_new(STATS_BY_PROJECT, 0, 1e9, 1050 + 7200);
    add_all(s);
    json_t *out = stats_json(s);
    assert_int_equal(count(group(out, "p1"), "jobs"), 2);
    assert_int_equal(count(group(out, "p2"), "jobs"), 3);
    assert_int_equal(count(group(out, "(none)"), "jobs"), 1);
    json_decref(out);
    stats_free(s);

    s = stats_new(STATS_BY_GPU, 0, 1e9, 1050 + 7200);
    add_all(s);
    out = stats_json(s);
    /* GPU 0: alice's 1 h, half of the 2-GPU job (0.5 h), bob's 2 h running. */
    const json_t *g0 = group(out, "0");
    assert_int_equal(count(g0, "jobs"), 3);
    assert_float_equal(num(g0, "gpu_hours"), 1 + 0.5 + 2, 1e-5);
    const json_t *g1 = group(out, "1");
    assert_int_equal(count(g1, "jobs"), 3);
    assert_float_equal(num(g1, "gpu_hours"), 0.5 + 600.0 / 3600 + 60.0 / 3600, 1e-5);
    assert_int_equal(count(group(out, "(none)"), "jobs"), 1);
    /* GPUs in index order, (none) last. */
    const json_t *groups = json_object_get(out, "groups");
    assert_string_equal(json_string_value(json_object_get(json_array_get(groups, 0), "name")), "0");
    assert_string_equal(json_string_value(json_object_get(json_array_get(groups, 2), "name")),
                        "(none)");
    json_decref(out);
    stats_free(s);
}

static void test_many_groups(void **state)
{
    (void)state;
    struct stats *s = stats_new(STATS_BY_USER, 0, 1e9, 1e6);
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "user%04d", i % 1000);
        struct stats_job j = job(name, NULL, NULL, JOB_FINISHED, i % 100, 10, 0, 0);
        stats_add(s, &j);
    }
    json_t *out = stats_json(s);
    assert_int_equal(json_array_size(json_object_get(out, "groups")), 1000);
    assert_int_equal(count(group(out, "user0999"), "jobs"), 5);
    json_decref(out);
    stats_free(s);
}

/* A period without jobs or samples: empty groups, a total of zero (nothing to sort). */
static void test_empty_period(void **state)
{
    (void)state;
    struct stats *s = stats_new(STATS_BY_USER, 1000, 2000, 2000);
    json_t *o = stats_json(s);
    assert_int_equal(json_array_size(json_object_get(o, "groups")), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "total"), "jobs")), 0);
    json_decref(o);
    stats_free(s);
    struct stats_gpu *g = stats_gpu_new(1000, 2000, 4);
    o = stats_gpu_json(g);
    assert_non_null(o);
    json_decref(o);
    stats_gpu_free(g);
}

static void test_gpu_samples(void **state)
{
    (void)state;
    struct stats_gpu *g = stats_gpu_new(100, 200, 4);
    stats_gpu_add(g, 1, 100, 10);
    stats_gpu_add(g, 1, 130, 50);
    stats_gpu_add(g, 1, 199, 90);
    stats_gpu_add(g, 0, 150, 40);
    stats_gpu_add(g, 0, 200, 99); /* outside [since, until) */
    stats_gpu_add(g, 0, 160, -1); /* unknown */
    json_t *out = stats_gpu_json(g);
    assert_float_equal(num(out, "bucket_secs"), 25, 0);
    const json_t *gpus = json_object_get(out, "gpus");
    assert_int_equal(json_array_size(gpus), 2);
    const json_t *g0 = json_array_get(gpus, 0), *g1 = json_array_get(gpus, 1);
    assert_int_equal(count(g0, "index"), 0);
    assert_int_equal(count(g0, "samples"), 1);
    assert_int_equal(count(g0, "max"), 40);
    assert_int_equal(count(g1, "samples"), 3);
    assert_float_equal(num(g1, "mean"), 50, 1e-9);
    assert_int_equal(count(g1, "max"), 90);
    assert_float_equal(num(g1, "first"), 100, 0);
    assert_float_equal(num(g1, "last"), 199, 0);
    const json_t *series = json_object_get(g1, "series");
    assert_int_equal(json_array_size(series), 3); /* slices 0, 1 and 3 */
    assert_float_equal(num(json_array_get(series, 1), "start"), 125, 0);
    assert_float_equal(num(json_array_get(series, 2), "mean"), 90, 0);
    json_decref(out);
    stats_gpu_free(g);
}

/* Energy: per group (a job on two GPUs gives each GPU's group half), the total, and per
 * user and per project whatever the grouping; null where no job has one. */
static void test_energy(void **state)
{
    (void)state;
    struct stats_job a = job("alice", "p1", "0,1", JOB_FINISHED, 0, 100, 2, JOB_REASON_NONE);
    a.energy_known = true;
    a.energy_wh = 500;
    struct stats_job b = job("bob", NULL, "1", JOB_FINISHED, 0, 100, 1, JOB_REASON_NONE);
    b.energy_known = true;
    b.energy_wh = 250;
    struct stats_job c = job("carol", "p1", NULL, JOB_FINISHED, 0, 100, 0, JOB_REASON_NONE);
    for (int by = STATS_BY_USER; by <= STATS_BY_GPU; by++) {
        struct stats *s = stats_new((enum stats_by)by, 0, 1e9, 2000);
        stats_add(s, &a);
        stats_add(s, &b);
        stats_add(s, &c);
        json_t *out = stats_json(s);
        assert_float_equal(num(json_object_get(out, "total"), "energy_kwh"), 0.75, 1e-9);
        if (by == STATS_BY_USER) {
            assert_float_equal(num(group(out, "alice"), "energy_kwh"), 0.5, 1e-9);
            assert_true(json_is_null(json_object_get(group(out, "carol"), "energy_kwh")));
        } else if (by == STATS_BY_GPU) {
            assert_float_equal(num(group(out, "0"), "energy_kwh"), 0.25, 1e-9);
            assert_float_equal(num(group(out, "1"), "energy_kwh"), 0.5, 1e-9);
        }
        const json_t *e = json_object_get(out, "energy");
        const json_t *users = json_object_get(e, "users");
        const json_t *projects = json_object_get(e, "projects");
        assert_int_equal(json_array_size(users), 2); /* carol has none */
        assert_string_equal(json_string_value(json_object_get(json_array_get(users, 1), "name")),
                            "bob");
        assert_float_equal(num(json_array_get(users, 1), "energy_kwh"), 0.25, 1e-9);
        assert_int_equal(json_array_size(projects), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(projects, 0), "name")),
                            "(none)");
        assert_float_equal(num(json_array_get(projects, 1), "energy_kwh"), 0.5, 1e-9);
        assert_int_equal(count(json_array_get(projects, 1), "jobs"), 1);
        json_decref(out);
        stats_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_by_user),
        cmocka_unit_test(test_running_time_stops_at_until),
        cmocka_unit_test(test_by_project_and_gpu),
        cmocka_unit_test(test_many_groups),
        cmocka_unit_test(test_empty_period),
        cmocka_unit_test(test_gpu_samples),
        cmocka_unit_test(test_energy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
