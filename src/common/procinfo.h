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

#endif
