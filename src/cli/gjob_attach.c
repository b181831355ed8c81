/* gjob attach: connects the user's terminal to a --pty job's terminal, which its
 * gflow-shim serves on a Unix socket in the job's attach directory (src/shim/attach.c;
 * the frames are src/core/attachproto.h). The terminal is put in raw mode (restored on
 * every way out), window size changes are passed on, and the detach keys (Ctrl-b d by
 * default) end the attachment, not the job. Without a terminal on stdin the bytes are
 * relayed as they are (scripts, tests). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "attachproto.h"
#include "cli.h"
#include "clock.h"
#include "gjob_internal.h"
#include "job.h"
#include "termtext.h"
#include "util.h"

#define GJOB_ATTACH_DEFAULT_KEYS "ctrl-b,d"
/* Seconds a job that has just started gets to open its socket. */
#define GJOB_ATTACH_START_GRACE 5.0

static void gjob_help_attach(void)
{
    printf("Usage: gjob attach [options] <id | @ | @~N>\n"
           "\n"
           "Connects this terminal to a running job submitted with 'gbatch --pty': what\n"
           "the job writes appears here (starting with its recent output), what is typed\n"
           "goes to the job, window size changes reach it (SIGWINCH). The job's output\n"
           "still goes to its log. Several terminals may attach to one job: the latest\n"
           "one attached without --read-only types, the others watch. Detaching leaves\n"
           "the job running; 'gjob attach' again continues, also after a restart of\n"
           "gflowd. Only the job's user (and root) may attach.\n"
           "\n"
           "Options:\n"
           "  -r, --read-only         watch only: nothing typed reaches the job\n"
           "      --detach-keys KEYS  the keys that detach, comma-separated, each one\n"
           "                          character or ctrl-X (default ctrl-b,d, or\n"
           "                          $GFLOW_DETACH_KEYS)\n"
           "  -h, --help              show this help\n");
}

/* ---- the user's terminal ---- */

static struct termios gjob_attach_saved;
static bool gjob_attach_raw;

static void gjob_attach_restore(void)
{
    if (gjob_attach_raw)
        tcsetattr(STDIN_FILENO, TCSADRAIN, &gjob_attach_saved);
    gjob_attach_raw = false;
}

/* Raw mode on stdin's terminal, restored at exit (and on the signals, which the loop
 * reads from its signalfd). */
static void gjob_attach_make_raw(void)
{
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &gjob_attach_saved) < 0)
        return;
    struct termios raw = gjob_attach_saved;
    cfmakeraw(&raw);
    if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0) {
        gjob_attach_raw = true;
        atexit(gjob_attach_restore);
    }
}

/* A line for the user, on a line of its own even in raw mode. */
static void gjob_attach_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void gjob_attach_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    char *msg = termtext_dup(text, 0); /* the shim's lines may quote what the job wrote */
    free(text);
    fprintf(stderr, "%s[%s]%s", gjob_attach_raw ? "\r\n" : "\n", msg,
            gjob_attach_raw ? "\r\n" : "\n");
    free(msg);
}

/* ---- the connection ---- */

static int gjob_attach_write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int gjob_attach_send(int fd, enum attach_type type, const void *payload, size_t len)
{
    uint8_t hdr[ATTACH_HEADER];
    attach_header(hdr, type, len);
    return gjob_attach_write_all(fd, hdr, sizeof(hdr)) < 0 ||
                   (len && gjob_attach_write_all(fd, payload, len) < 0)
               ? -1
               : 0;
}

static void gjob_attach_send_winsize(int fd)
{
    struct winsize ws;
    if (!isatty(STDIN_FILENO) || ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row ||
        !ws.ws_col)
        return;
    uint8_t p[4];
    attach_winsize_encode(p, ws.ws_row, ws.ws_col);
    gjob_attach_send(fd, ATTACH_WINSIZE, p, sizeof(p));
}

/* One try at the job's socket (a path too long for sun_path through its directory): the
 * connected fd, or -1 with errno. */
