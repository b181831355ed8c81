/* preempt_run: opt-in preemption (scheduler.preempt): after a scheduling pass, the
 * highest-ranked queued job that waits for whole GPUs may have running --requeue jobs of
 * priority at least scheduler.preempt_priority_gap below its own stopped (SIGTERM, then
 * SIGKILL after scheduler.preempt_grace) and queued again, when that frees enough GPUs
 * (src/core/preempt.h chooses them). First, to honour a reservation: while one is
 * active and its holder has a job waiting for GPUs, other users' --requeue jobs on its
 * GPUs are preempted, whatever their priority. One preemption at a time: while its jobs stop, the
 * GPUs free then and those they free are held (no job starts on them), so the waiting
 * job, first in the queue, gets them in the pass after the last of them ended. The
 * state is the jobs' own (end_request PREEMPT, preempted_by), so it survives a restart. */
#ifndef GFLOWD_PREEMPT_RUN_H
#define GFLOWD_PREEMPT_RUN_H

#include <stdint.h>

struct gflowd;
struct jobs_machine;

/* The GPUs (NVML indices) the next pass must leave alone: every GPU no running job holds
 * while some preempted job is still stopping; 0 when none is. */
uint64_t preemption_held_gpus(struct gflowd *d, const struct jobs_machine *m);
/* After a pass: preempts for the head of the queue if the configuration allows and it
 * would help. */
void preemption_run(struct gflowd *d, const struct jobs_machine *m);

#endif
