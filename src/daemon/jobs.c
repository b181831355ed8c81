/* jobs: the active-job table and job changes, persisted through the store.
 *
 * The table is an array sorted by id: ids only grow, so a new job is appended and a
 * lookup is a binary search. Beside it, the queued jobs are kept in scheduling order (a
 * scheduler_queue, updated whenever a job enters or leaves PD) and the running jobs in an
 * unordered list, so a scheduling pass neither sorts nor scans the whole table.
 *
 * Only queued jobs that may start now are in that queue: a job waiting for its begin
 * time (--begin) is in a min-heap by begin time instead, and enters the queue in the
 * first pass at or after that time (the daemon's begin timer makes one run then); a
 * job waiting for its dependencies (deps_blocked) is in neither until they are met.
 * Their wait reason (BeginTime, Dependency) is set when they are put aside. So 100,000
 * jobs submitted with a future --begin cost a pass nothing.
 *
 * Dependencies: each active job knows the active jobs that depend on it (dependents),
 * and each dependency of a job has a status (pending, met, never). When a job ends, only
 * its dependents are looked at: their statuses are updated and their deps_blocked flag
 * recomputed, so the pass just skips blocked jobs. A dependent that can no longer run is
 * cancelled (DependencyFailed:<id>) at once, which ends it in turn: the whole chain goes
 * within the same loop iteration, through a work list rather than recursion (a chain
 * may be long). */
#include "jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "store.h"
#include "util.h"

enum action_kind { ACTION_UNLINK, ACTION_SIGNAL, ACTION_CALL };
struct action {
    enum action_kind kind;
    char *path;
    int64_t job_id;
    int sig;
    void (*fn)(void *arg, int64_t job_id); /* ACTION_CALL */
    void *arg;
};

struct jobs {
    struct store *store;
    struct job **table; /* the active jobs, ascending by id */
    size_t table_len, table_cap;
    struct job **run_list; /* R jobs, any order */
    size_t running, run_cap;
    struct scheduler_queue queue;      /* PD jobs that may start, in scheduling order */
    struct scheduler_begin_heap begin; /* PD jobs whose begin_time is to come */
    int64_t next_id;
    bool dirty; /* something changed that may let a queued job start */

    struct job **ended; /* left the table this iteration; freed by jobs_collect */
    size_t ended_len, ended_cap;
    struct action *actions; /* waiting for the commit */
    size_t actions_len, actions_cap;
    struct job **cascade; /* ended jobs whose dependents are still to be updated */
    size_t cascade_len, cascade_cap;
    bool cascading;

    /* Submission groups with a record in the daemon, ascending by id (groups are made
     * with growing ids, so a new one is appended). Kept for the daemon's life: small,
     * and a job copy may still point at its group. */
    struct job_group **groups;
    size_t groups_len, groups_cap;

    /* How many active jobs each user has (limits.max_active_jobs_per_user); a lab has
     * few users, so a short list searched in order. */
    struct user_count {
        uint32_t uid;
        size_t n;
    } * users;
    size_t users_len, users_cap;

    jobs_signal_cb signal_cb;
    void *signal_arg;

    /* Between jobs_bulk_begin and jobs_bulk_end: ended jobs stay in the table (jobs_get
     * skips them) and the queue is not kept in order, so that changing many jobs costs no
     * memmove per job; jobs_bulk_end compacts the table and rebuilds the queue once. */
    bool bulk;
    bool table_stale, queue_stale;
};

static void queue_rebuild(struct jobs *t);

/* ---- the table ---- */

struct jobs *jobs_new(struct store *store)
{
    struct jobs *t = xcalloc(1, sizeof(*t));
    t->store = store;
    t->dirty = true;
    scheduler_queue_init(&t->queue);
    scheduler_begin_heap_init(&t->begin);
    return t;
}

void jobs_set_signal_cb(struct jobs *t, jobs_signal_cb cb, void *arg)
{
    t->signal_cb = cb;
    t->signal_arg = arg;
}

