/* toml: a strict TOML 1.0.0 reader. toml_parse turns a buffer into a tree of tables,
 * arrays and scalar values; every value remembers its type and the line where its key
 * was defined, so that callers can report "FILE:LINE: ..." about settings. Invalid
 * documents (anything the TOML 1.0.0 specification rejects) give NULL and an error
 * with line and column. The tree is read-only once parsed; toml_free releases it. */
#ifndef GFLOW_TOML_H
#define GFLOW_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum toml_type {
    TOML_STRING,
    TOML_INTEGER,
    TOML_FLOAT,
    TOML_BOOL,
    TOML_DATETIME,       /* offset date-time: 1979-05-27T07:32:00Z */
    TOML_DATETIME_LOCAL, /* 1979-05-27T07:32:00 */
    TOML_DATE_LOCAL,     /* 1979-05-27 */
    TOML_TIME_LOCAL,     /* 07:32:00 */
    TOML_ARRAY,
    TOML_TABLE,
};

/* The fields that the value's type does not have are 0. */
struct toml_datetime {
    int year, month, day;
    int hour, minute, second;
    int nanosecond;     /* fraction of the second, truncated to nanoseconds */
    int frac_digits;    /* digits of the fraction as written (at most 9); 0 = none */
    int offset_minutes; /* TOML_DATETIME only: offset from UTC; "Z" is 0 */
};

struct toml_error {
    int line;   /* 1-based */
    int column; /* 1-based, in bytes */
    char message[256];
};

struct toml_value; /* opaque */

/* Parses len bytes of text (need not be NUL-terminated). Returns the root table, or
 * NULL with *err filled in. */
struct toml_value *toml_parse(const char *text, size_t len, struct toml_error *err);
void toml_free(struct toml_value *v);

enum toml_type toml_type_of(const struct toml_value *v);
const char *toml_type_name(enum toml_type type); /* "string", "integer", ... */
/* The line where the value's key (or table header) was written; for an array element,
 * the line where the element starts. */
int toml_line(const struct toml_value *v);

/* Tables keep their keys in the order they were defined. Keys may contain NUL bytes
 * (from "\u0000"), hence the optional length out-parameter. */
size_t toml_table_len(const struct toml_value *table);
const char *toml_table_key(const struct toml_value *table, size_t i, size_t *key_len);
const struct toml_value *toml_table_value(const struct toml_value *table, size_t i);
/* The value of key in table, or NULL. */
const struct toml_value *toml_table_get(const struct toml_value *table, const char *key);

size_t toml_array_len(const struct toml_value *array);
const struct toml_value *toml_array_at(const struct toml_value *array, size_t i);

/* Scalar accessors; the value must have the matching type. Strings are NUL-terminated
 * but may also contain NUL bytes; *len (if not NULL) is their length. */
const char *toml_string(const struct toml_value *v, size_t *len);
int64_t toml_integer(const struct toml_value *v);
double toml_float(const struct toml_value *v);
bool toml_bool(const struct toml_value *v);
/* For the four date/time types. */
const struct toml_datetime *toml_datetime(const struct toml_value *v);

/* Writes a date/time value in RFC 3339 / TOML form ("1979-05-27T07:32:00.5-07:00",
 * "07:32:00", ...) into buf. Returns the length snprintf would have written. */
int toml_datetime_format(const struct toml_value *v, char *buf, size_t size);

#endif
