/* notify: see notify.h. */
#include "notify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "gflow_build.h"
#include "jobs/jobs.h"
#include "log.h"
#include "loop.h"
#include "notifymsg.h"
#include "paths.h"
#include "store/store.h"
#include "subproc.h"
#include "util.h"

/* gflow-notify's exit statuses (src/notify/main.c). */
#define NOTIFY_EXIT_RETRY 75 /* EX_TEMPFAIL: 5xx, 408, 429, no connection, timeout */
/* How long past its own timeout a delivery may take before it is killed. */
#define NOTIFY_KILL_GRACE 5.0
#define NOTIFY_MAIL_TIMEOUT 60.0
#define NOTIFY_PRUNE_EVERY 600.0

struct delivery {
    struct notifier *n;
    int64_t id, job_id;
    uint32_t uid;
    char *event, *dest;
    int kind, attempts, max_retries;
    struct subproc *proc;
};

struct notifier {
    struct gflowd *d;
    char hostname[256];
    char *program; /* gflow-notify */
    struct delivery **flight;
    size_t n_flight, cap_flight;
    struct loop_timer *timer;
    double timer_at;
    struct loop_timer *wake; /* a loop iteration soon, whose commit takes our writes */
    bool recorded;           /* rows written since the last pump */
    double last_prune;
    double last_cap_warning;
    uint64_t sent, failed, retried, dropped;
    /* Pending notifications per uid (notifications.max_pending_per_user), counted from
     * the outbox at start and at each pruning, kept in step in between. */
    struct uid_pending {
        uint32_t uid;
        int64_t n;
    } * pending;
    size_t n_pending, cap_pending;
};

static int64_t *pending_of(struct notifier *n, uint32_t uid)
{
    for (size_t i = 0; i < n->n_pending; i++)
        if (n->pending[i].uid == uid)
            return &n->pending[i].n;
    if (n->n_pending == n->cap_pending) {
        n->cap_pending = n->cap_pending ? n->cap_pending * 2 : 8;
        n->pending = xrealloc(n->pending, n->cap_pending * sizeof(*n->pending));
    }
    n->pending[n->n_pending] = (struct uid_pending){uid, 0};
    return &n->pending[n->n_pending++].n;
}

static void count_cb(uint32_t uid, int64_t count, void *arg)
{
    *pending_of(arg, uid) = count;
}

static void recount(struct notifier *n)
{
    n->n_pending = 0;
    if (store_notify_pending_by_uid(n->d->store, count_cb, n) < 0)
        log_error("notifications: %s", store_error(n->d->store));
}

/* ---- recording events ---- */

static bool wants_mail(const struct job *j, enum job_event e)
{
    return j->notify_email && job_notify_on_has(j->notify_on, e);
}

static bool webhook_wants(const struct notify_config *c, const struct job *j, enum job_event e)
{
    for (size_t i = 0; i < c->n_webhooks; i++)
        if (notify_webhook_wants(&c->webhooks[i], (int)e, j->user))
            return true;
    return false;
}

static void record(struct notifier *n, struct store_notify_row *r);

/* Whether [[notifications.emails]] target m sends job j's event e: to its own
 * recipients, or (as gflow) to the job's --notify-email ones. */
static bool smtp_wants(const struct notify_email *m, const struct job *j, enum job_event e)
{
    return notify_email_wants(m, (int)e, j->user) ||
           (wants_mail(j, e) && notify_email_allows_user(m, j->user));
}

static bool any_smtp_wants(const struct notify_config *c, const struct job *j, enum job_event e)
{
    for (size_t i = 0; i < c->n_emails; i++)
        if (smtp_wants(&c->emails[i], j, e))
            return true;
    return false;
}

/* Adds the addresses of list (joined by ',') to sb's, each once. */
static void add_recipients(struct strbuf *sb, const char *list)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        bool seen = false;
        for (const char *q = sb->buf ? sb->buf : ""; *q && !seen;) {
            size_t m = strcspn(q, ",");
            seen = m == n && !strncmp(q, p, n);
            q += m + (q[m] == ',');
        }
        if (n && !seen)
            strbuf_addf(sb, "%s%.*s", sb->len ? "," : "", (int)n, p);
        p += n + (p[n] == ',');
    }
}

