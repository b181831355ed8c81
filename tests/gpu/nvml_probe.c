/* nvml_probe: raw evidence of what this machine's NVML answers, for tests/gpu/check.sh
 * and for whoever reads its output when gflow and the hardware disagree. It asks NVML
 * directly (dlopen, its own declarations, every symbol optional) rather than through
 * gflow's loader, so it shows the driver's answers, not our reading of them:
 * count v1 vs v2, memory v1 vs v2, index vs /dev/nvidia minor, MIG mode and instances,
 * NVLink state / remote type / remote PCI per link, P2P status per pair (NVLink, read,
 * write, atomics), the PCIe common ancestor per pair, the raw bytes of the first
 * process-list entries of each list version (the stride the driver really writes), and
 * the health answers gflow's drain decisions rest on: ECC mode and uncorrectable counts
 * (volatile, aggregate), retired pages and their pending status, remapped rows, the
 * throttle (clock event) reasons bitmask and the compute mode.
 *
 * Output: key=value lines; a failed call gives key=error:<code> <NVML's string>, a
 * missing symbol key=missing. Library: $GFLOW_NVML_LIBRARY, else libnvidia-ml.so.1.
 * Exit status: 0 (whatever NVML answered), 1 the library cannot be loaded or nvmlInit
 * fails, 2 usage. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;

/* nvmlPciInfo_t of nvml.h (the layout of nvmlDeviceGetPciInfo_v2/_v3). */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} probe_pci_t;

typedef struct {
    unsigned long long total, free, used;
} probe_mem_v1_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} probe_mem_v2_t;

#define PROBE_MEM_V2_VERSION ((unsigned int)(sizeof(probe_mem_v2_t) | (2u << 24)))
#define PROBE_MAX_LINKS 18
#define PROBE_PROC_SLOTS 8
#define PROBE_PROC_SLOT_BYTES 64
#define PROBE_FILL 0xA5

static void *lib;
static const char *(*p_err)(nvmlReturn_t);

static void *sym(const char *name)
{
    return dlsym(lib, name);
}

/* The first of the names that the library exports. */
static void *sym2(const char *a, const char *b)
{
    void *f = sym(a);
    return f || !b ? f : sym(b);
}

static void put_err(const char *key, nvmlReturn_t rc)
{
    printf("%s=error:%d %s\n", key, rc, p_err ? p_err(rc) : "");
}

static void put_missing(const char *key)
{
    printf("%s=missing\n", key);
}

typedef nvmlReturn_t (*str_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*uint_fn)(nvmlDevice_t, unsigned int *);

static void dev_str(const char *key, const char *fn, nvmlDevice_t d)
{
    str_fn f = (str_fn)sym(fn);
    char buf[256];
    if (!f) {
        put_missing(key);
        return;
    }
    nvmlReturn_t rc = f(d, buf, sizeof(buf));
    if (rc) {
        put_err(key, rc);
        return;
    }
    printf("%s=%s\n", key, buf);
}

static void dev_uint(const char *key, const char *fn, nvmlDevice_t d)
{
    uint_fn f = (uint_fn)sym(fn);
    unsigned int v = 0;
    if (!f) {
        put_missing(key);
        return;
    }
    nvmlReturn_t rc = f(d, &v);
    if (rc) {
        put_err(key, rc);
        return;
    }
    printf("%s=%u\n", key, v);
}

