/* gctl_timeline: `gctl reserve list --timeline`, a text picture of the reservations: one
 * row per GPU, time running across, each reservation drawn in its GPUs' rows (gflow
 * draws one row per reservation; a row per GPU shows at a glance which GPUs are free
 * when). */
#ifndef GFLOW_GCTL_TIMELINE_H
#define GFLOW_GCTL_TIMELINE_H

#include <jansson.h>
#include <stdio.h>

/* The whole width of the picture, in columns, as gflow's. */
#define TIMELINE_WIDTH 80

/* Draws reservations (GET /v1/reservations' "reservations") over [from, to) on the GPUs
 * gpu_indices (a JSON array of integers; GPUs named by reservations are added), with now
 * marked, in the zone in use (timefmt.h). */
void timeline_print(const json_t *reservations, const json_t *gpu_indices, double from, double to,
                    double now, FILE *out);

/* --range: "48h" (now to now+48h), "-24h" (now-24h to now) or "-24h:+24h"; each side a
 * sign and one or more N followed by s, m, h, d or w ("1d12h"). 0 with [*from, *to), or
 * -1 with *err. */
int timeline_parse_range(const char *spec, double now, double *from, double *to, char **err);

#endif
