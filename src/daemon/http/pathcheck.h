/* pathcheck: whether a directory a user named exists, asked without letting a file
 * system that never answers (a hung NFS or FUSE mount) stop the daemon. */
#ifndef GFLOWD_PATHCHECK_H
#define GFLOWD_PATHCHECK_H

/* How long the daemon waits for the answer, and how many unanswered looks may be left
 * running at once (beyond that, no look is made until one returns). */
#define PATHCHECK_WAIT_SECS 0.5
#define PATHCHECK_MAX_PENDING 4

enum pathcheck {
    PATHCHECK_DIR,     /* a directory */
    PATHCHECK_MISSING, /* nothing there, or not a directory */
    PATHCHECK_UNKNOWN, /* cannot tell: no answer in time, or another error (EACCES) */
};

/* Looks at path (stat, as the daemon) on a thread of its own and waits for the answer
 * at most PATHCHECK_WAIT_SECS; a look that does not return in time is left running and
 * answers PATHCHECK_UNKNOWN. */
enum pathcheck pathcheck_dir(const char *path);

#endif
