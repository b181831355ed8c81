/* config_file: the configuration file and environment of this process (see
 * config_file.h). */
#include "config_file.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "util.h"

extern char **environ;

/* When no path is given: the system file for root (the system daemon), else the user's. */
int config_load_file(struct gflow_config *c, const char *path, bool must_exist, char **err)
{
    char *owned = path ? NULL : config_default_path(geteuid() == 0);
    const char *file = path ? path : owned;
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
    const char *home = getenv("HOME");
    if (!home || !*home) {
        struct passwd *pw = getpwuid(getuid());
        home = pw && pw->pw_dir ? pw->pw_dir : "/";
    }
    return xasprintf("%s/.config/gflow/gflow.toml", home);
}
