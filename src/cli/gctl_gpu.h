/* gctl_gpu: `gctl gpu resume N [--force]`, a drained GPU takes jobs again
 * (POST /v1/gpus/resume). */
#ifndef GFLOW_GCTL_GPU_H
#define GFLOW_GCTL_GPU_H

/* argv[0] is "gpu". Returns the exit status. */
int gctl_gpu(int argc, char **argv);

#endif
