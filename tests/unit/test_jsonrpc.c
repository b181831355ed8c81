/* Unit tests for gflow-mcp's JSON-RPC framing (src/mcp/jsonrpc.c: the bounded line
 * reader, message classification, error responses, text that is not UTF-8) and its
 * argument checks against a tool's input schema (src/mcp/mcp_args.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonrpc.h"
#include "mcp.h"

/* A reader over a pipe holding text (written whole: the tests stay below its size). */
static int pipe_with(const char *text, size_t len)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], text, len), (ssize_t)len);
    close(fds[1]);
    return fds[0];
}

static void test_reader_lines(void **state)
{
    static const char text[] = "{\"a\":1}\r\n\n0123456789ABCDEF\nshort\nlast";
    int fd = pipe_with(text, sizeof(text) - 1);
    struct jsonrpc_reader r;
    jsonrpc_reader_init(&r, fd, 8);
    const char *line;
    size_t len;
    assert_int_equal(jsonrpc_read_line(&r, &line, &len), JSONRPC_LINE);
    assert_string_equal(line, "{\"a\":1}"); /* CR dropped; exactly at the bound */
    assert_int_equal(jsonrpc_read_line(&r, &line, &len), JSONRPC_LINE);
    assert_int_equal(len, 0);
    assert_int_equal(jsonrpc_read_line(&r, &line, &len), JSONRPC_TOO_LONG);
    assert_int_equal(jsonrpc_read_line(&r, &line, &len), JSONRPC_LINE); /* resyncs */
    assert_string_equal(line, "short");
    assert_int_equal(jsonrpc_read_line(&r, &line, &len), JSONRPC_LINE);
    assert_string_equal(line, "last");
    assert_int_equal(jsonrpc_read_line(&r, &line, &len), JSONRPC_EOF);
    jsonrpc_reader_free(&r);
    close(fd);
}

/* Parses text; returns the error response's code, or 0 with *kind set. */
static int parse_code(const char *text, enum jsonrpc_kind *kind)
{
    struct jsonrpc_msg m;
    json_t *err;
    jsonrpc_parse(text, strlen(text), &m, &err);
    *kind = m.kind;
    int code = 0;
    if (err) {
        assert_int_equal(m.kind, JSONRPC_INVALID);
        assert_string_equal(json_string_value(json_object_get(err, "jsonrpc")), "2.0");
        code = (int)json_integer_value(json_object_get(json_object_get(err, "error"), "code"));
        json_decref(err);
    }
    jsonrpc_msg_free(&m);
    return code;
}

static void test_parse_kinds(void **state)
{
    enum jsonrpc_kind k;
    assert_int_equal(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &k), 0);
    assert_int_equal(k, JSONRPC_REQUEST);
    assert_int_equal(parse_code("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\","
                                "\"params\":{}}",
                                &k),
                     0);
    assert_int_equal(k, JSONRPC_REQUEST);
    assert_int_equal(
        parse_code("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &k), 0);
    assert_int_equal(k, JSONRPC_NOTIFICATION);
    assert_int_equal(parse_code("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", &k), 0);
    assert_int_equal(k, JSONRPC_RESPONSE);

    assert_int_equal(parse_code("{\"jsonrpc\":\"2.0\",", &k), JSONRPC_PARSE_ERROR);
    assert_int_equal(parse_code("not json", &k), JSONRPC_PARSE_ERROR);
    assert_int_equal(parse_code("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", &k),
                     JSONRPC_INVALID_REQUEST);
    assert_int_equal(parse_code("{\"id\":1,\"method\":\"ping\"}", &k), JSONRPC_INVALID_REQUEST);
    assert_int_equal(parse_code("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", &k),
                     JSONRPC_INVALID_REQUEST);
    assert_int_equal(parse_code("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", &k),
                     JSONRPC_INVALID_REQUEST);
    assert_int_equal(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", &k),
                     JSONRPC_INVALID_REQUEST);
    assert_int_equal(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1}", &k), JSONRPC_INVALID_REQUEST);
    assert_int_equal(parse_code("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":3}", &k),
                     JSONRPC_INVALID_REQUEST);
    assert_int_equal(parse_code("42", &k), JSONRPC_INVALID_REQUEST);
}

static void test_error_keeps_the_id(void **state)
{
    struct jsonrpc_msg m;
    json_t *err;
    const char *text = "{\"jsonrpc\":\"2.0\",\"id\":\"req-7\"}";
    jsonrpc_parse(text, strlen(text), &m, &err);
    assert_non_null(err);
    assert_string_equal(json_string_value(json_object_get(err, "id")), "req-7");
    json_decref(err);
    jsonrpc_msg_free(&m);

    json_t *id = json_integer(5);
    json_t *e = jsonrpc_error(id, JSONRPC_METHOD_NOT_FOUND, "method not found: %s", "x/y");
    const json_t *body = json_object_get(e, "error");
    assert_int_equal(json_integer_value(json_object_get(body, "code")), -32601);
    assert_string_equal(json_string_value(json_object_get(body, "message")),
                        "method not found: x/y");
    assert_int_equal(json_integer_value(json_object_get(e, "id")), 5);
    json_decref(e);
    json_t *ok = jsonrpc_result(id, NULL);
    assert_true(json_is_object(json_object_get(ok, "result")));
    json_decref(ok);
    json_decref(id);
}

/* A message is one line: newlines inside strings are escaped. */
static void test_write_one_line(void **state)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    json_t *m = jsonrpc_result(NULL, json_pack("{s:s}", "text", "two\nlines"));
    assert_int_equal(jsonrpc_write(f, m), 0);
    fclose(f);
    json_decref(m);
    assert_int_equal(strchr(buf, '\n') - buf, (long)size - 1);
    free(buf);
}

