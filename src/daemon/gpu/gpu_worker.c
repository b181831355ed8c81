/* gpu_worker: the NVML thread (see gpu_worker.h). The loop and the thread share one
 * mutex-protected slot: a request flag going in, a result coming out. Only the thread
 * (and, for their GPU's read, the readers it asks) touches the struct nvml; only the
 * loop touches what it took out of the slot. */
#include "gpu_worker.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "gpu_readers.h"
#include "loop.h"
#include "nvml.h"
#include "util.h"

#define DRIVER_MISMATCH "DriverChanged: library/driver version mismatch (NVML 18)"

/* A GPU as last read, given for it while its reader hangs. */
struct worker_last {
    bool have;
    struct gpu_info info;
    struct gpu_mig *migs;
    size_t n_migs;
};

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
    uint64_t account; /* the request's GPUs to read for a job's accounting */
    struct gpu_worker_result result;
    double system_since; /* gpu_worker_system_since */
    bool poked;          /* a reader given up on came back */

    /* The thread's own. */
    struct nvml *nv;
    bool drop_pending; /* nv is to be closed once no reader is in a call */
    char version[64];  /* the driver version read after NVML opened; "" before */
    double timeout;
    struct gpu_readers *readers;
    struct worker_last last[GPUINFO_MAX_GPUS];
    struct worker_topo topo;
};

void gpu_worker_result_free(struct gpu_worker_result *r)
{
    free(r->error);
    free(r->driver_changed);
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

/* hung: the GPUs whose reader hangs (their topology is not read, so not known). */
static bool topo_same_set(const struct worker_topo *t, const struct gpu_set *s, uint64_t hung)
{
    if (!t->uuid || t->n != s->n_gpus)
        return false;
    for (size_t i = 0; i < s->n_gpus; i++)
        if (strcmp(t->uuid[i], s->gpus[i].uuid) != 0 ||
            t->usable[i] != (topo_usable(&s->gpus[i]) && !(hung & (1ULL << i))))
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

static void topo_remember(struct worker_topo *t, const struct gpu_set *s, uint64_t hung)
{
    topo_clear(t);
    t->n = s->n_gpus;
    t->uuid = xcalloc(t->n ? t->n : 1, sizeof(*t->uuid));
    t->usable = xcalloc(t->n ? t->n : 1, sizeof(*t->usable));
    for (size_t i = 0; i < t->n; i++) {
        memcpy(t->uuid[i], s->gpus[i].uuid, sizeof(t->uuid[i]));
        t->usable[i] = topo_usable(&s->gpus[i]) && !(hung & (1ULL << i));
    }
    t->link = topo_copy(s->link, t->n, sizeof(*t->link));
    t->nvlinks = topo_copy(s->nvlinks, t->n, sizeof(*t->nvlinks));
}

/* ---- a GPU as last read ---- */

static struct gpu_proc *procs_dup(const struct gpu_proc *p, size_t n)
{
    if (!n)
        return NULL;
    struct gpu_proc *c = xcalloc(n, sizeof(*c));
    memcpy(c, p, n * sizeof(*c));
    return c;
}

static void last_clear(struct worker_last *l)
{
    free(l->info.procs);
    for (size_t k = 0; k < l->n_migs; k++)
        free(l->migs[k].procs);
    free(l->migs);
    memset(l, 0, sizeof(*l));
}

/* A deep copy of g and its instances into *out_g, *out_migs. */
static void gpu_copy(const struct gpu_info *g, const struct gpu_mig *migs, size_t n,
                     struct gpu_info *out_g, struct gpu_mig **out_migs)
{
    *out_g = *g;
    out_g->procs = procs_dup(g->procs, g->n_procs);
    *out_migs = n ? xcalloc(n, sizeof(**out_migs)) : NULL;
    for (size_t k = 0; k < n; k++) {
        (*out_migs)[k] = migs[k];
        (*out_migs)[k].procs = procs_dup(migs[k].procs, migs[k].n_procs);
    }
}

/* Appends migs[0..k) to s->migs (up to GPUINFO_MAX_MIGS) and frees the array. */
static void add_migs(struct gpu_set *s, struct gpu_mig *migs, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        if (s->n_migs >= GPUINFO_MAX_MIGS) {
            free(migs[i].procs);
            continue;
        }
        s->migs = xrealloc(s->migs, (s->n_migs + 1) * sizeof(*s->migs));
        s->migs[s->n_migs++] = migs[i];
    }
    free(migs);
}

/* ---- a request ---- */

static void set_system_since(struct gpu_worker *w, double t)
{
    pthread_mutex_lock(&w->mu);
    w->system_since = t;
    pthread_mutex_unlock(&w->mu);
}

/* NVML is to be closed and opened again at the next request: now when no reader is in
 * a call, else once none is (a call returning into an unloaded library would crash). */
static void worker_drop(struct gpu_worker *w)
{
    if (!w->nv)
        return;
    if (!gpu_readers_idle(w->readers)) {
        w->drop_pending = true;
        return;
    }
    nvml_close(w->nv);
    w->nv = NULL;
    w->drop_pending = false;
    w->version[0] = '\0';
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++)
        last_clear(&w->last[i]);
}

