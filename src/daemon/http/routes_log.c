/* routes_log: GET /v1/jobs/{id}/log (docs/api.md): a job's output, whole, its first or
 * last lines, a byte range, or followed until the job ends. Only its owner or an admin
 * may read it, and only a regular file of its owner's is read (run/joblog.h). */
#include "routes.h"

#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "jobs/jobs.h"
#include "log.h"
#include "run/joblog.h"
#include "util.h"

/* --first and --last read at most max_scan bytes of a log (limits.max_log_scan_bytes),
 * so that a huge log without newlines costs one bounded read: its answer is then the
 * first or last max_scan bytes. */

/* Byte length of the first n lines of fd (at most max_scan). */
static off_t first_lines_len(int fd, int64_t n, off_t max_scan)
{
    char buf[65536];
    off_t pos = 0;
    ssize_t got;
    while (n > 0 && pos < max_scan) {
        size_t want = max_scan - pos < (off_t)sizeof(buf) ? (size_t)(max_scan - pos) : sizeof(buf);
        if ((got = pread(fd, buf, want, pos)) <= 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] == '\n' && --n == 0)
                return pos + i + 1;
        }
        pos += got;
    }
    return pos;
}

/* Offset where the last n lines of a file of the given size begin (at most max_scan
 * before its end). */
static off_t last_lines_start(int fd, off_t size, int64_t n, off_t max_scan)
{
    char buf[65536];
    off_t end = size, floor = size > max_scan ? size - max_scan : 0;
    bool skip_final_newline = true;
    while (end > floor) {
        off_t start = end - floor > (off_t)sizeof(buf) ? end - (off_t)sizeof(buf) : floor;
        ssize_t got = pread(fd, buf, (size_t)(end - start), start);
        if (got <= 0)
            return floor;
        for (ssize_t i = got - 1; i >= 0; i--) {
            if (buf[i] != '\n')
                continue;
            if (skip_final_newline && start + i == size - 1)
                continue;
            if (--n == 0)
                return start + i + 1;
        }
        skip_final_newline = false;
        end = start;
    }
    return floor;
}

/* A count in ?key=N: 1 and *out, 0 if absent, -1 with *err if not a count. */
static int query_count(const struct route_req *r, const char *key, int64_t *out, char **err)
{
    const char *v = route_query(r, key);
    if (!v)
        return 0;
    if (parse_int64(v, out) < 0 || *out < 0) {
        *err = xasprintf("'%s' must be a whole number >= 0, not '%s'", key, v);
        return -1;
    }
    return 1;
}

/* A followed log: the file from offset on, until its job has left the active table (the
 * shim writes the exit file only after every process of the job is gone, so the output
 * is complete by then). */
struct log_follow {
    const struct gflowd *d;
    int64_t job_id;
    uid_t owner;
    char owner_name[64];
    int fd; /* -1 until the log is there */
    uint64_t offset;
};

static ssize_t log_follow_read(void *arg, uint64_t pos, char *buf, size_t max)
{
    struct log_follow *f = arg;
    if (f->fd < 0) {
        char *why = NULL;
        f->fd = joblog_open(f->d, f->job_id, f->owner, f->owner_name, &why);
        if (why) { /* something else was put there meanwhile: the stream ends */
            log_warn("%s", why);
            free(why);
            return -1;
        }
    }
    if (f->fd >= 0) {
        ssize_t n = pread(f->fd, buf, max, (off_t)(f->offset + pos));
        if (n > 0)
            return n;
    }
    return jobs_get(f->d->jobs, f->job_id) ? 0 : -1;
}

static void log_follow_free(void *arg)
{
    struct log_follow *f = arg;
    if (f->fd >= 0)
        close(f->fd);
    free(f);
}

void route_log(const struct route_req *r, struct reply *rep)
{
    int64_t id = r->id;
    struct job j;
    job_init(&j);
    if (route_load_job(r, id, false, &j, rep) < 0)
        return;
    uint32_t owner = j.uid;
    char owner_name[64]; /* for a refusal's message */
    snprintf(owner_name, sizeof(owner_name), "%s", j.user ? j.user : "its owner");
    job_clear(&j);
    if (!auth_may_act_on(r->who, owner)) {
        reply_error(rep, 403,
                    "job %lld belongs to another user; only its owner or an admin may "
                    "read its log",
                    (long long)id);
        return;
    }
    int64_t first = 0, last = 0, offset = 0, length = 0;
    char *err = NULL;
    int has_first = query_count(r, "first", &first, &err);
    int has_last = has_first < 0 ? -1 : query_count(r, "last", &last, &err);
    int has_offset = has_last < 0 ? -1 : query_count(r, "offset", &offset, &err);
    int has_length = has_offset < 0 ? -1 : query_count(r, "length", &length, &err);
    if (has_length < 0) {
        reply_error(rep, 400, "%s", err);
        free(err);
        return;
    }
    char *why = NULL;
    int fd = joblog_open(r->d, id, owner, owner_name, &why);
    if (why) {
        reply_error(rep, 403, "%s", why);
        free(why);
        return;
    }
    const char *follow = route_query(r, "follow");
    if (follow && strcmp(follow, "0") != 0) {
        struct log_follow *f = xcalloc(1, sizeof(*f));
        *f = (struct log_follow){
            .d = r->d, .job_id = id, .owner = owner, .fd = fd, .offset = (uint64_t)offset};
        memcpy(f->owner_name, owner_name, sizeof(owner_name));
        reply_stream(rep, log_follow_read, f, log_follow_free);
        return;
    }
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
        if (fd >= 0)
            close(fd);
        reply_text(rep, 200, xstrdup(""), 0, NULL);
        return;
    }
    off_t start = 0, len = st.st_size, max_scan = (off_t)r->d->cfg.limits.max_log_scan_bytes;
    if (has_first) {
        len = first_lines_len(fd, first, max_scan);
    } else if (has_last) {
        start = last ? last_lines_start(fd, st.st_size, last, max_scan) : st.st_size;
        len = st.st_size - start;
    } else if (has_offset || has_length) {
        start = offset < st.st_size ? offset : st.st_size;
        len = st.st_size - start;
        if (has_length && length < len)
            len = length;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_fd_at_offset64((uint64_t)len, fd, (uint64_t)start);
    if (!resp) {
        close(fd);
        reply_error(rep, 500, "cannot send the log");
        return;
    }
    reply_response(rep, 200, resp, "text/plain; charset=utf-8");
}
