/* nvml_sim: libgflow-nvml-sim.so, an NVML look-alike that answers from a JSON fixture
 * (path in $GFLOW_NVML_SIM; format in docs/simulator.md). It exports every NVML symbol
 * gflow's loader (src/daemon/nvml.c) uses, under the new and legacy names, plus
 * `gflowNvmlSimulated` so the loader can tell it apart from a real driver.
 *
 * The fixture is re-read on every call, so a test changes GPU state while a daemon runs
 * by rewriting the file atomically (write a temp file, rename it over). A device handle
 * is its index + 1, cast to a pointer: it stays valid across rewrites.
 *
 * Build variants for the loader's tests (compile definitions):
 *   NVML_SIM_LEGACY       only the unversioned names (nvmlInit, nvmlDeviceGetCount, ...),
 *                         with their old struct layouts (16-byte processes, busId first);
 *   NVML_SIM_NO_OPTIONAL  only the required symbols;
 *   NVML_SIM_PROC32       _v2/_v3 process lists (compute, graphics, MPS) with the
 *                         32-byte entries of some 535-series drivers.
 * Failures (init failure, a lost GPU, NOT_SUPPORTED) come from the fixture's "fail" maps,
 * calls that hang (a failing GPU) from its "hang" maps.
 *
 * This is a fake: it keeps one global init count, like NVML does, and the driver
 * version the library "was built for" (the fixture's driver_version at nvmlInit), under
 * a mutex: gflowd reads each GPU on a thread of its own (src/daemon/gpu/gpu_readers.c). */
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "nvml_sim.h"
#include "nvml_types.h"
#include "sim_p2p.h"

/* The symbols this library exports, with NVML's own signatures (nvml.h is not in
 * Debian; the types are nvml_types.h). */
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t rc);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem);
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *p);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *mem);
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *c);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfoLegacy_t *p);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, nvmlTemperatureSensors_t s,
                                      unsigned int *t);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, void *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, void *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c,
                                                  nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                 nvmlGpuTopologyLevel_t *level);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned int link, nvmlEnableState_t *on);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link,
                                                 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t dev, unsigned int *node);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t d, unsigned int link,
                                              nvmlPciInfoLegacy_t *pci);
nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t dev, unsigned int size, unsigned long *set,
                                         nvmlAffinityScope_t scope);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, void *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, void *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *c,
                                                   nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c,
                                                        void *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c,
                                                        void *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t d, unsigned int *c,
                                                     nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t dev, unsigned int *minor);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t dev, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t *type);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuP2PCapsIndex_t index,
                                    nvmlGpuP2PStatus_t *status);

/* The loader looks this up to say "simulated" in gflowd status and ginfo. */
SIM_EXPORT const int gflowNvmlSimulated = 1;

static pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;
static int sim_init_count;
/* The library's own version: the fixture's driver_version when NVML was initialised. */
static char sim_lib_version[96];

static int sim_inits(void)
{
    pthread_mutex_lock(&sim_mu);
    int n = sim_init_count;
    pthread_mutex_unlock(&sim_mu);
    return n;
}

/* A driver upgrade (docs/simulator.md): with "kernel_driver_version" in the fixture, the
 * loaded kernel module, a library whose version differs from it answers
 * LIB_RM_VERSION_MISMATCH to every call. `version`: the library's (NULL: the one it
 * was initialised with). */
static nvmlReturn_t sim_version_check(json_t *root, const char *version)
{
    const char *kernel = json_string_value(json_object_get(root, "kernel_driver_version"));
    if (!kernel)
        return NVML_SUCCESS;
    pthread_mutex_lock(&sim_mu);
    bool differs = strcmp(kernel, version ? version : sim_lib_version) != 0;
    pthread_mutex_unlock(&sim_mu);
    return differs ? NVML_ERROR_LIB_RM_VERSION_MISMATCH : NVML_SUCCESS;
}

/* The fixture as last parsed, and the text it was parsed from. gflowd asks many things
 * at each poll, and reading and parsing the file for each made an idle daemon on 4
 * simulated GPUs spend about 1% of a CPU. A call parses the file only when its text
 * differs from the last, and reads it only when stat says it may have changed: same
 * file, size and times, and last changed over a second before it was read (a change
 * within the file system's timestamp granularity of that read could hide behind equal
 * times, as git's racily clean entries). The parsed fixture is shared by the calls (each
 * holds a reference): nothing changes it after sim_mig_fill_defaults(). */
