/* client: socket discovery, a small HTTP/1.1 client over the daemon's Unix socket, JSON
 * requests and job id resolution, shared by every command-line program.
 *
 * The HTTP side is deliberately small: requests are ours (so their shape is known), and
 * responses are read with the buffered reader of http_reader.c.
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
#include "http_reader.h"
#include "paths.h"
#include "timefmt.h"

/* A daemon that sends nothing for this long is considered hung (streams excepted). */
#define CLIENT_IDLE_TIMEOUT_SECS 120

static struct {
    const char *prog;
    char *flag_socket;
    char *flag_config;
    char *socket_path;
    const char *socket_source; /* what named socket_path: "--socket", "GFLOW_SOCKET", ... */
    const char *flag_source;   /* what named flag_socket (client_set_socket_from) */
    int fd;
    bool used;      /* the connection has already carried a request */
    bool keepalive; /* the last response allows reusing the connection */
    struct http_reader rd;
} cl = {.prog = "gflow", .fd = -1};

void client_init(const char *prog)
{
    const char *slash = strrchr(prog, '/');
    cl.prog = slash ? slash + 1 : prog;
}

void client_set_socket(const char *path)
{
    client_set_socket_from(path, "--socket");
}

void client_set_socket_from(const char *path, const char *source)
{
    cl.flag_source = source;
    free(cl.flag_socket);
    cl.flag_socket = path ? xstrdup(path) : NULL;
    free(cl.socket_path);
    cl.socket_path = NULL;
}

void client_set_config(const char *path)
{
    free(cl.flag_config);
    cl.flag_config = path ? xstrdup(path) : NULL;
}

int client_load_timezone(char **err)
{
    struct gflow_config cfg;
    int r = config_load(&cfg, cl.flag_config, err);
    if (r == 0)
        r = timefmt_use_zone(cfg.timezone, err);
    config_free(&cfg);
    return r;
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
    char *home = getenv("XDG_RUNTIME_DIR") || cfg->data_dir ? NULL : paths_home();
    if (!getenv("XDG_RUNTIME_DIR") && !cfg->data_dir && !home &&
        socket_probe(GFLOW_SYSTEM_SOCKET) == 0) {
        /* No per-user socket can be found without a home: the system daemon's it is. */
        cl.socket_source = "the system socket";
        return xstrdup(GFLOW_SYSTEM_SOCKET);
    }
    free(home);
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
        cl.socket_source = cl.flag_source;
        return cl.socket_path;
    }
    if (env && *env) { /* no need to read the config file: the variable wins anyway */
        cl.socket_path = xstrdup(env);
        cl.socket_source = "GFLOW_SOCKET";
        return cl.socket_path;
    }
    struct gflow_config cfg;
    if (config_load(&cfg, cl.flag_config, err) < 0) {
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
}

/* Whether connect() failing with e means that no daemon listens there (rather than one
 * this user may not reach). */
static bool connect_error_is_absent(int e)
{
    return e == ENOENT || e == ECONNREFUSED || e == ENOTDIR;
}

char *client_connect_error(const char *path, int e)
{
    /* The first line is the same from every program; the details name the socket tried,
     * what named it and the order of the search, so that a command that reached another
     * daemon than meant says why. */
    struct strbuf sb;
    strbuf_init(&sb);
    if (connect_error_is_absent(e))
        strbuf_adds(&sb, CLIENT_NOT_RUNNING);
    else
        strbuf_addf(&sb, "%s%s", CLIENT_UNREACHABLE, strerror(e));
    strbuf_addf(&sb,
                "\n  socket: %s (%s), named by %s"
                "\n  another daemon: pass --socket PATH or set GFLOW_SOCKET=PATH"
                "\n  (searched: --socket, GFLOW_SOCKET, daemon.socket_path, a live per-user "
                "socket, then %s)",
                path, strerror(e), cl.socket_source ? cl.socket_source : "the caller",
                GFLOW_SYSTEM_SOCKET);
    return strbuf_detach(&sb);
}

char *client_connect_error_line(const char *path, int e)
{
    if (connect_error_is_absent(e))
        return xasprintf("%s (socket %s: %s)", CLIENT_NOT_RUNNING, path, strerror(e));
    return xasprintf("%s%s (socket %s)", CLIENT_UNREACHABLE, strerror(e), path);
}

bool client_is_connect_error(const char *msg)
{
    return msg &&
           (str_starts_with(msg, CLIENT_NOT_RUNNING) || str_starts_with(msg, CLIENT_UNREACHABLE));
}

void client_print_error(const char *prog, const char *err)
{
    if (client_is_connect_error(err))
        fprintf(stderr, "%s\n", err);
    else
        fprintf(stderr, "%s: %s\n", prog, err);
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
        *err = client_connect_error(path, e);
        return -1;
    }
    cl.fd = fd;
    cl.used = false;
    http_reader_init(&cl.rd, fd, path);
    cl.rd.idle_secs = CLIENT_IDLE_TIMEOUT_SECS;
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
    cl.rd.peer = cl.socket_path;
    struct http_head h;
    if (http_read_head(&cl.rd, &h, got_any, err) < 0)
        return -1;
    free(r->content_type);
    r->content_type = h.content_type;
    r->status = h.status;
    r->content_length = h.have_len ? h.content_length : 0;
    /* Error bodies are always collected. */
    int rc = http_read_body(&cl.rd, &h, &r->body, h.status >= 200 && h.status < 300 ? cb : NULL,
                            arg, err);
    cl.keepalive = h.keepalive;
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
