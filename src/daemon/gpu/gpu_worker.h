/* gpu_worker: NVML off the event loop. One thread, started once and reused, makes every
 * NVML call of the daemon (nvml_open and the reads), one request at a time: a failing
 * GPU can make an NVML call hang for minutes, and the loop must keep serving meanwhile.
 * The loop asks for a read (gpu_worker_request), goes on, and learns that it finished
 * through an eventfd it watches (gpu_worker_fd); it then takes the result
 * (gpu_worker_take). How long a read may take before its GPUs count as unavailable is
 * the caller's business (gpu.c), as is the retry of an NVML that would not open.
 *
 * The topology is read only when the GPU set (count, UUIDs, which GPUs could be read)
 * differs from the previous read's; otherwise the previous matrices are copied. */
#ifndef GFLOWD_GPU_WORKER_H
#define GFLOWD_GPU_WORKER_H

#include <stdbool.h>

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
};

void gpu_worker_result_free(struct gpu_worker_result *r);

/* Starts the thread; `library` as for nvml_open (NULL: the default). NULL with *err
 * if the thread or its eventfd cannot be made. */
struct gpu_worker *gpu_worker_new(const char *library, char **err);
/* Stops the thread. One stuck in an NVML call is left behind (detached) with what it
 * holds: it cannot be interrupted, and the process is about to exit. */
void gpu_worker_free(struct gpu_worker *w);

/* Asks for NVML to be opened if it is not, then for the GPUs to be read. False (and
 * nothing asked) while a request is still in progress or its result not taken. */
bool gpu_worker_request(struct gpu_worker *w);
/* Whether a request is in progress or its result waits to be taken. */
bool gpu_worker_busy(const struct gpu_worker *w);
/* Readable when a result is ready. */
int gpu_worker_fd(const struct gpu_worker *w);
/* Takes the finished request's result (true), or false if there is none yet. */
bool gpu_worker_take(struct gpu_worker *w, struct gpu_worker_result *out);
/* Waits up to `secs` for the current request to finish. True if it did. */
bool gpu_worker_wait(struct gpu_worker *w, double secs);

#endif
