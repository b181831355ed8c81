/* toml: a strict TOML 1.0.0 reader (see toml.h).
 *
 * A recursive-descent parser over a byte buffer. The whole input is first checked to be
 * UTF-8; then the document is read line by line into a tree of values. What makes TOML
 * tricky is not the syntax but which later lines may add keys to which tables, so every
 * table records how it came to exist (the TABLE_* flags below) and the rules of the
 * specification are applied when a header or a dotted key reaches it:
 *   - a [header] may define a table once; tables that only exist as parents of earlier
 *     headers (implicit) may still be defined by their own header later;
 *   - tables made by dotted keys (a.b = 1) may not be defined again by a [header], but a
 *     header may create sub-tables inside them;
 *   - dotted keys may only extend tables that dotted keys created in the same table;
 *   - inline tables and arrays written as values are closed: nothing may extend them;
 *   - [[header]] appends to an array of tables; a [header] path that crosses one refers
 *     to its last element. */
#include "toml.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* How a table (or array) came to exist; decides what may later add to it. */
enum {
    TABLE_IMPLICIT = 1 << 0,  /* created as a parent by a [a.b] header */
    TABLE_EXPLICIT = 1 << 1,  /* defined by its own [header] or [[header]] */
    TABLE_DOTTED = 1 << 2,    /* created by a dotted key (a.b = 1) */
    TABLE_FROZEN = 1 << 3,    /* an inline table: closed for additions */
    ARRAY_OF_TABLES = 1 << 4, /* an array made by [[header]]s */
};

/* Deep nesting of arrays and inline tables is refused rather than risking the stack. */
#define TOML_MAX_DEPTH 128

struct toml_entry {
    char *key;
    size_t key_len;
    struct toml_value *value;
};

struct toml_value {
    enum toml_type type;
    int line;
    unsigned flags;
    union {
        struct {
            char *ptr;
            size_t len;
        } str;
        int64_t integer;
        double flt;
        bool boolean;
        struct toml_datetime dt;
        struct {
            struct toml_value **items;
            size_t len, cap;
        } arr;
        struct {
            struct toml_entry *items;
            size_t len, cap;
        } tab;
    } u;
};

struct toml_parser {
    const char *cur, *end;
    const char *line_start;
    int line;
    struct toml_error *err;
    bool failed;
    struct toml_value *root;
    struct toml_value *current; /* the table that key/value lines go to */
};

/* One key of a dotted key such as a."b.c".d */
struct toml_key_part {
    char *s;
    size_t len;
};

struct toml_key {
    struct toml_key_part *parts;
    size_t n, cap;
    int line;
};

/* ---- values ---------------------------------------------------------------------- */

static struct toml_value *toml_value_new(enum toml_type type, int line)
{
    struct toml_value *v = xcalloc(1, sizeof(*v));
    v->type = type;
    v->line = line;
    return v;
}

void toml_free(struct toml_value *v)
{
    if (!v)
        return;
    switch (v->type) {
    case TOML_STRING:
        free(v->u.str.ptr);
        break;
    case TOML_ARRAY:
        for (size_t i = 0; i < v->u.arr.len; i++)
            toml_free(v->u.arr.items[i]);
        free(v->u.arr.items);
        break;
    case TOML_TABLE:
        for (size_t i = 0; i < v->u.tab.len; i++) {
            free(v->u.tab.items[i].key);
            toml_free(v->u.tab.items[i].value);
        }
        free(v->u.tab.items);
        break;
    default:
        break;
    }
    free(v);
}

static struct toml_value *toml_table_find(const struct toml_value *t, const char *key, size_t len)
{
    for (size_t i = 0; i < t->u.tab.len; i++) {
        const struct toml_entry *e = &t->u.tab.items[i];
        if (e->key_len == len && memcmp(e->key, key, len) == 0)
            return e->value;
    }
    return NULL;
}

static void toml_table_add(struct toml_value *t, const char *key, size_t len, struct toml_value *v)
{
    if (t->u.tab.len == t->u.tab.cap) {
        t->u.tab.cap = t->u.tab.cap ? 2 * t->u.tab.cap : 8;
        t->u.tab.items = xrealloc(t->u.tab.items, t->u.tab.cap * sizeof(struct toml_entry));
    }
    struct toml_entry *e = &t->u.tab.items[t->u.tab.len++];
    e->key = xmalloc(len + 1);
    memcpy(e->key, key, len);
    e->key[len] = '\0';
    e->key_len = len;
    e->value = v;
}

static void toml_array_push(struct toml_value *a, struct toml_value *v)
{
    if (a->u.arr.len == a->u.arr.cap) {
        a->u.arr.cap = a->u.arr.cap ? 2 * a->u.arr.cap : 8;
        a->u.arr.items = xrealloc(a->u.arr.items, a->u.arr.cap * sizeof(v));
    }
    a->u.arr.items[a->u.arr.len++] = v;
}

/* Closes an inline table and the tables inside it for later additions. */
static void toml_freeze(struct toml_value *t)
{
    t->flags |= TABLE_FROZEN;
    for (size_t i = 0; i < t->u.tab.len; i++)
        if (t->u.tab.items[i].value->type == TOML_TABLE)
            toml_freeze(t->u.tab.items[i].value);
}

/* ---- reading characters ---------------------------------------------------------- */

static int toml_fail(struct toml_parser *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Records the first error at the current position; returns -1 for the caller. */
static int toml_fail(struct toml_parser *p, const char *fmt, ...)
{
    if (p->failed)
        return -1;
    p->failed = true;
    p->err->line = p->line;
    p->err->column = (int)(p->cur - p->line_start) + 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err->message, sizeof(p->err->message), fmt, ap);
    va_end(ap);
    return -1;
}

