/* gpu: NVML's state and life (open retried with back-off, reads on the worker thread
 * with a timeout, the simulator), the GPUs as last read (see gpu.h). Which GPUs may be
 * used is gpu_allowed.c; their processes and the ignore list are gpu_procs.c; ids for
 * jobs (gpu_id_format) gpu_ids.c; gpu_internal.h is what they share. */
#include "gpu_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "files.h"
#include "gflow_build.h"
#include "gpu_worker.h"
#include "log.h"
#include "loop.h"
#include "paths.h"
#include "util.h"

/* The longest start-up waits for NVML's first answer (`gflowd up` waits 30 s). */
#define START_WAIT_MAX 10.0

enum { TEXT_ERROR, TEXT_STATE, TEXT_REASON };

/* A buffer for a text computed when asked for (it says how long ago, how soon). */
static char *text_buf(const struct gpus *g, int which)
{
    return ((struct gpus *)g)->text[which]; /* scratch space, not the state */
}

/* ---- simulator ---- */

/* The built-in fixture: n identical GPUs, no NVLink. */
static int write_sim_fixture(int n, const char *path, char **err)
{
    json_t *gpus = json_array();
    for (int i = 0; i < n; i++) {
        char uuid[64], bus[32];
        snprintf(uuid, sizeof(uuid), "GPU-5e1f0000-0000-4000-8000-%012x", i);
        snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0x10 + i);
        json_array_append_new(gpus,
                              json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:[], s:[]}",
                                        "name", "NVIDIA A100-SXM4-80GB (simulated)", "uuid", uuid,
                                        "pci_bus_id", bus, "memory_total_mib", 81920,
                                        "memory_used_mib", 0, "utilization_gpu", 0, "temperature_c",
                                        30, "power_w", 60, "numa_node", 0, "nvlink", "processes"));
    }
    json_t *fx = json_pack("{s:s, s:o}", "driver_version", "550.54.15", "gpus", gpus);
    char *text = json_dumps(fx, JSON_INDENT(2));
    json_decref(fx);
    int r = write_file_atomic(path, text, strlen(text), 0644);
    free(text);
    if (r < 0)
        *err = xasprintf("cannot write %s: %s", path, strerror(errno));
    return r;
}

/* --simulate-gpus N | FILE: points the simulator at its fixture; returns the library. */
static char *setup_simulation(const char *simulate, const char *data_dir, char **err)
{
    char *end;
    long n = strtol(simulate, &end, 10);
    char *fixture;
    if (end != simulate && !*end) {
        if (n < 1 || n > GPUINFO_MAX_GPUS) {
            *err = xasprintf("--simulate-gpus %s: give 1 to %d GPUs or a fixture file", simulate,
                             GPUINFO_MAX_GPUS);
            return NULL;
        }
        fixture = xasprintf("%s/simulated-gpus.json", data_dir);
        if (write_sim_fixture((int)n, fixture, err) < 0) {
            free(fixture);
            return NULL;
        }
    } else {
        fixture = realpath(simulate, NULL);
        if (!fixture) {
            *err = xasprintf("--simulate-gpus %s: %s (give a number of GPUs or a fixture file)",
                             simulate, strerror(errno));
            return NULL;
        }
    }
    setenv("GFLOW_NVML_SIM", fixture, 1);
    free(fixture);
    return paths_companion("libgflow-nvml-sim.so", R_OK, NULL, GFLOW_LIBDIR);
}

/* ---- reading ---- */

/* What the scheduler depends on: which GPUs exist, their memory and their processes. */
static bool differs(const struct gpu_set *a, const struct gpu_set *b)
{
    if (a->n_gpus != b->n_gpus)
        return true;
    for (size_t i = 0; i < a->n_gpus; i++) {
        const struct gpu_info *x = &a->gpus[i], *y = &b->gpus[i];
        if (x->memory_total_mib != y->memory_total_mib ||
            x->memory_used_mib != y->memory_used_mib || x->n_procs != y->n_procs ||
            x->lost != y->lost || x->memory_free_mib != y->memory_free_mib ||
            strcmp(x->unavailable, y->unavailable) != 0)
            return true;
        for (size_t k = 0; k < x->n_procs; k++)
            if (x->procs[k].pid != y->procs[k].pid)
                return true;
    }
    return false;
}

