/* test_nvml: the NVML loader (src/daemon/gpu/nvml.c) against the simulator and its build
 * variants. Each test writes a fixture into a temp dir, points GFLOW_NVML_SIM at it and
 * loads one of the simulator libraries, whose paths meson passes in the environment:
 * NVML_SIM_LIB (all symbols), NVML_SIM_LEGACY_LIB (unversioned names only),
 * NVML_SIM_NOOPT_LIB (required symbols only), NVML_SIM_PROC32_LIB (32-byte process
 * entries). The assertions are about what the loader reports. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "gpu/nvml.h"
#include "gpu/nvml_acct.h"
#include "gpuinfo.h"
#include "nvml_types.h"
#include "util.h"

static char tmpdir[] = "/tmp/gflow-test-nvml-XXXXXX";
static char fixture_path[256];

/* Four GPUs: 0 and 1 NVLink peers on NUMA node 0, 2 on node 0 without NVLink, 3 on node
 * 1 without power reading; GPU 1 has its used memory given, the others the sum of their
 * processes; GPU 0 has 300 MiB reserved by the driver. */
static const char *const fixture4 =
    "{\"driver_version\": \"550.54.15\", \"gpus\": ["
    " {\"name\": \"NVIDIA A100-SXM4-80GB\", \"uuid\": \"GPU-aaaa0000\","
    "  \"pci_bus_id\": \"00000000:07:00.0\", \"memory_total_mib\": 81920,"
    "  \"memory_reserved_mib\": 300,"
    "  \"utilization_gpu\": 37, \"temperature_c\": 41, \"power_w\": 250, \"numa_node\": 0,"
    "  \"nvlink\": [1, 1], \"processes\": [{\"pid\": 4242, \"used_memory_mib\": 1000},"
    "  {\"pid\": 4243, \"used_memory_mib\": 24}]},"
    " {\"name\": \"NVIDIA A100-SXM4-80GB\", \"uuid\": \"GPU-bbbb1111\","
    "  \"pci_bus_id\": \"00000000:0F:00.0\", \"memory_total_mib\": 81920,"
    "  \"memory_used_mib\": 5000, \"utilization_gpu\": 0, \"temperature_c\": 30,"
    "  \"power_w\": 60, \"numa_node\": 0, \"nvlink\": [0, 0], \"processes\": []},"
    " {\"name\": \"NVIDIA A100-PCIE-40GB\", \"uuid\": \"GPU-cccc2222\","
    "  \"pci_bus_id\": \"00000000:47:00.0\", \"memory_total_mib\": 40960,"
    "  \"utilization_gpu\": 100, \"temperature_c\": 70, \"power_w\": 240, \"numa_node\": 0},"
    " {\"name\": \"NVIDIA A100-PCIE-40GB\", \"uuid\": \"GPU-dddd3333\","
    "  \"pci_bus_id\": \"00000001:B1:00.0\", \"memory_total_mib\": 40960,"
    "  \"utilization_gpu\": 5, \"temperature_c\": 35, \"numa_node\": 1,"
    "  \"processes\": [{\"pid\": 777, \"used_memory_mib\": null}]}]}";

/* Rewrites the fixture atomically, as a test that changes GPU state under a daemon does. */
static void put_fixture(const char *json)
{
    assert_int_equal(write_file_atomic(fixture_path, json, strlen(json), 0644), 0);
}

static const char *lib_path(const char *env)
{
    const char *p = getenv(env);
    if (!p)
        fail_msg("%s is not set (run through meson test)", env);
    return p;
}

static struct nvml *open_ok(const char *env)
{
    char *err = NULL;
    struct nvml *n = nvml_open(lib_path(env), &err);
    if (!n)
        fail_msg("nvml_open: %s", err);
    assert_null(err);
    return n;
}

static void read_ok(struct nvml *n, struct gpu_set *s)
{
    char *err = NULL;
    if (nvml_read(n, s, &err) != 0)
        fail_msg("nvml_read: %s", err);
    assert_null(err);
    assert_null(s->error);
}

static enum gpu_link link_of(const struct gpu_set *s, size_t i, size_t j)
{
    assert_non_null(s->link);
    return s->link[i * s->n_gpus + j];
}

/* The identity fields that every variant must read alike. */
static void check_identity(const struct gpu_set *s)
{
    assert_int_equal(s->n_gpus, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(s->gpus[i].index, (int)i);
        assert_false(s->gpus[i].lost);
    }
    assert_string_equal(s->gpus[0].uuid, "GPU-aaaa0000");
    assert_string_equal(s->gpus[3].uuid, "GPU-dddd3333");
    assert_string_equal(s->gpus[0].name, "NVIDIA A100-SXM4-80GB");
    assert_string_equal(s->gpus[2].name, "NVIDIA A100-PCIE-40GB");
    assert_string_equal(s->gpus[0].pci_bus_id, "00000000:07:00.0");
    assert_string_equal(s->gpus[3].pci_bus_id, "00000001:B1:00.0");
    assert_int_equal(s->gpus[0].memory_total_mib, 81920);
    assert_int_equal(s->gpus[2].memory_total_mib, 40960);
    assert_int_equal(s->gpus[1].memory_used_mib, 5000);
    assert_int_equal(s->gpus[2].memory_used_mib, 0);
}

