/* gctl_quota: per-user and per-project quotas at runtime (docs/usage.md "Quotas").
 *
 *   gctl quota list [-o json]                      gflow's table: every subject with
 *                                                  limits or use, then the defaults
 *   gctl quota show [--user U | --project P | U]   effective limits and current use
 *   gctl quota set TARGET --max-running-jobs N ... admins: runtime overrides (kept in the
 *                                                  store, so a restart keeps them)
 *   gctl quota clear TARGET [--limits a,b]          admins: drop overrides
 *   gctl quota remove TARGET                       admins: gflow's clear of them all;
 *                                                  an error when there was none
 *
 * TARGET is --user U, --project P, --default-user or --default-project. */
#include "gctl_quota.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "output.h"
#include "parse.h"
#include "timefmt.h"
#include "util.h"

enum {
    OPT_USER = 300,
    OPT_PROJECT,
    OPT_DEFAULT_USER,
    OPT_DEFAULT_PROJECT,
    OPT_MAX_RUNNING_JOBS,
    OPT_MAX_RUNNING_GPUS,
    OPT_MAX_QUEUED_JOBS,
    OPT_MAX_GPU_HOURS,
    OPT_LIMITS,
};

enum quota_action { QUOTA_LIST, QUOTA_SHOW, QUOTA_SET, QUOTA_REMOVE, QUOTA_CLEAR };
static const char *const action_names[] = {"list", "show", "set", "remove", "clear"};

/* The largest limit the daemon takes (a number, not infinity). */
#define QUOTA_CLI_MAX 1e15

/* The limits in the API's order, with their flags. */
static const char *const limit_keys[] = {"max_running_jobs", "max_running_gpus", "max_queued_jobs",
                                         "max_gpu_hours"};
static const char *const limit_flags[] = {"--max-running-jobs", "--max-running-gpus",
                                          "--max-queued-jobs", "--max-gpu-hours"};

static void quota_help(void)
{
    printf("Usage: gctl quota list [-o table|json]\n"
           "       gctl quota show [--user U | --project P | U]\n"
           "       gctl quota set TARGET [--max-running-jobs N] [--max-running-gpus N]\n"
           "                             [--max-queued-jobs N] [--max-gpu-hours H]\n"
           "       gctl quota remove TARGET\n"
           "       gctl quota clear TARGET [--limits LIST]\n"
           "\n"
           "Per-user and per-project limits. The [quota] section of gflow.toml is the\n"
           "baseline; 'set' adds runtime overrides on top (kept across restarts), 'remove'\n"
           "and 'clear' drop them. Jobs over a running limit wait with reason Quota; a\n"
           "submission over max_queued_jobs is refused. 'list' and 'show' are open to\n"
           "everyone; 'set', 'remove' and 'clear' are for admins (root, the daemon's user,\n"
           "daemon.admin_group).\n"
           "'list' prints gflow's table: a row per user and project with limits or jobs,\n"
           "then the defaults; cells are used/limit ('-': no limit), the defaults show\n"
           "their limits only; GPU_HOURS is the GPU time used in the current period.\n"
           "'remove' drops every override of the target, as gflow's; it fails when the\n"
           "target had none. 'clear' does the same without failing, or only some (--limits).\n"
           "'show' also says who may reserve GPUs (gctl reserve; reservations.who) and,\n"
           "when users may, their limits (reservations.max_gpus, max_duration, max_ahead,\n"
           "max_per_user) and what the user shown holds.\n"
           "\n"
           "TARGET:\n"
           "      --user U            one user\n"
           "      --project P         one project (gbatch -P)\n"
           "      --default-user      every user without a limit of their own\n"
           "      --default-project   every project without a limit of its own\n"
           "\n"
           "Limits (set):\n"
           "      --max-running-jobs N  jobs running at once\n"
           "      --max-running-gpus N  GPUs held by running jobs at once\n"
           "      --max-queued-jobs N   queued and held jobs (checked at submit)\n"
           "      --max-gpu-hours H     GPU-hours per period (quota.period: day, week or\n"
           "                            month; ended and running jobs count)\n"
           "\n"
           "Options (list):\n"
           "  -o, --output FORMAT     table (the default) or json (the daemon's reply,\n"
           "                          GET /v1/quotas in docs/api.md)\n"
           "\n"
           "Options (clear):\n"
           "      --limits LIST       only these overrides, e.g. max_running_jobs,max_gpu_hours\n"
           "                          (default: all of the target's)\n"
           "  -h, --help              show this help\n");
}