/* What the scheduler depends on of the MIG instances: which exist (by UUID), in which
 * mode their GPUs are, their processes. */
static bool mig_differs(const struct gpu_set *a, const struct gpu_set *b)
{
    if (a->n_migs != b->n_migs || a->n_gpus != b->n_gpus)
        return true;
    for (size_t i = 0; i < a->n_gpus; i++)
        if (a->gpus[i].mig_enabled != b->gpus[i].mig_enabled)
            return true;
    for (size_t i = 0; i < a->n_migs; i++) {
        const struct gpu_mig *x = &a->migs[i], *y = &b->migs[i];
        if (strcmp(x->uuid, y->uuid) != 0 || strcmp(x->profile, y->profile) != 0 ||
            x->n_procs != y->n_procs || x->memory_used_mib != y->memory_used_mib)
            return true;
        for (size_t k = 0; k < x->n_procs; k++)
            if (x->procs[k].pid != y->procs[k].pid)
                return true;
    }
    return false;
}

/* ---- NVML's life: open with back-off, reads on the worker with a timeout ---- */

static void ask(struct gpus *g);

static void retry_cb(void *arg)
{
    struct gpus *g = arg;
    g->retry_timer = NULL;
    g->retry_at = 0;
    ask(g);
}

/* The request in progress is past daemon.nvml_timeout_secs: the GPUs are unavailable
 * until it answers (gpu_unavailable_reason). Said once. */
static void mark_overdue(struct gpus *g)
{
    if (!g->asked_at || g->overdue)
        return;
    g->overdue = true;
    log_warn("NVML gives no answer for %.0f s: the GPUs count as unavailable until it does "
             "(a failing GPU?)",
             now_mono() - g->asked_at);
}

/* Overdue is a system call (open, count, topology) past the timeout: the wait for the
 * GPUs' readers is bounded by the worker itself, and a GPU that hangs is that GPU's. */
static void overdue_cb(void *arg)
{
    struct gpus *g = arg;
    g->overdue_timer = NULL;
    double since = gpu_worker_system_since(g->worker), now = now_mono();
    if (since > 0 && now - since >= g->timeout - 0.01) {
        mark_overdue(g);
        return;
    }
    double next = since > 0 ? since + g->timeout - now : g->timeout;
    g->overdue_timer = loop_add_timer(next, overdue_cb, g);
}

/* Hands a request to the worker (one at a time) and starts its clock. */
static void ask(struct gpus *g)
{
    if (g->off)
        return;
    if (!gpu_worker_request(g->worker, g->account)) {
        g->ask_again = true; /* read again once the one in progress is answered */
        return;
    }
    g->ask_again = false;
    g->asked_at = now_mono();
    loop_cancel_timer(g->overdue_timer);
    g->overdue_timer = loop_add_timer(g->timeout, overdue_cb, g);
}

/* NVML would not open (or went away): try again later, 1 s doubling up to the
 * maximum. Logged when the reason changes, not at every try. */
static void not_ready(struct gpus *g, const struct gpu_worker_result *r)
{
    const char *why = r->error ? r->error : "no GPUs: NVML failed";
    if (g->nvml_open)
        log_warn("NVML stopped working (%s); the GPUs are unknown until it answers again", why);
    else if (!g->open_error || strcmp(g->open_error, why) != 0)
        /* No library at all is the normal state of a machine without NVIDIA GPUs. */
        log_msg(r->found ? LOG_WARN : LOG_INFO, "%s; trying again with a back-off of up to %.0f s",
                why, g->retry_max);
    free(g->open_error);
    g->open_error = xstrdup(why);
    g->nvml_open = false;
    g->lib_found = r->found;
    g->open_tries++;
    g->retry_delay = g->retry_delay > 0 ? g->retry_delay * 2 : 1;
    if (g->retry_delay > g->retry_max)
        g->retry_delay = g->retry_max;
    g->retry_at = now_mono() + g->retry_delay;
    loop_cancel_timer(g->retry_timer);
    g->retry_timer = loop_add_timer(g->retry_delay, retry_cb, g);
}

/* Takes the GPUs' hangs from a reading, logging each one that begins or ends; true if
 * any did. */