static pthread_mutex_t sim_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static char *sim_cache_text;
static size_t sim_cache_len;
static json_t *sim_cache_root;
static struct stat sim_cache_st;       /* the file's, when it was read */
static struct timespec sim_cache_read; /* when (CLOCK_REALTIME, as file times) */

static bool sim_same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Frees the cache when the library is unloaded (dlclose), so that nothing it holds is
 * left unreachable (LeakSanitizer in the unit tests that load and unload it). */
__attribute__((destructor)) static void sim_cache_free(void)
{
    json_decref(sim_cache_root);
    free(sim_cache_text);
    sim_cache_root = NULL;
    sim_cache_text = NULL;
}

/* The whole file in a malloc'd buffer (NULL: unreadable), and *st the stat of what was
 * read (a file replaced by rename since stat() is another file). */
static char *sim_read_file(const char *path, size_t *len, struct stat *st)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    if (fstat(fileno(f), st) != 0) {
        fclose(f);
        return NULL;
    }
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    bool failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* The parsed fixture of one call (the caller json_decref()s it). */
static json_t *sim_load(void)
{
    const char *path = getenv("GFLOW_NVML_SIM");
    if (!path || !*path)
        return NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return NULL;
    pthread_mutex_lock(&sim_cache_mu);
    if (sim_cache_root && sim_same_file(&st, &sim_cache_st) &&
        st.st_mtim.tv_sec + 1 < sim_cache_read.tv_sec &&
        st.st_ctim.tv_sec + 1 < sim_cache_read.tv_sec) {
        json_t *r = json_incref(sim_cache_root);
        pthread_mutex_unlock(&sim_cache_mu);
        return r;
    }
    pthread_mutex_unlock(&sim_cache_mu);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    size_t len;
    char *text = sim_read_file(path, &len, &st);
    if (!text)
        return NULL;
    pthread_mutex_lock(&sim_cache_mu);
    sim_cache_st = st;
    sim_cache_read = now;
    if (!sim_cache_root || len != sim_cache_len || memcmp(text, sim_cache_text, len) != 0) {
        json_t *root = json_loadb(text, len, 0, NULL);
        if (!root) {
            sim_cache_st.st_ino = 0; /* read it again next time */
            pthread_mutex_unlock(&sim_cache_mu);
            free(text);
            return NULL;
        }
        sim_mig_fill_defaults(root);
        json_decref(sim_cache_root);
        free(sim_cache_text);
        sim_cache_root = root;
        sim_cache_text = text;
        sim_cache_len = len;
        text = NULL;
    }
    json_t *r = json_incref(sim_cache_root);
    pthread_mutex_unlock(&sim_cache_mu);
    free(text);
    return r;
}

/* The error code configured for `fn` in a "fail" map: the exact name ("nvmlInit_v2")
 * first, then its base name without a _vN suffix ("nvmlInit"), so one fixture works
 * with every build variant. 0 when none. */
nvmlReturn_t sim_fail_in(json_t *map, const char *fn)
{
    if (!json_is_object(map))
        return NVML_SUCCESS;
    json_t *v = json_object_get(map, fn);
    if (!v) {
        char base[128];
        snprintf(base, sizeof(base), "%s", fn);
        char *u = strrchr(base, '_');
        if (u && u[1] == 'v' && u[2] >= '0' && u[2] <= '9')
            *u = 0;
        v = json_object_get(map, base);
    }
    return json_is_integer(v) ? (nvmlReturn_t)json_integer_value(v) : NVML_SUCCESS;
}

/* The seconds configured for `fn` in a "hang" map (looked up as in "fail"), 0 if none. */
static double sim_hang_in(json_t *map, const char *fn)
{
    if (!json_is_object(map))
        return 0;
    json_t *v = json_object_get(map, fn);
    if (!v) {
        char base[128];
        snprintf(base, sizeof(base), "%s", fn);
        char *u = strrchr(base, '_');
        if (u && u[1] == 'v' && u[2] >= '0' && u[2] <= '9')
            *u = 0;
        v = json_object_get(map, base);
    }
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* "hang": {"<function>": SECONDS} at the top level (gpu 0) or in GPU gpu's entry (its
 * index + 1): the call does not return for that long, as a failing GPU's calls do; the
 * fixture is read again every 50 ms, so removing the entry ends the hang at once. */
