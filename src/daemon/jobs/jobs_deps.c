/* jobs_deps: the dependencies between active jobs (see jobs.h).
 *
 * Dependencies: each active job knows the active jobs that depend on it (dependents),
 * and each dependency of a job has a status (pending, met, never). When a job ends, only
 * its dependents are looked at: their statuses are updated and their deps_blocked flag
 * recomputed, so the pass just skips blocked jobs. A dependent that can no longer run is
 * cancelled (DependencyFailed:<id>) at once, which ends it in turn: the whole chain goes
 * within the same loop iteration, through a work list rather than recursion (a chain
 * may be long). */
#include "jobs_internal.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "store/store.h"
#include "util.h"

/* ---- dependencies ---- */

/* With the slurm backend: whether every dependency of j still pending is on a job in
 * Slurm (R with a Slurm id, and no retry left that would move j onto a new attempt), so
 * that j can wait for them in Slurm's queue (sbatch --dependency). */
static bool deps_in_backend(struct jobs *t, const struct job *j)
{
    if (!t->hand_over_early)
        return false;
    for (size_t k = 0; k < j->n_deps; k++) {
        if (j->deps[k].status != JOB_DEP_PENDING)
            continue;
        const struct job *x = jobs_get(t, j->deps[k].id);
        if (!x || x->state != JOB_RUNNING || x->backend_id <= 0 || x->attempt <= x->max_retries)
            return false;
    }
    return true;
}

void jobs_deps_handed_over(struct jobs *t, struct job *x)
{
    for (size_t i = 0; i < x->daemon.n_dependents; i++) {
        struct job *d = jobs_get(t, x->daemon.dependents[i]);
        if (d && d->sched.deps_blocked)
            jobs_deps_update(t, d);
    }
}

/* Recomputes j's deps_blocked after a change of its dependencies' statuses; a queued
 * or held job whose dependencies can no longer be met is cancelled (auto_cancel) or
 * keeps waiting with reason DependencyFailed:<id>. */
void jobs_deps_update(struct jobs *t, struct job *j)
{
    int64_t failed = 0;
    enum job_deps_outcome o = job_deps_outcome(j, &failed);
    bool blocked = o != JOB_DEPS_READY && !(o == JOB_DEPS_WAIT && deps_in_backend(t, j));
    if (blocked != j->sched.deps_blocked) {
        t->dirty = true;
        if (j->state == JOB_QUEUED) {
            jobs_sched_remove(t, j);
            j->sched.deps_blocked = blocked;
            jobs_sched_add(t, j);
        }
    }
    j->sched.deps_blocked = blocked;
    if (o != JOB_DEPS_FAILED || (j->state != JOB_QUEUED && j->state != JOB_HELD))
        return;
    if (j->auto_cancel) {
        log_info("job %lld: cancelled, dependency on job %lld can no longer be met",
                 (long long)j->id, (long long)failed);
        j->end_time = now_wall();
        jobs_set_state(t, j, JOB_CANCELLED, JOB_REASON_DEPENDENCY_FAILED, failed, NULL);
    } else if (j->state == JOB_QUEUED &&
               (j->reason != JOB_REASON_DEPENDENCY_FAILED || j->reason_job != failed)) {
        job_set_reason(j, JOB_REASON_DEPENDENCY_FAILED, failed, NULL);
        jobs_save(t, j);
    }
}

/* x has ended: updates its dependents, and theirs if they are cancelled in turn. */
void jobs_deps_job_ended(struct jobs *t, struct job *x)
{
    if (!x->daemon.n_dependents)
        return;
    if (t->cascade_len == t->cascade_cap) {
        t->cascade_cap = t->cascade_cap ? t->cascade_cap * 2 : 16;
        t->cascade = xrealloc(t->cascade, t->cascade_cap * sizeof(*t->cascade));
    }
    t->cascade[t->cascade_len++] = x;
    if (t->cascading)
        return; /* the loop below takes it */
    t->cascading = true;
    while (t->cascade_len) {
        struct job *e = t->cascade[--t->cascade_len]; /* ended this iteration: still readable */
        for (size_t i = 0; i < e->daemon.n_dependents; i++) {
            struct job *d = jobs_get(t, e->daemon.dependents[i]);
            if (!d)
                continue;
            bool changed = false;
            for (size_t k = 0; k < d->n_deps; k++) {
                if (d->deps[k].id != e->id)
                    continue;
                d->deps[k].status = job_dep_status_for(d->deps[k].kind, e->state);
                changed = true;
            }
            if (changed)
                jobs_deps_update(t, d);
        }
    }
    t->cascading = false;
}

/* Whether following dependencies from j's (through active jobs) reaches job id. */
static bool deps_reach(const struct jobs *t, const struct job *j, int64_t id)
{
    size_t cap = 64, len = 0, seen_len = 0, seen_cap = 64;
    int64_t *stack = xmalloc(cap * sizeof(*stack));
    int64_t *seen = xmalloc(seen_cap * sizeof(*seen));
    bool found = false;
    for (size_t k = 0; k < j->n_deps; k++) {
        if (len == cap)
            stack = xrealloc(stack, (cap *= 2) * sizeof(*stack));
        stack[len++] = j->deps[k].id;
    }
    while (len && !found) {
        int64_t cur = stack[--len];
        if (cur == id) {
            found = true;
            break;
        }
        bool dup = false;
        for (size_t i = 0; i < seen_len && !dup; i++)
            dup = seen[i] == cur;
        struct job *x = dup ? NULL : jobs_get(t, cur);
        if (!x)
            continue;
        if (seen_len == seen_cap)
            seen = xrealloc(seen, (seen_cap *= 2) * sizeof(*seen));
        seen[seen_len++] = cur;
        for (size_t k = 0; k < x->n_deps; k++) {
            if (len == cap)
                stack = xrealloc(stack, (cap *= 2) * sizeof(*stack));
            stack[len++] = x->deps[k].id;
        }
    }
    free(stack);
    free(seen);
    return found;
}

