/* web: see web.h. The checks each request passes, in order (docs/security.md):
 *   1. Host is 127.0.0.1:PORT or localhost:PORT (a DNS-rebinding page has another);
 *   2. GET /?token=T with the right token sets the session cookie and redirects to /;
 *   3. every other request carries that cookie (HttpOnly, SameSite=Strict);
 *   4. a request that may change something (not GET or HEAD) has an Origin (or else a
 *      Referer) of this server and the header X-Gflow-Web: 1 (no form can send it).
 * Then /v1/... goes to the daemon (web_proxy.c) and anything else is one of the built-in
 * files (web_assets.c). The checks run as soon as a request's headers are in: a body is
 * read only from a browser that has shown the session. Connections that have not shown it
 * are limited in number and time (web_conns.h); the others are closed after WEB_IDLE_SECS
 * without traffic (an event stream's pings keep it open). */
#include "web.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "util.h"
#include "web_assets.h"
#include "web_conns.h"
#include "web_proxy.h"

#define SECRET_BYTES 32
#define BODY_MAX (4u << 20) /* a larger submission belongs to gbatch, not the browser */
/* Connections at once (a thread each), and how long one that has shown the session may
 * stay silent (the daemon's event stream pings every 15 s). */
#define WEB_MAX_CONNECTIONS 64
#define WEB_IDLE_SECS 60

struct web {
    char token[2 * SECRET_BYTES + 1];   /* from the URL printed */
    char session[2 * SECRET_BYTES + 1]; /* the cookie's value */
    char cookie_name[32];               /* gflow_web_PORT: browsers share cookies by host */
    char origins[2][64];                /* http://127.0.0.1:PORT, http://localhost:PORT */
    char hosts[2][48];                  /* 127.0.0.1:PORT, localhost:PORT */
    const char *socket_path;
};

struct web_request {
    struct strbuf body;
    bool too_big;
    bool answered; /* when its headers came in: refused, or the login */
};

static int random_hex(char *out, size_t bytes)
{
    unsigned char raw[SECRET_BYTES];
    if (bytes > sizeof(raw) || getrandom(raw, bytes, 0) != (ssize_t)bytes)
        return -1;
    for (size_t i = 0; i < bytes; i++)
        sprintf(out + 2 * i, "%02x", raw[i]);
    return 0;
}

/* Compares in a time that does not depend on where the strings differ. */
static bool secret_equal(const char *given, const char *secret)
{
    if (!given)
        return false;
    size_t n = strlen(secret), len = strnlen(given, n + 1);
    unsigned char diff = len != n;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)((i < len ? given[i] : 0) ^ secret[i]);
    return diff == 0;
}

/* libmicrohttpd's error lines, on stderr as before, but for the browser going away: a
 * closed tab (its event stream, a kept-alive connection) is no error. */
static bool peer_gone(const char *msg)
{
    /* libmicrohttpd 0.9/1.0: a send to a browser that has closed the connection, and a
     * browser that closed it halfway through a request. */
    static const char *const gone[] = {
        "closed by remote peer",
        "The socket is not connected",
        "The socket is no longer available for sending",
        "Failed to send data in request",
        "Socket has been disconnected when reading",
        "Connection was closed by remote side",
        "Connection reset by peer",
        "Broken pipe",
    };
    for (size_t i = 0; i < sizeof(gone) / sizeof(*gone); i++)
        if (strstr(msg, gone[i]))
            return true;
    return false;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char *msg = xvasprintf(fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    if (!peer_gone(msg))
        fprintf(stderr, "gflowd: web: http: %s\n", msg);
    free(msg);
}

static void security_headers(struct MHD_Response *r)
{
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                            "form-action 'self'");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *ctype,
                             const void *data, size_t len, bool copy)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, (void *)data, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    security_headers(r);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* {"error": msg}, as the daemon's own errors, so the page shows them alike. */
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    json_t *o = json_pack("{s:s}", "error", msg);
    char *s = json_dumps(o, 0);
    enum MHD_Result ret = reply(c, status, "application/json", s, strlen(s), true);
    free(s);
    json_decref(o);
    return ret;
}

