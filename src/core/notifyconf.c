/* notifyconf: see notifyconf.h. */
#include "notifyconf.h"

#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "toml.h"
#include "util.h"

void notify_config_init(struct notify_config *c)
{
    memset(c, 0, sizeof(*c));
    c->enabled = true;
    c->max_concurrent_deliveries = 16;
    c->email_max_retries = 3;
    c->max_pending_per_user = 1000;
    c->keep_secs = 86400;
}

static void strings_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static char **strings_copy(char *const *v, size_t n)
{
    if (!n)
        return NULL;
    char **out = xcalloc(n, sizeof(*out));
    for (size_t i = 0; i < n; i++)
        out[i] = xstrdup(v[i]);
    return out;
}

static void webhook_free(struct notify_webhook *w)
{
    free(w->url);
    strings_free(w->filter_users, w->n_filter_users);
    strings_free(w->headers, w->n_headers);
    free(w->secret);
}

static void email_free(struct notify_email *m)
{
    free(m->smtp_url);
    free(m->from);
    strings_free(m->to, m->n_to);
    strings_free(m->filter_users, m->n_filter_users);
    free(m->subject_prefix);
}

void notify_config_free(struct notify_config *c)
{
    for (size_t i = 0; i < c->n_webhooks; i++)
        webhook_free(&c->webhooks[i]);
    free(c->webhooks);
    for (size_t i = 0; i < c->n_emails; i++)
        email_free(&c->emails[i]);
    free(c->emails);
    free(c->sendmail);
    memset(c, 0, sizeof(*c));
}

void notify_config_copy(struct notify_config *dst, const struct notify_config *src)
{
    *dst = *src;
    dst->sendmail = src->sendmail ? xstrdup(src->sendmail) : NULL;
    dst->webhooks = src->n_webhooks ? xcalloc(src->n_webhooks, sizeof(*dst->webhooks)) : NULL;
    for (size_t i = 0; i < src->n_webhooks; i++) {
        const struct notify_webhook *s = &src->webhooks[i];
        struct notify_webhook *d = &dst->webhooks[i];
        *d = *s;
        d->url = xstrdup(s->url);
        d->filter_users = strings_copy(s->filter_users, s->n_filter_users);
        d->headers = strings_copy(s->headers, s->n_headers);
        d->secret = s->secret ? xstrdup(s->secret) : NULL;
    }
    dst->emails = src->n_emails ? xcalloc(src->n_emails, sizeof(*dst->emails)) : NULL;
    for (size_t i = 0; i < src->n_emails; i++) {
        const struct notify_email *s = &src->emails[i];
        struct notify_email *d = &dst->emails[i];
        *d = *s;
        d->smtp_url = xstrdup(s->smtp_url);
        d->from = xstrdup(s->from);
        d->to = strings_copy(s->to, s->n_to);
        d->filter_users = strings_copy(s->filter_users, s->n_filter_users);
        d->subject_prefix = s->subject_prefix ? xstrdup(s->subject_prefix) : NULL;
    }
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static bool same_strings(char *const *a, size_t na, char *const *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]))
            return false;
    return true;
}

bool notify_config_equal(const struct notify_config *a, const struct notify_config *b)
{
    if (a->enabled != b->enabled || a->max_concurrent_deliveries != b->max_concurrent_deliveries ||
        !same_str(a->sendmail, b->sendmail) || a->email_max_retries != b->email_max_retries ||
        a->max_pending_per_user != b->max_pending_per_user || a->keep_secs != b->keep_secs ||
        a->n_webhooks != b->n_webhooks)
        return false;
    for (size_t i = 0; i < a->n_webhooks; i++) {
        const struct notify_webhook *x = &a->webhooks[i], *y = &b->webhooks[i];
        if (strcmp(x->url, y->url) || x->events != y->events ||
            !same_strings(x->filter_users, x->n_filter_users, y->filter_users, y->n_filter_users) ||
            !same_strings(x->headers, x->n_headers, y->headers, y->n_headers) ||
            x->timeout_secs != y->timeout_secs || x->max_retries != y->max_retries ||
            !same_str(x->secret, y->secret))
            return false;
    }
    if (a->n_emails != b->n_emails)
        return false;
    for (size_t i = 0; i < a->n_emails; i++) {
        const struct notify_email *x = &a->emails[i], *y = &b->emails[i];
        if (strcmp(x->smtp_url, y->smtp_url) || strcmp(x->from, y->from) ||
            !same_strings(x->to, x->n_to, y->to, y->n_to) || x->events != y->events ||
            !same_strings(x->filter_users, x->n_filter_users, y->filter_users, y->n_filter_users) ||
            !same_str(x->subject_prefix, y->subject_prefix) || x->timeout_secs != y->timeout_secs ||
            x->max_retries != y->max_retries)
            return false;
    }
    return true;
}

