/* test_cudavis: CUDA_VISIBLE_DEVICES read as CUDA reads it (src/core/cudavis.c), one test
 * per rule: indices, full and prefix UUIDs, the first invalid entry ending the list
 * (unknown text, out of range, ambiguous or unknown UUID, empty entry, a repeat), the
 * empty value, MIG entries, and CUDA_DEVICE_ORDER on same and mixed models. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "cudavis.h"

static struct gpu_info gpus[8];

/* 8 GPUs like the daemon's built-in fixture: UUIDs sharing a long prefix. */
static struct gpu_set machine(void)
{
    for (int i = 0; i < 8; i++) {
        memset(&gpus[i], 0, sizeof(gpus[i]));
        gpus[i].index = i;
        snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "GPU-a0000000-0000-4000-8000-%012x",
                 0xb00 + i);
        snprintf(gpus[i].name, sizeof(gpus[i].name), "NVIDIA H100 80GB HBM3");
    }
    return (struct gpu_set){.gpus = gpus, .n_gpus = 8};
}

#define M(...) mask_of((int[]){__VA_ARGS__, -1})

static uint64_t mask_of(const int *idx)
{
    uint64_t m = 0;
    for (; *idx >= 0; idx++)
        m |= 1ULL << *idx;
    return m;
}

/* Parses spec on the 8-GPU machine with CUDA_DEVICE_ORDER=PCI_BUS_ID. */
static uint64_t parse(const char *spec, struct cudavis *v)
{
    struct gpu_set s = machine();
    cudavis_parse(spec, &s, "PCI_BUS_ID", v);
    return v->mask;
}

static void test_indices(void **state)
{
    (void)state;
    struct cudavis v;
    assert_int_equal(parse("1,3", &v), M(1, 3));
    assert_int_equal(v.n_used, 2);
    assert_string_equal(v.understood, "CUDA_VISIBLE_DEVICES=1,3: GPUs 1, 3");
    assert_null(v.warning);
    cudavis_free(&v);
    /* Blanks around entries are skipped; the order given is kept in the text. */
    assert_int_equal(parse(" 5 , 0", &v), M(0, 5));
    assert_string_equal(v.understood, "CUDA_VISIBLE_DEVICES= 5 , 0: GPUs 5, 0");
    cudavis_free(&v);
}

static void test_first_invalid_entry_ends_the_list(void **state)
{
    (void)state;
    struct cudavis v;
    assert_int_equal(parse("1,foo,3", &v), M(1));
    assert_int_equal(v.n_used, 1);
    assert_string_equal(v.understood, "CUDA_VISIBLE_DEVICES=1,foo,3: GPU 1 ('foo' is no GPU "
                                      "index or UUID: it and the entries after it are ignored, "
                                      "as CUDA does)");
    cudavis_free(&v);
    /* An index out of range. */
    assert_int_equal(parse("2,8,0", &v), M(2));
    assert_non_null(strstr(v.understood, "'8' is no GPU (there are 8)"));
    cudavis_free(&v);
    /* Not a whole number, negative. */
    assert_int_equal(parse("0,1x,2", &v), M(0));
    cudavis_free(&v);
    assert_int_equal(parse("-1,2", &v), 0);
    assert_non_null(strstr(v.understood, ": no GPUs ('-1' is no GPU index or UUID"));
    cudavis_free(&v);
    /* An empty entry, also a trailing comma. */
    assert_int_equal(parse("0,,2", &v), M(0));
    assert_non_null(strstr(v.understood, "(an empty entry: it and the entries after"));
    cudavis_free(&v);
    assert_int_equal(parse("4,", &v), M(4));
    cudavis_free(&v);
}

static void test_repeated_device_ends_the_list(void **state)
{
    (void)state;
    struct cudavis v;
    assert_int_equal(parse("2,2,3", &v), M(2));
    assert_non_null(strstr(v.understood, "'2' names GPU 2 a second time"));
    cudavis_free(&v);
    /* The same GPU by index and by UUID. */
    assert_int_equal(parse("1,GPU-a0000000-0000-4000-8000-000000000b01,4", &v), M(1));
    cudavis_free(&v);
    assert_int_equal(parse("MIG-x,MIG-x,1", &v), 0);
    assert_int_equal(v.n_mig, 1);
    cudavis_free(&v);
}

