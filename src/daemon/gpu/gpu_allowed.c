/* gpu_allowed: which GPUs may be used (gpu.h): the allowed set (flag > runtime setting
 * > config > all; gctl set-gpus, saved in the database and put back when its commit is
 * lost), within the daemon's own CUDA_VISIBLE_DEVICES as CUDA reads it. */
#include "gpu_internal.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store/store.h"
#include "util.h"

#define SETTING_ALLOWED "gpus.allowed"

/* ---- GPU lists ---- */

/* "all", or indices and ranges "0,2-3" (below 64) into a mask. */
static int parse_gpu_list(const char *s, uint64_t *mask, char **err)
{
    if (strcmp(s, "all") == 0) {
        *mask = ALL_GPUS;
        return 0;
    }
    uint64_t m = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0)
            goto bad;
        if (*end == '-') {
            p = end + 1;
            b = strtol(p, &end, 10);
            if (end == p || b < a)
                goto bad;
        }
        if (b >= GPUINFO_MAX_GPUS)
            goto bad;
        for (long i = a; i <= b; i++)
            m |= 1ULL << i;
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            goto bad;
        p = end;
    }
    if (!m)
        goto bad;
    *mask = m;
    return 0;
bad:
    *err = xasprintf("invalid GPU list '%s': use indices and ranges like 0,2-3, or all", s);
    return -1;
}

/* CUDA_VISIBLE_DEVICES of the daemon (a container's GPUs), read as CUDA reads it
 * (cudavis.c), again whenever the GPUs are read; what it means is logged when it changes
 * and shown by `gflowd status`. */
void gpu_resolve_visible(struct gpus *g)
{
    if (!g->visible_spec)
        return;
    struct cudavis v;
    cudavis_parse(g->visible_spec, &g->cur, getenv("CUDA_DEVICE_ORDER"), &v);
    if (!g->visible_read.understood || strcmp(v.understood, g->visible_read.understood) != 0) {
        log_info("%s", v.understood);
        if (v.warning)
            log_warn("%s", v.warning);
    }
    cudavis_free(&g->visible_read);
    g->visible_read = v;
    g->visible = v.mask;
}

int gpu_load_allowed(struct gpus *g, const char *flag_gpus, const char *config_gpus, char **err)
{
    char *saved = NULL;
    if (flag_gpus) {
        /* A --gpus given at start wins over an earlier runtime setting. */
        if (parse_gpu_list(flag_gpus, &g->allowed, err) < 0)
            return -1;
        g->allowed_source = "flag";
        store_begin(g->store);
        store_set_setting(g->store, SETTING_ALLOWED, NULL);
        return 0;
    }
    if (store_get_setting(g->store, SETTING_ALLOWED, &saved) == 0 && saved) {
        int r = parse_gpu_list(saved, &g->allowed, err);
        free(saved);
        g->allowed_source = "runtime";
        return r;
    }
    if (config_gpus && strcmp(config_gpus, "all") != 0) {
        if (parse_gpu_list(config_gpus, &g->allowed, err) < 0)
            return -1;
        g->allowed_source = "config";
    }
    return 0;
}

static uint64_t present_mask(const struct gpus *g)
{
    return g->cur.n_gpus >= 64 ? ALL_GPUS : (1ULL << g->cur.n_gpus) - 1;
}

uint64_t gpu_allowed(const struct gpus *g)
{
    return g->allowed & g->visible & present_mask(g);
}

uint64_t gpu_visible(const struct gpus *g)
{
    return g->visible & present_mask(g);
}

/* ---- runtime controls ---- */

json_t *gpu_allowed_json(const struct gpus *g)
{
    json_t *list = json_array();
    for (size_t i = 0; i < g->cur.n_gpus; i++)
        if (gpu_allowed(g) & (1ULL << i))
            json_array_append_new(list, json_integer((json_int_t)i));
    return json_pack("{s:o, s:s}", "allowed", list, "source", g->allowed_source);
}

