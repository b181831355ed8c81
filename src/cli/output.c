/* output: tables, CSV, JSON and job field display for the command-line programs. */
#include "output.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>

#include "gpuinfo.h"
#include "parse.h"
#include "termtext.h"
#include "timefmt.h"
#include "util.h"

/* The cells' text lies end to end in one buffer, row by row, each cell ended by a NUL
 * (no allocation per cell, and no index: a 10,000-job listing has 60,000 cells, read back
 * in order; fresh memory is dear here, ~15 us a page on this VM). */
struct output_table {
    size_t ncols;
    char **headers;
    struct strbuf text;
    size_t cell_start; /* where the cell being written starts in text */
    size_t ncells;
    size_t col;            /* the column of the next cell (ncells % ncols, without a division) */
    size_t *width;         /* per column: the widest cell so far */
    size_t max_width;      /* 0, or the terminal's width: cells are cut to fit */
    bool plain;            /* every cell is printable ASCII: its width is its length */
    struct strbuf scratch; /* a cell being escaped (termtext) */
    output_cell_style_fn **style; /* per column: NULL, or the cell's colour */
};

int output_format_parse(const char *s, enum output_format *out)
{
    if (!strcasecmp(s, "table"))
        *out = OUTPUT_TABLE;
    else if (!strcasecmp(s, "json"))
        *out = OUTPUT_JSON;
    else if (!strcasecmp(s, "csv"))
        *out = OUTPUT_CSV;
    else
        return -1;
    return 0;
}

/* Display columns of code point c: 0 for combining marks, 2 for East Asian wide and
 * full-width characters (CJK, Hangul, full-width forms, most emoji), else 1. The common
 * ranges of Unicode's EastAsianWidth W/F: enough for names, no locale needed. */
