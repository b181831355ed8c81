/* gstats: usage accounting over a period, like gflow's gstats and Slurm's sreport:
 *
 *   gstats                    your jobs of all time (gflow's default; -a: everyone's,
 *                             -t 7d: the last week), one row per user: jobs by final
 *                             state, GPU-hours, mean and p95 wait, mean run time, failure
 *                             rate, commonest reasons; then the total
 *   gstats --by project|gpu   one row per project, or per GPU
 *   gstats --gpu              each GPU's sampled utilisation (mean, max) over the period
 *   gstats --idle-gpus        the jobs that held GPUs and sat on them (mean utilisation
 *                             under 5 %): who is sitting on GPUs
 *   -o json|csv               the numbers for scripts (--gpu: with a coarse time series)
 *
 * The daemon computes them (GET /v1/stats, docs/api.md) from its database. Everyone may
 * see everyone's numbers (-a), as gqueue shows everyone's jobs. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "completion.h"
#include "output.h"
#include "timefmt.h"
#include "util.h"

enum { OPT_SINCE = 256, OPT_UNTIL, OPT_BY, OPT_GPU, OPT_BUCKETS, OPT_IDLE };

static void gstats_help(void)
{
    fputs("gstats - jobs, GPU-hours, waits and failures over a period\n"
          "\n"
          "Usage: gstats [options]\n"
          "       gstats completion SHELL  (bash, elvish, fish, powershell or zsh)\n"
          "\n"
          "By default, as gflow's gstats: your jobs, all time. A period's jobs are those\n"
          "that ended in it (CD, F, CA, TO) and those running that started before its end.\n"
          "Running jobs count with their time so far (up to --until) in GPU-hours and with\n"
          "their wait; mean run time is over ended jobs that ran. Anyone may see\n"
          "everyone's numbers (-a), as gqueue shows everyone's jobs.\n"
          "\n"
          "Options:\n"
          "  -t, --since WHEN      start of the period (default: all time; --gpu: 7 days\n"
          "                        before --until): a\n"
          "                        duration ago (30m, 1h, 2d, 1w; also s), today,\n"
          "                        yesterday, a date or time (2026-03-01,\n"
          "                        2026-03-01T09:30, '2026-03-01 09:30:00', in timezone;\n"
          "                        Z or +08:00 for another) or unix seconds\n"
          "      --until WHEN      end of the period (default: now), same forms\n"
          "      --by KEY          one row per user (default), project or gpu (a job on\n"
          "                        two GPUs counts on both, with one GPU's hours each;\n"
          "                        '(none)': jobs without a project, or without GPUs)\n"
          "  -u, --user USER       this user's jobs (default: yours; 'all': everyone's)\n"
          "  -a, --all-users       everyone's jobs\n"
          "      --gpu             GPU utilisation instead: each GPU's mean and max over\n"
          "                        the samples taken at every poll (daemon.gpu_poll_\n"
          "                        interval_secs; at most daemon.gpu_samples_max kept per\n"
          "                        GPU); -o json/csv add a time series\n"
          "      --buckets N       slices of that time series (default 24)\n"
          "      --idle-gpus       the jobs of the period (and the running ones) that held\n"
          "                        GPUs and used them under 5% (mean utilisation over\n"
          "                        their whole run): id, user, name, GPUs, run time, mean\n"
          "                        utilisation; -t, --until, -u and -a choose them\n"
          "  -o, --output FORMAT   table (default), json or csv (the groups, no total)\n"
          "      --socket PATH     the daemon's socket\n"
          "      --config FILE     the config file whose timezone (and\n"
          "                        daemon.socket_path) to use\n"
          "  -h, --help            show this help\n"
          "  -V, --version         show the version\n"
          "\n"
          "Columns: JOBS (ended + running), R, CD, F, CA, TO, GPU_HOURS (GPUs x run time),\n"
          "WAIT_MEAN and WAIT_P95 (start - submit, of the jobs that started), RUN_MEAN,\n"
          "FAIL% ((F + TO) / ended), TOP_REASONS (of F, CA and TO jobs), ENERGY_KWH (the\n"
          "energy of the GPUs of the ended jobs that have one; - when none). Below the\n"
          "table: the energy per user and per project.\n",
          stdout);
}

static double num(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

static bool has(const json_t *o, const char *key)
{
    return json_is_number(json_object_get(o, key));
}

/* A duration as every command shows one ("00:03:12", format_duration); "-" without a
 * value. */
