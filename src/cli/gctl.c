/* gctl: runtime controls of the daemon, like gflow's gctl (admins only on a system
 * daemon: root, the daemon's own user, daemon.admin_group).
 *
 *   gctl show-gpus                          gflow's line per GPU, the allowed GPUs and where the
 *                                           setting came from
 *   gctl set-gpus 0,2 | all                 change them now (kept across a restart that
 *                                           names no --gpus)
 *   gctl gpu-process ignore --gpu G --pid P a process outside gflow stops blocking GPU G
 *   gctl gpu-process unignore --gpu G --pid P
 *   gctl gpu-process list
 *
 * A refusal by the daemon (403 not an admin, 404 no such process, 400 bad input) is
 * one line on stderr and exit status 1. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "completion.h"
#include "gctl_gpu.h"
#include "gctl_quota.h"
#include "gctl_reserve.h"
#include "gctl_usage.h"
#include "output.h"
#include "util.h"

enum { OPT_GPU = 256, OPT_PID };

/* More GPU indices than any machine has. */
#define GCTL_GPU_MAX 1024

static void gctl_help(void)
{
    printf("gctl - change the gflow daemon's settings while it runs\n"
           "\n"
           "Usage: gctl [--socket PATH] <command> [options]\n"
           "\n"
           "Commands:\n"
           "  show-gpus                   one line per GPU as gflow prints it (available or\n"
           "                              in_use, restricted, why), then the GPUs jobs may\n"
           "                              use and where that was set\n"
           "  set-gpus <0,2 | 0-3 | all>  let jobs use only these GPUs (physical NVML\n"
           "                              indices); 'all' lifts the restriction. Running\n"
           "                              jobs keep their GPUs. Kept across a restart that\n"
           "                              names no --gpus\n"
           "  gpu-process ignore --gpu G --pid P\n"
           "                              a process outside gflow no longer blocks GPU G\n"
           "                              (only a process NVML lists on GPU G)\n"
           "                              (the entry goes away when the process exits)\n"
           "  gpu-process unignore --gpu G --pid P\n"
           "                              undo 'ignore'\n"
           "  gpu-process list            the ignored processes\n"
           "  gpu resume <N> [--force]    a drained GPU (ECC errors, pending row remaps,\n"
           "                              a fatal Xid) takes jobs again\n"
           "  set-limit <job|group> <K>   at most K jobs of that submission (array,\n"
           "                              sweep) run at once; 0: no limit\n"
           "  quota <list | show | set | remove | clear>\n"
           "                              per-user and per-project limits: list or show\n"
           "                              them with what each uses now (everyone),\n"
           "                              override or remove them at runtime (admins;\n"
           "                              'gctl quota --help')\n"
           "  usage [-o json]             fair-share accounts per user and project: GPU-hours,\n"
           "                              shares, fair-share factor (everyone may look)\n"
           "  reserve create|list|get|cancel\n"
           "                              GPU reservations: book GPUs for a user over a\n"
           "                              window (admins; users too with\n"
           "                              reservations.who = \"users\"; 'gctl reserve\n"
           "                              --help')\n"
           "  completion <shell>          print a completion script: bash, elvish, fish,\n"
           "                              powershell or zsh\n"
           "\n"
           "On a daemon started as root only admins (root, daemon.admin_group) may use\n"
           "the other commands (but 'reserve': see its help); 'ginfo' shows the GPUs to\n"
           "everyone.\n"
           "\n"
           "Options:\n"
           "      --socket PATH  the daemon's socket\n"
           "      --config FILE  the config file whose timezone (and\n"
           "                     daemon.socket_path) to use\n"
           "  -h, --help         show this help ('gctl <command> --help' for a command)\n"
           "  -V, --version      show the version\n");
}

static void gctl_help_gpu_process(void)
{
    printf("Usage: gctl gpu-process <ignore | unignore> --gpu G --pid P\n"
           "       gctl gpu-process list\n"
           "\n"
           "A GPU with compute processes that belong to no gflow job is not given to\n"
           "jobs (ginfo shows it as unmanaged). gflow never stops such processes; 'ignore'\n"
           "tells it that one of them may share its GPU with jobs, 'unignore' undoes it.\n"
           "\n"
           "Options:\n"
           "      --gpu G    the GPU's index, as 'ginfo -v' shows it\n"
           "      --pid P    the process id\n"
           "  -h, --help     show this help\n");
}

