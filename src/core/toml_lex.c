/* toml_lex: the characters of a TOML document, for the reader of toml.c (shared through
 * toml_internal.h, with the cursor): errors at the cursor, whitespace, comments and
 * newlines, the four string forms and their escapes (Unicode scalar values, written as
 * UTF-8), and keys (bare, quoted, dotted). */
#include "toml_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- reading characters ---------------------------------------------------------- */

/* Records the first error at the current position; returns -1 for the caller. */
int toml_fail(struct toml_parser *p, const char *fmt, ...)
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
int toml_fail_found(struct toml_parser *p, const char *expected)
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

void toml_skip_ws(struct toml_parser *p)
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
int toml_expect_line_end(struct toml_parser *p)
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
int toml_skip_blank(struct toml_parser *p)
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

int toml_hex_value(int c)
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
struct toml_value *toml_parse_string_value(struct toml_parser *p)
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

void toml_key_free(struct toml_key *k)
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
char *toml_key_text(const struct toml_key *k, size_t n)
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
int toml_parse_key(struct toml_parser *p, struct toml_key *k)
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
