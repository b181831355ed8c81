/* test_timeplan: daemon.default_time_plan (src/core/timeplan.c): its grammar, the run
 * history's ring and nearest-rank percentile, and the fallback while the history is
 * short. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "timeplan.h"

static void bad(const char *s)
{
    struct time_plan p;
    char *err = NULL;
    assert_int_equal(time_plan_parse(s, &p, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err, "default_time_plan"));
    assert_non_null(strstr(err, "p95"));
    assert_null(strchr(err, '\n'));
    free(err);
}

static void test_parse(void **state)
{
    (void)state;
    struct time_plan p;
    char *err = NULL;
    assert_int_equal(time_plan_parse("p95", &p, &err), 0);
    assert_int_equal(p.percentile, 95);
    assert_int_equal(time_plan_parse("P100", &p, &err), 0);
    assert_int_equal(p.percentile, 100);
    assert_int_equal(time_plan_parse("p1", &p, &err), 0);
    assert_int_equal(p.percentile, 1);
    assert_int_equal(time_plan_parse("24h", &p, &err), 0);
    assert_int_equal(p.percentile, 0);
    assert_true(p.fixed == 86400.0);
    assert_int_equal(time_plan_parse("08:00:00", &p, &err), 0);
    assert_true(p.fixed == 8 * 3600.0);
    assert_int_equal(time_plan_parse("90m", &p, &err), 0);
    assert_true(p.fixed == 5400.0);
    assert_null(err);
    const char *bads[] = {"p0", "p101", "p", "px", "p95.5", "p-5", "p 95", "", "soon", "0h", "-1h"};
    for (size_t i = 0; i < sizeof(bads) / sizeof(*bads); i++)
        bad(bads[i]);
}

static void test_percentile_and_ring(void **state)
{
    (void)state;
    struct run_history *h = malloc(sizeof(*h));
    run_history_init(h);
    assert_true(run_history_percentile(h, 95) == 0);
    for (int i = 1; i <= 100; i++) /* 1..100 s, in any order */
        run_history_add(h, (double)((i * 37) % 100 + 1));
    assert_true(run_history_percentile(h, 95) == 95.0);
    assert_true(run_history_percentile(h, 95) == 95.0); /* asking changes nothing */
    assert_true(run_history_percentile(h, 50) == 50.0);
    assert_true(run_history_percentile(h, 100) == 100.0);
    assert_true(run_history_percentile(h, 1) == 1.0);
    run_history_add(h, 0);  /* ignored */
    run_history_add(h, -5); /* ignored */
    assert_int_equal(h->n, 100);
    /* The ring keeps the last TIME_PLAN_HISTORY: long runs pushed out by short ones. */
    for (int i = 0; i < TIME_PLAN_HISTORY; i++)
        run_history_add(h, 7);
    assert_int_equal(h->n, TIME_PLAN_HISTORY);
    assert_true(run_history_percentile(h, 100) == 7.0);
    free(h);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The sorted copy stays the ring's values sorted across many wraps. */
static void test_sorted_copy(void **state)
{
    (void)state;
    struct run_history *h = malloc(sizeof(*h));
    run_history_init(h);
    srand(7);
    double *all = malloc(5000 * sizeof(*all)), want[TIME_PLAN_HISTORY];
    for (int i = 0; i < 5000; i++) {
        all[i] = 1 + rand() % 500; /* many equal values */
        run_history_add(h, all[i]);
        size_t n = i + 1 < TIME_PLAN_HISTORY ? (size_t)i + 1 : TIME_PLAN_HISTORY;
        if (i % 97 != 0 && i != 4999)
            continue;
        memcpy(want, all + i + 1 - n, n * sizeof(*want));
        qsort(want, n, sizeof(*want), cmp);
        assert_int_equal(h->n, n);
        assert_memory_equal(h->sorted, want, n * sizeof(*want));
    }
    free(all);
    free(h);
}

static void test_value_and_fallback(void **state)
{
    (void)state;
    struct run_history *h = malloc(sizeof(*h));
    run_history_init(h);
    struct time_plan p95 = {95, 0}, fixed = {0, 5400};
    assert_true(time_plan_value(&fixed, h, 86400) == 5400);
    assert_true(time_plan_value(&p95, h, 86400) == 86400); /* no history */
    assert_true(time_plan_value(&p95, NULL, 86400) == 86400);
    for (int i = 0; i < TIME_PLAN_MIN_RUNS - 1; i++)
        run_history_add(h, 60);
    assert_true(time_plan_value(&p95, h, 86400) == 86400); /* too little */
    run_history_add(h, 60);
    assert_true(time_plan_value(&p95, h, 86400) == 60);
    run_history_init(h);
    for (int i = 0; i < TIME_PLAN_MIN_RUNS; i++)
        run_history_add(h, 0.2);
    assert_true(time_plan_value(&p95, h, 86400) == 1); /* at least 1 s */
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_percentile_and_ring),
        cmocka_unit_test(test_sorted_copy),
        cmocka_unit_test(test_value_and_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
