/* test_quota_state: the daemon's quota records (src/daemon/policy/quota_state.c): jobs
 * counted in and out as they move (queued, running, ended, back to queued), GPU-seconds
 * of the period kept without walking jobs, the period turning, overrides layered over
 * the baseline, and the submit check's message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "policy/quota_state.h"
#include "util.h"

static void job_as(struct job *j, const char *user, const char *project, int gpus,
                   enum job_state st)
{
    job_init(j);
    j->user = xstrdup(user);
    j->project = project ? xstrdup(project) : NULL;
    j->gpus = gpus;
    j->state = st;
}

/* Moves j to `to` at time t (start_time or end_time set as the daemon does). */
static void move(struct quotas *q, struct job *j, enum job_state to, double t)
{
    enum job_state from = j->state;
    if (to == JOB_RUNNING)
        j->start_time = t;
    if (job_state_is_terminal(to))
        j->end_time = t;
    j->state = to;
    quotas_job_moved(q, j, from);
}

static void test_counts_follow_jobs(void **state)
{
    (void)state;
    struct quotas *q = quotas_new();
    struct quota_config c;
    quota_config_init(&c);
    c.period = QUOTA_PERIOD_DAY;
    quotas_set_config(q, &c);
    quotas_tick(q, 1e9); /* sets the period around 1e9 */
    struct job a, b;
    job_as(&a, "alice", "nlp", 2, JOB_QUEUED);
    job_as(&b, "alice", NULL, 1, JOB_HELD);
    quotas_job_added(q, &a);
    quotas_job_added(q, &b);
    struct quota_usage *u = quotas_subject(q, QUOTA_USER, "alice", false);
    struct quota_usage *p = quotas_subject(q, QUOTA_PROJECT, "nlp", false);
    assert_ptr_equal(a.sched.quota_user, u);
    assert_ptr_equal(a.sched.quota_project, p);
    assert_null(b.sched.quota_project);
    assert_int_equal(u->queued_jobs, 2);
    assert_int_equal(p->queued_jobs, 1);

    move(q, &a, JOB_RUNNING, 1e9 + 100);
    assert_true(u->running_jobs == 1 && u->running_gpus == 2 && u->queued_jobs == 1);
    assert_true(p->running_jobs == 1 && p->queued_jobs == 0);
    assert_true(quota_gpu_seconds(u, 1e9 + 160) == 120.0); /* 2 GPUs x 60 s */
    move(q, &a, JOB_FINISHED, 1e9 + 400);
    assert_true(u->running_jobs == 0 && u->running_gpus == 0);
    assert_true(quota_gpu_seconds(u, 1e9 + 5000) == 600.0); /* ended: no more growth */
    assert_true(quota_gpu_seconds(p, 1e9 + 5000) == 600.0);
    assert_null(a.sched.quota_user);

    /* A launch that never happened (R -> PD) costs nothing. */
    move(q, &b, JOB_QUEUED, 0);
    move(q, &b, JOB_RUNNING, 1e9 + 1000);
    move(q, &b, JOB_QUEUED, 1e9 + 1500);
    assert_true(quota_gpu_seconds(u, 1e9 + 2000) == 600.0);
    assert_int_equal(u->queued_jobs, 1);

    /* The next day: GPU-hours start again; a running job counts from the day's start. */
    move(q, &b, JOB_RUNNING, 1e9 + 2000);
    double start, end;
    quota_period_bounds(QUOTA_PERIOD_DAY, 1e9, &start, &end);
    assert_false(quotas_tick(q, end - 1));
    assert_true(quotas_tick(q, end + 10));
    assert_true(quota_gpu_seconds(u, end + 10) == 10.0);
    assert_true(quota_gpu_seconds(p, end + 10) == 0.0);
    move(q, &b, JOB_FINISHED, end + 30);
    assert_true(quota_gpu_seconds(u, end + 100) == 30.0);

    job_clear(&a);
    job_clear(&b);
    quota_config_free(&c);
    quotas_free(q);
}

static void test_submit_check_and_layers(void **state)
{
    (void)state;
    struct quotas *q = quotas_new();
    struct quota_config c;
    quota_config_init(&c);
    quota_set_entry(&c.limits, QUOTA_USER, NULL, false)->max_queued_jobs = 2;
    quota_set_entry(&c.limits, QUOTA_PROJECT, "nlp", true)->max_queued_jobs = 1;
    quotas_set_config(q, &c);
    struct job a;
    job_as(&a, "alice", "nlp", 0, JOB_QUEUED);
    quotas_job_added(q, &a);
    char *why = quotas_check_submit(q, "alice", 1, NULL, 0);
    assert_null(why);
    why = quotas_check_submit(q, "alice", 2, NULL, 0);
    assert_string_equal(why, "user alice has 1 queued job and this submission adds 2, the limit "
                             "max_queued_jobs is 2; submit fewer, wait or ask an admin (gctl "
                             "quota show --user alice)");
    free(why);
    why = quotas_check_submit(q, "alice", 1, "nlp", 1);
    assert_string_equal(why, "project nlp has 1 queued job, the limit max_queued_jobs is 1; "
                             "wait or ask an admin (gctl quota show --project nlp)");
    free(why);
    /* A user never seen has the default. */
    why = quotas_check_submit(q, "zed", 3, NULL, 0);
    assert_non_null(why);
    free(why);
    job_clear(&a);
    quota_config_free(&c);
    quotas_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_follow_jobs),
        cmocka_unit_test(test_submit_check_and_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
