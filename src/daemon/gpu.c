/* gpu: NVML state, allowed GPUs, outside processes and the ignore list (see gpu.h). */
#include "gpu.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cudavis.h"
#include "files.h"
#include "gflow_build.h"
#include "gpu_worker.h"
#include "jobcgroup.h"
#include "log.h"
#include "loop.h"
#include "nvml.h"
#include "procinfo.h"
#include "store.h"
#include "util.h"

#define SETTING_ALLOWED "gpus.allowed"
#define GPU_MSG_MAX 512
/* The longest start-up waits for NVML's first answer (`gflowd up` waits 30 s). */
#define START_WAIT_MAX 10.0
#define ALL_GPUS (~0ULL)

struct ignored {
    int gpu;
    long long pid;
    int64_t start; /* the process's start time: a recycled pid is not ignored */
};

struct gpus {
    struct store *store; /* where gctl set-gpus is kept */
    struct gpu_set cur;
    uint64_t visible;   /* the daemon's own CUDA_VISIBLE_DEVICES */
    char *visible_spec; /* as given, resolved once the GPUs are known */
    uint64_t allowed;
    const char *allowed_source;
    /* The allowed set as last committed, put back when a commit is lost. */
    uint64_t committed_allowed;
    const char *committed_source;
    uint64_t unmanaged;
    struct ignored *ignored;
    size_t n_ignored;
    struct cudavis visible_read; /* visible_spec as CUDA reads it, once the GPUs are known */
    /* Per GPU: MiB taken by other than the running jobs' processes (gpu_outside_mib). */
    int64_t outside_mib[GPUINFO_MAX_GPUS];

    /* NVML's life (gpu_worker.c makes the calls). */
    struct gpu_worker *worker;
    bool nvml_open;     /* as of the last answer */
    bool lib_found;     /* the library loads (it may still fail to initialise) */
    bool answered;      /* an answer came since start */
    char *open_error;   /* why NVML would not open ("no GPUs: ..."), as logged */
    int open_tries;     /* failed opens in a row */
    double retry_delay; /* the current back-off, seconds */
    double retry_at;    /* monotonic time of the next try; 0: none planned */
    double retry_max;   /* daemon.nvml_retry_max_secs */
    double timeout;     /* daemon.nvml_timeout_secs */
    double asked_at;    /* when the request in progress was made; 0: none */
    bool ask_again;     /* read again once the request in progress is answered */
    bool overdue;       /* the request in progress is past the timeout */
    struct loop_timer *retry_timer, *overdue_timer;
    struct gpu_set blind; /* cur with every GPU unavailable, while overdue */
    bool uuid_ids;        /* CUDA_VISIBLE_DEVICES by UUID (gpu_id_format) */
    char *id_format_why;  /* the decision and why, for gflowd status */
    /* What gpu_error, gpu_nvml_state and gpu_unavailable_reason return. */
    char text[3][GPU_MSG_MAX];
    uint64_t mig_unmanaged; /* by position in cur.migs */
};

enum { TEXT_ERROR, TEXT_STATE, TEXT_REASON };

/* A buffer for a text computed when asked for (it says how long ago, how soon). */
static char *text_buf(const struct gpus *g, int which)
{
    return ((struct gpus *)g)->text[which]; /* scratch space, not the state */
}

/* ---- GPU lists ---- */

/* "all", or indices and ranges "0,2-3" (below 64) into a mask. */
static int parse_gpu_list(const char *s, uint64_t *mask, char **err)
{
    if (strcmp(s, "all") == 0) {
        *mask = ALL_GPUS;
        return 0;
    }
    uint64_t m = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p || a < 0)
            goto bad;
        if (*end == '-') {
            p = end + 1;
            b = strtol(p, &end, 10);
            if (end == p || b < a)
                goto bad;
        }
        if (b >= GPUINFO_MAX_GPUS)
            goto bad;
        for (long i = a; i <= b; i++)
            m |= 1ULL << i;
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            goto bad;
        p = end;
    }
    if (!m)
        goto bad;
    *mask = m;
    return 0;
bad:
    *err = xasprintf("invalid GPU list '%s': use indices and ranges like 0,2-3, or all", s);
    return -1;
}

