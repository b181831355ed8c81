/* sim: the event loop of the replay. A pass is skipped when no queued job asks for as
 * few GPUs as are free: it could start nothing then (under any policy that starts jobs
 * only on free GPUs), and skipping it is what keeps 100,000 jobs fast while a long
 * queue waits on a full machine. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "timeplan.h"
#include "util.h"

const char *const replay_policy_names[] = {
    "greedy", "backfill", "backfill-24h", "backfill-outside", "fairshare", "backfill+fairshare",
    NULL};

/* daemon.default_time_plan as the daemon's default has it (replay_daemon_default), or
 * as --time-plan gives it. */
static struct time_plan replay_time_plan = {95, 0};
static bool replay_time_plan_given;

void replay_set_time_plan(const struct time_plan *plan)
{
    replay_time_plan = *plan;
    replay_time_plan_given = true;
}

/* The fair-share policies' usage half-life (--half-life). */
static double replay_half_life = REPLAY_HALF_LIFE_DEFAULT;

void replay_set_half_life(double secs)
{
    replay_half_life = secs;
}

/* The fair-share policies' weights: fair-share outweighs the --priority factor (every
 * job of a trace has the default priority), and a day's wait outweighs fair-share, so
 * that a heavy user's job is not held back for ever (without the age factor fair-share
 * raises the synthetic trace's maximum wait from 22 to 52 days; docs/replay.md). */
static const struct priority_weights replay_fairshare_weights = {
    .priority = PRIORITY_WEIGHT_PRIORITY_DEFAULT,
    .fairshare = 1000,
    .age = 2000,
    .max_age = 86400,
};

/* The daemon's default scheduler settings (config.c's table: scheduler.backfill,
 * backfill_depth, default_time_limit, backfill_untimed, daemon.default_time_plan), so
 * that policy "backfill" is exactly what a daemon with no scheduler keys runs. */
static void replay_daemon_default(struct scheduler_policy *out)
{
    struct gflow_config c;
    config_init(&c);
    out->backfill = c.scheduler_backfill;
    out->backfill_depth = (int)c.scheduler_backfill_depth;
    out->default_time_limit = (double)c.parsed.default_time_limit_secs;
    out->untimed_outside = c.parsed.backfill_untimed == CONFIG_UNTIMED_OUTSIDE;
    out->untimed_plan = REPLAY_UNTIMED_PLAN_HISTORY; /* the sim plans it as the daemon */
    if (!replay_time_plan_given)
        replay_time_plan = c.parsed.default_time_plan;
    config_free(&c);
}

int replay_policy(const char *name, struct scheduler_policy *out)
{
    memset(out, 0, sizeof(*out)); /* no running-jobs limit, every GPU, topology */
    out->priority = (struct priority_weights){.priority = PRIORITY_WEIGHT_PRIORITY_DEFAULT};
    if (strcmp(name, "fairshare") == 0 || strcmp(name, "backfill+fairshare") == 0) {
        /* as greedy or backfill, the queue in effective-priority order: users' decayed
         * GPU time (--half-life, 1 h by default) charged in virtual time by the daemon's
         * code */
        if (strcmp(name, "backfill+fairshare") == 0)
            replay_daemon_default(out);
        out->priority = replay_fairshare_weights;
        return 0;
    }
    if (strcmp(name, "greedy") == 0)
        return 0; /* in order, every job that fits starts (gflow's, and ours with
                   * scheduler.backfill = false) */
    if (strcmp(name, "backfill") == 0) {
        /* the daemon's default: the head blocked job holds a reservation, later jobs start
         * only if they do not delay it; a job without a time limit is planned as
         * daemon.default_time_plan (p95 of the last 1,000 ended jobs, 24 h until 20
         * have ended) */
        replay_daemon_default(out);
        return 0;
    }
    if (strcmp(name, "backfill-24h") == 0 || strcmp(name, "backfill-outside") == 0) {
        /* the pass before default_time_plan: an untimed job planned as 24 h
         * (default_time_plan = "24h"), backfilled as such ("planned") or kept off
         * reserved GPUs ("outside", backfill_untimed = "outside") */
        out->backfill = true;
        out->backfill_depth = 1;
        out->default_time_limit = SCHEDULER_DEFAULT_TIME_LIMIT;
        out->untimed_plan = SCHEDULER_DEFAULT_TIME_LIMIT;
        out->untimed_outside = strcmp(name, "backfill-outside") == 0;
        return 0;
    }
    return -1;
}

