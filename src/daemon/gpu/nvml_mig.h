/* nvml_mig: reading MIG instances, the part of the NVML loader (nvml.c) that turns a
 * MIG-enabled GPU into the devices jobs get. Internal to the loader: nvml.c calls
 * nvml_mig_read_gpu() at the end of each GPU's read and offers the few helpers below. */
#ifndef GFLOWD_NVML_MIG_H
#define GFLOWD_NVML_MIG_H

#include "gpuinfo.h"
#include "nvml.h"
#include "nvml_types.h"

/* For GPU g (handle h, read and not lost): its MIG mode, and for a MIG-enabled one its
 * instances (UUID, name and the profile in it, memory, compute processes, GPU and
 * compute instance ids) appended to *migs (malloc'd; *n_migs of them). A library
 * without the MIG calls (older than r450, or the simulator's legacy build) leaves the
 * GPU a plain one. Part of the GPU's own read (nvml_read_device), on its thread. */
void nvml_mig_read_gpu(struct nvml *n, nvmlDevice_t h, struct gpu_info *g, struct gpu_mig **migs,
                       size_t *n_migs);

/* Offered by nvml.c. */
void *nvml_library(const struct nvml *n);
/* nvmlDeviceGetHandleByIndex (for the Xid thread's registrations, gpu_xid.c). */
nvmlReturn_t nvml_device_handle(struct nvml *n, unsigned int index, nvmlDevice_t *h);
/* Reads a MIG device's UUID (required), name, memory and processes into g (zeroed by
 * the caller; g->procs is the caller's to free); a memory or process list NVML does not
 * give sets g->unavailable. Returns the UUID's error, or GPU_IS_LOST. */
nvmlReturn_t nvml_read_instance(struct nvml *n, nvmlDevice_t h, struct gpu_info *g);
const char *nvml_error_text(const struct nvml *n, nvmlReturn_t rc);

#endif
