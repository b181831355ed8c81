/* gqueue_watch: -w, the listing redrawn in place: the terminal's size, raw mode and
 * alternate screen (restored on exit and on signals), and the wait for a key, a job
 * event (GET /v1/events: the listing is redrawn as soon as a job changes) or the
 * interval (times shown move on; and an older gflowd has no events). */

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "client_events.h"
#include "clock.h"
#include "gqueue_internal.h"
#include "output.h"
#include "timefmt.h"
#include "util.h"

static struct termios gqueue_saved_tty;
static bool gqueue_tty_changed, gqueue_screen_on;
static volatile sig_atomic_t gqueue_stop, gqueue_resized;

static void gqueue_signal_cb(int sig)
{
    if (sig == SIGWINCH)
        gqueue_resized = 1;
    else
        gqueue_stop = 1;
}

/* Puts the terminal back as it was (at exit too, even after an error). */
static void gqueue_restore_terminal(void)
{
    if (gqueue_screen_on) {
        fputs("\033[?25h\033[?1049l", stdout); /* cursor back, main screen back */
        fflush(stdout);
        gqueue_screen_on = false;
    }
    if (gqueue_tty_changed) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &gqueue_saved_tty);
        gqueue_tty_changed = false;
    }
}

/* The terminal's width: COLUMNS when set, else what the terminal says, else 80. */
size_t gqueue_term_width(size_t *rows)
{
    struct winsize ws = {0};
    bool known = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0;
    if (rows)
        *rows = known && ws.ws_row ? ws.ws_row : 24;
    const char *env = getenv("COLUMNS");
    int64_t cols;
    if (env && parse_int64(env, &cols) == 0 && cols > 0 && cols < 100000)
        return (size_t)cols;
    return known && ws.ws_col ? ws.ws_col : 80;
}

/* The job events that redraw the listing; NULL: none (opened again at each redraw). */
static struct client_events *gqueue_events;

static void gqueue_events_open(void)
{
    if (gqueue_events)
        return;
    int status;
    char *err = NULL;
    gqueue_events = client_events_open(
        "/v1/events?user=all&types=job_submitted,job_started,job_ended,job_updated", &status, &err);
    free(err); /* an older gflowd (404), or none: the interval alone redraws */
}

/* Reads the events that are there; true when a job changed (or the stream asks for the
 * state to be read again). A stream that ends is closed. */
static bool gqueue_events_drain(void)
{
    bool changed = false;
    struct client_event ev;
    char *err = NULL;
    int rc;
    while ((rc = client_events_next(gqueue_events, 0, &ev, &err)) == 1) {
        changed |= strcmp(ev.type, "hello") != 0;
        client_event_clear(&ev);
    }
    if (rc < 0) {
        free(err);
        client_events_close(gqueue_events);
        gqueue_events = NULL;
        changed = true;
    }
    return changed;
}

/* Waits up to secs for a key on a terminal's standard input or a job event; true when
 * the key was q (or the program was asked to stop). */
static bool gqueue_wait_key(double secs, bool keys)
{
    struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = -1, .events = POLLIN}};
    double until = now_mono() + secs;
    while (!gqueue_stop && !gqueue_resized) {
        if (gqueue_events && client_events_buffered(gqueue_events) && gqueue_events_drain())
            return false;
        p[0].fd = keys ? STDIN_FILENO : -1;
        p[1].fd = gqueue_events ? client_events_fd(gqueue_events) : -1;
        double left = until - now_mono();
        if (left <= 0)
            return false;
        int rc = poll(p, 2, (int)(left * 1000) + 1);
        if (rc < 0 && errno != EINTR)
            return false;
        if (rc > 0 && p[1].revents) {
            if (gqueue_events_drain())
                return false;
            continue;
        }
        if (rc > 0 && p[0].revents) {
            char c;
            ssize_t got = read(STDIN_FILENO, &c, 1);
            if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
                keys = false; /* standard input closed: only time and signals end a wait */
            else if (got == 1 && (c == 'q' || c == 'Q' || c == 3 /* Ctrl-C in raw mode */))
                return true;
        }
    }
    return gqueue_stop;
}

/* One screen: the title, then the listing, each line cleared to its end, cut to the
 * terminal's height, the rest of the screen cleared. */
static void gqueue_draw(const struct gqueue_opts *o, const char *title, double interval)
{
    char *frame = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&frame, &len);
    if (!mem)
        cli_die(CLI_EXIT_FAIL, "out of memory");
    char when[64];
    format_time_buf(when, sizeof(when), now_wall());
    fprintf(mem, "Every %gs: %s    %s    (q to quit)\n\n", interval, title, when);
    gqueue_list(o, mem, mem);
    fclose(mem);
    size_t rows;
    gqueue_term_width(&rows);
    struct strbuf screen;
    strbuf_init(&screen);
    strbuf_adds(&screen, "\033[H");
    size_t line = 0;
    for (char *p = frame; *p && line + 1 < rows; line++) {
        char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        strbuf_add(&screen, p, n);
        strbuf_adds(&screen, "\033[K\r\n");
        p += n + (nl ? 1 : 0);
    }
    strbuf_adds(&screen, "\033[J");
    fwrite(screen.buf, 1, screen.len, stdout);
    fflush(stdout);
    strbuf_free(&screen);
    free(frame);
}

/* -w: the listing again every interval seconds until q, Ctrl-C or a signal. */
int gqueue_watch(struct gqueue_opts *o, const char *title, double interval)
{
    struct sigaction sa = {.sa_handler = gqueue_signal_cb};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (!isatty(STDOUT_FILENO)) { /* a log or a pipe: one table after another */
        for (bool first = true; !gqueue_stop; first = false) {
            if (!first)
                putchar('\n');
            gqueue_events_open(); /* first: no change is missed between list and stream */
            gqueue_list(o, stdout, stderr);
            if (fflush(stdout) != 0)
                return cli_finish(0);
            gqueue_wait_key(interval, false);
        }
        return cli_finish(0);
    }
    sigaction(SIGWINCH, &sa, NULL);
    bool keys = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &gqueue_saved_tty) == 0;
    atexit(gqueue_restore_terminal);
    if (keys) { /* keys one at a time, not echoed */
        struct termios raw = gqueue_saved_tty;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG); /* Ctrl-C: read as a key */
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        gqueue_tty_changed = tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0;
    }
    fputs("\033[?1049h\033[?25l\033[2J", stdout); /* the alternate screen, no cursor */
    gqueue_screen_on = true;
    while (!gqueue_stop) {
        gqueue_resized = 0;
        o->width = gqueue_term_width(NULL);
        gqueue_events_open();
        gqueue_draw(o, title, interval);
        if (gqueue_wait_key(interval, keys))
            break;
    }
    gqueue_restore_terminal();
    return cli_finish(0);
}
