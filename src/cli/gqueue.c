/* gqueue: lists jobs, like squeue / gflow's gqueue.
 *
 * By default the caller's active jobs (PD, H, R) with the columns
 * JOBID NAME ST TIME NODES NODELIST(REASON). Filtering, sorting and the limit are done
 * by the daemon (GET /v1/jobs) so that a long history costs the client nothing; only
 * the display (and a sort by GPU count, which the API does not offer) happens here. */
#include <ctype.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "clock.h"
#include "gflow_build.h"
#include "job.h"
#include "output.h"
#include "parse.h"
#include "util.h"

/* Each column appends its cell's text to sb (the table's buffer: no allocation per cell). */
struct gqueue_field {
    const char *name; /* as given to -f and shown as the header */
    void (*format)(struct strbuf *sb, const struct job *j, double now);
    const char *needs; /* the job fields it reads (API field names) */
};

/* Appends a malloc'd display form and frees it. */
static void gqueue_put_owned(struct strbuf *sb, char *s)
{
    strbuf_adds(sb, s);
    free(s);
}

static void gqueue_put_int(struct strbuf *sb, long long v)
{
    char buf[24];
    strbuf_add(sb, buf, format_int(buf, v));
}

static void gqueue_jobid(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_int(sb, j->id);
}

static void gqueue_name(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->name && *j->name ? j->name : "-");
}

static void gqueue_st(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, job_display_state(j));
}

static void gqueue_state(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, job_display_state_name(j));
}

static void gqueue_time(struct strbuf *sb, const struct job *j, double now)
{
    static char *not_started; /* most rows of a long queue: made once */
    if (j->start_time > 0)
        gqueue_put_owned(sb, output_job_elapsed(j, now));
    else
        strbuf_adds(sb, not_started ? not_started : (not_started = output_job_elapsed(j, now)));
}

static void gqueue_timelimit(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_job_time_limit(j));
}

static void gqueue_nodes(struct strbuf *sb, const struct job *j, double now)
{
    if (j->mig_profile) { /* MIG instances, not whole GPUs: "1g.18gb:2" */
        strbuf_adds(sb, j->mig_profile);
        strbuf_addc(sb, ':');
        gqueue_put_int(sb, j->mig_count);
        return;
    }
    gqueue_put_int(sb, j->gpus);
}

static void gqueue_nodelist(struct strbuf *sb, const struct job *j, double now)
{
    output_job_nodelist(sb, j);
}

static void gqueue_reason(struct strbuf *sb, const struct job *j, double now)
{
    char *r = output_job_reason(j);
    gqueue_put_owned(sb, r ? r : xstrdup("-"));
}

static void gqueue_priority(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_int(sb, j->priority);
}

static void gqueue_user(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->user && *j->user ? j->user : "-");
}

static void gqueue_project(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->project && *j->project ? j->project : "-");
}

static void gqueue_exitcode(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_job_exit_code(j));
}

static void gqueue_submit(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_time(j->submit_time));
}

static void gqueue_start(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_time(j->start_time));
}

static void gqueue_end(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_time(j->end_time));
}

static void gqueue_workdir(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->workdir ? j->workdir : "-");
}

static void gqueue_command(struct strbuf *sb, const struct job *j, double now)
{
    if (j->command)
        strbuf_adds(sb, j->command);
    else
        strbuf_adds(sb, j->script_path ? j->script_path : "-");
}

/* "24G", "512M", "-" for none. */
static void gqueue_memory(struct strbuf *sb, const struct job *j, double now)
{
    if (j->memory_mb <= 0) {
        strbuf_adds(sb, "-");
        return;
    }
    bool gib = j->memory_mb % 1024 == 0;
    gqueue_put_int(sb, gib ? j->memory_mb / 1024 : j->memory_mb);
    strbuf_addc(sb, gib ? 'G' : 'M');
}

static void gqueue_begin(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_time(j->begin_time));
}

