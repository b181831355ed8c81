/* toml_scalar: the scalar values of TOML other than strings, for the reader of toml.c
 * (toml_internal.h): integers (decimal, 0x, 0o, 0b, with underscores between digits,
 * within int64), floats (with inf and nan), the four date and time forms (checked
 * against the calendar), and booleans. */
#include "toml_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

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
struct toml_value *toml_parse_number_or_date(struct toml_parser *p)
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

/* ---- booleans -------------------------------------------------------------------- */

struct toml_value *toml_parse_bool(struct toml_parser *p)
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
