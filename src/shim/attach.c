/* attach: --pty. The job runs on a pseudo-terminal the shim owns: the job's stdin,
 * stdout and stderr are its slave (the job's first process makes it its controlling
 * terminal, child.c), the relay reads its master into the log as it reads the pipe of a
 * plain job (relay.c), and this file serves the terminal to `gjob attach` on the Unix
 * socket DIR/sock (--pty DIR; the frames are src/core/attachproto.h).
 *
 * Who may connect: the directory and the socket belong to the job's user, modes 0700
 * and 0600, so only that user and root reach the socket; the peer's uid
 * (SO_PEERCRED) is checked again on accept. Who may type: one writer, the latest client
 * that attached without --read-only (a later one takes over the keyboard, the earlier
 * one is told and stays as a viewer; when the writer leaves, the latest read-write
 * client left becomes the writer). Viewers only see. Window sizes come from the writer.
 * Every client gets the terminal's recent output on attach (a ring of
 * SHIM_ATTACH_RING bytes), then all of it as it comes; a client that falls
 * SHIM_ATTACH_OUT_MAX bytes behind is dropped: the job never waits for a viewer. The
 * socket lives as long as the shim, so a restart of gflowd does not touch it. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "attachproto.h"
#include "util.h"

#define SHIM_ATTACH_MAX_CLIENTS 16
#define SHIM_ATTACH_OUT_MAX (1024 * 1024)
#define SHIM_ATTACH_RING (16 * 1024)
/* How long the shim tries to hand END and the last output to its clients at the end. */
#define SHIM_ATTACH_LINGER_MS 500

struct shim_attach_client {
    int fd;
    bool hello;
    bool read_only;
    bool gone; /* to be closed at the next safe point */
    uint8_t *in;
    size_t in_len;
    uint8_t *out;
    size_t out_len, out_off, out_cap;
};

struct shim_attach {
    int64_t job_id;
    int master;
    int listen_fd;
    char *dir;
    char *sock;
    uid_t owner;
    struct shim_attach_client *c[SHIM_ATTACH_MAX_CLIENTS];
    int n;
    struct shim_attach_client *writer;
    uint8_t ring[SHIM_ATTACH_RING];
    size_t ring_len, ring_head; /* bytes held, and where the next one goes */
};

/* Binds fd to dir/name; a path too long for sun_path goes through the directory's fd. */
static int shim_attach_bind(int fd, const char *dir, const char *name)
{
    char *path = xasprintf("%s/%s", dir, name);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int dfd = -1;
    if (strlen(path) < sizeof(sa.sun_path)) {
        memcpy(sa.sun_path, path, strlen(path) + 1);
    } else {
        dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
            free(path);
            return -1;
        }
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dfd, name);
    }
    free(path);
    mode_t old = umask(0177); /* born 0600 */
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    umask(old);
    if (dfd >= 0)
        close(dfd);
    errno = e;
    return rc;
}

/* The attach directory and its listening socket, owned by uid:gid. */
static int shim_attach_listen(struct shim_attach *a, bool chown_to, uid_t uid, gid_t gid,
                              char **err)
{
    /* The run directory is the daemon's own: nobody else can have put anything here; a
     * previous shim of this job (requeued) may have left its socket. */
    if (mkdir(a->dir, 0700) < 0 && errno != EEXIST) {
        *err = xasprintf("cannot create %s: %s", a->dir, strerror(errno));
        return -1;
    }
    unlink(a->sock);
    char *tmp = xasprintf("%s.new", a->sock);
    unlink(tmp);
    if ((chown_to && chown(a->dir, uid, gid) < 0) || chmod(a->dir, 0700) < 0) {
        *err = xasprintf("cannot give %s to the job's user: %s", a->dir, strerror(errno));
        return -1;
    }
    /* Made as sock.new and renamed once it is the user's and listens: a client never
     * finds a socket it may not connect to yet (it waits while there is none). The
     * directory is the user's already: lchown, so that a symbolic link the user puts in
     * the socket's place meanwhile gets the ownership, not what it points to. */
    a->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = 0;
    if (a->listen_fd < 0 || shim_attach_bind(a->listen_fd, a->dir, "sock.new") < 0 ||
        (chown_to && lchown(tmp, uid, gid) < 0) ||
        listen(a->listen_fd, SHIM_ATTACH_MAX_CLIENTS) < 0 || rename(tmp, a->sock) < 0) {
        *err = xasprintf("cannot listen on %s: %s", a->sock, strerror(errno));
        unlink(tmp);
        rc = -1;
    }
    free(tmp);
    return rc;
}

