/* client_events: a Server-Sent Events reader over its own Unix-socket connection: the
 * response head (http_reader.c), then a chunked (or until-close) body read as it comes,
 * between other work, and the event blocks in it. */
#include "client_events.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "gflow_build.h"
#include "http_reader.h"
#include "util.h"

struct client_events {
    int fd;
    bool chunked;
    bool ended;          /* the body's last chunk came */
    uint64_t chunk_left; /* bytes of the current chunk still to come (chunked) */
    struct strbuf raw;   /* bytes read, not decoded yet */
    struct strbuf body;  /* decoded body, not parsed into events yet */
};

void client_event_clear(struct client_event *ev)
{
    free(ev->data);
    ev->data = NULL;
}

int client_events_fd(const struct client_events *s)
{
    return s->fd;
}

void client_events_close(struct client_events *s)
{
    if (!s)
        return;
    close(s->fd);
    strbuf_free(&s->raw);
    strbuf_free(&s->body);
    free(s);
}

/* Reads what is there (waiting up to timeout_ms, -1: no limit). 1 read, 0 timeout, -1
 * closed or failed. */
static int read_more(struct client_events *s, int timeout_ms)
{
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    int rc;
    do
        rc = poll(&p, 1, timeout_ms);
    while (rc < 0 && errno == EINTR);
    if (rc == 0)
        return 0;
    if (rc < 0)
        return -1;
    char buf[16384];
    ssize_t n;
    do
        n = read(s->fd, buf, sizeof(buf));
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    strbuf_add(&s->raw, buf, (size_t)n);
    return 1;
}

/* Drops the first n bytes of sb. */
static void consume(struct strbuf *sb, size_t n)
{
    memmove(sb->buf, sb->buf + n, sb->len - n);
    sb->len -= n;
    sb->buf[sb->len] = '\0';
}

/* Moves what is complete of raw into body (de-chunked). */
static void decode(struct client_events *s)
{
    if (!s->chunked) {
        strbuf_add(&s->body, s->raw.buf, s->raw.len);
        strbuf_reset(&s->raw);
        return;
    }
    while (!s->ended && s->raw.len) {
        if (s->chunk_left) {
            size_t n = s->raw.len < s->chunk_left ? s->raw.len : (size_t)s->chunk_left;
            strbuf_add(&s->body, s->raw.buf, n);
            consume(&s->raw, n);
            s->chunk_left -= n;
            continue;
        }
        /* "\r\n" ending the last chunk, then "SIZE[;ext]\r\n" */
        if (s->raw.len >= 2 && s->raw.buf[0] == '\r' && s->raw.buf[1] == '\n') {
            consume(&s->raw, 2);
            continue;
        }
        char *eol = memchr(s->raw.buf, '\n', s->raw.len);
        if (!eol)
            return;
        unsigned long long size = strtoull(s->raw.buf, NULL, 16);
        consume(&s->raw, (size_t)(eol - s->raw.buf) + 1);
        if (size == 0)
            s->ended = true;
        s->chunk_left = size;
    }
}

/* The next complete event block of body into *ev: 1, or 0 when there is none yet. */
static int parse_event(struct client_events *s, struct client_event *ev)
{
    for (;;) {
        char *end = strstr(s->body.buf ? s->body.buf : "", "\n\n");
        if (!end)
            return 0;
        *end = '\0';
        memset(ev, 0, sizeof(*ev));
        struct strbuf data;
        strbuf_init(&data);
        bool any = false;
        char *save = NULL;
        for (char *line = strtok_r(s->body.buf, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            if (line[0] == ':') /* a comment: the daemon's ping */
                continue;
            char *colon = strchr(line, ':');
            const char *val = colon ? colon + 1 + (colon[1] == ' ') : "";
            if (colon)
                *colon = '\0';
            if (!strcmp(line, "event"))
                snprintf(ev->type, sizeof(ev->type), "%s", val);
            else if (!strcmp(line, "id"))
                snprintf(ev->id, sizeof(ev->id), "%s", val);
            else if (!strcmp(line, "data"))
                strbuf_addf(&data, "%s%s", data.len ? "\n" : "", val);
            else
                continue;
            any = true;
        }
        consume(&s->body, (size_t)(end - s->body.buf) + 2);
        if (!any) {
            strbuf_free(&data);
            continue;
        }
        if (!ev->type[0])
            snprintf(ev->type, sizeof(ev->type), "message");
        ev->data = data.buf ? strbuf_detach(&data) : xstrdup("");
        return 1;
    }
}

int client_events_buffered(const struct client_events *s)
{
    return s->raw.len > 0 || (s->body.buf && strstr(s->body.buf, "\n\n"));
}

int client_events_next(struct client_events *s, int timeout_ms, struct client_event *ev, char **err)
{
    double deadline = timeout_ms < 0 ? 0 : now_mono() + timeout_ms / 1000.0;
    for (;;) {
        decode(s);
        if (parse_event(s, ev))
            return 1;
        if (s->ended) {
            *err = xstrdup("gflowd ended the event stream");
            return -1;
        }
        int left = -1; /* 0: a look at what is there, no wait */
        if (timeout_ms >= 0) {
            double secs = deadline - now_mono();
            left = secs > 0 ? (int)(secs * 1000) + 1 : 0;
        }
        int rc = read_more(s, left);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            *err = xstrdup("gflowd closed the event stream");
            return -1;
        }
    }
}

/* Reads the response head; 0 with *status and whether the body is chunked, or -1. What
 * came after the head is the body's start. */
static int read_head(struct client_events *s, const char *path, int *status, char **err)
{
    struct http_reader *rd = xmalloc(sizeof(*rd));
    http_reader_init(rd, s->fd, path);
    rd->timeout_ms = 30000;
    struct http_head h;
    bool got_any;
    char *why = NULL;
    int rc = http_read_head(rd, &h, &got_any, &why);
    free(why);
    if (rc < 0) {
        *err = xstrdup(got_any ? "the socket does not speak the gflowd protocol"
                               : "gflowd did not answer the event stream request");
    } else {
        *status = h.status;
        s->chunked = h.chunked;
        strbuf_add(&s->raw, rd->buf + rd->pos, rd->len - rd->pos);
        free(h.content_type);
    }
    free(rd);
    return rc;
}

struct client_events *client_events_open(const char *path_query, int *status, char **err)
{
    *status = 0;
    const char *path = client_socket_path(err);
    if (!path)
        return NULL;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        *err = xasprintf("socket path %s is too long", path);
        return NULL;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        *err = fd < 0 ? xasprintf("cannot create a socket: %s", strerror(e))
                      : client_connect_error(path, e);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    struct client_events *s = xcalloc(1, sizeof(*s));
    s->fd = fd;
    strbuf_init(&s->raw);
    strbuf_init(&s->body);
    char *req = xasprintf("GET %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: gflow/%s\r\n"
                          "Accept: text/event-stream\r\n\r\n",
                          path_query, GFLOW_VERSION);
    size_t len = strlen(req), off = 0;
    while (off < len) {
        ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            *err = xasprintf("lost the connection to gflowd at %s (%s)", path, strerror(errno));
            free(req);
            client_events_close(s);
            return NULL;
        }
        off += (size_t)n;
    }
    free(req);
    if (read_head(s, path, status, err) < 0) {
        client_events_close(s);
        return NULL;
    }
    if (*status != 200) {
        *err = xasprintf("gflowd answered %d to %s", *status, path_query);
        client_events_close(s);
        return NULL;
    }
    return s;
}