/* "expected X, found Y" about the byte at the cursor. */
static int toml_fail_found(struct toml_parser *p, const char *expected)
{
    int c = p->cur < p->end ? (unsigned char)*p->cur : -1;
    if (c < 0)
        return toml_fail(p, "%s, found the end of the input", expected);
    if (c == '\n' || (c == '\r' && p->cur + 1 < p->end && p->cur[1] == '\n'))
        return toml_fail(p, "%s, found the end of the line", expected);
    if (c > 0x20 && c < 0x7f)
        return toml_fail(p, "%s, found '%c'", expected, c);
    return toml_fail(p, "%s, found byte 0x%02x", expected, (unsigned)c);
}

/* The byte k places ahead, or -1 past the end. */
static int toml_peek_at(const struct toml_parser *p, size_t k)
{
    return (size_t)(p->end - p->cur) > k ? (unsigned char)p->cur[k] : -1;
}

static int toml_peek(const struct toml_parser *p)
{
    return toml_peek_at(p, 0);
}

static bool toml_eof(const struct toml_parser *p)
{
    return p->cur >= p->end;
}

static void toml_advance(struct toml_parser *p)
{
    if (*p->cur == '\n') {
        p->line++;
        p->line_start = p->cur + 1;
    }
    p->cur++;
}

static bool toml_is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool toml_is_bare_key_char(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || toml_is_digit(c) || c == '_' ||
           c == '-';
}

/* Control characters are not allowed in comments and strings (tab is). */
static bool toml_is_control(int c)
{
    return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f;
}

static bool toml_at_newline(const struct toml_parser *p)
{
    int c = toml_peek(p);
    return c == '\n' || (c == '\r' && toml_peek_at(p, 1) == '\n');
}

static void toml_eat_newline(struct toml_parser *p)
{
    if (toml_peek(p) == '\r')
        toml_advance(p);
    toml_advance(p);
}

static void toml_skip_ws(struct toml_parser *p)
{
    while (toml_peek(p) == ' ' || toml_peek(p) == '\t')
        toml_advance(p);
}

/* Skips a comment, if one starts here, up to (not including) the end of the line. */
static int toml_skip_comment(struct toml_parser *p)
{
    if (toml_peek(p) != '#')
        return 0;
    toml_advance(p);
    while (!toml_eof(p) && !toml_at_newline(p)) {
        if (toml_is_control(toml_peek(p)))
            return toml_fail(p, "control character 0x%02x in comment", toml_peek(p));
        toml_advance(p);
    }
    return 0;
}

/* After a key/value pair or a header: spaces, an optional comment, then a newline. */
static int toml_expect_line_end(struct toml_parser *p)
{
    toml_skip_ws(p);
    if (toml_skip_comment(p) < 0)
        return -1;
    if (toml_eof(p))
        return 0;
    if (!toml_at_newline(p))
        return toml_fail_found(p, "expected a newline");
    toml_eat_newline(p);
    return 0;
}

/* Inside arrays: whitespace, newlines and comments. */
static int toml_skip_blank(struct toml_parser *p)
{
    for (;;) {
        toml_skip_ws(p);
        if (toml_skip_comment(p) < 0)
            return -1;
        if (!toml_at_newline(p))
            return 0;
        toml_eat_newline(p);
    }
}

/* ---- strings --------------------------------------------------------------------- */

static void toml_utf8_encode(struct strbuf *sb, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    strbuf_add(sb, b, n);
}

