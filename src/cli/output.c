/* output: tables, CSV, JSON and job field display for the command-line programs. */
#include "output.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gpuinfo.h"
#include "parse.h"
#include "util.h"

/* The cells' text lies end to end in one buffer (no allocation per cell: a 10,000-job
 * listing has 60,000 cells); end[i] is where cell i (row-major) stops. */
struct output_table {
    size_t ncols;
    char **headers;
    struct strbuf text;
    size_t *end;
    size_t ncells, cap;
    size_t col;    /* the column of the next cell (ncells % ncols, without a division) */
    size_t *width; /* per column: the widest cell so far */
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

/* Display width: UTF-8 code points (continuation bytes do not count). */
static size_t text_width(const char *s, size_t len)
{
    size_t w = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            w++;
    return w;
}

struct output_table *output_table_new(size_t ncols, const char *const *headers)
{
    struct output_table *t = xcalloc(1, sizeof(*t));
    t->ncols = ncols;
    t->headers = xcalloc(ncols, sizeof(char *));
    t->width = xcalloc(ncols ? ncols : 1, sizeof(size_t));
    for (size_t i = 0; i < ncols; i++) {
        t->headers[i] = xstrdup(headers[i]);
        t->width[i] = text_width(headers[i], strlen(headers[i]));
    }
    strbuf_init(&t->text);
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
    free(t->end);
    free(t->width);
    free(t);
}

struct strbuf *output_table_cell(struct output_table *t)
{
    return &t->text;
}

void output_table_reserve(struct output_table *t, size_t rows, size_t bytes)
{
    size_t cells = t->ncells + rows * t->ncols;
    if (cells > t->cap) {
        t->cap = cells;
        t->end = xrealloc(t->end, t->cap * sizeof(*t->end));
    }
    strbuf_reserve(&t->text, bytes);
}

void output_table_cell_end(struct output_table *t)
{
    if (t->ncells == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->end = xrealloc(t->end, t->cap * sizeof(*t->end));
    }
    size_t start = t->ncells ? t->end[t->ncells - 1] : 0;
    size_t w = text_width(t->text.buf + start, t->text.len - start);
    if (w > t->width[t->col])
        t->width[t->col] = w;
    if (++t->col == t->ncols)
        t->col = 0;
    t->end[t->ncells++] = t->text.len;
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

/* Cell c of row r (row 0: the headers) and its length. */
static const char *cell_at(const struct output_table *t, size_t r, size_t c, size_t *len)
{
    if (r == 0) {
        *len = strlen(t->headers[c]);
        return t->headers[c];
    }
    size_t i = (r - 1) * t->ncols + c;
    size_t start = i ? t->end[i - 1] : 0;
    *len = t->end[i] - start;
    return t->text.buf + start;
}

/* A cell with control characters shown as '?'. */
static void put_cell(struct strbuf *o, const char *s, size_t len)
{
    size_t at = o->len;
    strbuf_add(o, s, len);
    for (char *p = o->buf + at; p < o->buf + o->len; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
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

void output_table_print(const struct output_table *t, FILE *out)
{
    struct strbuf o;
    strbuf_init(&o);
    size_t rows = output_table_rows(t);
    for (size_t r = 0; r <= rows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            size_t len;
            const char *s = cell_at(t, r, c, &len);
            put_cell(&o, s, len);
            if (c + 1 < t->ncols)
                put_spaces(&o, t->width[c] - text_width(s, len) + 2);
        }
        strbuf_addc(&o, '\n');
        if (o.len >= 1 << 16) { /* a small buffer, written as it fills */
            fwrite(o.buf, 1, o.len, out);
            strbuf_reset(&o);
        }
    }
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
    for (size_t r = 0; r <= rows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            size_t len;
            const char *s = cell_at(t, r, c, &len);
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
    json_dumpf(j, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', out);
}

char *output_time(double t)
{
    if (t <= 0)
        return xstrdup("-");
    time_t secs = (time_t)t;
    struct tm tm;
    char buf[32];
    if (!localtime_r(&secs, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm))
        return xstrdup("-");
    return xstrdup(buf);
}

char *output_job_elapsed(const struct job *j, double now)
{
    double secs = 0;
    if (j->start_time > 0) {
        if (j->end_time > 0)
            secs = j->end_time - j->start_time;
        else if (j->state == JOB_RUNNING)
            secs = now - j->start_time;
    }
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
    } else {
        char *recorded = j->reason != JOB_REASON_NONE ? job_reason_string(j) : NULL;
        const char *reason = recorded ? recorded : default_reason(j);
        if (reason) {
            strbuf_addc(sb, '(');
            strbuf_adds(sb, reason);
            strbuf_addc(sb, ')');
        } else {
            strbuf_adds(sb, "-");
        }
        free(recorded);
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
