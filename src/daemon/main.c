/* gflowd: the daemon and its control commands (up/start, down/stop, restart, status, run).
 *
 * `run` serves in the foreground (systemd, containers). `up` forks a detached daemon and
 * returns 0 only once it has reported, over a pipe, that its socket is listening, and the
 * socket has answered a health request. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "client.h"
#include "clock.h"
#include "config_file.h"
#include "files.h"
#include "gflow_build.h"
#include "gflow_commit.h"
#include "gflowd.h"
#include "gpu.h"
#include "jobs.h"
#include "lockfile.h"
#include "log.h"
#include "loop.h"
#include "parse.h"
#include "procinfo.h"
#include "runner.h"
#include "store.h"
#include "util.h"

extern char **environ;

struct gflowd gd;

#define STOP_WAIT_SECS 10
#define START_WAIT_SECS 30
#define CHECKPOINT_IDLE_SECS 0.5

static const char usage_text[] =
    "Usage: gflowd [options] <command>\n"
    "\n"
    "The gflow daemon: runs the jobs queued with gbatch on this machine.\n"
    "\n"
    "Commands:\n"
    "  up, start      start the daemon in the background (fails if one is running)\n"
    "  down, stop     stop the daemon (SIGTERM, then SIGKILL after 10 s); jobs keep running\n"
    "  restart        stop the daemon if it runs, then start it\n"
    "  status         say whether the daemon runs, its version, pid, uptime and job counts\n"
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
    "      --gpu-allocation-strategy S  topology (default), sequential or random\n"
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

/* ---- the serving daemon ---- */

static int ready_fd = -1; /* `up` waits on this pipe */
static const char *opt_simulate_gpus; /* --simulate-gpus N|FILE */
static const char *opt_gpus;          /* --gpus LIST */
static struct job **to_launch; /* committed as R, shims not forked yet */
static size_t to_launch_len;
static struct loop_timer *retry_timer, *checkpoint_timer;
static double last_commit;

static void report_ready(const char *msg)
{
    if (ready_fd < 0)
        return;
    ssize_t w = write(ready_fd, msg, strlen(msg));
    (void)w;
    close(ready_fd);
    ready_fd = -1;
}

static void startup_failed(const char *msg)
{
    log_error("%s", msg);
    char *line = xasprintf("error: %s\n", msg);
    report_ready(line);
    free(line);
    exit(1);
}

static void noop_cb(void *arg)
{
    (void)arg;
    retry_timer = NULL;
}

static void checkpoint_cb(void *arg)
{
    (void)arg;
    checkpoint_timer = NULL;
    double idle = now_mono() - last_commit;
    if (idle < CHECKPOINT_IDLE_SECS) {
        checkpoint_timer = loop_add_timer(CHECKPOINT_IDLE_SECS - idle, checkpoint_cb, NULL);
        return;
    }
    if (!store_in_transaction(gd.store))
        store_checkpoint(gd.store);
}

/* Commit; on failure, come back in a second (nothing waiting is released meanwhile). If
 * SQLite rolled the transaction back, memory holds changes the database does not: the
 * daemon exits so that a restart works from what was committed (jobs keep running under
 * their shims and are re-adopted); nothing uncommitted was acknowledged. */
static bool commit(void)
{
    bool had_changes = store_in_transaction(gd.store);
    if (jobs_commit() < 0) {
        if (store_transaction_lost(gd.store)) {
            log_error("the database lost a transaction (%s); exiting so that a restart "
                      "recovers the committed state", store_error(gd.store));
            exit(1);
        }
        if (!retry_timer)
            retry_timer = loop_add_timer(1.0, noop_cb, NULL);
        return false;
    }
    if (had_changes) {
        last_commit = now_mono();
        if (!checkpoint_timer)
            checkpoint_timer = loop_add_timer(CHECKPOINT_IDLE_SECS, checkpoint_cb, NULL);
    }
    return true;
}

/* Once per loop iteration: the scheduling pass and the group commit, then the replies
 * that waited for it, then the launches (a job is committed as R before its shim is
 * forked, so a crash can never start it twice). */
static void before_sleep(void)
{
    api_poll();
    struct job **started;
    size_t n = jobs_schedule(&started);
    if (n) {
        to_launch = xrealloc(to_launch, (to_launch_len + n) * sizeof(*to_launch));
        memcpy(to_launch + to_launch_len, started, n * sizeof(*started));
        to_launch_len += n;
        free(started);
    }
    if (!commit())
        return;
    api_release_waiting();
    if (to_launch_len) {
        size_t count = to_launch_len;
        struct job **list = to_launch;
        to_launch = NULL;
        to_launch_len = 0;
        for (size_t i = 0; i < count; i++)
            runner_launch(list[i]);
        free(list);
        if (!commit())
            return;
        api_release_waiting();
    }
    jobs_collect();
}

