/* preempt_run: when to preempt and for whom (see preempt_run.h); the victims are chosen by
 * preempt_select (src/core/preempt.c) and stopped by runner_preempt. */
#include "preempt_run.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "jobs/jobs.h"
#include "log.h"
#include "parse.h"
#include "preempt.h"
#include "reservation.h"
#include "runner.h"
#include "util.h"

/* Whether some running job is being stopped by a preemption. */
static bool preemption_in_progress(struct gflowd *d)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    for (size_t i = 0; i < n; i++)
        if (running[i]->end_request == JOB_END_PREEMPT)
            return true;
    return false;
}

/* The GPUs held by running jobs (NVML indices). */
static uint64_t held_by_jobs(struct gflowd *d)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    uint64_t held = 0;
    for (size_t i = 0; i < n; i++)
        held |= running[i]->gpu_mask;
    return held;
}

/* The GPUs a job may be given (NVML indices): state known, whole (not in MIG mode),
 * allowed, without outside processes. */
static uint64_t usable_gpus(const struct jobs_machine *m)
{
    uint64_t usable = 0;
    for (size_t i = 0; m->gpus && i < m->gpus->n_gpus; i++) {
        const struct gpu_info *g = &m->gpus->gpus[i];
        if (g->index < 0 || g->index >= 64 || g->mig_enabled || !gpu_info_usable(g))
            continue;
        uint64_t bit = 1ULL << g->index;
        if ((m->allowed & bit) && !(m->unmanaged & bit))
            usable |= bit;
    }
    return usable;
}

uint64_t preemption_held_gpus(struct gflowd *d, const struct jobs_machine *m)
{
    if (!preemption_in_progress(d))
        return 0;
    return usable_gpus(m) & ~held_by_jobs(d);
}

/* The first queued job of user that waits for free whole GPUs (as preempt_pick_head
 * asks of the head), or NULL. */
static struct job *first_waiting_of(struct job *const *queued, size_t n, const char *user)
{
    for (size_t i = 0; i < n; i++) {
        struct job *j = queued[i];
        if (j->user && strcmp(j->user, user) == 0 && preempt_pick_head(&queued[i], 1) == j)
            return j;
    }
    return NULL;
}

/* Honouring a reservation: while one is active and its holder has a job waiting for
 * GPUs, other users' --requeue jobs on its GPUs (started before the window, or before it
 * was made) are preempted whatever their priority: the window is the holder's. Returns
 * whether any was. */
static bool preempt_for_reservations(struct gflowd *d, const struct jobs_machine *m,
                                     struct job *const *queued, size_t n_queued,
                                     struct job **launched, size_t n_launched, double grace)
{
    double now = now_wall();
    bool any = false;
    for (size_t r = 0; r < m->n_reservations; r++) {
        const struct scheduler_reservation *res = &m->reservations[r];
        if (res->start > now) /* by start: none after it is active either */
            break;
        if (res->end <= now)
            continue;
        struct job *waiting = first_waiting_of(queued, n_queued, res->user);
        if (!waiting)
            continue;
        for (size_t i = 0; i < n_launched; i++) {
            struct job *j = launched[i];
            if (!(j->gpu_mask & res->gpus) || (j->user && strcmp(j->user, res->user) == 0) ||
                !preempt_candidate(j, INT_MAX))
                continue;
            log_info("job %lld preempted: reservation %lld of %s holds its GPUs (job %lld "
                     "waits)",
                     (long long)j->id, (long long)res->id, res->user, (long long)waiting->id);
            runner_preempt(d, j, waiting->id, grace);
            any = true;
        }
    }
    return any;
}

void preemption_run(struct gflowd *d, const struct jobs_machine *m)
{
    if (!d->cfg.scheduler_preempt || preemption_in_progress(d))
        return;
    size_t n_queued;
    struct job *const *queued = jobs_queued(d->jobs, &n_queued);
    /* Only launched jobs: those started in this pass are not running anything yet. */
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    struct job **launched = xmalloc((n ? n : 1) * sizeof(*launched));
    size_t n_launched = 0;
    for (size_t i = 0; i < n; i++)
        if (running[i]->daemon.runtime)
            launched[n_launched++] = running[i];
    int64_t grace = d->cfg.parsed.preempt_grace_secs;
    struct job *head = preempt_pick_head(queued, n_queued);
    int64_t threshold = head ? head->priority - d->cfg.scheduler_preempt_priority_gap : -1;
    if (preempt_for_reservations(d, m, queued, n_queued, launched, n_launched, (double)grace) ||
        threshold < 0) {
        free(launched);
        return;
    }
    uint64_t usable = usable_gpus(m);
    struct preempt_request req = {
        .gpus = head->gpus,
        .usable = usable,
        .free = usable & ~held_by_jobs(d),
        .max_priority = (int)threshold,
    };
    struct job **victims = xmalloc((n_launched ? n_launched : 1) * sizeof(*victims));
    size_t n_victims = preempt_select(&req, launched, n_launched, victims);
    for (size_t i = 0; i < n_victims; i++) {
        log_info("job %lld (priority %d) preempted for job %lld (priority %d, %d GPU%s)",
                 (long long)victims[i]->id, victims[i]->priority, (long long)head->id,
                 head->priority, head->gpus, head->gpus == 1 ? "" : "s");
        runner_preempt(d, victims[i], head->id, (double)grace);
    }
    free(victims);
    free(launched);
}
