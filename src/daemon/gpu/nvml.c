/* nvml: the NVML loader. dlopen()s libnvidia-ml.so.1 (or the simulator), resolves each
 * symbol newest version first with fallbacks to the older names, and reads the GPUs
 * into a struct gpu_set.
 *
 * Symbols are split in two: required ones (init, count, handle, uuid, name, pci,
 * memory, shutdown, errorString) without which there are no GPUs, and optional ones
 * (utilisation, temperature, power, processes, topology, NVLink, NUMA, minor, driver
 * version) whose absence, or a NOT_SUPPORTED answer, leaves that metric unknown (-1),
 * never 0. What scheduling cannot do without is different: a GPU whose handle, UUID,
 * memory or process lists cannot be read is unavailable, with the NVML error and the
 * call as the reason ("NVML: Insufficient Permissions (nvmlDeviceGetHandleByIndex)"),
 * never idle.
 *
 * Driver quirks handled here, each next to its workaround:
 *  - versioned structs need `sizeof | ver << 24` in their version field;
 *  - the process lists (compute, graphics, MPS) are 24 or 32 bytes per entry depending
 *    on the driver (535-series), so the stride is probed;
 *  - on NVSwitch systems every NVLink's far end is a switch, not a GPU: the GPUs are
 *    joined by asking NVML whether each pair can talk over NVLink (P2P status);
 *  - the process list can grow between the size query and the read, so reads loop on
 *    INSUFFICIENT_SIZE;
 *  - usedGpuMemory == ~0ULL means "not available", not 16 EiB. */
#include "nvml.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvml_health.h"
#include "nvml_mig.h"
#include "nvml_types.h"
#include "util.h"

/* Which entry point, and so which struct layout, a resolved symbol has. */
enum nvml_ver { NVML_VER_NONE = 0, NVML_VER_1 = 1, NVML_VER_2 = 2, NVML_VER_3 = 3 };

/* The first size of the process buffer, in entries; it grows on INSUFFICIENT_SIZE. */
#define NVML_PROCS_INITIAL 16
/* Processes come and go between calls; give up after this many INSUFFICIENT_SIZE. */
#define NVML_PROCS_TRIES 6
/* The byte written over the process buffer before a call, see nvml_probe_stride(). */
#define NVML_PROBE_BYTE 0xA5

/* Per-GPU facts used while reading and then dropped. */
struct nvml_dev {
    nvmlDevice_t handle;
    bool have_handle;
    bool have_pci;
    unsigned int domain, bus, device;
};

typedef nvmlReturn_t (*nvml_void_fn)(void);
typedef nvmlReturn_t (*nvml_count_fn)(unsigned int *);
typedef nvmlReturn_t (*nvml_handle_fn)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*nvml_str_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*nvml_pci_fn)(nvmlDevice_t, nvmlPciInfo_t *);
typedef nvmlReturn_t (*nvml_mem1_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*nvml_mem2_fn)(nvmlDevice_t, nvmlMemory_v2_t *);
typedef const char *(*nvml_errstr_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvml_util_fn)(nvmlDevice_t, nvmlUtilization_t *);
typedef nvmlReturn_t (*nvml_temp_fn)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int *);
typedef nvmlReturn_t (*nvml_uint_fn)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*nvml_procs_fn)(nvmlDevice_t, unsigned int *, void *);
typedef nvmlReturn_t (*nvml_topo_fn)(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t *);
typedef nvmlReturn_t (*nvml_link_state_fn)(nvmlDevice_t, unsigned int, nvmlEnableState_t *);
typedef nvmlReturn_t (*nvml_link_pci_fn)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
typedef nvmlReturn_t (*nvml_affinity_fn)(nvmlDevice_t, unsigned int, unsigned long *,
                                         nvmlAffinityScope_t);
typedef nvmlReturn_t (*nvml_cpu_affinity_fn)(nvmlDevice_t, unsigned int, unsigned long *);
typedef nvmlReturn_t (*nvml_sysstr_fn)(char *, unsigned int);
typedef nvmlReturn_t (*nvml_link_type_fn)(nvmlDevice_t, unsigned int, nvmlIntNvLinkDeviceType_t *);
typedef nvmlReturn_t (*nvml_p2p_fn)(nvmlDevice_t, nvmlDevice_t, nvmlGpuP2PCapsIndex_t,
                                    nvmlGpuP2PStatus_t *);

struct nvml {
    void *lib;
    bool simulated;

    /* Required. */
    nvml_void_fn init;
    nvml_void_fn shutdown;
    nvml_count_fn get_count;
    nvml_handle_fn get_handle;
    nvml_str_fn get_uuid;
    nvml_str_fn get_name;
    nvml_pci_fn get_pci;
    enum nvml_ver pci_ver;      /* 1: legacy layout (busId first) */
    nvml_mem2_fn get_memory_v2; /* tried first when present */
    nvml_mem1_fn get_memory;
    nvml_errstr_fn error_string;

    /* Optional: NULL when the library lacks them. */
    nvml_util_fn get_utilization;
    nvml_temp_fn get_temperature;
    nvml_uint_fn get_power;
    nvml_procs_fn get_procs;
    enum nvml_ver procs_ver;
    size_t procs_stride; /* bytes per entry once known; 0 until probed */
    nvml_topo_fn get_topology;
    nvml_link_state_fn get_link_state;
    nvml_link_pci_fn get_link_pci;
    enum nvml_ver link_pci_ver;
    nvml_uint_fn get_numa_node;
    nvml_cpu_affinity_fn get_cpu_affinity; /* NULL: not offered */
    nvml_affinity_fn get_memory_affinity;
    nvml_sysstr_fn get_driver_version;

