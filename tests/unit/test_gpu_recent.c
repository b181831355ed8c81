/* test_gpu_recent: the GPUs' last ten minutes behind GET /v1/gpus/samples
 * (src/daemon/gpu/gpu_recent.c): samples in order, the window trimming the old ones, the
 * ring growing and then giving its oldest way at its cap, unknown values as null. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "gpu/gpu_recent.h"
#include "gpuinfo.h"

static struct gpu_info gpus[2];
static struct gpu_set set = {.gpus = gpus, .n_gpus = 2};

static void fill(int util, int64_t mem, int power)
{
    for (int i = 0; i < 2; i++) {
        gpus[i].index = i;
        gpus[i].memory_total_mib = 1000;
        gpus[i].utilization_gpu = util + i;
        gpus[i].memory_used_mib = mem;
        gpus[i].power_w = power;
    }
}

static json_t *samples_of(json_t *o, size_t gpu)
{
    return json_object_get(json_array_get(json_object_get(o, "gpus"), gpu), "samples");
}

static void test_order_and_values(void **state)
{
    (void)state;
    struct gpu_recent r = {0};
    fill(10, 100, 50);
    gpu_recent_take(&r, &set, 1000, 1700000000);
    fill(20, -1, -1);
    gpu_recent_take(&r, &set, 1010, 1700000010);
    json_t *o = gpu_recent_json(&r, 1010);
    assert_int_equal(json_integer_value(json_object_get(o, "window_secs")), 600);
    json_t *g1 = json_array_get(json_object_get(o, "gpus"), 1);
    assert_int_equal(json_integer_value(json_object_get(g1, "index")), 1);
    assert_int_equal(json_integer_value(json_object_get(g1, "memory_total_mib")), 1000);
    json_t *s = samples_of(o, 1);
    assert_int_equal(json_array_size(s), 2);
    json_t *a = json_array_get(s, 0), *b = json_array_get(s, 1);
    assert_true(json_real_value(json_object_get(a, "time")) == 1700000000.0);
    assert_int_equal(json_integer_value(json_object_get(a, "utilization_gpu")), 11);
    assert_int_equal(json_integer_value(json_object_get(a, "memory_used_mib")), 100);
    assert_int_equal(json_integer_value(json_object_get(a, "power_w")), 50);
    assert_int_equal(json_integer_value(json_object_get(b, "utilization_gpu")), 21);
    assert_true(json_is_null(json_object_get(b, "memory_used_mib")));
    assert_true(json_is_null(json_object_get(b, "power_w")));
    json_decref(o);
    gpu_recent_free(&r);
}

static void test_window_and_cap(void **state)
{
    (void)state;
    struct gpu_recent r = {0};
    fill(1, 1, 1);
    for (int t = 0; t < 1000; t++) /* one a second: the last 601 stay */
        gpu_recent_take(&r, &set, t, t);
    json_t *o = gpu_recent_json(&r, 999);
    json_t *s = samples_of(o, 0);
    assert_int_equal(json_array_size(s), 601);
    assert_true(json_real_value(json_object_get(json_array_get(s, 0), "time")) == 399.0);
    json_decref(o);
    /* Read later: what fell out of the window since is not sent. */
    o = gpu_recent_json(&r, 1099);
    assert_int_equal(json_array_size(samples_of(o, 0)), 501);
    json_decref(o);
    /* Ten a second: the ring stops growing at its cap and drops its oldest. */
    for (int i = 0; i < 10000; i++)
        gpu_recent_take(&r, &set, 2000 + i / 10.0, 2000 + i / 10.0);
    assert_int_equal(r.rings[0].n, GPU_RECENT_CAP);
    assert_int_equal(r.rings[0].cap, GPU_RECENT_CAP);
    o = gpu_recent_json(&r, 2999.9);
    s = samples_of(o, 0);
    assert_int_equal(json_array_size(s), GPU_RECENT_CAP);
    double last = json_real_value(json_object_get(json_array_get(s, GPU_RECENT_CAP - 1), "time"));
    assert_true(last > 2999.8 && last < 3000);
    json_decref(o);
    gpu_recent_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_values),
        cmocka_unit_test(test_window_and_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
