/* test_reservation: GPU reservations (gctl reserve): the rules of src/core/reservation.c
 * (blocked GPUs, the holder's GPUs, the next free time, status, the GPUs a new one
 * gets) and their effect on the scheduling pass: reason Reservation during the window,
 * long jobs kept off GPUs reserved soon (with and without backfill), the holder's job
 * on its GPUs, and backfill's plan around a window. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "scheduler.h"

#define MAXJ 8

static struct gpu_info gpu_arr[8];

static struct gpu_set gpus4(void)
{
    memset(gpu_arr, 0, sizeof(gpu_arr));
    for (int i = 0; i < 4; i++) {
        gpu_arr[i].index = i;
        gpu_arr[i].memory_total_mib = 81559;
        gpu_arr[i].memory_free_mib = -1;
    }
    return (struct gpu_set){.gpus = gpu_arr, .n_gpus = 4};
}

struct fixture {
    struct job jobs[MAXJ];
    size_t n;
    struct job *start[MAXJ];
    struct gpu_set gpus;
    struct scheduler_policy policy;
    struct scheduler_reservation resv[4];
    size_t n_resv;
    double now;
};

static void fx_init(struct fixture *f, double now)
{
    memset(f, 0, sizeof(*f));
    f->gpus = gpus4();
    f->now = now;
}

/* A job of user with `gpus` GPUs and a time limit (0: none); running on `ids` if given. */
static struct job *fx_job(struct fixture *f, const char *user, int gpus, int64_t limit,
                          const char *ids, double start_time)
{
    struct job *j = &f->jobs[f->n];
    job_init(j);
    j->id = (int64_t)++f->n;
    j->user = (char *)user;
    j->gpus = gpus;
    j->time_limit = limit;
    j->state = ids ? JOB_RUNNING : JOB_QUEUED;
    if (ids) {
        j->gpu_mask = gpu_mask_parse(ids);
        j->start_time = start_time;
    }
    j->wait_reason = "stale";
    return j;
}

static void fx_resv(struct fixture *f, const char *user, const char *ids, double start, double end)
{
    f->resv[f->n_resv++] = (struct scheduler_reservation){(int64_t)f->n_resv + 1, user, start, end,
                                                          gpu_mask_parse(ids)};
}

static size_t fx_pass(struct fixture *f)
{
    struct scheduler_queue q;
    struct job *running[MAXJ];
    size_t n_running = 0;
    scheduler_queue_init(&q);
    for (size_t i = 0; i < f->n; i++) {
        if (f->jobs[i].state == JOB_QUEUED)
            scheduler_queue_insert(&q, &f->jobs[i]);
        else if (f->jobs[i].state == JOB_RUNNING)
            running[n_running++] = &f->jobs[i];
    }
    struct scheduler_input in = {.queued = q.jobs,
                                 .n_queued = q.len,
                                 .running = running,
                                 .n_running = n_running,
                                 .gpus = &f->gpus,
                                 .now = f->now,
                                 .reservations = f->resv,
                                 .n_reservations = f->n_resv};
    size_t n = scheduler_pass(&in, &f->policy, f->start);
    scheduler_queue_free(&q);
    return n;
}

static void assert_ids(const struct job *j, const char *want)
{
    char *s = gpu_mask_format(j->gpu_mask);
    assert_string_equal(s, want);
    free(s);
}

/* reservation_blocked / reservation_held at now over those of r[0..n) not over yet, as
 * a pass reads them (the daemon hands it only those). */
static uint64_t blocked_at(const struct scheduler_reservation *r, size_t n, const char *user,
                           double now, double runtime)
{
    struct scheduler_reservation live[16];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].end > now)
            live[k++] = r[i];
    struct reservation_index x;
    reservation_index_build(&x, live, k, now);
    return reservation_blocked(&x, user, now, runtime);
}

static uint64_t held_at(const struct scheduler_reservation *r, size_t n, const char *user,
                        double now)
{
    struct reservation_index x;
    reservation_index_build(&x, r, n, now);
    return reservation_held(&x, user);
}