static void __attribute__((noreturn))
gctl_bad_option(const char *cmd, char **argv, int c, const struct option *longopts)
{
    cli_die(CLI_EXIT_USAGE, "%s for 'gctl %s'; see 'gctl %s --help'",
            cli_option_error(argv, c, longopts), cmd, cmd);
}

/* Prints an allowed-GPUs reply: "Allowed GPUs: 0,2" and, with source, where it came
 * from. */
static void gctl_print_allowed(const json_t *reply, bool with_source)
{
    const char *source = json_string_value(json_object_get(reply, "source"));
    const json_t *allowed = json_object_get(reply, "allowed");
    if (source && !strcmp(source, "all")) {
        char *list = output_json_list(allowed, "");
        if (*list)
            cli_printf("Allowed GPUs: all (%s)\n", list);
        else
            cli_printf("Allowed GPUs: all\n");
        free(list);
    } else {
        char *list = output_json_list(allowed, "");
        cli_printf("Allowed GPUs: %s\n", *list ? list : "none");
        free(list);
    }
    if (!with_source || !source)
        return;
    const char *why = !strcmp(source, "runtime")  ? "set at runtime with 'gctl set-gpus'"
                      : !strcmp(source, "flag")   ? "set by 'gflowd up/restart --gpus'"
                      : !strcmp(source, "config") ? "set by daemon.gpus in the config "
                                                    "(or GFLOW_DAEMON__GPUS)"
                      : !strcmp(source, "all")    ? "no restriction"
                                                  : NULL;
    if (why)
        cli_printf("Source: %s (%s)\n", source, why);
    else
        cli_printf("Source: %s\n", source);
}

/* Takes no options but --help; returns the index of the first operand. */
static int gctl_simple_opts(const char *cmd, int argc, char **argv, void (*help)(void))
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') {
            help();
            exit(0);
        }
        gctl_bad_option(cmd, argv, c, longopts);
    }
    return optind;
}

static void gctl_help_show_gpus(void)
{
    printf("Usage: gctl show-gpus\n"
           "\n"
           "One line per GPU, as gflow prints it:\n"
           "  <index> TAB available|in_use [TAB restricted] [TAB <reason>]\n"
           "(restricted: jobs may not use it; the reason: its jobs, or what blocks it), then\n"
           "the GPUs jobs may use and where that setting came from: runtime\n"
           "('gctl set-gpus'), flag ('gflowd up --gpus'), config (daemon.gpus) or all.\n");
}

static void gctl_help_set_gpus(void)
{
    printf("Usage: gctl set-gpus <list | all>\n"
           "\n"
           "Lets jobs use only the listed GPUs (physical NVML indices as 'ginfo -v'\n"
           "shows them: 0,2 or 0-3 or 0,2-3); 'all' lifts the restriction. Jobs already\n"
           "running keep their GPUs. The setting survives a daemon restart that names no\n"
           "--gpus; a --gpus given at start replaces it.\n");
}

static void gctl_help_set_limit(void)
{
    printf("Usage: gctl set-limit <job id or group id> <K>\n"
           "\n"
           "Lets at most K jobs of the job's submission (an array, a sweep or a batch: its\n"
           "group) run at once; 0 lifts the limit. Owners may change their own jobs'\n"
           "limit, admins any.\n");
}

