/* service: gflowd's systemd unit, written, removed and looked at (see service.h). */
#include "service.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "files.h"
#include "gflow_build.h"
#include "lockfile.h"
#include "paths.h"
#include "util.h"

extern char **environ;

#define UNIT_NAME "gflowd.service"

char *service_unit_text(bool system, const char *exec_start)
{
    return xasprintf(
        "# gflowd as a systemd service, written by 'gflowd service install' (gflow %s);\n"
        "# 'gflowd service uninstall' removes it. See gflowd(1) and docs/operations.md.\n"
        "[Unit]\n"
        "Description=gflow GPU job scheduler (%s)\n"
        "Documentation=man:gflowd(1) man:gflow(7)\n"
        "%s"
        "\n"
        "[Service]\n"
        "# Ready (sd_notify READY=1) once the socket answers.\n"
        "Type=notify\n"
        "ExecStart=%s\n"
        "ExecReload=/bin/kill -HUP $MAINPID\n"
        "# Only gflowd is stopped: running jobs go on and the next gflowd finds them again.\n"
        "KillMode=process\n"
        "# The service's cgroup is gflowd's: on cgroup v2 it moves into <cgroup>/gflowd\n"
        "# and makes one cgroup per job beside it, with the job's memory.max.\n"
        "Delegate=yes\n"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        "TimeoutStopSec=30\n"
        "\n"
        "[Install]\n"
        "WantedBy=%s\n",
        GFLOW_VERSION, system ? "system daemon" : "per-user daemon",
        /* Users may come from LDAP/SSSD: their lookups work once it is up. A user
         * manager has no such target (its user is known already). */
        system ? "After=local-fs.target network.target nss-user-lookup.target\n"
                 "Wants=nss-user-lookup.target\n"
               : "After=local-fs.target network.target\n",
        exec_start, system ? "multi-user.target" : "default.target");
}

/* One word of ExecStart as systemd reads it: quoted when it holds anything but plain
 * characters; '%' and '$' doubled (systemd expands specifiers and variables). */
static void add_exec_word(struct strbuf *sb, const char *w)
{
    bool plain = *w != '\0';
    for (const char *p = w; *p; p++)
        plain &= strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,@+-",
                        *p) != NULL;
    if (sb->len)
        strbuf_addc(sb, ' ');
    if (!plain)
        strbuf_addc(sb, '"');
    for (const char *p = w; *p; p++) {
        if (*p == '"' || *p == '\\')
            strbuf_addc(sb, '\\');
        if (*p == '%' || *p == '$')
            strbuf_addc(sb, *p);
        strbuf_addc(sb, *p);
    }
    if (!plain)
        strbuf_addc(sb, '"');
}

/* The user's systemd unit directory: $XDG_CONFIG_HOME/systemd/user, else
 * ~/.config/systemd/user. */
static char *user_unit_dir(void)
{
    const char *x = getenv("XDG_CONFIG_HOME");
    if (x && *x == '/')
        return xasprintf("%s/systemd/user", x);
    const char *home = getenv("HOME");
    struct passwd *pw = (home && *home == '/') ? NULL : getpwuid(geteuid());
    return xasprintf("%s/.config/systemd/user", pw ? pw->pw_dir : home ? home : "/");
}

static char *unit_path(const struct service_request *r)
{
    char *dir = r->system ? xstrdup("/etc/systemd/system") : user_unit_dir();
    char *path = xasprintf("%s%s/" UNIT_NAME, r->root ? r->root : "", dir);
    free(dir);
    return path;
}

/* Whether systemd runs as the init system (sd_booted(3)): under --root DIR, whether it
 * runs there (DIR/run/systemd/system). */
static bool systemd_running(const struct service_request *r)
{
    char *dir = xasprintf("%s/run/systemd/system", r->root ? r->root : "");
    struct stat st;
    bool yes = lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    free(dir);
    return yes;
}

/* "systemctl [--user] VERB [--now] [gflowd.service]": argv filled (room for 6), and the
 * line as a user would type it returned. */
static char *systemctl_words(const struct service_request *r, const char *verb, bool now, bool unit,
                             const char **argv)
{
    size_t n = 0;
    argv[n++] = "systemctl";
    if (!r->system)
        argv[n++] = "--user";
    argv[n++] = verb;
    if (now)
        argv[n++] = "--now";
    if (unit)
        argv[n++] = UNIT_NAME;
    argv[n] = NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n; i++)
        strbuf_addf(&sb, "%s%s", i ? " " : "", argv[i]);
    return strbuf_detach(&sb);
}

