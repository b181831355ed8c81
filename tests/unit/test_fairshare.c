/* test_fairshare: the usage accounting and priority math of src/core/fairshare.c: decay,
 * the charge of a run, the fair-share factor, shares, the age factor and the order. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fairshare.h"
#include "scheduler.h"
#include "util.h"

#define H 3600.0 /* a half-life of one hour */
#define T0 1e9   /* unix seconds */
#define EPS 1e-9

static struct job *mkjob(int64_t id, const char *user, int gpus, double start, double end)
{
    struct job *j = job_new();
    j->id = id;
    j->user = xstrdup(user);
    j->gpus = gpus;
    j->submit_time = start > 0 ? start : T0;
    j->start_time = start;
    j->end_time = end;
    return j;
}

static void test_decay(void **state)
{
    (void)state;
    assert_float_equal(fairshare_decay(100, H, H), 50, EPS);
    assert_float_equal(fairshare_decay(100, 2 * H, H), 25, EPS);
    assert_float_equal(fairshare_decay(100, 0, H), 100, EPS);
    assert_float_equal(fairshare_decay(100, -5, H), 100, EPS); /* a clock that went back */
    assert_float_equal(fairshare_decay(100, H, 0), 100, EPS);  /* no half-life: no decay */
}

static void test_run_usage(void **state)
{
    (void)state;
    /* No decay: GPUs x seconds. */
    assert_float_equal(fairshare_run_usage(2, T0, T0 + 100, T0 + 100, 0), 200, EPS);
    /* A run of one half-life, read at its end: gpus x h/ln2 x (1 - 1/2). */
    assert_float_equal(fairshare_run_usage(1, T0, T0 + H, T0 + H, H), H / M_LN2 / 2, 1e-6);
    /* Read one half-life later: half of that. */
    assert_float_equal(fairshare_run_usage(1, T0, T0 + H, T0 + 2 * H, H), H / M_LN2 / 4, 1e-6);
    /* A short run is about gpus x seconds. */
    assert_float_equal(fairshare_run_usage(4, T0, T0 + 1, T0 + 1, 7 * 86400.0), 4, 1e-3);
    assert_float_equal(fairshare_run_usage(0, T0, T0 + 100, T0 + 100, H), 0, EPS);
    assert_float_equal(fairshare_run_usage(1, 0, T0, T0, H), 0, EPS); /* never started */
}

/* Charging a job at its end and reading later equals the decayed integral read then. */
static void test_charge_job(void **state)
{
    (void)state;
    struct fairshare fs;
    fairshare_init(&fs, H);
    struct job *j = mkjob(1, "alice", 2, T0, T0 + H);
    j->project = xstrdup("vision");
    struct fairshare_account *charged[FAIRSHARE_KINDS];
    fairshare_charge_job(&fs, j, charged);
    assert_non_null(charged[FAIRSHARE_USER]);
    assert_non_null(charged[FAIRSHARE_PROJECT]);
    assert_string_equal(charged[FAIRSHARE_PROJECT]->name, "vision");
    fairshare_update(&fs, NULL, 0, T0 + 3 * H);
    struct fairshare_account *a = fairshare_account(&fs, FAIRSHARE_USER, "alice", false);
    assert_float_equal(a->now_usage, fairshare_run_usage(2, T0, T0 + H, T0 + 3 * H, H), 1e-6);
    assert_float_equal(a->now_raw, 2 * H, EPS);
    /* A second job of hers that ended earlier (found after a restart) adds its part. */
    struct job *k = mkjob(2, "alice", 1, T0 - H, T0);
    fairshare_charge_job(&fs, k, NULL);
    fairshare_update(&fs, NULL, 0, T0 + 3 * H);
    double want = fairshare_run_usage(2, T0, T0 + H, T0 + 3 * H, H) +
                  fairshare_run_usage(1, T0 - H, T0, T0 + 3 * H, H);
    assert_float_equal(a->now_usage, want, 1e-6);
    job_free(j);
    job_free(k);
    fairshare_free(&fs);
}

/* A running job counts as it runs; after a "restart" (a fresh table loaded from what
 * was stored: nothing for a running job) the usage is the same, and once the job ends
 * and is charged it is counted once. */
