/* test_termtext: what src/core/termtext.c escapes (C0, DEL, C1, bidi controls, bytes of
 * no valid UTF-8 sequence) and what it leaves (printable ASCII, other UTF-8; newlines
 * and tabs with TERMTEXT_KEEP_LAYOUT). */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "termtext.h"

static void check(const char *in, unsigned flags, const char *want)
{
    char *got = termtext_dup(in, flags);
    assert_string_equal(got, want);
    assert_true(termtext_is_safe(in, strlen(in), flags) == (strcmp(in, want) == 0));
    assert_true(termtext_is_safe(got, strlen(got), flags));
    free(got);
}

static void test_escapes(void **state)
{
    (void)state;
    check("plain text 123", 0, "plain text 123");
    check("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", 0, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac");
    check("bell\x07 esc\x1b[31m del\x7f", 0, "bell\\x07 esc\\x1b[31m del\\x7f");
    check("a\nb\tc\rd", 0, "a\\nb\\tc\\rd");
    check("a\nb\tc\rd", TERMTEXT_KEEP_LAYOUT, "a\nb\tc\\rd");
    check("csi\xc2\x9b"
          "2J c1\xc2\x80",
          0, "csi\\u009b2J c1\\u0080");
    check("\xe2\x80\xae"
          "rlo \xe2\x81\xa6"
          "lri \xe2\x80\x8f"
          "rlm \xd8\x9c"
          "alm",
          0, "\\u202erlo \\u2066lri \\u200frlm \\u061calm");
    check("\xe2\x80\xaa\xe2\x80\xad\xe2\x81\xa9\xe2\x80\x8e", 0, "\\u202a\\u202d\\u2069\\u200e");
    check("bad \x9b byte \xff and cut \xe2\x80", 0, "bad \\x9b byte \\xff and cut \\xe2\\x80");
    check("", 0, "");
    assert_null(termtext_dup(NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