static void sim_hang(const char *fn, size_t gpu)
{
    const struct timespec step = {0, 50 * 1000 * 1000};
    for (double waited = 0;; waited += 0.05) {
        json_t *r = sim_load();
        json_t *scope = gpu ? json_array_get(json_object_get(r, "gpus"), gpu - 1) : r;
        double secs = sim_hang_in(json_object_get(scope, "hang"), fn);
        json_decref(r);
        if (secs <= waited)
            return;
        nanosleep(&step, NULL);
    }
}

/* Starts a call: loads the fixture and applies the global "fail" map. On success *root
 * holds the fixture (caller json_decref()s). */
nvmlReturn_t sim_begin(const char *fn, json_t **root, bool need_init)
{
    *root = NULL;
    if (need_init && sim_inits() <= 0)
        return NVML_ERROR_UNINITIALIZED;
    sim_hang(fn, 0);
    json_t *r = sim_load();
    if (!r)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    nvmlReturn_t rc = sim_fail_in(json_object_get(r, "fail"), fn);
    if (rc == NVML_SUCCESS && need_init)
        rc = sim_version_check(r, NULL);
    if (rc != NVML_SUCCESS) {
        json_decref(r);
        return rc;
    }
    *root = r;
    return NVML_SUCCESS;
}

/* Starts a per-device call: as sim_begin(), then finds the GPU and applies its own
 * "fail" map (e.g. {"nvmlDeviceGetMemoryInfo": 15} for a GPU that fell off the bus). */
