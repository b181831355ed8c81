/* test_gpu_worker: gflowd's NVML thread (src/daemon/gpu/gpu_worker.c) against the simulator
 * (NVML_SIM_LIB, passed in by meson). One request at a time; an NVML that does not
 * initialise is reported and opened on a later request; a call that hangs keeps the
 * request in progress (the caller is not blocked) until it returns; the topology is
 * read only when the GPU set changes. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "gpu/gpu_worker.h"
#include "util.h"

static char tmpdir[] = "/tmp/gflow-test-worker-XXXXXX";
static char fixture_path[256];

#define GPU(i, peer, extra)                                                                        \
    "{\"uuid\": \"GPU-" #i "\", \"pci_bus_id\": \"00000000:0" #i ":00.0\","                        \
    " \"memory_total_mib\": 1000, \"nvlink\": [" peer "]" extra "}"

static const char *const two_linked =
    "{\"gpus\": [" GPU(1, "1", "") "," GPU(2, "0", "") "], \"fail\": {}}";
static const char *const two_unlinked = /* the same GPUs, their links gone */
    "{\"gpus\": [" GPU(1, "", ", \"memory_used_mib\": 7") "," GPU(2, "", "") "]}";
static const char *const three =
    "{\"gpus\": [" GPU(1, "", "") "," GPU(2, "", "") "," GPU(3, "", "") "]}";
static const char *const hanging =
    "{\"gpus\": [" GPU(1, "", ", \"hang\": {\"nvmlDeviceGetMemoryInfo\": 60}") "]}";
static const char *const second_hangs = "{\"driver_version\": \"1.0\", \"gpus\": [" GPU(
    1, "", "") "," GPU(2, "", ", \"hang\": {\"nvmlDeviceGetMemoryInfo\": 60}") "]}";
static const char *const two_v1 =
    "{\"driver_version\": \"1.0\", \"gpus\": [" GPU(1, "", "") "," GPU(2, "", "") "]}";
static const char *const two_v2 =
    "{\"driver_version\": \"2.0\", \"gpus\": [" GPU(1, "", "") "," GPU(2, "", "") "]}";
static const char *const not_loaded =
    "{\"gpus\": [" GPU(1, "", "") "], \"fail\": {\"nvmlInit\": 9}}";

