/* gpu_readers: one NVML reader thread per GPU (see gpu_readers.h). The worker and the
 * readers share one mutex: a reader is asked (asked), reads (busy), and leaves its
 * answer (answered) for the worker to take. A reader the worker gave up on (waited
 * false) that comes back calls `late`. */
#include "gpu_readers.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "loop.h"
#include "nvml.h"
#include "nvml_acct.h"
#include "util.h"

struct reader {
    struct gpu_readers *rs;
    size_t index;
    pthread_t thread;
    bool started;
    pthread_cond_t cv; /* asked, or quit */

    /* Under rs->mu. */
    bool asked;    /* a read waits for the thread */
    bool busy;     /* the thread is in nvml_read_device */
    bool answered; /* the answer below is fresh and not taken */
    bool waited;   /* the worker waits for this answer (false: given up on) */
    struct nvml *nv;
    bool account; /* also read what a job's accounting needs (nvml_acct.h) */
    double since; /* when the read was asked for */
    struct gpu_info info;
    struct gpu_mig *migs;
    size_t n_migs;

    /* The thread's notes (nvml_note_call), read atomically by the worker. */
    const char *calling;
    /* The thread's own: the newest process utilisation sample read. */
    unsigned long long util_seen;
};

struct gpu_readers {
    pthread_mutex_t mu;
    pthread_cond_t done_cv; /* a reader answered; CLOCK_MONOTONIC */
    bool quit;
    void (*late)(void *);
    void *arg;
    struct reader r[GPUINFO_MAX_GPUS];
};

static void answer_clear(struct reader *r)
{
    free(r->info.procs);
    for (size_t k = 0; k < r->n_migs; k++)
        free(r->migs[k].procs);
    free(r->migs);
    memset(&r->info, 0, sizeof(r->info));
    r->migs = NULL;
    r->n_migs = 0;
    r->answered = false;
}

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    struct gpu_readers *rs = r->rs;
    nvml_note_calls_to(&r->calling);
    pthread_mutex_lock(&rs->mu);
    for (;;) {
        while (!r->asked && !rs->quit)
            pthread_cond_wait(&r->cv, &rs->mu);
        if (rs->quit)
            break;
        r->asked = false;
        r->busy = true;
        struct nvml *nv = r->nv;
        bool account = r->account;
        pthread_mutex_unlock(&rs->mu);

        struct gpu_info info;
        memset(&info, 0, sizeof(info));
        struct gpu_mig *migs;
        size_t n_migs;
        nvml_read_device(nv, (unsigned int)r->index, &info, &migs, &n_migs);
        if (account && !info.lost && !info.version_mismatch)
            nvml_read_account(nv, (unsigned int)r->index, &info, &r->util_seen);

        pthread_mutex_lock(&rs->mu);
        answer_clear(r);
        r->info = info;
        r->migs = migs;
        r->n_migs = n_migs;
        r->answered = true;
        r->busy = false;
        pthread_cond_broadcast(&rs->done_cv);
        if (!r->waited && rs->late && !rs->quit) {
            pthread_mutex_unlock(&rs->mu);
            rs->late(rs->arg);
            pthread_mutex_lock(&rs->mu);
        }
    }
    pthread_mutex_unlock(&rs->mu);
    return NULL;
}

struct gpu_readers *gpu_readers_new(void (*late)(void *), void *arg)
{
    struct gpu_readers *rs = xcalloc(1, sizeof(*rs));
    rs->late = late;
    rs->arg = arg;
    pthread_mutex_init(&rs->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&rs->done_cv, &a);
    pthread_condattr_destroy(&a);
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++) {
        rs->r[i].rs = rs;
        rs->r[i].index = i;
        pthread_cond_init(&rs->r[i].cv, NULL);
    }
    return rs;
}

