/* notifyconf: the [notifications] section of gflow.toml (gflow's shape): whether
 * notifications are sent, how many deliveries run at once, the sendmail to use for
 * gbatch --notify-email, the admin's webhooks ([[notifications.webhooks]]: URL,
 * events, users, extra headers, timeout, retries, HMAC secret) and SMTP servers
 * ([[notifications.emails]]). Read whole and checked
 * at load, like [quota]: a bad URL scheme or an unknown event is a config error. */
#ifndef GFLOW_NOTIFYCONF_H
#define GFLOW_NOTIFYCONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct toml_value;

struct notify_webhook {
    char *url;             /* http:// or https:// */
    uint32_t events;       /* bit i: job_notify_events[i] (job.h); all bits for "*" */
    char **filter_users;   /* only these users' jobs; none: every user's */
    size_t n_filter_users; /* */
    char **headers;        /* extra request headers, "Name: value" */
    size_t n_headers;
    int64_t timeout_secs; /* one attempt's limit; default 10 */
    int64_t max_retries;  /* attempts after the first; default 3 */
    char *secret;         /* HMAC-SHA256 key for X-Gflow-Signature; NULL: unsigned */
};

/* [[notifications.emails]] (gflow's): an SMTP server to send through, its recipients
 * for every wanted event, and the transport of gbatch --notify-email while any is set. */
struct notify_email {
    char *smtp_url;        /* smtp://, smtps:// (user:pass@ inside; lettre's ?tls=) */
    char *from;            /* "gflow <noreply@example.com>" or a bare address */
    char **to;             /* every wanted event's recipients; none: only per-job ones */
    size_t n_to;           /* */
    uint32_t events;       /* as a webhook's; all bits for "*" (the default) */
    char **filter_users;   /* only these users' jobs; none: every user's */
    size_t n_filter_users; /* */
    char *subject_prefix;  /* "[gflow-prod]"; NULL: none */
    int64_t timeout_secs;  /* one attempt's limit; default 10 */
    int64_t max_retries;   /* attempts after the first; default 3 */
};

struct notify_config {
    bool enabled;                      /* default true */
    int64_t max_concurrent_deliveries; /* delivery processes at once; default 16 */
    char *sendmail;                    /* NULL: "sendmail" found on PATH */
    int64_t email_max_retries;         /* default 3 */
    int64_t max_pending_per_user;      /* undelivered notifications kept per user; 1000 */
    int64_t keep_secs;                 /* sent and failed rows are pruned after; 86400 */
    struct notify_webhook *webhooks;
    size_t n_webhooks;
    struct notify_email *emails;
    size_t n_emails;
};

void notify_config_init(struct notify_config *c);
void notify_config_free(struct notify_config *c);
void notify_config_copy(struct notify_config *dst, const struct notify_config *src);
/* Reads the [notifications] table t over c's defaults. 0, or -1 with *err and *line. */
int notify_config_from_toml(struct notify_config *c, const struct toml_value *t, char **err,
                            int *line);
/* Whether the two configs differ (gflowd reload). */
bool notify_config_equal(const struct notify_config *a, const struct notify_config *b);
/* Whether webhook w wants event (index into job_notify_events) of user's job. */
bool notify_webhook_wants(const struct notify_webhook *w, int event, const char *user);
/* Whether e-mail target m wants event of user's job: for its own recipients (its
 * events) and at all (its filter_users). */
bool notify_email_wants(const struct notify_email *m, int event, const char *user);
bool notify_email_allows_user(const struct notify_email *m, const char *user);
/* The webhook whose URL is url, or NULL (a row outlives a reload that removed it). */
const struct notify_webhook *notify_config_webhook(const struct notify_config *c, const char *url);

#endif