    /* Optional, read like the compute list (same layouts per version); their processes
     * hold the GPU as much as compute ones do. */
    nvml_procs_fn get_graphics_procs;
    enum nvml_ver graphics_ver;
    size_t graphics_stride;
    nvml_procs_fn get_mps_procs;
    enum nvml_ver mps_ver;
    size_t mps_stride;
    nvml_uint_fn get_minor;
    nvml_link_type_fn get_link_remote_type;
    nvml_p2p_fn get_p2p;

    /* The devices read since the last nvml_read_system(), for nvml_read_links(): entry
     * i is written only by GPU i's read (one thread at a time), never moved. */
    struct nvml_dev devs[GPUINFO_MAX_GPUS];
    size_t n_devs;
};

/* Looks up the first of `names` (NULL-terminated) that the library exports; sets *which
 * to the position found (so the caller knows the struct layout), -1 if none. */
static void *nvml_sym(void *lib, const char *const *names, int *which)
{
    for (int i = 0; names[i]; i++) {
        void *p = dlsym(lib, names[i]);
        if (p) {
            if (which)
                *which = i;
            return p;
        }
    }
    if (which)
        *which = -1;
    return NULL;
}

/* The symbol-pointer cast, kept in one place: ISO C forbids object→function casts,
 * POSIX dlsym() requires them to work. */
#define NVML_FN(type, ptr) ((type)(uintptr_t)(ptr))

static const char *nvml_strerror(const struct nvml *n, nvmlReturn_t rc)
{
    const char *s = n->error_string ? n->error_string(rc) : NULL;
    return s ? s : "unknown NVML error";
}

/* The layout of a process-list symbol found at position `which` of (_v3, _v2, legacy). */
static enum nvml_ver nvml_procs_ver(int which)
{
    return which == 0   ? NVML_VER_3
           : which == 1 ? NVML_VER_2
           : which == 2 ? NVML_VER_1
                        : NVML_VER_NONE;
}

/* Resolves every symbol. Returns the name of the first missing required one, or NULL. */
static const char *nvml_resolve(struct nvml *n)
{
    int which;
    void *p;

#define NVML_NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})
    /* Required. nvmlInit_v2 does not require every GPU to be healthy (nvmlInit fails as
     * a whole when one GPU is lost); the _v2 count and handle skip GPUs the process may
     * not see (cgroup device rules), the legacy ones do not. */
    if (!(p = nvml_sym(n->lib, NVML_NAMES("nvmlInit_v2", "nvmlInit"), NULL)))
        return "nvmlInit";
    n->init = NVML_FN(nvml_void_fn, p);
    if (!(p = nvml_sym(n->lib, NVML_NAMES("nvmlShutdown"), NULL)))
        return "nvmlShutdown";
    n->shutdown = NVML_FN(nvml_void_fn, p);
    if (!(p = nvml_sym(n->lib, NVML_NAMES("nvmlErrorString"), NULL)))
        return "nvmlErrorString";
    n->error_string = NVML_FN(nvml_errstr_fn, p);
    if (!(p = nvml_sym(n->lib, NVML_NAMES("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"), NULL)))
        return "nvmlDeviceGetCount";
    n->get_count = NVML_FN(nvml_count_fn, p);
    if (!(p = nvml_sym(n->lib,
                       NVML_NAMES("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"),
                       NULL)))
        return "nvmlDeviceGetHandleByIndex";
    n->get_handle = NVML_FN(nvml_handle_fn, p);
    if (!(p = nvml_sym(n->lib, NVML_NAMES("nvmlDeviceGetUUID"), NULL)))
        return "nvmlDeviceGetUUID";
    n->get_uuid = NVML_FN(nvml_str_fn, p);
    if (!(p = nvml_sym(n->lib, NVML_NAMES("nvmlDeviceGetName"), NULL)))
        return "nvmlDeviceGetName";
    n->get_name = NVML_FN(nvml_str_fn, p);
    if (!(p = nvml_sym(n->lib,
                       NVML_NAMES("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2",
                                  "nvmlDeviceGetPciInfo"),
                       &which)))
        return "nvmlDeviceGetPciInfo";
    n->get_pci = NVML_FN(nvml_pci_fn, p);
    n->pci_ver = which == 2 ? NVML_VER_1 : which == 1 ? NVML_VER_2 : NVML_VER_3;
    /* The _v2 memory call (r510+) reports `used` without the driver's reserved memory,
     * like nvidia-smi does; the legacy one counts the reservation as used. */
    n->get_memory_v2 = NVML_FN(nvml_mem2_fn, dlsym(n->lib, "nvmlDeviceGetMemoryInfo_v2"));
    n->get_memory = NVML_FN(nvml_mem1_fn, dlsym(n->lib, "nvmlDeviceGetMemoryInfo"));
    if (!n->get_memory_v2 && !n->get_memory)
        return "nvmlDeviceGetMemoryInfo";

    /* Optional. */
    n->get_utilization = NVML_FN(nvml_util_fn, dlsym(n->lib, "nvmlDeviceGetUtilizationRates"));
    n->get_temperature = NVML_FN(nvml_temp_fn, dlsym(n->lib, "nvmlDeviceGetTemperature"));
    n->get_power = NVML_FN(nvml_uint_fn, dlsym(n->lib, "nvmlDeviceGetPowerUsage"));
    p = nvml_sym(n->lib,
                 NVML_NAMES("nvmlDeviceGetComputeRunningProcesses_v3",
                            "nvmlDeviceGetComputeRunningProcesses_v2",
                            "nvmlDeviceGetComputeRunningProcesses"),
                 &which);
    n->get_procs = NVML_FN(nvml_procs_fn, p);
    n->procs_ver = which == 0   ? NVML_VER_3
                   : which == 1 ? NVML_VER_2
                   : which == 2 ? NVML_VER_1
                                : NVML_VER_NONE;
    /* The legacy call has a fixed 16-byte layout; the _v2/_v3 stride is probed. */
    n->procs_stride = n->procs_ver == NVML_VER_1 ? sizeof(nvmlProcessInfo_v1_t) : 0;
    n->get_topology = NVML_FN(nvml_topo_fn, dlsym(n->lib, "nvmlDeviceGetTopologyCommonAncestor"));
    n->get_link_state = NVML_FN(nvml_link_state_fn, dlsym(n->lib, "nvmlDeviceGetNvLinkState"));
    p = nvml_sym(
        n->lib,
        NVML_NAMES("nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"),
        &which);
    n->get_link_pci = NVML_FN(nvml_link_pci_fn, p);
    n->link_pci_ver = which == 0 ? NVML_VER_2 : NVML_VER_1;
    n->get_numa_node = NVML_FN(nvml_uint_fn, dlsym(n->lib, "nvmlDeviceGetNumaNodeId"));
    n->get_memory_affinity =
        NVML_FN(nvml_affinity_fn, dlsym(n->lib, "nvmlDeviceGetMemoryAffinity"));
    n->get_cpu_affinity = NVML_FN(nvml_cpu_affinity_fn, dlsym(n->lib, "nvmlDeviceGetCpuAffinity"));
    n->get_driver_version = NVML_FN(nvml_sysstr_fn, dlsym(n->lib, "nvmlSystemGetDriverVersion"));
    p = nvml_sym(n->lib,
                 NVML_NAMES("nvmlDeviceGetGraphicsRunningProcesses_v3",
                            "nvmlDeviceGetGraphicsRunningProcesses_v2",
                            "nvmlDeviceGetGraphicsRunningProcesses"),
                 &which);
    n->get_graphics_procs = NVML_FN(nvml_procs_fn, p);
    n->graphics_ver = nvml_procs_ver(which);
    n->graphics_stride = n->graphics_ver == NVML_VER_1 ? sizeof(nvmlProcessInfo_v1_t) : 0;
    p = nvml_sym(n->lib,
                 NVML_NAMES("nvmlDeviceGetMPSComputeRunningProcesses_v3",
                            "nvmlDeviceGetMPSComputeRunningProcesses_v2",
                            "nvmlDeviceGetMPSComputeRunningProcesses"),
                 &which);
    n->get_mps_procs = NVML_FN(nvml_procs_fn, p);
    n->mps_ver = nvml_procs_ver(which);
    n->mps_stride = n->mps_ver == NVML_VER_1 ? sizeof(nvmlProcessInfo_v1_t) : 0;
    n->get_minor = NVML_FN(nvml_uint_fn, dlsym(n->lib, "nvmlDeviceGetMinorNumber"));
    n->get_link_remote_type =
        NVML_FN(nvml_link_type_fn, dlsym(n->lib, "nvmlDeviceGetNvLinkRemoteDeviceType"));
    n->get_p2p = NVML_FN(nvml_p2p_fn, dlsym(n->lib, "nvmlDeviceGetP2PStatus"));
#undef NVML_NAMES
    return NULL;
}

