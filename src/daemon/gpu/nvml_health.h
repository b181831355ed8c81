/* nvml_health: the health readings of one GPU (uncorrectable ECC errors, retired pages,
 * remapped rows, clocks event reasons, compute mode), the part of the NVML loader
 * (nvml.c) that fills gpu_info.health. Internal to the loader. */
#ifndef GFLOWD_NVML_HEALTH_H
#define GFLOWD_NVML_HEALTH_H

#include "gpuinfo.h"
#include "nvml.h"
#include "nvml_types.h"

/* Reads h's health into g->health. Every reading is optional: a missing symbol or an
 * error (NOT_SUPPORTED on boards without ECC or row remapping, NO_PERMISSION) leaves
 * that field unknown and never makes the GPU unavailable; only GPU_IS_LOST marks g lost
 * (and unavailable, naming the call). */
void nvml_read_health(struct nvml *n, nvmlDevice_t h, struct gpu_info *g);
/* Whether rc says the GPU is gone: then g is marked lost (unavailable, naming fn). */
bool nvml_gpu_lost(struct nvml *n, struct gpu_info *g, nvmlReturn_t rc, const char *fn);

#endif
