/* ctl: gflowd up/down/restart/status (see ctl.h). */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backendtext.h"
#include "client.h"
#include "clock.h"
#include "daemon.h"
#include "files.h"
#include "job.h"
#include "lockfile.h"
#include "pidfd.h"
#include "procinfo.h"
#include "serve.h"
#include "termtext.h"
#include "timefmt.h"
#include "util.h"

#define STOP_WAIT_SECS 10
#define START_WAIT_SECS 30

/* "gflowd: <what>: <errno's message>" and status 1. */
static int fail(const char *what)
{
    fprintf(stderr, "gflowd: %s: %s\n", what, strerror(errno));
    return 1;
}

/* Which daemon a command acts on: "Daemon: system (all users), socket S, data D". A root
 * shell reaches the system daemon, a user's shell that user's own. */
static void print_which(const struct gflowd *d)
{
    printf("Daemon: %s, socket %s, data %s\n", d->system ? "system (all users)" : "per-user",
           d->paths.socket_path, d->paths.data_dir);
}

static int ask_status(const struct gflowd *d, json_t **reply, char **err)
{
    client_set_socket_from(d->paths.socket_path, "gflowd's daemon.socket_path");
    struct client_response r;
    if (client_request("GET", "/v1/status", NULL, 0, NULL, &r, NULL, NULL, err) < 0)
        return -1;
    json_error_t jerr;
    *reply =
        r.status == 200 ? json_loadb(r.body.buf ? r.body.buf : "", r.body.len, 0, &jerr) : NULL;
    if (!*reply)
        *err = xasprintf("the daemon answered status %d", r.status);
    client_response_free(&r);
    return *reply ? 0 : -1;
}

static int wait_ready(const struct gflowd *d, int fd)
{
    struct strbuf msg;
    strbuf_init(&msg);
    double deadline = now_mono() + START_WAIT_SECS;
    for (;;) {
        double left = deadline - now_mono();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) == 0) {
            fprintf(stderr, "gflowd: the daemon did not start within %d s; see %s\n",
                    START_WAIT_SECS, d->paths.daemon_log);
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
    if (!msg.buf || strcmp(msg.buf, "ok\n") != 0) {
        const char *text = msg.buf && str_starts_with(msg.buf, "error: ") ? msg.buf + 7 : NULL;
        if (text)
            fprintf(stderr, "gflowd: %s", text);
        else
            fprintf(stderr, "gflowd: the daemon exited during start-up; see %s\n",
                    d->paths.daemon_log);
        strbuf_free(&msg);
        return 1;
    }
    strbuf_free(&msg);
    json_t *st;
    char *err = NULL;
    if (ask_status(d, &st, &err) < 0) {
        fprintf(stderr, "gflowd: started but the socket does not answer: %s\n", err);
        free(err);
        return 1;
    }
    printf("gflowd started (pid %lld, socket %s)\n",
           (long long)json_integer_value(json_object_get(st, "pid")), d->paths.socket_path);
    print_which(d);
    json_decref(st);
    return 0;
}