struct job_group *jobs_group(struct jobs *t, int64_t id, bool create)
{
    size_t lo = 0, hi = t->groups_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->groups[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->groups_len && t->groups[lo]->id == id)
        return t->groups[lo];
    if (!create || id <= 0)
        return NULL;
    if (t->groups_len == t->groups_cap) {
        t->groups_cap = t->groups_cap ? t->groups_cap * 2 : 16;
        t->groups = xrealloc(t->groups, t->groups_cap * sizeof(*t->groups));
    }
    memmove(t->groups + lo + 1, t->groups + lo, (t->groups_len - lo) * sizeof(*t->groups));
    struct job_group *g = xcalloc(1, sizeof(*g));
    g->id = id;
    t->groups[lo] = g;
    t->groups_len++;
    return g;
}

int jobs_group_set_limit(struct jobs *t, struct job_group *g, int64_t max_concurrent)
{
    if (store_begin(t->store) < 0 || store_set_group(t->store, g->id, max_concurrent) < 0) {
        log_error("group %lld: cannot store: %s", (long long)g->id, store_error(t->store));
        return -1;
    }
    g->max_concurrent = max_concurrent;
    t->dirty = true;
    return 0;
}

int jobs_limit_group(struct jobs *t, struct job *j, int64_t gid, int64_t limit, char **err)
{
    if (gid == 0) {
        gid = j->id;
        j->group_id = gid;
        j->group = jobs_group(t, gid, true);
        if (j->state == JOB_RUNNING)
            j->group->running++;
        if (jobs_save(t, j) < 0) {
            *err = xasprintf("cannot store job %lld; see gflowd.log", (long long)j->id);
            return -1;
        }
    }
    if (jobs_group_set_limit(t, jobs_group(t, gid, true), limit) < 0) {
        *err = xstrdup("cannot store the limit; see gflowd.log");
        return -1;
    }
    return 0;
}

static void groups_load_cb(int64_t id, int64_t max_concurrent, void *arg)
{
    jobs_group(arg, id, true)->max_concurrent = max_concurrent;
}

static void run_list_add(struct jobs *t, struct job *j)
{
    if (t->running == t->run_cap) {
        t->run_cap = t->run_cap ? t->run_cap * 2 : 64;
        t->run_list = xrealloc(t->run_list, t->run_cap * sizeof(*t->run_list));
    }
    t->run_list[t->running++] = j;
    if (j->group)
        j->group->running++;
}

static void run_list_remove(struct jobs *t, struct job *j)
{
    for (size_t i = 0; i < t->running; i++)
        if (t->run_list[i] == j) {
            t->run_list[i] = t->run_list[--t->running];
            if (j->group)
                j->group->running--;
            return;
        }
}

static struct user_count *user_count(struct jobs *t, uint32_t uid)
{
    for (size_t i = 0; i < t->users_len; i++)
        if (t->users[i].uid == uid)
            return &t->users[i];
    if (t->users_len == t->users_cap) {
        t->users_cap = t->users_cap ? t->users_cap * 2 : 16;
        t->users = xrealloc(t->users, t->users_cap * sizeof(*t->users));
    }
    t->users[t->users_len] = (struct user_count){.uid = uid};
    return &t->users[t->users_len++];
}

size_t jobs_active_of(const struct jobs *t, uint32_t uid)
{
    for (size_t i = 0; i < t->users_len; i++)
        if (t->users[i].uid == uid)
            return t->users[i].n;
    return 0;
}

static void table_append(struct jobs *t, struct job *j)
{
    user_count(t, j->uid)->n++;
    if (t->table_len == t->table_cap) {
        t->table_cap = t->table_cap ? t->table_cap * 2 : 256;
        t->table = xrealloc(t->table, t->table_cap * sizeof(*t->table));
    }
    t->table[t->table_len++] = j;
    if (j->group_id > 0 && !j->group)
        j->group = jobs_group(t, j->group_id, true);
    if (j->state == JOB_RUNNING)
        run_list_add(t, j);
}

static ssize_t table_index(const struct jobs *t, int64_t id)
{
    size_t lo = 0, hi = t->table_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->table[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < t->table_len && t->table[lo]->id == id) ? (ssize_t)lo : -1;
}

static void table_remove(struct jobs *t, struct job *j)
{
    if (t->bulk) { /* left in place (jobs_get skips it); jobs_bulk_end compacts */
        t->table_stale = true;
        user_count(t, j->uid)->n--;
        return;
    }
    ssize_t i = table_index(t, j->id);
    if (i < 0)
        return;
    memmove(t->table + i, t->table + i + 1, (t->table_len - (size_t)i - 1) * sizeof(*t->table));
    t->table_len--;
    user_count(t, j->uid)->n--;
}

