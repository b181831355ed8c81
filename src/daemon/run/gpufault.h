/* gpufault: the running jobs of a GPU that failed under them (a fatal Xid, the GPU fell
 * off the bus: gpu_take_faults) are ended, as a time limit ends a job: the request is
 * committed, then the shim is signalled. They end F with reason "GpuFault (Xid 79)" or
 * "GpuFault (GPU lost)", or go back to PD when submitted with --requeue. */
#ifndef GFLOWD_GPUFAULT_H
#define GFLOWD_GPUFAULT_H

struct gflowd;

/* Acts on the faults the gpu room has now. */
void run_gpu_faults(struct gflowd *d);

#endif