static int gctl_set_limit(int argc, char **argv)
{
    int first = gctl_simple_opts("set-limit", argc, argv, gctl_help_set_limit);
    if (argc - first != 2)
        cli_usage_error("use 'gctl set-limit <job id or group id> <K>', e.g. "
                        "'gctl set-limit 12 4'");
    int64_t id, k;
    if (parse_int64(argv[first], &id) < 0 || id <= 0)
        cli_usage_error("invalid job id '%s': use a number like 12", argv[first]);
    if (parse_int64(argv[first + 1], &k) < 0 || k < 0)
        cli_usage_error("invalid limit '%s': use a whole number >= 0 (0: no limit)",
                        argv[first + 1]);
    char *path = xasprintf("/v1/jobs/%lld/limit", (long long)id);
    json_t *body = json_pack("{s:I}", "max_concurrent", (json_int_t)k);
    json_t *reply = cli_call("POST", path, body);
    long long limit = json_integer_value(json_object_get(reply, "max_concurrent"));
    long long group = json_integer_value(json_object_get(reply, "group_id"));
    if (limit > 0)
        printf("Group %lld: at most %lld job%s run%s at once.\n", group, limit, plural_s(limit),
               limit == 1 ? "s" : "");
    else
        printf("Group %lld: no limit on jobs running at once.\n", group);
    json_decref(reply);
    json_decref(body);
    free(path);
    return 0;
}

static bool gctl_list_has(const json_t *arr, json_int_t v)
{
    size_t i;
    const json_t *x;
    json_array_foreach (arr, i, x)
        if (json_integer_value(x) == v)
            return true;
    return false;
}

/* " pid 4242 pid 4343": the GPU's processes that belong to no job and are not ignored;
 * "" if none. Malloc'd. */
static char *gctl_outside_pids(const json_t *gpu)
{
    struct strbuf sb;
    strbuf_init(&sb);
    size_t i;
    const json_t *p;
    json_array_foreach (json_object_get(gpu, "processes"), i, p) {
        if (json_is_null(json_object_get(p, "job")) && !json_is_true(json_object_get(p, "ignored")))
            strbuf_addf(&sb, " pid %lld", (long long)json_integer_value(json_object_get(p, "pid")));
    }
    return strbuf_detach(&sb);
}

/* Why a GPU is not available, for the last column: its jobs, or what blocks it. NULL
 * for an idle GPU. Malloc'd. */
static char *gctl_gpu_reason(const json_t *gpu)
{
    const char *state = json_string_value(json_object_get(gpu, "state"));
    const json_t *jobs = json_object_get(gpu, "jobs");
    if (json_array_size(jobs)) {
        char *list = output_json_list(jobs, "");
        char *r = xasprintf("job%s %s", json_array_size(jobs) == 1 ? "" : "s", list);
        free(list);
        return r;
    }
    const char *reason = json_string_value(json_object_get(gpu, "reason"));
    if (!reason || !state || !strcmp(state, "idle"))
        return NULL;
    if (strcmp(state, "unmanaged") != 0)
        return xstrdup(reason);
    /* Name the outside processes, so that 'gctl gpu-process ignore' has its --pid. */
    char *pids = gctl_outside_pids(gpu);
    char *r = xasprintf("%s:%s", reason, pids);
    free(pids);
    return r;
}

/* gflow's lines, one per GPU: "<index>\t<available|in_use>[\trestricted][\t<reason>]";
 * then which GPUs are allowed and where that was set. */
static int gctl_show_gpus(int argc, char **argv)
{
    int first = gctl_simple_opts("show-gpus", argc, argv, gctl_help_show_gpus);
    if (first < argc)
        cli_usage_error("'gctl show-gpus' takes no arguments; got '%s'", argv[first]);
    json_t *gpus = cli_call("GET", "/v1/gpus", NULL);
    size_t i;
    const json_t *gpu;
    json_array_foreach (json_object_get(gpus, "gpus"), i, gpu) {
        const char *state = json_string_value(json_object_get(gpu, "state"));
        json_int_t index = json_integer_value(json_object_get(gpu, "index"));
        bool restricted = !gctl_list_has(json_object_get(gpus, "allowed"), index);
        /* A restricted GPU is still in use while outside processes hold it. */
        char *outside = gctl_outside_pids(gpu);
        bool available =
            state && (!strcmp(state, "idle") || (!strcmp(state, "restricted") && !*outside));
        free(outside);
        char *reason = gctl_gpu_reason(gpu);
        cli_printf("%lld\t%s%s%s%s\n", (long long)index, available ? "available" : "in_use",
                   restricted ? "\trestricted" : "", reason ? "\t" : "", reason ? reason : "");
        free(reason);
    }
    const char *error = json_string_value(json_object_get(gpus, "error"));
    if (error)
        cli_printf("GPUs: %s\n", error);
    json_decref(gpus);
    json_t *reply = cli_call("GET", "/v1/gpus/allowed", NULL);
    gctl_print_allowed(reply, true);
    json_decref(reply);
    return 0;
}

