/* gpu_samples: the GPUs' utilisation as NVML reported it at each poll, for gstats --gpu:
 * a ring of daemon.gpu_samples_max rows per GPU in the store (slot = the sample's number
 * modulo that). Samples are kept in memory and written GPU_SAMPLES_BATCH polls at a
 * time (and when the daemon stops), so that an idle daemon does not commit, and sync
 * its database, at every poll; a crash loses at most that many polls' samples.
 * GET /v1/stats?gpu=1 adds the ones not written yet to what it reads. */
#ifndef GFLOWD_GPU_SAMPLES_H
#define GFLOWD_GPU_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct gpu_set;

#define GPU_SAMPLES_BATCH 30 /* polls: 5 minutes at the default 10 s */

struct gpu_samples {
    int64_t max; /* daemon.gpu_samples_max */
    int64_t seq; /* the next sample's number */
    double last; /* when the last was taken (monotonic; 0: never) */
    int polls;   /* polls in pending not written yet */
    /* The samples not committed yet, oldest first; the first n_written of them are in
     * the store's open transaction. They stay here until it commits, so that a stats
     * reader (which sees only what is committed) never misses them. */
    struct gpu_sample *pending;
    size_t n_pending, n_written, cap;
};

/* Trims the stored ring to max rows per GPU and finds where it goes on. 0, or -1 (the
 * store's error). */
int gpu_samples_start(struct gpu_samples *g, struct store *s, int64_t max);
/* One sample per GPU of set that reports its utilisation, taken at wall time `wall`
 * (monotonic `mono`); writes the pending samples into the store's open transaction once
 * GPU_SAMPLES_BATCH polls have been taken. */
void gpu_samples_take(struct gpu_samples *g, struct store *s, const struct gpu_set *set,
                      double mono, double wall);
/* Writes the pending samples into the store's open transaction. 0, or -1 (the store's
 * error; they stay pending). */
int gpu_samples_flush(struct gpu_samples *g, struct store *s);
/* The loop's transaction committed: the written samples are the store's now. */
void gpu_samples_committed(struct gpu_samples *g);
/* It was lost: the written samples are pending again (written at the next flush). */
void gpu_samples_lost(struct gpu_samples *g);
void gpu_samples_free(struct gpu_samples *g);

#endif
