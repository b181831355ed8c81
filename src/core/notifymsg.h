/* notifymsg: what a notification says. The webhook payload (JSON) and the e-mail message
 * (headers and a plain-text body, for sendmail -t) of a job event, the delivery id a
 * receiver drops duplicates by, and the retry schedule. Pure code (no I/O), unit-tested
 * in tests/unit/test_notify.c. */
#ifndef GFLOW_NOTIFYMSG_H
#define GFLOW_NOTIFYMSG_H

#include <stdint.h>

#include "job.h"

/* The event's payload without its delivery id (added at delivery: notify_webhook_body):
 * event, job_id, name, user, state, reason, exit_code, signal, submit_time, start_time,
 * end_time, project, gpus, gpu_ids, hostname, timestamp. Malloc'd JSON text. */
char *notify_payload(const struct job *j, enum job_event event, const char *hostname, double now);
/* The delivery id of outbox row row_id for job_id's event: "<job>-<event>" for the events
 * a job has once (submitted, completed, failed, cancelled, timeout), else
 * "<job>-<event>-<row>" (a job may start, be held, released or updated again). The same
 * for every redelivery of the row. Malloc'd. */
char *notify_delivery_id(int64_t job_id, const char *event, int64_t row_id);
/* payload with "delivery_id" set: the exact body sent (and signed). NULL if payload is
 * not a JSON object. Malloc'd. */
char *notify_webhook_body(const char *payload, const char *delivery_id);
/* The message sendmail -t reads: To: (the addresses), Subject: "gflow job 12 (name)
 * failed", a plain-text body. Nothing from the job can add a header: line breaks and
 * other control characters in what goes into a header become spaces. Malloc'd. */
char *notify_mail_message(const struct job *j, enum job_event event, const char *to,
                          const char *hostname);
/* The same with a From: header (from NULL: none; sendmail adds one) and subject_prefix
 * (NULL: none) before the subject, for an SMTP server ([[notifications.emails]]). */
char *notify_smtp_message(const struct job *j, enum job_event event, const char *to,
                          const char *hostname, const char *from, const char *subject_prefix);
/* Seconds before retry number `attempt` (1 = the first retry): 1, 2, 4, ... capped at
 * NOTIFY_BACKOFF_MAX. */
#define NOTIFY_BACKOFF_MAX 300.0
double notify_backoff(int attempt);
/* "X-Gflow-Signature" value for body with secret: "sha256=<hex>". Malloc'd. */
char *notify_signature(const char *secret, const char *body, size_t len);

#endif
