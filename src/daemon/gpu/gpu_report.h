/* gpu_report: the GPUs as the API shows them (docs/api.md): GET /v1/gpus, and the GPUs
 * of one job. Read-only over gpu.c's state and the running jobs it is given. */
#ifndef GFLOWD_GPU_REPORT_H
#define GFLOWD_GPU_REPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "job.h"

/* GET /v1/gpus: every GPU with its state ("idle", "busy", "shared", "restricted",
 * "unmanaged", "unavailable" and why), metrics, jobs and processes; the allowed set, the
 * allocation strategy and the topology matrix. Processes' owners are named from users
 * (userdb.h: never waiting; the uid while a name is not known). */
struct userdb;
json_t *gpu_report_status(const struct gpus *g, struct job *const *running, size_t n,
                          const char *strategy, struct userdb *users);
/* [{"index","uuid","pci_bus_id"}] of the GPUs in mask (a job's). */
json_t *gpu_report_detail(const struct gpus *g, uint64_t mask);
/* The GPUs (indices) outside mask where processes of job job_id were seen. */
json_t *gpu_report_foreign(const struct gpus *g, int64_t job_id, uint64_t mask,
                           struct job *const *running, size_t n);

/* MIG (gpu_report_mig.c). Adds to GPU g's object o "mig_enabled" and "mig_instances"
 * (each instance: uuid, profile, name, gi_id, ci_id, memory, state "idle", "busy",
 * "unmanaged", "restricted" or "unavailable", the job holding it and its processes); a
 * GPU in MIG mode becomes state "mig", or "unavailable" when it has no instances, with
 * the reason,
 * and the jobs holding its instances join its "jobs" (their processes on it are theirs). */
void gpu_report_mig(const struct gpus *g, size_t gpu, struct job *const *running, size_t n,
                    json_t *o);
/* [{"uuid","profile","parent","memory_total_mib","memory_used_mib"}] of the instances
 * named in uuids (a MIG job's), those that still exist. */
json_t *gpu_report_mig_detail(const struct gpus *g, const char *uuids);
#endif