/* The request found the driver changed: no reading, NVML closed. */
static void driver_changed(struct gpu_worker *w, struct gpu_worker_result *r, char *why)
{
    free(r->driver_changed);
    r->driver_changed = why;
    free(r->error);
    r->error = xasprintf("no GPUs: %s", why);
    gpu_set_free(&r->set);
    r->open = r->read = false;
    worker_drop(w);
}

/* Opens NVML if it is not; false (r says why) if it will not. */
static bool worker_open(struct gpu_worker *w, struct gpu_worker_result *r)
{
    if (w->drop_pending)
        worker_drop(w);
    if (w->nv && w->drop_pending) {
        r->found = true;
        r->error = xstrdup("no GPUs: NVML is reopened once a GPU's call that hangs returns");
        return false;
    }
    if (w->nv)
        return true;
    char *err = NULL;
    bool mismatch;
    w->nv = nvml_open_found(w->library, &r->found, &mismatch, &err);
    if (!w->nv) {
        r->error = err;
        if (mismatch)
            r->driver_changed = xstrdup(DRIVER_MISMATCH);
        return false;
    }
    topo_clear(&w->topo);
    w->version[0] = '\0';
    return true;
}

/* The per-GPU part: each reader reads its GPU, waited for up to the timeout; a GPU whose
 * reader does not answer is given as last read, with r->hang. Returns the hung GPUs. */
static uint64_t worker_read_gpus(struct gpu_worker *w, struct gpu_worker_result *r, bool *mismatch)
{
    struct gpu_set *s = &r->set;
    uint64_t stuck = 0, hung = 0;
    char *err = NULL;
    pthread_mutex_lock(&w->mu);
    uint64_t account = w->account;
    pthread_mutex_unlock(&w->mu);
    if (!gpu_readers_start(w->readers, w->nv, s->n_gpus, account, &stuck, &err)) {
        r->error = err;
        return ~0ULL;
    }
    set_system_since(w, 0); /* waiting for the GPUs, as long as the timeout at most */
    gpu_readers_wait(w->readers, now_mono() + w->timeout);
    set_system_since(w, now_mono());
    for (size_t i = 0; i < s->n_gpus; i++) {
        struct gpu_info *g = &s->gpus[i];
        struct gpu_mig *migs = NULL;
        size_t k = 0;
        struct worker_last *l = &w->last[i];
        if (gpu_readers_take(w->readers, i, g, &migs, &k, &r->hang[i])) {
            *mismatch |= g->version_mismatch;
            last_clear(l);
            gpu_copy(g, migs, k, &l->info, &l->migs);
            l->n_migs = k;
            l->have = true;
        } else {
            hung |= 1ULL << i;
            if (l->have) {
                gpu_copy(&l->info, l->migs, l->n_migs, g, &migs);
                k = l->n_migs;
                g->accounted = g->energy_known = false; /* old: nothing to account */
            } else { /* never read: nothing known, nothing to give */
                g->index = (int)i;
                g->memory_used_mib = g->memory_free_mib = -1;
                g->utilization_gpu = g->temperature_c = g->power_w = g->numa_node = g->minor = -1;
                snprintf(g->unavailable, sizeof(g->unavailable), "NVML: no answer (%s)",
                         r->hang[i].fn);
            }
        }
        add_migs(s, migs, k);
    }
    return hung;
}

