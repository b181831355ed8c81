/* http_reader: see http_reader.h. */
#include "http_reader.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* Status line plus headers larger than this are a protocol error. */
#define HTTP_MAX_HEAD 65536
/* The most room made for a body at once from its Content-Length (it grows past it). */
#define HTTP_PRESIZE_MAX (64u << 20)

void http_reader_init(struct http_reader *rd, int fd, const char *peer)
{
    rd->fd = fd;
    rd->peer = peer;
    rd->timeout_ms = -1;
    rd->pos = rd->len = 0;
}

/* recv() into p, after waiting up to rd->timeout_ms for something to read: the count,
 * 0 at end of stream, -1 with errno (EAGAIN: the wait ran out). */
static ssize_t recv_some(struct http_reader *rd, void *p, size_t n)
{
    for (;;) {
        if (rd->timeout_ms >= 0) {
            struct pollfd pf = {.fd = rd->fd, .events = POLLIN};
            int rc = poll(&pf, 1, rd->timeout_ms);
            if (rc < 0 && errno == EINTR)
                continue;
            if (rc == 0)
                errno = EAGAIN;
            if (rc <= 0)
                return -1;
        }
        ssize_t got = recv(rd->fd, p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        return got;
    }
}

/* Reads more bytes into the buffer. Returns the count, 0 at end of stream, -1 on error
 * (errno set; EAGAIN means the idle timeout passed). */
static ssize_t fill(struct http_reader *rd)
{
    if (rd->pos == rd->len)
        rd->pos = rd->len = 0;
    if (rd->len == sizeof(rd->buf)) {
        memmove(rd->buf, rd->buf + rd->pos, rd->len - rd->pos);
        rd->len -= rd->pos;
        rd->pos = 0;
        if (rd->len == sizeof(rd->buf)) {
            errno = EMSGSIZE;
            return -1;
        }
    }
    ssize_t n = recv_some(rd, rd->buf + rd->len, sizeof(rd->buf) - rd->len);
    if (n > 0)
        rd->len += (size_t)n;
    return n;
}

static char *read_error(const struct http_reader *rd, int e)
{
    if (e == EAGAIN || e == EWOULDBLOCK)
        return xasprintf("gflowd at %s did not answer within %d s", rd->peer, rd->idle_secs);
    return xasprintf("lost the connection to gflowd at %s (%s)", rd->peer, strerror(e));
}

/* Reads one CRLF- (or LF-) terminated line into sb, without the terminator.
 * Returns 0, 1 at end of stream before any byte, -1 on error with *err. */
static int read_line(struct http_reader *rd, struct strbuf *sb, size_t *head_total, char **err)
{
    strbuf_reset(sb);
    bool any = false;
    for (;;) {
        char *nl = memchr(rd->buf + rd->pos, '\n', rd->len - rd->pos);
        size_t take = nl ? (size_t)(nl - (rd->buf + rd->pos)) : rd->len - rd->pos;
        strbuf_add(sb, rd->buf + rd->pos, take);
        *head_total += take;
        if (take)
            any = true;
        if (*head_total > HTTP_MAX_HEAD) {
            *err = xstrdup("gflowd sent a response header that is too large");
            return -1;
        }
        if (nl) {
            rd->pos += take + 1;
            if (sb->len && sb->buf[sb->len - 1] == '\r')
                sb->buf[--sb->len] = '\0';
            return 0;
        }
        rd->pos += take;
        ssize_t n = fill(rd);
        if (n == 0) {
            if (!any)
                return 1;
            *err = xstrdup("gflowd closed the connection in the middle of a response");
            return -1;
        }
        if (n < 0) {
            *err = read_error(rd, errno);
            return -1;
        }
    }
}

/* Delivers n body bytes from the buffer/socket to the sink. */
struct body_sink {
    struct strbuf *sb;
    http_chunk_cb cb;
    void *arg;
    bool stopped;
};

static void sink_put(struct body_sink *s, const char *data, size_t n)
{
    if (s->stopped || n == 0)
        return;
    if (s->cb) {
        if (s->cb(data, n, s->arg) < 0)
            s->stopped = true;
    } else {
        strbuf_add(s->sb, data, n);
    }
}

/* Reads exactly len body bytes (or up to end of stream if until_eof). */
static int read_body_bytes(struct http_reader *rd, struct body_sink *s, uint64_t len,
                           bool until_eof, char **err)
{
    for (;;) {
        size_t avail = rd->len - rd->pos;
        size_t take = until_eof || avail < len ? avail : (size_t)len;
        sink_put(s, rd->buf + rd->pos, take);
        rd->pos += take;
        if (!until_eof)
            len -= take;
        if (s->stopped)
            return 0;
        if (!until_eof && len == 0)
            return 0;
        ssize_t n = fill(rd);
        if (n == 0) {
            if (until_eof)
                return 0;
            *err = xstrdup("gflowd closed the connection in the middle of a response");
            return -1;
        }
        if (n < 0) {
            *err = read_error(rd, errno);
            return -1;
        }
    }
}

/* A body of len bytes into sb: room for it at once (up to HTTP_PRESIZE_MAX, as the
 * length is the server's word), and what the socket still holds read straight into it
 * rather than through rd->buf. A listing of 10,000 jobs is half a megabyte: growing the
 * buffer step by step and copying it twice took a fifth of gqueue's time. */
static int read_body_into(struct http_reader *rd, struct strbuf *sb, uint64_t len, char **err)
{
    strbuf_reserve(sb, len < HTTP_PRESIZE_MAX ? (size_t)len : HTTP_PRESIZE_MAX);
    size_t avail = rd->len - rd->pos;
    size_t take = avail < len ? avail : (size_t)len;
    strbuf_add(sb, rd->buf + rd->pos, take);
    rd->pos += take;
    len -= take;
    while (len > 0) {
        size_t want = len < sizeof(rd->buf) * 16 ? (size_t)len : sizeof(rd->buf) * 16;
        strbuf_reserve(sb, want);
        ssize_t n = recv_some(rd, sb->buf + sb->len, want);
        if (n <= 0) {
            *err = n == 0 ? xstrdup("gflowd closed the connection in the middle of a response")
                          : read_error(rd, errno);
            return -1;
        }
        sb->len += (size_t)n;
        sb->buf[sb->len] = '\0';
        len -= (uint64_t)n;
    }
    return 0;
}

static int read_chunked(struct http_reader *rd, struct body_sink *s, char **err)
{
    struct strbuf line;
    strbuf_init(&line);
    size_t total = 0;
    int rc = -1;
    for (;;) {
        total = 0;
        int r = read_line(rd, &line, &total, err);
        if (r != 0) {
            if (r == 1)
                *err = xstrdup("gflowd closed the connection in the middle of a response");
            goto out;
        }
        char *end;
        errno = 0;
        unsigned long long size = strtoull(line.buf, &end, 16);
        if (end == line.buf || errno || (*end && *end != ';' && *end != ' ' && *end != '\t')) {
            *err = xasprintf("gflowd sent a malformed chunk size '%s'", line.buf);
            goto out;
        }
        if (size == 0)
            break;
        if (read_body_bytes(rd, s, size, false, err) < 0)
            goto out;
        if (s->stopped) {
            rc = 0;
            goto out;
        }
        total = 0;
        r = read_line(rd, &line, &total, err); /* the CRLF after the data */
        if (r != 0 || line.len != 0) {
            if (r == 0 || r == 1)
                *err = xstrdup("gflowd sent a malformed chunked body");
            goto out;
        }
    }
    /* Trailers, up to an empty line. */
    for (;;) {
        total = 0;
        int r = read_line(rd, &line, &total, err);
        if (r == 1)
            break;
        if (r < 0)
            goto out;
        if (line.len == 0)
            break;
    }
    rc = 0;
out:
    strbuf_free(&line);
    return rc;
}

/* Reads the header lines after the status line into h, up to the empty line. */
static int read_headers(struct http_reader *rd, struct http_head *h, struct strbuf *line,
                        size_t *total, char **err)
{
    for (;;) {
        int lr = read_line(rd, line, total, err);
        if (lr != 0) {
            if (lr == 1)
                *err = xstrdup("gflowd closed the connection in the middle of a response");
            return -1;
        }
        if (line->len == 0)
            return 0;
        char *colon = strchr(line->buf, ':');
        if (!colon)
            continue;
        *colon = '\0';
        char *val = colon + 1;
        val += strspn(val, " \t");
        size_t vl = strlen(val);
        while (vl && (val[vl - 1] == ' ' || val[vl - 1] == '\t'))
            val[--vl] = '\0';
        if (!strcasecmp(line->buf, "Content-Length")) {
            char *end;
            errno = 0;
            h->content_length = strtoull(val, &end, 10);
            if (end == val || *end || errno) {
                *err = xasprintf("gflowd sent a malformed Content-Length '%s'", val);
                return -1;
            }
            h->have_len = true;
        } else if (!strcasecmp(line->buf, "Transfer-Encoding")) {
            if (strcasestr(val, "chunked"))
                h->chunked = true;
        } else if (!strcasecmp(line->buf, "Connection")) {
            if (strcasestr(val, "close"))
                h->keepalive = false;
            else if (strcasestr(val, "keep-alive"))
                h->keepalive = true;
        } else if (!strcasecmp(line->buf, "Content-Type")) {
            free(h->content_type); /* a repeated header: the last one counts */
            h->content_type = xstrdup(val);
        }
    }
}

int http_read_head(struct http_reader *rd, struct http_head *h, bool *got_any, char **err)
{
    struct strbuf line;
    strbuf_init(&line);
    size_t total = 0;
    int rc = -1;
    *got_any = false;
    *h = (struct http_head){0};
    for (;;) { /* loops past 1xx interim responses */
        total = 0;
        int lr = read_line(rd, &line, &total, err);
        if (lr == 1) {
            *err = xasprintf("gflowd at %s closed the connection without answering", rd->peer);
            break;
        }
        if (lr < 0)
            break;
        *got_any = true;
        int major, minor, status;
        if (sscanf(line.buf, "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 ||
            status > 999) {
            *err = xasprintf("%s does not speak the gflowd protocol (status line '%.60s')",
                             rd->peer, line.buf);
            break;
        }
        free(h->content_type);
        *h = (struct http_head){.status = status,
                                .keepalive = major > 1 || (major == 1 && minor >= 1)};
        if (read_headers(rd, h, &line, &total, err) < 0)
            break;
        if (status >= 200) {
            rc = 0;
            break;
        }
    }
    if (rc < 0) {
        free(h->content_type);
        h->content_type = NULL;
    }
    strbuf_free(&line);
    return rc;
}

int http_read_body(struct http_reader *rd, struct http_head *h, struct strbuf *sb, http_chunk_cb cb,
                   void *arg, char **err)
{
    struct body_sink sink = {.sb = sb, .cb = cb, .arg = arg};
    int rc;
    if (h->status == 204 || h->status == 304) {
        rc = 0;
    } else if (h->chunked) {
        rc = read_chunked(rd, &sink, err);
    } else if (h->have_len && !cb) {
        rc = read_body_into(rd, sb, h->content_length, err);
    } else if (h->have_len) {
        rc = read_body_bytes(rd, &sink, h->content_length, false, err);
    } else {
        h->keepalive = false;
        rc = read_body_bytes(rd, &sink, 0, true, err);
    }
    if (sink.stopped)
        h->keepalive = false;
    return rc;
}
