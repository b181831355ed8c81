/* gctl_reserve: GPU reservations, as gflow's `gctl reserve`:
 *
 *   gctl reserve create [--user U] (--gpus N | --gpu-spec 0,2) --start T --duration D
 *                       [--timezone Z]
 *   gctl reserve list [--user U] [--status S | --active] [--timezone Z]
 *                     [--timeline [--range R | --from T --to T]]
 *   gctl reserve get ID [--timezone Z]
 *   gctl reserve cancel ID
 *
 * --start takes what gbatch --begin takes (parse_begin_time: with Z or an offset too),
 * --duration what a setting's duration takes ("2h", or a --time value). --timezone
 * shows and reads times in another zone than the configured one. The daemon picks a
 * --gpus N reservation's GPUs when it is made and refuses one that clashes with
 * another. */
#include "gctl_reserve.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "gctl_timeline.h"
#include "output.h"
#include "parse.h"
#include "reservation.h"
#include "timefmt.h"
#include "util.h"

enum {
    OPT_USER = 300,
    OPT_GPUS,
    OPT_GPU_SPEC,
    OPT_START,
    OPT_DURATION,
    OPT_STATUS,
    OPT_ACTIVE,
    OPT_TIMEZONE,
    OPT_TIMELINE,
    OPT_RANGE,
    OPT_FROM,
    OPT_TO,
};

static void help_reserve(void)
{
    printf("Usage: gctl reserve create [--user U] (--gpus N | --gpu-spec LIST) --start T\n"
           "                           --duration D [--timezone Z]\n"
           "       gctl reserve list [--user U] [--status S | --active] [--timezone Z]\n"
           "                         [--timeline [--range R | --from T --to T]]\n"
           "       gctl reserve get <id> [--timezone Z]\n"
           "       gctl reserve cancel <id>\n"
           "\n"
           "Books GPUs for one user over a window of time. During the window the reserved\n"
           "GPUs run only that user's jobs (others' jobs that fit nowhere else wait with\n"
           "reason Reservation); before it, a job of another user that would still run at\n"
           "its start (its --time, or scheduler.default_time_limit without one) is not\n"
           "started on them. The holder's jobs take the reserved GPUs first and may use\n"
           "any other. Jobs already running when a window starts keep running.\n"
           "\n"
           "Who may reserve: admins (root, the daemon's user, daemon.admin_group) by\n"
           "default ([reservations] who = \"admins\"); with who = \"users\" anyone may\n"
           "reserve for themselves, within [reservations] max_gpus (GPUs of one's pending\n"
           "and active reservations together), max_duration, max_ahead (how far ahead it\n"
           "may begin) and max_per_user (how many at once); 'gctl quota show' prints them.\n"
           "Admins are not bound by them.\n"
           "\n"
           "create:\n"
           "      --user U        the holder (default: you); only admins reserve for\n"
           "                      others\n"
           "      --gpus N        N GPUs, chosen now: the highest-numbered GPUs free of\n"
           "                      other reservations in the window\n"
           "      --gpu-spec LIST these GPUs (NVML indices: 0,2 or 0-3)\n"
           "      --start T       as gbatch --begin: HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]],\n"
           "                      now, now+30m, +2h; in the configured timezone, or with\n"
           "                      Z or an offset: 2026-01-28T14:00:00Z, ...T14:00+08:00\n"
           "      --duration D    2h, 90m, 1d, or a --time value (1:30:00, 1-00:00:00)\n"
           "      --timezone Z    read --start (and show times) in zone Z, e.g.\n"
           "                      Asia/Shanghai or UTC, instead of the config's timezone\n"
           "A reservation whose GPUs are reserved by another in an overlapping window is\n"
           "refused.\n"
           "\n"
           "list:\n"
           "      --user U        only U's\n"
           "      --status S      pending, active, completed or cancelled (history is kept)\n"
           "      --active        the same as --status active\n"
           "      --timeline      draw them: one row per GPU, time across (default: from\n"
           "                      12 hours ago to 12 hours ahead)\n"
           "      --range R       the timeline's window from now: 48h (ahead), -24h (back)\n"
           "                      or -24h:+24h\n"
           "      --from T --to T the timeline's window, times as --start takes them\n"
           "      --timezone Z    show (and read --from/--to) in zone Z\n"
           "\n"
           "get:  --timezone Z    show the times in zone Z\n"
           "\n"
           "cancel: its holder or an admin; a pending or active reservation only.\n"
           "  -h, --help          show this help\n");
}