static void test_rules(void **state)
{
    (void)state;
    struct scheduler_reservation r[] = {
        {1, "alice", 1000, 2000, 0xC}, /* GPUs 2,3 */
        {2, "carol", 3000, 4000, 0x1}, /* GPU 0 */
    };
    /* Before the window: only a job that would still run at its start is kept off. */
    assert_int_equal(blocked_at(r, 2, "bob", 900, 50), 0);
    assert_int_equal(blocked_at(r, 2, "bob", 900, 100), 0);
    assert_int_equal(blocked_at(r, 2, "bob", 900, 101), 0xC);
    assert_int_equal(blocked_at(r, 2, "bob", 900, 5000), 0xD);
    /* During it, and not for the holder; after it, for nobody. */
    assert_int_equal(blocked_at(r, 2, "bob", 1500, 1), 0xC);
    assert_int_equal(blocked_at(r, 2, "alice", 1500, 5000), 0x1);
    assert_int_equal(blocked_at(r, 2, "bob", 2000, 10), 0);
    assert_int_equal(blocked_at(r, 2, NULL, 1500, 1), 0xC);
    assert_int_equal(held_at(r, 2, "alice", 1500), 0xC);
    assert_int_equal(held_at(r, 2, "alice", 999), 0);
    assert_int_equal(held_at(r, 2, "bob", 1500), 0);
    /* A 600 s job on GPU 2 from 900 overlaps [1000, 2000): from 2000. GPU 0 from 2500
     * overlaps carol's [3000, 4000): from 4000. The holder is not moved. */
    assert_true(reservation_free_from(r, 2, 2, "bob", 900, 600) == 2000);
    assert_true(reservation_free_from(r, 2, 2, "bob", 900, 100) == 900);
    assert_true(reservation_free_from(r, 2, 0, "bob", 2500, 600) == 4000);
    assert_true(reservation_free_from(r, 2, 2, "alice", 900, 600) == 900);
    assert_true(reservation_free_from(r, 2, 1, "bob", 900, 1e6) == 900);

    assert_int_equal(reservation_status_at(10, 20, 0, 5), RESERVATION_PENDING);
    assert_int_equal(reservation_status_at(10, 20, 0, 10), RESERVATION_ACTIVE);
    assert_int_equal(reservation_status_at(10, 20, 0, 20), RESERVATION_COMPLETED);
    assert_int_equal(reservation_status_at(10, 20, 7, 15), RESERVATION_CANCELLED);
    assert_string_equal(reservation_status_name(RESERVATION_COMPLETED), "completed");
    assert_int_equal(reservation_status_parse("Active"), RESERVATION_ACTIVE);
    assert_int_equal(reservation_status_parse("done"), -1);
}

/* Several holders on one GPU: a user is blocked by the earliest window that is not
 * theirs, whichever order the windows come in. */
static void test_index_several_holders(void **state)
{
    (void)state;
    struct scheduler_reservation r[] = {
        {1, "alice", 1000, 1100, 0x1},
        {2, "bob", 2000, 2100, 0x1},
        {3, "alice", 3000, 3100, 0x1},
        {4, "carol", 500, 600, 0x2},
    };
    for (int order = 0; order < 2; order++) {
        if (order) { /* reversed */
            struct scheduler_reservation t = r[0];
            r[0] = r[3];
            r[3] = t;
            t = r[1];
            r[1] = r[2];
            r[2] = t;
        }
        struct reservation_index x;
        reservation_index_build(&x, r, 4, 0);
        assert_int_equal(reservation_blocked(&x, "alice", 0, 1500), 0x2); /* bob's at 2000 */
        assert_int_equal(reservation_blocked(&x, "alice", 0, 2500), 0x3);
        assert_int_equal(reservation_blocked(&x, "bob", 0, 1001), 0x3);
        assert_int_equal(reservation_blocked(&x, "bob", 0, 999), 0x2);
        assert_int_equal(reservation_blocked(&x, "carol", 0, 999), 0);
        assert_int_equal(reservation_blocked(&x, NULL, 0, 501), 0x2);
        assert_int_equal(reservation_held(&x, "carol"), 0);
        reservation_index_build(&x, r, 4, 550);
        assert_int_equal(reservation_held(&x, "carol"), 0x2);
        assert_int_equal(reservation_held(&x, "alice"), 0);
    }
}

/* Backfill's walk over 20,000 back-to-back windows (sorted by start): one pass, and the
 * job lands after the last; a short job fits before the first. */