void gpu_readers_free(struct gpu_readers *rs)
{
    if (!rs)
        return;
    pthread_mutex_lock(&rs->mu);
    rs->quit = true;
    bool stuck = false;
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++) {
        stuck |= rs->r[i].busy;
        pthread_cond_signal(&rs->r[i].cv);
    }
    pthread_mutex_unlock(&rs->mu);
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++) {
        if (!rs->r[i].started)
            continue;
        if (stuck) /* one may never come back: what they use stays allocated */
            pthread_detach(rs->r[i].thread);
        else
            pthread_join(rs->r[i].thread, NULL);
    }
    if (stuck)
        return;
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++) {
        answer_clear(&rs->r[i]);
        pthread_cond_destroy(&rs->r[i].cv);
    }
    pthread_cond_destroy(&rs->done_cv);
    pthread_mutex_destroy(&rs->mu);
    free(rs);
}

bool gpu_readers_start(struct gpu_readers *rs, struct nvml *nv, size_t count, uint64_t account,
                       uint64_t *stuck, char **err)
{
    *stuck = 0;
    if (count > GPUINFO_MAX_GPUS)
        count = GPUINFO_MAX_GPUS;
    double now = now_mono();
    pthread_mutex_lock(&rs->mu);
    for (size_t i = 0; i < count; i++) {
        struct reader *r = &rs->r[i];
        if (r->busy || r->asked) { /* still in an earlier read: not asked twice */
            *stuck |= 1ULL << i;
            continue;
        }
        answer_clear(r); /* a late answer: read again */
        if (!r->started) {
            int rc = loop_thread_create(&r->thread, NULL, reader_main, r);
            if (rc != 0) {
                pthread_mutex_unlock(&rs->mu);
                *err = xasprintf("cannot start the NVML thread of GPU %zu: %s", i, strerror(rc));
                return false;
            }
            r->started = true;
        }
        r->nv = nv;
        r->account = account & (1ULL << i);
        r->since = now;
        __atomic_store_n(&r->calling, NULL, __ATOMIC_RELAXED);
        r->asked = r->waited = true;
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&rs->mu);
    return true;
}

/* Whether a reader the worker waits for has not answered yet. Under rs->mu. */
static bool awaited(const struct gpu_readers *rs)
{
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++)
        if (rs->r[i].waited && (rs->r[i].asked || rs->r[i].busy))
            return true;
    return false;
}

void gpu_readers_wait(struct gpu_readers *rs, double deadline)
{
    struct timespec ts;
    ts.tv_sec = (time_t)deadline;
    ts.tv_nsec = (long)((deadline - (double)ts.tv_sec) * 1e9);
    pthread_mutex_lock(&rs->mu);
    while (awaited(rs) && now_mono() < deadline)
        pthread_cond_timedwait(&rs->done_cv, &rs->mu, &ts);
    pthread_mutex_unlock(&rs->mu);
}

bool gpu_readers_take(struct gpu_readers *rs, size_t i, struct gpu_info *g, struct gpu_mig **migs,
                      size_t *n_migs, struct gpu_reader_hang *hang)
{
    struct reader *r = &rs->r[i];
    pthread_mutex_lock(&rs->mu);
    bool answered = r->answered;
    if (answered) {
        *g = r->info;
        *migs = r->migs;
        *n_migs = r->n_migs;
        memset(&r->info, 0, sizeof(r->info));
        r->migs = NULL;
        r->n_migs = 0;
        r->answered = false;
        hang->since = 0;
        hang->fn = NULL;
    } else {
        r->waited = false; /* given up on: `late` tells of its return */
        hang->since = r->since;
        const char *fn = __atomic_load_n(&r->calling, __ATOMIC_RELAXED);
        hang->fn = fn ? fn : "an NVML call";
    }
    pthread_mutex_unlock(&rs->mu);
    return answered;
}

bool gpu_readers_idle(struct gpu_readers *rs)
{
    pthread_mutex_lock(&rs->mu);
    bool idle = true;
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++)
        idle &= !rs->r[i].busy && !rs->r[i].asked;
    pthread_mutex_unlock(&rs->mu);
    return idle;
}
