/* gpuinfo: what gflow knows about the machine's GPUs, as read from NVML (or the
 * simulator) by the daemon's loader and consumed by the scheduling pass, ginfo and the
 * API. Pure data: no NVML types here. A metric the driver does not report is marked
 * unknown (the *_known flags, or -1), never shown as 0. */
#ifndef GFLOW_GPUINFO_H
#define GFLOW_GPUINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpumask.h"

#define GPUINFO_MAX_GPUS 64

/* A process on a GPU (compute, graphics or MPS; one entry per pid). */
struct gpu_proc {
    int64_t pid;
    int64_t used_mib; /* -1: unknown (NVML reports ~0ULL when it cannot tell) */
    /* Its SM utilisation since the GPU's previous read (nvmlDeviceGetProcessUtilization;
     * read only for GPUs that hold a job, for its accounting). */
    bool sm_util_known;
    int sm_util;
};

/* Interconnect between two GPUs, closest first (the order nvidia-smi topo -m uses).
 * gpu_set.link holds the PCIe level (SINGLE..SYSTEM) and never NVLINK: NVLink is kept
 * apart in gpu_set.nvlinks, so that both facts count (NVLINK stays for callers that know
 * only NVLink, and sorts before every PCIe level). */
enum gpu_link {
    GPU_LINK_SELF,       /* X */
    GPU_LINK_NVLINK,     /* NV# */
    GPU_LINK_SINGLE,     /* PIX: one PCIe switch */
    GPU_LINK_MULTIPLE,   /* PXB: several PCIe switches */
    GPU_LINK_HOSTBRIDGE, /* PHB */
    GPU_LINK_NODE,       /* NODE: same NUMA node, across host bridges */
    GPU_LINK_SYSTEM,     /* SYS: across NUMA nodes */
    GPU_LINK_UNKNOWN
};

/* A MIG instance (a GPU instance with its compute instance): a device of its own. */
#define GPUINFO_MAX_MIGS 64
#define GPUINFO_MIG_PROFILE_MAX 32
struct gpu_mig {
    int parent;                            /* NVML index of its GPU */
    char profile[GPUINFO_MIG_PROFILE_MAX]; /* "1g.18gb", from the device name */
    char uuid[96];                         /* "MIG-..." */
    char name[96];                         /* "NVIDIA H100 80GB HBM3 MIG 1g.18gb" */
    int gi_id, ci_id;                      /* GPU / compute instance ids, -1: unknown */
    int64_t memory_total_mib;
    int64_t memory_used_mib; /* -1: unknown */
    struct gpu_proc *procs;
    size_t n_procs;
    /* Why the instance's state cannot be known ("NVML: <error> (<function>)", e.g. its
     * process list without root); "" when it can. Such an instance is never given out. */
    char unavailable[160];
};

/* What NVML tells of a GPU's health (nvml_health.c). -1: unknown (the call is missing
 * or answers NOT_SUPPORTED, as on boards without ECC), never 0. */
struct gpu_health {
    bool read;            /* false: not read (the GPU's read stopped before): every field unknown */
    int64_t ecc_volatile; /* uncorrectable ECC errors since the driver loaded */
    int64_t ecc_aggregate; /* ... over the board's life */
    int64_t retired_pages; /* both causes */
    int retired_pending;   /* 0/1: pages wait for retirement (a reset) */
    int remap_pending;     /* 0/1: rows wait for remapping (a reset) */
    int remap_failed;      /* 0/1: a remapping failed */
    int64_t remap_corr;    /* rows remapped for correctable errors */
    int64_t remap_unc;     /* ... for uncorrectable ones */
    int64_t throttle;      /* clocks event reasons (NVML_CLOCKS_EVENT_*) */
    int compute_mode;      /* nvmlComputeMode_t */
};