/* Memory through the legacy call (reserved counted as used) and through _v2. */
static void dev_memory(const char *pfx, nvmlDevice_t d)
{
    char key[128];
    nvmlReturn_t (*v1)(nvmlDevice_t, probe_mem_v1_t *) = sym("nvmlDeviceGetMemoryInfo");
    nvmlReturn_t (*v2)(nvmlDevice_t, probe_mem_v2_t *) = sym("nvmlDeviceGetMemoryInfo_v2");
    snprintf(key, sizeof(key), "%s.memory_v1", pfx);
    if (!v1) {
        put_missing(key);
    } else {
        probe_mem_v1_t m = {0};
        nvmlReturn_t rc = v1(d, &m);
        if (rc)
            put_err(key, rc);
        else
            printf("%s=total:%llu free:%llu used:%llu (MiB %llu/%llu/%llu)\n", key, m.total, m.free,
                   m.used, m.total >> 20, m.free >> 20, m.used >> 20);
    }
    snprintf(key, sizeof(key), "%s.memory_v2", pfx);
    if (!v2) {
        put_missing(key);
    } else {
        probe_mem_v2_t m = {.version = PROBE_MEM_V2_VERSION};
        nvmlReturn_t rc = v2(d, &m);
        if (rc)
            put_err(key, rc);
        else
            printf("%s=total:%llu reserved:%llu free:%llu used:%llu (MiB %llu/%llu/%llu/%llu)\n",
                   key, m.total, m.reserved, m.free, m.used, m.total >> 20, m.reserved >> 20,
                   m.free >> 20, m.used >> 20);
    }
}

/* One process list: its return code, count, and the raw bytes the driver wrote into a
 * buffer pre-filled with 0xA5 (where the fill stops is the entry size in use). */
static void dev_procs(const char *pfx, const char *what, const char *fn, nvmlDevice_t d)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", pfx, what);
    nvmlReturn_t (*f)(nvmlDevice_t, unsigned int *, void *) = sym(fn);
    if (!f) {
        put_missing(key);
        return;
    }
    static unsigned char buf[PROBE_PROC_SLOTS * PROBE_PROC_SLOT_BYTES];
    memset(buf, PROBE_FILL, sizeof(buf));
    unsigned int count = PROBE_PROC_SLOTS;
    nvmlReturn_t rc = f(d, &count, buf);
    if (rc) {
        put_err(key, rc);
        if (rc == 7) /* INSUFFICIENT_SIZE: count says how many there are */
            printf("%s.needed=%u\n", key, count);
        return;
    }
    size_t last = 0;
    for (size_t i = 0; i < sizeof(buf); i++)
        if (buf[i] != PROBE_FILL)
            last = i + 1;
    printf("%s=count:%u written_bytes:%zu\n", key, count, last);
    if (count == 0)
        return;
    printf("%s.raw=", key);
    size_t show = last < 2 * PROBE_PROC_SLOT_BYTES ? last + 8 : 2 * PROBE_PROC_SLOT_BYTES;
    for (size_t i = 0; i < show && i < sizeof(buf); i++)
        printf("%02x%s", buf[i], (i + 1) % 8 == 0 ? " " : "");
    printf("\n");
    /* The pid (first field) of entry 1 for each known stride, to read the layout off. */
    static const size_t strides[] = {16, 24, 32, 40};
    for (size_t s = 0; s < sizeof(strides) / sizeof(strides[0]); s++) {
        unsigned int pid0, pid1;
        unsigned long long mem0;
        memcpy(&pid0, buf, sizeof(pid0));
        memcpy(&mem0, buf + 8, sizeof(mem0));
        memcpy(&pid1, buf + strides[s], sizeof(pid1));
        printf("%s.stride%zu=pid0:%u mem0_mib:%llu pid1:%u\n", key, strides[s], pid0,
               mem0 == ~0ULL ? 0 : mem0 >> 20, count > 1 ? pid1 : 0);
    }
}

/* One counter through fn(dev, a, b, &value): ECC totals (error type, counter type). */
static void dev_ecc_count(const char *key, nvmlDevice_t d, int type, int counter)
{
    nvmlReturn_t (*f)(nvmlDevice_t, int, int, unsigned long long *) =
        sym("nvmlDeviceGetTotalEccErrors");
    unsigned long long v = 0;
    nvmlReturn_t rc;
    if (!f)
        put_missing(key);
    else if ((rc = f(d, type, counter, &v)) != 0)
        put_err(key, rc);
    else
        printf("%s=%llu\n", key, v);
}

static const char *compute_mode(unsigned int m)
{
    static const char *const names[] = {"Default", "ExclusiveThread", "Prohibited",
                                        "ExclusiveProcess"};
    return m < 4 ? names[m] : "?";
}

