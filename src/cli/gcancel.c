/* gcancel: cancels jobs, like scancel / gflow's gcancel.
 *
 * All the ids go in one POST /v1/jobs/cancel (one transaction in the daemon), each id
 * once however often it was given. A queued or held job is cancelled at once ("Job N
 * cancelled."); a running one is stopped by the daemon (SIGTERM, then SIGKILL after the
 * grace time), which is irrevocable once accepted ("Job N cancelling", shown as CG until
 * it has ended). An id the daemon refuses (unknown, already ended, not yours) gets the
 * daemon's one-line reason on stderr, makes the exit status 1, and the other ids are
 * still processed.
 *
 * Cancelling a job also cancels the queued jobs that depend on it and could then never
 * run (unless submitted with --no-auto-cancel), and so on down the chain; the daemon
 * says which, and they are listed. --dry-run changes nothing and prints gflow's
 * tab-separated lines (gcancel_dry_run).
 *
 * More than GCANCEL_LIST_MAX jobs (named or taken along) print one summary line instead
 * of a line per job (gcancel 80-5078 is 5,000 jobs), unless -v. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "completion.h"
#include "job.h"
#include "util.h"

/* Above this many jobs (named, plus dependents taken along), one summary line. */
#define GCANCEL_LIST_MAX 20

enum { OPT_DRY_RUN = 256, OPT_KILL };

static void gcancel_help(void)
{
    printf("gcancel - cancel gflow jobs\n"
           "\n"
           "Usage: gcancel [options] <ids...>\n"
           "       gcancel completion SHELL  (bash, elvish, fish, powershell or zsh)\n"
           "\n"
           "Queued and held jobs are cancelled at once (\"Job N cancelled.\"); running jobs\n"
           "get SIGTERM, then SIGKILL if they have not ended after the daemon's grace time\n"
           "(daemon.kill_grace_secs): \"Job N cancelling\", and gqueue shows them as CG\n"
           "(Cancelling) until they have ended, then CA.\n"
           "\n"
           "Job ids: 42, lists and ranges like 1,3,5-7, several arguments, @ for your\n"
           "latest job and @~N for the N-th before it. An id given twice counts once.\n"
           "\n"
           "Jobs that depend on a cancelled job and can then never run are cancelled\n"
           "too (reason DependencyFailed:<id>), unless submitted with --no-auto-cancel.\n"
           "\n"
           "More than %d jobs (named or taken along) print one summary line: how many\n"
           "were cancelled, are cancelling, had already ended or were not found.\n"
           "\n"
           "Options:\n"
           "      --dry-run      change nothing; print, as gflow does, one tab-separated\n"
           "                     line per job: 'ID STATE ok' (it would be cancelled),\n"
           "                     'DEP STATE blocked ID' for each job that depends on it and\n"
           "                     would be cancelled along (transitively), 'ID STATE invalid'\n"
           "                     (it cannot be: ended or not yours; why on stderr)\n"
           "  -v, --verbose      one line per job however many there are\n"
           "      --kill, --cancel  accepted for gflow and Slurm scripts; no effect\n"
           "      --socket PATH  the daemon's socket\n"
           "      --config FILE  the config file whose timezone (and\n"
           "                     daemon.socket_path) to use\n"
           "  -h, --help         show this help\n"
           "  -V, --version      show the version\n"
           "\n"
           "Exit status: 0 if every job was cancelled, 1 if any was not (with --dry-run:\n"
           "1 only if a job does not exist), 2 for a bad command line.\n",
           GCANCEL_LIST_MAX);
}

struct id_pos {
    int64_t id;
    size_t pos;
};

static int id_pos_cmp(const void *pa, const void *pb)
{
    const struct id_pos *a = pa, *b = pb;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* Drops repeated ids (gcancel 16 16), keeping the first of each where it was; returns
 * the new count. */
static size_t gcancel_unique(int64_t *ids, size_t n)
{
    struct id_pos *v = xmalloc((n ? n : 1) * sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = (struct id_pos){ids[i], i};
    qsort(v, n, sizeof(*v), id_pos_cmp);
    bool *repeat = xcalloc(n ? n : 1, sizeof(*repeat));
    for (size_t i = 1; i < n; i++)
        if (v[i].id == v[i - 1].id)
            repeat[v[i].pos] = true;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!repeat[i])
            ids[m++] = ids[i];
    free(repeat);
    free(v);
    return m;
}

/* The (distinct) ids as ranges, "80-5078" or "1,3,5-7"; after four ranges, ",...". */
static char *gcancel_ranges(const int64_t *ids, size_t n)
{
    int64_t *s = xmalloc((n ? n : 1) * sizeof(*s));
    memcpy(s, ids, n * sizeof(*s));
    qsort(s, n, sizeof(*s), int64_cmp);
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "");
    size_t shown = 0;
    for (size_t i = 0; i < n; shown++) {
        size_t j = i;
        while (j + 1 < n && s[j + 1] == s[j] + 1)
            j++;
        if (shown == 4) {
            strbuf_adds(&sb, ",...");
            break;
        }
        strbuf_addf(&sb, "%s%lld", shown ? "," : "", (long long)s[i]);
        if (j > i)
            strbuf_addf(&sb, "-%lld", (long long)s[j]);
        i = j + 1;
    }
    free(s);
    return strbuf_detach(&sb);
}