/* The terminal: master kept here, slave for the job (owned by its user, 0620 as a
 * login's), 24x80 until a writer says otherwise. */
static int shim_attach_pty(struct shim_attach *a, struct shim_exec *ex, bool chown_to, uid_t uid,
                           char **err)
{
    a->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char name[PATH_MAX];
    if (a->master < 0 || grantpt(a->master) < 0 || unlockpt(a->master) < 0 ||
        ptsname_r(a->master, name, sizeof(name)) != 0) {
        *err = xasprintf("cannot open a pseudo-terminal: %s", strerror(errno));
        return -1;
    }
    ex->pty_slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (ex->pty_slave < 0 || (chown_to && fchown(ex->pty_slave, uid, (gid_t)-1) < 0) ||
        fchmod(ex->pty_slave, 0620) < 0) {
        *err = xasprintf("cannot open %s for the job: %s", name, strerror(errno));
        return -1;
    }
    struct winsize ws = {.ws_row = 24, .ws_col = 80};
    ioctl(a->master, TIOCSWINSZ, &ws);
    return 0;
}

struct shim_attach *shim_attach_open(const struct shim_opts *o, struct shim_exec *ex,
                                     struct shim_relay *rl, char **err)
{
    struct shim_attach *a = xcalloc(1, sizeof(*a));
    a->job_id = o->job_id;
    a->master = a->listen_fd = -1;
    a->dir = xstrdup(o->pty_dir);
    a->sock = xasprintf("%s/sock", o->pty_dir);
    bool chown_to = o->uid >= 0 && geteuid() == 0;
    a->owner = o->uid >= 0 ? (uid_t)o->uid : geteuid();
    gid_t gid = o->gid >= 0 ? (gid_t)o->gid : getegid();
    if (shim_attach_pty(a, ex, chown_to, a->owner, err) < 0 ||
        shim_attach_listen(a, chown_to, a->owner, gid, err) < 0) {
        shim_attach_close(a);
        return NULL;
    }
    /* The relay reads the terminal instead of the pipe it made. */
    int rd = fcntl(a->master, F_DUPFD_CLOEXEC, 3);
    if (rd < 0 || fcntl(a->master, F_SETFL, O_NONBLOCK) < 0) {
        *err = xasprintf("cannot set up the terminal's relay: %s", strerror(errno));
        if (rd >= 0)
            close(rd);
        shim_attach_close(a);
        return NULL;
    }
    if (rl->rd >= 0)
        close(rl->rd);
    if (ex->out_fd >= 0)
        close(ex->out_fd);
    ex->out_fd = -1;
    rl->rd = rd;
    rl->tap = a;
    return a;
}

/* ---- the clients ---- */

/* Writes what c has queued, as far as its socket takes it now. */
static void shim_attach_flush(struct shim_attach_client *c)
{
    while (!c->gone && c->out_off < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return;
        if (w <= 0) {
            c->gone = true;
            return;
        }
        c->out_off += (size_t)w;
    }
    c->out_off = c->out_len = 0;
}

