/* timefmt: the style of times and their zone (see timefmt.h). */
#include "timefmt.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define TIMEFMT_ZONEINFO "/usr/share/zoneinfo"

static timefmt_loader_fn *timefmt_loader;
static bool timefmt_loaded;

/* A name of letters, digits and "_-+" parts joined by '/', none of them "." or "..": a
 * path below the zone folder and nothing else. */
static bool zone_name_ok(const char *name)
{
    if (!*name || *name == '/' || strlen(name) > 255)
        return false;
    for (const char *p = name; *p; p++) {
        bool word = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                    (*p >= '0' && *p <= '9') || strchr("_-+./", *p);
        if (!word)
            return false;
    }
    for (const char *part = name; part;) {
        const char *slash = strchr(part, '/');
        size_t len = slash ? (size_t)(slash - part) : strlen(part);
        if (len == 0 || (len == 1 && part[0] == '.') || (len == 2 && !strncmp(part, "..", 2)))
            return false;
        part = slash ? slash + 1 : NULL;
    }
    return true;
}

/* True if the zone folder holds a compiled zone (a "TZif" file) by this name. glibc
 * would take any other name silently as UTC under that name, so it is checked here. */
static bool zone_file_ok(const char *name)
{
    const char *dir = getenv("TZDIR");
    char *path = xasprintf("%s/%s", dir && *dir ? dir : TIMEFMT_ZONEINFO, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0)
        return false;
    char magic[4];
    bool ok =
        read(fd, magic, sizeof(magic)) == (ssize_t)sizeof(magic) && memcmp(magic, "TZif", 4) == 0;
    close(fd);
    return ok;
}

int timefmt_zone_check(const char *name, char **err)
{
    /* UTC needs no zone file: glibc reads the bare name as the POSIX zone UTC+0. */
    if (!strcmp(name, "UTC"))
        return 0;
    if (zone_name_ok(name) && zone_file_ok(name))
        return 0;
    *err = xasprintf("unknown time zone '%s': use an IANA name such as Asia/Shanghai, "
                     "Europe/Berlin or UTC (the names under %s), or leave timezone unset for "
                     "local time",
                     name, TIMEFMT_ZONEINFO);
    return -1;
}

int timefmt_use_zone(const char *name, char **err)
{
    if (name && timefmt_zone_check(name, err) < 0)
        return -1;
    if (name)
        setenv("TZ", name, 1);
    tzset();
    timefmt_loaded = true;
    return 0;
}

void timefmt_set_loader(timefmt_loader_fn *fn)
{
    timefmt_loader = fn;
    timefmt_loaded = false;
}

void timefmt_ready(void)
{
    if (timefmt_loaded)
        return;
    timefmt_loaded = true;
    if (timefmt_loader)
        timefmt_loader();
}

/* strftime of t in the zone in use into buf; "-" when t <= 0 or it cannot be shown. */
static void time_into(char *buf, size_t cap, double t, const char *pattern)
{
    timefmt_ready();
    time_t secs = (time_t)t;
    struct tm tm;
    size_t n = 0;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral" /* the patterns are this file's callers' */
    if (t > 0 && localtime_r(&secs, &tm))
        n = strftime(buf, cap, pattern, &tm);
#pragma GCC diagnostic pop
    if (!n)
        snprintf(buf, cap, "-");
}

void format_time_buf(char *buf, size_t cap, double t)
{
    time_into(buf, cap, t, "%Y-%m-%d %H:%M:%S");
}

char *format_time(double t)
{
    char buf[64];
    format_time_buf(buf, sizeof(buf), t);
    return xstrdup(buf);
}

char *format_time_zone(double t)
{
    char buf[96];
    time_into(buf, sizeof(buf), t, "%Y-%m-%d %H:%M:%S %Z");
    return xstrdup(buf);
}

char *format_time_as(double t, const char *pattern)
{
    char buf[128];
    time_into(buf, sizeof(buf), t, pattern);
    return xstrdup(buf);
}

void format_duration_buf(char *buf, size_t cap, int64_t secs)
{
    if (secs < 0)
        secs = 0;
    snprintf(buf, cap, "%02lld:%02lld:%02lld", (long long)(secs / 3600),
             (long long)(secs / 60 % 60), (long long)(secs % 60));
}

char *format_duration(int64_t secs)
{
    char buf[32];
    format_duration_buf(buf, sizeof(buf), secs);
    return xstrdup(buf);
}