static int toml_hex_value(int c)
{
    if (toml_is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* \uXXXX or \UXXXXXXXX (the backslash and letter already read): a Unicode scalar. */
static int toml_parse_unicode_escape(struct toml_parser *p, int ndigits, struct strbuf *sb)
{
    uint32_t cp = 0;
    for (int i = 0; i < ndigits; i++) {
        int h = toml_hex_value(toml_peek(p));
        if (h < 0)
            return toml_fail(p, "expected %d hex digits in unicode escape", ndigits);
        cp = cp * 16 + (uint32_t)h;
        toml_advance(p);
    }
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return toml_fail(p, "escape \\%c%0*X is not a Unicode scalar value",
                         ndigits == 4 ? 'u' : 'U', ndigits, (unsigned)cp);
    toml_utf8_encode(sb, cp);
    return 0;
}

/* A backslash escape in a basic string. */
static int toml_parse_escape(struct toml_parser *p, struct strbuf *sb)
{
    toml_advance(p); /* '\\' */
    int c = toml_peek(p);
    const char *simple = "b\bt\tn\nf\fr\r\"\"\\\\";
    for (const char *s = simple; *s; s += 2) {
        if (c == *s) {
            strbuf_addc(sb, s[1]);
            toml_advance(p);
            return 0;
        }
    }
    if (c == 'u' || c == 'U') {
        toml_advance(p);
        return toml_parse_unicode_escape(p, c == 'u' ? 4 : 8, sb);
    }
    if (c < 0x20 || c >= 0x7f)
        return toml_fail(p, "invalid escape sequence in string");
    return toml_fail(p, "invalid escape sequence '\\%c' in string", c);
}

/* One ordinary character of a string body: refuses control characters and bare CR. */
static int toml_string_char(struct toml_parser *p, struct strbuf *sb, bool multiline)
{
    int c = toml_peek(p);
    if (multiline && toml_at_newline(p)) {
        toml_eat_newline(p);
        strbuf_addc(sb, '\n');
        return 0;
    }
    if (c == '\n' || c == '\r')
        return toml_fail(p, "newline in single-line string");
    if (toml_is_control(c))
        return toml_fail(p, "control character 0x%02x in string (write it as an escape)", c);
    strbuf_addc(sb, (char)c);
    toml_advance(p);
    return 0;
}

/* Counts a run of quote characters q at the cursor. */
static size_t toml_quote_run(const struct toml_parser *p, int q)
{
    size_t n = 0;
    while (toml_peek_at(p, n) == q)
        n++;
    return n;
}

/* If a multi-line string closes here (three quotes, of a run of at most five), adds the
 * quotes that belong to the content and returns 1; 0 if not closing; -1 on error. */
static int toml_ml_close(struct toml_parser *p, int q, struct strbuf *sb)
{
    size_t n = toml_quote_run(p, q);
    if (n < 3)
        return 0;
    if (n > 5)
        return toml_fail(p, "too many quotes at the end of a multi-line string");
    for (size_t i = 0; i < n; i++) {
        if (i < n - 3)
            strbuf_addc(sb, (char)q);
        toml_advance(p);
    }
    return 1;
}

/* In a multi-line basic string, a backslash followed by spaces and a newline removes
 * all whitespace and newlines up to the next other character. True if one was eaten. */
static bool toml_line_ending_backslash(struct toml_parser *p)
{
    size_t k = 1;
    while (toml_peek_at(p, k) == ' ' || toml_peek_at(p, k) == '\t')
        k++;
    int c = toml_peek_at(p, k);
    if (!(c == '\n' || (c == '\r' && toml_peek_at(p, k + 1) == '\n')))
        return false;
    for (size_t i = 0; i < k; i++)
        toml_advance(p);
    for (;;) {
        int d = toml_peek(p);
        if (d == ' ' || d == '\t')
            toml_advance(p);
        else if (toml_at_newline(p))
            toml_eat_newline(p);
        else
            return true;
    }
}

static int toml_parse_basic_string(struct toml_parser *p, struct strbuf *sb)
{
    toml_advance(p); /* '"' */
    for (;;) {
        int c = toml_peek(p);
        if (c < 0)
            return toml_fail(p, "unterminated string");
        if (c == '"') {
            toml_advance(p);
            return 0;
        }
        if ((c == '\\' ? toml_parse_escape(p, sb) : toml_string_char(p, sb, false)) < 0)
            return -1;
    }
}

static int toml_parse_ml_basic_string(struct toml_parser *p, struct strbuf *sb)
{
    for (int i = 0; i < 3; i++)
        toml_advance(p);
    if (toml_at_newline(p)) /* a newline right after the opening quotes is trimmed */
        toml_eat_newline(p);
    for (;;) {
        int c = toml_peek(p);
        if (c < 0)
            return toml_fail(p, "unterminated multi-line string");
        int r = c == '"' ? toml_ml_close(p, '"', sb) : 0;
        if (r != 0)
            return r < 0 ? -1 : 0;
        if (c == '\\' && toml_line_ending_backslash(p))
            continue;
        if ((c == '\\' ? toml_parse_escape(p, sb) : toml_string_char(p, sb, true)) < 0)
            return -1;
    }
}

static int toml_parse_literal_string(struct toml_parser *p, struct strbuf *sb)
{
    toml_advance(p); /* '\'' */
    for (;;) {
        int c = toml_peek(p);
        if (c < 0)
            return toml_fail(p, "unterminated literal string");
        if (c == '\'') {
            toml_advance(p);
            return 0;
        }
        if (toml_string_char(p, sb, false) < 0)
            return -1;
    }
}

static int toml_parse_ml_literal_string(struct toml_parser *p, struct strbuf *sb)
{
    for (int i = 0; i < 3; i++)
        toml_advance(p);
    if (toml_at_newline(p))
        toml_eat_newline(p);
    for (;;) {
        int c = toml_peek(p);
        if (c < 0)
            return toml_fail(p, "unterminated multi-line literal string");
        int r = c == '\'' ? toml_ml_close(p, '\'', sb) : 0;
        if (r != 0)
            return r < 0 ? -1 : 0;
        if (toml_string_char(p, sb, true) < 0)
            return -1;
    }
}

/* Any of the four string forms, at a quote character. */
static struct toml_value *toml_parse_string_value(struct toml_parser *p)
{
    int q = toml_peek(p);
    bool multiline = toml_peek_at(p, 1) == q && toml_peek_at(p, 2) == q;
    struct strbuf sb;
    strbuf_init(&sb);
    int r;
    if (q == '"')
        r = multiline ? toml_parse_ml_basic_string(p, &sb) : toml_parse_basic_string(p, &sb);
    else
        r = multiline ? toml_parse_ml_literal_string(p, &sb) : toml_parse_literal_string(p, &sb);
    if (r < 0) {
        strbuf_free(&sb);
        return NULL;
    }
    struct toml_value *v = toml_value_new(TOML_STRING, p->line);
    v->u.str.len = sb.len;
    v->u.str.ptr = strbuf_detach(&sb);
    return v;
}

/* ---- keys ------------------------------------------------------------------------ */

static void toml_key_free(struct toml_key *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->parts[i].s);
    free(k->parts);
    memset(k, 0, sizeof(*k));
}

static void toml_key_push(struct toml_key *k, struct strbuf *sb)
{
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 4;
        k->parts = xrealloc(k->parts, k->cap * sizeof(*k->parts));
    }
    k->parts[k->n].len = sb->len;
    k->parts[k->n].s = strbuf_detach(sb);
    k->n++;
}