static bool user_in(char *const *users, size_t n, const char *user)
{
    if (!n)
        return true;
    for (size_t i = 0; i < n; i++)
        if (user && !strcmp(users[i], user))
            return true;
    return false;
}

bool notify_email_allows_user(const struct notify_email *m, const char *user)
{
    return user_in(m->filter_users, m->n_filter_users, user);
}

bool notify_email_wants(const struct notify_email *m, int event, const char *user)
{
    return m->n_to && (m->events & (1u << event)) && notify_email_allows_user(m, user);
}

bool notify_webhook_wants(const struct notify_webhook *w, int event, const char *user)
{
    if (!(w->events & (1u << event)))
        return false;
    if (!w->n_filter_users)
        return true;
    for (size_t i = 0; i < w->n_filter_users; i++)
        if (user && !strcmp(w->filter_users[i], user))
            return true;
    return false;
}

const struct notify_webhook *notify_config_webhook(const struct notify_config *c, const char *url)
{
    for (size_t i = 0; i < c->n_webhooks; i++)
        if (!strcmp(c->webhooks[i].url, url))
            return &c->webhooks[i];
    return NULL;
}

/* ---- reading the TOML ---- */

/* A string without NUL bytes or line breaks (it goes into a header or onto a line). */
static const char *plain_string(const struct toml_value *v)
{
    size_t len;
    if (toml_type_of(v) != TOML_STRING)
        return NULL;
    const char *s = toml_string(v, &len);
    return strlen(s) == len && !strpbrk(s, "\r\n") ? s : NULL;
}

static int int_key(const struct toml_value *v, int64_t min, int64_t *out, const char *name,
                   char **err)
{
    if (toml_type_of(v) != TOML_INTEGER || toml_integer(v) < min) {
        *err = xasprintf("%s must be an integer >= %lld", name, (long long)min);
        return -1;
    }
    *out = toml_integer(v);
    return 0;
}

static int url_check(const char *url, const char *where, char **err)
{
    if (!url) {
        *err = xasprintf("%s.url must be a string (http://... or https://...)", where);
        return -1;
    }
    const char *rest = !strncmp(url, "http://", 7)    ? url + 7
                       : !strncmp(url, "https://", 8) ? url + 8
                                                      : NULL;
    if (!rest || !*rest || *rest == '/' || strpbrk(url, " \t")) {
        *err = xasprintf("%s.url '%s' is not an http:// or https:// URL", where, url);
        return -1;
    }
    return 0;
}

static int events_from_toml(uint32_t *events, const struct toml_value *v, const char *where,
                            char **err, int *line)
{
    if (toml_type_of(v) != TOML_ARRAY || !toml_array_len(v)) {
        *err = xasprintf("%s.events must be a non-empty list of event names, or [\"*\"]", where);
        return -1;
    }
    *events = 0;
    for (size_t i = 0; i < toml_array_len(v); i++) {
        const struct toml_value *e = toml_array_at(v, i);
        *line = toml_line(e);
        const char *name = plain_string(e);
        int idx = name ? job_notify_event_index(name) : -1;
        if (name && !strcmp(name, "*")) {
            *events = JOB_NOTIFY_ALL;
            continue;
        }
        if (idx < 0) {
            *err = xasprintf("%s.events: unknown event '%s'; use \"*\" or %s", where,
                             name ? name : "?", JOB_NOTIFY_EVENT_LIST);
            return -1;
        }
        *events |= 1u << idx;
    }
    return 0;
}