/* The metrics, processes and topology of fixture4 with every optional symbol present. */
static void check_metrics(const struct gpu_set *s)
{
    assert_string_equal(s->driver_version, "550.54.15");
    assert_int_equal(s->gpus[0].utilization_gpu, 37);
    assert_int_equal(s->gpus[2].utilization_gpu, 100);
    assert_int_equal(s->gpus[1].utilization_gpu, 0);
    assert_int_equal(s->gpus[0].temperature_c, 41);
    assert_int_equal(s->gpus[0].power_w, 250);
    assert_int_equal(s->gpus[3].power_w, -1); /* NOT_SUPPORTED: unknown, not 0 */
    assert_int_equal(s->gpus[0].numa_node, 0);
    assert_int_equal(s->gpus[3].numa_node, 1);

    assert_int_equal(s->gpus[0].n_procs, 2);
    assert_int_equal(s->gpus[0].procs[0].pid, 4242);
    assert_int_equal(s->gpus[0].procs[0].used_mib, 1000);
    assert_int_equal(s->gpus[0].procs[1].pid, 4243);
    assert_int_equal(s->gpus[0].procs[1].used_mib, 24);
    assert_int_equal(s->gpus[1].n_procs, 0);
    assert_int_equal(s->gpus[2].n_procs, 0);
    assert_int_equal(s->gpus[3].n_procs, 1);
    assert_int_equal(s->gpus[3].procs[0].pid, 777);
    assert_int_equal(s->gpus[3].procs[0].used_mib, -1); /* ~0ULL: unknown */

    for (size_t i = 0; i < 4; i++)
        assert_int_equal(link_of(s, i, i), GPU_LINK_SELF);
    /* NVLink is kept apart from the PCIe level (issue 28: it used to overwrite it). */
    assert_int_equal(link_of(s, 0, 1), GPU_LINK_NODE);
    assert_int_equal(link_of(s, 1, 0), GPU_LINK_NODE);
    assert_non_null(s->nvlinks);
    assert_int_equal(s->nvlinks[0 * 4 + 1], 2);
    assert_int_equal(s->nvlinks[0 * 4 + 2], 0);
    assert_int_equal(link_of(s, 0, 2), GPU_LINK_NODE);
    assert_int_equal(link_of(s, 2, 1), GPU_LINK_NODE);
    assert_int_equal(link_of(s, 0, 3), GPU_LINK_SYSTEM);
    assert_int_equal(link_of(s, 3, 2), GPU_LINK_SYSTEM);
}

static void test_normal_read(void **state)
{
    put_fixture(fixture4);
    struct nvml *n = open_ok("NVML_SIM_LIB");
    assert_true(nvml_is_simulated(n));
    struct gpu_set s;
    read_ok(n, &s);
    assert_true(s.simulated);
    check_identity(&s);
    check_metrics(&s);
    /* _v2 memory, with our struct version accepted: the reservation is not "used". */
    assert_int_equal(s.gpus[0].memory_used_mib, 1024);
    gpu_set_free(&s);
    nvml_close(n);
}

static void test_legacy_symbols(void **state)
{
    put_fixture(fixture4);
    struct nvml *n = open_ok("NVML_SIM_LEGACY_LIB");
    struct gpu_set s;
    read_ok(n, &s);
    /* Bus ids rebuilt in the 8-digit-domain form from the legacy struct; 16-byte
     * process entries; NUMA from the memory affinity mask; NVLink from the legacy
     * remote-PCI call. */
    check_identity(&s);
    check_metrics(&s);
    /* The legacy memory call counts the driver's reservation as used. */
    assert_int_equal(s.gpus[0].memory_used_mib, 1324);
    gpu_set_free(&s);
    nvml_close(n);
}

static void test_optional_missing(void **state)
{
    put_fixture(fixture4);
    struct nvml *n = open_ok("NVML_SIM_NOOPT_LIB");
    struct gpu_set s;
    read_ok(n, &s);
    check_identity(&s);
    assert_string_equal(s.driver_version, "");
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(s.gpus[i].utilization_gpu, -1);
        assert_int_equal(s.gpus[i].temperature_c, -1);
        assert_int_equal(s.gpus[i].power_w, -1);
        assert_int_equal(s.gpus[i].numa_node, -1);
        assert_int_equal(s.gpus[i].n_procs, 0);
    }
    assert_null(s.link);
    gpu_set_free(&s);
    nvml_close(n);
}

static void test_init_failure(void **state)
{
    put_fixture("{\"gpus\": [], \"fail\": {\"nvmlInit\": 9}}");
    const char *libs[] = {"NVML_SIM_LIB", "NVML_SIM_LEGACY_LIB"};
    for (size_t i = 0; i < 2; i++) {
        char *err = NULL;
        struct nvml *n = nvml_open(lib_path(libs[i]), &err);
        assert_null(n);
        assert_non_null(err);
        assert_string_equal(err, "no GPUs: nvmlInit failed: Driver Not Loaded");
        free(err);
    }
}

static void test_count_failure(void **state)
{
    put_fixture("{\"gpus\": [], \"fail\": {\"nvmlDeviceGetCount\": 999}}");
    struct nvml *n = open_ok("NVML_SIM_LIB");
    struct gpu_set s;
    char *err = NULL;
    assert_int_equal(nvml_read(n, &s, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err, "no GPUs: nvmlDeviceGetCount failed: Unknown Error"));
    free(err);
    nvml_close(n);
}