static bool host_ok(const struct web *w, struct MHD_Connection *c)
{
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    return host && (!strcmp(host, w->hosts[0]) || !strcmp(host, w->hosts[1]));
}

/* Origin must be this server's; lacking it, Referer must point into it. */
static bool origin_ok(const struct web *w, struct MHD_Connection *c)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin)
        return !strcmp(origin, w->origins[0]) || !strcmp(origin, w->origins[1]);
    const char *ref = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Referer");
    for (int i = 0; ref && i < 2; i++) {
        size_t n = strlen(w->origins[i]);
        if (!strncmp(ref, w->origins[i], n) && (ref[n] == '/' || !ref[n]))
            return true;
    }
    return false;
}

static enum MHD_Result login(const struct web *w, struct MHD_Connection *c)
{
    const char *token = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    if (!secret_equal(token, w->token))
        return reply_error(c, 403, "wrong token: open the exact URL that 'gflowd web' printed");
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    char *cookie =
        xasprintf("%s=%s; HttpOnly; SameSite=Strict; Path=/", w->cookie_name, w->session);
    MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, cookie);
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, "/");
    security_headers(r);
    free(cookie);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_SEE_OTHER, r);
    MHD_destroy_response(r);
    web_conns_trust(c);
    return ret;
}

static enum MHD_Result add_query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    client_query_add(cls, key, value ? value : "");
    return MHD_YES;
}

static enum MHD_Result proxy(const struct web *w, struct MHD_Connection *c, const char *url,
                             const char *method, const struct strbuf *body)
{
    struct strbuf path;
    strbuf_init(&path);
    char *enc = client_url_encode(url);
    /* The path's slashes stay as they are; only the rest is encoded. */
    for (const char *p = enc; *p; p++) {
        if (!strncmp(p, "%2F", 3)) {
            strbuf_addc(&path, '/');
            p += 2;
        } else {
            strbuf_addc(&path, *p);
        }
    }
    free(enc);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_query_arg, &path);
    unsigned status = 0;
    char *err = NULL;
    struct MHD_Response *r =
        web_proxy(w->socket_path, method, path.buf, body->buf, body->len,
                  MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
                  MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID"), &status, &err);
    strbuf_free(&path);
    if (!r) {
        enum MHD_Result ret = reply_error(c, 502, err);
        free(err);
        return ret;
    }
    security_headers(r);
    /* The daemon's answer may be a stream that is quiet for long (a followed log of a
     * silent job), while its thread waits in web_proxy's read: no idle timeout until
     * it ends (completed() sets it again). */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0U);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result serve_asset(struct MHD_Connection *c, const char *url)
{
    if (!strcmp(url, "/"))
        url = "/index.html";
    for (size_t i = 0; i < web_assets_count; i++)
        if (!strcmp(web_assets[i].path, url))
            return reply(c, 200, web_assets[i].content_type, web_assets[i].data, web_assets[i].len,
                         false);
    return reply_error(c, 404, "no such page");
}

/* The checks of a request whose headers are in (see the top): true with *ret when it is
 * answered (a refusal, or the login's redirect) and its body must not be read. */
static bool answered_at_headers(const struct web *w, struct MHD_Connection *c, const char *url,
                                const char *method, enum MHD_Result *ret)
{
    if (!host_ok(w, c)) {
        *ret = reply_error(c, 403,
                           "wrong Host header: open the dashboard at the URL 'gflowd web' "
                           "printed (127.0.0.1 or localhost, this port)");
        return true;
    }
    bool read_only = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (read_only && !strcmp(url, "/") &&
        MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token")) {
        *ret = login(w, c);
        return true;
    }
    const char *cookie = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, w->cookie_name);
    if (!secret_equal(cookie, w->session)) {
        *ret = reply_error(c, 401,
                           "not signed in: open the URL with ?token= that 'gflowd web' "
                           "printed");
        return true;
    }
    web_conns_trust(c);
    if (!read_only && !origin_ok(w, c)) {
        *ret = reply_error(c, 403, "cross-origin request refused: wrong or missing Origin");
        return true;
    }
    if (!read_only &&
        !secret_equal(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Gflow-Web"), "1")) {
        *ret = reply_error(c, 403, "request refused: the header X-Gflow-Web: 1 is missing");
        return true;
    }
    return false;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    const struct web *w = cls;
    struct web_request *rq = *con_cls;
    if (!rq) {
        rq = xcalloc(1, sizeof(*rq));
        strbuf_init(&rq->body);
        *con_cls = rq;
        enum MHD_Result ret = MHD_YES;
        rq->answered = answered_at_headers(w, c, url, method, &ret);
        return ret;
    }
    if (rq->answered) { /* its answer is queued; the rest of its body is not kept */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (rq->body.len + *upload_size > BODY_MAX)
            rq->too_big = true;
        else
            strbuf_add(&rq->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->too_big)
        return reply_error(c, 413, "request body too large for the dashboard (4 MiB)");
    if (str_starts_with(url, "/v1/"))
        return proxy(w, c, url, method, &rq->body);
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return reply_error(c, 405, "only GET for the dashboard's pages");
    return serve_asset(c, url);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct web_request *rq = *con_cls;
    if (rq) {
        strbuf_free(&rq->body);
        free(rq);
        *con_cls = NULL;
    }
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) /* kept alive: idle again */
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)WEB_IDLE_SECS);
}

