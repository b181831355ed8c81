/* gpu_report: the GPUs as the API shows them (GET /v1/gpus, the GPUs of a job in
 * GET /v1/jobs/{id}): state, metrics, the jobs and processes on each GPU, topology.
 * Read-only over gpu.c's state and the running jobs it is given. */
#include "gpu_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "procinfo.h"
#include "userdb.h"
#include "util.h"

static const char *const link_names[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "?"};

static json_t *known_int(long long v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

/* Command line of pid (NULs as spaces), owner and age, for outside processes. */
static void describe_process(struct userdb *users, long long pid, json_t *o)
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
        /* Off the loop (userdb.h): a name not known yet is the uid, as for no user. */
        struct userdb_user u = {0};
        bool named = userdb_uid(users, st.st_uid, 0, &u, NULL) == USERDB_FOUND;
        json_object_set_new(o, "user",
                            named ? json_string(u.name) : json_sprintf("%u", (unsigned)st.st_uid));
        userdb_user_clear(&u);
    }
    int64_t start = proc_start_time((pid_t)pid);
    double uptime = 0;
    char *up = read_file("/proc/uptime", NULL);
    if (up)
        uptime = strtod(up, NULL);
    free(up);
    if (start >= 0 && uptime > 0)
        json_object_set_new(
            o, "age_secs",
            json_integer((json_int_t)(uptime - (double)start / sysconf(_SC_CLK_TCK))));
}

static bool has_gpu(uint64_t mask, size_t g)
{
    return g < GPUINFO_MAX_GPUS && (mask & (1ULL << g));
}

static json_t *gpu_json(const struct gpus *gs, size_t g, struct job *const *running, size_t n,
                        struct userdb *users)
{
    const struct gpu_info *info = &gpu_current(gs)->gpus[g];
    json_t *jobs = json_array(), *procs = json_array();
    bool shared_only = true;
    for (size_t i = 0; i < n; i++) {
        if (has_gpu(running[i]->gpu_mask, g)) {
            json_array_append_new(jobs, json_integer(running[i]->id));
            shared_only &= running[i]->shared;
        }
    }
    for (size_t k = 0; k < info->n_procs; k++) {
        const struct gpu_proc *p = &info->procs[k];
        struct job *owner = gpu_process_owner(p->pid, running, n);
        json_t *o =
            json_pack("{s:I, s:o, s:o, s:b}", "pid", (json_int_t)p->pid, "used_memory_mib",
                      known_int(p->used_mib), "job", owner ? json_integer(owner->id) : json_null(),
                      "ignored", gpu_is_ignored(gs, (int)g, p->pid));
        /* A job's process on a GPU it was not given is worth telling. */
        if (owner && !has_gpu(owner->gpu_mask, g))
            json_object_set_new(o, "foreign", json_true());
        describe_process(users, p->pid, o);
        json_array_append_new(procs, o);
    }
    const char *state = "idle";
    const char *reason = gpu_unavailable_reason(gs, g);
    if (reason) {
        state = "unavailable"; /* a read hangs (no GPU can be seen), or a stray */
    } else if (!gpu_info_usable(info)) {
        /* Whatever else it shows, gflow cannot know its state and gives it to no job. */
        state = "unavailable";
        reason = info->unavailable[0] ? info->unavailable : "NVML: GPU is lost";
    } else if ((reason = gpu_health_block(gs, g, &state))) {
        /* drained (its jobs run out), or compute mode Prohibited */
    } else if (json_array_size(jobs)) { /* even where no longer allowed: it is in use */
        state = shared_only ? "shared" : "busy";
    } else if (!(gpu_allowed(gs) & (1ULL << g))) {
        state = "restricted";
        reason = (gpu_visible(gs) & (1ULL << g)) ? gpu_allowed_reason(gs)
                                                 : "not in the daemon's CUDA_VISIBLE_DEVICES";
    } else if ((reason = gpu_unowned_reason(gs, g))) {
        state = "unmanaged";
    } else if (gpu_unmanaged(gs) & (1ULL << g)) {
        state = "unmanaged";
        reason = "compute processes outside gflow";
    }
    json_t *o = json_pack(
        "{s:i, s:s, s:s, s:s, s:I, s:o, s:o, s:o, s:o, s:o, s:b, s:s, s:o, s:o, "
        "s:o}",
        "index", (int)g, "uuid", info->uuid, "name", info->name, "pci_bus_id", info->pci_bus_id,
        "memory_total_mib", (json_int_t)info->memory_total_mib, "memory_used_mib",
        known_int(info->memory_used_mib), "utilization_gpu", known_int(info->utilization_gpu),
        "temperature_c", known_int(info->temperature_c), "power_w", known_int(info->power_w),
        "numa_node", known_int(info->numa_node), "lost", info->lost, "state", state, "jobs", jobs,
        "reason", reason ? json_string(reason) : json_null(), "processes", procs);
    json_object_set_new(o, "memory_free_mib", known_int(info->memory_free_mib));
    json_object_set_new(o, "minor", known_int(info->minor));
    json_object_set_new(o, "health", gpu_health_json(gs, g));
    const char *drained = gpu_drained(gs, g);
    json_object_set_new(o, "drained", drained ? json_string(drained) : json_null());
    json_object_set_new(o, "stray_jobs", gpu_stray_jobs_json(gs, (int)g, -1));
    /* Its local CPUs, as Cpus_allowed_list writes them (what --cpus-per-gpu and
     * daemon.cpu_affinity pin to); null when NVML does not say. */
    char *cpus = info->cpus_known ? cpumask_format(&info->cpus) : NULL;
    json_object_set_new(o, "cpus", cpus ? json_string(cpus) : json_null());
    free(cpus);
    return o;
}

