/* gflow_status: `gflow status`, one screen of the GPUs (state and who holds them), the
 * caller's running and waiting jobs with their reasons, and the queue's pressure
 * (pressure.c, as the MCP tool get_queue_pressure). gflow has no such command; its
 * users asked for it (gflow #91). */
#ifndef GFLOW_STATUS_H
#define GFLOW_STATUS_H

/* argv[0] is "status". Returns the exit status. */
int gflow_status_main(int argc, char **argv);

#endif
