/* quota: limits per user and project, their layers, and the O(1) checks (see quota.h). */
#include "quota.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "job.h"
#include "toml.h"
#include "util.h"

const char *const quota_limit_names[QUOTA_N_LIMITS] = {"max_running_jobs", "max_running_gpus",
                                                       "max_queued_jobs", "max_gpu_hours"};

/* ---- limits ---- */

void quota_limits_unset(struct quota_limits *l)
{
    *l = (struct quota_limits){-1, -1, -1, -1.0};
}

double quota_limit_get(const struct quota_limits *l, int i)
{
    switch (i) {
    case 0:
        return (double)l->max_running_jobs;
    case 1:
        return (double)l->max_running_gpus;
    case 2:
        return (double)l->max_queued_jobs;
    default:
        return l->max_gpu_hours;
    }
}

void quota_limit_set(struct quota_limits *l, int i, double v)
{
    switch (i) {
    case 0:
        l->max_running_jobs = (int64_t)v;
        break;
    case 1:
        l->max_running_gpus = (int64_t)v;
        break;
    case 2:
        l->max_queued_jobs = (int64_t)v;
        break;
    default:
        l->max_gpu_hours = v;
    }
}

bool quota_limits_empty(const struct quota_limits *l)
{
    for (int i = 0; i < QUOTA_N_LIMITS; i++)
        if (quota_limit_get(l, i) >= 0)
            return false;
    return true;
}

void quota_limits_merge(struct quota_limits *l, const struct quota_limits *over)
{
    for (int i = 0; i < QUOTA_N_LIMITS; i++)
        if (quota_limit_get(over, i) >= 0)
            quota_limit_set(l, i, quota_limit_get(over, i));
}

json_t *quota_limits_to_json(const struct quota_limits *l)
{
    json_t *o = json_object();
    for (int i = 0; i < QUOTA_N_LIMITS; i++) {
        double v = quota_limit_get(l, i);
        if (v < 0)
            json_object_set_new(o, quota_limit_names[i], json_null());
        else if (i == 3)
            json_object_set_new(o, quota_limit_names[i], json_real(v));
        else
            json_object_set_new(o, quota_limit_names[i], json_integer((json_int_t)v));
    }
    return o;
}

/* ---- a layer of limits ---- */

void quota_set_init(struct quota_set *s)
{
    memset(s, 0, sizeof(*s));
    quota_limits_unset(&s->default_user);
    quota_limits_unset(&s->default_project);
}

static void entries_free(struct quota_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(e[i].name);
    free(e);
}

void quota_set_free(struct quota_set *s)
{
    entries_free(s->users, s->n_users);
    entries_free(s->projects, s->n_projects);
    quota_set_init(s);
}

static struct quota_entry *entries_copy(const struct quota_entry *e, size_t n)
{
    struct quota_entry *out = xmalloc((n ? n : 1) * sizeof(*out));
    for (size_t i = 0; i < n; i++)
        out[i] = (struct quota_entry){xstrdup(e[i].name), e[i].limits};
    return out;
}

void quota_set_copy(struct quota_set *dst, const struct quota_set *src)
{
    *dst = *src;
    dst->users = entries_copy(src->users, src->n_users);
    dst->projects = entries_copy(src->projects, src->n_projects);
}

struct quota_limits *quota_set_entry(struct quota_set *s, enum quota_scope scope, const char *name,
                                     bool create)
{
    if (!name)
        return scope == QUOTA_USER ? &s->default_user : &s->default_project;
    struct quota_entry **list = scope == QUOTA_USER ? &s->users : &s->projects;
    size_t *n = scope == QUOTA_USER ? &s->n_users : &s->n_projects;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*list)[i].name, name) == 0)
            return &(*list)[i].limits;
    if (!create)
        return NULL;
    *list = xrealloc(*list, (*n + 1) * sizeof(**list));
    struct quota_entry *e = &(*list)[(*n)++];
    e->name = xstrdup(name);
    quota_limits_unset(&e->limits);
    return &e->limits;
}

