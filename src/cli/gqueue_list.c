/* gqueue_list: one listing: the filters done here (several users, -N, -g ID), --since and
 * user checks, the state styles, and the table (or -g's tables by state), CSV or JSON
 * made from the daemon's answer (a plain table fed line by line as it arrives). */

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"
#include "clock.h"
#include "gqueue_internal.h"
#include "job.h"
#include "output.h"
#include "parse.h"
#include "passwd_file.h"
#include "util.h"

static bool gqueue_in(char *const *list, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], s ? s : ""))
            return true;
    return false;
}

/* Whether a job passes the filters the daemon does not apply (several users, -N, -g). */
static bool gqueue_wanted(const struct gqueue_opts *o, const struct job *j)
{
    if (o->n_users > 1 && !gqueue_in(o->users, o->n_users, j->user))
        return false;
    if (o->n_names && !gqueue_in(o->names, o->n_names, j->name))
        return false;
    return !o->group || j->group_id == o->group || j->id == o->group;
}

static bool gqueue_local_filter(const struct gqueue_opts *o)
{
    return o->n_users > 1 || o->n_names || o->group;
}

/* Whether name is a user: a line of /etc/passwd, or else the owner of some job the daemon
 * knows (a directory user). Not getpwnam: passwd_file.h says why. */
bool gqueue_user_known(const char *name)
{
    if (passwd_file_has_user(name))
        return true;
    struct strbuf path;
    strbuf_init(&path);
    strbuf_adds(&path, "/v1/jobs");
    client_query_add(&path, "user", name);
    client_query_add(&path, "format", "count");
    json_t *reply = cli_call("GET", path.buf, NULL);
    strbuf_free(&path);
    bool found = json_integer_value(json_object_get(reply, "total")) > 0;
    json_decref(reply);
    return found;
}

/* ---- output ---- */

/* gflow's state styles: R green bold, CD dim, PD italic, H bold, F red bold, TO
 * underlined, CA struck through. */
static const char *gqueue_state_style(const char *cell, size_t len)
{
    char st[16];
    enum job_state s;
    if (len >= sizeof(st))
        return NULL;
    memcpy(st, cell, len);
    st[len] = '\0';
    if (job_state_parse(st, &s) < 0)
        return NULL;
    switch (s) {
    case JOB_RUNNING:
        return "\033[1;32m";
    case JOB_FINISHED:
        return "\033[2m";
    case JOB_QUEUED:
        return "\033[3m";
    case JOB_HELD:
        return "\033[1m";
    case JOB_FAILED:
        return "\033[1;31m";
    case JOB_TIMEOUT:
        return "\033[4m";
    case JOB_CANCELLED:
        return "\033[9m";
    default:
        return NULL;
    }
}

/* How many jobs match the filters (format=count), for "Showing first N of M". */
static int64_t gqueue_total(const struct gqueue_opts *o)
{
    struct strbuf path;
    strbuf_init(&path);
    strbuf_addf(&path, "/v1/jobs%s", o->filters);
    client_query_add(&path, "format", "count");
    json_t *reply = cli_call("GET", path.buf, NULL);
    strbuf_free(&path);
    int64_t total = json_integer_value(json_object_get(reply, "total"));
    json_decref(reply);
    return total;
}

/* A plain table or CSV is made from the daemon's lines as they arrive, without keeping the
 * answer (for 10,000 jobs half a megabyte of fresh memory, dear here: ~15 us a page on
 * this VM): each line is parsed into one reused job, and its cells appended to the table. */
struct gqueue_feed {
    const struct gqueue_opts *o;
    struct output_table *t;
    int fields[JOB_FIELD_COUNT];
    size_t nfields;
    bool header_seen;
    size_t skip; /* job lines to drop first */
    size_t cap;  /* at most this many rows (0: all); a line beyond sets more */
    bool more;
    double now;
    const struct client_response *r; /* its Content-Length sizes the table */
    struct strbuf pending;           /* received text not yet taken: the start of a line */
};

