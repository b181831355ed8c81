/* cpumask: sets of CPUs (up to CPUMASK_MAX), their list text ("0-3,8", as
 * /proc/self/status' Cpus_allowed_list and cpuset.cpus write them), and the CPUs a job is
 * pinned to (--cpus-per-gpu, daemon.cpu_affinity). Pure: the daemon reads the GPUs'
 * local CPUs (NVML) and its own affinity; the shim parses the list it is given. */
#ifndef GFLOW_CPUMASK_H
#define GFLOW_CPUMASK_H

#include <stdbool.h>
#include <stdint.h>

#define CPUMASK_MAX 1024

struct cpumask {
    uint64_t w[CPUMASK_MAX / 64]; /* bit c % 64 of w[c / 64]: CPU c */
};

void cpumask_set(struct cpumask *m, int cpu);
bool cpumask_has(const struct cpumask *m, int cpu);
int cpumask_count(const struct cpumask *m);
bool cpumask_empty(const struct cpumask *m);
void cpumask_or(struct cpumask *m, const struct cpumask *other);
void cpumask_and(struct cpumask *m, const struct cpumask *other);

/* "0-3,8" (malloc'd; "" for none). */
char *cpumask_format(const struct cpumask *m);
/* A list ("0-3,8", "5", spaces and a trailing newline allowed) into *out: 0, or -1 when
 * it is not one (or names a CPU >= CPUMASK_MAX). "" is the empty set. */
int cpumask_parse(const char *s, struct cpumask *out);

/* The CPUs to pin a job on n_gpus GPUs to. near[g]: GPU g's local CPUs (empty when
 * unknown); allowed: the CPUs the daemon may use; taken: those of other running pinned
 * jobs. per_gpu 0: the union of the near CPUs (within allowed). per_gpu N: N CPUs for
 * each GPU, taken in this order: near and free, near (shared with another pinned job),
 * free, any allowed; so a job never waits for CPUs, and shares near CPUs before it goes
 * far. The result is empty when there is nothing to pin to (no near CPUs known
 * with per_gpu 0). */
void cpumask_pin(const struct cpumask *near, int n_gpus, int per_gpu, const struct cpumask *allowed,
                 const struct cpumask *taken, struct cpumask *out);

#endif
