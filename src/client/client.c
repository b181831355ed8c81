/* client: socket discovery, a small HTTP/1.1 client over the daemon's Unix socket, JSON
 * requests and job id resolution, shared by every command-line program.
 *
 * The HTTP side is deliberately small: requests are ours (so their shape is known), and
 * responses are read with a buffered reader that understands a status line, headers, and
 * a body framed by Content-Length, chunked transfer coding, or the end of the connection.
 * The connection is kept open between requests of one process; if the daemon closed an
 * idle kept-alive connection, the request is sent again once on a fresh one. */
#include "client.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "config_file.h"
#include "gflow_build.h"
#include "paths.h"

/* A daemon that sends nothing for this long is considered hung (streams excepted). */
#define CLIENT_IDLE_TIMEOUT_SECS 120
/* Status line plus headers larger than this are a protocol error. */
#define CLIENT_MAX_HEAD 65536
/* The most room made for a body at once from its Content-Length (it grows past it). */
#define CLIENT_PRESIZE_MAX (64u << 20)

static struct {
    const char *prog;
    char *flag_socket;
    char *socket_path;
    const char *socket_source; /* what named socket_path: "--socket", "GFLOW_SOCKET", ... */
    int fd;
    bool used;      /* the connection has already carried a request */
    bool keepalive; /* the last response allows reusing the connection */
    char buf[65536];
    size_t pos, len; /* unread bytes are buf[pos..len) */
} cl = {.prog = "gflow", .fd = -1};

void client_init(const char *prog)
{
    const char *slash = strrchr(prog, '/');
    cl.prog = slash ? slash + 1 : prog;
}

void client_set_socket(const char *path)
{
    free(cl.flag_socket);
    cl.flag_socket = path ? xstrdup(path) : NULL;
    free(cl.socket_path);
    cl.socket_path = NULL;
}

/* 0 if something accepts connections on the Unix socket at path, else why not (an
 * errno: ENOENT when there is no socket there). */
static int socket_probe(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int e = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : errno;
    close(fd);
    return e;
}

char *client_choose_socket(const char *user, const char *system)
{
    if (socket_probe(user) == 0)
        return xstrdup(user);
    /* A system socket that exists but cannot be reached (EACCES, a daemon gone) is the
     * one to name in errors; with none there, the user's own. */
    int e = socket_probe(system);
    return xstrdup(e == ENOENT || e == ENOTDIR ? user : system);
}

/* The search of docs/design.md §4 once the flag and GFLOW_SOCKET are known to be unset. */
static char *find_socket(const struct gflow_config *cfg)
{
    if (cfg->socket_path) {
        cl.socket_source = "daemon.socket_path in the config";
        return xstrdup(cfg->socket_path);
    }
    char *user = NULL;
    if (cfg->data_dir && !getenv("XDG_RUNTIME_DIR"))
        user = xasprintf("%s/gflowd.sock", cfg->data_dir);
    else
        user = paths_user_socket();
    char *path = client_choose_socket(user, GFLOW_SYSTEM_SOCKET);
    cl.socket_source = strcmp(path, user) == 0 ? "the per-user socket" : "the system socket";
    free(user);
    return path;
}

const char *client_socket_path(char **err)
{
    if (cl.socket_path)
        return cl.socket_path;
    const char *env = getenv("GFLOW_SOCKET");
    if (cl.flag_socket && *cl.flag_socket) {
        cl.socket_path = xstrdup(cl.flag_socket);
        cl.socket_source = "--socket";
        return cl.socket_path;
    }
    if (env && *env) { /* no need to read the config file: the variable wins anyway */
        cl.socket_path = xstrdup(env);
        cl.socket_source = "GFLOW_SOCKET";
        return cl.socket_path;
    }
    struct gflow_config cfg;
    if (config_load(&cfg, NULL, err) < 0) {
        config_free(&cfg);
        return NULL;
    }
    cl.socket_path = find_socket(&cfg);
    config_free(&cfg);
    return cl.socket_path;
}

void client_close(void)
{
    if (cl.fd >= 0)
        close(cl.fd);
    cl.fd = -1;
    cl.used = false;
    cl.pos = cl.len = 0;
}

/* Names the socket tried, what named it and the order of the search, so that a
 * command that reached another daemon than meant says why. */