/* "3/10", "3/-" (no limit). */
static char *usage_cell(const json_t *used, const json_t *limit, bool hours)
{
    char u[64], l[64];
    if (hours)
        snprintf(u, sizeof(u), "%.2f", json_number_value(used));
    else
        snprintf(u, sizeof(u), "%lld", (long long)json_integer_value(used));
    if (json_is_null(limit) || !limit)
        snprintf(l, sizeof(l), "-");
    else if (hours)
        snprintf(l, sizeof(l), "%g", json_number_value(limit));
    else
        snprintf(l, sizeof(l), "%lld", (long long)json_integer_value(limit));
    return xasprintf("%s/%s", u, l);
}

static char *limit_cell(const json_t *limit, bool hours)
{
    if (!limit || json_is_null(limit))
        return xstrdup("-");
    return hours ? xasprintf("%g", json_number_value(limit))
                 : xasprintf("%lld", (long long)json_integer_value(limit));
}

static char *when(double t)
{
    return format_time(t);
}

/* Seconds as the config writes them: 2h, 7d, 90m (the largest unit that divides). */
static char *secs_text(json_int_t secs)
{
    static const struct {
        json_int_t n;
        char unit;
    } units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (secs > 0 && secs % units[i].n == 0)
            return xasprintf("%lld%c", (long long)(secs / units[i].n), units[i].unit);
    return xasprintf("%llds", (long long)secs);
}

/* The reply's "reservations" as one line: who may reserve, a user's limits, and what
 * the user asked about holds. */
static void print_reservations(const json_t *o)
{
    if (!o)
        return;
    const char *who = json_string_value(json_object_get(o, "who"));
    if (!who || strcmp(who, "users") != 0) {
        printf("Reservations: admins only (reservations.who)\n");
        return;
    }
    char *dur = secs_text(json_integer_value(json_object_get(o, "max_duration")));
    char *ahead = secs_text(json_integer_value(json_object_get(o, "max_ahead")));
    json_int_t gpus = json_integer_value(json_object_get(o, "max_gpus"));
    printf("Reservations: users may reserve, at most %lld GPU%s, %s long, starting within %s, "
           "%lld at once",
           (long long)gpus, gpus == 1 ? "" : "s", dur, ahead,
           (long long)json_integer_value(json_object_get(o, "max_per_user")));
    const char *user = json_string_value(json_object_get(o, "user"));
    if (user) {
        json_int_t held_gpus = json_integer_value(json_object_get(o, "held_gpus"));
        printf("; %s holds %lld (%lld GPU%s)", user,
               (long long)json_integer_value(json_object_get(o, "held")), (long long)held_gpus,
               held_gpus == 1 ? "" : "s");
    }
    printf("\n");
    free(dur);
    free(ahead);
}

/* The reply of GET /v1/quotas (or of a set/clear) as a table: one row per default and
 * per user or project, "used/limit" per limit. */
static void print_status(const json_t *reply)
{
    char *from = when(json_number_value(json_object_get(reply, "period_start")));
    char *to = when(json_number_value(json_object_get(reply, "period_end")));
    cli_printf("GPU-hours period: %s (from %s to %s)\n",
               json_string_value(json_object_get(reply, "period")), from, to);
    free(from);
    free(to);
    static const char *const headers[] = {"SCOPE",        "NAME",        "RUNNING_JOBS",
                                          "RUNNING_GPUS", "QUEUED_JOBS", "GPU_HOURS"};
    struct output_table *t = output_table_new(6, headers);
    const char *defaults[] = {"default_user", "default_project"};
    for (int k = 0; k < 2; k++) {
        const json_t *l = json_object_get(reply, defaults[k]);
        char *cells[6] = {xstrdup(defaults[k]), xstrdup("*")};
        for (int i = 0; i < 4; i++)
            cells[2 + i] = limit_cell(json_object_get(l, limit_keys[i]), i == 3);
        output_table_add_row_owned(t, cells);
    }
    size_t i;
    const json_t *s;
    json_array_foreach (json_object_get(reply, "subjects"), i, s) {
        const json_t *l = json_object_get(s, "limits"), *u = json_object_get(s, "usage");
        const char *used_keys[] = {"running_jobs", "running_gpus", "queued_jobs", "gpu_hours"};
        char *cells[6] = {xstrdup(json_string_value(json_object_get(s, "scope"))),
                          xstrdup(json_string_value(json_object_get(s, "name")))};
        for (int k = 0; k < 4; k++)
            cells[2 + k] = usage_cell(json_object_get(u, used_keys[k]),
                                      json_object_get(l, limit_keys[k]), k == 3);
        output_table_add_row_owned(t, cells);
    }
    output_table_print(t, stdout);
    output_table_free(t);
    printf("Cells are used/limit ('-': no limit); defaults show their limits.\n");
    print_reservations(json_object_get(reply, "reservations"));
}

