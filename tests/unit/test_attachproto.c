/* test_attachproto: the frames between `gjob attach` and the shim (src/core/attachproto.c):
 * headers, parsing of whole, partial, oversized and unknown frames, window sizes, and the
 * detach keys: their spec and the matcher that holds back a partial sequence. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "attachproto.h"

static void test_header_and_parse(void **state)
{
    (void)state;
    uint8_t buf[64];
    attach_header(buf, ATTACH_DATA, 3);
    assert_memory_equal(buf, "D\0\0\0\3", 5);
    memcpy(buf + 5, "abc", 3);
    attach_header(buf + 8, ATTACH_END, 0);
    struct attach_frame f;
    /* Every prefix of a frame asks for more. */
    for (size_t n = 0; n < 8; n++)
        assert_int_equal(attach_parse(buf, n, &f), 0);
    assert_int_equal(attach_parse(buf, 13, &f), 8);
    assert_int_equal(f.type, ATTACH_DATA);
    assert_int_equal(f.len, 3);
    assert_memory_equal(f.payload, "abc", 3);
    /* The next frame follows at once; an empty payload is a whole frame. */
    assert_int_equal(attach_parse(buf + 8, 5, &f), 5);
    assert_int_equal(f.type, ATTACH_END);
    assert_int_equal(f.len, 0);
}

static void test_parse_refuses_broken_streams(void **state)
{
    (void)state;
    uint8_t buf[8] = {'Z', 0, 0, 0, 0};
    struct attach_frame f;
    assert_int_equal(attach_parse(buf, 1, &f), -1); /* unknown type: at once */
    assert_int_equal(attach_parse(buf, 5, &f), -1);
    attach_header(buf, ATTACH_DATA, ATTACH_MAX_PAYLOAD + 1);
    assert_int_equal(attach_parse(buf, 5, &f), -1); /* over the cap, before its bytes come */
    attach_header(buf, ATTACH_DATA, ATTACH_MAX_PAYLOAD);
    assert_int_equal(attach_parse(buf, 5, &f), 0); /* the cap itself is allowed */
    attach_header(buf, ATTACH_DATA, 0xffffffffu);
    assert_int_equal(attach_parse(buf, 5, &f), -1);
}

static void test_winsize(void **state)
{
    (void)state;
    uint8_t buf[9];
    attach_header(buf, ATTACH_WINSIZE, 4);
    attach_winsize_encode(buf + 5, 41, 300);
    struct attach_frame f;
    assert_int_equal(attach_parse(buf, 9, &f), 9);
    unsigned rows, cols;
    assert_int_equal(attach_winsize_decode(&f, &rows, &cols), 0);
    assert_int_equal(rows, 41);
    assert_int_equal(cols, 300);
    attach_winsize_encode(buf + 5, 0, 80); /* a zero dimension is refused */
    assert_int_equal(attach_winsize_decode(&f, &rows, &cols), -1);
    attach_winsize_encode(buf + 5, 100000, 80); /* clamped to 16 bits */
    assert_int_equal(attach_winsize_decode(&f, &rows, &cols), 0);
    assert_int_equal(rows, 0xffff);
    f.len = 3;
    assert_int_equal(attach_winsize_decode(&f, &rows, &cols), -1);
    f.len = 4;
    f.type = ATTACH_DATA;
    assert_int_equal(attach_winsize_decode(&f, &rows, &cols), -1);
}

static void test_keys_parse(void **state)
{
    (void)state;
    struct attach_keys k;
    char *err = NULL;
    assert_int_equal(attach_keys_parse("ctrl-b,d", &k, &err), 0);
    assert_int_equal(k.n, 2);
    assert_int_equal(k.key[0], 2);
    assert_int_equal(k.key[1], 'd');
    assert_int_equal(attach_keys_parse("CTRL-A,ctrl-q,ctrl-[,x", &k, &err), 0);
    assert_int_equal(k.n, 4);
    assert_int_equal(k.key[0], 1);
    assert_int_equal(k.key[1], 0x11);
    assert_int_equal(k.key[2], 0x1b);
    assert_int_equal(k.key[3], 'x');
    static const char *const bad[] = {"",          "ctrl-", "ctrl-b,", ",d",
                                      "ctrl-b,,d", "ab",    "ctrl-1",  "a,b,c,d,e,f,g,h,i"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        assert_int_equal(attach_keys_parse(bad[i], &k, &err), -1);
        assert_non_null(err);
        assert_non_null(strstr(err, "bad detach keys"));
        free(err);
    }
}

/* Feeds text in pieces of `step` bytes; the bytes passed on, and whether it detached. */
static bool feed(struct attach_keys *k, const char *text, size_t step, char *out, size_t *out_len)
{
    *out_len = 0;
    size_t len = strlen(text);
    for (size_t i = 0; i < len; i += step) {
        size_t n = len - i < step ? len - i : step;
        uint8_t got[64 + ATTACH_MAX_KEYS];
        size_t got_n;
        bool done = attach_keys_feed(k, (const uint8_t *)text + i, n, got, &got_n);
        memcpy(out + *out_len, got, got_n);
        *out_len += got_n;
        if (done)
            return true;
    }
    return false;
}

static void test_keys_feed(void **state)
{
    (void)state;
    char *err = NULL;
    struct attach_keys k;
    assert_int_equal(attach_keys_parse("ctrl-b,d", &k, &err), 0);
    char out[128];
    size_t n;
    for (size_t step = 1; step <= 4; step++) { /* however the input is split */
        k.matched = 0;
        assert_false(feed(&k, "ab\x02x\x02\x02y", step, out, &n));
        assert_int_equal(n, 7); /* a failed match gives its keys back, in order */
        assert_memory_equal(out, "ab\x02x\x02\x02y", 7);
        k.matched = 0;
        assert_true(feed(&k,
                         "hi\x02\x02"
                         "d"
                         "tail",
                         step, out, &n));
        assert_int_equal(n, 3); /* the first ctrl-b was the user's; the rest detaches */
        assert_memory_equal(out, "hi\x02", 3);
        k.matched = 0;
        assert_false(feed(&k, "ok\x02", step, out, &n));
        assert_int_equal(n, 2); /* a trailing partial match is held back */
        assert_true(feed(&k, "d", step, out, &n));
        assert_int_equal(n, 0);
    }
    /* A single key detaches at once. */
    assert_int_equal(attach_keys_parse("ctrl-q", &k, &err), 0);
    k.matched = 0;
    assert_true(feed(&k,
                     "ab\x11"
                     "c",
                     8, out, &n));
    assert_int_equal(n, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_and_parse),
        cmocka_unit_test(test_parse_refuses_broken_streams),
        cmocka_unit_test(test_winsize),
        cmocka_unit_test(test_keys_parse),
        cmocka_unit_test(test_keys_feed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
