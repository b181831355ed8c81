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
 * A call can also hang: gflowd therefore makes no call from its loop. A read has a
 * system part (count, driver version, topology: gpu_worker.c's thread) and a part per
 * GPU (nvml_read_device, each GPU on a thread of its own: gpu_readers.c), so that one
 * GPU whose calls hang does not hide the others. NVML is thread-safe. */
#ifndef GFLOWD_NVML_H
#define GFLOWD_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* *mismatch: nvmlInit answered LIB_RM_VERSION_MISMATCH (18), a driver upgraded without
 * its kernel module reloaded (or the other way round). */
struct nvml *nvml_open_found(const char *library, bool *found, bool *mismatch, char **err);

/* Reads every GPU: identity, memory, metrics, compute processes, topology. *out is
 * overwritten (free its previous contents first) and must be released with
 * gpu_set_free(). A GPU whose calls answer GPU_IS_LOST is kept with `lost` set; any GPU
 * that cannot be read well enough to schedule on has `unavailable` set.
 * Returns 0, or below 0 with *err (caller frees) when not even the GPU count can be read
 * (NVML_READ_MISMATCH: NVML answered LIB_RM_VERSION_MISMATCH). */
int nvml_read(struct nvml *n, struct gpu_set *out, char **err);

/* nvml_read() in parts, so that each GPU can be read on a thread of its own and the
 * topology (many calls, O(n^2)) only when the GPU set changes:
 *
 * nvml_read_system() reads the count and the driver version into *out (n_gpus set,
 * gpus zeroed, link NULL). Returns 0; -1 with *err (caller frees) when not even the
 * count can be read; NVML_READ_MISMATCH (with *err) when NVML answers
 * LIB_RM_VERSION_MISMATCH: the driver changed under the loaded library. */
#define NVML_READ_MISMATCH (-2)
int nvml_read_system(struct nvml *n, struct gpu_set *out, char **err);
/* Reads GPU `index` (of the count nvml_read_system() gave) into g, zeroed by the caller,
 * and its MIG instances into *migs (malloc'd, *n_migs of them, parent = index). Any
 * thread, one call per GPU at a time. g->version_mismatch tells of an answer 18. */
void nvml_read_device(struct nvml *n, unsigned int index, struct gpu_info *g, struct gpu_mig **migs,
                      size_t *n_migs);
/* Fills s->link and s->nvlinks from the devices read by nvml_read_device() since the
 * last nvml_read_system(), asking nothing of the GPUs in `skip` (bit i: GPU i, e.g. one
 * whose reader hangs). */
void nvml_read_links(struct nvml *n, struct gpu_set *s, uint64_t skip);
/* nvml_read() without the topology (out->link NULL), every GPU in turn on this thread. */
int nvml_read_devices(struct nvml *n, struct gpu_set *out, char **err);

/* Which NVML call a thread is in, so that a reader that does not come back can be
 * named: nvml_note_calls_to() points the calling thread's notes at *slot (NULL: none),
 * nvml_note_call() writes a function's name there (one atomic store) before a call. */
void nvml_note_calls_to(const char **slot);
void nvml_note_call(const char *fn);

/* Whether the loaded library is gflow's simulator. */
bool nvml_is_simulated(const struct nvml *n);

/* Shuts NVML down and unloads it. NULL is fine. */
void nvml_close(struct nvml *n);

#endif
