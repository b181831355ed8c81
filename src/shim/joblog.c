/* joblog: opening the job's log (step 3) in a log directory that users may be able to
 * write to (daemon.log_dir = /scratch/gflow-logs, sticky), where whatever is at the log's
 * name may have been put there by someone else: a link to a root file, or the log of
 * another user's job of the same id (a database restored from a backup starts its ids
 * again).
 *
 *  - The name is opened relative to a descriptor of its directory, with O_NOFOLLOW, and
 *    created with O_EXCL: never through a link, never into a file that was there.
 *  - Where anyone but the shim's own user may write the directory, the file is created
 *    with the job user's identity (effective uid, gid and groups), so the kernel's own
 *    checks apply to the job user and the file is theirs from the start. Where only the
 *    shim's user may write it (the default <data>/logs of a root daemon), nothing there
 *    can be anyone else's doing and the job user could not create a file there: the
 *    shim creates it and gives the new, empty file to the job user.
 *  - Whatever is at the name already is renamed NAME.replaced-<unix time> (never
 *    followed, never reused), with the shim's own identity, which may rename any entry
 *    of a sticky directory, and one line on stderr (gflowd's log) says so.
 *  - --log-continue (a requeued job's next run, whose log goes on): the file there is
 *    appended to when it is a plain file with one link, owned by the job user; anything
 *    else is moved aside as above. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE 1
#endif

/* Tries of the open before giving up: something keeps appearing at the name. */
#define SHIM_JOBLOG_TRIES 8

/* Whether anyone but the shim's own user may write to the directory (others' or the
 * group's write bit, or another owner). */
static bool shim_joblog_shared(int dfd)
{
    struct stat st;
    if (fstat(dfd, &st) < 0)
        return true; /* cannot tell: the safer answer */
    return st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH));
}

/* Renames what is at name to name.replaced-<time>[.<n>] without replacing anything
 * (renameat2 RENAME_NOREPLACE; plain renameat where the filesystem lacks it). 0, or -1
 * with errno set. */
static int shim_joblog_move_aside(int dfd, const char *name, const struct shim_opts *o)
{
    long long now = (long long)time(NULL);
    for (int n = 0; n < 100; n++) {
        char *aside = n ? xasprintf("%s.replaced-%lld.%d", name, now, n)
                        : xasprintf("%s.replaced-%lld", name, now);
        long rc = syscall(SYS_renameat2, dfd, name, dfd, aside, RENAME_NOREPLACE);
        if (rc < 0 && (errno == EINVAL || errno == ENOSYS)) {
            struct stat st;
            rc = fstatat(dfd, aside, &st, AT_SYMLINK_NOFOLLOW) == 0
                     ? (errno = EEXIST, -1)
                     : renameat(dfd, name, dfd, aside);
        }
        if (rc == 0)
            fprintf(stderr, "gflow-shim: job %lld: %s was there already: moved aside to %s\n",
                    (long long)o->job_id, o->log_path, aside);
        free(aside);
        if (rc == 0 || errno == ENOENT) /* gone meanwhile: as good */
            return 0;
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

/* Whether an existing log may be continued: a plain file, one link, the job user's. */
static bool shim_joblog_continuable(int fd, uid_t uid)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == uid;
}

/* The shim could not take its own identity back: it must not go on as anyone else. */
__attribute__((noreturn)) static void shim_joblog_stuck(void)
{
    fprintf(stderr, "gflow-shim: cannot return to the shim's own identity\n");
    _exit(SHIM_EXIT_FAIL);
}

/* One open of name: the existing file with --log-continue, else a new one (O_EXCL).
 * With the job user's identity when as_user. The fd, or -1 with errno (EEXIST: the
 * name is taken by something to move aside). */
static int shim_joblog_try(int dfd, const char *name, struct shim_exec *ex, bool as_user, bool cont,
                           uid_t owner)
{
    struct shim_prepare_ids saved;
    char *err = NULL;
    if (as_user && shim_prepare_as_user(ex, &saved, &err) < 0) {
        free(err);
        if (shim_prepare_as_root(&saved, NULL) < 0)
            shim_joblog_stuck();
        errno = EPERM;
        return -1;
    }
    const int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    int fd = -1, e = 0;
    if (cont) {
        fd = openat(dfd, name, flags);
        e = errno;
        if (fd >= 0 && !shim_joblog_continuable(fd, owner)) {
            close(fd);
            fd = -1;
            e = EEXIST;
        } else if (fd < 0 && (e == ELOOP ||
                              ((e == EACCES || e == EPERM) &&
                               fstatat(dfd, name, &(struct stat){0}, AT_SYMLINK_NOFOLLOW) == 0))) {
            e = EEXIST; /* a link, or a file that is not the job user's */
        }
    }
    if (fd < 0 && (!cont || e == ENOENT)) {
        fd = openat(dfd, name, flags | O_CREAT | O_EXCL, 0600);
        e = errno;
    }
    if (as_user && shim_prepare_as_root(&saved, NULL) < 0)
        shim_joblog_stuck();
    if (fd >= 0 && fcntl(fd, F_SETFL, 0) < 0) { /* blocking writes from here on */
        e = errno;
        close(fd);
        fd = -1;
    }
    errno = e;
    return fd;
}

int shim_joblog_open(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    const char *slash = strrchr(o->log_path, '/');
    char *dir =
        slash ? xstrndup(o->log_path, slash == o->log_path ? 1 : (size_t)(slash - o->log_path))
              : xstrdup(".");
    const char *name = slash ? slash + 1 : o->log_path;
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    int fd = -1;
    if (dfd >= 0 && *name) {
        bool as_user = ex->set_creds && shim_joblog_shared(dfd);
        uid_t owner = ex->set_creds ? ex->uid : geteuid();
        for (int i = 0; i < SHIM_JOBLOG_TRIES && fd < 0; i++) {
            fd = shim_joblog_try(dfd, name, ex, as_user, o->log_continue, owner);
            if (fd < 0 && (errno != EEXIST || shim_joblog_move_aside(dfd, name, o) < 0))
                break;
        }
    } else if (dfd >= 0) {
        errno = EISDIR;
    }
    int e = errno;
    if (dfd >= 0)
        close(dfd);
    if (fd >= 0) {
        struct stat st;
        /* Created by the shim (only its user may write the directory): the job user's. */
        if (ex->set_creds && fstat(fd, &st) == 0 && st.st_uid != ex->uid &&
            fchown(fd, ex->uid, ex->gid) < 0) {
            e = errno;
            close(fd);
            *err = xasprintf("cannot chown log %s: %s", o->log_path, strerror(e));
            return -1;
        }
        if (lseek(fd, 0, SEEK_END) >= 0)
            return fd;
        e = errno;
        close(fd);
    }
    *err = xasprintf("cannot open log %s: %s", o->log_path, strerror(e));
    return -1;
}