static size_t codepoint_width(uint32_t c)
{
    if ((c >= 0x300 && c <= 0x36F) || (c >= 0x200B && c <= 0x200F) || c == 0xFE0F)
        return 0;
    if ((c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) ||
        (c >= 0x3041 && c <= 0x33FF) || (c >= 0x3400 && c <= 0x4DBF) ||
        (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xA000 && c <= 0xA4CF) ||
        (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
        (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
        (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
        (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD))
        return 2;
    return 1;
}

/* Decodes the UTF-8 sequence at s (len bytes left): the code point and its length in
 * bytes; a byte that starts no valid sequence counts as a one-column character. */
static uint32_t utf8_next(const char *s, size_t len, size_t *bytes)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = u[0] < 0x80 ? 1 : utf8_sequence_len(u, len);
    if (n <= 1) {
        *bytes = 1;
        return u[0] < 0x80 ? u[0] : '?';
    }
    uint32_t c = u[0] & (0x7F >> n);
    for (size_t i = 1; i < n; i++)
        c = (c << 6) | (u[i] & 0x3F);
    *bytes = n;
    return c;
}

static size_t wide_text_width(const char *s, size_t len)
{
    size_t w = 0;
    for (size_t i = 0, n; i < len; i += n)
        w += codepoint_width(utf8_next(s + i, len - i, &n));
    return w;
}

/* Display width in terminal columns. ASCII text (nearly every cell) costs one pass over
 * its bytes; only text with other bytes is decoded. *plain: the text is printable ASCII. */
static size_t text_width_plain(const char *s, size_t len, bool *plain)
{
    bool other = false; /* a byte outside ' '..'~' */
    for (size_t i = 0; i < len; i++)
        other |= (unsigned char)(s[i] - 0x20) >= 0x5f;
    *plain = !other;
    for (size_t i = 0; other && i < len; i++)
        if ((unsigned char)s[i] >= 0x80)
            return wide_text_width(s, len);
    return len;
}

static size_t text_width(const char *s, size_t len)
{
    bool plain;
    return text_width_plain(s, len, &plain);
}

struct output_table *output_table_new(size_t ncols, const char *const *headers)
{
    struct output_table *t = xcalloc(1, sizeof(*t));
    t->ncols = ncols;
    t->headers = xcalloc(ncols, sizeof(char *));
    t->width = xcalloc(ncols ? ncols : 1, sizeof(size_t));
    t->style = xcalloc(ncols ? ncols : 1, sizeof(*t->style));
    t->plain = true;
    for (size_t i = 0; i < ncols; i++) {
        bool plain;
        t->headers[i] = xstrdup(headers[i]);
        t->width[i] = text_width_plain(headers[i], strlen(headers[i]), &plain);
        t->plain = t->plain && plain;
    }
    strbuf_init(&t->text);
    strbuf_init(&t->scratch);
    return t;
}

void output_table_free(struct output_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncols; i++)
        free(t->headers[i]);
    free(t->headers);
    strbuf_free(&t->text);
    strbuf_free(&t->scratch);
    free(t->width);
    free(t->style);
    free(t);
}

struct strbuf *output_table_cell(struct output_table *t)
{
    return &t->text;
}

void output_table_reserve(struct output_table *t, size_t rows, size_t bytes)
{
    size_t room = bytes + rows * t->ncols;
    strbuf_reserve(&t->text, room);
    /* The whole pages of the new room; best effort (MADV_POPULATE_WRITE is Linux 5.14). */
    uintptr_t page = 4096, start = (uintptr_t)(t->text.buf + t->text.len);
    uintptr_t from = (start + page - 1) & ~(page - 1), to = (start + room) & ~(page - 1);
    if (to > from)
        madvise((void *)from, to - from, MADV_POPULATE_WRITE);
}

/* A cell with characters a terminal acts on (controls, bidi overrides: other users' job
 * names and commands) is rewritten with visible escapes, so that its width is what the
 * terminal shows and CSV carries no raw control either. */
static void escape_cell(struct output_table *t)
{
    const char *s = t->text.buf + t->cell_start;
    size_t len = t->text.len - t->cell_start;
    if (termtext_is_safe(s, len, 0))
        return;
    strbuf_reset(&t->scratch);
    strbuf_add(&t->scratch, s, len);
    t->text.len = t->cell_start;
    termtext_escape(&t->text, t->scratch.buf, t->scratch.len, 0);
}

void output_table_cell_end(struct output_table *t)
{
    bool plain;
    size_t w = text_width_plain(t->text.buf + t->cell_start, t->text.len - t->cell_start, &plain);
    if (!plain) {
        escape_cell(t);
        w = text_width_plain(t->text.buf + t->cell_start, t->text.len - t->cell_start, &plain);
    }
    t->plain = t->plain && plain;
    if (w > t->width[t->col])
        t->width[t->col] = w;
    if (++t->col == t->ncols)
        t->col = 0;
    strbuf_addc(&t->text, '\0');
    t->cell_start = t->text.len;
    t->ncells++;
}

void output_table_add_row_owned(struct output_table *t, char **cells)
{
    for (size_t i = 0; i < t->ncols; i++) {
        strbuf_adds(&t->text, cells[i] ? cells[i] : "-");
        free(cells[i]);
        output_table_cell_end(t);
    }
}

size_t output_table_rows(const struct output_table *t)
{
    return t->ncols ? t->ncells / t->ncols : 0;
}

/* The cells in order, the headers first. */
struct cell_reader {
    const struct output_table *t;
    size_t header; /* the next header, until all are read */
    const char *next;
};

static void cell_reader_init(struct cell_reader *cr, const struct output_table *t)
{
    *cr = (struct cell_reader){.t = t, .next = t->text.buf};
}

static const char *cell_next(struct cell_reader *cr, size_t *len)
{
    const char *s = cr->header < cr->t->ncols ? cr->t->headers[cr->header++] : cr->next;
    *len = strlen(s);
    if (s == cr->next)
        cr->next += *len + 1;
    return s;
}

static void put_spaces(struct strbuf *o, size_t n)
{
    static const char spaces[] = "                                                                ";
    while (n > 0) {
        size_t k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;
        strbuf_add(o, spaces, k);
        n -= k;
    }
}

/* The text is built in a buffer written out each time it passes 64 KiB, and at the end. */
static void flush_out(struct strbuf *o, FILE *out)
{
    fwrite(o->buf, 1, o->len, out);
    strbuf_free(o);
}

void output_table_set_max_width(struct output_table *t, size_t columns)
{
    t->max_width = columns;
}

void output_table_set_style(struct output_table *t, size_t col, output_cell_style_fn *style)
{
    if (col < t->ncols)
        t->style[col] = style;
}

/* Column widths that fit max_width: the widest column gives up a column at a time (so a
 * long name or reason goes first, short columns such as TIME last), none below its
 * header's width; a table that cannot fit stays as narrow as that. */
static size_t *fitted_widths(const struct output_table *t)
{
    size_t *w = xmalloc((t->ncols ? t->ncols : 1) * sizeof(*w));
    size_t total = t->ncols ? 2 * (t->ncols - 1) : 0;
    for (size_t c = 0; c < t->ncols; c++) {
        w[c] = t->width[c];
        total += w[c];
    }
    while (t->max_width && total > t->max_width) {
        size_t widest = t->ncols;
        for (size_t c = 0; c < t->ncols; c++) {
            size_t floor = text_width(t->headers[c], strlen(t->headers[c]));
            if (w[c] > (floor < 1 ? 1 : floor) && (widest == t->ncols || w[c] > w[widest]))
                widest = c;
        }
        if (widest == t->ncols)
            break;
        w[widest]--;
        total--;
    }
    return w;
}

/* The first bytes of s that fit in width columns with an ellipsis after them; the
 * columns they take in *used. */
static size_t fitting_prefix(const char *s, size_t len, size_t width, size_t *used)
{
    size_t i = 0, w = 0;
    while (i < len) {
        size_t n;
        size_t cw = codepoint_width(utf8_next(s + i, len - i, &n));
        if (w + cw + 1 > width)
            break;
        w += cw;
        i += n;
    }
    *used = w;
    return i;
}

/* A row of printable ASCII cells that need no cutting and no colour, copied and padded
 * straight into o: the common case (a listing to a file), 60,000 cells for 10,000 jobs. */
static void put_plain_row(struct strbuf *o, const struct output_table *t, struct cell_reader *cr)
{
    size_t room = 1;
    for (size_t c = 0; c < t->ncols; c++)
        room += t->width[c] + 2;
    strbuf_reserve(o, room);
    char *p = o->buf + o->len;
    for (size_t c = 0; c < t->ncols; c++) {
        size_t len;
        const char *s = cell_next(cr, &len);
        memcpy(p, s, len);
        p += len;
        if (c + 1 < t->ncols) { /* plain: len is its width, at most the column's */
            memset(p, ' ', t->width[c] - len + 2);
            p += t->width[c] - len + 2;
        }
    }
    *p++ = '\n';
    *p = '\0';
    o->len = (size_t)(p - o->buf);
}

static bool any_style(const struct output_table *t)
{
    for (size_t c = 0; c < t->ncols; c++)
        if (t->style[c])
            return true;
    return false;
}

/* A row in general: cells cut to a terminal's width (with an ellipsis), coloured (the
 * cells were escaped as they were added); r 0 is the headers (never coloured). */
static void put_row(struct strbuf *o, const struct output_table *t, struct cell_reader *cr,
                    const size_t *width, size_t r)
{
    for (size_t c = 0; c < t->ncols; c++) {
        size_t len;
        const char *s = cell_next(cr, &len);
        size_t w = t->plain ? len : text_width(s, len);
        const char *style = r && t->style[c] ? t->style[c](s, len) : NULL;
        if (style)
            strbuf_adds(o, style);
        if (w > width[c]) { /* only when fitting a terminal */
            len = fitting_prefix(s, len, width[c], &w);
            strbuf_add(o, s, len);
            strbuf_adds(o, "\u2026");
            w++;
        } else {
            strbuf_add(o, s, len);
        }
        if (style)
            strbuf_adds(o, "\033[0m");
        if (c + 1 < t->ncols)
            put_spaces(o, width[c] - w + 2);
    }
    strbuf_addc(o, '\n');
}

void output_table_print(const struct output_table *t, FILE *out)
{
    struct strbuf o;
    strbuf_init(&o);
    size_t rows = output_table_rows(t);
    size_t *width = t->max_width ? fitted_widths(t) : t->width;
    struct cell_reader cr;
    cell_reader_init(&cr, t);
    bool plain_rows = t->plain && !t->max_width && !any_style(t);
    for (size_t r = 0; r <= rows; r++) {
        if (plain_rows)
            put_plain_row(&o, t, &cr);
        else
            put_row(&o, t, &cr, width, r);
        if (o.len >= 1 << 16) { /* a small buffer, written as it fills */
            fwrite(o.buf, 1, o.len, out);
            strbuf_reset(&o);
        }
    }
    if (width != t->width)
        free(width);
    flush_out(&o, out);
}

static void put_csv_field(struct strbuf *o, const char *s, size_t len)
{
    bool quote = false;
    for (size_t i = 0; i < len && !quote; i++)
        quote = s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n';
    if (!quote) {
        strbuf_add(o, s, len);
        return;
    }
    strbuf_addc(o, '"');
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"')
            strbuf_addc(o, '"');
        strbuf_addc(o, s[i]);
    }
    strbuf_addc(o, '"');
}