static char *human_secs(const json_t *o, const char *key)
{
    if (!has(o, key))
        return xstrdup("-");
    return format_duration(lround(num(o, key)));
}

/* "NonZeroExitCode:2,TimeLimit:1" (sep between them), "-" when none. */
static char *reasons_text(const json_t *g, const char *sep)
{
    struct strbuf sb;
    strbuf_init(&sb);
    size_t i;
    const json_t *r;
    json_array_foreach (json_object_get(g, "top_reasons"), i, r) {
        strbuf_addf(&sb, "%s%s:%lld", i ? sep : "", json_string_value(json_object_get(r, "reason")),
                    (long long)json_integer_value(json_object_get(r, "count")));
    }
    if (!sb.len)
        strbuf_adds(&sb, "-");
    return strbuf_detach(&sb);
}

/* "0.0412", "1.234", "12.34", "1234.5": kWh to four places below one, fewer above. */
static char *kwh_text(double kwh)
{
    return xasprintf(kwh < 1 ? "%.4f" : kwh < 10 ? "%.3f" : kwh < 100 ? "%.2f" : "%.1f", kwh);
}

/* "Energy (kWh) by user: alice 0.412, bob 0.013" for the users or projects of the
 * reply's "energy" (nothing when no job of the period has one). */
static void print_energy(const json_t *reply, const char *kind, const char *key)
{
    const json_t *list = json_object_get(json_object_get(reply, "energy"), key);
    if (!json_array_size(list))
        return;
    struct strbuf sb;
    strbuf_init(&sb);
    size_t i;
    const json_t *e;
    json_array_foreach (list, i, e) {
        char *k = kwh_text(num(e, "energy_kwh"));
        strbuf_addf(&sb, "%s%s %s", i ? ", " : "", json_string_value(json_object_get(e, "name")),
                    k);
        free(k);
    }
    cli_printf("Energy (kWh) by %s: %s\n", kind, sb.buf);
    strbuf_free(&sb);
}

static const char *const count_keys[] = {"jobs",   "running",   "completed",
                                         "failed", "cancelled", "timeout"};
#define N_COUNTS (sizeof(count_keys) / sizeof(count_keys[0]))

static void add_group_row(struct output_table *t, const json_t *g, const char *name, bool csv)
{
    char **cells = xcalloc(14, sizeof(*cells));
    size_t c = 0;
    cells[c++] = xstrdup(name);
    for (size_t k = 0; k < N_COUNTS; k++)
        cells[c++] =
            xasprintf("%lld", (long long)json_integer_value(json_object_get(g, count_keys[k])));
    if (csv) {
        static const char *const keys[] = {"gpu_hours", "wait_mean_secs", "wait_p95_secs",
                                           "run_mean_secs", "failure_rate"};
        for (size_t k = 0; k < 5; k++)
            cells[c++] = has(g, keys[k]) ? xasprintf("%.6g", num(g, keys[k])) : xstrdup("");
        cells[c++] = reasons_text(g, ";");
        cells[c++] = has(g, "energy_kwh") ? xasprintf("%.6g", num(g, "energy_kwh")) : xstrdup("");
    } else {
        cells[c++] = xasprintf("%.2f", num(g, "gpu_hours"));
        cells[c++] = human_secs(g, "wait_mean_secs");
        cells[c++] = human_secs(g, "wait_p95_secs");
        cells[c++] = human_secs(g, "run_mean_secs");
        cells[c++] = has(g, "failure_rate") ? xasprintf("%.1f%%", 100 * num(g, "failure_rate"))
                                            : xstrdup("-");
        cells[c++] = reasons_text(g, ",");
        cells[c++] = has(g, "energy_kwh") ? kwh_text(num(g, "energy_kwh")) : xstrdup("-");
    }
    output_table_add_row_owned(t, cells);
    free(cells);
}

