/* jobcgroup: a job's cgroup named in /proc/PID/cgroup (see jobcgroup.h). */
#include "jobcgroup.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* "<digits>.<digits>" making up all of [s, end): the job id and the shim pid. */
static bool jobcgroup_ids(const char *s, const char *end, struct jobcgroup_ref *ref)
{
    const char *dot = memchr(s, '.', (size_t)(end - s));
    if (!dot || dot == s || dot + 1 == end)
        return false;
    int64_t id = 0;
    long pid = 0;
    for (const char *p = s; p < dot; p++) {
        if (*p < '0' || *p > '9' || id > INT64_MAX / 10 - 1)
            return false;
        id = id * 10 + (*p - '0');
    }
    for (const char *p = dot + 1; p < end; p++) {
        if (*p < '0' || *p > '9' || pid > 1000000000L)
            return false;
        pid = pid * 10 + (*p - '0');
    }
    if (id <= 0 || pid <= 1)
        return false;
    ref->job_id = id;
    ref->shim_pid = pid;
    return true;
}

/* The job cgroup in one cgroup path ("/a/b/gflow-job-5.77/c"), if any: the first
 * component that names one. */
static bool jobcgroup_in_path(const char *path, const char *end, struct jobcgroup_ref *ref)
{
    static const char v2[] = "gflow-job-", v1[] = "job-";
    const char *prev = NULL, *prev_end = NULL;
    for (const char *c = path; c < end;) {
        while (c < end && *c == '/')
            c++;
        const char *ce = c;
        while (ce < end && *ce != '/')
            ce++;
        if (ce == c)
            break;
        size_t len = (size_t)(ce - c);
        if (len > sizeof(v2) - 1 && memcmp(c, v2, sizeof(v2) - 1) == 0 &&
            jobcgroup_ids(c + sizeof(v2) - 1, ce, ref))
            return true;
        if (prev && prev_end - prev == 5 && memcmp(prev, "gflow", 5) == 0 && len > sizeof(v1) - 1 &&
            memcmp(c, v1, sizeof(v1) - 1) == 0 && jobcgroup_ids(c + sizeof(v1) - 1, ce, ref))
            return true;
        prev = c;
        prev_end = ce;
        c = ce;
    }
    return false;
}

size_t jobcgroup_find(const char *text, struct jobcgroup_ref *out, size_t max)
{
    size_t n = 0;
    for (const char *line = text; line && *line && n < max;) {
        const char *eol = strchr(line, '\n');
        const char *end = eol ? eol : line + strlen(line);
        /* hierarchy-ID:controllers:path (the path may itself hold ':') */
        const char *c1 = memchr(line, ':', (size_t)(end - line));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
        struct jobcgroup_ref ref;
        if (c2 && jobcgroup_in_path(c2 + 1, end, &ref)) {
            bool dup = false;
            for (size_t i = 0; i < n; i++)
                dup |= out[i].job_id == ref.job_id && out[i].shim_pid == ref.shim_pid;
            if (!dup)
                out[n++] = ref;
        }
        line = eol ? eol + 1 : NULL;
    }
    return n;
}
