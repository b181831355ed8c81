/* cgleaf: gflowd's leaf in a delegated cgroup v2 (see cgleaf.h). */
#include "cgleaf.h"

#include <stdlib.h>
#include <unistd.h>

#include "cgdelegate.h"
#include "daemon.h"
#include "files.h"
#include "log.h"
#include "util.h"

void cgleaf_enter(struct gflowd *d)
{
    char *mountinfo = read_file("/proc/self/mountinfo", NULL);
    char *own = read_file("/proc/self/cgroup", NULL);
    bool is_root = false;
    char *dir = mountinfo && own ? cgdelegate_own_dir(mountinfo, own, &is_root) : NULL;
    free(mountinfo);
    free(own);
    if (!dir) {
        log_info("cgroup v2 leaf: not used: gflowd has no cgroup in a cgroup2 hierarchy");
        return;
    }
    char *why = NULL;
    int rc = cgdelegate_setup(dir, is_root, geteuid(), getpid(), &d->cgroup, &why);
    if (rc > 0) {
        setenv(CGDELEGATE_ENV, d->cgroup.service_dir, 1);
        log_info("cgroup v2 leaf: gflowd is in %s; job cgroups go in %s (%s enabled there)",
                 d->cgroup.leaf_dir, d->cgroup.service_dir, d->cgroup.enabled);
    } else {
        log_info("cgroup v2 leaf: not used, job cgroups stay below the shim's own cgroup: %s", why);
    }
    free(why);
    free(dir);
}

void cgleaf_leave(struct gflowd *d)
{
    char *why = NULL;
    if (cgdelegate_release(&d->cgroup, &why) < 0)
        log_warn("cgroup v2 leaf: %s; systemd may not be able to start the next gflowd in "
                 "this cgroup",
                 why);
    else if (d->cgroup.moved)
        log_info("cgroup v2 leaf: %s turned off in %s for the next gflowd; running jobs get "
                 "their limits back when it turns them on again",
                 d->cgroup.enabled, d->cgroup.service_dir);
    free(why);
    cgdelegate_free(&d->cgroup);
}