static void signal_cb(int fd, uint32_t events, void *arg)
{
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            log_info("received %s; stopping (running jobs keep running)",
                     job_signal_name((int)si.ssi_signo));
            loop_stop();
        }
    }
}

static int setup_signals(void)
{
    signal(SIGPIPE, SIG_IGN);
    /* An ignored signal never reaches a signalfd (nohup ignores SIGHUP, say). */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0 || loop_add_fd(fd, EPOLLIN, signal_cb, NULL) < 0)
        return -1;
    return fd;
}

/* How the shim holds jobs to --memory here, as the shim itself finds out (it tries a
 * throw-away cgroup): "cgroup v2", "cgroup v1" or "watchdog". */
static const char *probe_memory_enforcement(void)
{
    static char method[64];
    char *quoted = shell_quote(gd.shim_path);
    char *cmd = xasprintf("%s --probe-memory 2>/dev/null", quoted);
    free(quoted);
    FILE *f = popen(cmd, "r");
    free(cmd);
    if (!f || !fgets(method, sizeof(method), f))
        snprintf(method, sizeof(method), "unknown (gflow-shim --probe-memory failed)");
    if (f)
        pclose(f);
    method[strcspn(method, "\n")] = '\0';
    return method;
}

static char *find_shim(const char *argv0)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            char *p = xasprintf("%s/gflow-shim", self);
            if (access(p, X_OK) == 0)
                return p;
            free(p);
            p = xasprintf("%s/../libexec/gflow-shim", self);
            if (access(p, X_OK) == 0)
                return p;
            free(p);
        }
    }
    (void)argv0;
    return xstrdup(GFLOW_LIBEXECDIR "/gflow-shim");
}

static void resolve_admin_group(void)
{
    if (!gd.cfg.admin_group)
        return;
    struct group *g = getgrnam(gd.cfg.admin_group);
    if (!g) {
        log_warn("daemon.admin_group '%s' does not exist; only root is admin", gd.cfg.admin_group);
        return;
    }
    gd.has_admin_gid = true;
    gd.admin_gid = g->gr_gid;
}

static int serve(void)
{
    char *err = NULL;
    umask(077);
    gd.started_at = now_wall();
    gd.shim_path = find_shim(NULL);
    gd.mem_total_mb = proc_mem_total_mb();
    gd.memory_enforcement = probe_memory_enforcement();
    resolve_admin_group();
    if (mkdir_p(gd.paths.data_dir, 0700) < 0) {
        err = xasprintf("cannot create %s: %s", gd.paths.data_dir, strerror(errno));
        startup_failed(err);
    }
    pid_t holder;
    int lock_fd = lockfile_acquire(gd.paths.lock_path, &holder, &err);
    if (lock_fd < 0)
        startup_failed(err);
    if (runner_init(&err) < 0)
        startup_failed(err);
    gd.store = store_open(gd.paths.db_path, &err);
    if (!gd.store)
        startup_failed(err);
    if (loop_init() < 0 || setup_signals() < 0)
        startup_failed("cannot set up the event loop");
    if (jobs_load(&err) < 0)
        startup_failed(err);
    if (gpu_start(opt_simulate_gpus, opt_gpus, &err) < 0)
        startup_failed(err);
    runner_recover();
    if (jobs_commit() < 0)
        startup_failed("cannot commit the recovered state");
    runner_sweep();
    if (api_start(&err) < 0)
        startup_failed(err);
    loop_set_before_sleep(before_sleep);
    log_info("gflowd %s started: pid %ld, socket %s, data %s%s", GFLOW_VERSION, (long)getpid(),
             gd.paths.socket_path, gd.paths.data_dir, gd.system ? " (system daemon)" : "");
    report_ready("ok\n");

    loop_run();

    jobs_commit();
    api_stop();
    jobs_commit();
    runner_shutdown();
    gpu_stop();
    store_checkpoint(gd.store);
    store_close(gd.store);
    jobs_free_all();
    loop_free();
    log_info("gflowd stopped");
    close(lock_fd);
    return 0;
}

/* ---- control commands ---- */

static int ask_status(json_t **reply, char **err)
{
    client_set_socket(gd.paths.socket_path);
    struct client_response r;
    if (client_request("GET", "/v1/status", NULL, 0, NULL, &r, NULL, NULL, err) < 0)
        return -1;
    json_error_t jerr;
    *reply = r.status == 200 ? json_loadb(r.body.buf ? r.body.buf : "", r.body.len, 0, &jerr) : NULL;
    if (!*reply)
        *err = xasprintf("the daemon answered status %d", r.status);
    client_response_free(&r);
    return *reply ? 0 : -1;
}

