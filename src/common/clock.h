/* clock: wall and monotonic time as floating-point seconds. */
#ifndef GFLOW_CLOCK_H
#define GFLOW_CLOCK_H

/* Wall clock in seconds since the epoch, with sub-second precision. */
double now_wall(void);
/* Monotonic clock in seconds. */
double now_mono(void);

#endif
