/* job: the job model shared by the daemon, the CLI and the tests: states and their
 * transitions, the job record, and its JSON form (the one documented in docs/api.md).
 *
 * Fields for later capabilities (GPUs, memory, dependencies, arrays, retries) are part of
 * the record and the database already so that nothing has to be migrated when their
 * issue is built; unused ones stay at their zero value. */
#ifndef GFLOW_JOB_H
#define GFLOW_JOB_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

enum job_state {
    JOB_QUEUED,    /* PD */
    JOB_HELD,      /* H  */
    JOB_RUNNING,   /* R  */
    JOB_FINISHED,  /* CD */
    JOB_FAILED,    /* F  */
    JOB_CANCELLED, /* CA */
    JOB_TIMEOUT,   /* TO */
    JOB_STATE_COUNT
};

const char *job_state_short(enum job_state s); /* "PD", "H", "R", "CD", "F", "CA", "TO" */
const char *job_state_name(enum job_state s);  /* "Queued", "Hold", "Running", ... */
/* Accepts the short code or the long name, any case. 0, or -1 if unknown. */
int job_state_parse(const char *s, enum job_state *out);
bool job_state_is_terminal(enum job_state s);
bool job_state_is_active(enum job_state s); /* PD, H or R */
/* Whether the state machine allows from -> to (PD->H, H->PD, PD->R, PD->CA, H->CA,
 * R->CD/F/CA/TO, and R->PD for a launch that never happened). */
bool job_transition_allowed(enum job_state from, enum job_state to);
/* "CG" or "Cancelling" (any case): the display state of a running job whose cancel has
 * been asked (job_is_cancelling). job_state_parse reads it as R: nothing stored has it. */
bool job_state_is_cancelling_name(const char *s);

#define JOB_PRIORITY_DEFAULT 10
#define JOB_PRIORITY_MAX 255
/* --cpus-per-gpu at most (the CPUs a cpumask can name: src/core/cpumask.h). */
#define JOB_CPUS_PER_GPU_MAX 1024

/* A job name: 1 to JOB_NAME_MAX bytes, no control characters. */
#define JOB_NAME_MAX 200
bool job_name_valid(const char *name);
/* name + suffix made a valid name, for the names gflow makes up (NAME_<task>): control characters of name become '_' and name is
 * cut (not inside a UTF-8 sequence) so that the whole fits JOB_NAME_MAX; an empty name
 * becomes "job". suffix must be short and valid. Caller frees. */
char *job_name_fit(const char *name, const char *suffix);
/* The name of a job submitted without one, as gflow names it: "gjob-<id>" (the daemon
 * gives it once the job has its id: job_name_default). Caller frees. */
char *job_default_name(int64_t id);
/* Whether name is job id's default name (a redo or a retry, a new id, gets its own). */
bool job_name_is_default(const char *name, int64_t id);

/* Why a job is in its state (ended, held, or waiting on a failed dependency): a code,
 * the job it names (DependencyFailed) and free text (LaunchFailed, ShimLost,
 * PrologFailed, EpilogFailed). The text form ("DependencyFailed:5", "LaunchFailed:
 * cannot chdir to /x: ...") exists only at the edges: the API, the CLI's display, old
 * databases. */