static void test_running_and_restart(void **state)
{
    (void)state;
    struct fairshare fs;
    fairshare_init(&fs, H);
    struct job *run = mkjob(1, "bob", 1, T0, 0);
    struct job *list[] = {run};
    fairshare_update(&fs, list, 1, T0 + H);
    struct fairshare_account *b = fairshare_account(&fs, FAIRSHARE_USER, "bob", false);
    double during = b->now_usage;
    assert_float_equal(during, fairshare_run_usage(1, T0, T0 + H, T0 + H, H), 1e-6);
    assert_false(b->stored);

    struct fairshare again; /* the restart: loads stored rows only (none) */
    fairshare_init(&again, H);
    fairshare_update(&again, list, 1, T0 + H);
    assert_float_equal(fairshare_account(&again, FAIRSHARE_USER, "bob", false)->now_usage, during,
                       1e-6);
    /* The job ends at T0 + 2H and is charged; read at T0 + 2H with no running job. */
    run->end_time = T0 + 2 * H;
    fairshare_charge_job(&again, run, NULL);
    fairshare_update(&again, NULL, 0, T0 + 2 * H);
    struct fairshare_account *a = fairshare_account(&again, FAIRSHARE_USER, "bob", false);
    assert_float_equal(a->now_usage, fairshare_run_usage(1, T0, T0 + 2 * H, T0 + 2 * H, H), 1e-6);
    /* Stored as (usage, at, raw) and loaded again: the same. */
    struct fairshare third;
    fairshare_init(&third, H);
    fairshare_load(&third, FAIRSHARE_USER, "bob", a->usage, a->at, a->raw);
    fairshare_update(&third, NULL, 0, T0 + 5 * H);
    fairshare_update(&again, NULL, 0, T0 + 5 * H);
    assert_float_equal(fairshare_account(&third, FAIRSHARE_USER, "bob", false)->now_usage,
                       a->now_usage, 1e-6);
    assert_float_equal(fairshare_account(&third, FAIRSHARE_USER, "bob", false)->now_raw, 2 * H,
                       EPS);
    job_free(run);
    fairshare_free(&fs);
    fairshare_free(&again);
    fairshare_free(&third);
}

static void test_factor_and_shares(void **state)
{
    (void)state;
    struct fairshare fs;
    fairshare_init(&fs, 0); /* no decay: plain GPU-seconds */
    fairshare_load(&fs, FAIRSHARE_USER, "alice", 300, T0, 300);
    fairshare_load(&fs, FAIRSHARE_USER, "bob", 100, T0, 100);
    fairshare_update(&fs, NULL, 0, T0);
    /* Equal shares: alice used 3/4 of 1/2: 2^-(0.75/0.5); bob 2^-(0.25/0.5). */
    assert_float_equal(fairshare_account(&fs, FAIRSHARE_USER, "alice", false)->factor, exp2(-1.5),
                       EPS);
    assert_float_equal(fairshare_account(&fs, FAIRSHARE_USER, "bob", false)->factor, exp2(-0.5),
                       EPS);
    /* alice has 3 shares: she used exactly her share, 0.5. */
    char *err = NULL;
    assert_int_equal(fairshare_set_shares(&fs, FAIRSHARE_USER, "alice=3", &err), 0);
    fairshare_update(&fs, NULL, 0, T0);
    assert_float_equal(fairshare_account(&fs, FAIRSHARE_USER, "alice", false)->factor, 0.5, EPS);
    assert_float_equal(fairshare_account(&fs, FAIRSHARE_USER, "bob", false)->factor, 0.5, EPS);
    /* A configured account exists before it has used anything; unused: factor 1. */
    assert_int_equal(fairshare_set_shares(&fs, FAIRSHARE_USER, "alice=3,carol=2.5", &err), 0);
    fairshare_update(&fs, NULL, 0, T0);
    struct fairshare_account *c = fairshare_account(&fs, FAIRSHARE_USER, "carol", false);
    assert_non_null(c);
    assert_float_equal(c->shares, 2.5, EPS);
    assert_float_equal(c->factor, 1, EPS);
    /* Nobody used anything: every factor is 1. */
    struct fairshare empty;
    fairshare_init(&empty, H);
    fairshare_account(&empty, FAIRSHARE_USER, "x", true);
    fairshare_update(&empty, NULL, 0, T0);
    assert_float_equal(fairshare_account(&empty, FAIRSHARE_USER, "x", false)->factor, 1, EPS);
    fairshare_free(&empty);
    fairshare_free(&fs);
}

static void test_bad_shares(void **state)
{
    (void)state;
    const char *bad[] = {"alice", "alice=0", "=2", "alice=x", "alice=2,", "alice=-1", "a=1,,b=2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *err = NULL;
        assert_int_equal(fairshare_set_shares(NULL, FAIRSHARE_USER, bad[i], &err), -1);
        assert_non_null(err);
        assert_non_null(strstr(err, "NAME=N"));
        free(err);
    }
    char *err = NULL;
    assert_int_equal(fairshare_set_shares(NULL, FAIRSHARE_USER, "", &err), 0);
    assert_int_equal(fairshare_set_shares(NULL, FAIRSHARE_USER, "a=1,b=0.5", &err), 0);
    assert_null(err);
}

