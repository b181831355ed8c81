/* nvml_sim_health: the simulator's health readings and Xid events (docs/simulator.md,
 * "Health"). Each GPU entry of the fixture may carry:
 *   "ecc_uncorrectable_volatile": N, "ecc_uncorrectable_aggregate": N  (absent or null:
 *       NOT_SUPPORTED, a board without ECC);
 *   "retired_pages": N (all reported as double-bit retirements), "retired_pages_pending":
 *       bool;
 *   "remapped_rows": {"correctable": N, "uncorrectable": N, "pending": bool, "failed": bool};
 *   "throttle_reasons": a bit mask or a list of NVML's names ("HwSlowdown", ...);
 *   "compute_mode": "Default" | "ExclusiveProcess" | "Prohibited" (or NVML's number;
 *       absent: Default, null: NOT_SUPPORTED);
 *   "xid_events": [79, ...]: Xid critical errors. An event set delivers, once each, the
 *       entries appended after the GPU was registered with it (a real GPU reports only
 *       what happens after nvmlDeviceRegisterEvents), so a test appends one while the
 *       daemon runs.
 * The legacy build exports the old names (nvmlDeviceGetCurrentClocksThrottleReasons,
 * nvmlEventSetWait); the build with only the required symbols none of this. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml_sim.h"
#include "nvml_types.h"

#ifndef NVML_SIM_NO_OPTIONAL

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, nvmlMemoryErrorType_t type,
                                         nvmlEccCounterType_t counter, unsigned long long *count);
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t dev, nvmlPageRetirementCause_t cause,
                                       unsigned int *count, unsigned long long *addresses);
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev, nvmlEnableState_t *on);
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failed);
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t dev, nvmlComputeMode_t *mode);
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types,
                                      nvmlEventSet_t set);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);

/* One GPU's integer health value: NOT_SUPPORTED when absent or null. */
static nvmlReturn_t health_int(const char *fn, nvmlDevice_t dev, const char *key, long long *v)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev(fn, dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    json_t *x = json_object_get(g, key);
    rc = json_is_integer(x) || json_is_boolean(x) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
    *v = json_is_integer(x) ? json_integer_value(x) : json_is_true(x);
    json_decref(r);
    return rc;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, nvmlMemoryErrorType_t type,
                                                    nvmlEccCounterType_t counter,
                                                    unsigned long long *count)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    long long v = 0;
    nvmlReturn_t rc = health_int("nvmlDeviceGetTotalEccErrors", dev,
                                 counter == NVML_VOLATILE_ECC ? "ecc_uncorrectable_volatile"
                                                              : "ecc_uncorrectable_aggregate",
                                 &v);
    if (rc == NVML_SUCCESS)
        *count = type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED ? (unsigned long long)v : 0;
    return rc;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t dev, nvmlPageRetirementCause_t cause,
                                                  unsigned int *count,
                                                  unsigned long long *addresses)
{
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    long long v = 0;
    nvmlReturn_t rc = health_int("nvmlDeviceGetRetiredPages", dev, "retired_pages", &v);
    if (rc != NVML_SUCCESS)
        return rc;
    unsigned int n = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? (unsigned int)v : 0;
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; addresses && i < n; i++)
        addresses[i] = 0x1000ULL * (i + 1);
    *count = n;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev,
                                                               nvmlEnableState_t *on)
{
    if (!on)
        return NVML_ERROR_INVALID_ARGUMENT;
    long long v = 0;
    nvmlReturn_t rc =
        health_int("nvmlDeviceGetRetiredPagesPendingStatus", dev, "retired_pages_pending", &v);
    if (rc == NVML_SUCCESS)
        *on = v ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return rc;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr,
                                                  unsigned int *unc, unsigned int *pending,
                                                  unsigned int *failed)
{
    if (!corr || !unc || !pending || !failed)
        return NVML_ERROR_INVALID_ARGUMENT;
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetRemappedRows", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    json_t *rows = json_object_get(g, "remapped_rows");
    if (json_is_object(rows)) {
        *corr = (unsigned int)sim_int(rows, "correctable", 0);
        *unc = (unsigned int)sim_int(rows, "uncorrectable", 0);
        *pending = json_is_true(json_object_get(rows, "pending"));
        *failed = json_is_true(json_object_get(rows, "failed"));
    } else {
        rc = NVML_ERROR_NOT_SUPPORTED; /* pre-Ampere boards have no row remapper */
    }
    json_decref(r);
    return rc;
}

/* NVML's names of the clocks event reason bits, lowest first. */
static const char *const reason_names[] = {"GpuIdle",
                                           "ApplicationsClocksSetting",
                                           "SwPowerCap",
                                           "HwSlowdown",
                                           "SyncBoost",
                                           "SwThermalSlowdown",
                                           "HwThermalSlowdown",
                                           "HwPowerBrakeSlowdown",
                                           "DisplayClockSetting"};