/* A GPU index: a whole number 0..GCTL_GPU_MAX. -1 if s is not one. */
static int64_t gctl_gpu_index(const char *s, size_t len)
{
    if (len == 0 || len > 9)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v <= GCTL_GPU_MAX ? v : -1;
}

/* "0,2", "0-3", "0,2-3" into a JSON array of indices, in order, without duplicates.
 * A bad list is a usage error. */
static json_t *gctl_parse_gpu_list(const char *s)
{
    json_t *arr = json_array();
    bool seen[GCTL_GPU_MAX + 1] = {false};
    const char *p = s;
    if (!*s)
        cli_usage_error("empty GPU list; use e.g. 0,2 or 0-3 or all");
    for (;;) {
        size_t len = strcspn(p, ",");
        const char *dash = memchr(p, '-', len);
        int64_t lo = gctl_gpu_index(p, dash ? (size_t)(dash - p) : len);
        int64_t hi = dash ? gctl_gpu_index(dash + 1, len - (size_t)(dash + 1 - p)) : lo;
        if (len == 0)
            cli_usage_error("invalid GPU list '%s': empty item; use e.g. 0,2 or 0-3, or all", s);
        if (lo < 0 || hi < 0)
            cli_usage_error("invalid GPU list '%s' at '%.*s': use GPU indices like 0,2 or "
                            "0-3, or all",
                            s, (int)len, p);
        if (hi < lo)
            cli_usage_error("invalid GPU list '%s': range '%.*s' ends before it starts", s,
                            (int)len, p);
        for (int64_t i = lo; i <= hi; i++) {
            if (!seen[i])
                json_array_append_new(arr, json_integer(i));
            seen[i] = true;
        }
        if (!p[len])
            break;
        p += len + 1;
    }
    return arr;
}

static int gctl_set_gpus(int argc, char **argv)
{
    int first = gctl_simple_opts("set-gpus", argc, argv, gctl_help_set_gpus);
    if (first >= argc)
        cli_usage_error("which GPUs? e.g. 'gctl set-gpus 0,2' or 'gctl set-gpus all'");
    if (argc - first > 1)
        cli_usage_error("'gctl set-gpus' takes one list, e.g. 0,2; got %d arguments", argc - first);
    const char *arg = argv[first];
    json_t *body = json_object();
    if (!strcmp(arg, "all"))
        json_object_set_new(body, "gpus", json_string("all"));
    else
        json_object_set_new(body, "gpus", gctl_parse_gpu_list(arg));
    json_t *reply = cli_call("PUT", "/v1/gpus/allowed", body);
    gctl_print_allowed(reply, false);
    json_decref(reply);
    json_decref(body);
    return 0;
}

static int64_t gctl_number(const char *opt, const char *s)
{
    int64_t v;
    if (parse_int64(s, &v) < 0 || v < 0)
        cli_usage_error("invalid value '%s' for %s: use a whole number >= 0", s, opt);
    return v;
}