static void gqueue_feed_line(struct gqueue_feed *f, char *line)
{
    if (!*line)
        return;
    if (!f->header_seen) {
        gqueue_tsv_header(line, f->fields, &f->nfields);
        f->header_seen = true;
        return;
    }
    if (f->skip) {
        f->skip--;
        return;
    }
    if (f->cap && output_table_rows(f->t) == f->cap) {
        f->more = true;
        return;
    }
    struct job j;
    if (job_from_tsv(&j, f->fields, f->nfields, line, true) < 0)
        cli_die(CLI_EXIT_FAIL, "gflowd sent a job this gqueue cannot read");
    for (size_t c = 0; c < f->o->nfields; c++) {
        f->o->fields[c]->format(output_table_cell(f->t), &j, f->now);
        output_table_cell_end(f->t);
    }
    free(j.deps); /* the one owned part of a borrowed TSV row */
}

/* Takes the complete lines of text (NUL-terminating them in place); returns how many
 * bytes that was (all of them once the limit's probe is answered). */
static size_t gqueue_feed_text(struct gqueue_feed *f, char *text, size_t len)
{
    char *p = text, *end = text + len;
    for (char *nl; !f->more && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
        *nl = '\0';
        gqueue_feed_line(f, p);
    }
    return f->more ? len : (size_t)(p - text);
}

/* client_chunk_cb: the lines of what came so far; the start of the next one waits. */
static int gqueue_feed_chunk(const char *data, size_t len, void *arg)
{
    struct gqueue_feed *f = arg;
    if (!f->header_seen && !f->pending.len) /* the first piece: a table of about its size */
        output_table_reserve(f->t, 0, (size_t)f->r->content_length);
    strbuf_add(&f->pending, data, len);
    size_t taken = gqueue_feed_text(f, f->pending.buf, f->pending.len);
    f->pending.len -= taken;
    memmove(f->pending.buf, f->pending.buf + taken, f->pending.len);
    return f->more ? -1 : 0; /* one line beyond the limit is all a probe needs */
}

/* The rows of a plain table or CSV into t; *more: the limit's probe found more jobs. */
static void gqueue_feed_table(const struct gqueue_opts *o, const char *path, bool probe,
                              size_t want, struct output_table *t, bool *more)
{
    struct client_response r = {0};
    struct gqueue_feed f = {.o = o, .t = t, .now = now_wall(), .r = &r};
    strbuf_init(&f.pending);
    if (probe && o->limit > 0)
        f.cap = want;
    if (probe && o->limit < 0) {
        /* The last N and one before them, if there are more: whether the first line is
         * the extra one is known only from the count, so the answer is read whole. */
        gqueue_get_tsv(path, &r, NULL, NULL);
        size_t lines = 0;
        for (const char *p = r.body.buf; p && (p = strchr(p, '\n')); p++)
            lines++;
        if (lines > want + 1) { /* the header and more than N jobs */
            f.skip = 1;
            *more = true;
        }
        output_table_reserve(t, 0, r.body.len);
        if (r.body.len) { /* in place; a last line without its newline goes on below */
            size_t taken = gqueue_feed_text(&f, r.body.buf, r.body.len);
            strbuf_add(&f.pending, r.body.buf + taken, r.body.len - taken);
        }
    } else {
        gqueue_get_tsv(path, &r, gqueue_feed_chunk, &f);
    }
    if (f.pending.len) { /* a last line without its newline */
        strbuf_addc(&f.pending, '\0');
        gqueue_feed_line(&f, f.pending.buf);
    }
    if (!f.header_seen)
        cli_die(CLI_EXIT_FAIL, "gflowd sent an empty job list");
    *more = *more || f.more;
    strbuf_free(&f.pending);
    client_response_free(&r);
}

/* An empty table with the columns of o (coloured states on a terminal). */
static struct output_table *gqueue_table_new(const struct gqueue_opts *o)
{
    const char **headers = xmalloc(o->nfields * sizeof(char *));
    for (size_t f = 0; f < o->nfields; f++)
        headers[f] = o->fields[f]->name;
    struct output_table *t = output_table_new(o->nfields, headers);
    free(headers);
    output_table_set_max_width(t, o->width);
    for (size_t f = 0; f < o->nfields && o->colour; f++)
        if (o->fields[f]->format == gqueue_st || o->fields[f]->format == gqueue_state)
            output_table_set_style(t, f, gqueue_state_style);
    return t;
}

