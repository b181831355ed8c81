/* gpu_xid: the Xid event thread (see gpu_xid.h). */
#include "gpu_xid.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvml.h"
#include "nvml_mig.h" /* nvml_library, nvml_device_handle */
#include "nvml_types.h"
#include "util.h"

/* How long one wait lasts: the thread looks at its stop flag this often. */
#define XID_WAIT_MS 200
/* How long before NVML, or the registration, is tried again. */
#define XID_RETRY_SECS 5

typedef nvmlReturn_t (*set_create_fn)(nvmlEventSet_t *);
typedef nvmlReturn_t (*register_fn)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
typedef nvmlReturn_t (*wait_fn)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
typedef nvmlReturn_t (*set_free_fn)(nvmlEventSet_t);
typedef nvmlReturn_t (*count_fn)(unsigned int *);
typedef nvmlReturn_t (*uuid_fn)(nvmlDevice_t, char *, unsigned int);

#define XID_FN(type, ptr) ((type)(uintptr_t)(ptr))

struct gpu_xid {
    pthread_t thread;
    char *library;
    int pipe[2];
    atomic_bool stop;
};

/* Sleeps secs, waking early when asked to stop. */
static void nap(struct gpu_xid *x, int secs)
{
    const struct timespec step = {0, 100 * 1000 * 1000};
    for (int i = 0; i < secs * 10 && !atomic_load(&x->stop); i++)
        nanosleep(&step, NULL);
}

struct xid_dev {
    nvmlDevice_t handle;
    char uuid[96];
};

/* One life of NVML: registers the GPUs and passes events on until an error or stop. */
static void watch(struct gpu_xid *x, struct nvml *n)
{
    void *lib = nvml_library(n);
    set_create_fn create = XID_FN(set_create_fn, dlsym(lib, "nvmlEventSetCreate"));
    register_fn reg = XID_FN(register_fn, dlsym(lib, "nvmlDeviceRegisterEvents"));
    wait_fn wait = XID_FN(wait_fn, dlsym(lib, "nvmlEventSetWait_v2"));
    if (!wait)
        wait = XID_FN(wait_fn, dlsym(lib, "nvmlEventSetWait"));
    set_free_fn set_free = XID_FN(set_free_fn, dlsym(lib, "nvmlEventSetFree"));
    count_fn count = XID_FN(count_fn, dlsym(lib, "nvmlDeviceGetCount_v2"));
    if (!count)
        count = XID_FN(count_fn, dlsym(lib, "nvmlDeviceGetCount"));
    uuid_fn get_uuid = XID_FN(uuid_fn, dlsym(lib, "nvmlDeviceGetUUID"));
    nvmlEventSet_t set = NULL;
    unsigned int n_gpus = 0;
    if (!create || !reg || !wait || !set_free || !count || !get_uuid ||
        create(&set) != NVML_SUCCESS) {
        nap(x, XID_RETRY_SECS * 12); /* no event support: look again much later */
        return;
    }
    if (count(&n_gpus) != NVML_SUCCESS || n_gpus > GPUINFO_MAX_GPUS)
        n_gpus = 0;
    struct xid_dev devs[GPUINFO_MAX_GPUS];
    size_t registered = 0;
    for (unsigned int i = 0; i < n_gpus; i++) {
        memset(&devs[i], 0, sizeof(devs[i]));
        if (nvml_device_handle(n, i, &devs[i].handle) != NVML_SUCCESS ||
            get_uuid(devs[i].handle, devs[i].uuid, sizeof(devs[i].uuid)) != NVML_SUCCESS) {
            devs[i].handle = NULL;
            continue;
        }
        /* NOT_SUPPORTED (a board without events) leaves that GPU out. */
        if (reg(devs[i].handle, nvmlEventTypeXidCriticalError, set) == NVML_SUCCESS)
            registered++;
        else
            devs[i].handle = NULL;
    }
    int errors = 0;
    while (registered && !atomic_load(&x->stop) && errors < 10) {
        nvmlEventData_t data;
        memset(&data, 0, sizeof(data));
        nvmlReturn_t rc = wait(set, &data, XID_WAIT_MS);
        if (rc == NVML_ERROR_TIMEOUT)
            continue;
        if (rc != NVML_SUCCESS) { /* a lost GPU answers so too: not at full speed */
            errors++;
            nap(x, 1);
            continue;
        }
        errors = 0;
        if (!(data.eventType & nvmlEventTypeXidCriticalError))
            continue;
        for (unsigned int i = 0; i < n_gpus; i++) {
            if (!devs[i].handle || devs[i].handle != data.device)
                continue;
            struct gpu_xid_event ev;
            memset(&ev, 0, sizeof(ev));
            memcpy(ev.uuid, devs[i].uuid, sizeof(ev.uuid));
            ev.uuid[sizeof(ev.uuid) - 1] = '\0';
            ev.index = (int)i;
            ev.xid = data.eventData;
            /* Smaller than PIPE_BUF: written whole or not at all (a full pipe drops it:
             * the loop is far behind, and the GPU is drained by its first one anyway). */
            ssize_t w = write(x->pipe[1], &ev, sizeof(ev));
            (void)w;
        }
    }
    set_free(set);
    if (!atomic_load(&x->stop) && !registered)
        nap(x, XID_RETRY_SECS * 12); /* no GPU takes events: look again much later */
}

static void *xid_main(void *arg)
{
    struct gpu_xid *x = arg;
    while (!atomic_load(&x->stop)) {
        char *err = NULL;
        struct nvml *n = nvml_open(x->library, &err);
        free(err);
        if (!n) {
            nap(x, XID_RETRY_SECS);
            continue;
        }
        watch(x, n);
        nvml_close(n);
        if (!atomic_load(&x->stop))
            nap(x, 1);
    }
    return NULL;
}

struct gpu_xid *xid_thread_start(const char *library)
{
    struct gpu_xid *x = xcalloc(1, sizeof(*x));
    x->library = library ? xstrdup(library) : NULL;
    atomic_init(&x->stop, false);
    if (pipe2(x->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        free(x->library);
        free(x);
        return NULL;
    }
    if (pthread_create(&x->thread, NULL, xid_main, x) != 0) {
        close(x->pipe[0]);
        close(x->pipe[1]);
        free(x->library);
        free(x);
        return NULL;
    }
    return x;
}

int xid_thread_fd(const struct gpu_xid *x)
{
    return x ? x->pipe[0] : -1;
}

size_t xid_thread_take(struct gpu_xid *x, struct gpu_xid_event *ev, size_t cap)
{
    size_t k = 0;
    while (x && k < cap && read(x->pipe[0], &ev[k], sizeof(ev[k])) == (ssize_t)sizeof(ev[k]))
        k++;
    return k;
}

void xid_thread_stop(struct gpu_xid *x)
{
    if (!x)
        return;
    atomic_store(&x->stop, true);
    /* An NVML call of the thread may hang (a failing GPU): it is left behind then, with
     * what it uses, as the worker is. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    if (pthread_timedjoin_np(x->thread, NULL, &deadline) != 0) {
        pthread_detach(x->thread);
        return;
    }
    close(x->pipe[0]);
    close(x->pipe[1]);
    free(x->library);
    free(x);
}