static int listen_loopback(const char *addr, int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t len = sizeof(sa);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

int web_run(const struct web_opts *o)
{
    const char *bind_addr = o->bind ? o->bind : "127.0.0.1";
    if (strcmp(bind_addr, "127.0.0.1") && strcmp(bind_addr, "localhost")) {
        fprintf(stderr,
                "gflowd: web binds 127.0.0.1 only, not '%s' (to reach it from elsewhere, "
                "forward the port: ssh -L PORT:127.0.0.1:PORT)\n",
                bind_addr);
        return 2;
    }
    struct web w = {0};
    if (o->socket)
        client_set_socket(o->socket);
    char *err = NULL;
    w.socket_path = client_socket_path(&err);
    if (!w.socket_path) {
        fprintf(stderr, "gflowd: %s\n", err);
        free(err);
        return 1;
    }
    if (random_hex(w.token, SECRET_BYTES) < 0 || random_hex(w.session, SECRET_BYTES) < 0) {
        fprintf(stderr, "gflowd: web: getrandom: %s\n", strerror(errno));
        return 1;
    }
    int port = o->port;
    int fd = listen_loopback("127.0.0.1", &port);
    if (fd < 0) {
        fprintf(stderr, "gflowd: web: cannot listen on 127.0.0.1:%d: %s (try another --port)\n",
                o->port, strerror(errno));
        return 1;
    }
    snprintf(w.cookie_name, sizeof(w.cookie_name), "gflow_web_%d", port);
    snprintf(w.hosts[0], sizeof(w.hosts[0]), "127.0.0.1:%d", port);
    snprintf(w.hosts[1], sizeof(w.hosts[1]), "localhost:%d", port);
    snprintf(w.origins[0], sizeof(w.origins[0]), "http://127.0.0.1:%d", port);
    snprintf(w.origins[1], sizeof(w.origins[1]), "http://localhost:%d", port);

    /* Blocked here (and so in every thread), awaited below. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A thread per browser connection: a proxied event stream blocks on its read. */
    struct MHD_Daemon *mhd = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
        NULL, NULL, handle, &w, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, /* first: for all */
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)WEB_MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)WEB_IDLE_SECS, MHD_OPTION_NOTIFY_CONNECTION,
        web_conns_notify_cb, NULL, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
    if (!mhd) {
        fprintf(stderr, "gflowd: web: cannot start the HTTP server\n");
        close(fd);
        return 1;
    }
    struct passwd *pw = getpwuid(geteuid());
    printf("Dashboard of gflowd at %s, acting as %s; open in a browser on this machine:\n"
           "http://127.0.0.1:%d/?token=%s\n",
           w.socket_path, pw ? pw->pw_name : "?", port, w.token);
    fflush(stdout);
    /* Once a second, the connections that have not shown the session in time go. */
    struct timespec tick = {.tv_sec = 1};
    while (sigtimedwait(&stop, NULL, &tick) < 0)
        web_conns_sweep();
    /* Not MHD_stop_daemon: it would wait for every proxied event stream to notice. */
    fprintf(stderr, "gflowd: web: stopped\n");
    return 0;
}
