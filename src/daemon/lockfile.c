/* lockfile: the daemon's flock + "<pid> <starttime>" file. */
#include "lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "procinfo.h"
#include "util.h"

static int read_holder(int fd, pid_t *pid, int64_t *start)
{
    char buf[64];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    long long p, s;
    if (sscanf(buf, "%lld %lld", &p, &s) != 2 || p <= 0)
        return -1;
    *pid = (pid_t)p;
    *start = s;
    return 0;
}

int lockfile_acquire(const char *path, pid_t *holder, char **err)
{
    *holder = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        *err = xasprintf("cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int64_t start;
        if (read_holder(fd, holder, &start) < 0)
            *holder = 0;
        *err = xasprintf("gflowd is already running (pid %ld)", (long)*holder);
        close(fd);
        return -1;
    }
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "%ld %lld\n", (long)getpid(),
                     (long long)proc_start_time(getpid()));
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        *err = xasprintf("cannot write %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int lockfile_holder(const char *path, pid_t *pid, int64_t *start)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int held = 0;
    if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
        held = read_holder(fd, pid, start) == 0 && proc_start_time(*pid) == *start;
    close(fd);
    return held;
}