static void test_proc32(void **state)
{
    /* One entry (the probe's smallest case) and three. */
    put_fixture("{\"gpus\": ["
                " {\"uuid\": \"GPU-0\", \"memory_total_mib\": 1000,"
                "  \"processes\": [{\"pid\": 31337, \"used_memory_mib\": 12}]},"
                " {\"uuid\": \"GPU-1\", \"memory_total_mib\": 1000,"
                "  \"processes\": [{\"pid\": 11, \"used_memory_mib\": 1},"
                "   {\"pid\": 22, \"used_memory_mib\": null},"
                "   {\"pid\": 33, \"used_memory_mib\": 3}]}]}");
    const char *libs[] = {"NVML_SIM_PROC32_LIB", "NVML_SIM_LIB"};
    for (size_t l = 0; l < 2; l++) {
        struct nvml *n = open_ok(libs[l]);
        struct gpu_set s;
        read_ok(n, &s);
        assert_int_equal(s.n_gpus, 2);
        assert_int_equal(s.gpus[0].n_procs, 1);
        assert_int_equal(s.gpus[0].procs[0].pid, 31337);
        assert_int_equal(s.gpus[0].procs[0].used_mib, 12);
        assert_int_equal(s.gpus[1].n_procs, 3);
        assert_int_equal(s.gpus[1].procs[0].pid, 11);
        assert_int_equal(s.gpus[1].procs[0].used_mib, 1);
        assert_int_equal(s.gpus[1].procs[1].pid, 22);
        assert_int_equal(s.gpus[1].procs[1].used_mib, -1);
        assert_int_equal(s.gpus[1].procs[2].pid, 33);
        assert_int_equal(s.gpus[1].procs[2].used_mib, 3);
        assert_int_equal(s.gpus[1].memory_used_mib, 4);
        gpu_set_free(&s);
        nvml_close(n);
    }
}

/* More processes than the loader's first buffer holds: INSUFFICIENT_SIZE, grow, retry. */
static void test_many_processes(void **state)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "{\"gpus\": [{\"uuid\": \"GPU-many\", \"memory_total_mib\": 100000,"
                     " \"processes\": [");
    for (int i = 0; i < 300; i++)
        strbuf_addf(&sb, "%s{\"pid\": %d, \"used_memory_mib\": %d}", i ? "," : "", 1000 + i, i);
    strbuf_adds(&sb, "]}]}");
    put_fixture(sb.buf);
    strbuf_free(&sb);

    const char *libs[] = {"NVML_SIM_LIB", "NVML_SIM_LEGACY_LIB", "NVML_SIM_PROC32_LIB"};
    for (size_t l = 0; l < 3; l++) {
        struct nvml *n = open_ok(libs[l]);
        struct gpu_set s;
        read_ok(n, &s);
        assert_int_equal(s.gpus[0].n_procs, 300);
        for (int i = 0; i < 300; i++) {
            assert_int_equal(s.gpus[0].procs[i].pid, 1000 + i);
            assert_int_equal(s.gpus[0].procs[i].used_mib, i);
        }
        gpu_set_free(&s);
        nvml_close(n);
    }
}

static void test_lost_gpu(void **state)
{
    put_fixture("{\"gpus\": ["
                " {\"uuid\": \"GPU-0\", \"memory_total_mib\": 1000, \"utilization_gpu\": 5},"
                " {\"uuid\": \"GPU-1\", \"memory_total_mib\": 1000, \"utilization_gpu\": 5,"
                "  \"fail\": {\"nvmlDeviceGetMemoryInfo\": 15}},"
                " {\"uuid\": \"GPU-2\", \"memory_total_mib\": 1000, \"utilization_gpu\": 5,"
                "  \"fail\": {\"nvmlDeviceGetHandleByIndex\": 15}}]}");
    struct nvml *n = open_ok("NVML_SIM_LIB");
    struct gpu_set s;
    read_ok(n, &s);
    assert_int_equal(s.n_gpus, 3);
    assert_false(s.gpus[0].lost);
    assert_int_equal(s.gpus[0].utilization_gpu, 5);
    assert_true(s.gpus[1].lost);
    assert_string_equal(s.gpus[1].unavailable, "NVML: GPU is lost (nvmlDeviceGetMemoryInfo_v2)");
    assert_string_equal(s.gpus[1].uuid, "GPU-1"); /* read before it failed */
    assert_int_equal(s.gpus[1].memory_used_mib, -1);
    assert_int_equal(s.gpus[1].utilization_gpu, -1);
    assert_true(s.gpus[2].lost);
    assert_string_equal(s.gpus[2].unavailable, "NVML: GPU is lost (nvmlDeviceGetHandleByIndex)");
    assert_int_equal(s.gpus[2].index, 2);
    assert_int_equal(link_of(&s, 0, 1), GPU_LINK_UNKNOWN);
    assert_int_equal(link_of(&s, 1, 1), GPU_LINK_SELF);
    gpu_set_free(&s);
    nvml_close(n);
}

/* Whatever keeps gflow from knowing a GPU's state makes it unavailable, with the NVML
 * error and the call: never a GPU that looks idle. */
