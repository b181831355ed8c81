/* gpu_recent: the last GPU_RECENT_SECS of each GPU's utilisation, memory used and power,
 * one sample per GPU poll, in memory only (GET /v1/gpus/samples: the dashboard's
 * sparklines). Fed from the set the poll has just read: no NVML call of its own. */
#ifndef GFLOWD_GPU_RECENT_H
#define GFLOWD_GPU_RECENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct gpu_set;

#define GPU_RECENT_SECS 600 /* the window kept: 10 minutes */
#define GPU_RECENT_CAP 4096 /* samples per GPU at most (a 1 s poll needs 600) */

struct gpu_recent_sample {
    double mono, wall;
    int util;        /* percent, -1: unknown */
    int64_t mem_mib; /* -1: unknown */
    int power_w;     /* -1: unknown */
};

/* One GPU's ring: n samples from head (the oldest) on, in a buffer of cap. */
struct gpu_recent_ring {
    int index; /* the GPU's NVML index */
    int64_t mem_total_mib;
    struct gpu_recent_sample *buf;
    size_t cap, head, n;
};

struct gpu_recent {
    struct gpu_recent_ring *rings;
    size_t n_rings;
    double last; /* monotonic time of the last sample (0: none) */
};

/* One sample of every GPU of set, taken at monotonic `mono` (wall time `wall`); samples
 * older than the window go. */
void gpu_recent_take(struct gpu_recent *r, const struct gpu_set *set, double mono, double wall);
/* {"window_secs", "gpus": [{"index", "memory_total_mib", "samples": [{"time",
 * "utilization_gpu", "memory_used_mib", "power_w"}, ...]}]}: the samples of the last
 * window before monotonic `now`, oldest first (unknown values null). */
json_t *gpu_recent_json(const struct gpu_recent *r, double now);
void gpu_recent_free(struct gpu_recent *r);

#endif