static void __attribute__((noreturn))
bad_option(const char *sub, char **argv, int c, const struct option *longopts)
{
    cli_die(CLI_EXIT_USAGE, "%s for 'gctl reserve %s'; see 'gctl reserve --help'",
            cli_option_error(argv, c, longopts), sub);
}

/* "0,2", "0-3" into a JSON array of indices 0..63; a bad list is a usage error. */
static json_t *parse_spec(const char *s)
{
    uint64_t mask = 0;
    const char *p = s;
    for (;;) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        bool ok = end != p && *p >= '0' && *p <= '9';
        if (ok && *end == '-') {
            const char *q = end + 1;
            hi = strtol(q, &end, 10);
            ok = end != q && *q >= '0' && *q <= '9';
        }
        if (!ok || (*end && *end != ',') || lo < 0 || hi > 63 || hi < lo)
            cli_usage_error("invalid --gpu-spec '%s': use GPU indices 0-63 like 0,2 or 0-3", s);
        for (long i = lo; i <= hi; i++)
            mask |= 1ULL << i;
        if (!*end)
            break;
        p = end + 1;
    }
    json_t *arr = json_array();
    for (; mask; mask &= mask - 1)
        json_array_append_new(arr, json_integer(__builtin_ctzll(mask)));
    return arr;
}

static char *gpus_text(const json_t *x)
{
    return output_json_list(json_object_get(x, "gpus"), "-");
}

/* "Pending", as gflow shows a status. */
static const char *status_text(const json_t *x)
{
    const char *s = json_string_value(json_object_get(x, "status"));
    if (!s)
        return "?";
    return !strcmp(s, "pending")     ? "Pending"
           : !strcmp(s, "active")    ? "Active"
           : !strcmp(s, "completed") ? "Completed"
           : !strcmp(s, "cancelled") ? "Cancelled"
                                     : s;
}

/* gflow's fields, one "Key: value" a line: ID (unless with_id is false), User, GPUCount
 * (for --gpus N), GPUIndices (the GPUs held, also for --gpus N: picked at creation),
 * StartTime, EndTime, Duration, Status, CreatedAt and CancelledAt (once cancelled). */
static void print_one(const json_t *x, bool with_id)
{
    char *gpus = gpus_text(x);
    /* With the zone's name, as gflow's details: "2026-12-05 14:00:00 CST". */
    char *start = format_time_zone(json_number_value(json_object_get(x, "start")));
    char *end = format_time_zone(json_number_value(json_object_get(x, "end")));
    char *created = format_time_zone(json_number_value(json_object_get(x, "created")));
    char *dur = format_duration(json_integer_value(json_object_get(x, "duration")));
    const json_t *count = json_object_get(x, "gpu_count");
    if (with_id)
        cli_printf("ID: %lld\n", (long long)json_integer_value(json_object_get(x, "id")));
    cli_printf("User: %s\n", json_string_value(json_object_get(x, "user")));
    if (json_is_integer(count))
        cli_printf("GPUCount: %lld\n", (long long)json_integer_value(count));
    cli_printf("GPUIndices: %s\n", gpus);
    cli_printf("StartTime: %s\nEndTime: %s\nDuration: %s\nStatus: %s\nCreatedAt: %s\n", start, end,
               dur, status_text(x), created);
    const json_t *cancelled = json_object_get(x, "cancelled_at");
    if (json_is_number(cancelled)) {
        char *c = format_time_zone(json_number_value(cancelled));
        cli_printf("CancelledAt: %s\n", c);
        free(c);
    }
    free(gpus);
    free(start);
    free(end);
    free(created);
    free(dur);
}

