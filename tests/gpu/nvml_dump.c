/* nvml_dump (gflow-nvml-dump): prints gflow's reading of the GPUs in the CSV form of
 * `nvidia-smi --query-gpu=index,uuid,pci.bus_id,memory.total --format=csv`, so that a
 * person can compare the two line for line (tests/gpu/check.sh compares ginfo, through
 * the daemon). With -v it adds the other fields and the topology.
 * Exit status: 0 read, 2 no GPUs (the reason on stderr), 1 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/nvml.h"
#include "gpuinfo.h"

static const char *dump_link(enum gpu_link l)
{
    static const char *const names[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "?"};
    return l <= GPU_LINK_UNKNOWN ? names[l] : "?";
}

int main(int argc, char **argv)
{
    const char *library = NULL;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            verbose = true;
        else if (strcmp(argv[i], "--library") == 0 && i + 1 < argc)
            library = argv[++i];
        else {
            fprintf(stderr, "usage: gflow-nvml-dump [-v] [--library PATH]\n");
            return 1;
        }
    }

    char *err = NULL;
    struct nvml *n = nvml_open(library, &err);
    if (!n) {
        fprintf(stderr, "%s\n", err);
        free(err);
        return 2;
    }
    struct gpu_set s;
    if (nvml_read(n, &s, &err) != 0) {
        fprintf(stderr, "%s\n", err);
        free(err);
        nvml_close(n);
        return 2;
    }

    printf("index, uuid, pci.bus_id, memory.total [MiB]\n");
    for (size_t i = 0; i < s.n_gpus; i++) {
        const struct gpu_info *g = &s.gpus[i];
        printf("%d, %s, %s, %lld MiB\n", g->index, g->uuid, g->pci_bus_id,
               (long long)g->memory_total_mib);
    }
    if (verbose) {
        printf("# driver %s%s\n", s.driver_version, s.simulated ? " (simulated)" : "");
        for (size_t i = 0; i < s.n_gpus; i++) {
            const struct gpu_info *g = &s.gpus[i];
            printf("# %d %s used=%lld util=%d temp=%d power=%d numa=%d lost=%d procs=%zu\n",
                   g->index, g->name, (long long)g->memory_used_mib, g->utilization_gpu,
                   g->temperature_c, g->power_w, g->numa_node, g->lost, g->n_procs);
            for (size_t p = 0; p < g->n_procs; p++)
                printf("#   pid %lld used %lld MiB\n", (long long)g->procs[p].pid,
                       (long long)g->procs[p].used_mib);
        }
        if (s.link)
            for (size_t i = 0; i < s.n_gpus; i++) {
                printf("# GPU%zu", i);
                for (size_t j = 0; j < s.n_gpus; j++)
                    printf(" %s", dump_link(s.link[i * s.n_gpus + j]));
                printf("\n");
            }
    }
    gpu_set_free(&s);
    nvml_close(n);
    return 0;
}
