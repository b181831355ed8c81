/* routes_resv: GPU reservations (gctl reserve; docs/api.md "Reservations"):
 *   GET  /v1/reservations[?status=S&user=U]  the list (history included)
 *   POST /v1/reservations                    make one (admins; users too with
 *                                            reservations.who = "users", within its limits;
 *                                            for another user: admins only)
 *   GET  /v1/reservations/{id}
 *   POST /v1/reservations/{id}/cancel        its holder or an admin */
#include "routes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "gpu/gpu.h"
#include "jobs/jobs.h"
#include "policy/reservation_table.h"
#include "userdb.h"
#include "util.h"

/* A --start this far in the past is taken as now (the clock moved while the request
 * travelled); further back is refused. */
#define RESV_START_SLACK_SECS 60.0

static json_t *resv_json(const struct resv *r, double now)
{
    json_t *gpus = json_array();
    for (uint64_t m = r->gpus; m; m &= m - 1)
        json_array_append_new(gpus, json_integer(__builtin_ctzll(m)));
    json_t *o = json_pack(
        "{s:I, s:s, s:o, s:o, s:f, s:f, s:I, s:f, s:o, s:s}", "id", (json_int_t)r->id, "user",
        r->user, "gpus", gpus, "gpu_count",
        r->gpu_count > 0 ? json_integer(r->gpu_count) : json_null(), "start", r->start, "end",
        r->end, "duration", (json_int_t)(r->end - r->start), "created", r->created, "cancelled_at",
        r->cancelled > 0 ? json_real(r->cancelled) : json_null(), "status",
        reservation_status_name(reservation_status_at(r->start, r->end, r->cancelled, now)));
    return o;
}

void route_resv_list(const struct route_req *r, struct reply *rep)
{
    const char *status = route_query(r, "status"), *user = route_query(r, "user");
    int want = -1;
    if (status && *status && (want = reservation_status_parse(status)) < 0) {
        reply_error(rep, 400, "invalid status '%s': use pending, active, completed or cancelled",
                    status);
        return;
    }
    double now = now_wall();
    json_t *list = json_array();
    for (size_t i = 0; i < r->d->resv->n; i++) {
        const struct resv *x = &r->d->resv->v[i];
        if (user && *user && strcmp(user, x->user) != 0)
            continue;
        if (want >= 0 && (int)reservation_status_at(x->start, x->end, x->cancelled, now) != want)
            continue;
        json_array_append_new(list, resv_json(x, now));
    }
    reply_json(rep, 200, json_pack("{s:o}", "reservations", list));
}

/* The machine's whole GPUs (NVML indices): those a reservation may name. */
static uint64_t present_gpus(const struct gflowd *d)
{
    const struct gpu_set *set = gpu_current(d->gpus);
    uint64_t m = 0;
    for (size_t i = 0; set && i < set->n_gpus; i++)
        if (!set->gpus[i].mig_enabled && set->gpus[i].index >= 0 && set->gpus[i].index < 64)
            m |= 1ULL << set->gpus[i].index;
    return m;
}

/* The GPUs of a "gpu_spec" array; false if it is not a non-empty list of indices. */
static bool spec_mask(const json_t *spec, uint64_t *mask)
{
    *mask = 0;
    size_t i;
    const json_t *v;
    if (!json_is_array(spec) || json_array_size(spec) == 0)
        return false;
    json_array_foreach (spec, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 63)
            return false;
        *mask |= 1ULL << json_integer_value(v);
    }
    return true;
}

