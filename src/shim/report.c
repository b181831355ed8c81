/* report: what the shim tells the daemon, in the forms src/core/exitfile.h defines: the
 * lock file's lines (its pid and start time first, then the job's cgroups and that a
 * signal was forwarded, the reason of a failure of its own last), the exit record
 * (into the room the daemon reserved for it in the lock file; with --exit-file, that
 * file, written atomically, or in place when the filesystem is full), and one line on
 * stderr (the daemon's log) for each failure. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "files.h"
#include "procinfo.h"
#include "util.h"

/* Replaces the lock file's lines with text. 0 or -1 with errno set. When the lock
 * file is to hold the exit record (in_lock), what is left of longer lines is overwritten
 * with NULs rather than cut off, so that the blocks the daemon allocated for the record
 * stay allocated: a truncation frees them (even one to the same size). (A lock file the
 * daemon reused holds NULs up to its old size: the lines end at the first NUL.) */
static int shim_report_lock_text(int fd, const char *text, bool in_lock)
{
    ssize_t n = (ssize_t)strlen(text);
    if (pwrite(fd, text, (size_t)n, 0) != n)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    if (st.st_size <= n)
        return 0;
    if (!in_lock)
        return ftruncate(fd, n);
    static const char zeros[EXITFILE_LOCK_MAX];
    size_t pad = (size_t)(st.st_size < EXITFILE_RECORD_AT ? st.st_size : EXITFILE_RECORD_AT);
    if (pad > (size_t)n && pwrite(fd, zeros, pad - (size_t)n, n) != (ssize_t)(pad - (size_t)n))
        return -1;
    return 0;
}

int64_t shim_report_self_start(void)
{
    static int64_t start = -1;
    if (start < 0)
        start = proc_start_time(getpid());
    return start;
}

/* Writes "<pid> <starttime>\n" into the daemon's lock file, which the shim keeps open
 * (and so locked) until it exits. */
int shim_report_lock(int fd, bool in_lock, char **err)
{
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        *err = xasprintf("--lock-fd %d: %s", fd, strerror(errno));
        return -1;
    }
    struct exit_lock lock = {.pid = getpid(),
                             .start = shim_report_self_start(),
                             .supervisor = (char *)shim_supervisor_path};
    char *text = exitfile_lock_format(&lock);
    /* The daemon gave it empty, or (in_lock) NULs where a reused file held more. */
    ssize_t n = (ssize_t)strlen(text);
    int rc = in_lock ? (pwrite(fd, text, (size_t)n, 0) == n ? 0 : -1)
                     : shim_report_lock_text(fd, text, false);
    free(text);
    if (rc < 0) {
        *err = xasprintf("cannot write lock file (fd %d): %s", fd, strerror(errno));
        return -1;
    }
    return 0;
}

/* Appends line to the lock file's lines, which end at the first NUL or the end of the
 * file (a lock file the daemon reused is NULs past them). Best effort, as what it says
 * is for a daemon that has lost the shim; the shim itself goes on either way. */
static void shim_report_lock_append(int fd, char *line)
{
    static char buf[EXITFILE_LOCK_MAX];
    if (fd < 0 || !line)
        goto out;
    size_t n = strlen(line);
    ssize_t got = pread(fd, buf, sizeof(buf), 0);
    size_t end = got > 0 ? strnlen(buf, (size_t)got) : 0;
    if (got < 0 || end + n > EXITFILE_LOCK_MAX || pwrite(fd, line, n, (off_t)end) != (ssize_t)n)
        fprintf(stderr, "gflow-shim: cannot add to lock file (fd %d): %s", fd, line);
out:
    free(line);
}

void shim_report_lock_cgroup(const struct shim_opts *o, const char *dir)
{
    shim_report_lock_append(o->lock_fd, exitfile_lock_cgroup_line(dir));
}

void shim_report_lock_forwarded(int lock_fd, int sig)
{
    shim_report_lock_append(lock_fd, exitfile_lock_forwarded_line(sig));
}

/* The exit record, into the room the daemon reserved for it in the lock file. */
static int shim_report_exit_in_lock(int fd, const struct exit_record *rec)
{
    char *text = exit_record_encode_max(rec, EXITFILE_RESERVE);
    size_t n = strlen(text);
    ssize_t w = pwrite(fd, text, n, EXITFILE_RECORD_AT);
    free(text);
    if (w >= 0 && (size_t)w != n)
        errno = ENOSPC;
    if ((size_t)w != n || fdatasync(fd) < 0)
        return -1;
    return 0;
}

