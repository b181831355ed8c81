/* jobs: the active-job table and job changes, persisted through the store.
 *
 * The table is an array sorted by id: ids only grow, so a new job is appended and a
 * lookup is a binary search. Beside it, the queued jobs are kept in scheduling order (a
 * scheduler_queue, updated whenever a job enters or leaves PD) and the running jobs in an
 * unordered list, so a scheduling pass neither sorts nor scans the whole table. */
#include "jobs.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gflowd.h"
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

static void run_list_add(struct job *j)
{
    if (running == run_cap) {
        run_cap = run_cap ? run_cap * 2 : 64;
        run_list = xrealloc(run_list, run_cap * sizeof(*run_list));
    }
    run_list[running++] = j;
}

static void run_list_remove(struct job *j)
{
    for (size_t i = 0; i < running; i++)
        if (run_list[i] == j) {
            run_list[i] = run_list[--running];
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

static void load_cb(struct job *j, void *arg)
{
    (void)arg;
    table_append(j);
}

int jobs_load(char **err)
{
    if (store_load_active(gd.store, load_cb, NULL) < 0) {
        *err = xasprintf("cannot load jobs: %s", store_error(gd.store));
        return -1;
    }
    next_id = store_next_job_id(gd.store);
    scheduler_queue_rebuild(&queue, table, table_len);
    dirty = true;
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

size_t jobs_running_count(void)
{
    return running;
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
    table_append(j);
    if (j->state == JOB_QUEUED)
        scheduler_queue_insert(&queue, j);
    dirty = true;
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
    return jobs_save(j);
}

void jobs_mark_dirty(void)
{
    dirty = true;
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
        /* 0 would mean "all": an empty allowed set is a bit no GPU has. */
        .allowed_gpus = gpu_allowed() ? gpu_allowed() : 1ULL << 63,
        .random_seed = (uint64_t)(now_wall() * 1e6),
    };
    gpualloc_strategy_parse(gd.cfg.gpu_allocation_strategy, &policy.gpu_strategy);
    struct scheduler_input in = {
        .queued = queue.jobs,
        .n_queued = queue.len,
        .running = run_list,
        .n_running = running,
        .gpus = gpu_current(),
        .unmanaged = gpu_unmanaged(),
        .now = now_wall(),
    };
    size_t n = scheduler_pass(&in, &policy, start);
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
