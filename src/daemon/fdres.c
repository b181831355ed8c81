/* fdres: the descriptor reserves (see fdres.h). */
#include "fdres.h"

#include <dirent.h>
#include <stddef.h>

const char *fdres_class_name(enum fdres_class cls)
{
    static const char *const names[FDRES_CLASSES] = {"daemon", "connections", "jobs"};
    return names[cls];
}

const char *fdres_split(struct fdres *r, int64_t limit, int64_t open_now, int64_t max_connections)
{
    /* A low limit (tens) still leaves jobs and connections some. */
    int64_t margin = limit / 4 < FDRES_DAEMON_MARGIN ? limit / 4 : FDRES_DAEMON_MARGIN;
    int64_t own = open_now + margin;
    int64_t conns = limit / 2 < max_connections ? limit / 2 : max_connections;
    const char *warning = NULL;
    if (limit - own - conns < FDRES_JOB_FDS) { /* too low a limit: connections give way */
        conns = (limit - own) / 2;
        if (conns < 1)
            conns = 1;
        warning = "the open-file limit leaves almost nothing for jobs and connections; "
                  "raise it (ulimit -n, LimitNOFILE= in the systemd unit)";
    }
    int64_t jobs = limit - own - conns;
    if (jobs < FDRES_JOB_FDS)
        jobs = FDRES_JOB_FDS; /* one job still runs: the limit is not kept then */
    r->limit = limit;
    r->reserved[FDRES_DAEMON] = own;
    r->reserved[FDRES_CONNECTIONS] = conns;
    r->reserved[FDRES_JOBS] = jobs;
    r->user_connections = limit / 2 / FDRES_USER_SHARE;
    if (r->user_connections < 1)
        r->user_connections = 1;
    return warning;
}

void fdres_count(struct fdres *r, enum fdres_class cls, int64_t n)
{
    r->in_use[cls] += n;
}

int64_t fdres_open_now(void)
{
    DIR *dp = opendir("/proc/self/fd");
    if (!dp)
        return -1;
    int64_t n = -3; /* ., .. and the directory's own descriptor */
    while (readdir(dp))
        n++;
    closedir(dp);
    return n;
}

int64_t fdres_in_use(const struct fdres *r, enum fdres_class cls)
{
    if (cls != FDRES_DAEMON)
        return r->in_use[cls];
    int64_t open = fdres_open_now();
    if (open < 0)
        return -1;
    int64_t own = open - r->in_use[FDRES_CONNECTIONS] - r->in_use[FDRES_JOBS];
    return own > 0 ? own : 0;
}

int64_t fdres_free(const struct fdres *r, enum fdres_class cls)
{
    if (r->limit == 0)
        return INT64_MAX;
    return r->reserved[cls] - fdres_in_use(r, cls);
}
