/* jobedit: gjob update and gjob redo (see jobedit.h). */
#include "jobedit.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "jobs.h"
#include "log.h"
#include "policy/quota_state.h"
#include "store/store.h"
#include "sweep.h"
#include "util.h"

/* ---- update ---- */

/* -1 with *err naming the first field of over that an update cannot change, as a 400:
 * ignoring it (a 200 with no changes, as before) would tell the caller it was done. */
static int refuse_fixed_field(const struct job *j, const json_t *over, char **err)
{
    bool known;
    const char *fixed = jobspec_fixed_field(over, &known);
    if (!fixed)
        return 0;
    if (!strcmp(fixed, "hold"))
        *err = xstrdup("field 'hold' cannot be changed by an update: use 'gjob hold' or "
                       "'gjob release' (POST /v1/jobs/{id}/hold or /release)");
    else if (known)
        *err = xasprintf("field '%s' cannot be changed by an update: it is fixed at submission "
                         "('gjob redo %lld' submits a copy with it changed)",
                         fixed, (long long)j->id);
    else
        *err = xasprintf("unknown field '%s': an update takes the fields 'gjob update' changes "
                         "(docs/api.md, PATCH /v1/jobs/{id})",
                         fixed);
    return -1;
}

int jobedit_update(const struct jobedit_ctx *c, struct job *j, json_t *over, int64_t max_concurrent,
                   bool dry_run, json_t **changes, char **err)
{
    *changes = NULL;
    if (j->state != JOB_QUEUED && j->state != JOB_HELD) {
        *err = xasprintf("job %lld is %s (%s); only queued (PD) or held (H) jobs can be "
                         "updated ('gjob redo %lld' submits a changed copy)",
                         (long long)j->id, job_state_name(j->state), job_state_short(j->state),
                         (long long)j->id);
        return 409;
    }
    if (refuse_fixed_field(j, over, err) < 0)
        return 400;
    const char *field = jobspec_owner_only_field(over);
    if (field && j->uid != c->caller->uid) {
        *err = xasprintf("job %lld belongs to %s; only its owner may change '%s' (what it runs "
                         "and its environment); admins may cancel, hold, release and change "
                         "priority, resources, limits and scheduling",
                         (long long)j->id, j->user, field);
        return 403;
    }
    struct store *store = jobs_store(c->jobs);
    struct job full;
    if (store_get_job(store, j->id, &full, true) != 0) {
        *err = xasprintf("cannot read job %lld: %s", (long long)j->id, store_error(store));
        job_clear(&full);
        return 500;
    }
    json_t *spec = jobspec_from_job(&full);
    bool dry = false;
    struct job *n = NULL;
    struct job carry;
    job_init(&carry);
    /* A sweep's values and templates are in the payload: written with the command. */
    bool sweep_changed =
        full.params && (json_object_get(over, "params") || json_object_get(over, "name"));
    if (sweep_rewrite(&full, over, &carry, err) == 0 && jobspec_merge(spec, over, false, err) == 0)
        n = jobspec_to_job(spec, c->limits, c->caller, &dry, err);
    if (n)
        sweep_move(n, &carry);
    job_clear(&carry);
    json_decref(spec);
    bool deps_changed = n && json_object_get(over, "depends_on");
    if (n && deps_changed && jobs_check_deps(c->jobs, n, j->id, err) < 0) {
        job_free(n);
        n = NULL;
    }
    if (!n) {
        job_clear(&full);
        return 400;
    }
    bool what_changed = jobspec_changes_what(over) || sweep_changed;
    n->id = j->id;
    job_name_default(n); /* a default name stays its own */
    n->state = j->state;
    json_t *list = jobspec_changes(&full, n, over);
    job_clear(&full);
    int rc = 0;
    if (max_concurrent >= 0) { /* the limit belongs to the job's group: set it there */
        int64_t old_limit = j->sched.group ? j->sched.group->max_concurrent : 0;
        if (!dry_run && jobs_limit_group(c->jobs, j, j->group_id, max_concurrent, err) < 0) {
            rc = 500;
            goto out;
        }
        if (old_limit != max_concurrent)
            json_array_append_new(list, json_pack("{s:s, s:I, s:I}", "field", "max_concurrent",
                                                  "old", (json_int_t)old_limit, "new",
                                                  (json_int_t)max_concurrent));
    }
    if (!dry_run && json_array_size(list) &&
        jobs_update(c->jobs, j, n, deps_changed, what_changed) < 0) {
        *err = xasprintf("cannot store the update of job %lld; see gflowd.log", (long long)j->id);
        rc = 500;
    }
out:
    job_free(n);
    if (rc == 0)
        *changes = list;
    else
        json_decref(list);
    return rc;
}