/* Runs systemctl (its output goes to ours; with quiet, its stderr goes nowhere and its
 * stdout into out, one line). Its exit status, or 127 when it cannot be run. */
static int systemctl(const struct service_request *r, const char *verb, bool now, bool unit,
                     char *out, size_t out_size)
{
    const char *argv[8];
    free(systemctl_words(r, verb, now, unit, argv));
    int pipefd[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out) {
        if (pipe2(pipefd, O_CLOEXEC) < 0)
            return 127;
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    }
    fflush(stdout);
    pid_t pid;
    int rc = posix_spawnp(&pid, "systemctl", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (out) {
        close(pipefd[1]);
        size_t len = 0;
        ssize_t got;
        while (len + 1 < out_size && (got = read(pipefd[0], out + len, out_size - 1 - len)) > 0)
            len += (size_t)got;
        out[len] = '\0';
        out[strcspn(out, "\n")] = '\0';
        close(pipefd[0]);
    }
    if (rc != 0)
        return 127;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Runs the systemctl commands in turn and says so; stops at the first that fails.
 * 0, or 1 after saying which failed. */
static int systemctl_steps(const struct service_request *r, const char *const *verbs)
{
    for (size_t i = 0; verbs[i]; i++) {
        bool now = strcmp(verbs[i], "daemon-reload") != 0;
        const char *argv[8];
        char *line = systemctl_words(r, verbs[i], now, now, argv);
        printf("Running: %s\n", line);
        int rc = systemctl(r, verbs[i], now, now, NULL, 0);
        if (rc != 0) {
            fprintf(stderr, "gflowd: '%s' failed (%s %d); see its message above\n", line,
                    rc == 127 ? "cannot run it:" : "exit status", rc);
            free(line);
            return 1;
        }
        free(line);
    }
    return 0;
}

/* Says how to do by hand what systemctl_steps would have done. */
static void tell_steps(const struct service_request *r, const char *const *verbs)
{
    for (size_t i = 0; verbs[i]; i++) {
        bool now = strcmp(verbs[i], "daemon-reload") != 0;
        const char *argv[8];
        char *line = systemctl_words(r, verbs[i], now, now, argv);
        printf("  %s\n", line);
        free(line);
    }
}

/* ExecStart: this gflowd (the file it runs from), --system or --user, the options the
 * install was given, then "run". */
static char *exec_start(const struct service_request *r)
{
    char *exe = paths_self_exe();
    if (!exe)
        return NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    add_exec_word(&sb, exe);
    free(exe);
    add_exec_word(&sb, r->system ? "--system" : "--user");
    for (size_t i = 0; r->daemon_args && r->daemon_args[i]; i++)
        add_exec_word(&sb, r->daemon_args[i]);
    add_exec_word(&sb, "run");
    return strbuf_detach(&sb);
}

/* A gflowd started by hand (gflowd up) holds the data directory: systemd's would not
 * start beside it. */
static void note_running_daemon(const struct service_request *r)
{
    pid_t pid;
    int64_t start;
    if (lockfile_holder(r->paths->lock_path, &pid, &start) == 1)
        printf("Note: a gflowd is running (pid %ld, data %s): if it was not started by "
               "systemd, stop it with 'gflowd%s down' before systemd starts the service.\n",
               (long)pid, r->paths->data_dir, r->system ? "" : " --user");
}

static int service_install(const struct service_request *r)
{
    char *cmd = exec_start(r);
    if (!cmd) {
        fprintf(stderr,
                "gflowd: cannot tell where gflowd itself is (/proc/self/exe: %s); "
                "is /proc mounted?\n",
                strerror(errno));
        return 1;
    }
    char *text = service_unit_text(r->system, cmd);
    char *path = unit_path(r);
    char *dir = xstrdup(path);
    *strrchr(dir, '/') = '\0';
    size_t len = 0;
    char *old = read_file(path, &len);
    bool same = old && len == strlen(text) && memcmp(old, text, len) == 0;
    int rc = 0;
    if (same) {
        printf("Unchanged: %s (already this unit)\n", path);
    } else if (mkdir_p(dir, 0755) < 0 || write_file_atomic(path, text, strlen(text), 0644) < 0) {
        fprintf(stderr, "gflowd: cannot write %s: %s%s\n", path, strerror(errno),
                r->system && geteuid() != 0 ? "; the system unit needs root (sudo)" : "");
        rc = 1;
    } else {
        printf("Wrote %s:\n%s", path, text);
    }
    if (rc == 0) {
        note_running_daemon(r);
        static const char *const steps[] = {"daemon-reload", "enable", NULL};
        if (systemd_running(r)) {
            rc = systemctl_steps(r, steps);
            if (rc == 0)
                printf("gflowd.service is enabled and started: it starts at %s and "
                       "restarts if it fails.\n",
                       r->system ? "boot" : "login");
        } else {
            printf("systemd is not running here (no %s/run/systemd/system): nothing was "
                   "enabled. Where it runs:\n",
                   r->root ? r->root : "");
            tell_steps(r, steps);
        }
        if (rc == 0 && !r->system) {
            struct passwd *pw = getpwuid(geteuid());
            printf("A user service runs only while you are logged in; to keep it running "
                   "(and start it at boot): loginctl enable-linger %s\n",
                   pw ? pw->pw_name : "$USER");
        }
    }
    free(old);
    free(dir);
    free(path);
    free(text);
    free(cmd);
    return rc;
}

static int service_uninstall(const struct service_request *r)
{
    char *path = unit_path(r);
    static const char *const stop[] = {"disable", NULL};
    static const char *const reload[] = {"daemon-reload", NULL};
    bool running = systemd_running(r);
    int rc = 0;
    struct stat st;
    bool present = lstat(path, &st) == 0;
    if (running && present) /* stops gflowd only: the jobs keep running (KillMode=process) */
        rc = systemctl_steps(r, stop);
    if (rc == 0 && present && unlink(path) < 0) {
        fprintf(stderr, "gflowd: cannot remove %s: %s\n", path, strerror(errno));
        rc = 1;
    } else if (rc == 0 && present) {
        printf("Removed %s\n", path);
        if (running)
            rc = systemctl_steps(r, reload);
        else
            printf("systemd is not running here: nothing to stop or disable.\n");
    } else if (rc == 0) {
        printf("No unit at %s: nothing to remove.\n", path);
    }
    if (rc == 0 && present)
        printf("Running jobs were left running; 'gflowd%s up' starts the daemon by hand.\n",
               r->system ? "" : " --user");
    free(path);
    return rc;
}

/* The ExecStart= line of the unit text (without the key), or NULL. */
static char *unit_exec_line(const char *text)
{
    const char *p = strstr(text, "\nExecStart=");
    if (!p)
        return NULL;
    p += strlen("\nExecStart=");
    return xstrndup(p, strcspn(p, "\n"));
}

static int service_status(const struct service_request *r)
{
    char *path = unit_path(r);
    char *text = read_file(path, NULL);
    int rc = 0;
    if (!text) {
        printf("Unit: %s (not installed; 'gflowd service install%s' writes it)\n", path,
               r->system ? "" : " --user");
        rc = 3;
    } else {
        char *line = unit_exec_line(text);
        printf("Unit: %s\nExecStart: %s\n", path, line ? line : "(none)");
        free(line);
    }
    if (!systemd_running(r)) {
        printf("systemd: not running here\n");
    } else if (text) {
        char enabled[64] = "", active[64] = "";
        systemctl(r, "is-enabled", false, true, enabled, sizeof(enabled));
        systemctl(r, "is-active", false, true, active, sizeof(active));
        printf("systemd: %s, %s\n", enabled[0] ? enabled : "unknown",
               active[0] ? active : "unknown");
        if (strcmp(active, "active") != 0)
            rc = 3;
    }
    pid_t pid;
    int64_t start;
    if (lockfile_holder(r->paths->lock_path, &pid, &start) == 1)
        printf("Daemon: running (pid %ld), socket %s\n", (long)pid, r->paths->socket_path);
    else
        printf("Daemon: not running (data %s)\n", r->paths->data_dir);
    free(text);
    free(path);
    return rc;
}

int service_run(const struct service_request *r)
{
    if (!strcmp(r->action, "install"))
        return service_install(r);
    if (!strcmp(r->action, "uninstall"))
        return service_uninstall(r);
    return service_status(r);
}