enum job_reason { /* the values are stored: append only */
                  JOB_REASON_NONE,
                  JOB_REASON_CANCELLED_BY_USER, /* CancelledByUser */
                  JOB_REASON_TIME_LIMIT,        /* TimeLimit */
                  JOB_REASON_NON_ZERO_EXIT,     /* NonZeroExitCode */
                  JOB_REASON_SIGNAL,            /* Signal */
                  JOB_REASON_OUT_OF_MEMORY,     /* OutOfMemory */
                  JOB_REASON_LAUNCH_FAILED, /* LaunchFailed: <detail> (the job could not be started) */
                  JOB_REASON_SHIM_LOST,     /* ShimLost: <detail> (its supervisor vanished) */
                  JOB_REASON_DEPENDENCY_FAILED, /* DependencyFailed:<job> */
                  JOB_REASON_HELD_BY_USER,      /* JobHeldUser */
                  JOB_REASON_OTHER,             /* <detail>: text from elsewhere, kept as it is */
                  JOB_REASON_GPU_FAULT, /* GpuFault (<detail>): its GPU failed ("Xid 79", "GPU lost") */
                  JOB_REASON_GPU_STRAY, /* GpuStray: ended for a process on a GPU not its
                                         * own (daemon.stray = "kill") */
                  /* PrologFailed: <detail>: the [hooks] pre command failed, the job never ran */
                  JOB_REASON_PROLOG_FAILED,
                  /* EpilogFailed: <detail>: the [hooks] post command failed (exit code kept) */
                  JOB_REASON_EPILOG_FAILED,
                  JOB_REASON_COUNT
};
/* "CancelledByUser", ... ("" for NONE and OTHER). */
const char *job_reason_name(enum job_reason r);
/* The text form of a reason: "TimeLimit", "DependencyFailed:5", "LaunchFailed: why";
 * NULL for NONE. Caller frees. */
char *job_reason_text(enum job_reason r, int64_t job, const char *detail);
/* The same text appended to sb (nothing for NONE): no allocation for a listing's rows. */
struct strbuf;
void job_reason_append(struct strbuf *sb, enum job_reason r, int64_t job, const char *detail);
/* Reads a text form back (an API reply, a row of an old database): *job and *detail
 * (malloc'd, NULL when none) as they fit the code. Unknown text is OTHER with the text
 * as detail; NULL or "" is NONE. */
enum job_reason job_reason_parse(const char *text, int64_t *job, char **detail);
/* The same, *detail pointing into text (the end of it), without an allocation. */
enum job_reason job_reason_parse_in(const char *text, int64_t *job, const char **detail);

/* Why a job ended or is being ended (recorded before signalling, so a restarted
 * daemon knows whether a dying job was cancelled or timed out). */
enum job_end_request {
    JOB_END_NONE,
    JOB_END_CANCEL,
    JOB_END_TIMEOUT,
    JOB_END_PREEMPT,
    JOB_END_GPU_FAULT,
    JOB_END_STRAY, /* daemon.stray = "kill": it ends F GpuStray */
};
/* JOB_END_GPU_FAULT (stored as 4): a GPU of the job failed (a fatal Xid, the GPU fell
 * off the bus); the job's reason holds GpuFault and what happened while it ends. It
 * ends F GpuFault (<what>), or goes back to PD when it was submitted with --requeue. */
/* JOB_END_PREEMPT (stored as 3): the job is being stopped to make room for a higher
 * priority job (preempted_by); once it has ended it goes back to PD with the same id. */

/* Dependencies: a job may wait for earlier jobs. afterok: the job finished (CD);
 * afterany: it ended in any state; afternotok: it failed, timed out or was cancelled
 * (F, TO, CA). */
enum job_dep_kind { JOB_DEP_AFTEROK, JOB_DEP_AFTERANY, JOB_DEP_AFTERNOTOK };
/* Where one dependency stands: its job is still active (PENDING), it ended so that the
 * dependency is met (MET), or it ended so that it never can be (NEVER). */
enum job_dep_status { JOB_DEP_PENDING, JOB_DEP_MET, JOB_DEP_NEVER };
struct job_dep {
    int64_t id;
    enum job_dep_kind kind;
    enum job_dep_status status; /* kept by the daemon; not stored */
};
/* The whole of a job's dependencies: WAIT (some still pending), READY (may run), or
 * FAILED (can never be met: the job is cancelled unless auto_cancel is off). */
enum job_deps_outcome { JOB_DEPS_WAIT, JOB_DEPS_READY, JOB_DEPS_FAILED };

