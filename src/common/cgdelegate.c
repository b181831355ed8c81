/* cgdelegate: gflowd's place in a delegated cgroup v2 subtree (see cgdelegate.h). */
#include "cgdelegate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "files.h"
#include "util.h"

void cgdelegate_unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* The first cgroup2 mount's root and mount point (fields 4 and 5). 0, or -1. */
static int cgdelegate_v2_mount(const char *mountinfo, char root[PATH_MAX], char point[PATH_MAX])
{
    for (const char *line = mountinfo; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char *copy = xstrndup(line, len);
        char *sep = strstr(copy, " - ");
        char fstype[32];
        bool found = sep && sscanf(sep + 3, "%31s", fstype) == 1 &&
                     strcmp(fstype, "cgroup2") == 0 &&
                     sscanf(copy, "%*s %*s %*s %4095s %4095s", root, point) == 2;
        free(copy);
        if (found) {
            cgdelegate_unescape(root);
            cgdelegate_unescape(point);
            return 0;
        }
        line = eol ? eol + 1 : NULL;
    }
    return -1;
}

char *cgdelegate_own_dir(const char *mountinfo, const char *proc_cgroup, bool *is_root)
{
    char root[PATH_MAX], point[PATH_MAX];
    if (cgdelegate_v2_mount(mountinfo, root, point) < 0)
        return NULL;
    const char *own = NULL;
    size_t own_len = 0;
    for (const char *line = proc_cgroup; line && *line;) {
        const char *eol = strchr(line, '\n');
        if (strncmp(line, "0::", 3) == 0) {
            own = line + 3;
            own_len = eol ? (size_t)(eol - own) : strlen(own);
            break;
        }
        line = eol ? eol + 1 : NULL;
    }
    if (!own || own_len == 0 || own[0] != '/')
        return NULL;
    char *path = xstrndup(own, own_len);
    const char *rel = path;
    size_t n = strlen(root);
    if (strcmp(root, "/") != 0) {
        if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != '\0')) {
            free(path); /* outside what the mount shows */
            return NULL;
        }
        rel = path + n;
    }
    *is_root = rel[0] == '\0' || strcmp(rel, "/") == 0;
    char *dir = xasprintf("%s%s", point, *is_root ? "" : rel);
    free(path);
    return dir;
}

/* Whether xattr name of dir is "1" (systemd's delegation mark). */
static bool cgdelegate_marked(const char *dir, const char *name)
{
    char v[8];
    ssize_t n = getxattr(dir, name, v, sizeof(v));
    return n == 1 && v[0] == '1';
}

bool cgdelegate_is_delegated(const char *dir, uid_t euid, char **why)
{
    if (euid == 0) {
        if (cgdelegate_marked(dir, "trusted.delegate") || cgdelegate_marked(dir, "user.delegate"))
            return true;
        *why = xasprintf("%s is not marked as delegated (no trusted.delegate xattr: the unit "
                         "needs Delegate=yes and a systemd that marks it)",
                         dir);
        return false;
    }
    static const char *const files[] = {"cgroup.procs", "cgroup.subtree_control"};
    if (access(dir, W_OK) < 0) {
        *why = xasprintf("%s is not writable by uid %u (not delegated)", dir, (unsigned)euid);
        return false;
    }
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char *path = xasprintf("%s/%s", dir, files[i]);
        int rc = access(path, W_OK);
        free(path);
        if (rc < 0) {
            *why = xasprintf("%s/%s is not writable by uid %u (not delegated)", dir, files[i],
                             (unsigned)euid);
            return false;
        }
    }
    return true;
}

/* Writes value to dir/file. O_TRUNC and O_CREAT change nothing on cgroupfs (its files
 * exist and cannot be created); they make a fake tree of plain files behave alike. 0,
 * or -1 with errno. */
