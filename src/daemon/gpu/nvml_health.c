/* nvml_health: a GPU's health through NVML (see nvml_health.h). The symbols are looked
 * up on each read (a few hash lookups per GPU and poll), as nvml_mig.c does, so that the
 * loader's struct needs nothing for them. */
#include "nvml_health.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nvml_mig.h" /* nvml_library, nvml_error_text */

typedef nvmlReturn_t (*ecc_fn)(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t,
                               unsigned long long *);
typedef nvmlReturn_t (*pages_fn)(nvmlDevice_t, nvmlPageRetirementCause_t, unsigned int *,
                                 unsigned long long *);
typedef nvmlReturn_t (*pending_fn)(nvmlDevice_t, nvmlEnableState_t *);
typedef nvmlReturn_t (*remap_fn)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *,
                                 unsigned int *);
typedef nvmlReturn_t (*reasons_fn)(nvmlDevice_t, unsigned long long *);
typedef nvmlReturn_t (*mode_fn)(nvmlDevice_t, nvmlComputeMode_t *);

#define HEALTH_FN(type, ptr) ((type)(uintptr_t)(ptr))

bool nvml_gpu_lost(struct nvml *n, struct gpu_info *g, nvmlReturn_t rc, const char *fn)
{
    if (rc != NVML_ERROR_GPU_IS_LOST)
        return false;
    g->lost = true;
    if (!g->unavailable[0])
        snprintf(g->unavailable, sizeof(g->unavailable), "NVML: %s (%s)", nvml_error_text(n, rc),
                 fn);
    return true;
}

/* Uncorrectable ECC errors of one counter; -1 when unknown. */
static nvmlReturn_t read_ecc(ecc_fn f, nvmlDevice_t h, nvmlEccCounterType_t counter, int64_t *out)
{
    unsigned long long v = 0;
    nvmlReturn_t rc = f(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter, &v);
    if (rc == NVML_SUCCESS)
        *out = (int64_t)v;
    return rc;
}

/* Retired pages of both causes; the count only (pageCount 0, no buffer). */
static nvmlReturn_t read_pages(pages_fn f, nvmlDevice_t h, int64_t *out)
{
    int64_t total = 0;
    static const nvmlPageRetirementCause_t causes[] = {
        NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
        NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR};
    for (size_t i = 0; i < 2; i++) {
        unsigned int count = 0;
        nvmlReturn_t rc = f(h, causes[i], &count, NULL);
        if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
            return rc;
        total += count;
    }
    *out = total;
    return NVML_SUCCESS;
}

void nvml_read_health(struct nvml *n, nvmlDevice_t h, struct gpu_info *g)
{
    void *lib = nvml_library(n);
    struct gpu_health *hl = &g->health;
    hl->read = true;
    hl->ecc_volatile = hl->ecc_aggregate = hl->retired_pages = -1;
    hl->remap_corr = hl->remap_unc = hl->throttle = -1;
    hl->retired_pending = hl->remap_pending = hl->remap_failed = hl->compute_mode = -1;

    ecc_fn ecc = HEALTH_FN(ecc_fn, dlsym(lib, "nvmlDeviceGetTotalEccErrors"));
    if (ecc) {
        if (nvml_gpu_lost(n, g, read_ecc(ecc, h, NVML_VOLATILE_ECC, &hl->ecc_volatile),
                          "nvmlDeviceGetTotalEccErrors") ||
            nvml_gpu_lost(n, g, read_ecc(ecc, h, NVML_AGGREGATE_ECC, &hl->ecc_aggregate),
                          "nvmlDeviceGetTotalEccErrors"))
            return;
    }
    pages_fn pages = HEALTH_FN(pages_fn, dlsym(lib, "nvmlDeviceGetRetiredPages"));
    if (pages &&
        nvml_gpu_lost(n, g, read_pages(pages, h, &hl->retired_pages), "nvmlDeviceGetRetiredPages"))
        return;
    pending_fn pending =
        HEALTH_FN(pending_fn, dlsym(lib, "nvmlDeviceGetRetiredPagesPendingStatus"));
    if (pending) {
        nvmlEnableState_t on = NVML_FEATURE_DISABLED;
        nvmlReturn_t rc = pending(h, &on);
        if (nvml_gpu_lost(n, g, rc, "nvmlDeviceGetRetiredPagesPendingStatus"))
            return;
        if (rc == NVML_SUCCESS)
            hl->retired_pending = on == NVML_FEATURE_ENABLED;
    }
    remap_fn remap = HEALTH_FN(remap_fn, dlsym(lib, "nvmlDeviceGetRemappedRows"));
    if (remap) {
        unsigned int corr = 0, unc = 0, is_pending = 0, failed = 0;
        nvmlReturn_t rc = remap(h, &corr, &unc, &is_pending, &failed);
        if (nvml_gpu_lost(n, g, rc, "nvmlDeviceGetRemappedRows"))
            return;
        if (rc == NVML_SUCCESS) {
            hl->remap_corr = corr;
            hl->remap_unc = unc;
            hl->remap_pending = is_pending != 0;
            hl->remap_failed = failed != 0;
        }
    }
    /* The r535 name first; older drivers have only the "throttle" one (same bits). */
    reasons_fn reasons =
        HEALTH_FN(reasons_fn, dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (!reasons)
        reasons = HEALTH_FN(reasons_fn, dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    if (reasons) {
        unsigned long long bits = 0;
        nvmlReturn_t rc = reasons(h, &bits);
        if (nvml_gpu_lost(n, g, rc, "nvmlDeviceGetCurrentClocksEventReasons"))
            return;
        if (rc == NVML_SUCCESS)
            hl->throttle = (int64_t)bits;
    }
    mode_fn mode = HEALTH_FN(mode_fn, dlsym(lib, "nvmlDeviceGetComputeMode"));
    if (mode) {
        nvmlComputeMode_t m = NVML_COMPUTEMODE_DEFAULT;
        nvmlReturn_t rc = mode(h, &m);
        if (nvml_gpu_lost(n, g, rc, "nvmlDeviceGetComputeMode"))
            return;
        if (rc == NVML_SUCCESS)
            hl->compute_mode = (int)m;
    }
}
