/* test_sched: the scheduling pass of src/core/sched.c: start order (priority, then
 * submission), the running-jobs limit, held jobs, wait reasons, and 100k jobs. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <time.h>

#include "scheduler.h"

#define MAXJ 16

/* A set of jobs described by one letter per job (Q queued, H held, R running) and
 * their priorities; ids are 1, 2, ... in order. */
struct fixture {
    struct job jobs[MAXJ];
    struct job *ptrs[MAXJ];
    struct job *start[MAXJ];
    size_t n;
};

static void fixture_make(struct fixture *f, const char *states, const int *prio)
{
    f->n = 0;
    for (const char *c = states; *c; c++, f->n++) {
        struct job *j = &f->jobs[f->n];
        job_init(j);
        j->id = (int64_t)f->n + 1;
        j->state = *c == 'H' ? JOB_HELD : *c == 'R' ? JOB_RUNNING : JOB_QUEUED;
        j->priority = prio ? prio[f->n] : JOB_PRIORITY_DEFAULT;
        j->wait_reason = "stale";
        f->ptrs[f->n] = j;
    }
}

static size_t fixture_run(struct fixture *f, int64_t max_running)
{
    struct scheduler_policy policy = {.max_running_jobs = max_running};
    return scheduler_pass(f->ptrs, f->n, &policy, 1000.0, f->start);
}

static struct job *job_by_id(struct fixture *f, int64_t id)
{
    return &f->jobs[id - 1];
}

static void test_priority_order(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, "QQQQ", (int[]){1, 50, 10, 255});
    assert_int_equal(fixture_run(&f, 0), 4);
    assert_int_equal(f.start[0]->id, 4);
    assert_int_equal(f.start[1]->id, 2);
    assert_int_equal(f.start[2]->id, 3);
    assert_int_equal(f.start[3]->id, 1);
    for (int i = 0; i < 4; i++)
        assert_null(f.start[i]->wait_reason);
}

static void test_fifo_among_equals(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, "QQQQQ", (int[]){5, 5, 9, 5, 5});
    /* Submission order must win over array position: shuffle the input. */
    struct job *t = f.ptrs[0];
    f.ptrs[0] = f.ptrs[4];
    f.ptrs[4] = t;
    t = f.ptrs[1];
    f.ptrs[1] = f.ptrs[3];
    f.ptrs[3] = t;
    assert_int_equal(fixture_run(&f, 0), 5);
    int64_t want[] = {3, 1, 2, 4, 5};
    for (int i = 0; i < 5; i++)
        assert_int_equal(f.start[i]->id, want[i]);
}

static void test_max_running_counts_running(void **state)
{
    (void)state;
    struct fixture f;
    /* Two already running, limit 3: only the best queued job starts. */
    fixture_make(&f, "RQQRQ", (int[]){0, 10, 20, 0, 10});
    assert_int_equal(fixture_run(&f, 3), 1);
    assert_int_equal(f.start[0]->id, 3);
    assert_null(job_by_id(&f, 3)->wait_reason);
    assert_string_equal(job_by_id(&f, 2)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
    assert_string_equal(job_by_id(&f, 5)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
    /* Running jobs are left alone. */
    assert_int_equal(job_by_id(&f, 1)->state, JOB_RUNNING);
    assert_string_equal(job_by_id(&f, 1)->wait_reason, "stale");

    /* Already at the limit: nothing starts. */
    fixture_make(&f, "RRQ", NULL);
    assert_int_equal(fixture_run(&f, 2), 0);
    assert_string_equal(job_by_id(&f, 3)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);

    /* Over the limit (lowered at run time): nothing starts either. */
    fixture_make(&f, "RRRQ", NULL);
    assert_int_equal(fixture_run(&f, 1), 0);

    /* Limit counts the jobs started in this pass. */
    fixture_make(&f, "QQQQ", NULL);
    assert_int_equal(fixture_run(&f, 2), 2);
    assert_int_equal(f.start[0]->id, 1);
    assert_int_equal(f.start[1]->id, 2);
    assert_string_equal(job_by_id(&f, 3)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
    assert_string_equal(job_by_id(&f, 4)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
}

static void test_held_never_started(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, "HQHH", (int[]){255, 0, 255, 100});
    assert_int_equal(fixture_run(&f, 0), 1);
    assert_int_equal(f.start[0]->id, 2);
    for (int64_t id = 1; id <= 4; id++)
        if (id != 2)
            assert_string_equal(job_by_id(&f, id)->wait_reason, "stale");

    fixture_make(&f, "HH", NULL);
    assert_int_equal(fixture_run(&f, 0), 0);
    /* Held jobs do not count against the running limit either. */
    fixture_make(&f, "HHQ", NULL);
    assert_int_equal(fixture_run(&f, 1), 1);
}

static void test_empty_and_no_limit(void **state)
{
    (void)state;
    struct fixture f;
    fixture_make(&f, "", NULL);
    assert_int_equal(fixture_run(&f, 0), 0);
    fixture_make(&f, "RRRRRRRRQ", NULL);
    assert_int_equal(fixture_run(&f, 0), 1);
    assert_null(job_by_id(&f, 9)->wait_reason);
}

static void test_100k_jobs(void **state)
{
    (void)state;
    enum { N = 100000, LIMIT = 1000 };
    struct job *jobs = calloc(N, sizeof(*jobs));
    struct job **ptrs = calloc(N, sizeof(*ptrs));
    struct job **start = calloc(N, sizeof(*start));
    assert_non_null(jobs);
    assert_non_null(ptrs);
    assert_non_null(start);
    srand(1);
    for (int i = 0; i < N; i++) {
        job_init(&jobs[i]);
        jobs[i].id = i + 1;
        jobs[i].priority = rand() % 256;
        jobs[i].state = i % 10 == 0 ? JOB_HELD : i % 10 == 1 && i < 2000 ? JOB_RUNNING : JOB_QUEUED;
        ptrs[N - 1 - i] = &jobs[i];
    }
    struct scheduler_policy policy = {.max_running_jobs = LIMIT + 200};
    clock_t t0 = clock();
    size_t n = scheduler_pass(ptrs, N, &policy, 0, start);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_int_equal(n, LIMIT); /* 200 running */
    for (size_t i = 1; i < n; i++) {
        const struct job *a = start[i - 1], *b = start[i];
        assert_true(a->priority > b->priority || (a->priority == b->priority && a->id < b->id));
    }
    size_t waiting = 0;
    for (int i = 0; i < N; i++)
        waiting += jobs[i].wait_reason != NULL;
    assert_int_equal(waiting, N - N / 10 - 200 - LIMIT);
    /* Generous bound so sanitizer builds pass; a plain build takes a few ms. */
    assert_true(secs < 1.0);
    free(jobs);
    free(ptrs);
    free(start);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_fifo_among_equals),
        cmocka_unit_test(test_max_running_counts_running),
        cmocka_unit_test(test_held_never_started),
        cmocka_unit_test(test_empty_and_no_limit),
        cmocka_unit_test(test_100k_jobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
