/* test_cpumask: CPU lists both ways (src/core/cpumask.c) and the CPUs a job is pinned to:
 * its GPUs' near CPUs, --cpus-per-gpu N from them avoiding other pinned jobs' CPUs,
 * topped up from far CPUs when too few are near, always within the daemon's own. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cpumask.h"

static struct cpumask parse_ok(const char *s)
{
    struct cpumask m;
    assert_int_equal(cpumask_parse(s, &m), 0);
    return m;
}

static void assert_list(const struct cpumask *m, const char *want)
{
    char *s = cpumask_format(m);
    assert_string_equal(s, want);
    free(s);
}

static void test_parse_format(void **state)
{
    (void)state;
    struct cpumask m = parse_ok("0-3,8,10-11\n");
    assert_int_equal(cpumask_count(&m), 7);
    assert_list(&m, "0-3,8,10-11");
    m = parse_ok("5");
    assert_list(&m, "5");
    m = parse_ok("");
    assert_true(cpumask_empty(&m));
    assert_list(&m, "");
    m = parse_ok("1,0,2");
    assert_list(&m, "0-2");
    m = parse_ok("0-1023");
    assert_int_equal(cpumask_count(&m), 1024);
    const char *bad[] = {"a", "1-", "3-1", "1,,2", "-1", "1024", "0-99999", "1 2", NULL};
    for (const char **b = bad; *b; b++)
        assert_int_equal(cpumask_parse(*b, &m), -1);
}

static void test_pin_union(void **state)
{
    (void)state;
    struct cpumask near[2] = {parse_ok("0-7"), parse_ok("8-15")};
    struct cpumask allowed = parse_ok("0-15"), taken = parse_ok(""), out;
    cpumask_pin(near, 2, 0, &allowed, &taken, &out);
    assert_list(&out, "0-15");
    cpumask_pin(&near[1], 1, 0, &allowed, &taken, &out);
    assert_list(&out, "8-15");
    /* Only what the daemon may use: a 2-core machine. */
    allowed = parse_ok("0-1");
    cpumask_pin(near, 1, 0, &allowed, &taken, &out);
    assert_list(&out, "0-1");
    cpumask_pin(&near[1], 1, 0, &allowed, &taken, &out);
    assert_true(cpumask_empty(&out)); /* nothing near: no pinning */
}

static void test_pin_per_gpu(void **state)
{
    (void)state;
    struct cpumask near[2] = {parse_ok("0-3"), parse_ok("4-7")};
    struct cpumask allowed = parse_ok("0-7"), taken = parse_ok("0-1"), out;
    /* 2 per GPU: the free near ones first. */
    cpumask_pin(near, 2, 2, &allowed, &taken, &out);
    assert_list(&out, "2-5");
    /* 3 for GPU 0: its two free near CPUs, then a taken near one before a far one. */
    cpumask_pin(near, 1, 3, &allowed, &taken, &out);
    assert_list(&out, "0,2-3");
    /* 6 for GPU 0: all four near, then the free far ones. */
    cpumask_pin(near, 1, 6, &allowed, &taken, &out);
    assert_list(&out, "0-5");
    /* More than the machine has: all it has. */
    cpumask_pin(near, 1, 20, &allowed, &taken, &out);
    assert_list(&out, "0-7");
    /* Near CPUs unknown: N free ones all the same. */
    struct cpumask none[1] = {parse_ok("")};
    cpumask_pin(none, 1, 2, &allowed, &taken, &out);
    assert_list(&out, "2-3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_format),
        cmocka_unit_test(test_pin_union),
        cmocka_unit_test(test_pin_per_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
