/* pathcheck: see pathcheck.h. The look is a stat on a detached thread: a stat that
 * waits for ever (killable only, and a thread cannot be killed) costs that thread and
 * one of PATHCHECK_MAX_PENDING places, never the loop. The request and its answer are
 * shared under one mutex; whichever of the two sides finishes last frees it. */
#include "pathcheck.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "loop.h"
#include "util.h"

struct pathcheck_req {
    bool done;      /* the thread has answered */
    bool abandoned; /* the daemon stopped waiting: the thread frees it */
    enum pathcheck result;
    char path[];
};

static pthread_mutex_t pathcheck_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pathcheck_cv = PTHREAD_COND_INITIALIZER;
static int pathcheck_pending; /* threads that have not answered yet */

static void *pathcheck_main(void *arg)
{
    struct pathcheck_req *q = arg;
    struct stat st;
    enum pathcheck r;
    if (stat(q->path, &st) < 0)
        r = errno == ENOENT || errno == ENOTDIR ? PATHCHECK_MISSING : PATHCHECK_UNKNOWN;
    else
        r = S_ISDIR(st.st_mode) ? PATHCHECK_DIR : PATHCHECK_MISSING;
    pthread_mutex_lock(&pathcheck_mu);
    q->result = r;
    q->done = true;
    pathcheck_pending--;
    bool free_it = q->abandoned;
    pthread_cond_broadcast(&pathcheck_cv);
    pthread_mutex_unlock(&pathcheck_mu);
    if (free_it)
        free(q);
    return NULL;
}

enum pathcheck pathcheck_dir(const char *path)
{
    pthread_mutex_lock(&pathcheck_mu);
    if (pathcheck_pending >= PATHCHECK_MAX_PENDING) {
        pthread_mutex_unlock(&pathcheck_mu);
        return PATHCHECK_UNKNOWN;
    }
    size_t len = strlen(path);
    struct pathcheck_req *q = xcalloc(1, sizeof(*q) + len + 1);
    memcpy(q->path, path, len + 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = loop_thread_create(&t, &attr, pathcheck_main, q);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_unlock(&pathcheck_mu);
        free(q);
        return PATHCHECK_UNKNOWN;
    }
    pathcheck_pending++;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    long ns = deadline.tv_nsec + (long)(PATHCHECK_WAIT_SECS * 1e9);
    deadline.tv_sec += ns / 1000000000L;
    deadline.tv_nsec = ns % 1000000000L;
    while (!q->done &&
           pthread_cond_timedwait(&pathcheck_cv, &pathcheck_mu, &deadline) != ETIMEDOUT) {
    }
    bool answered = q->done;
    enum pathcheck r = answered ? q->result : PATHCHECK_UNKNOWN;
    if (answered)
        free(q);
    else
        q->abandoned = true;
    pthread_mutex_unlock(&pathcheck_mu);
    if (!answered)
        log_warn("%s did not answer within %.1f s (a hung mount?): left to the job's start", path,
                 PATHCHECK_WAIT_SECS);
    return r;
}