static int gjob_attach_try(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int dfd = -1;
    if (strlen(path) < sizeof(sa.sun_path)) {
        memcpy(sa.sun_path, path, strlen(path) + 1);
    } else {
        char *dir = xstrndup(path, (size_t)(strrchr(path, '/') - path));
        dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        free(dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/sock", dfd);
    }
    int rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    if (dfd >= 0)
        close(dfd);
    if (rc == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    errno = e;
    return -1;
}

/* Connects to the job's socket. A job that has just started may not have it yet (the
 * daemon says R once the shim is forked): a few seconds' grace for that. */
static int gjob_attach_connect(int64_t id, const char *path)
{
    double deadline = now_mono() + GJOB_ATTACH_START_GRACE;
    int fd, e;
    while ((fd = gjob_attach_try(path)) < 0 && ((e = errno) == ENOENT || e == ECONNREFUSED) &&
           now_mono() < deadline) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (fd >= 0)
        return fd;
    if (e == EACCES || e == EPERM)
        cli_die(CLI_EXIT_FAIL,
                "permission denied on job %lld's terminal (%s): only the job's user and root "
                "may attach",
                (long long)id, path);
    if (e == ENOENT || e == ECONNREFUSED)
        cli_die(CLI_EXIT_FAIL,
                "job %lld's terminal is gone: the job is ending (see 'gjob log %lld')",
                (long long)id, (long long)id);
    cli_die(CLI_EXIT_FAIL, "cannot connect to job %lld's terminal (%s): %s", (long long)id, path,
            strerror(e));
}

/* The daemon's word on the job: its socket, or a one-line reason why there is none. */
static char *gjob_attach_socket_of(int64_t id)
{
    char *path = xasprintf("/v1/jobs/%lld", (long long)id);
    json_t *job = cli_call("GET", path, NULL);
    free(path);
    enum job_state st = JOB_QUEUED;
    job_state_parse(json_string_value(json_object_get(job, "state")), &st);
    const char *sock = json_string_value(json_object_get(job, "attach_socket"));
    const char *user = json_string_value(json_object_get(job, "user"));
    if (!json_is_true(json_object_get(job, "pty")))
        cli_die(CLI_EXIT_FAIL,
                "job %lld has no terminal to attach to: it was not submitted with 'gbatch "
                "--pty' (its output: 'gjob log %lld')",
                (long long)id, (long long)id);
    if (job_state_is_terminal(st))
        cli_die(CLI_EXIT_FAIL,
                "job %lld has ended (%s): nothing to attach to; its output: 'gjob "
                "log %lld'",
                (long long)id, job_state_short(st), (long long)id);
    if (st != JOB_RUNNING)
        cli_die(CLI_EXIT_FAIL, "job %lld is not running yet (%s): attach once it runs",
                (long long)id, job_state_short(st));
    if (!sock)
        cli_die(CLI_EXIT_FAIL,
                "permission denied: job %lld belongs to %s; only its user and root may attach",
                (long long)id, user ? user : "another user");
    char *out = xstrdup(sock);
    json_decref(job);
    return out;
}

/* ---- the loop ---- */

struct gjob_attach {
    int64_t id;
    int sock;
    bool read_only;
    bool stdin_open;
    bool ended;
    struct attach_keys keys;
    uint8_t *in; /* frames from the shim not yet whole */
    size_t in_len;
};

/* The user's input: the detach keys are watched for, the rest goes to the job (unless
 * --read-only). True when the user detached. */
static bool gjob_attach_stdin(struct gjob_attach *a)
{
    uint8_t buf[4096], out[sizeof(buf) + ATTACH_MAX_KEYS];
    ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return false;
    if (n <= 0) {
        a->stdin_open = false; /* the output still comes, until the job ends */
        return false;
    }
    size_t out_n;
    bool detach = attach_keys_feed(&a->keys, buf, (size_t)n, out, &out_n);
    if (out_n && !a->read_only && gjob_attach_send(a->sock, ATTACH_DATA, out, out_n) < 0)
        return false; /* the socket's end shows on the next poll */
    return detach;
}

/* What the shim sent. False once the connection is over. */
static bool gjob_attach_socket_in(struct gjob_attach *a)
{
    ssize_t n = read(a->sock, a->in + a->in_len, ATTACH_HEADER + ATTACH_MAX_PAYLOAD - a->in_len);
    if (n < 0 && errno == EINTR)
        return true;
    if (n <= 0)
        return false;
    a->in_len += (size_t)n;
    size_t used = 0;
    for (;;) {
        struct attach_frame f;
        long took = attach_parse(a->in + used, a->in_len - used, &f);
        if (took < 0)
            return false;
        if (took == 0)
            break;
        used += (size_t)took;
        if (f.type == ATTACH_DATA && gjob_attach_write_all(STDOUT_FILENO, f.payload, f.len) < 0)
            return false;
        if (f.type == ATTACH_NOTE)
            gjob_attach_say("%.*s", (int)f.len, (const char *)f.payload);
        if (f.type == ATTACH_END)
            a->ended = true;
    }
    memmove(a->in, a->in + used, a->in_len - used);
    a->in_len -= used;
    return true;
}

static int gjob_attach_loop(struct gjob_attach *a, int sfd)
{
    for (;;) {
        struct pollfd p[3] = {{.fd = a->sock, .events = POLLIN},
                              {.fd = sfd, .events = POLLIN},
                              {.fd = a->stdin_open ? STDIN_FILENO : -1, .events = POLLIN}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            cli_die(CLI_EXIT_FAIL, "poll: %s", strerror(errno));
        }
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGWINCH) {
                    if (!a->read_only)
                        gjob_attach_send_winsize(a->sock);
                } else { /* SIGTERM, SIGHUP, SIGINT: leave, the job goes on */
                    gjob_attach_say("detached from job %lld", (long long)a->id);
                    return 0;
                }
            }
        }
        if (p[0].revents && !gjob_attach_socket_in(a)) {
            if (a->ended)
                gjob_attach_say("job %lld ended", (long long)a->id);
            else
                gjob_attach_say("connection to job %lld's terminal lost", (long long)a->id);
            return a->ended ? 0 : CLI_EXIT_FAIL;
        }
        if (p[2].revents && gjob_attach_stdin(a)) {
            gjob_attach_say("detached from job %lld", (long long)a->id);
            return 0;
        }
    }
}