static nvmlReturn_t clocks_reasons(const char *fn, nvmlDevice_t dev, unsigned long long *bits)
{
    if (!bits)
        return NVML_ERROR_INVALID_ARGUMENT;
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev(fn, dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    json_t *v = json_object_get(g, "throttle_reasons");
    *bits = 0;
    if (json_is_integer(v)) {
        *bits = (unsigned long long)json_integer_value(v);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *name;
        json_array_foreach (v, i, name)
            for (size_t b = 0; b < sizeof(reason_names) / sizeof(*reason_names); b++)
                if (json_is_string(name) && !strcmp(json_string_value(name), reason_names[b]))
                    *bits |= 1ULL << b;
    } else if (json_is_null(v)) {
        rc = NVML_ERROR_NOT_SUPPORTED;
    }
    json_decref(r);
    return rc;
}

#ifndef NVML_SIM_LEGACY
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev, unsigned long long *bits);
SIM_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev,
                                                               unsigned long long *bits)
{
    return clocks_reasons("nvmlDeviceGetCurrentClocksEventReasons", dev, bits);
}
#else
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev, unsigned long long *bits);
SIM_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev,
                                                                  unsigned long long *bits)
{
    return clocks_reasons("nvmlDeviceGetCurrentClocksThrottleReasons", dev, bits);
}
#endif

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t dev, nvmlComputeMode_t *mode)
{
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetComputeMode", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    json_t *v = json_object_get(g, "compute_mode");
    const char *s = json_string_value(v);
    *mode = NVML_COMPUTEMODE_DEFAULT;
    if (json_is_integer(v))
        *mode = (nvmlComputeMode_t)json_integer_value(v);
    else if (s && !strcmp(s, "ExclusiveProcess"))
        *mode = NVML_COMPUTEMODE_EXCLUSIVE_PROCESS;
    else if (s && !strcmp(s, "Prohibited"))
        *mode = NVML_COMPUTEMODE_PROHIBITED;
    else if (json_is_null(v))
        rc = NVML_ERROR_NOT_SUPPORTED;
    json_decref(r);
    return rc;
}

/* ---- Xid events ---- */

#define SIM_EVENT_GPUS 64

/* An event set: per GPU (by index), whether it is registered and how many entries of
 * its "xid_events" have been delivered (or were there when it was registered). Each set
 * is used by one thread (gflowd's Xid thread), so it needs no lock. */
struct nvmlEventSet_st {
    bool registered[SIM_EVENT_GPUS];
    size_t delivered[SIM_EVENT_GPUS];
};

static size_t xid_count(json_t *gpu)
{
    return json_array_size(json_object_get(gpu, "xid_events"));
}

SIM_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    json_t *r;
    nvmlReturn_t rc = sim_begin("nvmlEventSetCreate", &r, true);
    if (rc != NVML_SUCCESS)
        return rc;
    json_decref(r);
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    *set = calloc(1, sizeof(**set));
    return *set ? NVML_SUCCESS : NVML_ERROR_MEMORY;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types,
                                                 nvmlEventSet_t set)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceRegisterEvents", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    size_t idx = (size_t)(uintptr_t)dev - 1;
    if (!set || idx >= SIM_EVENT_GPUS) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    } else if (types & ~nvmlEventTypeXidCriticalError) {
        rc = NVML_ERROR_NOT_SUPPORTED; /* the only kind the simulator makes */
    } else {
        set->registered[idx] = true;
        set->delivered[idx] = xid_count(g);
    }
    json_decref(r);
    return rc;
}

/* The next undelivered Xid of a registered GPU in the fixture r, if any. */
static bool next_event(nvmlEventSet_t set, json_t *r, nvmlEventData_t *data)
{
    json_t *gpus = json_object_get(r, "gpus");
    for (size_t i = 0; i < SIM_EVENT_GPUS && i < json_array_size(gpus); i++) {
        json_t *list = json_object_get(json_array_get(gpus, i), "xid_events");
        if (!set->registered[i] || set->delivered[i] >= json_array_size(list))
            continue;
        memset(data, 0, sizeof(*data));
        data->device = (nvmlDevice_t)(uintptr_t)(i + 1);
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData =
            (unsigned long long)json_integer_value(json_array_get(list, set->delivered[i]++));
        data->gpuInstanceId = data->computeInstanceId = ~0u;
        return true;
    }
    return false;
}

/* Waits up to timeoutms for an event, reading the fixture every 20 ms. */
static nvmlReturn_t event_wait(const char *fn, nvmlEventSet_t set, nvmlEventData_t *data,
                               unsigned int timeoutms)
{
    if (!set || !data)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* A real driver blocks in the kernel; the fixture is looked at every 100 ms, often
     * enough for a test and rarely enough not to show in an idle daemon's CPU time. */
    const struct timespec step = {0, 100 * 1000 * 1000};
    for (unsigned int waited = 0;; waited += 100) {
        json_t *r;
        nvmlReturn_t rc = sim_begin(fn, &r, true);
        if (rc != NVML_SUCCESS)
            return rc;
        bool got = next_event(set, r, data);
        json_decref(r);
        if (got)
            return NVML_SUCCESS;
        if (waited >= timeoutms)
            return NVML_ERROR_TIMEOUT;
        nanosleep(&step, NULL);
    }
}

#ifndef NVML_SIM_LEGACY
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms);
SIM_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                            unsigned int timeoutms)
{
    return event_wait("nvmlEventSetWait_v2", set, data, timeoutms);
}
#else
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms);
SIM_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data,
                                         unsigned int timeoutms)
{
    return event_wait("nvmlEventSetWait", set, data, timeoutms);
}
#endif

SIM_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    free(set);
    return NVML_SUCCESS;
}

#endif /* NVML_SIM_NO_OPTIONAL */