struct job *jobs_get(const struct jobs *t, int64_t id)
{
    ssize_t i = table_index(t, id);
    if (i < 0 || (t->table_stale && job_state_is_terminal(t->table[i]->state)))
        return NULL;
    return t->table[i];
}

void jobs_bulk_begin(struct jobs *t)
{
    t->bulk = true;
}

void jobs_bulk_end(struct jobs *t)
{
    t->bulk = false;
    if (t->table_stale) {
        size_t out = 0;
        for (size_t i = 0; i < t->table_len; i++)
            if (!job_state_is_terminal(t->table[i]->state))
                t->table[out++] = t->table[i];
        t->table_len = out;
        t->table_stale = false;
    }
    if (t->queue_stale) {
        queue_rebuild(t);
        t->queue_stale = false;
    }
}

struct job **jobs_active(const struct jobs *t, size_t *n)
{
    *n = t->table_len;
    return t->table;
}

struct job **jobs_running(const struct jobs *t, size_t *n)
{
    *n = t->running;
    return t->run_list;
}

struct store *jobs_store(const struct jobs *t)
{
    return t->store;
}

int64_t jobs_next_id(const struct jobs *t)
{
    return t->next_id;
}

/* ---- where a queued job waits ---- */

/* j has become queued (or changed while queued, out of everything below): into the
 * queue, or aside if it cannot start for a reason no GPU or slot change alters. */
static void sched_add(struct jobs *t, struct job *j)
{
    if (j->deps_blocked) {
        j->wait_reason = SCHEDULER_REASON_DEPENDENCY;
        return;
    }
    if (j->begin_time > now_wall()) {
        j->wait_reason = SCHEDULER_REASON_BEGIN_TIME;
        scheduler_begin_heap_push(&t->begin, j);
        return;
    }
    if (t->bulk)
        t->queue_stale = true; /* rebuilt by jobs_bulk_end */
    else
        scheduler_queue_insert(&t->queue, j);
}

/* j, queued, leaves wherever sched_add put it. */
static void sched_remove(struct jobs *t, struct job *j)
{
    if (scheduler_begin_heap_remove(&t->begin, j) == 0)
        return;
    if (t->bulk)
        t->queue_stale = true;
    else
        scheduler_queue_remove(&t->queue, j); /* -1 (nothing) for a job set aside */
}

/* Makes the queue hold the queued jobs that may start, in order, sorting once; those
 * waiting for their begin time or dependencies go aside (the heap is kept current
 * otherwise, even in bulk changes, so only jobs not in it are looked at). */
static void queue_rebuild(struct jobs *t)
{
    struct job **cand = xmalloc((t->table_len ? t->table_len : 1) * sizeof(*cand));
    size_t n = 0;
    double now = now_wall();
    for (size_t i = 0; i < t->table_len; i++) {
        struct job *j = t->table[i];
        if (j->state != JOB_QUEUED || j->begin_heap_pos)
            continue;
        if (j->deps_blocked) {
            j->wait_reason = SCHEDULER_REASON_DEPENDENCY;
        } else if (j->begin_time > now) {
            j->wait_reason = SCHEDULER_REASON_BEGIN_TIME;
            scheduler_begin_heap_push(&t->begin, j);
        } else {
            cand[n++] = j;
        }
    }
    scheduler_queue_rebuild(&t->queue, cand, n);
    free(cand);
}

/* ---- dependencies ---- */

/* Recomputes j's deps_blocked after a change of its dependencies' statuses; a queued
 * or held job whose dependencies can no longer be met is cancelled (auto_cancel) or
 * keeps waiting with reason DependencyFailed:<id>. */
