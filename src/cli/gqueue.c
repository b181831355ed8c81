/* gqueue: lists jobs, like squeue / gflow's gqueue.
 *
 * By default the caller's active jobs (PD, H, R) with the columns
 * JOBID NAME ST TIME NODES NODELIST(REASON). Filtering, sorting and the limit are done
 * by the daemon (GET /v1/jobs) so that a long history costs the client nothing; only
 * the display, a sort by GPU count, and the filters the API does not offer (several
 * users, -N names, -g group; the limit then too) happen here. On a terminal the table is
 * coloured and fitted to its width, and -w redraws it in place. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

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

/* gflow's elapsed time: "00:15:23", "1-04:30:00" with days; "-" before the job starts. */
static void gqueue_time(struct strbuf *sb, const struct job *j, double now)
{
    if (j->start_time <= 0) {
        strbuf_addc(sb, '-');
        return;
    }
    double end = j->end_time > 0 ? j->end_time : (j->state == JOB_RUNNING ? now : j->start_time);
    int64_t secs = end > j->start_time ? (int64_t)(end - j->start_time) : 0;
    int64_t days = secs / 86400;
    if (days > 0)
        strbuf_addf(sb, "%lld-", (long long)days);
    strbuf_addf(sb, "%02d:%02d:%02d", (int)(secs % 86400 / 3600), (int)(secs % 3600 / 60),
                (int)(secs % 60));
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
    {"TIME", gqueue_time, "state,start_time,end_time"},
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

enum { OPT_SOCKET = 256, OPT_SINCE, OPT_INTERVAL };

static const char gqueue_shortopts[] = "+:acts:j:u:N:g:P:wn:r:f:o:hV";
static const struct option gqueue_longopts[] = {
    {"all", no_argument, NULL, 'a'},
    {"completed", no_argument, NULL, 'c'},
    {"tree", no_argument, NULL, 't'},
    {"states", required_argument, NULL, 's'},
    {"state", required_argument, NULL, 's'},
    {"jobs", required_argument, NULL, 'j'},
    {"user", required_argument, NULL, 'u'},
    {"users", required_argument, NULL, 'u'},
    {"names", required_argument, NULL, 'N'},
    {"group", required_argument, NULL, 'g'},
    {"since", required_argument, NULL, OPT_SINCE},
    {"watch", no_argument, NULL, 'w'},
    {"interval", required_argument, NULL, OPT_INTERVAL},
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
           "  -u, --user, --users LIST\n"
           "                        jobs of these users (comma-separated login names),\n"
           "                        or '*' / 'all' for everyone's (default: yours)\n"
           "  -N, --names LIST      only jobs with these names (comma-separated, exact)\n"
           "  -g, --group ID        only the jobs of one submission (an array or sweep):\n"
           "                        its group id, the id of its first job\n"
           "      --since WHEN      only jobs submitted since WHEN: a duration ago (30m,\n"
           "                        1h, 2d, 1w; also s), today, yesterday, a date or time\n"
           "                        (2026-03-01, 2026-03-01T09:30, '2026-03-01 09:30:00',\n"
           "                        local; Z for UTC) or unix seconds\n"
           "  -P, --project LIST    only jobs of these projects (gbatch -P), e.g. a,b\n"
           "  -n, --limit N         the first N jobs after sorting; -N: the last N;\n"
           "                        0: all (default); says how many were not shown\n"
           "  -r, --sort FIELD      sort by id (default), name, state, priority, user,\n"
           "                        submit, start, end, time or gpus; prefix '-' for\n"
           "                        descending, e.g. -r -priority\n"
           "  -f, --format FIELDS   columns, comma-separated (default\n"
           "                        " GQUEUE_DEFAULT_FORMAT "):\n"
           "                        JOBID NAME ST STATE TIME TIMELIMIT NODES\n"
           "                        NODELIST(REASON) NODELIST REASON PRIORITY USER\n"
           "                        EXITCODE SUBMIT START END WORKDIR COMMAND MEMORY\n"
           "                        BEGIN PROJECT\n"
           "  -o, --output FORMAT   table (default), csv, json or yaml; json and yaml are\n"
           "                        {jobs: [the whole job objects], total, timestamp}\n"
           "                        and ignore -f\n"
           "  -t, --tree            show dependencies as a tree: each job under the first\n"
           "                        listed job it depends on (NAME drawn with ├─ └─);\n"
           "                        a retry (--max-retries) under the attempt it\n"
           "                        retries (with -a, to see failed attempts)\n"
           "  -w, --watch           refresh the listing every --interval seconds; on a\n"
           "                        terminal full-screen (q or Ctrl-C quits), otherwise\n"
           "                        one table after another\n"
           "      --interval SECS   seconds between refreshes with --watch (default 2)\n"
           "      --socket PATH     the daemon's socket\n"
           "  -h, --help            show this help\n"
           "  -V, --version         show the version\n"
           "\n"
           "Columns: TIME is the run time, HH:MM:SS or D-HH:MM:SS (- before the job\n"
           "starts); NODES the GPUs requested; NODELIST(REASON) the GPUs of a running job,\n"
           "or why a job waits or ended, e.g. (Priority), (JobHeldUser),\n"
           "(NonZeroExitCode), (Signal), (TimeLimit), (Memory), (BeginTime),\n"
           "(OutOfMemory); EXITCODE the exit status, or the signal that killed the job\n"
           "(e.g. SIGKILL); TIMELIMIT is UNLIMITED when none; MEMORY the host memory\n"
           "requested (--memory), - when none; SUBMIT/START/END are local times.\n"
           "On a terminal, states are coloured (not with NO_COLOR set) and cells are cut\n"
           "with … to fit its width (the whole text: gjob show, -o json).\n");
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

/* Splits a comma list into its non-empty items, blanks around them trimmed. */
static char **gqueue_split(const char *list, size_t *n)
{
    char *copy = xstrdup(list), *save = NULL;
    char **out = xcalloc(strlen(list) / 2 + 2, sizeof(*out));
    *n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        size_t l = strlen(tok);
        while (l && tok[l - 1] == ' ')
            tok[--l] = '\0';
        if (l)
            out[(*n)++] = xstrdup(tok);
    }
    free(copy);
    return out;
}