struct nvml *nvml_open(const char *library, char **err)
{
    bool found, mismatch;
    return nvml_open_found(library, &found, &mismatch, err);
}

struct nvml *nvml_open_found(const char *library, bool *found, bool *mismatch, char **err)
{
    *found = false;
    *mismatch = false;
    const char *path = library;
    if (!path || !*path) {
        const char *env = getenv("GFLOW_NVML_LIBRARY");
        path = env && *env ? env : NVML_DEFAULT_LIBRARY;
    }

    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        /* A bare name that is not found is the common case of "no driver installed";
         * a path that exists but does not load deserves the loader's own words. */
        if (strchr(path, '/') && access(path, F_OK) == 0) {
            const char *why = dlerror();
            *err = xasprintf("no GPUs: cannot load %s: %s", path, why ? why : "unknown error");
        } else {
            *err = xasprintf("no GPUs: %s not found (no NVIDIA driver?)", path);
        }
        return NULL;
    }

    *found = true;
    struct nvml *n = xcalloc(1, sizeof(*n));
    n->lib = lib;
    n->simulated = dlsym(lib, "gflowNvmlSimulated") != NULL;

    const char *missing = nvml_resolve(n);
    if (missing) {
        *err = xasprintf("no GPUs: %s lacks %s (not an NVML library?)", path, missing);
        dlclose(lib);
        free(n);
        return NULL;
    }

    nvmlReturn_t rc = n->init();
    if (rc != NVML_SUCCESS) {
        *mismatch = rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH;
        *err = xasprintf("no GPUs: nvmlInit failed: %s", nvml_strerror(n, rc));
        dlclose(lib);
        free(n);
        return NULL;
    }
    return n;
}

void nvml_close(struct nvml *n)
{
    if (!n)
        return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}

/* The slot the calling thread notes its NVML calls in (nvml_note_call). */
static __thread const char **nvml_note_slot;

void nvml_note_calls_to(const char **slot)
{
    nvml_note_slot = slot;
}

void nvml_note_call(const char *fn)
{
    if (nvml_note_slot)
        __atomic_store_n(nvml_note_slot, fn, __ATOMIC_RELAXED);
}

bool nvml_is_simulated(const struct nvml *n)
{
    return n && n->simulated;
}

/* Copies an NVML string result into a fixed field, always terminated. */
static void nvml_copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

/* Records why the GPU's state cannot be known (the first reason is kept: it is the
 * cause, later failures follow from it), and marks GPU_IS_LOST as lost and
 * LIB_RM_VERSION_MISMATCH as a driver that changed under us. */
static void nvml_unavailable(const struct nvml *n, struct gpu_info *g, nvmlReturn_t rc,
                             const char *fn)
{
    if (rc == NVML_ERROR_GPU_IS_LOST)
        g->lost = true;
    if (rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH)
        g->version_mismatch = true;
    if (!g->unavailable[0])
        snprintf(g->unavailable, sizeof(g->unavailable), "NVML: %s (%s)", nvml_strerror(n, rc), fn);
}