static void test_text_not_utf8(void **state)
{
    static const char bad[] = "ok \xff \xc3\xa9 \xe2\x82 \xed\xa0\x80 \xc0\xaf";
    json_t *s = jsonrpc_text(bad, sizeof(bad) - 1);
    assert_non_null(s);
    assert_string_equal(json_string_value(s), "ok \xEF\xBF\xBD \xc3\xa9 \xEF\xBF\xBD\xEF\xBF\xBD "
                                              "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD "
                                              "\xEF\xBF\xBD\xEF\xBF\xBD");
    json_decref(s);
    s = jsonrpc_text("a\0b", 3);
    assert_string_equal(json_string_value(s), "a\xEF\xBF\xBD"
                                              "b");
    json_decref(s);
    s = jsonrpc_text("\xf0\x9f\x98\x80", 4); /* a valid 4-byte sequence stays */
    assert_string_equal(json_string_value(s), "\xf0\x9f\x98\x80");
    json_decref(s);
}

/* ---- mcp_args ---- */

static const char schema_text[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"id\"],"
    " \"properties\": {\"id\": {\"type\": \"integer\", \"minimum\": 1},"
    " \"by\": {\"type\": \"string\", \"enum\": [\"user\", \"gpu\"]},"
    " \"max\": {\"type\": \"integer\", \"maximum\": 10},"
    " \"cmd\": {\"type\": \"string\", \"minLength\": 1},"
    " \"deps\": {\"type\": \"array\", \"maxItems\": 2, \"items\": {\"type\": \"integer\"}},"
    " \"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}}}}";

/* The check's message for args, or NULL if they pass. */
static char *check(const char *args_text)
{
    json_t *schema = json_loads(schema_text, 0, NULL);
    json_t *args = json_loads(args_text, JSON_DECODE_ANY, NULL);
    assert_non_null(schema);
    assert_non_null(args);
    char *err = NULL;
    int rc = mcp_args_check(schema, args, &err);
    assert_int_equal(rc, err ? -1 : 0);
    json_decref(schema);
    json_decref(args);
    return err;
}

static void expect_error(const char *args_text, const char *needle)
{
    char *err = check(args_text);
    assert_non_null(err);
    if (!strstr(err, needle))
        fail_msg("'%s' does not contain '%s'", err, needle);
    free(err);
}

static void test_args(void **state)
{
    assert_null(check("{\"id\": 3}"));
    assert_null(check("{\"id\": 3, \"by\": \"gpu\", \"max\": 10, \"deps\": [1, 2], "
                      "\"env\": {\"A\": \"b\"}, \"cmd\": \"x\"}"));
    expect_error("{}", "'id' is required");
    expect_error("{\"id\": \"3\"}", "'id' must be an integer");
    expect_error("{\"id\": 0}", "'id' must be at least 1");
    expect_error("{\"id\": 1, \"max\": 11}", "'max' must be at most 10");
    expect_error("{\"id\": 1, \"by\": \"day\"}", "'by' must be one of [\"user\",\"gpu\"]");
    expect_error("{\"id\": 1, \"cmd\": \"\"}", "'cmd' must not be empty");
    expect_error("{\"id\": 1, \"deps\": [1, 2, 3]}", "'deps' has more than 2 items");
    expect_error("{\"id\": 1, \"deps\": [1, \"x\"]}", "'deps'[1] must be an integer");
    expect_error("{\"id\": 1, \"env\": {\"A\": 1}}", "'A' must be a string");
    expect_error("{\"id\": 1, \"colour\": 1}", "unknown argument 'colour'");
    expect_error("[1]", "the arguments must be an object");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_lines),       cmocka_unit_test(test_parse_kinds),
        cmocka_unit_test(test_error_keeps_the_id), cmocka_unit_test(test_write_one_line),
        cmocka_unit_test(test_text_not_utf8),      cmocka_unit_test(test_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