static void test_unavailable_reasons(void **state)
{
    put_fixture("{\"gpus\": ["
                /* 0: a 70 GB process the caller may not see (MIG, not root) */
                " {\"uuid\": \"GPU-0\", \"memory_total_mib\": 81920,"
                "  \"processes\": [{\"pid\": 4242, \"used_memory_mib\": 70000}],"
                "  \"fail\": {\"nvmlDeviceGetComputeRunningProcesses\": 4}},"
                /* 1: no handle for us */
                " {\"uuid\": \"GPU-1\", \"memory_total_mib\": 81920,"
                "  \"fail\": {\"nvmlDeviceGetHandleByIndex\": 4}},"
                /* 2: no UUID */
                " {\"uuid\": \"GPU-2\", \"memory_total_mib\": 81920,"
                "  \"fail\": {\"nvmlDeviceGetUUID\": 999}},"
                /* 3: an empty UUID */
                " {\"uuid\": \"\", \"memory_total_mib\": 81920},"
                /* 4: no memory call works */
                " {\"uuid\": \"GPU-4\", \"memory_total_mib\": 81920,"
                "  \"fail\": {\"nvmlDeviceGetMemoryInfo\": 999}},"
                /* 5: _v2 NOT_SUPPORTED: the legacy call answers, reservation as used */
                " {\"uuid\": \"GPU-5\", \"memory_total_mib\": 81920,"
                "  \"memory_reserved_mib\": 500, \"memory_used_mib\": 1000,"
                "  \"fail\": {\"nvmlDeviceGetMemoryInfo_v2\": 3}},"
                /* 6: a memory total of 0 */
                " {\"uuid\": \"GPU-6\", \"memory_total_mib\": 0},"
                /* 7: graphics list NOT_SUPPORTED (fine), MPS list in error */
                " {\"uuid\": \"GPU-7\", \"memory_total_mib\": 81920,"
                "  \"fail\": {\"nvmlDeviceGetGraphicsRunningProcesses\": 3,"
                "           \"nvmlDeviceGetMPSComputeRunningProcesses\": 999}},"
                /* 8: graphics NOT_SUPPORTED, nothing else wrong */
                " {\"uuid\": \"GPU-8\", \"memory_total_mib\": 81920,"
                "  \"memory_reserved_mib\": 300,"
                "  \"fail\": {\"nvmlDeviceGetGraphicsRunningProcesses\": 3}}]}");
    const char *libs[] = {"NVML_SIM_LIB", "NVML_SIM_LEGACY_LIB"};
    for (size_t l = 0; l < 2; l++) {
        bool legacy = l == 1;
        struct nvml *n = open_ok(libs[l]);
        struct gpu_set s;
        read_ok(n, &s);
        assert_int_equal(s.n_gpus, 9);
        assert_string_equal(s.gpus[0].unavailable, "NVML: Insufficient Permissions "
                                                   "(nvmlDeviceGetComputeRunningProcesses)");
        assert_false(s.gpus[0].lost);
        assert_false(gpu_info_usable(&s.gpus[0]));
        assert_string_equal(s.gpus[1].unavailable,
                            "NVML: Insufficient Permissions (nvmlDeviceGetHandleByIndex)");
        assert_false(s.gpus[1].lost);
        assert_int_equal(s.gpus[1].index, 1);
        assert_string_equal(s.gpus[2].unavailable, "NVML: Unknown Error (nvmlDeviceGetUUID)");
        assert_string_equal(s.gpus[2].uuid, "");
        assert_int_equal(s.gpus[2].memory_total_mib, 81920); /* the rest is read */
        assert_string_equal(s.gpus[3].unavailable, "NVML: empty UUID (nvmlDeviceGetUUID)");
        assert_string_equal(s.gpus[4].unavailable, "NVML: Unknown Error (nvmlDeviceGetMemoryInfo)");
        assert_int_equal(s.gpus[4].memory_used_mib, -1);
        assert_int_equal(s.gpus[4].memory_free_mib, -1);
        assert_string_equal(s.gpus[5].unavailable, "");
        assert_int_equal(s.gpus[5].memory_total_mib, 81920);
        assert_int_equal(s.gpus[5].memory_used_mib, 1500);
        assert_int_equal(s.gpus[5].memory_free_mib, 81920 - 1500);
        assert_string_equal(s.gpus[6].unavailable,
                            legacy ? "NVML: total memory is 0 (nvmlDeviceGetMemoryInfo)"
                                   : "NVML: total memory is 0 (nvmlDeviceGetMemoryInfo_v2)");
        assert_string_equal(s.gpus[7].unavailable,
                            "NVML: Unknown Error (nvmlDeviceGetMPSComputeRunningProcesses)");
        assert_string_equal(s.gpus[8].unavailable, "");
        assert_true(gpu_info_usable(&s.gpus[8]));
        /* NVML's free: the _v2 call leaves the reservation out of both used and free. */
        assert_int_equal(s.gpus[8].memory_used_mib, legacy ? 300 : 0);
        assert_int_equal(s.gpus[8].memory_free_mib, 81920 - 300);
        gpu_set_free(&s);
        nvml_close(n);
    }
}

/* The graphics and MPS lists count like the compute one, one entry per pid; a library
 * without them (the required symbols only) reads the compute list alone. */
static void test_graphics_and_mps_processes(void **state)
{
    put_fixture("{\"gpus\": [{\"uuid\": \"GPU-0\", \"memory_total_mib\": 81920,"
                " \"processes\": [{\"pid\": 10, \"used_memory_mib\": 100}],"
                " \"graphics_processes\": [{\"pid\": 20, \"used_memory_mib\": 200},"
                "  {\"pid\": 10, \"used_memory_mib\": 150}],"
                " \"mps_processes\": [{\"pid\": 30, \"used_memory_mib\": null}]}]}");
    const char *libs[] = {"NVML_SIM_LIB", "NVML_SIM_LEGACY_LIB", "NVML_SIM_PROC32_LIB"};
    for (size_t l = 0; l < 3; l++) {
        struct nvml *n = open_ok(libs[l]);
        struct gpu_set s;
        read_ok(n, &s);
        const struct gpu_info *g = &s.gpus[0];
        assert_string_equal(g->unavailable, "");
        assert_int_equal(g->n_procs, 3);
        assert_int_equal(g->procs[0].pid, 10);
        assert_int_equal(g->procs[0].used_mib, 150);
        assert_int_equal(g->procs[1].pid, 20);
        assert_int_equal(g->procs[1].used_mib, 200);
        assert_int_equal(g->procs[2].pid, 30);
        assert_int_equal(g->procs[2].used_mib, -1);
        assert_int_equal(g->memory_used_mib, 300); /* pid 10 counted once, as listed first */
        gpu_set_free(&s);
        nvml_close(n);
    }
}

