/* gctl_quota: 'gctl quota show | set | clear' (gctl_quota.c), dispatched by gctl.c. */
#ifndef GFLOW_GCTL_QUOTA_H
#define GFLOW_GCTL_QUOTA_H

/* argv[0] is "quota". Returns the exit status (errors exit on their own). */
int gctl_quota(int argc, char **argv);

#endif
