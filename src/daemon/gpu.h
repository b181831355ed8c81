/* gpu: the daemon's view of the GPUs. NVML (or the shipped simulator) is read at start
 * and every daemon.gpu_poll_interval_secs to notice processes outside gflow; a GPU freed
 * by a job needs no poll (the scheduler knows its own allocations). Also: which GPUs may
 * be used (flag > runtime setting > config > all, within the daemon's own
 * CUDA_VISIBLE_DEVICES), outside processes and the ones an admin chose to ignore. */
#ifndef GFLOWD_GPU_H
#define GFLOWD_GPU_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuinfo.h"

/* simulate: NULL, a number of GPUs, or a fixture file (--simulate-gpus). flag_gpus: the
 * --gpus of `gflowd up`, NULL if none. Missing NVML is not an error (0 GPUs, and the
 * reason is kept); a bad --simulate-gpus or --gpus is (-1 and *err). */
int gpu_start(const char *simulate, const char *flag_gpus, char **err);
void gpu_stop(void);

/* Re-reads the GPUs now. Returns true if anything the scheduler uses changed. */
bool gpu_refresh(void);

const struct gpu_set *gpu_current(void);
/* "no GPUs: <reason>" when NVML could not be used, else NULL. */
const char *gpu_error(void);
/* GPUs (by NVML index) that may be used, and those blocked by processes that belong to
 * no running job and are not ignored. */
uint64_t gpu_allowed(void);
/* GPUs the daemon can see at all (its CUDA_VISIBLE_DEVICES): what a job may ever get. */
uint64_t gpu_visible(void);
uint64_t gpu_unmanaged(void);

/* gctl set-gpus: "0,2" or "all"; kept in the database for later restarts. */
int gpu_set_allowed(const char *spec, char **err);
json_t *gpu_allowed_json(void);
int gpu_ignore(int gpu, long long pid, char **err);
int gpu_unignore(int gpu, long long pid, char **err);
json_t *gpu_ignored_json(void);

/* GET /v1/gpus. */
json_t *gpu_status_json(void);
/* "0,2" -> UUIDs "GPU-a,GPU-b" (caller frees), for the job's environment. */
char *gpu_uuids_of(const char *gpu_ids);
/* GPUs (indices) where processes of job id were seen although it was not given them. */
json_t *gpu_foreign_json(int64_t job_id, const char *gpu_ids);
/* [{"index","uuid","pci_bus_id"}] of a job's GPUs. */
json_t *gpu_detail_json(const char *gpu_ids);

#endif
