/* quota: per-user and per-project limits (gflow's [quota] keys, plus max_gpu_hours per
 * period), what a user or project uses now, and the checks the scheduling pass and a
 * submission make against them. Pure code: the daemon (src/daemon/quota.c) keeps the
 * records up to date as jobs start and end, so each check here is O(1).
 *
 * Limits come in layers: the [quota] section of gflow.toml (the baseline) and runtime
 * overrides (gctl quota set, kept in the store). Each layer has limits for every user
 * (default_user), every project (default_project) and named users and projects. A
 * user's effective limits: default_user, then users[U] on top (a field set in the
 * named entry wins), each of them the baseline's with the overrides' fields on top.
 * Projects likewise. A job without a project has no project limits. */
#ifndef GFLOW_QUOTA_H
#define GFLOW_QUOTA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct job;
struct toml_value;

/* A limit below 0 is unset (no limit). */
struct quota_limits {
    int64_t max_running_jobs; /* running jobs at once */
    int64_t max_running_gpus; /* GPUs held by running jobs at once */
    int64_t max_queued_jobs;  /* queued and held jobs; checked at submit */
    double max_gpu_hours;     /* GPU-hours used in the current period */
};

/* The limit names as TOML keys and API fields, in this order. */
#define QUOTA_N_LIMITS 4
extern const char *const quota_limit_names[QUOTA_N_LIMITS];

void quota_limits_unset(struct quota_limits *l);
bool quota_limits_empty(const struct quota_limits *l);
/* Fields set in over replace those of l. */
void quota_limits_merge(struct quota_limits *l, const struct quota_limits *over);
/* The i-th limit (quota_limit_names) as a double, < 0 when unset; and set it. */
double quota_limit_get(const struct quota_limits *l, int i);
void quota_limit_set(struct quota_limits *l, int i, double v);

enum quota_scope { QUOTA_USER, QUOTA_PROJECT };

struct quota_entry {
    char *name;
    struct quota_limits limits;
};

/* One layer of limits (the baseline, or the overrides). */
struct quota_set {
    struct quota_limits default_user, default_project;
    struct quota_entry *users, *projects;
    size_t n_users, n_projects;
};

void quota_set_init(struct quota_set *s);
void quota_set_free(struct quota_set *s);
void quota_set_copy(struct quota_set *dst, const struct quota_set *src);
/* The named entry (name NULL: the default) of scope; NULL if there is none and
 * !create. */
struct quota_limits *quota_set_entry(struct quota_set *s, enum quota_scope scope, const char *name,
                                     bool create);
/* Removes the named entry (name NULL: unsets the default). Whether anything was there. */
bool quota_set_remove(struct quota_set *s, enum quota_scope scope, const char *name);
/* The set as JSON: {"default_user": {...}, "default_project": {...}, "users": {"alice":
 * {...}}, "projects": {...}} with only the set limits; and back (0, or -1 with *err). */
json_t *quota_set_to_json(const struct quota_set *s);
int quota_set_from_json(struct quota_set *s, const json_t *o, char **err);
json_t *quota_limits_to_json(const struct quota_limits *l);

/* Effective limits of a user or project (name not NULL) from the baseline and the
 * overrides (either may be NULL). */
void quota_effective(const struct quota_set *base, const struct quota_set *over,
                     enum quota_scope scope, const char *name, struct quota_limits *out);

/* The period max_gpu_hours counts over: calendar days, weeks (from Monday) or months,
 * in local time. */
enum quota_period { QUOTA_PERIOD_DAY, QUOTA_PERIOD_WEEK, QUOTA_PERIOD_MONTH };
/* "day", "week", "month"; parse: 0 or -1. */
const char *quota_period_name(enum quota_period p);
int quota_period_parse(const char *s, enum quota_period *out);
/* The start of the period holding `now` and the start of the next one (unix seconds). */
void quota_period_bounds(enum quota_period p, double now, double *start, double *end);

/* [quota] of gflow.toml: period and the baseline. */
struct quota_config {
    enum quota_period period;
    struct quota_set limits;
};
void quota_config_init(struct quota_config *c); /* period week, no limits */
void quota_config_free(struct quota_config *c);
void quota_config_copy(struct quota_config *dst, const struct quota_config *src);
/* Reads the [quota] table (keys period, default_user, default_project, users, projects;
 * limits are tables of the quota_limit_names). 0, or -1 with *err = "LINE: message"
 * style text naming the key ("quota.users.alice.max_running_gpus must be an integer >=
 * 0"); the caller adds the file. *line: the line of the offending value. */
int quota_config_from_toml(struct quota_config *c, const struct toml_value *t, char **err,
                           int *line);

/* What one user or one project uses, kept by the daemon (jobs point at theirs:
 * job.sched.quota_user, job.sched.quota_project) and read by the scheduling pass. */
struct quota_usage {
    char *name;
    enum quota_scope scope;
    struct quota_limits limits; /* effective (quota_effective), kept by the daemon */
    int64_t running_jobs, running_gpus;
    int64_t queued_jobs; /* PD and H */
    /* GPU-seconds used in the current period = gpu_seconds_base + running_gpus * now:
     * each start subtracts gpus * max(start, period start), each end adds gpus * end, so
     * no pass ever walks the running jobs to know it. */
    double gpu_seconds_base;
    /* The pass's scratch: jobs and GPUs it started for this subject in pass_epoch. */
    uint64_t pass_epoch;
    int64_t pass_jobs, pass_gpus;
};

/* GPU-seconds u has used in the current period, at now. */
double quota_gpu_seconds(const struct quota_usage *u, double now);
/* The limit that keeps j from starting now ("max_running_jobs", ...; NULL: none), for
 * u (j's user or project record; NULL: no limits), counting the jobs the pass has
 * started for u in epoch. */
const char *quota_usage_blocks(struct quota_usage *u, const struct job *j, double now,
                               uint64_t epoch);
/* Whether j's user's or project's quota keeps it from starting in this pass. */
bool quota_blocks(const struct job *j, double now, uint64_t epoch);
/* The pass started j: counts it against its user and project for the rest of the pass. */
void quota_pass_started(const struct job *j, uint64_t epoch);

#endif