/* Parses -f into field pointers. */
static const struct gqueue_field **gqueue_format(const char *spec, size_t *n)
{
    char **names = gqueue_split(spec, n);
    const struct gqueue_field **out = xcalloc(*n + 1, sizeof(*out));
    for (size_t k = 0; k < *n; k++) {
        for (size_t i = 0; i < GQUEUE_NFIELDS && !out[k]; i++)
            if (!strcasecmp(names[k], gqueue_fields[i].name))
                out[k] = &gqueue_fields[i];
        if (!out[k])
            cli_usage_error("unknown field '%s' in -f; use JOBID, NAME, ST, STATE, TIME, "
                            "TIMELIMIT, NODES, NODELIST(REASON), NODELIST, REASON, "
                            "PRIORITY, USER, EXITCODE, SUBMIT, START, END, WORKDIR, "
                            "COMMAND, MEMORY, BEGIN, PROJECT",
                            names[k]);
        free(names[k]);
    }
    free(names);
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
 * there are 10,000 jobs (docs/api.md, format=tsv). Adds format=tsv and the fields to
 * path. */
static void gqueue_tsv_query(struct strbuf *path, const struct gqueue_field **columns,
                             size_t ncolumns, bool tree, bool filters)
{
    /* Only the fields the columns read (plus id and gpus, for sorting; what the tree and
     * the filters applied here read). */
    bool want[JOB_FIELD_COUNT] = {
        [JOB_FIELD_ID] = true,         [JOB_FIELD_GPUS] = true,    [JOB_FIELD_DEPENDS_ON] = tree,
        [JOB_FIELD_RETRY_OF] = tree,   [JOB_FIELD_USER] = filters, [JOB_FIELD_NAME] = filters,
        [JOB_FIELD_GROUP_ID] = filters};
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
}

/* GET path into r (the body whole, or through chunk_cb as it arrives); exits on an
 * error. */
static void gqueue_get_tsv(const char *path, struct client_response *r, client_chunk_cb chunk_cb,
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
static void gqueue_tsv_header(char *header, int *fields, size_t *nfields)
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
static char *gqueue_fetch_tsv(const char *path, int *fields, size_t *nfields,
                              struct client_response *r)
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

/* ---- what to list ---- */

struct gqueue_opts {
    bool tree;
    const struct gqueue_field **fields;
    size_t nfields;
    enum output_format outfmt;
    int64_t limit;
    bool desc, local_sort;
    const char *api_sort;
    char *filters; /* the query's filters: "?state=...&user=..." */
    char **users;  /* with more than one user: the users (filtered here) */
    size_t n_users;
    char **names; /* -N: the names (filtered here) */
    size_t n_names;
    int64_t group;    /* -g: the group id (filtered here); 0 none */
    bool active_only; /* only PD, H, R: counted from the daemon's memory, for free */
    size_t width;     /* a terminal's width (cells cut to fit), or 0 */
    bool colour;
};

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
 * knows (a directory user). Not getpwnam: these programs are linked statically, and glibc's
 * NSS modules, loaded at run time, may crash in them on a name they do not know. */
static bool gqueue_user_known(const char *name)
{
    FILE *f = fopen("/etc/passwd", "r");
    bool found = false;
    for (struct passwd *pw; f && !found && (pw = fgetpwent(f));)
        found = !strcmp(pw->pw_name, name);
    if (f)
        fclose(f);
    if (found)
        return true;
    struct strbuf path;
    strbuf_init(&path);
    strbuf_adds(&path, "/v1/jobs");
    client_query_add(&path, "user", name);
    client_query_add(&path, "format", "count");
    json_t *reply = cli_call("GET", path.buf, NULL);
    strbuf_free(&path);
    found = json_integer_value(json_object_get(reply, "total")) > 0;
    json_decref(reply);
    return found;
}

/* --since: seconds since the epoch, or -1. */
static double gqueue_since(const char *text, double now)
{
    char *end;
    double n = strtod(text, &end);
    if (end != text && isdigit((unsigned char)*text)) {
        static const struct {
            char unit;
            double secs;
        } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 604800}};
        if (!*end)
            return n; /* unix seconds, as gflow */
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
            if (end[0] == units[i].unit && !end[1])
                return now - n * units[i].secs;
    }
    time_t t = (time_t)now;
    struct tm tm;
    localtime_r(&t, &tm);
    if (!strcasecmp(text, "today") || !strcasecmp(text, "yesterday")) {
        tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        tm.tm_mday -= !strcasecmp(text, "yesterday");
        tm.tm_isdst = -1;
        return (double)mktime(&tm);
    }
    static const char *const forms[] = {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S",
                                        "%Y-%m-%d %H:%M", "%Y-%m-%d"};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        memset(&tm, 0, sizeof(tm));
        const char *rest = strptime(text, forms[i], &tm);
        if (!rest || (*rest && strcmp(rest, "Z") != 0))
            continue;
        if (*rest)
            return (double)timegm(&tm);
        tm.tm_isdst = -1;
        return (double)mktime(&tm);
    }
    return -1;
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