/* A list of one-line non-empty strings (users, addresses) into *out, *n. */
static int strings_from_toml(char ***out, size_t *n, const struct toml_value *v, const char *name,
                             const char *what, char **err)
{
    if (toml_type_of(v) != TOML_ARRAY) {
        *err = xasprintf("%s must be a list of %s", name, what);
        return -1;
    }
    for (size_t i = 0; i < toml_array_len(v); i++) {
        const char *s = plain_string(toml_array_at(v, i));
        if (!s || !*s) {
            *err = xasprintf("%s must be a list of %s", name, what);
            return -1;
        }
        *out = xrealloc(*out, (*n + 1) * sizeof(char *));
        (*out)[(*n)++] = xstrdup(s);
    }
    return 0;
}

static int users_from_toml(char ***users, size_t *n, const struct toml_value *v, const char *where,
                           char **err)
{
    char *name = xasprintf("%s.filter_users", where);
    int rc = strings_from_toml(users, n, v, name, "user names", err);
    free(name);
    return rc;
}

/* An HTTP header name: RFC 9110's token characters. */
static bool header_name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *s)))
            return false;
    return true;
}

static int headers_from_toml(struct notify_webhook *w, const struct toml_value *v,
                             const char *where, char **err)
{
    if (toml_type_of(v) != TOML_TABLE) {
        *err =
            xasprintf("%s.headers must be a table, e.g. { Authorization = \"Bearer x\" }", where);
        return -1;
    }
    for (size_t i = 0; i < toml_table_len(v); i++) {
        size_t len;
        const char *name = toml_table_key(v, i, &len);
        const char *value = plain_string(toml_table_value(v, i));
        if (strlen(name) != len || !header_name_ok(name) || !value) {
            *err = xasprintf("%s.headers: '%s' must be a header name with a one-line string", where,
                             name);
            return -1;
        }
        w->headers = xrealloc(w->headers, (w->n_headers + 1) * sizeof(char *));
        w->headers[w->n_headers++] = xasprintf("%s: %s", name, value);
    }
    return 0;
}

static int webhook_key(struct notify_webhook *w, const char *key, const struct toml_value *v,
                       const char *where, char **err, int *line)
{
    char *name = xasprintf("%s.%s", where, key);
    int rc = 0;
    if (!strcmp(key, "url")) {
        const char *url = plain_string(v);
        rc = url_check(url, where, err);
        if (rc == 0)
            w->url = xstrdup(url);
    } else if (!strcmp(key, "events")) {
        rc = events_from_toml(&w->events, v, where, err, line);
    } else if (!strcmp(key, "filter_users")) {
        rc = users_from_toml(&w->filter_users, &w->n_filter_users, v, where, err);
    } else if (!strcmp(key, "headers")) {
        rc = headers_from_toml(w, v, where, err);
    } else if (!strcmp(key, "timeout_secs")) {
        rc = int_key(v, 1, &w->timeout_secs, name, err);
    } else if (!strcmp(key, "max_retries")) {
        rc = int_key(v, 0, &w->max_retries, name, err);
    } else if (!strcmp(key, "secret")) {
        const char *s = plain_string(v);
        if (!s || !*s) {
            *err = xasprintf("%s must be a non-empty string", name);
            rc = -1;
        } else {
            w->secret = xstrdup(s);
        }
    } else {
        *err = xasprintf("unknown key '%s' (a webhook has url, events, filter_users, headers, "
                         "timeout_secs, max_retries, secret)",
                         name);
        rc = -1;
    }
    free(name);
    return rc;
}