void route_resv_create(const struct route_req *r, struct reply *rep)
{
    json_t *o = route_body_object(r, rep);
    if (!o)
        return;
    const json_t *juser = json_object_get(o, "user"), *jgpus = json_object_get(o, "gpus"),
                 *jspec = json_object_get(o, "gpu_spec"), *jstart = json_object_get(o, "start"),
                 *jdur = json_object_get(o, "duration");
    const char *user = json_is_string(juser) ? json_string_value(juser) : r->who->user;
    uint64_t mask = 0;
    enum userdb_answer known;
    uid_t uid;
    double now = now_wall();
    double start = json_number_value(jstart);
    json_int_t duration = json_integer_value(jdur);
    if (juser && !json_is_string(juser)) {
        reply_error(rep, 400, "'user' must be a user name");
    } else if (!jgpus == !jspec) {
        reply_error(rep, 400, "give either --gpus N or --gpu-spec LIST (one of them)");
    } else if (jgpus && (!json_is_integer(jgpus) || json_integer_value(jgpus) < 1 ||
                         json_integer_value(jgpus) > 64)) {
        reply_error(rep, 400, "--gpus must be a whole number from 1 to 64");
    } else if (jspec && !spec_mask(jspec, &mask)) {
        reply_error(rep, 400, "--gpu-spec must list GPU indices 0-63, e.g. 0,2");
    } else if (!json_is_number(jstart) || !json_is_integer(jdur) || duration <= 0) {
        reply_error(rep, 400, "give 'start' (unix time) and 'duration' (seconds > 0)");
    } else if (start + (double)duration <= now || start < now - RESV_START_SLACK_SECS) {
        reply_error(rep, 400, "--start is in the past; give a time to come (e.g. now+10m)");
    } else if ((known = userdb_user_named(r->d->userdb, user, USERDB_REQUEST_WAIT_SECS, &uid)) ==
               USERDB_ABSENT) {
        reply_error(rep, 400, "--user: no user '%s' on this machine", user);
    } else if (known == USERDB_UNKNOWN) {
        reply_error(rep, 503,
                    "--user: cannot tell yet whether user '%s' exists: the user database "
                    "(LDAP, SSSD) is slow or down; retry in a moment",
                    user);
    } else if (strcmp(user, r->who->user) != 0 && !r->who->is_admin) {
        reply_error(rep, 403,
                    "only root, the daemon's user or members of daemon.admin_group may reserve "
                    "GPUs for another user; leave out --user to reserve for yourself (%s)",
                    r->who->user);
    } else if (!r->who->is_admin && r->d->cfg.parsed.reservations_who != CONFIG_RESV_USERS) {
        reply_error(rep, 403,
                    "only admins may make reservations here (reservations.who = \"admins\"); "
                    "ask an admin to reserve for you (gctl reserve create --user %s), or to "
                    "set reservations.who = \"users\"",
                    r->who->user);
    } else {
        if (start < now)
            start = now;
        struct resv_request q = {user, mask, jgpus ? (int)json_integer_value(jgpus) : 0, start,
                                 start + (double)duration};
        int status = 0;
        char *err = NULL;
        /* A user's own request keeps [reservations]' limits; an admin's is not bound. */
        const struct resv *x =
            resv_create(r->d->resv, r->d->store, &q, r->who->is_admin ? NULL : &r->d->cfg,
                        present_gpus(r->d), now, &status, &err);
        if (!x) {
            reply_error(rep, (unsigned)status, "%s", err);
        } else {
            jobs_mark_dirty(r->d->jobs);
            reply_json(rep, 201, resv_json(x, now));
        }
        free(err);
    }
    json_decref(o);
}

static void resv_cancel_route(const struct route_req *r, struct resv *x, struct reply *rep)
{
    double now = now_wall();
    enum reservation_status st = reservation_status_at(x->start, x->end, x->cancelled, now);
    char *err = NULL;
    if (strcmp(x->user, r->who->user) != 0 && !r->who->is_admin) {
        reply_error(rep, 403,
                    "reservation %lld belongs to %s; only its holder or an admin may cancel it",
                    (long long)x->id, x->user);
    } else if (st == RESERVATION_CANCELLED || st == RESERVATION_COMPLETED) {
        reply_error(rep, 409, "reservation %lld is already %s", (long long)x->id,
                    reservation_status_name(st));
    } else if (resv_cancel(r->d->resv, r->d->store, x, now, &err) < 0) {
        reply_error(rep, 500, "%s", err);
    } else {
        jobs_mark_dirty(r->d->jobs);
        reply_json(rep, 200, resv_json(x, now));
    }
    free(err);
}

/* The reservation of the path's id, or NULL with a 404. */
static struct resv *resv_of(const struct route_req *r, struct reply *rep)
{
    struct resv *x = resv_find(r->d->resv, r->id);
    if (!x)
        reply_error(rep, 404, "no reservation %lld (gctl reserve list shows them)",
                    (long long)r->id);
    return x;
}

void route_resv_show(const struct route_req *r, struct reply *rep)
{
    struct resv *x = resv_of(r, rep);
    if (x)
        reply_json(rep, 200, resv_json(x, now_wall()));
}

void route_resv_cancel(const struct route_req *r, struct reply *rep)
{
    struct resv *x = resv_of(r, rep);
    if (x)
        resv_cancel_route(r, x, rep);
}
