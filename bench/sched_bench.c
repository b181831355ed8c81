/* sched_bench: the median time of one scheduling pass (src/core/scheduler.c), as the
 * daemon runs it on every loop iteration where something changed:
 *   - 10,000 queued GPU jobs (1, 2, 4 or 8 GPUs, some exclusive with --gpu-memory, some
 *     shared) on 8 GPUs (two NVLink islands of four), all GPUs busy with running jobs;
 *   - the same with the GPUs free (the pass chooses GPUs for the jobs that fit; they are
 *     not moved to R, so every round does the same work);
 *   - 10,000 and 100,000 queued CPU jobs at the running-jobs limit, and 10,000 that all
 *     start;
 *   - 100,000 jobs waiting for their --begin time and 8 CPU jobs that start: with all of
 *     them in the queue (as the daemon had them before the begin-time heap), and with the
 *     waiting ones in a scheduler_begin_heap (as the daemon keeps them: a pass then costs
 *     a look at the heap's top and the 8 jobs);
 *   - with backfill on (depth 1 and 8): 10,000 and 100,000 queued GPU jobs, half of them
 *     with a time limit (1 to 60 min), on the 8 GPUs busy (running jobs with time limits)
 *     and free;
 *   - with fair-share and age weights (scheduler.priority_weight_*): 10,000 and 100,000
 *     queued GPU jobs of 5 users, the queue sorted by effective priority
 *     (fairshare_order, as jobs_schedule does) and then the pass, both timed.
 * Usage: sched_bench [rounds [FILTER]]   (default 101 rounds; FILTER: only the scenarios
 * whose name contains it) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scheduler.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct gpu_info gpus[8];
static enum gpu_link links[64];

static struct gpu_set machine(void)
{
    for (int i = 0; i < 8; i++) {
        memset(&gpus[i], 0, sizeof(gpus[i]));
        gpus[i].index = i;
        gpus[i].memory_total_mib = 81559;
        gpus[i].memory_used_mib = 0;
        gpus[i].memory_free_mib = 81559; /* NVML free: what exclusive jobs check */
        for (int j = 0; j < 8; j++)
            links[i * 8 + j] = i == j           ? GPU_LINK_SELF
                               : i / 4 == j / 4 ? GPU_LINK_NVLINK
                                                : GPU_LINK_SYSTEM;
    }
    return (struct gpu_set){.gpus = gpus, .n_gpus = 8, .link = links};
}

struct scenario {
    const char *name;
    size_t n_queued;
    bool gpu_jobs;
    bool gpus_busy; /* 8 running 1-GPU jobs hold every GPU */
    int64_t max_running;
    size_t begin_blocked; /* the first ones wait for their begin time */
    bool heap;            /* those are in a begin-time heap, not in the queue */
    int backfill_depth;   /* 0: greedy */
};

/* Scenarios named "fair-share..." order the queue by effective priority first, as
 * jobs_schedule does with fair-share or age weights (timed with the pass). */
static bool fairshare_scenario(const struct scenario *sc)
{
    return strncmp(sc->name, "fair-share", 10) == 0;
}

