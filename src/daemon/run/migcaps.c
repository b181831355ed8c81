/* migcaps: the /dev/nvidia-caps nodes a MIG job is denied (see migcaps.h). */
#include "migcaps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "files.h"

#define MIGCAPS_MAX 128

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* Whether uuid is one of the list "MIG-a,MIG-b". */
static bool listed(const char *list, const char *uuid)
{
    size_t len = strlen(uuid);
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, uuid, n) == 0)
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* The "DeviceFileMinor: N" of an access file; -1 with *err. */
static int access_minor(const char *path, char **err)
{
    char *text = read_file(path, NULL);
    const char *at = text ? strstr(text, "DeviceFileMinor:") : NULL;
    int minor = at ? atoi(at + strlen("DeviceFileMinor:")) : -1;
    if (!text || !at || minor < 0)
        *err = xasprintf("cannot constrain the job to its MIG instance (daemon.constrain_devices): "
                         "cannot read %s: %s",
                         path, !text ? strerror(errno) : "no DeviceFileMinor");
    free(text);
    return !text || !at ? -1 : minor;
}

/* The caps nodes' major: the node's own, else /proc/devices' "nvidia-caps"; -1 with *err. */
static int caps_major(int minor, char **err)
{
    char *node =
        xasprintf("%s/nvidia-cap%d", env_or("GFLOW_NVIDIA_CAPS_DIR", "/dev/nvidia-caps"), minor);
    struct stat st;
    int major = stat(node, &st) == 0 && S_ISCHR(st.st_mode) ? (int)major(st.st_rdev) : -1;
    free(node);
    char *text = major < 0 ? read_file("/proc/devices", NULL) : NULL;
    for (char *line = text ? strtok(text, "\n") : NULL; line && major < 0;
         line = strtok(NULL, "\n")) {
        int m;
        char name[64];
        if (sscanf(line, "%d %63s", &m, name) == 2 && strcmp(name, "nvidia-caps") == 0)
            major = m;
    }
    free(text);
    if (major < 0)
        *err = xasprintf("cannot constrain the job to its MIG instance (daemon.constrain_devices): "
                         "no nvidia-caps device (node nvidia-cap%d, /proc/devices)",
                         minor);
    return major;
}

/* The GI and CI capability minors of instance m into out[0..1]; -1 with *err. */
static int instance_minors(const struct gpu_set *set, const struct gpu_mig *m, int out[2],
                           char **err)
{
    const struct gpu_info *gpu = (size_t)m->parent < set->n_gpus ? &set->gpus[m->parent] : NULL;
    if (!gpu || gpu->minor < 0 || m->gi_id < 0 || m->ci_id < 0) {
        *err = xasprintf("cannot constrain the job to its MIG instance (daemon.constrain_devices): "
                         "the GPU minor or the instance ids of %s are unknown",
                         m->uuid);
        return -1;
    }
    const char *proc = env_or("GFLOW_NVIDIA_CAPS_PROC", "/proc/driver/nvidia/capabilities");
    char *gi = xasprintf("%s/gpu%d/mig/gi%d/access", proc, gpu->minor, m->gi_id);
    char *ci = xasprintf("%s/gpu%d/mig/gi%d/ci%d/access", proc, gpu->minor, m->gi_id, m->ci_id);
    out[0] = access_minor(gi, err);
    out[1] = out[0] < 0 ? -1 : access_minor(ci, err);
    free(gi);
    free(ci);
    return out[1] < 0 ? -1 : 0;
}

int migcaps_deny(const struct gpu_set *set, const char *mine, struct strbuf *sb, char **err)
{
    uint64_t parents = 0;
    int own[MIGCAPS_MAX], n_own = 0, deny[MIGCAPS_MAX], n_deny = 0;
    for (size_t i = 0; i < set->n_migs; i++)
        if (listed(mine, set->migs[i].uuid) && set->migs[i].parent >= 0 &&
            set->migs[i].parent < GPUINFO_MAX_GPUS)
            parents |= 1ULL << set->migs[i].parent;
    for (size_t i = 0; i < set->n_migs; i++) {
        const struct gpu_mig *m = &set->migs[i];
        if (m->parent < 0 || m->parent >= GPUINFO_MAX_GPUS || !(parents & (1ULL << m->parent)))
            continue; /* another GPU: the job is denied all of it by its minor */
        int minors[2];
        if (instance_minors(set, m, minors, err) < 0)
            return -1;
        bool is_mine = listed(mine, m->uuid);
        for (int k = 0; k < 2; k++) {
            if (is_mine && n_own < MIGCAPS_MAX)
                own[n_own++] = minors[k];
            else if (!is_mine && n_deny < MIGCAPS_MAX)
                deny[n_deny++] = minors[k];
        }
    }
    int major = -1;
    for (int i = 0; i < n_deny; i++) {
        bool shared = false;
        for (int k = 0; k < n_own; k++)
            shared |= own[k] == deny[i];
        if (shared)
            continue;
        if (major < 0 && (major = caps_major(deny[i], err)) < 0)
            return -1;
        strbuf_addf(sb, "%s%d:%d", sb->len ? "," : "", major, deny[i]);
    }
    return 0;
}
