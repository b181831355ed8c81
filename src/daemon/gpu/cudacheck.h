/* cudacheck: CUDA's own view of the GPUs, for daemon.gpu_id_format = "auto" (gpu_ids.c).
 *
 * An NVML index given to a job in CUDA_VISIBLE_DEVICES is right only if CUDA numbers the
 * GPUs as NVML does. gflowd asks the CUDA driver (libcuda.so.1, or $GFLOW_CUDA_LIBRARY;
 * the simulator's fake libgflow-cuda-sim.so on simulated GPUs) through dlopen:
 * cuInit, cuDeviceGetCount, cuDeviceGetUuid for each device. cuInit can hang or crash
 * on a sick GPU, so this runs in a child (gflowd itself, `gflowd __cuda-check LIBRARY`),
 * watched by the loop and killed after CUDACHECK_TIMEOUT seconds, with the environment
 * a job gets: CUDA_DEVICE_ORDER=PCI_BUS_ID, and no CUDA_VISIBLE_DEVICES (a job's own
 * replaces the daemon's, so its indices count among all the GPUs). */
#ifndef GFLOWD_CUDACHECK_H
#define GFLOWD_CUDACHECK_H

#include <stdbool.h>
#include <stddef.h>

#define CUDACHECK_TIMEOUT 30.0
#define CUDACHECK_HOLD 5.0 /* seconds GPU jobs wait for the answer (gpu_ids_holding) */

enum cudacheck_outcome {
    CUDACHECK_RUNNING, /* no answer yet */
    CUDACHECK_SEEN,    /* CUDA answered: count and uuids (count 0: cuInit saw no device) */
    CUDACHECK_ABSENT,  /* no CUDA driver to ask */
    CUDACHECK_FAILED,  /* it crashed, hung, or cuInit failed otherwise: error says */
};

struct cudacheck_view {
    enum cudacheck_outcome outcome;
    int count;
    char (*uuids)[16]; /* count of them, as cuDeviceGetUuid gives them */
    char *error;       /* ABSENT or FAILED: why; SEEN with count 0: cuInit's answer */
};

struct cudacheck;
typedef void (*cudacheck_done_cb)(void *arg, const struct cudacheck_view *view);

/* Starts the check; done is called from the loop once it is known (also when the
 * child cannot be started). NULL only when done was called already. */
struct cudacheck *cudacheck_start(bool simulated, cudacheck_done_cb done, void *arg);
/* Waits at most secs for the answer (at start, before the daemon serves): true if done
 * was called (c is then freed). */
bool cudacheck_wait(struct cudacheck *c, double secs);
/* Stops watching (gflowd is stopping); done is not called. */
void cudacheck_cancel(struct cudacheck *c);

/* The child: `gflowd __cuda-check LIBRARY` prints what CUDA sees, one "key value" a line
 * ("absent <why>", "error <why>", "count N", "uuid <32 hex digits>"); exit 0. */
int cudacheck_child_main(const char *library);

#endif
