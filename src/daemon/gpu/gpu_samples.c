/* gpu_samples: GPU utilisation samples, kept in memory and written in batches
 * (gpu_samples.h). */
#include "gpu_samples.h"

#include <stdlib.h>
#include <string.h>

#include "gpuinfo.h"
#include "log.h"
#include "util.h"

int gpu_samples_start(struct gpu_samples *g, struct store *s, int64_t max)
{
    memset(g, 0, sizeof(*g));
    g->max = max;
    return store_gpu_samples_start(s, max, &g->seq);
}

void gpu_samples_take(struct gpu_samples *g, struct store *s, const struct gpu_set *set,
                      double mono, double wall)
{
    int64_t slot = g->seq % g->max;
    bool any = false;
    for (size_t i = 0; i < set->n_gpus; i++) {
        int util = set->gpus[i].utilization_gpu;
        if (util < 0)
            continue;
        if (g->n_pending == g->cap) {
            g->cap = g->cap ? 2 * g->cap : 64;
            g->pending = xrealloc(g->pending, g->cap * sizeof(*g->pending));
        }
        g->pending[g->n_pending++] = (struct gpu_sample){
            .gpu = set->gpus[i].index, .slot = slot, .time = wall, .util = util};
        any = true;
    }
    if (!any)
        return;
    g->seq++;
    g->last = mono;
    if (++g->polls >= GPU_SAMPLES_BATCH && gpu_samples_flush(g, s) < 0)
        log_debug("recording GPU utilisation: %s", store_error(s));
}

int gpu_samples_flush(struct gpu_samples *g, struct store *s)
{
    if (g->n_written == g->n_pending)
        return 0;
    if (store_begin(s) < 0)
        return -1;
    for (size_t i = g->n_written; i < g->n_pending; i++) {
        const struct gpu_sample *p = &g->pending[i];
        if (store_gpu_sample(s, p->gpu, p->slot, p->time, p->util) < 0)
            return -1;
    }
    g->n_written = g->n_pending;
    g->polls = 0;
    return 0;
}

void gpu_samples_committed(struct gpu_samples *g)
{
    if (!g->n_written)
        return;
    memmove(g->pending, g->pending + g->n_written,
            (g->n_pending - g->n_written) * sizeof(*g->pending));
    g->n_pending -= g->n_written;
    g->n_written = 0;
}

void gpu_samples_lost(struct gpu_samples *g)
{
    g->n_written = 0;
}

void gpu_samples_free(struct gpu_samples *g)
{
    free(g->pending);
    memset(g, 0, sizeof(*g));
}