static void test_free_from_long_chain(void **state)
{
    (void)state;
    enum { N = 20000 };
    struct scheduler_reservation *r = calloc(N, sizeof(*r));
    for (int i = 0; i < N; i++)
        r[i] = (struct scheduler_reservation){i + 1, i % 2 ? "alice" : "carol", 1000.0 + 60 * i,
                                              1060.0 + 60 * i, 0x2};
    assert_true(reservation_free_from(r, N, 1, "bob", 0, 3600) == 1000.0 + 60 * N);
    assert_true(reservation_free_from(r, N, 1, "bob", 0, 1000) == 0);
    assert_true(reservation_free_from(r, N, 0, "bob", 0, 1e9) == 0);
    free(r);
}

static void test_pick_gpus(void **state)
{
    (void)state;
    struct scheduler_reservation r[] = {{3, "alice", 1000, 2000, 0xC}};
    uint64_t out;
    char *err;
    /* --gpus N: the highest free indices. */
    assert_int_equal(reservation_pick_gpus(r, 1, 1500, 2500, 0xF, 0, 2, &out, &err), 0);
    assert_int_equal(out, 0x3);
    assert_int_equal(reservation_pick_gpus(r, 1, 2000, 2500, 0xF, 0, 2, &out, &err), 0);
    assert_int_equal(out, 0xC);
    assert_int_equal(reservation_pick_gpus(r, 1, 1500, 2500, 0xF, 0, 3, &out, &err), -2);
    assert_non_null(strstr(err, "only 2 of the 4 GPUs are free"));
    free(err);
    assert_int_equal(reservation_pick_gpus(r, 1, 1500, 2500, 0xF, 0, 5, &out, &err), -1);
    assert_non_null(strstr(err, "this machine has 4 GPUs"));
    free(err);
    /* --gpu-spec: those GPUs, present and not reserved in the window. */
    assert_int_equal(reservation_pick_gpus(r, 1, 500, 1001, 0xF, 0x5, 0, &out, &err), -2);
    assert_non_null(strstr(err, "GPU 2 already reserved in that window by reservation 3"));
    free(err);
    assert_int_equal(reservation_pick_gpus(r, 1, 500, 1000, 0xF, 0x5, 0, &out, &err), 0);
    assert_int_equal(out, 0x5);
    assert_int_equal(reservation_pick_gpus(r, 1, 500, 1000, 0xF, 0x30, 0, &out, &err), -1);
    assert_non_null(strstr(err, "no GPU 4,5 on this machine"));
    free(err);
    assert_int_equal(reservation_pick_gpus(r, 1, 500, 1000, 0, 0, 1, &out, &err), -1);
    free(err);
}

/* During the window the reserved GPUs run only the holder's jobs; others wait with
 * Reservation when nothing else is free; the holder's job gets its reserved GPUs. */
static void test_pass_during_window(void **state)
{
    (void)state;
    for (int backfill = 0; backfill <= 1; backfill++) {
        struct fixture f;
        fx_init(&f, 1500);
        f.policy.backfill = backfill;
        fx_resv(&f, "alice", "2,3", 1000, 2000);
        struct job *b1 = fx_job(&f, "bob", 2, 60, NULL, 0);
        struct job *b2 = fx_job(&f, "bob", 1, 60, NULL, 0);
        struct job *a1 = fx_job(&f, "alice", 2, 0, NULL, 0);
        struct job *b3 = fx_job(&f, "bob", 5, 60, NULL, 0);
        assert_int_equal(fx_pass(&f), 2);
        assert_ptr_equal(f.start[0], b1);
        assert_ids(b1, "0,1");
        assert_string_equal(b2->wait_reason, SCHEDULER_REASON_RESERVATION);
        assert_ptr_equal(f.start[1], a1);
        assert_ids(a1, "2,3");
        assert_null(a1->wait_reason);
        assert_string_equal(b3->wait_reason, SCHEDULER_REASON_RESOURCES);
        /* After the window everyone may use them. */
        b1->state = a1->state = JOB_FINISHED;
        f.now = 2000;
        assert_int_equal(fx_pass(&f), 1);
        assert_ptr_equal(f.start[0], b2);
    }
}

/* Before the window: a job that would still run at its start (a job without a time
 * limit counts as default_time_limit) is not started on the reserved GPUs; a short
 * one is. With and without backfill. */
