/* gpu_readers: the per-GPU part of an NVML read, one thread per GPU (started when the
 * GPU is first read, reused), driven by the NVML worker (gpu_worker.c). A call that
 * hangs on one GPU holds only that GPU's thread: the others keep being read. A reader
 * still in a call is not asked again until it returns, so there is at most one
 * outstanding call per GPU (no thread pile-up), and NVML is not closed while any
 * reader is in a call. */
#ifndef GFLOWD_GPU_READERS_H
#define GFLOWD_GPU_READERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuinfo.h"

struct gpu_readers;
struct nvml;

/* A reader that did not answer in time: since when it is in its read (monotonic), and
 * the NVML function it is in (a string literal; "an NVML call" when not known). */
struct gpu_reader_hang {
    double since; /* 0: the GPU answered */
    const char *fn;
};

/* `late` is called (from the reader's thread) when a reader that was given up on
 * returns: its GPU can be read again. */
struct gpu_readers *gpu_readers_new(void (*late)(void *), void *arg);
/* Stops the threads; with a reader still in a call, everything is left behind (it
 * cannot be interrupted, and the process is about to exit). */
void gpu_readers_free(struct gpu_readers *rs);

/* Asks the readers of GPUs 0..count-1 that are free to read their GPU through nv (those
 * in `account` also for a job's accounting: nvml_acct.h); returns the GPUs whose reader
 * is still in an earlier call (not asked). False with *err when a thread cannot be
 * started. */
bool gpu_readers_start(struct gpu_readers *rs, struct nvml *nv, size_t count, uint64_t account,
                       uint64_t *stuck, char **err);
/* Waits until every reader asked has answered or `deadline` (monotonic) has passed. */
void gpu_readers_wait(struct gpu_readers *rs, double deadline);
/* GPU i's answer: true with *g, *migs, *n_migs moved out (the caller's to free); false,
 * with *hang filled, when its reader is still in a call (then it is no longer waited
 * for, and `late` tells of its return). */
bool gpu_readers_take(struct gpu_readers *rs, size_t i, struct gpu_info *g, struct gpu_mig **migs,
                      size_t *n_migs, struct gpu_reader_hang *hang);
/* Whether no reader is in a call: NVML may be closed. */
bool gpu_readers_idle(struct gpu_readers *rs);

#endif
