/* test_loop: how the event loop ends (src/daemon/loop.c): loop_stop ends loop_run with
 * 0, loop_fail with -1 (a fatal error in a callback goes up to the loop's caller), and
 * a failure does not carry over into the next run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "loop.h"

static void stop_cb(void *arg)
{
    (*(int *)arg)++;
    loop_stop();
}

static void fail_cb(void *arg)
{
    (*(int *)arg)++;
    loop_fail("test: a fatal error (%d)", *(int *)arg);
}

static void test_stop_and_fail(void **state)
{
    (void)state;
    int calls = 0;
    assert_int_equal(loop_init(), 0);
    loop_add_timer(0, stop_cb, &calls);
    assert_int_equal(loop_run(), 0);
    loop_add_timer(0, fail_cb, &calls);
    loop_add_timer(60, stop_cb, &calls); /* not reached: the loop ended first */
    assert_int_equal(loop_run(), -1);
    assert_int_equal(calls, 2);
    loop_free();
    assert_int_equal(loop_init(), 0);
    loop_add_timer(0, stop_cb, &calls);
    assert_int_equal(loop_run(), 0);
    assert_int_equal(calls, 3);
    loop_free();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_and_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
