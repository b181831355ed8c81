/* launch: starting one job's gflow-shim: the shim's command line, the job's environment
 * in a memfd, its script file, the lock file the shim inherits (runner.h says what the
 * lock is for) (launch.c); and the process that takes the job: the supervisor, a standby
 * shim, or a shim started for it (launch_shims.c). */
#ifndef GFLOWD_LAUNCH_H
#define GFLOWD_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "job.h"

struct gflowd;
struct supervisor;

enum launch_result {
    LAUNCH_OK,
    LAUNCH_FAILED,      /* the job cannot be started: it fails */
    LAUNCH_SHORT,       /* the daemon is short of a resource: the job waits and is tried again */
    LAUNCH_NO_SPACE,    /* no room on the disk: the job waits until there is (disk.c) */
    LAUNCH_USER_LOOKUP, /* its user is not known (fresh) yet: it waits, UserLookup */
};

/* Whether j's user is known well enough to start it as that user (a system daemon;
 * userdb_uid_fresh): the scheduling pass's may_start (jobs.h). When not, the lookup is
 * under way or retried, and the job waits (UserLookup) until an answer comes. */
bool launch_user_ready(void *d, const struct job *j);

/* Whether errno value e means a lack of a resource that may pass (EMFILE, ENFILE,
 * EAGAIN, ENOMEM), rather than something wrong with the job. */
bool launch_short_of(int e);

/* Starts j's shim, with run/<id>.lock created and flock()ed for it to inherit.
 * LAUNCH_OK with *pid and its /proc start time, and either *sup, the supervisor that
 * took the job (below), or *sock, our end of a standby's socket (-1: a shim of this job
 * alone); otherwise *err (to free) says why. */
enum launch_result launch_shim(struct gflowd *d, const struct job *j, pid_t *pid, int64_t *start,
                               int *sock, struct supervisor **sup, char **err);

/* Lock files are reused: creating a file costs the filesystem an inode allocation (on
 * ext4 without a journal, one that steps over every inode freed in the last 30 s, so
 * that a stream of jobs that each create and remove one makes every create slower),
 * so the lock file of an ended job, once its end is committed, is kept as a spare
 * (run/spare/<id>, at most LAUNCH_SPARE_MAX); the next launch overwrites what it held
 * with NULs (its blocks stay allocated) while it is still there, then renames it to the
 * job's lock file, so that a crash never leaves a job's lock file holding an ended job's
 * lines and exit record. launch_keep_lock keeps ended job id's lock file (removes it when
 * there are enough). */
#define LAUNCH_SPARE_MAX 1024
void launch_keep_lock(const struct gflowd *d, int64_t id);
/* At the daemon's start: makes d->launcher (what launching keeps between jobs: the
 * spares, the standbys, the supervisors) and empties run/spare. 0, or
 * -1 with *err. launch_free frees it, once the standbys and supervisors are stopped. */
int launch_init(struct gflowd *d, char **err);
void launch_free(struct gflowd *d);

/* Standby shims, started before their jobs, each serving job after job (launch.c):
 * launch_shim hands the next job to one when one waits. launch_standby_start starts one
 * if none waits (a failure is only logged: jobs then start their own shim);
 * launch_standby_back takes back one whose job is over (SHIM_CTL_DONE: its socket is
 * ours again); launch_standby_stop ends those waiting. */
bool launch_standby_ready(const struct gflowd *d);
void launch_standby_start(const struct gflowd *d);
void launch_standby_back(const struct gflowd *d, pid_t pid, int64_t start, int sock);
/* Says what (SHIM_CTL_TERM, _FORWARD with value) about job id on a standby's or the
 * supervisor's socket: 0, or -1 (errno) when it cannot take it. */
int launch_ctl_send(int sock, char what, int64_t id, int value);
void launch_standby_stop(const struct gflowd *d);

/* The job supervisor (gflow-shim --supervisor), which supervises the jobs that need no
 * shim of their own: launch_shim hands it those (starting it when there is none).
 * Messages to it name the job (SHIM_CTL_TERM, _FORWARD with value): 0, or -1 (errno)
 * when it cannot take one. A supervisor of an earlier daemon, running jobs this one
 * adopted, is reached at the socket its jobs' lock files name (NULL: it cannot be).
 * Each run that names one holds it (use, unuse): an earlier daemon's goes once no run
 * holds it. runner.c hears from them (runner_supervised_done, _gone). stop: at the
 * daemon's end; supervisors go on with their jobs. */
struct supervisor;
void launch_supervisor_start(struct gflowd *d);
struct supervisor *launch_supervisor_attach(struct gflowd *d, const char *path, pid_t pid,
                                            int64_t start);
void launch_supervisor_use(struct supervisor *s);
void launch_supervisor_unuse(struct supervisor *s);
int launch_supervisor_send(struct supervisor *s, char what, int64_t id, int value);
void launch_supervisor_stop(const struct gflowd *d);

#endif
