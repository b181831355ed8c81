/* jobs: the active-job table and job changes, persisted through the store.
 *
 * The table is an array sorted by id: ids only grow, so a new job is appended and a
 * lookup is a binary search. Beside it, the queued jobs are kept in scheduling order (a
 * scheduler_queue, updated whenever a job enters or leaves PD) and the running jobs in an
 * unordered list, so a scheduling pass neither sorts nor scans the whole table.
 *
 * Where a queued job waits and the scheduling pass are jobs_sched.c's; the dependency
 * cascade is jobs_deps.c's (jobs_internal.h: what the three share). */
#include "jobs_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "policy/quota_state.h"
#include "store/store.h"
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

/* ---- the table ---- */

struct jobs *jobs_new(struct store *store)
{
    struct jobs *t = xcalloc(1, sizeof(*t));
    t->store = store;
    t->dirty = true;
    scheduler_queue_init(&t->queue);
    scheduler_begin_heap_init(&t->begin);
    t->quotas = quotas_new();
    fairshare_init(&t->fs, FAIRSHARE_HALF_LIFE_DEFAULT);
    run_history_init(&t->runs);
    return t;
}

void jobs_set_hand_over_early(struct jobs *t, bool on)
{
    t->hand_over_early = on;
}

void jobs_set_signal_cb(struct jobs *t, jobs_signal_cb cb, void *arg)
{
    t->signal_cb = cb;
    t->signal_arg = arg;
}

void jobs_observe(struct jobs *t, jobs_event_cb cb, void *arg)
{
    if (t->n_observers == JOBS_MAX_OBSERVERS)
        abort(); /* a programming error: the daemon has a fixed few */
    t->observers[t->n_observers++] = (struct jobs_observer){cb, arg};
}

void jobs_unobserve(struct jobs *t, jobs_event_cb cb, void *arg)
{
    for (size_t i = 0; i < t->n_observers; i++) {
        if (t->observers[i].cb == cb && t->observers[i].arg == arg) {
            memmove(&t->observers[i], &t->observers[i + 1],
                    (t->n_observers - i - 1) * sizeof(t->observers[0]));
            t->n_observers--;
            return;
        }
    }
}

static void raise_event(struct jobs *t, const struct job *j, enum job_event e)
{
    for (size_t i = 0; i < t->n_observers; i++)
        t->observers[i].cb(t->observers[i].arg, j, e);
}

/* The event a move from `from` to j's state is (JOB_EVENT_COUNT: none, e.g. a launch
 * that never happened putting a job back in the queue). */
static enum job_event state_event(enum job_state from, enum job_state to)
{
    switch (to) {
    case JOB_RUNNING:
        return JOB_EVENT_STARTED;
    case JOB_FINISHED:
        return JOB_EVENT_COMPLETED;
    case JOB_FAILED:
        return JOB_EVENT_FAILED;
    case JOB_CANCELLED:
        return JOB_EVENT_CANCELLED;
    case JOB_TIMEOUT:
        return JOB_EVENT_TIMEOUT;
    case JOB_HELD:
        return JOB_EVENT_HELD;
    case JOB_QUEUED:
        return from == JOB_HELD ? JOB_EVENT_RELEASED : JOB_EVENT_COUNT;
    default:
        return JOB_EVENT_COUNT;
    }
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
        j->sched.group = jobs_group(t, gid, true);
        if (j->state == JOB_RUNNING)
            j->sched.group->running++;
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
    if (j->sched.group)
        j->sched.group->running++;
}

