/* disk: whether the filesystems gflowd writes to have room: the data directory's (the
 * database, exit and lock files) and the job logs' (daemon.log_dir, often the same).
 * While either is full, requests that would write are refused with 507 and a message
 * that names the filesystem and says what to do, and no job is started; gflowd looks
 * again by itself and resumes once there is room. */
#ifndef GFLOWD_DISK_H
#define GFLOWD_DISK_H

#include <stdbool.h>
#include <stdint.h>

/* Below this much free space (or DISK_MIN_FREE_INODES inodes) a filesystem counts as
 * full: room for what gflowd itself must still write (a job's end, its exit file) is
 * kept apart for it (store.c, runner.c). */
#define DISK_MIN_FREE_BYTES (4LL * 1024 * 1024)
#define DISK_MIN_FREE_INODES 64
/* A write that failed for want of space counts as "full" for at least this long, even
 * when the filesystem then shows some room (one large transaction may not fit it). */
#define DISK_HOLD_SECS 1.0

struct disk;
struct jobs;

struct disk *disk_new(const char *data_dir, const char *log_dir);
void disk_free(struct disk *k);
/* The running jobs whose logs are looked at when the logs' filesystem is full. */
void disk_set_jobs(struct disk *k, const struct jobs *jobs);

/* Whether either filesystem is full (looked at no longer than 0.1 s ago). */
bool disk_full(struct disk *k);
/* A write of gflowd's failed for want of space on the filesystem of path. */
void disk_note_full(struct disk *k, const char *path);
/* Whether a request that writes may go ahead, looked at now: 0, or -1 with *msg (to
 * free) for its 507 reply. new_jobs: it adds jobs (a submission, a redo), whose logs
 * need room too; anything else needs only the data directory's. */
int disk_check_write(struct disk *k, bool new_jobs, char **msg);
/* Why gflowd holds back now (what disk_full found), NULL when it does not. */
const char *disk_problem(struct disk *k);

/* While the logs' filesystem is full: the running job with the largest log there, which
 * disk_problem's message names too (id 0: none, or the disk is not full). */
struct disk_flooder {
    int64_t id;
    int64_t uid;
    int64_t log_bytes;
    char user[64]; /* its user's name, cut to fit */
};
struct disk_flooder disk_flooder(struct disk *k);

#endif
