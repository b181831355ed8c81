/* gpu_stray: strays (gpu.h), a running job's process on a GPU or MIG instance it was not
 * given (a hard-coded cuda:1, nvidia-smi, a library that resets CUDA_VISIBLE_DEVICES).
 * Such a process is the job's, not an outside one, but its GPU is not free: under
 * daemon.stray "block" (and "kill", until the job is gone) the GPU is unavailable to every
 * other job, shared ones too, with reason "Stray (job N)", until a read no longer lists
 * the process. "warn" only reports it. What is done to the job itself is the run room's
 * (run/stray_run.c). */
#include "gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

/* Whether the comma list uuids ("MIG-a,MIG-b") names uuid. */
static bool names_uuid(const char *uuids, const char *uuid)
{
    size_t len = strlen(uuid);
    for (const char *p = uuids; p && *p;) {
        size_t l = strcspn(p, ",");
        if (l == len && strncmp(p, uuid, len) == 0)
            return true;
        p += l;
        if (*p == ',')
            p++;
    }
    return false;
}

static void add_stray(struct gpus *g, const struct job *owner, long long pid, int gpu, int mig)
{
    if (g->n_strays == g->cap_strays) {
        g->cap_strays = g->cap_strays ? g->cap_strays * 2 : 8;
        g->strays = xrealloc(g->strays, g->cap_strays * sizeof(*g->strays));
    }
    g->strays[g->n_strays++] =
        (struct gpu_stray){.job_id = owner->id, .pid = pid, .gpu = gpu, .mig = mig};
}

/* The whole GPUs: a GPU in MIG mode is left to its instances (a driver lists an
 * instance's processes on its GPU too, and one instance's stray must not block the
 * others). */
static void find_gpu_strays(struct gpus *g, struct job *const *running, size_t n)
{
    for (size_t k = 0; k < g->cur.n_gpus && k < GPUINFO_MAX_GPUS; k++) {
        const struct gpu_info *info = &g->cur.gpus[k];
        if (info->mig_enabled)
            continue;
        for (size_t i = 0; i < info->n_procs; i++) {
            long long pid = info->procs[i].pid;
            struct job *owner = gpu_process_owner(pid, running, n);
            if (!owner || gpu_is_ignored(g, (int)k, pid))
                continue;
            uint64_t given = owner->gpu_mask | gpu_mig_parents(g, owner->mig_uuids);
            if (!(given & (1ULL << k)))
                add_stray(g, owner, pid, (int)k, -1);
        }
    }
}

static void find_mig_strays(struct gpus *g, struct job *const *running, size_t n)
{
    for (size_t k = 0; k < g->cur.n_migs && k < GPUINFO_MAX_MIGS; k++) {
        const struct gpu_mig *m = &g->cur.migs[k];
        for (size_t i = 0; i < m->n_procs; i++) {
            long long pid = m->procs[i].pid;
            struct job *owner = gpu_process_owner(pid, running, n);
            if (owner && !gpu_is_ignored(g, m->parent, pid) &&
                !names_uuid(owner->mig_uuids, m->uuid))
                add_stray(g, owner, pid, m->parent, (int)k);
        }
    }
}

/* Whether the list differs from the one before (which job, where): what the scheduler
 * and the job's record depend on. */
static bool strays_differ(const struct gpu_stray *a, size_t na, const struct gpu_stray *b,
                          size_t nb)
{
    if (na != nb)
        return true;
    for (size_t i = 0; i < na; i++)
        if (a[i].job_id != b[i].job_id || a[i].pid != b[i].pid || a[i].gpu != b[i].gpu ||
            a[i].mig != b[i].mig)
            return true;
    return false;
}

bool gpu_compute_strays(struct gpus *g, struct job *const *running, size_t n)
{
    struct gpu_stray *before = g->strays;
    size_t n_before = g->n_strays;
    g->strays = NULL;
    g->n_strays = g->cap_strays = 0;
    if (g->nvml_open) {
        find_gpu_strays(g, running, n);
        find_mig_strays(g, running, n);
    }
    bool changed = strays_differ(before, n_before, g->strays, g->n_strays);
    free(before);
    return changed;
}

void gpu_set_stray_mode(struct gpus *g, int mode)
{
    g->stray_mode = mode;
}

const struct gpu_stray *gpu_strays(const struct gpus *g, size_t *n)
{
    *n = g->n_strays;
    return g->strays;
}

bool gpu_strays_block(const struct gpus *g)
{
    return g->n_strays > 0 && g->stray_mode != CONFIG_STRAY_WARN;
}

json_t *gpu_stray_jobs_json(const struct gpus *g, int gpu, int mig)
{
    json_t *list = json_array();
    for (size_t i = 0; i < g->n_strays; i++) {
        const struct gpu_stray *s = &g->strays[i];
        if (s->gpu != gpu || s->mig != mig)
            continue;
        bool seen = false; /* a job with several processes there is named once */
        for (size_t k = 0; k < json_array_size(list) && !seen; k++)
            seen = json_integer_value(json_array_get(list, k)) == s->job_id;
        if (!seen)
            json_array_append_new(list, json_integer(s->job_id));
    }
    return list;
}

/* "Stray (job 5)", "Stray (jobs 5, 7)" for the strays there (mig: -1 for the whole GPU),
 * NULL when none blocks it. Valid until the next call. */
static const char *blocked_reason(const struct gpus *g, int gpu, int mig)
{
    if (!gpu_strays_block(g))
        return NULL;
    json_t *jobs = gpu_stray_jobs_json(g, gpu, mig);
    size_t count = json_array_size(jobs);
    char *buf = ((struct gpus *)g)->stray_text; /* scratch space, not the state */
    if (count) {
        int len = snprintf(buf, GPU_MSG_MAX, "Stray (job%s ", count > 1 ? "s" : "");
        for (size_t i = 0; i < count && len < GPU_MSG_MAX - 32; i++)
            len += snprintf(buf + len, GPU_MSG_MAX - (size_t)len, "%s%lld", i ? ", " : "",
                            (long long)json_integer_value(json_array_get(jobs, i)));
        snprintf(buf + len, GPU_MSG_MAX - (size_t)len, ")");
    }
    json_decref(jobs);
    return count ? buf : NULL;
}

const char *gpu_stray_reason(const struct gpus *g, size_t index)
{
    return index < GPUINFO_MAX_GPUS ? blocked_reason(g, (int)index, -1) : NULL;
}

const char *gpu_mig_stray_reason(const struct gpus *g, size_t k)
{
    if (k >= g->cur.n_migs)
        return NULL;
    return blocked_reason(g, g->cur.migs[k].parent, (int)k);
}
