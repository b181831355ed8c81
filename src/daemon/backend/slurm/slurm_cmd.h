/* slurm_cmd: a Slurm command (sbatch, scontrol, scancel, sacct) run as a child process
 * that the event loop watches (subproc.h), its stdout and stderr collected, killed after
 * SLURM_CMD_TIMEOUT_SECS; the slurm backend (slurm.c) gets a callback when it has
 * exited. Nothing here waits. */
#ifndef GFLOWD_SLURM_CMD_H
#define GFLOWD_SLURM_CMD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util.h"

struct gflowd;

struct child;
typedef void (*child_done_cb)(struct child *c, bool ok);

struct child {
    struct strbuf out; /* stdout and stderr together */
    child_done_cb done;
    struct gflowd *d;
    int64_t job_id;
    char *script_path;       /* sbatch's batch script, removed after */
    json_t *update;          /* scontrol update: the gflow fields it changes */
    struct slurm_wait *wait; /* a reply waiting for the command (NULL: none) */
    size_t wait_index;       /* its result there */
    int64_t uid;             /* sbatch: the job's owner (submissions are one at a time each) */
};

/* Frees c (its batch script removed); after done, or instead of child_run. */
void child_free(struct child *c);
/* Runs argv (found in PATH) with envp (NULL: the daemon's), calling c->done when it has
 * exited (then c is freed). 0, or -1 with errno (done is not called; free c). */
int child_run(struct child *c, char *const *argv, char *const *envp);
/* A command for job job_id (0: none) whose end calls done. */
struct child *child_new(struct gflowd *d, int64_t job_id, child_done_cb done);
/* The first line of a command's output, for a log line or a job's reason (caller frees). */
char *first_line(const struct child *c);

#endif
