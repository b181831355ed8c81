/* gpuacct_run: feeding a running job's GPU accounting (see gpuacct_run.h). */
#include "gpuacct_run.h"

#include <stdlib.h>

#include "clock.h"
#include "daemon.h"
#include "gpu/gpu.h"
#include "gpuacct.h"
#include "gpuinfo.h"
#include "jobs/jobs.h"
#include "runner_internal.h"
#include "util.h"

static void set_figures(struct job *j, const struct gpuacct_figures *f)
{
    j->gpu_util_mean = f->util_mean;
    j->gpu_util_peak = f->util_peak;
    j->gpu_mem_peak_mb = f->mem_peak_mib;
    j->energy_wh = f->energy_wh;
    j->gpu_idle = f->idle;
}

/* j's accounting, made at its first reading; a job adopted from a daemon that saved its
 * figures goes on from them. NULL for a job without whole GPUs or a run. */
static struct gpuacct *acct_of(struct job *j, double now)
{
    struct run *r = j->daemon.runtime;
    if (!r || !j->gpu_mask)
        return NULL;
    if (r->acct)
        return r->acct;
    r->acct = xcalloc(1, sizeof(*r->acct));
    double start = j->start_time > 0 && j->start_time <= now ? j->start_time : now;
    gpuacct_init(r->acct, start);
    if (j->gpu_util_mean >= 0 || j->energy_wh >= 0 || j->gpu_mem_peak_mb >= 0) {
        struct gpuacct_figures f = {.util_mean = j->gpu_util_mean,
                                    .util_peak = j->gpu_util_peak,
                                    .mem_peak_mib = j->gpu_mem_peak_mb,
                                    .energy_wh = j->energy_wh,
                                    .idle = j->gpu_idle};
        gpuacct_seed(r->acct, &f, now - start);
    }
    return r->acct;
}

/* How many running jobs hold GPU index (shared GPUs: more than one). */
static int holders(struct job *const *running, size_t n, int index)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += (running[i]->gpu_mask >> index) & 1;
    return k;
}

/* j's reading of GPU g at time now. */
static void reading_of(const struct gpu_info *g, const struct job *j, struct job *const *running,
                       size_t n, double now, struct gpuacct_reading *out)
{
    int sharers = holders(running, n, g->index);
    *out = (struct gpuacct_reading){.gpu = g->index,
                                    .t = now,
                                    .util = g->utilization_gpu,
                                    .mem_mib = -1,
                                    .power_w = g->power_w,
                                    .energy_mj = g->energy_known ? g->energy_mj : -1,
                                    .share = sharers > 1 ? 1.0 / sharers : 1.0};
    int64_t mem = 0;
    int util = 0;
    bool own_mem = false, own_util = false, others = false;
    for (size_t p = 0; p < g->n_procs; p++) {
        const struct gpu_proc *pr = &g->procs[p];
        if (gpu_process_owner(pr->pid, running, n) != j) {
            others = true;
            continue;
        }
        if (pr->used_mib >= 0) {
            mem += pr->used_mib;
            own_mem = true;
        }
        if (pr->sm_util_known) {
            util += pr->sm_util;
            own_util = true;
        }
    }
    if (own_mem)
        out->mem_mib = mem;
    else if (!others && sharers <= 1) /* its processes unseen (another PID namespace) */
        out->mem_mib = g->memory_used_mib;
    if (sharers > 1) /* the GPU's utilisation is not the job's alone */
        out->util = own_util ? (util > 100 ? 100 : util) : -1;
}

void gpuacct_run_read(struct gflowd *d)
{
    static uint64_t seen; /* the reading fed last (one gflowd per process) */
    uint64_t reads = gpu_reads(d->gpus);
    if (reads == seen)
        return;
    seen = reads;
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    const struct gpu_set *set = gpu_current(d->gpus);
    double now = now_wall();
    for (size_t i = 0; i < n; i++) {
        struct job *j = running[i];
        struct gpuacct *a = acct_of(j, now);
        if (!a)
            continue;
        for (size_t k = 0; k < set->n_gpus; k++) {
            const struct gpu_info *g = &set->gpus[k];
            if (!((j->gpu_mask >> g->index) & 1) || !gpu_info_usable(g) ||
                gpu_unavailable_reason(d->gpus, k))
                continue;
            struct gpuacct_reading rd;
            reading_of(g, j, running, n, now, &rd);
            gpuacct_add(a, &rd);
        }
        struct gpuacct_figures f;
        gpuacct_figures(a, a->last_t > 0 ? a->last_t : now, &f);
        set_figures(j, &f);
    }
}

void gpuacct_run_end(struct gflowd *d, struct job *j)
{
    (void)d;
    struct run *r = j->daemon.runtime;
    if (!r || !r->acct)
        return;
    double end = j->end_time > 0 ? j->end_time : now_wall();
    struct gpuacct_figures f;
    gpuacct_figures(r->acct, end, &f);
    set_figures(j, &f);
}

void gpuacct_run_save(struct gflowd *d)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    for (size_t i = 0; i < n; i++) {
        struct run *r = running[i]->daemon.runtime;
        if (r && r->acct)
            jobs_save(d->jobs, running[i]);
    }
}

void gpuacct_run_free(struct gpuacct *a)
{
    free(a);
}
