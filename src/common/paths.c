/* paths: where gflow keeps its files (see paths.h). */
#include "paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passwd_file.h"
#include "util.h"

char *paths_home(void)
{
    const char *h = getenv("HOME");
    if (h && *h)
        return xstrdup(h);
    return passwd_file_home(getuid()); /* not getpwuid: passwd_file.h says why */
}

/* The home directory, or the program ends with a one-line error: nothing else tells
 * where the user's files are. */
static char *home_dir(void)
{
    char *h = paths_home();
    if (!h) {
        fprintf(stderr,
                "%s: HOME is not set and uid %u is not in /etc/passwd; set HOME (or "
                "GFLOW_SOCKET to name the daemon's socket)\n",
                program_invocation_short_name, (unsigned)getuid());
        exit(1);
    }
    return h;
}

char *paths_user_data_dir(void)
{
    const char *x = getenv("XDG_DATA_HOME");
    if (x && *x == '/')
        return xasprintf("%s/gflow", x);
    char *h = home_dir();
    char *r = xasprintf("%s/.local/share/gflow", h);
    free(h);
    return r;
}

char *paths_user_socket(void)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && *x == '/')
        return xasprintf("%s/gflow/gflowd.sock", x);
    char *d = paths_user_data_dir();
    char *r = xasprintf("%s/gflowd.sock", d);
    free(d);
    return r;
}

void paths_resolve(struct gflow_paths *p, const struct gflow_config *cfg, bool system)
{
    memset(p, 0, sizeof(*p));
    p->system = system;
    if (cfg && cfg->data_dir)
        p->data_dir = xstrdup(cfg->data_dir);
    else
        p->data_dir = system ? xstrdup(GFLOW_SYSTEM_DATA_DIR) : paths_user_data_dir();
    if (cfg && cfg->socket_path)
        p->socket_path = xstrdup(cfg->socket_path);
    else if (system)
        p->socket_path = xstrdup(GFLOW_SYSTEM_SOCKET);
    else if (cfg && cfg->data_dir && !getenv("XDG_RUNTIME_DIR"))
        p->socket_path = xasprintf("%s/gflowd.sock", p->data_dir);
    else
        p->socket_path = paths_user_socket();
    p->db_path = xasprintf("%s/gflow.db", p->data_dir);
    if (cfg && cfg->log_dir && cfg->log_dir[0] != '/') {
        /* From the environment (a file's is its folder's already, config_file.c): the
         * directory gflowd is started from, as for any path given to a command, never
         * each job's own (the shims run there). */
        char *cwd = getcwd(NULL, 0);
        p->log_dir = xasprintf("%s/%s", cwd ? cwd : "", cfg->log_dir);
        free(cwd);
    } else if (cfg && cfg->log_dir)
        p->log_dir = xstrdup(cfg->log_dir);
    else
        p->log_dir = xasprintf("%s/logs", p->data_dir);
    p->exit_dir = xasprintf("%s/exits", p->data_dir);
    p->run_dir = xasprintf("%s/run", p->data_dir);
    p->lock_path = xasprintf("%s/gflowd.lock", p->data_dir);
    p->daemon_log = xasprintf("%s/gflowd.log", p->data_dir);
}

void paths_free(struct gflow_paths *p)
{
    free(p->data_dir);
    free(p->socket_path);
    free(p->db_path);
    free(p->log_dir);
    free(p->exit_dir);
    free(p->run_dir);
    free(p->lock_path);
    free(p->daemon_log);
    memset(p, 0, sizeof(*p));
}

char *paths_self_exe(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    return xstrdup(exe);
}

/* dir/name if access(mode) allows it (to free), else NULL. */
static char *companion_in(const char *dir, const char *name, int mode)
{
    char *p = xasprintf("%s/%s", dir, name);
    if (access(p, mode) == 0)
        return p;
    free(p);
    return NULL;
}

char *paths_companion(const char *name, int mode, const char *relocated, const char *installed_dir)
{
    char *self = paths_self_exe();
    char *slash = self ? strrchr(self, '/') : NULL;
    char *found = NULL;
    if (slash) {
        *slash = '\0';
        found = companion_in(self, name, mode);
        if (!found && relocated) {
            char *dir = xasprintf("%s/%s", self, relocated);
            found = companion_in(dir, name, mode);
            free(dir);
        }
    }
    free(self);
    return found ? found : xasprintf("%s/%s", installed_dir, name);
}
