/* gpuinfo: the GPU state shared by the loader, the scheduler and ginfo. */
#include "gpuinfo.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void gpu_set_free(struct gpu_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_gpus; i++)
        free(s->gpus[i].procs);
    free(s->gpus);
    for (size_t i = 0; i < s->n_migs; i++)
        free(s->migs[i].procs);
    free(s->migs);
    free(s->link);
    free(s->nvlinks);
    free(s->error);
    memset(s, 0, sizeof(*s));
}

char *gpu_mask_format(uint64_t mask)
{
    char buf[GPUINFO_MAX_GPUS * 3 + 1];
    size_t n = 0;
    for (int i = 0; i < GPUINFO_MAX_GPUS; i++) {
        if (!(mask & (1ULL << i)))
            continue;
        if (n)
            buf[n++] = ',';
        if (i >= 10)
            buf[n++] = (char)('0' + i / 10);
        buf[n++] = (char)('0' + i % 10);
    }
    buf[n] = '\0';
    return xstrdup(buf);
}

uint64_t gpu_mask_parse(const char *text)
{
    uint64_t mask = 0;
    for (const char *p = text; p && *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) {
            p++; /* a separator */
            continue;
        }
        if (v >= 0 && v < GPUINFO_MAX_GPUS)
            mask |= 1ULL << v;
        p = end;
    }
    return mask;
}

bool gpu_mig_profile_valid(const char *s)
{
    /* <N>g.<M>gb, then optional +suffix of letters and dots. */
    const char *p = s;
    int digits = 0;
    while (isdigit((unsigned char)*p) && digits < 4)
        p++, digits++;
    if (digits == 0 || digits > 3 || *s == '0' || *p++ != 'g' || *p++ != '.')
        return false;
    const char *m = p;
    digits = 0;
    while (isdigit((unsigned char)*p) && digits < 4)
        p++, digits++;
    if (digits == 0 || digits > 3 || *m == '0' || strncmp(p, "gb", 2) != 0)
        return false;
    p += 2;
    if (*p == '+') {
        p++;
        if (!*p)
            return false;
        for (; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '+')
                return false;
    }
    return *p == '\0' && strlen(s) < GPUINFO_MIG_PROFILE_MAX;
}

void gpu_mig_profile_from_name(const char *name, char *out, size_t cap)
{
    const char *last = strrchr(name, ' ');
    last = last ? last + 1 : name;
    if (gpu_mig_profile_valid(last))
        snprintf(out, cap, "%s", last);
    else if (cap)
        out[0] = '\0';
}

/* Whether instance m can be given out: its GPU is there and not lost, and NVML reports
 * the instance's own state (its memory and processes). The GPU's other readings do not
 * matter: without root the driver refuses a MIG GPU's own process list, not its
 * instances'. */
bool gpu_mig_usable(const struct gpu_set *set, const struct gpu_mig *m)
{
    if (m->unavailable[0])
        return false;
    for (size_t k = 0; k < set->n_gpus; k++)
        if (set->gpus[k].index == m->parent)
            return !set->gpus[k].lost;
    return false;
}
