/* test_shim_alloc: the musl shim's malloc (src/shim/alloc.c), built here under other
 * names (meson.build) so that this test and cmocka keep glibc's: blocks keep malloc's
 * alignment, a freed block is reused for its size class, calloc zeroes a reused block,
 * realloc keeps the content across classes and into a mapping of its own, and sizes that
 * cannot be had fail with ENOMEM. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

void *alloc_malloc(size_t n);
void alloc_free(void *p);
void *alloc_calloc(size_t count, size_t size);
void *alloc_realloc(void *p, size_t n);

static void test_alignment_and_sizes(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 15, 16, 17, 100, 4096, 65535, 65536, 65537, 1 << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
        unsigned char *p = alloc_malloc(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 0x5a, sizes[i]); /* all of it is ours to write */
        if (sizes[i])
            assert_int_equal(p[sizes[i] - 1], 0x5a);
        alloc_free(p);
    }
    alloc_free(NULL);
}

static void test_freed_block_is_reused_for_its_class(void **state)
{
    (void)state;
    void *p = alloc_malloc(100);
    alloc_free(p);
    void *q = alloc_malloc(120); /* the same class: 128 bytes */
    assert_ptr_equal(q, p);
    void *r = alloc_malloc(100); /* q is in use */
    assert_ptr_not_equal(r, q);
    alloc_free(r);
    void *big = alloc_malloc(1000); /* another class: not the freed small one */
    assert_ptr_not_equal(big, r);
    assert_ptr_equal(alloc_malloc(100), r);
    alloc_free(big);
    alloc_free(q);
}

static void test_calloc_zeroes_a_reused_block(void **state)
{
    (void)state;
    unsigned char *p = alloc_malloc(64);
    memset(p, 0xab, 64);
    alloc_free(p);
    unsigned char *q = alloc_calloc(8, 8);
    assert_ptr_equal(q, p);
    for (size_t i = 0; i < 64; i++)
        assert_int_equal(q[i], 0);
    alloc_free(q);
    errno = 0;
    assert_null(alloc_calloc(SIZE_MAX / 2, 3));
    assert_int_equal(errno, ENOMEM);
}

static void test_realloc_keeps_the_content(void **state)
{
    (void)state;
    char *p = alloc_realloc(NULL, 10);
    memcpy(p, "0123456789", 10);
    /* Within its class: the same block; past it: a copy, through the classes and into
     * a mapping of its own, and further within that mapping. */
    assert_ptr_equal(alloc_realloc(p, 16), p);
    size_t len = 10;
    for (size_t n = 17; n <= 300000; n = n * 3 + 1) {
        p = alloc_realloc(p, n);
        assert_non_null(p);
        assert_memory_equal(p, "0123456789", 10);
        for (size_t i = 10; i < len; i++)
            assert_int_equal(p[i], (char)i);
        for (size_t i = len; i < n; i++)
            p[i] = (char)i;
        len = n;
    }
    assert_ptr_equal(alloc_realloc(p, 100), p); /* smaller: kept */
    alloc_free(p);
}

static void test_impossible_sizes_fail(void **state)
{
    (void)state;
    errno = 0;
    assert_null(alloc_malloc(SIZE_MAX));
    assert_int_equal(errno, ENOMEM);
    errno = 0;
    assert_null(alloc_malloc(SIZE_MAX - 4096));
    assert_int_equal(errno, ENOMEM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alignment_and_sizes),
        cmocka_unit_test(test_freed_block_is_reused_for_its_class),
        cmocka_unit_test(test_calloc_zeroes_a_reused_block),
        cmocka_unit_test(test_realloc_keeps_the_content),
        cmocka_unit_test(test_impossible_sizes_fail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