/* The first n parts of a key joined with dots, for messages. Caller frees. */
static char *toml_key_text(const struct toml_key *k, size_t n)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n; i++) {
        if (i)
            strbuf_addc(&sb, '.');
        strbuf_adds(&sb, k->parts[i].s);
    }
    return strbuf_detach(&sb);
}

/* A bare key or a single-line quoted key. */
static int toml_parse_simple_key(struct toml_parser *p, struct strbuf *sb)
{
    int c = toml_peek(p);
    if (c == '"' || c == '\'') {
        if (toml_peek_at(p, 1) == c && toml_peek_at(p, 2) == c)
            return toml_fail(p, "a multi-line string cannot be a key");
        return c == '"' ? toml_parse_basic_string(p, sb) : toml_parse_literal_string(p, sb);
    }
    if (!toml_is_bare_key_char(c))
        return toml_fail_found(p, "expected a key");
    while (toml_is_bare_key_char(toml_peek(p))) {
        strbuf_addc(sb, (char)toml_peek(p));
        toml_advance(p);
    }
    return 0;
}

/* key ( ws '.' ws key )* */
static int toml_parse_key(struct toml_parser *p, struct toml_key *k)
{
    struct strbuf sb;
    strbuf_init(&sb);
    k->line = p->line;
    for (;;) {
        if (toml_parse_simple_key(p, &sb) < 0) {
            strbuf_free(&sb);
            return -1;
        }
        toml_key_push(k, &sb);
        toml_skip_ws(p);
        if (toml_peek(p) != '.')
            return 0;
        toml_advance(p);
        toml_skip_ws(p);
    }
}

/* ---- numbers and dates ----------------------------------------------------------- */

static bool toml_is_base_digit(int c, int base)
{
    if (base == 16)
        return toml_hex_value(c) >= 0;
    return c >= '0' && c < '0' + base;
}

/* Copies digits of base from [*s, end) into out, allowing single underscores between
 * digits; advances *s. -1 if there is no digit or an underscore is misplaced. */
static int toml_scan_digits(const char **s, const char *end, int base, struct strbuf *out)
{
    const char *q = *s;
    if (q >= end || !toml_is_base_digit(*q, base))
        return -1;
    while (q < end) {
        if (toml_is_base_digit(*q, base))
            strbuf_addc(out, *q++);
        else if (*q == '_' && q + 1 < end && toml_is_base_digit(q[1], base))
            q++;
        else
            break;
    }
    if (q < end && *q == '_')
        return -1;
    *s = q;
    return 0;
}

/* 0x, 0o or 0b integers: no sign, at most INT64_MAX. */
static struct toml_value *toml_parse_prefixed_int(struct toml_parser *p, const char *tok,
                                                  const char *end)
{
    int base = tok[1] == 'x' ? 16 : tok[1] == 'o' ? 8 : 2;
    const char *q = tok + 2;
    struct strbuf digits;
    strbuf_init(&digits);
    struct toml_value *v = NULL;
    if (toml_scan_digits(&q, end, base, &digits) < 0 || q != end) {
        toml_fail(p, "invalid base-%d integer", base);
        goto out;
    }
    errno = 0;
    unsigned long long n = strtoull(digits.buf, NULL, base);
    if (errno || n > INT64_MAX) {
        toml_fail(p, "integer out of range");
        goto out;
    }
    v = toml_value_new(TOML_INTEGER, p->line);
    v->u.integer = (int64_t)n;
out:
    strbuf_free(&digits);
    return v;
}

/* inf and nan, with an optional sign. NULL if tok is neither. */
static struct toml_value *toml_special_float(struct toml_parser *p, const char *tok, size_t n)
{
    bool neg = n > 0 && tok[0] == '-';
    if (n > 0 && (tok[0] == '-' || tok[0] == '+')) {
        tok++;
        n--;
    }
    if (n != 3 || (memcmp(tok, "inf", 3) != 0 && memcmp(tok, "nan", 3) != 0))
        return NULL;
    struct toml_value *v = toml_value_new(TOML_FLOAT, p->line);
    v->u.flt = tok[0] == 'i' ? INFINITY : NAN;
    if (neg)
        v->u.flt = -v->u.flt;
    return v;
}

/* Converts the cleaned text (digits, sign, '.', 'e') of a decimal integer or float. */
static struct toml_value *toml_decimal_value(struct toml_parser *p, const char *text, bool is_float)
{
    errno = 0;
    struct toml_value *v = toml_value_new(is_float ? TOML_FLOAT : TOML_INTEGER, p->line);
    if (is_float) {
        v->u.flt = strtod(text, NULL);
        if (errno == ERANGE && isinf(v->u.flt)) {
            toml_free(v);
            toml_fail(p, "float out of range");
            return NULL;
        }
    } else {
        long long n = strtoll(text, NULL, 10);
        if (errno == ERANGE) {
            toml_free(v);
            toml_fail(p, "integer out of range");
            return NULL;
        }
        v->u.integer = n;
    }
    return v;
}

/* [+-] int-part [ '.' digits ] [ e [+-] digits ], with no leading zeros in int-part. */
static struct toml_value *toml_parse_decimal(struct toml_parser *p, const char *tok,
                                             const char *end)
{
    struct strbuf text;
    strbuf_init(&text);
    const char *q = tok;
    bool is_float = false;
    struct toml_value *v = NULL;
    if (*q == '+' || *q == '-')
        strbuf_addc(&text, *q++);
    size_t int_start = text.len;
    if (toml_scan_digits(&q, end, 10, &text) < 0)
        goto invalid;
    if (text.buf[int_start] == '0' && text.len - int_start > 1) {
        toml_fail(p, "leading zeros are not allowed in numbers");
        goto out;
    }
    if (q < end && *q == '.') {
        strbuf_addc(&text, *q++);
        if (toml_scan_digits(&q, end, 10, &text) < 0)
            goto invalid;
        is_float = true;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        strbuf_addc(&text, *q++);
        if (q < end && (*q == '+' || *q == '-'))
            strbuf_addc(&text, *q++);
        if (toml_scan_digits(&q, end, 10, &text) < 0)
            goto invalid;
        is_float = true;
    }
    if (q != end)
        goto invalid;
    v = toml_decimal_value(p, text.buf, is_float);
    goto out;
invalid:
    toml_fail(p, "invalid number '%.*s'", (int)(end - tok), tok);
out:
    strbuf_free(&text);
    return v;
}