bool quota_set_remove(struct quota_set *s, enum quota_scope scope, const char *name)
{
    if (!name) {
        struct quota_limits *l = quota_set_entry(s, scope, NULL, false);
        bool had = !quota_limits_empty(l);
        quota_limits_unset(l);
        return had;
    }
    struct quota_entry *list = scope == QUOTA_USER ? s->users : s->projects;
    size_t *n = scope == QUOTA_USER ? &s->n_users : &s->n_projects;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(list[i].name, name) == 0) {
            free(list[i].name);
            memmove(list + i, list + i + 1, (*n - i - 1) * sizeof(*list));
            (*n)--;
            return true;
        }
    return false;
}

static json_t *entries_json(const struct quota_entry *e, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, e[i].name, quota_limits_to_json(&e[i].limits));
    return o;
}

json_t *quota_set_to_json(const struct quota_set *s)
{
    return json_pack("{s:o, s:o, s:o, s:o}", "default_user", quota_limits_to_json(&s->default_user),
                     "default_project", quota_limits_to_json(&s->default_project), "users",
                     entries_json(s->users, s->n_users), "projects",
                     entries_json(s->projects, s->n_projects));
}

static int limits_from_json(struct quota_limits *l, const json_t *o, char **err)
{
    quota_limits_unset(l);
    if (!json_is_object(o)) {
        *err = xstrdup("quota limits must be an object");
        return -1;
    }
    for (int i = 0; i < QUOTA_N_LIMITS; i++) {
        json_t *v = json_object_get(o, quota_limit_names[i]);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e15) {
            *err = xasprintf("%s must be a number >= 0", quota_limit_names[i]);
            return -1;
        }
        quota_limit_set(l, i, json_number_value(v));
    }
    return 0;
}

int quota_set_from_json(struct quota_set *s, const json_t *o, char **err)
{
    quota_set_init(s);
    if (!json_is_object(o)) {
        *err = xstrdup("quota overrides must be an object");
        return -1;
    }
    if (limits_from_json(&s->default_user, json_object_get(o, "default_user"), err) < 0 ||
        limits_from_json(&s->default_project, json_object_get(o, "default_project"), err) < 0)
        return -1;
    const char *scopes[2] = {"users", "projects"};
    for (int k = 0; k < 2; k++) {
        const char *name;
        json_t *v;
        json_object_foreach ((json_t *)json_object_get(o, scopes[k]), name, v) {
            struct quota_limits l;
            if (limits_from_json(&l, v, err) < 0) {
                quota_set_free(s);
                return -1;
            }
            *quota_set_entry(s, k ? QUOTA_PROJECT : QUOTA_USER, name, true) = l;
        }
    }
    return 0;
}

/* The layer's default merged with its named entry (if any). */
static void layer_limits(const struct quota_set *s, enum quota_scope scope, const char *name,
                         struct quota_limits *def, struct quota_limits *named)
{
    if (!s)
        return;
    struct quota_set *m = (struct quota_set *)s; /* quota_set_entry only reads here */
    quota_limits_merge(def, quota_set_entry(m, scope, NULL, false));
    const struct quota_limits *e = quota_set_entry(m, scope, name, false);
    if (e)
        quota_limits_merge(named, e);
}

void quota_effective(const struct quota_set *base, const struct quota_set *over,
                     enum quota_scope scope, const char *name, struct quota_limits *out)
{
    struct quota_limits named;
    quota_limits_unset(out);
    quota_limits_unset(&named);
    layer_limits(base, scope, name, out, &named);
    layer_limits(over, scope, name, out, &named);
    quota_limits_merge(out, &named);
}

/* ---- the period ---- */

static const char *const period_names[] = {"day", "week", "month"};

const char *quota_period_name(enum quota_period p)
{
    return period_names[p];
}

