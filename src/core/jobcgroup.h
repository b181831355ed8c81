/* jobcgroup: which gflow job a process belongs to, from its /proc/PID/cgroup. gflow-shim
 * puts every process of a job in a cgroup of its own (src/shim/jobcg.c), named after the
 * job and the shim: cgroup v2 ".../gflow-job-<id>.<shim pid>", cgroup v1 (freezer)
 * ".../gflow/job-<id>.<shim pid>". A process the job started stays there whatever it
 * does (setsid, double fork, a container runtime that keeps its cgroup), so this names
 * the job where walking /proc parents cannot. Pure text parsing: no I/O. */
#ifndef GFLOW_JOBCGROUP_H
#define GFLOW_JOBCGROUP_H

#include <stddef.h>
#include <stdint.h>

struct jobcgroup_ref {
    int64_t job_id;
    long shim_pid;
};

/* Finds the job cgroups named in the text of a /proc/PID/cgroup file (one per
 * hierarchy line; a cgroup nested below a job's counts as the job's). Fills up to max
 * entries of out and returns how many were found. */
size_t jobcgroup_find(const char *text, struct jobcgroup_ref *out, size_t max);

#endif