/* Whether rc of `fn` means the GPU is gone (or the driver changed under us: nothing more
 * is worth asking); marks it lost (or version_mismatch) and unavailable. */
static bool nvml_lost(const struct nvml *n, struct gpu_info *g, nvmlReturn_t rc, const char *fn)
{
    if (rc != NVML_ERROR_GPU_IS_LOST && rc != NVML_ERROR_LIB_RM_VERSION_MISMATCH)
        return false;
    nvml_unavailable(n, g, rc, fn);
    return true;
}

/* Reads the PCI identity. The bus id is rebuilt from the integers as
 * "%08X:%02X:%02X.0" (nvidia-smi's form): the legacy call gives only the 4-digit-domain
 * form, and the integers are at the same offsets in both layouts. */
static nvmlReturn_t nvml_read_pci(struct nvml *n, struct nvml_dev *d, struct gpu_info *g)
{
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof(pci));
    nvmlReturn_t rc = n->get_pci(d->handle, &pci);
    if (rc != NVML_SUCCESS)
        return rc;
    d->have_pci = true;
    d->domain = pci.domain;
    d->bus = pci.bus;
    d->device = pci.device;
    if (n->pci_ver != NVML_VER_1 && pci.busId[0])
        snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "%.*s", (int)sizeof(pci.busId), pci.busId);
    if (!g->pci_bus_id[0])
        snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "%08X:%02X:%02X.0", pci.domain & 0xffffffffu,
                 pci.bus & 0xffu, pci.device & 0xffu);
    return NVML_SUCCESS;
}

/* Total, used and free memory in MiB. The _v2 call is tried first; any answer but
 * success or GPU_IS_LOST (NOT_SUPPORTED on some boards, ARGUMENT_VERSION_MISMATCH from a
 * driver that wants another struct version, FUNCTION_NOT_FOUND from a stub) falls back
 * to the legacy call. *fn names the call whose answer is returned. */
static nvmlReturn_t nvml_read_memory(struct nvml *n, nvmlDevice_t h, struct gpu_info *g,
                                     const char **fn)
{
    nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
    if (n->get_memory_v2) {
        *fn = "nvmlDeviceGetMemoryInfo_v2";
        nvml_note_call(*fn);
        nvmlMemory_v2_t m;
        memset(&m, 0, sizeof(m));
        m.version = NVML_MEMORY_V2_VERSION;
        rc = n->get_memory_v2(h, &m);
        if (rc == NVML_SUCCESS) {
            g->memory_total_mib = (int64_t)(m.total >> 20);
            g->memory_used_mib = (int64_t)(m.used >> 20);
            g->memory_free_mib = (int64_t)(m.free >> 20);
            return rc;
        }
        if (rc == NVML_ERROR_GPU_IS_LOST || !n->get_memory)
            return rc;
    }
    *fn = "nvmlDeviceGetMemoryInfo";
    nvml_note_call(*fn);
    nvmlMemory_t m;
    memset(&m, 0, sizeof(m));
    rc = n->get_memory(h, &m);
    if (rc == NVML_SUCCESS) {
        g->memory_total_mib = (int64_t)(m.total >> 20);
        g->memory_used_mib = (int64_t)(m.used >> 20);
        g->memory_free_mib = (int64_t)(m.free >> 20);
    }
    return rc;
}

/* Decides the bytes per process entry that a _v2/_v3 call wrote, from a buffer of
 * `count` * 32 bytes filled with NVML_PROBE_BYTE before the call.
 *
 * Heuristic: the driver only knows the capacity in entries, so it writes count * stride
 * bytes. With 24-byte entries the last 8 bytes of the 32-byte-per-entry buffer
 * (offset 32 * count - 8, past 24 * count for any count >= 1) are untouched, still the
 * probe byte; with 32-byte entries they hold the last entry's usedGpuCcProtectedMemory,
 * which the driver writes (0 in practice, and never 0xA5A5A5A5A5A5A5A5). As a cross-check
 * every pid read with the chosen stride must be non-zero and not the probe pattern; if
 * it is not but the other stride's pids are, the other stride wins. */
static size_t nvml_probe_stride(const unsigned char *buf, unsigned int count)
{
    const size_t big = sizeof(nvmlProcessInfo_cc_t), small = sizeof(nvmlProcessInfo_t);
    bool tail_untouched = true;
    for (size_t i = big * count - 8; i < big * count; i++)
        if (buf[i] != NVML_PROBE_BYTE)
            tail_untouched = false;
    size_t guess = tail_untouched ? small : big, other = tail_untouched ? big : small;

    bool guess_ok = true, other_ok = true;
    unsigned int probe_pid;
    memset(&probe_pid, NVML_PROBE_BYTE, sizeof(probe_pid));
    for (unsigned int i = 0; i < count; i++) {
        unsigned int pg, po;
        memcpy(&pg, buf + i * guess, sizeof(pg));
        memcpy(&po, buf + i * other, sizeof(po));
        if (pg == 0 || pg == probe_pid)
            guess_ok = false;
        if (po == 0 || po == probe_pid)
            other_ok = false;
    }
    return !guess_ok && other_ok ? other : guess;
}

/* Reads one process list (compute, graphics or MPS) of a GPU into *out. Grows the
 * buffer and retries while the driver answers INSUFFICIENT_SIZE (it sets the count it
 * needs; processes may start between the two calls, hence the extra room and the
 * bounded loop). *stride is the list's entry size, probed on first use for _v2/_v3. */