void output_table_print_csv(const struct output_table *t, FILE *out)
{
    struct strbuf o;
    strbuf_init(&o);
    size_t rows = output_table_rows(t);
    struct cell_reader cr;
    cell_reader_init(&cr, t);
    for (size_t r = 0; r <= rows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            size_t len;
            const char *s = cell_next(&cr, &len);
            if (c)
                strbuf_addc(&o, ',');
            put_csv_field(&o, s, len);
        }
        strbuf_addc(&o, '\n');
        if (o.len >= 1 << 16) { /* a small buffer, written as it fills */
            fwrite(o.buf, 1, o.len, out);
            strbuf_reset(&o);
        }
    }
    flush_out(&o, out);
}

void output_json(const json_t *j, FILE *out)
{
    /* jansson writes reals with 17 digits (0.023189999999999999); gflow's (serde's)
     * shortest form reads back the same. */
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    char *shorter = json_text_short_reals(text ? text : "null");
    fputs(shorter, out);
    fputc('\n', out);
    free(shorter);
    free(text);
}

/* Whether a string must be quoted to stay a string in YAML: empty, words YAML reads as
 * null/bool, anything that looks like a number, leading or trailing blanks, and
 * characters with a meaning in YAML. */
static bool yaml_needs_quotes(const char *s)
{
    static const char *const words[] = {"null",  "Null",  "NULL",  "~",   "true", "True", "TRUE",
                                        "false", "False", "FALSE", "yes", "no",   "on",   "off",
                                        "Yes",   "No",    "On",    "Off", "y",    "n"};
    if (!*s || s[0] == ' ' || s[strlen(s) - 1] == ' ' ||
        strchr("-?:,[]{}#&*!|>'\"%@`.+0123456789", s[0]))
        return true;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (!strcmp(s, words[i]))
            return true;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\' ||
            (*p == ':' && (!p[1] || p[1] == ' ')) || (*p == '#' && p > s && p[-1] == ' '))
            return true;
    return false;
}