/* What became of the jobs, for the summary. */
struct gcancel_tally {
    size_t cancelled;  /* at once (or would be, --dry-run) */
    size_t cancelling; /* running: SIGTERM sent */
    size_t ended, not_found, refused;
    size_t dependents;   /* taken along */
    char *first_refusal; /* the daemon's reason for the first refused id */
};

/* A job not cancelled: its reason on stderr (list) or counted (summary). */
static void gcancel_warn(const char *text, bool list)
{
    if (list) {
        fflush(stdout);
        cli_warn("%s", text);
    }
}

static void gcancel_refused(struct gcancel_tally *t, const char *text, bool list)
{
    if (t->refused++ == 0)
        t->first_refusal = xstrdup(text);
    gcancel_warn(text, list);
}

/* An id the daemon refused: already ended (409), unknown (404), or another reason. */
static void gcancel_failed(struct gcancel_tally *t, const json_t *reply, bool list)
{
    const char *text = cli_error_text(reply);
    json_int_t status = json_integer_value(json_object_get(reply, "status"));
    if (status != 409 && status != 404) {
        gcancel_refused(t, text, list);
        return;
    }
    if (status == 409)
        t->ended++;
    else
        t->not_found++;
    gcancel_warn(text, list);
}

/* One job's outcome: a line per job (list) or a count (summary). */
static void gcancel_one(struct gcancel_tally *t, int64_t id, const json_t *reply, bool list)
{
    if (json_is_integer(reply)) { /* done as asked */
        t->cancelled++;
        if (list)
            printf("Job %lld cancelled.\n", (long long)id);
        return;
    }
    if (json_object_get(reply, "error")) {
        gcancel_failed(t, reply, list);
        return;
    }
    const char *state = json_string_value(json_object_get(reply, "state"));
    bool running = json_is_true(json_object_get(reply, "cancelling"));
    if (running) {
        t->cancelling++;
        const char *slurm = json_string_value(json_object_get(reply, "slurm"));
        if (list && slurm) /* the Slurm backend: what scancel did */
            printf("Job %lld cancelling (%s).\n", (long long)id, slurm);
        else if (list)
            printf("Job %lld cancelling (SIGTERM sent; CG until it has stopped).\n", (long long)id);
    } else if (state && !strcmp(state, "CA")) {
        t->cancelled++;
        if (list)
            printf("Job %lld cancelled.\n", (long long)id);
    } else {
        /* The daemon answered 2xx without cancelling; say what it did. */
        char *text = xasprintf("job %lld was not cancelled (it is in state %s)", (long long)id,
                               state ? state : "unknown");
        gcancel_refused(t, text, list);
        free(text);
    }
    /* The jobs its cancellation takes along. */
    size_t k;
    const json_t *a;
    json_array_foreach (json_object_get(reply, "dependents_cancelled"), k, a) {
        t->dependents++;
        if (!list)
            continue;
        long long dep_id = (long long)json_integer_value(json_object_get(a, "id"));
        long long dep = (long long)json_integer_value(json_object_get(a, "depends_on"));
        if (running)
            printf("Job %lld will be cancelled too once job %lld has stopped (it depends "
                   "on %lld).\n",
                   dep_id, (long long)id, dep);
        else
            printf("Job %lld cancelled too (depends on %lld: DependencyFailed:%lld).\n", dep_id,
                   dep, dep);
    }
}

/* A state as the daemon sends it ("PD", "CG") by gflow's name ("Queued", "Cancelling"). */
static const char *gcancel_state_name(const char *s)
{
    enum job_state st;
    if (!s)
        return "Unknown";
    if (job_state_is_cancelling_name(s))
        return "Cancelling";
    return job_state_parse(s, &st) == 0 ? job_state_name(st) : s;
}

/* --dry-run, in gflow's format, one line per job on stdout (tab-separated):
 *   ID STATE ok              it would be cancelled
 *   DEP STATE blocked ID     a job its cancellation would take along (depends on ID)
 *   ID STATE invalid         it cannot be cancelled (ended, or not yours: why on stderr)
 * A job that does not exist is an error on stderr. Returns the exit status: 1 if any
 * job was not found (or the daemon failed), else 0. */
