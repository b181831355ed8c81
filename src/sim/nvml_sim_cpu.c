/* nvml_sim_cpu: a GPU's local CPUs (nvmlDeviceGetCpuAffinity) from its fixture key
 * "cpus", a CPU list as Linux writes them ("0-7,16"). A GPU without the key answers
 * NOT_SUPPORTED, as a driver that cannot tell does; a list that is not one answers
 * UNKNOWN. Not in the build without optional symbols. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_sim.h"

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t dev, unsigned int size, unsigned long *set);

#ifndef NVML_SIM_NO_OPTIONAL
#define SIM_WORD_BITS (8 * sizeof(unsigned long))

/* Sets the CPUs of list in set (size words): 0, or -1 when list is not a CPU list or
 * names a CPU beyond the set. */
static int sim_cpu_list(const char *list, unsigned long *set, unsigned int size)
{
    const char *p = list;
    while (*p) {
        char *end;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        if (end == p)
            return -1;
        p = end;
        if (*p == '-') {
            hi = strtoul(p + 1, &end, 10);
            if (end == p + 1 || hi < lo)
                return -1;
            p = end;
        }
        if (hi >= (unsigned long)size * SIM_WORD_BITS)
            return -1;
        for (unsigned long c = lo; c <= hi; c++)
            set[c / SIM_WORD_BITS] |= 1UL << (c % SIM_WORD_BITS);
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return 0;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t dev, unsigned int size,
                                                 unsigned long *set)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetCpuAffinity", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    const char *cpus = sim_str(g, "cpus", NULL);
    if (!set || size == 0)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (!cpus)
        rc = NVML_ERROR_NOT_SUPPORTED;
    else {
        memset(set, 0, size * sizeof(*set));
        rc = sim_cpu_list(cpus, set, size) == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
    }
    json_decref(r);
    return rc;
}
#endif /* NVML_SIM_NO_OPTIONAL */