/* "Jobs of alice, all time (to 2026-03-01T10:00:00)", "Jobs of everyone from ... to ...";
 * the GPUs' line names no user. */
static void print_period(const json_t *reply, const char *what)
{
    const json_t *user = json_object_get(reply, "user");
    char *whose = !user                  ? xstrdup("")
                  : json_is_string(user) ? xasprintf(" of %s", json_string_value(user))
                                         : xstrdup(" of everyone");
    char *to = output_time(num(reply, "until"));
    if (has(reply, "since") && num(reply, "since") > 0) {
        char *from = output_time(num(reply, "since"));
        cli_printf("%s%s from %s to %s\n", what, whose, from, to);
        free(from);
    } else {
        cli_printf("%s%s, all time (to %s)\n", what, whose, to);
    }
    free(whose);
    free(to);
}

static void print_jobs(const json_t *reply, enum output_format fmt)
{
    const char *by = json_string_value(json_object_get(reply, "by"));
    bool csv = fmt == OUTPUT_CSV;
    const char *table_headers[] = {!strcmp(by, "gpu")       ? "GPU"
                                   : !strcmp(by, "project") ? "PROJECT"
                                                            : "USER",
                                   "JOBS",
                                   "R",
                                   "CD",
                                   "F",
                                   "CA",
                                   "TO",
                                   "GPU_HOURS",
                                   "WAIT_MEAN",
                                   "WAIT_P95",
                                   "RUN_MEAN",
                                   "FAIL%",
                                   "TOP_REASONS",
                                   "ENERGY_KWH"};
    const char *csv_headers[] = {by,
                                 "jobs",
                                 "running",
                                 "completed",
                                 "failed",
                                 "cancelled",
                                 "timeout",
                                 "gpu_hours",
                                 "wait_mean_secs",
                                 "wait_p95_secs",
                                 "run_mean_secs",
                                 "failure_rate",
                                 "top_reasons",
                                 "energy_kwh"};
    struct output_table *t = output_table_new(14, csv ? csv_headers : table_headers);
    const json_t *groups = json_object_get(reply, "groups");
    size_t i;
    const json_t *g;
    json_array_foreach (groups, i, g)
        add_group_row(t, g, json_string_value(json_object_get(g, "name")), csv);
    if (csv) {
        output_table_print_csv(t, stdout);
    } else {
        print_period(reply, "Jobs");
        if (json_array_size(groups) == 0) {
            printf("no job ended or ran in this period\n");
        } else {
            add_group_row(t, json_object_get(reply, "total"), "TOTAL", false);
            output_table_print(t, stdout);
            print_energy(reply, "user", "users");
            print_energy(reply, "project", "projects");
        }
    }
    output_table_free(t);
}

static void print_gpus(const json_t *reply, enum output_format fmt)
{
    const json_t *gpus = json_object_get(reply, "gpus");
    size_t i;
    const json_t *g;
    if (fmt == OUTPUT_CSV) {
        static const char *const headers[] = {"gpu", "start", "samples", "mean", "max"};
        struct output_table *t = output_table_new(5, headers);
        json_array_foreach (gpus, i, g) {
            size_t k;
            const json_t *b;
            json_array_foreach (json_object_get(g, "series"), k, b) {
                char **cells = xcalloc(5, sizeof(*cells));
                cells[0] =
                    xasprintf("%lld", (long long)json_integer_value(json_object_get(g, "index")));
                cells[1] = output_time(num(b, "start"));
                cells[2] =
                    xasprintf("%lld", (long long)json_integer_value(json_object_get(b, "samples")));
                cells[3] = xasprintf("%.2f", num(b, "mean"));
                cells[4] =
                    xasprintf("%lld", (long long)json_integer_value(json_object_get(b, "max")));
                output_table_add_row_owned(t, cells);
                free(cells);
            }
        }
        output_table_print_csv(t, stdout);
        output_table_free(t);
        return;
    }
    print_period(reply, "GPU utilisation");
    if (json_array_size(gpus) == 0) {
        printf("no GPU utilisation samples in this period\n");
        return;
    }
    static const char *const headers[] = {"GPU", "SAMPLES", "MEAN", "MAX", "FIRST", "LAST"};
    struct output_table *t = output_table_new(6, headers);
    json_array_foreach (gpus, i, g) {
        char **cells = xcalloc(6, sizeof(*cells));
        cells[0] = xasprintf("%lld", (long long)json_integer_value(json_object_get(g, "index")));
        cells[1] = xasprintf("%lld", (long long)json_integer_value(json_object_get(g, "samples")));
        cells[2] = xasprintf("%.1f%%", num(g, "mean"));
        cells[3] = xasprintf("%lld%%", (long long)json_integer_value(json_object_get(g, "max")));
        cells[4] = output_time(num(g, "first"));
        cells[5] = output_time(num(g, "last"));
        output_table_add_row_owned(t, cells);
        free(cells);
    }
    output_table_print(t, stdout);
    output_table_free(t);
}

