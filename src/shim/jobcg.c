/* jobcg: the job's own cgroup (step 9), which every copy of the job joins before it
 * execs, so that everything the job starts stays findable - setsid, double forks and a
 * cleared environment included - and can be killed whole: by the shim (cgroup.kill,
 * step 5) and by a daemon that finds the shim gone (the cgroup's directory is a line of
 * the lock file). Creating it, and removing it once nothing of the job is left. */
#include "shim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgdelegate.h"
#include "files.h"
#include "util.h"

/* Creates dir afresh (an empty leftover of a dead shim with our pid goes; one still in
 * use is not shared: its rmdir fails) and opens its cgroup.procs. Only where this process may move its
 * children into it: root, or the owner of the cgroup it is in (a delegated subtree).
 * 0, or -1 with *why. */
static int shim_jobcg_make(const char *base, const char *dir, int *procs_fd, char **why)
{
    char *base_procs = xasprintf("%s/cgroup.procs", base);
    int writable = access(base_procs, W_OK);
    free(base_procs);
    if (geteuid() != 0 && writable < 0) {
        *why = xasprintf("%s is not ours to manage", base);
        return -1;
    }
    if (mkdir(dir, 0755) < 0 && (errno != EEXIST || rmdir(dir) < 0 || mkdir(dir, 0755) < 0)) {
        *why = xasprintf("cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (shim_cgroup_open_procs(dir, procs_fd, why) == 0)
        return 0;
    rmdir(dir);
    return -1;
}

/* The cgroup a v2 job cgroup goes in: the one gflowd names in GFLOW_SHIM_CGROUP_BASE
 * (the service's cgroup, when gflowd moved itself and its shims into a leaf of it:
 * src/common/cgdelegate.h) if it is in this hierarchy, else the shim's own cgroup. */
static char *shim_jobcg_v2_base(const char *point, const char *root)
{
    const char *given = getenv(CGDELEGATE_ENV);
    size_t n = strlen(point);
    if (given && strncmp(given, point, n) == 0 && given[n] == '/')
        return xstrdup(given);
    return shim_cgroup_base(NULL, point, root);
}

/* cgroup v2: <base>/gflow-job-<id>.<shim pid> in the unified hierarchy, base being the
 * shim's own cgroup or the one gflowd names. No controller needs to be enabled for it:
 * membership is what counts (and cgroup.kill). Returns its directory, or NULL with
 * *why. */
static char *shim_jobcg_v2(int64_t job_id, int *procs_fd, char **why)
{
    char *point, *root;
    if (shim_cgroup_mount(NULL, &point, &root) < 0) {
        *why = xstrdup("no cgroup2 hierarchy is mounted");
        return NULL;
    }
    char *base = shim_jobcg_v2_base(point, root);
    free(point);
    free(root);
    char *dir = xasprintf("%s/gflow-job-%lld.%ld", base, (long long)job_id, (long)getpid());
    if (shim_jobcg_make(base, dir, procs_fd, why) < 0) {
        free(dir);
        dir = NULL;
    }
    free(base);
    return dir;
}

/* cgroup v1 (no unified hierarchy to use): <the shim's own freezer cgroup>/gflow/
 * job-<id>.<shim pid>. The freezer hierarchy is only used for its membership here.
 * Returns its directory, or NULL with *why. */
static char *shim_jobcg_v1(int64_t job_id, int *procs_fd, char **why)
{
    char *point, *root;
    if (shim_cgroup_mount("freezer", &point, &root) < 0) {
        *why = xstrdup("no cgroup v1 freezer hierarchy is mounted");
        return NULL;
    }
    char *base = shim_cgroup_base("freezer", point, root);
    free(point);
    free(root);
    char *parent = xasprintf("%s/gflow", base);
    char *dir = xasprintf("%s/job-%lld.%ld", parent, (long long)job_id, (long)getpid());
    if (mkdir_p(parent, 0755) < 0) {
        *why = xasprintf("cannot create %s: %s", parent, strerror(errno));
        free(dir);
        dir = NULL;
    } else if (shim_jobcg_make(base, dir, procs_fd, why) < 0) {
        free(dir);
        dir = NULL;
    }
    free(parent);
    free(base);
    return dir;
}

/* Step 9 before fork: the job's own cgroup, v2 first, else v1 (or only the kind
 * GFLOW_SHIM_CGROUP names: v2, v1, or none for no cgroup, for tests). Where none can be
 * made the job runs without one. Its directory goes into the lock file. 0, or -1 with
 * *err when the forced kind is unavailable. */
int shim_jobcg_setup(const struct shim_opts *o, struct shim_exec *ex, struct shim_jobcg *cg,
                     char **err)
{
    const char *force = getenv("GFLOW_SHIM_CGROUP");
    if (force && !*force)
        force = NULL;
    if (force && strcmp(force, "v2") != 0 && strcmp(force, "v1") != 0 &&
        strcmp(force, "none") != 0) {
        *err = xasprintf("GFLOW_SHIM_CGROUP '%s' is none of v2, v1, none", force);
        return -1;
    }
    if (force && strcmp(force, "none") == 0) {
        shim_cpus_setup(o, ex, cg);
        return 0;
    }
    char *why = NULL;
    if (!force || strcmp(force, "v2") == 0) {
        cg->dir = shim_jobcg_v2(o->job_id, &ex->jobcg_procs_fd, &why);
        cg->version = 2;
    }
    if (!cg->dir && (!force || strcmp(force, "v1") == 0)) {
        free(why);
        why = NULL;
        cg->dir = shim_jobcg_v1(o->job_id, &ex->jobcg_procs_fd, &why);
        cg->version = 1;
    }
    if (!cg->dir) {
        cg->version = 0;
        shim_cpus_setup(o, ex, cg);
        if (force)
            *err = xasprintf("job cgroup %s unavailable: %s", force, why);
        free(why);
        return force ? -1 : 0;
    }
    free(why);
    shim_report_lock_cgroup(o, cg->dir);
    shim_cpus_setup(o, ex, cg);
    return 0;
}

/* Removes the job's cgroup once nothing of the job is left in it. */
void shim_jobcg_end(struct shim_jobcg *cg, int64_t job_id)
{
    if (!cg->dir)
        return;
    shim_cgroup_remove(cg->dir, job_id);
    free(cg->dir);
    cg->dir = NULL;
    cg->version = 0;
}
