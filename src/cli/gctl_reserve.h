/* gctl_reserve: `gctl reserve create|list|get|cancel` (GPU reservations). */
#ifndef GFLOW_GCTL_RESERVE_H
#define GFLOW_GCTL_RESERVE_H

/* argv[0] is "reserve". Returns the exit status (errors exit on their own). */
int gctl_reserve(int argc, char **argv);

#endif