static nvmlReturn_t nvml_read_proclist(nvml_procs_fn get, size_t *stride, nvmlDevice_t h,
                                       struct gpu_proc **out, size_t *n_out)
{
    unsigned int cap = NVML_PROCS_INITIAL;
    unsigned char *buf = NULL;
    nvmlReturn_t rc = NVML_ERROR_UNKNOWN;
    unsigned int count = 0;
    /* Room for the widest entry we know of, whichever the driver writes. */
    const size_t room = sizeof(nvmlProcessInfo_cc_t);

    *out = NULL;
    *n_out = 0;
    for (int tries = 0; tries < NVML_PROCS_TRIES; tries++) {
        buf = xrealloc(buf, (size_t)cap * room);
        memset(buf, NVML_PROBE_BYTE, (size_t)cap * room);
        count = cap;
        rc = get(h, &count, buf);
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
            break;
        unsigned int want = count > cap ? count : cap * 2;
        cap = want + want / 4 + 4;
    }
    if (rc != NVML_SUCCESS) {
        free(buf);
        return rc;
    }
    if (count > cap)
        count = cap;

    /* One driver, one layout: probed once, by whichever GPU's reader comes first. */
    size_t step = __atomic_load_n(stride, __ATOMIC_RELAXED);
    if (!step && count > 0) {
        step = nvml_probe_stride(buf, count);
        __atomic_store_n(stride, step, __ATOMIC_RELAXED);
    }

    *out = count ? xcalloc(count, sizeof(**out)) : NULL;
    *n_out = count;
    for (unsigned int i = 0; i < count; i++) {
        unsigned int pid;
        unsigned long long used;
        /* pid and usedGpuMemory sit at the same offsets in every layout. */
        memcpy(&pid, buf + i * step + offsetof(nvmlProcessInfo_t, pid), sizeof(pid));
        memcpy(&used, buf + i * step + offsetof(nvmlProcessInfo_t, usedGpuMemory), sizeof(used));
        (*out)[i].pid = pid;
        (*out)[i].used_mib = used == NVML_VALUE_NOT_AVAILABLE ? -1 : (int64_t)(used >> 20);
    }
    free(buf);
    return NVML_SUCCESS;
}

/* Adds procs[0..n) to g's list, one entry per pid (a process that renders and computes
 * is in two lists; the larger memory figure is kept). */
static void nvml_merge_procs(struct gpu_info *g, const struct gpu_proc *procs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < g->n_procs && g->procs[k].pid != procs[i].pid)
            k++;
        if (k < g->n_procs) {
            if (procs[i].used_mib > g->procs[k].used_mib)
                g->procs[k].used_mib = procs[i].used_mib;
            continue;
        }
        g->procs = xrealloc(g->procs, (g->n_procs + 1) * sizeof(*g->procs));
        g->procs[g->n_procs++] = procs[i];
    }
}

/* Reads the compute, graphics and MPS processes of one GPU. Not knowing them is not
 * knowing whether the GPU is busy: any error of the compute list (NO_PERMISSION is what
 * a non-root caller gets on a MIG GPU) makes the GPU unavailable; so does any error but
 * NOT_SUPPORTED of the other two, which older drivers and some boards lack. */
static void nvml_read_procs(struct nvml *n, nvmlDevice_t h, struct gpu_info *g)
{
    struct gpu_proc *procs;
    size_t count;
    nvmlReturn_t rc;
    if (n->get_procs) {
        nvml_note_call("nvmlDeviceGetComputeRunningProcesses");
        rc = nvml_read_proclist(n->get_procs, &n->procs_stride, h, &procs, &count);
        if (rc != NVML_SUCCESS) {
            nvml_unavailable(n, g, rc, "nvmlDeviceGetComputeRunningProcesses");
            return;
        }
        nvml_merge_procs(g, procs, count);
        free(procs);
    }
    if (n->get_graphics_procs) {
        nvml_note_call("nvmlDeviceGetGraphicsRunningProcesses");
        rc = nvml_read_proclist(n->get_graphics_procs, &n->graphics_stride, h, &procs, &count);
        if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED) {
            nvml_unavailable(n, g, rc, "nvmlDeviceGetGraphicsRunningProcesses");
            return;
        }
        nvml_merge_procs(g, procs, count);
        free(procs);
    }
    if (n->get_mps_procs) {
        nvml_note_call("nvmlDeviceGetMPSComputeRunningProcesses");
        rc = nvml_read_proclist(n->get_mps_procs, &n->mps_stride, h, &procs, &count);
        if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED) {
            nvml_unavailable(n, g, rc, "nvmlDeviceGetMPSComputeRunningProcesses");
            return;
        }
        nvml_merge_procs(g, procs, count);
        free(procs);
    }
}

/* The NUMA node nearest the GPU's memory: nvmlDeviceGetNumaNodeId (r535+), else the
 * lowest node of nvmlDeviceGetMemoryAffinity. -1 when neither answers. */
static nvmlReturn_t nvml_read_numa(struct nvml *n, nvmlDevice_t h, struct gpu_info *g)
{
    nvmlReturn_t rc = NVML_ERROR_NOT_SUPPORTED;
    if (n->get_numa_node) {
        unsigned int node = 0;
        nvml_note_call("nvmlDeviceGetNumaNodeId");
        rc = n->get_numa_node(h, &node);
        if (rc == NVML_SUCCESS) {
            g->numa_node = (int)node;
            return rc;
        }
        if (rc == NVML_ERROR_GPU_IS_LOST)
            return rc;
    }
    if (n->get_memory_affinity) {
        unsigned long set[4] = {0};
        nvml_note_call("nvmlDeviceGetMemoryAffinity");
        rc = n->get_memory_affinity(h, 4, set, NVML_AFFINITY_SCOPE_NODE);
        if (rc == NVML_SUCCESS) {
            for (int w = 0; w < 4; w++)
                if (set[w]) {
                    g->numa_node = w * (int)(8 * sizeof(unsigned long)) + __builtin_ctzl(set[w]);
                    break;
                }
        }
    }
    return rc;
}