/* gflow's -o json / yaml: {"jobs": [...], "total": N, "timestamp": RFC 3339}. */
static void gqueue_print_document(const struct gqueue_opts *o, json_t *jobs, FILE *out)
{
    double now = now_wall();
    time_t secs = (time_t)now;
    struct tm tm;
    char stamp[64], when[32];
    gmtime_r(&secs, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp, sizeof(stamp), "%s.%06d+00:00", when, (int)((now - (double)secs) * 1e6));
    json_t *doc = json_pack("{s:O, s:I, s:s}", "jobs", jobs, "total",
                            (json_int_t)json_array_size(jobs), "timestamp", stamp);
    if (o->outfmt == OUTPUT_YAML)
        output_yaml(doc, out);
    else
        output_json(doc, out);
    json_decref(doc);
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
    struct strbuf pending; /* received text not yet taken: the start of a line */
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
    struct gqueue_feed f = {.o = o, .t = t, .now = now_wall()};
    struct client_response r = {0};
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

/* One listing of the jobs, to out; the "Showing N of M" note to notes. */
static void gqueue_list(const struct gqueue_opts *o, FILE *out, FILE *notes)
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
     * job at a time; the tree, the sort by GPUs, local filters and JSON need every job. */
    bool stream = !machine && !o->tree && !local_limit;
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
        gqueue_tsv_query(&path, o->fields, o->nfields, o->tree, gqueue_local_filter(o));
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
        gqueue_gpus_desc = o->desc;
        qsort(rows, n, sizeof(*rows), gqueue_cmp_gpus);
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
        for (size_t i = first; i < first + count; i++)
            json_array_append(arr, rows[i].raw);
        gqueue_print_document(o, arr, out);
        json_decref(arr);
    } else {
        const char **headers = xmalloc(o->nfields * sizeof(char *));
        for (size_t f = 0; f < o->nfields; f++)
            headers[f] = o->fields[f]->name;
        struct output_table *t = output_table_new(o->nfields, headers);
        output_table_set_max_width(t, o->width);
        for (size_t f = 0; f < o->nfields && o->colour; f++)
            if (o->fields[f]->format == gqueue_st || o->fields[f]->format == gqueue_state)
                output_table_set_style(t, f, gqueue_state_style);
        double now = now_wall();
        if (stream) {
            gqueue_tsv_query(&path, o->fields, o->nfields, false, false);
            gqueue_feed_table(o, path.buf, probe, want, t, &more);
            count = output_table_rows(t);
        } else {
            struct gqueue_tree tr = {0};
            if (o->tree)
                gqueue_tree_build(&tr, rows, first, count);
            size_t shown = o->tree ? tr.n : count;
            for (size_t k = 0; k < shown; k++) {
                size_t i = o->tree ? tr.order[k] : first + k;
                for (size_t f = 0; f < o->nfields; f++) {
                    struct strbuf *cell = output_table_cell(t);
                    if (o->tree && o->fields[f]->format == gqueue_name)
                        strbuf_adds(cell, tr.prefix[i - first]);
                    o->fields[f]->format(cell, &rows[i].job, now);
                    output_table_cell_end(t);
                }
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
                fprintf(notes, "Showing %s %zu jobs; more were not shown (use -n 0 to show all)\n",
                        which, count);
            else if (total > (int64_t)count)
                fprintf(notes, "Showing %s %zu of %lld jobs (use -n 0 to show all)\n", which, count,
                        (long long)total);
        }
        if (count == 0 && o->outfmt == OUTPUT_TABLE)
            fprintf(out, "No jobs found.\n");
        else if (o->outfmt == OUTPUT_CSV)
            output_table_print_csv(t, out);
        else
            output_table_print(t, out);
        output_table_free(t);
        free(headers);
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

/* ---- --watch ---- */

static struct termios gqueue_saved_tty;
static bool gqueue_tty_changed, gqueue_screen_on;
static volatile sig_atomic_t gqueue_stop, gqueue_resized;

static void gqueue_signal_cb(int sig)
{
    if (sig == SIGWINCH)
        gqueue_resized = 1;
    else
        gqueue_stop = 1;
}

/* Puts the terminal back as it was (at exit too, even after an error). */
static void gqueue_restore_terminal(void)
{
    if (gqueue_screen_on) {
        fputs("\033[?25h\033[?1049l", stdout); /* cursor back, main screen back */
        fflush(stdout);
        gqueue_screen_on = false;
    }
    if (gqueue_tty_changed) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &gqueue_saved_tty);
        gqueue_tty_changed = false;
    }
}

