/* gpu_report_mig: the MIG part of GET /v1/gpus and of a job's GPUs (gpu_report.h). */
#include <stdlib.h>
#include <string.h>

#include "gpu_report.h"
#include "util.h"

static json_t *known_mib(long long v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

/* Whether the comma list uuids names uuid. */
static bool names_uuid(const char *uuids, const char *uuid)
{
    size_t len = strlen(uuid);
    for (const char *p = uuids; p && *p;) {
        size_t l = strcspn(p, ",");
        if (l == len && strncmp(p, uuid, len) == 0)
            return true;
        p += l;
        if (*p == ',')
            p++;
    }
    return false;
}

/* unseen: why no GPU can be seen now (a read hangs), else NULL. */
static json_t *instance_json(const struct gpus *gs, size_t k, bool gpu_lost, const char *unseen,
                             struct job *const *running, size_t n)
{
    const struct gpu_mig *m = &gpu_current(gs)->migs[k];
    struct job *holder = NULL;
    for (size_t i = 0; i < n && !holder; i++)
        if (names_uuid(running[i]->mig_uuids, m->uuid))
            holder = running[i];
    json_t *procs = json_array();
    for (size_t i = 0; i < m->n_procs; i++) {
        struct job *owner = gpu_process_owner(m->procs[i].pid, running, n);
        json_array_append_new(procs,
                              json_pack("{s:I, s:o, s:o, s:b}", "pid", (json_int_t)m->procs[i].pid,
                                        "used_memory_mib", known_mib(m->procs[i].used_mib), "job",
                                        owner ? json_integer(owner->id) : json_null(), "ignored",
                                        gpu_is_ignored(gs, m->parent, m->procs[i].pid)));
    }
    const char *state = "idle";
    bool parent_ok = m->parent >= 0 && m->parent < GPUINFO_MAX_GPUS;
    const char *reason = NULL;
    if (!unseen)
        unseen = gpu_mig_stray_reason(gs, k); /* kept from other jobs by a stray */
    if (unseen || gpu_lost || m->unavailable[0]) {
        state = "unavailable";
        reason = unseen ? unseen : m->unavailable[0] ? m->unavailable : "NVML: GPU is lost";
    } else if (holder)
        state = "busy";
    else if (!parent_ok || !(gpu_allowed(gs) & (1ULL << m->parent)))
        state = "restricted";
    else if (k < GPUINFO_MAX_MIGS && (gpu_mig_unmanaged(gs) & (1ULL << k)))
        state = "unmanaged";
    return json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:o, s:s, s:o, s:o, s:o, s:o}", "uuid",
                     m->uuid, "profile", m->profile, "name", m->name, "parent", m->parent, "gi_id",
                     m->gi_id, "ci_id", m->ci_id, "memory_total_mib",
                     (json_int_t)m->memory_total_mib, "memory_used_mib",
                     known_mib(m->memory_used_mib), "state", state, "job",
                     holder ? json_integer(holder->id) : json_null(), "processes", procs, "reason",
                     reason ? json_string(reason) : json_null(), "stray_jobs",
                     gpu_stray_jobs_json(gs, m->parent, (int)k));
}

void gpu_report_mig(const struct gpus *gs, size_t gpu, struct job *const *running, size_t n,
                    json_t *o)
{
    const struct gpu_set *cur = gpu_current(gs);
    const struct gpu_info *info = &cur->gpus[gpu];
    const char *unseen = gpu_unavailable_reason(gs, gpu);
    json_t *list = json_array();
    for (size_t k = 0; k < cur->n_migs; k++)
        if (cur->migs[k].parent == info->index)
            json_array_append_new(list, instance_json(gs, k, info->lost, unseen, running, n));
    /* The jobs holding its instances are the GPU's jobs too. Real drivers list every
     * instance's processes on the parent as well: those are the jobs' own, not foreign. */
    json_t *jobs = json_object_get(o, "jobs");
    for (size_t i = 0; i < n; i++) {
        bool here = false;
        for (size_t k = 0; k < cur->n_migs && !here; k++)
            here = cur->migs[k].parent == info->index &&
                   names_uuid(running[i]->mig_uuids, cur->migs[k].uuid);
        if (!here)
            continue;
        json_array_append_new(jobs, json_integer(running[i]->id));
        size_t pi;
        json_t *p;
        json_array_foreach (json_object_get(o, "processes"), pi, p) {
            json_t *job = json_object_get(p, "job");
            if (json_is_integer(job) && json_integer_value(job) == running[i]->id)
                json_object_del(p, "foreign");
        }
    }
    json_object_set_new(o, "mig_enabled", json_boolean(info->mig_enabled));
    /* A GPU in MIG mode is "mig" even when NVML refuses its own process list (it does
     * without root): its instances have states of their own. */
    bool none = json_array_size(list) == 0;
    if (unseen) {
        /* A read hangs: the GPU keeps its "unavailable" and its instances are too. */
    } else if (info->mig_enabled && !info->lost && !none) {
        json_object_set_new(o, "state", json_string("mig"));
        json_object_set_new(o, "reason", json_string("MIG mode: jobs get its instances (--mig)"));
    } else if (info->mig_enabled && none && gpu_info_usable(info)) {
        json_object_set_new(o, "state", json_string("unavailable"));
        json_object_set_new(o, "reason",
                            json_string("MIG mode is on but the GPU has no MIG instances"));
    }
    json_object_set_new(o, "mig_instances", list);
}

json_t *gpu_report_mig_detail(const struct gpus *gs, const char *uuids)
{
    const struct gpu_set *cur = gpu_current(gs);
    json_t *list = json_array();
    for (size_t k = 0; k < cur->n_migs; k++) {
        const struct gpu_mig *m = &cur->migs[k];
        if (names_uuid(uuids, m->uuid))
            json_array_append_new(list,
                                  json_pack("{s:s, s:s, s:i, s:I, s:o}", "uuid", m->uuid, "profile",
                                            m->profile, "parent", m->parent, "memory_total_mib",
                                            (json_int_t)m->memory_total_mib, "memory_used_mib",
                                            known_mib(m->memory_used_mib)));
    }
    return list;
}