static const struct gqueue_field gqueue_fields[] = {
    {"JOBID", gqueue_jobid, "id"},
    {"NAME", gqueue_name, "name"},
    {"ST", gqueue_st, "state"},
    {"STATE", gqueue_state, "state"},
    {"TIME", gqueue_time, "start_time,end_time"},
    {"TIMELIMIT", gqueue_timelimit, "time_limit"},
    {"NODES", gqueue_nodes, "gpus,mig_profile,mig_count"},
    {"NODELIST(REASON)", gqueue_nodelist, "state,gpu_ids,reason,mig_devices"},
    {"NODELIST", gqueue_nodelist, "state,gpu_ids,reason,mig_devices"},
    {"REASON", gqueue_reason, "state,reason"},
    {"PRIORITY", gqueue_priority, "priority"},
    {"USER", gqueue_user, "user"},
    {"EXITCODE", gqueue_exitcode, "exit_code,signal"},
    {"SUBMIT", gqueue_submit, "submit_time"},
    {"START", gqueue_start, "start_time"},
    {"END", gqueue_end, "end_time"},
    {"WORKDIR", gqueue_workdir, "workdir"},
    {"COMMAND", gqueue_command, "command,script_path"},
    {"MEMORY", gqueue_memory, "memory_mb"},
    {"BEGIN", gqueue_begin, "begin_time"},
    {"PROJECT", gqueue_project, "project"},
};
#define GQUEUE_NFIELDS (sizeof(gqueue_fields) / sizeof(gqueue_fields[0]))
#define GQUEUE_DEFAULT_FORMAT "JOBID,NAME,ST,TIME,NODES,NODELIST(REASON)"

/* Sort keys beyond the API's own (job_sort_parse): the column names gqueue shows, and
 * the GPU count, which the API does not sort by (api NULL: sorted here). */
static const struct {
    const char *name;
    const char *api;
} gqueue_sort_aliases[] = {
    {"jobid", "id"},
    {"st", "state"},
    {"gpus", NULL},
    {"nodes", NULL},
};

/* The API's name for a sort key the user typed (any case); NULL for one sorted here.
 * A usage error if it is none. */
static const char *gqueue_sort_key(const char *key, const char *given)
{
    char lower[32];
    size_t n = strlen(key);
    for (size_t i = 0; i < n && i + 1 < sizeof(lower); i++)
        lower[i] = (char)tolower((unsigned char)key[i]);
    lower[n < sizeof(lower) ? n : sizeof(lower) - 1] = '\0';
    enum job_sort k;
    if (job_sort_parse(lower, &k) == 0)
        return job_sort_name(k);
    for (size_t i = 0; i < sizeof(gqueue_sort_aliases) / sizeof(gqueue_sort_aliases[0]); i++)
        if (!strcmp(lower, gqueue_sort_aliases[i].name))
            return gqueue_sort_aliases[i].api;
    cli_usage_error("unknown sort field '%s'; use %s, or gpus (prefix '-' for descending)", given,
                    job_sort_names());
}

enum { OPT_SOCKET = 256 };