int shim_report_exit(const struct shim_opts *o, const struct exit_record *rec)
{
    if (!o->exit_file)
        return shim_report_exit_in_lock(o->lock_fd, rec);
    char *text = exit_record_encode(rec);
    int rc = write_file_atomic(o->exit_file, text, strlen(text), 0644);
    if (rc < 0 && (errno == ENOSPC || errno == EDQUOT)) {
        /* No room for the temp file: write into the exit file the daemon reserved. */
        free(text);
        text = exit_record_encode_max(rec, EXITFILE_RESERVE);
        rc = write_file_in_place(o->exit_file, text, strlen(text));
    }
    int e = errno;
    free(text);
    errno = e;
    return rc;
}

char *shim_report_exit_name(const struct shim_opts *o)
{
    if (o->exit_file)
        return xstrdup(o->exit_file);
    return xasprintf("the exit record into the lock file (fd %d)", o->lock_fd);
}

/* The lock file's error line: the daemon reads it when there is no exit file (this one
 * could not be written, or the shim failed before it knew where); job_ran: the job did
 * run, and only its outcome is lost. Best effort: a lock fd that is not there cannot be
 * told anything. */
static void shim_report_lock_error(const struct shim_opts *o, const char *msg, bool job_ran)
{
    if (o->lock_fd < 0 || fcntl(o->lock_fd, F_GETFD) < 0)
        return;
    struct exit_lock lock = {.pid = getpid(),
                             .start = shim_report_self_start(),
                             .error = (char *)msg,
                             .job_ran = job_ran,
                             .supervisor = (char *)shim_supervisor_path};
    char *text = exitfile_lock_format(&lock);
    if (shim_report_lock_text(o->lock_fd, text, !o->exit_file) < 0)
        fprintf(stderr, "gflow-shim: cannot write lock file (fd %d): %s\n", o->lock_fd,
                strerror(errno));
    free(text);
}

/* Reports a failure of the shim's own: stderr (the daemon's log, if it kept one), the
 * lock file's error line and, before the job, the exit file with exit_code 125 and the
 * reason. */
void shim_report_fail(const struct shim_opts *o, const char *msg, bool before_job)
{
    if (o->job_id >= 0)
        fprintf(stderr, "gflow-shim: job %lld: %s\n", (long long)o->job_id, msg);
    else
        fprintf(stderr, "gflow-shim: %s\n", msg);
    /* The env file may hold secrets and nobody else will remove it. */
    if (before_job && o->env_file)
        unlink(o->env_file);
    shim_report_lock_error(o, msg, !before_job);
    if (!before_job || (!o->exit_file && (o->lock_fd < 0 || fcntl(o->lock_fd, F_GETFD) < 0)))
        return;
    double now = now_wall();
    struct exit_record rec;
    exit_record_init(&rec);
    rec.job_id = o->job_id;
    rec.exit_code = JOB_EXIT_SETUP;
    rec.started_at = now;
    rec.finished_at = now;
    rec.error = xstrdup(msg);
    if (shim_report_exit(o, &rec) < 0) {
        char *what = shim_report_exit_name(o);
        fprintf(stderr, "gflow-shim: cannot write %s: %s\n", what, strerror(errno));
        free(what);
    }
    exit_record_free(&rec);
}

/* The outcome of a job that ran: exit code or signal, times and peak memory. */
void shim_report_record(const struct shim_run *r, const struct shim_opts *o, double started_at,
                        const char *error, struct exit_record *rec)
{
    exit_record_init(rec);
    rec->job_id = o->job_id;
    rec->started_at = started_at;
    rec->finished_at = now_wall();
    rec->error = error ? xstrdup(error) : NULL;
    rec->log_lost_bytes = r->relay.dropped;
    for (int i = 0; i < r->ntasks; i++)
        if (r->tasks[i].max_rss_kb > rec->max_rss_kb)
            rec->max_rss_kb = r->tasks[i].max_rss_kb;
    int status = shim_supervise_deciding(r)->status;
    if (WIFEXITED(status))
        rec->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        rec->signal = WTERMSIG(status);
}