static int reserve_create(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"user", required_argument, NULL, OPT_USER},
        {"gpus", required_argument, NULL, OPT_GPUS},
        {"gpu-spec", required_argument, NULL, OPT_GPU_SPEC},
        {"start", required_argument, NULL, OPT_START},
        {"duration", required_argument, NULL, OPT_DURATION},
        {"timezone", required_argument, NULL, OPT_TIMEZONE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *user = NULL, *gpus = NULL, *spec = NULL, *start = NULL, *duration = NULL;
    const char *zone = NULL;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_USER:
            user = optarg;
            break;
        case OPT_GPUS:
            gpus = optarg;
            break;
        case OPT_GPU_SPEC:
            spec = optarg;
            break;
        case OPT_START:
            start = optarg;
            break;
        case OPT_DURATION:
            duration = optarg;
            break;
        case OPT_TIMEZONE:
            zone = optarg;
            break;
        case 'h':
            help_reserve();
            return 0;
        default:
            bad_option("create", argv, c, longopts);
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s' for 'gctl reserve create'", argv[optind]);
    if (!gpus == !spec)
        cli_usage_error("give either --gpus N or --gpu-spec LIST (e.g. --gpu-spec 0,2)");
    if (!start)
        cli_usage_error("--start is required (e.g. --start now+10m or --start 14:00)");
    if (!duration)
        cli_usage_error("--duration is required (e.g. --duration 2h)");
    if (zone)
        cli_use_timezone(zone);
    json_t *body = json_object();
    if (user)
        json_object_set_new(body, "user", json_string(user));
    if (gpus) {
        int64_t n;
        if (parse_int64(gpus, &n) < 0 || n < 1 || n > 64)
            cli_usage_error("invalid value '%s' for --gpus: use a whole number from 1 to 64", gpus);
        json_object_set_new(body, "gpus", json_integer(n));
    } else {
        json_object_set_new(body, "gpu_spec", parse_spec(spec));
    }
    char *err = NULL;
    double at;
    if (parse_begin_time(start, now_wall(), &at, &err) < 0)
        cli_usage_error("invalid --start '%s': %s", start, err);
    int64_t secs;
    if (parse_duration(duration, &secs, &err) < 0)
        cli_usage_error("invalid --duration '%s': %s", duration, err);
    json_object_set_new(body, "start", json_real(at));
    json_object_set_new(body, "duration", json_integer(secs));
    json_t *reply = cli_call("POST", "/v1/reservations", body);
    cli_printf("Reservation created successfully.\n");
    cli_printf("ReservationID: %lld\n",
               (long long)json_integer_value(json_object_get(reply, "id")));
    print_one(reply, false);
    json_decref(reply);
    json_decref(body);
    return 0;
}