static double run(const struct scenario *sc, int rounds, size_t *started)
{
    size_t n = sc->n_queued;
    struct job *jobs = calloc(n + 8, sizeof(*jobs));
    struct job **queued = malloc(n * sizeof(*queued));
    struct job **start = malloc(n * sizeof(*start));
    struct job *running[8];
    size_t n_running = 0;
    struct gpu_set set = machine();
    srand(1);
    for (size_t i = 0; i < n; i++) {
        struct job *j = &jobs[i];
        job_init(j);
        j->id = (int64_t)i + 1;
        j->priority = i % 7 == 0 ? 20 : JOB_PRIORITY_DEFAULT;
        if (sc->gpu_jobs) {
            static const int sizes[] = {1, 1, 2, 4, 8};
            j->gpus = sizes[rand() % 5];
            if (rand() % 5 == 0) {
                j->shared = true;
                j->gpu_memory_mb = 10000 * (1 + rand() % 4);
            } else if (rand() % 4 == 0) {
                j->gpu_memory_mb = 40000;
            }
        }
        if (sc->backfill_depth && i % 2 == 0)
            j->time_limit = 60 * (1 + rand() % 60);
        if (i < sc->begin_blocked)
            j->begin_time = 100; /* the pass runs at now = 0 */
        static const char *const users[] = {"alice", "bob", "carol", "dave", "erin"};
        j->user = strdup(users[rand() % 5]);
        j->submit_time = -(double)(n - i); /* one a second, the last just now */
        queued[i] = j;
    }
    if (sc->gpus_busy)
        for (int g = 0; g < 8; g++) {
            struct job *j = &jobs[n + (size_t)g];
            job_init(j);
            j->id = (int64_t)(n + (size_t)g) + 1;
            j->state = JOB_RUNNING;
            j->gpus = 1;
            j->gpu_mask = 1ULL << g;
            j->start_time = -600.0 * g; /* the pass runs at now = 0 */
            j->time_limit = 3600;
            j->user = strdup("alice");
            running[n_running++] = j;
        }
    struct scheduler_queue q;
    scheduler_queue_init(&q);
    struct scheduler_begin_heap heap;
    scheduler_begin_heap_init(&heap);
    size_t skip = 0;
    if (sc->heap) {
        for (; skip < sc->begin_blocked; skip++)
            scheduler_begin_heap_push(&heap, queued[skip]);
    }
    scheduler_queue_rebuild(&q, queued + skip, n - skip);
    struct scheduler_policy policy = {.max_running_jobs = sc->max_running,
                                      .backfill = sc->backfill_depth > 0,
                                      .backfill_depth = sc->backfill_depth};
    struct fairshare fs;
    fairshare_init(&fs, FAIRSHARE_HALF_LIFE_DEFAULT);
    fairshare_load(&fs, FAIRSHARE_USER, "alice", 3600 * 20, -3600, 3600 * 20);
    fairshare_load(&fs, FAIRSHARE_USER, "bob", 3600 * 5, -3600, 3600 * 5);
    struct priority_weights weights = {.priority = PRIORITY_WEIGHT_PRIORITY_DEFAULT,
                                       .fairshare = 1000,
                                       .age = 100,
                                       .max_age = PRIORITY_MAX_AGE_DEFAULT};
    struct job **ordered = malloc(n * sizeof(*ordered));
    double *t = malloc((size_t)rounds * sizeof(*t));
    for (int r = 0; r < rounds; r++) {
        struct scheduler_input in = {.queued = q.jobs,
                                     .n_queued = q.len,
                                     .running = running,
                                     .n_running = n_running,
                                     .gpus = sc->gpu_jobs ? &set : NULL};
        double t0 = now_s();
        if (sc->heap) { /* as jobs_schedule: take the jobs whose time has come (none) */
            struct job *due;
            while ((due = scheduler_begin_heap_pop_due(&heap, 0)))
                scheduler_queue_insert(&q, due);
            in.queued = q.jobs;
            in.n_queued = q.len;
        }
        if (fairshare_scenario(sc)) {
            fairshare_order(&fs, &weights, q.jobs, q.len, running, n_running, 0, ordered);
            in.queued = ordered;
        }
        *started = scheduler_pass(&in, &policy, start);
        t[r] = now_s() - t0;
    }
    qsort(t, (size_t)rounds, sizeof(*t), cmp_double);
    double median = t[rounds / 2];
    for (size_t i = 0; i < n + n_running; i++)
        job_clear(&jobs[i]);
    scheduler_queue_free(&q);
    scheduler_begin_heap_free(&heap);
    fairshare_free(&fs);
    free(ordered);
    free(t);
    free(jobs);
    free(queued);
    free(start);
    return median;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 101;
    if (rounds < 1)
        rounds = 1;
    const struct scenario scenarios[] = {
        {"10k queued GPU jobs, 8 GPUs all busy", 10000, true, true, 0, 0, false, 0},
        {"10k queued GPU jobs, 8 GPUs free", 10000, true, false, 0, 0, false, 0},
        {"10k queued CPU jobs, running limit reached", 10000, false, false, 1, 0, false, 0},
        {"100k queued CPU jobs, running limit reached", 100000, false, false, 1, 0, false, 0},
        {"10k queued CPU jobs, no limit (all start)", 10000, false, false, 0, 0, false, 0},
        {"100k --begin waiting + 8 start, all in queue", 100008, false, false, 0, 100000, false, 0},
        {"100k --begin waiting in heap + 8 start", 100008, false, false, 0, 100000, true, 0},
        {"100k queued GPU jobs, 8 GPUs all busy", 100000, true, true, 0, 0, false, 0},
        {"backfill: 10k queued GPU jobs, 8 GPUs all busy", 10000, true, true, 0, 0, false, 1},
        {"backfill: 10k queued GPU jobs, 8 GPUs free", 10000, true, false, 0, 0, false, 1},
        {"backfill: 100k queued GPU jobs, 8 GPUs all busy", 100000, true, true, 0, 0, false, 1},
        {"backfill: 100k queued GPU jobs, 8 GPUs free", 100000, true, false, 0, 0, false, 1},
        {"backfill depth 8: 100k queued GPU jobs, all busy", 100000, true, true, 0, 0, false, 8},
        {"backfill depth 8: 100k queued GPU jobs, free", 100000, true, false, 0, 0, false, 8},
        {"fair-share order: 10k queued GPU jobs, all busy", 10000, true, true, 0, 0, false, 0},
        {"fair-share order: 100k queued GPU jobs, all busy", 100000, true, true, 0, 0, false, 0},
        {"fair-share + backfill: 10k GPU jobs, all busy", 10000, true, true, 0, 0, false, 1},
    };
    const char *filter = argc > 2 ? argv[2] : NULL;
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(*scenarios); i++) {
        if (filter && !strstr(scenarios[i].name, filter))
            continue;
        size_t started = 0;
        double m = run(&scenarios[i], rounds, &started);
        printf("scheduling pass, %-50s median %9.4f ms (%zu start)\n", scenarios[i].name, m * 1e3,
               started);
    }
    return 0;
}
