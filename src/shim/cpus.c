/* cpus: --cpus, the CPUs the job is pinned to (gflowd chose them near its GPUs:
 * --cpus-per-gpu, daemon.cpu_affinity). The child's sched_setaffinity before exec pins
 * every copy, and whatever they start inherits it; where the job has a cgroup v2 of its
 * own and the cpuset controller can be enabled for it, cpuset.cpus holds the job to them
 * too, so that no process of it can widen its affinity. */
#include "shim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cgdelegate.h"
#include "util.h"

/* cpuset.cpus in the job's cgroup v2: the parent must have the cpuset controller and
 * enable it for its children. 0, or -1 when it cannot (the affinity alone then). */
static int shim_cpus_cpuset(const struct shim_jobcg *cg, const struct cpumask *cpus)
{
    if (cg->version != 2 || !cg->dir)
        return -1;
    char *base = xstrdup(cg->dir);
    *strrchr(base, '/') = '\0';
    int rc = -1;
    if (cgdelegate_has_word(base, "cgroup.controllers", "cpuset") &&
        (cgdelegate_has_word(base, "cgroup.subtree_control", "cpuset") ||
         shim_cgroup_write(base, "cgroup.subtree_control", "+cpuset") == 0)) {
        char *list = cpumask_format(cpus);
        rc = shim_cgroup_write(cg->dir, "cpuset.cpus", list);
        free(list);
    }
    free(base);
    return rc;
}

void shim_cpus_setup(const struct shim_opts *o, struct shim_exec *ex, const struct shim_jobcg *cg)
{
    if (!o->pin_cpus)
        return;
    ex->pin_cpus = true;
    CPU_ZERO(&ex->cpus);
    for (int c = 0; c < CPUMASK_MAX && c < CPU_SETSIZE; c++)
        if (cpumask_has(&o->cpus, c))
            CPU_SET(c, &ex->cpus);
    (void)shim_cpus_cpuset(cg, &o->cpus);
}
