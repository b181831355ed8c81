/* web_proxy: see web_proxy.h. Each request gets a connection of its own to the daemon,
 * sent as HTTP/1.0, so the daemon answers with a plain body that ends when it closes the
 * connection (no chunked framing to undo here); libmicrohttpd frames it again for the
 * browser. gflowd web serves each browser connection on a thread of its own, so reading
 * the daemon's answer may block. */
#include "web_proxy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "http_reader.h"
#include "util.h"

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
        int e = errno;
        *err = fd < 0 ? xasprintf("cannot create a socket: %s", strerror(e))
                      : client_connect_error_line(path, e);
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
    /* The head; what came with it is the body's start. */
    struct http_reader *rd = xmalloc(sizeof(*rd));
    http_reader_init(rd, fd, socket_path);
    struct http_head h;
    bool got_any;
    char *why = NULL;
    rc = http_read_head(rd, &h, &got_any, &why);
    free(why);
    if (rc < 0 || h.status > 599) {
        *err = xstrdup("gflowd's answer was not HTTP");
        free(h.content_type);
        free(rd);
        close(fd);
        return NULL;
    }
    struct upstream *u = xcalloc(1, sizeof(*u));
    u->fd = fd;
    u->pending_len = rd->len - rd->pos;
    u->pending = xmalloc(u->pending_len + 1);
    memcpy(u->pending, rd->buf + rd->pos, u->pending_len);
    free(rd);
    uint64_t size = h.have_len ? h.content_length : MHD_SIZE_UNKNOWN;
    char *ctype = h.content_type;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(size, 16384, read_body, u, free_upstream);
    if (ctype)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    /* An event stream must reach the browser event by event. */
    if (ctype && str_starts_with(ctype, "text/event-stream"))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    free(ctype);
    *status = (unsigned)h.status;
    return resp;
}