/* CUDA_VISIBLE_DEVICES of the daemon (a container's GPUs), read as CUDA reads it
 * (cudavis.c), again whenever the GPUs are read; what it means is logged when it changes
 * and shown by `gflowd status`. */
static void resolve_visible(struct gpus *g)
{
    if (!g->visible_spec)
        return;
    struct cudavis v;
    cudavis_parse(g->visible_spec, &g->cur, getenv("CUDA_DEVICE_ORDER"), &v);
    if (!g->visible_read.understood || strcmp(v.understood, g->visible_read.understood) != 0) {
        log_info("%s", v.understood);
        if (v.warning)
            log_warn("%s", v.warning);
    }
    cudavis_free(&g->visible_read);
    g->visible_read = v;
    g->visible = v.mask;
}

/* ---- simulator ---- */

static char *exe_dir(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return xstrdup("/");
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    return xstrdup(self);
}

static char *sim_library(void)
{
    char *dir = exe_dir();
    char *p = xasprintf("%s/libgflow-nvml-sim.so", dir);
    free(dir);
    if (access(p, R_OK) == 0)
        return p;
    free(p);
    return xstrdup(GFLOW_LIBDIR "/libgflow-nvml-sim.so");
}

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
    return sim_library();
}

/* ---- processes ---- */

bool gpu_is_ignored(const struct gpus *g, int gpu, long long pid)
{
    for (size_t i = 0; i < g->n_ignored; i++)
        if (g->ignored[i].gpu == gpu && g->ignored[i].pid == pid &&
            proc_start_time((pid_t)pid) == g->ignored[i].start)
            return true;
    return false;
}

/* Drops ignore entries whose process has exited. */
static void prune_ignored(struct gpus *g)
{
    size_t k = 0;
    for (size_t i = 0; i < g->n_ignored; i++)
        if (proc_start_time((pid_t)g->ignored[i].pid) == g->ignored[i].start)
            g->ignored[k++] = g->ignored[i];
    g->n_ignored = k;
}

/* The running job whose cgroup holds pid (gflow-shim puts every process of a job in a
 * cgroup named after the job and its shim, src/shim/jobcg.c), NULL if none. */
static struct job *owner_by_cgroup(pid_t pid, struct job *const *running, size_t n)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/cgroup", (long)pid);
    char *text = read_file(path, NULL);
    if (!text)
        return NULL;
    struct jobcgroup_ref refs[4];
    size_t k = jobcgroup_find(text, refs, 4);
    free(text);
    for (size_t r = 0; r < k; r++)
        for (size_t i = 0; i < n; i++)
            if (running[i]->id == refs[r].job_id && running[i]->shim_pid == refs[r].shim_pid)
                return running[i];
    return NULL;
}

struct job *gpu_process_owner(long long pid, struct job *const *running, size_t n)
{
    if (pid <= 1)
        return NULL;
    /* The cgroup first: it holds what the job started in a container runtime that keeps
     * it (apptainer, podman's crun), after setsid, or re-parented to init. */
    struct job *owner = owner_by_cgroup((pid_t)pid, running, n);
    if (owner)
        return owner;
    /* Then the session: the shim leads the job's session. */
    struct proc_stat st;
    if (proc_stat_read((pid_t)pid, &st) == 0)
        for (size_t i = 0; i < n; i++)
            if (running[i]->shim_pid > 1 && running[i]->shim_pid == st.sid)
                return running[i];
    /* Then the ancestry (a job without a cgroup that left the session stays its child). */
    pid_t p = (pid_t)pid;
    for (int depth = 0; p > 1 && depth < 64; depth++) {
        for (size_t i = 0; i < n; i++)
            if (running[i]->shim_pid == p)
                return running[i];
        p = proc_parent(p);
    }
    return NULL;
}

static uint64_t compute_unmanaged(const struct gpus *g, struct job *const *running, size_t n)
{
    uint64_t m = 0;
    for (size_t k = 0; k < g->cur.n_gpus; k++)
        for (size_t i = 0; i < g->cur.gpus[k].n_procs; i++) {
            long long pid = g->cur.gpus[k].procs[i].pid;
            if (!gpu_is_ignored(g, (int)k, pid) && !gpu_process_owner(pid, running, n))
                m |= 1ULL << k;
        }
    return m;
}

