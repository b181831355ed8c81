/* test_gpuacct: a job's GPU figures from readings (src/core/gpuacct.c): the energy
 * counter's differences, a counter that goes back or leaps (reset, wrap), the power
 * fallback, the stretches before the first and after the last reading, the mean, peak
 * and idle flag. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpuacct.h"

static struct gpuacct_reading rd(int gpu, double t, int util, int64_t mem, int power, int64_t mj)
{
    return (struct gpuacct_reading){
        .gpu = gpu, .t = t, .util = util, .mem_mib = mem, .power_w = power, .energy_mj = mj};
}

static void test_stretch(void **state)
{
    (void)state;
    /* counter: 10 s at 300 W = 3000 J */
    assert_float_equal(gpuacct_stretch_joules(1000, 3001000, 100, 100, 10), 3000, 1e-9);
    /* counter went back (driver reload): the power readings instead */
    assert_float_equal(gpuacct_stretch_joules(5000000, 1000, 200, 300, 10), 2500, 1e-9);
    /* a leap no GPU can draw (a wrap read as a huge step): power instead */
    assert_float_equal(gpuacct_stretch_joules(0, INT64_MAX, 100, -1, 10), 1000, 1e-9);
    /* no counter: power; one power reading only */
    assert_float_equal(gpuacct_stretch_joules(-1, -1, -1, 250, 4), 1000, 1e-9);
    assert_float_equal(gpuacct_stretch_joules(-1, 500, 100, 300, 2), 400, 1e-9);
    assert_true(gpuacct_stretch_joules(-1, -1, -1, -1, 10) < 0);
    assert_float_equal(gpuacct_stretch_joules(-1, -1, 100, 100, -5), 0, 1e-9);
}

static void test_counter(void **state)
{
    (void)state;
    struct gpuacct a;
    gpuacct_init(&a, 100);
    /* first reading 10 s after the start at 360 W: 3600 J before it from the power */
    struct gpuacct_reading r = rd(0, 110, 50, 1000, 360, 7000000);
    gpuacct_add(&a, &r);
    r = rd(0, 120, 100, 3000, 360, 7000000 + 3600000); /* counter: 3600 J */
    gpuacct_add(&a, &r);
    struct gpuacct_figures f;
    gpuacct_figures(&a, 120, &f);
    assert_float_equal(f.energy_wh, 2.0, 1e-9);
    assert_int_equal(f.util_peak, 100);
    assert_int_equal(f.util_mean, 75);
    assert_int_equal(f.mem_peak_mib, 3000);
    assert_int_equal(f.idle, 0);
    /* ended 10 s after the last reading: held at 360 W and 100 % */
    gpuacct_figures(&a, 130, &f);
    assert_float_equal(f.energy_wh, 3.0, 1e-9);
    assert_int_equal(f.util_mean, 83); /* (50*10 + 100*20) / 30 */
}

static void test_reset_and_fallback(void **state)
{
    (void)state;
    struct gpuacct a;
    gpuacct_init(&a, 0);
    struct gpuacct_reading r = rd(1, 10, 0, -1, 100, 50000000);
    gpuacct_add(&a, &r);             /* 1000 J from the power */
    r = rd(1, 20, 0, -1, 100, 1000); /* reset: 1000 J from the power */
    gpuacct_add(&a, &r);
    r = rd(1, 30, 0, -1, 100, 1001000); /* counter again: 1000 J */
    gpuacct_add(&a, &r);
    r = rd(1, 40, 0, -1, 300, -1); /* counter unreadable: (100+300)/2 x 10 = 2000 J */
    gpuacct_add(&a, &r);
    struct gpuacct_figures f;
    gpuacct_figures(&a, 40, &f);
    assert_float_equal(f.energy_wh, 5000 / 3600.0, 1e-9);
    assert_int_equal(f.idle, 1);
    assert_int_equal(f.mem_peak_mib, -1);
    /* an older reading is ignored */
    r = rd(1, 35, 100, -1, 100, -1);
    gpuacct_add(&a, &r);
    gpuacct_figures(&a, 40, &f);
    assert_int_equal(f.util_peak, 0);
}

static void test_two_gpus_shared(void **state)
{
    (void)state;
    struct gpuacct a;
    gpuacct_init(&a, 0);
    struct gpuacct_reading r = rd(0, 10, 90, 100, 200, -1);
    gpuacct_add(&a, &r);
    r = rd(3, 10, 10, 700, 100, -1);
    r.share = 0.5; /* another job shares GPU 3 */
    gpuacct_add(&a, &r);
    struct gpuacct_figures f;
    gpuacct_figures(&a, 10, &f);
    assert_int_equal(f.util_mean, 50);
    assert_int_equal(f.util_peak, 90);
    assert_int_equal(f.mem_peak_mib, 700);
    assert_float_equal(f.energy_wh, (2000 + 500) / 3600.0, 1e-9);
}

static void test_unknown_and_seed(void **state)
{
    (void)state;
    struct gpuacct a;
    gpuacct_init(&a, 0);
    struct gpuacct_figures f;
    gpuacct_figures(&a, 100, &f);
    assert_int_equal(f.util_mean, -1);
    assert_int_equal(f.util_peak, -1);
    assert_int_equal(f.mem_peak_mib, -1);
    assert_true(f.energy_wh < 0);
    assert_int_equal(f.idle, -1);
    /* a restarted daemon goes on from what was recorded */
    struct gpuacct_figures old = {
        .util_mean = 40, .util_peak = 60, .mem_peak_mib = 500, .energy_wh = 1.0, .idle = 0};
    gpuacct_init(&a, 0);
    gpuacct_seed(&a, &old, 100);
    struct gpuacct_reading r = rd(0, 200, 100, 200, -1, -1);
    gpuacct_add(&a, &r); /* counts for the 100 s after the seeded ones */
    gpuacct_figures(&a, 200, &f);
    assert_int_equal(f.util_peak, 100);
    assert_int_equal(f.mem_peak_mib, 500);
    assert_int_equal(f.util_mean, 70); /* (40*100 + 100*100) / 200 */
    assert_float_equal(f.energy_wh, 1.0, 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stretch),
        cmocka_unit_test(test_counter),
        cmocka_unit_test(test_reset_and_fallback),
        cmocka_unit_test(test_two_gpus_shared),
        cmocka_unit_test(test_unknown_and_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
