/* lockfile: one daemon per data directory. The daemon holds flock() on gflowd.lock for
 * its whole life and writes "<pid> <starttime>" in it, so `gflowd down` signals only
 * that very process, never a recycled pid. */
#ifndef GFLOWD_LOCKFILE_H
#define GFLOWD_LOCKFILE_H

#include <stdint.h>
#include <sys/types.h>

/* Takes the lock and records this process. Returns the fd to keep open, or -1: if another
 * daemon holds it, *holder is its pid (else 0) and *err says what failed. */
int lockfile_acquire(const char *path, pid_t *holder, char **err);

/* 1 if a live daemon holds the lock (its pid and start time filled), 0 if none. */
int lockfile_holder(const char *path, pid_t *pid, int64_t *start);

#endif