/* Per GPU, the memory shared jobs cannot pack into: all that is not free (so the
 * driver's reservation too) less what the running jobs' own processes use. Outside
 * processes count whether ignored or not: ignoring one lets jobs share its GPU, it does
 * not free its memory. */
static void compute_outside(struct gpus *g, struct job *const *running, size_t n)
{
    memset(g->outside_mib, 0, sizeof(g->outside_mib));
    for (size_t k = 0; k < g->cur.n_gpus && k < GPUINFO_MAX_GPUS; k++) {
        const struct gpu_info *info = &g->cur.gpus[k];
        if (info->memory_free_mib < 0)
            continue; /* no memory reading: the GPU is unavailable anyway */
        int64_t taken = info->memory_total_mib - info->memory_free_mib;
        for (size_t i = 0; i < info->n_procs; i++)
            if (info->procs[i].used_mib > 0 && gpu_process_owner(info->procs[i].pid, running, n))
                taken -= info->procs[i].used_mib;
        g->outside_mib[k] = taken > 0 ? taken : 0;
    }
}

const int64_t *gpu_outside_mib(const struct gpus *g)
{
    return g->outside_mib;
}

static uint64_t compute_mig_unmanaged(const struct gpus *g, struct job *const *running, size_t n)
{
    uint64_t m = 0;
    for (size_t k = 0; k < g->cur.n_migs && k < GPUINFO_MAX_MIGS; k++) {
        const struct gpu_mig *mig = &g->cur.migs[k];
        for (size_t i = 0; i < mig->n_procs; i++) {
            long long pid = mig->procs[i].pid;
            if (!gpu_is_ignored(g, mig->parent, pid) && !gpu_process_owner(pid, running, n))
                m |= 1ULL << k;
        }
    }
    return m;
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

static void overdue_cb(void *arg)
{
    struct gpus *g = arg;
    g->overdue_timer = NULL;
    mark_overdue(g);
}

/* Hands a request to the worker (one at a time) and starts its clock. */
static void ask(struct gpus *g)
{
    if (!gpu_worker_request(g->worker)) {
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

/* Applies a reading: the GPUs, the daemon's CUDA_VISIBLE_DEVICES, outside processes. */
static bool take_reading(struct gpus *g, struct gpu_worker_result *r, struct job *const *running,
                         size_t n)
{
    bool changed = differs(&g->cur, &r->set) || mig_differs(&g->cur, &r->set) || !g->nvml_open;
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
    g->nvml_open = true;
    g->lib_found = true;
    g->open_tries = 0;
    g->retry_delay = 0;
    free(g->open_error);
    g->open_error = NULL;
    gpu_set_free(&g->cur);
    g->cur = r->set;
    memset(&r->set, 0, sizeof(r->set));
    g->cur.simulated = r->simulated;
    resolve_visible(g);
    prune_ignored(g);
    uint64_t um = compute_unmanaged(g, running, n);
    changed |= um != g->unmanaged;
    g->unmanaged = um;
    compute_outside(g, running, n);
    uint64_t mum = compute_mig_unmanaged(g, running, n);
    changed |= mum != g->mig_unmanaged;
    g->mig_unmanaged = mum;
    return changed;
}

bool gpu_collect(struct gpus *g, struct job *const *running, size_t n)
{
    struct gpu_worker_result r;
    if (!gpu_worker_take(g->worker, &r))
        return false;
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
    } else { /* NVML would not open, or failed and was closed (gpu_worker.c) */
        changed |= g->nvml_open;
        if (g->nvml_open) {
            gpu_set_free(&g->cur); /* what NVML no longer answers for is unknown */
            g->unmanaged = 0;
            g->mig_unmanaged = 0;
            memset(g->outside_mib, 0, sizeof(g->outside_mib));
        }
        not_ready(g, &r);
    }
    gpu_worker_result_free(&r);
    if (g->ask_again && g->nvml_open)
        ask(g);
    return changed;
}

bool gpu_refresh(struct gpus *g, struct job *const *running, size_t n)
{
    /* The running jobs changed (a job ended, the table was reloaded): whose processes
     * are outside ones changes with them at once; the GPUs are read again meanwhile. */
    uint64_t um = compute_unmanaged(g, running, n);
    bool changed = um != g->unmanaged;
    g->unmanaged = um;
    compute_outside(g, running, n);
    uint64_t mum = compute_mig_unmanaged(g, running, n);
    changed |= mum != g->mig_unmanaged;
    g->mig_unmanaged = mum;
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
    return !g->nvml_open && (g->lib_found || !g->answered);
}

const char *gpu_unavailable_reason(const struct gpus *g, size_t index)
{
    (void)index; /* one read covers every GPU: while it hangs, none is seen */
    if (!g->overdue)
        return NULL;
    char *buf = text_buf(g, TEXT_REASON);
    snprintf(buf, GPU_MSG_MAX, "NVML: no answer for %.0f s", now_mono() - g->asked_at);
    return buf;
}

const struct gpu_set *gpu_schedulable(struct gpus *g)
{
    if (!g->overdue)
        return &g->cur;
    /* The pass sees every GPU as unavailable: it starts nothing on a GPU it cannot see. */
    free(g->blind.gpus);
    free(g->blind.migs);
    g->blind = g->cur;
    g->blind.gpus = g->cur.n_gpus ? xcalloc(g->cur.n_gpus, sizeof(*g->blind.gpus)) : NULL;
    for (size_t i = 0; i < g->cur.n_gpus; i++) {
        g->blind.gpus[i] = g->cur.gpus[i];
        snprintf(g->blind.gpus[i].unavailable, sizeof(g->blind.gpus[i].unavailable), "%s",
                 gpu_unavailable_reason(g, i));
    }
    /* And every MIG instance (their state is part of the same read). */
    g->blind.migs = g->cur.n_migs ? xcalloc(g->cur.n_migs, sizeof(*g->blind.migs)) : NULL;
    for (size_t i = 0; i < g->cur.n_migs; i++) {
        g->blind.migs[i] = g->cur.migs[i];
        snprintf(g->blind.migs[i].unavailable, sizeof(g->blind.migs[i].unavailable), "%s",
                 gpu_unavailable_reason(g, 0));
    }
    return &g->blind;
}

const char *gpu_nvml_state(const struct gpus *g)
{
    char *buf = text_buf(g, TEXT_STATE);
    double now = now_mono();
    if (g->asked_at && g->overdue) {
        snprintf(buf, GPU_MSG_MAX, "%s: no answer for %.0f s", g->nvml_open ? "busy" : "not ready",
                 now - g->asked_at);
    } else if (g->nvml_open) {
        snprintf(buf, GPU_MSG_MAX, "ready");
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

/* ---- gpu_id_format ---- */

/* Whether gflowd runs in a container, the way systemd-detect-virt tells: the files
 * docker and podman leave, systemd's own note, `container=` in pid 1's environment.
 * Returns what gave it away, or NULL. */
static const char *container_marker(void)
{
    static char found[128];
    if (access("/.dockerenv", F_OK) == 0)
        return "/.dockerenv";
    if (access("/run/.containerenv", F_OK) == 0)
        return "/run/.containerenv";
    char *note = read_file("/run/systemd/container", NULL);
    if (note) {
        note[strcspn(note, "\n")] = '\0';
        snprintf(found, sizeof(found), "/run/systemd/container says %s", note);
        free(note);
        return found;
    }
    size_t len = 0;
    char *env = read_file("/proc/1/environ", &len);
    for (size_t i = 0; env && i < len; i += strlen(env + i) + 1) {
        if (strncmp(env + i, "container=", 10) == 0 && env[i + 10]) {
            snprintf(found, sizeof(found), "pid 1 has %.100s", env + i);
            free(env);
            return found;
        }
    }
    free(env);
    return NULL;
}

/* Whether the daemon's own CUDA_VISIBLE_DEVICES names a device by UUID. */
static bool visible_by_uuid(const char *spec)
{
    for (const char *p = spec; p && *p; p++) {
        while (*p == ' ' || *p == ',')
            p++;
        if (strncmp(p, "GPU-", 4) == 0 || strncmp(p, "MIG-", 4) == 0)
            return true;
        p += strcspn(p, ",");
        if (!*p)
            break;
    }
    return false;
}

/* daemon.gpu_id_format: "index" and "uuid" say it; "auto" takes UUIDs where host
 * indices mean nothing: in a container (which may have been given some of the host's
 * GPUs, renumbered), or when the daemon's own CUDA_VISIBLE_DEVICES names GPUs by UUID.
 * daemon.container ("auto", "yes", "no") overrides the container detection. */
static void decide_id_format(struct gpus *g, const char *format, const char *container)
{
    if (format && strcmp(format, "index") == 0) {
        g->id_format_why = xstrdup("index (daemon.gpu_id_format)");
        return;
    }
    if (format && strcmp(format, "uuid") == 0) {
        g->uuid_ids = true;
        g->id_format_why = xstrdup("uuid (daemon.gpu_id_format)");
        return;
    }
    const char *marker = NULL;
    if (container && strcmp(container, "yes") == 0)
        marker = "daemon.container = \"yes\"";
    else if (!container || strcmp(container, "no") != 0)
        marker = container_marker();
    if (marker) {
        g->uuid_ids = true;
        g->id_format_why = xasprintf("uuid (auto: gflowd runs in a container: %s)", marker);
    } else if (visible_by_uuid(g->visible_spec)) {
        g->uuid_ids = true;
        g->id_format_why =
            xstrdup("uuid (auto: the daemon's CUDA_VISIBLE_DEVICES names GPUs by UUID)");
    } else {
        g->id_format_why = xasprintf(
            "index (auto: not in a container%s)",
            container && strcmp(container, "no") == 0 ? ", daemon.container = \"no\"" : "");
    }
}

bool gpu_uuid_ids(const struct gpus *g)
{
    return g->uuid_ids;
}

const char *gpu_id_format(const struct gpus *g)
{
    return g->id_format_why;
}

/* ---- start ---- */

static int load_allowed(struct gpus *g, const char *flag_gpus, const char *config_gpus, char **err)
{
    char *saved = NULL;
    if (flag_gpus) {
        /* A --gpus given at start wins over an earlier runtime setting. */
        if (parse_gpu_list(flag_gpus, &g->allowed, err) < 0)
            return -1;
        g->allowed_source = "flag";
        store_begin(g->store);
        store_set_setting(g->store, SETTING_ALLOWED, NULL);
        return 0;
    }
    if (store_get_setting(g->store, SETTING_ALLOWED, &saved) == 0 && saved) {
        int r = parse_gpu_list(saved, &g->allowed, err);
        free(saved);
        g->allowed_source = "runtime";
        return r;
    }
    if (config_gpus && strcmp(config_gpus, "all") != 0) {
        if (parse_gpu_list(config_gpus, &g->allowed, err) < 0)
            return -1;
        g->allowed_source = "config";
    }
    return 0;
}

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
    if (load_allowed(g, o->flag_gpus, o->config_gpus, err) < 0)
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
    decide_id_format(g, o->gpu_id_format, o->container);
    g->worker = gpu_worker_new(library, err);
    free(library);
    library = NULL;
    if (!g->worker)
        goto fail;
    /* The first reading is awaited (bounded), so that the GPUs are known when the
     * daemon starts serving; one that takes longer is collected by the loop. */
    ask(g);
    double wait = g->timeout < START_WAIT_MAX ? g->timeout : START_WAIT_MAX;
    if (gpu_worker_wait(g->worker, wait)) {
        gpu_collect(g, o->running, o->n_running);
    } else {
        loop_cancel_timer(g->overdue_timer);
        g->overdue_timer = NULL;
        mark_overdue(g);
    }
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
    loop_cancel_timer(g->retry_timer);
    loop_cancel_timer(g->overdue_timer);
    gpu_set_free(&g->cur);
    free(g->blind.gpus);
    free(g->blind.migs);
    free(g->open_error);
    free(g->id_format_why);
    free(g->visible_spec);
    cudavis_free(&g->visible_read);
    free(g->ignored);
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

static uint64_t present_mask(const struct gpus *g)
{
    return g->cur.n_gpus >= 64 ? ALL_GPUS : (1ULL << g->cur.n_gpus) - 1;
}

uint64_t gpu_allowed(const struct gpus *g)
{
    return g->allowed & g->visible & present_mask(g);
}

const char *gpu_error(const struct gpus *g)
{
    if (g->nvml_open)
        return NULL;
    char *buf = text_buf(g, TEXT_ERROR);
    snprintf(buf, GPU_MSG_MAX, "no GPUs: NVML %s", gpu_nvml_state(g));
    return buf;
}

uint64_t gpu_visible(const struct gpus *g)
{
    return g->visible & present_mask(g);
}

uint64_t gpu_unmanaged(const struct gpus *g)
{
    return g->unmanaged;
}

uint64_t gpu_mig_unmanaged(const struct gpus *g)
{
    return g->mig_unmanaged;
}

/* ---- runtime controls ---- */

json_t *gpu_allowed_json(const struct gpus *g)
{
    json_t *list = json_array();
    for (size_t i = 0; i < g->cur.n_gpus; i++)
        if (gpu_allowed(g) & (1ULL << i))
            json_array_append_new(list, json_integer((json_int_t)i));
    return json_pack("{s:o, s:s}", "allowed", list, "source", g->allowed_source);
}

int gpu_set_allowed(struct gpus *g, const char *spec, char **err)
{
    uint64_t m;
    if (parse_gpu_list(spec, &m, err) < 0)
        return -1;
    if (m != ALL_GPUS && (m & ~present_mask(g))) {
        *err = xasprintf("no GPU %s on this machine (it has %zu)", spec, g->cur.n_gpus);
        return -1;
    }
    if (m != ALL_GPUS && !(m & gpu_visible(g))) {
        *err = xasprintf("GPUs %s are outside the daemon's CUDA_VISIBLE_DEVICES (%s): no job "
                         "could use them",
                         spec, g->visible_spec ? g->visible_spec : "");
        return -1;
    }
    if (store_begin(g->store) < 0 ||
        store_set_setting(g->store, SETTING_ALLOWED, m == ALL_GPUS ? NULL : spec) < 0) {
        *err = xasprintf("cannot store the setting: %s", store_error(g->store));
        return -1;
    }
    g->allowed = m;
    g->allowed_source = m == ALL_GPUS ? "all" : "runtime";
    return 0;
}

void gpu_settings_committed(struct gpus *g)
{
    g->committed_allowed = g->allowed;
    g->committed_source = g->allowed_source;
}

void gpu_settings_undo(struct gpus *g)
{
    g->allowed = g->committed_allowed;
    g->allowed_source = g->committed_source;
}

json_t *gpu_ignored_json(struct gpus *g)
{
    prune_ignored(g);
    json_t *list = json_array();
    for (size_t i = 0; i < g->n_ignored; i++)
        json_array_append_new(list, json_pack("{s:i, s:I}", "gpu", g->ignored[i].gpu, "pid",
                                              (json_int_t)g->ignored[i].pid));
    return json_pack("{s:o}", "ignored", list);
}

int gpu_ignore(struct gpus *g, int gpu, long long pid, struct job *const *running, size_t n,
               char **err)
{
    if (gpu < 0 || (size_t)gpu >= g->cur.n_gpus) {
        *err = xasprintf("no GPU %d on this machine", gpu);
        return -1;
    }
    int64_t start = proc_start_time((pid_t)pid);
    if (start < 0) {
        *err = xasprintf("no process %lld", pid);
        return -1;
    }
    if (!gpu_is_ignored(g, gpu, pid)) {
        g->ignored = xrealloc(g->ignored, (g->n_ignored + 1) * sizeof(*g->ignored));
        g->ignored[g->n_ignored++] = (struct ignored){gpu, pid, start};
    }
    g->unmanaged = compute_unmanaged(g, running, n);
    g->mig_unmanaged = compute_mig_unmanaged(g, running, n);
    return 0;
}

int gpu_unignore(struct gpus *g, int gpu, long long pid, struct job *const *running, size_t n,
                 char **err)
{
    for (size_t i = 0; i < g->n_ignored; i++) {
        if (g->ignored[i].gpu == gpu && g->ignored[i].pid == pid) {
            g->ignored[i] = g->ignored[--g->n_ignored];
            g->unmanaged = compute_unmanaged(g, running, n);
            g->mig_unmanaged = compute_mig_unmanaged(g, running, n);
            return 0;
        }
    }
    *err = xasprintf("process %lld on GPU %d is not ignored", pid, gpu);
    return -1;
}

const char *gpu_visible_spec(const struct gpus *g)
{
    return g->visible_spec;
}

const struct cudavis *gpu_visible_read(const struct gpus *g)
{
    return g->visible_read.understood ? &g->visible_read : NULL;
}

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
