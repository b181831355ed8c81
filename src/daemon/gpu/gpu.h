/* gpu: the daemon's view of the GPUs. NVML (or the shipped simulator) is read at start
 * and at every poll (serve.c's timer, daemon.gpu_poll_interval_secs) to notice
 * processes outside gflow; a GPU freed by a job is read again at once (the runner).
 *
 * Every NVML call runs on worker threads (gpu_worker.c, one reader per GPU:
 * gpu_readers.c), so a hanging GPU cannot freeze the loop: a read is asked for, and its
 * answer comes back through gpu_fd(), which the loop watches and hands to gpu_collect().
 * A GPU whose call takes longer than daemon.nvml_timeout_secs is unavailable ("NVML: no
 * answer for N s (<call>)") until it answers, the others go on; a hang in the system
 * part (the count) makes every GPU unavailable ("NVML: no answer for N s"). A driver
 * changed under NVML makes every GPU unavailable ("DriverChanged: ...") until NVML,
 * closed and reopened, reads cleanly. NVML that will not open (a driver not loaded yet at boot) is tried
 * again, 1 s doubling up to daemon.nvml_retry_max_secs, and its GPUs are taken up when
 * it answers. Also: whether jobs get GPU indices or UUIDs (daemon.gpu_id_format). Also:
 * which GPUs may be used (flag > runtime setting > config > all, within the daemon's
 * own CUDA_VISIBLE_DEVICES: gpu_allowed.c), outside processes and the ones an admin
 * chose to ignore (gpu_procs.c).
 *
 * GPU masks are by NVML index (bit i: the GPU at position i of the gpu_set, which is
 * its NVML index). The running jobs, whose processes are not outside ones, are passed
 * in where needed: this module knows nothing of the job table. What is shown of the
 * GPUs (GET /v1/gpus, a job's GPUs) is gpu_report.c.
 *
 * The gpu room (src/daemon/gpu/, docs/design.md §3): NVML and its thread, the GPUs'
 * state, their processes, reports and utilisation samples. It may call store/ only. */
#ifndef GFLOWD_GPU_H
#define GFLOWD_GPU_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuinfo.h"
#include "job.h"

struct store;
struct gpus;
struct cudavis;

struct gpu_start_opts {
    const char *simulate;       /* --simulate-gpus N|FILE, NULL if none */
    const char *flag_gpus;      /* --gpus of `gflowd up`, NULL if none */
    const char *config_gpus;    /* daemon.gpus */
    const char *nvml_library;   /* daemon.nvml_library, NULL: the default */
    const char *data_dir;       /* where --simulate-gpus N writes its fixture */
    struct store *store;        /* keeps gctl set-gpus */
    struct job *const *running; /* the running jobs (re-adopted after a restart) */
    size_t n_running;
    const char *gpu_id_format;   /* daemon.gpu_id_format: auto, index, uuid */
    const char *container;       /* daemon.container: auto, yes, no (said in the reason) */
    bool constrain_devices;      /* daemon.constrain_devices: "auto" ids are UUIDs */
    int64_t nvml_timeout_secs;   /* daemon.nvml_timeout_secs */
    int64_t nvml_retry_max_secs; /* daemon.nvml_retry_max_secs */
    int64_t unowned_memory_mib;  /* daemon.unowned_memory_mib; 0: not checked */
    bool off; /* backend slurm: the GPUs are Slurm's, NVML is never opened (0 GPUs here) */
};

/* Starts the NVML worker and waits (at most daemon.nvml_timeout_secs) for the first
 * reading. NVML that does not open is not an error (0 GPUs, the reason kept, tried
 * again later); a bad --simulate-gpus or --gpus is (NULL and *err). */
struct gpus *gpu_start(const struct gpu_start_opts *o, char **err);
void gpu_stop(struct gpus *g);
/* Whether NVML (or the simulator) is open: then the GPUs are worth polling. */
bool gpu_have_nvml(const struct gpus *g);

/* The running jobs changed or the GPUs may have: recomputes which GPUs have outside
 * processes now and asks for the GPUs to be read again (the answer comes through
 * gpu_collect). Returns true if anything the scheduler uses changed already. */
bool gpu_refresh(struct gpus *g, struct job *const *running, size_t n);
/* Readable when the worker has an answer: the loop then calls gpu_collect(). */
int gpu_fd(const struct gpus *g);
/* Takes the worker's answer, if any. True if anything the scheduler uses changed. */
bool gpu_collect(struct gpus *g, struct job *const *running, size_t n);
/* NVML's state in a few words, for gflowd status: "ready", "not ready (nvmlInit
 * failed: Driver Not Loaded); retrying in 8 s, 3 tries so far", "busy: no answer for
 * 12 s". Valid until the next call. */
const char *gpu_nvml_state(const struct gpus *g);
/* Whether the GPUs are yet to come: NVML loads but does not initialise (yet), or has
 * not answered at all. GPU jobs are then accepted and wait instead of being refused. */
