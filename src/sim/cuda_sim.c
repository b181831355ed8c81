/* cuda_sim: libgflow-cuda-sim.so, a fake of the CUDA driver API (libcuda.so.1) for the
 * GPUs of the NVML simulator's fixture ($GFLOW_NVML_SIM, docs/simulator.md). It lets
 * tests/gpu/check.sh and its probe (tests/gpu/cuda_probe.c) run in `make check` exactly
 * as on a real machine: what a job sees through CUDA, and what NVML then reports.
 *
 * It numbers devices as CUDA does: all GPUs fastest first (the fixture's "cuda_speed",
 * higher first, ties in PCI order), or in PCI bus order with CUDA_DEVICE_ORDER=PCI_BUS_ID;
 * then CUDA_VISIBLE_DEVICES, when set, picks from them: indices into that order, GPU-
 * UUIDs (a unique prefix is enough) and MIG-<uuid> (one MIG device, which ends the list);
 * the first invalid or repeated entry ends the list, and "" means no device at all.
 * A GPU with "cuda_hidden": true is not there for CUDA (NVML lists it; its device node
 * is out of reach), and the fixture's "cuda_init_sleep_secs" makes cuInit that slow.
 *
 * A context makes the process visible to NVML like a real driver does: cuCtxCreate adds
 * {"pid", "used_memory_mib"} to the device's "processes" in the fixture (the object whose
 * "uuid" is the device's, so a MIG instance's own list), cuMemAlloc grows it, and
 * cuCtxDestroy or the process's exit removes it. Each change is an atomic rewrite of the
 * fixture (temp file + rename) under the lock file "<fixture>.lock", so readers never
 * see half a file and two processes never lose each other's entries. Entries of processes
 * that died without cleaning up (SIGKILL) are dropped at the next rewrite.
 *
 * Only what the probe needs is implemented; it is not thread-safe. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "sim_p2p.h"

#define CU_EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef struct cu_ctx *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct {
    char bytes[16];
} CUuuid;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_UNKNOWN = 999,
};

/* What a context costs on the device, as a real one costs a few hundred MiB. */
#define CU_SIM_CONTEXT_MIB 256

CU_EXPORT CUresult cuInit(unsigned int flags);
CU_EXPORT CUresult cuDriverGetVersion(int *version);
CU_EXPORT CUresult cuDeviceGetCount(int *count);
CU_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CU_EXPORT CUresult cuDeviceGetPCIBusId(char *bus_id, int len, CUdevice dev);
CU_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CU_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CU_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
CU_EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev);
CU_EXPORT CUresult cuCtxCreate(CUcontext *ctx, unsigned int flags, CUdevice dev);
CU_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx);
CU_EXPORT CUresult cuCtxDestroy(CUcontext ctx);
CU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes);
CU_EXPORT CUresult cuMemAlloc(CUdeviceptr *ptr, unsigned int bytes);
CU_EXPORT CUresult cuGetErrorString(CUresult rc, const char **str);
CU_EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer);

/* Marks the process entries this library wrote, with the writer's start time, so that a
 * rewrite can tell a dead writer's entry from anybody else's. */
#define CU_SIM_MARK "cuda_sim_start"

struct cu_dev {
    char uuid[96];   /* GPU-... or MIG-... */
    char bus_id[32]; /* as CUDA writes it: 0000:BB:DD.0 */
    char name[96];
    size_t index; /* the GPU's in the fixture */
    bool mig;
};

struct cu_ctx {
    int dev;
    long long mib; /* what this context holds: CU_SIM_CONTEXT_MIB + allocations */
};

static struct cu_dev *cu_devs;
static int cu_n_devs;
static bool cu_inited;
static CUresult cu_init_rc = CUDA_ERROR_NOT_INITIALIZED;
static struct cu_ctx *cu_current;
static bool cu_atexit_set;

/* ---- the fixture ---- */

static const char *cu_fixture(void)
{
    const char *p = getenv("GFLOW_NVML_SIM");
    return p && *p ? p : NULL;
}

