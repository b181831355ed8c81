/* relay: the job's output on its way to the log (step 3). The job's stdout and stderr
 * are the write end of a pipe; the shim moves what arrives into the log with splice(2)
 * (the bytes do not pass through user space) and counts them. Past --log-max-bytes the
 * rest is read and dropped, after one line in the log saying where it was cut. A log
 * that cannot take more (its filesystem is full) drops output as well, so the job never
 * blocks on a full pipe; once the log can be written again (or when the job is over) one
 * line says how much was lost and why.
 *
 * Why a pipe and not the log file itself as the job's stdout: the cap must hold for the
 * job's output alone. RLIMIT_FSIZE would also cap every other file the job writes. The
 * cost is one pipe per job and a wakeup of the shim per burst of output.
 *
 * With --pty the job's terminal takes the pipe's place: the relay reads its master
 * (read and write, no splice) and every byte also goes to the clients of `gjob attach`
 * (attach.c), past the cap too.
 *
 * The log is opened without O_APPEND (splice refuses a file in append mode); the shim is
 * its only writer and writes at its end.
 *
 * A full disk: the bytes dropped because the log could not take them are counted for the
 * exit record (log_lost_bytes, shown in gjob show), and a job that ends while its log's
 * filesystem is full (its own output was lost, or less than --log-keep-on-full bytes are
 * free) keeps only the last --log-keep-on-full bytes of its log, moved to its start
 * through the fd the shim holds (never a path) after a line that says how much was cut:
 * cancelling the job that flooded the disk gives the space back to everyone. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util.h"

/* How much one splice moves at most: a pipe's default capacity. */
#define SHIM_RELAY_CHUNK (64 * 1024)

int shim_relay_open(struct shim_relay *rl, const struct shim_opts *o, struct shim_exec *ex,
                    char **err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        *err = xasprintf("cannot make the output pipe: %s", strerror(errno));
        return -1;
    }
    rl->rd = p[0];
    ex->out_fd = p[1];
    rl->log_fd = fcntl(ex->log_fd, F_DUPFD_CLOEXEC, 3);
    if (rl->log_fd < 0 || fcntl(rl->rd, F_SETFL, O_NONBLOCK) < 0) {
        *err = xasprintf("cannot set up the output relay: %s", strerror(errno));
        return -1;
    }
    rl->max = o->log_max_bytes;
    rl->keep = o->log_keep;
    rl->can_splice = true;
    return 0;
}

/* /dev/null, opened the first time output is dropped. */
static int shim_relay_null(struct shim_relay *rl)
{
    if (rl->null_fd < 0)
        rl->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    return rl->null_fd;
}

/* Reads the job's output; with --pty also hands it to the attached clients. A
 * terminal's master reads EIO once no process holds its slave: the end, as EOF. */
static ssize_t shim_relay_read(struct shim_relay *rl, char *buf, size_t want)
{
    ssize_t n = read(rl->rd, buf, want);
    if (!rl->tap)
        return n;
    if (n < 0 && errno == EIO)
        return 0;
    if (n > 0)
        shim_attach_output(rl->tap, (const uint8_t *)buf, (size_t)n);
    return n;
}

/* Moves up to want bytes from the pipe to fd: splice, else read and write (a file system
 * without splice support). The count, 0 at the end of the output, or -1 with errno
 * (EAGAIN: nothing waiting). *wrote_err: the bytes were taken from the pipe but fd did
 * not take them (errno says why; read and write only). */
static ssize_t shim_relay_move(struct shim_relay *rl, int fd, size_t want, bool *wrote_err)
{
    *wrote_err = false;
    if (rl->can_splice && !rl->tap) {
        ssize_t n = splice(rl->rd, NULL, fd, NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n >= 0 || errno != EINVAL)
            return n;
        rl->can_splice = false;
    }
    char buf[SHIM_RELAY_CHUNK];
    ssize_t n = shim_relay_read(rl, buf, want < sizeof(buf) ? want : sizeof(buf));
    if (n <= 0)
        return n;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(fd, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            *wrote_err = true;
            return off ? off : -1;
        }
        off += w;
    }
    return n;
}