nvmlReturn_t sim_begin_dev(const char *fn, nvmlDevice_t dev, json_t **root, json_t **gpu)
{
    if (sim_mig_is_handle(dev))
        return sim_mig_begin_dev(fn, dev, root, gpu);
    nvmlReturn_t rc = sim_begin(fn, root, true);
    if (rc != NVML_SUCCESS)
        return rc;
    size_t idx = (size_t)(uintptr_t)dev;
    json_t *gpus = json_object_get(*root, "gpus");
    if (idx == 0 || idx > json_array_size(gpus)) {
        json_decref(*root);
        *root = NULL;
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *gpu = json_array_get(gpus, idx - 1);
    if (json_object_get(*gpu, "hang")) {
        json_decref(*root);
        sim_hang(fn, idx);
        if ((rc = sim_begin(fn, root, true)) != NVML_SUCCESS)
            return rc; /* the fixture changed meanwhile */
        gpus = json_object_get(*root, "gpus");
        if (idx > json_array_size(gpus)) {
            json_decref(*root);
            *root = NULL;
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        *gpu = json_array_get(gpus, idx - 1);
    }
    rc = sim_fail_in(json_object_get(*gpu, "fail"), fn);
    if (rc != NVML_SUCCESS) {
        json_decref(*root);
        *root = NULL;
    }
    return rc;
}

long long sim_int(json_t *obj, const char *key, long long dflt)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (long long)json_real_value(v);
    return dflt;
}

const char *sim_str(json_t *obj, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : dflt;
}

/* Copies a string result the NVML way: INSUFFICIENT_SIZE when it does not fit. */
static nvmlReturn_t sim_put_str(char *dst, unsigned int len, const char *s)
{
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

/* Parses "DDDDDDDD:BB:DD.F" (or with a 4-digit domain). */
static void sim_parse_bus(const char *s, unsigned int *dom, unsigned int *bus, unsigned int *dev)
{
    unsigned int f = 0;
    *dom = *bus = *dev = 0;
    if (sscanf(s, "%x:%x:%x.%x", dom, bus, dev, &f) != 4)
        *dom = *bus = *dev = 0;
}

/* Fills an nvmlPciInfo_t (new layout) or the legacy one from a GPU entry. */
static void sim_fill_pci(json_t *gpu, size_t index, void *out, bool legacy)
{
    char def[32];
    snprintf(def, sizeof(def), "00000000:%02zX:00.0", index + 1);
    unsigned int dom, bus, dev;
    sim_parse_bus(sim_str(gpu, "pci_bus_id", def), &dom, &bus, &dev);
    if (legacy) {
        nvmlPciInfoLegacy_t *p = out;
        memset(p, 0, sizeof(*p));
        snprintf(p->busId, sizeof(p->busId), "%04X:%02X:%02X.0", dom & 0xffffu, bus, dev);
        p->domain = dom;
        p->bus = bus;
        p->device = dev;
        p->pciDeviceId = 0x233010de;
    } else {
        nvmlPciInfo_t *p = out;
        memset(p, 0, sizeof(*p));
        snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "%04X:%02X:%02X.0", dom & 0xffffu, bus,
                 dev);
        snprintf(p->busId, sizeof(p->busId), "%08X:%02X:%02X.0", dom, bus, dev);
        p->domain = dom;
        p->bus = bus;
        p->device = dev;
        p->pciDeviceId = 0x233010de;
    }
}

/* The process lists of a GPU, each like "processes". */
static const char *const sim_proc_keys[] = {"processes", "graphics_processes", "mps_processes"};

/* Whether pid is in list `k` of sim_proc_keys before position `before` of it, or in an
 * earlier list: a process listed twice uses its memory once. */
static bool sim_pid_seen(json_t *gpu, size_t k, size_t before, long long pid)
{
    for (size_t l = 0; l <= k; l++) {
        json_t *list = json_object_get(gpu, sim_proc_keys[l]);
        size_t end = l == k ? before : json_array_size(list);
        for (size_t i = 0; i < end; i++)
            if (sim_int(json_array_get(list, i), "pid", 0) == pid)
                return true;
    }
    return false;
}

/* Used memory in bytes: "memory_used_mib", else the sum of the known process memory. */
static unsigned long long sim_used_bytes(json_t *gpu)
{
    long long used = sim_int(gpu, "memory_used_mib", -1);
    if (used < 0) {
        used = 0;
        for (size_t k = 0; k < sizeof(sim_proc_keys) / sizeof(*sim_proc_keys); k++) {
            size_t i;
            json_t *p;
            json_array_foreach (json_object_get(gpu, sim_proc_keys[k]), i, p) {
                long long m = sim_int(p, "used_memory_mib", -1);
                if (m > 0 && !sim_pid_seen(gpu, k, i, sim_int(p, "pid", 0)))
                    used += m;
            }
        }
    }
    return (unsigned long long)used << 20;
}

/* ---- required ---- */

static nvmlReturn_t sim_init(const char *fn)
{
    json_t *r;
    nvmlReturn_t rc = sim_begin(fn, &r, false);
    if (rc != NVML_SUCCESS)
        return rc;
    /* A library loaded now is the one on disk: driver_version. */
    const char *version = sim_str(r, "driver_version", "gflow-sim");
    rc = sim_version_check(r, version);
    if (rc == NVML_SUCCESS) {
        pthread_mutex_lock(&sim_mu);
        if (sim_init_count++ == 0)
            snprintf(sim_lib_version, sizeof(sim_lib_version), "%s", version);
        pthread_mutex_unlock(&sim_mu);
    }
    json_decref(r);
    return rc;
}

static nvmlReturn_t sim_count(const char *fn, unsigned int *count)
{
    json_t *r;
    nvmlReturn_t rc = sim_begin(fn, &r, true);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count) {
        json_decref(r);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *count = (unsigned int)json_array_size(json_object_get(r, "gpus"));
    json_decref(r);
    return NVML_SUCCESS;
}

static nvmlReturn_t sim_handle(const char *fn, unsigned int index, nvmlDevice_t *dev)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev(fn, (nvmlDevice_t)(uintptr_t)(index + 1), &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    json_decref(r);
    if (!dev)
        return NVML_ERROR_INVALID_ARGUMENT;
    *dev = (nvmlDevice_t)(uintptr_t)(index + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t sim_pci(const char *fn, nvmlDevice_t dev, void *pci, bool legacy)
{
    if (sim_mig_is_handle(dev)) /* a MIG device has no PCI function of its own */
        return NVML_ERROR_INVALID_ARGUMENT;
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev(fn, dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (pci)
        sim_fill_pci(g, (size_t)(uintptr_t)dev - 1, pci, legacy);
    json_decref(r);
    return pci ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

SIM_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&sim_mu);
    nvmlReturn_t rc = sim_init_count <= 0 ? NVML_ERROR_UNINITIALIZED : NVML_SUCCESS;
    if (rc == NVML_SUCCESS)
        sim_init_count--;
    pthread_mutex_unlock(&sim_mu);
    return rc;
}

SIM_EXPORT const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch";
    default:
        return "Unknown Error";
    }
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetUUID", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    char def[64];
    snprintf(def, sizeof(def), "GPU-00000000-0000-0000-0000-%012zx", (size_t)(uintptr_t)dev - 1);
    rc = sim_put_str(uuid, len, sim_str(g, "uuid", def));
    json_decref(r);
    return rc;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetName", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    rc = sim_put_str(name, len, sim_str(g, "name", "Simulated GPU"));
    json_decref(r);
    return rc;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetMemoryInfo", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!mem) {
        json_decref(r);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    /* The legacy call counts the driver's reservation as used; _v2 does not. */
    mem->total = (unsigned long long)sim_int(g, "memory_total_mib", 0) << 20;
    mem->used =
        sim_used_bytes(g) + ((unsigned long long)sim_int(g, "memory_reserved_mib", 0) << 20);
    mem->free = mem->total > mem->used ? mem->total - mem->used : 0;
    json_decref(r);
    return NVML_SUCCESS;
}

#ifndef NVML_SIM_LEGACY
SIM_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    return sim_init("nvmlInit_v2");
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c)
{
    return sim_count("nvmlDeviceGetCount_v2", c);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    return sim_handle("nvmlDeviceGetHandleByIndex_v2", i, d);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    return sim_pci("nvmlDeviceGetPciInfo_v3", d, p, false);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    return sim_pci("nvmlDeviceGetPciInfo_v2", d, p, false);
}

