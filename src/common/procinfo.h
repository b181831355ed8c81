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

/* The fields of /proc/PID/stat that tell which job a process belongs to. */
struct proc_stat {
    char state; /* R, S, D, T, Z (zombie), X (dead), ... */
    pid_t ppid, pgid, sid;
    int64_t start; /* clock ticks since boot, as proc_start_time */
};
/* Reads pid's stat. 0, or -1 with errno: ENOENT or ESRCH when it does not exist, else
 * why it could not be read (EMFILE: the caller cannot tell, and must not conclude). */
int proc_stat_read(pid_t pid, struct proc_stat *st);

/* Whether the environment pid was started with (/proc/PID/environ) holds the entry
 * "KEY=VALUE" exactly. 1 or 0; -1 with errno when it cannot be read (gone, another
 * user's process, out of file descriptors). */
int proc_environ_has(pid_t pid, const char *entry);

/* The machine's memory in MiB (MemTotal in /proc/meminfo), or 0 if unknown. */
int64_t proc_mem_total_mb(void);

#endif
