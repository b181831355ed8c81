/* gflowd: the daemon's command line. Options and the configuration (defaults, the
 * TOML file, GFLOW_<SECTION>__<KEY> variables, then flags) make the daemon's context;
 * the command then runs: up/start, down/stop, restart, status, reload (ctl.c), init
 * (configinit.c) or run, which serves in the foreground for systemd and containers
 * (serve.c). */
#include <getopt.h>
#include <jansson.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "completion.h"
#include "config_file.h"
#include "configinit.h"
#include "ctl.h"
#include "daemon.h"
#include "gflow_build.h"
#include "gflow_commit.h"
#include "gpu/cudacheck.h"
#include "log.h"
#include "ops/service.h"
#include "ops/startopts.h"
#include "ops/triage_run.h"
#include "serve.h"
#include "util.h"
#include "web.h"

extern char **environ;

static const char usage_text[] =
    "Usage: gflowd [options] <command>\n"
    "\n"
    "The gflow daemon: runs the jobs queued with gbatch on this machine.\n"
    "\n"
    "Commands:\n"
    "  up, start      start the daemon in the background; if one runs already, say so\n"
    "                 and exit 0 (its options are then not applied: use restart)\n"
    "  down, stop     stop the daemon (SIGTERM, then SIGKILL after 10 s); jobs keep running\n"
    "  restart        stop the daemon if it runs, then start it, with the options it was\n"
    "                 started with (--simulate-gpus, --gpus, ...) unless new ones are given\n"
    "  status         say whether the daemon runs, its version, pid, uptime, job counts,\n"
    "                 GPUs, NVML's state, whether jobs get GPU indices or UUIDs (and why),\n"
    "                 what its own CUDA_VISIBLE_DEVICES means (read as CUDA does), and\n"
    "                 how its open-file limit is split between the daemon, connections\n"
    "                 and jobs (in use/reserved)\n"
    "  run            serve in the foreground (for systemd and containers)\n"
    "  reload         read the config file again without stopping (as SIGHUP); says which\n"
    "                 changes apply now and which need 'gflowd restart'\n"
    "  init           write a config file with every key and its default, commented out\n"
    "                 (to -c FILE or the default path; --force replaces an existing one);\n"
    "                 --gpus, --host, --port, --timezone, --gpu-allocation-strategy and\n"
    "                 --gpu-poll-interval-secs are written set. On a terminal it asks\n"
    "                 for them as gflow's wizard does (--advanced: notifications too) and\n"
    "                 shows the file first; --yes (or no terminal) writes without asking\n"
    "  service install|uninstall|status\n"
    "                 gflowd as a systemd service: install writes gflowd.service (the\n"
    "                 system unit in /etc/systemd/system, or with --user the caller's in\n"
    "                 ~/.config/systemd/user; its ExecStart keeps the options given here)\n"
    "                 and, where systemd runs, enables and starts it; uninstall stops,\n"
    "                 disables and removes it (running jobs keep running); status says\n"
    "                 whether it is installed, enabled and active\n"
    "  completion SHELL\n"
    "                 print a completion script: bash, elvish, fish, powershell or zsh\n"
    "  web            serve the web dashboard for the user who runs it (not the daemon):\n"
    "                 listens on 127.0.0.1 only (--port N, else daemon.port, else 8080; 0\n"
    "                 picks a free one), prints the URL with a secret token to open in a browser, "
    "and\n"
    "                 passes the page's requests to the daemon as that user; runs until\n"
    "                 Ctrl-C. A connection that has not shown the session within 10 s\n"
    "                 is closed, and so is the oldest such one beyond 16\n"
    "\n"
    "up, down, restart and status say which daemon they act on: per-user or system, its\n"
    "socket and data directory. Root runs the system daemon unless --user is given.\n"
    "\n"
    "Options (they override the config file and GFLOW_DAEMON__* variables):\n"
    "  -c, --config FILE          configuration file (default $XDG_CONFIG_HOME/gflow/gflow.toml,\n"
    "                             /etc/gflow/gflow.toml for the system daemon)\n"
    "      --user                 the per-user daemon of the caller (also for root)\n"
    "      --system               the machine's daemon (root only; the default for root)\n"
    "      --data-dir DIR         state directory (database, logs)\n"
    "      --socket PATH          Unix socket to listen on\n"
    "      --max-running-jobs N   run at most N jobs at once (0 = no limit)\n"
    "      --kill-grace-secs N    seconds between SIGTERM and SIGKILL when ending a job\n"
    "      --log-level LEVEL      error, warn, info or debug\n"
    "  -v, --verbose              log more (one level per -v: info -> debug)\n"
    "  -q, --quiet                log less (one level per -q: info -> warn -> error)\n"
    "      --gpus LIST            GPUs jobs may use, e.g. 0-3 or 0,2 (or all); wins over\n"
    "                             an earlier 'gctl set-gpus'\n"
    "      --gpu-allocation-strategy S  topology (default: closest links, best fit),\n"
    "                             sequential or random\n"
    "      --gpu-poll-interval-secs N  read NVML every N seconds (default 10)\n"
    "      --simulate-gpus N|FILE run on N simulated GPUs, or on the GPUs a simulator\n"
    "                             fixture describes (docs/simulator.md)\n"
    "      --force                with init: replace an existing file\n"
    "      --yes                  with init: write without asking\n"
    "      --advanced             with init: also ask for webhooks and e-mail\n"
    "      --host HOST            with init: daemon.host (the dashboard's address)\n"
    "      --timezone TZ          with init: the time zone to store (\"local\": none)\n"
    "      --root DIR             with service: write and remove the unit under DIR (as if\n"
    "                             DIR were /); systemd counts as running only if\n"
    "                             DIR/run/systemd/system exists\n"
    "      --port N               with web: the TCP port on 127.0.0.1 (default: daemon.port,\n"
    "                             else 8080); with init: daemon.port\n"
    "      --bind ADDR            with web: 127.0.0.1 (default: daemon.host if it is one\n"
    "                             of these) or localhost; other\n"
    "                             addresses are refused (use ssh -L to reach it remotely)\n"
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