/* The health answers, raw (nvml.h's signatures; every symbol optional):
 * nvmlDeviceGetEccMode(dev, *current, *pending), nvmlDeviceGetTotalEccErrors(dev,
 * NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1, NVML_VOLATILE_ECC 0 | NVML_AGGREGATE_ECC 1, *count),
 * nvmlDeviceGetRetiredPages(dev, cause 0 multiple single-bit | 1 double-bit, *count, NULL)
 * with count 0 (asks the number), nvmlDeviceGetRetiredPagesPendingStatus(dev, *pending),
 * nvmlDeviceGetRemappedRows(dev, *corr, *unc, *pending, *failed),
 * nvmlDeviceGetCurrentClocksEventReasons (or the older ...ThrottleReasons)(dev, *mask),
 * nvmlDeviceGetComputeMode(dev, *mode). */
static void dev_health(const char *pfx, nvmlDevice_t d)
{
    char key[128];
    nvmlReturn_t rc;
    nvmlReturn_t (*mode)(nvmlDevice_t, unsigned int *, unsigned int *) =
        sym("nvmlDeviceGetEccMode");
    unsigned int cur = 0, pend = 0;
    snprintf(key, sizeof(key), "%s.ecc_mode", pfx);
    if (!mode)
        put_missing(key);
    else if ((rc = mode(d, &cur, &pend)) != 0)
        put_err(key, rc);
    else
        printf("%s=current:%u pending:%u\n", key, cur, pend);
    snprintf(key, sizeof(key), "%s.ecc_uncorrected_volatile", pfx);
    dev_ecc_count(key, d, 1, 0);
    snprintf(key, sizeof(key), "%s.ecc_uncorrected_aggregate", pfx);
    dev_ecc_count(key, d, 1, 1);

    nvmlReturn_t (*pages)(nvmlDevice_t, int, unsigned int *, unsigned long long *) =
        sym("nvmlDeviceGetRetiredPages");
    static const char *const causes[] = {"multiple_single_bit", "double_bit"};
    for (int c = 0; c < 2; c++) {
        unsigned int count = 0;
        snprintf(key, sizeof(key), "%s.retired_pages.%s", pfx, causes[c]);
        if (!pages)
            put_missing(key);
        else if ((rc = pages(d, c, &count, NULL)) != 0 && rc != 7) /* 7: INSUFFICIENT_SIZE */
            put_err(key, rc);
        else
            printf("%s=%u\n", key, count);
    }
    uint_fn pending = (uint_fn)sym("nvmlDeviceGetRetiredPagesPendingStatus");
    snprintf(key, sizeof(key), "%s.retired_pages_pending", pfx);
    unsigned int v = 0;
    if (!pending)
        put_missing(key);
    else if ((rc = pending(d, &v)) != 0)
        put_err(key, rc);
    else
        printf("%s=%u\n", key, v);

    nvmlReturn_t (*rows)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *,
                         unsigned int *) = sym("nvmlDeviceGetRemappedRows");
    unsigned int corr = 0, unc = 0, rpend = 0, failed = 0;
    snprintf(key, sizeof(key), "%s.remapped_rows", pfx);
    if (!rows)
        put_missing(key);
    else if ((rc = rows(d, &corr, &unc, &rpend, &failed)) != 0)
        put_err(key, rc);
    else
        printf("%s=correctable:%u uncorrectable:%u pending:%u failed:%u\n", key, corr, unc, rpend,
               failed);

    nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long *) =
        sym2("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
    unsigned long long mask = 0;
    snprintf(key, sizeof(key), "%s.throttle_reasons", pfx);
    if (!reasons)
        put_missing(key);
    else if ((rc = reasons(d, &mask)) != 0)
        put_err(key, rc);
    else
        printf("%s=0x%llx\n", key, mask);

    uint_fn cmode = (uint_fn)sym("nvmlDeviceGetComputeMode");
    snprintf(key, sizeof(key), "%s.compute_mode", pfx);
    if (!cmode)
        put_missing(key);
    else if ((rc = cmode(d, &v)) != 0)
        put_err(key, rc);
    else
        printf("%s=%u %s\n", key, v, compute_mode(v));
}

static const char *remote_type(int t)
{
    switch (t) {
    case 0:
        return "GPU";
    case 1:
        return "IBMNPU";
    case 2:
        return "SWITCH";
    default:
        return "UNKNOWN";
    }
}