static int wait_ready(int fd, pid_t child)
{
    struct strbuf msg;
    strbuf_init(&msg);
    double deadline = now_mono() + START_WAIT_SECS;
    for (;;) {
        double left = deadline - now_mono();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) == 0) {
            fprintf(stderr, "gflowd: the daemon did not start within %d s; see %s\n",
                    START_WAIT_SECS, gd.paths.daemon_log);
            return 1;
        }
        char buf[512];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        strbuf_add(&msg, buf, (size_t)n);
    }
    (void)child;
    if (!msg.buf || strcmp(msg.buf, "ok\n") != 0) {
        const char *text = msg.buf && str_starts_with(msg.buf, "error: ") ? msg.buf + 7 : NULL;
        if (text)
            fprintf(stderr, "gflowd: %s", text);
        else
            fprintf(stderr, "gflowd: the daemon exited during start-up; see %s\n",
                    gd.paths.daemon_log);
        strbuf_free(&msg);
        return 1;
    }
    strbuf_free(&msg);
    json_t *st;
    char *err = NULL;
    if (ask_status(&st, &err) < 0) {
        fprintf(stderr, "gflowd: started but the socket does not answer: %s\n", err);
        free(err);
        return 1;
    }
    printf("gflowd started (pid %lld, socket %s)\n",
           (long long)json_integer_value(json_object_get(st, "pid")), gd.paths.socket_path);
    json_decref(st);
    return 0;
}

static int cmd_up(void)
{
    pid_t pid;
    int64_t start;
    if (lockfile_holder(gd.paths.lock_path, &pid, &start)) {
        fprintf(stderr, "gflowd: gflowd is already running (pid %ld); use 'gflowd restart' to "
                        "restart it\n", (long)pid);
        return 1;
    }
    if (mkdir_p(gd.paths.data_dir, 0700) < 0)
        die("cannot create %s: %s", gd.paths.data_dir, strerror(errno));
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        die("pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t child = fork();
    if (child < 0)
        die("fork: %s", strerror(errno));
    if (child == 0) {
        close(pipefd[0]);
        setsid();
        if (fork() != 0)
            _exit(0); /* the daemon is the grandchild: no controlling terminal, ever */
        int null = open("/dev/null", O_RDWR);
        int logfd = open(gd.paths.daemon_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        dup2(null, 0);
        dup2(logfd >= 0 ? logfd : null, 1);
        dup2(logfd >= 0 ? logfd : null, 2);
        if (null > 2)
            close(null);
        if (logfd > 2)
            close(logfd);
        ready_fd = pipefd[1];
        exit(serve());
    }
    close(pipefd[1]);
    waitpid(child, NULL, 0);
    int rc = wait_ready(pipefd[0], child);
    close(pipefd[0]);
    return rc;
}

static int cmd_down(bool quiet_if_stopped)
{
    pid_t pid;
    int64_t start;
    if (!lockfile_holder(gd.paths.lock_path, &pid, &start)) {
        if (!quiet_if_stopped)
            printf("gflowd is not running.\n");
        return 0;
    }
    /* The pidfd pins the process; checking its start time after opening it makes sure it is
     * the daemon that holds the lock and not a process that reused the pid. */
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0 || proc_start_time(pid) != start) {
        printf("gflowd is not running.\n");
        return 0;
    }
    syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0);
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    if (poll(&p, 1, STOP_WAIT_SECS * 1000) == 0) {
        fprintf(stderr, "gflowd: the daemon did not stop within %d s; sending SIGKILL\n",
                STOP_WAIT_SECS);
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        poll(&p, 1, 5000);
    }
    close(pidfd);
    /* The lock is released only when the process is fully gone. */
    for (int i = 0; i < 500 && lockfile_holder(gd.paths.lock_path, &pid, &start); i++)
        usleep(10000);
    printf("gflowd stopped.\n");
    return 0;
}

static void format_uptime(long long secs, char *buf, size_t n)
{
    long long d = secs / 86400, h = secs / 3600 % 24, m = secs / 60 % 60, s = secs % 60;
    if (d)
        snprintf(buf, n, "%lldd %lldh %lldm %llds", d, h, m, s);
    else if (h)
        snprintf(buf, n, "%lldh %lldm %llds", h, m, s);
    else if (m)
        snprintf(buf, n, "%lldm %llds", m, s);
    else
        snprintf(buf, n, "%llds", s);
}

