/* nvml_sim_mig: MIG in the simulator (docs/simulator.md). A GPU with "mig_mode" 1 has
 * the devices of its "mig_instances" list, reached by index as on a real driver; a GPU
 * without "mig_mode" does not support MIG (NOT_SUPPORTED, like a consumer board).
 *
 * A MIG handle is SIM_MIG_TAG | parent index << 8 | (position + 1): never a valid GPU
 * handle (index + 1, at most 64), and it stays valid while the fixture is rewritten
 * like a GPU handle does. */
#include <stdint.h>
#include <stdio.h>

#include "nvml_sim.h"

#define SIM_MIG_TAG ((uintptr_t)1 << 20)
/* What nvmlDeviceGetMaxMigDeviceCount reports unless "mig_max_devices" says otherwise:
 * 7, the most instances an A100 or H100 can be split into. */
#define SIM_MIG_MAX_DEFAULT 7

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current, unsigned int *pending);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index,
                                                 nvmlDevice_t *mig);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *dev);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t dev, unsigned int *is_mig);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int *id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int *id);

bool sim_mig_is_handle(nvmlDevice_t dev)
{
    return ((uintptr_t)dev & SIM_MIG_TAG) != 0;
}

static void sim_mig_decode(nvmlDevice_t dev, size_t *gpu, size_t *pos)
{
    uintptr_t v = (uintptr_t)dev & ~SIM_MIG_TAG;
    *gpu = (size_t)(v >> 8);
    *pos = (size_t)(v & 0xff) - 1;
}

/* 1 or 0 from the fixture, -1 when the GPU has no MIG support. */
static int sim_mig_mode(json_t *gpu)
{
    json_t *m = json_object_get(gpu, "mig_mode");
    return json_is_integer(m) ? (json_integer_value(m) != 0) : -1;
}

/* Real drivers name a MIG device after its GPU and profile and give it a UUID and
 * instance ids; a fixture may leave them out. Filled in once, when the fixture is parsed
 * (sim_load), so that calls only ever read the shared fixture. */
void sim_mig_fill_defaults(json_t *root)
{
    json_t *gpus = json_object_get(root, "gpus");
    for (size_t gi = 0; gi < json_array_size(gpus); gi++) {
        json_t *gpu = json_array_get(gpus, gi);
        json_t *list = json_object_get(gpu, "mig_instances");
        for (size_t pos = 0; pos < json_array_size(list); pos++) {
            json_t *inst = json_array_get(list, pos);
            if (!json_is_object(inst))
                continue;
            if (!json_is_string(json_object_get(inst, "name"))) {
                char name[160];
                snprintf(name, sizeof(name), "%s MIG %s", sim_str(gpu, "name", "Simulated GPU"),
                         sim_str(inst, "profile", "1g.10gb"));
                json_object_set_new(inst, "name", json_string(name));
            }
            if (!json_is_string(json_object_get(inst, "uuid"))) {
                char uuid[64];
                snprintf(uuid, sizeof(uuid), "MIG-00000000-0000-4000-8000-%04zx%08zx", gi, pos);
                json_object_set_new(inst, "uuid", json_string(uuid));
            }
            if (!json_is_integer(json_object_get(inst, "gi_id")))
                json_object_set_new(inst, "gi_id", json_integer((json_int_t)pos));
            if (!json_is_integer(json_object_get(inst, "ci_id")))
                json_object_set_new(inst, "ci_id", json_integer(0));
        }
    }
}

nvmlReturn_t sim_mig_begin_dev(const char *fn, nvmlDevice_t dev, json_t **root, json_t **obj)
{
    size_t gi, pos;
    sim_mig_decode(dev, &gi, &pos);
    /* The parent's own "fail" map is not applied: a driver may refuse the GPU's process
     * list (without root) and still answer for its instances. */
    nvmlReturn_t rc = sim_begin(fn, root, true);
    if (rc != NVML_SUCCESS)
        return rc;
    json_t *gpu = json_array_get(json_object_get(*root, "gpus"), gi);
    json_t *list = json_object_get(gpu, "mig_instances");
    json_t *inst = json_array_get(list, pos);
    if (sim_mig_mode(gpu) != 1 || !json_is_object(inst))
        rc = NVML_ERROR_INVALID_ARGUMENT; /* the instance is gone: a stale handle */
    else
        rc = sim_fail_in(json_object_get(inst, "fail"), fn);
    if (rc != NVML_SUCCESS) {
        json_decref(*root);
        *root = NULL;
        return rc;
    }
    *obj = inst;
    return NVML_SUCCESS;
}