/* The GPU's local CPUs (those of its NUMA node; nvmlDeviceGetCpuAffinity fills
 * unsigned longs, CPU c in bit c % 64 of word c / 64 on a 64-bit machine). Unknown
 * (cpus_known false) when the call is missing or fails. */
static nvmlReturn_t nvml_read_cpus(struct nvml *n, nvmlDevice_t h, struct gpu_info *g)
{
    if (!n->get_cpu_affinity)
        return NVML_ERROR_NOT_SUPPORTED;
    enum { BITS = 8 * sizeof(unsigned long), WORDS = CPUMASK_MAX / BITS };
    unsigned long set[WORDS];
    memset(set, 0, sizeof(set));
    nvmlReturn_t rc = n->get_cpu_affinity(h, WORDS, set);
    if (rc != NVML_SUCCESS)
        return rc;
    memset(&g->cpus, 0, sizeof(g->cpus));
    for (int c = 0; c < CPUMASK_MAX; c++)
        if (set[c / BITS] >> (c % BITS) & 1)
            cpumask_set(&g->cpus, c);
    g->cpus_known = !cpumask_empty(&g->cpus);
    return rc;
}

/* Reads one device into g. Stops at the first GPU_IS_LOST, leaving g->lost set and the
 * remaining metrics unknown. What the scheduler cannot do without (handle, UUID, memory,
 * processes) makes the GPU unavailable when it cannot be read, with the NVML error as
 * the reason; a metric that cannot be read is only unknown. Each call is noted first
 * (nvml_note_call): a GPU whose call never returns is reported with its name. */
static void nvml_read_gpu(struct nvml *n, unsigned int index, struct nvml_dev *d,
                          struct gpu_info *g)
{
    nvmlReturn_t rc;
    g->index = (int)index;
    g->memory_used_mib = -1;
    g->memory_free_mib = -1;
    g->utilization_gpu = -1;
    g->temperature_c = -1;
    g->power_w = -1;
    g->numa_node = -1;
    g->cpus_known = false;
    g->minor = -1;

    nvml_note_call("nvmlDeviceGetHandleByIndex");
    rc = n->get_handle(index, &d->handle);
    if (rc != NVML_SUCCESS) {
        nvml_unavailable(n, g, rc, "nvmlDeviceGetHandleByIndex");
        return;
    }
    d->have_handle = true;

    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    buf[0] = 0;
    nvml_note_call("nvmlDeviceGetUUID");
    rc = n->get_uuid(d->handle, buf, sizeof(buf));
    if (rc == NVML_SUCCESS && buf[0]) {
        nvml_copy(g->uuid, sizeof(g->uuid), buf);
    } else {
        /* Without a UUID a job given the GPU by UUID would get CUDA_VISIBLE_DEVICES="". */
        if (rc == NVML_SUCCESS)
            snprintf(g->unavailable, sizeof(g->unavailable),
                     "NVML: empty UUID (nvmlDeviceGetUUID)");
        else
            nvml_unavailable(n, g, rc, "nvmlDeviceGetUUID");
        if (g->lost || g->version_mismatch)
            return;
    }
    buf[0] = 0;
    nvml_note_call("nvmlDeviceGetName");
    if (nvml_lost(n, g, rc = n->get_name(d->handle, buf, sizeof(buf)), "nvmlDeviceGetName"))
        return;
    if (rc == NVML_SUCCESS)
        nvml_copy(g->name, sizeof(g->name), buf);
    nvml_note_call("nvmlDeviceGetPciInfo");
    if (nvml_lost(n, g, nvml_read_pci(n, d, g), "nvmlDeviceGetPciInfo"))
        return;
    const char *mem_fn = "nvmlDeviceGetMemoryInfo";
    rc = nvml_read_memory(n, d->handle, g, &mem_fn);
    if (rc != NVML_SUCCESS) {
        nvml_unavailable(n, g, rc, mem_fn);
        if (g->lost || g->version_mismatch)
            return;
    } else if (g->memory_total_mib <= 0) {
        /* "?/0 MiB, idle" would take any job; nothing real has no memory. */
        if (!g->unavailable[0])
            snprintf(g->unavailable, sizeof(g->unavailable), "NVML: total memory is 0 (%s)",
                     mem_fn);
    }

    if (n->get_utilization) {
        nvmlUtilization_t u;
        nvml_note_call("nvmlDeviceGetUtilizationRates");
        if (nvml_lost(n, g, rc = n->get_utilization(d->handle, &u),
                      "nvmlDeviceGetUtilizationRates"))
            return;
        if (rc == NVML_SUCCESS)
            g->utilization_gpu = (int)u.gpu;
    }
    if (n->get_temperature) {
        unsigned int t;
        nvml_note_call("nvmlDeviceGetTemperature");
        if (nvml_lost(n, g, rc = n->get_temperature(d->handle, NVML_TEMPERATURE_GPU, &t),
                      "nvmlDeviceGetTemperature"))
            return;
        if (rc == NVML_SUCCESS)
            g->temperature_c = (int)t;
    }
    if (n->get_power) {
        unsigned int mw;
        nvml_note_call("nvmlDeviceGetPowerUsage");
        if (nvml_lost(n, g, rc = n->get_power(d->handle, &mw), "nvmlDeviceGetPowerUsage"))
            return;
        if (rc == NVML_SUCCESS)
            g->power_w = (int)((mw + 500) / 1000);
    }
    if (nvml_lost(n, g, nvml_read_numa(n, d->handle, g), "nvmlDeviceGetNumaNodeId") ||
        nvml_lost(n, g, nvml_read_cpus(n, d->handle, g), "nvmlDeviceGetCpuAffinity"))
        return;
    if (n->get_minor) {
        unsigned int minor;
        nvml_note_call("nvmlDeviceGetMinorNumber");
        if (nvml_lost(n, g, rc = n->get_minor(d->handle, &minor), "nvmlDeviceGetMinorNumber"))
            return;
        if (rc == NVML_SUCCESS)
            g->minor = (int)minor;
    }
    nvml_read_health(n, d->handle, g); /* optional readings; GPU_IS_LOST marks it lost */
    if (g->lost)
        return;
    nvml_read_procs(n, d->handle, g);
}

