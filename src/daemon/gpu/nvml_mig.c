/* nvml_mig: MIG instances through NVML (see nvml_mig.h).
 *
 * A MIG device is reached from its parent by index 0..max-1 (max from
 * nvmlDeviceGetMaxMigDeviceCount); an index without a device answers NOT_FOUND, and the
 * indices may have holes once instances were destroyed, so every index is tried. The
 * profile is not asked of NVML (that needs the GPU-instance API and root on some
 * drivers): the device name carries it ("NVIDIA H100 80GB HBM3 MIG 1g.10gb"). The
 * symbols are looked up on each read, a few hash lookups per GPU and poll, so that the
 * loader's struct needs nothing for them. */
#include "nvml_mig.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

typedef nvmlReturn_t (*mig_mode_fn)(nvmlDevice_t, unsigned int *, unsigned int *);
typedef nvmlReturn_t (*mig_count_fn)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*mig_handle_fn)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*mig_id_fn)(nvmlDevice_t, unsigned int *);

struct mig_syms {
    mig_mode_fn get_mode;
    mig_count_fn get_max;
    mig_handle_fn get_handle;
    mig_id_fn get_gi, get_ci; /* optional */
};

#define MIG_FN(type, ptr) ((type)(uintptr_t)(ptr))

static bool mig_resolve(struct nvml *n, struct mig_syms *m)
{
    void *lib = nvml_library(n);
    m->get_mode = MIG_FN(mig_mode_fn, dlsym(lib, "nvmlDeviceGetMigMode"));
    m->get_max = MIG_FN(mig_count_fn, dlsym(lib, "nvmlDeviceGetMaxMigDeviceCount"));
    m->get_handle = MIG_FN(mig_handle_fn, dlsym(lib, "nvmlDeviceGetMigDeviceHandleByIndex"));
    m->get_gi = MIG_FN(mig_id_fn, dlsym(lib, "nvmlDeviceGetGpuInstanceId"));
    m->get_ci = MIG_FN(mig_id_fn, dlsym(lib, "nvmlDeviceGetComputeInstanceId"));
    return m->get_mode && m->get_max && m->get_handle;
}

/* The GPU fell off the bus while its MIG devices were read. */
static void mig_lost(struct gpu_info *g, const char *fn)
{
    g->lost = true;
    if (!g->unavailable[0])
        snprintf(g->unavailable, sizeof(g->unavailable), "NVML: GPU is lost (%s)", fn);
}

/* Appends one instance; false when the array is full. */
static bool mig_add(struct gpu_mig **migs, size_t *n_migs, const struct gpu_mig *mig)
{
    if (*n_migs >= GPUINFO_MAX_MIGS)
        return false;
    *migs = xrealloc(*migs, (*n_migs + 1) * sizeof(**migs));
    (*migs)[(*n_migs)++] = *mig;
    return true;
}

/* Reads the instances of the MIG-enabled GPU g (handle h). */
static void mig_read_gpu(struct nvml *n, const struct mig_syms *m, nvmlDevice_t h,
                         struct gpu_info *g, struct gpu_mig **migs, size_t *n_migs)
{
    unsigned int max = 0;
    nvml_note_call("nvmlDeviceGetMaxMigDeviceCount");
    nvmlReturn_t rc = m->get_max(h, &max);
    if (rc != NVML_SUCCESS) {
        if (rc == NVML_ERROR_GPU_IS_LOST)
            mig_lost(g, "nvmlDeviceGetMaxMigDeviceCount");
        return;
    }
    for (unsigned int k = 0; k < max; k++) {
        nvmlDevice_t mh;
        nvml_note_call("nvmlDeviceGetMigDeviceHandleByIndex");
        rc = m->get_handle(h, k, &mh);
        if (rc == NVML_ERROR_GPU_IS_LOST) {
            mig_lost(g, "nvmlDeviceGetMigDeviceHandleByIndex");
            return;
        }
        if (rc != NVML_SUCCESS) /* NOT_FOUND: no device at this index */
            continue;
        struct gpu_info scratch;
        memset(&scratch, 0, sizeof(scratch));
        rc = nvml_read_instance(n, mh, &scratch);
        if (rc != NVML_SUCCESS) {
            free(scratch.procs);
            if (rc == NVML_ERROR_GPU_IS_LOST) {
                mig_lost(g, "nvmlDeviceGetUUID");
                return;
            }
            log_warn("GPU %d: MIG device %u unreadable: %s", g->index, k, nvml_error_text(n, rc));
            continue;
        }
        struct gpu_mig mig;
        memset(&mig, 0, sizeof(mig));
        mig.parent = g->index;
        memcpy(mig.uuid, scratch.uuid, sizeof(mig.uuid));
        memcpy(mig.name, scratch.name, sizeof(mig.name));
        gpu_mig_profile_from_name(mig.name, mig.profile, sizeof(mig.profile));
        mig.memory_total_mib = scratch.memory_total_mib;
        mig.memory_used_mib = scratch.memory_used_mib;
        mig.procs = scratch.procs;
        mig.n_procs = scratch.n_procs;
        memcpy(mig.unavailable, scratch.unavailable, sizeof(mig.unavailable));
        unsigned int id;
        mig.gi_id = m->get_gi && m->get_gi(mh, &id) == NVML_SUCCESS ? (int)id : -1;
        mig.ci_id = m->get_ci && m->get_ci(mh, &id) == NVML_SUCCESS ? (int)id : -1;
        if (!mig_add(migs, n_migs, &mig)) {
            free(mig.procs);
            return;
        }
    }
}

void nvml_mig_read_gpu(struct nvml *n, nvmlDevice_t h, struct gpu_info *g, struct gpu_mig **migs,
                       size_t *n_migs)
{
    struct mig_syms m;
    if (!mig_resolve(n, &m))
        return;
    unsigned int cur = 0, pending = 0;
    nvml_note_call("nvmlDeviceGetMigMode");
    nvmlReturn_t rc = m.get_mode(h, &cur, &pending);
    if (rc == NVML_ERROR_GPU_IS_LOST)
        mig_lost(g, "nvmlDeviceGetMigMode");
    /* NOT_SUPPORTED: a board without MIG. */
    if (rc != NVML_SUCCESS || cur != NVML_DEVICE_MIG_ENABLE)
        return;
    g->mig_enabled = true;
    mig_read_gpu(n, &m, h, g, migs, n_migs);
}