/* The simulated machine: n GPUs of 80 GB, nothing used, no topology (all alike). */
static struct gpu_set sim_gpus(int n)
{
    struct gpu_info *g = xcalloc((size_t)n, sizeof(*g));
    for (int i = 0; i < n; i++) {
        g[i].index = i;
        snprintf(g[i].name, sizeof(g[i].name), "replay GPU %d", i);
        g[i].memory_total_mib = 81559;
        g[i].memory_free_mib = -1;
        g[i].utilization_gpu = g[i].temperature_c = g[i].power_w = g[i].numa_node = -1;
        g[i].minor = i;
    }
    return (struct gpu_set){.gpus = g, .n_gpus = (size_t)n, .simulated = true};
}

struct sim {
    struct job *jobs;
    double *end; /* virtual time each started job ends */
    struct job **running;
    size_t n_running;
    size_t *running_pos; /* per job: its position in running */
    size_t *heap;        /* running jobs by end time (indices into jobs) */
    size_t heap_len;
    struct scheduler_queue queue;
    struct fairshare fs;     /* charged as jobs end, with a fair-share policy */
    struct run_history runs; /* the run times of ended jobs (daemon.default_time_plan) */
    size_t queued_by_gpus[GPUINFO_MAX_GPUS + 1];
    int free_gpus;
};

static bool ends_before(const struct sim *s, size_t a, size_t b)
{
    return s->end[a] != s->end[b] ? s->end[a] < s->end[b] : a < b;
}