const char *job_dep_kind_name(enum job_dep_kind k);            /* "afterok", ... */
int job_dep_kind_parse(const char *s, enum job_dep_kind *out); /* 0 or -1 */
/* The kind of a "depends_on" entry of the API ({"id": N, "kind": "afterany"}): afterok
 * when it names none or one not known. */
enum job_dep_kind job_dep_kind_of_json(const json_t *entry);
/* The status of a dependency of kind k whose job is in state s. */
enum job_dep_status job_dep_status_for(enum job_dep_kind k, enum job_state s);

/* A submission group (an array, a sweep, a batch): the daemon keeps one per group with
 * active jobs. max_concurrent (0 = no limit) caps how many of its jobs run at once;
 * running counts its R jobs (kept by the daemon); pass_epoch/pass_started are the
 * scheduling pass's scratch (jobs of the group it starts). */
struct job_group {
    int64_t id;
    int64_t max_concurrent;
    int64_t running;
    uint64_t pass_epoch;
    int64_t pass_started;
};

struct quota_usage; /* quota.h */

/* A job's live records that the daemon keeps for its scheduling pass and that core reads
 * (the pass in scheduler*.c and quota.c, the begin heap, the codec's max_concurrent):
 * set by the daemon (or by a test or the replay), never stored, not copied by job_dup,
 * pointing at what others own. */
struct job_sched_state {
    struct job_group *group; /* the daemon's record of group_id (NULL: none) */
    /* What the job's user and project use (quota.h; NULL: none), which the pass checks
     * their quotas against. */
    struct quota_usage *quota_user, *quota_project;
    /* 1 + the job's position in the scheduler_begin_heap (a queued job whose begin_time
     * is to come), 0: not there. */
    size_t begin_heap_pos;
    /* The job waits for its dependencies (kept out of the scheduling queue; a pass skips
     * it). */
    bool deps_blocked;
    /* The job waits for its user's lookup (UserLookup; jobs_user_wait): kept out of the
     * queue until an answer comes (jobs_users_answered). */
    bool user_wait;
};

/* The daemon's bookkeeping of a job in its table. Core never reads it; it is never
 * stored, job_dup does not copy it and job_clear does not free it (the daemon frees
 * dependents, jobs.c). */
struct job_daemon_state {
    void *runtime;       /* the per-run state (runner.c) while the job runs */
    int64_t *dependents; /* the active jobs that depend on this one */
    size_t n_dependents, cap_dependents;
};

struct job {
    int64_t id;
    char *name;
    char *user; /* submitter's login name */
    uint32_t uid, gid;
    enum job_state state;
    int priority;       /* 0..255, higher first */
    int64_t time_limit; /* seconds; 0 = none */

    /* What to run: exactly one of command / script is set. */
    char *command;     /* shell command line, run by /bin/bash -c */
    char *script;      /* script text stored with the job (not kept in daemon memory) */
    char *script_path; /* where the script came from, for display ("-" for stdin) */
    char *workdir;
    json_t *env; /* object name -> value; not kept in daemon memory */
    /* A sweep's job (payload too, like script and env): its parameter values (object
     * name -> string, in the sweep's order; NULL: not from a sweep) and the unsubstituted
     * templates they fill (command or script; name only with --name-template). */
    json_t *params;
    char *command_template;
    char *script_template;
    char *name_template;

    double submit_time, start_time, end_time; /* unix seconds; 0 = not yet */

    /* Outcome. exit_code is -1 until known; signal 0 = not killed by a signal; oom
     * (with the flags at the end). */
    int exit_code;
    int signal;
    /* Why it ended (terminal), was held, or waits on a failed dependency; persisted.
     * reason_job: the job a DependencyFailed names; reason_detail: the text of a
     * LaunchFailed or ShimLost (NULL: none). Set with job_set_reason. */
    enum job_reason reason;
    enum job_end_request end_request;
    int64_t reason_job;
    char *reason_detail;
    const char *wait_reason; /* why a PD job waits, set by the scheduling pass (static) */
    /* When a PD job is expected to start (unix seconds; 0 = unknown), set by a pass with
     * backfill (a greedy pass leaves it as it is; leaving the queue clears it); not
     * stored. */
    double expected_start;
    /* A queued or held job's effective priority (fairshare.h), set by the daemon when it
     * lists jobs; < 0: not known (other states, jobs read from the store). Not stored. */
    double effective_priority;