static bool take_hangs(struct gpus *g, const struct gpu_worker_result *r)
{
    bool changed = false;
    double now = now_mono();
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++) {
        const struct gpu_reader_hang *was = &g->hang[i];
        const struct gpu_reader_hang *is =
            i < r->set.n_gpus ? &r->hang[i] : &(struct gpu_reader_hang){0};
        if (!was->since && is->since)
            log_warn("GPU %zu gives no answer for %.0f s (%s): it counts as unavailable until "
                     "it does; the other GPUs go on",
                     i, now - is->since, is->fn);
        else if (was->since && !is->since)
            log_info("GPU %zu answers again, after %.0f s", i, now - was->since);
        changed |= (was->since != 0) != (is->since != 0);
        g->hang[i] = *is;
    }
    return changed;
}

/* Applies a reading: the GPUs, the daemon's CUDA_VISIBLE_DEVICES, outside processes. */
static bool take_reading(struct gpus *g, struct gpu_worker_result *r, struct job *const *running,
                         size_t n)
{
    bool changed = differs(&g->cur, &r->set) || mig_differs(&g->cur, &r->set) || !g->nvml_open;
    bool was_open = g->nvml_open;
    if (!g->nvml_open) {
        if (g->open_tries)
            log_info("NVML is ready after %d failed tr%s: %zu GPU%s%s", g->open_tries,
                     g->open_tries == 1 ? "y" : "ies", r->set.n_gpus, r->set.n_gpus == 1 ? "" : "s",
                     r->simulated ? " (simulated)" : "");
        else
            log_info("%zu GPU%s%s", r->set.n_gpus, r->set.n_gpus == 1 ? "" : "s",
                     r->simulated ? " (simulated)" : "");
    } else if (r->topology_read) {
        log_info("the GPUs changed (%zu now): topology read again", r->set.n_gpus);
    }
    if (g->driver_changed) {
        log_info("NVML reopened after %s: driver %s, GPUs taken up again", g->driver_changed,
                 r->set.driver_version[0] ? r->set.driver_version : "unknown");
        free(g->driver_changed);
        g->driver_changed = NULL;
        changed = true;
    }
    changed |= take_hangs(g, r);
    g->nvml_open = true;
    g->lib_found = true;
    g->open_tries = 0;
    g->retry_delay = 0;
    free(g->open_error);
    g->open_error = NULL;
    gpu_set_free(&g->cur);
    g->cur = r->set;
    g->reads++;
    memset(&r->set, 0, sizeof(r->set));
    g->cur.simulated = r->simulated;
    gpu_resolve_visible(g);
    gpu_prune_ignored(g);
    uint64_t um = gpu_compute_unmanaged(g, running, n);
    changed |= um != g->unmanaged;
    g->unmanaged = um;
    gpu_compute_outside(g, running, n);
    uint64_t mum = gpu_compute_mig_unmanaged(g, running, n);
    changed |= mum != g->mig_unmanaged;
    g->mig_unmanaged = mum;
    changed |= gpu_compute_strays(g, running, n);
    if (!was_open)
        gpu_ids_nvml_ready(g); /* CUDA's view, for gpu_id_format "auto" */
    else
        gpu_ids_reread(g);
    changed |= gpu_health_assess(g);
    return changed;
}

/* The GPUs read for the jobs' accounting: the whole GPUs running jobs hold (MIG
 * instances have no energy counter of their own). None on an idle machine. */
static void set_account(struct gpus *g, struct job *const *running, size_t n)
{
    g->account = 0;
    for (size_t i = 0; i < n; i++)
        g->account |= running[i]->gpu_mask;
}