/* The terminal's width: COLUMNS when set, else what the terminal says, else 80. */
static size_t gqueue_term_width(size_t *rows)
{
    struct winsize ws = {0};
    bool known = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0;
    if (rows)
        *rows = known && ws.ws_row ? ws.ws_row : 24;
    const char *env = getenv("COLUMNS");
    int64_t cols;
    if (env && parse_int64(env, &cols) == 0 && cols > 0 && cols < 100000)
        return (size_t)cols;
    return known && ws.ws_col ? ws.ws_col : 80;
}

/* Waits up to secs for a key on a terminal's standard input; true when it was q (or
 * the program was asked to stop). */
static bool gqueue_wait_key(double secs, bool keys)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    double until = now_mono() + secs;
    while (!gqueue_stop && !gqueue_resized) {
        double left = until - now_mono();
        if (left <= 0)
            return false;
        int rc = poll(&p, keys ? 1 : 0, (int)(left * 1000) + 1);
        if (rc < 0 && errno != EINTR)
            return false;
        if (rc > 0) {
            char c;
            ssize_t got = read(STDIN_FILENO, &c, 1);
            if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
                keys = false; /* standard input closed: only time and signals end a wait */
            else if (got == 1 && (c == 'q' || c == 'Q' || c == 3 /* Ctrl-C in raw mode */))
                return true;
        }
    }
    return gqueue_stop;
}