    /* The supervising shim while running. */
    int64_t shim_pid;
    int64_t shim_start; /* /proc start time of shim_pid, guards against pid reuse */
    int64_t max_rss_kb;
    int64_t log_lost_bytes; /* output the log could not take (a full filesystem) */
    /* Its process seen on a GPU it was not given, and what gflow did ("process 1234 on
     * GPU 1, not the job's (GPU 0); GPU 1 blocked for others"); NULL: never. */
    char *stray;
    /* What the backend changed of what was asked (the slurm backend's time limit
     * rounded up to whole minutes); NULL: nothing. */
    char *backend_note;
    /* A failed job's class from how it ended and its log's tail (triage.h: "CudaOOM",
     * "PythonException: ValueError"), shown as its reason, and the log line that showed
     * it; NULL: none (yet: the daemon reads the log after the job has ended). */
    char *failure_class;
    char *failure_line;

    /* Resources, groups and retries: the scheduling pass places the job by its GPUs
     * (shared, with the flags at the end, and gpu_memory_mb on shared GPUs) and memory,
     * the shim enforces memory_mb and runs gpus_per_task copies, a group's
     * max_concurrent caps its jobs, and a failed job with retries left is submitted
     * again as its next attempt. */
    int gpus;              /* GPUs requested */
    int gpus_per_task;     /* 1: one copy of the command per GPU (torchrun style) */
    uint64_t gpu_mask;     /* the GPUs it holds while running, by NVML index; 0: none */
    int64_t memory_mb;     /* host memory limit; 0 = none */
    int64_t gpu_memory_mb; /* per-GPU memory; 0 = none */
    int64_t group_id;      /* submission group (arrays, sweeps); 0 = none */
    int64_t array_task;    /* -1 = not an array task */
    int max_retries;
    int attempt;      /* 1 for the first run */
    int64_t retry_of; /* previous attempt's id; 0 = none */
    /* CPU pinning (--cpus-per-gpu, daemon.cpu_affinity): cpus_per_gpu CPUs near each GPU
     * (0: none asked); cpus, the CPUs the job was pinned to when it started ("0-3,8";
     * NULL: not pinned), cpus_far of them not local to its GPUs (NVML did not say, or
     * they have fewer than asked). */
    int cpus_per_gpu; /* 0..JOB_CPUS_PER_GPU_MAX */
    char *cpus;
    int cpus_far; /* how many of cpus are not local to its GPUs */
    /* GPU accounting (core/gpuacct.h), -1 unknown: the most memory one of its GPUs held
     * (MiB), energy (Wh); utilisation mean and peak (percent) and whether it sat on its
     * GPUs (1/0) are below, in the flags' padding. Kept while it runs (the runner),
     * stored when it ends. */
    int32_t gpu_mem_peak_mb; /* 2 PiB at most */
    double energy_wh;

    /* The conda environment the job's shell activates (gflow-shim --conda-env); NULL:
     * none. */
    char *conda_env;
    /* Slurm's --signal: send warn_signal (0 = none) warn_secs seconds before the time
     * limit; warn_main_only ("B:", with the flags at the end) to the job's main
     * processes only. */
    int warn_signal;
    /* The umask the job runs with: the submitter's, as gbatch captured it (0 to 0777);
     * -1: none was given (jobs of earlier versions, API clients that leave it out),
     * and the job runs with 0077, gflowd's own. */
    int umask;
    int64_t warn_secs;
    /* --begin: the job does not start before this unix time (0 = no such wait). */
    double begin_time;

