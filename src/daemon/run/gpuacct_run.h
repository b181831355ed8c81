/* gpuacct_run: a running job's GPU accounting (core/gpuacct.h does the arithmetic). At
 * each GPU read, every running job that holds whole GPUs is given its GPUs' readings:
 * utilisation, the memory of its own processes (the GPU's whole use when NVML lists none
 * of them and no other job shares it), power and the energy counter (read only for held
 * GPUs: gpu.c asks the NVML thread for them, so an idle machine makes no such call). On
 * a GPU shared by several jobs, a job's utilisation is its processes' SM utilisation
 * where NVML gives it per process, and the energy is split evenly between them. The
 * figures so far are the job's own fields (the API shows them while it runs); they are
 * final when it ends, and written with its end.
 *
 * A daemon that stops writes its running jobs' figures; the one that adopts them goes on
 * from there, counting the time it was down at the mean so far, and the energy of that
 * time is not counted. MIG instances have no counters of their own: a MIG job gets no
 * figures. */
#ifndef GFLOWD_GPUACCT_RUN_H
#define GFLOWD_GPUACCT_RUN_H

struct gflowd;
struct job;
struct gpuacct;

/* The GPUs were read: each running GPU job's accounting takes the reading. */
void gpuacct_run_read(struct gflowd *d);
/* j ends now (its run is about to be freed): its figures become final. */
void gpuacct_run_end(struct gflowd *d, struct job *j);
/* The daemon stops: the running jobs' figures so far are saved for the next one. */
void gpuacct_run_save(struct gflowd *d);
void gpuacct_run_free(struct gpuacct *a);

#endif
