/* cuda_probe: what this process sees through the CUDA driver API (libcuda.so.1, which
 * ships with the NVIDIA driver: no toolkit needed), for tests/gpu/check.sh. It prints
 * key=value lines: its CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, the device count and
 * each device's PCI bus id, name and UUID. With --hold it creates a context on one
 * device (optionally allocating memory on it), so that the process appears in NVML's
 * process list, writes its pid to the --ready file and keeps the context for SECS
 * seconds or until SIGTERM/SIGINT, then destroys it.
 *
 * For the kit's isolation checks: --peers prints cuDeviceCanAccessPeer for every ordered
 * pair of its devices (what NCCL asks before it uses P2P); --open PATH (repeatable) opens
 * a device node as CUDA does (O_RDWR) and prints ok or the errno, with the process's
 * devices cgroup (daemon.constrain_devices); --visible VALUE sets CUDA_VISIBLE_DEVICES
 * before CUDA is loaded, as a library that resets the variable does (a stray process).
 *
 * The library is $GFLOW_CUDA_LIBRARY when set (the fake libgflow-cuda-sim.so in
 * `make check`), else libcuda.so.1. Every symbol but cuInit, cuDeviceGetCount,
 * cuDeviceGet and cuDeviceGetPCIBusId is optional. Exit status: 0 done (a process that
 * sees no device prints count=0), 1 a CUDA error, 2 usage. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

#define CUDA_ERROR_NO_DEVICE 100

static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetPCIBusId)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetUuid)(unsigned char *, CUdevice);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuCtxCreate)(CUcontext *, unsigned int, CUdevice);
static CUresult (*p_cuCtxDestroy)(CUcontext);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuGetErrorString)(CUresult, const char **);
static CUresult (*p_cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);

#define PROBE_MAX_OPEN 16

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static const char *cu_err(CUresult rc)
{
    const char *s = NULL;
    if (p_cuGetErrorString && p_cuGetErrorString(rc, &s) == 0 && s)
        return s;
    return "unknown error";
}

static void *sym(void *lib, const char *a, const char *b)
{
    void *f = dlsym(lib, a);
    return f || !b ? f : dlsym(lib, b);
}

static void usage(FILE *to)
{
    fprintf(to, "Usage: cuda_probe [--list] [--peers] [--open PATH]... [--visible VALUE]\n"
                "                  [--hold SECS] [--device N] [--alloc MIB] [--ready FILE]\n"
                "Prints the CUDA devices this process sees (count, PCI bus ids, names, UUIDs).\n"
                "--peers         also cuDeviceCanAccessPeer for every ordered pair of them\n"
                "--open PATH     open PATH (a /dev/nvidia<minor>) read-write first and print ok\n"
                "                or the errno, and this process's devices cgroup\n"
                "--visible VALUE set CUDA_VISIBLE_DEVICES to VALUE before loading CUDA\n"
                "--hold SECS     create a context on --device N (default 0), allocate --alloc\n"
                "                MIB, write the pid to --ready FILE and keep it SECS s or until\n"
                "                SIGTERM\n"
                "Library: $GFLOW_CUDA_LIBRARY, else libcuda.so.1.\n");
}

/* Writes the pid to path through a temp file, so a reader never sees half of it. */
static int write_ready(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%d\n", (int)getpid());
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return -1;
    return 0;
}

static const char *errno_name(int e)
{
    switch (e) {
    case EPERM:
        return "EPERM";
    case EACCES:
        return "EACCES";
    case ENOENT:
        return "ENOENT";
    case ENXIO:
        return "ENXIO";
    case ENODEV:
        return "ENODEV";
    default:
        return "errno";
    }
}

/* Opens each path as CUDA opens a GPU's node and prints open.K.path and open.K=ok or
 * error:<name> <text>, then the devices cgroup that decided it (cgroup v1; on v2 an
 * eBPF program decides, which /proc does not show). */