bool gpu_pending(const struct gpus *g);
/* Why GPU index cannot be seen now ("NVML: no answer for 12 s", the same with the call
 * its own read hangs in, "DriverChanged: ..."), NULL if it can. Valid until the next
 * call. */
const char *gpu_unavailable_reason(const struct gpus *g, size_t index);
/* The GPUs as the scheduling pass must see them: gpu_current() with every GPU that
 * cannot be seen now (gpu_unavailable_reason) marked unavailable, and its MIG instances
 * (nothing is placed on a GPU we cannot see). */
const struct gpu_set *gpu_schedulable(struct gpus *g);
/* Whether jobs get CUDA_VISIBLE_DEVICES as UUIDs (else NVML indices), and that decision
 * with its reason ("index (auto: NVML and CUDA agree on 4 GPUs)", gpu_ids.c). */
bool gpu_uuid_ids(const struct gpus *g);
const char *gpu_id_format(const struct gpus *g);

const struct gpu_set *gpu_current(const struct gpus *g);
/* How many readings gpu_current() has taken: a new one when this changed. */
uint64_t gpu_reads(const struct gpus *g);
/* "no GPUs: NVML <state>" while NVML is not open, else NULL. Valid until the next call. */
const char *gpu_error(const struct gpus *g);
/* GPUs that may be used now. */
uint64_t gpu_allowed(const struct gpus *g);
/* GPUs the daemon can see at all (its CUDA_VISIBLE_DEVICES): what a job may ever get. */
uint64_t gpu_visible(const struct gpus *g);
/* The daemon's CUDA_VISIBLE_DEVICES as given, NULL if unset. */
const char *gpu_visible_spec(const struct gpus *g);
/* The daemon's CUDA_VISIBLE_DEVICES as CUDA reads it (the GPUs, MIG entries, the line
 * saying what was understood, a warning), NULL while unset or no GPUs were read yet. */
const struct cudavis *gpu_visible_read(const struct gpus *g);
/* GPUs with compute processes that belong to no running job and are not ignored. */
uint64_t gpu_unmanaged(const struct gpus *g);
/* Per GPU (by position): MiB of its memory not free and not used by the running jobs'
 * processes (outside processes, ignored ones too, and the driver's reservation), as of
 * the last read; for the scheduler's shared packing (scheduler_input.outside_mib). */
const int64_t *gpu_outside_mib(const struct gpus *g);

/* MIG instances (bit i: gpu_current()->migs[i]) with compute processes that belong to
 * no running job and are not ignored (an ignore entry for the parent GPU covers them). */
uint64_t gpu_mig_unmanaged(const struct gpus *g);

/* ---- health (gpu_health.c) ----
 * A GPU is drained when NVML reports pending remapped rows, a failed remapping,
 * uncorrectable volatile ECC errors, pages pending retirement, or a fatal Xid (one whose
 * remedy in NVIDIA's Xid catalog is a GPU reset or a reboot: GPU_FATAL_XIDS): its running
 * jobs run out, no job starts on it until an admin resumes it (gctl gpu resume). Drains
 * are kept in the store, by UUID. */
#define GPU_FATAL_XIDS                                                                             \
    {                                                                                              \
        48, 62, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154                                         \
    }

/* The Xid thread's pipe (-1: none); the loop calls gpu_xid_collect when it is readable. */
int gpu_xid_fd(const struct gpus *g);
/* Takes the Xid events: a fatal one drains its GPU and ends the jobs on it (through
 * gpu_take_faults). True if anything the scheduler uses changed. */
bool gpu_xid_collect(struct gpus *g);
/* Why GPU index is drained ("Xid 79", "remapped rows pending"), NULL if it is not. */
const char *gpu_drained(const struct gpus *g, size_t index);
/* GPUs (NVML indices) that take no new job: drained, or compute mode Prohibited. */
uint64_t gpu_closed(const struct gpus *g);
/* GPUs whose compute mode is exclusive (EXCLUSIVE_PROCESS): no shared job. */
uint64_t gpu_no_share(const struct gpus *g);
/* GPUs busy with memory that no listed process uses (over daemon.unowned_memory_mib). */
uint64_t gpu_unowned(const struct gpus *g);
/* The state and reason a GPU's health gives it for GET /v1/gpus ("drained" and the drain
 * reason; "unavailable", "compute mode Prohibited"), NULL when none. */
const char *gpu_health_block(const struct gpus *g, size_t index, const char **state);
/* "Unmanaged: N MiB used by no visible process" for a GPU in gpu_unowned(), else NULL.
 * Valid until the next call. */
const char *gpu_unowned_reason(const struct gpus *g, size_t index);
/* The "health" object of GET /v1/gpus for GPU index. */
json_t *gpu_health_json(const struct gpus *g, size_t index);
/* A failed GPU whose running jobs must end: a fatal Xid or a lost GPU. */
struct gpu_fault {
    int index;
    char what[32]; /* "Xid 79", "GPU lost" */
};
/* The faults to act on now: the fatal Xids since the last call and every lost GPU
 * (again at each call: ending a job twice is a no-op). Returns how many (<= cap). */