/* Drops up to want bytes of the job's output. The count, 0 at its end, -1 when none. */
static ssize_t shim_relay_drop(struct shim_relay *rl, size_t want)
{
    int fd = shim_relay_null(rl);
    bool wrote_err;
    if (fd >= 0)
        return shim_relay_move(rl, fd, want, &wrote_err);
    char buf[SHIM_RELAY_CHUNK];
    return shim_relay_read(rl, buf, want < sizeof(buf) ? want : sizeof(buf));
}

/* Writes one line of the shim's own into the log: after what the job wrote before it. A
 * line that cannot be written is lost (the log's filesystem is full). */
static bool shim_relay_write_line(struct shim_relay *rl, const char *line)
{
    size_t n = strlen(line);
    return write(rl->log_fd, line, n) == (ssize_t)n;
}

/* Whether the log ends with a newline (or is empty): a line of the shim's own starts
 * there. */
static bool shim_relay_at_line_start(const struct shim_relay *rl)
{
    char last = '\n';
    off_t pos = lseek(rl->log_fd, 0, SEEK_CUR);
    if (pos > 0 && pread(rl->log_fd, &last, 1, pos - 1) != 1)
        last = '\n';
    return last == '\n';
}

/* The cap is reached: one line says so, starting on a line of its own. */
static void shim_relay_cut(struct shim_relay *rl)
{
    rl->truncated = true;
    char *line = xasprintf("%sgflow-shim: log truncated at %lld bytes (daemon.max_log_bytes); "
                           "the rest of the job's output is dropped\n",
                           shim_relay_at_line_start(rl) ? "" : "\n", (long long)rl->max);
    shim_relay_write_line(rl, line);
    free(line);
}

/* Output was dropped because the log could not take it: say how much, once the log can
 * be written again. */
static void shim_relay_note_lost(struct shim_relay *rl)
{
    char *line = xasprintf("\ngflow-shim: %lld byte%s of the job's output %s lost: %s\n",
                           (long long)rl->lost, plural_s((long long)rl->lost),
                           rl->lost == 1 ? "was" : "were", strerror(rl->lost_errno));
    if (shim_relay_write_line(rl, line))
        rl->lost = 0;
    free(line);
}

/* One step: moves (or drops) what the pipe holds, up to a chunk. The count, 0 at the end
 * of the output, -1 when nothing is waiting. */
static ssize_t shim_relay_step(struct shim_relay *rl)
{
    size_t want = SHIM_RELAY_CHUNK;
    if (rl->max > 0) {
        if (rl->written >= rl->max) { /* the line only once something is dropped */
            ssize_t n = shim_relay_drop(rl, want);
            if (n > 0 && !rl->truncated)
                shim_relay_cut(rl);
            return n;
        }
        if ((int64_t)want > rl->max - rl->written)
            want = (size_t)(rl->max - rl->written);
    }
    if (rl->lost)
        shim_relay_note_lost(rl);
    bool wrote_err;
    ssize_t n = shim_relay_move(rl, rl->log_fd, want, &wrote_err);
    if (n > 0 && !wrote_err) {
        rl->written += n;
        return n;
    }
    if (n == 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
        return n;
    /* The log did not take the bytes (no space, I/O error): they are lost, the job
     * goes on. With read and write they already left the pipe; with splice, drop them. */
    int e = errno;
    if (n < 0 && !wrote_err)
        n = shim_relay_drop(rl, want);
    if (n > 0) {
        rl->lost += n;
        rl->dropped += n;
        rl->lost_errno = e;
    }
    return n;
}

/* Closes rd, out of the supervisor's epoll set first (see shim.h). */
static void shim_relay_close_rd(struct shim_relay *rl)
{
    if (rl->ep > 0)
        epoll_ctl(rl->ep, EPOLL_CTL_DEL, rl->rd, NULL);
    close(rl->rd);
    rl->rd = -1;
}

void shim_relay_pump(struct shim_relay *rl)
{
    while (rl->rd >= 0) {
        ssize_t n = shim_relay_step(rl);
        if (n > 0)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) /* every writer is gone: the job's output is complete */
            shim_relay_close_rd(rl);
        return;
    }
}