/* A held GPU's accounting readings (nvml_acct.c): the energy counter (the fixture's, or
 * one rising at its power), each process's SM utilisation; unknown without the calls
 * (the build with only the required symbols) or when NVML does not support them. */
static void test_account_readings(void **state)
{
    put_fixture("{\"gpus\": [{\"uuid\": \"GPU-0\", \"memory_total_mib\": 1000,"
                " \"energy_mj\": 123456789,"
                " \"processes\": [{\"pid\": 10, \"used_memory_mib\": 100, \"sm_util\": 42},"
                "  {\"pid\": 11, \"used_memory_mib\": 100}]},"
                " {\"uuid\": \"GPU-1\", \"memory_total_mib\": 1000, \"power_w\": 250},"
                " {\"uuid\": \"GPU-2\", \"memory_total_mib\": 1000, \"power_w\": 250,"
                "  \"fail\": {\"nvmlDeviceGetTotalEnergyConsumption\": 3}}]}");
    struct nvml *n = open_ok("NVML_SIM_LIB");
    struct gpu_set s;
    char *err = NULL;
    assert_int_equal(nvml_read_system(n, &s, &err), 0);
    struct gpu_info g[3];
    for (unsigned i = 0; i < 3; i++) {
        memset(&g[i], 0, sizeof(g[i]));
        struct gpu_mig *migs;
        size_t k;
        nvml_read_device(n, i, &g[i], &migs, &k);
        free(migs);
        unsigned long long seen = 0;
        nvml_read_account(n, i, &g[i], &seen);
        assert_true(g[i].accounted);
    }
    assert_true(g[0].energy_known);
    assert_int_equal(g[0].energy_mj, 123456789);
    assert_int_equal(g[0].n_procs, 2);
    assert_true(g[0].procs[0].sm_util_known);
    assert_int_equal(g[0].procs[0].sm_util, 42);
    assert_false(g[0].procs[1].sm_util_known);
    /* Rising at 250 W from its first reading. */
    assert_true(g[1].energy_known);
    int64_t first = g[1].energy_mj;
    usleep(100 * 1000);
    unsigned long long seen = 0;
    nvml_read_account(n, 1, &g[1], &seen);
    assert_true(g[1].energy_mj - first >= 25000 && g[1].energy_mj - first < 250000);
    assert_false(g[2].energy_known);
    for (unsigned i = 0; i < 3; i++)
        free(g[i].procs);
    gpu_set_free(&s);
    nvml_close(n);

    n = open_ok("NVML_SIM_NOOPT_LIB");
    assert_int_equal(nvml_read_system(n, &s, &err), 0);
    struct gpu_info h;
    memset(&h, 0, sizeof(h));
    struct gpu_mig *migs;
    size_t k;
    nvml_read_device(n, 0, &h, &migs, &k);
    free(migs);
    nvml_read_account(n, 0, &h, &seen);
    assert_false(h.energy_known);
    assert_false(h.procs && h.procs[0].sm_util_known);
    free(h.procs);
    gpu_set_free(&s);
    nvml_close(n);
}

/* The /dev/nvidia minor comes from NVML: the index by default, what the fixture says,
 * unknown (-1) when NVML cannot tell or lacks the call. */
static void test_minor_number(void **state)
{
    put_fixture("{\"gpus\": [{\"uuid\": \"GPU-0\", \"memory_total_mib\": 1000},"
                " {\"uuid\": \"GPU-1\", \"memory_total_mib\": 1000, \"minor_number\": 7},"
                " {\"uuid\": \"GPU-2\", \"memory_total_mib\": 1000, \"minor_number\": null}]}");
    struct nvml *n = open_ok("NVML_SIM_LIB");
    struct gpu_set s;
    read_ok(n, &s);
    assert_int_equal(s.gpus[0].minor, 0);
    assert_int_equal(s.gpus[1].minor, 7);
    assert_int_equal(s.gpus[2].minor, -1);
    assert_true(gpu_info_usable(&s.gpus[2])); /* only device isolation needs it */
    gpu_set_free(&s);
    nvml_close(n);
    n = open_ok("NVML_SIM_NOOPT_LIB");
    read_ok(n, &s);
    assert_int_equal(s.gpus[1].minor, -1);
    gpu_set_free(&s);
    nvml_close(n);
}

static int nvlinks_of(const struct gpu_set *s, size_t i, size_t j)
{
    assert_non_null(s->nvlinks);
    return s->nvlinks[i * s->n_gpus + j];
}

/* NVSwitch systems: every link goes to a switch; GPUs whose pair is P2P-NVLink OK are
 * joined by their switch links (an HGX H100 is all pairs NV18). */
