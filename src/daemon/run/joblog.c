/* joblog: the job logs' directory held open, a job's log opened safely in it (see
 * joblog.h). */
#include "joblog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "util.h"

int joblog_dir_open(struct gflowd *d, char **err)
{
    const char *dir = d->paths.log_dir;
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        *err = xasprintf("cannot open daemon.log_dir %s: %s", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        *err = xasprintf("daemon.log_dir %s is writable by %s (mode %04o) without the sticky "
                         "bit, so users could replace each other's logs: run 'chmod +t %s' (or "
                         "'chmod go-w %s')",
                         dir, st.st_mode & S_IWOTH ? "every user" : "its group",
                         (unsigned)(st.st_mode & 07777), dir, dir);
        close(fd);
        return -1;
    }
    if (d->log_dir_fd >= 0)
        close(d->log_dir_fd);
    d->log_dir_fd = fd;
    return 0;
}

int joblog_open(const struct gflowd *d, int64_t job_id, uid_t owner, const char *owner_name,
                char **why)
{
    *why = NULL;
    char name[32];
    snprintf(name, sizeof(name), "%lld.log", (long long)job_id);
    /* O_PATH: the name is looked up, nothing is opened for reading (a FIFO would block,
     * a device could act on an open); O_NOFOLLOW: a link is the link itself. */
    int path_fd = openat(d->log_dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (path_fd < 0)
        return -1;
    struct stat st;
    if (fstat(path_fd, &st) < 0) {
        int e = errno;
        close(path_fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != owner) {
        close(path_fd);
        *why = xasprintf("the log of job %lld, %s/%s, is not a regular file owned by %s (%s): "
                         "gflowd does not read it",
                         (long long)job_id, d->paths.log_dir, name, owner_name,
                         S_ISLNK(st.st_mode)    ? "a symbolic link"
                         : !S_ISREG(st.st_mode) ? "not a file"
                                                : "a file of another user");
        errno = EPERM;
        return -1;
    }
    /* The inode checked above, opened for reading: no second lookup of the name. */
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", path_fd);
    int fd = open(proc, O_RDONLY | O_NOCTTY | O_CLOEXEC);
    int e = errno;
    close(path_fd);
    errno = e;
    return fd;
}