static const char *cu_str(json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

/* The fixture's PCI address ("DDDDDDDD:BB:DD.F", default as the NVML simulator) in the
 * form CUDA writes it and as a sort key. */
static unsigned long long cu_bus(json_t *gpu, size_t index, char *out, size_t len)
{
    char def[32];
    snprintf(def, sizeof(def), "00000000:%02zX:00.0", index + 1);
    unsigned int dom = 0, bus = 0, dev = 0, fn = 0;
    if (sscanf(cu_str(gpu, "pci_bus_id", def), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
        dom = bus = dev = fn = 0;
    if (out)
        snprintf(out, len, "%04X:%02X:%02X.%X", dom & 0xffffu, bus, dev, fn);
    return ((unsigned long long)dom << 32) | (bus << 16) | (dev << 8) | fn;
}

static void cu_gpu_uuid(json_t *gpu, size_t index, char *out, size_t len)
{
    char def[64];
    snprintf(def, sizeof(def), "GPU-00000000-0000-0000-0000-%012zx", index);
    snprintf(out, len, "%s", cu_str(gpu, "uuid", def));
}

/* Finds, below `o`, the object whose "uuid" is `uuid` (a MIG instance, wherever the
 * fixture keeps them). */
static json_t *cu_find_uuid(json_t *o, const char *uuid)
{
    if (json_is_object(o)) {
        const char *u = json_string_value(json_object_get(o, "uuid"));
        if (u && strcmp(u, uuid) == 0)
            return o;
        const char *k;
        json_t *v;
        json_object_foreach (o, k, v) {
            json_t *f = cu_find_uuid(v, uuid);
            if (f)
                return f;
        }
    } else if (json_is_array(o)) {
        size_t i;
        json_t *v;
        json_array_foreach (o, i, v) {
            json_t *f = cu_find_uuid(v, uuid);
            if (f)
                return f;
        }
    }
    return NULL;
}

/* Finds a MIG instance by its full UUID below `gpu`; its object, or NULL. */
static json_t *cu_find_mig(json_t *gpu, const char *uuid)
{
    return strncmp(uuid, "MIG-", 4) == 0 ? cu_find_uuid(gpu, uuid) : NULL;
}

/* ---- enumeration ---- */

struct cu_gpu {
    size_t index; /* in the fixture */
    unsigned long long bus;
    long long speed;
    char uuid[96];
};

static bool cu_pci_order;

static int cu_cmp(const void *a, const void *b)
{
    const struct cu_gpu *x = a, *y = b;
    if (!cu_pci_order && x->speed != y->speed)
        return x->speed > y->speed ? -1 : 1;
    return x->bus < y->bus ? -1 : x->bus > y->bus;
}

static void cu_add(json_t *root, const struct cu_gpu *g, json_t *mig)
{
    json_t *gpu = json_array_get(json_object_get(root, "gpus"), g->index);
    struct cu_dev *d = &cu_devs[cu_n_devs++];
    d->index = g->index;
    d->mig = mig != NULL;
    cu_bus(gpu, g->index, d->bus_id, sizeof(d->bus_id));
    const char *gname = cu_str(gpu, "name", "Simulated GPU");
    if (mig) {
        snprintf(d->uuid, sizeof(d->uuid), "%s", cu_str(mig, "uuid", ""));
        const char *profile = cu_str(mig, "profile", "");
        snprintf(d->name, sizeof(d->name), "%s", cu_str(mig, "name", ""));
        if (!d->name[0])
            snprintf(d->name, sizeof(d->name), "%s MIG %s", gname, profile);
    } else {
        snprintf(d->uuid, sizeof(d->uuid), "%s", g->uuid);
        snprintf(d->name, sizeof(d->name), "%s", gname);
    }
}

static bool cu_all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* Applies CUDA_VISIBLE_DEVICES to the ordered GPUs, as CUDA does. */
static void cu_select(json_t *root, struct cu_gpu *gpus, size_t n, const char *visible)
{
    char *copy = strdup(visible);
    bool *used = calloc(n ? n : 1, sizeof(bool));
    char *save = NULL;
    /* strtok_r would skip empty entries, which end the list for CUDA. */
    char *p = copy;
    while (p && copy && used) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        save = comma ? comma + 1 : NULL;
        while (isspace((unsigned char)*p))
            p++;
        size_t l = strlen(p);
        while (l > 0 && isspace((unsigned char)p[l - 1]))
            p[--l] = '\0';
        long pick = -1;
        json_t *mig = NULL;
        if (cu_all_digits(p)) {
            unsigned long v = strtoul(p, NULL, 10);
            if (v < n)
                pick = (long)v;
        } else if (strncmp(p, "GPU-", 4) == 0) {
            for (size_t i = 0; i < n; i++)
                if (strncmp(gpus[i].uuid, p, l) == 0) {
                    if (pick >= 0) { /* ambiguous prefix */
                        pick = -1;
                        break;
                    }
                    pick = (long)i;
                }
        } else if (strncmp(p, "MIG-", 4) == 0) {
            json_t *all = json_object_get(root, "gpus");
            for (size_t i = 0; i < n && !mig; i++) {
                mig = cu_find_mig(json_array_get(all, gpus[i].index), p);
                if (mig)
                    pick = (long)i;
            }
        }
        if (pick < 0 || used[pick])
            break;
        used[pick] = true;
        cu_add(root, &gpus[pick], mig);
        if (mig)
            break; /* CUDA uses one MIG device per process */
        p = save;
    }
    free(used);
    free(copy);
}

/* Whether a device cgroup denies this process the GPU's device node, so that CUDA,
 * which numbers only the GPUs it can open, leaves it out (with daemon.constrain_devices).
 * The simulator's GPUs have no /dev/nvidia<minor>: with $GFLOW_CUDA_SIM_DEV_DIR set, the
 * node of the fixture's "minor_number" (default the index) is looked for there, where a
 * test made it with mknod (c 195 <minor>). Opening it asks the kernel's device cgroup:
 * EPERM is a denial; ENXIO (no driver behind the node) is an allowed GPU. */
static bool cu_dev_denied(json_t *gpu, size_t index)
{
    const char *dir = getenv("GFLOW_CUDA_SIM_DEV_DIR");
    json_t *minor = json_object_get(gpu, "minor_number");
    if (!dir || !*dir || json_is_null(minor))
        return false;
    char path[4096];
    snprintf(path, sizeof(path), "%s/nvidia%lld", dir,
             json_is_integer(minor) ? json_integer_value(minor) : (long long)index);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return false;
    }
    return errno == EPERM || errno == EACCES;
}

static CUresult cu_enumerate(void)
{
    const char *path = cu_fixture();
    json_t *root = path ? json_load_file(path, 0, NULL) : NULL;
    if (!root)
        return CUDA_ERROR_NO_DEVICE;
    json_t *all = json_object_get(root, "gpus");
    size_t n = json_array_size(all);
    struct cu_gpu *gpus = calloc(n ? n : 1, sizeof(*gpus));
    cu_devs = calloc(n ? n : 1, sizeof(*cu_devs));
    if (!gpus || !cu_devs) {
        free(gpus);
        json_decref(root);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *g = json_array_get(all, i);
        if (cu_dev_denied(g, i) || json_is_true(json_object_get(g, "cuda_hidden")))
            continue; /* CUDA does not see a GPU it may not open (its node denied, or
                         * out of reach: cuda_hidden) though NVML lists it */
        size_t k = kept++;
        gpus[k].index = i;
        gpus[k].bus = cu_bus(g, i, NULL, 0);
        json_t *sp = json_object_get(g, "cuda_speed");
        gpus[k].speed = json_is_integer(sp) ? json_integer_value(sp) : 0;
        cu_gpu_uuid(g, i, gpus[k].uuid, sizeof(gpus[k].uuid));
    }
    n = kept;
    const char *order = getenv("CUDA_DEVICE_ORDER");
    cu_pci_order = order && strcmp(order, "PCI_BUS_ID") == 0;
    qsort(gpus, n, sizeof(*gpus), cu_cmp);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (visible)
        cu_select(root, gpus, n, visible);
    else
        for (size_t i = 0; i < n; i++)
            cu_add(root, &gpus[i], NULL);
    free(gpus);
    json_decref(root);
    /* As the real driver: cuInit itself fails when nothing is visible. */
    return cu_n_devs > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

/* ---- registering this process in the fixture ---- */

static long long cu_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    /* Field 22 (starttime) is the 20th after the one closing the command name. */
    p += 2;
    for (int i = 0; i < 19 && p; i++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return p ? strtoll(p, NULL, 10) : -1;
}

/* Drops process entries this library wrote whose writer is gone (killed without
 * cleaning up), everywhere below `o`, and their MiB from the containing object's
 * "memory_used_mib" where the fixture gives one. */
static void cu_prune(json_t *o)
{
    if (json_is_array(o)) {
        size_t i;
        json_t *v;
        json_array_foreach (o, i, v)
            cu_prune(v);
        return;
    }
    if (!json_is_object(o))
        return;
    json_t *procs = json_object_get(o, "processes");
    for (size_t i = 0; json_is_array(procs) && i < json_array_size(procs);) {
        json_t *p = json_array_get(procs, i);
        json_t *mark = json_object_get(p, CU_SIM_MARK);
        json_t *pid = json_object_get(p, "pid");
        if (json_is_integer(mark) && json_is_integer(pid) &&
            cu_start_time((pid_t)json_integer_value(pid)) != json_integer_value(mark)) {
            json_t *used = json_object_get(o, "memory_used_mib");
            json_t *mib = json_object_get(p, "used_memory_mib");
            if (json_is_integer(used) && json_is_integer(mib))
                json_object_set_new(
                    o, "memory_used_mib",
                    json_integer(json_integer_value(used) - json_integer_value(mib)));
            json_array_remove(procs, i);
        } else {
            i++;
        }
    }
    const char *k;
    json_t *v;
    json_object_foreach (o, k, v)
        if (strcmp(k, "processes") != 0)
            cu_prune(v);
}

/* Sets this process's memory on the device with `uuid` to `mib` (0: removes its entry),
 * keeping the object's "memory_used_mib" in step where the fixture gives one. */
static int cu_update(const char *uuid, long long mib)
{
    const char *path = cu_fixture();
    if (!path)
        return -1;
    char *lock = NULL, *tmp = NULL;
    if (asprintf(&lock, "%s.lock", path) < 0)
        return -1;
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(lock);
    if (lfd < 0)
        return -1;
    int rc = -1;
    json_t *root = NULL;
    if (flock(lfd, LOCK_EX) < 0)
        goto out;
    root = json_load_file(path, 0, NULL);
    json_t *dev = root ? cu_find_uuid(json_object_get(root, "gpus"), uuid) : NULL;
    if (!dev)
        goto out;
    cu_prune(json_object_get(root, "gpus"));
    pid_t me = getpid();
    json_t *procs = json_object_get(dev, "processes");
    if (!json_is_array(procs)) {
        procs = json_array();
        json_object_set_new(dev, "processes", procs);
    }
    long long before = 0;
    for (size_t i = 0; i < json_array_size(procs); i++) {
        json_t *p = json_array_get(procs, i);
        if (json_integer_value(json_object_get(p, "pid")) == me) {
            before = json_integer_value(json_object_get(p, "used_memory_mib"));
            json_array_remove(procs, i);
            break;
        }
    }
    if (mib > 0)
        json_array_append_new(procs, json_pack("{s:I, s:I, s:I}", "pid", (json_int_t)me,
                                               "used_memory_mib", (json_int_t)mib, CU_SIM_MARK,
                                               (json_int_t)cu_start_time(me)));
    json_t *used = json_object_get(dev, "memory_used_mib");
    if (json_is_integer(used))
        json_object_set_new(dev, "memory_used_mib",
                            json_integer(json_integer_value(used) - before + mib));
    if (asprintf(&tmp, "%s.cuda-sim.%d", path, (int)me) < 0) {
        tmp = NULL;
        goto out;
    }
    if (json_dump_file(root, tmp, JSON_INDENT(2)) == 0 && rename(tmp, path) == 0)
        rc = 0;
    else
        unlink(tmp);
out:
    free(tmp);
    json_decref(root);
    close(lfd); /* releases the lock */
    return rc;
}

/* A process that exits with its context still open leaves NVML's list, as with a real
 * driver. */
static void cu_exit(void)
{
    if (cu_current) {
        cu_update(cu_devs[cu_current->dev].uuid, 0);
        free(cu_current);
        cu_current = NULL;
    }
}

/* ---- the API ---- */

/* The fixture's "cuda_init_sleep_secs": cuInit takes that long, as a real one can on a
 * GPU that does not answer (gflowd's CUDA check must not wait for it). */
static void cu_init_delay(void)
{
    const char *path = cu_fixture();
    json_t *root = path ? json_load_file(path, 0, NULL) : NULL;
    json_t *secs = json_object_get(root, "cuda_init_sleep_secs");
    double d = json_is_number(secs) ? json_number_value(secs) : 0;
    json_decref(root);
    if (d > 0) {
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
    }
}

CU_EXPORT CUresult cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cu_inited) {
        cu_inited = true;
        cu_init_delay();
        cu_init_rc = cu_enumerate();
    }
    return cu_init_rc;
}