/* Checks the version field like the driver: sizeof | 2 << 24, nothing else. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *mem)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetMemoryInfo_v2", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!mem || mem->version != NVML_MEMORY_V2_VERSION) {
        json_decref(r);
        return mem ? NVML_ERROR_ARGUMENT_VERSION_MISMATCH : NVML_ERROR_INVALID_ARGUMENT;
    }
    mem->total = (unsigned long long)sim_int(g, "memory_total_mib", 0) << 20;
    mem->reserved = (unsigned long long)sim_int(g, "memory_reserved_mib", 0) << 20;
    mem->used = sim_used_bytes(g);
    mem->free = mem->total > mem->used + mem->reserved ? mem->total - mem->used - mem->reserved : 0;
    json_decref(r);
    return NVML_SUCCESS;
}
#endif

SIM_EXPORT nvmlReturn_t nvmlInit(void)
{
    return sim_init("nvmlInit");
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *c)
{
    return sim_count("nvmlDeviceGetCount", c);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d)
{
    return sim_handle("nvmlDeviceGetHandleByIndex", i, d);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfoLegacy_t *p)
{
    return sim_pci("nvmlDeviceGetPciInfo", d, p, true);
}

/* ---- optional ---- */
#ifndef NVML_SIM_NO_OPTIONAL

/* Reads one integer metric; NOT_SUPPORTED when the fixture leaves it out or sets null,
 * as a real GPU does for e.g. power on many consumer boards. */