static void put_fixture(const char *json)
{
    assert_int_equal(write_file_atomic(fixture_path, json, strlen(json), 0644), 0);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(fixture_path, sizeof(fixture_path), "%s/gpus.json", tmpdir);
    setenv("GFLOW_NVML_SIM", fixture_path, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(fixture_path);
    rmdir(tmpdir);
    return 0;
}

static struct gpu_worker *start(const char *lib)
{
    char *err = NULL;
    struct gpu_worker *w = gpu_worker_new(lib, 60, &err);
    if (!w)
        fail_msg("gpu_worker_new: %s", err);
    return w;
}

/* One request, answered within a few seconds. */
static void ask(struct gpu_worker *w, struct gpu_worker_result *r)
{
    assert_true(gpu_worker_request(w, 0));
    assert_true(gpu_worker_wait(w, 10));
    assert_true(gpu_worker_take(w, r));
    assert_false(gpu_worker_busy(w));
}

static const char *sim_lib(void)
{
    const char *p = getenv("NVML_SIM_LIB");
    if (!p)
        fail_msg("NVML_SIM_LIB is not set (run through meson test)");
    return p;
}

static void test_topology_read_only_when_the_set_changes(void **state)
{
    (void)state;
    put_fixture(two_linked);
    struct gpu_worker *w = start(sim_lib());
    struct gpu_worker_result r;
    ask(w, &r);
    assert_true(r.open && r.read && r.simulated && r.topology_read);
    assert_int_equal(r.set.n_gpus, 2);
    assert_non_null(r.set.link);
    assert_non_null(r.set.nvlinks); /* NVLink is kept apart from the PCIe level */
    assert_int_equal(r.set.nvlinks[1], 1);
    gpu_worker_result_free(&r);

    /* Same GPUs, links gone: the matrix as read before, the rest read again. */
    put_fixture(two_unlinked);
    ask(w, &r);
    assert_true(r.read);
    assert_false(r.topology_read);
    assert_int_equal(r.set.gpus[0].memory_used_mib, 7);
    assert_non_null(r.set.link);
    assert_non_null(r.set.nvlinks); /* NVLink is kept apart from the PCIe level */
    assert_int_equal(r.set.nvlinks[1], 1);
    gpu_worker_result_free(&r);

    /* A third GPU: read again. */
    put_fixture(three);
    ask(w, &r);
    assert_true(r.topology_read);
    assert_int_equal(r.set.n_gpus, 3);
    assert_int_equal(r.set.nvlinks[1], 0);
    gpu_worker_result_free(&r);
    gpu_worker_free(w);
}

static void test_a_hanging_call_does_not_block_the_caller(void **state)
{
    (void)state;
    put_fixture(two_linked);
    struct gpu_worker *w = start(sim_lib());
    struct gpu_worker_result r;
    ask(w, &r);
    gpu_worker_result_free(&r);

    put_fixture(hanging);
    assert_true(gpu_worker_request(w, 0));
    assert_false(gpu_worker_wait(w, 0.3)); /* returns: the call still hangs */
    assert_true(gpu_worker_busy(w));
    assert_false(gpu_worker_request(w, 0)); /* one read at a time */
    assert_false(gpu_worker_take(w, &r));

    put_fixture(two_linked); /* the hang ends */
    assert_true(gpu_worker_wait(w, 10));
    assert_true(gpu_worker_take(w, &r));
    assert_true(r.read);
    gpu_worker_result_free(&r);
    gpu_worker_free(w);
}

/* One GPU's call hangs: the read answers after the timeout with the other GPU read and
 * the hung one as last read, with its call; it is not asked again until it returns. */
static void test_one_hung_gpu_hides_only_itself(void **state)
{
    (void)state;
    put_fixture(two_v1);
    char *err = NULL;
    struct gpu_worker *w = gpu_worker_new(sim_lib(), 0.5, &err);
    assert_non_null(w);
    struct gpu_worker_result r;
    ask(w, &r);
    assert_true(r.read && r.set.n_gpus == 2);
    gpu_worker_result_free(&r);

    put_fixture(second_hangs);
    ask(w, &r);
    assert_true(r.read);
    assert_int_equal(r.hang[0].since, 0);
    assert_true(r.hang[1].since > 0);
    assert_string_equal(r.hang[1].fn, "nvmlDeviceGetMemoryInfo_v2");
    assert_string_equal(r.set.gpus[1].uuid, "GPU-2"); /* as last read */
    double since = r.hang[1].since;
    gpu_worker_result_free(&r);
    ask(w, &r); /* not asked again: the same call, from the same time */
    assert_true(r.hang[1].since == since);
    gpu_worker_result_free(&r);

    put_fixture(two_v1); /* the hang ends: the reader comes back and says so */
    for (int i = 0; i < 100 && !gpu_worker_poked(w); i++)
        usleep(20000);
    ask(w, &r);
    assert_int_equal(r.hang[1].since, 0);
    gpu_worker_result_free(&r);
    gpu_worker_free(w);
}

/* Another driver version: DriverChanged, NVML closed; reopened at the next request. */
static void test_driver_change_reopens(void **state)
{
    (void)state;
    put_fixture(two_v1);
    struct gpu_worker *w = start(sim_lib());
    struct gpu_worker_result r;
    ask(w, &r);
    assert_true(r.read);
    gpu_worker_result_free(&r);
    put_fixture(two_v2);
    ask(w, &r);
    assert_false(r.read || r.open);
    assert_string_equal(r.driver_changed, "DriverChanged: 1.0 -> 2.0");
    gpu_worker_result_free(&r);
    ask(w, &r);
    assert_true(r.read);
    assert_null(r.driver_changed);
    assert_string_equal(r.set.driver_version, "2.0");
    gpu_worker_result_free(&r);
    gpu_worker_free(w);
}

static void test_nvml_not_ready_then_ready(void **state)
{
    (void)state;
    put_fixture(not_loaded);
    struct gpu_worker *w = start(sim_lib());
    struct gpu_worker_result r;
    ask(w, &r);
    assert_false(r.open);
    assert_true(r.found); /* the library is there; the driver is not ready */
    assert_string_equal(r.error, "no GPUs: nvmlInit failed: Driver Not Loaded");
    gpu_worker_result_free(&r);

    put_fixture(two_linked);
    ask(w, &r);
    assert_true(r.open && r.read);
    assert_int_equal(r.set.n_gpus, 2);
    gpu_worker_result_free(&r);

    /* The driver goes away: reported, and NVML is opened afresh next time. */
    put_fixture("{\"gpus\": [], \"fail\": {\"nvmlDeviceGetCount\": 9}}");
    ask(w, &r);
    assert_false(r.open);
    assert_non_null(strstr(r.error, "nvmlDeviceGetCount failed"));
    gpu_worker_result_free(&r);
    put_fixture(three);
    ask(w, &r);
    assert_true(r.open && r.read && r.topology_read);
    assert_int_equal(r.set.n_gpus, 3);
    gpu_worker_result_free(&r);
    gpu_worker_free(w);
}

static void test_missing_library(void **state)
{
    (void)state;
    struct gpu_worker *w = start("/nonexistent/libnvidia-ml.so.1");
    struct gpu_worker_result r;
    ask(w, &r);
    assert_false(r.open);
    assert_false(r.found);
    assert_non_null(strstr(r.error, "not found"));
    gpu_worker_result_free(&r);
    gpu_worker_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topology_read_only_when_the_set_changes),
        cmocka_unit_test(test_a_hanging_call_does_not_block_the_caller),
        cmocka_unit_test(test_one_hung_gpu_hides_only_itself),
        cmocka_unit_test(test_driver_change_reopens),
        cmocka_unit_test(test_nvml_not_ready_then_ready),
        cmocka_unit_test(test_missing_library),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
