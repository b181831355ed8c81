/* test_replay: gflow-replay's parts (src/replay): a tiny hand-made trace whose waits and
 * metrics are worked out by hand, skipped jobs, time limits, reading a trace by column
 * name and its errors, and the synthetic trace's determinism. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "sim.h"
#include "trace.h"

#define EPS 1e-9

/* Reads a trace from text; returns the reader's status and leaves *err (or NULL). */
static int read_text(struct replay_trace *t, const char *text, char **err)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    assert_non_null(f);
    *err = NULL;
    replay_trace_init(t);
    int rc = replay_trace_read(t, f, "t.csv", err);
    fclose(f);
    return rc;
}

/* Replays text on n_gpus under greedy and computes the metrics. */
static void replay_text(const char *text, int n_gpus, struct replay_trace *t,
                        struct replay_outcome *o, struct replay_metrics *m)
{
    char *err;
    assert_int_equal(read_text(t, text, &err), 0);
    replay_trace_sort(t);
    struct scheduler_policy policy;
    assert_int_equal(replay_policy("greedy", &policy), 0);
    replay_simulate(t, n_gpus, &policy, o);
    replay_metrics_compute(t, o, m);
}

/* 2 GPUs. A (alice) takes both at 0 for 100 s. B (bob, 1 GPU, 50 s) comes at 10 and C
 * (bob, 1 GPU, 30 s but a 20 s limit) at 20: both start when A ends at 100, B ends at
 * 150, C at its limit at 120. Waits 0, 90, 80. */
static const char three_jobs[] = "submit_s,gpus,runtime_s,time_limit_s,user,project\n"
                                 "0,2,100,,alice,p\n"
                                 "10,1,50,,bob,p\n"
                                 "20,1,30,20,bob,q\n";

static void test_hand_computed_metrics(void **state)
{
    (void)state;
    struct replay_trace t;
    struct replay_outcome o;
    struct replay_metrics m;
    replay_text(three_jobs, 2, &t, &o, &m);
    assert_true(o.jobs[0].started && o.jobs[1].started && o.jobs[2].started);
    assert_float_equal(o.jobs[0].wait, 0, EPS);
    assert_float_equal(o.jobs[1].wait, 90, EPS);
    assert_float_equal(o.jobs[2].wait, 80, EPS);
    assert_float_equal(o.jobs[2].run, 20, EPS); /* ended at its time limit */
    assert_int_equal(m.jobs, 3);
    assert_int_equal(m.skipped, 0);
    assert_float_equal(m.all.mean, 170.0 / 3, EPS);
    assert_float_equal(m.all.p50, 80, EPS); /* nearest rank: 2nd of 0, 80, 90 */
    assert_float_equal(m.all.p95, 90, EPS);
    assert_float_equal(m.all.p99, 90, EPS);
    assert_float_equal(m.max_wait, 90, EPS);
    assert_int_equal(m.big.jobs, 0);
    assert_true(isnan(m.big.mean) && isnan(m.big.p99));
    /* 2*100 + 50 + 20 GPU-seconds over 2 GPUs x 150 s. */
    assert_float_equal(m.makespan, 150, EPS);
    assert_float_equal(m.utilisation, 270.0 / 300, EPS);
    /* max(1, (wait + run) / max(run, 10)): 1, 140/50, 100/20. */
    assert_float_equal(m.slowdown, (1 + 2.8 + 5) / 3, EPS);
    /* alice 200, bob 70 GPU-seconds: 270^2 / (2 (200^2 + 70^2)). */
    assert_int_equal(m.users, 2);
    assert_float_equal(m.jain, 72900.0 / 89800, EPS); /* one window: the same as the total */
    assert_float_equal(m.jain_total, 72900.0 / 89800, EPS);
    assert_int_equal(m.contended_windows, 1);
    replay_outcome_free(&o);
    replay_trace_free(&t);
}

/* Greedy lets small jobs overtake a big one, and a job larger than the machine is
 * skipped and counted. 4 GPUs: a 2-GPU job runs 0-100; the 4-GPU job (at 1) waits for
 * it; the 1-GPU job at 2 starts at once beside the first. */
static void test_greedy_overtakes_and_skips(void **state)
{
    (void)state;
    struct replay_trace t;
    struct replay_outcome o;
    struct replay_metrics m;
    replay_text("submit_s,gpus,runtime_s\n0,2,100\n1,4,10\n2,1,50\n3,5,10\n", 4, &t, &o, &m);
    assert_int_equal(m.skipped, 1);
    assert_true(o.jobs[3].skipped && !o.jobs[3].started);
    assert_int_equal(m.jobs, 3);
    assert_float_equal(o.jobs[2].wait, 0, EPS);
    assert_float_equal(o.jobs[1].wait, 99, EPS);
    assert_int_equal(m.big.jobs, 1);
    assert_float_equal(m.big.mean, 99, EPS);
    assert_float_equal(m.max_wait, 99, EPS);
    /* No users given: all jobs are one user's. */
    assert_int_equal(m.users, 1);
    assert_float_equal(m.jain_total, 1, EPS);
    assert_true(isnan(m.jain)); /* no window with two users */
    assert_int_equal(m.contended_windows, 0);
    assert_int_equal(o.unstarted, 0);
    replay_outcome_free(&o);
    replay_trace_free(&t);
}

/* Fairness is what users got while competing: on 1 GPU, alice runs for the first hour
 * while bob's job (submitted with hers) waits, then bob runs for the second. Both got an
 * hour in total (index 1), but in the first hour, the only one in which a job waited,
 * alice had it all: (3600 + 0)^2 / (2 (3600^2 + 0^2)) = 0.5. */