/* The target flags into body (PUT) or a query (DELETE). */
struct target {
    const char *user, *project, *def;
};

static void target_check(const struct target *tg, const char *cmd)
{
    int given = (tg->user != NULL) + (tg->project != NULL) + (tg->def != NULL);
    if (given != 1)
        cli_usage_error("'gctl quota %s' needs one of --user U, --project P, --default-user or "
                        "--default-project",
                        cmd);
}

static double limit_value(int i, const char *s)
{
    if (i == 3) {
        double v;
        char *end;
        v = strtod(s, &end);
        if (!*s || *end || !isfinite(v) || v < 0 || v > QUOTA_CLI_MAX)
            cli_usage_error("invalid value '%s' for %s: use a number of hours >= 0, e.g. 100 "
                            "or 0.5",
                            s, limit_flags[i]);
        return v;
    }
    int64_t v;
    if (parse_int64(s, &v) < 0 || v < 0 || v > QUOTA_CLI_MAX)
        cli_usage_error("invalid value '%s' for %s: use a whole number >= 0", s, limit_flags[i]);
    return (double)v;
}

/* Forward: names go into the query escaped. */
static char *query_escape(const char *s);

/* argv[optind..argc): the operands (one user name at most). */
static int quota_show(int argc, char **argv, struct target *tg)
{
    if (argc - optind > 1)
        cli_usage_error("'gctl quota show' takes one user name at most; got '%s'",
                        argv[optind + 1]);
    if (argc - optind == 1) {
        if (tg->user || tg->project)
            cli_usage_error("give the user once: 'gctl quota show U' or --user U");
        tg->user = argv[optind];
    }
    if (tg->def)
        cli_usage_error("'gctl quota show' lists the defaults always; drop %s",
                        strcmp(tg->def, "user") ? "--default-project" : "--default-user");
    if (tg->user && tg->project)
        cli_usage_error("'gctl quota show' takes --user or --project, not both");
    char *name = tg->user || tg->project ? query_escape(tg->user ? tg->user : tg->project) : NULL;
    char *path = name ? xasprintf("/v1/quotas?%s=%s", tg->user ? "user" : "project", name)
                      : xstrdup("/v1/quotas");
    json_t *reply = cli_call("GET", path, NULL);
    print_status(reply);
    json_decref(reply);
    free(path);
    free(name);
    return 0;
}

/* A name in a query: letters, digits and -_.@ pass as they are; anything else is
 * %-escaped. */
static char *query_escape(const char *s)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-_.@", *p))
            strbuf_addf(&sb, "%c", *p);
        else
            strbuf_addf(&sb, "%%%02X", *p);
    }
    return strbuf_detach(&sb);
}

/* One row of 'gctl quota list', gflow's widths; GPU_HOURS ours. */
static void list_row(const char *scope, const char *name, char *const cells[4])
{
    cli_printf("%-15s %-16s %9s %9s %9s %9s\n", scope, name, cells[0], cells[1], cells[2],
               cells[3]);
    for (int i = 0; i < 4; i++)
        free(cells[i]);
}

/* gflow's 'gctl quota list': the users and projects (used/limit), then the defaults
 * (their limits); the reply is GET /v1/quotas's. */