static int webhooks_from_toml(struct notify_config *c, const struct toml_value *v, char **err,
                              int *line)
{
    if (toml_type_of(v) != TOML_ARRAY) {
        *err = xstrdup("notifications.webhooks must be tables: [[notifications.webhooks]]");
        return -1;
    }
    /* The file's list replaces any earlier one. */
    for (size_t i = 0; i < c->n_webhooks; i++)
        webhook_free(&c->webhooks[i]);
    free(c->webhooks);
    c->webhooks = NULL;
    c->n_webhooks = 0;
    for (size_t i = 0; i < toml_array_len(v); i++) {
        const struct toml_value *t = toml_array_at(v, i);
        *line = toml_line(t);
        char *where = xasprintf("notifications.webhooks[%zu]", i);
        if (toml_type_of(t) != TOML_TABLE) {
            *err = xasprintf("%s must be a table", where);
            free(where);
            return -1;
        }
        c->webhooks = xrealloc(c->webhooks, (c->n_webhooks + 1) * sizeof(*c->webhooks));
        struct notify_webhook *w = &c->webhooks[c->n_webhooks++];
        memset(w, 0, sizeof(*w));
        w->events = JOB_NOTIFY_ALL;
        w->timeout_secs = 10;
        w->max_retries = 3;
        int rc = 0;
        for (size_t k = 0; k < toml_table_len(t) && rc == 0; k++) {
            *line = toml_line(toml_table_value(t, k));
            rc = webhook_key(w, toml_table_key(t, k, NULL), toml_table_value(t, k), where, err,
                             line);
        }
        if (rc == 0 && !w->url) {
            *line = toml_line(t);
            *err = xasprintf("%s needs a url", where);
            rc = -1;
        }
        free(where);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* An address as SMTP wants it: "Name <a@b>" or "a@b", one line, an '@' inside. */
static bool mailbox_ok(const char *s)
{
    const char *lt = strchr(s, '<');
    const char *addr = lt ? lt + 1 : s;
    size_t len = lt ? strcspn(addr, ">") : strlen(addr);
    if (lt && addr[len] != '>')
        return false;
    const char *at = memchr(addr, '@', len);
    return len > 2 && at && at != addr && at != addr + len - 1 && !memchr(addr, ' ', len);
}

static int mailboxes_from_toml(char ***out, size_t *n, const struct toml_value *v, const char *name,
                               char **err)
{
    if (strings_from_toml(out, n, v, name, "addresses", err) < 0)
        return -1;
    for (size_t i = 0; i < *n; i++)
        if (!mailbox_ok((*out)[i])) {
            *err = xasprintf("%s: '%s' is not an e-mail address (a@b or \"Name <a@b>\")", name,
                             (*out)[i]);
            return -1;
        }
    return 0;
}

static int email_key(struct notify_email *m, const char *key, const struct toml_value *v,
                     const char *where, char **err, int *line)
{
    char *name = xasprintf("%s.%s", where, key);
    int rc = 0;
    const char *s = plain_string(v);
    if (!strcmp(key, "smtp_url")) {
        if (!s || (strncmp(s, "smtp://", 7) && strncmp(s, "smtps://", 8)) || strpbrk(s, " \t")) {
            *err = xasprintf("%s must be an smtp:// or smtps:// URL, e.g. "
                             "\"smtps://user:pass@smtp.example.com:465\"",
                             name);
            rc = -1;
        } else {
            free(m->smtp_url);
            m->smtp_url = xstrdup(s);
        }
    } else if (!strcmp(key, "from")) {
        if (!s || !mailbox_ok(s)) {
            *err = xasprintf("%s must be an e-mail address (a@b or \"Name <a@b>\")", name);
            rc = -1;
        } else {
            free(m->from);
            m->from = xstrdup(s);
        }
    } else if (!strcmp(key, "to")) {
        rc = mailboxes_from_toml(&m->to, &m->n_to, v, name, err);
    } else if (!strcmp(key, "events")) {
        rc = events_from_toml(&m->events, v, where, err, line);
    } else if (!strcmp(key, "filter_users")) {
        rc = users_from_toml(&m->filter_users, &m->n_filter_users, v, where, err);
    } else if (!strcmp(key, "subject_prefix")) {
        if (!s) {
            *err = xasprintf("%s must be a one-line string", name);
            rc = -1;
        } else {
            free(m->subject_prefix);
            m->subject_prefix = *s ? xstrdup(s) : NULL;
        }
    } else if (!strcmp(key, "timeout_secs")) {
        rc = int_key(v, 1, &m->timeout_secs, name, err);
    } else if (!strcmp(key, "max_retries")) {
        rc = int_key(v, 0, &m->max_retries, name, err);
    } else {
        *err = xasprintf("unknown key '%s' (an e-mail target has smtp_url, from, to, events, "
                         "filter_users, subject_prefix, timeout_secs, max_retries)",
                         name);
        rc = -1;
    }
    free(name);
    return rc;
}

static int emails_from_toml(struct notify_config *c, const struct toml_value *v, char **err,
                            int *line)
{
    if (toml_type_of(v) != TOML_ARRAY) {
        *err = xstrdup("notifications.emails must be tables: [[notifications.emails]]");
        return -1;
    }
    for (size_t i = 0; i < c->n_emails; i++)
        email_free(&c->emails[i]);
    free(c->emails);
    c->emails = NULL;
    c->n_emails = 0;
    for (size_t i = 0; i < toml_array_len(v); i++) {
        const struct toml_value *t = toml_array_at(v, i);
        *line = toml_line(t);
        char *where = xasprintf("notifications.emails[%zu]", i);
        if (toml_type_of(t) != TOML_TABLE) {
            *err = xasprintf("%s must be a table", where);
            free(where);
            return -1;
        }
        c->emails = xrealloc(c->emails, (c->n_emails + 1) * sizeof(*c->emails));
        struct notify_email *m = &c->emails[c->n_emails++];
        memset(m, 0, sizeof(*m));
        m->events = JOB_NOTIFY_ALL;
        m->timeout_secs = 10;
        m->max_retries = 3;
        int rc = 0;
        for (size_t k = 0; k < toml_table_len(t) && rc == 0; k++) {
            *line = toml_line(toml_table_value(t, k));
            rc = email_key(m, toml_table_key(t, k, NULL), toml_table_value(t, k), where, err, line);
        }
        if (rc == 0 && (!m->smtp_url || !m->from)) {
            *line = toml_line(t);
            *err = xasprintf("%s needs smtp_url and from", where);
            rc = -1;
        }
        free(where);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int notify_config_from_toml(struct notify_config *c, const struct toml_value *t, char **err,
                            int *line)
{
    *line = toml_line(t);
    for (size_t i = 0; i < toml_table_len(t); i++) {
        const char *key = toml_table_key(t, i, NULL);
        const struct toml_value *v = toml_table_value(t, i);
        *line = toml_line(v);
        int rc = 0;
        if (!strcmp(key, "enabled")) {
            if (toml_type_of(v) != TOML_BOOL) {
                *err = xstrdup("notifications.enabled must be true or false");
                rc = -1;
            } else {
                c->enabled = toml_bool(v);
            }
        } else if (!strcmp(key, "max_concurrent_deliveries")) {
            rc = int_key(v, 1, &c->max_concurrent_deliveries,
                         "notifications.max_concurrent_deliveries", err);
        } else if (!strcmp(key, "email_max_retries")) {
            rc = int_key(v, 0, &c->email_max_retries, "notifications.email_max_retries", err);
        } else if (!strcmp(key, "max_pending_per_user")) {
            rc = int_key(v, 1, &c->max_pending_per_user, "notifications.max_pending_per_user", err);
        } else if (!strcmp(key, "keep_secs")) {
            rc = int_key(v, 0, &c->keep_secs, "notifications.keep_secs", err);
        } else if (!strcmp(key, "sendmail")) {
            const char *s = plain_string(v);
            if (!s || s[0] != '/') {
                *err = xstrdup("notifications.sendmail must be an absolute path, e.g. "
                               "\"/usr/sbin/sendmail\"");
                rc = -1;
            } else {
                free(c->sendmail);
                c->sendmail = xstrdup(s);
            }
        } else if (!strcmp(key, "webhooks")) {
            rc = webhooks_from_toml(c, v, err, line);
        } else if (!strcmp(key, "emails")) {
            rc = emails_from_toml(c, v, err, line);
        } else {
            *err = xasprintf("unknown key 'notifications.%s' (the [notifications] keys are "
                             "enabled, max_concurrent_deliveries, sendmail, email_max_retries, "
                             "max_pending_per_user, keep_secs, webhooks, emails)",
                             key);
            rc = -1;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}