static void test_nvswitch_topology(void **state)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "{\"gpus\": [");
    for (int i = 0; i < 4; i++)
        strbuf_addf(&sb,
                    "%s{\"uuid\": \"GPU-%d\", \"memory_total_mib\": 81559,"
                    " \"pci_bus_id\": \"00000000:%02X:00.0\", \"numa_node\": %d,"
                    " \"nvswitch_links\": %d}",
                    i ? "," : "", i, 0x18 + i * 0x20, i / 2, i == 3 ? 0 : 18);
    strbuf_adds(&sb, "]}");
    put_fixture(sb.buf);
    strbuf_free(&sb);
    struct nvml *n = open_ok("NVML_SIM_LIB");
    struct gpu_set s;
    read_ok(n, &s);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 3; j++) {
            if (i == j)
                continue;
            /* The PCIe level stays: NODE on one socket, SYS across (issue 28). */
            assert_int_equal(link_of(&s, i, j), i / 2 == j / 2 ? GPU_LINK_NODE : GPU_LINK_SYSTEM);
            assert_int_equal(nvlinks_of(&s, i, j), 18);
        }
    /* GPU 3 has no NVLink: PCIe only. */
    assert_int_equal(link_of(&s, 0, 3), GPU_LINK_SYSTEM);
    assert_int_equal(link_of(&s, 2, 3), GPU_LINK_NODE);
    assert_int_equal(nvlinks_of(&s, 0, 3), 0);
    gpu_set_free(&s);
    nvml_close(n);

    /* P2P over NVLink refused (e.g. a fabric manager not running): no NV. */
    put_fixture("{\"gpus\": [{\"uuid\": \"GPU-0\", \"memory_total_mib\": 1000,"
                " \"nvswitch_links\": 18}, {\"uuid\": \"GPU-1\", \"memory_total_mib\": 1000,"
                " \"nvswitch_links\": 18}], \"fail\": {\"nvmlDeviceGetP2PStatus\": 3}}");
    n = open_ok("NVML_SIM_LIB");
    read_ok(n, &s);
    assert_int_equal(link_of(&s, 0, 1), GPU_LINK_NODE);
    assert_int_equal(nvlinks_of(&s, 0, 1), 0);
    gpu_set_free(&s);
    nvml_close(n);
}

/* Direct links are counted, and a link number that answers INVALID_ARGUMENT does not end
 * the scan. */
static void test_nvlink_counts_and_gaps(void **state)
{
    put_fixture("{\"gpus\": ["
                " {\"uuid\": \"GPU-0\", \"memory_total_mib\": 1000, \"nvlink\": [1, 1, 2]},"
                " {\"uuid\": \"GPU-1\", \"memory_total_mib\": 1000, \"nvlink\": [0, 0]},"
                " {\"uuid\": \"GPU-2\", \"memory_total_mib\": 1000, \"nvlink\": [0]},"
                " {\"uuid\": \"GPU-3\", \"memory_total_mib\": 1000, \"nvlink\": [null, 4]},"
                " {\"uuid\": \"GPU-4\", \"memory_total_mib\": 1000, \"nvlink\": [null, 3]}]}");
    const char *libs[] = {"NVML_SIM_LIB", "NVML_SIM_LEGACY_LIB"};
    for (size_t l = 0; l < 2; l++) {
        struct nvml *n = open_ok(libs[l]);
        struct gpu_set s;
        read_ok(n, &s);
        assert_int_equal(nvlinks_of(&s, 0, 1), 2);
        assert_int_equal(nvlinks_of(&s, 1, 0), 2);
        assert_int_equal(nvlinks_of(&s, 0, 2), 1);
        assert_int_equal(nvlinks_of(&s, 1, 2), 0);
        assert_int_equal(link_of(&s, 3, 4), GPU_LINK_NODE);
        assert_int_equal(nvlinks_of(&s, 3, 4), 1);
        assert_int_equal(nvlinks_of(&s, 4, 3), 1);
        gpu_set_free(&s);
        nvml_close(n);
    }
}

/* The simulator re-reads its fixture on each call: a rewrite shows in the next read. */
static void test_fixture_change(void **state)
{
    put_fixture("{\"gpus\": [{\"uuid\": \"GPU-0\", \"memory_total_mib\": 1000,"
                " \"processes\": []}]}");
    struct nvml *n = open_ok("NVML_SIM_LIB");
    struct gpu_set s;
    read_ok(n, &s);
    assert_int_equal(s.n_gpus, 1);
    assert_int_equal(s.gpus[0].n_procs, 0);
    assert_int_equal(s.gpus[0].memory_used_mib, 0);
    gpu_set_free(&s);

    put_fixture("{\"gpus\": [{\"uuid\": \"GPU-0\", \"memory_total_mib\": 1000,"
                " \"processes\": [{\"pid\": 99, \"used_memory_mib\": 600}]},"
                " {\"uuid\": \"GPU-1\", \"memory_total_mib\": 2000}]}");
    read_ok(n, &s);
    assert_int_equal(s.n_gpus, 2);
    assert_int_equal(s.gpus[0].n_procs, 1);
    assert_int_equal(s.gpus[0].procs[0].pid, 99);
    assert_int_equal(s.gpus[0].memory_used_mib, 600);
    assert_int_equal(s.gpus[1].memory_total_mib, 2000);
    gpu_set_free(&s);
    nvml_close(n);
}

static void test_missing_library(void **state)
{
    char *err = NULL;
    assert_null(nvml_open("/nonexistent/libnvidia-ml.so.1", &err));
    assert_string_equal(err,
                        "no GPUs: /nonexistent/libnvidia-ml.so.1 not found (no NVIDIA driver?)");
    free(err);

    /* GFLOW_NVML_LIBRARY is used when the caller names none. */
    err = NULL;
    assert_int_equal(setenv("GFLOW_NVML_LIBRARY", "libgflow-no-such-nvml.so.1", 1), 0);
    assert_null(nvml_open(NULL, &err));
    assert_string_equal(err, "no GPUs: libgflow-no-such-nvml.so.1 not found (no NVIDIA driver?)");
    free(err);

    put_fixture(fixture4);
    assert_int_equal(setenv("GFLOW_NVML_LIBRARY", lib_path("NVML_SIM_LIB"), 1), 0);
    struct nvml *n = nvml_open(NULL, &err);
    assert_non_null(n);
    assert_true(nvml_is_simulated(n));
    nvml_close(n);
    unsetenv("GFLOW_NVML_LIBRARY");

    /* A loadable library that is not NVML. */
    err = NULL;
    assert_null(nvml_open("libjansson.so.4", &err));
    assert_non_null(strstr(err, "lacks nvmlInit"));
    free(err);
}