/* One request, on the thread: open NVML if needed, then read. */
static void worker_serve(struct gpu_worker *w, struct gpu_worker_result *r)
{
    if (!worker_open(w, r))
        return;
    r->open = r->found = true;
    r->simulated = nvml_is_simulated(w->nv);
    char *err = NULL;
    int rc = nvml_read_system(w->nv, &r->set, &err);
    if (rc < 0) {
        /* Not even the count: the driver went away (unloaded, upgraded). Start over
         * from nvmlInit at the next request, as at boot. */
        r->error = err;
        gpu_set_free(&r->set);
        r->open = false;
        if (rc == NVML_READ_MISMATCH)
            r->driver_changed = xstrdup(DRIVER_MISMATCH);
        worker_drop(w);
        return;
    }
    const char *v = r->set.driver_version;
    if (w->version[0] && v[0] && strcmp(w->version, v) != 0) {
        driver_changed(w, r, xasprintf("DriverChanged: %s -> %s", w->version, v));
        return;
    }
    if (!w->version[0])
        snprintf(w->version, sizeof(w->version), "%s", v);

    bool mismatch = false;
    uint64_t hung = worker_read_gpus(w, r, &mismatch);
    if (r->error) { /* a reader thread would not start */
        gpu_set_free(&r->set);
        return;
    }
    if (mismatch) {
        driver_changed(w, r, xstrdup(DRIVER_MISMATCH));
        return;
    }
    r->read = true;
    if (topo_same_set(&w->topo, &r->set, hung)) {
        size_t n = r->set.n_gpus;
        r->set.link = topo_copy(w->topo.link, n, sizeof(*r->set.link));
        r->set.nvlinks = topo_copy(w->topo.nvlinks, n, sizeof(*r->set.nvlinks));
    } else {
        nvml_read_links(w->nv, &r->set, hung); /* a hung GPU is asked nothing */
        topo_remember(&w->topo, &r->set, hung);
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
        w->system_since = now_mono();
        pthread_mutex_unlock(&w->mu);

        struct gpu_worker_result r = {0};
        worker_serve(w, &r);

        pthread_mutex_lock(&w->mu);
        w->result = r;
        w->working = false;
        w->system_since = 0;
        w->done = true;
        uint64_t one = 1;
        ssize_t n = write(w->efd, &one, sizeof(one));
        (void)n;
    }
    pthread_mutex_unlock(&w->mu);
    if (gpu_readers_idle(w->readers)) /* else a reader may still return into it */
        nvml_close(w->nv);
    w->nv = NULL;
    topo_clear(&w->topo);
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++)
        last_clear(&w->last[i]);
    return NULL;
}

/* A reader given up on came back (on its thread): the loop hears of it. */
static void reader_late(void *arg)
{
    struct gpu_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    w->poked = true;
    uint64_t one = 1;
    ssize_t n = write(w->efd, &one, sizeof(one));
    (void)n;
    pthread_mutex_unlock(&w->mu);
}

struct gpu_worker *gpu_worker_new(const char *library, double timeout, char **err)
{
    struct gpu_worker *w = xcalloc(1, sizeof(*w));
    w->library = library ? xstrdup(library) : NULL;
    w->timeout = timeout > 0 ? timeout : 10;
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->efd < 0) {
        *err = xasprintf("cannot make an eventfd for the NVML thread: %s", strerror(errno));
        free(w->library);
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->readers = gpu_readers_new(reader_late, w);
    int rc = loop_thread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        *err = xasprintf("cannot start the NVML thread: %s", strerror(rc));
        gpu_readers_free(w->readers);
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
    gpu_readers_free(w->readers); /* left behind too if one is stuck */
    gpu_worker_result_free(&w->result);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    close(w->efd);
    free(w->library);
    free(w);
}

bool gpu_worker_request(struct gpu_worker *w, uint64_t account)
{
    pthread_mutex_lock(&w->mu);
    bool ok = !w->requested && !w->working && !w->done;
    if (ok) {
        w->requested = true;
        w->account = account;
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

double gpu_worker_system_since(const struct gpu_worker *w)
{
    struct gpu_worker *m = (struct gpu_worker *)w; /* the mutex, not the state */
    pthread_mutex_lock(&m->mu);
    double t = m->system_since;
    pthread_mutex_unlock(&m->mu);
    return t;
}

bool gpu_worker_poked(struct gpu_worker *w)
{
    pthread_mutex_lock(&w->mu);
    bool p = w->poked;
    w->poked = false;
    pthread_mutex_unlock(&w->mu);
    return p;
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