/* One job's row; prefix (the tree's drawing, or NULL) goes before its NAME. */
static void gqueue_table_row(struct output_table *t, const struct gqueue_opts *o,
                             const struct job *j, const char *prefix, double now)
{
    for (size_t f = 0; f < o->nfields; f++) {
        struct strbuf *cell = output_table_cell(t);
        if (prefix && o->fields[f]->format == gqueue_name)
            strbuf_adds(cell, prefix);
        o->fields[f]->format(cell, j, now);
        output_table_cell_end(t);
    }
}

/* -g: a table per state, in gflow's order (Hold, which gflow leaves out, after Queued),
 * each under "Running (2)" and a rule; states without jobs are left out. A job being
 * cancelled (CG) is under Running, as in gflow, whose state it is. */
static void gqueue_print_by_state(const struct gqueue_opts *o, const struct gqueue_row *rows,
                                  size_t first, size_t count, FILE *out)
{
    static const enum job_state order[] = {JOB_RUNNING, JOB_QUEUED,    JOB_HELD,   JOB_FINISHED,
                                           JOB_FAILED,  JOB_CANCELLED, JOB_TIMEOUT};
    double now = now_wall();
    bool any = false;
    for (size_t s = 0; s < sizeof(order) / sizeof(order[0]); s++) {
        struct output_table *t = gqueue_table_new(o);
        for (size_t i = first; i < first + count; i++)
            if (rows[i].job.state == order[s])
                gqueue_table_row(t, o, &rows[i].job, NULL, now);
        size_t n = output_table_rows(t);
        if (n) {
            fprintf(out, "%s%s (%zu)\n", any ? "\n" : "", job_state_name(order[s]), n);
            for (int k = 0; k < 60; k++)
                fputs("\u2500", out);
            fputc('\n', out);
            output_table_print(t, out);
            any = true;
        }
        output_table_free(t);
    }
    if (!any)
        fprintf(out, "No jobs found.\n");
}