static const char gqueue_shortopts[] = "+:acts:j:u:P:n:r:f:o:hV";
static const struct option gqueue_longopts[] = {
    {"all", no_argument, NULL, 'a'},
    {"completed", no_argument, NULL, 'c'},
    {"tree", no_argument, NULL, 't'},
    {"states", required_argument, NULL, 's'},
    {"state", required_argument, NULL, 's'},
    {"jobs", required_argument, NULL, 'j'},
    {"user", required_argument, NULL, 'u'},
    {"project", required_argument, NULL, 'P'},
    {"limit", required_argument, NULL, 'n'},
    {"sort", required_argument, NULL, 'r'},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void gqueue_help(void)
{
    printf("gqueue - list jobs of the gflow scheduler\n"
           "\n"
           "Usage: gqueue [options]\n"
           "\n"
           "Without options: your active jobs (queued PD, held H, running R).\n"
           "\n"
           "Options:\n"
           "  -a, --all             jobs in every state, finished ones too\n"
           "  -c, --completed       only ended jobs (CD, F, CA, TO)\n"
           "  -s, --states LIST     only these states, e.g. PD,R or Queued,Running\n"
           "                        (PD H R CG CD F CA TO, or Queued Hold Running\n"
           "                        Cancelling Finished Failed Cancelled Timeout); CG: a\n"
           "                        running job being cancelled (R includes it)\n"
           "  -j, --jobs IDS        only these jobs: 1,3,5-7, @ (your latest), @~N;\n"
           "                        shows them in any state unless -s/-c is given\n"
           "  -u, --user NAME       jobs of this user, or 'all' for everyone's\n"
           "                        (default: yours)\n"
           "  -P, --project LIST    only jobs of these projects (gbatch -P), e.g. a,b\n"
           "  -n, --limit N         the first N jobs after sorting; -N: the last N;\n"
           "                        0: all (default)\n"
           "  -r, --sort FIELD      sort by id (default), name, state, priority, user,\n"
           "                        submit, start, end, time or gpus; prefix '-' for\n"
           "                        descending, e.g. -r -priority\n"
           "  -f, --format FIELDS   columns, comma-separated (default\n"
           "                        " GQUEUE_DEFAULT_FORMAT "):\n"
           "                        JOBID NAME ST STATE TIME TIMELIMIT NODES\n"
           "                        NODELIST(REASON) NODELIST REASON PRIORITY USER\n"
           "                        EXITCODE SUBMIT START END WORKDIR COMMAND MEMORY\n"
           "                        BEGIN PROJECT\n"
           "  -o, --output FORMAT   table (default), csv or json (json prints the whole\n"
           "                        job objects and ignores -f)\n"
           "  -t, --tree            show dependencies as a tree: each job under the first\n"
           "                        listed job it depends on (NAME drawn with ├─ └─);\n"
           "                        a retry (--max-retries) under the attempt it\n"
           "                        retries (with -a, to see failed attempts)\n"
           "      --socket PATH     the daemon's socket\n"
           "  -h, --help            show this help\n"
           "  -V, --version         show the version\n"
           "\n"
           "Columns: TIME is the run time (0:00 before the job starts); NODES the GPUs\n"
           "requested; NODELIST(REASON) the GPUs of a running job, or why a job waits or\n"
           "ended, e.g. (Priority), (JobHeldUser), (NonZeroExitCode), (Signal),\n"
           "(TimeLimit), (Memory), (BeginTime), (OutOfMemory); EXITCODE the exit status, or the "
           "signal\n"
           "that killed the job (e.g. SIGKILL); TIMELIMIT is UNLIMITED when none;\n"
           "MEMORY the host memory requested (--memory), - when none; SUBMIT/START/END are\n"
           "local times.\n");
}

/* "PD,running" -> "PD,R" (validated). */
static char *gqueue_states(const char *list)
{
    struct strbuf sb;
    strbuf_init(&sb);
    char *copy = xstrdup(list);
    char *save = NULL;
    if (!*list)
        cli_usage_error("empty state list for -s");
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        enum job_state st;
        while (*tok == ' ')
            tok++;
        size_t l = strlen(tok);
        while (l && tok[l - 1] == ' ')
            tok[--l] = '\0';
        if (job_state_parse(tok, &st) < 0)
            cli_usage_error("unknown job state '%s'; use PD, H, R, CG, CD, F, CA, TO or "
                            "Queued, Hold, Running, Cancelling, Finished, Failed, Cancelled, "
                            "Timeout",
                            tok);
        if (sb.len)
            strbuf_addc(&sb, ',');
        strbuf_adds(&sb, job_state_is_cancelling_name(tok) ? "CG" : job_state_short(st));
    }
    free(copy);
    if (!sb.len)
        cli_usage_error("empty state list for -s");
    return strbuf_detach(&sb);
}

/* Parses -f into field pointers. */
static const struct gqueue_field **gqueue_format(const char *spec, size_t *n)
{
    char *copy = xstrdup(spec);
    char *save = NULL;
    size_t cap = 8;
    const struct gqueue_field **out = xmalloc(cap * sizeof(*out));
    *n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        size_t l = strlen(tok);
        while (l && tok[l - 1] == ' ')
            tok[--l] = '\0';
        const struct gqueue_field *f = NULL;
        for (size_t i = 0; i < GQUEUE_NFIELDS; i++)
            if (!strcasecmp(tok, gqueue_fields[i].name))
                f = &gqueue_fields[i];
        if (!f)
            cli_usage_error("unknown field '%s' in -f; use JOBID, NAME, ST, STATE, TIME, "
                            "TIMELIMIT, NODES, NODELIST(REASON), NODELIST, REASON, "
                            "PRIORITY, USER, EXITCODE, SUBMIT, START, END, WORKDIR, "
                            "COMMAND, MEMORY, BEGIN",
                            tok);
        if (*n == cap) {
            cap *= 2;
            out = xrealloc(out, cap * sizeof(*out));
        }
        out[(*n)++] = f;
    }
    free(copy);
    if (*n == 0)
        cli_usage_error("no fields in -f; e.g. -f " GQUEUE_DEFAULT_FORMAT);
    return out;
}