struct gpu_info {
    int index; /* NVML index */
    char uuid[96];
    char name[96];
    char pci_bus_id[32]; /* "00000000:3B:00.0" */
    int64_t memory_total_mib;
    int64_t memory_used_mib; /* -1: unknown */
    int utilization_gpu;     /* percent, -1: unknown */
    int temperature_c;       /* -1: unknown */
    int power_w;             /* -1: unknown */
    int numa_node;           /* -1: unknown */
    /* The GPU's local CPUs (nvmlDeviceGetCpuAffinity: its NUMA node's); cpus_known false:
     * not reported (the call is missing, unsupported, or answered no CPU). */
    struct cpumask cpus;
    bool cpus_known;
    struct gpu_proc *procs;
    size_t n_procs;
    bool lost; /* NVML answered GPU_IS_LOST (the GPU fell off the bus); implies unavailable */
    /* NVML's free memory (excludes the driver's reservation), -1: unknown. */
    int64_t memory_free_mib;
    int minor; /* the /dev/nvidia<minor> node (nvmlDeviceGetMinorNumber), -1: unknown */
    /* Why the GPU's state cannot be known, "NVML: <error> (<function>)"; "" when it can.
     * An unavailable GPU is never given to a job and does not count at submit. */
    char unavailable[160];
    /* MIG mode is on: the GPU is used through its instances (gpu_set.migs), never
     * whole; without instances it cannot be used at all. */
    bool mig_enabled;
    /* A call answered LIB_RM_VERSION_MISMATCH: the driver changed under the loaded NVML
     * (the loader then reopens NVML: every GPU is unavailable meanwhile). */
    bool version_mismatch;
    struct gpu_health health;
    /* Read only while a job holds the GPU (its accounting, gpuacct.h): the energy counter
     * (nvmlDeviceGetTotalEnergyConsumption, mJ since the driver loaded). */
    bool energy_known;
    int64_t energy_mj;
    bool accounted; /* those readings were asked for this read */
};

/* Whether the GPU's state is known well enough to give it to a job. */
static inline bool gpu_info_usable(const struct gpu_info *g)
{
    return !g->lost && !g->unavailable[0];
}

struct gpu_set {
    struct gpu_info *gpus;
    size_t n_gpus;
    /* link[i * n_gpus + j]: the PCIe level between gpus[i] and gpus[j]
     * (nvmlDeviceGetTopologyCommonAncestor); NULL when unknown. */
    enum gpu_link *link;
    char driver_version[64];
    bool simulated; /* read from libgflow-nvml-sim.so */
    char *error;    /* why there are no GPUs ("no GPUs: <reason>"), NULL if fine */
    /* nvlinks[i * n_gpus + j]: NVLinks joining gpus[i] and gpus[j] (through NVSwitches:
     * the links of the GPU to the switches), 0 none; NULL when unknown. */
    int *nvlinks;
    /* The MIG instances of the MIG-enabled GPUs, grouped by parent in NVML order. A
     * job's instances are named by UUID (positions change when instances are
     * reconfigured); masks over positions in this array are for one pass only. */
    struct gpu_mig *migs;
    size_t n_migs;
};

/* Whether MIG instance m of set can be given out: its GPU is there and not lost, and
 * NVML reports the instance's own state. */
bool gpu_mig_usable(const struct gpu_set *set, const struct gpu_mig *m);

void gpu_set_free(struct gpu_set *s);

/* The MIG profile in a MIG device's name: the last word when it looks like one
 * ("NVIDIA A100-SXM4-80GB MIG 1g.10gb" -> "1g.10gb"). Writes "" when there is none. */
void gpu_mig_profile_from_name(const char *name, char *out, size_t cap);
/* Whether s is a MIG profile as nvidia-smi names them: "<N>g.<M>gb", optionally with
 * "+me" or similar suffixes after a '+' ("1g.10gb+me"); N and M are 1..999. */
bool gpu_mig_profile_valid(const char *s);

/* A set of GPUs by NVML index (bit i: GPU i) in its text form, the one of the API, the
 * database and CUDA_VISIBLE_DEVICES: "0,2" (malloc'd; "" for none). */
char *gpu_mask_format(uint64_t mask);
/* That text back into a mask (indices 0..63; anything else is skipped). */
uint64_t gpu_mask_parse(const char *text);

#endif