/* One listing of the jobs, to out; the "Showing N of M" note to notes. */
void gqueue_list(const struct gqueue_opts *o, FILE *out, FILE *notes)
{
    bool local_limit = o->local_sort || gqueue_local_filter(o);
    struct strbuf path;
    strbuf_init(&path);
    strbuf_addf(&path, "/v1/jobs%s", o->filters);
    if (strcmp(o->api_sort, "id") != 0 || (o->desc && !o->local_sort)) {
        char *sort = xasprintf("%s%s", o->desc && !o->local_sort ? "-" : "", o->api_sort);
        client_query_add(&path, "sort", sort);
        free(sort);
    }
    /* History lists are not counted (a COUNT over a long history costs more than the
     * listing): one job more is asked for, to know whether the limit hid any. */
    bool probe = o->limit != 0 && !local_limit && !o->active_only;
    size_t want = o->limit < 0 ? (size_t)-o->limit : (size_t)o->limit;
    if (o->limit != 0 && !local_limit)
        strbuf_addf(&path, "%climit=%lld", strchr(path.buf, '?') ? '&' : '?',
                    (long long)(o->limit + (probe ? (o->limit < 0 ? -1 : 1) : 0)));
    bool more = false; /* probe: the daemon had more than the limit */

    json_t *reply = NULL;
    struct gqueue_row *rows = NULL;
    size_t n = 0;
    struct client_response tsv = {0}; /* owns the strings of TSV rows */
    int tsv_fields[JOB_FIELD_COUNT];
    size_t tsv_nfields = 0;
    bool machine = o->outfmt == OUTPUT_JSON || o->outfmt == OUTPUT_YAML;
    /* A plain table or CSV goes straight from the daemon's lines to the table's text, one
     * job at a time; the tree, -g, the sort by GPUs, local filters and JSON need every job. */
    bool by_state = o->by_state && o->outfmt == OUTPUT_TABLE; /* data formats stay flat */
    bool stream = !machine && !o->tree && !by_state && !local_limit;
    if (machine) {
        reply = cli_call("GET", path.buf, NULL);
        json_t *jobs_json = json_object_get(reply, "jobs");
        if (!json_is_array(jobs_json))
            cli_die(CLI_EXIT_FAIL, "gflowd's answer has no job list");
        size_t all = json_array_size(jobs_json);
        rows = xcalloc(all ? all : 1, sizeof(*rows));
        for (size_t i = 0; i < all; i++) {
            rows[n].raw = json_array_get(jobs_json, i);
            rows[n].order = n;
            if (job_from_json(rows[n].raw, &rows[n].job) < 0)
                cli_die(CLI_EXIT_FAIL, "gflowd sent a job this gqueue cannot read");
            if (gqueue_wanted(o, &rows[n].job))
                n++;
            else
                job_clear(&rows[n].job);
        }
    } else if (!stream) {
        gqueue_tsv_query(&path, o->fields, o->nfields, o->tree, gqueue_local_filter(o), by_state);
        char *lines = gqueue_fetch_tsv(path.buf, tsv_fields, &tsv_nfields, &tsv);
        rows = gqueue_tsv_rows(lines, tsv_fields, tsv_nfields, &n);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
            if (gqueue_wanted(o, &rows[i].job))
                rows[kept++] = rows[i];
            else
                free(rows[i].job.deps);
        }
        n = kept;
    }
    size_t first = 0, count = n;
    if (probe && n > want) { /* the extra job: the last of the first N, or the first */
        more = true;
        first = o->limit < 0 ? 1 : 0;
        count = want;
    }
    if (o->local_sort) {
        gqueue_sort_desc = o->desc;
        qsort(rows, n, sizeof(*rows), o->local_sort);
    }
    if (local_limit) {
        if (o->limit > 0 && (size_t)o->limit < n)
            count = (size_t)o->limit;
        else if (o->limit < 0 && (size_t)-o->limit < n) {
            first = n - (size_t)-o->limit;
            count = (size_t)-o->limit;
        }
    }

    if (machine) {
        json_t *arr = json_array();
        double now = now_wall();
        for (size_t i = first; i < first + count; i++)
            json_array_append_new(arr, o->v0 ? json_incref(rows[i].raw)
                                             : gqueue_doc_job(rows[i].raw, &rows[i].job, now));
        gqueue_doc_print(o, arr, out);
        json_decref(arr);
    } else {
        struct output_table *t = gqueue_table_new(o);
        double now = now_wall();
        if (stream) {
            gqueue_tsv_query(&path, o->fields, o->nfields, false, false, false);
            gqueue_feed_table(o, path.buf, probe, want, t, &more);
            count = output_table_rows(t);
        } else if (!by_state) {
            struct gqueue_tree tr = {0};
            if (o->tree)
                gqueue_tree_build(&tr, rows, first, count);
            size_t shown = o->tree ? tr.n : count;
            for (size_t k = 0; k < shown; k++) {
                size_t i = o->tree ? tr.order[k] : first + k;
                gqueue_table_row(t, o, &rows[i].job, o->tree ? tr.prefix[i - first] : NULL, now);
            }
            if (o->tree)
                gqueue_tree_free(&tr);
        }
        /* gflow's note when the limit hid jobs (table only: CSV stays data). */
        if (o->outfmt == OUTPUT_TABLE && o->limit != 0 && count == want) {
            const char *which = o->limit > 0 ? "first" : "last";
            int64_t total = local_limit ? (int64_t)n : probe ? 0 : gqueue_total(o);
            fflush(out);
            if (more)
                fprintf(notes, "Showing %s %zu job%s; more were not shown (use -n 0 to show all)\n",
                        which, count, plural_s((long long)count));
            else if (total > (int64_t)count)
                fprintf(notes, "Showing %s %zu of %lld job%s (use -n 0 to show all)\n", which,
                        count, (long long)total, plural_s((long long)total));
        }
        if (by_state)
            gqueue_print_by_state(o, rows, first, count, out);
        else if (count == 0 && o->outfmt == OUTPUT_TABLE)
            fprintf(out, "No jobs found.\n");
        else if (o->outfmt == OUTPUT_CSV)
            output_table_print_csv(t, out);
        else
            output_table_print(t, out);
        output_table_free(t);
    }
    strbuf_free(&path);

    for (size_t i = 0; i < n && reply; i++)
        job_clear(&rows[i].job);
    for (size_t i = 0; i < n && !reply; i++)
        free(rows[i].job.deps); /* the one owned part of a borrowed TSV row */
    client_response_free(&tsv);
    free(rows);
    json_decref(reply);
}
