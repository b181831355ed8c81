/* test_preempt: victim selection for preemption (src/core/preempt.c): who may be
 * preempted, the fewest jobs, then lower priority, then the most recently started; GPUs
 * free now count; the exact-mask request (for a reservation); the head of the queue. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "preempt.h"
#include "scheduler.h"

#define MAXJ 8

struct fixture {
    struct job jobs[MAXJ];
    struct job *ptrs[MAXJ];
    struct job *victims[MAXJ];
    size_t n;
};

/* Adds a running job holding `mask` (NVML indices), requeueable or not. */
static struct job *add_running(struct fixture *f, int priority, uint64_t mask, double start,
                               bool requeue)
{
    struct job *j = &f->jobs[f->n];
    job_init(j);
    j->id = (int64_t)f->n + 1;
    j->state = JOB_RUNNING;
    j->priority = priority;
    j->gpu_mask = mask;
    j->gpus = __builtin_popcountll(mask);
    j->start_time = start;
    j->requeue = requeue;
    f->ptrs[f->n++] = j;
    return j;
}

static size_t pick(struct fixture *f, int gpus, uint64_t free_mask, int max_priority)
{
    struct preempt_request req = {
        .gpus = gpus, .usable = 0xff, .free = free_mask, .max_priority = max_priority};
    return preempt_select(&req, f->ptrs, f->n, f->victims);
}

static void test_only_requeueable_low_priority(void **state)
{
    (void)state;
    struct fixture f = {0};
    add_running(&f, 10, 0x1, 100, false); /* not --requeue */
    add_running(&f, 30, 0x2, 100, true);  /* priority above the threshold */
    struct job *ok = add_running(&f, 20, 0x4, 100, true);
    /* Needs 2: one free GPU (3) plus job 3's. */
    assert_int_equal(pick(&f, 2, 0x8, 20), 1);
    assert_ptr_equal(f.victims[0], ok);
    /* Needs 3: only job 3 may go, which is not enough: nobody. */
    assert_int_equal(pick(&f, 3, 0x8, 20), 0);
    /* Already being stopped: not a candidate again. */
    ok->end_request = JOB_END_PREEMPT;
    assert_int_equal(pick(&f, 2, 0x8, 20), 0);
    /* Enough free already: nothing to stop. */
    assert_int_equal(pick(&f, 1, 0x8, 20), 0);
}

static void test_fewest_then_priority_then_latest(void **state)
{
    (void)state;
    struct fixture f = {0};
    add_running(&f, 0, 0x1, 100, true);                   /* 1 GPU, lowest priority */
    add_running(&f, 0, 0x2, 200, true);                   /* 1 GPU, lowest priority, later */
    struct job *big = add_running(&f, 5, 0xc, 100, true); /* 2 GPUs */
    /* 2 GPUs: one job (the 2-GPU one) beats two 1-GPU jobs of lower priority. */
    assert_int_equal(pick(&f, 2, 0, 10), 1);
    assert_ptr_equal(f.victims[0], big);
    /* 1 GPU: the lowest priority; of those, the most recently started (job 2). */
    assert_int_equal(pick(&f, 1, 0, 10), 1);
    assert_int_equal(f.victims[0]->id, 2);
    /* 3 GPUs: two jobs: the 2-GPU one and the better of the 1-GPU ones. */
    assert_int_equal(pick(&f, 3, 0, 10), 2);
    assert_int_equal(f.victims[0]->id, 2);
    assert_ptr_equal(f.victims[1], big);
    /* 4 GPUs: all three. */
    assert_int_equal(pick(&f, 4, 0, 10), 3);
    /* Same priority and start: the higher id first. */
    f.jobs[0].start_time = 200;
    assert_int_equal(pick(&f, 1, 0, 10), 1);
    assert_int_equal(f.victims[0]->id, 2);
}

static void test_unusable_gpus_do_not_count(void **state)
{
    (void)state;
    struct fixture f = {0};
    add_running(&f, 0, 0x3, 100, true); /* GPUs 0 and 1; 1 is not usable */
    struct preempt_request req = {.gpus = 2, .usable = 0x1, .free = 0, .max_priority = 10};
    assert_int_equal(preempt_select(&req, f.ptrs, f.n, f.victims), 0);
    req.usable = 0x3;
    assert_int_equal(preempt_select(&req, f.ptrs, f.n, f.victims), 1);
}

static void test_mig_and_shared_jobs_are_not_candidates(void **state)
{
    (void)state;
    struct fixture f = {0};
    struct job *s = add_running(&f, 0, 0x1, 100, true);
    s->shared = true;
    s->gpu_memory_mb = 1000;
    assert_false(preempt_candidate(s, 10));
    assert_int_equal(pick(&f, 1, 0, 10), 0);
    s->shared = false;
    assert_true(preempt_candidate(s, 10));
    s->mig_profile = strdup("1g.10gb");
    assert_false(preempt_candidate(s, 10));
    free(s->mig_profile);
    s->mig_profile = NULL;
}

static void test_exact_mask(void **state)
{
    (void)state;
    struct fixture f = {0};
    add_running(&f, 0, 0x1, 100, true);
    add_running(&f, 0, 0x2, 100, true);
    add_running(&f, 50, 0x4, 100, true); /* above the threshold */
    struct preempt_request req = {.mask = 0x3, .max_priority = 10};
    assert_int_equal(preempt_select(&req, f.ptrs, f.n, f.victims), 2);
    req.mask = 0x9; /* GPU 3 is free: only job 1 */
    req.free = 0x8;
    assert_int_equal(preempt_select(&req, f.ptrs, f.n, f.victims), 1);
    assert_int_equal(f.victims[0]->id, 1);
    req.mask = 0x5; /* GPU 2's job may not be preempted */
    assert_int_equal(preempt_select(&req, f.ptrs, f.n, f.victims), 0);
}

static void test_pick_head(void **state)
{
    (void)state;
    struct job a, b, c;
    job_init(&a);
    job_init(&b);
    job_init(&c);
    a.wait_reason = SCHEDULER_REASON_DEPENDENCY;
    b.wait_reason = SCHEDULER_REASON_RESOURCES;
    b.gpus = 2;
    c.wait_reason = SCHEDULER_REASON_PRIORITY;
    c.gpus = 1;
    struct job *q[] = {&a, &b, &c};
    assert_ptr_equal(preempt_pick_head(q, 3), &b);
    /* The first job waiting for GPUs asks for none of the kind preemption frees. */
    b.shared = true;
    b.gpu_memory_mb = 100;
    assert_null(preempt_pick_head(q, 3));
    b.shared = false;
    /* Outside processes stand in its way (perhaps a stopped job's, not yet seen gone):
     * stopping jobs would not help, and it is not passed over for a job behind it. */
    b.wait_reason = SCHEDULER_REASON_UNMANAGED;
    assert_null(preempt_pick_head(q, 3));
    b.wait_reason = SCHEDULER_REASON_MAX_RUNNING;
    assert_ptr_equal(preempt_pick_head(q, 3), &c);
    assert_null(preempt_pick_head(q, 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_requeueable_low_priority),
        cmocka_unit_test(test_fewest_then_priority_then_latest),
        cmocka_unit_test(test_unusable_gpus_do_not_count),
        cmocka_unit_test(test_mig_and_shared_jobs_are_not_candidates),
        cmocka_unit_test(test_exact_mask),
        cmocka_unit_test(test_pick_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
