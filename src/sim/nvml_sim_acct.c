/* nvml_sim_acct: the simulator's accounting readings (docs/simulator.md, "Accounting"):
 *   nvmlDeviceGetTotalEnergyConsumption: the GPU's "energy_mj" when the fixture gives
 *       it (a test sets exact counters, or one that goes back as after a driver
 *       reload; null: NOT_SUPPORTED); otherwise a counter kept here that rises at the
 *       GPU's "power_w" (NOT_SUPPORTED without one), from 0 at its first reading;
 *   nvmlDeviceGetProcessUtilization: one sample per listed process (all three lists)
 *       with an "sm_util", stamped now; NOT_FOUND when none has one.
 * The build with only the required symbols has neither. */
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml_sim.h"
#include "nvml_types.h"

#ifndef NVML_SIM_NO_OPTIONAL

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev, unsigned long long *mj);
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dev,
                                             nvmlProcessUtilizationSample_t *samples,
                                             unsigned int *count, unsigned long long seen);

#define SIM_ACCT_GPUS 64

/* The counters that rise with the power, per GPU (handle = index + 1). */
static pthread_mutex_t acct_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool started;
    double at; /* monotonic seconds of the last reading */
    double mj; /* the counter */
} acct_energy[SIM_ACCT_GPUS];

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev,
                                                            unsigned long long *mj)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetTotalEnergyConsumption", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!mj) {
        json_decref(r);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    json_t *fixed = json_object_get(g, "energy_mj");
    if (fixed) {
        rc = json_is_integer(fixed) && json_integer_value(fixed) >= 0 ? NVML_SUCCESS
                                                                      : NVML_ERROR_NOT_SUPPORTED;
        if (rc == NVML_SUCCESS)
            *mj = (unsigned long long)json_integer_value(fixed);
        json_decref(r);
        return rc;
    }
    long long watts = sim_int(g, "power_w", -1);
    json_decref(r);
    size_t i = (size_t)((uintptr_t)dev - 1);
    if (watts < 0 || i >= SIM_ACCT_GPUS)
        return NVML_ERROR_NOT_SUPPORTED;
    double now = mono_now();
    pthread_mutex_lock(&acct_mu);
    if (acct_energy[i].started)
        acct_energy[i].mj += (double)watts * (now - acct_energy[i].at) * 1000.0;
    acct_energy[i].started = true;
    acct_energy[i].at = now;
    *mj = (unsigned long long)acct_energy[i].mj;
    pthread_mutex_unlock(&acct_mu);
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dev,
                                                        nvmlProcessUtilizationSample_t *samples,
                                                        unsigned int *count,
                                                        unsigned long long seen)
{
    (void)seen; /* every answer is a fresh sample */
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetProcessUtilization", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count) {
        json_decref(r);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    static const char *const keys[] = {"processes", "graphics_processes", "mps_processes"};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long stamp =
        (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
    unsigned int n = 0;
    for (size_t k = 0; k < 3; k++) {
        size_t i;
        json_t *p;
        json_array_foreach (json_object_get(g, keys[k]), i, p) {
            json_t *u = json_object_get(p, "sm_util");
            if (!json_is_integer(u))
                continue;
            if (samples && n < *count)
                samples[n] =
                    (nvmlProcessUtilizationSample_t){.pid = (unsigned int)sim_int(p, "pid", 0),
                                                     .timeStamp = stamp,
                                                     .smUtil = (unsigned int)json_integer_value(u)};
            n++;
        }
    }
    json_decref(r);
    if (n == 0)
        return NVML_ERROR_NOT_FOUND;
    if (!samples || n > *count) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = n;
    return NVML_SUCCESS;
}

#endif
