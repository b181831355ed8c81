/* slurm_nodes: what Slurm has to run gflow's jobs on, for gflowd status, ginfo, GET
 * /v1/backend and the dashboard: the partition's nodes and their GPUs, read with
 * `scontrol --details --oneliner show node` (a child the loop watches, like the other Slurm
 * commands) at every poll of the slurm backend. */
#ifndef GFLOWD_SLURM_NODES_H
#define GFLOWD_SLURM_NODES_H

#include <jansson.h>

struct gflowd;
struct slurm_nodes;

struct slurm_nodes *slurm_nodes_new(void);
void slurm_nodes_free(struct slurm_nodes *n);
/* Asks Slurm again (nothing if a read still runs). */
void slurm_nodes_refresh(struct gflowd *d, struct slurm_nodes *n);

/* The backend as GET /v1/backend shows it: {"kind": "local"} or {"kind": "slurm",
 * "partition", "nodes": [...], "gpus": {"total", "used"}, "error", "read_at"} (new). */
json_t *backend_json(const struct gflowd *d);

/* One line of `scontrol --details --oneliner show node` as a node object, or NULL if it names no
 * node; partition ("": any) filters: a node outside it is NULL too. */
json_t *slurm_node_parse(const char *line, const char *partition);

#endif