static nvmlReturn_t sim_metric(const char *fn, nvmlDevice_t dev, const char *key, long long mul,
                               unsigned int *out)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev(fn, dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    long long v = sim_int(g, key, -1);
    json_decref(r);
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (v < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *out = (unsigned int)(v * mul);
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u)
{
    unsigned int v = 0;
    nvmlReturn_t rc = sim_metric("nvmlDeviceGetUtilizationRates", dev, "utilization_gpu", 1, &v);
    if (rc == NVML_SUCCESS && u) {
        u->gpu = v;
        u->memory = 0;
    }
    return rc;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, nvmlTemperatureSensors_t s,
                                                 unsigned int *t)
{
    if (s != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    return sim_metric("nvmlDeviceGetTemperature", dev, "temperature_c", 1, t);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw)
{
    return sim_metric("nvmlDeviceGetPowerUsage", dev, "power_w", 1000, mw);
}

/* The process list, NVML style: with too small a capacity, the count needed and
 * INSUFFICIENT_SIZE. `stride` is the entry size of the entry point called. A
 * "used_memory_mib" of null or below 0 is written as ~0ULL (not available). */
static nvmlReturn_t sim_procs(const char *fn, const char *key, nvmlDevice_t dev,
                              unsigned int *count, void *infos, size_t stride)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev(fn, dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!count) {
        json_decref(r);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    json_t *procs = json_object_get(g, key);
    unsigned int n = (unsigned int)json_array_size(procs);
    if (*count < n || (n > 0 && !infos)) {
        *count = n;
        json_decref(r);
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < n; i++) {
        json_t *p = json_array_get(procs, i);
        long long mib = sim_int(p, "used_memory_mib", -1);
        nvmlProcessInfo_cc_t e;
        memset(&e, 0, sizeof(e));
        e.pid = (unsigned int)sim_int(p, "pid", 0);
        e.usedGpuMemory = mib < 0 ? NVML_VALUE_NOT_AVAILABLE : (unsigned long long)mib << 20;
        /* A MIG instance's processes carry its ids; ~0 elsewhere. */
        e.gpuInstanceId = sim_mig_is_handle(dev) ? (unsigned int)sim_int(g, "gi_id", 0) : ~0u;
        e.computeInstanceId = sim_mig_is_handle(dev) ? (unsigned int)sim_int(g, "ci_id", 0) : ~0u;
        e.usedGpuCcProtectedMemory = 0;
        /* The first `stride` bytes of the widest layout are each narrower layout. */
        memcpy((unsigned char *)infos + i * stride, &e, stride);
    }
    *count = n;
    json_decref(r);
    return NVML_SUCCESS;
}

#ifdef NVML_SIM_PROC32
#define SIM_PROC_STRIDE sizeof(nvmlProcessInfo_cc_t)
#else
#define SIM_PROC_STRIDE sizeof(nvmlProcessInfo_t)
#endif

#ifndef NVML_SIM_LEGACY
SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c,
                                                                void *infos)
{
    return sim_procs("nvmlDeviceGetComputeRunningProcesses_v3", "processes", d, c, infos,
                     SIM_PROC_STRIDE);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c,
                                                                void *infos)
{
    return sim_procs("nvmlDeviceGetComputeRunningProcesses_v2", "processes", d, c, infos,
                     SIM_PROC_STRIDE);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *c,
                                                                 void *infos)
{
    return sim_procs("nvmlDeviceGetGraphicsRunningProcesses_v3", "graphics_processes", d, c, infos,
                     SIM_PROC_STRIDE);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *c,
                                                                 void *infos)
{
    return sim_procs("nvmlDeviceGetGraphicsRunningProcesses_v2", "graphics_processes", d, c, infos,
                     SIM_PROC_STRIDE);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c,
                                                                   void *infos)
{
    return sim_procs("nvmlDeviceGetMPSComputeRunningProcesses_v3", "mps_processes", d, c, infos,
                     SIM_PROC_STRIDE);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c,
                                                                   void *infos)
{
    return sim_procs("nvmlDeviceGetMPSComputeRunningProcesses_v2", "mps_processes", d, c, infos,
                     SIM_PROC_STRIDE);
}
#endif
SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c,
                                                             nvmlProcessInfo_v1_t *infos)
{
    return sim_procs("nvmlDeviceGetComputeRunningProcesses", "processes", d, c, infos,
                     sizeof(nvmlProcessInfo_v1_t));
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *c,
                                                              nvmlProcessInfo_v1_t *infos)
{
    return sim_procs("nvmlDeviceGetGraphicsRunningProcesses", "graphics_processes", d, c, infos,
                     sizeof(nvmlProcessInfo_v1_t));
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t d, unsigned int *c,
                                                                nvmlProcessInfo_v1_t *infos)
{
    return sim_procs("nvmlDeviceGetMPSComputeRunningProcesses", "mps_processes", d, c, infos,
                     sizeof(nvmlProcessInfo_v1_t));
}

