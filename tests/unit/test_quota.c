/* test_quota: the quota limits of src/core/quota.c: layers merged field by field, the
 * [quota] section read from TOML (and its errors), the overrides' JSON, the period's
 * bounds, the O(1) checks against running jobs, GPUs and GPU-hours (with the jobs a pass
 * starts counted), and the scheduling pass giving reason Quota while other users' jobs
 * start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "quota.h"
#include "scheduler.h"
#include "util.h"

static struct quota_limits limits(int64_t jobs, int64_t gpus, int64_t queued, double hours)
{
    return (struct quota_limits){jobs, gpus, queued, hours};
}

static void test_effective_merges_layers_field_by_field(void **state)
{
    (void)state;
    struct quota_set base, over;
    quota_set_init(&base);
    quota_set_init(&over);
    base.default_user = limits(4, 2, -1, -1);
    *quota_set_entry(&base, QUOTA_USER, "alice", true) = limits(-1, 4, -1, -1);
    over.default_user = limits(-1, -1, 50, -1);
    *quota_set_entry(&over, QUOTA_USER, "alice", true) = limits(1, -1, -1, -1);
    *quota_set_entry(&over, QUOTA_USER, "bob", true) = limits(-1, 8, -1, 10.5);

    struct quota_limits l;
    quota_effective(&base, &over, QUOTA_USER, "alice", &l);
    assert_true(l.max_running_jobs == 1 && l.max_running_gpus == 4 && l.max_queued_jobs == 50);
    assert_true(l.max_gpu_hours < 0);
    quota_effective(&base, &over, QUOTA_USER, "bob", &l);
    assert_true(l.max_running_jobs == 4 && l.max_running_gpus == 8 && l.max_gpu_hours == 10.5);
    quota_effective(&base, &over, QUOTA_USER, "carol", &l);
    assert_true(l.max_running_gpus == 2 && l.max_queued_jobs == 50);
    /* A project has no limits unless some layer gives them. */
    quota_effective(&base, &over, QUOTA_PROJECT, "nlp", &l);
    assert_true(quota_limits_empty(&l));

    /* Removing an entry, unsetting a default. */
    assert_true(quota_set_remove(&over, QUOTA_USER, "alice"));
    assert_false(quota_set_remove(&over, QUOTA_USER, "alice"));
    quota_effective(&base, &over, QUOTA_USER, "alice", &l);
    assert_int_equal(l.max_running_jobs, 4);
    assert_true(quota_set_remove(&over, QUOTA_USER, NULL));
    assert_true(quota_limits_empty(&over.default_user));
    quota_set_free(&base);
    quota_set_free(&over);
}

static void test_set_json_round_trip(void **state)
{
    (void)state;
    struct quota_set s, back;
    quota_set_init(&s);
    s.default_project = limits(-1, 6, -1, -1);
    *quota_set_entry(&s, QUOTA_PROJECT, "cv-team", true) = limits(2, -1, 7, 0.5);
    json_t *o = quota_set_to_json(&s);
    char *err = NULL;
    assert_int_equal(quota_set_from_json(&back, o, &err), 0);
    const struct quota_limits *e = quota_set_entry(&back, QUOTA_PROJECT, "cv-team", false);
    assert_non_null(e);
    assert_true(e->max_running_jobs == 2 && e->max_queued_jobs == 7 && e->max_gpu_hours == 0.5);
    assert_int_equal(back.default_project.max_running_gpus, 6);
    json_decref(o);
    quota_set_free(&back);
    o = json_pack("{s:{s:i}}", "default_user", "max_running_jobs", -3);
    assert_int_equal(quota_set_from_json(&back, o, &err), -1);
    assert_string_equal(err, "max_running_jobs must be a number >= 0");
    free(err);
    json_decref(o);
    quota_set_free(&back);
    quota_set_free(&s);
}

static int load(struct gflow_config *c, const char *text, char **err)
{
    config_init(c);
    return config_load_text(c, "gflow.toml", text, strlen(text), err);
}

