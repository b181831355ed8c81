/* notifymsg: see notifymsg.h. */
#include "notifymsg.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuinfo.h"
#include "sha256.h"
#include "util.h"

static json_t *str_or_null(const char *s)
{
    json_t *v = s ? json_string(s) : NULL;
    return v ? v : json_null();
}

static json_t *time_or_null(double t)
{
    return t > 0 ? json_real(t) : json_null();
}

char *notify_payload(const struct job *j, enum job_event event, const char *hostname, double now)
{
    json_t *o = json_object();
    json_object_set_new(o, "event", json_string(job_notify_events[event]));
    json_object_set_new(o, "job_id", json_integer(j->id));
    json_object_set_new(o, "name", str_or_null(j->name));
    json_object_set_new(o, "user", str_or_null(j->user));
    json_object_set_new(o, "state", json_string(job_state_short(j->state)));
    json_object_set_new(o, "reason",
                        j->reason != JOB_REASON_NONE ? json_string(job_reason_name(j->reason))
                                                     : json_null());
    json_object_set_new(o, "exit_code",
                        j->exit_code >= 0 ? json_integer(j->exit_code) : json_null());
    json_object_set_new(o, "signal", j->signal ? json_integer(j->signal) : json_null());
    json_object_set_new(o, "submit_time", time_or_null(j->submit_time));
    json_object_set_new(o, "start_time", time_or_null(j->start_time));
    json_object_set_new(o, "end_time", time_or_null(j->end_time));
    json_object_set_new(o, "project", str_or_null(j->project));
    json_object_set_new(o, "gpus", json_integer(j->gpus));
    char *ids = j->gpu_mask ? gpu_mask_format(j->gpu_mask) : NULL;
    json_object_set_new(o, "gpu_ids", str_or_null(ids));
    free(ids);
    json_object_set_new(o, "hostname", str_or_null(hostname));
    json_object_set_new(o, "timestamp", json_real(now));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

/* The events a job has at most once. */
static bool event_once(const char *event)
{
    return !strcmp(event, "job_submitted") || !strcmp(event, "job_completed") ||
           !strcmp(event, "job_failed") || !strcmp(event, "job_cancelled") ||
           !strcmp(event, "job_timeout");
}

char *notify_delivery_id(int64_t job_id, const char *event, int64_t row_id)
{
    if (event_once(event))
        return xasprintf("%lld-%s", (long long)job_id, event);
    return xasprintf("%lld-%s-%lld", (long long)job_id, event, (long long)row_id);
}

char *notify_webhook_body(const char *payload, const char *delivery_id)
{
    json_t *o = json_loads(payload, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    json_object_set_new(o, "delivery_id", json_string(delivery_id));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

/* s with every control character (CR, LF, TAB, ...) as a space, at most max bytes. */
static void add_header_text(struct strbuf *sb, const char *s, size_t max)
{
    for (size_t i = 0; s && s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        strbuf_addc(sb, c < 0x20 || c == 0x7f ? ' ' : (char)c);
    }
}

static const char *event_verb(enum job_event e)
{
    static const char *const verbs[JOB_EVENT_COUNT] = {
        [JOB_EVENT_SUBMITTED] = "was submitted", [JOB_EVENT_UPDATED] = "was updated",
        [JOB_EVENT_STARTED] = "started",         [JOB_EVENT_COMPLETED] = "completed",
        [JOB_EVENT_FAILED] = "failed",           [JOB_EVENT_CANCELLED] = "was cancelled",
        [JOB_EVENT_TIMEOUT] = "timed out",       [JOB_EVENT_HELD] = "was held",
        [JOB_EVENT_RELEASED] = "was released",
    };
    return verbs[e];
}

static void add_time_line(struct strbuf *sb, const char *label, double t)
{
    if (t <= 0)
        return;
    time_t secs = (time_t)t;
    struct tm tm;
    char buf[64];
    if (gmtime_r(&secs, &tm) && strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm))
        strbuf_addf(sb, "%-11s%s\n", label, buf);
}

static void add_line(struct strbuf *sb, const char *label, const char *value)
{
    if (!value)
        return;
    strbuf_addf(sb, "%-11s", label);
    add_header_text(sb, value, 1000);
    strbuf_addc(sb, '\n');
}

char *notify_mail_message(const struct job *j, enum job_event event, const char *to,
                          const char *hostname)
{
    return notify_smtp_message(j, event, to, hostname, NULL, NULL);
}

char *notify_smtp_message(const struct job *j, enum job_event event, const char *to,
                          const char *hostname, const char *from, const char *subject_prefix)
{
    struct strbuf sb;
    strbuf_init(&sb);
    if (from) {
        strbuf_adds(&sb, "From: ");
        add_header_text(&sb, from, 1000);
        strbuf_addc(&sb, '\n');
    }
    strbuf_adds(&sb, "To: ");
    add_header_text(&sb, to, 4096);
    strbuf_adds(&sb, "\nSubject: ");
    if (subject_prefix) {
        add_header_text(&sb, subject_prefix, 200);
        strbuf_addc(&sb, ' ');
    }
    strbuf_addf(&sb, "gflow job %lld (", (long long)j->id);
    add_header_text(&sb, j->name ? j->name : "-", 200);
    strbuf_addf(&sb, ") %s\n", event_verb(event));
    strbuf_adds(&sb, "Content-Type: text/plain; charset=utf-8\n"
                     "Auto-Submitted: auto-generated\n"
                     "X-Gflow-Event: ");
    strbuf_adds(&sb, job_notify_events[event]);
    strbuf_adds(&sb, "\n\n");
    strbuf_addf(&sb, "Job %lld (", (long long)j->id);
    add_header_text(&sb, j->name ? j->name : "-", 1000);
    strbuf_addf(&sb, ") %s.\n\n", event_verb(event));
    strbuf_addf(&sb, "%-11s%s\n", "Event:", job_notify_events[event]);
    add_line(&sb, "User:", j->user);
    strbuf_addf(&sb, "%-11s%s (%s)\n", "State:", job_state_short(j->state),
                job_state_name(j->state));
    if (j->reason != JOB_REASON_NONE)
        strbuf_addf(&sb, "%-11s%s\n", "Reason:", job_reason_name(j->reason));
    if (j->exit_code >= 0)
        strbuf_addf(&sb, "%-11s%d\n", "Exit code:", j->exit_code);
    add_time_line(&sb, "Submitted:", j->submit_time);
    add_time_line(&sb, "Started:", j->start_time);
    add_time_line(&sb, "Ended:", j->end_time);
    add_line(&sb, "Project:", j->project);
    if (j->gpus)
        strbuf_addf(&sb, "%-11s%d\n", "GPUs:", j->gpus);
    add_line(&sb, "Host:", hostname);
    strbuf_addf(&sb, "\n-- \ngflow (gbatch --notify-email); see gjob show %lld\n",
                (long long)j->id);
    return strbuf_detach(&sb);
}

double notify_backoff(int attempt)
{
    double d = 1;
    for (int i = 1; i < attempt && d < NOTIFY_BACKOFF_MAX; i++)
        d *= 2;
    return d < NOTIFY_BACKOFF_MAX ? d : NOTIFY_BACKOFF_MAX;
}

char *notify_signature(const char *secret, const char *body, size_t len)
{
    uint8_t mac[SHA256_DIGEST_LEN];
    char hex[2 * SHA256_DIGEST_LEN + 1];
    hmac_sha256(secret, strlen(secret), body, len, mac);
    sha256_hex(mac, hex);
    return xasprintf("sha256=%s", hex);
}
