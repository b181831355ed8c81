/* metrics: what GET /metrics exposes (Prometheus text format 0.0.4, docs/operations.md).
 * The counters and histograms are kept by the jobs room as jobs change state and by
 * the scheduling pass (jobs/jobs_counters.h, since the daemon started, as Prometheus
 * counters are); metrics_render writes them with the gauges read at scrape time: jobs by
 * state and user, the history's totals, the queue, the daemon process, and one series per
 * GPU under the names of NVIDIA's DCGM exporter, so that dashboards made for it work.
 *
 * The ops room (src/daemon/ops/, docs/design.md §3): metrics, notifications, reload,
 * the saved start options, the systemd unit and sd_notify, the disks' room. It may call
 * gpu/, jobs/, policy/ and store/; run/ and http/ call it. */
#ifndef GFLOWD_METRICS_H
#define GFLOWD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "jobs/jobs_counters.h"

struct gflowd;
struct strbuf;
/* The whole exposition, appended to out; event_clients: the streams of GET /v1/events
 * open now (the HTTP room's to count). */
void metrics_render(const struct gflowd *d, size_t event_clients, struct strbuf *out);

#endif