static void test_toml_section(void **state)
{
    (void)state;
    struct gflow_config c;
    char *err = NULL;
    assert_int_equal(load(&c,
                          "[quota]\n"
                          "period = \"month\"\n"
                          "default_user = { max_running_jobs = 4, max_running_gpus = 2 }\n"
                          "default_project = { max_gpu_hours = 12.5 }\n"
                          "[quota.users]\n"
                          "alice = { max_running_gpus = 4 }\n"
                          "[quota.projects.nlp]\n"
                          "max_queued_jobs = 100\n"
                          "max_gpu_hours = 20\n",
                          &err),
                     0);
    assert_int_equal(c.quota.period, QUOTA_PERIOD_MONTH);
    struct quota_limits l;
    quota_effective(&c.quota.limits, NULL, QUOTA_USER, "alice", &l);
    assert_true(l.max_running_jobs == 4 && l.max_running_gpus == 4);
    quota_effective(&c.quota.limits, NULL, QUOTA_PROJECT, "nlp", &l);
    assert_true(l.max_queued_jobs == 100 && l.max_gpu_hours == 20.0);
    quota_effective(&c.quota.limits, NULL, QUOTA_PROJECT, "other", &l);
    assert_true(l.max_gpu_hours == 12.5 && l.max_queued_jobs < 0);
    config_free(&c);

    /* Defaults: week, no limits. */
    assert_int_equal(load(&c, "", &err), 0);
    assert_int_equal(c.quota.period, QUOTA_PERIOD_WEEK);
    assert_true(quota_limits_empty(&c.quota.limits.default_user));
    config_free(&c);

    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"[quota]\nperiod = \"year\"\n", "gflow.toml:2: quota.period must be one of day, week, "
                                         "month"},
        {"[quota.users.bob]\nmax_running_jobs = -1\n",
         "gflow.toml:2: quota.users.bob.max_running_jobs must be an integer >= 0"},
        {"[quota.users.bob]\nmax_running_jobs = 1.5\n",
         "gflow.toml:2: quota.users.bob.max_running_jobs must be an integer >= 0"},
        {"[quota.default_user]\nmax_jobs = 1\n",
         "gflow.toml:2: unknown key 'quota.default_user.max_jobs' (a limit is one of "
         "max_running_jobs, max_running_gpus, max_queued_jobs, max_gpu_hours)"},
        {"[quota.projects.p]\nmax_gpu_hours = inf\n",
         "gflow.toml:2: quota.projects.p.max_gpu_hours must be a number >= 0"},
        {"[quota]\nusers = 3\n", "gflow.toml:2: quota.users must be a table (name = { limits })"},
        {"[quota]\nmax_running_jobs = 3\n", "gflow.toml:2: unknown key 'quota.max_running_jobs' "
                                            "(the [quota] keys are period, default_user, "
                                            "default_project, users, projects)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(load(&c, bad[i].text, &err), -1);
        assert_string_equal(err, bad[i].msg);
        free(err);
        config_free(&c);
    }
}

static void test_period_bounds(void **state)
{
    (void)state;
    setenv("TZ", "UTC", 1);
    tzset();
    double start, end;
    /* Wednesday 2026-12-02 10:30 UTC. */
    double now = 1796207400.0;
    quota_period_bounds(QUOTA_PERIOD_DAY, now, &start, &end);
    assert_true(start == 1796169600.0 && end == start + 86400);
    quota_period_bounds(QUOTA_PERIOD_WEEK, now, &start, &end); /* Monday 2026-11-30 */
    assert_true(start == 1796169600.0 - 2 * 86400 && end == start + 7 * 86400);
    quota_period_bounds(QUOTA_PERIOD_MONTH, now, &start, &end); /* 2026-12-01 .. 2027-01-01 */
    assert_true(start == 1796169600.0 - 86400 && end == start + 31 * 86400);
    enum quota_period p;
    assert_int_equal(quota_period_parse("week", &p), 0);
    assert_int_equal(p, QUOTA_PERIOD_WEEK);
    assert_int_equal(quota_period_parse("fortnight", &p), -1);
}