static bool toml_is_number_char(int c)
{
    return toml_is_bare_key_char(c) || c == '+' || c == '.';
}

/* An integer or float: the token runs up to the next delimiter. */
static struct toml_value *toml_parse_number(struct toml_parser *p)
{
    const char *tok = p->cur;
    while (toml_is_number_char(toml_peek(p)))
        toml_advance(p);
    const char *end = p->cur;
    size_t n = (size_t)(end - tok);
    struct toml_value *v = toml_special_float(p, tok, n);
    if (v)
        return v;
    if (n > 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'o' || tok[1] == 'b'))
        return toml_parse_prefixed_int(p, tok, end);
    if (n == 0) {
        toml_fail(p, "expected a value");
        return NULL;
    }
    return toml_parse_decimal(p, tok, end);
}

/* Exactly n decimal digits. */
static int toml_fixed_digits(struct toml_parser *p, int n, int *out)
{
    *out = 0;
    for (int i = 0; i < n; i++) {
        if (!toml_is_digit(toml_peek(p)))
            return toml_fail(p, "malformed date or time: expected %d digits", n);
        *out = *out * 10 + (toml_peek(p) - '0');
        toml_advance(p);
    }
    return 0;
}

static int toml_expect_char(struct toml_parser *p, int c, const char *what)
{
    if (toml_peek(p) != c)
        return toml_fail(p, "malformed %s: expected '%c'", what, c);
    toml_advance(p);
    return 0;
}

static int toml_days_in_month(int year, int month)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

/* YYYY-MM-DD */
static int toml_parse_date(struct toml_parser *p, struct toml_datetime *dt)
{
    if (toml_fixed_digits(p, 4, &dt->year) < 0 || toml_expect_char(p, '-', "date") < 0 ||
        toml_fixed_digits(p, 2, &dt->month) < 0 || toml_expect_char(p, '-', "date") < 0 ||
        toml_fixed_digits(p, 2, &dt->day) < 0)
        return -1;
    if (dt->month < 1 || dt->month > 12)
        return toml_fail(p, "invalid month %02d", dt->month);
    if (dt->day < 1 || dt->day > toml_days_in_month(dt->year, dt->month))
        return toml_fail(p, "invalid day %04d-%02d-%02d", dt->year, dt->month, dt->day);
    return 0;
}

/* HH:MM:SS[.fraction]; a leap second (60) is allowed as in RFC 3339. */
static int toml_parse_time(struct toml_parser *p, struct toml_datetime *dt)
{
    if (toml_fixed_digits(p, 2, &dt->hour) < 0 || toml_expect_char(p, ':', "time") < 0 ||
        toml_fixed_digits(p, 2, &dt->minute) < 0 || toml_expect_char(p, ':', "time") < 0 ||
        toml_fixed_digits(p, 2, &dt->second) < 0)
        return -1;
    if (dt->hour > 23 || dt->minute > 59 || dt->second > 60)
        return toml_fail(p, "invalid time %02d:%02d:%02d", dt->hour, dt->minute, dt->second);
    if (toml_peek(p) != '.')
        return 0;
    toml_advance(p);
    if (!toml_is_digit(toml_peek(p)))
        return toml_fail(p, "expected digits after '.' in time");
    int scale = 100000000;
    while (toml_is_digit(toml_peek(p))) {
        if (dt->frac_digits < 9) { /* finer than nanoseconds is truncated */
            dt->nanosecond += (toml_peek(p) - '0') * scale;
            scale /= 10;
            dt->frac_digits++;
        }
        toml_advance(p);
    }
    return 0;
}

/* Z or +HH:MM / -HH:MM. Returns 1 if there was an offset, 0 if not, -1 on error. */
static int toml_parse_offset(struct toml_parser *p, struct toml_datetime *dt)
{
    int c = toml_peek(p);
    if (c == 'Z' || c == 'z') {
        toml_advance(p);
        return 1;
    }
    if (c != '+' && c != '-')
        return 0;
    toml_advance(p);
    int h, m;
    if (toml_fixed_digits(p, 2, &h) < 0 || toml_expect_char(p, ':', "time offset") < 0 ||
        toml_fixed_digits(p, 2, &m) < 0)
        return -1;
    if (h > 23 || m > 59)
        return toml_fail(p, "invalid time offset %c%02d:%02d", c, h, m);
    dt->offset_minutes = (c == '-' ? -1 : 1) * (h * 60 + m);
    return 1;
}

/* After a date: 'T', 't' or a space followed by a time. */
static bool toml_time_follows(const struct toml_parser *p)
{
    int c = toml_peek(p);
    if (c == 'T' || c == 't')
        return true;
    return c == ' ' && toml_is_digit(toml_peek_at(p, 1)) && toml_is_digit(toml_peek_at(p, 2)) &&
           toml_peek_at(p, 3) == ':';
}