CU_EXPORT CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 12040;
    return CUDA_SUCCESS;
}

static CUresult cu_check_dev(CUdevice dev)
{
    if (cu_init_rc != CUDA_SUCCESS)
        return cu_init_rc;
    return dev >= 0 && dev < cu_n_devs ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CU_EXPORT CUresult cuDeviceGetCount(int *count)
{
    if (cu_init_rc != CUDA_SUCCESS)
        return cu_init_rc;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = cu_n_devs;
    return CUDA_SUCCESS;
}

CU_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    CUresult rc = cu_check_dev(ordinal);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

static CUresult cu_put(char *dst, int len, const char *s)
{
    if (!dst || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(dst, (size_t)len, "%s", s);
    return CUDA_SUCCESS;
}

CU_EXPORT CUresult cuDeviceGetPCIBusId(char *bus_id, int len, CUdevice dev)
{
    CUresult rc = cu_check_dev(dev);
    return rc != CUDA_SUCCESS ? rc : cu_put(bus_id, len, cu_devs[dev].bus_id);
}

CU_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = cu_check_dev(dev);
    return rc != CUDA_SUCCESS ? rc : cu_put(name, len, cu_devs[dev].name);
}

/* The 16 bytes behind "GPU-xxxxxxxx-xxxx-..." (or MIG-...). */
CU_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = cu_check_dev(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    memset(uuid, 0, sizeof(*uuid));
    const char *s = strchr(cu_devs[dev].uuid, '-');
    for (int i = 0; s && *s && i < 32;) {
        if (isxdigit((unsigned char)*s)) {
            int v = isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10);
            uuid->bytes[i / 2] = (char)(uuid->bytes[i / 2] | (i % 2 ? v : v << 4));
            i++;
        }
        s++;
    }
    return CUDA_SUCCESS;
}

