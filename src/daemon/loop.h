/* loop: the daemon's single event loop: epoll over file descriptors, one-shot timers
 * on the monotonic clock, and a before-sleep hook that runs once per iteration (where
 * the scheduling pass and the group commit happen). There is one loop per process, so
 * it is the one module with process-wide state (like the log); everything else takes
 * its context explicitly. */
#ifndef GFLOWD_LOOP_H
#define GFLOWD_LOOP_H

#include <pthread.h>
#include <stdint.h>

typedef void (*loop_fd_cb)(int fd, uint32_t events, void *arg);
typedef void (*loop_timer_cb)(void *arg);
typedef void (*loop_hook_cb)(void *arg);

struct loop_timer;

int loop_init(void);
void loop_free(void);
/* Watches fd for events (EPOLLIN, ...). One watch per fd. 0 or -1. */
int loop_add_fd(int fd, uint32_t events, loop_fd_cb cb, void *arg);
/* Stops watching fd (safe from inside any callback). Does not close it. */
void loop_del_fd(int fd);
/* Calls cb once, delay seconds from now. The handle is valid until cb has run or the
 * timer was cancelled. */
struct loop_timer *loop_add_timer(double delay, loop_timer_cb cb, void *arg);
void loop_cancel_timer(struct loop_timer *t);
/* Runs cb(arg) before every sleep. */
void loop_set_before_sleep(loop_hook_cb cb, void *arg);
/* Lets a component cap the next sleep: cb(arg) gives ms, -1 = no cap (libmicrohttpd's
 * timeout). */
void loop_set_timeout_source(int (*cb)(void *arg), void *arg);
/* pthread_create with every signal blocked in the new thread: the daemon's signals are
 * the loop's, read from its signalfd on its own thread. pthread_create's result. */
int loop_thread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
/* Runs until loop_stop (returns 0) or loop_fail (returns -1). */
int loop_run(void);
void loop_stop(void);
/* A fatal error in a callback: logs the message and stops the loop, whose caller then
 * shuts down as after loop_stop and exits non-zero. A callback never exits itself. */
void loop_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
