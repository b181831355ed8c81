/* cgroup: finding cgroup hierarchies (/proc/self/mountinfo) and the shim's own cgroup
 * in them (/proc/self/cgroup), reading and writing cgroup files, and removing a job's
 * cgroup after it. Used by devices.c (step 7) and memlimit.c (step 8). */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cgdelegate.h"
#include "files.h"
#include "util.h"

/* Whether the comma-separated list opts holds word. */
static bool shim_cgroup_has_option(const char *opts, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = opts;; p++) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, word, n) == 0)
            return true;
        p += len;
        if (!*p)
            return false;
    }
}

/* Finds a cgroup hierarchy in /proc/self/mountinfo: fstype "cgroup" with controller
 * among its super options (v1), or fstype "cgroup2" when controller is NULL (the
 * unified hierarchy). Sets its mount point and the cgroup its root shows (fields 5
 * and 4). 0, or -1 if none. */
static int shim_cgroup_mount_read(const char *controller, char **mount_point, char **mount_root)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int rc = -1;
    while (rc < 0 && getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS */
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        *sep = '\0';
        char fstype[32], source[PATH_MAX], super[1024];
        if (sscanf(sep + 3, "%31s %4095s %1023s", fstype, source, super) != 3)
            continue;
        if (controller ? strcmp(fstype, "cgroup") != 0 || !shim_cgroup_has_option(super, controller)
                       : strcmp(fstype, "cgroup2") != 0)
            continue;
        char root[PATH_MAX], point[PATH_MAX];
        if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2)
            continue;
        cgdelegate_unescape(root);
        cgdelegate_unescape(point);
        *mount_root = xstrdup(root);
        *mount_point = xstrdup(point);
        rc = 0;
    }
    free(line);
    fclose(f);
    return rc;
}

/* The unified hierarchy's mount, once found (point NULL: not yet). Mounts are the
 * system's set-up, not something that changes under a job's start; a failed read (none
 * mounted, or /proc/self/mountinfo not readable then) is not kept: the job's start reads
 * again. */
static struct {
    char *point, *root;
} shim_cgroup_unified;

void shim_cgroup_mount_warm(void)
{
    if (!shim_cgroup_unified.point) /* set only when found */
        shim_cgroup_mount_read(NULL, &shim_cgroup_unified.point, &shim_cgroup_unified.root);
}

int shim_cgroup_mount(const char *controller, char **mount_point, char **mount_root)
{
    if (controller)
        return shim_cgroup_mount_read(controller, mount_point, mount_root);
    shim_cgroup_mount_warm();
    if (!shim_cgroup_unified.point)
        return -1;
    *mount_point = xstrdup(shim_cgroup_unified.point);
    *mount_root = xstrdup(shim_cgroup_unified.root);
    return 0;
}

/* The shim's own cgroup in the v1 hierarchy of controller ("5:devices:/a/b" in
 * /proc/self/cgroup gives "/a/b"), or in the unified hierarchy when controller is NULL
 * ("0::/a/b"); NULL if it has none. */
static char *shim_cgroup_own(const char *controller)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return NULL;
    char *line = NULL, *own = NULL;
    size_t cap = 0;
    while (!own && getline(&line, &cap, f) > 0) {
        char *ctrl = strchr(line, ':');
        char *path = ctrl ? strchr(ctrl + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        if (controller ? shim_cgroup_has_option(ctrl + 1, controller)
                       : ctrl == line + 1 && line[0] == '0' && ctrl[1] == '\0')
            own = xstrdup(path);
    }
    free(line);
    fclose(f);
    return own;
}

/* The directory of the shim's own cgroup (of controller, NULL: unified) under the
 * mount point. A job's cgroup goes below it rather than below the hierarchy's root,
 * so that it inherits whatever policy and limits the shim is under (a service's, a
 * container's) and only narrows them. Falls back to the mount point when the shim's
 * cgroup is not under it. */
char *shim_cgroup_base(const char *controller, const char *mount_point, const char *mount_root)
{
    char *own = shim_cgroup_own(controller);
    const char *rel = "";
    size_t n = strlen(mount_root);
    if (own && strcmp(mount_root, "/") == 0)
        rel = own;
    else if (own && strncmp(own, mount_root, n) == 0 && (own[n] == '/' || !own[n]))
        rel = own + n;
    char *base = xasprintf("%s%s", mount_point, strcmp(rel, "/") == 0 ? "" : rel);
    free(own);
    return base;
}

/* Writes value to dir/file. 0, or -1 with errno set. */
int shim_cgroup_write(const char *dir, const char *file, const char *value)
{
    char *path = xasprintf("%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    free(path);
    if (fd < 0)
        return -1;
    ssize_t len = (ssize_t)strlen(value);
    int rc = write(fd, value, (size_t)len) == len ? 0 : -1;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Opens dir/cgroup.procs for writing, for the job's processes to join the cgroup.
 * 0 with *procs_fd, or -1 with *why. */
int shim_cgroup_open_procs(const char *dir, int *procs_fd, char **why)
{
    char *procs = xasprintf("%s/cgroup.procs", dir);
    *procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (*procs_fd < 0)
        *why = xasprintf("cannot open %s: %s", procs, strerror(errno));
    free(procs);
    return *procs_fd >= 0 ? 0 : -1;
}

/* The number in dir/file: the whole file when key is NULL (memory.failcnt), else the
 * one after "key " on its line (memory.events, memory.oom_control). -1 when the file
 * or the key is missing. */
long long shim_cgroup_read_num(const char *dir, const char *file, const char *key)
{
    char *path = xasprintf("%s/%s", dir, file);
    char *buf = read_file(path, NULL);
    free(path);
    if (!buf)
        return -1;
    long long v = -1;
    size_t n = key ? strlen(key) : 0;
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!key || (strncmp(l, key, n) == 0 && l[n] == ' ')) {
            v = strtoll(l + n, NULL, 10);
            break;
        }
    }
    free(buf);
    return v;
}

/* After the job: removes one of its cgroups. A process the shim just reaped may still
 * count as a member for a moment (EBUSY), so it tries for about a second. */
void shim_cgroup_remove(const char *dir, int64_t job_id)
{
    for (int i = 0; i < 100; i++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return;
        if (errno != EBUSY)
            break;
        struct timespec ts = {0, 10L * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "gflow-shim: job %lld: cannot remove %s: %s\n", (long long)job_id, dir,
            strerror(errno));
}
