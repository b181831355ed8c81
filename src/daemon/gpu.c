/* gpu: NVML state, allowed GPUs, outside processes and the ignore list (see gpu.h). */
#include "gpu.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudavis.h"
#include "files.h"
#include "gflow_build.h"
#include "log.h"
#include "nvml.h"
#include "procinfo.h"
#include "store.h"
#include "util.h"

#define SETTING_ALLOWED "gpus.allowed"
#define ALL_GPUS (~0ULL)

struct ignored {
    int gpu;
    long long pid;
    int64_t start; /* the process's start time: a recycled pid is not ignored */
};

struct gpus {
    struct store *store; /* where gctl set-gpus is kept */
    struct nvml *nv;
    struct gpu_set cur;
    char *no_gpus;      /* "no GPUs: <reason>" */
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
};

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

struct job *gpu_process_owner(long long pid, struct job *const *running, size_t n)
{
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

bool gpu_refresh(struct gpus *g, struct job *const *running, size_t n)
{
    if (!g->nv)
        return false;
    struct gpu_set next = {0};
    char *err = NULL;
    if (nvml_read(g->nv, &next, &err) < 0) {
        log_warn("reading GPUs failed: %s", err);
        free(err);
        gpu_set_free(&next);
        return false;
    }
    next.simulated = nvml_is_simulated(g->nv);
    bool changed = differs(&g->cur, &next);
    gpu_set_free(&g->cur);
    g->cur = next;
    resolve_visible(g);
    prune_ignored(g);
    uint64_t um = compute_unmanaged(g, running, n);
    changed |= um != g->unmanaged;
    g->unmanaged = um;
    compute_outside(g, running, n);
    return changed;
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
    char *why = NULL;
    g->nv = nvml_open(library, &why);
    free(library);
    if (!g->nv) {
        g->no_gpus = why;
        log_info("%s", g->no_gpus);
    } else {
        gpu_refresh(g, o->running, o->n_running);
        log_info("%zu GPU%s%s", g->cur.n_gpus, g->cur.n_gpus == 1 ? "" : "s",
                 g->cur.simulated ? " (simulated)" : "");
    }
    return g;
fail:
    gpu_stop(g);
    return NULL;
}

void gpu_stop(struct gpus *g)
{
    if (!g)
        return;
    nvml_close(g->nv);
    gpu_set_free(&g->cur);
    free(g->no_gpus);
    free(g->visible_spec);
    cudavis_free(&g->visible_read);
    free(g->ignored);
    free(g);
}

bool gpu_have_nvml(const struct gpus *g)
{
    return g->nv != NULL;
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
    return g->no_gpus;
}

uint64_t gpu_visible(const struct gpus *g)
{
    return g->visible & present_mask(g);
}

uint64_t gpu_unmanaged(const struct gpus *g)
{
    return g->unmanaged;
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
    return 0;
}

int gpu_unignore(struct gpus *g, int gpu, long long pid, struct job *const *running, size_t n,
                 char **err)
{
    for (size_t i = 0; i < g->n_ignored; i++) {
        if (g->ignored[i].gpu == gpu && g->ignored[i].pid == pid) {
            g->ignored[i] = g->ignored[--g->n_ignored];
            g->unmanaged = compute_unmanaged(g, running, n);
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
