/* test_toml: unit tests of the TOML reader (src/core/toml.c, toml_lex.c, toml_scalar.c):
 * value types, nested and dotted tables, arrays of tables, the line recorded for each
 * key, and errors that carry a line and a readable message. The full conformance suite
 * is toml-test (tests/toml/run_toml_test.py); these pin the API that the config module
 * relies on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "toml.h"

static struct toml_value *parse_ok(const char *text)
{
    struct toml_error err;
    struct toml_value *root = toml_parse(text, strlen(text), &err);
    if (!root)
        fail_msg("unexpected parse error at %d:%d: %s", err.line, err.column, err.message);
    return root;
}

/* Parses text that must fail; returns the error. */
static struct toml_error parse_bad(const char *text)
{
    struct toml_error err;
    struct toml_value *root = toml_parse(text, strlen(text), &err);
    if (root) {
        toml_free(root);
        fail_msg("accepted invalid TOML: %s", text);
    }
    return err;
}

static const struct toml_value *get(const struct toml_value *t, const char *key)
{
    const struct toml_value *v = toml_table_get(t, key);
    if (!v)
        fail_msg("no key '%s'", key);
    return v;
}

static void test_scalar_types(void **state)
{
    struct toml_value *root = parse_ok("s = \"a\\tb\\u00e9\"\n"
                                       "lit = 'C:\\path'\n"
                                       "i = -1_000\n"
                                       "hex = 0xff\n"
                                       "f = 6.25e-1\n"
                                       "ninf = -inf\n"
                                       "b = true\n"
                                       "odt = 1979-05-27T07:32:00.25-07:00\n"
                                       "ldt = 1979-05-27 07:32:00\n"
                                       "ld = 2024-02-29\n"
                                       "lt = 00:32:00.999\n");
    assert_int_equal(toml_type_of(get(root, "s")), TOML_STRING);
    assert_string_equal(toml_string(get(root, "s"), NULL), "a\tb\xc3\xa9");
    assert_string_equal(toml_string(get(root, "lit"), NULL), "C:\\path");
    assert_int_equal(toml_integer(get(root, "i")), -1000);
    assert_int_equal(toml_integer(get(root, "hex")), 255);
    assert_true(toml_float(get(root, "f")) == 0.625);
    assert_true(isinf(toml_float(get(root, "ninf"))) && toml_float(get(root, "ninf")) < 0);
    assert_true(toml_bool(get(root, "b")));

    const struct toml_value *odt = get(root, "odt");
    assert_int_equal(toml_type_of(odt), TOML_DATETIME);
    assert_int_equal(toml_datetime(odt)->offset_minutes, -420);
    assert_int_equal(toml_datetime(odt)->nanosecond, 250000000);
    char buf[64];
    toml_datetime_format(odt, buf, sizeof(buf));
    assert_string_equal(buf, "1979-05-27T07:32:00.25-07:00");
    assert_int_equal(toml_type_of(get(root, "ldt")), TOML_DATETIME_LOCAL);
    assert_int_equal(toml_type_of(get(root, "ld")), TOML_DATE_LOCAL);
    assert_int_equal(toml_datetime(get(root, "ld"))->day, 29);
    assert_int_equal(toml_type_of(get(root, "lt")), TOML_TIME_LOCAL);
    toml_datetime_format(get(root, "lt"), buf, sizeof(buf));
    assert_string_equal(buf, "00:32:00.999");
    assert_string_equal(toml_type_name(TOML_DATETIME_LOCAL), "datetime-local");
    toml_free(root);
}

static void test_multiline_and_nul_strings(void **state)
{
    struct toml_value *root = parse_ok("ml = \"\"\"\n"
                                       "one \\\n"
                                       "   two\"\"\"\"\n"
                                       "raw = '''\n"
                                       "x\\ny'''\n"
                                       "nul = \"a\\u0000b\"\n");
    assert_string_equal(toml_string(get(root, "ml"), NULL), "one two\"");
    assert_string_equal(toml_string(get(root, "raw"), NULL), "x\\ny");
    size_t len;
    const char *s = toml_string(get(root, "nul"), &len);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "a\0b", 3);
    toml_free(root);
}

