/* jobspec: a job's spec, the JSON object of a submission (POST /v1/jobs, docs/api.md),
 * checked once and turned into a struct job; and back: a stored job as a spec, which
 * gjob update and gjob redo change and check again the same way. What the machine
 * offers (memory, GPUs) and who submits come in as parameters, so that every rule is
 * unit-tested here. Pure. */
#ifndef GFLOW_JOBSPEC_H
#define GFLOW_JOBSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuinfo.h"
#include "job.h"

/* A submission's reply lists at most this many jobs (count, first_id, last_id: all). */
#define JOBSPEC_REPLY_MAX_JOBS 1000
/* --max-retries at most. */
#define JOBSPEC_MAX_RETRIES 1000

/* What a request may ask for on this machine. */
struct jobspec_limits {
    int64_t memory_total_mb;    /* MemTotal; 0 = unknown (no check) */
    const struct gpu_set *gpus; /* the GPUs (NULL: none) */
    uint64_t visible;           /* the GPUs a job may ever get (NVML-index mask, 0 = all) */
    bool gpus_pending;          /* the GPUs are not known yet (NVML not ready): a GPU
                                 * request is not checked against them, it waits */
    bool on_slurm;              /* jobs run on Slurm (the slurm backend): not checked
                                 * against this machine, but against slurmspec_refusal */
};

/* Who submits, and when. */
struct jobspec_owner {
    const char *user;
    uint32_t uid, gid;
    double now;
};

/* Whether key is a field of a job spec. */
bool jobspec_known_field(const char *key);

/* Builds a job from one spec object: every field checked (types, ranges, combinations,
 * feasibility on this machine), defaults filled in (name from the script or command,
 * priority 10, auto_cancel), state H with JobHeldUser for "hold". *dry_run is set if
 * the spec has "dry_run": true. The fields of a many-jobs submission ("array",
 * "params", "name_template", "max_concurrent") are accepted and ignored here. NULL with
 * *err (a 400 message) if the spec is bad. */
struct job *jobspec_to_job(const json_t *spec, const struct jobspec_limits *lim,
                           const struct jobspec_owner *who, bool *dry_run, char **err);

/* A whole submission: one spec object, or {"jobs": [specs], "dry_run", "max_concurrent"}
 * (a batch). One spec may be an array or a sweep; either way the jobs form a group when
 * there are several or when max_concurrent is given. */
struct jobspec_submission {
    struct job **jobs; /* one per spec (an array or sweep: its base, until expanded) */
    size_t n;
    json_t *array, *params, *name_template; /* of a single-spec submission; NULL: none */
    int64_t max_concurrent;                 /* -1: not given */
    bool dry_run;
    bool batch; /* several specs: errors name the spec ("job 2: ...") */
};
/* Reads and checks root (consumed: a reference is kept or dropped). 0, or -1 with *err
 * (a 400 message); out is then empty. */
int jobspec_read_submission(json_t *root, const struct jobspec_limits *lim,
                            const struct jobspec_owner *who, struct jobspec_submission *out,
                            char **err);
/* How many jobs the submission makes, without making them (an array's tasks, a sweep's
 * rows; a malformed array counts 1 and jobspec_expand reports it). */
size_t jobspec_count(const struct jobspec_submission *sub);
/* An array or sweep: its base job expanded into one job per task or row (sweep.h); the
 * array's %K becomes max_concurrent unless given. 0, or -1 with *err. */
int jobspec_expand(struct jobspec_submission *sub, char **err);
/* Whether the jobs form a group (several of them, or a limit on how many run). */
bool jobspec_grouped(const struct jobspec_submission *sub);
void jobspec_submission_free(struct jobspec_submission *sub);

/* A stored job (with its payload) as a spec: the base that an update or a redo changes
 * before it is checked again with jobspec_to_job. */
json_t *jobspec_from_job(const struct job *j);

/* Applies the changes in over (spec fields; null removes a field, e.g. conda_env) to
 * spec: a new command replaces the script and the other way round, gpus 0 drops the
 * per-GPU settings, time_limit 0 drops signal_spec. "hold" only with allow_hold (a
 * redo). 0, or -1 + *err. */
int jobspec_merge(json_t *spec, const json_t *over, bool allow_hold, char **err);

/* The first field of over that an update cannot change, NULL if none: an update
 * changes the fields jobspec_changes reports (and max_concurrent); the others
 * (project, nice, the notifications, array, hold, ...) are fixed at submission, and
 * unknown ones are no fields at all. *known tells which of the two it is. */
const char *jobspec_fixed_field(const json_t *over, bool *known);

/* What an update changed, for its reply: [{"field", "old", "new"}] between the job
 * before (with payload) and after, in a fixed order of fields; a script shows by its
 * path, an environment as "...". over: the update's fields (env is compared only when
 * given). */
json_t *jobspec_changes(const struct job *before, const struct job *after, const json_t *over);

/* Whether an update with these fields changes what the job runs (its command, script,
 * directory or environment), so that its stored payload must be rewritten. */
bool jobspec_changes_what(const json_t *over);
/* The first field of over that only the job's owner may change: what the job runs and
 * the environment it runs in (command, script, workdir, env, conda_env, umask, a sweep's
 * params), which an admin changing someone else's job would otherwise run as that
 * user. NULL if none. */
const char *jobspec_owner_only_field(const json_t *over);

#endif