int quota_period_parse(const char *s, enum quota_period *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, period_names[i]) == 0) {
            *out = (enum quota_period)i;
            return 0;
        }
    return -1;
}

void quota_period_bounds(enum quota_period p, double now, double *start, double *end)
{
    time_t t = (time_t)now;
    struct tm tm;
    localtime_r(&t, &tm);
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_isdst = -1;
    if (p == QUOTA_PERIOD_WEEK)
        tm.tm_mday -= (tm.tm_wday + 6) % 7; /* back to Monday */
    else if (p == QUOTA_PERIOD_MONTH)
        tm.tm_mday = 1;
    struct tm next = tm;
    *start = (double)mktime(&tm);
    if (p == QUOTA_PERIOD_DAY)
        next.tm_mday += 1;
    else if (p == QUOTA_PERIOD_WEEK)
        next.tm_mday += 7;
    else
        next.tm_mon += 1;
    next.tm_isdst = -1;
    *end = (double)mktime(&next);
}

/* ---- [quota] in gflow.toml ---- */

void quota_config_init(struct quota_config *c)
{
    c->period = QUOTA_PERIOD_WEEK;
    quota_set_init(&c->limits);
}

void quota_config_free(struct quota_config *c)
{
    quota_set_free(&c->limits);
}

void quota_config_copy(struct quota_config *dst, const struct quota_config *src)
{
    dst->period = src->period;
    quota_set_copy(&dst->limits, &src->limits);
}

/* One table of limits at `where` ("quota.users.alice"). */
static int limits_from_toml(struct quota_limits *l, const struct toml_value *t, const char *where,
                            char **err, int *line)
{
    *line = toml_line(t);
    if (toml_type_of(t) != TOML_TABLE) {
        *err =
            xasprintf("%s must be a table of limits (%s, %s, %s, %s)", where, quota_limit_names[0],
                      quota_limit_names[1], quota_limit_names[2], quota_limit_names[3]);
        return -1;
    }
    for (size_t i = 0; i < toml_table_len(t); i++) {
        const char *key = toml_table_key(t, i, NULL);
        const struct toml_value *v = toml_table_value(t, i);
        *line = toml_line(v);
        int k = 0;
        while (k < QUOTA_N_LIMITS && strcmp(key, quota_limit_names[k]) != 0)
            k++;
        if (k == QUOTA_N_LIMITS) {
            *err = xasprintf("unknown key '%s.%s' (a limit is one of %s, %s, %s, %s)", where, key,
                             quota_limit_names[0], quota_limit_names[1], quota_limit_names[2],
                             quota_limit_names[3]);
            return -1;
        }
        bool is_float = k == 3 && toml_type_of(v) == TOML_FLOAT;
        if ((toml_type_of(v) != TOML_INTEGER && !is_float) ||
            (is_float ? !(toml_float(v) >= 0 && toml_float(v) <= 1e15) : toml_integer(v) < 0)) {
            *err = xasprintf("%s.%s must be %s", where, key,
                             k == 3 ? "a number >= 0" : "an integer >= 0");
            return -1;
        }
        quota_limit_set(l, k, is_float ? toml_float(v) : (double)toml_integer(v));
    }
    return 0;
}

/* [quota.users] or [quota.projects]: name -> limits. */
static int entries_from_toml(struct quota_set *s, enum quota_scope scope,
                             const struct toml_value *t, const char *where, char **err, int *line)
{
    *line = toml_line(t);
    if (toml_type_of(t) != TOML_TABLE) {
        *err = xasprintf("%s must be a table (name = { limits })", where);
        return -1;
    }
    for (size_t i = 0; i < toml_table_len(t); i++) {
        size_t len;
        const char *name = toml_table_key(t, i, &len);
        char *at = xasprintf("%s.%s", where, name);
        struct quota_limits l;
        quota_limits_unset(&l);
        int rc = strlen(name) != len || !*name ? -1 : 0;
        if (rc < 0)
            *err = xasprintf("%s: a name must be non-empty text", where);
        else
            rc = limits_from_toml(&l, toml_table_value(t, i), at, err, line);
        free(at);
        if (rc < 0)
            return -1;
        quota_limits_merge(quota_set_entry(s, scope, name, true), &l);
    }
    return 0;
}

