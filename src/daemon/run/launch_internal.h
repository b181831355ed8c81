/* What launch.c (a job's launch) and launch_shims.c (the processes that take a job)
 * share. Not for other modules: launch.h is the interface. */
#ifndef GFLOWD_LAUNCH_INTERNAL_H
#define GFLOWD_LAUNCH_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>

struct gflowd;
struct supervisor;

/* What launching keeps between jobs (struct gflowd's launcher; launch_init makes it,
 * launch_free frees it), in place of process-wide state. */
#define LAUNCH_IDLE_MAX 8

/* A standby shim waiting for a job (launch_shims.c). */
struct standby {
    pid_t pid;
    int64_t start; /* its /proc start time */
    int sock;      /* our end of its SOCK_SEQPACKET socket */
};

struct launcher {
    /* The spare lock files (launch_keep_lock): their ids, the last kept on top. */
    int64_t spares[LAUNCH_SPARE_MAX];
    size_t n_spares;
    /* The standbys waiting, the last to come back on top. */
    struct standby idle[LAUNCH_IDLE_MAX];
    size_t n_idle;
    struct supervisor *supervisors; /* ours and those of earlier daemons we reached */
    double supervisor_failed_at;    /* monotonic; when ours last failed to start */
};

/* Hands the prepared job (argv, the lock and environment fds) to the supervisor when it
 * takes such a job, else to a waiting standby, else to a shim started for it: that
 * process's pid and *start time, with *sup or *sock as launch_shim says; -1 (errno) when
 * none could be started. */
pid_t launch_hand_over(struct gflowd *d, char *const *argv, int lock_fd, int env_fd, int64_t *start,
                       int *sock, struct supervisor **sup);

#endif