void nvml_read_device(struct nvml *n, unsigned int index, struct gpu_info *g, struct gpu_mig **migs,
                      size_t *n_migs)
{
    *migs = NULL;
    *n_migs = 0;
    if (index >= GPUINFO_MAX_GPUS)
        return;
    struct nvml_dev *d = &n->devs[index];
    memset(d, 0, sizeof(*d));
    nvml_read_gpu(n, index, d, g);
    /* Its MIG instances are part of its read: a GPU that hangs hides them too. */
    if (d->have_handle && !g->lost && !g->version_mismatch)
        nvml_mig_read_gpu(n, d->handle, g, migs, n_migs);
}

static enum gpu_link nvml_link_from_level(nvmlGpuTopologyLevel_t level)
{
    switch (level) {
    case NVML_TOPOLOGY_INTERNAL: /* two GPUs on one board (K80-style): as close as PCIe gets */
    case NVML_TOPOLOGY_SINGLE:
        return GPU_LINK_SINGLE;
    case NVML_TOPOLOGY_MULTIPLE:
        return GPU_LINK_MULTIPLE;
    case NVML_TOPOLOGY_HOSTBRIDGE:
        return GPU_LINK_HOSTBRIDGE;
    case NVML_TOPOLOGY_NODE:
        return GPU_LINK_NODE;
    case NVML_TOPOLOGY_SYSTEM:
        return GPU_LINK_SYSTEM;
    }
    return GPU_LINK_UNKNOWN;
}

/* Counts the NVLinks of GPU i: cnt[i * count + j] links whose far end is GPU j (matched
 * by PCI address), *switch_links those that go to an NVSwitch. Every link number up to
 * NVML_NVLINK_MAX_LINKS is asked: boards number their links with gaps, and a link
 * that answers INVALID_ARGUMENT or NOT_SUPPORTED says nothing of the next. */
static void nvml_read_nvlinks(struct nvml *n, struct nvml_dev *devs, size_t count, size_t i,
                              int *cnt, int *switch_links)
{
    *switch_links = 0;
    for (unsigned int l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
        nvmlEnableState_t on = NVML_FEATURE_DISABLED;
        if (n->get_link_state(devs[i].handle, l, &on) != NVML_SUCCESS || on != NVML_FEATURE_ENABLED)
            continue;
        nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
        if (n->get_link_remote_type &&
            n->get_link_remote_type(devs[i].handle, l, &type) == NVML_SUCCESS &&
            type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
            (*switch_links)++;
            continue;
        }
        nvmlPciInfo_t pci;
        memset(&pci, 0, sizeof(pci));
        if (!n->get_link_pci || n->get_link_pci(devs[i].handle, l, &pci) != NVML_SUCCESS)
            continue;
        for (size_t j = 0; j < count; j++) {
            if (j != i && devs[j].have_pci && devs[j].domain == pci.domain &&
                devs[j].bus == pci.bus && devs[j].device == pci.device)
                cnt[i * count + j]++;
        }
    }
}

/* Fills s->nvlinks: direct links as counted from either end; GPUs whose links go to
 * NVSwitches are joined with each other when NVML says their pair can talk over NVLink
 * (P2P status OK), by the links each has to the fabric (all pairs NV18 on an HGX H100). */
static void nvml_read_nvlink_matrix(struct nvml *n, struct nvml_dev *devs, struct gpu_set *s,
                                    uint64_t skip)
{
    size_t count = s->n_gpus;
    int *cnt = xcalloc(count * count, sizeof(*cnt));
    int *sw = xcalloc(count, sizeof(*sw));
    for (size_t i = 0; i < count; i++)
        if (devs[i].have_handle && !s->gpus[i].lost && !(skip & (1ULL << i)))
            nvml_read_nvlinks(n, devs, count, i, cnt, &sw[i]);
    s->nvlinks = xcalloc(count * count, sizeof(*s->nvlinks));
    for (size_t i = 0; i < count; i++) {
        for (size_t j = i + 1; j < count; j++) {
            int c =
                cnt[i * count + j] > cnt[j * count + i] ? cnt[i * count + j] : cnt[j * count + i];
            nvmlGpuP2PStatus_t st = NVML_P2P_STATUS_UNKNOWN;
            /* sw[] is 0 for a skipped GPU: no call touches it. */
            if (sw[i] > 0 && sw[j] > 0 && n->get_p2p &&
                n->get_p2p(devs[i].handle, devs[j].handle, NVML_P2P_CAPS_INDEX_NVLINK, &st) ==
                    NVML_SUCCESS &&
                st == NVML_P2P_STATUS_OK)
                c += sw[i] < sw[j] ? sw[i] : sw[j];
            s->nvlinks[i * count + j] = s->nvlinks[j * count + i] = c;
        }
    }
    free(cnt);
    free(sw);
}

/* Fills s->link from the PCIe common ancestors and s->nvlinks with the NVLink counts,
 * each fact kept apart: NVLink does not overwrite the PCIe level, which placement ranks
 * first (one NVSwitch fabric joins GPUs on both sockets). GPUs in skip (their reads
 * hang) are not asked. Left NULL when the library offers neither call. */