static void test_fairness_per_window(void **state)
{
    (void)state;
    struct replay_trace t;
    struct replay_outcome o;
    struct replay_metrics m;
    replay_text("submit_s,gpus,runtime_s,user\n0,1,3600,alice\n0,1,3600,bob\n", 1, &t, &o, &m);
    assert_float_equal(o.jobs[1].wait, 3600, EPS);
    assert_float_equal(m.jain_total, 1, EPS);
    assert_int_equal(m.contended_windows, 1);
    assert_float_equal(m.jain, 0.5, EPS);
    replay_outcome_free(&o);
    replay_trace_free(&t);
}

/* Columns are found by name: the Philly subset's header, extra columns, any order. */
static void test_columns_by_name(void **state)
{
    (void)state;
    struct replay_trace t;
    char *err;
    assert_int_equal(read_text(&t,
                               "job,submit_s,gpus,runtime_s,attempts\r\n"
                               "app_1,0,8,2240224,4\r\n"
                               "\n"
                               "app_2, 664859 ,4,17836.5,1\n",
                               &err),
                     0);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.recs[0].gpus, 8);
    assert_float_equal(t.recs[1].submit, 664859, EPS);
    assert_float_equal(t.recs[1].runtime, 17836.5, EPS);
    assert_float_equal(t.recs[1].time_limit, 0, EPS);
    assert_int_equal(t.recs[1].user, -1);
    replay_trace_free(&t);
}

static void assert_read_error(const char *text, const char *want)
{
    struct replay_trace t;
    char *err;
    assert_int_equal(read_text(&t, text, &err), -1);
    assert_non_null(err);
    if (!strstr(err, want))
        fail_msg("error '%s' lacks '%s'", err, want);
    assert_null(strchr(err, '\n'));
    free(err);
    replay_trace_free(&t);
}

static void test_read_errors(void **state)
{
    (void)state;
    assert_read_error("submit_s,runtime_s\n0,10\n", "t.csv: the header line has no column gpus");
    assert_read_error("submit_s,gpus,runtime_s\n0,-1,10\n", "t.csv:2: gpus is '-1'");
    assert_read_error("submit_s,gpus,runtime_s\n0,1.5,10\n", "t.csv:2: gpus is '1.5'");
    assert_read_error("submit_s,gpus,runtime_s\n0,1,abc\n", "t.csv:2: runtime_s is 'abc'");
    assert_read_error("submit_s,gpus,runtime_s,time_limit_s\n0,1,5,-3\n",
                      "t.csv:2: time_limit_s is '-3'");
    assert_read_error("submit_s,gpus,runtime_s\n0,1\n", "t.csv:2: no value for runtime_s");
    assert_read_error("", "t.csv: empty");
    struct replay_trace t;
    replay_trace_init(&t);
    char *err = NULL;
    assert_int_equal(replay_trace_load(&t, "/nonexistent/trace.csv", &err), -1);
    assert_string_equal(err, "cannot read /nonexistent/trace.csv: No such file or directory");
    free(err);
    replay_trace_free(&t);
}

/* The synthetic trace: the same seed gives the same trace, 5 users, mostly 1-GPU jobs,
 * only 1/2/4/8-GPU jobs, the offered load it promises; --load divides arrivals. */
static void test_synthetic(void **state)
{
    (void)state;
    struct replay_trace a, b;
    replay_trace_init(&a);
    replay_trace_init(&b);
    replay_trace_synthetic(&a, 5000, 7);
    replay_trace_synthetic(&b, 5000, 7);
    assert_int_equal(a.n, 5000);
    assert_memory_equal(a.recs, b.recs, a.n * sizeof(*a.recs));
    size_t by_gpus[9] = {0}, users[16] = {0};
    double demand = 0;
    for (size_t i = 0; i < a.n; i++) {
        int g = a.recs[i].gpus;
        assert_true(g == 1 || g == 2 || g == 4 || g == 8);
        by_gpus[g]++;
        users[a.recs[i].user]++;
        demand += g * a.recs[i].runtime;
        if (i)
            assert_true(a.recs[i].submit >= a.recs[i - 1].submit);
    }
    assert_true(by_gpus[1] > a.n / 2);
    assert_true(by_gpus[8] > 0 && by_gpus[4] > 0 && by_gpus[2] > 0);
    size_t n_users = 0;
    for (size_t u = 0; u < 16; u++)
        n_users += users[u] > 0;
    assert_int_equal(n_users, 5);
    double load = demand / (8 * a.recs[a.n - 1].submit);
    assert_true(fabs(load - REPLAY_SYNTH_LOAD) < 0.01);
    replay_trace_free(&b);
    replay_trace_init(&b);
    replay_trace_synthetic(&b, 5000, 8);
    assert_true(memcmp(a.recs, b.recs, a.n * sizeof(*a.recs)) != 0);
    double last = a.recs[a.n - 1].submit;
    replay_trace_compress(&a, 4);
    assert_float_equal(a.recs[a.n - 1].submit, last / 4, 1e-6);
    replay_trace_free(&a);
    replay_trace_free(&b);
}

static void test_policy_names(void **state)
{
    (void)state;
    struct scheduler_policy p;
    assert_string_equal(replay_policy_names[0], "greedy");
    for (const char *const *n = replay_policy_names; *n; n++)
        assert_int_equal(replay_policy(*n, &p), 0);
    assert_int_equal(replay_policy("nope", &p), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_computed_metrics),
        cmocka_unit_test(test_greedy_overtakes_and_skips),
        cmocka_unit_test(test_fairness_per_window),
        cmocka_unit_test(test_columns_by_name),
        cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_policy_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