/* One screen: the title, then the listing, each line cleared to its end, cut to the
 * terminal's height, the rest of the screen cleared. */
static void gqueue_draw(const struct gqueue_opts *o, const char *title, double interval)
{
    char *frame = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&frame, &len);
    if (!mem)
        cli_die(CLI_EXIT_FAIL, "out of memory");
    time_t now = time(NULL);
    struct tm tm;
    char when[16];
    localtime_r(&now, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    fprintf(mem, "Every %gs: %s    %s    (q to quit)\n\n", interval, title, when);
    gqueue_list(o, mem, mem);
    fclose(mem);
    size_t rows;
    gqueue_term_width(&rows);
    struct strbuf screen;
    strbuf_init(&screen);
    strbuf_adds(&screen, "\033[H");
    size_t line = 0;
    for (char *p = frame; *p && line + 1 < rows; line++) {
        char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        strbuf_add(&screen, p, n);
        strbuf_adds(&screen, "\033[K\r\n");
        p += n + (nl ? 1 : 0);
    }
    strbuf_adds(&screen, "\033[J");
    fwrite(screen.buf, 1, screen.len, stdout);
    fflush(stdout);
    strbuf_free(&screen);
    free(frame);
}

/* -w: the listing again every interval seconds until q, Ctrl-C or a signal. */
static int gqueue_watch(struct gqueue_opts *o, const char *title, double interval)
{
    struct sigaction sa = {.sa_handler = gqueue_signal_cb};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (!isatty(STDOUT_FILENO)) { /* a log or a pipe: one table after another */
        for (bool first = true; !gqueue_stop; first = false) {
            if (!first)
                putchar('\n');
            gqueue_list(o, stdout, stderr);
            if (fflush(stdout) != 0)
                return cli_finish(0);
            gqueue_wait_key(interval, false);
        }
        return cli_finish(0);
    }
    sigaction(SIGWINCH, &sa, NULL);
    bool keys = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &gqueue_saved_tty) == 0;
    atexit(gqueue_restore_terminal);
    if (keys) { /* keys one at a time, not echoed */
        struct termios raw = gqueue_saved_tty;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG); /* Ctrl-C: read as a key */
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        gqueue_tty_changed = tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0;
    }
    fputs("\033[?1049h\033[?25l\033[2J", stdout); /* the alternate screen, no cursor */
    gqueue_screen_on = true;
    while (!gqueue_stop) {
        gqueue_resized = 0;
        o->width = gqueue_term_width(NULL);
        gqueue_draw(o, title, interval);
        if (gqueue_wait_key(interval, keys))
            break;
    }
    gqueue_restore_terminal();
    return cli_finish(0);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    bool all = false, completed = false, watch = false, interval_given = false;
    const char *states = NULL, *jobs = NULL, *user = NULL, *sort = NULL, *names = NULL;
    const char *project = NULL;
    const char *format = GQUEUE_DEFAULT_FORMAT, *since = NULL;
    double interval = 2;
    struct gqueue_opts o = {.outfmt = OUTPUT_TABLE, .api_sort = "id"};
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
            o.tree = true;
            break;
        case 's':
            states = optarg;
            break;
        case 'j':
            jobs = optarg;
            break;
        case 'u':
            if (!*optarg)
                cli_usage_error("empty user name for -u; give login names, or '*' for all");
            user = optarg;
            break;
        case 'N':
            names = optarg;
            break;
        case 'g':
            if (parse_int64(optarg, &o.group) < 0 || o.group <= 0)
                cli_usage_error("invalid group '%s' for -g: give the id of the array or sweep "
                                "(its first job's id)",
                                optarg);
            break;
        case OPT_SINCE:
            since = optarg;
            break;
        case 'w':
            watch = true;
            break;
        case OPT_INTERVAL: {
            char *end;
            interval = strtod(optarg, &end);
            interval_given = true;
            if (end == optarg || *end || !(interval >= 0.1 && interval <= 86400))
                cli_usage_error("invalid --interval '%s': give seconds between 0.1 and 86400, "
                                "e.g. --interval 5",
                                optarg);
            break;
        }
        case 'P':
            if (!*optarg || optarg[0] == ',' || strstr(optarg, ",,") ||
                optarg[strlen(optarg) - 1] == ',')
                cli_usage_error("invalid project list '%s' for -P: use names separated by ','",
                                optarg);
            project = optarg;
            break;
        case 'n':
            if (parse_int64(optarg, &o.limit) < 0 || o.limit < -INT32_MAX || o.limit > INT32_MAX)
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
            if (!strcasecmp(optarg, "yaml"))
                o.outfmt = OUTPUT_YAML;
            else if (output_format_parse(optarg, &o.outfmt) < 0)
                cli_usage_error("unknown output format '%s'; use table, csv, json or yaml", optarg);
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
    if (interval_given && !watch)
        cli_usage_error("--interval needs --watch; e.g. gqueue -w --interval %g", interval);

    o.fields = gqueue_format(format, &o.nfields);

    /* The sort key. */
    if (sort) {
        const char *key = sort;
        if (*key == '-') {
            o.desc = true;
            key++;
        } else if (*key == '+') {
            key++;
        }
        o.api_sort = gqueue_sort_key(key, sort);
        if (!o.api_sort) {
            o.local_sort = true;
            o.api_sort = "id";
        }
    }

    /* The filters. */
    struct strbuf path;
    strbuf_init(&path);
    char *state_list = NULL;
    if (states)
        state_list = gqueue_states(states);
    else if (completed)
        state_list = xstrdup("CD,F,CA,TO");
    else if (!all && !jobs)
        state_list = xstrdup("PD,H,R");
    if (state_list) {
        client_query_add(&path, "state", state_list);
        o.active_only = true;
        size_t n_states;
        char **list = gqueue_split(state_list, &n_states);
        for (size_t i = 0; i < n_states; i++) {
            enum job_state st;
            o.active_only &= job_state_parse(list[i], &st) == 0 && job_state_is_active(st);
            free(list[i]);
        }
        free(list);
    }
    free(state_list);
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
    if (user) {
        o.users = gqueue_split(user, &o.n_users);
        bool everyone = false;
        for (size_t i = 0; i < o.n_users; i++) {
            if (!strcmp(o.users[i], "*") || !strcmp(o.users[i], "all"))
                everyone = true;
            else if (!gqueue_user_known(o.users[i]))
                cli_die(CLI_EXIT_FAIL, "no such user '%s'; give a login name, or '*' for all",
                        o.users[i]);
        }
        if (o.n_users == 0)
            cli_usage_error("empty user name for -u; give login names, or '*' for all");
        if (everyone)
            o.n_users = 0; /* everyone's: no filter */
        client_query_add(&path, "user", o.n_users == 1 ? o.users[0] : "all");
    }
    if (project)
        client_query_add(&path, "project", project);
    if (names) {
        o.names = gqueue_split(names, &o.n_names);
        if (!o.n_names)
            cli_usage_error("empty name list for -N; e.g. -N train,eval");
    }
    if (since) {
        double t = gqueue_since(since, now_wall());
        if (t < 0)
            cli_usage_error("invalid --since '%s': use a duration ago (30m, 1h, 2d, 1w), "
                            "today, yesterday, a date or time (2026-03-01, "
                            "2026-03-01T09:30) or unix seconds",
                            since);
        char secs[32];
        snprintf(secs, sizeof(secs), "%.3f", t);
        client_query_add(&path, "since", secs);
    }
    o.filters = strbuf_detach(&path);

    bool tty = isatty(STDOUT_FILENO);
    const char *no_color = getenv("NO_COLOR");
    o.colour = tty && !(no_color && *no_color) && o.outfmt == OUTPUT_TABLE;
    if (tty && o.outfmt == OUTPUT_TABLE)
        o.width = gqueue_term_width(NULL);

    int rc;
    if (watch) {
        struct strbuf title;
        strbuf_init(&title);
        strbuf_adds(&title, "gqueue");
        for (int i = 1; i < argc; i++)
            strbuf_addf(&title, " %s", argv[i]);
        rc = gqueue_watch(&o, title.buf, interval);
        strbuf_free(&title);
    } else {
        gqueue_list(&o, stdout, stderr);
        rc = cli_finish(0);
    }
    for (size_t i = 0; o.users && o.users[i]; i++)
        free(o.users[i]);
    for (size_t i = 0; o.names && o.names[i]; i++)
        free(o.names[i]);
    free(o.users);
    free(o.names);
    free(o.filters);
    free(o.fields);
    return rc;
}
