/* cpupin: a starting job's CPUs (cpupin.h). */
#include "cpupin.h"

#include <sched.h>
#include <string.h>

#include "cpumask.h"
#include "daemon.h"
#include "gpu/gpu.h"
#include "jobs/jobs.h"
#include "log.h"

/* The CPUs gflowd may run on (its cpuset and affinity, which its jobs inherit): a job
 * pinned beyond them could not be placed there. All of them if it cannot tell. */
static void cpupin_allowed(struct cpumask *out)
{
    memset(out, 0, sizeof(*out));
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) < 0) {
        memset(out->w, 0xff, sizeof(out->w));
        return;
    }
    for (int c = 0; c < CPUMASK_MAX && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            cpumask_set(out, c);
}

/* The CPUs of the other running pinned jobs. */
static void cpupin_taken(const struct gflowd *d, const struct job *j, struct cpumask *out)
{
    memset(out, 0, sizeof(*out));
    size_t n = 0;
    struct job **running = jobs_running(d->jobs, &n);
    for (size_t i = 0; i < n; i++) {
        struct cpumask m;
        if (running[i] != j && running[i]->cpus && cpumask_parse(running[i]->cpus, &m) == 0)
            cpumask_or(out, &m);
    }
}

char *cpupin_choose(const struct gflowd *d, const struct job *j, int *far)
{
    *far = 0;
    if (!j->gpu_mask || (!d->cfg.cpu_affinity && j->cpus_per_gpu <= 0))
        return NULL;
    const struct gpu_set *cur = gpu_current(d->gpus);
    struct cpumask near[GPUINFO_MAX_GPUS], all_near;
    memset(&all_near, 0, sizeof(all_near));
    int n = 0;
    for (size_t g = 0; g < cur->n_gpus && g < GPUINFO_MAX_GPUS; g++) {
        if (!(j->gpu_mask & (1ULL << g)))
            continue;
        memset(&near[n], 0, sizeof(near[n]));
        if (cur->gpus[g].cpus_known)
            near[n] = cur->gpus[g].cpus;
        cpumask_or(&all_near, &near[n]);
        n++;
    }
    struct cpumask allowed, taken, out;
    cpupin_allowed(&allowed);
    cpupin_taken(d, j, &taken);
    cpumask_pin(near, n, j->cpus_per_gpu, &allowed, &taken, &out);
    if (cpumask_empty(&out)) {
        log_debug("job %lld: not pinned to CPUs: its GPUs' local CPUs are unknown or none "
                  "of them is gflowd's",
                  (long long)j->id);
        return NULL;
    }
    struct cpumask local = out;
    cpumask_and(&local, &all_near);
    *far = cpumask_count(&out) - cpumask_count(&local);
    return cpumask_format(&out);
}