    /* gflow's bookkeeping options: project (-P; NULL: none), which quotas, fairshare
     * and the lists' filters go by; notify_email (--notify-email, the addresses joined
     * by ','; NULL: none) and notify_on (--notify-on, event names joined by ','; NULL:
     * none), the mail the notifier sends (ops/notify.c). Only stored and shown: nice
     * (the --nice value given; gflow treats it as the priority, which gbatch sets too;
     * 0: not given) and auto_close (--auto-close, with the flags at the end: gflow closes
     * the job's tmux session; we have none). */
    char *project;
    char *notify_email;
    char *notify_on;
    int nice;

    /* Preemption (gbatch --requeue): requeue (a flag at the end) says the job may be
     * stopped for a job of much higher priority and queued again (same id);
     * requeue_count is how many times that happened; preempted_by is the job it was
     * (last) stopped for (0: never). */
    int requeue_count;
    int64_t preempted_by;

    /* Dependencies (on earlier jobs; at most one entry per id and kind). deps_any and
     * auto_cancel are flags at the end. */
    struct job_dep *deps;
    size_t n_deps;

    /* The slurm backend's job id of a job handed to Slurm: > 0 known, 0 not (yet)
     * known, -1 sbatch is running for it (stored as 0). Stored (slurm_id) once sbatch
     * has answered; the comment tag (slurmspec.h) finds a job whose id was not committed.
     * backend_reason: while Slurm has not started the R job, why ("Slurm: Priority",
     * ...; NULL: running there, or no backend); the job is then shown as PD. Stored. */
    int64_t backend_id;
    char *backend_reason;

    struct job_sched_state sched;   /* what the daemon keeps for the pass (above) */
    struct job_daemon_state daemon; /* the daemon's own bookkeeping (above) */

    /* MIG (--mig PROFILE[:N]): the job asks for mig_count instances of the MIG profile
     * mig_profile ("1g.18gb"; NULL: not a MIG job, and then gpus may be asked instead).
     * mig_uuids: the instances it holds while running, "MIG-a,MIG-b" (NULL: none);
     * stored, so a restarted daemon knows them even if instance positions moved. */
    char *mig_profile;
    char *mig_uuids;
    int mig_count;
    int16_t gpu_util_mean, gpu_util_peak; /* GPU accounting, above */

    /* The flags, together at the end so that they share words instead of each being
     * padded to one (the daemon keeps every queued job). */
    bool oom;            /* the job was killed for exceeding its memory limit */
    bool shared;         /* may share its GPUs with other shared jobs */
    bool warn_main_only; /* --signal B: */
    bool auto_close;     /* --auto-close */
    bool requeue;        /* --requeue: may be preempted and queued again */
    bool pty;            /* gbatch --pty: on a pseudo-terminal its shim owns (gjob attach) */
    bool deps_any;       /* "any": one met dependency suffices; else all must be met */
    bool auto_cancel;    /* cancel the job when its dependencies can never be met */
    int8_t gpu_idle;     /* GPU accounting, above: 1, 0, -1 unknown */
};

/* The job events a --notify-on may name (gflow's job-scoped ones), NULL-terminated, and
 * those used when --notify-email comes without --notify-on (as gflow). */
extern const char *const job_notify_events[];
#define JOB_NOTIFY_DEFAULT "job_completed,job_failed,job_timeout,job_cancelled"
#define JOB_NOTIFY_EVENT_LIST                                                                      \
    "job_submitted, job_updated, job_started, job_completed, job_failed, job_cancelled, "          \
    "job_timeout, job_held, job_released"
bool job_notify_event_valid(const char *name);
/* The events in job_notify_events' order, as the daemon raises them (notify.c). */
enum job_event {
    JOB_EVENT_SUBMITTED,
    JOB_EVENT_UPDATED,
    JOB_EVENT_STARTED,
    JOB_EVENT_COMPLETED,
    JOB_EVENT_FAILED,
    JOB_EVENT_CANCELLED,
    JOB_EVENT_TIMEOUT,
    JOB_EVENT_HELD,
    JOB_EVENT_RELEASED,
    JOB_EVENT_COUNT,
};
#define JOB_NOTIFY_ALL ((1u << JOB_EVENT_COUNT) - 1)
/* The index of an event name in job_notify_events, or -1. */
int job_notify_event_index(const char *name);
/* gflow's short names for --notify-on: begin, end, fail, timeout (the canonical name, or
 * NULL); "all" is handled by the callers (every event). */
