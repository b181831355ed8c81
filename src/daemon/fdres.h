/* fdres: the daemon's open-file limit split into reserves, one per class of descriptors,
 * so that no class can take another's (a user's connections cannot starve the jobs, nor
 * the jobs the connections, nor either the daemon's own needs: NVML, the database, the
 * log, the supervisor). Made once at start (serve.c), when what the daemon holds for
 * itself is open:
 *   daemon       what is open then (the store, the log, NVML, the loop, ...) and
 *                FDRES_DAEMON_MARGIN more (a quarter of a lower limit) for what comes
 *                and goes (the statistics
 *                workers' database connections, NVML opened again, a launch, the
 *                supervisor, notifications, the socket)
 *   connections  half the limit, at most limits.max_connections (listener.c refuses
 *                beyond); a uid other than the daemon's own may hold at most a quarter
 *                of them (and limits.max_connections_per_user), so that three users
 *                cannot starve a fourth
 *   jobs         the rest; each running job holds at most FDRES_JOB_FDS (its shim's
 *                pidfd, a standby shim's socket), jobs under the supervisor none, and
 *                jobs wait while the free part of the reserve cannot hold one more.
 * Jobs and connections are counted as their descriptors open and close; the daemon's own
 * are what else is open (fdres_open_now). A foundation: any room may count here. */
#ifndef GFLOWD_FDRES_H
#define GFLOWD_FDRES_H

#include <stdint.h>

enum fdres_class { FDRES_DAEMON, FDRES_CONNECTIONS, FDRES_JOBS, FDRES_CLASSES };

/* Descriptors a running job may hold of the daemon's. */
#define FDRES_JOB_FDS 2
/* Kept for the daemon's own needs beyond what is open when the reserves are made. */
#define FDRES_DAEMON_MARGIN 48
/* A uid other than the daemon's holds at most 1/FDRES_USER_SHARE of the connections. */
#define FDRES_USER_SHARE 4

struct fdres {
    int64_t limit; /* RLIMIT_NOFILE (soft, as raised); 0: not made (no limits) */
    int64_t reserved[FDRES_CLASSES];
    int64_t in_use[FDRES_CLASSES]; /* connections and jobs; the daemon's: fdres_in_use */
    int64_t user_connections;      /* the connections one uid (not the daemon's) may hold */
};

/* Splits limit between the classes, open_now being open (max_connections: the setting).
 * Returns a warning to log when the limit is too low to leave jobs a reserve, else NULL. */
const char *fdres_split(struct fdres *r, int64_t limit, int64_t open_now, int64_t max_connections);
/* n descriptors of cls opened (n > 0) or closed (n < 0). */
void fdres_count(struct fdres *r, enum fdres_class cls, int64_t n);
/* The part of cls's reserve not in use (for FDRES_DAEMON, from fdres_open_now). */
int64_t fdres_in_use(const struct fdres *r, enum fdres_class cls);
int64_t fdres_free(const struct fdres *r, enum fdres_class cls);
/* How many descriptors the process has open (/proc/self/fd); -1 if unknown. */
int64_t fdres_open_now(void);
/* "daemon", "connections", "jobs". */
const char *fdres_class_name(enum fdres_class cls);

#endif
