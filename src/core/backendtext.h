/* backendtext: the backend object of GET /v1/backend (also in /v1/status and /v1/gpus)
 * as the lines `gflowd status` and `ginfo` print: which backend, and under Slurm the
 * partition, its nodes and their GPUs. */
#ifndef GFLOW_BACKENDTEXT_H
#define GFLOW_BACKENDTEXT_H

#include <jansson.h>

#include "util.h"

/* Appends the lines (each ending in a newline) to out; now is the wall time, for the
 * read's age; nodes: one line per node as well. Names from Slurm are escaped
 * (termtext.h). */
void backendtext(const json_t *backend, double now, bool nodes, struct strbuf *out);

#endif
