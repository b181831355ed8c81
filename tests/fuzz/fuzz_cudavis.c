/* fuzz_cudavis: cudavis_parse, the daemon's reading of its own CUDA_VISIBLE_DEVICES. The
 * first byte shapes the machine (low 4 bits: 0-15 GPUs whose UUIDs share prefixes in
 * pairs; bit 4: mixed models; bit 5: CUDA_DEVICE_ORDER=PCI_BUS_ID); the rest is the value.
 *
 * Invariants: only GPUs of the machine are named; every entry taken is a GPU or a MIG
 * entry; the line said starts with the variable's name; a warning only on mixed models
 * without PCI_BUS_ID; an invalid entry appended changes nothing that was taken (the list
 * ends there). No crash, no leak. */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "cudavis.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct gpu_info gpus[16];
    memset(gpus, 0, sizeof(gpus));
    size_t n = data[0] & 15;
    bool mixed = data[0] & 16, pci = data[0] & 32;
    for (size_t i = 0; i < n; i++) {
        gpus[i].index = (int)i;
        snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "GPU-%08zx-0000-4000-8000-%012zx", i / 2, i);
        snprintf(gpus[i].name, sizeof(gpus[i].name), "%s", mixed && i == n - 1 ? "T4" : "A100");
    }
    struct gpu_set set = {.gpus = gpus, .n_gpus = n};
    char *spec = fuzz_cstr(data + 1, size - 1);
    const char *order = pci ? "PCI_BUS_ID" : NULL;

    struct cudavis v;
    cudavis_parse(spec, &set, order, &v);
    FUZZ_CHECK(!(v.mask & ~((1ULL << n) - 1)));
    FUZZ_CHECK(__builtin_popcountll(v.mask) + (int)v.n_mig == v.n_used);
    FUZZ_CHECK(v.understood && strncmp(v.understood, "CUDA_VISIBLE_DEVICES=", 21) == 0);
    FUZZ_CHECK(!v.warning || (mixed && !pci && n > 1));
    for (size_t i = 0; i < v.n_mig; i++)
        FUZZ_CHECK(strncasecmp(v.mig[i], "MIG-", 4) == 0);

    size_t len = strlen(spec);
    char *more = malloc(len + 4);
    if (!more)
        abort();
    memcpy(more, spec, len);
    memcpy(more + len, ",x!", 4);
    struct cudavis w;
    cudavis_parse(more, &set, order, &w);
    FUZZ_CHECK(w.mask == v.mask && w.n_used == v.n_used && w.n_mig == v.n_mig);
    cudavis_free(&w);
    free(more);
    cudavis_free(&v);
    free(spec);
    return 0;
}
