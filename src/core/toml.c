/* toml: a strict TOML 1.0.0 reader (see toml.h).
 *
 * A recursive-descent parser over a byte buffer. The whole input is first checked to be
 * UTF-8; then the document is read line by line into a tree of values. This file holds
 * the tree, arrays, inline tables, headers and the document; toml_lex.c reads characters,
 * strings and keys, toml_scalar.c numbers, dates and booleans (toml_internal.h is what the
 * three share). What makes TOML tricky is not the syntax but which later lines may add
 * keys to which tables, so every table records how it came to exist (the TABLE_* flags
 * below) and the rules of the specification are applied when a header or a dotted key
 * reaches it:
 *   - a [header] may define a table once; tables that only exist as parents of earlier
 *     headers (implicit) may still be defined by their own header later;
 *   - tables made by dotted keys (a.b = 1) may not be defined again by a [header], but a
 *     header may create sub-tables inside them;
 *   - dotted keys may only extend tables that dotted keys created in the same table;
 *   - inline tables and arrays written as values are closed: nothing may extend them;
 *   - [[header]] appends to an array of tables; a [header] path that crosses one refers
 *     to its last element. */
#include "toml_internal.h"

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

/* ---- values ---------------------------------------------------------------------- */

struct toml_value *toml_value_new(enum toml_type type, int line)
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

/* ---- values, arrays and inline tables -------------------------------------------- */

static struct toml_value *toml_parse_value(struct toml_parser *p, int depth);
static int toml_parse_keyval(struct toml_parser *p, struct toml_value *table, int depth);

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
