/* jobs: the active-job table and job changes, persisted through the store.
 *
 * The table is an array sorted by id: ids only grow, so a new job is appended and a
 * lookup is a binary search. Beside it, the queued jobs are kept in scheduling order (a
 * scheduler_queue, updated whenever a job enters or leaves PD) and the running jobs in an
 * unordered list, so a scheduling pass neither sorts nor scans the whole table.
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
#include "gflowd.h"
#include "loop.h"
#include "gpu.h"
#include "log.h"
#include "runner.h"
#include "scheduler.h"
#include "store.h"
#include "util.h"

static struct job **table;
static size_t table_len, table_cap;
static size_t running;
static int64_t next_id;
static bool dirty = true;
static struct scheduler_queue queue; /* PD jobs in scheduling order */
static struct job **run_list;        /* R jobs, any order */
static size_t run_cap;               /* run_list holds `running` jobs */

static struct job **ended; /* left the table this iteration; freed by jobs_collect */
static size_t ended_len, ended_cap;

enum action_kind { ACTION_UNLINK, ACTION_SIGNAL };
struct action {
    enum action_kind kind;
    char *path;
    int64_t job_id;
    int sig;
};
static struct action *actions;
static size_t actions_len, actions_cap;

static struct job **cascade; /* ended jobs whose dependents are still to be updated */
static size_t cascade_len, cascade_cap;
static bool cascading;

/* Submission groups with a record in the daemon, ascending by id (groups are made with
 * growing ids, so a new one is appended). Kept for the daemon's life: small, and a job
 * copy may still point at its group. */
static struct job_group **groups;
static size_t groups_len, groups_cap;