/* A mistake on the command line: one line and status 2. */
static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gflowd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see 'gflowd --help')\n", stderr);
    va_end(ap);
    exit(2);
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
    OPT_GPU_POLL,
    OPT_USER,
    OPT_SYSTEM,
    OPT_FORCE,
    OPT_ROOT,
    OPT_PORT,
    OPT_BIND,
    OPT_YES,
    OPT_ADVANCED,
    OPT_HOST,
    OPT_TIMEZONE,
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
    {"gpu-poll-interval-secs", required_argument, NULL, OPT_GPU_POLL},
    {"simulate-gpus", required_argument, NULL, OPT_SIMULATE_GPUS},
    {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"user", no_argument, NULL, OPT_USER},
    {"system", no_argument, NULL, OPT_SYSTEM},
    {"force", no_argument, NULL, OPT_FORCE},
    {"root", required_argument, NULL, OPT_ROOT},
    {"port", required_argument, NULL, OPT_PORT},
    {"bind", required_argument, NULL, OPT_BIND},
    {"yes", no_argument, NULL, OPT_YES},
    {"advanced", no_argument, NULL, OPT_ADVANCED},
    {"host", required_argument, NULL, OPT_HOST},
    {"timezone", required_argument, NULL, OPT_TIMEZONE},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* The word getopt stopped at, as the user typed it: "--bogus", "-x". */
static void bad_option(char **argv, int c)
{
    const char *a = optind > 0 ? argv[optind - 1] : NULL;
    if (a && a[0] == '-' && a[1] == '-') {
        size_t len = strcspn(a + 2, "=");
        for (const struct option *o = long_opts; o->name; o++) {
            if (strlen(o->name) != len || strncmp(o->name, a + 2, len) != 0)
                continue;
            if (c == ':')
                usage_error("option '--%s' needs a value", o->name);
            usage_error("option '--%s' takes no value", o->name);
        }
        usage_error("unknown option '--%.*s'", (int)len, a + 2);
    }
    if (c == ':')
        usage_error("option '-%c' needs a value", optopt);
    usage_error("unknown option '-%c'", optopt);
}

