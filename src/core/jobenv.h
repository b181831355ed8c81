/* jobenv: the environment a job sees (docs/design.md §4): the submitter's, as gbatch
 * captured it, then gflow's own variables, which the submitter's cannot override:
 * GFLOW_JOB_ID, GFLOW_JOB_NAME, GFLOW_ARRAY_TASK_ID and SLURM_ARRAY_TASK_ID (an array
 * task), CUDA_VISIBLE_DEVICES (its GPUs as NVML indices, or UUIDs as
 * daemon.gpu_id_format decides; "" for none; a MIG job's "MIG-..." UUIDs, always),
 * CUDA_DEVICE_ORDER=PCI_BUS_ID (so CUDA
 * numbers GPUs as NVML does), GFLOW_GPU_UUIDS, NVIDIA_VISIBLE_DEVICES (UUIDs, "none"),
 * PYTHONUNBUFFERED=1; and for a job run by a system daemon as its submitter, HOME,
 * USER, LOGNAME and SHELL from the password database. Pure. */
#ifndef GFLOW_JOBENV_H
#define GFLOW_JOBENV_H

#include <stdbool.h>
#include <stdint.h>

#include "job.h"
#include "util.h"

struct jobenv_input {
    const char *uuids; /* the job's GPUs' UUIDs, "GPU-a,GPU-b", or its MIG instances'
                        * "MIG-a,MIG-b" ("" for none) */
    bool uuid_format;  /* CUDA_VISIBLE_DEVICES as UUIDs */
    /* The account the job runs as, when a system daemon runs it as its submitter
     * (NULL: the daemon's own; the submitter's variables stay). */
    const char *user, *home, *shell;
};

/* CUDA_VISIBLE_DEVICES for a job holding mask: "0,2", the UUIDs, or "" (caller frees). */
char *jobenv_cuda_devices(uint64_t mask, const char *uuids, bool uuid_format);

/* Appends j's environment (j->env, an object of strings) as NUL-terminated
 * "KEY=VALUE" entries, the form gflow-shim reads. */
void jobenv_build(const struct job *j, const struct jobenv_input *in, struct strbuf *out);

#endif