static void test_checks(void **state)
{
    (void)state;
    struct quota_usage u = {.name = "alice"};
    u.limits = limits(2, 3, -1, 1.0);
    struct job j;
    job_init(&j);
    j.gpus = 1;
    assert_null(quota_usage_blocks(&u, &j, 1000, 1));
    u.running_jobs = 1;
    u.running_gpus = 2;
    assert_null(quota_usage_blocks(&u, &j, 1000, 1));
    j.gpus = 2; /* 2 + 2 > 3 */
    assert_string_equal(quota_usage_blocks(&u, &j, 1000, 1), "max_running_gpus");
    j.gpus = 0; /* no GPUs: only the job count applies */
    assert_null(quota_usage_blocks(&u, &j, 1000, 1));
    u.running_jobs = 2;
    assert_string_equal(quota_usage_blocks(&u, &j, 1000, 1), "max_running_jobs");
    u.running_jobs = 0;
    u.running_gpus = 0;

    /* GPU-hours: one job started at 0 on 2 GPUs (base -= 2 * 0), running: at 1800 s it
     * has used 1 GPU-hour. */
    u.running_gpus = 2;
    u.running_jobs = 1;
    u.limits = limits(-1, -1, -1, 1.0);
    u.gpu_seconds_base = 0;
    j.gpus = 1;
    assert_null(quota_usage_blocks(&u, &j, 1799, 2));
    assert_string_equal(quota_usage_blocks(&u, &j, 1800, 2), "max_gpu_hours");
    assert_true(quota_gpu_seconds(&u, 1800) == 3600);

    /* The jobs a pass starts count for the rest of it, and only in that pass. */
    struct quota_usage p = {.name = "nlp", .scope = QUOTA_PROJECT};
    p.limits = limits(2, -1, -1, -1);
    j.sched.quota_project = &p;
    assert_false(quota_blocks(&j, 0, 7));
    quota_pass_started(&j, 7);
    assert_false(quota_blocks(&j, 0, 7));
    quota_pass_started(&j, 7);
    assert_true(quota_blocks(&j, 0, 7));
    assert_false(quota_blocks(&j, 0, 8)); /* a new pass */
    j.sched.quota_project = NULL;
    job_clear(&j);
}

static struct gpu_info gpu_arr[4];

static void test_pass_gives_reason_quota(void **state)
{
    (void)state;
    memset(gpu_arr, 0, sizeof(gpu_arr));
    for (int i = 0; i < 4; i++) {
        gpu_arr[i].index = i;
        gpu_arr[i].memory_total_mib = 80000;
        gpu_arr[i].memory_free_mib = -1;
    }
    struct gpu_set set = {.gpus = gpu_arr, .n_gpus = 4};
    struct quota_usage alice = {.name = "alice"}, bob = {.name = "bob"};
    alice.limits = limits(-1, 2, -1, -1);
    quota_limits_unset(&bob.limits);
    struct job jobs[4];
    struct job *queued[4], *start[4];
    const char *owner[4] = {"alice", "alice", "alice", "bob"};
    for (int i = 0; i < 4; i++) {
        job_init(&jobs[i]);
        jobs[i].id = i + 1;
        jobs[i].gpus = 1;
        jobs[i].sched.quota_user = owner[i][0] == 'a' ? &alice : &bob;
        queued[i] = &jobs[i];
    }
    struct scheduler_queue q;
    scheduler_queue_init(&q);
    for (int i = 0; i < 4; i++)
        scheduler_queue_insert(&q, queued[i]);
    struct scheduler_input in = {.queued = q.jobs, .n_queued = q.len, .gpus = &set, .now = 1000.0};
    struct scheduler_policy policy = {0};
    size_t n = scheduler_pass(&in, &policy, start);
    /* Alice's first two start; her third waits for her quota; Bob's starts. */
    assert_int_equal(n, 3);
    assert_ptr_equal(start[0], &jobs[0]);
    assert_ptr_equal(start[1], &jobs[1]);
    assert_ptr_equal(start[2], &jobs[3]);
    assert_string_equal(jobs[2].wait_reason, SCHEDULER_REASON_QUOTA);
    scheduler_queue_free(&q);
    for (int i = 0; i < 4; i++)
        job_clear(&jobs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_effective_merges_layers_field_by_field),
        cmocka_unit_test(test_set_json_round_trip),
        cmocka_unit_test(test_toml_section),
        cmocka_unit_test(test_period_bounds),
        cmocka_unit_test(test_checks),
        cmocka_unit_test(test_pass_gives_reason_quota),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