static void nvml_read_topology(struct nvml *n, struct nvml_dev *devs, struct gpu_set *s,
                               uint64_t skip)
{
    size_t count = s->n_gpus;
    bool have_links = n->get_link_state && (n->get_link_pci || n->get_link_remote_type);
    if (count == 0 || (!n->get_topology && !have_links))
        return;
    s->link = xcalloc(count * count, sizeof(*s->link));
    for (size_t i = 0; i < count; i++)
        for (size_t j = 0; j < count; j++)
            s->link[i * count + j] = i == j ? GPU_LINK_SELF : GPU_LINK_UNKNOWN;

    for (size_t i = 0; i < count; i++) {
        if (!devs[i].have_handle || s->gpus[i].lost || (skip & (1ULL << i)))
            continue;
        for (size_t j = i + 1; n->get_topology && j < count; j++) {
            if (!devs[j].have_handle || s->gpus[j].lost || (skip & (1ULL << j)))
                continue;
            nvmlGpuTopologyLevel_t level;
            if (n->get_topology(devs[i].handle, devs[j].handle, &level) == NVML_SUCCESS) {
                s->link[i * count + j] = nvml_link_from_level(level);
                s->link[j * count + i] = s->link[i * count + j];
            }
        }
    }
    if (have_links)
        nvml_read_nvlink_matrix(n, devs, s, skip);
}

int nvml_read_system(struct nvml *n, struct gpu_set *out, char **err)
{
    memset(out, 0, sizeof(*out));
    out->simulated = n->simulated;
    n->n_devs = 0;

    unsigned int count = 0;
    nvml_note_call("nvmlDeviceGetCount");
    nvmlReturn_t rc = n->get_count(&count);
    if (rc != NVML_SUCCESS) {
        *err = xasprintf("no GPUs: nvmlDeviceGetCount failed: %s", nvml_strerror(n, rc));
        return rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH ? NVML_READ_MISMATCH : -1;
    }
    if (count > GPUINFO_MAX_GPUS)
        count = GPUINFO_MAX_GPUS;

    if (n->get_driver_version) {
        char v[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
        v[0] = 0;
        nvml_note_call("nvmlSystemGetDriverVersion");
        rc = n->get_driver_version(v, sizeof(v));
        if (rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH) {
            *err =
                xasprintf("no GPUs: nvmlSystemGetDriverVersion failed: %s", nvml_strerror(n, rc));
            return NVML_READ_MISMATCH;
        }
        if (rc == NVML_SUCCESS)
            nvml_copy(out->driver_version, sizeof(out->driver_version), v);
    }
    out->n_gpus = count;
    out->gpus = count ? xcalloc(count, sizeof(*out->gpus)) : NULL;
    n->n_devs = count;
    return 0;
}

/* Appends migs[0..k) to s->migs (up to GPUINFO_MAX_MIGS; the rest are dropped) and frees
 * the array. */
static void nvml_add_migs(struct gpu_set *s, struct gpu_mig *migs, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        if (s->n_migs >= GPUINFO_MAX_MIGS) {
            free(migs[i].procs);
            continue;
        }
        s->migs = xrealloc(s->migs, (s->n_migs + 1) * sizeof(*s->migs));
        s->migs[s->n_migs++] = migs[i];
    }
    free(migs);
}

int nvml_read_devices(struct nvml *n, struct gpu_set *out, char **err)
{
    int rc = nvml_read_system(n, out, err);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < out->n_gpus; i++) {
        struct gpu_mig *migs;
        size_t k;
        nvml_read_device(n, (unsigned int)i, &out->gpus[i], &migs, &k);
        nvml_add_migs(out, migs, k);
    }
    return 0;
}

void nvml_read_links(struct nvml *n, struct gpu_set *s, uint64_t skip)
{
    free(s->link);
    s->link = NULL;
    free(s->nvlinks);
    s->nvlinks = NULL;
    if (s->n_gpus != n->n_devs)
        return; /* not the set of the last system read */
    nvml_read_topology(n, n->devs, s, skip);
}

int nvml_read(struct nvml *n, struct gpu_set *out, char **err)
{
    int rc = nvml_read_devices(n, out, err);
    if (rc < 0)
        return rc;
    nvml_read_links(n, out, 0);
    return 0;
}

/* ---- for nvml_mig.c ---- */

void *nvml_library(const struct nvml *n)
{
    return n->lib;
}

nvmlReturn_t nvml_device_handle(struct nvml *n, unsigned int index, nvmlDevice_t *h)
{
    return n->get_handle(index, h);
}

nvmlReturn_t nvml_read_instance(struct nvml *n, nvmlDevice_t h, struct gpu_info *g)
{
    nvmlReturn_t rc;
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    g->memory_used_mib = -1;
    g->memory_free_mib = -1;
    buf[0] = 0;
    nvml_note_call("nvmlDeviceGetUUID");
    if ((rc = n->get_uuid(h, buf, sizeof(buf))) != NVML_SUCCESS)
        return rc; /* an instance without its UUID cannot be handed to a job */
    nvml_copy(g->uuid, sizeof(g->uuid), buf);
    buf[0] = 0;
    nvml_note_call("nvmlDeviceGetName");
    if ((rc = n->get_name(h, buf, sizeof(buf))) == NVML_ERROR_GPU_IS_LOST)
        return rc;
    if (rc == NVML_SUCCESS)
        nvml_copy(g->name, sizeof(g->name), buf);
    const char *fn = "nvmlDeviceGetMemoryInfo";
    if ((rc = nvml_read_memory(n, h, g, &fn)) == NVML_ERROR_GPU_IS_LOST)
        return rc;
    if (rc != NVML_SUCCESS)
        nvml_unavailable(n, g, rc, fn);
    nvml_read_procs(n, h, g); /* an unreadable list makes the instance unavailable */
    return g->lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

const char *nvml_error_text(const struct nvml *n, nvmlReturn_t rc)
{
    return nvml_strerror(n, rc);
}
