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
