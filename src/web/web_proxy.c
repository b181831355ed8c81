/* web_proxy: see web_proxy.h. Each request gets a connection of its own to the daemon,
 * sent as HTTP/1.0, so the daemon answers with a plain body that ends when it closes the
 * connection (no chunked framing to undo here); libmicrohttpd frames it again for the
 * browser. gflowd web serves each browser connection on a thread of its own, so reading
 * the daemon's answer may block. */
#include "web_proxy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

#define HEAD_MAX 16384 /* the daemon's header lines are short; more is a broken answer */

struct upstream {
    int fd;
    char *pending; /* body bytes read together with the head */
    size_t pending_len, pending_off;
};

static int connect_unix(const char *path, char **err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        *err = xasprintf("the socket path %s is too long", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        *err = xasprintf("cannot reach gflowd at %s: %s (is it running? 'gflowd up')", path,
                         strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The value of header name in the head (lines after the status line), malloc'd. */
static char *head_value(const char *head, const char *name)
{
    size_t n = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
        const char *h = l + 2;
        if (!strncasecmp(h, name, n) && h[n] == ':') {
            h += n + 1;
            while (*h == ' ')
                h++;
            const char *e = strstr(h, "\r\n");
            return xstrndup(h, e ? (size_t)(e - h) : strlen(h));
        }
    }
    return NULL;
}

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct upstream *u = cls;
    if (u->pending_off < u->pending_len) {
        size_t n = u->pending_len - u->pending_off;
        if (n > max)
            n = max;
        memcpy(buf, u->pending + u->pending_off, n);
        u->pending_off += n;
        return (ssize_t)n;
    }
    for (;;) {
        ssize_t n = read(u->fd, buf, max);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0)
            return n;
        return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void free_upstream(void *cls)
{
    struct upstream *u = cls;
    close(u->fd);
    free(u->pending);
    free(u);
}

struct MHD_Response *web_proxy(const char *socket_path, const char *method, const char *path_query,
                               const char *body, size_t body_len, const char *content_type,
                               const char *last_event_id, unsigned *status, char **err)
{
    int fd = connect_unix(socket_path, err);
    if (fd < 0)
        return NULL;
    struct strbuf req;
    strbuf_init(&req);
    strbuf_addf(&req, "%s %s HTTP/1.0\r\nHost: localhost\r\nUser-Agent: gflowd-web\r\n", method,
                path_query);
    if (content_type)
        strbuf_addf(&req, "Content-Type: %s\r\n", content_type);
    if (last_event_id)
        strbuf_addf(&req, "Last-Event-ID: %s\r\n", last_event_id);
    strbuf_addf(&req, "Content-Length: %zu\r\n\r\n", body_len);
    if (body_len)
        strbuf_add(&req, body, body_len);
    int rc = send_all(fd, req.buf, req.len);
    strbuf_free(&req);
    if (rc < 0) {
        *err = xasprintf("gflowd closed the connection: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    /* The head, up to the empty line; what came after it is the body's start. */
    struct strbuf in;
    strbuf_init(&in);
    char *end = NULL;
    while (!end && in.len < HEAD_MAX) {
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        strbuf_add(&in, buf, (size_t)n);
        end = strstr(in.buf, "\r\n\r\n");
    }
    int code = 0;
    if (!end || sscanf(in.buf, "HTTP/1.%*d %d", &code) != 1 || code < 100 || code > 599) {
        *err = xstrdup("gflowd's answer was not HTTP");
        strbuf_free(&in);
        close(fd);
        return NULL;
    }
    end[2] = '\0'; /* the head keeps its last line's CRLF */
    char *ctype = head_value(in.buf, "Content-Type");
    char *clen = head_value(in.buf, "Content-Length");
    struct upstream *u = xcalloc(1, sizeof(*u));
    u->fd = fd;
    u->pending_len = in.len - (size_t)(end + 4 - in.buf);
    u->pending = xmalloc(u->pending_len + 1);
    memcpy(u->pending, end + 4, u->pending_len);
    strbuf_free(&in);
    uint64_t size = MHD_SIZE_UNKNOWN;
    int64_t v;
    if (clen && parse_int64(clen, &v) == 0 && v >= 0)
        size = (uint64_t)v;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(size, 16384, read_body, u, free_upstream);
    if (ctype)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    /* An event stream must reach the browser event by event. */
    if (ctype && str_starts_with(ctype, "text/event-stream"))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    free(ctype);
    free(clen);
    *status = (unsigned)code;
    return resp;
}
