/* gpu_recent: the GPUs' last ten minutes, in memory (gpu_recent.h). */
#include "gpu_recent.h"

#include <stdlib.h>
#include <string.h>

#include "gpuinfo.h"
#include "util.h"

static struct gpu_recent_ring *ring_of(struct gpu_recent *r, int index)
{
    for (size_t i = 0; i < r->n_rings; i++)
        if (r->rings[i].index == index)
            return &r->rings[i];
    r->rings = xrealloc(r->rings, (r->n_rings + 1) * sizeof(*r->rings));
    struct gpu_recent_ring *g = &r->rings[r->n_rings++];
    memset(g, 0, sizeof(*g));
    g->index = index;
    return g;
}

static struct gpu_recent_sample *at(const struct gpu_recent_ring *g, size_t i)
{
    return &g->buf[(g->head + i) % g->cap];
}

/* Drops the samples that fell out of the window before `now`. */
static void trim(struct gpu_recent_ring *g, double now)
{
    while (g->n && now - at(g, 0)->mono > GPU_RECENT_SECS) {
        g->head = (g->head + 1) % g->cap;
        g->n--;
    }
}

static void push(struct gpu_recent_ring *g, struct gpu_recent_sample s)
{
    trim(g, s.mono);
    if (g->n == g->cap && g->cap < GPU_RECENT_CAP) {
        /* Grows in place of overwriting: the buffer holds the window (unrolled). */
        size_t cap = g->cap ? 2 * g->cap : 64;
        if (cap > GPU_RECENT_CAP)
            cap = GPU_RECENT_CAP;
        struct gpu_recent_sample *buf = xmalloc(cap * sizeof(*buf));
        for (size_t i = 0; i < g->n; i++)
            buf[i] = *at(g, i);
        free(g->buf);
        g->buf = buf;
        g->cap = cap;
        g->head = 0;
    }
    if (g->n == g->cap) { /* at GPU_RECENT_CAP: the oldest goes */
        g->head = (g->head + 1) % g->cap;
        g->n--;
    }
    *at(g, g->n) = s;
    g->n++;
}

void gpu_recent_take(struct gpu_recent *r, const struct gpu_set *set, double mono, double wall)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n_gpus; i++) {
        const struct gpu_info *gi = &set->gpus[i];
        struct gpu_recent_ring *g = ring_of(r, gi->index);
        g->mem_total_mib = gi->memory_total_mib;
        push(g, (struct gpu_recent_sample){.mono = mono,
                                           .wall = wall,
                                           .util = gi->utilization_gpu,
                                           .mem_mib = gi->memory_used_mib,
                                           .power_w = gi->power_w});
    }
    r->last = mono;
}

static json_t *known(int64_t v)
{
    return v < 0 ? json_null() : json_integer(v);
}

json_t *gpu_recent_json(const struct gpu_recent *r, double now)
{
    json_t *gpus = json_array();
    for (size_t k = 0; r && k < r->n_rings; k++) {
        const struct gpu_recent_ring *g = &r->rings[k];
        json_t *samples = json_array();
        for (size_t i = 0; i < g->n; i++) {
            const struct gpu_recent_sample *s = at(g, i);
            if (now - s->mono > GPU_RECENT_SECS)
                continue;
            json_array_append_new(samples,
                                  json_pack("{s:f, s:o, s:o, s:o}", "time", s->wall,
                                            "utilization_gpu", known(s->util), "memory_used_mib",
                                            known(s->mem_mib), "power_w", known(s->power_w)));
        }
        json_array_append_new(gpus,
                              json_pack("{s:i, s:I, s:o}", "index", g->index, "memory_total_mib",
                                        (json_int_t)g->mem_total_mib, "samples", samples));
    }
    return json_pack("{s:i, s:o}", "window_secs", GPU_RECENT_SECS, "gpus", gpus);
}

void gpu_recent_free(struct gpu_recent *r)
{
    for (size_t i = 0; i < r->n_rings; i++)
        free(r->rings[i].buf);
    free(r->rings);
    memset(r, 0, sizeof(*r));
}