static int setup(void **state)
{
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(fixture_path, sizeof(fixture_path), "%s/gpus.json", tmpdir);
    return setenv("GFLOW_NVML_SIM", fixture_path, 1);
}

static int teardown(void **state)
{
    unlink(fixture_path);
    return rmdir(tmpdir);
}

/* MIG: GPU 0 in MIG mode with two 1g.18gb instances and one 3g.71gb whose process the
 * loader reads with the instance; GPU 1 in MIG mode without instances; GPU 2 without MIG
 * support. The legacy library (pre-r450) has no MIG calls: every GPU is a plain one. */
static const char *const fixture_mig =
    "{\"gpus\": ["
    " {\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-m0\", \"memory_total_mib\": 81559,"
    "  \"mig_mode\": 1, \"mig_instances\": ["
    "  {\"profile\": \"1g.18gb\", \"uuid\": \"MIG-a\", \"memory_total_mib\": 16384, \"gi_id\": 9,"
    "   \"ci_id\": 0},"
    "  {\"profile\": \"1g.18gb\", \"memory_total_mib\": 16384},"
    "  {\"profile\": \"3g.71gb\", \"uuid\": \"MIG-c\", \"memory_total_mib\": 71000,"
    "   \"processes\": [{\"pid\": 4242, \"used_memory_mib\": 700}]}]},"
    " {\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-m1\", \"memory_total_mib\": 81559,"
    "  \"mig_mode\": 1, \"mig_instances\": []},"
    " {\"name\": \"NVIDIA L4\", \"uuid\": \"GPU-p2\", \"memory_total_mib\": 23034}]}";

static void test_mig_read(void **state)
{
    (void)state;
    put_fixture(fixture_mig);
    struct nvml *n = open_ok("NVML_SIM_LIB");
    struct gpu_set s;
    read_ok(n, &s);
    assert_int_equal(s.n_gpus, 3);
    assert_true(s.gpus[0].mig_enabled);
    assert_true(s.gpus[1].mig_enabled);
    assert_false(s.gpus[2].mig_enabled);
    assert_int_equal(s.n_migs, 3);
    assert_int_equal(s.migs[0].parent, 0);
    assert_string_equal(s.migs[0].uuid, "MIG-a");
    assert_string_equal(s.migs[0].name, "NVIDIA H100 80GB HBM3 MIG 1g.18gb");
    assert_string_equal(s.migs[0].profile, "1g.18gb");
    assert_int_equal(s.migs[0].gi_id, 9);
    assert_int_equal(s.migs[0].memory_total_mib, 16384);
    assert_int_equal(s.migs[0].memory_used_mib, 0);
    assert_true(str_starts_with(s.migs[1].uuid, "MIG-")); /* the simulator's default */
    assert_string_equal(s.migs[2].profile, "3g.71gb");
    assert_int_equal(s.migs[2].n_procs, 1);
    assert_int_equal(s.migs[2].procs[0].pid, 4242);
    assert_int_equal(s.migs[2].procs[0].used_mib, 700);
    assert_int_equal(s.migs[2].memory_used_mib, 700);
    gpu_set_free(&s);
    nvml_close(n);

    /* Without root the driver refuses the MIG GPU's own process list: the GPU is
     * unavailable for whole-GPU use, its instances are read all the same; an instance
     * whose process list is refused is unavailable on its own. */
    json_t *fx = json_loads(fixture_mig, 0, NULL);
    json_t *g0 = json_array_get(json_object_get(fx, "gpus"), 0);
    json_object_set_new(g0, "fail", json_pack("{s:i}", "nvmlDeviceGetComputeRunningProcesses", 4));
    json_object_set_new(json_array_get(json_object_get(g0, "mig_instances"), 1), "fail",
                        json_pack("{s:i}", "nvmlDeviceGetComputeRunningProcesses", 4));
    char *text = json_dumps(fx, 0);
    put_fixture(text);
    free(text);
    json_decref(fx);
    n = open_ok("NVML_SIM_LIB");
    read_ok(n, &s);
    assert_true(s.gpus[0].unavailable[0] != 0);
    assert_true(s.gpus[0].mig_enabled);
    assert_int_equal(s.n_migs, 3);
    assert_string_equal(s.migs[0].unavailable, "");
    assert_non_null(strstr(s.migs[1].unavailable, "Insufficient Permissions"));
    assert_string_equal(s.migs[2].unavailable, "");
    assert_int_equal(s.migs[2].n_procs, 1);
    gpu_set_free(&s);
    nvml_close(n);

    put_fixture(fixture_mig);
    n = open_ok("NVML_SIM_LEGACY_LIB");
    read_ok(n, &s);
    assert_int_equal(s.n_gpus, 3);
    assert_false(s.gpus[0].mig_enabled);
    assert_int_equal(s.n_migs, 0);
    gpu_set_free(&s);
    nvml_close(n);
}

/* The simulator's MIG calls themselves, as a program other than gflow would use them:
 * handles by index (NOT_FOUND past the instances), the way back to the parent, which
 * handle is which, the ids, and the instance answering the per-device calls. */
typedef nvmlReturn_t (*sim_mode_fn)(nvmlDevice_t, unsigned int *, unsigned int *);
typedef nvmlReturn_t (*sim_uint_fn)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*sim_by_index_fn)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*sim_parent_fn)(nvmlDevice_t, nvmlDevice_t *);
typedef nvmlReturn_t (*sim_handle_fn)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*sim_str_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*sim_pci_fn)(nvmlDevice_t, nvmlPciInfo_t *);
typedef nvmlReturn_t (*sim_init_fn)(void);
#define SIM_FN(type, lib, name) ((type)(uintptr_t)dlsym(lib, name))