/* A scalar: JSON's own text for numbers, booleans and null; a string plain or in
 * double quotes (JSON's escapes are YAML's). */
static void yaml_scalar(const json_t *v, FILE *out)
{
    if (json_is_string(v) && !yaml_needs_quotes(json_string_value(v))) {
        fputs(json_string_value(v), out);
        return;
    }
    char *text = json_dumps(v, JSON_ENCODE_ANY);
    fputs(text ? text : "null", out);
    free(text);
}

static bool yaml_is_block(const json_t *v)
{
    return (json_is_object(v) && json_object_size(v)) || (json_is_array(v) && json_array_size(v));
}

/* v at indent; the caller has written the key or the "- " before it. */
static void yaml_value(const json_t *v, int indent, bool after_dash, FILE *out)
{
    if (!yaml_is_block(v)) {
        if (json_is_object(v))
            fputs("{}", out);
        else if (json_is_array(v))
            fputs("[]", out);
        else
            yaml_scalar(v, out);
        fputc('\n', out);
        return;
    }
    bool first = true;
    if (json_is_object(v)) {
        const char *key;
        const json_t *item;
        if (!after_dash)
            fputc('\n', out);
        json_object_foreach ((json_t *)v, key, item) {
            if (!first || !after_dash)
                fprintf(out, "%*s", indent, "");
            first = false;
            json_t *k = json_string(key);
            yaml_scalar(k, out);
            json_decref(k);
            fputc(':', out);
            if (!yaml_is_block(item))
                fputc(' ', out);
            yaml_value(item, indent + 2, false, out);
        }
        return;
    }
    size_t i;
    const json_t *item;
    if (!after_dash)
        fputc('\n', out);
    json_array_foreach (v, i, item) {
        if (!first || !after_dash)
            fprintf(out, "%*s", indent, "");
        first = false;
        fputs("- ", out);
        yaml_value(item, indent + 2, true, out);
    }
}