int ctl_up(struct gflowd *d, const struct serve_opts *o)
{
    pid_t pid;
    int64_t start;
    if (lockfile_holder(d->paths.lock_path, &pid, &start)) {
        /* As gflow: starting what runs is done already, not an error (exit 0). */
        printf("gflowd is already running.\n"
               "Use `gflowd reload` to hot-reload or `gflowd restart` to restart it.\n");
        printf("PID: %ld\n", (long)pid);
        print_which(d);
        if (d->n_flags || o->simulate_gpus || o->flag_gpus)
            printf("The options given were not applied: they take effect at a start "
                   "('gflowd restart' with them).\n");
        return 0;
    }
    if (mkdir_p(d->paths.data_dir, 0700) < 0) {
        fprintf(stderr, "gflowd: cannot create %s: %s\n", d->paths.data_dir, strerror(errno));
        return 1;
    }
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return fail("pipe");
    fflush(NULL);
    pid_t child = fork();
    if (child < 0)
        return fail("fork");
    if (child == 0) {
        close(pipefd[0]);
        setsid();
        if (fork() != 0)
            _exit(0); /* the daemon is the grandchild: no controlling terminal, ever */
        int null = open("/dev/null", O_RDWR);
        int logfd = open(d->paths.daemon_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        dup2(null, 0);
        dup2(logfd >= 0 ? logfd : null, 1);
        dup2(logfd >= 0 ? logfd : null, 2);
        if (null > 2)
            close(null);
        if (logfd > 2)
            close(logfd);
        struct serve_opts child_opts = *o;
        child_opts.ready_fd = pipefd[1];
        exit(serve(d, &child_opts));
    }
    close(pipefd[1]);
    waitpid(child, NULL, 0);
    int rc = wait_ready(d, pipefd[0]);
    close(pipefd[0]);
    return rc;
}

int ctl_down(const struct gflowd *d, bool quiet_if_stopped)
{
    pid_t pid;
    int64_t start;
    if (!lockfile_holder(d->paths.lock_path, &pid, &start)) {
        if (!quiet_if_stopped) {
            printf("gflowd is not running.\n");
            print_which(d);
        }
        return 0;
    }
    /* The pidfd pins the process; checking its start time after opening it makes sure it is
     * the daemon that holds the lock and not a process that reused the pid. */
    int pidfd = sys_pidfd_open(pid);
    if (pidfd < 0 || proc_start_time(pid) != start) {
        printf("gflowd is not running.\n");
        return 0;
    }
    sys_pidfd_send_signal(pidfd, SIGTERM, NULL);
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    if (poll(&p, 1, STOP_WAIT_SECS * 1000) == 0) {
        fprintf(stderr, "gflowd: the daemon did not stop within %d s; sending SIGKILL\n",
                STOP_WAIT_SECS);
        sys_pidfd_send_signal(pidfd, SIGKILL, NULL);
        poll(&p, 1, 5000);
    }
    close(pidfd);
    /* The lock is released only when the process is fully gone. */
    for (int i = 0; i < 500 && lockfile_holder(d->paths.lock_path, &pid, &start); i++)
        usleep(10000);
    printf("gflowd stopped.\n");
    print_which(d);
    return 0;
}

/* "Descriptors: limit 300; in use/reserved: daemon 31/79, connections 2/150, jobs 40/71;
 * at most 37 connections of one user" (fdres.h); nothing when the daemon has no limit. */
static void print_descriptors(const json_t *fds)
{
    if (!json_is_object(fds))
        return;
    printf("Descriptors: limit %lld; in use/reserved:",
           (long long)json_integer_value(json_object_get(fds, "limit")));
    static const char *const classes[] = {"daemon", "connections", "jobs"};
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
        const json_t *c = json_object_get(fds, classes[i]);
        printf("%s %s %lld/%lld", i ? "," : "", classes[i],
               (long long)json_integer_value(json_object_get(c, "in_use")),
               (long long)json_integer_value(json_object_get(c, "reserved")));
    }
    long long per_user = (long long)json_integer_value(json_object_get(fds, "user_connections"));
    printf("; at most %lld connection%s of one user\n", per_user, plural_s(per_user));
}