/* The config keys that flags set, in the order given; they win over file and
 * environment, and again at every reload. */
struct flag_list {
    size_t n;
    const char *keys[32];
    const char *values[32];
    const char *options[32]; /* the option that set it ("--max-running-jobs"), for errors */
};

static void flag_add(struct flag_list *f, const char *key, const char *value)
{
    for (size_t i = 0; i < f->n; i++) {
        if (!strcmp(f->keys[i], key)) {
            f->values[i] = value; /* the later one wins */
            return;
        }
    }
    if (f->n == sizeof(f->keys) / sizeof(f->keys[0]))
        usage_error("too many options");
    f->keys[f->n] = key;
    f->options[f->n] = NULL;
    f->values[f->n++] = value;
}

/* A flag's value set into the config: a bad one is named by the option the user typed
 * ("--max-running-jobs must be ..."), not by the config key it sets. */
static void flags_apply(const struct flag_list *f, struct gflow_config *cfg)
{
    char *err = NULL;
    for (size_t i = 0; i < f->n; i++) {
        if (config_set(cfg, f->keys[i], f->values[i], &err) == 0)
            continue;
        size_t klen = strlen(f->keys[i]);
        if (f->options[i] && !strncmp(err, f->keys[i], klen))
            die("%s%s", f->options[i], err + klen);
        die("%s", err);
    }
}

static bool flag_given(const struct flag_list *f, const char *key)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->keys[i], key))
            return true;
    return false;
}

/* --log-level moved by -v/-q, within error..debug. */
static const char *shifted_level(const char *base, int verbose, int quiet)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    enum log_level l = LOG_INFO;
    log_parse_level(base, &l);
    int v = (int)l + verbose - quiet;
    return names[v < 0 ? 0 : v > 3 ? 3 : v];
}

/* gflowd restart: what the daemon was started with, for each option not given now. */
static void restore_start_options(const char *data_dir, struct flag_list *flags,
                                  struct serve_opts *so)
{
    json_t *saved = startopts_load(data_dir);
    if (!saved)
        return;
    struct strbuf said;
    strbuf_init(&said);
    const char *sim = json_string_value(json_object_get(saved, "simulate_gpus"));
    if (sim && !so->simulate_gpus) {
        so->simulate_gpus = xstrdup(sim);
        strbuf_addf(&said, " --simulate-gpus %s", sim);
    }
    const char *gpus = json_string_value(json_object_get(saved, "gpus"));
    if (gpus && !so->flag_gpus) {
        so->flag_gpus = xstrdup(gpus);
        strbuf_addf(&said, " --gpus %s", gpus);
    }
    const char *key;
    json_t *v;
    json_object_foreach (json_object_get(saved, "settings"), key, v) {
        /* Where the daemon is was already decided by this command's own options. */
        if (!json_is_string(v) || flag_given(flags, key) || !strcmp(key, "daemon.data_dir") ||
            !strcmp(key, "daemon.socket_path"))
            continue;
        flag_add(flags, xstrdup(key), xstrdup(json_string_value(v)));
        strbuf_addf(&said, " %s=%s", key, json_string_value(v));
    }
    if (said.len)
        printf("Restarting with the options gflowd was started with:%s\n", said.buf);
    strbuf_free(&said);
    json_decref(saved);
}

/* A path given on the command line made absolute (the service runs in /). */
static char *absolute(const char *path)
{
    if (path[0] == '/')
        return xstrdup(path);
    char *cwd = getcwd(NULL, 0);
    char *abs = xasprintf("%s/%s", cwd ? cwd : "", path);
    free(cwd);
    return abs;
}

/* Whether the option (as typed: "-c", "--config") takes a path that the service must get
 * absolute; --simulate-gpus only when its value is a file, not a count. */
static bool path_option(const char *opt, const char *value)
{
    if (!strcmp(opt, "--simulate-gpus"))
        return value[strspn(value, "0123456789")] != '\0';
    return !strcmp(opt, "-c") || !strcmp(opt, "--config") || !strcmp(opt, "--data-dir") ||
           !strcmp(opt, "--socket");
}