const char *job_notify_event_alias(const char *name);
/* Whether the list notify_on ("job_failed,job_completed") names event. */
bool job_notify_on_has(const char *notify_on, enum job_event event);
/* A --project is at most this many bytes (gflow's limit). */
#define JOB_PROJECT_MAX 64

/* A running job that a cancel is stopping: SIGTERM sent, not yet gone. Shown as the
 * state "CG" (Cancelling, after Slurm's COMPLETING) until it has ended; it is R in the
 * store, holds its GPUs, and a kill for its time limit is not this (it stays R). */
bool job_is_cancelling(const struct job *j);
/* An R job handed to another scheduler (the slurm backend) that has not started it there
 * yet (backend_reason set): shown as PD, with backend_reason as its REASON. */
bool job_backend_pending(const struct job *j);
/* The state a job is shown in: "CG" / "Cancelling" while job_is_cancelling, PD while
 * job_backend_pending, else its state's short code / name. The API's "state" and
 * "state_name" are these. */
const char *job_display_state(const struct job *j);
const char *job_display_state_name(const struct job *j);

/* Sets j's reason (detail copied, may be NULL; job: the job a DependencyFailed names). */
void job_set_reason(struct job *j, enum job_reason r, int64_t job, const char *detail);
/* j's reason as text (job_reason_text), NULL when none. Caller frees. */
char *job_reason_string(const struct job *j);
/* Whether the API shows j's failure_class as its reason: a job that failed by its exit
 * code or a signal, once classified. An OutOfMemory job keeps Slurm's word (its class
 * is HostOOM) and the other reasons (LaunchFailed, GpuFault, ...) say more already. */
bool job_reason_is_class(const struct job *j);

/* Gives j (its id set) its default name when it has none. */
void job_name_default(struct job *j);

void job_init(struct job *j); /* zero values and defaults */
/* Its GPU accounting figures back to unknown (a new run). */
void job_gpu_use_clear(struct job *j);
/* from's figures into to (a running job's so far: the daemon's, not yet stored). */
void job_gpu_use_copy(struct job *to, const struct job *from);
void job_clear(struct job *j); /* frees owned fields, leaves j initialised */
struct job *job_new(void);
void job_free(struct job *j);
/* Deep copy; env, script, params and templates are copied only if with_payload. */
struct job *job_dup(const struct job *j, bool with_payload);

/* The job as JSON for the API (docs/api.md). With full, also command/script text,
 * env, params (null if none) and the log path; log_dir may be NULL. */
json_t *job_to_json(const struct job *j, bool full, const char *log_dir);
/* What job_fields.def says of a field beyond its kinds: a job spec may give it
 * (JOB_SPEC); store_update_job writes its column (JOB_MUT). */
enum job_field_flag { JOB_SPEC = 1, JOB_MUT = 2 };
/* The fields of a job's list form, in the order of its JSON object (job_fields.def). */
enum job_field {
#define JOB_FIELD(ID, ...) JOB_FIELD_##ID,
#define JOB_API_FIELD(ID, ...) JOB_FIELD_##ID,
#include "job_fields.def"
    JOB_FIELD_COUNT
};
/* Each field's name as a constant (JOB_KEY_NICE: the API's, a spec's and the column's
 * name of nice): the code names a field through these, never by a literal of its own. */
#define JOB_FIELD(ID, ...) extern const char JOB_KEY_##ID[];
#define JOB_API_FIELD(ID, ...) extern const char JOB_KEY_##ID[];
#define JOB_PAYLOAD(ID, ...) extern const char JOB_KEY_##ID[];
#include "job_fields.def"
const char *job_field_name(enum job_field f);
int job_field_parse(const char *name); /* -1 if unknown */
/* What people read for a field: gjob show's label (JOB_LABEL_NAME: "Name") and, where
 * it is a gqueue -f column of its own, its header (JOB_HEADER_NAME: "NAME"). */