static void test_nested_tables(void **state)
{
    struct toml_value *root = parse_ok("[a.b]\n"
                                       "c.d = 1\n"
                                       "[a]\n"
                                       "x = { y = [1, 'two', { z = 3 }] }\n");
    const struct toml_value *a = get(root, "a");
    assert_int_equal(toml_type_of(a), TOML_TABLE);
    assert_int_equal(toml_integer(get(get(get(a, "b"), "c"), "d")), 1);
    const struct toml_value *y = get(get(a, "x"), "y");
    assert_int_equal(toml_array_len(y), 3);
    assert_int_equal(toml_type_of(toml_array_at(y, 1)), TOML_STRING);
    assert_int_equal(toml_integer(get(toml_array_at(y, 2), "z")), 3);
    /* keys keep their order */
    assert_int_equal(toml_table_len(a), 2);
    assert_string_equal(toml_table_key(a, 0, NULL), "b");
    assert_string_equal(toml_table_key(a, 1, NULL), "x");
    assert_null(toml_table_get(a, "nope"));
    toml_free(root);
}

static void test_array_of_tables(void **state)
{
    struct toml_value *root = parse_ok("[[job]]\n"
                                       "name = 'a'\n"
                                       "[job.gpu]\n"
                                       "count = 1\n"
                                       "[[job]]\n"
                                       "name = 'b'\n");
    const struct toml_value *jobs = get(root, "job");
    assert_int_equal(toml_type_of(jobs), TOML_ARRAY);
    assert_int_equal(toml_array_len(jobs), 2);
    const struct toml_value *first = toml_array_at(jobs, 0);
    assert_string_equal(toml_string(get(first, "name"), NULL), "a");
    assert_int_equal(toml_integer(get(get(first, "gpu"), "count")), 1);
    assert_string_equal(toml_string(get(toml_array_at(jobs, 1), "name"), NULL), "b");
    assert_null(toml_table_get(toml_array_at(jobs, 1), "gpu"));
    toml_free(root);
}

static void test_line_numbers(void **state)
{
    struct toml_value *root = parse_ok("# comment\n"
                                       "top = 1\n"
                                       "\n"
                                       "[daemon]\n"
                                       "list = [\n"
                                       "  1,\n"
                                       "  2,\n"
                                       "]\n"
                                       "text = '''\n"
                                       "two lines'''\n"
                                       "after = true\r\n"
                                       "dotted.key = 5\n");
    assert_int_equal(toml_line(get(root, "top")), 2);
    const struct toml_value *d = get(root, "daemon");
    assert_int_equal(toml_line(d), 4);
    assert_int_equal(toml_line(get(d, "list")), 5);
    assert_int_equal(toml_line(toml_array_at(get(d, "list"), 1)), 7);
    assert_int_equal(toml_line(get(d, "text")), 9);
    assert_int_equal(toml_line(get(d, "after")), 11);
    assert_int_equal(toml_line(get(d, "dotted")), 12);
    assert_int_equal(toml_line(get(get(d, "dotted"), "key")), 12);
    toml_free(root);
}

static void test_errors_have_lines(void **state)
{
    struct toml_error err = parse_bad("a = 1\n\na = 2\n");
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.message, "duplicate key 'a'"));

    err = parse_bad("[t]\nx = 1\n[t]\n");
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.message, "'t' is already defined"));

    err = parse_bad("ok = 1\nbad = 01\n");
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.message, "leading zero"));

    err = parse_bad("x = \"unterminated\n");
    assert_int_equal(err.line, 1);
    assert_int_equal(err.column, 18);

    err = parse_bad("x = 1 y = 2\n");
    assert_string_equal(err.message, "expected a newline, found 'y'");
    assert_int_equal(err.column, 7);
}

static void test_strictness(void **state)
{
    static const char *const bad[] = {
        "t = {a = 1}\n[t]\n",        /* inline tables are closed */
        "a.b = 1\n[a]\n",            /* dotted-key tables cannot be redefined */
        "[a.b]\n[a]\nb.c = 1\n",     /* dotted keys cannot extend header tables */
        "a = [1]\n[[a]]\n",          /* static arrays cannot be appended to */
        "x = 2024-02-30\n",          /* no such day */
        "x = 9223372036854775808\n", /* above int64 */
        "x = 1__0\n",                /* one underscore between digits */
        "x = {a = 1,}\n",            /* no trailing comma in inline tables */
        "x = \"\\x41\"\n",           /* not a TOML 1.0 escape */
        "x = 'a\x7f'\n",             /* control character */
        "x = \"\xc0\xaf\"\n",        /* overlong UTF-8 */
        "x = 1\ry = 2\n",            /* bare carriage return */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        parse_bad(bad[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_types),  cmocka_unit_test(test_multiline_and_nul_strings),
        cmocka_unit_test(test_nested_tables), cmocka_unit_test(test_array_of_tables),
        cmocka_unit_test(test_line_numbers),  cmocka_unit_test(test_errors_have_lines),
        cmocka_unit_test(test_strictness),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