/* One row per [[notifications.emails]] target that sends e: to its own recipients and
 * the job's, in one message. */
static void record_smtp(struct notifier *n, const struct job *j, enum job_event e,
                        struct store_notify_row *r)
{
    const struct notify_config *c = &n->d->cfg.notify;
    for (size_t i = 0; i < c->n_emails; i++) {
        const struct notify_email *m = &c->emails[i];
        if (!smtp_wants(m, j, e))
            continue;
        struct strbuf to;
        strbuf_init(&to);
        if (notify_email_wants(m, (int)e, j->user))
            for (size_t k = 0; k < m->n_to; k++)
                add_recipients(&to, m->to[k]);
        if (wants_mail(j, e) && notify_email_allows_user(m, j->user))
            add_recipients(&to, j->notify_email);
        char *message = notify_smtp_message(j, e, to.buf, n->hostname, m->from, m->subject_prefix);
        char *dest = xasprintf("emails[%zu] %s", i, to.buf);
        r->kind = STORE_NOTIFY_SMTP;
        r->dest = dest;
        r->payload = message;
        record(n, r);
        free(dest);
        free(message);
        strbuf_free(&to);
    }
}

/* Whether uid may queue one more notification (notifications.max_pending_per_user). */
static bool under_cap(struct notifier *n, const struct job *j, enum job_event e)
{
    int64_t pending = *pending_of(n, j->uid);
    if (pending < n->d->cfg.notify.max_pending_per_user)
        return true;
    n->dropped++;
    double now = now_mono();
    if (now - n->last_cap_warning > 60) {
        n->last_cap_warning = now;
        log_warn("notifications: user %s has %lld undelivered notification%s "
                 "(notifications.max_pending_per_user); job %lld's %s is not sent",
                 j->user ? j->user : "?", (long long)pending, plural_s(pending), (long long)j->id,
                 job_notify_events[e]);
    }
    return false;
}

static void record(struct notifier *n, struct store_notify_row *r)
{
    if (store_notify_add(n->d->store, r) < 0)
        log_error("job %lld: cannot record its %s notification: %s", (long long)r->job_id, r->event,
                  store_error(n->d->store));
    else {
        n->recorded = true;
        (*pending_of(n, r->uid))++;
    }
}

/* The jobs' event callback: inside the transaction of the change. */
static void on_event(void *arg, const struct job *j, enum job_event e)
{
    struct notifier *n = arg;
    const struct notify_config *c = &n->d->cfg.notify;
    if (!c->enabled || e == JOB_EVENT_COUNT) /* no job_event: nothing to tell anyone */
        return;
    /* With SMTP servers configured (gflow's), --notify-email goes through them. */
    bool smtp = any_smtp_wants(c, j, e);
    bool mail = !c->n_emails && wants_mail(j, e), hook = webhook_wants(c, j, e);
    if ((!mail && !hook && !smtp) || !under_cap(n, j, e))
        return;
    double now = now_wall();
    struct store_notify_row r = {
        .job_id = j->id,
        .event = job_notify_events[e],
        .user = j->user,
        .uid = j->uid,
        .gid = j->gid,
        .next_at = now,
    };
    if (hook) {
        char *payload = notify_payload(j, e, n->hostname, now);
        r.kind = STORE_NOTIFY_WEBHOOK;
        r.payload = payload;
        for (size_t i = 0; i < c->n_webhooks; i++) {
            if (!notify_webhook_wants(&c->webhooks[i], (int)e, j->user))
                continue;
            r.dest = c->webhooks[i].url;
            record(n, &r);
        }
        free(payload);
    }
    if (smtp)
        record_smtp(n, j, e, &r);
    if (mail) {
        char *message = notify_mail_message(j, e, j->notify_email, n->hostname);
        r.kind = STORE_NOTIFY_EMAIL;
        r.dest = j->notify_email;
        r.payload = message;
        record(n, &r);
        free(message);
    }
}

