/* nvml_acct: the readings a job's accounting needs of a GPU it holds (run/gpuacct_run.c,
 * core/gpuacct.h): the energy counter and its processes' utilisation. Part of the NVML
 * loader, made only for GPUs that hold a job (no call at all on an idle machine). */
#ifndef GFLOWD_NVML_ACCT_H
#define GFLOWD_NVML_ACCT_H

#include "gpuinfo.h"
#include "nvml.h"

/* Reads GPU index's energy counter into g->energy_mj (energy_known), and the SM
 * utilisation of each of g->procs since *seen (NVML's microsecond timestamps; updated
 * to the newest sample read, 0 the first time) into their sm_util. A missing symbol or
 * an error leaves the reading unknown; GPU_IS_LOST marks g lost. After nvml_read_device
 * on the same GPU, on its thread. */
void nvml_read_account(struct nvml *n, unsigned int index, struct gpu_info *g,
                       unsigned long long *seen);

#endif
