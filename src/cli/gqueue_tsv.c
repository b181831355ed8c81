/* gqueue_tsv: the daemon's line format (GET /v1/jobs?format=tsv) fetched and read into
 * rows, the dependency tree (-t) over those rows, and the sort by GPU count. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gqueue_internal.h"
#include "job.h"
#include "output.h"
#include "util.h"

/* Tables only need the fields, not JSON: the line format is far cheaper to read when
 * there are 10,000 jobs (docs/api.md, format=tsv). Adds format=tsv and the fields to
 * path. */
void gqueue_tsv_query(struct strbuf *path, const struct gqueue_field **columns, size_t ncolumns,
                      bool tree, bool filters, bool by_state)
{
    /* Only the fields the columns read (plus id, gpus and expected_start, for sorting; what the tree,
     * the filters applied here and the grouping by state read). */
    bool want[JOB_FIELD_COUNT] = {[JOB_FIELD_ID] = true,         [JOB_FIELD_GPUS] = true,
                                  [JOB_FIELD_DEPENDS_ON] = tree, [JOB_FIELD_EXPECTED_START] = true,
                                  [JOB_FIELD_RETRY_OF] = tree,   [JOB_FIELD_USER] = filters,
                                  [JOB_FIELD_NAME] = filters,    [JOB_FIELD_GROUP_ID] = filters,
                                  [JOB_FIELD_STATE] = by_state};
    _Static_assert(JOB_FIELD_ID == 0, "a column's unused needs name the id");
    for (size_t c = 0; c < ncolumns; c++)
        for (size_t i = 0; i < sizeof(columns[c]->needs) / sizeof(columns[c]->needs[0]); i++)
            want[columns[c]->needs[i]] = true;
    struct strbuf list;
    strbuf_init(&list);
    for (int f = 0; f < JOB_FIELD_COUNT; f++)
        if (want[f])
            strbuf_addf(&list, "%s%s", list.len ? "," : "", job_field_name((enum job_field)f));
    client_query_add(path, "format", "tsv");
    client_query_add(path, "fields", list.buf);
    strbuf_free(&list);
}

/* GET path into r (the body whole, or through chunk_cb as it arrives); exits on an
 * error. */
void gqueue_get_tsv(const char *path, struct client_response *r, client_chunk_cb chunk_cb,
                    void *arg)
{
    char *err = NULL;
    if (client_request("GET", path, NULL, 0, NULL, r, chunk_cb, arg, &err) < 0)
        cli_die(CLI_EXIT_FAIL, "%s", err);
    if (r->status != 200) {
        json_t *e = json_loadb(r->body.buf ? r->body.buf : "", r->body.len, 0, NULL);
        cli_die(CLI_EXIT_FAIL, "%s", cli_error_text(e));
    }
}

/* The fields of the TSV header line (tab-separated names) into fields / *nfields. */
void gqueue_tsv_header(char *header, int *fields, size_t *nfields)
{
    *nfields = 0;
    char *hs = NULL;
    for (char *h = strtok_r(header, "\t", &hs); h; h = strtok_r(NULL, "\t", &hs)) {
        int f = job_field_parse(h);
        if (f < 0 || *nfields == JOB_FIELD_COUNT)
            cli_die(CLI_EXIT_FAIL, "gflowd sent an unknown field '%s'", h);
        fields[(*nfields)++] = f;
    }
}

/* The whole TSV answer for path: returns the job lines (the body after the header, in r's
 * buffer) and the fields of each line in fields / *nfields. */
char *gqueue_fetch_tsv(const char *path, int *fields, size_t *nfields, struct client_response *r)
{
    gqueue_get_tsv(path, r, NULL, NULL);
    char *save = NULL;
    char *header = strtok_r(r->body.buf ? r->body.buf : "", "\n", &save);
    if (!header)
        cli_die(CLI_EXIT_FAIL, "gflowd sent an empty job list");
    gqueue_tsv_header(header, fields, nfields);
    return save ? save : "";
}

/* The next job line of lines (NUL-terminated in place), or NULL at the end. */
static char *gqueue_next_line(char **lines)
{
    char *p = *lines;
    while (*p == '\n')
        p++;
    if (!*p)
        return NULL;
    char *nl = strchr(p, '\n');
    if (nl) {
        *nl = '\0';
        *lines = nl + 1;
    } else {
        *lines = p + strlen(p);
    }
    return p;
}

/* Every job line as a row (for the tree and the sort by GPUs, which need them all); the
 * rows' strings point into the lines. */
struct gqueue_row *gqueue_tsv_rows(char *lines, const int *fields, size_t nfields, size_t *count)
{
    size_t n = 0, cap = 64;
    struct gqueue_row *rows = xcalloc(cap, sizeof(*rows));
    for (char *line; (line = gqueue_next_line(&lines));) {
        if (n == cap) {
            cap *= 2;
            rows = xrealloc(rows, cap * sizeof(*rows));
        }
        memset(&rows[n], 0, sizeof(rows[n]));
        if (job_from_tsv(&rows[n].job, fields, nfields, line, true) < 0)
            cli_die(CLI_EXIT_FAIL, "gflowd sent a job this gqueue cannot read");
        rows[n].order = n;
        n++;
    }
    *count = n;
    return rows;
}

/* ---- the dependency tree (-t) ---- */
static size_t *gqueue_by_id_rows;
static const struct gqueue_row *gqueue_by_id_base;

static int gqueue_cmp_row_id(const void *a, const void *b)
{
    int64_t x = gqueue_by_id_base[*(const size_t *)a].job.id;
    int64_t y = gqueue_by_id_base[*(const size_t *)b].job.id;
    return (x > y) - (x < y);
}