int quota_config_from_toml(struct quota_config *c, const struct toml_value *t, char **err,
                           int *line)
{
    *line = toml_line(t);
    for (size_t i = 0; i < toml_table_len(t); i++) {
        const char *key = toml_table_key(t, i, NULL);
        const struct toml_value *v = toml_table_value(t, i);
        *line = toml_line(v);
        int rc;
        if (strcmp(key, "period") == 0) {
            rc = toml_type_of(v) == TOML_STRING &&
                         quota_period_parse(toml_string(v, NULL), &c->period) == 0
                     ? 0
                     : -1;
            if (rc < 0)
                *err = xstrdup("quota.period must be one of day, week, month");
        } else if (strcmp(key, "default_user") == 0) {
            rc = limits_from_toml(&c->limits.default_user, v, "quota.default_user", err, line);
        } else if (strcmp(key, "default_project") == 0) {
            rc =
                limits_from_toml(&c->limits.default_project, v, "quota.default_project", err, line);
        } else if (strcmp(key, "users") == 0) {
            rc = entries_from_toml(&c->limits, QUOTA_USER, v, "quota.users", err, line);
        } else if (strcmp(key, "projects") == 0) {
            rc = entries_from_toml(&c->limits, QUOTA_PROJECT, v, "quota.projects", err, line);
        } else {
            *err = xasprintf("unknown key 'quota.%s' (the [quota] keys are period, default_user, "
                             "default_project, users, projects)",
                             key);
            rc = -1;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ---- the checks ---- */

double quota_gpu_seconds(const struct quota_usage *u, double now)
{
    double s = u->gpu_seconds_base + (double)u->running_gpus * now;
    return s > 0 ? s : 0;
}

const char *quota_usage_blocks(struct quota_usage *u, const struct job *j, double now,
                               uint64_t epoch)
{
    if (!u)
        return NULL;
    if (u->pass_epoch != epoch) {
        u->pass_epoch = epoch;
        u->pass_jobs = u->pass_gpus = 0;
    }
    const struct quota_limits *l = &u->limits;
    if (l->max_running_jobs >= 0 && u->running_jobs + u->pass_jobs >= l->max_running_jobs)
        return "max_running_jobs";
    /* A job without GPUs uses none of the GPU limits. */
    if (j->gpus > 0 && l->max_running_gpus >= 0 &&
        u->running_gpus + u->pass_gpus + j->gpus > l->max_running_gpus)
        return "max_running_gpus";
    if (j->gpus > 0 && l->max_gpu_hours >= 0 &&
        quota_gpu_seconds(u, now) >= l->max_gpu_hours * 3600.0)
        return "max_gpu_hours";
    return NULL;
}

bool quota_blocks(const struct job *j, double now, uint64_t epoch)
{
    return quota_usage_blocks(j->sched.quota_user, j, now, epoch) ||
           quota_usage_blocks(j->sched.quota_project, j, now, epoch);
}

void quota_pass_started(const struct job *j, uint64_t epoch)
{
    struct quota_usage *subjects[2] = {j->sched.quota_user, j->sched.quota_project};
    for (int k = 0; k < 2; k++) {
        struct quota_usage *u = subjects[k];
        if (!u)
            continue;
        if (u->pass_epoch != epoch) {
            u->pass_epoch = epoch;
            u->pass_jobs = u->pass_gpus = 0;
        }
        u->pass_jobs++;
        u->pass_gpus += j->gpus > 0 ? j->gpus : 0;
    }
}