static void deps_update(struct jobs *t, struct job *j)
{
    int64_t failed = 0;
    enum job_deps_outcome o = job_deps_outcome(j, &failed);
    bool blocked = o != JOB_DEPS_READY;
    if (blocked != j->deps_blocked) {
        t->dirty = true;
        if (j->state == JOB_QUEUED) {
            sched_remove(t, j);
            j->deps_blocked = blocked;
            sched_add(t, j);
        }
    }
    j->deps_blocked = blocked;
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
static void deps_job_ended(struct jobs *t, struct job *x)
{
    if (!x->n_dependents)
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
        for (size_t i = 0; i < e->n_dependents; i++) {
            struct job *d = jobs_get(t, e->dependents[i]);
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
                deps_update(t, d);
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

int jobs_check_deps(struct jobs *t, struct job *j, int64_t own_id, char **err)
{
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
        *err = xasprintf("depends_on: no job %s %s (a job can depend only on jobs that exist "
                         "already; in one request, jobs cannot depend on each other)",
                         n_unknown == 1 ? "with id" : "with ids", unknown.buf);
        strbuf_free(&unknown);
        return -1;
    }
    strbuf_free(&unknown);
    /* New jobs depend only on existing ones, so this cannot happen today; it guards
     * against a cycle made by later changes of dependencies. */
    if (deps_reach(t, j, own_id)) {
        *err = xasprintf("depends_on: job %lld would depend on itself through its "
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
        for (size_t i = 0; i < e->n_dependents; i++) {
            struct job *d = jobs_get(t, e->dependents[i]);
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

/* ---- loading and freeing ---- */

static void load_cb(struct job *j, void *arg)
{
    table_append(arg, j);
}

int jobs_load(struct jobs *t, char **err)
{
    if (store_load_groups(t->store, groups_load_cb, t) < 0) {
        *err = xasprintf("cannot load job groups: %s", store_error(t->store));
        return -1;
    }
    if (store_load_active(t->store, load_cb, t) < 0) {
        *err = xasprintf("cannot load jobs: %s", store_error(t->store));
        return -1;
    }
    t->next_id = store_next_job_id(t->store);
    t->dirty = true;
    /* Dependencies: statuses from the jobs depended on, then the verdict for each job
     * (which may cancel some, changing the table: walk a copy). */
    size_t n = 0;
    struct job **with_deps = xmalloc((t->table_len ? t->table_len : 1) * sizeof(*with_deps));
    for (size_t i = 0; i < t->table_len; i++) {
        struct job *j = t->table[i];
        if (!j->n_deps)
            continue;
        for (size_t k = 0; k < j->n_deps; k++) {
            struct job_dep *d = &j->deps[k];
            struct job *x = jobs_get(t, d->id);
            enum job_state st;
            if (x) {
                d->status = JOB_DEP_PENDING;
                job_add_dependent(x, j->id);
            } else if (store_job_state(t->store, d->id, &st) == 0) {
                d->status = job_dep_status_for(d->kind, st);
            } else {
                d->status = JOB_DEP_NEVER; /* gone: it can never be met */
            }
        }
        with_deps[n++] = j;
    }
    /* Which jobs wait for their dependencies, known before the queue is made so that
     * none is put in and taken out again. */
    for (size_t i = 0; i < n; i++) {
        int64_t failed;
        with_deps[i]->deps_blocked = job_deps_outcome(with_deps[i], &failed) != JOB_DEPS_READY;
    }
    queue_rebuild(t);
    for (size_t i = 0; i < n; i++)
        if (jobs_get(t, with_deps[i]->id) == with_deps[i])
            deps_update(t, with_deps[i]);
    free(with_deps);
    return 0;
}

int jobs_reload(struct jobs *t, char **err)
{
    struct jobs *fresh = jobs_new(t->store);
    fresh->signal_cb = t->signal_cb;
    fresh->signal_arg = t->signal_arg;
    if (jobs_load(fresh, err) < 0) {
        jobs_free(fresh);
        return -1;
    }
    /* t keeps its address (the daemon and the runner hold it); the old contents go. */
    struct jobs old = *t;
    *t = *fresh;
    *fresh = old;
    jobs_free(fresh);
    return 0;
}

void jobs_free(struct jobs *t)
{
    if (!t)
        return;
    jobs_collect(t);
    for (size_t i = 0; i < t->table_len; i++)
        job_free(t->table[i]);
    free(t->table);
    scheduler_queue_free(&t->queue);
    scheduler_begin_heap_free(&t->begin);
    free(t->run_list);
    free(t->ended);
    for (size_t i = 0; i < t->groups_len; i++)
        free(t->groups[i]);
    free(t->groups);
    free(t->users);
    free(t->cascade);
    for (size_t i = 0; i < t->actions_len; i++)
        free(t->actions[i].path);
    free(t->actions);
    free(t);
}

/* ---- changes ---- */

/* Submits j; leader: the first job of its group, whose payload j may share (see
 * store_insert_job). */
static int submit_one(struct jobs *t, struct job *j, const struct job *leader)
{
    if (store_begin(t->store) < 0)
        return -1;
    j->id = t->next_id;
    if (store_insert_job(t->store, j, leader) < 0) {
        log_error("cannot store job: %s", store_error(t->store));
        return -1;
    }
    t->next_id++;
    /* The script and environment are read back from the store at launch. */
    free(j->script);
    j->script = NULL;
    json_decref(j->env);
    j->env = NULL;
    json_decref(j->params);
    j->params = NULL;
    free(j->command_template);
    free(j->script_template);
    free(j->name_template);
    j->command_template = j->script_template = j->name_template = NULL;
    table_append(t, j);
    j->begin_heap_pos = 0;
    if (j->state == JOB_QUEUED)
        sched_add(t, j);
    t->dirty = true;
    if (j->n_deps) {
        /* Statuses were set by jobs_check_deps. */
        for (size_t k = 0; k < j->n_deps; k++) {
            struct job *x = jobs_get(t, j->deps[k].id);
            if (x)
                job_add_dependent(x, j->id);
        }
        deps_update(t, j);
    }
    return 0;
}

int jobs_submit(struct jobs *t, struct job *j)
{
    return submit_one(t, j, NULL);
}

int jobs_submit_all(struct jobs *t, struct job **jobs, size_t n, size_t *done)
{
    /* The first job's payload, kept while the others are written (submitting a job
     * drops its payload from memory). */
    struct job leader;
    job_init(&leader);
    bool grouped = n > 1 && jobs[0]->group_id > 0;
    if (grouped) {
        leader.env = jobs[0]->env ? json_incref(jobs[0]->env) : NULL;
        leader.script = jobs[0]->script ? xstrdup(jobs[0]->script) : NULL;
        leader.script_template =
            jobs[0]->script_template ? xstrdup(jobs[0]->script_template) : NULL;
        leader.command_template =
            jobs[0]->command_template ? xstrdup(jobs[0]->command_template) : NULL;
    }
    size_t i;
    int rc = 0;
    for (i = 0; i < n && rc == 0; i++) {
        rc = submit_one(t, jobs[i], i > 0 && grouped ? &leader : NULL);
        if (i == 0)
            leader.id = jobs[0]->id;
    }
    *done = rc == 0 ? n : i - 1;
    job_clear(&leader);
    return rc;
}

int jobs_save(struct jobs *t, struct job *j)
{
    if (store_begin(t->store) < 0 || store_update_job(t->store, j) < 0) {
        log_error("job %lld: cannot store: %s", (long long)j->id, store_error(t->store));
        return -1;
    }
    return 0;
}

static void dependents_remove(struct job *x, int64_t id)
{
    size_t k = 0;
    for (size_t i = 0; i < x->n_dependents; i++)
        if (x->dependents[i] != id)
            x->dependents[k++] = x->dependents[i];
    x->n_dependents = k;
}

static void take_str(char **dst, char **src)
{
    free(*dst);
    *dst = *src;
    *src = NULL;
}

int jobs_update(struct jobs *t, struct job *j, struct job *n, bool deps_changed, bool what_changed)
{
    if (store_begin(t->store) < 0)
        return -1;
    int rc = 0;
    n->id = j->id;
    if (what_changed && store_update_what(t->store, n, true) < 0)
        rc = -1;
    bool queued = j->state == JOB_QUEUED;
    if (queued)
        sched_remove(t, j);
    take_str(&j->name, &n->name);
    take_str(&j->command, &n->command);
    take_str(&j->script_path, &n->script_path);
    take_str(&j->workdir, &n->workdir);
    take_str(&j->conda_env, &n->conda_env);
    j->priority = n->priority;
    j->time_limit = n->time_limit;
    j->gpus = n->gpus;
    j->gpu_memory_mb = n->gpu_memory_mb;
    take_str(&j->mig_profile, &n->mig_profile);
    j->mig_count = n->mig_count;
    j->shared = n->shared;
    j->gpus_per_task = n->gpus_per_task;
    j->memory_mb = n->memory_mb;
    j->warn_signal = n->warn_signal;
    j->warn_secs = n->warn_secs;
    j->warn_main_only = n->warn_main_only;
    j->begin_time = n->begin_time;
    j->max_retries = n->max_retries;
    j->umask = n->umask;
    j->auto_cancel = n->auto_cancel;
    j->deps_any = n->deps_any;
    if (deps_changed) {
        for (size_t k = 0; k < j->n_deps; k++) {
            struct job *x = jobs_get(t, j->deps[k].id);
            if (x)
                dependents_remove(x, j->id);
        }
        free(j->deps);
        j->deps = n->deps;
        j->n_deps = n->n_deps;
        n->deps = NULL;
        n->n_deps = 0;
        for (size_t k = 0; k < j->n_deps; k++) {
            struct job *x = jobs_get(t, j->deps[k].id);
            if (x)
                job_add_dependent(x, j->id);
        }
        if (j->state == JOB_QUEUED && j->reason == JOB_REASON_DEPENDENCY_FAILED)
            job_set_reason(j, JOB_REASON_NONE, 0, NULL);
    }
    if (queued)
        sched_add(t, j);
    t->dirty = true;
    if ((deps_changed ? store_replace_deps(t->store, j) : store_update_job(t->store, j)) < 0) {
        log_error("job %lld: cannot store the update: %s", (long long)j->id, store_error(t->store));
        rc = -1;
    }
    if (deps_changed || j->n_deps)
        deps_update(t, j); /* also for a changed auto_cancel */
    return rc;
}

/* ---- retries (--max-retries) ---- */

bool jobs_retryable(const struct job *j)
{
    if (j->state != JOB_FAILED || j->attempt > j->max_retries)
        return false;
    /* A failure of the job itself: not a time limit or a cancellation (other states),
     * nor a launch that can only fail again (LaunchFailed: a missing conda environment,
     * workdir...) or a daemon-side loss (ShimLost). */
    return j->reason == JOB_REASON_NON_ZERO_EXIT || j->reason == JOB_REASON_OUT_OF_MEMORY ||
           j->reason == JOB_REASON_SIGNAL;
}

/* j has just failed with retries left: submits its next attempt (a copy with a new id)
 * and moves j's dependents onto it, in memory and in job_deps, in the same transaction. */
static struct job *retry_job(struct jobs *t, struct job *j)
{
    struct job full;
    if (store_get_job(t->store, j->id, &full, true) != 0) {
        log_error("job %lld: cannot read it back to retry it: %s", (long long)j->id,
                  store_error(t->store));
        job_clear(&full);
        return NULL;
    }
    struct job *n = job_new();
    *n = full;
    n->state = JOB_QUEUED;
    job_set_reason(n, JOB_REASON_NONE, 0, NULL);
    n->wait_reason = NULL;
    n->start_time = n->end_time = 0;
    n->exit_code = -1;
    n->signal = 0;
    n->oom = false;
    n->end_request = JOB_END_NONE;
    n->shim_pid = n->shim_start = n->max_rss_kb = 0;
    n->gpu_mask = 0;
    free(n->mig_uuids);
    n->mig_uuids = NULL;
    n->submit_time = now_wall();
    n->attempt = j->attempt + 1;
    n->retry_of = j->id;
    n->deps_blocked = false;
    n->dependents = NULL;
    n->n_dependents = n->cap_dependents = 0;
    n->runtime = NULL;
    n->group = NULL;
    /* Its dependencies stand as the failed attempt's did (it had been allowed to run). */
    for (size_t k = 0; k < n->n_deps; k++) {
        n->deps[k].status = JOB_DEP_MET;
        for (size_t m = 0; m < j->n_deps; m++)
            if (j->deps[m].id == n->deps[k].id && j->deps[m].kind == n->deps[k].kind)
                n->deps[k].status =
                    jobs_get(t, j->deps[m].id) ? JOB_DEP_PENDING : j->deps[m].status;
    }
    if (jobs_submit(t, n) < 0) {
        job_free(n);
        return NULL;
    }
    log_info("job %lld failed (%s, attempt %d of %d): retried as job %lld", (long long)j->id,
             job_reason_name(j->reason), j->attempt, j->max_retries + 1, (long long)n->id);
    for (size_t i = 0; i < j->n_dependents; i++) {
        struct job *d = jobs_get(t, j->dependents[i]);
        if (!d)
            continue;
        bool moved = false;
        for (size_t k = 0; k < d->n_deps; k++) {
            if (d->deps[k].id != j->id)
                continue;
            d->deps[k].id = n->id;
            d->deps[k].status = JOB_DEP_PENDING;
            moved = true;
        }
        if (!moved)
            continue;
        job_add_dependent(n, d->id);
        if (store_begin(t->store) < 0 || store_replace_deps(t->store, d) < 0)
            log_error("job %lld: cannot store its dependencies: %s", (long long)d->id,
                      store_error(t->store));
        deps_update(t, d);
    }
    j->n_dependents = 0; /* they wait on the new attempt now */
    return n;
}

int jobs_set_state(struct jobs *t, struct job *j, enum job_state to, enum job_reason reason,
                   int64_t reason_job, const char *detail)
{
    if (!job_transition_allowed(j->state, to))
        return -1;
    enum job_state from = j->state;
    if (j->state == JOB_RUNNING)
        run_list_remove(t, j);
    else if (j->state == JOB_QUEUED)
        sched_remove(t, j);
    if (to == JOB_RUNNING) {
        run_list_add(t, j);
    } else if (to == JOB_QUEUED) {
        /* Back in the queue (released, or a launch that never happened): its GPUs
         * are chosen again when it starts. */
        j->gpu_mask = 0;
        free(j->mig_uuids);
        j->mig_uuids = NULL;
    }
    j->state = to;
    job_set_reason(j, reason, reason_job, detail);
    if (to != JOB_QUEUED)
        j->wait_reason = NULL;
    else
        sched_add(t, j); /* after the state: a release's begin time may put it aside */
    if (job_state_is_terminal(to)) {
        if (j->end_time <= 0)
            j->end_time = now_wall();
        table_remove(t, j);
        if (t->ended_len == t->ended_cap) {
            t->ended_cap = t->ended_cap ? t->ended_cap * 2 : 64;
            t->ended = xrealloc(t->ended, t->ended_cap * sizeof(*t->ended));
        }
        t->ended[t->ended_len++] = j;
    }
    t->dirty = true;
    int rc;
    if (t->bulk && from != JOB_RUNNING && to != JOB_RUNNING) { /* nothing else changed */
        rc = store_begin(t->store) < 0 || store_update_state(t->store, j) < 0 ? -1 : 0;
        if (rc < 0)
            log_error("job %lld: cannot store: %s", (long long)j->id, store_error(t->store));
    } else {
        rc = jobs_save(t, j);
    }
    if (to == JOB_QUEUED && j->n_deps)
        deps_update(t, j); /* e.g. released: DependencyFailed shows again */
    if (rc == 0 && jobs_retryable(j))
        retry_job(t, j);
    if (job_state_is_terminal(to))
        deps_job_ended(t, j);
    return rc;
}

/* ---- the scheduling pass ---- */

void jobs_mark_dirty(struct jobs *t)
{
    t->dirty = true;
}

/* The jobs whose begin time has come go from the heap into the queue: one by one if
 * few, else appended and sorted once (inserting many in the middle of a long queue
 * would move it once per job). */
static void begin_due(struct jobs *t, double now)
{
    size_t n = 0, cap = 0;
    struct job **due = NULL;
    struct job *j;
    while ((j = scheduler_begin_heap_pop_due(&t->begin, now))) {
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            due = xrealloc(due, cap * sizeof(*due));
        }
        due[n++] = j;
    }
    if (n <= 64) {
        for (size_t i = 0; i < n; i++)
            scheduler_queue_insert(&t->queue, due[i]);
    } else {
        size_t all = t->queue.len + n;
        struct job **list = xmalloc(all * sizeof(*list));
        memcpy(list, t->queue.jobs, t->queue.len * sizeof(*list));
        memcpy(list + t->queue.len, due, n * sizeof(*list));
        scheduler_queue_rebuild(&t->queue, list, all);
        free(list);
    }
    free(due);
}

size_t jobs_schedule(struct jobs *t, const struct jobs_machine *m, double now,
                     struct job ***started, double *next_begin)
{
    *started = NULL;
    *next_begin = -1;
    if (!t->dirty)
        return 0;
    t->dirty = false;
    begin_due(t, now);
    /* The jobs put aside for their begin time wait for the earliest of theirs; the pass
     * adds any job in the queue whose begin time is to come (the clock went back). */
    double heap_next = scheduler_begin_heap_next(&t->begin);
    *next_begin = heap_next;
    if (t->queue.len == 0)
        return 0;
    struct job **start = xmalloc(t->queue.len * sizeof(*start));
    struct scheduler_policy policy = {
        .max_running_jobs = m->max_running_jobs,
        .allowed_gpus = m->allowed,
        .gpu_strategy = m->strategy,
        .random_seed = (uint64_t)(now * 1e6),
    };
    struct scheduler_input in = {
        .queued = t->queue.jobs,
        .n_queued = t->queue.len,
        .running = t->run_list,
        .n_running = t->running,
        .gpus = m->gpus,
        .unmanaged = m->unmanaged,
        .mig_unmanaged = m->mig_unmanaged,
        .memory_total_mb = m->memory_total_mb,
        .now = now,
        .next_begin = next_begin,
        .outside_mib = m->outside_mib,
    };
    size_t n = scheduler_pass(&in, &policy, start);
    if (heap_next > 0 && (*next_begin == 0 || heap_next < *next_begin))
        *next_begin = heap_next;
    /* Out of the queue in one sweep (jobs_set_state then finds them gone). */
    scheduler_queue_remove_many(&t->queue, start, n);
    for (size_t i = 0; i < n; i++) {
        struct job *j = start[i];
        j->start_time = now;
        j->shim_pid = 0;
        j->shim_start = 0;
        jobs_set_state(t, j, JOB_RUNNING, JOB_REASON_NONE, 0, NULL);
    }
    if (n == 0) {
        free(start);
        return 0;
    }
    *started = start;
    return n;
}

/* ---- the commit and what waits for it ---- */

static struct action *action_new(struct jobs *t, enum action_kind kind)
{
    if (t->actions_len == t->actions_cap) {
        t->actions_cap = t->actions_cap ? t->actions_cap * 2 : 64;
        t->actions = xrealloc(t->actions, t->actions_cap * sizeof(*t->actions));
    }
    struct action *a = &t->actions[t->actions_len++];
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    return a;
}

void jobs_after_commit_unlink(struct jobs *t, char *path)
{
    action_new(t, ACTION_UNLINK)->path = path;
}

void jobs_after_commit_signal(struct jobs *t, int64_t job_id, int sig)
{
    struct action *a = action_new(t, ACTION_SIGNAL);
    a->job_id = job_id;
    a->sig = sig;
}

void jobs_after_commit_call(struct jobs *t, void (*fn)(void *arg, int64_t job_id), void *arg,
                            int64_t job_id)
{
    struct action *a = action_new(t, ACTION_CALL);
    a->fn = fn;
    a->arg = arg;
    a->job_id = job_id;
}

int jobs_commit(struct jobs *t)
{
    if (store_in_transaction(t->store) && store_commit(t->store) < 0) {
        if (!store_transaction_lost(t->store)) /* else the caller undoes it, and says so */
            log_error("commit failed (will retry): %s", store_error(t->store));
        return -1;
    }
    /* Actions may queue further actions (and changes); take the list first. */
    size_t n = t->actions_len;
    struct action *list = t->actions;
    t->actions = NULL;
    t->actions_len = t->actions_cap = 0;
    for (size_t i = 0; i < n; i++) {
        struct action *a = &list[i];
        if (a->kind == ACTION_UNLINK) {
            unlink(a->path);
            free(a->path);
        } else if (a->kind == ACTION_CALL) {
            a->fn(a->arg, a->job_id);
        } else {
            struct job *j = jobs_get(t, a->job_id);
            if (j && j->state == JOB_RUNNING && t->signal_cb)
                t->signal_cb(t->signal_arg, j, a->sig);
        }
    }
    free(list);
    return 0;
}

void jobs_collect(struct jobs *t)
{
    for (size_t i = 0; i < t->ended_len; i++)
        job_free(t->ended[i]);
    t->ended_len = 0;
}