struct gqueue_row {
    struct job job;
    json_t *raw;
    size_t order; /* position in the daemon's answer, to keep ties stable */
};

/* Tables only need the fields, not JSON: the line format is far cheaper to read when
 * there are 10,000 jobs (docs/api.md, format=tsv). Returns the job lines (the body after
 * the header, in r's buffer) and the fields of each line in fields / *nfields. */
static char *gqueue_fetch_tsv(struct strbuf *path, const struct gqueue_field **columns,
                              size_t ncolumns, bool tree, int *fields, size_t *nfields,
                              struct client_response *r)
{
    /* Only the fields the columns read (plus id and gpus, for sorting). */
    bool want[JOB_FIELD_COUNT] = {[JOB_FIELD_ID] = true,
                                  [JOB_FIELD_GPUS] = true,
                                  [JOB_FIELD_DEPENDS_ON] = tree,
                                  [JOB_FIELD_RETRY_OF] = tree};
    for (size_t c = 0; c < ncolumns; c++) {
        char *needs = xstrdup(columns[c]->needs), *save = NULL;
        for (char *f = strtok_r(needs, ",", &save); f; f = strtok_r(NULL, ",", &save))
            want[job_field_parse(f)] = true;
        free(needs);
    }
    struct strbuf list;
    strbuf_init(&list);
    for (int f = 0; f < JOB_FIELD_COUNT; f++)
        if (want[f])
            strbuf_addf(&list, "%s%s", list.len ? "," : "", job_field_name((enum job_field)f));
    client_query_add(path, "format", "tsv");
    client_query_add(path, "fields", list.buf);
    strbuf_free(&list);
    char *err = NULL;
    if (client_request("GET", path->buf, NULL, 0, NULL, r, NULL, NULL, &err) < 0)
        cli_die(CLI_EXIT_FAIL, "%s", err);
    if (r->status != 200) {
        json_t *e = json_loadb(r->body.buf ? r->body.buf : "", r->body.len, 0, NULL);
        cli_die(CLI_EXIT_FAIL, "%s", cli_error_text(e));
    }
    char *text = r->body.buf ? r->body.buf : "";
    char *save = NULL;
    char *header = strtok_r(text, "\n", &save);
    *nfields = 0;
    if (!header)
        cli_die(CLI_EXIT_FAIL, "gflowd sent an empty job list");
    char *hs = NULL;
    for (char *h = strtok_r(header, "\t", &hs); h; h = strtok_r(NULL, "\t", &hs)) {
        int f = job_field_parse(h);
        if (f < 0 || *nfields == JOB_FIELD_COUNT)
            cli_die(CLI_EXIT_FAIL, "gflowd sent an unknown field '%s'", h);
        fields[(*nfields)++] = f;
    }
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
static struct gqueue_row *gqueue_tsv_rows(char *lines, const int *fields, size_t nfields,
                                          size_t *count)
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

struct gqueue_tree {
    size_t *order; /* rows in display order */
    char **prefix; /* per row: what goes before its NAME */
    size_t n;
};

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
static void gqueue_tree_build(struct gqueue_tree *t, const struct gqueue_row *rows, size_t first,
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

static void gqueue_tree_free(struct gqueue_tree *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->prefix[i]);
    free(t->prefix);
    free(t->order);
}

static bool gqueue_gpus_desc;

static int gqueue_cmp_gpus(const void *a, const void *b)
{
    const struct gqueue_row *x = a, *y = b;
    if (x->job.gpus != y->job.gpus)
        return (x->job.gpus < y->job.gpus ? -1 : 1) * (gqueue_gpus_desc ? -1 : 1);
    return x->order < y->order ? -1 : x->order > y->order;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    bool all = false, completed = false, tree = false;
    const char *states = NULL, *jobs = NULL, *user = NULL, *sort = NULL, *project = NULL;
    const char *format = GQUEUE_DEFAULT_FORMAT;
    int64_t limit = 0;
    enum output_format outfmt = OUTPUT_TABLE;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, gqueue_shortopts, gqueue_longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            all = true;
            break;
        case 'c':
            completed = true;
            break;
        case 't':
            tree = true;
            break;
        case 's':
            states = optarg;
            break;
        case 'j':
            jobs = optarg;
            break;
        case 'u':
            if (!*optarg)
                cli_usage_error("empty user name for -u; give a login name or 'all'");
            user = optarg;
            break;
        case 'P':
            if (!*optarg || optarg[0] == ',' || strstr(optarg, ",,") ||
                optarg[strlen(optarg) - 1] == ',')
                cli_usage_error("invalid project list '%s' for -P: use names separated by ','",
                                optarg);
            project = optarg;
            break;
        case 'n':
            if (parse_int64(optarg, &limit) < 0 || limit < -INT32_MAX || limit > INT32_MAX)
                cli_usage_error("invalid limit '%s' for -n: use a whole number (N: the "
                                "first N, -N: the last N, 0: all)",
                                optarg);
            break;
        case 'r':
            sort = optarg;
            break;
        case 'f':
            format = optarg;
            break;
        case 'o':
            if (output_format_parse(optarg, &outfmt) < 0)
                cli_usage_error("unknown output format '%s'; use table, csv or json", optarg);
            break;
        case OPT_SOCKET:
            client_set_socket(optarg);
            break;
        case 'h':
            gqueue_help();
            return 0;
        case 'V':
            printf("gqueue %s\n", GFLOW_VERSION);
            return 0;
        default:
            cli_usage_error("%s", cli_option_error(argv, c, gqueue_longopts));
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s' (to list given jobs use -j IDS)", argv[optind]);
    if (completed && states)
        cli_usage_error("--completed and --states cannot be used together; "
                        "use -s CD,F,CA,TO");

    size_t nfields;
    const struct gqueue_field **fields = gqueue_format(format, &nfields);

    /* The sort key. */
    const char *api_sort = "id";
    bool desc = false, local_sort = false;
    if (sort) {
        const char *key = sort;
        if (*key == '-') {
            desc = true;
            key++;
        } else if (*key == '+') {
            key++;
        }
        api_sort = gqueue_sort_key(key, sort);
        if (!api_sort) {
            local_sort = true;
            api_sort = "id";
        }
    }

    /* The request. */
    struct strbuf path;
    strbuf_init(&path);
    strbuf_adds(&path, "/v1/jobs");
    char *state_list = NULL;
    if (states)
        state_list = gqueue_states(states);
    else if (completed)
        state_list = xstrdup("CD,F,CA,TO");
    else if (!all && !jobs)
        state_list = xstrdup("PD,H,R");
    if (state_list)
        client_query_add(&path, "state", state_list);
    if (jobs) {
        char *err = NULL;
        int64_t *ids;
        size_t n;
        if (!strchr(jobs, '@')) {
            struct id_range *ranges; /* checked here; the daemon resolves the ranges */
            if (parse_id_ranges(jobs, &ranges, &n, &err) < 0)
                cli_usage_error("%s", err);
            free(ranges);
            client_query_add(&path, "id", jobs);
        } else {
            char *one[] = {(char *)jobs};
            ids = cli_parse_ids(1, one, &n);
            struct strbuf list;
            strbuf_init(&list);
            for (size_t i = 0; i < n; i++)
                strbuf_addf(&list, "%s%lld", i ? "," : "", (long long)ids[i]);
            client_query_add(&path, "id", list.buf);
            strbuf_free(&list);
            free(ids);
        }
    }
    if (user)
        client_query_add(&path, "user", user);
    if (project)
        client_query_add(&path, "project", project);
    if (strcmp(api_sort, "id") != 0 || (desc && !local_sort)) {
        char *s = xasprintf("%s%s", desc && !local_sort ? "-" : "", api_sort);
        client_query_add(&path, "sort", s);
        free(s);
    }
    if (limit != 0 && !local_sort)
        strbuf_addf(&path, "%climit=%lld", strchr(path.buf, '?') ? '&' : '?', (long long)limit);

    json_t *reply = NULL;
    struct gqueue_row *rows = NULL;
    size_t n = 0;
    struct client_response tsv = {0}; /* owns the strings of TSV rows */
    char *lines = NULL;
    int tsv_fields[JOB_FIELD_COUNT];
    size_t tsv_nfields = 0;
    /* A plain table or CSV goes straight from the daemon's lines to the table's text, one
     * job at a time; the tree, the sort by GPUs and JSON need every job first. */
    bool stream = outfmt != OUTPUT_JSON && !tree && !local_sort;
    if (outfmt == OUTPUT_JSON) {
        reply = cli_call("GET", path.buf, NULL);
        json_t *jobs_json = json_object_get(reply, "jobs");
        if (!json_is_array(jobs_json))
            cli_die(CLI_EXIT_FAIL, "gflowd's answer has no job list");
        n = json_array_size(jobs_json);
        rows = xcalloc(n ? n : 1, sizeof(*rows));
        for (size_t i = 0; i < n; i++) {
            rows[i].raw = json_array_get(jobs_json, i);
            rows[i].order = i;
            if (job_from_json(rows[i].raw, &rows[i].job) < 0)
                cli_die(CLI_EXIT_FAIL, "gflowd sent a job this gqueue cannot read");
        }
    } else {
        lines = gqueue_fetch_tsv(&path, fields, nfields, tree, tsv_fields, &tsv_nfields, &tsv);
        if (!stream)
            rows = gqueue_tsv_rows(lines, tsv_fields, tsv_nfields, &n);
    }
    strbuf_free(&path);
    size_t first = 0, count = n;
    if (local_sort) {
        gqueue_gpus_desc = desc;
        qsort(rows, n, sizeof(*rows), gqueue_cmp_gpus);
        if (limit > 0 && (size_t)limit < n)
            count = (size_t)limit;
        else if (limit < 0 && (size_t)-limit < n) {
            first = n - (size_t)-limit;
            count = (size_t)-limit;
        }
    }

    if (outfmt == OUTPUT_JSON) {
        json_t *arr = json_array();
        for (size_t i = first; i < first + count; i++)
            json_array_append(arr, rows[i].raw);
        output_json(arr, stdout);
        json_decref(arr);
    } else {
        const char **headers = xmalloc(nfields * sizeof(char *));
        for (size_t f = 0; f < nfields; f++)
            headers[f] = fields[f]->name;
        struct output_table *t = output_table_new(nfields, headers);
        double now = now_wall();
        if (stream) {
            size_t nlines = 0, len = strlen(lines);
            for (const char *p = lines; (p = memchr(p, '\n', len - (size_t)(p - lines))); p++)
                nlines++;
            output_table_reserve(t, nlines + 1, len);
            struct job j;
            for (char *line; (line = gqueue_next_line(&lines));) {
                if (job_from_tsv(&j, tsv_fields, tsv_nfields, line, true) < 0)
                    cli_die(CLI_EXIT_FAIL, "gflowd sent a job this gqueue cannot read");
                for (size_t f = 0; f < nfields; f++) {
                    fields[f]->format(output_table_cell(t), &j, now);
                    output_table_cell_end(t);
                }
                free(j.deps); /* the one owned part of a borrowed TSV row */
            }
            count = output_table_rows(t);
        } else {
            struct gqueue_tree tr = {0};
            if (tree)
                gqueue_tree_build(&tr, rows, first, count);
            size_t shown = tree ? tr.n : count;
            for (size_t o = 0; o < shown; o++) {
                size_t i = tree ? tr.order[o] : first + o;
                for (size_t f = 0; f < nfields; f++) {
                    struct strbuf *cell = output_table_cell(t);
                    if (tree && fields[f]->format == gqueue_name)
                        strbuf_adds(cell, tr.prefix[i - first]);
                    fields[f]->format(cell, &rows[i].job, now);
                    output_table_cell_end(t);
                }
            }
            if (tree)
                gqueue_tree_free(&tr);
        }
        if (count == 0 && outfmt == OUTPUT_TABLE)
            printf("No jobs found.\n");
        else if (outfmt == OUTPUT_CSV)
            output_table_print_csv(t, stdout);
        else
            output_table_print(t, stdout);
        output_table_free(t);
        free(headers);
    }

    for (size_t i = 0; i < n && reply; i++)
        job_clear(&rows[i].job);
    for (size_t i = 0; i < n && !reply; i++)
        free(rows[i].job.deps); /* the one owned part of a borrowed TSV row */
    client_response_free(&tsv);
    free(rows);
    free(fields);
    free(state_list);
    json_decref(reply);
    return cli_finish(0);
}
