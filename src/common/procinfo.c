/* procinfo: facts about processes read from /proc. */
#include "procinfo.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
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

int proc_stat_read(pid_t pid, struct proc_stat *st)
{
    char buf[1024], *rest;
    if (pid <= 0) {
        errno = ESRCH;
        return -1;
    }
    errno = 0;
    if (stat_fields(pid, buf, sizeof(buf), &rest) < 0) {
        if (errno == 0) /* opened, but nothing to read: it went away meanwhile */
            errno = ESRCH;
        return -1;
    }
    const char *start = nth_field(rest, 22);
    long ppid, pgid, sid;
    if (!start || sscanf(rest, "%c %ld %ld %ld", &st->state, &ppid, &pgid, &sid) != 4) {
        errno = EIO;
        return -1;
    }
    st->ppid = (pid_t)ppid;
    st->pgid = (pid_t)pgid;
    st->sid = (pid_t)sid;
    st->start = strtoll(start, NULL, 10);
    return 0;
}

int proc_environ_has(pid_t pid, const char *entry)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/environ", (long)pid);
    size_t len;
    char *env = read_file(path, &len);
    if (!env)
        return -1;
    size_t n = strlen(entry);
    int found = 0;
    for (size_t i = 0; i < len && !found; i += strlen(env + i) + 1)
        found = strlen(env + i) == n && memcmp(env + i, entry, n) == 0;
    free(env);
    return found;
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