static void probe_opens(char **paths, int n)
{
    for (int i = 0; i < n; i++) {
        printf("open.%d.path=%s\n", i, paths[i]);
        int fd = open(paths[i], O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            printf("open.%d=ok\n", i);
        } else {
            int e = errno;
            printf("open.%d=error:%s %s\n", i, errno_name(e), strerror(e));
        }
    }
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024];
    const char *devices = "<none: no cgroup v1 devices controller>";
    static char found[1024];
    while (f && fgets(line, sizeof(line), f)) {
        char *c = strstr(line, ":devices:");
        if (c) {
            snprintf(found, sizeof(found), "%s", c + strlen(":devices:"));
            found[strcspn(found, "\n")] = '\0';
            devices = found;
        }
    }
    if (f)
        fclose(f);
    printf("cgroup.devices=%s\n", devices);
}

/* cuDeviceCanAccessPeer for every ordered pair: peer.A.B=1, 0 or error:<code>. */
static void probe_peers(int count)
{
    if (!p_cuDeviceCanAccessPeer) {
        printf("peer=missing\n");
        return;
    }
    for (int a = 0; a < count; a++)
        for (int b = 0; b < count; b++) {
            if (a == b)
                continue;
            CUdevice da, db;
            int can = -1;
            CUresult rc = p_cuDeviceGet(&da, a);
            if (rc == 0)
                rc = p_cuDeviceGet(&db, b);
            if (rc == 0)
                rc = p_cuDeviceCanAccessPeer(&can, da, db);
            if (rc != 0)
                printf("peer.%d.%d=error:%d %s\n", a, b, rc, cu_err(rc));
            else
                printf("peer.%d.%d=%d\n", a, b, can);
        }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double hold = -1;
    int device = 0;
    long alloc_mib = 0;
    const char *ready = NULL;
    bool peers = false;
    char *opens[PROBE_MAX_OPEN];
    int n_opens = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--list")) {
            /* the default; gives gbatch two words, so it runs a command, not a script */
        } else if (!strcmp(a, "--peers")) {
            peers = true;
        } else if (!strcmp(a, "--open") && v && n_opens < PROBE_MAX_OPEN) {
            opens[n_opens++] = argv[++i];
        } else if (!strcmp(a, "--visible") && v) {
            setenv("CUDA_VISIBLE_DEVICES", v, 1);
            i++;
        } else if (!strcmp(a, "--hold") && v) {
            hold = strtod(v, NULL);
            i++;
        } else if (!strcmp(a, "--device") && v) {
            device = atoi(v);
            i++;
        } else if (!strcmp(a, "--alloc") && v) {
            alloc_mib = atol(v);
            i++;
        } else if (!strcmp(a, "--ready") && v) {
            ready = v;
            i++;
        } else {
            fprintf(stderr, "cuda_probe: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    const char *env_lib = getenv("GFLOW_CUDA_LIBRARY");
    const char *path = env_lib && *env_lib ? env_lib : "libcuda.so.1";
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    const char *order = getenv("CUDA_DEVICE_ORDER");
    printf("library=%s\n", path);
    printf("pid=%d\n", (int)getpid());
    printf("CUDA_VISIBLE_DEVICES=%s\n", cvd ? cvd : "<unset>");
    printf("CUDA_DEVICE_ORDER=%s\n", order ? order : "<unset>");
    if (n_opens > 0)
        probe_opens(opens, n_opens);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cuda_probe: cannot load %s: %s\n", path, dlerror());
        return 1;
    }
    p_cuInit = sym(lib, "cuInit", NULL);
    p_cuDeviceGetCount = sym(lib, "cuDeviceGetCount", NULL);
    p_cuDeviceGet = sym(lib, "cuDeviceGet", NULL);
    p_cuDeviceGetPCIBusId = sym(lib, "cuDeviceGetPCIBusId", NULL);
    p_cuDeviceGetName = sym(lib, "cuDeviceGetName", NULL);
    p_cuDeviceGetUuid = sym(lib, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
    p_cuDriverGetVersion = sym(lib, "cuDriverGetVersion", NULL);
    p_cuCtxCreate = sym(lib, "cuCtxCreate_v2", "cuCtxCreate");
    p_cuCtxDestroy = sym(lib, "cuCtxDestroy_v2", "cuCtxDestroy");
    p_cuMemAlloc = sym(lib, "cuMemAlloc_v2", NULL);
    p_cuGetErrorString = sym(lib, "cuGetErrorString", NULL);
    p_cuDeviceCanAccessPeer = sym(lib, "cuDeviceCanAccessPeer", NULL);
    if (!p_cuInit || !p_cuDeviceGetCount || !p_cuDeviceGet || !p_cuDeviceGetPCIBusId) {
        fprintf(stderr,
                "cuda_probe: %s lacks cuInit/cuDeviceGetCount/cuDeviceGet/"
                "cuDeviceGetPCIBusId\n",
                path);
        return 1;
    }
    int version = 0;
    if (p_cuDriverGetVersion && p_cuDriverGetVersion(&version) == 0)
        printf("driver_api_version=%d\n", version);
    CUresult rc = p_cuInit(0);
    printf("cuInit=%d\n", rc);
    if (rc == CUDA_ERROR_NO_DEVICE) { /* what CUDA says when nothing is visible */
        printf("count=0\n");
        if (hold >= 0) {
            fprintf(stderr, "cuda_probe: no device to hold a context on\n");
            return 1;
        }
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "cuda_probe: cuInit failed: %d (%s)\n", rc, cu_err(rc));
        return 1;
    }
    int count = 0;
    rc = p_cuDeviceGetCount(&count);
    if (rc != 0) {
        fprintf(stderr, "cuda_probe: cuDeviceGetCount failed: %d (%s)\n", rc, cu_err(rc));
        return 1;
    }
    printf("count=%d\n", count);
    for (int i = 0; i < count; i++) {
        CUdevice d;
        char bus[64] = "", name[256] = "";
        unsigned char u[16];
        rc = p_cuDeviceGet(&d, i);
        if (rc == 0)
            rc = p_cuDeviceGetPCIBusId(bus, sizeof(bus), d);
        if (rc != 0) {
            fprintf(stderr, "cuda_probe: device %d: %d (%s)\n", i, rc, cu_err(rc));
            return 1;
        }
        printf("device.%d.bus_id=%s\n", i, bus);
        if (p_cuDeviceGetName && p_cuDeviceGetName(name, sizeof(name), d) == 0)
            printf("device.%d.name=%s\n", i, name);
        if (p_cuDeviceGetUuid && p_cuDeviceGetUuid(u, d) == 0)
            printf("device.%d.uuid=%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                   "%02x%02x%02x%02x%02x%02x\n",
                   i, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                   u[12], u[13], u[14], u[15]);
    }
    if (peers)
        probe_peers(count);
    fflush(stdout);
    if (hold < 0)
        return 0;

    if (!p_cuCtxCreate || !p_cuCtxDestroy) {
        fprintf(stderr, "cuda_probe: %s lacks cuCtxCreate/cuCtxDestroy\n", path);
        return 1;
    }
    if (device < 0 || device >= count) {
        fprintf(stderr, "cuda_probe: --device %d: only %d device(s) visible\n", device, count);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    CUdevice d;
    CUcontext ctx = NULL;
    rc = p_cuDeviceGet(&d, device);
    if (rc == 0)
        rc = p_cuCtxCreate(&ctx, 0, d);
    if (rc != 0) {
        fprintf(stderr, "cuda_probe: cuCtxCreate on device %d failed: %d (%s)\n", device, rc,
                cu_err(rc));
        return 1;
    }
    if (alloc_mib > 0) {
        CUdeviceptr ptr;
        rc = p_cuMemAlloc ? p_cuMemAlloc(&ptr, (size_t)alloc_mib << 20) : -1;
        if (rc != 0) {
            fprintf(stderr, "cuda_probe: cuMemAlloc of %ld MiB failed: %d (%s)\n", alloc_mib, rc,
                    cu_err(rc));
            p_cuCtxDestroy(ctx);
            return 1;
        }
    }
    printf("hold.device=%d\nhold.alloc_mib=%ld\nhold.secs=%g\n", device, alloc_mib, hold);
    fflush(stdout);
    if (ready && write_ready(ready) < 0) {
        fprintf(stderr, "cuda_probe: cannot write %s: %s\n", ready, strerror(errno));
        p_cuCtxDestroy(ctx);
        return 1;
    }
    double end = now() + hold;
    while (!stop && now() < end) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    p_cuCtxDestroy(ctx);
    printf("hold.released=%s\n", stop ? "signal" : "timeout");
    return 0;
}
