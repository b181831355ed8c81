/* toml-decoder: the toml-test decoder contract for our TOML reader. Reads a TOML
 * document on stdin and prints it as toml-test's "tagged JSON" on stdout (tables as
 * objects, arrays as arrays, every scalar as {"type": T, "value": "TEXT"}). Invalid
 * input: a message on stderr and exit status 1. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "toml.h"
#include "util.h"

static json_t *decoder_convert(const struct toml_value *v);

static json_t *decoder_tagged(const char *type, const char *text)
{
    return json_pack("{s:s, s:s}", "type", type, "value", text);
}

static json_t *decoder_float(double f)
{
    char buf[64];
    if (isnan(f))
        snprintf(buf, sizeof(buf), "nan");
    else if (isinf(f))
        snprintf(buf, sizeof(buf), "%sinf", f < 0 ? "-" : "");
    else
        snprintf(buf, sizeof(buf), "%.17g", f);
    return decoder_tagged("float", buf);
}

static json_t *decoder_scalar(const struct toml_value *v)
{
    enum toml_type type = toml_type_of(v);
    char buf[64];
    switch (type) {
    case TOML_STRING: {
        size_t len;
        const char *s = toml_string(v, &len);
        return json_pack("{s:s, s:s%}", "type", "string", "value", s, len);
    }
    case TOML_INTEGER:
        snprintf(buf, sizeof(buf), "%lld", (long long)toml_integer(v));
        return decoder_tagged("integer", buf);
    case TOML_FLOAT:
        return decoder_float(toml_float(v));
    case TOML_BOOL:
        return decoder_tagged("bool", toml_bool(v) ? "true" : "false");
    default:
        toml_datetime_format(v, buf, sizeof(buf));
        return decoder_tagged(toml_type_name(type), buf);
    }
}

static json_t *decoder_convert(const struct toml_value *v)
{
    if (toml_type_of(v) == TOML_TABLE) {
        json_t *obj = json_object();
        for (size_t i = 0; i < toml_table_len(v); i++) {
            size_t klen;
            const char *key = toml_table_key(v, i, &klen);
            json_object_setn_new(obj, key, klen, decoder_convert(toml_table_value(v, i)));
        }
        return obj;
    }
    if (toml_type_of(v) == TOML_ARRAY) {
        json_t *arr = json_array();
        for (size_t i = 0; i < toml_array_len(v); i++)
            json_array_append_new(arr, decoder_convert(toml_array_at(v, i)));
        return arr;
    }
    return decoder_scalar(v);
}

int main(void)
{
    struct strbuf in;
    strbuf_init(&in);
    char chunk[65536];
    ssize_t n;
    while ((n = read(STDIN_FILENO, chunk, sizeof(chunk))) > 0)
        strbuf_add(&in, chunk, (size_t)n);
    if (n < 0) {
        perror("toml-decoder: read");
        return 2;
    }
    struct toml_error err;
    struct toml_value *root = toml_parse(in.buf ? in.buf : "", in.len, &err);
    strbuf_free(&in);
    if (!root) {
        fprintf(stderr, "toml-decoder: line %d, column %d: %s\n", err.line, err.column,
                err.message);
        return 1;
    }
    json_t *json = decoder_convert(root);
    toml_free(root);
    int rc = json_dumpf(json, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) == 0 ? 0 : 2;
    putchar('\n');
    json_decref(json);
    return rc;
}
