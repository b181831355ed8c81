/* fuzz_toml: toml_parse on arbitrary bytes.
 *
 * Invariants: an invalid document gives NULL and an error whose line and column lie
 * inside the input; a valid one gives a tree whose accessors agree with each other
 * (toml_table_get finds every key that has no NUL byte), and the tree written back as
 * TOML (by the small writer below) parses again into an equal tree, whose writing is
 * the same text (format -> parse round trip). No crash, no leak. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "toml.h"
#include "util.h"

/* ---- writing a tree as TOML ---- */

static void put_string(struct strbuf *sb, const char *s, size_t len)
{
    strbuf_addc(sb, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            strbuf_addc(sb, '\\');
            strbuf_addc(sb, (char)c);
        } else if (c < 0x20 || c == 0x7f) {
            strbuf_addf(sb, "\\u%04x", c);
        } else {
            strbuf_addc(sb, (char)c);
        }
    }
    strbuf_addc(sb, '"');
}

static void put_float(struct strbuf *sb, double f)
{
    if (isnan(f)) {
        strbuf_adds(sb, "nan");
        return;
    }
    if (isinf(f)) {
        strbuf_adds(sb, f < 0 ? "-inf" : "inf");
        return;
    }
    char buf[64];
    snprintf(buf, sizeof(buf), "%.17g", f);
    strbuf_adds(sb, buf);
    if (!strpbrk(buf, ".e"))
        strbuf_adds(sb, ".0"); /* "1" would read back as an integer */
}

static bool is_table_array(const struct toml_value *v)
{
    if (toml_type_of(v) != TOML_ARRAY || toml_array_len(v) == 0)
        return false;
    for (size_t i = 0; i < toml_array_len(v); i++)
        if (toml_type_of(toml_array_at(v, i)) != TOML_TABLE)
            return false;
    return true;
}

static void put_inline(struct strbuf *sb, const struct toml_value *v)
{
    char buf[64];
    size_t len;
    const char *s;
    switch (toml_type_of(v)) {
    case TOML_STRING:
        s = toml_string(v, &len);
        put_string(sb, s, len);
        break;
    case TOML_INTEGER:
        strbuf_addf(sb, "%lld", (long long)toml_integer(v));
        break;
    case TOML_FLOAT:
        put_float(sb, toml_float(v));
        break;
    case TOML_BOOL:
        strbuf_adds(sb, toml_bool(v) ? "true" : "false");
        break;
    case TOML_DATETIME:
    case TOML_DATETIME_LOCAL:
    case TOML_DATE_LOCAL:
    case TOML_TIME_LOCAL:
        FUZZ_CHECK(toml_datetime_format(v, buf, sizeof(buf)) < (int)sizeof(buf));
        strbuf_adds(sb, buf);
        break;
    case TOML_ARRAY:
        strbuf_addc(sb, '[');
        for (size_t i = 0; i < toml_array_len(v); i++) {
            if (i)
                strbuf_adds(sb, ", ");
            put_inline(sb, toml_array_at(v, i));
        }
        strbuf_addc(sb, ']');
        break;
    case TOML_TABLE:
        strbuf_addc(sb, '{');
        for (size_t i = 0; i < toml_table_len(v); i++) {
            if (i)
                strbuf_adds(sb, ", ");
            s = toml_table_key(v, i, &len);
            put_string(sb, s, len);
            strbuf_adds(sb, " = ");
            put_inline(sb, toml_table_value(v, i));
        }
        strbuf_addc(sb, '}');
        break;
    }
}

/* A table's body under the header path: its plain keys, then its sub-tables as
 * [path.key], then its arrays of tables as [[path.key]] (so nesting depth is not limited
 * by inline tables). */
static void put_table(struct strbuf *sb, const struct strbuf *path, const struct toml_value *t)
{
    size_t len;
    const char *key;
    for (size_t i = 0; i < toml_table_len(t); i++) {
        const struct toml_value *v = toml_table_value(t, i);
        if (toml_type_of(v) == TOML_TABLE || is_table_array(v))
            continue;
        key = toml_table_key(t, i, &len);
        put_string(sb, key, len);
        strbuf_adds(sb, " = ");
        put_inline(sb, v);
        strbuf_addc(sb, '\n');
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < toml_table_len(t); i++) {
            const struct toml_value *v = toml_table_value(t, i);
            if (pass == 0 ? toml_type_of(v) != TOML_TABLE : !is_table_array(v))
                continue;
            struct strbuf sub;
            strbuf_init(&sub);
            if (path->len) {
                strbuf_add(&sub, path->buf, path->len);
                strbuf_addc(&sub, '.');
            }
            key = toml_table_key(t, i, &len);
            put_string(&sub, key, len);
            if (pass == 0) {
                strbuf_addf(sb, "[%s]\n", sub.buf);
                put_table(sb, &sub, v);
            } else {
                for (size_t k = 0; k < toml_array_len(v); k++) {
                    strbuf_addf(sb, "[[%s]]\n", sub.buf);
                    put_table(sb, &sub, toml_array_at(v, k));
                }
            }
            strbuf_free(&sub);
        }
    }
}

static char *write_document(const struct toml_value *root, size_t *len)
{
    struct strbuf sb, path;
    strbuf_init(&sb);
    strbuf_init(&path);
    put_table(&sb, &path, root);
    strbuf_free(&path);
    *len = sb.len;
    return sb.buf ? strbuf_detach(&sb) : xstrdup("");
}

