/* gpu_worker: the NVML thread (see gpu_worker.h). The loop and the thread share one
 * mutex-protected slot: a request flag going in, a result coming out. Only the thread
 * touches the struct nvml; only the loop touches what it took out of the slot. */
#include "gpu_worker.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "loop.h"
#include "nvml.h"
#include "util.h"

/* The GPU set a topology was read for: count, UUIDs and which GPUs could be read
 * (topology is not read for a lost or unavailable GPU), and the matrices read. */
struct worker_topo {
    size_t n;
    char (*uuid)[96];
    bool *usable;
    enum gpu_link *link; /* NULL: none read */
    int *nvlinks;        /* NULL: none read */
};

struct gpu_worker {
    pthread_t thread;
    int efd;
    char *library;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool requested; /* a request waits for the thread */
    bool working;   /* the thread is on it */
    bool done;      /* result holds the answer, not taken yet */
    bool quit;
    struct gpu_worker_result result;

    /* The thread's own. */
    struct nvml *nv;
    struct worker_topo topo;
};

void gpu_worker_result_free(struct gpu_worker_result *r)
{
    free(r->error);
    gpu_set_free(&r->set);
    memset(r, 0, sizeof(*r));
}

static void topo_clear(struct worker_topo *t)
{
    free(t->uuid);
    free(t->usable);
    free(t->link);
    free(t->nvlinks);
    memset(t, 0, sizeof(*t));
}

static bool topo_usable(const struct gpu_info *g)
{
    return !g->lost && !g->unavailable[0];
}

static bool topo_same_set(const struct worker_topo *t, const struct gpu_set *s)
{
    if (!t->uuid || t->n != s->n_gpus)
        return false;
    for (size_t i = 0; i < s->n_gpus; i++)
        if (strcmp(t->uuid[i], s->gpus[i].uuid) != 0 || t->usable[i] != topo_usable(&s->gpus[i]))
            return false;
    return true;
}

/* A copy of an n x n matrix, NULL for NULL. */
static void *topo_copy(const void *m, size_t n, size_t size)
{
    if (!m)
        return NULL;
    void *c = xcalloc(n > 0 ? n * n : 1, size);
    memcpy(c, m, n * n * size);
    return c;
}

static void topo_remember(struct worker_topo *t, const struct gpu_set *s)
{
    topo_clear(t);
    t->n = s->n_gpus;
    t->uuid = xcalloc(t->n ? t->n : 1, sizeof(*t->uuid));
    t->usable = xcalloc(t->n ? t->n : 1, sizeof(*t->usable));
    for (size_t i = 0; i < t->n; i++) {
        memcpy(t->uuid[i], s->gpus[i].uuid, sizeof(t->uuid[i]));
        t->usable[i] = topo_usable(&s->gpus[i]);
    }
    t->link = topo_copy(s->link, t->n, sizeof(*t->link));
    t->nvlinks = topo_copy(s->nvlinks, t->n, sizeof(*t->nvlinks));
}

/* One request, on the thread: open NVML if needed, then read. */
static void worker_serve(struct gpu_worker *w, struct gpu_worker_result *r)
{
    char *err = NULL;
    if (!w->nv) {
        w->nv = nvml_open_found(w->library, &r->found, &err);
        if (!w->nv) {
            r->error = err;
            return;
        }
        topo_clear(&w->topo);
    }
    r->open = r->found = true;
    r->simulated = nvml_is_simulated(w->nv);
    if (nvml_read_devices(w->nv, &r->set, &err) < 0) {
        /* Not even the count: the driver went away (unloaded, upgraded). Start over
         * from nvmlInit at the next request, as at boot. */
        r->error = err;
        gpu_set_free(&r->set);
        nvml_close(w->nv);
        w->nv = NULL;
        r->open = false;
        return;
    }
    r->read = true;
    if (topo_same_set(&w->topo, &r->set)) {
        size_t n = r->set.n_gpus;
        r->set.link = topo_copy(w->topo.link, n, sizeof(*r->set.link));
        r->set.nvlinks = topo_copy(w->topo.nvlinks, n, sizeof(*r->set.nvlinks));
    } else {
        nvml_read_links(w->nv, &r->set);
        topo_remember(&w->topo, &r->set);
        r->topology_read = true;
    }
}

static void *worker_main(void *arg)
{
    struct gpu_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->requested && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->quit)
            break;
        w->requested = false;
        w->working = true;
        pthread_mutex_unlock(&w->mu);

        struct gpu_worker_result r = {0};
        worker_serve(w, &r);

        pthread_mutex_lock(&w->mu);
        w->result = r;
        w->working = false;
        w->done = true;
        uint64_t one = 1;
        ssize_t n = write(w->efd, &one, sizeof(one));
        (void)n;
    }
    pthread_mutex_unlock(&w->mu);
    nvml_close(w->nv);
    w->nv = NULL;
    topo_clear(&w->topo);
    return NULL;
}

struct gpu_worker *gpu_worker_new(const char *library, char **err)
{
    struct gpu_worker *w = xcalloc(1, sizeof(*w));
    w->library = library ? xstrdup(library) : NULL;
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->efd < 0) {
        *err = xasprintf("cannot make an eventfd for the NVML thread: %s", strerror(errno));
        free(w->library);
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    int rc = loop_thread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        *err = xasprintf("cannot start the NVML thread: %s", strerror(rc));
        close(w->efd);
        free(w->library);
        free(w);
        return NULL;
    }
    return w;
}

void gpu_worker_free(struct gpu_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    bool stuck = w->working;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (stuck) {
        /* It may never come back; what it uses stays allocated. */
        pthread_detach(w->thread);
        return;
    }
    pthread_join(w->thread, NULL);
    gpu_worker_result_free(&w->result);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    close(w->efd);
    free(w->library);
    free(w);
}

bool gpu_worker_request(struct gpu_worker *w)
{
    pthread_mutex_lock(&w->mu);
    bool ok = !w->requested && !w->working && !w->done;
    if (ok) {
        w->requested = true;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return ok;
}

bool gpu_worker_busy(const struct gpu_worker *w)
{
    struct gpu_worker *m = (struct gpu_worker *)w; /* the mutex, not the state */
    pthread_mutex_lock(&m->mu);
    bool busy = m->requested || m->working || m->done;
    pthread_mutex_unlock(&m->mu);
    return busy;
}

int gpu_worker_fd(const struct gpu_worker *w)
{
    return w->efd;
}

bool gpu_worker_take(struct gpu_worker *w, struct gpu_worker_result *out)
{
    uint64_t v;
    ssize_t n = read(w->efd, &v, sizeof(v)); /* clears the wake-up */
    (void)n;
    pthread_mutex_lock(&w->mu);
    bool done = w->done;
    if (done) {
        *out = w->result;
        memset(&w->result, 0, sizeof(w->result));
        w->done = false;
    }
    pthread_mutex_unlock(&w->mu);
    return done;
}

bool gpu_worker_wait(struct gpu_worker *w, double secs)
{
    double until = now_mono() + secs;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        bool done = w->done || (!w->requested && !w->working);
        pthread_mutex_unlock(&w->mu);
        if (done)
            return true;
        double left = until - now_mono();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = w->efd, .events = POLLIN};
        poll(&p, 1, (int)(left * 1000) + 1);
    }
}
