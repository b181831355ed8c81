/* cpupin: the CPUs a job is pinned to when it starts (gbatch --cpus-per-gpu N,
 * daemon.cpu_affinity): its GPUs' local CPUs as NVML reports them, within the CPUs
 * gflowd itself may use, N per GPU avoiding those of other running pinned jobs where it
 * can (core/cpumask.c chooses). The shim applies them (gflow-shim --cpus). */
#ifndef GFLOWD_CPUPIN_H
#define GFLOWD_CPUPIN_H

#include "job.h"

struct gflowd;

/* The CPU list for j's launch ("0-3,8", malloc'd), *far of them not local to its GPUs;
 * or NULL (*far 0) when it is not pinned: no
 * GPUs, neither setting asks for it, or (daemon.cpu_affinity alone) its GPUs' local
 * CPUs are unknown or none of them is gflowd's. */
char *cpupin_choose(const struct gflowd *d, const struct job *j, int *far);

#endif