/* The /dev/nvidia<minor> of the GPU: "minor_number", the index when absent, NOT_SUPPORTED
 * when null (a GPU whose device node NVML cannot tell). */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t dev, unsigned int *minor)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetMinorNumber", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    json_t *v = json_object_get(g, "minor_number");
    if (!minor)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (json_is_null(v))
        rc = NVML_ERROR_NOT_SUPPORTED;
    else
        *minor = (unsigned int)sim_int(g, "minor_number", (long long)(uintptr_t)dev - 1);
    json_decref(r);
    return rc;
}

/* PCIe topology from the fixture: the same numa_node (absent counts as 0) is NODE,
 * else SYSTEM. NVLink is reported by the NvLink calls, as on real hardware where the
 * common ancestor is always a PCIe level. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                            nvmlGpuTopologyLevel_t *level)
{
    json_t *r, *ga, *gb;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetTopologyCommonAncestor", a, &r, &ga);
    if (rc != NVML_SUCCESS)
        return rc;
    json_decref(r);
    rc = sim_begin_dev("nvmlDeviceGetTopologyCommonAncestor", b, &r, &gb);
    if (rc != NVML_SUCCESS)
        return rc;
    ga = json_array_get(json_object_get(r, "gpus"), (size_t)(uintptr_t)a - 1);
    if (!level) {
        json_decref(r);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (a == b)
        *level = NVML_TOPOLOGY_INTERNAL;
    else if (sim_int(ga, "numa_node", 0) != sim_int(gb, "numa_node", 0))
        *level = NVML_TOPOLOGY_SYSTEM;
    else if (sim_int(ga, "pcie_switch", -1) >= 0 &&
             sim_int(ga, "pcie_switch", -1) == sim_int(gb, "pcie_switch", -2))
        *level = NVML_TOPOLOGY_SINGLE; /* one PCIe switch (PIX) */
    else
        *level = NVML_TOPOLOGY_NODE;
    json_decref(r);
    return NVML_SUCCESS;
}

/* What link k of a GPU is: the k-th entry of its "nvlink" list (a peer GPU, or null for
 * a link number the board lacks), then its "nvswitch_links" links to NVSwitches, then
 * nothing. */
enum sim_link { SIM_LINK_NONE, SIM_LINK_GAP, SIM_LINK_GPU, SIM_LINK_SWITCH };

static enum sim_link sim_link_kind(json_t *gpu, unsigned int link, long long *peer)
{
    json_t *peers = json_object_get(gpu, "nvlink");
    size_t n = json_array_size(peers);
    if (link < n) {
        json_t *p = json_array_get(peers, link);
        if (!json_is_integer(p))
            return SIM_LINK_GAP;
        *peer = json_integer_value(p);
        return SIM_LINK_GPU;
    }
    return link < n + (size_t)sim_int(gpu, "nvswitch_links", 0) ? SIM_LINK_SWITCH : SIM_LINK_NONE;
}

/* Whether the GPU has NVLink at all: without "nvlink" and "nvswitch_links" it is a
 * PCIe-only board (NOT_SUPPORTED). */
static bool sim_has_nvlink(json_t *gpu)
{
    return json_is_array(json_object_get(gpu, "nvlink")) || sim_int(gpu, "nvswitch_links", 0) > 0;
}

