/* gpufault: ends the jobs of failed GPUs (see gpufault.h). */
#include "gpufault.h"

#include "daemon.h"
#include "gpu/gpu.h"
#include "jobs/jobs.h"
#include "log.h"
#include "runner.h"

#define MAX_FAULTS 64

void run_gpu_faults(struct gflowd *d)
{
    struct gpu_fault faults[MAX_FAULTS];
    size_t k = gpu_take_faults(d->gpus, faults, MAX_FAULTS);
    if (!k)
        return;
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    for (size_t i = 0; i < n; i++) {
        struct job *j = running[i];
        if (j->end_request != JOB_END_NONE)
            continue; /* already ending (this fault, a cancel, a time limit) */
        uint64_t mask = j->gpu_mask | gpu_mig_parents(d->gpus, j->mig_uuids);
        for (size_t f = 0; f < k; f++) {
            if (faults[f].index < 0 || faults[f].index >= 64 || !(mask >> faults[f].index & 1))
                continue;
            log_warn("job %lld: its GPU %d failed (%s); ending it%s", (long long)j->id,
                     faults[f].index, faults[f].what,
                     j->requeue ? " (--requeue: queued again)" : "");
            job_set_reason(j, JOB_REASON_GPU_FAULT, 0, faults[f].what);
            runner_request_end(d, j, JOB_END_GPU_FAULT);
            break;
        }
    }
}
