/* devices: --deny-devices (step 7): the job's cgroup v1 devices cgroup, which denies it
 * the NVIDIA GPUs it was not given, and its removal after the job. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "util.h"

/* Writes one "c <major>:<minor> rwm" rule per denied device to dir/devices.deny (the kernel
 * takes one rule per write). 0, or -1 with *why. */
static int shim_devices_deny(const char *dir, const struct shim_opts *o, char **why)
{
    char *path = xasprintf("%s/devices.deny", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    int rc = fd < 0 ? -1 : 0;
    for (int i = 0; rc == 0 && i < o->n_deny_minors; i++) {
        char rule[64];
        int n = snprintf(rule, sizeof(rule), "c %d:%d rwm", o->deny_majors[i], o->deny_minors[i]);
        if (write(fd, rule, (size_t)n) != n)
            rc = -1;
    }
    if (rc < 0)
        *why = xasprintf("cannot write %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}

/* Creates the job's devices cgroup, <shim's devices cgroup>/gflow/job-<id>, with its
 * denials, and opens its cgroup.procs for the children to join. Returns the cgroup's
 * directory, or NULL with *why. */
static char *shim_devices_create(const struct shim_opts *o, int *procs_fd, char **why)
{
    if (geteuid() != 0) {
        *why = xstrdup("the shim does not run as root");
        return NULL;
    }
    char *mount_point, *mount_root;
    if (shim_cgroup_mount("devices", &mount_point, &mount_root) < 0) {
        *why = xstrdup("no cgroup v1 devices controller is mounted (on cgroup v2 device "
                       "access is controlled by an eBPF program, which gflow does not load)");
        return NULL;
    }
    char *base = shim_cgroup_base("devices", mount_point, mount_root);
    char *dir = xasprintf("%s/gflow/job-%lld", base, (long long)o->job_id);
    free(base);
    free(mount_point);
    free(mount_root);
    /* An empty leftover of a shim that died goes, so that the job gets exactly the
     * denials of this run; one still in use stays (rmdir fails) and is shared. */
    rmdir(dir);
    if (mkdir_p(dir, 0755) < 0) {
        *why = xasprintf("cannot create %s: %s", dir, strerror(errno));
        free(dir);
        return NULL;
    }
    if (shim_devices_deny(dir, o, why) == 0 && shim_cgroup_open_procs(dir, procs_fd, why) == 0)
        return dir;
    rmdir(dir);
    free(dir);
    return NULL;
}

/* Step 7 before fork: with --deny-devices, sets up the job's devices cgroup and
 * returns its directory; when that cannot be done, says so in the job's log (the job
 * runs anyway: isolation is only promised where the controller is available) and on
 * stderr, and returns NULL. */
char *shim_devices_setup(const struct shim_opts *o, struct shim_exec *ex)
{
    if (!o->deny_minors)
        return NULL;
    char *why = NULL;
    char *dir = shim_devices_create(o, &ex->cgroup_procs_fd, &why);
    if (dir)
        return dir;
    char *line = xasprintf("gflow-shim: device isolation unavailable: %s\n", why);
    if (write(ex->log_fd, line, strlen(line)) < 0) {
        /* stderr below still says it */
    }
    fprintf(stderr, "gflow-shim: job %lld: device isolation unavailable: %s\n",
            (long long)o->job_id, why);
    free(line);
    free(why);
    return NULL;
}

/* Removes the job's devices cgroup, if it has one. */
void shim_devices_end(struct shim_run *r, int64_t job_id)
{
    if (!r->cgroup_dir)
        return;
    shim_cgroup_remove(r->cgroup_dir, job_id);
    free(r->cgroup_dir);
    r->cgroup_dir = NULL;
}
