/* cudavis: the daemon's own CUDA_VISIBLE_DEVICES, read the way the CUDA runtime reads it,
 * so gflowd hands out exactly the GPUs a CUDA program started beside it would see.
 * Pure: works on the spec text, the GPUs NVML reported (a gpu_set) and CUDA_DEVICE_ORDER.
 *
 * CUDA's rules, as followed here:
 *   - comma-separated entries (blanks around an entry are skipped); "" means no devices;
 *   - an entry is an index (a decimal integer below the number of GPUs), a GPU UUID
 *     ("GPU-..." in full or any prefix of it that names exactly one GPU, case-insensitive)
 *     or a MIG instance UUID ("MIG-...");
 *   - the first invalid entry ends the list: it and every entry after it are ignored
 *     (an unknown or ambiguous UUID prefix, an index out of range, an empty entry, any
 *     other text, and a device named a second time are all invalid);
 *   - indices count in PCI bus order (NVML's order) with CUDA_DEVICE_ORDER=PCI_BUS_ID.
 *     With CUDA's default, FASTEST_FIRST, they equal PCI order only when every GPU is the
 *     same model; on mixed models gflowd cannot know CUDA's order, so it reads PCI order
 *     and says so (cudavis.warning).
 * MIG entries are kept as given (cudavis.mig); they are not whole GPUs and add none. */
#ifndef GFLOW_CUDAVIS_H
#define GFLOW_CUDAVIS_H

#include <stddef.h>
#include <stdint.h>

#include "gpuinfo.h"

struct cudavis {
    uint64_t mask; /* the whole GPUs named (bit i: set->gpus[i]) */
    char **mig;    /* the MIG instance UUIDs named, in order */
    size_t n_mig;
    int n_used;       /* entries taken; the rest were ignored */
    char *understood; /* one line for `gflowd status`: the spec and what it means */
    char *warning;    /* NULL, or why index entries may not mean what CUDA means */
};

/* Reads spec (the value of CUDA_VISIBLE_DEVICES, not NULL) against the GPUs of set;
 * device_order is CUDA_DEVICE_ORDER (NULL when unset). Fills *out (free it with
 * cudavis_free); never fails: what CUDA would not take is said in out->understood. */
void cudavis_parse(const char *spec, const struct gpu_set *set, const char *device_order,
                   struct cudavis *out);
void cudavis_free(struct cudavis *v);

#endif
