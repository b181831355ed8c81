/* cudavis: CUDA_VISIBLE_DEVICES read as the CUDA runtime reads it (see cudavis.h). Issue 9,
 * defect 9: the old reader skipped invalid entries ("1,foo,3" gave 1 and 3, CUDA stops at
 * foo), took a UUID prefix for every GPU it matched, and dropped MIG entries silently. */
#include "cudavis.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* The GPU entry names (position), or -1 with *why saying why it is not one. */
static int entry_gpu(const char *e, const struct gpu_set *set, char **why, bool *is_index)
{
    *is_index = false;
    if (!*e) {
        *why = xstrdup("an empty entry");
        return -1;
    }
    if (isdigit((unsigned char)*e)) {
        char *end;
        errno = 0;
        unsigned long i = strtoul(e, &end, 10);
        if (*end) {
            *why = xasprintf("'%s' is no GPU index or UUID", e);
            return -1;
        }
        if (errno || i >= set->n_gpus) {
            *why = xasprintf("'%s' is no GPU (there %s %zu)", e, set->n_gpus == 1 ? "is" : "are",
                             set->n_gpus);
            return -1;
        }
        *is_index = true;
        return (int)i;
    }
    if (strncasecmp(e, "GPU-", 4) != 0) {
        *why = xasprintf("'%s' is no GPU index or UUID", e);
        return -1;
    }
    /* A full UUID or a prefix that names one GPU only. */
    size_t len = strlen(e);
    int found = -1, matches = 0;
    for (size_t k = 0; k < set->n_gpus && k < GPUINFO_MAX_GPUS; k++)
        if (strncasecmp(set->gpus[k].uuid, e, len) == 0) {
            found = (int)k;
            matches++;
        }
    if (matches == 1)
        return found;
    *why = matches ? xasprintf("'%s' matches %d GPUs", e, matches)
                   : xasprintf("'%s' matches no GPU", e);
    return -1;
}

/* Whether the GPUs are not all the same model (then FASTEST_FIRST may reorder them). */
static bool mixed_models(const struct gpu_set *set)
{
    for (size_t k = 1; k < set->n_gpus; k++)
        if (strcmp(set->gpus[k].name, set->gpus[0].name) != 0)
            return true;
    return false;
}

void cudavis_parse(const char *spec, const struct gpu_set *set, const char *device_order,
                   struct cudavis *out)
{
    memset(out, 0, sizeof(*out));
    struct strbuf gpus, stop;
    strbuf_init(&gpus);
    strbuf_init(&stop);
    int n_gpus = 0;
    bool index_used = false;
    /* "" names no device; otherwise every comma starts an entry, empty ones included. */
    const char *p = spec;
    for (bool more = *spec != '\0'; more;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        while (n && isspace((unsigned char)*p)) {
            p++;
            n--;
        }
        while (n && isspace((unsigned char)p[n - 1]))
            n--;
        char *e = xmalloc(n + 1);
        memcpy(e, p, n);
        e[n] = '\0';
        char *why = NULL;
        if (strncasecmp(e, "MIG-", 4) == 0) {
            for (size_t i = 0; i < out->n_mig && !why; i++)
                if (strcasecmp(out->mig[i], e) == 0)
                    why = xasprintf("'%s' names a MIG instance a second time", e);
            if (!why) {
                out->mig = xrealloc(out->mig, (out->n_mig + 1) * sizeof(*out->mig));
                out->mig[out->n_mig++] = e;
                out->n_used++;
                e = NULL;
            }
        } else {
            bool is_index;
            int g = entry_gpu(e, set, &why, &is_index);
            if (g >= 0 && (out->mask & (1ULL << g)))
                why = xasprintf("'%s' names GPU %d a second time", e, g);
            else if (g >= 0) {
                out->mask |= 1ULL << g;
                out->n_used++;
                index_used |= is_index;
                strbuf_addf(&gpus, "%s%d", n_gpus++ ? ", " : "", g);
            }
        }
        free(e);
        if (why) {
            strbuf_addf(&stop, " (%s: it and the entries after it are ignored, as CUDA does)", why);
            free(why);
            break;
        }
        more = comma != NULL;
        p = more ? comma + 1 : p;
    }

    struct strbuf u;
    strbuf_init(&u);
    strbuf_addf(&u, "CUDA_VISIBLE_DEVICES=%s: ", *spec ? spec : "\"\"");
    if (n_gpus)
        strbuf_addf(&u, "GPU%s %s", n_gpus > 1 ? "s" : "", gpus.buf);
    else if (!out->n_mig)
        strbuf_adds(&u, *spec ? "no GPUs" : "no GPUs (an empty value hides them all)");
    if (out->n_mig) {
        strbuf_addf(&u, "%sMIG instance%s ", n_gpus ? "; " : "", out->n_mig > 1 ? "s" : "");
        for (size_t i = 0; i < out->n_mig; i++)
            strbuf_addf(&u, "%s%s", i ? ", " : "", out->mig[i]);
        strbuf_adds(&u, " (MIG instances are not yet whole GPUs: no job is placed on them)");
    }
    if (stop.len)
        strbuf_adds(&u, stop.buf);
    out->understood = strbuf_detach(&u);
    strbuf_free(&gpus);
    strbuf_free(&stop);

    bool pci_order = device_order && strcmp(device_order, "PCI_BUS_ID") == 0;
    if (index_used && !pci_order && mixed_models(set))
        out->warning = xstrdup(
            "CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs are of different models: CUDA "
            "numbers them fastest first, which gflowd cannot know, so it reads the indices in "
            "PCI bus order; set CUDA_DEVICE_ORDER=PCI_BUS_ID or use UUIDs");
}

void cudavis_free(struct cudavis *v)
{
    for (size_t i = 0; i < v->n_mig; i++)
        free(v->mig[i]);
    free(v->mig);
    free(v->understood);
    free(v->warning);
    memset(v, 0, sizeof(*v));
}