int ctl_status(const struct gflowd *d)
{
    json_t *st;
    char *err = NULL;
    if (ask_status(d, &st, &err) < 0) {
        printf("Status: Not running\n");
        print_which(d);
        free(err);
        return 1;
    }
    char up[64];
    format_duration_buf(up, sizeof(up), json_integer_value(json_object_get(st, "uptime_secs")));
    json_t *c = json_object_get(st, "counts");
    printf("Status: Running\n");
    print_which(d);
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
    printf("Mode: %s\n",
           json_is_true(json_object_get(st, "system")) ? "system (all users)" : "per-user");
    /* Which backend runs the jobs, and under Slurm its partition's nodes. */
    struct strbuf be;
    strbuf_init(&be);
    backendtext(json_object_get(st, "backend"), now_wall(), true, &be);
    fputs(be.buf ? be.buf : "", stdout);
    strbuf_free(&be);
    json_t *g = json_object_get(st, "gpus");
    const char *gpu_error = json_string_value(json_object_get(g, "error"));
    bool slurm =
        strcmp("slurm", json_string_value(json_object_get(json_object_get(st, "backend"), "kind"))
                            ?: "") == 0;
    if (slurm) /* this machine's GPUs are not used: the NVML line below says so */
        ;
    else if (gpu_error)
        printf("GPUs: %s\n", gpu_error);
    else
        printf("GPUs: %lld%s%s\n", (long long)json_integer_value(json_object_get(g, "count")),
               json_is_true(json_object_get(g, "simulated")) ? " (simulated)" : "",
               json_is_true(json_object_get(g, "constrain_devices"))
                   ? ", device isolation on (cgroup v1 devices)"
                   : "");
    json_t *vis = json_object_get(g, "visible_devices");
    if (json_is_object(vis)) {
        printf("%s\n", json_string_value(json_object_get(vis, "understood")));
        const char *warn = json_string_value(json_object_get(vis, "warning"));
        if (warn)
            printf("Warning: %s\n", warn);
    }
    size_t ui;
    json_t *u;
    json_array_foreach (json_object_get(g, "unavailable"), ui, u) {
        printf("GPU %lld unavailable: %s\n",
               (long long)json_integer_value(json_object_get(u, "index")),
               json_string_value(json_object_get(u, "reason")));
    }
    json_array_foreach (json_object_get(g, "drained"), ui, u) {
        printf("GPU %lld drained: %s ('gctl gpu resume %lld' when it is fixed)\n",
               (long long)json_integer_value(json_object_get(u, "index")),
               json_string_value(json_object_get(u, "reason")),
               (long long)json_integer_value(json_object_get(u, "index")));
    }
    json_t *mg;
    json_array_foreach (json_object_get(g, "mig"), ui, mg) {
        json_t *profiles = json_object_get(mg, "profiles");
        printf("GPU %lld MIG instances:",
               (long long)json_integer_value(json_object_get(mg, "index")));
        if (!json_object_size(profiles))
            printf(" none (no job can use the GPU until some are created)");
        const char *name;
        json_t *n;
        const char *sep = " ";
        json_object_foreach (profiles, name, n) {
            printf("%s%lld x %s", sep, (long long)json_integer_value(n), name);
            sep = ", ";
        }
        printf("\n");
    }
    const char *nvml = json_string_value(json_object_get(g, "nvml"));
    if (nvml && !gpu_error) /* the error already says it */
        printf("NVML: %s\n", nvml);
    const char *id_format = json_string_value(json_object_get(g, "id_format"));
    if (id_format && !slurm)
        printf("GPU ids for jobs: %s\n", id_format);
    json_t *mem = json_object_get(st, "memory");
    if (mem)
        printf("Memory: %lld MiB, job limits (--memory) held by %s\n",
               (long long)json_integer_value(json_object_get(mem, "total_mb")),
               json_string_value(json_object_get(mem, "enforcement")));
    printf("Socket: %s\n", json_string_value(json_object_get(st, "socket")));
    printf("Data: %s\n", json_string_value(json_object_get(st, "data_dir")));
    const char *logs = json_string_value(json_object_get(st, "log_dir"));
    if (logs)
        printf("Logs: %s\n", logs);
    /* It names the job that floods the logs, and its user: shown escaped (termtext.h). */
    char *full = termtext_dup(json_string_value(json_object_get(st, "disk_full")), 0);
    if (full)
        printf("Disk full: %s\n", full);
    free(full);
    print_descriptors(json_object_get(st, "descriptors"));
    json_decref(st);
    return 0;
}

static void print_keys(const char *title, const json_t *keys)
{
    if (!json_array_size(keys))
        return;
    printf("%s:", title);
    size_t i;
    const json_t *k;
    json_array_foreach (keys, i, k)
        printf("%s %s", i ? "," : "", json_string_value(k));
    printf("\n");
}

int ctl_reload(const struct gflowd *d)
{
    client_set_socket_from(d->paths.socket_path, "gflowd's daemon.socket_path");
    struct client_response r;
    char *err = NULL;
    if (client_request("POST", "/v1/daemon/reload", "{}", 2, NULL, &r, NULL, NULL, &err) < 0) {
        client_print_error("gflowd", err);
        free(err);
        return 1;
    }
    json_t *reply = json_loadb(r.body.buf ? r.body.buf : "", r.body.len, 0, NULL);
    int status = r.status;
    client_response_free(&r);
    if (status != 200) {
        const char *msg = json_string_value(json_object_get(reply, "error"));
        fprintf(stderr, "gflowd: %s\n", msg ? msg : "the daemon refused the reload");
        json_decref(reply);
        return 1;
    }
    const char *file = json_string_value(json_object_get(reply, "config"));
    printf("Reloaded the configuration%s%s; jobs were not touched.\n", file ? " from " : "",
           file ? file : "");
    print_which(d);
    const json_t *applied = json_object_get(reply, "applied");
    const json_t *restart = json_object_get(reply, "restart_needed");
    if (!json_array_size(applied) && !json_array_size(restart))
        printf("Nothing changed.\n");
    print_keys("Applied now", applied);
    print_keys("Need 'gflowd restart'", restart);
    const char *key;
    json_t *why;
    json_object_foreach (json_object_get(reply, "kept"), key, why)
        printf("Kept: %s: %s\n", key, json_string_value(why));
    json_decref(reply);
    return 0;
}