/* A local date, local date-time or offset date-time. */
static struct toml_value *toml_parse_datetime(struct toml_parser *p)
{
    struct toml_datetime dt = {0};
    enum toml_type type = TOML_DATE_LOCAL;
    if (toml_parse_date(p, &dt) < 0)
        return NULL;
    if (toml_time_follows(p)) {
        toml_advance(p);
        if (toml_parse_time(p, &dt) < 0)
            return NULL;
        int r = toml_parse_offset(p, &dt);
        if (r < 0)
            return NULL;
        type = r ? TOML_DATETIME : TOML_DATETIME_LOCAL;
    }
    struct toml_value *v = toml_value_new(type, p->line);
    v->u.dt = dt;
    return v;
}

static struct toml_value *toml_parse_local_time(struct toml_parser *p)
{
    struct toml_datetime dt = {0};
    if (toml_parse_time(p, &dt) < 0)
        return NULL;
    struct toml_value *v = toml_value_new(TOML_TIME_LOCAL, p->line);
    v->u.dt = dt;
    return v;
}

/* Digits then '-' at position 4 start a date, then ':' at position 2 a time. */
static struct toml_value *toml_parse_number_or_date(struct toml_parser *p)
{
    bool d4 = true;
    for (size_t i = 0; i < 4; i++)
        d4 = d4 && toml_is_digit(toml_peek_at(p, i));
    if (d4 && toml_peek_at(p, 4) == '-')
        return toml_parse_datetime(p);
    if (toml_is_digit(toml_peek(p)) && toml_is_digit(toml_peek_at(p, 1)) &&
        toml_peek_at(p, 2) == ':')
        return toml_parse_local_time(p);
    return toml_parse_number(p);
}

/* ---- values, arrays and inline tables -------------------------------------------- */

static struct toml_value *toml_parse_value(struct toml_parser *p, int depth);
static int toml_parse_keyval(struct toml_parser *p, struct toml_value *table, int depth);

static struct toml_value *toml_parse_bool(struct toml_parser *p)
{
    bool t = toml_peek(p) == 't';
    const char *word = t ? "true" : "false";
    size_t n = strlen(word);
    if ((size_t)(p->end - p->cur) < n || memcmp(p->cur, word, n) != 0 ||
        toml_is_bare_key_char(toml_peek_at(p, n))) {
        toml_fail(p, "invalid value (expected %s?)", word);
        return NULL;
    }
    p->cur += n;
    struct toml_value *v = toml_value_new(TOML_BOOL, p->line);
    v->u.boolean = t;
    return v;
}

/* [ values separated by commas, newlines and comments allowed, trailing comma ok ] */
static struct toml_value *toml_parse_array(struct toml_parser *p, int depth)
{
    struct toml_value *a = toml_value_new(TOML_ARRAY, p->line);
    toml_advance(p); /* '[' */
    for (;;) {
        if (toml_skip_blank(p) < 0)
            goto fail;
        if (toml_peek(p) == ']')
            break;
        int line = p->line;
        struct toml_value *v = toml_parse_value(p, depth + 1);
        if (!v)
            goto fail;
        v->line = line;
        toml_array_push(a, v);
        if (toml_skip_blank(p) < 0)
            goto fail;
        if (toml_peek(p) == ',') {
            toml_advance(p);
            continue;
        }
        if (toml_peek(p) != ']') {
            toml_fail(p, "expected ',' or ']' in array");
            goto fail;
        }
        break;
    }
    toml_advance(p); /* ']' */
    return a;
fail:
    toml_free(a);
    return NULL;
}

/* { key = value, ... } on one line, no trailing comma. */
static struct toml_value *toml_parse_inline_table(struct toml_parser *p, int depth)
{
    struct toml_value *t = toml_value_new(TOML_TABLE, p->line);
    t->flags = TABLE_EXPLICIT;
    toml_advance(p); /* '{' */
    toml_skip_ws(p);
    while (toml_peek(p) != '}') {
        if (toml_parse_keyval(p, t, depth + 1) < 0)
            goto fail;
        toml_skip_ws(p);
        if (toml_peek(p) == ',') {
            toml_advance(p);
            toml_skip_ws(p);
            if (toml_peek(p) == '}') {
                toml_fail(p, "trailing comma in inline table");
                goto fail;
            }
        } else if (toml_peek(p) != '}') {
            toml_fail(p, "expected ',' or '}' in inline table");
            goto fail;
        }
    }
    toml_advance(p); /* '}' */
    toml_freeze(t);
    return t;
fail:
    toml_free(t);
    return NULL;
}

static struct toml_value *toml_parse_value(struct toml_parser *p, int depth)
{
    if (depth > TOML_MAX_DEPTH) {
        toml_fail(p, "arrays and inline tables nested too deeply");
        return NULL;
    }
    int c = toml_peek(p);
    switch (c) {
    case '"':
    case '\'':
        return toml_parse_string_value(p);
    case 't':
    case 'f':
        return toml_parse_bool(p);
    case '[':
        return toml_parse_array(p, depth);
    case '{':
        return toml_parse_inline_table(p, depth);
    default:
        if (toml_is_digit(c) || c == '+' || c == '-' || c == 'i' || c == 'n')
            return toml_parse_number_or_date(p);
        toml_fail_found(p, "expected a value");
        return NULL;
    }
}

/* ---- tables ---------------------------------------------------------------------- */

/* Stores v under a dotted key in table, creating the intermediate tables (which only
 * dotted keys may extend later). Takes v; on error frees it. */