/* Index of the row with job id, or -1. */
static ssize_t gqueue_row_of(size_t n, int64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t v = gqueue_by_id_base[gqueue_by_id_rows[mid]].job.id;
        if (v < id)
            lo = mid + 1;
        else if (v > id)
            hi = mid;
        else
            return (ssize_t)gqueue_by_id_rows[mid];
    }
    return -1;
}

/* Orders rows[first..first+count) as a forest: a job goes under the first job it
 * depends on that is listed too (a retry without one: under the attempt it retries);
 * roots and siblings keep the listing order. */
void gqueue_tree_build(struct gqueue_tree *t, const struct gqueue_row *rows, size_t first,
                       size_t count)
{
    const struct gqueue_row *r = rows + first;
    t->n = count;
    t->order = xmalloc((count ? count : 1) * sizeof(*t->order));
    t->prefix = xcalloc(count ? count : 1, sizeof(*t->prefix));
    gqueue_by_id_base = r;
    gqueue_by_id_rows = xmalloc((count ? count : 1) * sizeof(size_t));
    for (size_t i = 0; i < count; i++)
        gqueue_by_id_rows[i] = i;
    qsort(gqueue_by_id_rows, count, sizeof(size_t), gqueue_cmp_row_id);
    /* parent[i]: the row of its first listed dependency; children as linked lists. */
    ssize_t *parent = xmalloc((count ? count : 1) * sizeof(*parent));
    ssize_t *first_child = xmalloc((count ? count : 1) * sizeof(*first_child));
    ssize_t *last_child = xmalloc((count ? count : 1) * sizeof(*last_child));
    ssize_t *next = xmalloc((count ? count : 1) * sizeof(*next));
    for (size_t i = 0; i < count; i++) {
        parent[i] = -1;
        first_child[i] = last_child[i] = next[i] = -1;
        for (size_t k = 0; k < r[i].job.n_deps && parent[i] < 0; k++) {
            ssize_t p = gqueue_row_of(count, r[i].job.deps[k].id);
            if (p >= 0 && (size_t)p != i && r[p].job.id < r[i].job.id)
                parent[i] = p;
        }
        /* A retry (--max-retries) goes under the attempt it replaces. */
        if (parent[i] < 0 && r[i].job.retry_of > 0) {
            ssize_t p = gqueue_row_of(count, r[i].job.retry_of);
            if (p >= 0 && r[p].job.id < r[i].job.id)
                parent[i] = p;
        }
    }
    for (size_t i = 0; i < count; i++) {
        if (parent[i] < 0)
            continue;
        ssize_t p = parent[i];
        if (last_child[p] < 0)
            first_child[p] = (ssize_t)i;
        else
            next[last_child[p]] = (ssize_t)i;
        last_child[p] = (ssize_t)i;
    }
    /* Depth-first with an explicit stack; "stem" is the prefix a child's children get. */
    size_t out = 0;
    ssize_t *stack = xmalloc((count ? count : 1) * sizeof(*stack));
    char **stem = xcalloc(count ? count : 1, sizeof(*stem));
    for (size_t root = 0; root < count; root++) {
        if (parent[root] >= 0)
            continue;
        size_t sp = 0;
        stack[sp++] = (ssize_t)root;
        t->prefix[root] = xstrdup("");
        stem[root] = xstrdup("");
        while (sp) {
            ssize_t i = stack[--sp];
            t->order[out++] = first + (size_t)i;
            /* Push children in reverse so that the first comes out first. */
            size_t nkids = 0;
            for (ssize_t c = first_child[i]; c >= 0; c = next[c])
                nkids++;
            ssize_t *kids = xmalloc((nkids ? nkids : 1) * sizeof(*kids));
            size_t k = 0;
            for (ssize_t c = first_child[i]; c >= 0; c = next[c])
                kids[k++] = c;
            for (size_t m = 0; m < nkids; m++) {
                bool last = m + 1 == nkids;
                ssize_t c = kids[m];
                t->prefix[c] = xasprintf("%s%s", stem[i], last ? "└─ " : "├─ ");
                stem[c] = xasprintf("%s%s", stem[i], last ? "   " : "│  ");
            }
            for (size_t m = nkids; m > 0; m--)
                stack[sp++] = kids[m - 1];
            free(kids);
        }
    }
    for (size_t i = 0; i < count; i++)
        free(stem[i]);
    free(stem);
    free(stack);
    free(parent);
    free(first_child);
    free(last_child);
    free(next);
    free(gqueue_by_id_rows);
    gqueue_by_id_rows = NULL;
    t->n = out; /* every row: a parent always has a lower id, so there is no cycle */
}

void gqueue_tree_free(struct gqueue_tree *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->prefix[i]);
    free(t->prefix);
    free(t->order);
}

bool gqueue_sort_desc;

static int gqueue_cmp_order(const struct gqueue_row *x, const struct gqueue_row *y)
{
    return x->order < y->order ? -1 : x->order > y->order;
}

int gqueue_cmp_gpus(const void *a, const void *b)
{
    const struct gqueue_row *x = a, *y = b;
    if (x->job.gpus != y->job.gpus)
        return (x->job.gpus < y->job.gpus ? -1 : 1) * (gqueue_sort_desc ? -1 : 1);
    return gqueue_cmp_order(x, y);
}

/* By expected start (START_TIME), jobs without one after the others in either direction,
 * as squeue --start. */
int gqueue_cmp_expected(const void *a, const void *b)
{
    const struct gqueue_row *x = a, *y = b;
    double s = x->job.expected_start, t = y->job.expected_start;
    if ((s > 0) != (t > 0))
        return s > 0 ? -1 : 1;
    if (s != t)
        return (s < t ? -1 : 1) * (gqueue_sort_desc ? -1 : 1);
    return gqueue_cmp_order(x, y);
}