/* Queues one frame for c; a client that far behind is dropped instead. */
static void shim_attach_send(struct shim_attach_client *c, enum attach_type type,
                             const void *payload, size_t len)
{
    if (c->gone)
        return;
    if (c->out_off > 0) { /* what was written makes room at the front */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    size_t need = c->out_len + ATTACH_HEADER + len;
    if (need > SHIM_ATTACH_OUT_MAX) {
        c->gone = true; /* a slow viewer: the job does not wait for it */
        return;
    }
    if (need > c->out_cap) {
        c->out_cap = need < 64 * 1024 ? 64 * 1024 : need * 2;
        if (c->out_cap > SHIM_ATTACH_OUT_MAX)
            c->out_cap = SHIM_ATTACH_OUT_MAX;
        c->out = xrealloc(c->out, c->out_cap);
    }
    attach_header(c->out + c->out_len, type, len);
    if (len)
        memcpy(c->out + c->out_len + ATTACH_HEADER, payload, len);
    c->out_len = need;
}

static void shim_attach_note(struct shim_attach_client *c, const char *text)
{
    shim_attach_send(c, ATTACH_NOTE, text, strlen(text));
    shim_attach_flush(c);
}

/* The ring's bytes, oldest first, as DATA to a client that just said hello. */
static void shim_attach_replay(struct shim_attach *a, struct shim_attach_client *c)
{
    size_t start = (a->ring_head + SHIM_ATTACH_RING - a->ring_len) % SHIM_ATTACH_RING;
    size_t first = a->ring_len < SHIM_ATTACH_RING - start ? a->ring_len : SHIM_ATTACH_RING - start;
    if (first)
        shim_attach_send(c, ATTACH_DATA, a->ring + start, first);
    if (a->ring_len > first)
        shim_attach_send(c, ATTACH_DATA, a->ring, a->ring_len - first);
}

static void shim_attach_hello(struct shim_attach *a, struct shim_attach_client *c,
                              const struct attach_frame *f)
{
    c->hello = true;
    c->read_only = f->len >= 1 && (f->payload[0] & ATTACH_HELLO_READ_ONLY);
    if (!c->read_only) {
        if (a->writer && a->writer != c)
            shim_attach_note(a->writer, "another `gjob attach` took over the keyboard; you "
                                        "are a viewer now (detach and attach again to type)");
        a->writer = c;
    }
    shim_attach_replay(a, c);
    shim_attach_flush(c);
}

/* The writer's keys to the terminal. Input the job does not read fills the terminal's
 * buffer; what does not fit is dropped and the writer told, never waited for. */
static void shim_attach_input(struct shim_attach *a, struct shim_attach_client *c,
                              const struct attach_frame *f)
{
    size_t off = 0;
    while (off < f->len) {
        ssize_t w = write(a->master, f->payload + off, f->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (errno == EAGAIN)
                shim_attach_note(c, "input dropped: the job is not reading its terminal");
            return;
        }
        off += (size_t)w;
    }
}

/* One frame from c; false when c broke the protocol. */
static bool shim_attach_frame(struct shim_attach *a, struct shim_attach_client *c,
                              const struct attach_frame *f)
{
    if (!c->hello)
        return f->type == ATTACH_HELLO ? (shim_attach_hello(a, c, f), true) : false;
    unsigned rows, cols;
    switch (f->type) {
    case ATTACH_DATA:
        if (c == a->writer)
            shim_attach_input(a, c, f);
        return true;
    case ATTACH_WINSIZE:
        if (attach_winsize_decode(f, &rows, &cols) < 0)
            return false;
        if (c == a->writer) { /* the kernel sends SIGWINCH to the job's foreground */
            struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
            ioctl(a->master, TIOCSWINSZ, &ws);
        }
        return true;
    default:
        return false;
    }
}

/* Reads what c sent and acts on each whole frame. */
static void shim_attach_read(struct shim_attach *a, struct shim_attach_client *c)
{
    for (;;) {
        size_t room = ATTACH_HEADER + ATTACH_MAX_PAYLOAD - c->in_len;
        ssize_t n = read(c->fd, c->in + c->in_len, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            c->gone = true;
            return;
        }
        c->in_len += (size_t)n;
        size_t used = 0;
        for (;;) {
            struct attach_frame f;
            long took = attach_parse(c->in + used, c->in_len - used, &f);
            if (took < 0 || (took > 0 && !shim_attach_frame(a, c, &f))) {
                c->gone = true;
                return;
            }
            if (took == 0)
                break;
            used += (size_t)took;
        }
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
    }
}

static void shim_attach_free_client(struct shim_attach_client *c)
{
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* Closes the clients marked gone; a writer that left hands the keyboard to the latest
 * read-write client left. */
static void shim_attach_sweep(struct shim_attach *a)
{
    int k = 0;
    for (int i = 0; i < a->n; i++) {
        struct shim_attach_client *c = a->c[i];
        if (!c->gone) {
            a->c[k++] = c;
            continue;
        }
        if (a->writer == c)
            a->writer = NULL;
        shim_attach_free_client(c);
    }
    a->n = k;
    for (int i = a->n - 1; i >= 0 && !a->writer; i--)
        if (a->c[i]->hello && !a->c[i]->read_only)
            a->writer = a->c[i];
}

/* A new connection: the job's user or root only, at most SHIM_ATTACH_MAX_CLIENTS. */
static void shim_attach_accept(struct shim_attach *a)
{
    for (;;) {
        int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        struct shim_attach_client *c = xcalloc(1, sizeof(*c));
        c->fd = fd;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
            (cred.uid != a->owner && cred.uid != 0)) {
            char *msg = xasprintf("permission denied: job %lld is not yours (only its user "
                                  "and root may attach)",
                                  (long long)a->job_id);
            shim_attach_note(c, msg);
            free(msg);
            shim_attach_free_client(c);
            continue;
        }
        if (a->n == SHIM_ATTACH_MAX_CLIENTS) {
            shim_attach_note(c, "too many clients attached to this job (16); detach one first");
            shim_attach_free_client(c);
            continue;
        }
        c->in = xmalloc(ATTACH_HEADER + ATTACH_MAX_PAYLOAD);
        a->c[a->n++] = c;
    }
}

int shim_attach_pollfds(struct shim_attach *a, struct pollfd *p, int room)
{
    int k = 0;
    if (room > 0)
        p[k++] = (struct pollfd){.fd = a->listen_fd, .events = POLLIN};
    for (int i = 0; i < a->n && k < room; i++)
        p[k++] = (struct pollfd){.fd = a->c[i]->fd,
                                 .events = (short)(POLLIN | (a->c[i]->out_len ? POLLOUT : 0))};
    return k;
}

void shim_attach_events(struct shim_attach *a, const struct pollfd *p, int n)
{
    /* The clients in the order shim_attach_pollfds gave them; none was added or removed
     * since (both happen only here). */
    for (int i = 1; i < n && i - 1 < a->n; i++) {
        struct shim_attach_client *c = a->c[i - 1];
        if (p[i].fd != c->fd || !p[i].revents)
            continue;
        if (p[i].revents & POLLOUT)
            shim_attach_flush(c);
        if (p[i].revents & (POLLIN | POLLHUP | POLLERR))
            shim_attach_read(a, c);
    }
    shim_attach_sweep(a);
    if (n > 0 && (p[0].revents & POLLIN))
        shim_attach_accept(a);
}

void shim_attach_output(struct shim_attach *a, const uint8_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) { /* the last SHIM_ATTACH_RING bytes */
        a->ring[a->ring_head] = buf[i];
        a->ring_head = (a->ring_head + 1) % SHIM_ATTACH_RING;
    }
    a->ring_len = a->ring_len + n > SHIM_ATTACH_RING ? SHIM_ATTACH_RING : a->ring_len + n;
    for (int i = 0; i < a->n; i++) {
        struct shim_attach_client *c = a->c[i];
        if (!c->hello)
            continue;
        shim_attach_send(c, ATTACH_DATA, buf, n);
        shim_attach_flush(c);
    }
}