/* ---- comparing trees; checking accessors ---- */

static bool datetime_equal(const struct toml_datetime *a, const struct toml_datetime *b)
{
    return a->year == b->year && a->month == b->month && a->day == b->day && a->hour == b->hour &&
           a->minute == b->minute && a->second == b->second && a->nanosecond == b->nanosecond &&
           a->frac_digits == b->frac_digits && a->offset_minutes == b->offset_minutes;
}

static const struct toml_value *find_key(const struct toml_value *t, const char *key, size_t len)
{
    for (size_t i = 0; i < toml_table_len(t); i++) {
        size_t l;
        const char *k = toml_table_key(t, i, &l);
        if (l == len && memcmp(k, key, len) == 0)
            return toml_table_value(t, i);
    }
    return NULL;
}

/* Equal values; tables compared by key, whatever the order of definition. */
static bool tree_equal(const struct toml_value *a, const struct toml_value *b)
{
    if (toml_type_of(a) != toml_type_of(b))
        return false;
    size_t la, lb;
    const char *sa, *sb;
    switch (toml_type_of(a)) {
    case TOML_STRING:
        sa = toml_string(a, &la);
        sb = toml_string(b, &lb);
        return la == lb && memcmp(sa, sb, la) == 0;
    case TOML_INTEGER:
        return toml_integer(a) == toml_integer(b);
    case TOML_FLOAT:
        if (isnan(toml_float(a)))
            return isnan(toml_float(b));
        return memcmp(&(double){toml_float(a)}, &(double){toml_float(b)}, sizeof(double)) == 0;
    case TOML_BOOL:
        return toml_bool(a) == toml_bool(b);
    case TOML_DATETIME:
    case TOML_DATETIME_LOCAL:
    case TOML_DATE_LOCAL:
    case TOML_TIME_LOCAL:
        return datetime_equal(toml_datetime(a), toml_datetime(b));
    case TOML_ARRAY:
        if (toml_array_len(a) != toml_array_len(b))
            return false;
        for (size_t i = 0; i < toml_array_len(a); i++)
            if (!tree_equal(toml_array_at(a, i), toml_array_at(b, i)))
                return false;
        return true;
    case TOML_TABLE:
        if (toml_table_len(a) != toml_table_len(b))
            return false;
        for (size_t i = 0; i < toml_table_len(a); i++) {
            sa = toml_table_key(a, i, &la);
            const struct toml_value *vb = find_key(b, sa, la);
            if (!vb || !tree_equal(toml_table_value(a, i), vb))
                return false;
        }
        return true;
    }
    return false;
}

/* Accessors agree: keys are unique, toml_table_get finds each NUL-free key, strings are
 * NUL-terminated, lines are positive, type names exist. */
static void check_tree(const struct toml_value *v)
{
    FUZZ_CHECK(toml_line(v) >= 1);
    FUZZ_CHECK(toml_type_name(toml_type_of(v)) != NULL);
    size_t len;
    const char *s;
    switch (toml_type_of(v)) {
    case TOML_STRING:
        s = toml_string(v, &len);
        FUZZ_CHECK(s[len] == '\0');
        break;
    case TOML_ARRAY:
        for (size_t i = 0; i < toml_array_len(v); i++)
            check_tree(toml_array_at(v, i));
        break;
    case TOML_TABLE:
        for (size_t i = 0; i < toml_table_len(v); i++) {
            s = toml_table_key(v, i, &len);
            FUZZ_CHECK(s[len] == '\0');
            FUZZ_CHECK(find_key(v, s, len) == toml_table_value(v, i)); /* unique */
            if (strlen(s) == len)
                FUZZ_CHECK(toml_table_get(v, s) == toml_table_value(v, i));
            check_tree(toml_table_value(v, i));
        }
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct toml_error err;
    memset(&err, 0, sizeof(err));
    struct toml_value *root = toml_parse((const char *)data, size, &err);
    if (!root) {
        size_t lines = 1;
        for (size_t i = 0; i < size; i++)
            lines += data[i] == '\n';
        FUZZ_CHECK(err.line >= 1 && (size_t)err.line <= lines);
        FUZZ_CHECK(err.column >= 1 && (size_t)err.column <= size + 1);
        FUZZ_CHECK(memchr(err.message, '\0', sizeof(err.message)) && err.message[0]);
        return 0;
    }
    FUZZ_CHECK(toml_type_of(root) == TOML_TABLE);
    check_tree(root);

    size_t len1, len2;
    char *text1 = write_document(root, &len1);
    struct toml_value *again = toml_parse(text1, len1, &err);
    if (!again)
        fprintf(stderr, "written: [%s]\nerror: %d:%d: %s\n", text1, err.line, err.column,
                err.message);
    FUZZ_CHECK(again != NULL);
    FUZZ_CHECK_TEXT(tree_equal(root, again), text1, "(the tree read back differs)");
    char *text2 = write_document(again, &len2);
    FUZZ_CHECK_TEXT(len1 == len2 && memcmp(text1, text2, len1) == 0, text1, text2);
    free(text1);
    free(text2);
    toml_free(again);
    toml_free(root);
    return 0;
}