/* ---- redo ---- */

/* Old job ids and the ids of their redone copies. */
struct id_map {
    int64_t (*pairs)[2];
    size_t n, cap;
};

static void map_add(struct id_map *m, int64_t old_id, int64_t new_id)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 16;
        m->pairs = xrealloc(m->pairs, m->cap * sizeof(*m->pairs));
    }
    m->pairs[m->n][0] = old_id;
    m->pairs[m->n][1] = new_id;
    m->n++;
}

static int64_t map_get(const struct id_map *m, int64_t old_id)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->pairs[i][0] == old_id)
            return m->pairs[i][1];
    return 0;
}

/* The new job of a redo from a stored job (with payload): its spec, the overrides (may
 * be NULL), dependencies on redone jobs moved to their new copies. NULL + *err. */
static struct job *redo_job(const struct jobedit_ctx *c, const struct job *f, json_t *over,
                            const struct id_map *map, char **err)
{
    json_t *spec = jobspec_from_job(f);
    size_t i;
    json_t *d;
    json_array_foreach (json_object_get(spec, JOB_KEY_DEPENDS_ON), i, d) {
        int64_t moved = map_get(map, json_integer_value(json_object_get(d, "id")));
        if (moved)
            json_object_set_new(d, "id", json_integer(moved));
    }
    bool dry = false;
    struct job *n = NULL;
    struct job carry;
    job_init(&carry);
    if (sweep_rewrite(f, over, &carry, err) == 0 &&
        (!over || jobspec_merge(spec, over, true, err) == 0))
        n = jobspec_to_job(spec, c->limits, c->caller, &dry, err);
    if (n)
        sweep_move(n, &carry);
    job_clear(&carry);
    json_decref(spec);
    if (n && n->n_deps && jobs_check_deps(c->jobs, n, jobs_next_id(c->jobs), err) < 0) {
        job_free(n);
        n = NULL;
    }
    return n;
}

static json_t *redo_entry(const struct job *n, int64_t redo_of)
{
    return json_pack("{s:I, s:s, s:s, s:I}", "id", (json_int_t)n->id, "name", n->name, "state",
                     job_state_short(n->state), "redo_of", (json_int_t)redo_of);
}

/* The caller's jobs cancelled because of job id (DependencyFailed:<id>), transitively,
 * ascending by id: a job's dependencies have lower ids, so they are redone first. */
static size_t cancelled_chain(const struct jobedit_ctx *c, int64_t id, int64_t **out)
{
    struct store *store = jobs_store(c->jobs);
    size_t n_set = 0, cap_set = 16, n_todo = 1, cap_todo = 16;
    int64_t *set = xmalloc(cap_set * sizeof(*set));
    int64_t *todo = xmalloc(cap_todo * sizeof(*todo));
    todo[0] = id;
    while (n_todo) {
        int64_t e = todo[--n_todo];
        int64_t *ids = NULL;
        size_t n_ids = 0;
        if (store_dependents(store, e, &ids, &n_ids) < 0)
            n_ids = 0;
        for (size_t k = 0; k < n_ids; k++) {
            bool seen = false;
            for (size_t m = 0; m < n_set && !seen; m++)
                seen = set[m] == ids[k];
            struct job d;
            if (seen || store_get_job(store, ids[k], &d, false) != 0) {
                if (!seen)
                    job_clear(&d);
                continue;
            }
            if (d.state == JOB_CANCELLED && d.reason == JOB_REASON_DEPENDENCY_FAILED &&
                d.reason_job == e && d.uid == c->caller->uid) {
                if (n_set == cap_set)
                    set = xrealloc(set, (cap_set *= 2) * sizeof(*set));
                set[n_set++] = ids[k];
                if (n_todo == cap_todo)
                    todo = xrealloc(todo, (cap_todo *= 2) * sizeof(*todo));
                todo[n_todo++] = ids[k];
            }
            job_clear(&d);
        }
        free(ids);
    }
    free(todo);
    qsort(set, n_set, sizeof(*set), int64_cmp);
    *out = set;
    return n_set;
}