/* The options the unit's ExecStart passes on: those given (getopt moved them before
 * optind), without --root, --user and --system (the unit says which daemon it runs),
 * paths made absolute. NULL-terminated. */
static char **service_args(int argc, char **argv, int end)
{
    char **out = xcalloc((size_t)argc + 1, sizeof(*out));
    size_t n = 0;
    for (int i = 1; i < end && i < argc; i++) {
        const char *w = argv[i];
        if (!strcmp(w, "--root")) {
            i++;
            continue;
        }
        if (!strncmp(w, "--root=", 7) || !strcmp(w, "--user") || !strcmp(w, "--system"))
            continue;
        const char *eq = strchr(w, '=');
        if (w[0] == '-' && w[1] == '-' && eq) {
            char *opt = xstrndup(w, (size_t)(eq - w));
            if (path_option(opt, eq + 1)) {
                char *abs = absolute(eq + 1);
                out[n++] = xasprintf("%s=%s", opt, abs);
                free(abs);
            } else {
                out[n++] = xstrdup(w);
            }
            free(opt);
        } else if (!strncmp(w, "-c", 2) && w[2]) {
            char *abs = absolute(w + 2);
            out[n++] = xasprintf("-c%s", abs);
            free(abs);
        } else if (i + 1 < end && path_option(w, argv[i + 1])) {
            out[n++] = xstrdup(w);
            out[n++] = absolute(argv[++i]);
        } else {
            out[n++] = xstrdup(w);
        }
    }
    out[n] = NULL;
    return out;
}

/* gflowd web: the dashboard at --bind/--port (port < 0: not given), else gflow's
 * daemon.host/daemon.port, else 127.0.0.1:8080. */
static int web_start(struct web_opts *web, const char *config_path, int port)
{
    struct gflow_config cfg;
    char *err = NULL;
    if (config_load(&cfg, config_path, &err) < 0)
        die("%s", err);
    web->port = port >= 0 ? port : cfg.port > 0 ? (int)cfg.port : 8080;
    char *host = cfg.host ? xstrdup(cfg.host) : NULL;
    config_free(&cfg);
    if (!web->bind && host) {
        /* gflow's API may listen anywhere; the dashboard only on loopback. */
        if (!strcmp(host, "127.0.0.1") || !strcmp(host, "localhost"))
            web->bind = host;
        else
            fprintf(stderr,
                    "gflowd: warning: daemon.host '%s' is not a loopback address; the "
                    "dashboard listens on 127.0.0.1 only (use ssh -L to reach it)\n",
                    host);
    }
    int rc = web_run(web);
    free(host);
    return rc;
}