static void test_sim_mig_calls(void **state)
{
    (void)state;
    put_fixture(fixture_mig);
    void *lib = dlopen(lib_path("NVML_SIM_LIB"), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    sim_mode_fn mode = SIM_FN(sim_mode_fn, lib, "nvmlDeviceGetMigMode");
    sim_uint_fn max = SIM_FN(sim_uint_fn, lib, "nvmlDeviceGetMaxMigDeviceCount");
    sim_by_index_fn by_index = SIM_FN(sim_by_index_fn, lib, "nvmlDeviceGetMigDeviceHandleByIndex");
    sim_parent_fn parent =
        SIM_FN(sim_parent_fn, lib, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    sim_uint_fn is_mig = SIM_FN(sim_uint_fn, lib, "nvmlDeviceIsMigDeviceHandle");
    sim_uint_fn gi = SIM_FN(sim_uint_fn, lib, "nvmlDeviceGetGpuInstanceId");
    sim_uint_fn ci = SIM_FN(sim_uint_fn, lib, "nvmlDeviceGetComputeInstanceId");
    sim_handle_fn handle = SIM_FN(sim_handle_fn, lib, "nvmlDeviceGetHandleByIndex_v2");
    sim_str_fn uuid = SIM_FN(sim_str_fn, lib, "nvmlDeviceGetUUID");
    sim_pci_fn pci = SIM_FN(sim_pci_fn, lib, "nvmlDeviceGetPciInfo_v3");
    sim_init_fn init = SIM_FN(sim_init_fn, lib, "nvmlInit_v2");
    sim_init_fn shutdown = SIM_FN(sim_init_fn, lib, "nvmlShutdown");
    assert_true(mode && max && by_index && parent && is_mig && gi && ci && handle && uuid && pci);
    assert_int_equal(init(), NVML_SUCCESS);

    nvmlDevice_t g0, g1, g2, m0, m2, back;
    assert_int_equal(handle(0, &g0), NVML_SUCCESS);
    assert_int_equal(handle(1, &g1), NVML_SUCCESS);
    assert_int_equal(handle(2, &g2), NVML_SUCCESS);
    unsigned int cur = 9, pending = 9, v = 0;
    assert_int_equal(mode(g0, &cur, &pending), NVML_SUCCESS);
    assert_int_equal(cur, NVML_DEVICE_MIG_ENABLE);
    assert_int_equal(pending, NVML_DEVICE_MIG_ENABLE);
    assert_int_equal(mode(g2, &cur, &pending), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(max(g0, &v), NVML_SUCCESS);
    assert_int_equal(v, 7);
    assert_int_equal(by_index(g0, 0, &m0), NVML_SUCCESS);
    assert_int_equal(by_index(g0, 2, &m2), NVML_SUCCESS);
    assert_int_equal(by_index(g0, 3, &back), NVML_ERROR_NOT_FOUND);
    assert_int_equal(by_index(g1, 0, &back), NVML_ERROR_NOT_FOUND);
    assert_int_equal(by_index(m0, 0, &back), NVML_ERROR_INVALID_ARGUMENT);
    assert_true(m0 != g0 && m0 != g1 && m0 != g2 && m0 != m2);
    assert_int_equal(is_mig(m0, &v), NVML_SUCCESS);
    assert_int_equal(v, 1);
    assert_int_equal(is_mig(g0, &v), NVML_SUCCESS);
    assert_int_equal(v, 0);
    assert_int_equal(parent(m2, &back), NVML_SUCCESS);
    assert_ptr_equal(back, g0);
    assert_int_equal(parent(g0, &back), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(gi(m0, &v), NVML_SUCCESS);
    assert_int_equal(v, 9);
    assert_int_equal(gi(m2, &v), NVML_SUCCESS);
    assert_int_equal(v, 2); /* its position, by default */
    assert_int_equal(ci(m2, &v), NVML_SUCCESS);
    assert_int_equal(v, 0);
    assert_int_equal(gi(g0, &v), NVML_ERROR_NOT_SUPPORTED);
    char buf[96];
    assert_int_equal(uuid(m2, buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "MIG-c");
    nvmlPciInfo_t p;
    assert_int_equal(pci(m0, &p), NVML_ERROR_INVALID_ARGUMENT);
    /* The instance is gone once the fixture says so: the handle is stale. */
    put_fixture("{\"gpus\": [{\"mig_mode\": 1, \"mig_instances\": []}]}");
    assert_int_equal(uuid(m0, buf, sizeof(buf)), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(shutdown(), NVML_SUCCESS);
    dlclose(lib);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normal_read),
        cmocka_unit_test(test_legacy_symbols),
        cmocka_unit_test(test_optional_missing),
        cmocka_unit_test(test_init_failure),
        cmocka_unit_test(test_count_failure),
        cmocka_unit_test(test_proc32),
        cmocka_unit_test(test_many_processes),
        cmocka_unit_test(test_lost_gpu),
        cmocka_unit_test(test_fixture_change),
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_unavailable_reasons),
        cmocka_unit_test(test_graphics_and_mps_processes),
        cmocka_unit_test(test_account_readings),
        cmocka_unit_test(test_minor_number),
        cmocka_unit_test(test_nvswitch_topology),
        cmocka_unit_test(test_nvlink_counts_and_gaps),
        cmocka_unit_test(test_mig_read),
        cmocka_unit_test(test_sim_mig_calls),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
