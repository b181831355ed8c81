/* gpu_procs: the GPUs' compute processes (gpu.h): which running job each belongs to
 * (its cgroup, its session, its ancestry), the GPUs and MIG instances with outside
 * processes, the memory those take, and the ignore list (gctl gpu-process ignore). */
#include "gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exitfile.h"
#include "files.h"
#include "jobcgroup.h"
#include "procinfo.h"
#include "util.h"

bool gpu_is_ignored(const struct gpus *g, int gpu, long long pid)
{
    for (size_t i = 0; i < g->n_ignored; i++)
        if (g->ignored[i].gpu == gpu && g->ignored[i].pid == pid &&
            proc_start_time((pid_t)pid) == g->ignored[i].start)
            return true;
    return false;
}

/* Drops ignore entries whose process has exited. */
void gpu_prune_ignored(struct gpus *g)
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

/* The running job of shim (pid) that pid belongs to, NULL if none: the job, when the
 * shim runs one; when it is a supervisor running several, the one whose marker pid
 * carries (exitfile.h). */
static struct job *owner_by_shim(pid_t pid, pid_t shim, struct job *const *running, size_t n)
{
    struct job *first = NULL;
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (running[i]->shim_pid == shim && count++ == 0)
            first = running[i];
    if (count <= 1)
        return first;
    for (size_t i = 0; i < n; i++) {
        if (running[i]->shim_pid != shim)
            continue;
        char *marker = exitfile_job_marker(shim, running[i]->shim_start, running[i]->id);
        int has = proc_environ_has(pid, marker);
        free(marker);
        if (has == 1)
            return running[i];
    }
    return NULL;
}

/* The owner of pid as our /proc shows it (gpu_process_owner). */
static struct job *owner_here(long long pid, struct job *const *running, size_t n)
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
    if (proc_stat_read((pid_t)pid, &st) == 0 && st.sid > 1 &&
        (owner = owner_by_shim((pid_t)pid, st.sid, running, n)))
        return owner;
    /* Then the ancestry (a job without a cgroup that left the session stays its child). */
    pid_t p = (pid_t)pid;
    for (int depth = 0; p > 1 && depth < 64; depth++) {
        if ((owner = owner_by_shim((pid_t)pid, p, running, n)))
            return owner;
        p = proc_parent(p);
    }
    return NULL;
}

struct job *gpu_process_owner(long long pid, struct job *const *running, size_t n)
{
    struct job *owner = owner_here(pid, running, n);
    if (owner || n == 0)
        return owner;
    /* NVML may give the host's pid (gflowd in a PID namespace of its own). */
    pid_t local = gpu_pidns_local(pid);
    return local > 1 && local != pid ? owner_here(local, running, n) : NULL;
}

uint64_t gpu_compute_unmanaged(const struct gpus *g, struct job *const *running, size_t n)
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
void gpu_compute_outside(struct gpus *g, struct job *const *running, size_t n)
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

uint64_t gpu_compute_mig_unmanaged(const struct gpus *g, struct job *const *running, size_t n)
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

uint64_t gpu_unmanaged(const struct gpus *g)
{
    return g->unmanaged | gpu_unowned(g); /* memory used by no listed process too */
}

uint64_t gpu_mig_unmanaged(const struct gpus *g)
{
    return g->mig_unmanaged;
}

/* ---- the ignore list ---- */

/* Whether NVML's last read lists pid on GPU gpu (or on one of its MIG instances). */
static bool gpu_runs_process(const struct gpu_set *set, int gpu, long long pid)
{
    const struct gpu_info *info = &set->gpus[gpu];
    for (size_t i = 0; i < info->n_procs; i++)
        if (info->procs[i].pid == pid)
            return true;
    for (size_t k = 0; k < set->n_migs; k++) {
        const struct gpu_mig *mig = &set->migs[k];
        for (size_t i = 0; mig->parent == gpu && i < mig->n_procs; i++)
            if (mig->procs[i].pid == pid)
                return true;
    }
    return false;
}

/* Why 'gctl gpu-process ignore' is refused: where the process is, if on another GPU. */
static char *not_on_gpu_error(const struct gpu_set *set, int gpu, long long pid)
{
    struct strbuf others;
    strbuf_init(&others);
    for (size_t k = 0; k < set->n_gpus; k++)
        if ((int)k != gpu && gpu_runs_process(set, (int)k, pid))
            strbuf_addf(&others, "%s%zu", others.len ? "," : "", k);
    char *e;
    if (others.len)
        e = xasprintf("process %lld is not on GPU %d; NVML lists it on GPU %s", pid, gpu,
                      others.buf);
    else
        e = xasprintf("process %lld is not on GPU %d: NVML lists it on no GPU ('ginfo -v' "
                      "shows each GPU's processes; NVML is read every "
                      "daemon.gpu_poll_interval_secs)",
                      pid, gpu);
    strbuf_free(&others);
    return e;
}

json_t *gpu_ignored_json(struct gpus *g)
{
    gpu_prune_ignored(g);
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
    if (!gpu_runs_process(&g->cur, gpu, pid)) {
        *err = not_on_gpu_error(&g->cur, gpu, pid);
        return -1;
    }
    if (!gpu_is_ignored(g, gpu, pid)) {
        g->ignored = xrealloc(g->ignored, (g->n_ignored + 1) * sizeof(*g->ignored));
        g->ignored[g->n_ignored++] = (struct ignored){gpu, pid, start};
    }
    g->unmanaged = gpu_compute_unmanaged(g, running, n);
    g->mig_unmanaged = gpu_compute_mig_unmanaged(g, running, n);
    gpu_compute_strays(g, running, n);
    return 0;
}

int gpu_unignore(struct gpus *g, int gpu, long long pid, struct job *const *running, size_t n,
                 char **err)
{
    for (size_t i = 0; i < g->n_ignored; i++) {
        if (g->ignored[i].gpu == gpu && g->ignored[i].pid == pid) {
            g->ignored[i] = g->ignored[--g->n_ignored];
            g->unmanaged = gpu_compute_unmanaged(g, running, n);
            g->mig_unmanaged = gpu_compute_mig_unmanaged(g, running, n);
            gpu_compute_strays(g, running, n);
            return 0;
        }
    }
    *err = xasprintf("process %lld on GPU %d is not ignored", pid, gpu);
    return -1;
}