static void test_job_priority(void **state)
{
    (void)state;
    struct fairshare fs;
    fairshare_init(&fs, 0);
    struct priority_weights w = {.priority = 255, .fairshare = 1000, .age = 100, .max_age = 100};
    struct job *j = mkjob(1, "alice", 1, 0, 0);
    j->submit_time = T0;
    struct priority_factors f;
    fairshare_job_priority(&fs, &w, j, T0 + 50, &f);
    assert_float_equal(f.priority, 10.0 / 255, EPS);
    assert_float_equal(f.fairshare, 1, EPS); /* no account: unused */
    assert_float_equal(f.age, 0.5, EPS);
    assert_float_equal(f.effective, 10 + 1000 + 50, EPS);
    fairshare_job_priority(&fs, &w, j, T0 + 500, &f); /* age is capped at 1 */
    assert_float_equal(f.age, 1, EPS);
    j->begin_time = T0 + 400; /* waiting counts from --begin */
    fairshare_job_priority(&fs, &w, j, T0 + 450, &f);
    assert_float_equal(f.age, 0.5, EPS);
    /* Project factor multiplies the user's. */
    fairshare_load(&fs, FAIRSHARE_PROJECT, "p1", 100, T0, 100);
    fairshare_load(&fs, FAIRSHARE_PROJECT, "p2", 0, T0, 0);
    fairshare_load(&fs, FAIRSHARE_USER, "alice", 100, T0, 100);
    fairshare_load(&fs, FAIRSHARE_USER, "bob", 100, T0, 100);
    fairshare_update(&fs, NULL, 0, T0);
    j->project = xstrdup("p1");
    fairshare_job_priority(&fs, &w, j, T0, &f);
    assert_float_equal(f.fairshare, exp2(-1) * exp2(-2), EPS);
    /* The default weights keep the order: effective priority = --priority. */
    struct priority_weights def = {.priority = PRIORITY_WEIGHT_PRIORITY_DEFAULT};
    assert_false(priority_weights_reorder(&def));
    assert_true(priority_weights_reorder(&w));
    fairshare_job_priority(&fs, &def, j, T0, &f);
    assert_float_equal(f.effective, 10, EPS);
    job_free(j);
    fairshare_free(&fs);
}

/* alice has used the GPUs, bob not: bob's later job goes first; ties keep id order. */
static void test_order(void **state)
{
    (void)state;
    struct fairshare fs;
    fairshare_init(&fs, H);
    struct job *used = mkjob(1, "alice", 2, T0 - H, T0);
    fairshare_charge_job(&fs, used, NULL);
    struct job *q[] = {mkjob(2, "alice", 1, 0, 0), mkjob(3, "alice", 1, 0, 0),
                       mkjob(4, "bob", 1, 0, 0), mkjob(5, "bob", 1, 0, 0)};
    struct job *running[] = {mkjob(6, "carol", 1, T0 - 10, 0)};
    struct priority_weights w = {.priority = 255, .fairshare = 1000};
    struct job *out[4];
    fairshare_order(&fs, &w, q, 4, running, 1, T0, out);
    assert_int_equal(out[0]->id, 4);
    assert_int_equal(out[1]->id, 5);
    assert_int_equal(out[2]->id, 2);
    assert_int_equal(out[3]->id, 3);
    /* The running job's user has an account, and counts in the total. */
    assert_non_null(fairshare_account(&fs, FAIRSHARE_USER, "carol", false));
    assert_true(fairshare_account(&fs, FAIRSHARE_USER, "carol", false)->now_usage > 0);
    /* A higher --priority still wins when its weight outweighs fair-share. */
    q[0]->priority = 255;
    w.priority = 100000;
    fairshare_order(&fs, &w, q, 4, running, 1, T0, out);
    assert_int_equal(out[0]->id, 2);
    assert_int_equal(out[1]->id, 4);
    for (int i = 0; i < 4; i++)
        job_free(q[i]);
    job_free(running[0]);
    job_free(used);
    fairshare_free(&fs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decay),
        cmocka_unit_test(test_run_usage),
        cmocka_unit_test(test_charge_job),
        cmocka_unit_test(test_running_and_restart),
        cmocka_unit_test(test_factor_and_shares),
        cmocka_unit_test(test_bad_shares),
        cmocka_unit_test(test_job_priority),
        cmocka_unit_test(test_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