void shim_relay_line(struct shim_relay *rl, const char *line)
{
    shim_relay_pump(rl);
    if (rl->log_fd >= 0)
        shim_relay_write_line(rl, line);
}

void shim_relay_line_start(struct shim_relay *rl, const char *line)
{
    shim_relay_pump(rl);
    if (rl->log_fd < 0)
        return;
    if (!shim_relay_at_line_start(rl))
        shim_relay_write_line(rl, "\n");
    shim_relay_write_line(rl, line);
}

/* Whether the log's filesystem is full as the job ends: output of this job was lost for
 * want of space, or less than the tail to keep is free (other jobs are losing theirs). */
static bool shim_relay_disk_full(const struct shim_relay *rl)
{
    if (rl->dropped > 0 && (rl->lost_errno == ENOSPC || rl->lost_errno == EDQUOT))
        return true;
    struct statvfs sv;
    return fstatvfs(rl->log_fd, &sv) == 0 &&
           (unsigned long long)sv.f_bavail * sv.f_frsize < (unsigned long long)rl->keep;
}

/* Where the kept tail of a log of size bytes starts: keep bytes from its end, moved on to
 * the start of the next line when one starts within the first 64 KiB (a line cut in two
 * reads badly). */
static off_t shim_relay_tail_start(int fd, off_t size, int64_t keep)
{
    off_t from = size - (off_t)keep;
    char buf[SHIM_RELAY_CHUNK];
    ssize_t n = pread(fd, buf, sizeof(buf), from - 1);
    char *nl = n > 0 ? memchr(buf, '\n', (size_t)n) : NULL;
    return nl ? from + (nl - buf) : from;
}

/* Cuts the log to its last rl->keep bytes after a first line saying so: the tail is
 * copied forward to just after the line (the destination is always before the source,
 * so each block is read before anything is written over it), then the file is cut. No
 * new block is needed on the full filesystem: only bytes already written are overwritten
 * before ftruncate gives the rest back. */
static void shim_relay_cut_head(struct shim_relay *rl)
{
    struct stat st;
    if (rl->keep <= 0 || fstat(rl->log_fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        st.st_size <= rl->keep + SHIM_RELAY_CHUNK || !shim_relay_disk_full(rl))
        return;
    off_t from = shim_relay_tail_start(rl->log_fd, st.st_size, rl->keep);
    char *note = xasprintf("gflow-shim: the first %lld bytes of this log were cut when the job "
                           "ended: the log's filesystem was full (daemon.log_keep_on_full_disk "
                           "keeps the last %lld bytes)\n",
                           (long long)from, (long long)rl->keep);
    off_t to = (off_t)strlen(note);
    bool ok = pwrite(rl->log_fd, note, (size_t)to, 0) == to;
    free(note);
    char buf[SHIM_RELAY_CHUNK];
    for (off_t at = from; ok && at < st.st_size;) {
        ssize_t n = pread(rl->log_fd, buf, sizeof(buf), at);
        if (n <= 0 || pwrite(rl->log_fd, buf, (size_t)n, to) != n)
            ok = false;
        at += n;
        to += n;
    }
    /* The lines of the shim's own that follow go at the new end. */
    if (!ok || ftruncate(rl->log_fd, to) < 0 || lseek(rl->log_fd, to, SEEK_SET) < 0)
        fprintf(stderr, "gflow-shim: cannot cut the log on the full disk: %s\n", strerror(errno));
}

void shim_relay_close(struct shim_relay *rl)
{
    shim_relay_pump(rl);
    if (rl->log_fd >= 0)
        shim_relay_cut_head(rl); /* first: the line about lost output may fit then */
    if (rl->lost && rl->log_fd >= 0)
        shim_relay_note_lost(rl);
    if (rl->rd >= 0)
        shim_relay_close_rd(rl);
    if (rl->log_fd >= 0)
        close(rl->log_fd);
    if (rl->null_fd >= 0)
        close(rl->null_fd);
    rl->rd = rl->log_fd = rl->null_fd = -1;
}
