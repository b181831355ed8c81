/* startopts: the options a daemon was started with (see startopts.h). */
#include "startopts.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "files.h"
#include "log.h"
#include "util.h"

#define STARTOPTS_FILE "gflowd.options.json"

static char *startopts_path(const char *data_dir)
{
    return xasprintf("%s/" STARTOPTS_FILE, data_dir);
}

static void startopts_write(const char *data_dir, json_t *o)
{
    char *path = startopts_path(data_dir);
    char *text = json_dumps(o, JSON_SORT_KEYS | JSON_INDENT(2));
    if (!text || write_file_atomic(path, text, strlen(text), 0600) < 0)
        log_warn("cannot write %s: %s ('gflowd restart' will need the start options again)", path,
                 strerror(errno));
    free(text);
    free(path);
}

/* A fixture file is kept as an absolute path: a restart may run elsewhere. */
static json_t *simulate_value(const char *s)
{
    char buf[PATH_MAX];
    if (strspn(s, "0123456789") != strlen(s) && realpath(s, buf))
        return json_string(buf);
    return json_string(s);
}

void startopts_save(const struct gflowd *d, const char *simulate_gpus, const char *flag_gpus)
{
    json_t *settings = json_object();
    for (size_t i = 0; i < d->n_flags; i++)
        json_object_set_new(settings, d->flag_keys[i], json_string(d->flag_values[i]));
    json_t *top = json_pack("{s:o}", "settings", settings);
    if (simulate_gpus)
        json_object_set_new(top, "simulate_gpus", simulate_value(simulate_gpus));
    if (flag_gpus)
        json_object_set_new(top, "gpus", json_string(flag_gpus));
    startopts_write(d->paths.data_dir, top);
    json_decref(top);
}

json_t *startopts_load(const char *data_dir)
{
    char *path = startopts_path(data_dir);
    json_t *o = json_load_file(path, 0, NULL);
    free(path);
    if (o && !json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void startopts_forget_gpus(const char *data_dir)
{
    json_t *o = startopts_load(data_dir);
    if (!o || !json_object_get(o, "gpus")) {
        json_decref(o);
        return;
    }
    json_object_del(o, "gpus");
    startopts_write(data_dir, o);
    json_decref(o);
}
