/* output: tables, CSV, JSON and job field display for the command-line programs. */
#include "output.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gpuinfo.h"
#include "parse.h"
#include "util.h"

struct output_table {
    size_t ncols;
    char **headers;
    char **cells; /* rows * ncols, row-major */
    size_t rows, cap;
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

struct output_table *output_table_new(size_t ncols, const char *const *headers)
{
    struct output_table *t = xcalloc(1, sizeof(*t));
    t->ncols = ncols;
    t->headers = xcalloc(ncols, sizeof(char *));
    for (size_t i = 0; i < ncols; i++)
        t->headers[i] = xstrdup(headers[i]);
    return t;
}

void output_table_free(struct output_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncols; i++)
        free(t->headers[i]);
    for (size_t i = 0; i < t->rows * t->ncols; i++)
        free(t->cells[i]);
    free(t->headers);
    free(t->cells);
    free(t);
}

static char **new_row(struct output_table *t)
{
    if (t->rows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->cells = xrealloc(t->cells, t->cap * t->ncols * sizeof(char *));
    }
    return t->cells + t->rows++ * t->ncols;
}

void output_table_add_row_owned(struct output_table *t, char **cells)
{
    char **row = new_row(t);
    for (size_t i = 0; i < t->ncols; i++)
        row[i] = cells[i] ? cells[i] : xstrdup("-");
}

size_t output_table_rows(const struct output_table *t)
{
    return t->rows;
}

/* Display width: UTF-8 code points (continuation bytes do not count). */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80)
            w++;
    return w;
}

/* A cell with control characters shown as '?'; one fwrite in the usual case. */
static void put_cell(const char *s, FILE *out)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p >= 0x20 && *p != 0x7f)
        p++;
    if (!*p) {
        fwrite_unlocked(s, 1, (size_t)(p - (const unsigned char *)s), out);
        return;
    }
    for (p = (const unsigned char *)s; *p; p++)
        fputc_unlocked(*p < 0x20 || *p == 0x7f ? '?' : *p, out);
}

static void put_spaces(size_t n, FILE *out)
{
    static const char spaces[] = "                                                                ";
    while (n > 0) {
        size_t k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;
        fwrite_unlocked(spaces, 1, k, out);
        n -= k;
    }
}

void output_table_print(const struct output_table *t, FILE *out)
{
    size_t *width = xcalloc(t->ncols, sizeof(size_t));
    for (size_t c = 0; c < t->ncols; c++) {
        width[c] = text_width(t->headers[c]);
        for (size_t r = 0; r < t->rows; r++) {
            size_t w = text_width(t->cells[r * t->ncols + c]);
            if (w > width[c])
                width[c] = w;
        }
    }
    for (size_t r = 0; r <= t->rows; r++) {
        char **row = r == 0 ? t->headers : t->cells + (r - 1) * t->ncols;
        for (size_t c = 0; c < t->ncols; c++) {
            put_cell(row[c], out);
            if (c + 1 < t->ncols) {
                put_spaces(width[c] - text_width(row[c]) + 2, out);
            }
        }
        fputc_unlocked('\n', out);
    }
    free(width);
}

static void put_csv_field(const char *s, FILE *out)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            fputc('"', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

void output_table_print_csv(const struct output_table *t, FILE *out)
{
    for (size_t r = 0; r <= t->rows; r++) {
        char **row = r == 0 ? t->headers : t->cells + (r - 1) * t->ncols;
        for (size_t c = 0; c < t->ncols; c++) {
            if (c)
                fputc(',', out);
            put_csv_field(row[c], out);
        }
        fputc('\n', out);
    }
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

char *output_job_reason(const struct job *j)
{
    if (j->reason != JOB_REASON_NONE)
        return job_reason_string(j);
    if (j->state == JOB_QUEUED)
        return xstrdup("Priority");
    if (j->state == JOB_HELD)
        return xstrdup("JobHeldUser");
    return NULL;
}

char *output_job_nodelist(const struct job *j)
{
    if (j->state == JOB_RUNNING && j->mig_uuids && *j->mig_uuids)
        return xstrdup(j->mig_uuids); /* MIG instances are known by UUID only */
    if (j->state == JOB_RUNNING)
        return j->gpu_mask ? gpu_mask_format(j->gpu_mask) : xstrdup("-");
    char *reason = output_job_reason(j);
    if (!reason)
        return xstrdup("-");
    size_t n = strlen(reason);
    char *out = xmalloc(n + 3);
    out[0] = '(';
    memcpy(out + 1, reason, n);
    out[n + 1] = ')';
    out[n + 2] = '\0';
    free(reason);
    return out;
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
