/* test_notify: what notifications are made of: SHA-256 and HMAC-SHA256 on the FIPS 180-2
 * and RFC 4231 vectors, the webhook payload and signature, the delivery id, the e-mail
 * message (no header can be injected through a job's name), the retry schedule, the
 * [notifications] section of gflow.toml (and its errors), and --notify-on's names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "job.h"
#include "notifyconf.h"
#include "notifymsg.h"
#include "sha256.h"
#include "util.h"

static void hex_of_sha256(const void *data, size_t len, char *hex)
{
    uint8_t d[SHA256_DIGEST_LEN];
    sha256(data, len, d);
    sha256_hex(d, hex);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    char hex[65];
    hex_of_sha256("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hex_of_sha256("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of_sha256(two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* A million 'a', fed in uneven pieces (the block boundary falls inside updates). */
    struct sha256 c;
    sha256_init(&c);
    char piece[997];
    memset(piece, 'a', sizeof(piece));
    size_t left = 1000000;
    while (left) {
        size_t n = left < sizeof(piece) ? left : sizeof(piece);
        sha256_update(&c, piece, n);
        left -= n;
    }
    uint8_t d[SHA256_DIGEST_LEN];
    sha256_final(&c, d);
    sha256_hex(d, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void hmac_hex(const void *key, size_t key_len, const char *data, char *hex)
{
    uint8_t d[SHA256_DIGEST_LEN];
    hmac_sha256(key, key_len, data, strlen(data), d);
    sha256_hex(d, hex);
}

static void test_hmac_rfc4231(void **state)
{
    (void)state;
    char hex[65];
    uint8_t key[131];
    memset(key, 0x0b, 20);
    hmac_hex(key, 20, "Hi There", hex); /* test case 1 */
    assert_string_equal(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    hmac_hex("Jefe", 4, "what do ya want for nothing?", hex); /* 2 */
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(key, 0xaa, sizeof(key)); /* 6: a key longer than a block is hashed first */
    hmac_hex(key, 131, "Test Using Larger Than Block-Size Key - Hash Key First", hex);
    assert_string_equal(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    char *sig = notify_signature("Jefe", "what do ya want for nothing?", 28);
    assert_string_equal(sig,
                        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    free(sig);
}

static struct job *sample_job(void)
{
    struct job *j = job_new();
    j->id = 12;
    j->name = xstrdup("train");
    j->user = xstrdup("alice");
    j->state = JOB_FAILED;
    j->reason = JOB_REASON_NON_ZERO_EXIT;
    j->exit_code = 3;
    j->submit_time = 1700000000;
    j->start_time = 1700000010;
    j->end_time = 1700000070.5;
    j->project = xstrdup("vision");
    j->gpus = 2;
    j->gpu_mask = 0x5;
    return j;
}

static void test_payload_and_delivery_id(void **state)
{
    (void)state;
    struct job *j = sample_job();
    char *payload = notify_payload(j, JOB_EVENT_FAILED, "node1", 1700000071);
    char *body = notify_webhook_body(payload, "12-job_failed");
    json_t *o = json_loads(body, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "event")), "job_failed");
    assert_int_equal(json_integer_value(json_object_get(o, "job_id")), 12);
    assert_string_equal(json_string_value(json_object_get(o, "name")), "train");
    assert_string_equal(json_string_value(json_object_get(o, "user")), "alice");
    assert_string_equal(json_string_value(json_object_get(o, "state")), "F");
    assert_string_equal(json_string_value(json_object_get(o, "reason")), "NonZeroExitCode");
    assert_int_equal(json_integer_value(json_object_get(o, "exit_code")), 3);
    assert_string_equal(json_string_value(json_object_get(o, "project")), "vision");
    assert_int_equal(json_integer_value(json_object_get(o, "gpus")), 2);
    assert_string_equal(json_string_value(json_object_get(o, "gpu_ids")), "0,2");
    assert_string_equal(json_string_value(json_object_get(o, "hostname")), "node1");
    assert_true(json_number_value(json_object_get(o, "end_time")) == 1700000070.5);
    assert_string_equal(json_string_value(json_object_get(o, "delivery_id")), "12-job_failed");
    json_decref(o);
    free(body);
    free(payload);
    assert_null(notify_webhook_body("not json", "x"));

    char *id = notify_delivery_id(12, "job_completed", 99);
    assert_string_equal(id, "12-job_completed"); /* once per job */
    free(id);
    id = notify_delivery_id(12, "job_started", 99);
    assert_string_equal(id, "12-job_started-99"); /* may happen again (requeue) */
    free(id);
    job_free(j);
}

/* The message's header lines (up to the blank line). */
static size_t header_lines(const char *msg, char lines[][512], size_t max)
{
    size_t n = 0;
    const char *p = msg;
    while (*p && *p != '\n' && n < max) {
        size_t len = strcspn(p, "\n");
        snprintf(lines[n++], 512, "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
    }
    return n;
}

static void test_mail_message_and_header_injection(void **state)
{
    (void)state;
    struct job *j = sample_job();
    char *msg = notify_mail_message(j, JOB_EVENT_FAILED, "a@x.org,b@x.org", "node1");
    char lines[16][512];
    size_t n = header_lines(msg, lines, 16);
    assert_int_equal(n, 5);
    assert_string_equal(lines[0], "To: a@x.org,b@x.org");
    assert_string_equal(lines[1], "Subject: gflow job 12 (train) failed");
    assert_non_null(strstr(msg, "\n\nJob 12 (train) failed.\n"));
    assert_non_null(strstr(msg, "Reason:    NonZeroExitCode\n"));
    assert_non_null(strstr(msg, "Exit code: 3\n"));
    assert_non_null(strstr(msg, "Ended:     2023-11-14 22:14:30 UTC\n"));
    free(msg);

    /* A name (or address) with line breaks cannot add a header. */
    free(j->name);
    j->name = xstrdup("x\r\nBcc: victim@example.com\nX-Evil: 1");
    msg = notify_mail_message(j, JOB_EVENT_TIMEOUT, "a@x.org\nCc: c@evil.org", "node1");
    n = header_lines(msg, lines, 16);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < n; i++) {
        assert_null(strstr(lines[i], "\r"));
        assert_true(strncmp(lines[i], "Bcc:", 4) && strncmp(lines[i], "Cc:", 3) &&
                    strncmp(lines[i], "X-Evil:", 7));
    }
    assert_string_equal(lines[0], "To: a@x.org Cc: c@evil.org");
    assert_string_equal(lines[1],
                        "Subject: gflow job 12 (x  Bcc: victim@example.com X-Evil: 1) timed out");
    free(msg);
    job_free(j);
}

static void test_backoff_doubles_up_to_a_cap(void **state)
{
    (void)state;
    assert_true(notify_backoff(1) == 1);
    assert_true(notify_backoff(2) == 2);
    assert_true(notify_backoff(3) == 4);
    assert_true(notify_backoff(9) == 256);
    assert_true(notify_backoff(10) == NOTIFY_BACKOFF_MAX);
    assert_true(notify_backoff(1000) == NOTIFY_BACKOFF_MAX);
}

static int load(struct gflow_config *c, const char *text, char **err)
{
    config_init(c);
    return config_load_text(c, "/etc/gflow.toml", text, strlen(text), err);
}

static void test_config_webhooks(void **state)
{
    (void)state;
    struct gflow_config c;
    char *err = NULL;
    const char *text = "[notifications]\n"
                       "enabled = true\n"
                       "max_concurrent_deliveries = 4\n"
                       "sendmail = \"/usr/sbin/sendmail\"\n"
                       "[[notifications.webhooks]]\n"
                       "url = \"https://api.example.com/gflow/events\"\n"
                       "events = [\"job_completed\", \"job_failed\"]\n"
                       "filter_users = [\"alice\", \"bob\"]\n"
                       "headers = { Authorization = \"Bearer token123\" }\n"
                       "timeout_secs = 5\n"
                       "max_retries = 2\n"
                       "secret = \"k\"\n"
                       "[[notifications.webhooks]]\n"
                       "url = \"http://127.0.0.1:9/all\"\n"
                       "events = [\"*\"]\n";
    assert_int_equal(load(&c, text, &err), 0);
    const struct notify_config *n = &c.notify;
    assert_true(n->enabled);
    assert_int_equal(n->max_concurrent_deliveries, 4);
    assert_string_equal(n->sendmail, "/usr/sbin/sendmail");
    assert_int_equal(n->n_webhooks, 2);
    const struct notify_webhook *w = &n->webhooks[0];
    assert_int_equal(w->events, (1u << JOB_EVENT_COMPLETED) | (1u << JOB_EVENT_FAILED));
    assert_int_equal(w->n_headers, 1);
    assert_string_equal(w->headers[0], "Authorization: Bearer token123");
    assert_int_equal(w->timeout_secs, 5);
    assert_int_equal(w->max_retries, 2);
    assert_string_equal(w->secret, "k");
    assert_true(notify_webhook_wants(w, JOB_EVENT_FAILED, "bob"));
    assert_false(notify_webhook_wants(w, JOB_EVENT_FAILED, "carol"));
    assert_false(notify_webhook_wants(w, JOB_EVENT_STARTED, "bob"));
    assert_int_equal(n->webhooks[1].events, JOB_NOTIFY_ALL);
    assert_int_equal(n->webhooks[1].timeout_secs, 10); /* defaults */
    assert_int_equal(n->webhooks[1].max_retries, 3);
    assert_true(notify_config_webhook(n, "http://127.0.0.1:9/all") == &n->webhooks[1]);
    assert_null(notify_config_webhook(n, "http://elsewhere/"));

    struct notify_config copy;
    notify_config_copy(&copy, n);
    assert_true(notify_config_equal(&copy, n));
    copy.webhooks[0].max_retries = 9;
    assert_false(notify_config_equal(&copy, n));
    notify_config_free(&copy);
    config_free(&c);
}

static void expect_error(const char *text, const char *needle)
{
    struct gflow_config c;
    char *err = NULL;
    assert_int_equal(load(&c, text, &err), -1);
    assert_non_null(err);
    if (!strstr(err, needle))
        fail_msg("'%s' not in '%s'", needle, err);
    assert_null(strchr(err, '\n'));
    assert_non_null(strstr(err, "/etc/gflow.toml:"));
    free(err);
    config_free(&c);
}

static void test_config_errors(void **state)
{
    (void)state;
    expect_error("[[notifications.webhooks]]\nurl = \"ftp://x/y\"\n",
                 "is not an http:// or https:// URL");
    expect_error("[[notifications.webhooks]]\nurl = \"http://\"\n", "is not an http://");
    expect_error("[[notifications.webhooks]]\nurl = \"http://x\"\nevents = [\"job_exploded\"]\n",
                 "unknown event 'job_exploded'");
    expect_error("[[notifications.webhooks]]\nevents = [\"*\"]\n", "needs a url");
    expect_error("[[notifications.webhooks]]\nurl = \"http://x\"\nheaders = { \"Bad Name\" = "
                 "\"v\" }\n",
                 "header name");
    expect_error("[[notifications.webhooks]]\nurl = \"http://x\"\ntimeout_secs = 0\n",
                 "timeout_secs must be an integer >= 1");
    expect_error("[notifications]\nsendmail = \"sendmail\"\n", "absolute path");
    expect_error("[notifications]\nwebhook = []\n", "unknown key 'notifications.webhook'");
    expect_error("[notifications]\nenabled = 1\n", "true or false");
}

/* [[notifications.emails]] (gflow's SMTP targets) and the message they send. */
static void test_config_emails(void **state)
{
    (void)state;
    struct gflow_config c;
    char *err = NULL;
    const char *text = "[[notifications.emails]]\n"
                       "smtp_url = \"smtps://user:pass@smtp.example.com:465\"\n"
                       "from = \"gflow <noreply@example.com>\"\n"
                       "to = [\"alice@example.com\", \"ml-oncall@example.com\"]\n"
                       "events = [\"job_failed\", \"job_timeout\"]\n"
                       "filter_users = [\"alice\"]\n"
                       "subject_prefix = \"[gflow-prod]\"\n"
                       "timeout_secs = 5\n"
                       "max_retries = 1\n"
                       "[[notifications.emails]]\n"
                       "smtp_url = \"smtp://localhost:25\"\n"
                       "from = \"noreply@example.com\"\n";
    assert_int_equal(load(&c, text, &err), 0);
    const struct notify_config *n = &c.notify;
    assert_int_equal(n->n_emails, 2);
    const struct notify_email *m = &n->emails[0];
    assert_int_equal(m->n_to, 2);
    assert_string_equal(m->subject_prefix, "[gflow-prod]");
    assert_int_equal(m->timeout_secs, 5);
    assert_int_equal(m->max_retries, 1);
    assert_true(notify_email_wants(m, JOB_EVENT_FAILED, "alice"));
    assert_false(notify_email_wants(m, JOB_EVENT_FAILED, "bob"));
    assert_false(notify_email_wants(m, JOB_EVENT_COMPLETED, "alice"));
    /* No recipients of its own: only per-job mail goes through it. */
    assert_false(notify_email_wants(&n->emails[1], JOB_EVENT_FAILED, "alice"));
    assert_true(notify_email_allows_user(&n->emails[1], "bob"));
    assert_int_equal(n->emails[1].events, JOB_NOTIFY_ALL);
    struct notify_config copy;
    notify_config_copy(&copy, n);
    assert_true(notify_config_equal(&copy, n));
    free(copy.emails[1].from);
    copy.emails[1].from = xstrdup("other@example.com");
    assert_false(notify_config_equal(&copy, n));
    notify_config_free(&copy);
    config_free(&c);

    struct job *j = sample_job();
    char *msg = notify_smtp_message(j, JOB_EVENT_FAILED, "a@x.org", "node1",
                                    "gflow <noreply@example.com>", "[prod]");
    char lines[16][512];
    size_t k = header_lines(msg, lines, 16);
    assert_int_equal(k, 6);
    assert_string_equal(lines[0], "From: gflow <noreply@example.com>");
    assert_string_equal(lines[2], "Subject: [prod] gflow job 12 (train) failed");
    free(msg);
    job_free(j);

    expect_error("[[notifications.emails]]\nsmtp_url = \"http://x\"\nfrom = \"a@b.c\"\n",
                 "must be an smtp:// or smtps:// URL");
    expect_error("[[notifications.emails]]\nsmtp_url = \"smtp://x\"\n", "needs smtp_url and from");
    expect_error("[[notifications.emails]]\nsmtp_url = \"smtp://x\"\nfrom = \"nobody\"\n",
                 "must be an e-mail address");
    expect_error("[[notifications.emails]]\nsmtp_url = \"smtp://x\"\nfrom = \"a@b.c\"\n"
                 "to = [\"not an address\"]\n",
                 "is not an e-mail address");
    expect_error("[[notifications.emails]]\nsmtp_url = \"smtp://x\"\nfrom = \"a@b.c\"\n"
                 "cc = []\n",
                 "unknown key 'notifications.emails[0].cc'");
}

static void test_event_names_and_aliases(void **state)
{
    (void)state;
    assert_int_equal(job_notify_event_index("job_timeout"), JOB_EVENT_TIMEOUT);
    assert_int_equal(job_notify_event_index("job_exploded"), -1);
    assert_string_equal(job_notify_event_alias("begin"), "job_started");
    assert_string_equal(job_notify_event_alias("end"), "job_completed");
    assert_string_equal(job_notify_event_alias("fail"), "job_failed");
    assert_string_equal(job_notify_event_alias("timeout"), "job_timeout");
    assert_null(job_notify_event_alias("job_failed"));
    assert_true(job_notify_on_has("job_started,job_failed", JOB_EVENT_FAILED));
    assert_true(job_notify_on_has("job_started,job_failed", JOB_EVENT_STARTED));
    assert_false(job_notify_on_has("job_started,job_failed", JOB_EVENT_COMPLETED));
    assert_false(job_notify_on_has(NULL, JOB_EVENT_COMPLETED));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_payload_and_delivery_id),
        cmocka_unit_test(test_mail_message_and_header_injection),
        cmocka_unit_test(test_backoff_doubles_up_to_a_cap),
        cmocka_unit_test(test_config_webhooks),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_emails),
        cmocka_unit_test(test_event_names_and_aliases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