static void print_list(const json_t *reply)
{
    static const char *const used_keys[] = {"running_jobs", "running_gpus", "queued_jobs",
                                            "gpu_hours"};
    printf("%-15s %-16s %9s %9s %9s %9s\n", "SCOPE", "NAME", "JOBS", "GPUS", "QUEUED", "GPU_HOURS");
    size_t i;
    const json_t *s;
    json_array_foreach (json_object_get(reply, "subjects"), i, s) {
        const json_t *l = json_object_get(s, "limits"), *u = json_object_get(s, "usage");
        char *cells[4];
        for (int k = 0; k < 4; k++)
            cells[k] = usage_cell(json_object_get(u, used_keys[k]),
                                  json_object_get(l, limit_keys[k]), k == 3);
        const char *name = json_string_value(json_object_get(s, "name"));
        list_row(json_string_value(json_object_get(s, "scope")), name && *name ? name : "*", cells);
    }
    static const char *const defaults[] = {"default_user", "default_project"};
    for (int d = 0; d < 2; d++) {
        const json_t *l = json_object_get(reply, defaults[d]);
        char *cells[4];
        for (int k = 0; k < 4; k++)
            cells[k] = limit_cell(json_object_get(l, limit_keys[k]), k == 3);
        list_row(defaults[d], "*", cells);
    }
    char *from = when(json_number_value(json_object_get(reply, "period_start")));
    char *to = when(json_number_value(json_object_get(reply, "period_end")));
    printf("\nCells are used/limit; `-` means unlimited. Fallback rows show the limit only.\n");
    cli_printf("GPU_HOURS counts the %s from %s to %s (quota.period).\n",
               json_string_value(json_object_get(reply, "period")), from, to);
    free(from);
    free(to);
}

static int quota_list(int argc, char **argv, const struct target *tg, enum output_format fmt)
{
    if (optind < argc)
        cli_usage_error("unexpected argument '%s' for 'gctl quota list'; 'gctl quota show %s' "
                        "shows one user",
                        argv[optind], argv[optind]);
    if (tg->user || tg->project || tg->def)
        cli_usage_error("'gctl quota list' lists every user and project; 'gctl quota show "
                        "--user U' (or --project P) shows one");
    json_t *reply = cli_call("GET", "/v1/quotas", NULL);
    if (fmt == OUTPUT_JSON)
        output_json(reply, stdout);
    else
        print_list(reply);
    json_decref(reply);
    return 0;
}

/* DELETE /v1/quotas for the target (list: only those limits; NULL: all of them). */
static json_t *quota_delete(const struct target *tg, const char *list)
{
    char *name = query_escape(tg->user ? tg->user : tg->project ? tg->project : tg->def);
    char *limits = list ? query_escape(list) : NULL;
    char *path = xasprintf("/v1/quotas?%s=%s%s%s",
                           tg->user      ? "user"
                           : tg->project ? "project"
                                         : "default",
                           name, limits ? "&limits=" : "", limits ? limits : "");
    json_t *reply = cli_call("DELETE", path, NULL);
    free(path);
    free(name);
    free(limits);
    return reply;
}

/* gflow's "Removed user quota override 'alice'" / "Removed default_user quota override";
 * an error (exit 1) when the target had no override. */
static int quota_remove(const struct target *tg)
{
    json_t *reply = quota_delete(tg, NULL);
    char *what = tg->user      ? xasprintf("user quota override '%s'", tg->user)
                 : tg->project ? xasprintf("project quota override '%s'", tg->project)
                               : xasprintf("default_%s quota override", tg->def);
    bool removed = json_is_true(json_object_get(reply, "removed"));
    json_decref(reply);
    if (!removed)
        cli_die(CLI_EXIT_FAIL,
                "no %s to remove (only runtime overrides are removed: 'gctl quota list' shows "
                "the limits in force; gflow.toml's [quota] stays)",
                what);
    cli_printf("Removed %s\n", what);
    free(what);
    return 0;
}