static int gctl_gpu_process(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"gpu", required_argument, NULL, OPT_GPU},
        {"pid", required_argument, NULL, OPT_PID},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2)
        cli_usage_error("'gctl gpu-process' needs an action: ignore, unignore or list");
    const char *action = argv[1];
    if (!strcmp(action, "--help") || !strcmp(action, "-h") || !strcmp(action, "help")) {
        gctl_help_gpu_process();
        return 0;
    }
    bool ignore = !strcmp(action, "ignore"), unignore = !strcmp(action, "unignore"),
         list = !strcmp(action, "list");
    if (!ignore && !unignore && !list)
        cli_usage_error("unknown gpu-process action '%s'; use ignore, unignore or list", action);
    int64_t gpu = -1, pid = -1;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc - 1, argv + 1, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_GPU:
            gpu = gctl_number("--gpu", optarg);
            break;
        case OPT_PID:
            pid = gctl_number("--pid", optarg);
            if (pid == 0)
                cli_usage_error("invalid value '0' for --pid: use a process id > 0");
            break;
        case 'h':
            gctl_help_gpu_process();
            return 0;
        default:
            gctl_bad_option("gpu-process", argv + 1, c, longopts);
        }
    }
    if (optind < argc - 1)
        cli_usage_error("unexpected argument '%s' for 'gctl gpu-process %s'", argv[optind + 1],
                        action);

    if (list) {
        if (gpu >= 0 || pid >= 0)
            cli_usage_error("'gctl gpu-process list' takes no --gpu or --pid");
        json_t *reply = cli_call("GET", "/v1/gpus/ignored", NULL);
        const json_t *entries = json_object_get(reply, "ignored");
        if (json_array_size(entries) == 0) {
            printf("No ignored GPU processes.\n");
        } else {
            static const char *const headers[] = {"GPU", "PID"};
            struct output_table *t = output_table_new(2, headers);
            size_t i;
            const json_t *e;
            json_array_foreach (entries, i, e) {
                const json_t *g = json_object_get(e, "gpu"), *p = json_object_get(e, "pid");
                char *cells[2] = {
                    json_is_integer(g) ? xasprintf("%lld", (long long)json_integer_value(g))
                                       : xstrdup("?"),
                    json_is_integer(p) ? xasprintf("%lld", (long long)json_integer_value(p))
                                       : xstrdup("?"),
                };
                output_table_add_row_owned(t, cells);
            }
            output_table_print(t, stdout);
            output_table_free(t);
        }
        json_decref(reply);
        return 0;
    }
    if (gpu < 0 || pid < 0)
        cli_usage_error("'gctl gpu-process %s' needs --gpu G and --pid P", action);
    json_t *reply;
    if (ignore) {
        json_t *body = json_object();
        json_object_set_new(body, "gpu", json_integer(gpu));
        json_object_set_new(body, "pid", json_integer(pid));
        reply = cli_call("POST", "/v1/gpus/ignored", body);
        json_decref(body);
        printf("Ignoring process %lld on GPU %lld: it no longer blocks the GPU.\n", (long long)pid,
               (long long)gpu);
    } else {
        char *path =
            xasprintf("/v1/gpus/ignored?gpu=%lld&pid=%lld", (long long)gpu, (long long)pid);
        reply = cli_call("DELETE", path, NULL);
        free(path);
        printf("No longer ignoring process %lld on GPU %lld.\n", (long long)pid, (long long)gpu);
    }
    json_decref(reply);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    cli_init(argv[0]);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hV", longopts, NULL)) != -1) {
        switch (c) {
        default:
            cli_common_option(c, argv, longopts, "gctl", gctl_help);
        }
    }
    if (optind >= argc)
        cli_usage_error("no command given; use show-gpus, set-gpus, gpu-process, gpu, "
                        "set-limit, quota, usage, reserve or completion");
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    int status;
    if (!strcmp(cmd, "show-gpus"))
        status = gctl_show_gpus(sub_argc, sub_argv);
    else if (!strcmp(cmd, "set-gpus"))
        status = gctl_set_gpus(sub_argc, sub_argv);
    else if (!strcmp(cmd, "gpu-process"))
        status = gctl_gpu_process(sub_argc, sub_argv);
    else if (!strcmp(cmd, "gpu"))
        status = gctl_gpu(sub_argc, sub_argv);
    else if (!strcmp(cmd, "set-limit"))
        status = gctl_set_limit(sub_argc, sub_argv);
    else if (!strcmp(cmd, "quota"))
        status = gctl_quota(sub_argc, sub_argv);
    else if (!strcmp(cmd, "usage"))
        status = gctl_usage(sub_argc, sub_argv);
    else if (!strcmp(cmd, "reserve"))
        status = gctl_reserve(sub_argc, sub_argv);
    else if (!strcmp(cmd, "completion"))
        status = completion_main("gctl", sub_argc - 1, sub_argv + 1);
    else if (!strcmp(cmd, "help"))
        gctl_help(), status = 0;
    else
        cli_usage_error("unknown command '%s'; use show-gpus, set-gpus, gpu-process, gpu, "
                        "set-limit, quota, usage, reserve or completion",
                        cmd);
    return cli_finish(status);
}
