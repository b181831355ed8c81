/* quota_state: the daemon's quota records (see quota_state.h). A lab has few users and projects:
 * records are found by a linear search, done when a job enters the table (submit,
 * load), never per pass or per start. */
#include "quota_state.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store/store.h"
#include "util.h"

#define OVERRIDES_SETTING "quota_overrides"

struct quotas {
    struct quota_config config; /* baseline */
    struct quota_set overrides;
    double period_start, period_end;
    struct quota_usage **subjects;
    size_t n, cap;
};

struct quotas *quotas_new(void)
{
    struct quotas *q = xcalloc(1, sizeof(*q));
    quota_config_init(&q->config);
    quota_set_init(&q->overrides);
    return q;
}

void quotas_free(struct quotas *q)
{
    if (!q)
        return;
    quota_config_free(&q->config);
    quota_set_free(&q->overrides);
    for (size_t i = 0; i < q->n; i++) {
        free(q->subjects[i]->name);
        free(q->subjects[i]);
    }
    free(q->subjects);
    free(q);
}

static void refresh_limits(struct quotas *q, struct quota_usage *u)
{
    quota_effective(&q->config.limits, &q->overrides, u->scope, u->name, &u->limits);
}

static void refresh_all(struct quotas *q)
{
    for (size_t i = 0; i < q->n; i++)
        refresh_limits(q, q->subjects[i]);
}

void quotas_set_config(struct quotas *q, const struct quota_config *c)
{
    quota_config_free(&q->config);
    quota_config_copy(&q->config, c);
    refresh_all(q);
}

const struct quota_config *quotas_config(const struct quotas *q)
{
    return &q->config;
}

struct quota_usage *quotas_subject(struct quotas *q, enum quota_scope scope, const char *name,
                                   bool create)
{
    for (size_t i = 0; i < q->n; i++)
        if (q->subjects[i]->scope == scope && strcmp(q->subjects[i]->name, name) == 0)
            return q->subjects[i];
    if (!create)
        return NULL;
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 16;
        q->subjects = xrealloc(q->subjects, q->cap * sizeof(*q->subjects));
    }
    struct quota_usage *u = xcalloc(1, sizeof(*u));
    u->name = xstrdup(name);
    u->scope = scope;
    refresh_limits(q, u);
    /* GPU-seconds: none yet; running jobs are counted from the period's start. */
    q->subjects[q->n++] = u;
    return u;
}

/* ---- start-up ---- */

static void usage_cb(const char *user, const char *project, double gpu_seconds, void *arg)
{
    struct quotas *q = arg;
    if (user)
        quotas_subject(q, QUOTA_USER, user, true)->gpu_seconds_base += gpu_seconds;
    if (project && *project)
        quotas_subject(q, QUOTA_PROJECT, project, true)->gpu_seconds_base += gpu_seconds;
}

int quotas_load(struct quotas *q, struct store *s, double now, char **err)
{
    char *text = NULL;
    int rc = store_get_setting(s, OVERRIDES_SETTING, &text);
    if (rc < 0) {
        *err = xasprintf("cannot read the quota overrides: %s", store_error(s));
        return -1;
    }
    if (rc == 0) {
        json_error_t jerr;
        json_t *o = json_loads(text, 0, &jerr);
        char *why = NULL;
        quota_set_free(&q->overrides);
        if (!o || quota_set_from_json(&q->overrides, o, &why) < 0) {
            /* Not fatal: the baseline still holds; an admin sets them again. */
            log_error("quota overrides in the store are unreadable (%s); ignored",
                      why ? why : jerr.text);
            quota_set_init(&q->overrides);
        }
        free(why);
        json_decref(o);
        free(text);
    }
    quota_period_bounds(q->config.period, now, &q->period_start, &q->period_end);
    if (store_gpu_seconds_since(s, q->period_start, usage_cb, q) < 0) {
        *err = xasprintf("cannot read the GPU time used in the quota period: %s", store_error(s));
        return -1;
    }
    refresh_all(q);
    return 0;
}

/* ---- jobs ---- */

static void count_in(struct quotas *q, struct quota_usage *u, const struct job *j,
                     enum job_state st)
{
    if (!u)
        return;
    int64_t g = j->gpus > 0 ? j->gpus : 0;
    if (st == JOB_QUEUED || st == JOB_HELD) {
        u->queued_jobs++;
    } else if (st == JOB_RUNNING) {
        u->running_jobs++;
        u->running_gpus += g;
        double from = j->start_time > q->period_start ? j->start_time : q->period_start;
        u->gpu_seconds_base -= (double)g * from;
    }
}

/* Takes j out of the counts of state st; ended: it ran until end_time (else it never
 * ran: a launch that did not happen). */