static void run_list_remove(struct jobs *t, struct job *j)
{
    for (size_t i = 0; i < t->running; i++)
        if (t->run_list[i] == j) {
            t->run_list[i] = t->run_list[--t->running];
            if (j->sched.group)
                j->sched.group->running--;
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
    if (j->group_id > 0 && !j->sched.group)
        j->sched.group = jobs_group(t, j->group_id, true);
    if (j->state == JOB_RUNNING)
        run_list_add(t, j);
    quotas_job_added(t->quotas, j);
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

void jobs_bulk_begin(struct jobs *t, size_t n)
{
    t->bulk = true;
    if (n >= JOBS_LARGE)
        store_expect_large(t->store);
}

/* Writes the state columns that the bulk change changed: a run of consecutive ids with
 * the same values (a range held, released or cancelled) is one UPDATE, not one per job.
 * A failure loses the transaction, which the daemon undoes (serve.c). */
static void bulk_save(struct jobs *t)
{
    struct job **v = t->bulk_saves;
    size_t n = t->bulk_saves_len;
    for (size_t i = 0, k; i < n; i = k) {
        for (k = i + 1; k < n && v[k]->id == v[k - 1]->id + 1 && store_same_state(v[i], v[k]); k++)
            ;
        if (store_update_state(t->store, v[i], v[k - 1]->id) < 0)
            log_error("jobs %lld-%lld: cannot store: %s", (long long)v[i]->id,
                      (long long)v[k - 1]->id, store_error(t->store));
    }
    t->bulk_saves_len = 0;
}

void jobs_bulk_end(struct jobs *t)
{
    t->bulk = false;
    bulk_save(t);
    if (t->table_stale) {
        size_t out = 0;
        for (size_t i = 0; i < t->table_len; i++)
            if (!job_state_is_terminal(t->table[i]->state))
                t->table[out++] = t->table[i];
        t->table_len = out;
        t->table_stale = false;
    }
    if (t->queue_stale) {
        jobs_queue_rebuild(t);
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

struct quotas *jobs_quotas(const struct jobs *t)
{
    return t->quotas;
}

struct store *jobs_store(const struct jobs *t)
{
    return t->store;
}

int64_t jobs_next_id(const struct jobs *t)
{
    return t->next_id;
}

/* ---- the jobs that wait for a job (its daemon.dependents) ---- */

/* Records in x (an active job) that the job id waits for it. */
static void dependents_add(struct job *x, int64_t id)
{
    struct job_daemon_state *ds = &x->daemon;
    if (ds->n_dependents == ds->cap_dependents) {
        ds->cap_dependents = ds->cap_dependents ? ds->cap_dependents * 2 : 4;
        ds->dependents = xrealloc(ds->dependents, ds->cap_dependents * sizeof(*ds->dependents));
    }
    ds->dependents[ds->n_dependents++] = id;
}

static void dependents_remove(struct job *x, int64_t id)
{
    size_t k = 0;
    for (size_t i = 0; i < x->daemon.n_dependents; i++)
        if (x->daemon.dependents[i] != id)
            x->daemon.dependents[k++] = x->daemon.dependents[i];
    x->daemon.n_dependents = k;
}

/* Frees a job of the table with its bookkeeping (job_free leaves that alone). */
static void table_job_free(struct job *j)
{
    if (j)
        free(j->daemon.dependents);
    job_free(j);
}

/* ---- loading and freeing ---- */

static void load_cb(struct job *j, void *arg)
{
    table_append(arg, j);
}

struct runs_load {
    double secs[TIME_PLAN_HISTORY];
    size_t n;
};

static void runs_load_cb(double secs, void *arg)
{
    struct runs_load *l = arg;
    if (l->n < TIME_PLAN_HISTORY)
        l->secs[l->n++] = secs;
}

/* The run history from the store, oldest first into the ring. */
static int runs_load(struct jobs *t, char **err)
{
    struct runs_load *l = xcalloc(1, sizeof(*l));
    int rc = store_recent_runs(t->store, TIME_PLAN_HISTORY, runs_load_cb, l);
    if (rc < 0)
        *err = xasprintf("cannot load recent run times: %s", store_error(t->store));
    run_history_init(&t->runs);
    for (size_t i = l->n; i > 0; i--)
        run_history_add(&t->runs, l->secs[i - 1]);
    free(l);
    return rc;
}

int jobs_load(struct jobs *t, char **err)
{
    if (quotas_load(t->quotas, t->store, now_wall(), err) < 0)
        return -1;
    if (store_load_groups(t->store, groups_load_cb, t) < 0) {
        *err = xasprintf("cannot load job groups: %s", store_error(t->store));
        return -1;
    }
    if (store_load_active(t->store, load_cb, t) < 0) {
        *err = xasprintf("cannot load jobs: %s", store_error(t->store));
        return -1;
    }
    if (jobs_fairshare_load(t, err) < 0)
        return -1;
    if (runs_load(t, err) < 0)
        return -1;
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
                dependents_add(x, j->id);
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
        with_deps[i]->sched.deps_blocked =
            job_deps_outcome(with_deps[i], &failed) != JOB_DEPS_READY;
    }
    jobs_queue_rebuild(t);
    for (size_t i = 0; i < n; i++)
        if (jobs_get(t, with_deps[i]->id) == with_deps[i])
            jobs_deps_update(t, with_deps[i]);
    free(with_deps);
    return 0;
}

int jobs_reload(struct jobs *t, char **err)
{
    struct jobs *fresh = jobs_new(t->store);
    fresh->hand_over_early = t->hand_over_early;
    fresh->signal_cb = t->signal_cb;
    fresh->signal_arg = t->signal_arg;
    memcpy(fresh->observers, t->observers, sizeof(t->observers));
    fresh->n_observers = t->n_observers;
    quotas_set_config(fresh->quotas, quotas_config(t->quotas));
    char *ignored = NULL; /* the shares were checked when t got them */
    jobs_fairshare_configure(fresh, t->fs.half_life, t->fs.shares_text[FAIRSHARE_USER],
                             t->fs.shares_text[FAIRSHARE_PROJECT], &ignored);
    free(ignored);
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
        table_job_free(t->table[i]);
    free(t->table);
    scheduler_queue_free(&t->queue);
    scheduler_begin_heap_free(&t->begin);
    fairshare_free(&t->fs);
    free(t->run_list);
    free(t->ended);
    for (size_t i = 0; i < t->groups_len; i++)
        free(t->groups[i]);
    free(t->groups);
    free(t->users);
    free(t->cascade);
    free(t->bulk_saves);
    for (size_t i = 0; i < t->actions_len; i++)
        free(t->actions[i].path);
    free(t->actions);
    quotas_free(t->quotas);
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
    job_name_default(j);
    if (store_insert_job(t->store, j, leader) < 0) {
        log_error("cannot store job: %s", store_error(t->store));
        return -1;
    }
    t->next_id++;
    raise_event(t, j, JOB_EVENT_SUBMITTED);
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
    if (j->state == JOB_QUEUED)
        jobs_sched_add(t, j);
    t->dirty = true;
    t->counters.submitted++;
    if (j->n_deps) {
        /* Statuses were set by jobs_check_deps. */
        for (size_t k = 0; k < j->n_deps; k++) {
            struct job *x = jobs_get(t, j->deps[k].id);
            if (x)
                dependents_add(x, j->id);
        }
        jobs_deps_update(t, j);
    }
    return 0;
}

const struct metrics_counters *jobs_counters(const struct jobs *t)
{
    return &t->counters;
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
    if (n >= JOBS_LARGE)
        store_expect_large(t->store);
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

/* Writes j, all of it or (state_only, in a bulk change) its state columns, in the open
 * transaction. The state columns of a bulk change are written by jobs_bulk_end. */
static int jobs_save_cols(struct jobs *t, struct job *j, bool state_only)
{
    if (store_begin(t->store) < 0 || (!state_only && store_update_job(t->store, j) < 0)) {
        log_error("job %lld: cannot store: %s", (long long)j->id, store_error(t->store));
        return -1;
    }
    if (state_only) {
        if (t->bulk_saves_len == t->bulk_saves_cap) {
            t->bulk_saves_cap = t->bulk_saves_cap ? t->bulk_saves_cap * 2 : 256;
            t->bulk_saves = xrealloc(t->bulk_saves, t->bulk_saves_cap * sizeof(*t->bulk_saves));
        }
        t->bulk_saves[t->bulk_saves_len++] = j;
    }
    return 0;
}

int jobs_save(struct jobs *t, struct job *j)
{
    return jobs_save_cols(t, j, false);
}

int jobs_save_updated(struct jobs *t, struct job *j)
{
    if (jobs_save(t, j) < 0)
        return -1;
    raise_event(t, j, JOB_EVENT_UPDATED);
    return 0;
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
        jobs_sched_remove(t, j);
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
    j->cpus_per_gpu = n->cpus_per_gpu;
    j->memory_mb = n->memory_mb;
    j->warn_signal = n->warn_signal;
    j->warn_secs = n->warn_secs;
    j->warn_main_only = n->warn_main_only;
    j->begin_time = n->begin_time;
    j->max_retries = n->max_retries;
    j->umask = n->umask;
    j->auto_cancel = n->auto_cancel;
    j->deps_any = n->deps_any;
    j->requeue = n->requeue;
    j->pty = n->pty;
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
                dependents_add(x, j->id);
        }
        if (j->state == JOB_QUEUED && j->reason == JOB_REASON_DEPENDENCY_FAILED)
            job_set_reason(j, JOB_REASON_NONE, 0, NULL);
    }
    if (queued)
        jobs_sched_add(t, j);
    t->dirty = true;
    if ((deps_changed ? store_replace_deps(t->store, j) : store_update_job(t->store, j)) < 0) {
        log_error("job %lld: cannot store the update: %s", (long long)j->id, store_error(t->store));
        rc = -1;
    } else {
        raise_event(t, j, JOB_EVENT_UPDATED);
    }
    if (deps_changed || j->n_deps)
        jobs_deps_update(t, j); /* also for a changed auto_cancel */
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
    n->shim_pid = n->shim_start = n->max_rss_kb = n->log_lost_bytes = 0;
    job_gpu_use_clear(n);
    free(n->stray);
    n->stray = NULL;
    free(n->failure_class);
    free(n->failure_line);
    n->failure_class = n->failure_line = NULL;
    n->gpu_mask = 0;
    free(n->mig_uuids);
    n->mig_uuids = NULL;
    free(n->cpus);
    n->cpus = NULL;
    n->cpus_far = 0;
    n->backend_id = 0;
    free(n->backend_reason);
    n->backend_reason = NULL;
    n->submit_time = now_wall();
    n->attempt = j->attempt + 1;
    n->retry_of = j->id;
    if (job_name_is_default(n->name, j->id)) { /* gjob-<id>: the new id's (submit_one) */
        free(n->name);
        n->name = NULL;
    }
    n->sched.deps_blocked = false;
    n->daemon.dependents = NULL;
    n->daemon.n_dependents = n->daemon.cap_dependents = 0;
    n->daemon.runtime = NULL;
    n->sched.group = NULL;
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
    for (size_t i = 0; i < j->daemon.n_dependents; i++) {
        struct job *d = jobs_get(t, j->daemon.dependents[i]);
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
        dependents_add(n, d->id);
        if (store_begin(t->store) < 0 || store_replace_deps(t->store, d) < 0)
            log_error("job %lld: cannot store its dependencies: %s", (long long)d->id,
                      store_error(t->store));
        jobs_deps_update(t, d);
    }
    j->daemon.n_dependents = 0; /* they wait on the new attempt now */
    return n;
}

/* The metrics of a change of state (j has its new state and reason). */
static void count_change(struct jobs *t, const struct job *j, enum job_state from)
{
    if (j->state == JOB_RUNNING) {
        t->counters.started++;
        metrics_observe_wait(&t->counters, j->start_time - j->submit_time);
    } else if (job_state_is_terminal(j->state)) {
        t->counters.ended[j->state][j->reason]++;
        if (from == JOB_RUNNING && j->start_time > 0)
            metrics_observe_run(&t->counters,
                                (j->end_time > 0 ? j->end_time : now_wall()) - j->start_time);
    }
}

int jobs_set_state(struct jobs *t, struct job *j, enum job_state to, enum job_reason reason,
                   int64_t reason_job, const char *detail)
{
    if (!job_transition_allowed(j->state, to))
        return -1;
    enum job_state from = j->state;
    int charge_rc = 0;
    if (j->state == JOB_RUNNING)
        run_list_remove(t, j);
    else if (j->state == JOB_QUEUED)
        jobs_sched_remove(t, j);
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
    count_change(t, j, from);
    if (to != JOB_QUEUED)
        j->wait_reason = NULL;
    else
        jobs_sched_add(t, j); /* after the state: a release's begin time may put it aside */
    if (job_state_is_terminal(to)) {
        if (j->end_time <= 0)
            j->end_time = now_wall();
        if (from == JOB_RUNNING)
            charge_rc = jobs_fairshare_charge(t, j);
        /* A cancelled run says when its user gave up, not how long such jobs run. */
        if (from == JOB_RUNNING && to != JOB_CANCELLED && j->start_time > 0)
            run_history_add(&t->runs, j->end_time - j->start_time);
        table_remove(t, j);
        if (t->ended_len == t->ended_cap) {
            t->ended_cap = t->ended_cap ? t->ended_cap * 2 : 64;
            t->ended = xrealloc(t->ended, t->ended_cap * sizeof(*t->ended));
        }
        t->ended[t->ended_len++] = j;
    }
    quotas_job_moved(t->quotas, j, from);
    t->dirty = true;
    /* In a bulk change between PD, H and CA nothing but the state columns changed. */
    int rc = jobs_save_cols(t, j, t->bulk && from != JOB_RUNNING && to != JOB_RUNNING);
    if (rc == 0)
        raise_event(t, j, state_event(from, to));
    rc |= charge_rc;
    if (to == JOB_QUEUED && j->n_deps)
        jobs_deps_update(t, j); /* e.g. released: DependencyFailed shows again */
    if (rc == 0 && jobs_retryable(j))
        retry_job(t, j);
    if (job_state_is_terminal(to))
        jobs_deps_job_ended(t, j);
    return rc;
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
        table_job_free(t->ended[i]);
    t->ended_len = 0;
}
