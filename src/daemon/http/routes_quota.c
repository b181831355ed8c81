/* routes_quota: the quota endpoints (docs/api.md): GET /v1/quotas (anyone: the limits
 * and what each user and project uses, and the reservation limits of [reservations]), PUT /v1/quotas and DELETE /v1/quotas (admins:
 * gctl quota set / clear), and the max_queued_jobs check of a submission. */
#include "routes.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "jobs/jobs.h"
#include "policy/quota_state.h"
#include "policy/reservation_table.h"
#include "util.h"

/* Whom a set or clear is for: {"user": U} / ?user=U, "project", or "default" ("user" or
 * "project": the default of every user or project). *name NULL: a default. 0, or -1
 * with a 400 in rep. */
static int quota_target(const char *user, const char *project, const char *def,
                        enum quota_scope *scope, const char **name, struct reply *rep)
{
    int given = (user != NULL) + (project != NULL) + (def != NULL);
    if (given != 1) {
        reply_error(rep, 400, "name exactly one of 'user', 'project' or 'default'");
        return -1;
    }
    *name = user ? user : project;
    *scope = project ? QUOTA_PROJECT : QUOTA_USER;
    if (def) {
        if (strcmp(def, "user") && strcmp(def, "project")) {
            reply_error(rep, 400, "'default' must be \"user\" or \"project\"");
            return -1;
        }
        *scope = strcmp(def, "user") ? QUOTA_PROJECT : QUOTA_USER;
    } else if (!**name || strlen(*name) > 256) {
        reply_error(rep, 400, "the user or project name must be 1 to 256 characters");
        return -1;
    }
    return 0;
}

/* A quota reply with "reservations" added: who may reserve, a user's limits
 * ([reservations]) and, for one user, what they hold (gctl quota show). */
static json_t *with_reservations(const struct route_req *r, json_t *reply, const char *user)
{
    const struct gflow_config *c = &r->d->cfg;
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I}", "who", c->reservations_who, "max_gpus",
                          (json_int_t)c->reservations_max_gpus, "max_duration",
                          (json_int_t)c->parsed.reservations_max_duration_secs, "max_ahead",
                          (json_int_t)c->parsed.reservations_max_ahead_secs, "max_per_user",
                          (json_int_t)c->reservations_max_per_user);
    if (user) {
        size_t held;
        uint64_t gpus;
        resv_held_by(r->d->resv, user, now_wall(), &held, &gpus);
        json_object_set_new(o, "user", json_string(user));
        json_object_set_new(o, "held", json_integer((json_int_t)held));
        json_object_set_new(o, "held_gpus", json_integer(__builtin_popcountll(gpus)));
    }
    json_object_set_new(reply, "reservations", o);
    return reply;
}

void route_quotas_set(const struct route_req *r, struct reply *rep)
{
    json_t *o = route_body_object(r, rep);
    if (!o)
        return;
    enum quota_scope scope;
    const char *name;
    struct quota_limits l;
    quota_limits_unset(&l);
    char *err = NULL;
    if (quota_target(json_string_value(json_object_get(o, "user")),
                     json_string_value(json_object_get(o, "project")),
                     json_string_value(json_object_get(o, "default")), &scope, &name, rep) < 0)
        goto out;
    for (int i = 0; i < QUOTA_N_LIMITS; i++) {
        json_t *v = json_object_get(o, quota_limit_names[i]);
        if (!v)
            continue;
        bool whole = i == 3 || (json_is_integer(v));
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e15 ||
            !whole) {
            reply_error(rep, 400, "'%s' must be %s (at most 1e15)", quota_limit_names[i],
                        i == 3 ? "a number >= 0" : "an integer >= 0");
            goto out;
        }
        quota_limit_set(&l, i, json_number_value(v));
    }
    if (quota_limits_empty(&l)) {
        reply_error(rep, 400, "give at least one limit (%s, %s, %s or %s)", quota_limit_names[0],
                    quota_limit_names[1], quota_limit_names[2], quota_limit_names[3]);
        goto out;
    }
    struct quotas *q = jobs_quotas(r->d->jobs);
    if (quotas_override_set(q, jobs_store(r->d->jobs), scope, name, &l, &err) < 0) {
        reply_error(rep, 500, "%s", err);
        goto out;
    }
    jobs_mark_dirty(r->d->jobs); /* a raised limit may let jobs start */
    const char *user = scope == QUOTA_USER ? name : NULL;
    reply_json(rep, 200,
               with_reservations(
                   r, quotas_status_json(q, user, scope == QUOTA_PROJECT ? name : NULL, now_wall()),
                   user));
out:
    free(err);
    json_decref(o);
}

void route_quotas_clear(const struct route_req *r, struct reply *rep)
{
    enum quota_scope scope;
    const char *name;
    if (quota_target(route_query(r, "user"), route_query(r, "project"), route_query(r, "default"),
                     &scope, &name, rep) < 0)
        return;
    /* ?limits=a,b: only those; none: every override of the target. */
    bool fields[QUOTA_N_LIMITS] = {false};
    const char *list = route_query(r, "limits");
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        int i = 0;
        while (i < QUOTA_N_LIMITS &&
               !(strlen(quota_limit_names[i]) == len && !strncmp(p, quota_limit_names[i], len)))
            i++;
        if (i == QUOTA_N_LIMITS) {
            reply_error(rep, 400, "unknown limit '%.*s'; use %s, %s, %s or %s", (int)len, p,
                        quota_limit_names[0], quota_limit_names[1], quota_limit_names[2],
                        quota_limit_names[3]);
            return;
        }
        fields[i] = true;
        p += len + (p[len] == ',');
    }
    struct quotas *q = jobs_quotas(r->d->jobs);
    char *err = NULL;
    bool removed;
    if (quotas_override_clear(q, jobs_store(r->d->jobs), scope, name, list && *list ? fields : NULL,
                              &removed, &err) < 0) {
        reply_error(rep, 500, "%s", err);
        free(err);
        return;
    }
    jobs_mark_dirty(r->d->jobs);
    const char *user = scope == QUOTA_USER ? name : NULL;
    json_t *o = with_reservations(
        r, quotas_status_json(q, user, scope == QUOTA_PROJECT ? name : NULL, now_wall()), user);
    /* Whether there was an override to drop: gctl quota remove fails when not (as gflow). */
    json_object_set_new(o, "removed", json_boolean(removed));
    reply_json(rep, 200, o);
}

void route_quotas(const struct route_req *r, struct reply *rep)
{
    const char *user = route_query(r, "user");
    reply_json(rep, 200,
               with_reservations(r,
                                 quotas_status_json(jobs_quotas(r->d->jobs), user,
                                                    route_query(r, "project"), now_wall()),
                                 user));
}

static bool same_project(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

int route_check_quota(const struct route_req *r, struct job *const *jobs, size_t n,
                      struct reply *rep)
{
    if (!n)
        return 0;
    struct quotas *q = jobs_quotas(r->d->jobs);
    char *why = quotas_check_submit(q, jobs[0]->user, n, NULL, 0);
    /* Each project of the submission (a submission has one in practice) with its count. */
    for (size_t i = 0; !why && i < n; i++) {
        const char *p = jobs[i]->project;
        if (!p || (i > 0 && same_project(p, jobs[i - 1]->project)))
            continue;
        size_t count = 0;
        for (size_t k = 0; k < n; k++)
            count += same_project(p, jobs[k]->project);
        why = quotas_check_submit(q, NULL, 0, p, count);
    }
    if (!why)
        return 0;
    reply_error(rep, 429, "%s", why);
    free(why);
    return -1;
}