static int toml_insert_dotted(struct toml_parser *p, struct toml_value *table,
                              const struct toml_key *k, struct toml_value *v)
{
    struct toml_value *t = table;
    for (size_t i = 0; i + 1 < k->n; i++) {
        struct toml_value *child = toml_table_find(t, k->parts[i].s, k->parts[i].len);
        if (!child) {
            child = toml_value_new(TOML_TABLE, k->line);
            child->flags = TABLE_DOTTED;
            toml_table_add(t, k->parts[i].s, k->parts[i].len, child);
        } else if (child->type != TOML_TABLE || !(child->flags & TABLE_DOTTED) ||
                   (child->flags & TABLE_FROZEN)) {
            char *name = toml_key_text(k, i + 1);
            toml_fail(p, "cannot add keys to '%s': it is already defined", name);
            free(name);
            toml_free(v);
            return -1;
        }
        t = child;
    }
    const struct toml_key_part *last = &k->parts[k->n - 1];
    if (toml_table_find(t, last->s, last->len)) {
        char *name = toml_key_text(k, k->n);
        toml_fail(p, "duplicate key '%s'", name);
        free(name);
        toml_free(v);
        return -1;
    }
    v->line = k->line;
    toml_table_add(t, last->s, last->len, v);
    return 0;
}

/* key = value, stored in table. */
static int toml_parse_keyval(struct toml_parser *p, struct toml_value *table, int depth)
{
    struct toml_key k = {0};
    if (toml_parse_key(p, &k) < 0)
        goto fail;
    if (toml_peek(p) != '=') {
        toml_fail_found(p, "expected '=' after the key");
        goto fail;
    }
    toml_advance(p);
    toml_skip_ws(p);
    struct toml_value *v = toml_parse_value(p, depth);
    if (!v || toml_insert_dotted(p, table, &k, v) < 0)
        goto fail;
    toml_key_free(&k);
    return 0;
fail:
    toml_key_free(&k);
    return -1;
}

/* Walks the parents of a header key from the root, creating implicit tables; a path
 * through an array of tables continues in its last element. */
static struct toml_value *toml_header_parent(struct toml_parser *p, const struct toml_key *k)
{
    struct toml_value *t = p->root;
    for (size_t i = 0; i + 1 < k->n; i++) {
        struct toml_value *child = toml_table_find(t, k->parts[i].s, k->parts[i].len);
        if (!child) {
            child = toml_value_new(TOML_TABLE, k->line);
            child->flags = TABLE_IMPLICIT;
            toml_table_add(t, k->parts[i].s, k->parts[i].len, child);
        } else if (child->type == TOML_ARRAY && (child->flags & ARRAY_OF_TABLES)) {
            child = child->u.arr.items[child->u.arr.len - 1];
        } else if (child->type != TOML_TABLE || (child->flags & TABLE_FROZEN)) {
            char *name = toml_key_text(k, i + 1);
            toml_fail(p, "'%s' is not a table that can be extended", name);
            free(name);
            return NULL;
        }
        t = child;
    }
    return t;
}

/* [a.b.c]: defines the table (once), which becomes the current table. */
static int toml_open_table(struct toml_parser *p, const struct toml_key *k)
{
    struct toml_value *parent = toml_header_parent(p, k);
    if (!parent)
        return -1;
    const struct toml_key_part *last = &k->parts[k->n - 1];
    struct toml_value *t = toml_table_find(parent, last->s, last->len);
    if (!t) {
        t = toml_value_new(TOML_TABLE, k->line);
        toml_table_add(parent, last->s, last->len, t);
    } else if (t->type != TOML_TABLE || !(t->flags & TABLE_IMPLICIT) ||
               (t->flags & (TABLE_EXPLICIT | TABLE_DOTTED | TABLE_FROZEN))) {
        char *name = toml_key_text(k, k->n);
        toml_fail(p, "table '%s' is already defined", name);
        free(name);
        return -1;
    }
    t->flags = TABLE_EXPLICIT;
    t->line = k->line;
    p->current = t;
    return 0;
}

/* [[a.b.c]]: appends a new table to the array of tables, and makes it current. */
static int toml_open_array_table(struct toml_parser *p, const struct toml_key *k)
{
    struct toml_value *parent = toml_header_parent(p, k);
    if (!parent)
        return -1;
    const struct toml_key_part *last = &k->parts[k->n - 1];
    struct toml_value *a = toml_table_find(parent, last->s, last->len);
    if (!a) {
        a = toml_value_new(TOML_ARRAY, k->line);
        a->flags = ARRAY_OF_TABLES;
        toml_table_add(parent, last->s, last->len, a);
    } else if (a->type != TOML_ARRAY || !(a->flags & ARRAY_OF_TABLES)) {
        char *name = toml_key_text(k, k->n);
        toml_fail(p, "'%s' is already defined and is not an array of tables", name);
        free(name);
        return -1;
    }
    struct toml_value *t = toml_value_new(TOML_TABLE, k->line);
    t->flags = TABLE_EXPLICIT;
    toml_array_push(a, t);
    p->current = t;
    return 0;
}

/* A [table] or [[array of tables]] header line. */
static int toml_parse_header(struct toml_parser *p)
{
    bool array = toml_peek_at(p, 1) == '[';
    toml_advance(p);
    if (array)
        toml_advance(p);
    toml_skip_ws(p);
    struct toml_key k = {0};
    int r = -1;
    if (toml_parse_key(p, &k) < 0)
        goto out;
    if (toml_peek(p) != ']' || (array && toml_peek_at(p, 1) != ']')) {
        toml_fail(p, array ? "expected ']]' after table name" : "expected ']' after table name");
        goto out;
    }
    toml_advance(p);
    if (array)
        toml_advance(p);
    r = array ? toml_open_array_table(p, &k) : toml_open_table(p, &k);
    if (r == 0)
        r = toml_expect_line_end(p);
out:
    toml_key_free(&k);
    return r;
}