static char *connect_error(const char *path, int e)
{
    return xasprintf("cannot connect to gflowd at %s (%s), named by %s; is it running? "
                     "Start it with 'gflowd up' (sockets are looked for in this order: "
                     "--socket, GFLOW_SOCKET, daemon.socket_path, a live per-user socket, "
                     "the system socket %s)",
                     path, strerror(e), cl.socket_source ? cl.socket_source : "the caller",
                     GFLOW_SYSTEM_SOCKET);
}

static int client_connect(char **err)
{
    const char *path = client_socket_path(err);
    if (!path)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        *err = xasprintf("socket path %s is too long (the limit is %zu bytes); "
                         "use a shorter GFLOW_SOCKET or daemon.socket_path",
                         path, sizeof(sa.sun_path) - 1);
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = xasprintf("cannot create a socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        *err = connect_error(path, e);
        return -1;
    }
    cl.fd = fd;
    cl.used = false;
    cl.pos = cl.len = 0;
    return 0;
}

static void set_idle_timeout(int secs)
{
    struct timeval tv = {.tv_sec = secs};
    setsockopt(cl.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int send_all(const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(cl.fd, data, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads more bytes into the buffer. Returns the count, 0 at end of stream, -1 on error
 * (errno set; EAGAIN means the idle timeout passed). */
static ssize_t fill(void)
{
    if (cl.pos == cl.len)
        cl.pos = cl.len = 0;
    if (cl.len == sizeof(cl.buf)) {
        memmove(cl.buf, cl.buf + cl.pos, cl.len - cl.pos);
        cl.len -= cl.pos;
        cl.pos = 0;
        if (cl.len == sizeof(cl.buf)) {
            errno = EMSGSIZE;
            return -1;
        }
    }
    for (;;) {
        ssize_t n = recv(cl.fd, cl.buf + cl.len, sizeof(cl.buf) - cl.len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0)
            cl.len += (size_t)n;
        return n;
    }
}

static char *read_error(int e)
{
    if (e == EAGAIN || e == EWOULDBLOCK)
        return xasprintf("gflowd at %s did not answer within %d s", cl.socket_path,
                         CLIENT_IDLE_TIMEOUT_SECS);
    return xasprintf("lost the connection to gflowd at %s (%s)", cl.socket_path, strerror(e));
}

/* Reads one CRLF- (or LF-) terminated line into sb, without the terminator.
 * Returns 0, 1 at end of stream before any byte, -1 on error with *err. */
static int read_line(struct strbuf *sb, size_t *head_total, char **err)
{
    strbuf_reset(sb);
    bool any = false;
    for (;;) {
        char *nl = memchr(cl.buf + cl.pos, '\n', cl.len - cl.pos);
        size_t take = nl ? (size_t)(nl - (cl.buf + cl.pos)) : cl.len - cl.pos;
        strbuf_add(sb, cl.buf + cl.pos, take);
        *head_total += take;
        if (take)
            any = true;
        if (*head_total > CLIENT_MAX_HEAD) {
            *err = xstrdup("gflowd sent a response header that is too large");
            return -1;
        }
        if (nl) {
            cl.pos += take + 1;
            if (sb->len && sb->buf[sb->len - 1] == '\r')
                sb->buf[--sb->len] = '\0';
            return 0;
        }
        cl.pos += take;
        ssize_t n = fill();
        if (n == 0) {
            if (!any)
                return 1;
            *err = xstrdup("gflowd closed the connection in the middle of a response");
            return -1;
        }
        if (n < 0) {
            *err = read_error(errno);
            return -1;
        }
    }
}

/* Delivers n body bytes from the buffer/socket to the sink. */
struct body_sink {
    struct strbuf *sb;
    client_chunk_cb cb;
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
static int read_body_bytes(struct body_sink *s, uint64_t len, bool until_eof, char **err)
{
    for (;;) {
        size_t avail = cl.len - cl.pos;
        size_t take = until_eof || avail < len ? avail : (size_t)len;
        sink_put(s, cl.buf + cl.pos, take);
        cl.pos += take;
        if (!until_eof)
            len -= take;
        if (s->stopped)
            return 0;
        if (!until_eof && len == 0)
            return 0;
        ssize_t n = fill();
        if (n == 0) {
            if (until_eof)
                return 0;
            *err = xstrdup("gflowd closed the connection in the middle of a response");
            return -1;
        }
        if (n < 0) {
            *err = read_error(errno);
            return -1;
        }
    }
}

/* A body of len bytes into sb: room for it at once (up to CLIENT_PRESIZE_MAX, as the
 * length is the server's word), and what the socket still holds read straight into it
 * rather than through cl.buf. A listing of 10,000 jobs is half a megabyte: growing the
 * buffer step by step and copying it twice took a fifth of gqueue's time. */
static int read_body_into(struct strbuf *sb, uint64_t len, char **err)
{
    strbuf_reserve(sb, len < CLIENT_PRESIZE_MAX ? (size_t)len : CLIENT_PRESIZE_MAX);
    size_t avail = cl.len - cl.pos;
    size_t take = avail < len ? avail : (size_t)len;
    strbuf_add(sb, cl.buf + cl.pos, take);
    cl.pos += take;
    len -= take;
    while (len > 0) {
        size_t want = len < sizeof(cl.buf) * 16 ? (size_t)len : sizeof(cl.buf) * 16;
        strbuf_reserve(sb, want);
        ssize_t n = recv(cl.fd, sb->buf + sb->len, want, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            *err = n == 0 ? xstrdup("gflowd closed the connection in the middle of a response")
                          : read_error(errno);
            return -1;
        }
        sb->len += (size_t)n;
        sb->buf[sb->len] = '\0';
        len -= (uint64_t)n;
    }
    return 0;
}

static int read_chunked(struct body_sink *s, char **err)
{
    struct strbuf line;
    strbuf_init(&line);
    size_t total = 0;
    int rc = -1;
    for (;;) {
        total = 0;
        int r = read_line(&line, &total, err);
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
        if (read_body_bytes(s, size, false, err) < 0)
            goto out;
        if (s->stopped) {
            rc = 0;
            goto out;
        }
        total = 0;
        r = read_line(&line, &total, err); /* the CRLF after the data */
        if (r != 0 || line.len != 0) {
            if (r == 0 || r == 1)
                *err = xstrdup("gflowd sent a malformed chunked body");
            goto out;
        }
    }
    /* Trailers, up to an empty line. */
    for (;;) {
        total = 0;
        int r = read_line(&line, &total, err);
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

void client_response_free(struct client_response *r)
{
    free(r->content_type);
    r->content_type = NULL;
    strbuf_free(&r->body);
}

/* Reads one response. *got_any tells whether any byte arrived (for the retry). */
static int read_response(struct client_response *r, client_chunk_cb cb, void *arg, bool *got_any,
                         char **err)
{
    struct strbuf line;
    strbuf_init(&line);
    size_t total = 0;
    int rc = -1;
    *got_any = false;

    for (;;) { /* loops past 1xx interim responses */
        total = 0;
        int lr = read_line(&line, &total, err);
        if (lr == 1) {
            *err =
                xasprintf("gflowd at %s closed the connection without answering", cl.socket_path);
            goto out;
        }
        if (lr < 0)
            goto out;
        *got_any = true;
        int major, minor, status;
        if (sscanf(line.buf, "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 ||
            status > 999) {
            *err = xasprintf("%s does not speak the gflowd protocol (status line '%.60s')",
                             cl.socket_path, line.buf);
            goto out;
        }
        cl.keepalive = major > 1 || (major == 1 && minor >= 1);
        bool chunked = false, have_len = false;
        uint64_t content_len = 0;
        free(r->content_type);
        r->content_type = NULL;
        for (;;) {
            lr = read_line(&line, &total, err);
            if (lr != 0) {
                if (lr == 1)
                    *err = xstrdup("gflowd closed the connection in the middle of a response");
                goto out;
            }
            if (line.len == 0)
                break;
            char *colon = strchr(line.buf, ':');
            if (!colon)
                continue;
            *colon = '\0';
            char *val = colon + 1;
            val += strspn(val, " \t");
            size_t vl = strlen(val);
            while (vl && (val[vl - 1] == ' ' || val[vl - 1] == '\t'))
                val[--vl] = '\0';
            if (!strcasecmp(line.buf, "Content-Length")) {
                char *end;
                errno = 0;
                content_len = strtoull(val, &end, 10);
                if (end == val || *end || errno) {
                    *err = xasprintf("gflowd sent a malformed Content-Length '%s'", val);
                    goto out;
                }
                have_len = true;
            } else if (!strcasecmp(line.buf, "Transfer-Encoding")) {
                if (strcasestr(val, "chunked"))
                    chunked = true;
            } else if (!strcasecmp(line.buf, "Connection")) {
                if (strcasestr(val, "close"))
                    cl.keepalive = false;
                else if (strcasestr(val, "keep-alive"))
                    cl.keepalive = true;
            } else if (!strcasecmp(line.buf, "Content-Type")) {
                free(r->content_type); /* a repeated header: the last one counts */
                r->content_type = xstrdup(val);
            }
        }
        if (status >= 100 && status < 200)
            continue;
        r->status = status;
        r->content_length = have_len ? content_len : 0;
        struct body_sink sink = {
            .sb = &r->body,
            .cb = status >= 200 && status < 300 ? cb : NULL,
            .arg = arg,
        };
        if (status == 204 || status == 304) {
            rc = 0;
        } else if (chunked) {
            rc = read_chunked(&sink, err);
        } else if (have_len && !sink.cb) {
            rc = read_body_into(&r->body, content_len, err);
        } else if (have_len) {
            rc = read_body_bytes(&sink, content_len, false, err);
        } else {
            cl.keepalive = false;
            rc = read_body_bytes(&sink, 0, true, err);
        }
        if (sink.stopped)
            cl.keepalive = false;
        goto out;
    }
out:
    strbuf_free(&line);
    return rc;
}

int client_request(const char *method, const char *path_query, const char *body, size_t body_len,
                   const char *content_type, struct client_response *r, client_chunk_cb stream_cb,
                   void *cb_arg, char **err)
{
    struct strbuf head;
    strbuf_init(&head);
    strbuf_addf(&head, "%s %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: %s/%s\r\n", method,
                path_query, cl.prog, GFLOW_VERSION);
    if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
        if (body)
            strbuf_addf(&head, "Content-Type: %s\r\n",
                        content_type ? content_type : "application/json");
        strbuf_addf(&head, "Content-Length: %zu\r\n", body ? body_len : 0);
    }
    strbuf_adds(&head, "\r\n");
    /* One write for a small request: the daemon then wakes once, not twice. */
    if (body && body_len <= 65536) {
        strbuf_add(&head, body, body_len);
        body = NULL;
    }

    memset(r, 0, sizeof(*r));
    strbuf_init(&r->body);
    int rc = -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        bool reused = cl.fd >= 0 && cl.used;
        if (cl.fd < 0 && client_connect(err) < 0)
            goto out;
        set_idle_timeout(stream_cb ? 0 : CLIENT_IDLE_TIMEOUT_SECS);
        cl.used = true;
        bool got_any = false;
        if (send_all(head.buf, head.len) < 0 || (body && send_all(body, body_len) < 0)) {
            int e = errno;
            if (!reused) {
                /* The daemon may have refused the request (413) and closed without
                 * reading all of it: its answer is then still waiting for us. */
                char *rerr = NULL;
                if (read_response(r, NULL, NULL, &got_any, &rerr) == 0) {
                    client_close();
                    rc = 0;
                    break;
                }
                free(rerr);
                strbuf_reset(&r->body);
            }
            client_close();
            if (reused)
                continue; /* the daemon closed the idle connection; try a fresh one */
            *err =
                xasprintf("lost the connection to gflowd at %s (%s)", cl.socket_path, strerror(e));
            goto out;
        }
        char *rerr = NULL;
        if (read_response(r, stream_cb, cb_arg, &got_any, &rerr) < 0) {
            client_close();
            if (reused && !got_any) {
                free(rerr);
                strbuf_reset(&r->body);
                continue;
            }
            if (strcmp(method, "GET") == 0)
                *err = rerr;
            else { /* the whole request reached the daemon: it may have acted on it */
                *err = xasprintf("%s; the request may have been carried out: check with "
                                 "'gqueue -a' or 'gjob show @' before sending it again",
                                 rerr);
                free(rerr);
            }
            goto out;
        }
        if (!cl.keepalive)
            client_close();
        rc = 0;
        break;
    }
out:
    strbuf_free(&head);
    return rc;
}

char *client_url_encode(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    struct strbuf sb;
    strbuf_init(&sb);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~,", *p)) {
            strbuf_addc(&sb, (char)*p);
        } else {
            strbuf_addc(&sb, '%');
            strbuf_addc(&sb, hex[*p >> 4]);
            strbuf_addc(&sb, hex[*p & 15]);
        }
    }
    return strbuf_detach(&sb);
}

void client_query_add(struct strbuf *path, const char *key, const char *value)
{
    char *v = client_url_encode(value);
    strbuf_addf(path, "%c%s=%s", strchr(path->buf ? path->buf : "", '?') ? '&' : '?', key, v);
    free(v);
}