#if !defined(NVML_SIM_NO_OPTIONAL) && !defined(NVML_SIM_LEGACY)

/* The parent GPU of a GPU handle (not a MIG one), after the global and its own "fail"
 * maps. */
static nvmlReturn_t sim_mig_parent(const char *fn, nvmlDevice_t dev, json_t **root, json_t **gpu)
{
    if (sim_mig_is_handle(dev))
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t rc = sim_begin(fn, root, true);
    if (rc != NVML_SUCCESS)
        return rc;
    size_t idx = (size_t)(uintptr_t)dev;
    json_t *gpus = json_object_get(*root, "gpus");
    if (idx == 0 || idx > json_array_size(gpus)) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    } else {
        *gpu = json_array_get(gpus, idx - 1);
        rc = sim_fail_in(json_object_get(*gpu, "fail"), fn);
    }
    if (rc != NVML_SUCCESS) {
        json_decref(*root);
        *root = NULL;
    }
    return rc;
}

static nvmlDevice_t sim_mig_handle(size_t gpu, size_t pos)
{
    return (nvmlDevice_t)(SIM_MIG_TAG | (uintptr_t)gpu << 8 | (uintptr_t)(pos + 1));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current,
                                             unsigned int *pending)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_mig_parent("nvmlDeviceGetMigMode", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    int mode = sim_mig_mode(g);
    long long next = sim_int(g, "mig_mode_pending", mode);
    json_decref(r);
    if (!current || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = (unsigned int)mode;
    *pending = next ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_mig_parent("nvmlDeviceGetMaxMigDeviceCount", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    int mode = sim_mig_mode(g);
    long long max = sim_int(g, "mig_max_devices", SIM_MIG_MAX_DEFAULT);
    size_t n = json_array_size(json_object_get(g, "mig_instances"));
    json_decref(r);
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *count = (unsigned int)((size_t)max > n ? (size_t)max : n);
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index,
                                                            nvmlDevice_t *mig)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_mig_parent("nvmlDeviceGetMigDeviceHandleByIndex", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    int mode = sim_mig_mode(g);
    long long max = sim_int(g, "mig_max_devices", SIM_MIG_MAX_DEFAULT);
    size_t n = json_array_size(json_object_get(g, "mig_instances"));
    json_decref(r);
    if (!mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (mode == 0 || (index >= n && (long long)index >= max) || index > 254)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= n)
        return NVML_ERROR_NOT_FOUND; /* an index with no device behind it */
    *mig = sim_mig_handle((size_t)(uintptr_t)dev - 1, index);
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                                     nvmlDevice_t *dev)
{
    if (!sim_mig_is_handle(mig) || !dev)
        return NVML_ERROR_INVALID_ARGUMENT;
    json_t *r, *inst;
    nvmlReturn_t rc =
        sim_mig_begin_dev("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", mig, &r, &inst);
    if (rc != NVML_SUCCESS)
        return rc;
    json_decref(r);
    size_t gi, pos;
    sim_mig_decode(mig, &gi, &pos);
    *dev = (nvmlDevice_t)(uintptr_t)(gi + 1);
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t dev, unsigned int *is_mig)
{
    if (!is_mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = sim_mig_is_handle(dev) ? 1 : 0;
    return NVML_SUCCESS;
}

/* An instance's "gi_id" or "ci_id" (sim_mig_begin_dev fills in the defaults). */
static nvmlReturn_t sim_mig_id(const char *fn, nvmlDevice_t dev, const char *key, unsigned int *id)
{
    if (!sim_mig_is_handle(dev))
        return NVML_ERROR_NOT_SUPPORTED;
    json_t *r, *inst;
    nvmlReturn_t rc = sim_mig_begin_dev(fn, dev, &r, &inst);
    if (rc != NVML_SUCCESS)
        return rc;
    long long v = sim_int(inst, key, 0);
    json_decref(r);
    if (!id)
        return NVML_ERROR_INVALID_ARGUMENT;
    *id = (unsigned int)v;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int *id)
{
    return sim_mig_id("nvmlDeviceGetGpuInstanceId", dev, "gi_id", id);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int *id)
{
    return sim_mig_id("nvmlDeviceGetComputeInstanceId", dev, "ci_id", id);
}

#endif
