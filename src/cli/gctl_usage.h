/* gctl_usage: `gctl usage`, the fair-share accounts (GET /v1/usage), as Slurm's sshare. */
#ifndef GFLOW_GCTL_USAGE_H
#define GFLOW_GCTL_USAGE_H

/* argv[0] is "usage". Returns the exit status. */
int gctl_usage(int argc, char **argv);

#endif
