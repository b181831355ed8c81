/* procinfo: facts about processes read from /proc. */
#ifndef GFLOW_PROCINFO_H
#define GFLOW_PROCINFO_H

#include <stdint.h>
#include <sys/types.h>

/* Start time of pid in clock ticks since boot (field 22 of /proc/PID/stat), or -1 if
 * the process does not exist. Together with the pid it names one process for good. */
int64_t proc_start_time(pid_t pid);

/* Parent pid of pid, or -1. */
pid_t proc_parent(pid_t pid);

/* The machine's memory in MiB (MemTotal in /proc/meminfo), or 0 if unknown. */
int64_t proc_mem_total_mb(void);

/* How gflow-shim --memory-limit will hold a job to its memory when started by this
 * process (the shim runs in its parent's cgroups and tries the methods in this order):
 * "cgroup v2" when the unified hierarchy's memory controller is available in this
 * process's cgroup and is enabled for its children or can be (this process's cgroup
 * is the root), else "cgroup v1" when a v1 memory controller is mounted and this
 * process may create cgroups in its own memory cgroup, else "watchdog". A static
 * string. GFLOW_SHIM_MEMORY_METHOD (v2, v1, watchdog) forces the answer, as it forces
 * the shim's method. */
const char *proc_memory_enforcement(void);

#endif