CU_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid_v2(uuid, dev);
}

CU_EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    CUresult rc = cu_check_dev(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (cu_current) /* one context per process is all the probe needs */
        return CUDA_ERROR_INVALID_CONTEXT;
    struct cu_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return CUDA_ERROR_OPERATING_SYSTEM;
    c->dev = dev;
    c->mib = CU_SIM_CONTEXT_MIB;
    if (cu_update(cu_devs[dev].uuid, c->mib) < 0) {
        free(c);
        return CUDA_ERROR_UNKNOWN;
    }
    cu_current = c;
    if (!cu_atexit_set) {
        atexit(cu_exit);
        cu_atexit_set = true;
    }
    *ctx = c;
    return CUDA_SUCCESS;
}

CU_EXPORT CUresult cuCtxCreate(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v2(ctx, flags, dev);
}

CU_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    if (!ctx || ctx != cu_current)
        return CUDA_ERROR_INVALID_CONTEXT;
    cu_update(cu_devs[ctx->dev].uuid, 0);
    free(ctx);
    cu_current = NULL;
    return CUDA_SUCCESS;
}

CU_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    return cuCtxDestroy_v2(ctx);
}

/* Device memory is bookkeeping only: the fixture's process entry grows. */
CU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes)
{
    if (!cu_current)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!ptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    long long mib = cu_current->mib + (long long)((bytes + (1u << 20) - 1) >> 20);
    if (cu_update(cu_devs[cu_current->dev].uuid, mib) < 0)
        return CUDA_ERROR_UNKNOWN;
    cu_current->mib = mib;
    *ptr = 0x7f0000000000ULL;
    return CUDA_SUCCESS;
}

