/* jobenv: the environment a job sees (see jobenv.h). */
#include "jobenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuinfo.h"

static void env_add(struct strbuf *sb, const char *key, const char *value)
{
    strbuf_adds(sb, key);
    strbuf_addc(sb, '=');
    strbuf_adds(sb, value);
    strbuf_addc(sb, '\0');
}

/* Whether the submitter's variable key gives way to one of ours. */
static bool env_overridden(const char *key, bool as_submitter)
{
    static const char *const ours[] = {
        "GFLOW_JOB_ID",        "GFLOW_JOB_NAME",         "GFLOW_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_ID", "CUDA_VISIBLE_DEVICES",   "CUDA_DEVICE_ORDER",
        "GFLOW_GPU_UUIDS",     "NVIDIA_VISIBLE_DEVICES", "PYTHONUNBUFFERED"};
    for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
        if (strcmp(key, ours[i]) == 0)
            return true;
    if (as_submitter)
        return !strcmp(key, "HOME") || !strcmp(key, "USER") || !strcmp(key, "LOGNAME") ||
               !strcmp(key, "SHELL");
    return false;
}

char *jobenv_cuda_devices(uint64_t mask, const char *uuids, bool uuid_format)
{
    if (!mask)
        return xstrdup("");
    return uuid_format ? xstrdup(uuids) : gpu_mask_format(mask);
}

void jobenv_build(const struct job *j, const struct jobenv_input *in, struct strbuf *sb)
{
    bool as_submitter = in->user != NULL;
    const char *key;
    json_t *value;
    json_object_foreach (j->env, key, value) {
        if (json_is_string(value) && !env_overridden(key, as_submitter) && !strchr(key, '='))
            env_add(sb, key, json_string_value(value));
    }
    char id[32];
    snprintf(id, sizeof(id), "%lld", (long long)j->id);
    env_add(sb, "GFLOW_JOB_ID", id);
    env_add(sb, "GFLOW_JOB_NAME", j->name ? j->name : "");
    if (j->array_task >= 0) {
        snprintf(id, sizeof(id), "%lld", (long long)j->array_task);
        env_add(sb, "GFLOW_ARRAY_TASK_ID", id);
        env_add(sb, "SLURM_ARRAY_TASK_ID", id);
    }
    /* MIG instances can only be named by UUID, whatever gpu_id_format says. */
    char *cuda = j->mig_uuids && *j->mig_uuids
                     ? xstrdup(j->mig_uuids)
                     : jobenv_cuda_devices(j->gpu_mask, in->uuids, in->uuid_format);
    env_add(sb, "CUDA_VISIBLE_DEVICES", cuda);
    free(cuda);
    env_add(sb, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    env_add(sb, "GFLOW_GPU_UUIDS", in->uuids);
    env_add(sb, "NVIDIA_VISIBLE_DEVICES", *in->uuids ? in->uuids : "none");
    env_add(sb, "PYTHONUNBUFFERED", "1");
    if (as_submitter) {
        env_add(sb, "HOME", in->home ? in->home : "/");
        env_add(sb, "USER", in->user);
        env_add(sb, "LOGNAME", in->user);
        env_add(sb, "SHELL", in->shell && *in->shell ? in->shell : "/bin/sh");
    }
}
