/* gpu: NVML state, allowed GPUs, outside processes and the ignore list (see gpu.h). */
#include "gpu.h"

#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "gflow_build.h"
#include "gflowd.h"
#include "jobs.h"
#include "log.h"
#include "loop.h"
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

static struct nvml *nv;
static struct gpu_set cur;
static char *no_gpus;          /* "no GPUs: <reason>" */
static uint64_t visible = ALL_GPUS; /* the daemon's own CUDA_VISIBLE_DEVICES */
static char *visible_spec;     /* as given, resolved once the GPUs are known */
static uint64_t allowed = ALL_GPUS;
static const char *allowed_source = "all";
static uint64_t unmanaged;
static struct ignored *ignored;
static size_t n_ignored;
static struct loop_timer *poll_timer;

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

/* CUDA_VISIBLE_DEVICES of the daemon (a container's GPUs): indices or UUIDs. */
static void resolve_visible(void)
{
    if (!visible_spec)
        return;
    uint64_t m = 0;
    char *copy = xstrdup(visible_spec), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*t))
            t++;
        char *end;
        long i = strtol(t, &end, 10);
        if (end != t && !*end && i >= 0 && i < GPUINFO_MAX_GPUS) {
            m |= 1ULL << i;
            continue;
        }
        for (size_t g = 0; g < cur.n_gpus; g++)
            if (str_starts_with(cur.gpus[g].uuid, t) || strcmp(cur.gpus[g].uuid, t) == 0)
                m |= 1ULL << g;
    }
    free(copy);
    visible = m;
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
        json_array_append_new(
            gpus, json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:[], s:[]}", "name",
                            "NVIDIA A100-SXM4-80GB (simulated)", "uuid", uuid, "pci_bus_id",
                            bus, "memory_total_mib", 81920, "memory_used_mib", 0,
                            "utilization_gpu", 0, "temperature_c", 30, "power_w", 60,
                            "numa_node", 0, "nvlink", "processes"));
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
static char *setup_simulation(const char *simulate, char **err)
{
    char *end;
    long n = strtol(simulate, &end, 10);
    char *fixture;
    if (end != simulate && !*end) {
        if (n < 1 || n > GPUINFO_MAX_GPUS) {
            *err = xasprintf("--simulate-gpus %s: give 1 to %d GPUs or a fixture file",
                             simulate, GPUINFO_MAX_GPUS);
            return NULL;
        }
        fixture = xasprintf("%s/simulated-gpus.json", gd.paths.data_dir);
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

static bool is_ignored(int gpu, long long pid)
{
    for (size_t i = 0; i < n_ignored; i++)
        if (ignored[i].gpu == gpu && ignored[i].pid == pid &&
            proc_start_time((pid_t)pid) == ignored[i].start)
            return true;
    return false;
}

/* Drops ignore entries whose process has exited. */
static void prune_ignored(void)
{
    size_t k = 0;
    for (size_t i = 0; i < n_ignored; i++)
        if (proc_start_time((pid_t)ignored[i].pid) == ignored[i].start)
            ignored[k++] = ignored[i];
    n_ignored = k;
}

/* The running jobs (a snapshot, caller frees): the owners GPU processes are matched
 * against. Taken once per scan, not once per process: the active table may hold 10,000
 * queued jobs. */
static struct job **running_jobs(size_t *count)
{
    size_t n, k = 0;
    struct job **active = jobs_active(&n);
    struct job **out = xmalloc((n ? n : 1) * sizeof(*out));
    for (size_t i = 0; i < n; i++)
        if (active[i]->state == JOB_RUNNING && active[i]->shim_pid > 0)
            out[k++] = active[i];
    *count = k;
    return out;
}

/* The running job whose process tree holds pid (its shim is an ancestor), or NULL. */
static struct job *owner_of(long long pid, struct job **running, size_t n)
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

static uint64_t compute_unmanaged(void)
{
    uint64_t m = 0;
    size_t n;
    struct job **running = running_jobs(&n);
    for (size_t g = 0; g < cur.n_gpus; g++)
        for (size_t k = 0; k < cur.gpus[g].n_procs; k++) {
            long long pid = cur.gpus[g].procs[k].pid;
            if (!is_ignored((int)g, pid) && !owner_of(pid, running, n))
                m |= 1ULL << g;
        }
    free(running);
    return m;
}

/* ---- polling ---- */

/* What the scheduler depends on: which GPUs exist, their memory and their processes. */
static bool differs(const struct gpu_set *a, const struct gpu_set *b)
{
    if (a->n_gpus != b->n_gpus)
        return true;
    for (size_t i = 0; i < a->n_gpus; i++) {
        const struct gpu_info *x = &a->gpus[i], *y = &b->gpus[i];
        if (x->memory_total_mib != y->memory_total_mib ||
            x->memory_used_mib != y->memory_used_mib || x->n_procs != y->n_procs ||
            x->lost != y->lost)
            return true;
        for (size_t k = 0; k < x->n_procs; k++)
            if (x->procs[k].pid != y->procs[k].pid)
                return true;
    }
    return false;
}

bool gpu_refresh(void)
{
    if (!nv)
        return false;
    struct gpu_set next = {0};
    char *err = NULL;
    if (nvml_read(nv, &next, &err) < 0) {
        log_warn("reading GPUs failed: %s", err);
        free(err);
        gpu_set_free(&next);
        return false;
    }
    next.simulated = nvml_is_simulated(nv);
    bool changed = differs(&cur, &next);
    gpu_set_free(&cur);
    cur = next;
    resolve_visible();
    prune_ignored();
    uint64_t um = compute_unmanaged();
    changed |= um != unmanaged;
    unmanaged = um;
    return changed;
}

static void poll_cb(void *arg)
{
    (void)arg;
    if (gpu_refresh())
        jobs_mark_dirty();
    poll_timer = loop_add_timer((double)gd.cfg.gpu_poll_interval_secs, poll_cb, NULL);
}

/* ---- start ---- */

static int load_allowed(const char *flag_gpus, char **err)
{
    char *saved = NULL;
    if (flag_gpus) {
        /* A --gpus given at start wins over an earlier runtime setting. */
        if (parse_gpu_list(flag_gpus, &allowed, err) < 0)
            return -1;
        allowed_source = "flag";
        store_begin(gd.store);
        store_set_setting(gd.store, SETTING_ALLOWED, NULL);
        return 0;
    }
    if (store_get_setting(gd.store, SETTING_ALLOWED, &saved) == 0 && saved) {
        int r = parse_gpu_list(saved, &allowed, err);
        free(saved);
        allowed_source = "runtime";
        return r;
    }
    if (gd.cfg.gpus && strcmp(gd.cfg.gpus, "all") != 0) {
        if (parse_gpu_list(gd.cfg.gpus, &allowed, err) < 0)
            return -1;
        allowed_source = "config";
    }
    return 0;
}

int gpu_start(const char *simulate, const char *flag_gpus, char **err)
{
    const char *env_visible = getenv("CUDA_VISIBLE_DEVICES");
    if (env_visible) {
        visible_spec = xstrdup(env_visible);
        visible = 0; /* resolved once the GPUs are read */
    }
    if (load_allowed(flag_gpus, err) < 0)
        return -1;
    char *library = NULL;
    if (simulate) {
        library = setup_simulation(simulate, err);
        if (!library)
            return -1;
    } else if (gd.cfg.nvml_library && !(getenv("GFLOW_NVML_LIBRARY") &&
                                          *getenv("GFLOW_NVML_LIBRARY"))) {
        /* The environment wins over the config file, as for every other setting. */
        library = xstrdup(gd.cfg.nvml_library);
    }
    char *why = NULL;
    nv = nvml_open(library, &why);
    free(library);
    if (!nv) {
        no_gpus = why;
        log_info("%s", no_gpus);
    } else {
        gpu_refresh();
        log_info("%zu GPU%s%s", cur.n_gpus, cur.n_gpus == 1 ? "" : "s",
                 cur.simulated ? " (simulated)" : "");
        poll_timer = loop_add_timer((double)gd.cfg.gpu_poll_interval_secs, poll_cb, NULL);
    }
    return 0;
}

void gpu_stop(void)
{
    loop_cancel_timer(poll_timer);
    poll_timer = NULL;
    nvml_close(nv);
    nv = NULL;
    gpu_set_free(&cur);
    free(no_gpus);
    no_gpus = NULL;
    free(visible_spec);
    visible_spec = NULL;
    free(ignored);
    ignored = NULL;
    n_ignored = 0;
}

const struct gpu_set *gpu_current(void)
{
    return &cur;
}

static uint64_t present_mask(void)
{
    return cur.n_gpus >= 64 ? ALL_GPUS : (1ULL << cur.n_gpus) - 1;
}

uint64_t gpu_allowed(void)
{
    return allowed & visible & present_mask();
}

const char *gpu_error(void)
{
    return no_gpus;
}

uint64_t gpu_visible(void)
{
    return visible & present_mask();
}

uint64_t gpu_unmanaged(void)
{
    return unmanaged;
}

/* ---- runtime controls ---- */

json_t *gpu_allowed_json(void)
{
    json_t *list = json_array();
    for (size_t i = 0; i < cur.n_gpus; i++)
        if (gpu_allowed() & (1ULL << i))
            json_array_append_new(list, json_integer((json_int_t)i));
    return json_pack("{s:o, s:s}", "allowed", list, "source", allowed_source);
}

int gpu_set_allowed(const char *spec, char **err)
{
    uint64_t m;
    if (parse_gpu_list(spec, &m, err) < 0)
        return -1;
    if (m != ALL_GPUS && (m & ~present_mask())) {
        *err = xasprintf("no GPU %s on this machine (it has %zu)", spec, cur.n_gpus);
        return -1;
    }
    if (m != ALL_GPUS && !(m & gpu_visible())) {
        *err = xasprintf("GPUs %s are outside the daemon's CUDA_VISIBLE_DEVICES (%s): no job "
                         "could use them", spec, visible_spec ? visible_spec : "");
        return -1;
    }
    if (store_begin(gd.store) < 0 ||
        store_set_setting(gd.store, SETTING_ALLOWED, m == ALL_GPUS ? NULL : spec) < 0) {
        *err = xasprintf("cannot store the setting: %s", store_error(gd.store));
        return -1;
    }
    allowed = m;
    allowed_source = m == ALL_GPUS ? "all" : "runtime";
    jobs_mark_dirty();
    return 0;
}

json_t *gpu_ignored_json(void)
{
    prune_ignored();
    json_t *list = json_array();
    for (size_t i = 0; i < n_ignored; i++)
        json_array_append_new(list, json_pack("{s:i, s:I}", "gpu", ignored[i].gpu, "pid",
                                              (json_int_t)ignored[i].pid));
    return json_pack("{s:o}", "ignored", list);
}

int gpu_ignore(int gpu, long long pid, char **err)
{
    if (gpu < 0 || (size_t)gpu >= cur.n_gpus) {
        *err = xasprintf("no GPU %d on this machine", gpu);
        return -1;
    }
    int64_t start = proc_start_time((pid_t)pid);
    if (start < 0) {
        *err = xasprintf("no process %lld", pid);
        return -1;
    }
    if (!is_ignored(gpu, pid)) {
        ignored = xrealloc(ignored, (n_ignored + 1) * sizeof(*ignored));
        ignored[n_ignored++] = (struct ignored){gpu, pid, start};
    }
    unmanaged = compute_unmanaged();
    jobs_mark_dirty();
    return 0;
}

int gpu_unignore(int gpu, long long pid, char **err)
{
    for (size_t i = 0; i < n_ignored; i++) {
        if (ignored[i].gpu == gpu && ignored[i].pid == pid) {
            ignored[i] = ignored[--n_ignored];
            unmanaged = compute_unmanaged();
            jobs_mark_dirty();
            return 0;
        }
    }
    *err = xasprintf("process %lld on GPU %d is not ignored", pid, gpu);
    return -1;
}

/* ---- status ---- */

static const char *const link_names[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "?"};

static json_t *known_int(long long v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

/* Command line of pid (NULs as spaces), owner and age, for outside processes. */
static void describe_process(long long pid, json_t *o)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%lld/cmdline", pid);
    size_t len = 0;
    char *cmd = read_file(path, &len);
    if (cmd) {
        for (size_t i = 0; i + 1 < len; i++)
            if (!cmd[i])
                cmd[i] = ' ';
        if (len > 200)
            cmd[200] = '\0';
    }
    json_object_set_new(o, "command", cmd ? json_string(cmd) : json_null());
    free(cmd);
    snprintf(path, sizeof(path), "/proc/%lld", pid);
    struct stat st;
    if (stat(path, &st) == 0) {
        struct passwd *pw = getpwuid(st.st_uid);
        json_object_set_new(o, "user", pw ? json_string(pw->pw_name)
                                          : json_sprintf("%u", (unsigned)st.st_uid));
    }
    int64_t start = proc_start_time((pid_t)pid);
    double uptime = 0;
    char *up = read_file("/proc/uptime", NULL);
    if (up)
        uptime = strtod(up, NULL);
    free(up);
    if (start >= 0 && uptime > 0)
        json_object_set_new(o, "age_secs",
                            json_integer((json_int_t)(uptime - (double)start / sysconf(_SC_CLK_TCK))));
}

static bool has_gpu(const char *gpu_ids, size_t g)
{
    return g < GPUINFO_MAX_GPUS && (gpu_ids_mask(gpu_ids) & (1ULL << g));
}

static json_t *gpu_json(size_t g, struct job **running, size_t n)
{
    const struct gpu_info *info = &cur.gpus[g];
    json_t *jobs = json_array(), *procs = json_array();
    bool shared_only = true;
    for (size_t i = 0; i < n; i++) {
        if (has_gpu(running[i]->gpu_ids, g)) {
            json_array_append_new(jobs, json_integer(running[i]->id));
            shared_only &= running[i]->shared;
        }
    }
    for (size_t k = 0; k < info->n_procs; k++) {
        const struct gpu_proc *p = &info->procs[k];
        struct job *owner = owner_of(p->pid, running, n);
        json_t *o = json_pack("{s:I, s:o, s:o, s:b}", "pid", (json_int_t)p->pid,
                              "used_memory_mib", known_int(p->used_mib), "job",
                              owner ? json_integer(owner->id) : json_null(), "ignored",
                              is_ignored((int)g, p->pid));
        /* A job's process on a GPU it was not given is worth telling. */
        if (owner && !has_gpu(owner->gpu_ids, g))
            json_object_set_new(o, "foreign", json_true());
        describe_process(p->pid, o);
        json_array_append_new(procs, o);
    }
    const char *state = "idle";
    const char *reason = NULL;
    if (info->lost) {
        state = "lost";
        reason = "the GPU does not answer (NVML: GPU is lost)";
    } else if (json_array_size(jobs)) { /* even where no longer allowed: it is in use */
        state = shared_only ? "shared" : "busy";
    } else if (!(gpu_allowed() & (1ULL << g))) {
        state = "restricted";
        reason = (visible & (1ULL << g)) ? "not in the allowed GPUs (gctl set-gpus)"
                                         : "not in the daemon's CUDA_VISIBLE_DEVICES";
    } else if (unmanaged & (1ULL << g)) {
        state = "unmanaged";
        reason = "compute processes outside gflow";
    }
    return json_pack("{s:i, s:s, s:s, s:s, s:I, s:o, s:o, s:o, s:o, s:o, s:b, s:s, s:o, s:o, "
                     "s:o}",
                     "index", (int)g, "uuid", info->uuid, "name", info->name, "pci_bus_id",
                     info->pci_bus_id, "memory_total_mib", (json_int_t)info->memory_total_mib,
                     "memory_used_mib", known_int(info->memory_used_mib), "utilization_gpu",
                     known_int(info->utilization_gpu), "temperature_c",
                     known_int(info->temperature_c), "power_w", known_int(info->power_w),
                     "numa_node", known_int(info->numa_node), "lost", info->lost, "state",
                     state, "jobs", jobs, "reason", reason ? json_string(reason) : json_null(),
                     "processes", procs);
}

static json_t *topology_json(void)
{
    if (!cur.link)
        return json_null();
    json_t *rows = json_array();
    for (size_t i = 0; i < cur.n_gpus; i++) {
        json_t *row = json_array();
        for (size_t j = 0; j < cur.n_gpus; j++) {
            enum gpu_link l = cur.link[i * cur.n_gpus + j];
            json_array_append_new(row, json_string(link_names[l <= GPU_LINK_UNKNOWN ? l
                                                                                  : GPU_LINK_UNKNOWN]));
        }
        json_array_append_new(rows, row);
    }
    return rows;
}

json_t *gpu_status_json(void)
{
    json_t *gpus = json_array();
    size_t n;
    struct job **running = running_jobs(&n);
    for (size_t g = 0; g < cur.n_gpus; g++)
        json_array_append_new(gpus, gpu_json(g, running, n));
    free(running);
    json_t *allowed_obj = gpu_allowed_json();
    json_t *allowed_list = json_incref(json_object_get(allowed_obj, "allowed"));
    json_decref(allowed_obj);
    json_t *o = json_pack("{s:b, s:s, s:o, s:o, s:s, s:o, s:o}", "simulated", cur.simulated,
                          "driver_version", cur.driver_version, "error",
                          no_gpus ? json_string(no_gpus) : json_null(), "allowed", allowed_list,
                          "strategy", gd.cfg.gpu_allocation_strategy, "gpus", gpus, "topology",
                          topology_json());
    return o;
}

char *gpu_uuids_of(const char *gpu_ids)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t g = 0; g < cur.n_gpus; g++)
        if (has_gpu(gpu_ids, g))
            strbuf_addf(&sb, "%s%s", sb.len ? "," : "", cur.gpus[g].uuid);
    return strbuf_detach(&sb);
}

json_t *gpu_foreign_json(int64_t job_id, const char *gpu_ids)
{
    json_t *list = json_array();
    size_t n;
    struct job **running = running_jobs(&n);
    for (size_t g = 0; g < cur.n_gpus; g++) {
        if (has_gpu(gpu_ids, g))
            continue;
        for (size_t k = 0; k < cur.gpus[g].n_procs; k++) {
            struct job *owner = owner_of(cur.gpus[g].procs[k].pid, running, n);
            if (owner && owner->id == job_id) {
                json_array_append_new(list, json_integer((json_int_t)g));
                break;
            }
        }
    }
    free(running);
    return list;
}

json_t *gpu_detail_json(const char *gpu_ids)
{
    json_t *list = json_array();
    for (size_t g = 0; g < cur.n_gpus; g++)
        if (has_gpu(gpu_ids, g))
            json_array_append_new(list, json_pack("{s:i, s:s, s:s}", "index", (int)g, "uuid",
                                                  cur.gpus[g].uuid, "pci_bus_id",
                                                  cur.gpus[g].pci_bus_id));
    return list;
}
