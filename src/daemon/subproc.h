/* subproc: a child process that the event loop watches, for the Slurm commands
 * (backend/slurm/slurm_cmd.c) and the notification deliveries (ops/notify.c): started
 * with posix_spawnp, what it writes collected as it comes, killed (SIGKILL through its
 * pidfd) once its time is up, and a callback when it has exited. Nothing here waits,
 * but for a child that cannot be watched (out of file descriptors) and subproc_wait. */
#ifndef GFLOWD_SUBPROC_H
#define GFLOWD_SUBPROC_H

#include <stdbool.h>

#include "util.h"

struct subproc;

struct subproc_spec {
    char *const *argv;   /* argv[0] is looked up in PATH unless it holds a '/' */
    char *const *envp;   /* NULL: gflowd's environment */
    int stdin_fd;        /* the child's standard input (the caller's to close); -1: /dev/null */
    bool capture_stdout; /* its stdout collected with its stderr; else /dev/null */
    double timeout;      /* seconds before it is killed */
};

/* The child has exited: reaped is false when its status could not be had (status is 0
 * then), else status is waitpid's. out holds what it wrote (the callee may take it). */
typedef void (*subproc_done_cb)(void *arg, bool reaped, int status, struct strbuf *out);

/* Starts spec's child; done is called once it has exited, then the subproc is freed.
 * NULL with errno when it could not be started or watched (done is not called). */
struct subproc *subproc_start(const struct subproc_spec *spec, subproc_done_cb done, void *arg);
/* Waits at most secs for the child to exit (at start, before the loop runs): true when
 * it has, and done was called (p is then freed); false leaves it to the loop. */
bool subproc_wait(struct subproc *p, double secs);
/* Stops watching p and frees it, leaving the child be (gflowd is stopping). */
void subproc_forget(struct subproc *p);

#endif
