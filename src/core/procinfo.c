/* procinfo: facts about processes read from /proc. */
#include "procinfo.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* Fields after the command name, which may itself hold spaces and parentheses, so
 * parsing starts after its last ')'. Field 3 (state) is rest[0]. */
static int stat_fields(pid_t pid, char *buf, size_t n, char **rest)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t len = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return -1;
    *rest = p + 2;
    return 0;
}

static const char *nth_field(const char *rest, int field)
{
    /* rest starts at field 3 */
    const char *p = rest;
    for (int i = 3; i < field && p; i++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return p;
}

int64_t proc_start_time(pid_t pid)
{
    char buf[1024], *rest;
    if (pid <= 0 || stat_fields(pid, buf, sizeof(buf), &rest) < 0)
        return -1;
    const char *f = nth_field(rest, 22);
    return f ? strtoll(f, NULL, 10) : -1;
}

pid_t proc_parent(pid_t pid)
{
    char buf[1024], *rest;
    if (pid <= 0 || stat_fields(pid, buf, sizeof(buf), &rest) < 0)
        return -1;
    const char *f = nth_field(rest, 4);
    return f ? (pid_t)strtol(f, NULL, 10) : -1;
}

int64_t proc_mem_total_mb(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return 0;
    char line[256];
    long long kb = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb > 0 ? kb / 1024 : 0;
}

/* The mount point and root of a cgroup hierarchy from /proc/self/mountinfo: fstype
 * "cgroup2" when controller is NULL, else fstype "cgroup" with controller among its
 * super options. 0 or -1. */
static int cgroup_mount(const char *controller, char *point, char *root, size_t n)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int ret = -1;
    while (ret < 0 && getline(&line, &cap, f) > 0) {
        char r[4096], mp[4096], fstype[64], src[4096], super[4096];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", r, mp) != 2 ||
            sscanf(dash + 3, "%63s %4095s %4095s", fstype, src, super) != 3)
            continue;
        bool match = false;
        if (!controller) {
            match = strcmp(fstype, "cgroup2") == 0;
        } else if (strcmp(fstype, "cgroup") == 0) {
            char *save = NULL;
            for (char *o = strtok_r(super, ",", &save); o && !match; o = strtok_r(NULL, ",", &save))
                match = strcmp(o, controller) == 0;
        }
        if (match && strlen(mp) < n && strlen(r) < n) {
            strcpy(point, mp);
            strcpy(root, r);
            ret = 0;
        }
    }
    free(line);
    fclose(f);
    return ret;
}

/* This process's cgroup in the hierarchy of controller (NULL: the unified one), as
 * /proc/self/cgroup gives it ("/a/b"). 0 or -1. */
static int own_cgroup(const char *controller, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    char line[4096];
    int ret = -1;
    while (ret < 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        bool match = false;
        if (!controller) {
            match = strcmp(line, "0") == 0 && c1[1] == '\0';
        } else {
            char *save = NULL;
            for (char *o = strtok_r(c1 + 1, ",", &save); o && !match; o = strtok_r(NULL, ",", &save))
                match = strcmp(o, controller) == 0;
        }
        if (match && strlen(c2 + 1) < n) {
            strcpy(out, c2 + 1);
            ret = 0;
        }
    }
    fclose(f);
    return ret;
}

/* The directory of this process's cgroup: the mount point plus the cgroup path below
 * the mount's root. NULL if not found (malloc'd). */
static char *own_cgroup_dir(const char *controller, bool *is_root)
{
    char point[4096], root[4096], own[4096];
    if (cgroup_mount(controller, point, root, sizeof(point)) < 0 ||
        own_cgroup(controller, own, sizeof(own)) < 0)
        return NULL;
    const char *rel = own;
    size_t rl = strlen(root);
    if (strcmp(root, "/") != 0 && strncmp(own, root, rl) == 0 && (own[rl] == '/' || !own[rl]))
        rel = own + rl;
    if (!*rel || strcmp(rel, "/") == 0)
        rel = "";
    *is_root = !*rel;
    return xasprintf("%s%s", point, rel);
}

static bool file_has_word(const char *dir, const char *file, const char *word)
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

const char *proc_memory_enforcement(void)
{
    const char *force = getenv("GFLOW_SHIM_MEMORY_METHOD");
    if (force && strcmp(force, "v2") == 0)
        return "cgroup v2";
    if (force && strcmp(force, "v1") == 0)
        return "cgroup v1";
    if (force && strcmp(force, "watchdog") == 0)
        return "watchdog";
    bool is_root = false;
    char *dir = own_cgroup_dir(NULL, &is_root);
    if (dir) {
        bool ok = file_has_word(dir, "cgroup.controllers", "memory") &&
                  (file_has_word(dir, "cgroup.subtree_control", "memory") ||
                   (is_root && access(dir, W_OK) == 0));
        free(dir);
        if (ok)
            return "cgroup v2";
    }
    dir = own_cgroup_dir("memory", &is_root);
    if (dir) {
        bool ok = access(dir, W_OK) == 0;
        free(dir);
        if (ok)
            return "cgroup v1";
    }
    return "watchdog";
}
