/* files: whole-file reads and writes, atomic replacement, mkdir -p. */
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h> /* rename */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

char *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    char tmp[8192];
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            strbuf_free(&sb);
            errno = e;
            return NULL;
        }
        if (n == 0)
            break;
        strbuf_add(&sb, tmp, (size_t)n);
    }
    close(fd);
    if (len)
        *len = sb.len;
    return strbuf_detach(&sb);
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int write_file(const char *path, const void *data, size_t len, unsigned mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    if (fchmod(fd, mode) < 0 || write_all(fd, data, len) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return close(fd);
}

int write_file_atomic(const char *path, const void *data, size_t len, unsigned mode)
{
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        free(tmp);
        return -1;
    }
    if (write_all(fd, data, len) < 0 || fsync(fd) < 0)
        goto fail;
    close(fd);
    fd = -1;
    if (rename(tmp, path) < 0)
        goto fail;
    free(tmp);
    char *dir = xstrdup(path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
fail:;
    int e = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    errno = e;
    return -1;
}

int write_file_in_place(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    const char *p = data;
    off_t off = 0;
    while ((size_t)off < len) {
        ssize_t n = pwrite(fd, p + off, len - (size_t)off, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto fail;
        off += n;
    }
    if (ftruncate(fd, (off_t)len) < 0 || fsync(fd) < 0)
        goto fail;
    return close(fd);
fail:;
    int e = errno ? errno : EIO;
    close(fd);
    errno = e;
    return -1;
}

int mkdir_p(const char *path, unsigned mode)
{
    char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = '/';
    }
    int r = mkdir(p, mode);
    free(p);
    return (r < 0 && errno != EEXIST) ? -1 : 0;
}