static int cgdelegate_write(const char *dir, const char *file, const char *value)
{
    char *path = xasprintf("%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0644);
    free(path);
    if (fd < 0)
        return -1;
    size_t len = strlen(value);
    int rc = write(fd, value, len) == (ssize_t)len ? 0 : -1;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

bool cgdelegate_has_word(const char *dir, const char *file, const char *word)
{
    char *path = xasprintf("%s/%s", dir, file);
    char *buf = read_file(path, NULL);
    free(path);
    bool found = false;
    char *save = NULL;
    for (char *w = buf ? strtok_r(buf, " \n", &save) : NULL; w && !found;
         w = strtok_r(NULL, " \n", &save))
        found = strcmp(w, word) == 0;
    free(buf);
    return found;
}

/* Whether dir/cgroup.procs lists no process but pid. *why otherwise. */
static bool cgdelegate_alone(const char *dir, pid_t pid, char **why)
{
    char *path = xasprintf("%s/cgroup.procs", dir);
    char *buf = read_file(path, NULL);
    if (!buf) {
        *why = xasprintf("cannot read %s: %s", path, strerror(errno));
        free(path);
        return false;
    }
    long other = 0;
    char *save = NULL;
    for (char *w = strtok_r(buf, " \n", &save); w && !other; w = strtok_r(NULL, " \n", &save))
        if (strtol(w, NULL, 10) != (long)pid)
            other = strtol(w, NULL, 10);
    if (other)
        *why = xasprintf("%s also holds process %ld: gflowd does not have that cgroup to itself",
                         path, other);
    free(buf);
    free(path);
    return !other;
}

/* Enables the memory controller, and pids where available, for dir's children. 0 with
 * *enabled, or -1 with *why. */
static int cgdelegate_enable(const char *dir, char **enabled, char **why)
{
    bool pids = cgdelegate_has_word(dir, "cgroup.controllers", "pids");
    /* One write is all or nothing; without pids if that one is refused. */
    if (pids && cgdelegate_write(dir, "cgroup.subtree_control", "+memory +pids") == 0) {
        *enabled = xstrdup("memory pids");
        return 0;
    }
    if (cgdelegate_write(dir, "cgroup.subtree_control", "+memory") == 0) {
        *enabled = xstrdup("memory");
        return 0;
    }
    *why = xasprintf("cannot enable the memory controller in %s/cgroup.subtree_control: %s", dir,
                     strerror(errno));
    return -1;
}

/* dir is a leaf named gflowd already (DelegateSubgroup=gflowd): its parent is the
 * service cgroup. 1, 0 or -1 as cgdelegate_setup. */
static int cgdelegate_in_leaf(const char *dir, uid_t euid, struct cgdelegate *out, char **why)
{
    char *parent = xstrdup(dir);
    *strrchr(parent, '/') = '\0';
    int rc = -1;
    if (!cgdelegate_is_delegated(parent, euid, why)) {
        rc = 0;
    } else if (!cgdelegate_has_word(parent, "cgroup.controllers", "memory")) {
        *why = xasprintf("the memory controller is not available in %s", parent);
        rc = 0;
    } else if (cgdelegate_enable(parent, &out->enabled, why) == 0) {
        out->service_dir = parent;
        out->leaf_dir = xstrdup(dir);
        out->moved = false;
        return 1;
    }
    free(parent);
    return rc;
}

int cgdelegate_setup(const char *dir, bool is_root, uid_t euid, pid_t pid, struct cgdelegate *out,
                     char **why)
{
    *out = (struct cgdelegate){0};
    if (is_root) {
        *why = xasprintf("gflowd is in the root cgroup %s, where job cgroups need no leaf", dir);
        return 0;
    }
    const char *base = strrchr(dir, '/');
    if (base && strcmp(base + 1, CGDELEGATE_LEAF) == 0 && base != dir)
        return cgdelegate_in_leaf(dir, euid, out, why);
    if (!cgdelegate_is_delegated(dir, euid, why))
        return 0;
    if (!cgdelegate_has_word(dir, "cgroup.controllers", "memory")) {
        *why = xasprintf("the memory controller is not available in %s", dir);
        return 0;
    }
    if (!cgdelegate_alone(dir, pid, why))
        return 0;
    char *leaf = xasprintf("%s/%s", dir, CGDELEGATE_LEAF);
    bool made = mkdir(leaf, 0755) == 0;
    if (!made && errno != EEXIST) {
        *why = xasprintf("cannot create %s: %s", leaf, strerror(errno));
        free(leaf);
        return -1;
    }
    char pidstr[24];
    snprintf(pidstr, sizeof(pidstr), "%ld", (long)pid);
    if (cgdelegate_write(leaf, "cgroup.procs", pidstr) < 0) {
        *why = xasprintf("cannot move gflowd into %s: %s", leaf, strerror(errno));
    } else if (cgdelegate_enable(dir, &out->enabled, why) < 0) {
        cgdelegate_write(dir, "cgroup.procs", pidstr); /* back where it was */
    } else {
        out->service_dir = xstrdup(dir);
        out->leaf_dir = leaf;
        out->moved = true;
        return 1;
    }
    if (made)
        rmdir(leaf);
    free(leaf);
    return -1;
}

int cgdelegate_release(const struct cgdelegate *d, char **why)
{
    if (!d->service_dir || !d->moved || !d->enabled)
        return 0;
    struct strbuf off;
    strbuf_init(&off);
    char *save = NULL;
    char *list = xstrdup(d->enabled);
    for (char *w = strtok_r(list, " ", &save); w; w = strtok_r(NULL, " ", &save))
        strbuf_addf(&off, "%s-%s", off.len ? " " : "", w);
    free(list);
    int rc = cgdelegate_write(d->service_dir, "cgroup.subtree_control", off.buf);
    if (rc < 0)
        *why = xasprintf("cannot turn off %s in %s/cgroup.subtree_control: %s", d->enabled,
                         d->service_dir, strerror(errno));
    strbuf_free(&off);
    return rc;
}

void cgdelegate_free(struct cgdelegate *d)
{
    free(d->service_dir);
    free(d->leaf_dir);
    free(d->enabled);
    *d = (struct cgdelegate){0};
}