/* A dependency on a job that failed and was retried is one on its latest attempt: the
 * jobs that depended on it when it failed were moved onto the retry (jobs.c), and a job
 * submitted a moment later must not depend on which came first. Entries that then name
 * the same job with the same kind are one. 0, or -1 with *err. */
static int follow_retries(struct jobs *t, struct job *j, char **err)
{
    size_t n = 0;
    for (size_t k = 0; k < j->n_deps; k++) {
        struct job_dep d = j->deps[k];
        int64_t next = 0;
        enum job_state st;
        while (!jobs_get(t, d.id) && d.id > 0 && d.id < t->next_id) {
            int rc = store_job_state(t->store, d.id, &st);
            if (rc == 0 && st == JOB_FAILED)
                rc = store_retried_as(t->store, d.id, &next);
            if (rc < 0) {
                *err =
                    xasprintf("cannot read job %lld: %s", (long long)d.id, store_error(t->store));
                return -1;
            }
            if (rc > 0 || st != JOB_FAILED || !next)
                break;
            d.id = next;
        }
        bool dup = false;
        for (size_t i = 0; i < n && !dup; i++)
            dup = j->deps[i].id == d.id && j->deps[i].kind == d.kind;
        if (!dup)
            j->deps[n++] = d;
    }
    j->n_deps = n;
    return 0;
}

int jobs_check_deps(struct jobs *t, struct job *j, int64_t own_id, char **err)
{
    if (follow_retries(t, j, err) < 0)
        return -1;
    struct strbuf unknown;
    strbuf_init(&unknown);
    size_t n_unknown = 0;
    for (size_t k = 0; k < j->n_deps; k++) {
        struct job_dep *d = &j->deps[k];
        enum job_state st;
        int rc = 1;
        if (jobs_get(t, d->id)) {
            d->status = JOB_DEP_PENDING;
            continue;
        }
        if (d->id > 0 && d->id < t->next_id)
            rc = store_job_state(t->store, d->id, &st);
        if (rc < 0) {
            *err = xasprintf("cannot read job %lld: %s", (long long)d->id, store_error(t->store));
            strbuf_free(&unknown);
            return -1;
        }
        if (rc == 0) {
            d->status = job_dep_status_for(d->kind, st);
            continue;
        }
        bool listed = false;
        for (size_t i = 0; i < k && !listed; i++)
            listed = j->deps[i].id == d->id;
        if (!listed) {
            strbuf_addf(&unknown, "%s%lld", n_unknown ? ", " : "", (long long)d->id);
            n_unknown++;
        }
    }
    if (n_unknown) {
        *err = xasprintf("--depends-on: no job %s (a job can depend only on jobs that exist "
                         "already; in one request, jobs cannot depend on each other)",
                         unknown.buf);
        strbuf_free(&unknown);
        return -1;
    }
    strbuf_free(&unknown);
    /* New jobs depend only on existing ones, so this cannot happen today; it guards
     * against a cycle made by later changes of dependencies. */
    if (deps_reach(t, j, own_id)) {
        *err = xasprintf("--depends-on: job %lld would depend on itself through its "
                         "dependencies (a cycle)",
                         (long long)own_id);
        return -1;
    }
    return 0;
}

static bool sim_find(const struct jobs_cascade *sim, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (sim[i].id == id)
            return true;
    return false;
}

size_t jobs_cascade_preview(const struct jobs *t, const struct job *x, struct jobs_cascade **out)
{
    /* sim[0] is x itself (ending as CA); the rest are the jobs it would take along. */
    size_t n = 1, cap = 16;
    struct jobs_cascade *sim = xmalloc(cap * sizeof(*sim));
    sim[0] = (struct jobs_cascade){x->id, 0};
    for (size_t k = 0; k < n; k++) {
        const struct job *e = k == 0 ? x : jobs_get(t, sim[k].id);
        if (!e)
            continue;
        for (size_t i = 0; i < e->daemon.n_dependents; i++) {
            struct job *d = jobs_get(t, e->daemon.dependents[i]);
            if (!d || !d->auto_cancel || (d->state != JOB_QUEUED && d->state != JOB_HELD) ||
                sim_find(sim, n, d->id))
                continue;
            struct job tmp;
            job_init(&tmp);
            tmp.deps_any = d->deps_any;
            tmp.n_deps = d->n_deps;
            tmp.deps = xmalloc(d->n_deps * sizeof(*tmp.deps));
            for (size_t m = 0; m < d->n_deps; m++) {
                tmp.deps[m] = d->deps[m];
                if (sim_find(sim, n, d->deps[m].id))
                    tmp.deps[m].status = job_dep_status_for(d->deps[m].kind, JOB_CANCELLED);
            }
            if (job_deps_outcome(&tmp, NULL) == JOB_DEPS_FAILED) {
                if (n == cap)
                    sim = xrealloc(sim, (cap *= 2) * sizeof(*sim));
                sim[n++] = (struct jobs_cascade){d->id, e->id};
            }
            free(tmp.deps);
        }
    }
    memmove(sim, sim + 1, (n - 1) * sizeof(*sim));
    *out = sim;
    return n - 1;
}