/* Whether the caller has as many active jobs as a user may have. */
static bool over_active_limit(const struct jobedit_ctx *c)
{
    return c->max_active > 0 && (int64_t)jobs_active_of(c->jobs, c->caller->uid) >= c->max_active;
}

/* Redoes the chain cancelled because of job id (already redone as map's first entry). */
static void redo_cascade(const struct jobedit_ctx *c, int64_t id, struct id_map *map, json_t *out)
{
    struct store *store = jobs_store(c->jobs);
    int64_t *set;
    size_t n_set = cancelled_chain(c, id, &set);
    for (size_t k = 0; k < n_set; k++) {
        struct job d;
        if (store_get_job(store, set[k], &d, true) != 0) {
            job_clear(&d);
            continue;
        }
        char *err = NULL;
        struct job *n = NULL;
        if (over_active_limit(c))
            err = xstrdup("limits.max_active_jobs_per_user reached");
        else if (map_get(map, d.reason_job)) /* its cause was redone */
            n = redo_job(c, &d, NULL, map, &err);
        if (n && jobs_submit(c->jobs, n) < 0) {
            job_free(n);
            n = NULL;
        }
        if (!n) {
            log_info("redo --cascade of job %lld: job %lld not redone: %s", (long long)id,
                     (long long)set[k], err ? err : "its cause was not redone");
            free(err);
            job_clear(&d);
            continue;
        }
        map_add(map, set[k], n->id);
        json_array_append_new(out, redo_entry(n, set[k]));
        job_clear(&d);
    }
    free(set);
}

int jobedit_redo(const struct jobedit_ctx *c, int64_t id, json_t *over, bool cascade, json_t **out,
                 char **err)
{
    *out = NULL;
    struct store *store = jobs_store(c->jobs);
    struct job f;
    int rc = store_get_job(store, id, &f, true);
    if (rc != 0) {
        job_clear(&f);
        if (rc > 0) {
            *err = xasprintf("job %lld not found; 'gqueue -a' lists your jobs", (long long)id);
            return 404;
        }
        *err = xasprintf("cannot read job %lld: %s", (long long)id, store_error(store));
        return 500;
    }
    if (f.uid != c->caller->uid) {
        *err =
            xasprintf("job %lld belongs to %s; only its owner may redo it", (long long)id, f.user);
        job_clear(&f);
        return 403;
    }
    if (over_active_limit(c)) {
        size_t have = jobs_active_of(c->jobs, c->caller->uid);
        *err = xasprintf("%s has %zu queued, held or running job%s, the most a user may have "
                         "(limits.max_active_jobs_per_user in gflow.toml)",
                         c->caller->user, have, plural_s((long long)have));
        job_clear(&f);
        return 429;
    }
    struct id_map map = {0};
    struct job *n = redo_job(c, &f, over, &map, err);
    job_clear(&f);
    if (!n)
        return 400;
    /* The copy is a new submission: [projects] as it is now. */
    if (c->cfg && config_check_project(c->cfg, n->project, err) < 0) {
        job_free(n);
        free(map.pairs);
        return 400;
    }
    /* The new job counts against max_queued_jobs like a submission. */
    if ((*err = quotas_check_submit(jobs_quotas(c->jobs), n->user, 1, n->project, 1))) {
        job_free(n);
        free(map.pairs);
        return 429;
    }
    if (jobs_submit(c->jobs, n) < 0) {
        job_free(n);
        *err = xstrdup("cannot store the new job; see gflowd.log");
        return 500;
    }
    *out = json_array();
    json_array_append_new(*out, redo_entry(n, id));
    map_add(&map, id, n->id);
    if (cascade)
        redo_cascade(c, id, &map, *out);
    free(map.pairs);
    return 0;
}
