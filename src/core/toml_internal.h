/* toml_internal: what the files of the TOML reader share; the rest of the code uses toml.h.
 *   toml.c         the tree of values, arrays and inline tables, [headers] and which
 *                  tables may be extended, the document, the accessors;
 *   toml_lex.c     errors, whitespace, comments and newlines, strings, keys;
 *   toml_scalar.c  numbers, dates and times, booleans.
 * The cursor (peek, advance) and the character classes are defined here, inline, so that
 * the loops of all three files still inline them. */
#ifndef GFLOW_TOML_INTERNAL_H
#define GFLOW_TOML_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "toml.h"

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

/* ---- toml.c ---- */

struct toml_value *toml_value_new(enum toml_type type, int line);

/* ---- the cursor ---- */

/* The byte k places ahead, or -1 past the end. */
static inline int toml_peek_at(const struct toml_parser *p, size_t k)
{
    return (size_t)(p->end - p->cur) > k ? (unsigned char)p->cur[k] : -1;
}

static inline int toml_peek(const struct toml_parser *p)
{
    return toml_peek_at(p, 0);
}

static inline bool toml_eof(const struct toml_parser *p)
{
    return p->cur >= p->end;
}

static inline void toml_advance(struct toml_parser *p)
{
    if (*p->cur == '\n') {
        p->line++;
        p->line_start = p->cur + 1;
    }
    p->cur++;
}

static inline bool toml_is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static inline bool toml_is_bare_key_char(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || toml_is_digit(c) || c == '_' ||
           c == '-';
}

/* ---- toml_lex.c ---- */

/* Records the first error at the current position; returns -1 for the caller. */
int toml_fail(struct toml_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "expected X, found Y" about the byte at the cursor. */
int toml_fail_found(struct toml_parser *p, const char *expected);
void toml_skip_ws(struct toml_parser *p);
/* After a key/value pair or a header: spaces, an optional comment, then a newline. */
int toml_expect_line_end(struct toml_parser *p);
/* Inside arrays: whitespace, newlines and comments. */
int toml_skip_blank(struct toml_parser *p);
/* The value of a hex digit, or -1. */
int toml_hex_value(int c);
/* Any of the four string forms, at a quote character. */
struct toml_value *toml_parse_string_value(struct toml_parser *p);
void toml_key_free(struct toml_key *k);
/* The first n parts of a key joined with dots, for messages. Caller frees. */
char *toml_key_text(const struct toml_key *k, size_t n);
/* key ( ws '.' ws key )* */
int toml_parse_key(struct toml_parser *p, struct toml_key *k);

/* ---- toml_scalar.c ---- */

/* A number, a date or a time (at a digit, a sign, 'i' or 'n'). */
struct toml_value *toml_parse_number_or_date(struct toml_parser *p);
/* true or false. */
struct toml_value *toml_parse_bool(struct toml_parser *p);

#endif