static int gcancel_dry_run(const int64_t *ids, size_t n, const json_t *results)
{
    int status = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(results, i);
        if (json_is_integer(r)) { /* an older daemon's short form: no state said */
            printf("%lld\tUnknown\tok\n", (long long)ids[i]);
            continue;
        }
        const char *state = json_string_value(json_object_get(r, "state"));
        if (json_object_get(r, "error")) {
            if (state)
                printf("%lld\t%s\tinvalid\n", (long long)ids[i], gcancel_state_name(state));
            else
                status = 1; /* not found, or the daemon could not read it */
            fflush(stdout);
            cli_warn("%s", cli_error_text(r));
            continue;
        }
        printf("%lld\t%s\tok\n", (long long)ids[i], gcancel_state_name(state));
        size_t k;
        const json_t *a;
        json_array_foreach (json_object_get(r, "dependents_cancelled"), k, a)
            printf("%lld\t%s\tblocked\t%lld\n",
                   (long long)json_integer_value(json_object_get(a, "id")),
                   gcancel_state_name(json_string_value(json_object_get(a, "state"))),
                   (long long)json_integer_value(json_object_get(a, "depends_on")));
    }
    return status;
}

/* The summary of many jobs: one line on stdout, and one on stderr when some were not
 * cancelled. */
static void gcancel_summary(const struct gcancel_tally *t, const int64_t *ids, size_t n)
{
    char *ranges = gcancel_ranges(ids, n);
    printf("%zu job%s (%s): ", n, n == 1 ? "" : "s", ranges);
    printf("%zu cancelled, %zu cancelling (CG until stopped)", t->cancelled, t->cancelling);
    printf(", %zu already ended, %zu not found", t->ended, t->not_found);
    if (t->refused)
        printf(", %zu refused", t->refused);
    if (t->dependents)
        printf("; %zu dependent job%s cancelled too", t->dependents, t->dependents == 1 ? "" : "s");
    printf(".\n");
    free(ranges);
    size_t failed = t->ended + t->not_found + t->refused;
    if (!failed)
        return;
    fflush(stdout);
    if (t->refused)
        cli_warn("%s (%zu job%s not cancelled in all; 'gcancel -v' lists each)", t->first_refusal,
                 failed, failed == 1 ? "" : "s");
    else
        cli_warn("%zu job%s not cancelled (%zu already ended, %zu not found); 'gcancel -v' lists "
                 "each",
                 failed, failed == 1 ? "" : "s", t->ended, t->not_found);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"verbose", no_argument, NULL, 'v'},
        {"kill", no_argument, NULL, OPT_KILL},
        {"cancel", no_argument, NULL, OPT_KILL},
        CLI_COMMON_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    cli_init(argv[0]);
    if (argc > 1 && !strcmp(argv[1], "completion"))
        return completion_main("gcancel", argc - 2, argv + 2);
    bool dry_run = false, verbose = false;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vhV", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_DRY_RUN:
            dry_run = true;
            break;
        case 'v':
            verbose = true;
            break;
        case OPT_KILL: /* gflow's and Slurm's spelling of what gcancel does anyway */
            break;
        default:
            cli_common_option(c, argv, longopts, "gcancel", gcancel_help);
        }
    }
    if (optind >= argc)
        cli_usage_error("which jobs? give job ids, e.g. 'gcancel 42' or 'gcancel 3-7'");
    cli_refuse_completion(argv[optind]);

    size_t n;
    int64_t *ids = cli_parse_ids(argc - optind, argv + optind, &n);
    n = gcancel_unique(ids, n);
    /* One request for all the ids (POST /v1/jobs/cancel): one result per id, in order. */
    json_t *body = json_object();
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_integer(ids[i]));
    json_object_set_new(body, "ids", arr);
    json_t *all = NULL;
    if (cli_request_json("POST", dry_run ? "/v1/jobs/cancel?dry_run=1" : "/v1/jobs/cancel", body,
                         NULL, &all) < 0)
        cli_die(1, "%s", cli_error_text(all));
    json_decref(body);
    const json_t *results = json_object_get(all, "results");
    if (dry_run) {
        int rc = gcancel_dry_run(ids, n, results);
        json_decref(all);
        free(ids);
        return cli_finish(rc);
    }

    size_t lines = n, k;
    const json_t *r;
    json_array_foreach (results, k, r)
        lines += json_array_size(json_object_get(r, "dependents_cancelled"));
    bool list = verbose || lines <= GCANCEL_LIST_MAX;

    /* Jobs already cancelled (or listed) along with an earlier one: only the dependents
     * those took along, so few; searched in order. */
    int64_t *done = NULL;
    size_t n_done = 0, cap_done = 0;
    struct gcancel_tally tally = {0};
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t d = 0; d < n_done && !seen; d++)
            seen = done[d] == ids[i];
        if (seen)
            continue;
        const json_t *reply = json_array_get(results, i);
        gcancel_one(&tally, ids[i], reply, list);
        const json_t *a;
        json_array_foreach (json_object_get(reply, "dependents_cancelled"), k, a) {
            if (n_done == cap_done) {
                cap_done = cap_done ? cap_done * 2 : 16;
                done = xrealloc(done, cap_done * sizeof(*done));
            }
            done[n_done++] = json_integer_value(json_object_get(a, "id"));
        }
    }
    if (!list)
        gcancel_summary(&tally, ids, n);
    int status = tally.ended + tally.not_found + tally.refused ? 1 : 0;
    free(tally.first_refusal);
    json_decref(all);
    free(done);
    free(ids);
    return cli_finish(status);
}