#define JOB_LABEL(ID, label, header) extern const char JOB_LABEL_##ID[], JOB_HEADER_##ID[];
#include "job_fields.def"

/* The orders a job list can be sorted in (GET /v1/jobs?sort=KEY, gqueue --sort): by
 * the key, then by id, both in the same direction. */
enum job_sort {
    JOB_SORT_ID,
    JOB_SORT_NAME,
    JOB_SORT_STATE,
    JOB_SORT_PRIORITY,
    JOB_SORT_USER,
    JOB_SORT_SUBMIT,
    JOB_SORT_START,
    JOB_SORT_END,
    JOB_SORT_TIME, /* elapsed run time, up to now for a running job */
    JOB_SORT_COUNT
};
/* "id", "name", ... */
const char *job_sort_name(enum job_sort k);
/* 0, or -1 if name is not a sort key. */
int job_sort_parse(const char *name, enum job_sort *out);
/* "id, name, state, priority, user, submit, start, end or time", for messages. */
const char *job_sort_names(void);
/* <0, 0, >0 as a goes before, with, after b in ascending order of key (ties: id). */
int job_sort_compare(const struct job *a, const struct job *b, enum job_sort key, double now);
/* Elapsed run time in seconds: 0 before the start, up to now while running. */
double job_elapsed(const struct job *j, double now);

struct strbuf;
/* Appends the list form of j (job_to_json without full) as JSON text. */
void job_append_json(struct strbuf *sb, const struct job *j);
/* Appends one field as JSON (tsv false) or as TSV text (tab, newline and backslash
 * escaped as \t, \n, \\; null as \N). */
void job_append_field(struct strbuf *sb, const struct job *j, enum job_field f, bool tsv);
/* Reads one TSV line (without its newline; modified in place) written with the given
 * fields into j (initialised here). With borrow, j's strings point into line instead of
 * being copied (cheaper for 10,000 rows): then line must outlive j, and j must not be
 * passed to job_clear. 0, or -1 if the line has too few fields. */
int job_from_tsv(struct job *j, const int *fields, size_t n, char *line, bool borrow);
/* Appends one TSV line with the given fields. */
void job_append_tsv(struct strbuf *sb, const struct job *j, const int *fields, size_t n);
/* Reads a job encoded by job_to_json back (used by the CLI). 0 or -1. */
int job_from_json(const json_t *o, struct job *j);

/* Dependencies as text: "afterok:1,afterany:3" (one entry per dependency, in order);
 * "" for none. */
char *job_deps_format(const struct job *j);
/* Parses that text (also "afterok:1:2", Slurm's form with several ids per kind) into
 * j->deps, replacing any. 0, or -1 if malformed (j->deps left empty). */
int job_deps_parse(struct job *j, const char *s);
/* Adds one dependency unless the same (id, kind) is already there. */
void job_deps_add(struct job *j, int64_t id, enum job_dep_kind kind);
/* Whether j may run, must wait, or never can, from its deps' statuses; with FAILED,
 * *failed_id (may be NULL) is a dependency that can no longer be met (the last one
 * that failed in "any" mode). A job without dependencies is READY. */
enum job_deps_outcome job_deps_outcome(const struct job *j, int64_t *failed_id);

/* Sets warn_signal/secs/main_only from a --signal spec ("B:USR1@60"; NULL or "" for
 * none). 0, or -1 if malformed (then none). */
int job_set_signal_spec(struct job *j, const char *spec);

/* Display helpers. */
/* "3" for an exit code, "0:9" style is Slurm's; we show "SIGKILL" etc. for signals. */
const char *job_signal_name(int sig); /* "SIGKILL"; a static "SIG<n>" for unknown */

#endif
