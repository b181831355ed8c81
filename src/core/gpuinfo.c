/* gpuinfo: the GPU state shared by the loader, the scheduler and ginfo. */
#include "gpuinfo.h"

#include <stdlib.h>
#include <string.h>

void gpu_set_free(struct gpu_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_gpus; i++)
        free(s->gpus[i].procs);
    free(s->gpus);
    free(s->link);
    free(s->error);
    memset(s, 0, sizeof(*s));
}

uint64_t gpu_ids_mask(const char *gpu_ids)
{
    uint64_t mask = 0;
    for (const char *p = gpu_ids; p && *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) {
            p++; /* a separator */
            continue;
        }
        if (v >= 0 && v < GPUINFO_MAX_GPUS)
            mask |= 1ULL << v;
        p = end;
    }
    return mask;
}
