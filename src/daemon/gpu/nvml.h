/* nvml: reads the machine's GPUs through NVML, loaded with dlopen at run time so that
 * gflow builds and runs on machines without NVIDIA software (then there are 0 GPUs and
 * the error says why). The same code reads the shipped simulator, libgflow-nvml-sim.so,
 * which exports the NVML symbols plus `gflowNvmlSimulated`.
 *
 * Everything lives in a struct nvml (no global state). Calls go straight to the driver;
 * NVML calls themselves are quick (tens of microseconds each) except on a wedged GPU,
 * which NVML reports as GPU_IS_LOST and we mark `lost` rather than retry. A GPU whose
 * state cannot be known (no handle, UUID, memory reading or process list) is kept with
 * `unavailable` saying which call failed and how: gflow gives it to no job.
 * A call can also hang: gflowd therefore makes every call from one worker thread
 * (gpu_worker.c), never from its loop. */
#ifndef GFLOWD_NVML_H
#define GFLOWD_NVML_H

#include <stdbool.h>

#include "gpuinfo.h"

struct nvml;

/* The library loaded when neither the caller nor GFLOW_NVML_LIBRARY names one. */
#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"

/* Loads NVML and initialises it. The library is `library` when non-NULL (the caller has
 * already decided between `daemon.nvml_library`, --simulate-gpus and the like), else
 * $GFLOW_NVML_LIBRARY when set and non-empty, else libnvidia-ml.so.1.
 * Returns NULL and sets *err (caller frees) to a one-line "no GPUs: <reason>". */
struct nvml *nvml_open(const char *library, char **err);
/* As nvml_open; *found tells whether the library itself was there (a machine without
 * NVIDIA software) or was loaded and then failed (a driver not ready yet, say). */
struct nvml *nvml_open_found(const char *library, bool *found, char **err);

/* Reads every GPU: identity, memory, metrics, compute processes, topology. *out is
 * overwritten (free its previous contents first) and must be released with
 * gpu_set_free(). A GPU whose calls answer GPU_IS_LOST is kept with `lost` set; any GPU
 * that cannot be read well enough to schedule on has `unavailable` set.
 * Returns 0, or -1 with *err (caller frees) when not even the GPU count can be read. */
int nvml_read(struct nvml *n, struct gpu_set *out, char **err);

/* nvml_read() in two steps, so that the topology (many calls, O(n^2)) is read only when
 * the GPU set changes: nvml_read_devices() reads everything but the topology (out->link
 * is NULL); nvml_read_links() then fills s->link from the devices of that last read. */
int nvml_read_devices(struct nvml *n, struct gpu_set *out, char **err);
void nvml_read_links(struct nvml *n, struct gpu_set *s);

/* Whether the loaded library is gflow's simulator. */
bool nvml_is_simulated(const struct nvml *n);

/* Shuts NVML down and unloads it. NULL is fine. */
void nvml_close(struct nvml *n);

#endif