struct job_group *jobs_group(int64_t id, bool create)
{
    size_t lo = 0, hi = groups_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (groups[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < groups_len && groups[lo]->id == id)
        return groups[lo];
    if (!create || id <= 0)
        return NULL;
    if (groups_len == groups_cap) {
        groups_cap = groups_cap ? groups_cap * 2 : 16;
        groups = xrealloc(groups, groups_cap * sizeof(*groups));
    }
    memmove(groups + lo + 1, groups + lo, (groups_len - lo) * sizeof(*groups));
    struct job_group *g = xcalloc(1, sizeof(*g));
    g->id = id;
    groups[lo] = g;
    groups_len++;
    return g;
}

int jobs_group_set_limit(struct job_group *g, int64_t max_concurrent)
{
    if (store_begin(gd.store) < 0 || store_set_group(gd.store, g->id, max_concurrent) < 0) {
        log_error("group %lld: cannot store: %s", (long long)g->id, store_error(gd.store));
        return -1;
    }
    g->max_concurrent = max_concurrent;
    dirty = true;
    return 0;
}

static void groups_load_cb(int64_t id, int64_t max_concurrent, void *arg)
{
    (void)arg;
    jobs_group(id, true)->max_concurrent = max_concurrent;
}

static void run_list_add(struct job *j)
{
    if (running == run_cap) {
        run_cap = run_cap ? run_cap * 2 : 64;
        run_list = xrealloc(run_list, run_cap * sizeof(*run_list));
    }
    run_list[running++] = j;
    if (j->group)
        j->group->running++;
}

static void run_list_remove(struct job *j)
{
    for (size_t i = 0; i < running; i++)
        if (run_list[i] == j) {
            run_list[i] = run_list[--running];
            if (j->group)
                j->group->running--;
            return;
        }
}

static void table_append(struct job *j)
{
    if (table_len == table_cap) {
        table_cap = table_cap ? table_cap * 2 : 256;
        table = xrealloc(table, table_cap * sizeof(*table));
    }
    table[table_len++] = j;
    if (j->group_id > 0 && !j->group)
        j->group = jobs_group(j->group_id, true);
    if (j->state == JOB_RUNNING)
        run_list_add(j);
}

static ssize_t table_index(int64_t id)
{
    size_t lo = 0, hi = table_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (table[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < table_len && table[lo]->id == id) ? (ssize_t)lo : -1;
}

static void table_remove(struct job *j)
{
    ssize_t i = table_index(j->id);
    if (i < 0)
        return;
    memmove(table + i, table + i + 1, (table_len - (size_t)i - 1) * sizeof(*table));
    table_len--;
}

/* ---- dependencies ---- */

/* Recomputes j's deps_blocked after a change of its dependencies' statuses; a queued
 * or held job whose dependencies can no longer be met is cancelled (auto_cancel) or
 * keeps waiting with reason DependencyFailed:<id>. */
static void deps_update(struct job *j)
{
    int64_t failed = 0;
    enum job_deps_outcome o = job_deps_outcome(j, &failed);
    bool blocked = o != JOB_DEPS_READY;
    if (blocked != j->deps_blocked)
        dirty = true;
    j->deps_blocked = blocked;
    if (o != JOB_DEPS_FAILED || (j->state != JOB_QUEUED && j->state != JOB_HELD))
        return;
    char reason[48];
    snprintf(reason, sizeof(reason), "DependencyFailed:%lld", (long long)failed);
    if (j->auto_cancel) {
        log_info("job %lld: cancelled, dependency on job %lld can no longer be met",
                 (long long)j->id, (long long)failed);
        j->end_time = now_wall();
        jobs_set_state(j, JOB_CANCELLED, reason);
    } else if (j->state == JOB_QUEUED && (!j->reason || strcmp(j->reason, reason) != 0)) {
        free(j->reason);
        j->reason = xstrdup(reason);
        jobs_save(j);
    }
}

/* x has ended: updates its dependents, and theirs if they are cancelled in turn. */
static void deps_job_ended(struct job *x)
{
    if (!x->n_dependents)
        return;
    if (cascade_len == cascade_cap) {
        cascade_cap = cascade_cap ? cascade_cap * 2 : 16;
        cascade = xrealloc(cascade, cascade_cap * sizeof(*cascade));
    }
    cascade[cascade_len++] = x;
    if (cascading)
        return; /* the loop below takes it */
    cascading = true;
    while (cascade_len) {
        struct job *e = cascade[--cascade_len]; /* ended this iteration: still readable */
        for (size_t i = 0; i < e->n_dependents; i++) {
            struct job *d = jobs_get(e->dependents[i]);
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
                deps_update(d);
        }
    }
    cascading = false;
}

int64_t jobs_next_id(void)
{
    return next_id;
}

/* Whether following dependencies from j's (through active jobs) reaches job id. */
static bool deps_reach(const struct job *j, int64_t id)
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
        struct job *x = dup ? NULL : jobs_get(cur);
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

int jobs_check_deps(struct job *j, int64_t own_id, char **err)
{
    struct strbuf unknown;
    strbuf_init(&unknown);
    size_t n_unknown = 0;
    for (size_t k = 0; k < j->n_deps; k++) {
        struct job_dep *d = &j->deps[k];
        enum job_state st;
        int rc = 1;
        if (jobs_get(d->id)) {
            d->status = JOB_DEP_PENDING;
            continue;
        }
        if (d->id > 0 && d->id < next_id)
            rc = store_job_state(gd.store, d->id, &st);
        if (rc < 0) {
            *err = xasprintf("cannot read job %lld: %s", (long long)d->id, store_error(gd.store));
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
    if (deps_reach(j, own_id)) {
        *err = xasprintf("depends_on: job %lld would depend on itself through its "
                         "dependencies (a cycle)", (long long)own_id);
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

size_t jobs_cascade_preview(const struct job *x, struct jobs_cascade **out)
{
    /* sim[0] is x itself (ending as CA); the rest are the jobs it would take along. */
    size_t n = 1, cap = 16;
    struct jobs_cascade *sim = xmalloc(cap * sizeof(*sim));
    sim[0] = (struct jobs_cascade){x->id, 0};
    for (size_t k = 0; k < n; k++) {
        const struct job *e = k == 0 ? x : jobs_get(sim[k].id);
        if (!e)
            continue;
        for (size_t i = 0; i < e->n_dependents; i++) {
            struct job *d = jobs_get(e->dependents[i]);
            if (!d || !d->auto_cancel || (d->state != JOB_QUEUED && d->state != JOB_HELD) ||
                sim_find(sim, n, d->id))
                continue;
            struct job t;
            job_init(&t);
            t.deps_any = d->deps_any;
            t.n_deps = d->n_deps;
            t.deps = xmalloc(d->n_deps * sizeof(*t.deps));
            for (size_t m = 0; m < d->n_deps; m++) {
                t.deps[m] = d->deps[m];
                if (sim_find(sim, n, d->deps[m].id))
                    t.deps[m].status = job_dep_status_for(d->deps[m].kind, JOB_CANCELLED);
            }
            if (job_deps_outcome(&t, NULL) == JOB_DEPS_FAILED) {
                if (n == cap)
                    sim = xrealloc(sim, (cap *= 2) * sizeof(*sim));
                sim[n++] = (struct jobs_cascade){d->id, e->id};
            }
            free(t.deps);
        }
    }
    memmove(sim, sim + 1, (n - 1) * sizeof(*sim));
    *out = sim;
    return n - 1;
}

static void load_cb(struct job *j, void *arg)
{
    (void)arg;
    table_append(j);
}

int jobs_load(char **err)
{
    if (store_load_groups(gd.store, groups_load_cb, NULL) < 0) {
        *err = xasprintf("cannot load job groups: %s", store_error(gd.store));
        return -1;
    }
    if (store_load_active(gd.store, load_cb, NULL) < 0) {
        *err = xasprintf("cannot load jobs: %s", store_error(gd.store));
        return -1;
    }
    next_id = store_next_job_id(gd.store);
    scheduler_queue_rebuild(&queue, table, table_len);
    dirty = true;
    /* Dependencies: statuses from the jobs depended on, then the verdict for each job
     * (which may cancel some, changing the table: walk a copy). */
    size_t n = 0;
    struct job **with_deps = xmalloc((table_len ? table_len : 1) * sizeof(*with_deps));
    for (size_t i = 0; i < table_len; i++) {
        struct job *j = table[i];
        if (!j->n_deps)
            continue;
        for (size_t k = 0; k < j->n_deps; k++) {
            struct job_dep *d = &j->deps[k];
            struct job *x = jobs_get(d->id);
            enum job_state st;
            if (x) {
                d->status = JOB_DEP_PENDING;
                job_add_dependent(x, j->id);
            } else if (store_job_state(gd.store, d->id, &st) == 0) {
                d->status = job_dep_status_for(d->kind, st);
            } else {
                d->status = JOB_DEP_NEVER; /* gone: it can never be met */
            }
        }
        with_deps[n++] = j;
    }
    for (size_t i = 0; i < n; i++)
        if (jobs_get(with_deps[i]->id) == with_deps[i])
            deps_update(with_deps[i]);
    free(with_deps);
    return 0;
}

void jobs_free_all(void)
{
    jobs_collect();
    for (size_t i = 0; i < table_len; i++)
        job_free(table[i]);
    free(table);
    table = NULL;
    table_len = table_cap = running = 0;
    scheduler_queue_free(&queue);
    free(run_list);
    run_list = NULL;
    run_cap = 0;
    free(ended);
    ended = NULL;
    ended_cap = 0;
    for (size_t i = 0; i < groups_len; i++)
        free(groups[i]);
    free(groups);
    groups = NULL;
    groups_len = groups_cap = 0;
    free(cascade);
    cascade = NULL;
    cascade_len = cascade_cap = 0;
    for (size_t i = 0; i < actions_len; i++)
        free(actions[i].path);
    free(actions);
    actions = NULL;
    actions_len = actions_cap = 0;
}

struct job *jobs_get(int64_t id)
{
    ssize_t i = table_index(id);
    return i < 0 ? NULL : table[i];
}

struct job **jobs_active(size_t *n)
{
    *n = table_len;
    return table;
}

int jobs_submit(struct job *j)
{
    if (store_begin(gd.store) < 0)
        return -1;
    j->id = next_id;
    if (store_insert_job(gd.store, j) < 0) {
        log_error("cannot store job: %s", store_error(gd.store));
        return -1;
    }
    next_id++;
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
    table_append(j);
    if (j->state == JOB_QUEUED)
        scheduler_queue_insert(&queue, j);
    dirty = true;
    if (j->n_deps) {
        /* Statuses were set by jobs_check_deps. */
        for (size_t k = 0; k < j->n_deps; k++) {
            struct job *x = jobs_get(j->deps[k].id);
            if (x)
                job_add_dependent(x, j->id);
        }
        deps_update(j);
    }
    return 0;
}

int jobs_save(struct job *j)
{
    if (store_begin(gd.store) < 0 || store_update_job(gd.store, j) < 0) {
        log_error("job %lld: cannot store: %s", (long long)j->id, store_error(gd.store));
        return -1;
    }
    return 0;
}

/* ---- gjob update ---- */

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

int jobs_update(struct job *j, struct job *n, bool deps_changed, bool what_changed)
{
    if (store_begin(gd.store) < 0)
        return -1;
    int rc = 0;
    n->id = j->id;
    if (what_changed && store_update_what(gd.store, n, true) < 0)
        rc = -1;
    bool queued = j->state == JOB_QUEUED;
    if (queued)
        scheduler_queue_remove(&queue, j);
    take_str(&j->name, &n->name);
    take_str(&j->command, &n->command);
    take_str(&j->script_path, &n->script_path);
    take_str(&j->workdir, &n->workdir);
    take_str(&j->conda_env, &n->conda_env);
    j->priority = n->priority;
    j->time_limit = n->time_limit;
    j->gpus = n->gpus;
    j->gpu_memory_mb = n->gpu_memory_mb;
    j->shared = n->shared;
    j->gpus_per_task = n->gpus_per_task;
    j->memory_mb = n->memory_mb;
    j->warn_signal = n->warn_signal;
    j->warn_secs = n->warn_secs;
    j->warn_main_only = n->warn_main_only;
    j->begin_time = n->begin_time;
    j->max_retries = n->max_retries;
    j->auto_cancel = n->auto_cancel;
    j->deps_any = n->deps_any;
    if (deps_changed) {
        for (size_t k = 0; k < j->n_deps; k++) {
            struct job *x = jobs_get(j->deps[k].id);
            if (x)
                dependents_remove(x, j->id);
        }
        free(j->deps);
        j->deps = n->deps;
        j->n_deps = n->n_deps;
        n->deps = NULL;
        n->n_deps = 0;
        for (size_t k = 0; k < j->n_deps; k++) {
            struct job *x = jobs_get(j->deps[k].id);
            if (x)
                job_add_dependent(x, j->id);
        }
        if (j->state == JOB_QUEUED && j->reason && !strncmp(j->reason, "DependencyFailed", 16)) {
            free(j->reason);
            j->reason = NULL;
        }
    }
    if (queued)
        scheduler_queue_insert(&queue, j);
    dirty = true;
    if ((deps_changed ? store_replace_deps(gd.store, j) : store_update_job(gd.store, j)) < 0) {
        log_error("job %lld: cannot store the update: %s", (long long)j->id, store_error(gd.store));
        rc = -1;
    }
    if (deps_changed || j->n_deps)
        deps_update(j); /* also for a changed auto_cancel */
    return rc;
}

/* ---- retries (--max-retries) ---- */

bool jobs_retryable(const struct job *j)
{
    if (j->state != JOB_FAILED || j->attempt > j->max_retries || !j->reason)
        return false;
    /* A failure of the job itself: not a time limit or a cancellation (other states),
     * nor a launch that can only fail again (LaunchFailed: a missing conda environment,
     * workdir...) or a daemon-side loss (ShimLost). */
    return strcmp(j->reason, "NonZeroExitCode") == 0 || strcmp(j->reason, "OutOfMemory") == 0 ||
           strcmp(j->reason, "Signal") == 0;
}

/* j has just failed with retries left: submits its next attempt (a copy with a new id)
 * and moves j's dependents onto it, in memory and in job_deps, in the same transaction. */
static struct job *retry_job(struct job *j)
{
    struct job full;
    if (store_get_job(gd.store, j->id, &full, true) != 0) {
        log_error("job %lld: cannot read it back to retry it: %s", (long long)j->id,
                  store_error(gd.store));
        job_clear(&full);
        return NULL;
    }
    struct job *n = job_new();
    *n = full;
    n->state = JOB_QUEUED;
    free(n->reason);
    n->reason = NULL;
    n->wait_reason = NULL;
    n->start_time = n->end_time = 0;
    n->exit_code = -1;
    n->signal = 0;
    n->oom = false;
    n->end_request = JOB_END_NONE;
    n->shim_pid = n->shim_start = n->max_rss_kb = 0;
    free(n->gpu_ids);
    n->gpu_ids = NULL;
    n->submit_time = now_wall();
    n->attempt = j->attempt + 1;
    n->retry_of = j->id;
    n->deps_blocked = false;
    n->dependents = NULL;
    n->n_dependents = n->cap_dependents = 0;
    n->runtime = NULL;
    /* Its dependencies stand as the failed attempt's did (it had been allowed to run). */
    for (size_t k = 0; k < n->n_deps; k++) {
        n->deps[k].status = JOB_DEP_MET;
        for (size_t m = 0; m < j->n_deps; m++)
            if (j->deps[m].id == n->deps[k].id && j->deps[m].kind == n->deps[k].kind)
                n->deps[k].status = jobs_get(j->deps[m].id) ? JOB_DEP_PENDING : j->deps[m].status;
    }
    if (jobs_submit(n) < 0) {
        job_free(n);
        return NULL;
    }
    log_info("job %lld failed (%s, attempt %d of %d): retried as job %lld", (long long)j->id,
             j->reason, j->attempt, j->max_retries + 1, (long long)n->id);
    for (size_t i = 0; i < j->n_dependents; i++) {
        struct job *d = jobs_get(j->dependents[i]);
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
        if (store_begin(gd.store) < 0 || store_replace_deps(gd.store, d) < 0)
            log_error("job %lld: cannot store its dependencies: %s", (long long)d->id,
                      store_error(gd.store));
        deps_update(d);
    }
    j->n_dependents = 0; /* they wait on the new attempt now */
    return n;
}

int jobs_set_state(struct job *j, enum job_state to, const char *reason)
{
    if (!job_transition_allowed(j->state, to))
        return -1;
    if (j->state == JOB_RUNNING)
        run_list_remove(j);
    else if (j->state == JOB_QUEUED)
        scheduler_queue_remove(&queue, j);
    if (to == JOB_RUNNING) {
        run_list_add(j);
    } else if (to == JOB_QUEUED) {
        /* Back in the queue (released, or a launch that never happened): its GPUs
         * are chosen again when it starts. */
        free(j->gpu_ids);
        j->gpu_ids = NULL;
        scheduler_queue_insert(&queue, j);
    }
    j->state = to;
    if (reason != j->reason) {
        free(j->reason);
        j->reason = reason ? xstrdup(reason) : NULL;
    }
    if (to != JOB_QUEUED)
        j->wait_reason = NULL;
    if (job_state_is_terminal(to)) {
        if (j->end_time <= 0)
            j->end_time = now_wall();
        table_remove(j);
        if (ended_len == ended_cap) {
            ended_cap = ended_cap ? ended_cap * 2 : 64;
            ended = xrealloc(ended, ended_cap * sizeof(*ended));
        }
        ended[ended_len++] = j;
    }
    dirty = true;
    int rc = jobs_save(j);
    if (to == JOB_QUEUED && j->n_deps)
        deps_update(j); /* e.g. released: DependencyFailed shows again */
    if (rc == 0 && jobs_retryable(j))
        retry_job(j);
    if (job_state_is_terminal(to))
        deps_job_ended(j);
    return rc;
}

void jobs_mark_dirty(void)
{
    dirty = true;
}

/* --begin: one timer, at the earliest begin time of the jobs waiting for theirs, that
 * makes the next loop iteration run a pass (no polling). */
static struct loop_timer *begin_timer;
static double begin_timer_at;

static void begin_cb(void *arg)
{
    begin_timer = NULL;
    begin_timer_at = 0;
    dirty = true;
}

static void arm_begin_timer(double at)
{
    if (at == begin_timer_at && (begin_timer || at == 0))
        return;
    loop_cancel_timer(begin_timer);
    begin_timer = NULL;
    begin_timer_at = at;
    if (at > 0) {
        double delay = at - now_wall();
        begin_timer = loop_add_timer(delay > 0 ? delay : 0, begin_cb, NULL);
    }
}

size_t jobs_schedule(struct job ***started)
{
    *started = NULL;
    if (!dirty)
        return 0;
    dirty = false;
    if (queue.len == 0)
        return 0;
    struct job **start = xmalloc(queue.len * sizeof(*start));
    struct scheduler_policy policy = {
        .max_running_jobs = gd.cfg.max_running_jobs,
        .allowed_gpus = scheduler_allowed_mask(gpu_allowed()),
        .random_seed = (uint64_t)(now_wall() * 1e6),
    };
    gpualloc_strategy_parse(gd.cfg.gpu_allocation_strategy, &policy.gpu_strategy);
    double next_begin = 0;
    struct scheduler_input in = {
        .queued = queue.jobs,
        .n_queued = queue.len,
        .running = run_list,
        .n_running = running,
        .gpus = gpu_current(),
        .unmanaged = gpu_unmanaged(),
        .memory_total_mb = gd.mem_total_mb,
        .now = now_wall(),
        .next_begin = &next_begin,
    };
    size_t n = scheduler_pass(&in, &policy, start);
    arm_begin_timer(next_begin);
    /* Out of the queue in one sweep (jobs_set_state then finds them gone). */
    scheduler_queue_remove_many(&queue, start, n);
    for (size_t i = 0; i < n; i++) {
        struct job *j = start[i];
        j->start_time = now_wall();
        j->shim_pid = 0;
        j->shim_start = 0;
        jobs_set_state(j, JOB_RUNNING, NULL);
    }
    if (n == 0) {
        free(start);
        return 0;
    }
    *started = start;
    return n;
}

static struct action *action_new(enum action_kind kind)
{
    if (actions_len == actions_cap) {
        actions_cap = actions_cap ? actions_cap * 2 : 64;
        actions = xrealloc(actions, actions_cap * sizeof(*actions));
    }
    struct action *a = &actions[actions_len++];
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    return a;
}

void jobs_after_commit_unlink(char *path)
{
    action_new(ACTION_UNLINK)->path = path;
}

void jobs_after_commit_signal(int64_t job_id, int sig)
{
    struct action *a = action_new(ACTION_SIGNAL);
    a->job_id = job_id;
    a->sig = sig;
}

int jobs_commit(void)
{
    if (store_in_transaction(gd.store) && store_commit(gd.store) < 0) {
        log_error("commit failed (will retry): %s", store_error(gd.store));
        return -1;
    }
    /* Actions may queue further actions (and changes); take the list first. */
    size_t n = actions_len;
    struct action *list = actions;
    actions = NULL;
    actions_len = actions_cap = 0;
    for (size_t i = 0; i < n; i++) {
        struct action *a = &list[i];
        if (a->kind == ACTION_UNLINK) {
            unlink(a->path);
            free(a->path);
        } else {
            struct job *j = jobs_get(a->job_id);
            if (j && j->state == JOB_RUNNING)
                runner_signal(j, a->sig);
        }
    }
    free(list);
    return 0;
}

void jobs_collect(void)
{
    for (size_t i = 0; i < ended_len; i++)
        job_free(ended[i]);
    ended_len = 0;
}
