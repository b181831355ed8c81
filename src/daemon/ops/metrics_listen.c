/* metrics_listen: the TCP port for GET /metrics (see metrics_listen.h). */
#include "metrics_listen.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "util.h"

struct metrics_listen {
    int fd;
    int open; /* connections handed to the callback and not ended yet */
    metrics_accept_cb cb;
    void *arg;
};

static void accept_cb(int lfd, uint32_t events, void *arg)
{
    (void)events;
    struct metrics_listen *m = arg;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN, or out of descriptors: the next readiness tries again */
        }
        if (m->open >= METRICS_LISTEN_MAX_CONNECTIONS) {
            close(fd);
            continue;
        }
        m->open++;
        m->cb(m->arg, fd);
    }
}

/* "HOST:PORT" or "[HOST]:PORT" split in place; -1 if there is no port. */
static int split_spec(char *s, char **host, char **port)
{
    char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1])
        return -1;
    *colon = '\0';
    *port = colon + 1;
    *host = s;
    size_t n = strlen(s);
    if (s[0] == '[' && n > 2 && s[n - 1] == ']') {
        s[n - 1] = '\0';
        *host = s + 1;
    }
    return 0;
}

struct metrics_listen *metrics_listen_start(const char *spec, metrics_accept_cb cb, void *arg,
                                            char **err)
{
    char *copy = xstrdup(spec), *host, *port;
    if (split_spec(copy, &host, &port) < 0) {
        *err = xasprintf("metrics.listen: '%s' is not HOST:PORT; e.g. \"127.0.0.1:9400\"", spec);
        free(copy);
        return NULL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        *err = xasprintf("metrics.listen: cannot use '%s': %s; give HOST:PORT, e.g. "
                         "\"127.0.0.1:9400\"",
                         spec, gai_strerror(gai));
        free(copy);
        return NULL;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        *err = xasprintf("metrics.listen: cannot listen on %s: %s", spec, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        free(copy);
        return NULL;
    }
    freeaddrinfo(res);
    free(copy);
    struct metrics_listen *m = xcalloc(1, sizeof(*m));
    m->fd = fd;
    m->cb = cb;
    m->arg = arg;
    if (loop_add_fd(fd, EPOLLIN, accept_cb, m) < 0) {
        *err = xstrdup("metrics.listen: cannot add the socket to the event loop");
        close(fd);
        free(m);
        return NULL;
    }
    log_info("metrics on http://%s/metrics", spec);
    return m;
}

void metrics_listen_closed(struct metrics_listen *m)
{
    if (m && m->open > 0)
        m->open--;
}

void metrics_listen_stop(struct metrics_listen *m)
{
    if (!m)
        return;
    loop_del_fd(m->fd);
    close(m->fd);
    free(m);
}
