/* gpu_ids: daemon.gpu_id_format, whether jobs get their GPUs in CUDA_VISIBLE_DEVICES as
 * NVML indices or as UUIDs, and why (gflowd status). "index" and "uuid" say it. "auto"
 * gives indices unless an index would be wrong:
 *   - daemon.constrain_devices: behind a device cgroup CUDA numbers the GPUs it can open
 *     from 0, so GPU 3 would be CUDA's 0 (Slurm's ConstrainDevices has local indices
 *     for the same reason);
 *   - gflowd's own CUDA_VISIBLE_DEVICES names GPUs by UUID (a container given some of
 *     the host's GPUs);
 *   - CUDA's view differs from NVML's: cudacheck.c asks the CUDA driver, in a child,
 *     which GPUs it numbers 0, 1, ... under CUDA_DEVICE_ORDER=PCI_BUS_ID (as jobs get
 *     it); each GPU a job may get must be CUDA's device of the same number. Until it
 *     answers, and when it cannot (it crashed or hung), jobs get UUIDs, which are right
 *     whatever the numbering; with no CUDA driver at all, indices (nothing to check).
 * A container alone is no reason: where gflowd and its jobs share a view, NVML's index
 * under PCI_BUS_ID order is CUDA's. MIG instances are always UUIDs (jobenv.c). */
#include "gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cudacheck.h"
#include "files.h"
#include "log.h"
#include "util.h"

/* Whether gflowd runs in a container, the way systemd-detect-virt tells: the files
 * docker and podman leave, systemd's own note, `container=` in pid 1's environment.
 * Returns what gave it away, or NULL. Only said in the reason: it decides nothing. */
static const char *container_marker(void)
{
    static char found[128];
    if (access("/.dockerenv", F_OK) == 0)
        return "/.dockerenv";
    if (access("/run/.containerenv", F_OK) == 0)
        return "/run/.containerenv";
    char *note = read_file("/run/systemd/container", NULL);
    if (note) {
        note[strcspn(note, "\n")] = '\0';
        snprintf(found, sizeof(found), "/run/systemd/container says %s", note);
        free(note);
        return found;
    }
    size_t len = 0;
    char *env = read_file("/proc/1/environ", &len);
    for (size_t i = 0; env && i < len; i += strlen(env + i) + 1) {
        if (strncmp(env + i, "container=", 10) == 0 && env[i + 10]) {
            snprintf(found, sizeof(found), "pid 1 has %.100s", env + i);
            free(env);
            return found;
        }
    }
    free(env);
    return NULL;
}

/* Whether the daemon's own CUDA_VISIBLE_DEVICES names a device by UUID. */
static bool visible_by_uuid(const char *spec)
{
    for (const char *p = spec; p && *p; p++) {
        while (*p == ' ' || *p == ',')
            p++;
        if (strncmp(p, "GPU-", 4) == 0 || strncmp(p, "MIG-", 4) == 0)
            return true;
        p += strcspn(p, ",");
        if (!*p)
            break;
    }
    return false;
}

static void set_format(struct gpus *g, bool uuid, char *why)
{
    if (g->id_format_why && strcmp(g->id_format_why, why) != 0)
        log_info("GPU ids for jobs: %s", why);
    g->uuid_ids = uuid;
    free(g->id_format_why);
    g->id_format_why = why;
}

void gpu_ids_start(struct gpus *g, const char *format, const char *container, bool constrain)
{
    g->cuda_view.outcome = CUDACHECK_RUNNING;
    if (format && strcmp(format, "index") == 0) {
        set_format(g, false, xstrdup("index (daemon.gpu_id_format)"));
    } else if (format && strcmp(format, "uuid") == 0) {
        set_format(g, true, xstrdup("uuid (daemon.gpu_id_format)"));
    } else if (constrain) {
        set_format(g, true,
                   xstrdup("uuid (auto: daemon.constrain_devices: CUDA numbers the GPUs it can "
                           "open from 0)"));
    } else if (visible_by_uuid(g->visible_spec)) {
        set_format(g, true,
                   xstrdup("uuid (auto: the daemon's CUDA_VISIBLE_DEVICES names GPUs by UUID)"));
    } else {
        g->cuda_wanted = true;
        const char *marker = NULL;
        if (container && strcmp(container, "yes") == 0)
            marker = "daemon.container = \"yes\"";
        else if (!container || strcmp(container, "no") != 0)
            marker = container_marker();
        if (marker)
            g->container_note = xasprintf("; gflowd runs in a container: %s", marker);
        set_format(g, true, xstrdup("uuid (auto: checking CUDA's view of the GPUs)"));
    }
}

/* A UUID's 16 bytes: the first 32 hex digits after its prefix ("GPU-"), as the driver
 * prints them. */
static void uuid_bytes(const char *uuid, char out[16])
{
    memset(out, 0, 16);
    const char *s = strchr(uuid, '-');
    for (int i = 0; s && *s && i < 32; s++) {
        int v = *s >= '0' && *s <= '9'   ? *s - '0'
                : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
                : *s >= 'A' && *s <= 'F' ? *s - 'A' + 10
                                         : -1;
        if (v >= 0) {
            out[i / 2] = (char)(out[i / 2] | (i % 2 ? v : v << 4));
            i++;
        }
    }
}