int gctl_quota(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"user", required_argument, NULL, OPT_USER},
        {"project", required_argument, NULL, OPT_PROJECT},
        {"default-user", no_argument, NULL, OPT_DEFAULT_USER},
        {"default-project", no_argument, NULL, OPT_DEFAULT_PROJECT},
        {"max-running-jobs", required_argument, NULL, OPT_MAX_RUNNING_JOBS},
        {"max-running-gpus", required_argument, NULL, OPT_MAX_RUNNING_GPUS},
        {"max-queued-jobs", required_argument, NULL, OPT_MAX_QUEUED_JOBS},
        {"max-gpu-hours", required_argument, NULL, OPT_MAX_GPU_HOURS},
        {"limits", required_argument, NULL, OPT_LIMITS},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2)
        cli_usage_error("'gctl quota' needs an action: list, show, set, remove or clear");
    const char *action_word = argv[1];
    if (!strcmp(action_word, "--help") || !strcmp(action_word, "-h") ||
        !strcmp(action_word, "help")) {
        quota_help();
        return 0;
    }
    int action = -1;
    for (int i = 0; i < (int)(sizeof(action_names) / sizeof(action_names[0])); i++)
        if (!strcmp(action_word, action_names[i]))
            action = i;
    if (action < 0)
        cli_usage_error("unknown quota action '%s'; use list, show, set, remove or clear",
                        action_word);
    struct target tg = {NULL, NULL, NULL};
    json_t *limits = json_object();
    const char *limit_list = NULL;
    enum output_format fmt = OUTPUT_TABLE;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc - 1, argv + 1, ":o:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_USER:
            tg.user = optarg;
            break;
        case OPT_PROJECT:
            tg.project = optarg;
            break;
        case OPT_DEFAULT_USER:
            tg.def = "user";
            break;
        case OPT_DEFAULT_PROJECT:
            tg.def = "project";
            break;
        case OPT_MAX_RUNNING_JOBS:
        case OPT_MAX_RUNNING_GPUS:
        case OPT_MAX_QUEUED_JOBS:
        case OPT_MAX_GPU_HOURS: {
            int i = c - OPT_MAX_RUNNING_JOBS;
            if (action != QUOTA_SET)
                cli_usage_error("%s is for 'gctl quota set'; 'clear' takes --limits %s",
                                limit_flags[i], limit_keys[i]);
            double v = limit_value(i, optarg);
            json_object_set_new(limits, limit_keys[i],
                                i == 3 ? json_real(v) : json_integer((json_int_t)v));
            break;
        }
        case OPT_LIMITS:
            if (action != QUOTA_CLEAR)
                cli_usage_error("--limits is for 'gctl quota clear'%s",
                                action == QUOTA_REMOVE ? " ('remove' drops them all)" : "");
            limit_list = optarg;
            break;
        case 'o':
            if (action != QUOTA_LIST)
                cli_usage_error("-o is for 'gctl quota list'");
            if (output_format_parse(optarg, &fmt) < 0 || fmt == OUTPUT_CSV)
                cli_usage_error("unknown output format '%s' for 'gctl quota list'; use table or "
                                "json",
                                optarg);
            break;
        case 'h':
            quota_help();
            return 0;
        default: {
            char *why = cli_option_error(argv + 1, c, longopts);
            cli_die(CLI_EXIT_USAGE, "%s for 'gctl quota %s'; see 'gctl quota --help'", why,
                    action_word);
        }
        }
    }
    optind++; /* index into argv, not argv + 1 */
    if (action == QUOTA_LIST || action == QUOTA_SHOW) {
        json_decref(limits);
        return action == QUOTA_LIST ? quota_list(argc, argv, &tg, fmt)
                                    : quota_show(argc, argv, &tg);
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s' for 'gctl quota %s'", argv[optind], action_word);
    target_check(&tg, action_word);
    if (action == QUOTA_REMOVE) {
        json_decref(limits);
        return quota_remove(&tg);
    }
    json_t *reply;
    if (action == QUOTA_SET) {
        if (json_object_size(limits) == 0)
            cli_usage_error("'gctl quota set' needs a limit: --max-running-jobs N, "
                            "--max-running-gpus N, --max-queued-jobs N or --max-gpu-hours H");
        if (tg.user)
            json_object_set_new(limits, "user", json_string(tg.user));
        else if (tg.project)
            json_object_set_new(limits, "project", json_string(tg.project));
        else
            json_object_set_new(limits, "default", json_string(tg.def));
        reply = cli_call("PUT", "/v1/quotas", limits);
    } else {
        reply = quota_delete(&tg, limit_list);
    }
    json_decref(limits);
    print_status(reply);
    json_decref(reply);
    return 0;
}