/* ---- the document ---------------------------------------------------------------- */

/* Checks that the whole input is UTF-8; on error, points the parser at the bad byte. */
static int toml_check_utf8(struct toml_parser *p)
{
    const unsigned char *s = (const unsigned char *)p->cur;
    size_t n = (size_t)(p->end - p->cur);
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence_len(s + i, n - i);
        if (len == 0) {
            while (p->cur < (const char *)s + i)
                toml_advance(p);
            return toml_fail(p, "invalid UTF-8");
        }
        i += len;
    }
    return 0;
}

static int toml_parse_document(struct toml_parser *p)
{
    if (p->end - p->cur >= 3 && memcmp(p->cur, "\xef\xbb\xbf", 3) == 0)
        p->cur += 3; /* byte order mark */
    p->line_start = p->cur;
    while (!toml_eof(p)) {
        toml_skip_ws(p);
        int c = toml_peek(p);
        int r;
        if (c < 0)
            break;
        if (c == '[') {
            r = toml_parse_header(p);
        } else if (c == '#' || c == '\r' || c == '\n') {
            r = toml_expect_line_end(p);
        } else {
            r = toml_parse_keyval(p, p->current, 0);
            if (r == 0)
                r = toml_expect_line_end(p);
        }
        if (r < 0)
            return -1;
    }
    return 0;
}

struct toml_value *toml_parse(const char *text, size_t len, struct toml_error *err)
{
    struct toml_parser p = {
        .cur = text,
        .end = text + len,
        .line_start = text,
        .line = 1,
        .err = err,
    };
    memset(err, 0, sizeof(*err));
    p.root = toml_value_new(TOML_TABLE, 1);
    p.root->flags = TABLE_EXPLICIT;
    p.current = p.root;
    if (toml_check_utf8(&p) < 0) {
        toml_free(p.root);
        return NULL;
    }
    if (toml_parse_document(&p) < 0) {
        toml_free(p.root);
        return NULL;
    }
    return p.root;
}

/* ---- accessors ------------------------------------------------------------------- */

enum toml_type toml_type_of(const struct toml_value *v)
{
    return v->type;
}

const char *toml_type_name(enum toml_type type)
{
    static const char *const names[] = {
        [TOML_STRING] = "string",         [TOML_INTEGER] = "integer",
        [TOML_FLOAT] = "float",           [TOML_BOOL] = "bool",
        [TOML_DATETIME] = "datetime",     [TOML_DATETIME_LOCAL] = "datetime-local",
        [TOML_DATE_LOCAL] = "date-local", [TOML_TIME_LOCAL] = "time-local",
        [TOML_ARRAY] = "array",           [TOML_TABLE] = "table",
    };
    return (unsigned)type < sizeof(names) / sizeof(names[0]) ? names[type] : "unknown";
}

int toml_line(const struct toml_value *v)
{
    return v->line;
}

size_t toml_table_len(const struct toml_value *table)
{
    return table->type == TOML_TABLE ? table->u.tab.len : 0;
}

const char *toml_table_key(const struct toml_value *table, size_t i, size_t *key_len)
{
    if (key_len)
        *key_len = table->u.tab.items[i].key_len;
    return table->u.tab.items[i].key;
}

const struct toml_value *toml_table_value(const struct toml_value *table, size_t i)
{
    return table->u.tab.items[i].value;
}

const struct toml_value *toml_table_get(const struct toml_value *table, const char *key)
{
    if (table->type != TOML_TABLE)
        return NULL;
    return toml_table_find(table, key, strlen(key));
}

size_t toml_array_len(const struct toml_value *array)
{
    return array->type == TOML_ARRAY ? array->u.arr.len : 0;
}

const struct toml_value *toml_array_at(const struct toml_value *array, size_t i)
{
    return array->u.arr.items[i];
}

const char *toml_string(const struct toml_value *v, size_t *len)
{
    if (len)
        *len = v->u.str.len;
    return v->u.str.ptr;
}

int64_t toml_integer(const struct toml_value *v)
{
    return v->u.integer;
}

double toml_float(const struct toml_value *v)
{
    return v->u.flt;
}

bool toml_bool(const struct toml_value *v)
{
    return v->u.boolean;
}

const struct toml_datetime *toml_datetime(const struct toml_value *v)
{
    return &v->u.dt;
}

int toml_datetime_format(const struct toml_value *v, char *buf, size_t size)
{
    const struct toml_datetime *d = &v->u.dt;
    struct strbuf sb;
    strbuf_init(&sb);
    if (v->type != TOML_TIME_LOCAL)
        strbuf_addf(&sb, "%04d-%02d-%02d", d->year, d->month, d->day);
    if (v->type == TOML_DATETIME || v->type == TOML_DATETIME_LOCAL)
        strbuf_addc(&sb, 'T');
    if (v->type != TOML_DATE_LOCAL) {
        strbuf_addf(&sb, "%02d:%02d:%02d", d->hour, d->minute, d->second);
        if (d->frac_digits > 0) {
            char frac[16];
            snprintf(frac, sizeof(frac), "%09d", d->nanosecond);
            strbuf_addf(&sb, ".%.*s", d->frac_digits, frac);
        }
    }
    if (v->type == TOML_DATETIME) {
        int off = d->offset_minutes;
        if (off == 0)
            strbuf_addc(&sb, 'Z');
        else
            strbuf_addf(&sb, "%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 60, abs(off) % 60);
    }
    int n = snprintf(buf, size, "%s", sb.buf ? sb.buf : "");
    strbuf_free(&sb);
    return n;
}