bool gpu_collect(struct gpus *g, struct job *const *running, size_t n)
{
    set_account(g, running, n);
    struct gpu_worker_result r;
    if (!gpu_worker_take(g->worker, &r)) {
        if (gpu_worker_poked(g->worker) && g->nvml_open)
            ask(g); /* a GPU's call that hung returned: read it again */
        return false;
    }
    bool changed = false;
    if (g->overdue) {
        log_info("NVML answers again, after %.0f s", now_mono() - g->asked_at);
        changed = true;
    }
    g->overdue = false;
    g->asked_at = 0;
    g->answered = true;
    loop_cancel_timer(g->overdue_timer);
    g->overdue_timer = NULL;
    if (r.read) {
        changed |= take_reading(g, &r, running, n);
    } else if (r.driver_changed || g->driver_changed) {
        /* The driver changed under NVML: the GPUs stay known but unavailable (running
         * jobs go on) while NVML is reopened through the retry path. */
        changed |= g->nvml_open || !g->driver_changed;
        if (!g->driver_changed) {
            g->driver_changed = xstrdup(r.driver_changed);
            log_warn("%s: every GPU is unavailable until NVML is reopened; running jobs go on",
                     g->driver_changed);
        }
        memset(g->hang, 0, sizeof(g->hang));
        not_ready(g, &r);
    } else { /* NVML would not open, or failed and was closed (gpu_worker.c) */
        changed |= g->nvml_open;
        memset(g->hang, 0, sizeof(g->hang));
        if (g->nvml_open) {
            gpu_set_free(&g->cur); /* what NVML no longer answers for is unknown */
            g->unmanaged = 0;
            g->mig_unmanaged = 0;
            memset(g->outside_mib, 0, sizeof(g->outside_mib));
        }
        not_ready(g, &r);
        gpu_compute_strays(g, running, n); /* none without a reading */
    }
    gpu_worker_result_free(&r);
    /* CUDA's answer came, or the wait for it ended: the pass may start GPU jobs now. */
    bool hold = gpu_ids_holding(g);
    changed |= g->cuda_news || hold != g->cuda_held;
    g->cuda_news = false;
    g->cuda_held = hold;
    if ((gpu_worker_poked(g->worker) || g->ask_again) && g->nvml_open)
        ask(g);
    return changed;
}

uint64_t gpu_reads(const struct gpus *g)
{
    return g->reads;
}

bool gpu_refresh(struct gpus *g, struct job *const *running, size_t n)
{
    /* The running jobs changed (a job ended, the table was reloaded): whose processes
     * are outside ones changes with them at once; the GPUs are read again meanwhile. */
    set_account(g, running, n);
    uint64_t um = gpu_compute_unmanaged(g, running, n);
    bool changed = um != g->unmanaged;
    g->unmanaged = um;
    gpu_compute_outside(g, running, n);
    uint64_t mum = gpu_compute_mig_unmanaged(g, running, n);
    changed |= mum != g->mig_unmanaged;
    g->mig_unmanaged = mum;
    changed |= gpu_compute_strays(g, running, n);
    if (g->nvml_open)
        ask(g);
    return changed;
}

int gpu_fd(const struct gpus *g)
{
    return gpu_worker_fd(g->worker);
}

bool gpu_pending(const struct gpus *g)
{
    if (g->off)
        return false;
    return !g->nvml_open && (g->lib_found || !g->answered);
}

const char *gpu_unavailable_reason(const struct gpus *g, size_t index)
{
    char *buf = text_buf(g, TEXT_REASON);
    if (g->overdue) { /* a system call hangs: no GPU is seen */
        snprintf(buf, GPU_MSG_MAX, "NVML: no answer for %.0f s", now_mono() - g->asked_at);
        return buf;
    }
    if (g->driver_changed)
        return g->driver_changed;
    if (index < GPUINFO_MAX_GPUS && g->hang[index].since) {
        snprintf(buf, GPU_MSG_MAX, "NVML: no answer for %.0f s (%s)",
                 now_mono() - g->hang[index].since, g->hang[index].fn);
        return buf;
    }
    if (gpu_ids_holding(g))
        return "checking CUDA's view of the GPUs";
    return gpu_stray_reason(g, index); /* a stray may keep this one from the other jobs */
}

