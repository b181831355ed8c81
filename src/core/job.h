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

#define JOB_PRIORITY_DEFAULT 10
#define JOB_PRIORITY_MAX 255

/* Why a job ended or is being ended (recorded before signalling, so a restarted
 * daemon knows whether a dying job was cancelled or timed out). */
enum job_end_request { JOB_END_NONE, JOB_END_CANCEL, JOB_END_TIMEOUT };

struct job {
    int64_t id;
    char *name;
    char *user; /* submitter's login name */
    uint32_t uid, gid;
    enum job_state state;
    int priority;      /* 0..255, higher first */
    int64_t time_limit; /* seconds; 0 = none */

    /* What to run: exactly one of command / script is set. */
    char *command;     /* shell command line, run by /bin/bash -c */
    char *script;      /* script text stored with the job (not kept in daemon memory) */
    char *script_path; /* where the script came from, for display ("-" for stdin) */
    char *workdir;
    json_t *env;       /* object name -> value; not kept in daemon memory */

    double submit_time, start_time, end_time; /* unix seconds; 0 = not yet */

    /* Outcome. exit_code is -1 until known; signal 0 = not killed by a signal. */
    int exit_code;
    int signal;
    bool oom;
    char *reason;  /* why it ended (terminal) or was held, may be NULL; persisted */
    const char *wait_reason; /* why a PD job waits, set by the scheduling pass (static) */
    enum job_end_request end_request;

    /* The supervising shim while running. */
    int64_t shim_pid;
    int64_t shim_start; /* /proc start time of shim_pid, guards against pid reuse */
    int64_t max_rss_kb;

    /* Later capabilities (stored now, scheduled by their own issue). */
    int gpus;              /* GPUs requested */
    char *gpu_ids;         /* allocated physical indices, "0,2"; NULL if none */
    int64_t memory_mb;     /* host memory limit; 0 = none */
    int64_t gpu_memory_mb; /* per-GPU memory; 0 = none */
    bool shared;
    int gpus_per_task;     /* 1: one copy of the command per GPU (torchrun style) */
    int64_t group_id;      /* submission group (arrays, sweeps); 0 = none */
    int64_t array_task;    /* -1 = not an array task */
    int max_retries;
    int attempt;           /* 1 for the first run */
    int64_t retry_of;      /* previous attempt's id; 0 = none */

    void *runtime; /* the daemon's per-run state (runner.c); never copied or freed here */
};

void job_init(struct job *j);          /* zero values and defaults */
void job_clear(struct job *j);         /* frees owned fields, leaves j initialised */
struct job *job_new(void);
void job_free(struct job *j);
/* Deep copy; env and script are copied only if with_payload. */
struct job *job_dup(const struct job *j, bool with_payload);

/* The job as JSON for the API (docs/api.md). With full, also command/script text,
 * env and the log path; log_dir may be NULL. */
json_t *job_to_json(const struct job *j, bool full, const char *log_dir);
/* The fields of a job's list form, in the order of its JSON object. */
enum job_field {
    JOB_FIELD_ID, JOB_FIELD_NAME, JOB_FIELD_USER, JOB_FIELD_UID, JOB_FIELD_STATE,
    JOB_FIELD_STATE_NAME, JOB_FIELD_PRIORITY, JOB_FIELD_TIME_LIMIT, JOB_FIELD_SUBMIT_TIME,
    JOB_FIELD_START_TIME, JOB_FIELD_END_TIME, JOB_FIELD_EXIT_CODE, JOB_FIELD_SIGNAL,
    JOB_FIELD_SIGNAL_NAME, JOB_FIELD_OOM, JOB_FIELD_REASON, JOB_FIELD_COMMAND,
    JOB_FIELD_SCRIPT_PATH, JOB_FIELD_WORKDIR, JOB_FIELD_GPUS, JOB_FIELD_GPU_IDS,
    JOB_FIELD_SHIM_PID, JOB_FIELD_MAX_RSS_KB, JOB_FIELD_GPU_MEMORY_MB, JOB_FIELD_SHARED,
    JOB_FIELD_GPUS_PER_TASK, JOB_FIELD_COUNT
};
const char *job_field_name(enum job_field f);
int job_field_parse(const char *name); /* -1 if unknown */

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

/* Display helpers. */
/* "3" for an exit code, "0:9" style is Slurm's; we show "SIGKILL" etc. for signals. */
const char *job_signal_name(int sig); /* "SIGKILL"; a static "SIG<n>" for unknown */

#endif