/* ---- deliveries ---- */

static void pump(struct notifier *n);

static void delivery_free(struct delivery *v)
{
    free(v->event);
    free(v->dest);
    free(v);
}

static void flight_remove(struct notifier *n, struct delivery *v)
{
    for (size_t i = 0; i < n->n_flight; i++)
        if (n->flight[i] == v) {
            n->flight[i] = n->flight[--n->n_flight];
            return;
        }
}

static bool in_flight(const struct notifier *n, int64_t id)
{
    for (size_t i = 0; i < n->n_flight; i++)
        if (n->flight[i]->id == id)
            return true;
    return false;
}

static const char *kind_name(int kind)
{
    return kind == STORE_NOTIFY_WEBHOOK ? "webhook" : "e-mail";
}

static void wake_cb(void *arg)
{
    struct notifier *n = arg;
    n->wake = NULL;
}

/* A write outside a request: the loop commits what is open before it sleeps, but a
 * write made after that commit (from the pump that follows it) would wait for whatever
 * wakes the loop next. An immediate timer makes that now. */
static void wrote(struct notifier *n)
{
    if (!n->wake)
        n->wake = loop_add_timer(0, wake_cb, n);
}

/* Records the outcome of an attempt (or of one that could not start). */
static void finish(struct notifier *n, const struct delivery *v, int attempts, int max_retries,
                   bool ok, bool retryable, const char *why)
{
    struct store *s = n->d->store;
    double now = now_wall();
    int64_t id = v->id, job_id = v->job_id;
    const char *event = v->event, *dest = v->dest;
    int kind = v->kind, rc;
    if (store_begin(s) < 0)
        return;
    int64_t *pending = pending_of(n, v->uid);
    if ((ok || !retryable || attempts > max_retries) && *pending > 0)
        (*pending)--; /* it leaves the pending rows */
    if (ok) {
        n->sent++;
        log_debug("notification %lld: job %lld %s sent by %s to %s", (long long)id,
                  (long long)job_id, event, kind_name(kind), dest);
        rc = store_notify_set(s, id, STORE_NOTIFY_SENT, attempts, now, NULL, now);
    } else if (retryable && attempts <= max_retries) {
        n->retried++;
        double delay = notify_backoff(attempts);
        log_info("notification %lld (job %lld %s, %s to %s): attempt %d failed: %s; retrying in "
                 "%.0f s",
                 (long long)id, (long long)job_id, event, kind_name(kind), dest, attempts, why,
                 delay);
        rc = store_notify_set(s, id, STORE_NOTIFY_PENDING, attempts, now + delay, why, 0);
    } else {
        n->failed++;
        log_warn("notification %lld (job %lld %s, %s to %s) failed after %d attempt%s: %s",
                 (long long)id, (long long)job_id, event, kind_name(kind), dest, attempts,
                 attempts == 1 ? "" : "s", why);
        rc = store_notify_set(s, id, STORE_NOTIFY_FAILED, attempts, now, why, now);
    }
    if (rc < 0)
        log_error("notification %lld: cannot record the delivery: %s", (long long)id,
                  store_error(s));
    wrote(n);
}

/* The delivery's process has exited: why it failed is the first line it wrote. */
static void exited_cb(void *arg, bool reaped, int status, struct strbuf *out)
{
    struct delivery *v = arg;
    struct notifier *n = v->n;
    const char *text = out->buf ? out->buf : "";
    char why[512];
    snprintf(why, sizeof(why), "%.*s", (int)strcspn(text, "\n"), text);
    bool ok = reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    bool retryable = !reaped || WIFSIGNALED(status) ||
                     (WIFEXITED(status) && WEXITSTATUS(status) == NOTIFY_EXIT_RETRY);
    if (!ok && !why[0])
        snprintf(why, sizeof(why), "%s",
                 WIFSIGNALED(status) ? "killed (took too long)" : "gflow-notify failed");
    finish(n, v, v->attempts + 1, v->max_retries, ok, retryable, why);
    flight_remove(n, v);
    delivery_free(v);
    pump(n);
}