static void test_pass_before_window(void **state)
{
    (void)state;
    for (int backfill = 0; backfill <= 1; backfill++) {
        struct fixture f;
        fx_init(&f, 900);
        f.policy.backfill = backfill;
        f.policy.default_time_limit = 3600;
        fx_resv(&f, "alice", "2,3", 1000, 2000);
        struct job *l1 = fx_job(&f, "bob", 1, 0, NULL, 0);   /* 3600 s: too long */
        struct job *l2 = fx_job(&f, "bob", 1, 500, NULL, 0); /* ends at 1400 */
        struct job *l3 = fx_job(&f, "bob", 1, 0, NULL, 0);
        struct job *s1 = fx_job(&f, "bob", 1, 100, NULL, 0); /* ends at 1000 */
        struct job *s2 = fx_job(&f, "bob", 1, 50, NULL, 0);
        struct job *a1 = fx_job(&f, "alice", 1, 0, NULL, 0); /* no active reservation yet */
        assert_int_equal(fx_pass(&f), 4);
        assert_null(l1->wait_reason);
        assert_null(l2->wait_reason);
        assert_string_equal(l3->wait_reason, SCHEDULER_REASON_RESERVATION);
        assert_null(s1->wait_reason);
        assert_null(s2->wait_reason);
        assert_ids(s1, "2");
        assert_ids(s2, "3");
        assert_string_equal(a1->wait_reason, SCHEDULER_REASON_PRIORITY);
    }
}

/* Backfill plans another user's blocked job around the window, as GPUs busy then. */
static void test_backfill_plans_around_window(void **state)
{
    (void)state;
    struct fixture f;
    fx_init(&f, 1000);
    f.policy.backfill = true;
    fx_resv(&f, "alice", "0,1,2,3", 1100, 1200);
    fx_job(&f, "carol", 2, 50, "0,1", 1000);              /* ends at 1050 */
    struct job *big = fx_job(&f, "bob", 4, 300, NULL, 0); /* 300 s: not before 1100 */
    assert_int_equal(fx_pass(&f), 0);
    assert_string_equal(big->wait_reason, SCHEDULER_REASON_RESOURCES);
    assert_true(big->expected_start == 1200.0);
    /* The holder's own job is planned right after the running one. */
    big->user = "alice";
    assert_int_equal(fx_pass(&f), 0);
    assert_true(big->expected_start == 1050.0);
}

/* Jobs with the same request but different users get their own answers: a Reservation
 * for one is not reused for the holder (the reason cache), and a greedy pass keeps it. */
static void test_same_request_mixed_users(void **state)
{
    (void)state;
    for (int backfill = 0; backfill <= 1; backfill++) {
        struct fixture f;
        fx_init(&f, 1500);
        f.policy.backfill = backfill;
        fx_resv(&f, "alice", "2,3", 1000, 2000);
        struct job *b[4], *a[2];
        b[0] = fx_job(&f, "bob", 1, 60, NULL, 0);
        b[1] = fx_job(&f, "bob", 1, 60, NULL, 0);
        b[2] = fx_job(&f, "bob", 1, 60, NULL, 0);
        b[3] = fx_job(&f, "bob", 1, 60, NULL, 0); /* b[2]'s answer, from the cache */
        a[0] = fx_job(&f, "alice", 1, 60, NULL, 0);
        struct job *c = fx_job(&f, "carol", 1, 60, NULL, 0);
        a[1] = fx_job(&f, "alice", 1, 60, NULL, 0);
        assert_int_equal(fx_pass(&f), 4);
        assert_null(b[0]->wait_reason);
        assert_null(b[1]->wait_reason);
        assert_string_equal(b[2]->wait_reason, SCHEDULER_REASON_RESERVATION);
        assert_string_equal(b[3]->wait_reason, SCHEDULER_REASON_RESERVATION);
        assert_null(a[0]->wait_reason);
        assert_ids(a[0], "2");
        assert_string_equal(c->wait_reason, SCHEDULER_REASON_RESERVATION);
        assert_null(a[1]->wait_reason);
        assert_ids(a[1], "3");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_index_several_holders),
        cmocka_unit_test(test_free_from_long_chain),
        cmocka_unit_test(test_pick_gpus),
        cmocka_unit_test(test_pass_during_window),
        cmocka_unit_test(test_pass_before_window),
        cmocka_unit_test(test_backfill_plans_around_window),
        cmocka_unit_test(test_same_request_mixed_users),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
