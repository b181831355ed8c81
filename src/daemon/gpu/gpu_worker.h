/* gpu_worker: NVML off the event loop. One thread, started once and reused, makes the
 * system part of every NVML read (open, count, driver version, topology), one request at
 * a time, and hands each GPU's part to that GPU's reader thread (gpu_readers.c): a
 * failing GPU can make an NVML call hang for minutes, and neither the loop nor the other
 * GPUs must wait for it. The loop asks for a read (gpu_worker_request), goes on, and
 * learns that it finished through an eventfd it watches (gpu_worker_fd); it then takes
 * the result (gpu_worker_take).
 *
 * A GPU whose reader has not answered within the timeout is in the result as last read,
 * with `hang` saying since when and in which call; it is not asked again until its
 * reader returns (which wakes the eventfd: gpu_worker_poked). A system call that hangs
 * holds the whole request: how long that may take before every GPU counts as
 * unavailable is the caller's business (gpu.c, with gpu_worker_system_since), as is the
 * retry of an NVML that would not open.
 *
 * The driver changing under the loaded NVML (its version differs from the one read
 * after opening, or a call answers LIB_RM_VERSION_MISMATCH) is reported in
 * `driver_changed`, and NVML is closed to be opened afresh at the next request, once no
 * reader is in a call.
 *
 * The topology is read only when the GPU set (count, UUIDs, which GPUs could be read)
 * differs from the previous read's; otherwise the previous matrices are copied. */
#ifndef GFLOWD_GPU_WORKER_H
#define GFLOWD_GPU_WORKER_H

#include <stdbool.h>

#include "gpu_readers.h"
#include "gpuinfo.h"

struct gpu_worker;

/* What one request came to. */
struct gpu_worker_result {
    bool open;          /* NVML is loaded and initialised (after this request) */
    bool found;         /* the library was there (when not open: it failed after loading) */
    bool simulated;     /* the library is gflow's simulator */
    bool read;          /* set holds a fresh reading */
    bool topology_read; /* the topology was read again (the GPU set changed) */
    char *error;        /* why NVML would not open or the read failed, NULL if fine */
    struct gpu_set set; /* the GPUs, when read */
    /* "DriverChanged: <old> -> <new>" or "DriverChanged: library/driver version mismatch
     * (NVML 18)" when this request found the driver changed; NULL otherwise. */
    char *driver_changed;
    /* Per GPU of set: hang[i].since != 0 when its reader did not answer in time (then
     * set.gpus[i] and its MIG instances are as last read). */
    struct gpu_reader_hang hang[GPUINFO_MAX_GPUS];
};

void gpu_worker_result_free(struct gpu_worker_result *r);

/* Starts the thread; `library` as for nvml_open (NULL: the default); a GPU's reader is
 * waited for `timeout` seconds. NULL with *err if the thread or its eventfd cannot be
 * made. */
struct gpu_worker *gpu_worker_new(const char *library, double timeout, char **err);
/* Stops the threads. One stuck in an NVML call is left behind (detached) with what it
 * holds: it cannot be interrupted, and the process is about to exit. */
void gpu_worker_free(struct gpu_worker *w);

/* Asks for NVML to be opened if it is not, then for the GPUs to be read, those in
 * `account` (bit i: GPU i, the ones jobs hold) also for the jobs' accounting. False (and
 * nothing asked) while a request is still in progress or its result not taken. */
bool gpu_worker_request(struct gpu_worker *w, uint64_t account);
/* Whether a request is in progress or its result waits to be taken. */
bool gpu_worker_busy(const struct gpu_worker *w);
/* Readable when a result is ready. */
int gpu_worker_fd(const struct gpu_worker *w);
/* Takes the finished request's result (true), or false if there is none yet. */
bool gpu_worker_take(struct gpu_worker *w, struct gpu_worker_result *out);
/* When the request in progress entered the system call it is in (monotonic), 0 when
 * none is in progress or it waits for the GPUs' readers (a wait bounded by the
 * timeout). */
double gpu_worker_system_since(const struct gpu_worker *w);
/* Whether a GPU's reader came back from a call it had been given up on since the last
 * time this was asked (the GPU is worth reading again). */
bool gpu_worker_poked(struct gpu_worker *w);
/* Waits up to `secs` for the current request to finish. True if it did. */
bool gpu_worker_wait(struct gpu_worker *w, double secs);

#endif
