/* nvml_acct: a held GPU's accounting readings (see nvml_acct.h). The symbols are looked
 * up at each read, as nvml_health.c does: a few lookups per held GPU and poll. */
#include "nvml_acct.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nvml_health.h"
#include "nvml_mig.h" /* nvml_library, nvml_device_handle, nvml_error_text */
#include "nvml_types.h"
#include "util.h"

typedef nvmlReturn_t (*energy_fn)(nvmlDevice_t, unsigned long long *);
typedef nvmlReturn_t (*proc_util_fn)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *,
                                     unsigned long long);

#define ACCT_FN(type, ptr) ((type)(uintptr_t)(ptr))
/* More samples than this in one answer are not read (a GPU has few processes). */
#define ACCT_MAX_SAMPLES 512

/* Each listed process's mean SM utilisation over the samples newer than *seen. */
static void read_proc_util(struct nvml *n, proc_util_fn f, nvmlDevice_t h, struct gpu_info *g,
                           unsigned long long *seen)
{
    unsigned int count = 0;
    nvml_note_call("nvmlDeviceGetProcessUtilization");
    nvmlReturn_t rc = f(h, NULL, &count, *seen);
    if (nvml_gpu_lost(n, g, rc, "nvmlDeviceGetProcessUtilization"))
        return;
    /* NOT_FOUND: no sample since *seen; others: not supported, no permission. */
    if ((rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) || count == 0)
        return;
    if (count > ACCT_MAX_SAMPLES)
        count = ACCT_MAX_SAMPLES;
    nvmlProcessUtilizationSample_t *s = xcalloc(count, sizeof(*s));
    rc = f(h, s, &count, *seen);
    if (rc == NVML_SUCCESS) {
        unsigned long long newest = *seen;
        for (size_t p = 0; p < g->n_procs; p++) {
            long sum = 0, k = 0;
            for (unsigned int i = 0; i < count; i++)
                if ((int64_t)s[i].pid == g->procs[p].pid) {
                    sum += s[i].smUtil;
                    k++;
                }
            if (k) {
                g->procs[p].sm_util_known = true;
                g->procs[p].sm_util = (int)(sum / k);
            }
        }
        for (unsigned int i = 0; i < count; i++)
            if (s[i].timeStamp > newest)
                newest = s[i].timeStamp;
        *seen = newest;
    } else {
        nvml_gpu_lost(n, g, rc, "nvmlDeviceGetProcessUtilization");
    }
    free(s);
}

void nvml_read_account(struct nvml *n, unsigned int index, struct gpu_info *g,
                       unsigned long long *seen)
{
    g->accounted = true;
    void *lib = nvml_library(n);
    nvmlDevice_t h;
    if (g->lost || nvml_device_handle(n, index, &h) != NVML_SUCCESS)
        return;
    energy_fn energy = ACCT_FN(energy_fn, dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
    if (energy) {
        unsigned long long mj = 0;
        nvml_note_call("nvmlDeviceGetTotalEnergyConsumption");
        nvmlReturn_t rc = energy(h, &mj);
        if (nvml_gpu_lost(n, g, rc, "nvmlDeviceGetTotalEnergyConsumption"))
            return;
        if (rc == NVML_SUCCESS && mj <= (unsigned long long)INT64_MAX) {
            g->energy_known = true;
            g->energy_mj = (int64_t)mj;
        }
    }
    proc_util_fn util = ACCT_FN(proc_util_fn, dlsym(lib, "nvmlDeviceGetProcessUtilization"));
    if (util && g->n_procs)
        read_proc_util(n, util, h, g, seen);
}
