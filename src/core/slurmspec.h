/* slurmspec: how a gflow job is told to Slurm and how Slurm's answer is read back
 * (docs/slurm.md has the table). Pure: the daemon's slurm backend (src/daemon/slurm.c)
 * runs the commands. */
#ifndef GFLOW_SLURMSPEC_H
#define GFLOW_SLURMSPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "job.h"
#include "util.h"

/* The site's settings ([backend] in the configuration); "" or NULL: none. */
struct slurm_site {
    const char *partition, *account, *qos;
    const char *sbatch_args; /* more options, split at spaces */
    const char *tag;         /* this daemon's name in comment tags (no spaces or ':') */
};

/* A daemon's tag: a hash of the host name and its data directory, stable across its
 * restarts (caller frees). */
char *slurmspec_daemon_tag(const char *host, const char *data_dir);

/* The tag sbatch --comment carries, "gflow:<daemon>:<id>": it names the gflow job in
 * Slurm, so a daemon that crashed between sbatch and hearing the Slurm id finds the job
 * again; <daemon> (slurm_site.tag) tells apart the daemons that share a cluster. */
#define SLURMSPEC_COMMENT_PREFIX "gflow:"

/* Why j cannot be run on Slurm (a one-line message, caller frees), or NULL if it can. */
char *slurmspec_refusal(const struct job *j);

/* Appends the sbatch options for j to argv (after "sbatch"; the batch script's path
 * comes last, added by the caller): --parsable, the name, working directory, log,
 * comment tag, GPUs, time, memory, signal, the site's options. as_uid: pass --uid/--gid
 * (a root daemon submitting for another user). */
void slurmspec_sbatch_args(const struct job *j, const struct slurm_site *site, const char *log_path,
                           bool as_uid, struct strvec *argv);

/* One dependency of a job on a job in Slurm: its kind (afterok, afterany, afternotok:
 * the same words in Slurm) and that job's Slurm id. */
struct slurm_dep {
    const char *kind;
    int64_t slurm_id;
};
/* Appends --dependency for deps[0..n) ("afterok:12,afterany:13"; any: one suffices,
 * "afterok:12?afterok:13") and --kill-on-invalid-dep (kill: yes, Slurm cancels the job
 * when they can never be met, as gflow's auto-cancel; no: it stays pending there).
 * Nothing when n is 0. */
void slurmspec_dependency_args(const struct slurm_dep *deps, size_t n, bool any, bool kill,
                               struct strvec *argv);

/* Slurm's --nice for a gflow priority (0..255, default 10, higher first): 100 per step
 * below the default (priority 0: 1000); 0 at or above it, since only Slurm's operators
 * may give a negative nice. */
int slurmspec_nice(int priority);

/* The batch script sbatch gets for j (a command runs through bash -c; a script as it
 * is, with a bash shebang added if it has none; --conda-env activates first). */
char *slurmspec_batch_script(const struct job *j);

/* Whether an environment variable of the job is gflow's word on its GPUs, which Slurm's
 * must replace (CUDA_VISIBLE_DEVICES, ...): left out of what sbatch exports. */
bool slurmspec_env_is_local_gpu(const char *entry);

/* The Slurm job id in sbatch --parsable's output ("123" or "123;cluster"): > 0, or -1. */
int64_t slurmspec_parse_sbatch(const char *out);

/* One job as `scontrol show job -o` tells it. */
struct slurm_job_info {
    int64_t slurm_id;
    char comment[128]; /* Comment ("" when none) */
    char state[32];    /* JobState: PENDING, RUNNING, COMPLETED, ... */
    char reason[64];   /* Reason ("None" when none) */
    int exit_code;     /* ExitCode=E:S */
    int exit_signal;
    /* StartTime and EndTime of a job Slurm has started (unix seconds; 0: not known,
     * or only planned: a pending job's). */
    double start_time, end_time;
    /* Whether it ran at all (RunTime > 0, or a state only a started job has); a job
     * cancelled while pending has a StartTime (its end) but never ran. */
    bool ran;
};

/* Reads one line of `scontrol show job -o`: 0, or -1 if it names no job. */
int slurmspec_parse_job_line(const char *line, struct slurm_job_info *out);

/* Reads one line of `sacct --noheader --parsable2 --format=JobIDRaw,State,ExitCode,Reason`
 * ("123|CANCELLED by 0|0:15|None"; the state's first word is kept): 0, or -1 if it names
 * no job (or a step: "123.batch"). */
int slurmspec_parse_sacct_line(const char *line, struct slurm_job_info *out);

/* Whether a Slurm state is an end (COMPLETED, FAILED, ... as slurmspec_ended maps). */
bool slurmspec_ended_state(const char *state);

/* Whether Slurm has not started the job (PENDING, or queued again: REQUEUED...): gflow
 * shows it as PD with Slurm's reason. */
bool slurmspec_pending(const struct slurm_job_info *s);

/* The gflow id a comment tag names for the daemon of tag, or 0 (none, or another's). */
int64_t slurmspec_comment_id(const char *comment, const char *tag);

/* What a Slurm state means for the gflow job: still active (R: handed to Slurm, waiting or
 * running there), or ended in *state with *reason (and *detail, static, for
 * JOB_REASON_OTHER). cancel_requested: gflow asked for the cancel (CancelledByUser). */
bool slurmspec_ended(const struct slurm_job_info *s, bool cancel_requested, enum job_state *state,
                     enum job_reason *reason, const char **detail);

#endif
