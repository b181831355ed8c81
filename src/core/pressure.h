/* pressure: the queue's pressure, as gflow's MCP tool get_queue_pressure reports it and
 * `gflow status` prints it: which GPUs are free, how many jobs wait and run, the GPUs
 * the waiting jobs ask for against those the running ones hold, why they wait, and the
 * users and projects behind them. Pure code over the daemon's JSON answers (GET
 * /v1/gpus, GET /v1/jobs, GET /v1/reservations), so the MCP server and the CLI compute
 * it the same way. */
#ifndef GFLOW_PRESSURE_H
#define GFLOW_PRESSURE_H

#include <jansson.h>

/* gpus: GET /v1/gpus's reply; jobs: an array of the active (PD, H, R) jobs of every
 * user; reservations: an array of reservation objects (may be NULL); now: unix
 * seconds. Returns gflow's QueuePressureOutput object: {"generated_at", "total_gpus",
 * "available_gpus": [idx], "unavailable_gpus": [{"index", "reason"}], "running_jobs",
 * "queued_jobs", "held_jobs", "queued_requested_gpus", "running_allocated_gpus",
 * "blocked_reasons": {reason: n}, "users": [G], "projects": [G], "reservations_total",
 * "reservations_active"}, G {"name", "queued", "running", "requested_gpus"} (at most
 * 10, most GPUs asked first). */
json_t *pressure_build(const json_t *gpus, const json_t *jobs, const json_t *reservations,
                       double now);

/* The number of GPU ids in a job's gpu_ids ("0,2", or an array of ids); 0 for none. */
size_t pressure_gpu_count(const json_t *gpu_ids);

/* Why a waiting job waits, as the pressure counts it: its reason, else JobHeldUser for
 * a held job and Resources for a queued one. */
const char *pressure_reason(const json_t *job);

#endif
