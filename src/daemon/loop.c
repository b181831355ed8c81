/* loop: epoll, timers in a binary min-heap, before-sleep hook. One thread. */
#include "loop.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "util.h"

struct watch {
    int fd;
    loop_fd_cb cb;
    void *arg;
    bool dead;
    struct watch *next_dead;
};

struct loop_timer {
    double when;
    uint64_t seq; /* ties fire in creation order */
    loop_timer_cb cb;
    void *arg;
    bool cancelled;
};

static int epfd = -1;
static bool running;
static bool failed;            /* loop_fail stopped it */
static struct watch **watches; /* indexed by fd */
static int n_watches;
static struct watch *dead_watches; /* freed after the current batch of events */
static struct loop_timer **heap;
static size_t heap_len, heap_cap;
static uint64_t timer_seq;
static loop_hook_cb before_sleep;
static void *before_sleep_arg;
static int (*timeout_source)(void *arg);
static void *timeout_arg;

int loop_init(void)
{
    epfd = epoll_create1(EPOLL_CLOEXEC);
    return epfd < 0 ? -1 : 0;
}

static void free_dead_watches(void)
{
    while (dead_watches) {
        struct watch *w = dead_watches;
        dead_watches = w->next_dead;
        free(w);
    }
}

void loop_free(void)
{
    for (int i = 0; i < n_watches; i++)
        free(watches[i]);
    free(watches);
    watches = NULL;
    n_watches = 0;
    free_dead_watches();
    for (size_t i = 0; i < heap_len; i++)
        free(heap[i]);
    free(heap);
    heap = NULL;
    heap_len = heap_cap = 0;
    if (epfd >= 0)
        close(epfd);
    epfd = -1;
}

int loop_add_fd(int fd, uint32_t events, loop_fd_cb cb, void *arg)
{
    if (fd >= n_watches) {
        int n = n_watches ? n_watches : 64;
        while (n <= fd)
            n *= 2;
        watches = xrealloc(watches, (size_t)n * sizeof(*watches));
        for (int i = n_watches; i < n; i++)
            watches[i] = NULL;
        n_watches = n;
    }
    struct watch *w = xcalloc(1, sizeof(*w));
    w->fd = fd;
    w->cb = cb;
    w->arg = arg;
    struct epoll_event ev = {.events = events, .data.ptr = w};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        free(w);
        return -1;
    }
    watches[fd] = w;
    return 0;
}

void loop_del_fd(int fd)
{
    if (fd < 0 || fd >= n_watches || !watches[fd])
        return;
    struct watch *w = watches[fd];
    watches[fd] = NULL;
    epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    w->dead = true;
    w->next_dead = dead_watches;
    dead_watches = w;
}

static bool timer_before(const struct loop_timer *a, const struct loop_timer *b)
{
    return a->when < b->when || (a->when == b->when && a->seq < b->seq);
}

static void heap_swap(size_t a, size_t b)
{
    struct loop_timer *t = heap[a];
    heap[a] = heap[b];
    heap[b] = t;
}

static void heap_up(size_t i)
{
    while (i > 0 && timer_before(heap[i], heap[(i - 1) / 2])) {
        heap_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < heap_len && timer_before(heap[l], heap[m]))
            m = l;
        if (r < heap_len && timer_before(heap[r], heap[m]))
            m = r;
        if (m == i)
            return;
        heap_swap(i, m);
        i = m;
    }
}

static struct loop_timer *heap_pop(void)
{
    struct loop_timer *t = heap[0];
    heap[0] = heap[--heap_len];
    if (heap_len)
        heap_down(0);
    return t;
}

struct loop_timer *loop_add_timer(double delay, loop_timer_cb cb, void *arg)
{
    struct loop_timer *t = xcalloc(1, sizeof(*t));
    t->when = now_mono() + (delay > 0 ? delay : 0);
    t->seq = timer_seq++;
    t->cb = cb;
    t->arg = arg;
    if (heap_len == heap_cap) {
        heap_cap = heap_cap ? heap_cap * 2 : 64;
        heap = xrealloc(heap, heap_cap * sizeof(*heap));
    }
    heap[heap_len++] = t;
    heap_up(heap_len - 1);
    return t;
}

void loop_cancel_timer(struct loop_timer *t)
{
    if (t)
        t->cancelled = true; /* freed when it reaches the top of the heap */
}

void loop_set_before_sleep(loop_hook_cb cb, void *arg)
{
    before_sleep = cb;
    before_sleep_arg = arg;
}

void loop_set_timeout_source(int (*cb)(void *arg), void *arg)
{
    timeout_source = cb;
    timeout_arg = arg;
}

static void run_due_timers(void)
{
    double now = now_mono();
    while (heap_len && (heap[0]->cancelled || heap[0]->when <= now)) {
        struct loop_timer *t = heap_pop();
        if (!t->cancelled)
            t->cb(t->arg);
        free(t);
    }
}

/* Milliseconds until the next live timer, -1 when none. */
static int next_timer_ms(void)
{
    while (heap_len && heap[0]->cancelled)
        free(heap_pop());
    if (!heap_len)
        return -1;
    double ms = ceil((heap[0]->when - now_mono()) * 1000.0);
    if (ms < 0)
        return 0;
    return ms > 86400000.0 ? 86400000 : (int)ms;
}

static int min_timeout(int a, int b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

int loop_run(void)
{
    struct epoll_event events[64];
    running = true;
    failed = false;
    while (running) {
        run_due_timers();
        if (before_sleep)
            before_sleep(before_sleep_arg);
        if (!running)
            break;
        int timeout = next_timer_ms();
        if (timeout_source)
            timeout = min_timeout(timeout, timeout_source(timeout_arg));
        int n = epoll_wait(epfd, events, 64, timeout);
        if (n < 0) {
            if (errno != EINTR)
                log_error("epoll_wait: %m");
            continue;
        }
        for (int i = 0; i < n; i++) {
            struct watch *w = events[i].data.ptr;
            if (!w->dead)
                w->cb(w->fd, events[i].events, w->arg);
        }
        free_dead_watches();
    }
    return failed ? -1 : 0;
}

void loop_stop(void)
{
    running = false;
}

void loop_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    log_error("%s", msg);
    free(msg);
    failed = true;
    running = false;
}

int loop_thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
