/* jobshow: one job as gjob show prints it, in gflow's layout: headings ("Job Details:",
 * "Parameters:", "Resources:", "Execution:", "Dependencies:", "Timing:", then our
 * "Outcome:" and "Supervision:") over "  Key=Value" lines, every field of GET
 * /v1/jobs/{id} (the -o json form) that has something to say, named as gflow's gjob
 * show names them where gflow has the field (SubmittedBy, GroupID, TaskID, WorkingDir,
 * MemoryLimit, DependsOn, ...). Also the human forms of sizes that gjob update prints. */
#ifndef GFLOW_JOBSHOW_H
#define GFLOW_JOBSHOW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "job.h"

/* How many dependencies gjob show lists with their states (-o json has them all). */
#define JOBSHOW_DEPS_MAX 50

/* A MiB amount as a --memory value: "1G" when whole GiB, else "1536M"; "none" for 0.
 * Malloc'd. */
char *jobshow_mib(int64_t mb);

/* A sweep's parameters as "lr=0.1 bs=32" (each value shell-quoted if it needs it).
 * Malloc'd. */
char *jobshow_params(const json_t *params);

/* Prints the job (raw: the daemon's JSON of it; j: the same read into a job). dep_states:
 * an object of "<id>": "<state>" for its dependencies, or NULL when unknown. verbose:
 * the fields with nothing to say too, as "-" (gjob show -v). */
void jobshow_print(const json_t *raw, const struct job *j, const json_t *dep_states, bool verbose);

/* The "<id>": "<state>" object of the first JOBSHOW_DEPS_MAX dependencies of the job
 * (one request for all of them), or NULL if it has none or they cannot be read. */
json_t *jobshow_dep_states(const json_t *raw);

#endif
