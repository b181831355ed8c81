/* scheduler_feasible: whether a job's request can ever be met on this machine, checked at
 * submit (scheduler_check_feasible, scheduler.h): the GPUs, their memory, and MIG
 * instances of the profile, among the GPUs the daemon may use. */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static bool index_allowed(int index, uint64_t allowed)
{
    return !allowed || (index >= 0 && index < 64 && (allowed >> index & 1));
}

/* "GPU 2, 5: NVML: GPU is lost; GPU 3: NVML: ..." for the unavailable GPUs among those in
 * `allowed` (one group per reason). Malloc'd. */
static char *unavailable_list(const struct gpu_set *gpus, uint64_t allowed)
{
    struct strbuf sb;
    strbuf_init(&sb);
    bool *done = xcalloc(gpus->n_gpus + 1, sizeof(bool));
    for (size_t i = 0; i < gpus->n_gpus; i++) {
        const struct gpu_info *g = &gpus->gpus[i];
        if (done[i] || gpu_info_usable(g) || !index_allowed(g->index, allowed))
            continue;
        const char *why = g->unavailable[0] ? g->unavailable : "NVML: GPU is lost";
        strbuf_addf(&sb, "%sGPU ", sb.len ? "; " : "");
        bool first = true;
        for (size_t k = i; k < gpus->n_gpus; k++) {
            const struct gpu_info *o = &gpus->gpus[k];
            if (done[k] || gpu_info_usable(o) || !index_allowed(o->index, allowed) ||
                strcmp(o->unavailable[0] ? o->unavailable : "NVML: GPU is lost", why) != 0)
                continue;
            strbuf_addf(&sb, "%s%d", first ? "" : ", ", o->index);
            first = false;
            done[k] = true;
        }
        strbuf_addf(&sb, ": %s", why);
    }
    free(done);
    return strbuf_detach(&sb);
}

/* A MIG job: enough instances of its profile on the usable GPUs a job may get. */
static int mig_check_feasible(const struct job *j, const struct gpu_set *gpus, uint64_t allowed,
                              char **reason)
{
    if (j->gpus > 0) {
        *reason = xstrdup("--mig and --gpus cannot be combined: a job gets either MIG instances "
                          "or whole GPUs");
        return -1;
    }
    int n = 0, n_unusable = 0;
    const char *why = NULL;
    struct strbuf there;
    strbuf_init(&there);
    for (size_t i = 0; gpus && i < gpus->n_migs; i++) {
        const struct gpu_mig *m = &gpus->migs[i];
        if (!index_allowed(m->parent, allowed))
            continue;
        bool match = strcmp(m->profile, j->mig_profile) == 0;
        if (!gpu_mig_usable(gpus, m)) { /* does not count, as an unavailable GPU */
            n_unusable += match;
            if (match && !why)
                why = m->unavailable[0] ? m->unavailable : "NVML: GPU is lost";
            continue;
        }
        n += match;
        /* Each profile once, in the order the instances come. */
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(gpus->migs[k].profile, m->profile) == 0 &&
                   index_allowed(gpus->migs[k].parent, allowed) &&
                   gpu_mig_usable(gpus, &gpus->migs[k]);
        if (!seen && m->profile[0])
            strbuf_addf(&there, "%s%s", there.len ? ", " : "", m->profile);
    }
    int rc = 0;
    if (n < j->mig_count && n_unusable > 0) {
        rc = -1;
        *reason = xasprintf("requests %d MIG instance%s of %s but only %d of the %d there are "
                            "usable (%s)",
                            j->mig_count, j->mig_count == 1 ? "" : "s", j->mig_profile, n,
                            n + n_unusable, why);
    } else if (n == 0) {
        rc = -1;
        *reason = there.len ? xasprintf("requests MIG profile %s but this machine has none (MIG "
                                        "profiles here: %s)",
                                        j->mig_profile, there.buf)
                            : xasprintf("requests MIG profile %s but this machine has no MIG "
                                        "instances",
                                        j->mig_profile);
    } else if (j->mig_count > n) {
        rc = -1;
        *reason = xasprintf("requests %d MIG instance%s of %s but this machine has %d",
                            j->mig_count, plural_s(j->mig_count), j->mig_profile, n);
    }
    strbuf_free(&there);
    return rc;
}

int scheduler_check_feasible(const struct job *j, const struct gpu_set *gpus, uint64_t allowed,
                             char **reason)
{
    *reason = NULL;
    if (j->mig_profile)
        return mig_check_feasible(j, gpus, allowed, reason);
    if (j->gpus < 0) {
        *reason = xasprintf("requests %d GPUs", j->gpus);
        return -1;
    }
    if (j->shared && j->gpu_memory_mb <= 0) {
        *reason = xstrdup("a shared job must declare its GPU memory (--gpu-memory)");
        return -1;
    }
    if (j->gpus == 0)
        return 0;
    size_t n_all = gpus ? gpus->n_gpus : 0;
    int n = 0, n_usable = 0, n_mem = 0, n_mig = 0;
    int64_t largest = 0;
    for (size_t i = 0; i < n_all; i++) {
        const struct gpu_info *g = &gpus->gpus[i];
        if (!index_allowed(g->index, allowed))
            continue;
        if (g->mig_enabled) { /* used through its MIG instances only */
            n_mig++;
            continue;
        }
        n++;
        if (!gpu_info_usable(g))
            continue; /* its memory reading is not to be trusted */
        n_usable++;
        if (g->memory_total_mib > largest)
            largest = g->memory_total_mib;
        if (g->memory_total_mib >= j->gpu_memory_mb)
            n_mem++;
    }
    const char *s = j->gpus == 1 ? "" : "s";
    if (n_all == 0) {
        if (gpus && gpus->error)
            *reason = xasprintf("requests %d GPU%s but this machine has none (%s)", j->gpus, s,
                                gpus->error);
        else
            *reason = xasprintf("requests %d GPU%s but this machine has none", j->gpus, s);
        return -1;
    }
    if (j->gpus > n && n_mig > 0) {
        *reason = xasprintf("requests %d GPU%s but this machine has %d without MIG (%d GPU%s in "
                            "MIG mode: ask for instances with --mig PROFILE)",
                            j->gpus, s, n, n_mig, n_mig == 1 ? " is" : "s are");
        return -1;
    }
    if (j->gpus > n) {
        if ((size_t)n == n_all)
            *reason = xasprintf("requests %d GPU%s but this machine has %d", j->gpus, s, n);
        else
            *reason =
                xasprintf("requests %d GPU%s but only %d of this machine's %zu GPUs may be used",
                          j->gpus, s, n, n_all);
        return -1;
    }
    if (j->gpus > n_usable) {
        char *which = unavailable_list(gpus, allowed);
        *reason = xasprintf("requests %d GPU%s but only %d of the %d GPUs are usable (%s)", j->gpus,
                            s, n_usable, n, which);
        free(which);
        return -1;
    }
    if (j->gpu_memory_mb > largest) {
        *reason = xasprintf("needs %lld MiB of GPU memory but the largest GPU has %lld MiB",
                            (long long)j->gpu_memory_mb, (long long)largest);
        return -1;
    }
    if (n_mem < j->gpus) {
        *reason = xasprintf(
            "needs %lld MiB of GPU memory on each of %d GPU%s but only %d GPU%s %s that much",
            (long long)j->gpu_memory_mb, j->gpus, plural_s(j->gpus), n_mem, plural_s(n_mem),
            n_mem == 1 ? "has" : "have");
        return -1;
    }
    return 0;
}