/* A memfd holding text, at offset 0 (gflow-notify's standard input). */
static int text_fd(const char *text)
{
    int fd = memfd_create("gflow-notify", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

/* The environment of gflow-notify: gflowd's PATH (sendmail is looked up in it). */
static char *path_entry(void)
{
    const char *path = getenv("PATH");
    return xasprintf("PATH=%s", path && *path ? path
                                              : "/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                                "/usr/bin:/sbin:/bin");
}

/* Starts gflow-notify with argv and input on its standard input, killed after timeout
 * seconds. 0, or -1 with errno. */
static int spawn(struct delivery *v, char *const *argv, const char *input, double timeout)
{
    int in = text_fd(input);
    if (in < 0)
        return -1;
    /* PATH, and the sanitizers' settings of a test build (none otherwise). */
    struct strvec env;
    strvec_init(&env);
    char *path = path_entry();
    strvec_push(&env, path);
    free(path);
    static const char *const keep[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        if (getenv(keep[i]))
            strvec_pushf(&env, "%s=%s", keep[i], getenv(keep[i]));
    struct subproc_spec spec = {.argv = argv, .envp = env.v, .stdin_fd = in, .timeout = timeout};
    v->proc = subproc_start(&spec, exited_cb, v);
    int e = errno;
    strvec_free(&env);
    close(in);
    errno = e;
    return v->proc ? 0 : -1;
}

/* The request for a webhook: URL, headers, a blank line, the body (see src/notify). */
static char *webhook_request(const struct notify_webhook *w, const struct store_notify_row *r,
                             char **err)
{
    char *id = notify_delivery_id(r->job_id, r->event, r->id);
    char *body = notify_webhook_body(r->payload, id);
    if (!body) {
        free(id);
        *err = xstrdup("the stored payload is not a JSON object");
        return NULL;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_addf(&sb,
                "%s\nContent-Type: application/json\nX-Gflow-Event: %s\n"
                "X-Gflow-Delivery: %s\n",
                w->url, r->event, id);
    if (w->secret) {
        char *sig = notify_signature(w->secret, body, strlen(body));
        strbuf_addf(&sb, "X-Gflow-Signature: %s\n", sig);
        free(sig);
    }
    for (size_t i = 0; i < w->n_headers; i++)
        strbuf_addf(&sb, "%s\n", w->headers[i]);
    strbuf_addf(&sb, "\n%s", body);
    free(body);
    free(id);
    return strbuf_detach(&sb);
}

/* The address inside "Name <a@b>", or all of it. Malloc'd. */
static char *bare_address(const char *mailbox)
{
    const char *lt = strchr(mailbox, '<');
    if (!lt)
        return xstrdup(mailbox);
    return xstrndup(lt + 1, strcspn(lt + 1, ">"));
}

/* gflow-notify smtp's input: the URL, the sender, the recipients one a line, an empty
 * line and the message (src/notify). NULL with *err if the row's target is gone. */
static char *smtp_request(const struct notify_config *c, const struct store_notify_row *r,
                          const struct notify_email **target, char **err)
{
    size_t i;
    int at = 0;
    if (sscanf(r->dest, "emails[%zu] %n", &i, &at) < 1 || !at || i >= c->n_emails) {
        *err = xstrdup("the e-mail target ([[notifications.emails]]) is no longer configured");
        return NULL;
    }
    const struct notify_email *m = &c->emails[i];
    *target = m;
    struct strbuf sb;
    strbuf_init(&sb);
    char *from = bare_address(m->from);
    strbuf_addf(&sb, "%s\n%s\n", m->smtp_url, from);
    free(from);
    for (const char *p = r->dest + at; *p;) {
        size_t n = strcspn(p, ",");
        char *one = xstrndup(p, n), *addr = bare_address(one);
        strbuf_addf(&sb, "%s\n", addr);
        free(addr);
        free(one);
        p += n + (p[n] == ',');
    }
    strbuf_addf(&sb, "\n%s", r->payload);
    return strbuf_detach(&sb);
}

static void start_one(const struct store_notify_row *r, void *arg)
{
    struct notifier *n = arg;
    const struct notify_config *c = &n->d->cfg.notify;
    if (in_flight(n, r->id) || n->n_flight >= (size_t)c->max_concurrent_deliveries)
        return;
    struct delivery *v = xcalloc(1, sizeof(*v));
    v->n = n;
    v->id = r->id;
    v->job_id = r->job_id;
    v->uid = r->uid;
    v->event = xstrdup(r->event);
    v->dest = xstrdup(r->dest);
    v->kind = r->kind;
    v->attempts = r->attempts;
    char *input = NULL, *err = NULL;
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, n->program);
    double timeout = NOTIFY_MAIL_TIMEOUT;
    if (r->kind == STORE_NOTIFY_WEBHOOK) {
        const struct notify_webhook *w = notify_config_webhook(c, r->dest);
        if (!w) {
            err = xstrdup("the webhook is no longer configured");
        } else {
            v->max_retries = (int)w->max_retries;
            timeout = (double)w->timeout_secs;
            input = webhook_request(w, r, &err);
            char *secs = xasprintf("%lld", (long long)w->timeout_secs);
            strvec_push(&argv, "webhook");
            strvec_push(&argv, "--timeout");
            strvec_push(&argv, secs);
            free(secs);
        }
    } else if (r->kind == STORE_NOTIFY_SMTP) {
        const struct notify_email *m = NULL;
        input = smtp_request(c, r, &m, &err);
        if (m) {
            v->max_retries = (int)m->max_retries;
            timeout = (double)m->timeout_secs;
            char *secs = xasprintf("%lld", (long long)m->timeout_secs);
            strvec_push(&argv, "smtp");
            strvec_push(&argv, "--timeout");
            strvec_push(&argv, secs);
            free(secs);
        }
    } else {
        v->max_retries = (int)c->email_max_retries;
        input = xstrdup(r->payload);
        strvec_push(&argv, "mail");
        strvec_push(&argv, "--sendmail");
        strvec_push(&argv, c->sendmail ? c->sendmail : "sendmail");
        if (n->d->system) { /* as the submitter; else as gflowd's own user */
            char *uid = xasprintf("%u", (unsigned)r->uid), *gid = xasprintf("%u", (unsigned)r->gid);
            strvec_push(&argv, "--user");
            strvec_push(&argv, r->user ? r->user : "");
            strvec_push(&argv, "--uid");
            strvec_push(&argv, uid);
            strvec_push(&argv, "--gid");
            strvec_push(&argv, gid);
            free(uid);
            free(gid);
        }
    }
    if (!err && spawn(v, argv.v, input, timeout + NOTIFY_KILL_GRACE) < 0)
        err = xasprintf("cannot start %s: %s", n->program, strerror(errno));
    strvec_free(&argv);
    free(input);
    if (err) {
        /* Nothing was attempted that a retry could fix. */
        finish(n, v, v->attempts + 1, 0, false, false, err);
        free(err);
        delivery_free(v);
        return;
    }
    if (n->n_flight == n->cap_flight) {
        n->cap_flight = n->cap_flight ? n->cap_flight * 2 : 16;
        n->flight = xrealloc(n->flight, n->cap_flight * sizeof(*n->flight));
    }
    n->flight[n->n_flight++] = v;
}

static void timer_cb(void *arg)
{
    struct notifier *n = arg;
    n->timer = NULL;
    pump(n);
}

/* Wakes the notifier at unix time `at` (keeping an earlier wake-up). */
static void arm(struct notifier *n, double at)
{
    if (n->timer && n->timer_at <= at)
        return;
    loop_cancel_timer(n->timer);
    n->timer_at = at;
    n->timer = loop_add_timer(at - now_wall(), timer_cb, n);
}

static void prune(struct notifier *n, double now)
{
    if (now - n->last_prune < NOTIFY_PRUNE_EVERY)
        return;
    n->last_prune = now;
    if (store_begin(n->d->store) < 0 ||
        store_notify_prune(n->d->store, now - (double)n->d->cfg.notify.keep_secs) < 0)
        log_error("notifications: cannot prune the outbox: %s", store_error(n->d->store));
    wrote(n);
    recount(n); /* what a lost transaction took along is forgotten here */
}

/* Starts what is due, as far as the limit allows, and sets the timer for what is not. */
static void pump(struct notifier *n)
{
    const struct notify_config *c = &n->d->cfg.notify;
    n->recorded = false;
    if (!c->enabled)
        return; /* what is pending waits until they are enabled again */
    double now = now_wall();
    if (n->n_flight < (size_t)c->max_concurrent_deliveries &&
        store_notify_due(n->d->store, now, (int)(c->max_concurrent_deliveries + n->n_flight),
                         start_one, n) < 0)
        log_error("notifications: %s", store_error(n->d->store));
    /* Rows due but left for want of a slot start when a delivery ends; a later one
     * needs the timer. */
    double next;
    if (store_notify_next_after(n->d->store, now, &next) == 0)
        arm(n, next);
    prune(n, now);
}

/* ---- the daemon's side ---- */

struct notifier *notifier_start(struct gflowd *d)
{
    struct notifier *n = xcalloc(1, sizeof(*n));
    n->d = d;
    if (gethostname(n->hostname, sizeof(n->hostname) - 1) < 0)
        snprintf(n->hostname, sizeof(n->hostname), "localhost");
    n->program = paths_companion("gflow-notify", X_OK, "../libexec", GFLOW_LIBEXECDIR);
    n->last_prune = now_wall() - NOTIFY_PRUNE_EVERY; /* a first round at start */
    jobs_observe(d->jobs, on_event, n);
    recount(n);
    pump(n);
    return n;
}

void notifier_stop(struct notifier *n)
{
    if (!n)
        return;
    jobs_unobserve(n->d->jobs, on_event, n);
    for (size_t i = 0; i < n->n_flight; i++) {
        struct delivery *v = n->flight[i];
        subproc_forget(v->proc);
        delivery_free(v);
    }
    free(n->flight);
    free(n->pending);
    loop_cancel_timer(n->timer);
    loop_cancel_timer(n->wake);
    free(n->program);
    free(n);
}

void notifier_after_commit(struct notifier *n)
{
    if (n && n->recorded)
        pump(n);
}

void notifier_reconfigured(struct notifier *n)
{
    if (n)
        pump(n);
}

void notifier_metrics(struct notifier *n, struct strbuf *out)
{
    if (!n)
        return;
    int64_t pending = 0;
    store_notify_count_pending(n->d->store, &pending);
    strbuf_addf(out,
                "# HELP gflow_notifications_sent_total Notifications delivered since gflowd "
                "started.\n# TYPE gflow_notifications_sent_total counter\n"
                "gflow_notifications_sent_total %llu\n"
                "# HELP gflow_notifications_failed_total Notifications given up on since gflowd "
                "started.\n# TYPE gflow_notifications_failed_total counter\n"
                "gflow_notifications_failed_total %llu\n"
                "# HELP gflow_notifications_retries_total Failed attempts retried later.\n"
                "# TYPE gflow_notifications_retries_total counter\n"
                "gflow_notifications_retries_total %llu\n"
                "# HELP gflow_notifications_dropped_total Notifications not recorded: the user "
                "had notifications.max_pending_per_user undelivered.\n"
                "# TYPE gflow_notifications_dropped_total counter\n"
                "gflow_notifications_dropped_total %llu\n"
                "# HELP gflow_notifications_pending Notifications waiting to be delivered.\n"
                "# TYPE gflow_notifications_pending gauge\n"
                "gflow_notifications_pending %lld\n"
                "# HELP gflow_notifications_in_flight Deliveries under way.\n"
                "# TYPE gflow_notifications_in_flight gauge\n"
                "gflow_notifications_in_flight %zu\n",
                (unsigned long long)n->sent, (unsigned long long)n->failed,
                (unsigned long long)n->retried, (unsigned long long)n->dropped, (long long)pending,
                n->n_flight);
}