static void count_out(struct quotas *q, struct quota_usage *u, const struct job *j,
                      enum job_state st, bool ended)
{
    if (!u)
        return;
    int64_t g = j->gpus > 0 ? j->gpus : 0;
    if (st == JOB_QUEUED || st == JOB_HELD) {
        u->queued_jobs--;
    } else if (st == JOB_RUNNING) {
        u->running_jobs--;
        u->running_gpus -= g;
        double from = j->start_time > q->period_start ? j->start_time : q->period_start;
        double to = ended && j->end_time > from ? j->end_time : from;
        u->gpu_seconds_base += (double)g * to;
    }
}

void quotas_job_added(struct quotas *q, struct job *j)
{
    j->sched.quota_user = j->user ? quotas_subject(q, QUOTA_USER, j->user, true) : NULL;
    j->sched.quota_project =
        j->project && *j->project ? quotas_subject(q, QUOTA_PROJECT, j->project, true) : NULL;
    count_in(q, j->sched.quota_user, j, j->state);
    count_in(q, j->sched.quota_project, j, j->state);
}

void quotas_job_moved(struct quotas *q, struct job *j, enum job_state from)
{
    bool ended = job_state_is_terminal(j->state);
    count_out(q, j->sched.quota_user, j, from, ended);
    count_out(q, j->sched.quota_project, j, from, ended);
    count_in(q, j->sched.quota_user, j, j->state);
    count_in(q, j->sched.quota_project, j, j->state);
    if (ended)
        j->sched.quota_user = j->sched.quota_project = NULL;
}

bool quotas_tick(struct quotas *q, double now)
{
    if (now < q->period_end)
        return false;
    double old_start = q->period_start;
    quota_period_bounds(q->config.period, now, &q->period_start, &q->period_end);
    if (q->period_start == old_start)
        return false;
    /* Everything ended before the new period; the running jobs count from its start. */
    for (size_t i = 0; i < q->n; i++)
        q->subjects[i]->gpu_seconds_base = -(double)q->subjects[i]->running_gpus * q->period_start;
    log_info("quota period %s began: GPU-hours count from 0", quota_period_name(q->config.period));
    return true;
}

/* ---- overrides ---- */

static int save_overrides(struct quotas *q, struct store *s, char **err)
{
    json_t *o = quota_set_to_json(&q->overrides);
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    int rc = store_begin(s) < 0 ? -1 : store_set_setting(s, OVERRIDES_SETTING, text);
    free(text);
    if (rc < 0)
        *err = xasprintf("cannot store the quota overrides: %s", store_error(s));
    return rc;
}

int quotas_override_set(struct quotas *q, struct store *s, enum quota_scope scope, const char *name,
                        const struct quota_limits *l, char **err)
{
    quota_limits_merge(quota_set_entry(&q->overrides, scope, name, true), l);
    refresh_all(q);
    return save_overrides(q, s, err);
}

int quotas_override_clear(struct quotas *q, struct store *s, enum quota_scope scope,
                          const char *name, const bool *fields, bool *removed, char **err)
{
    struct quota_limits *e = quota_set_entry(&q->overrides, scope, name, false);
    bool had = false;
    for (int i = 0; e && i < QUOTA_N_LIMITS; i++)
        had |= (!fields || fields[i]) && quota_limit_get(e, i) >= 0;
    if (removed)
        *removed = had;
    if (e && fields) {
        for (int i = 0; i < QUOTA_N_LIMITS; i++)
            if (fields[i])
                quota_limit_set(e, i, -1);
        if (name && quota_limits_empty(e))
            quota_set_remove(&q->overrides, scope, name);
    } else if (e) {
        quota_set_remove(&q->overrides, scope, name);
    }
    refresh_all(q);
    return save_overrides(q, s, err);
}

/* ---- submit ---- */

static char *queued_refusal(const char *what, const char *name, const struct quota_usage *u,
                            size_t n, int64_t limit)
{
    const char *flag = strcmp(what, "user") == 0 ? "--user" : "--project";
    long long queued = u ? (long long)u->queued_jobs : 0;
    if (n == 1)
        return xasprintf("%s %s has %lld queued job%s, the limit max_queued_jobs is %lld; wait "
                         "or ask an admin (gctl quota show %s %s)",
                         what, name, queued, plural_s(queued), (long long)limit, flag, name);
    return xasprintf("%s %s has %lld queued job%s and this submission adds %zu, the limit "
                     "max_queued_jobs is %lld; submit fewer, wait or ask an admin (gctl quota "
                     "show %s %s)",
                     what, name, queued, plural_s(queued), n, (long long)limit, flag, name);
}

