/* gpu_internal: what gpu.h's files share (gpu.c: NVML's life and the GPU table;
 * gpu_allowed.c: which GPUs may be used; gpu_procs.c: the GPUs' processes and the ignore
 * list; gpu_ids.c: gpu_id_format). Not for the rest of the daemon: that is gpu.h. */
#ifndef GFLOWD_GPU_INTERNAL_H
#define GFLOWD_GPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cudacheck.h"
#include "cudavis.h"
#include "gpu.h"
#include "gpu_readers.h"
#include "gpuinfo.h"
#include "job.h"

struct gpu_worker;
struct loop_timer;

#define GPU_MSG_MAX 512
#define ALL_GPUS (~0ULL)

struct ignored {
    int gpu;
    long long pid;
    int64_t start; /* the process's start time: a recycled pid is not ignored */
};

struct gpus {
    bool off;            /* gpu_start_opts.off: NVML is never asked */
    struct store *store; /* where gctl set-gpus is kept */
    struct gpu_set cur;
    uint64_t visible;   /* the daemon's own CUDA_VISIBLE_DEVICES */
    char *visible_spec; /* as given, resolved once the GPUs are known */
    uint64_t allowed;
    const char *allowed_source;
    /* The allowed set as last committed, put back when a commit is lost. */
    uint64_t committed_allowed;
    const char *committed_source;
    uint64_t unmanaged;
    struct ignored *ignored;
    size_t n_ignored;
    struct cudavis visible_read; /* visible_spec as CUDA reads it, once the GPUs are known */
    /* Per GPU: MiB taken by other than the running jobs' processes (gpu_outside_mib). */
    int64_t outside_mib[GPUINFO_MAX_GPUS];

    /* NVML's life (gpu_worker.c makes the calls). */
    struct gpu_worker *worker;
    bool nvml_open;     /* as of the last answer */
    bool lib_found;     /* the library loads (it may still fail to initialise) */
    bool answered;      /* an answer came since start */
    char *open_error;   /* why NVML would not open ("no GPUs: ..."), as logged */
    int open_tries;     /* failed opens in a row */
    double retry_delay; /* the current back-off, seconds */
    double retry_at;    /* monotonic time of the next try; 0: none planned */
    double retry_max;   /* daemon.nvml_retry_max_secs */
    double timeout;     /* daemon.nvml_timeout_secs */
    double asked_at;    /* when the request in progress was made; 0: none */
    bool ask_again;     /* read again once the request in progress is answered */
    uint64_t account;   /* GPUs the running jobs hold: read for their accounting too */
    uint64_t reads;     /* readings taken (gpu_reads) */
    bool overdue;       /* the request in progress is past the timeout */
    struct loop_timer *retry_timer, *overdue_timer;
    struct gpu_set blind; /* cur with the GPUs not seen now unavailable (gpu_schedulable) */
    /* Per GPU: its reader hangs since (monotonic) in fn; since 0: it answers. */
    struct gpu_reader_hang hang[GPUINFO_MAX_GPUS];
    /* "DriverChanged: ..." from the driver changing under NVML until NVML is reopened
     * and read cleanly: every GPU is unavailable meanwhile. NULL otherwise. */
    char *driver_changed;
    bool uuid_ids;       /* CUDA_VISIBLE_DEVICES by UUID (gpu_id_format) */
    char *id_format_why; /* the decision and why, for gflowd status */
    /* gpu_ids.c: "auto" that depends on CUDA's view, the check and its last answer. */
    bool cuda_wanted;
    struct cudacheck *cuda;
    struct cudacheck_view cuda_view;
    char *container_note; /* "; gflowd runs in a container: ..." or NULL */
    double cuda_started;  /* when the check in progress started (monotonic) */
    bool cuda_news;       /* it answered since the last gpu_collect */
    bool cuda_held;       /* gpu_ids_holding() as of the last gpu_collect */
    /* What gpu_error, gpu_nvml_state and gpu_unavailable_reason return. */
    char text[3][GPU_MSG_MAX];
    uint64_t mig_unmanaged;          /* by position in cur.migs */
    struct gpu_health_state *health; /* gpu_health.c */
    /* Strays as of the last read (gpu_stray.c), and daemon.stray. */
    struct gpu_stray *strays;
    size_t n_strays, cap_strays;
    int stray_mode;
    char stray_text[GPU_MSG_MAX]; /* what gpu_stray_reason returns */
};

/* gpu_allowed.c. The allowed set at start: --gpus, else gctl set-gpus as saved, else
 * daemon.gpus. 0, or -1 with *err. */
int gpu_load_allowed(struct gpus *g, const char *flag_gpus, const char *config_gpus, char **err);
/* Reads the daemon's CUDA_VISIBLE_DEVICES again against the GPUs just read (g->visible). */
void gpu_resolve_visible(struct gpus *g);

/* gpu_ids.c. The decision as far as the settings make it, at start. */
void gpu_ids_start(struct gpus *g, const char *format, const char *container, bool constrain);
/* NVML (re)opened: CUDA's view is asked for again (when "auto" depends on it). */
void gpu_ids_nvml_ready(struct gpus *g);
/* The GPUs were read again: the decision against them and CUDA's last answer. */
void gpu_ids_reread(struct gpus *g);
/* Whether GPU jobs wait for CUDA's answer: for the first CUDACHECK_HOLD seconds of a
 * check (NVML came up while the daemon runs), so that they get indices where those
 * are right; after that they get UUIDs until it answers. */
bool gpu_ids_holding(const struct gpus *g);
/* At start: waits at most secs for CUDA's answer. */
void gpu_ids_wait(struct gpus *g, double secs);
void gpu_ids_stop(struct gpus *g);
/* gpu_health.c. Starts the Xid thread on library and loads the drains from the store. */
void gpu_health_start(struct gpus *g, const char *library, int64_t unowned_memory_mib);
void gpu_health_stop(struct gpus *g);
/* After a reading: drains the GPUs whose health says so, computes unowned memory.
 * True if anything the scheduler uses changed. */
bool gpu_health_assess(struct gpus *g);

/* gpu_procs.c. Forgets ignore entries whose process is gone. */
void gpu_prune_ignored(struct gpus *g);
/* The GPUs with outside processes, not ignored (g->unmanaged is not changed). */
uint64_t gpu_compute_unmanaged(const struct gpus *g, struct job *const *running, size_t n);
/* Fills g->outside_mib from the GPUs as last read. */
void gpu_compute_outside(struct gpus *g, struct job *const *running, size_t n);
/* The MIG instances with outside processes, not ignored (by position in g->cur.migs). */
uint64_t gpu_compute_mig_unmanaged(const struct gpus *g, struct job *const *running, size_t n);

/* gpu_pidns.c. The pid in our namespace of the process that is host in the host's
 * (daemon.host_proc), -1 when none is known. */
pid_t gpu_pidns_local(long long host);

/* gpu_stray.c. Finds the strays of the GPUs as last read; whether they changed. */
bool gpu_compute_strays(struct gpus *g, struct job *const *running, size_t n);

#endif