static int reserve_list(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"user", required_argument, NULL, OPT_USER},
        {"status", required_argument, NULL, OPT_STATUS},
        {"active", no_argument, NULL, OPT_ACTIVE},
        {"timezone", required_argument, NULL, OPT_TIMEZONE},
        {"timeline", no_argument, NULL, OPT_TIMELINE},
        {"range", required_argument, NULL, OPT_RANGE},
        {"from", required_argument, NULL, OPT_FROM},
        {"to", required_argument, NULL, OPT_TO},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *user = NULL, *status = NULL, *zone = NULL, *range = NULL, *from = NULL, *to = NULL;
    bool timeline = false;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_USER:
            user = optarg;
            break;
        case OPT_STATUS:
        case OPT_ACTIVE:
            if (status && strcmp(status, c == OPT_ACTIVE ? "active" : optarg) != 0)
                cli_usage_error("--active and --status %s cannot be combined",
                                c == OPT_ACTIVE ? status : optarg);
            status = c == OPT_ACTIVE ? "active" : optarg;
            break;
        case OPT_TIMEZONE:
            zone = optarg;
            break;
        case OPT_TIMELINE:
            timeline = true;
            break;
        case OPT_RANGE:
            range = optarg;
            break;
        case OPT_FROM:
            from = optarg;
            break;
        case OPT_TO:
            to = optarg;
            break;
        case 'h':
            help_reserve();
            return 0;
        default:
            bad_option("list", argv, c, longopts);
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s' for 'gctl reserve list'", argv[optind]);
    if (status && reservation_status_parse(status) < 0)
        cli_usage_error("invalid --status '%s': use pending, active, completed or cancelled",
                        status);
    /* gflow's rules for the window, checked before anything is asked. */
    if ((range || from || to) && !timeline)
        cli_usage_error("--range/--from/--to can only be used with --timeline");
    if (range && (from || to))
        cli_usage_error("--range cannot be combined with --from/--to");
    if (!from != !to)
        cli_usage_error("--from and --to must be used together");
    if (zone)
        cli_use_timezone(zone);
    double now = now_wall(), t0 = now - 12 * 3600, t1 = now + 12 * 3600;
    char *err = NULL;
    if (range && timeline_parse_range(range, now, &t0, &t1, &err) < 0)
        cli_usage_error("%s", err);
    if (from && parse_begin_time(from, now, &t0, &err) < 0)
        cli_usage_error("invalid --from '%s': %s", from, err);
    if (to && parse_begin_time(to, now, &t1, &err) < 0)
        cli_usage_error("invalid --to '%s': %s", to, err);
    if (t1 <= t0)
        cli_usage_error("invalid time range: --to must be after --from");
    struct strbuf path;
    strbuf_init(&path);
    strbuf_adds(&path, "/v1/reservations");
    /* User names and status words need no escaping in a query. */
    if (user && strpbrk(user, "&=?# %"))
        cli_usage_error("invalid --user '%s'", user);
    if (status)
        strbuf_addf(&path, "?status=%s", status);
    if (user)
        strbuf_addf(&path, "%suser=%s", status ? "&" : "?", user);
    json_t *reply = cli_call("GET", path.buf, NULL);
    strbuf_free(&path);
    const json_t *list = json_object_get(reply, "reservations");
    if (json_array_size(list) == 0) {
        printf("No reservations found.\n");
        json_decref(reply);
        return 0;
    }
    if (timeline) {
        json_t *gpus = cli_call("GET", "/v1/gpus", NULL);
        json_t *indices = json_array();
        size_t k;
        const json_t *g;
        json_array_foreach (json_object_get(gpus, "gpus"), k, g)
            json_array_append(indices, json_object_get(g, "index"));
        timeline_print(list, indices, t0, t1, now, stdout);
        json_decref(indices);
        json_decref(gpus);
        json_decref(reply);
        return 0;
    }
    static const char *const headers[] = {"ID", "USER", "GPUS", "START", "END", "STATUS"};
    struct output_table *t = output_table_new(6, headers);
    size_t i;
    const json_t *x;
    json_array_foreach (list, i, x) {
        char *cells[6] = {
            xasprintf("%lld", (long long)json_integer_value(json_object_get(x, "id"))),
            xstrdup(json_string_value(json_object_get(x, "user"))),
            gpus_text(x),
            output_time(json_number_value(json_object_get(x, "start"))),
            output_time(json_number_value(json_object_get(x, "end"))),
            xstrdup(status_text(x)),
        };
        output_table_add_row_owned(t, cells);
    }
    output_table_print(t, stdout);
    output_table_free(t);
    json_decref(reply);
    return 0;
}

/* get and cancel: one id. */
static int reserve_one(const char *sub, int argc, char **argv)
{
    bool cancel = !strcmp(sub, "cancel");
    static const struct option longopts[] = {
        {"timezone", required_argument, NULL, OPT_TIMEZONE}, /* get's only */
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", cancel ? longopts + 1 : longopts, NULL)) != -1) {
        if (c == 'h') {
            help_reserve();
            return 0;
        }
        if (c == OPT_TIMEZONE) {
            cli_use_timezone(optarg);
            continue;
        }
        bad_option(sub, argv, c, cancel ? longopts + 1 : longopts);
    }
    if (argc - optind != 1)
        cli_usage_error("use 'gctl reserve %s <id>', e.g. 'gctl reserve %s 3'", sub, sub);
    int64_t id;
    if (parse_int64(argv[optind], &id) < 0 || id <= 0)
        cli_usage_error("invalid reservation id '%s': use a number like 3", argv[optind]);
    char *path = xasprintf("/v1/reservations/%lld%s", (long long)id, cancel ? "/cancel" : "");
    json_t *reply = cli_call(cancel ? "POST" : "GET", path, NULL);
    if (cancel) {
        cli_printf("Reservation %lld cancelled successfully\n", (long long)id);
    } else {
        cli_printf("Reservation Details:\n");
        print_one(reply, true);
    }
    json_decref(reply);
    free(path);
    return 0;
}

int gctl_reserve(int argc, char **argv)
{
    if (argc < 2)
        cli_usage_error("'gctl reserve' needs an action: create, list, get or cancel");
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        help_reserve();
        return 0;
    }
    if (!strcmp(sub, "create"))
        return reserve_create(argc - 1, argv + 1);
    if (!strcmp(sub, "list"))
        return reserve_list(argc - 1, argv + 1);
    if (!strcmp(sub, "get") || !strcmp(sub, "cancel"))
        return reserve_one(sub, argc - 1, argv + 1);
    cli_usage_error("unknown reserve action '%s'; use create, list, get or cancel", sub);
}