static void format_uuid(const char b[16], char *out, size_t len)
{
    const unsigned char *u = (const unsigned char *)b;
    snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

/* Compares CUDA's numbering with NVML's for the GPUs a job may get (those in the
 * daemon's CUDA_VISIBLE_DEVICES; a GPU in MIG mode gives out instances, by UUID):
 * NULL when they agree (*n: how many were compared), else where they first differ. */
static char *views_differ(const struct gpus *g, const struct cudacheck_view *v, int *n)
{
    const struct gpu_set *set = &g->cur;
    *n = 0;
    for (size_t i = 0; i < set->n_gpus && i < GPUINFO_MAX_GPUS; i++) {
        const struct gpu_info *gi = &set->gpus[i];
        if (!(g->visible & (1ULL << i)) || gi->mig_enabled)
            continue;
        char b[16], cuda[64];
        uuid_bytes(gi->uuid, b);
        if ((int)i >= v->count)
            return xasprintf("CUDA sees %d GPU%s, NVML %zu: NVML's GPU %zu (%s) has no CUDA "
                             "number %zu%s%s%s",
                             v->count, v->count == 1 ? "" : "s", set->n_gpus, i, gi->uuid, i,
                             v->error ? " (" : "", v->error ? v->error : "", v->error ? ")" : "");
        if (memcmp(b, v->uuids[i], 16) != 0) {
            format_uuid(v->uuids[i], cuda, sizeof(cuda));
            char *more = v->count != (int)set->n_gpus
                             ? xasprintf("; CUDA sees %d GPU%s, NVML %zu", v->count,
                                         v->count == 1 ? "" : "s", set->n_gpus)
                             : xstrdup("");
            char *r =
                xasprintf("CUDA's GPU %zu is %s, NVML's GPU %zu %s%s", i, cuda, i, gi->uuid, more);
            free(more);
            return r;
        }
        (*n)++;
    }
    return NULL;
}

void gpu_ids_reread(struct gpus *g)
{
    if (!g->cuda_wanted)
        return;
    const struct cudacheck_view *v = &g->cuda_view;
    const char *note = g->container_note ? g->container_note : "";
    switch (v->outcome) {
    case CUDACHECK_RUNNING:
        set_format(g, true, xstrdup("uuid (auto: checking CUDA's view of the GPUs)"));
        return;
    case CUDACHECK_ABSENT:
        set_format(g, false, xasprintf("index (auto: CUDA driver not found, not checked%s)", note));
        return;
    case CUDACHECK_FAILED:
        set_format(g, true,
                   xasprintf("uuid (auto: CUDA's view could not be checked: %s)",
                             v->error ? v->error : "unknown"));
        return;
    case CUDACHECK_SEEN:
        break;
    }
    int n = 0;
    char *diff = views_differ(g, v, &n);
    if (diff)
        set_format(g, true, xasprintf("uuid (auto: NVML and CUDA disagree: %s)", diff));
    else
        set_format(g, false,
                   xasprintf("index (auto: NVML and CUDA agree on %d GPU%s%s)", n,
                             n == 1 ? "" : "s", note));
    free(diff);
}

static void view_free(struct cudacheck_view *v)
{
    free(v->uuids);
    free(v->error);
    memset(v, 0, sizeof(*v));
}

static void cuda_done(void *arg, const struct cudacheck_view *view)
{
    struct gpus *g = arg;
    g->cuda = NULL;
    view_free(&g->cuda_view);
    g->cuda_view = *view;
    bool have = view->uuids && view->count > 0;
    g->cuda_view.uuids = have ? xmalloc((size_t)view->count * 16) : NULL;
    if (have)
        memcpy(g->cuda_view.uuids, view->uuids, (size_t)view->count * 16);
    g->cuda_view.error = view->error ? xstrdup(view->error) : NULL;
    g->cuda_news = true;
    gpu_ids_reread(g);
}

void gpu_ids_nvml_ready(struct gpus *g)
{
    if (!g->cuda_wanted)
        return;
    cudacheck_cancel(g->cuda); /* a check of the driver before: its answer is stale */
    g->cuda = NULL;
    view_free(&g->cuda_view);
    g->cuda_view.outcome = CUDACHECK_RUNNING;
    gpu_ids_reread(g);
    g->cuda_started = now_mono();
    g->cuda = cudacheck_start(g->cur.simulated, cuda_done, g);
}

bool gpu_ids_holding(const struct gpus *g)
{
    return g->cuda && now_mono() - g->cuda_started < CUDACHECK_HOLD;
}

void gpu_ids_wait(struct gpus *g, double secs)
{
    if (g->cuda && cudacheck_wait(g->cuda, secs))
        g->cuda = NULL; /* cuda_done ran */
}

void gpu_ids_stop(struct gpus *g)
{
    cudacheck_cancel(g->cuda);
    g->cuda = NULL;
    view_free(&g->cuda_view);
    free(g->container_note);
    free(g->id_format_why);
}

bool gpu_uuid_ids(const struct gpus *g)
{
    return g->uuid_ids;
}

const char *gpu_id_format(const struct gpus *g)
{
    return g->id_format_why;
}