static void heap_push(struct sim *s, size_t job)
{
    size_t i = s->heap_len++;
    while (i > 0 && ends_before(s, job, s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = job;
}

static size_t heap_pop(struct sim *s)
{
    size_t top = s->heap[0], last = s->heap[--s->heap_len], i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap_len)
            break;
        if (c + 1 < s->heap_len && ends_before(s, s->heap[c + 1], s->heap[c]))
            c++;
        if (!ends_before(s, s->heap[c], last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_len)
        s->heap[i] = last;
    return top;
}

/* Whether some queued job asks for no more GPUs than are free. */
static bool sim_may_start(const struct sim *s)
{
    for (int k = 0; k <= s->free_gpus && k <= GPUINFO_MAX_GPUS; k++)
        if (s->queued_by_gpus[k])
            return true;
    return false;
}

static void sim_finish(struct sim *s, size_t idx, double now)
{
    struct job *j = &s->jobs[idx];
    j->state = JOB_FINISHED;
    j->end_time = now;
    fairshare_charge_job(&s->fs, j, NULL);
    run_history_add(&s->runs, now - j->start_time);
    s->free_gpus += __builtin_popcountll(j->gpu_mask);
    size_t pos = s->running_pos[idx];
    struct job *last = s->running[--s->n_running];
    s->running[pos] = last;
    s->running_pos[last - s->jobs] = pos;
}

static void sim_start(struct sim *s, const struct replay_trace *t, struct job *j, double now,
                      struct replay_job_result *res)
{
    size_t idx = (size_t)(j - s->jobs);
    const struct replay_rec *r = &t->recs[idx];
    j->state = JOB_RUNNING;
    j->start_time = now;
    s->free_gpus -= __builtin_popcountll(j->gpu_mask);
    s->queued_by_gpus[j->gpus]--;
    res->started = true;
    res->wait = now - j->submit_time;
    res->run = r->time_limit > 0 && r->time_limit < r->runtime ? r->time_limit : r->runtime;
    s->end[idx] = now + res->run;
    s->running_pos[idx] = s->n_running;
    s->running[s->n_running++] = j;
    heap_push(s, idx);
}

/* The jobs of the trace as the daemon would hold them once submitted. */
static void sim_make_jobs(struct sim *s, const struct replay_trace *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct replay_rec *r = &t->recs[i];
        struct job *j = &s->jobs[i];
        job_init(j);
        j->id = (int64_t)i + 1;
        j->gpus = r->gpus;
        j->time_limit = (int64_t)ceil(r->time_limit);
        j->submit_time = REPLAY_EPOCH + r->submit;
        j->user = r->user >= 0 ? t->names[r->user] : NULL;          /* borrowed */
        j->project = r->project >= 0 ? t->names[r->project] : NULL; /* borrowed */
    }
}

static int queue_order_cmp(const void *a, const void *b)
{
    return scheduler_order(*(struct job *const *)a, *(struct job *const *)b);
}

void replay_simulate(const struct replay_trace *t, int n_gpus,
                     const struct scheduler_policy *policy, struct replay_outcome *out)
{
    size_t n = t->n;
    memset(out, 0, sizeof(*out));
    out->n = n;
    out->n_gpus = n_gpus;
    out->jobs = xcalloc(n ? n : 1, sizeof(*out->jobs));
    struct gpu_set gpus = sim_gpus(n_gpus);
    struct sim s = {.free_gpus = n_gpus};
    s.jobs = xcalloc(n ? n : 1, sizeof(*s.jobs));
    s.end = xcalloc(n ? n : 1, sizeof(*s.end));
    s.running = xcalloc((size_t)n_gpus + n + 1, sizeof(*s.running));
    s.running_pos = xcalloc(n ? n : 1, sizeof(*s.running_pos));
    s.heap = xcalloc(n ? n : 1, sizeof(*s.heap));
    struct job **start = xcalloc(n ? n : 1, sizeof(*start));
    bool reorder = priority_weights_reorder(&policy->priority);
    struct job **ordered = reorder ? xcalloc(n ? n : 1, sizeof(*ordered)) : NULL;
    fairshare_init(&s.fs, replay_half_life);
    run_history_init(&s.runs);
    struct scheduler_policy pol = *policy;
    scheduler_queue_init(&s.queue);
    sim_make_jobs(&s, t);

    size_t next = 0; /* the next submission */
    while (next < n || s.heap_len) {
        double now = INFINITY;
        if (next < n)
            now = s.jobs[next].submit_time;
        if (s.heap_len && s.end[s.heap[0]] < now)
            now = s.end[s.heap[0]];
        while (s.heap_len && s.end[s.heap[0]] <= now)
            sim_finish(&s, heap_pop(&s), now);
        for (; next < n && s.jobs[next].submit_time <= now; next++) {
            struct job *j = &s.jobs[next];
            if (j->gpus > n_gpus) {
                out->jobs[next].skipped = true;
                out->skipped++;
                continue;
            }
            scheduler_queue_insert(&s.queue, j);
            s.queued_by_gpus[j->gpus]++;
        }
        if (!sim_may_start(&s))
            continue;
        if (reorder) /* the daemon's order: effective priority at this pass */
            fairshare_order(&s.fs, &policy->priority, s.queue.jobs, s.queue.len, s.running,
                            s.n_running, now, ordered);
        struct scheduler_input in = {.queued = reorder ? ordered : s.queue.jobs,
                                     .n_queued = s.queue.len,
                                     .running = s.running,
                                     .n_running = s.n_running,
                                     .gpus = &gpus,
                                     .now = now};
        if (policy->untimed_plan == REPLAY_UNTIMED_PLAN_HISTORY) /* as jobs_schedule */
            pol.untimed_plan =
                time_plan_value(&replay_time_plan, &s.runs,
                                policy->default_time_limit > 0 ? policy->default_time_limit
                                                               : SCHEDULER_DEFAULT_TIME_LIMIT);
        size_t n_start = scheduler_pass(&in, &pol, start);
        out->passes++;
        for (size_t k = 0; k < n_start; k++)
            sim_start(&s, t, start[k], now, &out->jobs[start[k] - s.jobs]);
        if (reorder) /* remove_many wants the queue's order */
            qsort(start, n_start, sizeof(*start), queue_order_cmp);
        scheduler_queue_remove_many(&s.queue, start, n_start);
    }
    out->unstarted = s.queue.len;

    scheduler_queue_free(&s.queue);
    fairshare_free(&s.fs);
    free(ordered);
    free(start);
    free(s.heap);
    free(s.running_pos);
    free(s.running);
    free(s.end);
    free(s.jobs);
    gpu_set_free(&gpus);
}

void replay_outcome_free(struct replay_outcome *out)
{
    free(out->jobs);
    memset(out, 0, sizeof(*out));
}
