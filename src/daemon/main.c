/* gflowd: the daemon's command line. Options and the configuration (defaults, the
 * TOML file, GFLOW_<SECTION>__<KEY> variables, then flags) make the daemon's context;
 * the command then runs: up/start, down/stop, restart, status (ctl.c) or run, which
 * serves in the foreground for systemd and containers (serve.c). */
#include <getopt.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "config_file.h"
#include "ctl.h"
#include "daemon.h"
#include "gflow_build.h"
#include "gflow_commit.h"
#include "log.h"
#include "serve.h"
#include "util.h"

extern char **environ;

static const char usage_text[] =
    "Usage: gflowd [options] <command>\n"
    "\n"
    "The gflow daemon: runs the jobs queued with gbatch on this machine.\n"
    "\n"
    "Commands:\n"
    "  up, start      start the daemon in the background (fails if one is running)\n"
    "  down, stop     stop the daemon (SIGTERM, then SIGKILL after 10 s); jobs keep running\n"
    "  restart        stop the daemon if it runs, then start it\n"
    "  status         say whether the daemon runs, its version, pid, uptime, job counts,\n"
    "                 GPUs, NVML's state, whether jobs get GPU indices or UUIDs (and why),\n"
    "                 and what its own CUDA_VISIBLE_DEVICES means (read as CUDA does)\n"
    "  run            serve in the foreground (for systemd and containers)\n"
    "\n"
    "Options (they override the config file and GFLOW_DAEMON__* variables):\n"
    "  -c, --config FILE          configuration file (default $XDG_CONFIG_HOME/gflow/gflow.toml,\n"
    "                             /etc/gflow/gflow.toml for root)\n"
    "      --data-dir DIR         state directory (database, logs)\n"
    "      --socket PATH          Unix socket to listen on\n"
    "      --max-running-jobs N   run at most N jobs at once (0 = no limit)\n"
    "      --kill-grace-secs N    seconds between SIGTERM and SIGKILL when ending a job\n"
    "      --log-level LEVEL      error, warn, info or debug\n"
    "      --gpus LIST            GPUs jobs may use, e.g. 0-3 or 0,2 (or all); wins over\n"
    "                             an earlier 'gctl set-gpus'\n"
    "      --gpu-allocation-strategy S  topology (default: closest links, best fit),\n"
    "                             sequential or random\n"
    "      --simulate-gpus N|FILE run on N simulated GPUs, or on the GPUs a simulator\n"
    "                             fixture describes (docs/simulator.md)\n"
    "  -h, --help                 show this help\n"
    "  -V, --version              show the version\n";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gflowd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

enum {
    OPT_DATA_DIR = 256,
    OPT_SOCKET,
    OPT_MAX_RUNNING,
    OPT_KILL_GRACE,
    OPT_LOG_LEVEL,
    OPT_GPUS,
    OPT_GPU_STRATEGY,
    OPT_SIMULATE_GPUS,
};

static const struct option long_opts[] = {
    {"config", required_argument, NULL, 'c'},
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"max-running-jobs", required_argument, NULL, OPT_MAX_RUNNING},
    {"kill-grace-secs", required_argument, NULL, OPT_KILL_GRACE},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"gpus", required_argument, NULL, OPT_GPUS},
    {"gpu-allocation-strategy", required_argument, NULL, OPT_GPU_STRATEGY},
    {"simulate-gpus", required_argument, NULL, OPT_SIMULATE_GPUS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

struct flag_setting {
    const char *key;
    const char *value;
};

int main(int argc, char **argv)
{
    struct gflowd d = {0};
    struct serve_opts so = {.ready_fd = -1};
    const char *config_path = NULL;
    struct flag_setting flags[16];
    size_t n_flags = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "c:hV", long_opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config_path = optarg;
            break;
        case OPT_DATA_DIR:
            flags[n_flags++] = (struct flag_setting){"daemon.data_dir", optarg};
            break;
        case OPT_SOCKET:
            flags[n_flags++] = (struct flag_setting){"daemon.socket_path", optarg};
            break;
        case OPT_MAX_RUNNING:
            flags[n_flags++] = (struct flag_setting){"daemon.max_running_jobs", optarg};
            break;
        case OPT_KILL_GRACE:
            flags[n_flags++] = (struct flag_setting){"daemon.kill_grace_secs", optarg};
            break;
        case OPT_LOG_LEVEL:
            flags[n_flags++] = (struct flag_setting){"daemon.log_level", optarg};
            break;
        case OPT_GPUS:
            so.flag_gpus = optarg;
            break;
        case OPT_GPU_STRATEGY:
            flags[n_flags++] = (struct flag_setting){"daemon.gpu_allocation_strategy", optarg};
            break;
        case OPT_SIMULATE_GPUS:
            so.simulate_gpus = optarg;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        case 'V':
            printf("gflowd %s (%s)\n", GFLOW_VERSION, GFLOW_COMMIT);
            return 0;
        default:
            fprintf(stderr, "gflowd: see 'gflowd --help' for the commands and options\n");
            return 2;
        }
        if (n_flags == sizeof(flags) / sizeof(flags[0])) {
            fprintf(stderr, "gflowd: too many options\n");
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "gflowd: missing command: use up, down, restart, status or run "
                        "(see 'gflowd --help')\n");
        return 2;
    }
    const char *cmd = argv[optind];
    if (optind + 1 < argc) {
        fprintf(stderr, "gflowd: unexpected argument '%s' (see 'gflowd --help')\n",
                argv[optind + 1]);
        return 2;
    }

    client_init("gflowd");
    d.system = geteuid() == 0;
    d.uid = geteuid();
    struct passwd *pw = getpwuid(d.uid);
    d.user = pw ? xstrdup(pw->pw_name) : xasprintf("%u", (unsigned)d.uid);
    config_init(&d.cfg);
    char *err = NULL;
    char *default_path = config_path ? NULL : config_default_path(d.system);
    if (config_load_file(&d.cfg, config_path ? config_path : default_path, config_path != NULL,
                         &err) < 0 ||
        config_load_env(&d.cfg, environ, &err) < 0)
        die("%s", err);
    free(default_path);
    for (size_t i = 0; i < n_flags; i++) {
        if (config_set(&d.cfg, flags[i].key, flags[i].value, &err) < 0)
            die("%s", err);
    }
    if (log_parse_level(d.cfg.log_level, &log_threshold) < 0)
        die("unknown log level '%s': use error, warn, info or debug", d.cfg.log_level);
    paths_resolve(&d.paths, &d.cfg, d.system);

    int rc;
    if (!strcmp(cmd, "up") || !strcmp(cmd, "start"))
        rc = ctl_up(&d, &so);
    else if (!strcmp(cmd, "down") || !strcmp(cmd, "stop"))
        rc = ctl_down(&d, false);
    else if (!strcmp(cmd, "restart"))
        rc = ctl_down(&d, true) ? 1 : ctl_up(&d, &so);
    else if (!strcmp(cmd, "status"))
        rc = ctl_status(&d);
    else if (!strcmp(cmd, "run"))
        rc = serve(&d, &so);
    else {
        fprintf(stderr, "gflowd: unknown command '%s': use up, down, restart, status or run\n",
                cmd);
        rc = 2;
    }
    paths_free(&d.paths);
    config_free(&d.cfg);
    free(d.user);
    free(d.shim_path);
    return rc;
}