/* gstats --idle-gpus: one row per job that sat on its GPUs. */
static void print_idle(const json_t *reply, enum output_format fmt)
{
    bool csv = fmt == OUTPUT_CSV;
    static const char *const table_headers[] = {"JOBID", "USER",    "NAME",   "ST",
                                                "GPUS",  "RUNTIME", "GPUUTIL"};
    static const char *const csv_headers[] = {"id",      "user",         "name",         "state",
                                              "gpu_ids", "runtime_secs", "gpu_util_mean"};
    struct output_table *t = output_table_new(7, csv ? csv_headers : table_headers);
    const json_t *jobs = json_object_get(reply, "jobs");
    size_t i;
    const json_t *j;
    json_array_foreach (jobs, i, j) {
        char **cells = xcalloc(7, sizeof(*cells));
        const char *name = json_string_value(json_object_get(j, "name"));
        const char *ids = json_string_value(json_object_get(j, "gpu_ids"));
        cells[0] = xasprintf("%lld", (long long)json_integer_value(json_object_get(j, "id")));
        cells[1] = xstrdup(json_string_value(json_object_get(j, "user")) ?: "-");
        cells[2] = xstrdup(name ? name : (csv ? "" : "-"));
        cells[3] = xstrdup(json_string_value(json_object_get(j, "state")) ?: "-");
        cells[4] = xstrdup(ids ? ids : (csv ? "" : "-"));
        cells[5] = csv ? xasprintf("%.3f", num(j, "runtime_secs"))
                       : format_duration(lround(num(j, "runtime_secs")));
        const json_t *u = json_object_get(j, "gpu_util_mean");
        cells[6] = !json_is_integer(u) ? xstrdup(csv ? "" : "-")
                   : csv               ? xasprintf("%lld", (long long)json_integer_value(u))
                                       : xasprintf("%lld%%", (long long)json_integer_value(u));
        output_table_add_row_owned(t, cells);
        free(cells);
    }
    if (csv) {
        output_table_print_csv(t, stdout);
    } else {
        print_period(reply, "Jobs sitting on GPUs (under 5% mean utilisation)");
        if (json_array_size(jobs) == 0)
            printf("no job held GPUs without using them in this period\n");
        else
            output_table_print(t, stdout);
    }
    output_table_free(t);
}