size_t gpu_take_faults(struct gpus *g, struct gpu_fault *out, size_t cap);
/* gctl gpu resume: the GPU takes jobs again. When what drained it still holds (rows
 * still pending, say), refused (-1, *err says so and names --force) unless force; a
 * forced resume does not drain again for that same reason. -1 with *err for a GPU that
 * does not exist or is not drained. The caller lets the scheduler know. */
int gpu_resume(struct gpus *g, int index, bool force, char **err);

/* gctl set-gpus: "0,2" or "all"; kept in the database for later restarts. The caller
 * lets the scheduler know (jobs_mark_dirty). 0, or -1 with *err. */
int gpu_set_allowed(struct gpus *g, const char *spec, char **err);
/* The GPUs of mask (not "all") that this machine lacks, as "4,5"; NULL if there are
 * none. Malloc'd. */
char *gpu_missing_list(const struct gpus *g, uint64_t mask);
/* gflowd --gpus: -1 with *err naming the GPUs of the flag that do not exist. */
int gpu_check_flag(const struct gpus *g, char **err);
/* gflowd reload: daemon.gpus changed to spec. Applied (1) unless --gpus or 'gctl
 * set-gpus' chose the GPUs, which win (0); -1 with *err for a bad list. */
int gpu_reload_config(struct gpus *g, const char *spec, char **err);
/* The daemon committed its changes: the allowed set is saved as it is now. */
void gpu_settings_committed(struct gpus *g);
/* The commit was lost: the allowed set goes back to what was last committed. */
void gpu_settings_undo(struct gpus *g);
json_t *gpu_allowed_json(const struct gpus *g);
/* Why an existing GPU is not allowed, naming what chose the allowed set. */
const char *gpu_allowed_reason(const struct gpus *g);
/* gctl gpu-process ignore / unignore; the caller lets the scheduler know. */
int gpu_ignore(struct gpus *g, int gpu, long long pid, struct job *const *running, size_t n,
               char **err);
int gpu_unignore(struct gpus *g, int gpu, long long pid, struct job *const *running, size_t n,
                 char **err);
json_t *gpu_ignored_json(struct gpus *g);
bool gpu_is_ignored(const struct gpus *g, int gpu, long long pid);

/* Strays (gpu_stray.c): a running job's process on a GPU or MIG instance it was not
 * given, as of the last read. */
struct gpu_stray {
    int64_t job_id;
    long long pid; /* as NVML gives it */
    int gpu;       /* the GPU (NVML index), the MIG instance's parent for one */
    int mig;       /* the MIG instance (position in gpu_current()->migs), -1: none */
};
const struct gpu_stray *gpu_strays(const struct gpus *g, size_t *n);
/* daemon.stray (a CONFIG_STRAY_*): "block" and "kill" make a stray's GPU or instance
 * unavailable to other jobs (gpu_schedulable, gpu_unavailable_reason), "warn" does not. */
void gpu_set_stray_mode(struct gpus *g, int mode);
/* Whether some GPU or instance is kept from the other jobs by a stray now. */
bool gpu_strays_block(const struct gpus *g);
/* "Stray (job 5)" when strays keep GPU index (or MIG instance k, by position) from other
 * jobs, else NULL. Valid until the next call. */
const char *gpu_stray_reason(const struct gpus *g, size_t index);
const char *gpu_mig_stray_reason(const struct gpus *g, size_t k);
/* The ids of the jobs with strays on GPU gpu (mig -1) or on MIG instance mig, as a JSON
 * list (GET /v1/gpus' stray_jobs), whatever daemon.stray says. */
json_t *gpu_stray_jobs_json(const struct gpus *g, int gpu, int mig);
/* daemon.host_proc: the host's /proc as mounted here, where NVML's pids are looked up
 * by NSpid when they are not ours (gflowd in a container of its own PID namespace);
 * NULL or "": none (gpu_pidns.c). */
void gpu_set_host_proc(const char *path);

/* The running job that pid belongs to: the job's cgroup holds it, else the job's session
 * (the shim's) does, else its shim is an ancestor; failing those, when daemon.host_proc
 * is set, the process that is pid in the host's namespace, by the same rules. NULL if
 * none. */
struct job *gpu_process_owner(long long pid, struct job *const *running, size_t n);
/* The NVML indices of the GPUs that hold the MIG instances named in uuids
 * ("MIG-a,MIG-b"; NULL: none). */
uint64_t gpu_mig_parents(const struct gpus *g, const char *uuids);
/* The UUIDs of the GPUs in mask, "GPU-a,GPU-b" (caller frees), for a job's environment. */
char *gpu_uuids(const struct gpus *g, uint64_t mask);

#endif
