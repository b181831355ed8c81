/* gpu_xid: Xid critical errors, read on a thread of their own. nvmlEventSetWait blocks
 * by design, so it can run neither on the loop nor on the NVML worker (whose reads must
 * keep coming); the thread opens NVML itself (NVML's init is counted, so the worker's
 * and this one's opens and closes do not disturb each other), registers every GPU for
 * nvmlEventTypeXidCriticalError and waits, handing each event to the loop through a pipe.
 * NVML that does not open, or GPUs without event support, are tried again later. */
#ifndef GFLOWD_GPU_XID_H
#define GFLOWD_GPU_XID_H

#include <stddef.h>

struct gpu_xid;

struct gpu_xid_event {
    char uuid[96]; /* the GPU's, as NVML names it */
    int index;     /* its NVML index when the thread registered it */
    unsigned long long xid;
};

/* Starts the thread on library (NULL: as nvml_open decides). NULL when no thread can be
 * made (then Xids are not seen; said in the log by the caller). */
struct gpu_xid *xid_thread_start(const char *library);
/* Readable when events came. */
int xid_thread_fd(const struct gpu_xid *x);
/* Takes up to cap events that came; returns how many. */
size_t xid_thread_take(struct gpu_xid *x, struct gpu_xid_event *ev, size_t cap);
/* Stops the thread (within its wait's timeout) and frees. NULL is fine. */
void xid_thread_stop(struct gpu_xid *x);

#endif