const struct gpu_set *gpu_schedulable(struct gpus *g)
{
    bool any = g->overdue || g->driver_changed || gpu_ids_holding(g) || gpu_strays_block(g);
    for (size_t i = 0; i < g->cur.n_gpus && i < GPUINFO_MAX_GPUS && !any; i++)
        any = g->hang[i].since != 0;
    if (!any)
        return &g->cur;
    /* The pass sees the GPUs it cannot see now, and those strays keep from it, as
     * unavailable: it starts nothing there. */
    free(g->blind.gpus);
    free(g->blind.migs);
    g->blind = g->cur;
    g->blind.gpus = g->cur.n_gpus ? xcalloc(g->cur.n_gpus, sizeof(*g->blind.gpus)) : NULL;
    for (size_t i = 0; i < g->cur.n_gpus; i++) {
        g->blind.gpus[i] = g->cur.gpus[i];
        const char *why = gpu_unavailable_reason(g, i);
        if (why)
            snprintf(g->blind.gpus[i].unavailable, sizeof(g->blind.gpus[i].unavailable), "%s", why);
    }
    /* And their MIG instances (part of their GPU's read), or those strays keep. */
    g->blind.migs = g->cur.n_migs ? xcalloc(g->cur.n_migs, sizeof(*g->blind.migs)) : NULL;
    for (size_t i = 0; i < g->cur.n_migs; i++) {
        g->blind.migs[i] = g->cur.migs[i];
        int parent = g->cur.migs[i].parent;
        const char *why = parent >= 0 ? gpu_unavailable_reason(g, (size_t)parent) : NULL;
        if (!why)
            why = gpu_mig_stray_reason(g, i);
        if (why)
            snprintf(g->blind.migs[i].unavailable, sizeof(g->blind.migs[i].unavailable), "%s", why);
    }
    return &g->blind;
}

const char *gpu_nvml_state(const struct gpus *g)
{
    char *buf = text_buf(g, TEXT_STATE);
    double now = now_mono();
    if (g->off) {
        snprintf(buf, GPU_MSG_MAX, "not used: the GPUs are Slurm's (backend.kind = \"slurm\")");
    } else if (g->asked_at && g->overdue) {
        snprintf(buf, GPU_MSG_MAX, "%s: no answer for %.0f s", g->nvml_open ? "busy" : "not ready",
                 now - g->asked_at);
    } else if (g->nvml_open) {
        size_t hung = 0;
        for (size_t i = 0; i < g->cur.n_gpus && i < GPUINFO_MAX_GPUS; i++)
            hung += g->hang[i].since != 0;
        if (hung)
            snprintf(buf, GPU_MSG_MAX, "ready; %zu GPU%s give%s no answer", hung,
                     hung == 1 ? "" : "s", hung == 1 ? "s" : "");
        else
            snprintf(buf, GPU_MSG_MAX, "ready");
    } else if (g->driver_changed) {
        const char *why = g->open_error ? g->open_error : "";
        if (str_starts_with(why, "no GPUs: "))
            why += strlen("no GPUs: ");
        int n = snprintf(buf, GPU_MSG_MAX, "%s: reopening", g->driver_changed);
        if (strcmp(why, g->driver_changed) != 0 && n > 0 && n < GPU_MSG_MAX)
            n += snprintf(buf + n, GPU_MSG_MAX - (size_t)n, " (%s)", why);
        if (n > 0 && n < GPU_MSG_MAX)
            snprintf(buf + n, GPU_MSG_MAX - (size_t)n, "; retrying in %.0f s, %d tr%s so far",
                     g->retry_at > now ? ceil(g->retry_at - now) : 0, g->open_tries,
                     g->open_tries == 1 ? "y" : "ies");
    } else if (!g->answered) {
        snprintf(buf, GPU_MSG_MAX, "not ready: opening");
    } else {
        const char *why = g->open_error ? g->open_error : "unknown";
        if (str_starts_with(why, "no GPUs: "))
            why += strlen("no GPUs: ");
        int tries = g->open_tries;
        /* A library that is not there at all is a machine without NVIDIA software
         * (still looked for now and then); one that loads but fails is a driver that is
         * not ready (yet). */
        const char *what = g->lib_found ? "not ready" : "not installed";
        if (g->asked_at)
            snprintf(buf, GPU_MSG_MAX, "%s (%s); trying again now, %d tr%s so far", what, why,
                     tries, tries == 1 ? "y" : "ies");
        else
            snprintf(buf, GPU_MSG_MAX, "%s (%s); retrying in %.0f s, %d tr%s so far", what, why,
                     g->retry_at > now ? ceil(g->retry_at - now) : 0, tries,
                     tries == 1 ? "y" : "ies");
    }
    return buf;
}

/* ---- start ---- */