static void test_uuids(void **state)
{
    (void)state;
    struct cudavis v;
    /* Full, and a unique prefix (case does not matter). */
    assert_int_equal(parse("GPU-a0000000-0000-4000-8000-000000000b02", &v), M(2));
    assert_string_equal(v.understood,
                        "CUDA_VISIBLE_DEVICES=GPU-a0000000-0000-4000-8000-000000000b02: GPU 2");
    cudavis_free(&v);
    assert_int_equal(parse("gpu-A0000000-0000-4000-8000-000000000B05,GPU-a0000000-0000-4000-8000-"
                           "000000000b0",
                           &v),
                     M(5));
    /* A prefix shared by several GPUs names none: CUDA calls it invalid. */
    assert_non_null(strstr(v.understood, "matches 8 GPUs: it and the entries after"));
    cudavis_free(&v);
    assert_int_equal(parse("GPU-a0000000", &v), 0);
    assert_non_null(strstr(v.understood, ": no GPUs ('GPU-a0000000' matches 8 GPUs"));
    cudavis_free(&v);
    assert_int_equal(parse("3,GPU-ffff,1", &v), M(3));
    assert_non_null(strstr(v.understood, "'GPU-ffff' matches no GPU"));
    cudavis_free(&v);
    /* Without the GPU- prefix it is no UUID. */
    assert_int_equal(parse("a0000000-0000-4000-8000-000000000b02", &v), 0);
    cudavis_free(&v);
}

static void test_empty_value(void **state)
{
    (void)state;
    struct cudavis v;
    assert_int_equal(parse("", &v), 0);
    assert_int_equal(v.n_used, 0);
    assert_string_equal(v.understood,
                        "CUDA_VISIBLE_DEVICES=\"\": no GPUs (an empty value hides them all)");
    cudavis_free(&v);
}

static void test_mig_entries(void **state)
{
    (void)state;
    struct cudavis v;
    const char *mig = "MIG-4f1b1d5c-8ac6-5a4b-9c8e-2f5a6c0b1d2e";
    assert_int_equal(parse(mig, &v), 0);
    assert_int_equal(v.n_mig, 1);
    assert_string_equal(v.mig[0], mig);
    assert_non_null(strstr(v.understood, ": MIG instance MIG-4f1b1d5c"));
    assert_non_null(strstr(v.understood, "MIG instances are not yet whole GPUs"));
    cudavis_free(&v);
    /* Next to whole GPUs; an invalid entry still ends the list. */
    assert_int_equal(parse("0,MIG-a,MIG-b,bar,MIG-c", &v), M(0));
    assert_int_equal(v.n_mig, 2);
    assert_string_equal(v.mig[1], "MIG-b");
    assert_non_null(strstr(v.understood, "GPU 0; MIG instances MIG-a, MIG-b (MIG"));
    assert_non_null(strstr(v.understood, "'bar' is no GPU index or UUID"));
    cudavis_free(&v);
}

static void test_device_order(void **state)
{
    (void)state;
    struct gpu_set s = machine();
    struct cudavis v;
    /* Same model: CUDA's default order equals PCI order, nothing to say. */
    cudavis_parse("1", &s, NULL, &v);
    assert_int_equal(v.mask, M(1));
    assert_null(v.warning);
    cudavis_free(&v);
    /* Mixed models: index entries are read in PCI order, with a warning... */
    snprintf(gpus[6].name, sizeof(gpus[6].name), "Tesla T4");
    cudavis_parse("1,6", &s, NULL, &v);
    assert_int_equal(v.mask, M(1, 6));
    assert_non_null(v.warning);
    assert_non_null(strstr(v.warning, "CUDA_DEVICE_ORDER=PCI_BUS_ID"));
    cudavis_free(&v);
    cudavis_parse("1", &s, "FASTEST_FIRST", &v);
    assert_non_null(v.warning);
    cudavis_free(&v);
    /* ...but not with PCI_BUS_ID, nor when only UUIDs are given. */
    cudavis_parse("1,6", &s, "PCI_BUS_ID", &v);
    assert_null(v.warning);
    cudavis_free(&v);
    cudavis_parse("GPU-a0000000-0000-4000-8000-000000000b06", &s, NULL, &v);
    assert_int_equal(v.mask, M(6));
    assert_null(v.warning);
    cudavis_free(&v);
}

static void test_no_gpus_known(void **state)
{
    (void)state;
    struct gpu_set none = {0};
    struct cudavis v;
    cudavis_parse("0", &none, NULL, &v);
    assert_int_equal(v.mask, 0);
    assert_non_null(strstr(v.understood, "'0' is no GPU (there are 0)"));
    cudavis_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_indices),
        cmocka_unit_test(test_first_invalid_entry_ends_the_list),
        cmocka_unit_test(test_repeated_device_ends_the_list),
        cmocka_unit_test(test_uuids),
        cmocka_unit_test(test_empty_value),
        cmocka_unit_test(test_mig_entries),
        cmocka_unit_test(test_device_order),
        cmocka_unit_test(test_no_gpus_known),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
