/* gflow_status: `gflow status` (see gflow_status.h). Three reads of the daemon (the GPUs,
 * the active jobs of everyone, the reservations) and the caller's own active jobs. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backendtext.h"
#include "cli.h"
#include "clock.h"
#include "gflow_status.h"
#include "output.h"
#include "pressure.h"
#include "util.h"

static void status_help(void)
{
    printf("gflow status - the GPUs, your jobs and the queue on one screen\n"
           "\n"
           "Usage: gflow status [options]\n"
           "\n"
           "Shows each GPU's state and the jobs (and users) holding it; your running and\n"
           "waiting jobs with their GPUs, time (run time, or time waited so far) and\n"
           "reason; and the queue's pressure: jobs waiting (queued and held) and the GPUs\n"
           "they ask for against the GPUs free, the running jobs and the GPUs they hold,\n"
           "why jobs wait, and the active reservations.\n"
           "\n"
           "Options:\n"
           "  -o, --output FORMAT  table (the default) or json: {\"gpus\", \"jobs\",\n"
           "                       \"pressure\"} (pressure as the MCP tool\n"
           "                       get_queue_pressure gives it)\n"
           "      --socket PATH    the daemon's socket\n"
           "  -h, --help           show this help\n"
           "  -V, --version        show the version\n");
}

/* A duration as gflow prints times: HH:MM:SS, D-HH:MM:SS past a day. */
static char *duration(double secs)
{
    long long s = secs > 0 ? (long long)secs : 0;
    if (s >= 86400)
        return xasprintf("%lld-%02lld:%02lld:%02lld", s / 86400, s / 3600 % 24, s / 60 % 60,
                         s % 60);
    return xasprintf("%02lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
}

static const char *str(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && *s ? s : dflt;
}

/* The active job id among jobs, or NULL. */
static const json_t *job_by_id(const json_t *jobs, json_int_t id)
{
    size_t i;
    const json_t *j;
    json_array_foreach (jobs, i, j) {
        if (json_integer_value(json_object_get(j, "id")) == id)
            return j;
    }
    return NULL;
}

/* The GPUs with who holds them: [{"index", "name", "state", "reason", "jobs": [{"id",
 * "user"}]}]. */
static json_t *gpu_list(const json_t *gpus, const json_t *all)
{
    json_t *list = json_array();
    size_t i;
    const json_t *g;
    json_array_foreach (json_object_get(gpus, "gpus"), i, g) {
        json_t *holders = json_array();
        size_t k;
        const json_t *id;
        json_array_foreach (json_object_get(g, "jobs"), k, id) {
            const json_t *j = job_by_id(all, json_integer_value(id));
            json_array_append_new(
                holders, json_pack("{s:O, s:s}", "id", id, "user", j ? str(j, "user", "?") : "?"));
        }
        json_t *reason = json_object_get(g, "reason");
        json_array_append_new(
            list, json_pack("{s:O, s:s, s:s, s:O, s:o}", "index", json_object_get(g, "index"),
                            "name", str(g, "name", "?"), "state", str(g, "state", "?"), "reason",
                            reason ? reason : json_null(), "jobs", holders));
    }
    return list;
}

/* The caller's active jobs, brief: [{"id", "name", "state", "gpus", "gpu_ids", "time",
 * "reason"}], time being the run time of a running job and the wait of a waiting one. */
static json_t *job_list(const json_t *mine, double now)
{
    json_t *list = json_array();
    size_t i;
    const json_t *j;
    json_array_foreach (mine, i, j) {
        const char *st = str(j, "state", "?");
        bool running = !strcmp(st, "R") || !strcmp(st, "CG");
        double since =
            json_number_value(json_object_get(j, running ? "start_time" : "submit_time"));
        json_t *reason = json_object_get(j, "reason");
        json_t *ids = json_object_get(j, "gpu_ids");
        json_array_append_new(
            list, json_pack("{s:O, s:s, s:s, s:I, s:O, s:f, s:O}", "id", json_object_get(j, "id"),
                            "name", str(j, "name", "-"), "state", st, "gpus",
                            json_integer_value(json_object_get(j, "gpus")), "gpu_ids",
                            ids ? ids : json_null(), running ? "run_secs" : "wait_secs",
                            since > 0 ? now - since : 0.0, "reason",
                            reason && !running ? reason : json_null()));
    }
    return list;
}

static void print_gpus(const json_t *gpus, const json_t *list)
{
    size_t n = json_array_size(list);
    const char *err = str(gpus, "error", NULL);
    cli_printf("GPUs: %zu%s\n", n,
               json_is_true(json_object_get(gpus, "simulated")) ? " (simulated)" : "");
    if (!n) {
        cli_printf("  %s\n", err ? err : "none");
        return;
    }
    static const char *const head[] = {"GPU", "NAME", "STATE", "HELD BY"};
    struct output_table *t = output_table_new(4, head);
    size_t i;
    const json_t *g;
    json_array_foreach (list, i, g) {
        struct strbuf by;
        strbuf_init(&by);
        size_t k;
        const json_t *h;
        json_array_foreach (json_object_get(g, "jobs"), k, h)
            strbuf_addf(&by, "%sjob %lld (%s)", k ? ", " : "",
                        (long long)json_integer_value(json_object_get(h, "id")),
                        str(h, "user", "?"));
        const char *reason = str(g, "reason", NULL);
        if (!by.len && reason)
            strbuf_adds(&by, reason);
        char **cells = xmalloc(4 * sizeof(*cells));
        cells[0] = xasprintf("%lld", (long long)json_integer_value(json_object_get(g, "index")));
        cells[1] = xstrdup(str(g, "name", "?"));
        cells[2] = xstrdup(str(g, "state", "?"));
        cells[3] = by.len ? strbuf_detach(&by) : xstrdup("-");
        strbuf_free(&by);
        output_table_add_row_owned(t, cells);
    }
    output_table_print(t, stdout);
    output_table_free(t);
}

static void print_jobs(const json_t *list)
{
    size_t running = 0, waiting = 0, i;
    const json_t *j;
    json_array_foreach (list, i, j) {
        if (json_object_get(j, "run_secs"))
            running++;
        else
            waiting++;
    }
    if (!running && !waiting) {
        cli_printf("\nYour jobs: none running or waiting\n");
        return;
    }
    cli_printf("\nYour jobs: %zu running, %zu waiting\n", running, waiting);
    static const char *const head[] = {"JOBID", "NAME", "ST", "GPUS", "TIME", "REASON"};
    struct output_table *t = output_table_new(6, head);
    json_array_foreach (list, i, j) {
        const json_t *run = json_object_get(j, "run_secs");
        const json_t *ids = json_object_get(j, "gpu_ids");
        char **cells = xmalloc(6 * sizeof(*cells));
        cells[0] = xasprintf("%lld", (long long)json_integer_value(json_object_get(j, "id")));
        cells[1] = xstrdup(str(j, "name", "-"));
        cells[2] = xstrdup(str(j, "state", "?"));
        long long n = (long long)json_integer_value(json_object_get(j, "gpus"));
        cells[3] = json_is_string(ids) && *json_string_value(ids)
                       ? xasprintf("%lld [%s]", n, json_string_value(ids))
                       : xasprintf("%lld", n);
        char *d = duration(json_number_value(run ? run : json_object_get(j, "wait_secs")));
        cells[4] = run ? d : xasprintf("%s waited", d);
        if (!run)
            free(d);
        cells[5] = xstrdup(str(j, "reason", "-"));
        output_table_add_row_owned(t, cells);
    }
    output_table_print(t, stdout);
    output_table_free(t);
}

static const char *plural(json_int_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

static void print_pressure(const json_t *p)
{
    json_int_t queued = json_integer_value(json_object_get(p, "queued_jobs"));
    json_int_t held = json_integer_value(json_object_get(p, "held_jobs"));
    json_int_t running = json_integer_value(json_object_get(p, "running_jobs"));
    json_int_t asked = json_integer_value(json_object_get(p, "queued_requested_gpus"));
    json_int_t holding = json_integer_value(json_object_get(p, "running_allocated_gpus"));
    json_int_t total = json_integer_value(json_object_get(p, "total_gpus"));
    size_t free_gpus = json_array_size(json_object_get(p, "available_gpus"));
    cli_printf("\nQueue (everyone): %lld waiting (%lld queued, %lld held), the queued asking "
               "%lld %s; %zu of %lld %s free; %lld running %s holding %lld %s\n",
               (long long)(queued + held), (long long)queued, (long long)held, (long long)asked,
               plural(asked, "GPU", "GPUs"), free_gpus, (long long)total,
               plural(total, "GPU", "GPUs"), (long long)running, plural(running, "job", "jobs"),
               (long long)holding, plural(holding, "GPU", "GPUs"));
    const json_t *reasons = json_object_get(p, "blocked_reasons");
    if (json_object_size(reasons)) {
        struct strbuf sb;
        strbuf_init(&sb);
        const char *key;
        const json_t *n;
        json_object_foreach ((json_t *)reasons, key, n)
            strbuf_addf(&sb, "%s%s %lld", sb.len ? ", " : "", key,
                        (long long)json_integer_value(n));
        cli_printf("  Why they wait: %s\n", sb.buf);
        strbuf_free(&sb);
    }
    const json_t *users = json_object_get(p, "users");
    if (json_array_size(users)) {
        struct strbuf sb;
        strbuf_init(&sb);
        size_t i;
        const json_t *u;
        json_array_foreach (users, i, u)
            strbuf_addf(&sb, "%s%s %lld running, %lld waiting", i ? "; " : "", str(u, "name", "?"),
                        (long long)json_integer_value(json_object_get(u, "running")),
                        (long long)json_integer_value(json_object_get(u, "queued")));
        cli_printf("  Users: %s\n", sb.buf);
        strbuf_free(&sb);
    }
    json_int_t active = json_integer_value(json_object_get(p, "reservations_active"));
    if (json_integer_value(json_object_get(p, "reservations_total")))
        cli_printf("  Reservations: %lld active\n", (long long)active);
}

int gflow_status_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        CLI_COMMON_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    enum output_format fmt = OUTPUT_TABLE;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        if (c == 'o') {
            if (output_format_parse(optarg, &fmt) < 0 ||
                (fmt != OUTPUT_TABLE && fmt != OUTPUT_JSON))
                cli_usage_error("unknown output format '%s'; use table or json", optarg);
        } else {
            cli_common_option(c, argv, longopts, "gflow", status_help);
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s'; gflow status takes only options", argv[optind]);
    json_t *gpus = cli_call("GET", "/v1/gpus", NULL);
    json_t *all = cli_call("GET", "/v1/jobs?state=PD,H,R&user=all", NULL);
    json_t *mine = cli_call("GET", "/v1/jobs?state=PD,H,R", NULL);
    json_t *resv = cli_call("GET", "/v1/reservations", NULL);
    double now = now_wall();
    const json_t *all_jobs = json_object_get(all, "jobs");
    json_t *out =
        json_pack("{s:o, s:o, s:o}", "gpus", gpu_list(gpus, all_jobs), "jobs",
                  job_list(json_object_get(mine, "jobs"), now), "pressure",
                  pressure_build(gpus, all_jobs, json_object_get(resv, "reservations"), now));
    const json_t *backend = json_object_get(gpus, "backend");
    bool slurm = backend && strcmp(str(backend, "kind", ""), "slurm") == 0;
    if (backend)
        json_object_set(out, "backend", (json_t *)backend);
    if (fmt == OUTPUT_JSON) {
        output_json(out, stdout);
    } else if (slurm) { /* the GPUs are the partition's nodes' */
        struct strbuf text;
        strbuf_init(&text);
        backendtext(backend, now, true, &text);
        fputs(text.buf ? text.buf : "", stdout);
        strbuf_free(&text);
        print_jobs(json_object_get(out, "jobs"));
        print_pressure(json_object_get(out, "pressure"));
    } else {
        print_gpus(gpus, json_object_get(out, "gpus"));
        print_jobs(json_object_get(out, "jobs"));
        print_pressure(json_object_get(out, "pressure"));
    }
    json_decref(out);
    json_decref(gpus);
    json_decref(all);
    json_decref(mine);
    json_decref(resv);
    return cli_finish(0);
}