CU_EXPORT CUresult cuMemAlloc(CUdeviceptr *ptr, unsigned int bytes)
{
    return cuMemAlloc_v2(ptr, bytes);
}

CU_EXPORT CUresult cuGetErrorString(CUresult rc, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    switch (rc) {
    case CUDA_SUCCESS:
        *str = "no error";
        break;
    case CUDA_ERROR_INVALID_VALUE:
        *str = "invalid argument";
        break;
    case CUDA_ERROR_NOT_INITIALIZED:
        *str = "initialization error";
        break;
    case CUDA_ERROR_NO_DEVICE:
        *str = "no CUDA-capable device is detected";
        break;
    case CUDA_ERROR_INVALID_DEVICE:
        *str = "invalid device ordinal";
        break;
    case CUDA_ERROR_INVALID_CONTEXT:
        *str = "invalid device context";
        break;
    default:
        *str = "unknown error";
        break;
    }
    return CUDA_SUCCESS;
}

/* Peer access as NVML's P2P status gives it (sim_p2p.c): over NVLink, or over PCIe unless
 * the fixture says "pcie_p2p": false. A MIG instance has no peer access. */
CU_EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
    CUresult rc = cu_check_dev(dev);
    if (rc == CUDA_SUCCESS)
        rc = cu_check_dev(peer);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!can)
        return CUDA_ERROR_INVALID_VALUE;
    *can = 0;
    if (dev == peer || cu_devs[dev].mig || cu_devs[peer].mig)
        return CUDA_SUCCESS;
    const char *path = cu_fixture();
    json_t *root = path ? json_load_file(path, 0, NULL) : NULL;
    if (!root)
        return CUDA_ERROR_UNKNOWN;
    *can = sim_p2p_access(json_object_get(root, "gpus"), cu_devs[dev].index, cu_devs[peer].index);
    json_decref(root);
    return CUDA_SUCCESS;
}