int gjob_attach(int argc, char **argv)
{
    enum { OPT_DETACH_KEYS = 300 };
    static const struct option longopts[] = {
        {"read-only", no_argument, NULL, 'r'},
        {"detach-keys", required_argument, NULL, OPT_DETACH_KEYS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct gjob_attach a = {.sock = -1, .stdin_open = true};
    const char *keys = getenv("GFLOW_DETACH_KEYS");
    if (!keys || !*keys)
        keys = GJOB_ATTACH_DEFAULT_KEYS;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":rh", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
            a.read_only = true;
            break;
        case OPT_DETACH_KEYS:
            keys = optarg;
            break;
        case 'h':
            gjob_help_attach();
            return 0;
        default:
            gjob_bad_option("attach", argv, c, longopts);
        }
    }
    char *why = NULL;
    if (attach_keys_parse(keys, &a.keys, &why) < 0)
        cli_die(CLI_EXIT_USAGE, "%s", why);
    if (optind >= argc)
        cli_die(CLI_EXIT_USAGE, "which job? e.g. 'gjob attach 42' or 'gjob attach @'");
    if (argc - optind > 1)
        cli_die(CLI_EXIT_USAGE, "'gjob attach' attaches to one job; got %d arguments",
                argc - optind);
    size_t n;
    int64_t *ids = cli_parse_ids(1, argv + optind, &n);
    if (n != 1)
        cli_die(CLI_EXIT_USAGE, "'gjob attach' attaches to one job; '%s' names %zu jobs",
                argv[optind], n);
    a.id = ids[0];
    free(ids);

    char *path = gjob_attach_socket_of(a.id);
    a.sock = gjob_attach_connect(a.id, path);
    free(path);
    uint8_t flags = a.read_only ? ATTACH_HELLO_READ_ONLY : 0;
    if (gjob_attach_send(a.sock, ATTACH_HELLO, &flags, 1) < 0)
        cli_die(CLI_EXIT_FAIL, "job %lld's terminal: %s", (long long)a.id, strerror(errno));
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGWINCH);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        cli_die(CLI_EXIT_FAIL, "signalfd: %s", strerror(errno));
    gjob_attach_make_raw();
    if (!a.read_only)
        gjob_attach_send_winsize(a.sock);
    a.in = xmalloc(ATTACH_HEADER + ATTACH_MAX_PAYLOAD);
    int status = gjob_attach_loop(&a, sfd);
    gjob_attach_restore();
    free(a.in);
    close(a.sock);
    close(sfd);
    return status;
}