struct gpus *gpu_start(const struct gpu_start_opts *o, char **err)
{
    struct gpus *g = xcalloc(1, sizeof(*g));
    g->store = o->store;
    g->visible = ALL_GPUS;
    g->allowed = ALL_GPUS;
    g->allowed_source = "all";
    const char *env_visible = getenv("CUDA_VISIBLE_DEVICES");
    if (env_visible) {
        g->visible_spec = xstrdup(env_visible);
        g->visible = 0; /* resolved once the GPUs are read */
    }
    char *library = NULL;
    if (gpu_load_allowed(g, o->flag_gpus, o->config_gpus, err) < 0)
        goto fail;
    gpu_settings_committed(g);
    if (o->simulate) {
        library = setup_simulation(o->simulate, o->data_dir, err);
        if (!library)
            goto fail;
    } else if (o->nvml_library &&
               !(getenv("GFLOW_NVML_LIBRARY") && *getenv("GFLOW_NVML_LIBRARY"))) {
        /* The environment wins over the config file, as for every other setting. */
        library = xstrdup(o->nvml_library);
    }
    g->timeout = (double)o->nvml_timeout_secs;
    g->retry_max = (double)o->nvml_retry_max_secs;
    if (g->timeout <= 0)
        g->timeout = 10;
    if (g->retry_max <= 0)
        g->retry_max = 60;
    gpu_ids_start(g, o->gpu_id_format, o->container, o->constrain_devices);
    g->worker = gpu_worker_new(library, g->timeout, err);
    g->off = o->off;
    if (g->worker && g->off) { /* never asked: no read, no retry, no health thread */
        free(library);
        return g;
    }
    if (g->worker)
        gpu_health_start(g, library, o->unowned_memory_mib);
    free(library);
    library = NULL;
    if (!g->worker)
        goto fail;
    /* The first reading is awaited (bounded), so that the GPUs are known when the
     * daemon starts serving; one that takes longer is collected by the loop. */
    ask(g);
    double wait = g->timeout < START_WAIT_MAX ? g->timeout : START_WAIT_MAX;
    double t0 = now_mono();
    if (gpu_worker_wait(g->worker, wait)) {
        gpu_collect(g, o->running, o->n_running);
        /* And for CUDA's view, which the reading started (gpu_ids.c), in what is left. */
        gpu_ids_wait(g, wait - (now_mono() - t0));
    }
    /* else the overdue timer tells whether a system call hangs, or only GPUs do */
    return g;
fail:
    free(library);
    gpu_stop(g);
    return NULL;
}

void gpu_stop(struct gpus *g)
{
    if (!g)
        return;
    gpu_worker_free(g->worker);
    gpu_health_stop(g);
    loop_cancel_timer(g->retry_timer);
    loop_cancel_timer(g->overdue_timer);
    gpu_set_free(&g->cur);
    free(g->blind.gpus);
    free(g->blind.migs);
    free(g->open_error);
    gpu_ids_stop(g);
    free(g->driver_changed);
    free(g->visible_spec);
    cudavis_free(&g->visible_read);
    free(g->ignored);
    free(g->strays);
    free(g);
}

bool gpu_have_nvml(const struct gpus *g)
{
    return g->nvml_open;
}

const struct gpu_set *gpu_current(const struct gpus *g)
{
    return &g->cur;
}

const char *gpu_error(const struct gpus *g)
{
    /* After a driver change the GPUs are still known: each says why it is unavailable. */
    if (g->off || g->nvml_open || (g->driver_changed && g->cur.n_gpus))
        return NULL;
    char *buf = text_buf(g, TEXT_ERROR);
    snprintf(buf, GPU_MSG_MAX, "no GPUs: NVML %s", gpu_nvml_state(g));
    return buf;
}

/* ---- the GPUs as last read ---- */

char *gpu_uuids(const struct gpus *g, uint64_t mask)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t k = 0; k < g->cur.n_gpus && k < GPUINFO_MAX_GPUS; k++)
        if (mask & (1ULL << k))
            strbuf_addf(&sb, "%s%s", sb.len ? "," : "", g->cur.gpus[k].uuid);
    return strbuf_detach(&sb);
}

uint64_t gpu_mig_parents(const struct gpus *g, const char *uuids)
{
    uint64_t m = 0;
    for (const char *p = uuids; p && *p;) {
        size_t len = strcspn(p, ",");
        for (size_t k = 0; k < g->cur.n_migs; k++) {
            const struct gpu_mig *mig = &g->cur.migs[k];
            if (strlen(mig->uuid) == len && strncmp(mig->uuid, p, len) == 0 && mig->parent >= 0 &&
                mig->parent < GPUINFO_MAX_GPUS)
                m |= 1ULL << mig->parent;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return m;
}