int main(int argc, char **argv)
{
    struct gflowd d = {.log_dir_fd = -1};
    struct serve_opts so = {.ready_fd = -1};
    const char *config_path = NULL;
    struct flag_list flags = {0};
    int verbose = 0, quiet = 0, opt;
    /* gflowd's CUDA check runs gflowd itself in a child (gpu/cudacheck.h): not a command. */
    if (argc == 3 && !strcmp(argv[1], "__cuda-check"))
        return cudacheck_child_main(argv[2]);
    /* And its read of a failed job's log, as the job's user (ops/triage_run.h). */
    if (argc > 1 && !strcmp(argv[1], "__log-tail"))
        return triage_child_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "completion"))
        return completion_main("gflowd", argc - 2, argv + 2);
    bool want_user = false, want_system = false, force = false;
    const char *root = NULL;
    struct web_opts web = {0};
    int64_t port = 8080;
    bool port_given = false;
    struct configinit_opts init = {0};
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":c:hVvq", long_opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config_path = optarg;
            break;
        case OPT_DATA_DIR:
            flag_add(&flags, "daemon.data_dir", optarg);
            break;
        case OPT_SOCKET:
            web.socket = optarg;
            flag_add(&flags, "daemon.socket_path", optarg);
            break;
        case OPT_MAX_RUNNING:
            flag_add(&flags, "daemon.max_running_jobs", optarg);
            break;
        case OPT_KILL_GRACE:
            flag_add(&flags, "daemon.kill_grace_secs", optarg);
            break;
        case OPT_LOG_LEVEL:
            flag_add(&flags, "daemon.log_level", optarg);
            break;
        case OPT_GPUS:
            so.flag_gpus = optarg;
            init.gpus = optarg;
            break;
        case OPT_GPU_STRATEGY:
            flag_add(&flags, "daemon.gpu_allocation_strategy", optarg);
            init.strategy = optarg;
            break;
        case OPT_GPU_POLL:
            flag_add(&flags, "daemon.gpu_poll_interval_secs", optarg);
            init.poll_secs = optarg;
            break;
        case OPT_SIMULATE_GPUS:
            so.simulate_gpus = optarg;
            break;
        case 'v':
            verbose++;
            break;
        case 'q':
            quiet++;
            break;
        case OPT_USER:
            want_user = true;
            break;
        case OPT_SYSTEM:
            want_system = true;
            break;
        case OPT_FORCE:
            force = true;
            break;
        case OPT_YES:
            init.yes = true;
            break;
        case OPT_ADVANCED:
            init.advanced = true;
            break;
        case OPT_HOST:
            init.host = optarg;
            break;
        case OPT_TIMEZONE:
            init.timezone = optarg;
            break;
        case OPT_ROOT:
            root = optarg;
            break;
        case OPT_PORT:
            if (parse_int64(optarg, &port) < 0 || port < 0 || port > 65535)
                usage_error("--port needs a TCP port 0-65535, not '%s'", optarg);
            port_given = true;
            init.port = optarg;
            break;
        case OPT_BIND:
            web.bind = optarg;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        case 'V':
            printf("gflowd %s (%s)\n", GFLOW_VERSION, GFLOW_COMMIT);
            return 0;
        default:
            bad_option(argv, opt);
        }
        if (flags.n && !flags.options[flags.n - 1] && opt >= OPT_DATA_DIR)
            for (const struct option *o = long_opts; o->name; o++)
                if (o->val == opt)
                    flags.options[flags.n - 1] = xasprintf("--%s", o->name);
    }
    if (optind >= argc)
        usage_error("missing command: use up, down, restart, status, run, reload, init, "
                    "service or web");
    const char *cmd = argv[optind];
    bool service = !strcmp(cmd, "service");
    const char *action = service ? argv[optind + 1] : NULL;
    if (!strcmp(cmd, "completion"))
        usage_error("'completion' comes first, before any option: 'gflowd completion SHELL'");
    if (service && !action)
        usage_error("'service' needs an action: install, uninstall or status");
    if (service && strcmp(action, "install") && strcmp(action, "uninstall") &&
        strcmp(action, "status"))
        usage_error("unknown service action '%s': use install, uninstall or status", action);
    if (optind + 1 + service < argc)
        usage_error("unexpected argument '%s'", argv[optind + 1 + service]);
    static const char *const commands[] = {"up",  "start",  "down", "stop",    "restart", "status",
                                           "run", "reload", "init", "service", "web",     NULL};
    bool known = false;
    for (size_t i = 0; commands[i]; i++)
        known |= !strcmp(commands[i], cmd);
    if (!known)
        usage_error("unknown command '%s': use up, down, restart, status, run, reload, init, "
                    "service or web",
                    cmd);
    if (want_user && want_system)
        usage_error("--user and --system exclude each other");
    if (root && !service)
        usage_error("--root is only for 'gflowd service'");
    if (root && root[0] != '/')
        usage_error("--root needs an absolute directory, not '%s'", root);
    /* A system unit may be written into a directory of one's own (--root). */
    if (want_system && geteuid() != 0 && !(service && root))
        usage_error("--system needs root (the system daemon runs jobs as their submitters); "
                    "drop it for your own per-user daemon");
    bool is_init = !strcmp(cmd, "init"), is_web = !strcmp(cmd, "web");
    if (force && !is_init)
        usage_error("--force is only for 'gflowd init'");
    if ((init.yes || init.advanced || init.host || init.timezone) && !is_init)
        usage_error("--yes, --advanced, --host and --timezone are only for 'gflowd init'");
    if (port_given && !is_web && !is_init)
        usage_error("--port is only for 'gflowd web' and 'gflowd init'");
    if (web.bind && !is_web)
        usage_error("--bind is only for 'gflowd web'");

    client_init("gflowd");
    d.system = want_system || (geteuid() == 0 && !want_user);
    if (is_web)
        return web_start(&web, config_path, port_given ? (int)port : -1);
    if (is_init) {
        char *path = config_path ? xstrdup(config_path) : config_default_path(d.system);
        if (!path)
            die("HOME is not set and uid %u is not in /etc/passwd; set HOME or give -c FILE",
                (unsigned)getuid());
        init.path = path;
        init.force = force;
        int rc = configinit_run(&init);
        free(path);
        return rc;
    }
    d.uid = geteuid();
    struct passwd *pw = getpwuid(d.uid);
    d.user = pw ? xstrdup(pw->pw_name) : xasprintf("%u", (unsigned)d.uid);
    config_init(&d.cfg);
    char *err = NULL;
    d.config_path = config_path ? xstrdup(config_path) : config_default_path(d.system);
    d.config_required = config_path != NULL;
    if (config_load_file(&d.cfg, d.config_path, d.config_required, &err) < 0 ||
        config_load_env(&d.cfg, environ, &err) < 0) {
        if (!strcmp(cmd, "reload"))
            die("%s; nothing was reloaded (the daemon keeps its settings)", err);
        die("%s", err);
    }
    flags_apply(&flags, &d.cfg);
    paths_resolve(&d.paths, &d.cfg, d.system);
    if (service) {
        char **args = service_args(argc, argv, optind);
        struct service_request r = {.action = action,
                                    .system = d.system,
                                    .root = root,
                                    .daemon_args = (const char *const *)args,
                                    .paths = &d.paths};
        int rc = service_run(&r);
        for (size_t i = 0; args[i]; i++)
            free(args[i]);
        free(args);
        paths_free(&d.paths);
        config_free(&d.cfg);
        free(d.user);
        free(d.config_path);
        return rc;
    }
    if (!strcmp(cmd, "restart")) {
        restore_start_options(d.paths.data_dir, &flags, &so);
        flags_apply(&flags, &d.cfg);
    }
    if (verbose || quiet) {
        flag_add(&flags, "daemon.log_level", shifted_level(d.cfg.log_level, verbose, quiet));
        config_set(&d.cfg, "daemon.log_level", flags.values[flags.n - 1], &err);
    }
    if (log_parse_level(d.cfg.log_level, &log_threshold) < 0)
        die("unknown log level '%s': use error, warn, info or debug", d.cfg.log_level);
    d.n_flags = flags.n;
    d.flag_keys = flags.keys;
    d.flag_values = flags.values;

    /* gflow's keys that mean nothing here: one line each, also in the daemon's log. */
    if (!strcmp(cmd, "up") || !strcmp(cmd, "start") || !strcmp(cmd, "restart"))
        for (size_t i = 0; i < d.cfg.n_warnings; i++)
            fprintf(stderr, "gflowd: warning: %s\n", d.cfg.warnings[i]);
    int rc;
    if (!strcmp(cmd, "up") || !strcmp(cmd, "start"))
        rc = ctl_up(&d, &so);
    else if (!strcmp(cmd, "down") || !strcmp(cmd, "stop"))
        rc = ctl_down(&d, false);
    else if (!strcmp(cmd, "restart"))
        rc = ctl_down(&d, true) ? 1 : ctl_up(&d, &so);
    else if (!strcmp(cmd, "status"))
        rc = ctl_status(&d);
    else if (!strcmp(cmd, "reload"))
        rc = ctl_reload(&d);
    else
        rc = serve(&d, &so);
    paths_free(&d.paths);
    config_free(&d.cfg);
    free(d.user);
    free(d.shim_path);
    free(d.config_path);
    return rc;
}