static void dev_nvlink(const char *pfx, nvmlDevice_t d)
{
    nvmlReturn_t (*state)(nvmlDevice_t, unsigned int, int *) = sym("nvmlDeviceGetNvLinkState");
    nvmlReturn_t (*rtype)(nvmlDevice_t, unsigned int, int *) =
        sym("nvmlDeviceGetNvLinkRemoteDeviceType");
    nvmlReturn_t (*rpci)(nvmlDevice_t, unsigned int, probe_pci_t *) =
        sym("nvmlDeviceGetNvLinkRemotePciInfo_v2");
    nvmlReturn_t (*ver)(nvmlDevice_t, unsigned int, unsigned int *) =
        sym("nvmlDeviceGetNvLinkVersion");
    char key[128];
    snprintf(key, sizeof(key), "%s.nvlink", pfx);
    if (!state) {
        put_missing(key);
        return;
    }
    int up = 0;
    for (unsigned int l = 0; l < PROBE_MAX_LINKS; l++) {
        int on = 0;
        snprintf(key, sizeof(key), "%s.nvlink.%u", pfx, l);
        nvmlReturn_t rc = state(d, l, &on);
        if (rc) {
            put_err(key, rc); /* recorded: a scan must not stop at the first error */
            continue;
        }
        if (!on) {
            printf("%s=down\n", key);
            continue;
        }
        up++;
        char line[256];
        int n = snprintf(line, sizeof(line), "up");
        int t = -1;
        if (rtype) {
            rc = rtype(d, l, &t);
            n += snprintf(line + n, sizeof(line) - (size_t)n, " remote_type:%s",
                          rc ? "error" : remote_type(t));
            if (rc)
                n += snprintf(line + n, sizeof(line) - (size_t)n, "(%d)", rc);
        } else {
            n += snprintf(line + n, sizeof(line) - (size_t)n, " remote_type:missing");
        }
        probe_pci_t pci;
        memset(&pci, 0, sizeof(pci));
        if (rpci && rpci(d, l, &pci) == 0)
            n += snprintf(line + n, sizeof(line) - (size_t)n, " remote_pci:%s", pci.busId);
        unsigned int v = 0;
        if (ver && ver(d, l, &v) == 0)
            snprintf(line + n, sizeof(line) - (size_t)n, " version:%u", v);
        printf("%s=%s\n", key, line);
    }
    printf("%s.nvlink_up=%d\n", pfx, up);
}

static void dev_mig(const char *pfx, nvmlDevice_t d)
{
    char key[128];
    nvmlReturn_t (*mode)(nvmlDevice_t, unsigned int *, unsigned int *) =
        sym("nvmlDeviceGetMigMode");
    snprintf(key, sizeof(key), "%s.mig_mode", pfx);
    if (!mode) {
        put_missing(key);
        return;
    }
    unsigned int cur = 0, pend = 0;
    nvmlReturn_t rc = mode(d, &cur, &pend);
    if (rc) {
        put_err(key, rc); /* NOT_SUPPORTED on boards without MIG */
        return;
    }
    printf("%s=current:%u pending:%u\n", key, cur, pend);
    if (!cur)
        return;
    uint_fn maxc = (uint_fn)sym("nvmlDeviceGetMaxMigDeviceCount");
    nvmlReturn_t (*byidx)(nvmlDevice_t, unsigned int, nvmlDevice_t *) =
        sym("nvmlDeviceGetMigDeviceHandleByIndex");
    unsigned int max = 0;
    snprintf(key, sizeof(key), "%s.mig_max", pfx);
    if (!maxc || !byidx) {
        put_missing(key);
        return;
    }
    rc = maxc(d, &max);
    if (rc) {
        put_err(key, rc);
        return;
    }
    printf("%s=%u\n", key, max);
    int found = 0;
    for (unsigned int i = 0; i < max; i++) {
        nvmlDevice_t m;
        if (byidx(d, i, &m) != 0)
            continue; /* NOT_FOUND: an empty slot */
        char mp[96];
        snprintf(mp, sizeof(mp), "%s.mig.%d", pfx, found++);
        snprintf(key, sizeof(key), "%s.slot", mp);
        printf("%s=%u\n", key, i);
        snprintf(key, sizeof(key), "%s.uuid", mp);
        dev_str(key, "nvmlDeviceGetUUID", m);
        snprintf(key, sizeof(key), "%s.name", mp);
        dev_str(key, "nvmlDeviceGetName", m);
        snprintf(key, sizeof(key), "%s.gpu_instance_id", mp);
        dev_uint(key, "nvmlDeviceGetGpuInstanceId", m);
        snprintf(key, sizeof(key), "%s.compute_instance_id", mp);
        dev_uint(key, "nvmlDeviceGetComputeInstanceId", m);
        dev_memory(mp, m);
        dev_procs(mp, "compute_procs_v3", "nvmlDeviceGetComputeRunningProcesses_v3", m);
    }
    printf("%s.mig_count=%d\n", pfx, found);
}