static json_t *topology_json(const struct gpu_set *cur)
{
    if (!cur->link)
        return json_null();
    json_t *rows = json_array();
    for (size_t i = 0; i < cur->n_gpus; i++) {
        json_t *row = json_array();
        for (size_t j = 0; j < cur->n_gpus; j++) {
            enum gpu_link l = cur->link[i * cur->n_gpus + j];
            int links = cur->nvlinks ? cur->nvlinks[i * cur->n_gpus + j] : 0;
            if (i != j && links > 0) /* "NV18", as nvidia-smi topo -m shows NVLink */
                json_array_append_new(row, json_sprintf("NV%d", links));
            else
                json_array_append_new(
                    row, json_string(link_names[l <= GPU_LINK_UNKNOWN ? l : GPU_LINK_UNKNOWN]));
        }
        json_array_append_new(rows, row);
    }
    return rows;
}

json_t *gpu_report_status(const struct gpus *gs, struct job *const *running, size_t n,
                          const char *strategy, struct userdb *users)
{
    const struct gpu_set *cur = gpu_current(gs);
    json_t *gpus = json_array();
    for (size_t g = 0; g < cur->n_gpus; g++) {
        json_t *o = gpu_json(gs, g, running, n, users);
        gpu_report_mig(gs, g, running, n, o);
        json_array_append_new(gpus, o);
    }
    json_t *allowed_obj = gpu_allowed_json(gs);
    json_t *allowed_list = json_incref(json_object_get(allowed_obj, "allowed"));
    json_decref(allowed_obj);
    return json_pack("{s:b, s:s, s:o, s:o, s:s, s:o, s:o}", "simulated", cur->simulated,
                     "driver_version", cur->driver_version, "error",
                     gpu_error(gs) ? json_string(gpu_error(gs)) : json_null(), "allowed",
                     allowed_list, "strategy", strategy, "gpus", gpus, "topology",
                     topology_json(cur));
}

json_t *gpu_report_foreign(const struct gpus *gs, int64_t job_id, uint64_t mask,
                           struct job *const *running, size_t n)
{
    const struct gpu_set *cur = gpu_current(gs);
    json_t *list = json_array();
    for (size_t g = 0; g < cur->n_gpus; g++) {
        if (has_gpu(mask, g))
            continue;
        for (size_t k = 0; k < cur->gpus[g].n_procs; k++) {
            struct job *owner = gpu_process_owner(cur->gpus[g].procs[k].pid, running, n);
            if (owner && owner->id == job_id) {
                json_array_append_new(list, json_integer((json_int_t)g));
                break;
            }
        }
    }
    return list;
}

json_t *gpu_report_detail(const struct gpus *gs, uint64_t mask)
{
    const struct gpu_set *cur = gpu_current(gs);
    json_t *list = json_array();
    for (size_t g = 0; g < cur->n_gpus; g++)
        if (has_gpu(mask, g))
            json_array_append_new(list, json_pack("{s:i, s:s, s:s}", "index", (int)g, "uuid",
                                                  cur->gpus[g].uuid, "pci_bus_id",
                                                  cur->gpus[g].pci_bus_id));
    return list;
}