void output_yaml(const json_t *j, FILE *out)
{
    if (yaml_is_block(j))
        yaml_value(j, 0, true, out);
    else
        yaml_value(j, 0, false, out);
}

char *output_time(double t)
{
    return format_time(t);
}

char *output_json_list(const json_t *arr, const char *if_empty)
{
    struct strbuf sb;
    strbuf_init(&sb);
    size_t i;
    const json_t *v;
    json_array_foreach (arr, i, v) {
        if (i)
            strbuf_addc(&sb, ',');
        if (json_is_string(v))
            strbuf_adds(&sb, json_string_value(v));
        else if (json_is_integer(v))
            strbuf_addf(&sb, "%lld", (long long)json_integer_value(v));
        else
            strbuf_addc(&sb, '?');
    }
    if (!sb.len)
        strbuf_adds(&sb, if_empty);
    return strbuf_detach(&sb);
}

char *output_job_elapsed(const struct job *j, double now)
{
    if (j->start_time <= 0)
        return xstrdup("-"); /* never started */
    double secs = 0;
    if (j->end_time > 0)
        secs = j->end_time - j->start_time;
    else if (j->state == JOB_RUNNING)
        secs = now - j->start_time;
    return format_duration(secs > 0 ? (int64_t)secs : 0);
}

char *output_job_time_limit(const struct job *j)
{
    return j->time_limit > 0 ? format_duration(j->time_limit) : xstrdup("UNLIMITED");
}

char *output_job_exit_code(const struct job *j)
{
    if (j->signal > 0)
        return xstrdup(job_signal_name(j->signal));
    if (j->exit_code >= 0)
        return xasprintf("%d", j->exit_code);
    return xstrdup("-");
}

/* The reason a job without a recorded one shows: why a pending or held job waits. */
static const char *default_reason(const struct job *j)
{
    if (j->state == JOB_QUEUED)
        return "Priority";
    if (j->state == JOB_HELD)
        return "JobHeldUser";
    return NULL;
}

char *output_job_reason(const struct job *j)
{
    if (j->reason != JOB_REASON_NONE)
        return job_reason_string(j);
    const char *r = default_reason(j);
    return r ? xstrdup(r) : NULL;
}

void output_job_nodelist(struct strbuf *sb, const struct job *j)
{
    if (j->state == JOB_RUNNING && j->mig_uuids && *j->mig_uuids) {
        strbuf_adds(sb, j->mig_uuids); /* MIG instances are known by UUID only */
    } else if (j->state == JOB_RUNNING && j->gpu_mask) {
        char *gpus = gpu_mask_format(j->gpu_mask);
        strbuf_adds(sb, gpus);
        free(gpus);
    } else if (j->state == JOB_RUNNING) {
        strbuf_adds(sb, "-");
    } else if (j->reason != JOB_REASON_NONE) {
        strbuf_addc(sb, '(');
        job_reason_append(sb, j->reason, j->reason_job, j->reason_detail);
        strbuf_addc(sb, ')');
    } else {
        const char *reason = default_reason(j);
        if (reason) {
            strbuf_addc(sb, '(');
            strbuf_adds(sb, reason);
            strbuf_addc(sb, ')');
        } else {
            strbuf_adds(sb, "-");
        }
    }
}

char *output_gpu_request(int64_t gpus, bool shared, int64_t gpu_memory_mb)
{
    if (shared)
        return gpu_memory_mb > 0 ? xasprintf("%lld (shared, %lld MiB each)", (long long)gpus,
                                             (long long)gpu_memory_mb)
                                 : xasprintf("%lld (shared)", (long long)gpus);
    if (gpu_memory_mb > 0)
        return xasprintf("%lld (%lld MiB free each)", (long long)gpus, (long long)gpu_memory_mb);
    return xasprintf("%lld", (long long)gpus);
}

char *output_mib_or_unknown(int64_t mib)
{
    return mib < 0 ? xstrdup("?") : xasprintf("%lld", (long long)mib);
}