static const char *p2p_status(int s)
{
    static const char *const names[] = {"OK",
                                        "CHIPSET_NOT_SUPPORTED",
                                        "GPU_NOT_SUPPORTED",
                                        "IOH_TOPOLOGY_NOT_SUPPORTED",
                                        "DISABLED_BY_REGKEY",
                                        "NOT_SUPPORTED",
                                        "UNKNOWN"};
    return s >= 0 && s <= 6 ? names[s] : "?";
}

static const char *topo_level(int l)
{
    switch (l) {
    case 0:
        return "INTERNAL";
    case 10:
        return "SINGLE(PIX)";
    case 20:
        return "MULTIPLE(PXB)";
    case 30:
        return "HOSTBRIDGE(PHB)";
    case 40:
        return "NODE";
    case 50:
        return "SYSTEM(SYS)";
    default:
        return "?";
    }
}

static void pairs(nvmlDevice_t *devs, unsigned int n)
{
    nvmlReturn_t (*p2p)(nvmlDevice_t, nvmlDevice_t, int, int *) = sym("nvmlDeviceGetP2PStatus");
    nvmlReturn_t (*anc)(nvmlDevice_t, nvmlDevice_t, int *) =
        sym("nvmlDeviceGetTopologyCommonAncestor");
    /* nvmlGpuP2PCapsIndex_t: READ 0, WRITE 1, NVLINK 2, ATOMICS 3. */
    static const char *const caps[] = {"read", "write", "nvlink", "atomics"};
    if (!p2p)
        put_missing("p2p");
    if (!anc)
        put_missing("topology");
    for (unsigned int a = 0; a < n; a++)
        for (unsigned int b = 0; b < n; b++) {
            if (a == b || !devs[a] || !devs[b])
                continue;
            char key[96];
            for (int c = 0; p2p && c < 4; c++) {
                int st = -1;
                snprintf(key, sizeof(key), "p2p.%u.%u.%s", a, b, caps[c]);
                nvmlReturn_t rc = p2p(devs[a], devs[b], c, &st);
                if (rc)
                    put_err(key, rc);
                else
                    printf("%s=%s\n", key, p2p_status(st));
            }
            int lvl = -1;
            snprintf(key, sizeof(key), "topology.%u.%u", a, b);
            if (anc) {
                nvmlReturn_t rc = anc(devs[a], devs[b], &lvl);
                if (rc)
                    put_err(key, rc);
                else
                    printf("%s=%s\n", key, topo_level(lvl));
            }
        }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr,
                "Usage: nvml_probe\nPrints what NVML answers, as key=value lines "
                "(library: $GFLOW_NVML_LIBRARY, else libnvidia-ml.so.1).\n");
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    const char *env = getenv("GFLOW_NVML_LIBRARY");
    const char *path = env && *env ? env : "libnvidia-ml.so.1";
    printf("library=%s\n", path);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("load=error %s\n", dlerror());
        fprintf(stderr, "nvml_probe: cannot load %s\n", path);
        return 1;
    }
    printf("simulated=%s\n", sym("gflowNvmlSimulated") ? "yes" : "no");
    p_err = sym("nvmlErrorString");
    nvmlReturn_t (*init)(void) = sym2("nvmlInit_v2", "nvmlInit");
    if (!init) {
        put_missing("init");
        return 1;
    }
    nvmlReturn_t rc = init();
    if (rc) {
        put_err("init", rc);
        fprintf(stderr, "nvml_probe: nvmlInit failed: %d\n", rc);
        return 1;
    }
    printf("init=ok\n");
    nvmlReturn_t (*sys_str)(char *, unsigned int) = sym("nvmlSystemGetDriverVersion");
    char buf[256];
    if (sys_str && sys_str(buf, sizeof(buf)) == 0)
        printf("driver_version=%s\n", buf);
    sys_str = sym("nvmlSystemGetNVMLVersion");
    if (sys_str && sys_str(buf, sizeof(buf)) == 0)
        printf("nvml_version=%s\n", buf);

    unsigned int n = 0, n1 = 0;
    nvmlReturn_t (*count2)(unsigned int *) = sym("nvmlDeviceGetCount_v2");
    nvmlReturn_t (*count1)(unsigned int *) = sym("nvmlDeviceGetCount");
    if (!count2)
        put_missing("count_v2");
    else if ((rc = count2(&n)) != 0)
        put_err("count_v2", rc);
    else
        printf("count_v2=%u\n", n);
    if (!count1)
        put_missing("count_v1");
    else if ((rc = count1(&n1)) != 0)
        put_err("count_v1", rc);
    else
        printf("count_v1=%u\n", n1);
    if (!count2)
        n = n1;

    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *) =
        sym2("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    nvmlReturn_t (*pci)(nvmlDevice_t, probe_pci_t *) =
        sym2("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
    nvmlDevice_t *devs = calloc(n ? n : 1, sizeof(*devs));
    for (unsigned int i = 0; i < n && devs && handle; i++) {
        char pfx[32], key[96];
        snprintf(pfx, sizeof(pfx), "gpu.%u", i);
        snprintf(key, sizeof(key), "%s.handle", pfx);
        if ((rc = handle(i, &devs[i])) != 0) {
            devs[i] = NULL;
            put_err(key, rc);
            continue;
        }
        snprintf(key, sizeof(key), "%s.name", pfx);
        dev_str(key, "nvmlDeviceGetName", devs[i]);
        snprintf(key, sizeof(key), "%s.uuid", pfx);
        dev_str(key, "nvmlDeviceGetUUID", devs[i]);
        snprintf(key, sizeof(key), "%s.pci_bus_id", pfx);
        probe_pci_t p;
        memset(&p, 0, sizeof(p));
        if (!pci)
            put_missing(key);
        else if ((rc = pci(devs[i], &p)) != 0)
            put_err(key, rc);
        else
            printf("%s=%s\n", key, p.busId);
        snprintf(key, sizeof(key), "%s.index", pfx);
        dev_uint(key, "nvmlDeviceGetIndex", devs[i]);
        snprintf(key, sizeof(key), "%s.minor", pfx);
        dev_uint(key, "nvmlDeviceGetMinorNumber", devs[i]);
        snprintf(key, sizeof(key), "%s.numa_node", pfx);
        dev_uint(key, "nvmlDeviceGetNumaNodeId", devs[i]);
        dev_memory(pfx, devs[i]);
        dev_health(pfx, devs[i]);
        dev_mig(pfx, devs[i]);
        dev_nvlink(pfx, devs[i]);
        dev_procs(pfx, "compute_procs_v3", "nvmlDeviceGetComputeRunningProcesses_v3", devs[i]);
        dev_procs(pfx, "compute_procs_v2", "nvmlDeviceGetComputeRunningProcesses_v2", devs[i]);
        dev_procs(pfx, "compute_procs_v1", "nvmlDeviceGetComputeRunningProcesses", devs[i]);
        dev_procs(pfx, "graphics_procs_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3", devs[i]);
        dev_procs(pfx, "mps_procs_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v3", devs[i]);
    }
    if (devs)
        pairs(devs, n);
    free(devs);
    nvmlReturn_t (*shutdown)(void) = sym("nvmlShutdown");
    if (shutdown)
        shutdown();
    return 0;
}
