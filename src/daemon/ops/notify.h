/* notify: job notifications (docs/usage.md "Notifications"): the admin's webhooks
 * ([notifications] in gflow.toml) and gbatch --notify-email, through a durable outbox.
 *
 * A job event (jobs.h's event callback) that some destination wants becomes one
 * notify_outbox row per destination, written in the transaction that records the event;
 * with no webhook wanting it and no --notify-email on the job, it costs nothing (no SQL).
 * Once committed, rows are delivered by child processes (gflow-notify: the only program
 * that links libcurl; for e-mail it runs sendmail -t as the submitter), at most
 * notifications.max_concurrent_deliveries at once, reaped through their pidfds in the
 * loop: delivery never blocks the loop or delays scheduling. A failed attempt is retried
 * with exponential backoff (a loop timer), up to the destination's max_retries, then the
 * row is marked failed. Rows still pending when the daemon stops or dies are sent after
 * it starts again: delivery is at least once, and each carries a delivery id (job, event)
 * receivers can drop duplicates by. */
#ifndef GFLOWD_NOTIFY_H
#define GFLOWD_NOTIFY_H

#include <stdint.h>

struct gflowd;
struct notifier;
struct strbuf;

/* Registers with d->jobs for events; starts what is pending (after a restart). */
struct notifier *notifier_start(struct gflowd *d);
/* Stops watching the deliveries in flight (they finish on their own; their rows stay
 * pending and are sent again after a restart). */
void notifier_stop(struct notifier *n);
/* After each commit: starts the deliveries that are due, if anything was recorded. */
void notifier_after_commit(struct notifier *n);
/* d->cfg.notify changed (gflowd reload). */
void notifier_reconfigured(struct notifier *n);
/* The gflow_notifications_* series of GET /metrics. */
void notifier_metrics(struct notifier *n, struct strbuf *out);

#endif