char *gpu_missing_list(const struct gpus *g, uint64_t mask)
{
    if (mask == ALL_GPUS || !(mask & ~present_mask(g)))
        return NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    for (int i = 0; i < GPUINFO_MAX_GPUS; i++)
        if (mask & ~present_mask(g) & (1ULL << i))
            strbuf_addf(&sb, "%s%d", sb.len ? "," : "", i);
    return strbuf_detach(&sb);
}

/* "it has 4: 0-3", or "it has none". */
static char *present_text(const struct gpus *g)
{
    if (!g->cur.n_gpus)
        return xstrdup("it has none");
    if (g->cur.n_gpus == 1)
        return xstrdup("it has 1: GPU 0");
    return xasprintf("it has %zu: 0-%zu", g->cur.n_gpus, g->cur.n_gpus - 1);
}

/* "no GPU 7 on this machine (it has 4: 0-3)", or NULL if every GPU of mask exists. */
static char *missing_error(const struct gpus *g, uint64_t mask)
{
    char *missing = gpu_missing_list(g, mask);
    if (!missing)
        return NULL;
    char *has = present_text(g);
    char *e = xasprintf("no GPU %s on this machine (%s)", missing, has);
    free(has);
    free(missing);
    return e;
}

int gpu_check_flag(const struct gpus *g, char **err)
{
    if (strcmp(g->allowed_source, "flag") != 0 || !g->nvml_open)
        return 0; /* NVML not ready yet: the GPUs are not known */
    char *e = missing_error(g, g->allowed);
    if (!e)
        return 0;
    *err = xasprintf("--gpus: %s; name only GPUs that exist ('ginfo' lists them)", e);
    free(e);
    return -1;
}

int gpu_reload_config(struct gpus *g, const char *spec, char **err)
{
    if (!strcmp(g->allowed_source, "flag") || !strcmp(g->allowed_source, "runtime"))
        return 0;
    uint64_t m;
    if (parse_gpu_list(spec ? spec : "all", &m, err) < 0)
        return -1;
    g->allowed = m;
    g->allowed_source = m == ALL_GPUS ? "all" : "config";
    gpu_settings_committed(g);
    return 1;
}

const char *gpu_allowed_reason(const struct gpus *g)
{
    if (!strcmp(g->allowed_source, "flag"))
        return "not in the allowed GPUs (gflowd --gpus)";
    if (!strcmp(g->allowed_source, "config"))
        return "not in the allowed GPUs (daemon.gpus in the config)";
    return "not in the allowed GPUs (gctl set-gpus)";
}

int gpu_set_allowed(struct gpus *g, const char *spec, char **err)
{
    uint64_t m;
    if (parse_gpu_list(spec, &m, err) < 0)
        return -1;
    *err = missing_error(g, m);
    if (*err)
        return -1;
    if (m != ALL_GPUS && !(m & gpu_visible(g))) {
        *err = xasprintf("GPUs %s are outside the daemon's CUDA_VISIBLE_DEVICES (%s): no job "
                         "could use them",
                         spec, g->visible_spec ? g->visible_spec : "");
        return -1;
    }
    if (store_begin(g->store) < 0 ||
        store_set_setting(g->store, SETTING_ALLOWED, m == ALL_GPUS ? NULL : spec) < 0) {
        *err = xasprintf("cannot store the setting: %s", store_error(g->store));
        return -1;
    }
    g->allowed = m;
    g->allowed_source = m == ALL_GPUS ? "all" : "runtime";
    return 0;
}

void gpu_settings_committed(struct gpus *g)
{
    g->committed_allowed = g->allowed;
    g->committed_source = g->allowed_source;
}

void gpu_settings_undo(struct gpus *g)
{
    g->allowed = g->committed_allowed;
    g->allowed_source = g->committed_source;
}

const char *gpu_visible_spec(const struct gpus *g)
{
    return g->visible_spec;
}

const struct cudavis *gpu_visible_read(const struct gpus *g)
{
    return g->visible_read.understood ? &g->visible_read : NULL;
}