/* --since/--until: seconds since the epoch, or a usage error naming the flag. */
static double when_or_die(const char *flag, const char *text, double now)
{
    double t = cli_parse_when(text, now);
    if (t < 0)
        cli_usage_error("invalid %s '%s': use a duration ago (30m, 1h, 2d, 1w), today, "
                        "yesterday, a date or time (2026-03-01, 2026-03-01T09:30, with Z or "
                        "+08:00 for another zone than the configured one) or unix seconds",
                        flag, text);
    return t;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"since", required_argument, NULL, OPT_SINCE},
        {"until", required_argument, NULL, OPT_UNTIL},
        {"by", required_argument, NULL, OPT_BY},
        {"user", required_argument, NULL, 'u'},
        {"all-users", no_argument, NULL, 'a'},
        {"gpu", no_argument, NULL, OPT_GPU},
        {"buckets", required_argument, NULL, OPT_BUCKETS},
        {"idle-gpus", no_argument, NULL, OPT_IDLE},
        {"output", required_argument, NULL, 'o'},
        CLI_COMMON_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    cli_init(argv[0]);
    if (argc > 1 && !strcmp(argv[1], "completion"))
        return completion_main("gstats", argc - 2, argv + 2);
    const char *since = NULL, *until = NULL, *by = NULL, *user = NULL, *buckets = NULL;
    bool gpu = false, all_users = false, idle = false;
    enum output_format fmt = OUTPUT_TABLE;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":t:u:ao:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
        case OPT_SINCE:
            since = optarg;
            break;
        case OPT_UNTIL:
            until = optarg;
            break;
        case OPT_BY:
            by = optarg;
            if (strcmp(by, "user") && strcmp(by, "project") && strcmp(by, "gpu"))
                cli_usage_error("unknown --by '%s'; use user, project or gpu", by);
            break;
        case 'u':
            user = optarg;
            if (!*user)
                cli_usage_error("empty user for -u; e.g. -u alice");
            break;
        case 'a':
            all_users = true;
            break;
        case OPT_GPU:
            gpu = true;
            break;
        case OPT_IDLE:
            idle = true;
            break;
        case OPT_BUCKETS: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (end == optarg || *end || n < 1 || n > 1000)
                cli_usage_error("invalid --buckets '%s'; use a number from 1 to 1000", optarg);
            buckets = optarg;
            break;
        }
        case 'o':
            if (output_format_parse(optarg, &fmt) < 0 || fmt == OUTPUT_YAML)
                cli_usage_error("unknown output format '%s'; use table, json or csv", optarg);
            break;
        default:
            cli_common_option(c, argv, longopts, "gstats", gstats_help);
        }
    }
    cli_refuse_completion(optind < argc ? argv[optind] : NULL);
    if (optind < argc)
        cli_usage_error("unexpected argument '%s'", argv[optind]);
    if (all_users && user)
        cli_usage_error("-a (everyone) and -u %s (one user) contradict each other; use one", user);
    if (gpu && by)
        cli_usage_error("--by does not apply to --gpu (its rows are the GPUs); use one");
    if (gpu && user)
        cli_usage_error("-u does not apply to --gpu (utilisation is not per user); use one");
    if (idle && gpu)
        cli_usage_error("--idle-gpus and --gpu are different reports; use one");
    if (idle && by)
        cli_usage_error("--by does not apply to --idle-gpus (its rows are jobs); use one");
    if (buckets && !gpu)
        cli_usage_error("--buckets needs --gpu (it slices the utilisation time series)");

    double now = now_wall();
    double t_until = until ? when_or_die("--until", until, now) : now;
    /* No --since: the daemon's default (all time; --gpu: the last 7 days). */
    double t_since = since ? when_or_die("--since", since, now) : -1;
    if (since && t_since >= t_until)
        cli_usage_error("--since must be before --until (the period is empty)");

    struct strbuf path;
    strbuf_init(&path);
    strbuf_adds(&path, "/v1/stats");
    char secs[32];
    if (since) {
        snprintf(secs, sizeof(secs), "%.6f", t_since);
        client_query_add(&path, "since", secs);
    }
    snprintf(secs, sizeof(secs), "%.6f", t_until);
    client_query_add(&path, "until", secs);
    if (by)
        client_query_add(&path, "by", by);
    /* Whose: -u, -a (everyone's), or the daemon's default, the caller's (gflow's). */
    if (user || all_users)
        client_query_add(&path, "user", all_users ? "all" : user);
    if (gpu)
        client_query_add(&path, "gpu", "1");
    if (idle)
        client_query_add(&path, "idle_gpus", "1");
    if (buckets)
        client_query_add(&path, "buckets", buckets);
    json_t *reply = cli_call("GET", path.buf, NULL);
    strbuf_free(&path);
    if (fmt == OUTPUT_JSON)
        output_json(reply, stdout);
    else if (gpu)
        print_gpus(reply, fmt);
    else if (idle)
        print_idle(reply, fmt);
    else
        print_jobs(reply, fmt);
    json_decref(reply);
    return cli_finish(0);
}
