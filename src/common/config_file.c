/* config_file: the configuration file and environment of this process (see
 * config_file.h). */
#include "config_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "paths.h"
#include "util.h"

extern char **environ;

/* The folder of file as an absolute path ("." and the current directory for a bare
 * name). Caller frees. */
static char *file_folder(const char *file)
{
    const char *slash = strrchr(file, '/');
    char *dir = slash ? xstrndup(file, slash == file ? 1 : (size_t)(slash - file)) : xstrdup(".");
    if (dir[0] == '/')
        return dir;
    char *cwd = getcwd(NULL, 0);
    char *abs = xasprintf("%s/%s", cwd ? cwd : "/", dir);
    free(cwd);
    free(dir);
    return abs;
}

/* A relative daemon.log_dir in a file means that file's folder's, wherever gflowd is
 * started from (the shims run in each job's directory: a relative path there put logs
 * into the jobs' directories). The text as written is kept for the daemon's log. */
static void resolve_log_dir(struct gflow_config *c, const char *file)
{
    free(c->log_dir_relative);
    c->log_dir_relative = NULL;
    if (!c->log_dir || c->log_dir[0] == '/')
        return;
    char *folder = file_folder(file);
    const char *rel = c->log_dir;
    while (rel[0] == '.' && rel[1] == '/')
        rel += 2;
    char *abs = *rel ? xasprintf("%s/%s", folder, rel) : xstrdup(folder);
    free(folder);
    c->log_dir_relative = c->log_dir;
    c->log_dir = abs;
}

/* When no path is given: the system file for root (the system daemon), else the user's. */
int config_load_file(struct gflow_config *c, const char *path, bool must_exist, char **err)
{
    char *owned = path ? NULL : config_default_path(geteuid() == 0);
    const char *file = path ? path : owned;
    if (!file) /* a user with no home has no user file */
        return 0;
    size_t len;
    char *text = read_file(file, &len);
    int r = 0;
    if (!text) {
        if (errno != ENOENT || must_exist) {
            *err = xasprintf("%s: %s", file, strerror(errno));
            r = -1;
        }
    } else {
        r = config_load_text(c, file, text, len, err);
        free(text);
        if (r == 0)
            resolve_log_dir(c, file);
    }
    free(owned);
    return r;
}

int config_load(struct gflow_config *c, const char *path, char **err)
{
    config_init(c);
    if (config_load_file(c, path, path != NULL, err) < 0)
        return -1;
    return config_load_env(c, environ, err);
}

char *config_default_path(bool system)
{
    if (system)
        return xstrdup(CONFIG_SYSTEM_PATH);
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg == '/') /* the XDG spec ignores relative paths */
        return xasprintf("%s/gflow/gflow.toml", xdg);
    char *home = paths_home();
    if (!home) /* no user file then (paths_home) */
        return NULL;
    char *path = xasprintf("%s/.config/gflow/gflow.toml", home);
    free(home);
    return path;
}