static int cmd_status(void)
{
    json_t *st;
    char *err = NULL;
    if (ask_status(&st, &err) < 0) {
        printf("Status: Not running\n");
        free(err);
        return 1;
    }
    char up[64];
    format_uptime(json_integer_value(json_object_get(st, "uptime_secs")), up, sizeof(up));
    json_t *c = json_object_get(st, "counts");
    printf("Status: Running\n");
    printf("Version: %s (%s)\n", json_string_value(json_object_get(st, "version")),
           json_string_value(json_object_get(st, "commit")));
    printf("PID: %lld\n", (long long)json_integer_value(json_object_get(st, "pid")));
    printf("Uptime: %s\n", up);
    printf("Jobs:");
    for (int i = 0; i < JOB_STATE_COUNT; i++) {
        const char *s = job_state_short((enum job_state)i);
        printf("%s %s %lld", i ? "," : "", s, (long long)json_integer_value(json_object_get(c, s)));
    }
    printf("\n");
    long long max = json_integer_value(json_object_get(st, "max_running_jobs"));
    if (max > 0)
        printf("Max running jobs: %lld\n", max);
    else
        printf("Max running jobs: unlimited\n");
    printf("Mode: %s\n", json_is_true(json_object_get(st, "system")) ? "system (all users)"
                                                                     : "per-user");
    json_t *g = json_object_get(st, "gpus");
    const char *gpu_error = json_string_value(json_object_get(g, "error"));
    if (gpu_error)
        printf("GPUs: %s\n", gpu_error);
    else
        printf("GPUs: %lld%s%s\n", (long long)json_integer_value(json_object_get(g, "count")),
               json_is_true(json_object_get(g, "simulated")) ? " (simulated)" : "",
               json_is_true(json_object_get(g, "constrain_devices"))
                   ? ", device isolation on (cgroup v1 devices)"
                   : "");
    json_t *mem = json_object_get(st, "memory");
    if (mem)
        printf("Memory: %lld MiB, job limits (--memory) held by %s\n",
               (long long)json_integer_value(json_object_get(mem, "total_mb")),
               json_string_value(json_object_get(mem, "enforcement")));
    printf("Socket: %s\n", json_string_value(json_object_get(st, "socket")));
    printf("Data: %s\n", json_string_value(json_object_get(st, "data_dir")));
    json_decref(st);
    return 0;
}

/* ---- start-up ---- */

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
            opt_gpus = optarg;
            break;
        case OPT_GPU_STRATEGY:
            flags[n_flags++] = (struct flag_setting){"daemon.gpu_allocation_strategy", optarg};
            break;
        case OPT_SIMULATE_GPUS:
            opt_simulate_gpus = optarg;
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
    gd.system = geteuid() == 0;
    gd.uid = geteuid();
    struct passwd *pw = getpwuid(gd.uid);
    gd.user = pw ? xstrdup(pw->pw_name) : xasprintf("%u", (unsigned)gd.uid);
    config_init(&gd.cfg);
    char *err = NULL;
    char *default_path = config_path ? NULL : config_default_path(gd.system);
    if (config_load_file(&gd.cfg, config_path ? config_path : default_path, config_path != NULL,
                         &err) < 0 ||
        config_load_env(&gd.cfg, environ, &err) < 0)
        die("%s", err);
    free(default_path);
    for (size_t i = 0; i < n_flags; i++) {
        if (config_set(&gd.cfg, flags[i].key, flags[i].value, &err) < 0)
            die("%s", err);
    }
    if (log_parse_level(gd.cfg.log_level, &log_threshold) < 0)
        die("unknown log level '%s': use error, warn, info or debug", gd.cfg.log_level);
    paths_resolve(&gd.paths, &gd.cfg, gd.system);

    int rc;
    if (!strcmp(cmd, "up") || !strcmp(cmd, "start"))
        rc = cmd_up();
    else if (!strcmp(cmd, "down") || !strcmp(cmd, "stop"))
        rc = cmd_down(false);
    else if (!strcmp(cmd, "restart"))
        rc = cmd_down(true) ? 1 : cmd_up();
    else if (!strcmp(cmd, "status"))
        rc = cmd_status();
    else if (!strcmp(cmd, "run"))
        rc = serve();
    else {
        fprintf(stderr, "gflowd: unknown command '%s': use up, down, restart, status or run\n",
                cmd);
        rc = 2;
    }
    paths_free(&gd.paths);
    config_free(&gd.cfg);
    free(gd.user);
    free(gd.shim_path);
    return rc;
}
