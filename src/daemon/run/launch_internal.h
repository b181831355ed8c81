/* What launch.c (a job's launch) and launch_shims.c (the processes that take a job)
 * share. Not for other modules: launch.h is the interface. */
#ifndef GFLOWD_LAUNCH_INTERNAL_H
#define GFLOWD_LAUNCH_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>

struct gflowd;
struct supervisor;

/* Hands the prepared job (argv, the lock and environment fds) to the supervisor when it
 * takes such a job, else to a waiting standby, else to a shim started for it: that
 * process's pid and *start time, with *sup or *sock as launch_shim says; -1 (errno) when
 * none could be started. */
pid_t launch_hand_over(struct gflowd *d, char *const *argv, int lock_fd, int env_fd, int64_t *start,
                       int *sock, struct supervisor **sup);

#endif