/* A link number the board lacks answers INVALID_ARGUMENT, as on boards with gaps. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned int link,
                                                 nvmlEnableState_t *on)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetNvLinkState", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    long long peer;
    enum sim_link kind = sim_link_kind(g, link, &peer);
    if (!sim_has_nvlink(g))
        rc = NVML_ERROR_NOT_SUPPORTED;
    else if (link >= NVML_NVLINK_MAX_LINKS || !on || kind == SIM_LINK_GAP)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else
        *on = kind != SIM_LINK_NONE ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    json_decref(r);
    return rc;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t dev, unsigned int link,
                                                            nvmlIntNvLinkDeviceType_t *type)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetNvLinkRemoteDeviceType", dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    long long peer;
    enum sim_link kind = sim_link_kind(g, link, &peer);
    if (!sim_has_nvlink(g))
        rc = NVML_ERROR_NOT_SUPPORTED;
    else if (!type || kind == SIM_LINK_GAP || kind == SIM_LINK_NONE)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else
        *type =
            kind == SIM_LINK_SWITCH ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
    json_decref(r);
    return rc;
}

/* NVLink P2P is OK between two GPUs that both have NVSwitch links, or when one lists the
 * other in "nvlink"; the other capabilities (read, write, atomics) are OK over NVLink or
 * PCIe, unless a GPU says "pcie_p2p": false (sim_p2p.c, which the fake libcuda shares). */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b,
                                               nvmlGpuP2PCapsIndex_t index,
                                               nvmlGpuP2PStatus_t *status)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev("nvmlDeviceGetP2PStatus", a, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    json_decref(r);
    rc = sim_begin_dev("nvmlDeviceGetP2PStatus", b, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!status || index >= NVML_P2P_CAPS_INDEX_UNKNOWN) {
        json_decref(r);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    json_t *gpus = json_object_get(r, "gpus");
    size_t ia = (size_t)(uintptr_t)a - 1, ib = (size_t)(uintptr_t)b - 1;
    bool ok;
    if (index == NVML_P2P_CAPS_INDEX_NVLINK) {
        ok = sim_p2p_nvlink(gpus, ia, ib);
        *status = ok ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
    } else {
        ok = sim_p2p_access(gpus, ia, ib);
        *status = ok ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_CHIPSET_NOT_SUPPORED;
    }
    json_decref(r);
    return NVML_SUCCESS;
}

static nvmlReturn_t sim_link_pci(const char *fn, nvmlDevice_t dev, unsigned int link, void *pci,
                                 bool legacy)
{
    json_t *r, *g;
    nvmlReturn_t rc = sim_begin_dev(fn, dev, &r, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    json_t *gpus = json_object_get(r, "gpus");
    long long peer = -1;
    enum sim_link kind = sim_link_kind(g, link, &peer);
    if (!sim_has_nvlink(g))
        rc = NVML_ERROR_NOT_SUPPORTED;
    else if (!pci || kind == SIM_LINK_GAP || kind == SIM_LINK_NONE)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (kind == SIM_LINK_SWITCH) {
        /* An NVSwitch's own PCI function, on a domain no simulated GPU uses. */
        json_t *sw = json_pack("{s:s}", "pci_bus_id", "0000FFFF:00:00.0");
        sim_fill_pci(sw, 0, pci, legacy);
        json_decref(sw);
    } else if (peer < 0 || (size_t)peer >= json_array_size(gpus))
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else
        sim_fill_pci(json_array_get(gpus, (size_t)peer), (size_t)peer, pci, legacy);
    json_decref(r);
    return rc;
}

#ifndef NVML_SIM_LEGACY
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link,
                                                            nvmlPciInfo_t *pci)
{
    return sim_link_pci("nvmlDeviceGetNvLinkRemotePciInfo_v2", d, link, pci, false);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t dev, unsigned int *node)
{
    return sim_metric("nvmlDeviceGetNumaNodeId", dev, "numa_node", 1, node);
}
#endif
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t d, unsigned int link,
                                                         nvmlPciInfoLegacy_t *pci)
{
    return sim_link_pci("nvmlDeviceGetNvLinkRemotePciInfo", d, link, pci, true);
}

/* The older way to learn the NUMA node: a bitmask of nodes near the GPU's memory. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t dev, unsigned int size,
                                                    unsigned long *set, nvmlAffinityScope_t scope)
{
    unsigned int node = 0;
    nvmlReturn_t rc = sim_metric("nvmlDeviceGetMemoryAffinity", dev, "numa_node", 1, &node);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!set || scope != NVML_AFFINITY_SCOPE_NODE || node / (8 * sizeof(unsigned long)) >= size)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(set, 0, size * sizeof(*set));
    set[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
    json_t *r;
    nvmlReturn_t rc = sim_begin("nvmlSystemGetDriverVersion", &r, true);
    if (rc != NVML_SUCCESS)
        return rc;
    /* The kernel module's version, as the real library reports. */
    const char *v = sim_str(r, "kernel_driver_version", sim_str(r, "driver_version", "gflow-sim"));
    rc = sim_put_str(version, len, v);
    json_decref(r);
    return rc;
}
#endif /* NVML_SIM_NO_OPTIONAL */
