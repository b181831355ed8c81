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
