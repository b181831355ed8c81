/* stray_run: what daemon.stray does to a job with a stray (a process on a GPU or MIG
 * instance it was not given; gpu.h's gpu_strays). Whatever the setting, the job's
 * record says so (its `stray` field: gjob show, a "job_updated" event, kept after it
 * ended) and the log has a warning, once per stray; under "kill" the job is ended the
 * way a time limit ends one (SIGTERM, then SIGKILL after daemon.kill_grace_secs) and
 * fails with reason GpuStray. Keeping the GPU from other jobs is the gpu room's. */
#ifndef GFLOWD_STRAY_RUN_H
#define GFLOWD_STRAY_RUN_H

struct gflowd;

/* After the GPUs were read (or the running jobs changed): acts on the strays seen. */
void stray_run(struct gflowd *d);

#endif