/* At the end: what is queued and END to every client, for at most the linger time. */
static void shim_attach_linger(struct shim_attach *a)
{
    for (int i = 0; i < a->n; i++)
        if (a->c[i]->hello)
            shim_attach_send(a->c[i], ATTACH_END, NULL, 0);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        struct pollfd p[SHIM_ATTACH_MAX_CLIENTS];
        int k = 0;
        for (int i = 0; i < a->n; i++) {
            shim_attach_flush(a->c[i]);
            if (!a->c[i]->gone && a->c[i]->out_len)
                p[k++] = (struct pollfd){.fd = a->c[i]->fd, .events = POLLOUT};
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long spent = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (k == 0 || spent >= SHIM_ATTACH_LINGER_MS)
            return;
        poll(p, (nfds_t)k, (int)(SHIM_ATTACH_LINGER_MS - spent));
    }
}

void shim_attach_close(struct shim_attach *a)
{
    if (!a)
        return;
    shim_attach_linger(a);
    for (int i = 0; i < a->n; i++)
        shim_attach_free_client(a->c[i]);
    if (a->listen_fd >= 0) {
        close(a->listen_fd);
        unlink(a->sock);
    }
    rmdir(a->dir);
    if (a->master >= 0)
        close(a->master);
    free(a->dir);
    free(a->sock);
    free(a);
}
