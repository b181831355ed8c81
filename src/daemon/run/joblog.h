/* joblog: the directory of the job logs (daemon.log_dir) held open, and a job's log
 * opened there for gflowd to read (gjob log), safely in a directory users may write to.
 *
 * A log directory users can write to (a /scratch one; the slurm backend needs one) lets
 * a user put a link, or another file, where their job's log was. gflowd runs as root, so
 * it opens a log only through the directory it holds, without following a link, never
 * opening anything but what it checked (O_PATH first, then the same inode reopened), and
 * only a regular file that the job's owner owns: its owner can read such a file anyway
 * (the owner of an inode may always chmod it), so nothing is shown that they could not
 * read themselves. Anything else (a link, a FIFO, root's or another user's file, as a
 * hard link or a leftover of an earlier job with the same id would be) is refused. */
#ifndef GFLOWD_JOBLOG_H
#define GFLOWD_JOBLOG_H

#include <stdint.h>
#include <sys/types.h>

struct gflowd;

/* Opens daemon.log_dir (created already) and holds it in d->log_dir_fd. A directory
 * that others may write to without the sticky bit is refused: they could swap each
 * other's logs. 0, or -1 with *err (one line: what is wrong and how to fix it). */
int joblog_dir_open(struct gflowd *d, char **err);

/* The log of job job_id, whose owner is the user owner (owner_name, for the message),
 * opened for reading: a descriptor, or -1 with errno ENOENT (no log yet), or -1 with
 * *why (a 403 message: what is there instead of a log) or errno set otherwise. */
int joblog_open(const struct gflowd *d, int64_t job_id, uid_t owner, const char *owner_name,
                char **why);

#endif