static char *check_one(struct quotas *q, enum quota_scope scope, const char *name, size_t n)
{
    struct quota_usage *u = quotas_subject(q, scope, name, false);
    struct quota_limits l;
    if (u)
        l = u->limits;
    else
        quota_effective(&q->config.limits, &q->overrides, scope, name, &l);
    int64_t have = u ? u->queued_jobs : 0;
    if (l.max_queued_jobs < 0 || have + (int64_t)n <= l.max_queued_jobs)
        return NULL;
    return queued_refusal(scope == QUOTA_USER ? "user" : "project", name, u, n, l.max_queued_jobs);
}

char *quotas_check_submit(struct quotas *q, const char *user, size_t n, const char *project,
                          size_t n_project)
{
    char *why = user ? check_one(q, QUOTA_USER, user, n) : NULL;
    if (!why && project && *project && n_project)
        why = check_one(q, QUOTA_PROJECT, project, n_project);
    return why;
}

/* ---- status ---- */

static json_t *subject_json(struct quotas *q, const struct quota_usage *u, const char *name,
                            enum quota_scope scope, double now)
{
    struct quota_limits eff;
    quota_effective(&q->config.limits, &q->overrides, scope, name, &eff);
    const struct quota_limits *over = quota_set_entry(&q->overrides, scope, name, false);
    struct quota_limits none;
    quota_limits_unset(&none);
    double secs = u ? quota_gpu_seconds(u, now) : 0;
    return json_pack("{s:s, s:s, s:o, s:o, s:{s:I, s:I, s:I, s:f}}", "scope",
                     scope == QUOTA_USER ? "user" : "project", "name", name, "limits",
                     quota_limits_to_json(&eff), "overrides",
                     quota_limits_to_json(over ? over : &none), "usage", "running_jobs",
                     (json_int_t)(u ? u->running_jobs : 0), "running_gpus",
                     (json_int_t)(u ? u->running_gpus : 0), "queued_jobs",
                     (json_int_t)(u ? u->queued_jobs : 0), "gpu_hours", secs / 3600.0);
}

/* Whether u is worth listing: it has limits of its own or uses anything (GPU time in
 * the period included). */
static bool listed(struct quotas *q, const struct quota_usage *u, double now)
{
    return u->running_jobs || u->queued_jobs || quota_gpu_seconds(u, now) > 0 ||
           quota_set_entry(&q->overrides, u->scope, u->name, false) ||
           quota_set_entry(&q->config.limits, u->scope, u->name, false);
}

static void add_named(struct quotas *q, json_t *list, enum quota_scope scope, double now)
{
    /* Every record with use or limits, and entries of either layer without a record. */
    for (size_t i = 0; i < q->n; i++)
        if (q->subjects[i]->scope == scope && listed(q, q->subjects[i], now))
            json_array_append_new(
                list, subject_json(q, q->subjects[i], q->subjects[i]->name, scope, now));
    const struct quota_set *layers[2] = {&q->config.limits, &q->overrides};
    for (int k = 0; k < 2; k++) {
        const struct quota_entry *e = scope == QUOTA_USER ? layers[k]->users : layers[k]->projects;
        size_t n = scope == QUOTA_USER ? layers[k]->n_users : layers[k]->n_projects;
        for (size_t i = 0; i < n; i++) {
            if (quotas_subject(q, scope, e[i].name, false))
                continue;
            /* An override of a name the baseline has too is listed once. */
            bool seen = k == 1 && quota_set_entry(&q->config.limits, scope, e[i].name, false);
            if (!seen)
                json_array_append_new(list, subject_json(q, NULL, e[i].name, scope, now));
        }
    }
}

json_t *quotas_status_json(struct quotas *q, const char *user, const char *project, double now)
{
    /* No quotas_tick here: the pass's tick marks the jobs to look at again. */
    json_t *subjects = json_array();
    if (user || project) {
        if (user)
            json_array_append_new(
                subjects,
                subject_json(q, quotas_subject(q, QUOTA_USER, user, false), user, QUOTA_USER, now));
        if (project)
            json_array_append_new(subjects,
                                  subject_json(q, quotas_subject(q, QUOTA_PROJECT, project, false),
                                               project, QUOTA_PROJECT, now));
    } else {
        add_named(q, subjects, QUOTA_USER, now);
        add_named(q, subjects, QUOTA_PROJECT, now);
    }
    struct quota_limits du, dp;
    quota_effective(&q->config.limits, &q->overrides, QUOTA_USER, "", &du);
    quota_effective(&q->config.limits, &q->overrides, QUOTA_PROJECT, "", &dp);
    return json_pack("{s:s, s:f, s:f, s:o, s:o, s:o, s:o, s:o}", "period",
                     quota_period_name(q->config.period), "period_start", q->period_start,
                     "period_end", q->period_end, "default_user", quota_limits_to_json(&du),
                     "default_project", quota_limits_to_json(&dp), "default_user_overrides",
                     quota_limits_to_json(&q->overrides.default_user), "default_project_overrides",
                     quota_limits_to_json(&q->overrides.default_project), "subjects", subjects);
}
