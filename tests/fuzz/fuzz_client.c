/* fuzz_client: the CLI's HTTP/1.1 response reader (src/client/client.c) on whatever a
 * daemon, or something else listening on its socket, might send.
 *
 * The client connects to a Unix socket by path; this harness is linked with
 * -Wl,--wrap=connect (meson.build), so that each connect() the client makes is answered
 * with one end of a socketpair whose other end already holds the next part of the input
 * and is shut for writing. No change to the client is needed.
 *
 * Input: the first byte holds flags, the rest is what the "daemon" sends, cut into the
 * streams of successive connections at each "<<CONNECT>>"; a connection with no stream
 * left is refused.
 *   flags & 1: the harness closes its end at once (the client's send fails: the path
 *              that reads a 413 the daemon sent before closing);
 *   flags & 2: a second request follows on the same connection (keep-alive, and the
 *              retry of a request on a connection the daemon closed).
 *   flags >> 2: after how many streamed bytes the stop callback stops (third run).
 *
 * Invariants: each run either succeeds with a final status 200..999 (1xx are skipped)
 * and a body no longer than the input, or fails with a message; reading the same
 * bytes into a buffer or streaming them to a callback gives the same outcome, status
 * and body; a callback that stops early gets a prefix of that body. No crash, no leak,
 * no hang (every stream ends). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "fuzz.h"
#include "util.h"

#define SEPARATOR "<<CONNECT>>"
#define MAX_STREAMS 4

static struct {
    const uint8_t *part[MAX_STREAMS];
    size_t len[MAX_STREAMS];
    size_t n, next;
    bool close_early;
    int held[MAX_STREAMS]; /* the harness's ends, closed after the request */
    size_t n_held;
} feed;

int __wrap_connect(int fd, const struct sockaddr *addr, socklen_t len);
int __wrap_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (feed.next >= feed.n) {
        errno = ECONNREFUSED;
        return -1;
    }
    int sv[2];
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    int big = 4 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    const uint8_t *p = feed.part[feed.next];
    size_t left = feed.len[feed.next];
    feed.next++;
    while (left > 0) { /* what does not fit is left out */
        ssize_t w = write(sv[1], p, left);
        if (w <= 0)
            break;
        p += w;
        left -= (size_t)w;
    }
    shutdown(sv[1], SHUT_WR);
    if (feed.close_early)
        close(sv[1]);
    else
        feed.held[feed.n_held++] = sv[1];
    FUZZ_CHECK(dup2(sv[0], fd) == fd);
    close(sv[0]);
    return 0;
}

struct outcome {
    int rc;
    int status;
    struct strbuf body;
};

struct sink {
    struct strbuf *sb;
    size_t stop_after; /* 0: never */
};

static int collect_cb(const char *data, size_t len, void *arg)
{
    struct sink *s = arg;
    FUZZ_CHECK(len > 0);
    strbuf_add(s->sb, data, len);
    return s->stop_after && s->sb->len >= s->stop_after ? -1 : 0;
}

/* One or two requests over the streams; mode 0 buffers, 1 streams, 2 streams and stops. */
static void run(int mode, bool twice, size_t stop_after, size_t total, struct outcome out[2])
{
    feed.next = 0;
    feed.n_held = 0;
    for (int i = 0; i < (twice ? 2 : 1); i++) {
        struct client_response r;
        struct strbuf streamed;
        strbuf_init(&streamed);
        struct sink sink = {.sb = &streamed, .stop_after = mode == 2 ? stop_after : 0};
        char *err = NULL;
        out[i].rc = client_request(i ? "GET" : "POST", "/v1/jobs", i ? NULL : "{}", i ? 0 : 2, NULL,
                                   &r, mode ? collect_cb : NULL, &sink, &err);
        strbuf_init(&out[i].body);
        if (out[i].rc < 0) {
            FUZZ_CHECK(err && *err);
            free(err);
        } else {
            FUZZ_CHECK(err == NULL);
            FUZZ_CHECK(r.status >= 200 && r.status <= 999);
            out[i].status = r.status;
            /* A 2xx body goes to the callback, except on the path where the send failed
             * (the daemon closed early, as with a 413): that reads without one. */
            bool to_cb = mode && r.status < 300 && !feed.close_early;
            FUZZ_CHECK(!to_cb || r.body.len == 0);
            FUZZ_CHECK(to_cb || streamed.len == 0);
            struct strbuf *b = to_cb ? &streamed : &r.body;
            FUZZ_CHECK(b->len <= total);
            strbuf_add(&out[i].body, b->buf ? b->buf : "", b->len);
        }
        strbuf_free(&streamed);
        client_response_free(&r);
    }
    client_close();
    for (size_t i = 0; i < feed.n_held; i++)
        close(feed.held[i]);
}

static void outcome_free(struct outcome out[2])
{
    strbuf_free(&out[0].body);
    strbuf_free(&out[1].body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool inited;
    if (!inited) {
        client_init("fuzz_client");
        client_set_socket("/nonexistent/gflow-fuzz.sock"); /* never really connected */
        inited = true;
    }
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    const uint8_t *p = data + 1, *end = data + size;
    feed.n = 0;
    while (feed.n < MAX_STREAMS) {
        const uint8_t *sep = memmem(p, (size_t)(end - p), SEPARATOR, strlen(SEPARATOR));
        feed.part[feed.n] = p;
        feed.len[feed.n++] = (size_t)((sep ? sep : end) - p);
        if (!sep)
            break;
        p = sep + strlen(SEPARATOR);
    }
    feed.close_early = flags & 1;
    bool twice = flags & 2;
    size_t stop_after = (size_t)(flags >> 2) + 1;

    struct outcome buffered[2] = {0}, streamed[2] = {0}, stopped[2] = {0};
    run(0, twice, 0, size, buffered);
    run(1, twice, 0, size, streamed);
    for (int i = 0; i < (twice ? 2 : 1); i++) {
        FUZZ_CHECK(buffered[i].rc == streamed[i].rc);
        if (buffered[i].rc < 0)
            break;
        FUZZ_CHECK(buffered[i].status == streamed[i].status);
        FUZZ_CHECK(buffered[i].body.len == streamed[i].body.len &&
                   memcmp(buffered[i].body.buf, streamed[i].body.buf, buffered[i].body.len) == 0);
    }
    run(2, false, stop_after, size, stopped);
    if (buffered[0].rc == 0 && buffered[0].status < 300) {
        FUZZ_CHECK(stopped[0].rc == 0 && stopped[0].status == buffered[0].status);
        FUZZ_CHECK(stopped[0].body.len <= buffered[0].body.len &&
                   memcmp(stopped[0].body.buf, buffered[0].body.buf, stopped[0].body.len) == 0);
    }
    outcome_free(buffered);
    outcome_free(streamed);
    outcome_free(stopped);
    return 0;
}
