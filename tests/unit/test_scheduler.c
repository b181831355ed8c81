/* test_scheduler: the scheduling pass of src/core/scheduler.c: start order (priority,
 * then submission), the running-jobs limit, held jobs, the incremental queue, GPU
 * allocation (exclusive and shared, memory, allowed and unmanaged GPUs, topology), every
 * wait reason, feasibility at submit, 100k jobs, the begin-time heap, and backfill
 * (reservations, expected start, depth, a big job never overtaken forever). */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scheduler.h"

#define MAXJ 16

/* A set of jobs described by one letter per job (Q queued, H held, R running) and
 * their priorities; ids are 1, 2, ... in order. */
struct fixture {
    double next_pass; /* out: scheduler_input.next_pass of the last pass */
    struct job jobs[MAXJ];
    struct job *ptrs[MAXJ]; /* every job, in any order */
    struct job *start[MAXJ];
    size_t n;
    /* GPU side, optional */
    const struct gpu_set *gpus;
    uint64_t unmanaged;
    int64_t memory_total_mb;
    const int64_t *outside_mib;
    struct scheduler_policy policy;
    uint64_t mig_unmanaged;
    double now;                /* the pass's time; 0: 1000 */
    uint64_t closed, no_share; /* drained / Prohibited GPUs; EXCLUSIVE_PROCESS ones */
};

static void fixture_make(struct fixture *f, const char *states, const int *prio)
{
    for (size_t i = 0; i < MAXJ; i++) {
        free(f->jobs[i].deps);
        free(f->jobs[i].mig_profile);
        free(f->jobs[i].mig_uuids);
    }
    memset(f, 0, sizeof(*f));
    for (const char *c = states; *c; c++, f->n++) {
        struct job *j = &f->jobs[f->n];
        job_init(j);
        j->id = (int64_t)f->n + 1;
        j->state = *c == 'H' ? JOB_HELD : *c == 'R' ? JOB_RUNNING : JOB_QUEUED;
        j->priority = prio ? prio[f->n] : JOB_PRIORITY_DEFAULT;
        j->wait_reason = "stale";
        f->ptrs[f->n] = j;
    }
}

/* Runs a pass the way the daemon does: queued jobs in a scheduler_queue (inserted in
 * the order of ptrs), running jobs in a list. */
static size_t fixture_pass(struct fixture *f)
{
    struct scheduler_queue q;
    struct job *running[MAXJ];
    size_t n_running = 0;
    scheduler_queue_init(&q);
    for (size_t i = 0; i < f->n; i++) {
        if (f->ptrs[i]->state == JOB_QUEUED)
            scheduler_queue_insert(&q, f->ptrs[i]);
        else if (f->ptrs[i]->state == JOB_RUNNING)
            running[n_running++] = f->ptrs[i];
    }
    struct scheduler_input in = {.queued = q.jobs,
                                 .n_queued = q.len,
                                 .running = running,
                                 .n_running = n_running,
                                 .gpus = f->gpus,
                                 .unmanaged = f->unmanaged,
                                 .memory_total_mb = f->memory_total_mb,
                                 .now = f->now ? f->now : 1000.0,
                                 .outside_mib = f->outside_mib,
                                 .mig_unmanaged = f->mig_unmanaged,
                                 .next_pass = &f->next_pass,
                                 .closed = f->closed,
                                 .no_share = f->no_share};
    size_t n = scheduler_pass(&in, &f->policy, f->start);
    scheduler_queue_free(&q);
    return n;
}

static size_t fixture_run(struct fixture *f, int64_t max_running)
{
    f->policy.max_running_jobs = max_running;
    return fixture_pass(f);
}

/* Moves the started jobs to R, as the daemon does. */
static void fixture_commit(struct fixture *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        f->start[i]->state = JOB_RUNNING;
}

static struct job *job_by_id(struct fixture *f, int64_t id)
{
    return &f->jobs[id - 1];
}

static void test_priority_order(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    fixture_make(&f, "QQQQ", (int[]){1, 50, 10, 255});
    assert_int_equal(fixture_run(&f, 0), 4);
    assert_int_equal(f.start[0]->id, 4);
    assert_int_equal(f.start[1]->id, 2);
    assert_int_equal(f.start[2]->id, 3);
    assert_int_equal(f.start[3]->id, 1);
    for (int i = 0; i < 4; i++)
        assert_null(f.start[i]->wait_reason);
}

static void test_fifo_among_equals(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    fixture_make(&f, "QQQQQ", (int[]){5, 5, 9, 5, 5});
    /* Submission order must win over array position: shuffle the input. */
    struct job *t = f.ptrs[0];
    f.ptrs[0] = f.ptrs[4];
    f.ptrs[4] = t;
    t = f.ptrs[1];
    f.ptrs[1] = f.ptrs[3];
    f.ptrs[3] = t;
    assert_int_equal(fixture_run(&f, 0), 5);
    int64_t want[] = {3, 1, 2, 4, 5};
    for (int i = 0; i < 5; i++)
        assert_int_equal(f.start[i]->id, want[i]);
}

static void test_max_running_counts_running(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    /* Two already running, limit 3: only the best queued job starts. */
    fixture_make(&f, "RQQRQ", (int[]){0, 10, 20, 0, 10});
    assert_int_equal(fixture_run(&f, 3), 1);
    assert_int_equal(f.start[0]->id, 3);
    assert_null(job_by_id(&f, 3)->wait_reason);
    assert_string_equal(job_by_id(&f, 2)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
    assert_string_equal(job_by_id(&f, 5)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
    /* Running jobs are left alone. */
    assert_int_equal(job_by_id(&f, 1)->state, JOB_RUNNING);
    assert_string_equal(job_by_id(&f, 1)->wait_reason, "stale");

    /* Already at the limit: nothing starts. */
    fixture_make(&f, "RRQ", NULL);
    assert_int_equal(fixture_run(&f, 2), 0);
    assert_string_equal(job_by_id(&f, 3)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);

    /* Over the limit (lowered at run time): nothing starts either. */
    fixture_make(&f, "RRRQ", NULL);
    assert_int_equal(fixture_run(&f, 1), 0);

    /* Limit counts the jobs started in this pass. */
    fixture_make(&f, "QQQQ", NULL);
    assert_int_equal(fixture_run(&f, 2), 2);
    assert_int_equal(f.start[0]->id, 1);
    assert_int_equal(f.start[1]->id, 2);
    assert_string_equal(job_by_id(&f, 3)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
    assert_string_equal(job_by_id(&f, 4)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
}

static void test_held_never_started(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    fixture_make(&f, "HQHH", (int[]){255, 0, 255, 100});
    assert_int_equal(fixture_run(&f, 0), 1);
    assert_int_equal(f.start[0]->id, 2);
    for (int64_t id = 1; id <= 4; id++)
        if (id != 2)
            assert_string_equal(job_by_id(&f, id)->wait_reason, "stale");

    fixture_make(&f, "HH", NULL);
    assert_int_equal(fixture_run(&f, 0), 0);
    /* Held jobs do not count against the running limit either. */
    fixture_make(&f, "HHQ", NULL);
    assert_int_equal(fixture_run(&f, 1), 1);
}

static void test_empty_and_no_limit(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    fixture_make(&f, "", NULL);
    assert_int_equal(fixture_run(&f, 0), 0);
    fixture_make(&f, "RRRRRRRRQ", NULL);
    assert_int_equal(fixture_run(&f, 0), 1);
    assert_null(job_by_id(&f, 9)->wait_reason);
}

static void test_100k_jobs(void **state)
{
    (void)state;
    enum { N = 100000, LIMIT = 1000 };
    struct job *jobs = calloc(N, sizeof(*jobs));
    struct job **ptrs = calloc(N, sizeof(*ptrs));
    struct job **start = calloc(N, sizeof(*start));
    assert_non_null(jobs);
    assert_non_null(ptrs);
    assert_non_null(start);
    srand(1);
    for (int i = 0; i < N; i++) {
        job_init(&jobs[i]);
        jobs[i].id = i + 1;
        jobs[i].priority = rand() % 256;
        jobs[i].state = i % 10 == 0 ? JOB_HELD : i % 10 == 1 && i < 2000 ? JOB_RUNNING : JOB_QUEUED;
        ptrs[N - 1 - i] = &jobs[i];
    }
    struct job **running = calloc(N, sizeof(*running));
    assert_non_null(running);
    size_t n_running = 0;
    for (int i = 0; i < N; i++)
        if (ptrs[i]->state == JOB_RUNNING)
            running[n_running++] = ptrs[i];
    struct scheduler_queue q;
    scheduler_queue_init(&q);
    clock_t t0 = clock();
    scheduler_queue_rebuild(&q, ptrs, N);
    struct scheduler_policy policy = {.max_running_jobs = LIMIT + 200};
    struct scheduler_input in = {
        .queued = q.jobs, .n_queued = q.len, .running = running, .n_running = n_running};
    size_t n = scheduler_pass(&in, &policy, start);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_int_equal(n, LIMIT); /* 200 running */
    for (size_t i = 1; i < n; i++) {
        const struct job *a = start[i - 1], *b = start[i];
        assert_true(a->priority > b->priority || (a->priority == b->priority && a->id < b->id));
    }
    size_t waiting = 0;
    for (int i = 0; i < N; i++)
        waiting += jobs[i].wait_reason != NULL;
    assert_int_equal(waiting, N - N / 10 - 200 - LIMIT);
    /* Generous bound so sanitizer builds pass; a plain build takes a few ms. */
    assert_true(secs < 1.0);
    scheduler_queue_free(&q);
    free(running);
    free(jobs);
    free(ptrs);
    free(start);
}

/* ---- GPUs ---- */

static struct gpu_info gpu_arr[8];
static enum gpu_link gpu_links[64];

/* n GPUs of total_mib each, nothing used; with islands, NVLink inside 0-3 and 4-7 and
 * SYS between them (n = 8). */
static struct gpu_set gpus_make(size_t n, int64_t total_mib, bool islands)
{
    memset(gpu_arr, 0, sizeof(gpu_arr));
    for (size_t i = 0; i < n; i++) {
        gpu_arr[i].index = (int)i;
        gpu_arr[i].memory_total_mib = total_mib;
        gpu_arr[i].memory_free_mib = -1; /* the tests below set used memory, or free */
        for (size_t k = 0; k < n; k++)
            gpu_links[i * n + k] = i == k           ? GPU_LINK_SELF
                                   : i / 4 == k / 4 ? GPU_LINK_NVLINK
                                                    : GPU_LINK_SYSTEM;
    }
    return (struct gpu_set){.gpus = gpu_arr, .n_gpus = n, .link = islands ? gpu_links : NULL};
}

static void job_gpus(struct fixture *f, int64_t id, int gpus, const char *ids)
{
    struct job *j = job_by_id(f, id);
    j->gpus = gpus;
    j->gpu_mask = gpu_mask_parse(ids);
}

static void job_mem(struct fixture *f, int64_t id, int64_t mib, bool shared)
{
    job_by_id(f, id)->gpu_memory_mb = mib;
    job_by_id(f, id)->shared = shared;
}

#define assert_reason(f, id, r) assert_string_equal(job_by_id(f, id)->wait_reason, r)
/* A job's GPUs as text ("0,2"), in a static buffer. */
static const char *gpu_ids(struct fixture *f, int64_t id)
{
    static char buf[256];
    char *s = gpu_mask_format(job_by_id(f, id)->gpu_mask);
    snprintf(buf, sizeof(buf), "%s", s);
    free(s);
    return buf;
}
#define assert_gpu_ids(f, id, s) assert_string_equal(gpu_ids(f, id), s)

static void test_gpu_exclusive_and_priority(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(4, 81559, false);
    fixture_make(&f, "QQQQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 1, NULL);
    job_gpus(&f, 2, 2, NULL);
    job_gpus(&f, 3, 4, NULL); /* fits on the idle machine, but 1 and 2 took GPUs */
    /* 4 is a CPU job: unaffected by GPUs */
    size_t n = fixture_pass(&f);
    assert_int_equal(n, 3);
    assert_int_equal(f.start[0]->id, 1);
    assert_int_equal(f.start[1]->id, 2);
    assert_int_equal(f.start[2]->id, 4);
    assert_gpu_ids(&f, 1, "0");
    assert_gpu_ids(&f, 2, "1,2");
    assert_int_equal(job_by_id(&f, 4)->gpu_mask, 0);
    assert_null(job_by_id(&f, 1)->wait_reason);
    assert_reason(&f, 3, SCHEDULER_REASON_PRIORITY);
    /* Next pass, with those running: now it is plainly Resources. */
    fixture_commit(&f, n);
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 3, SCHEDULER_REASON_RESOURCES);

    /* Running jobs' gpu_ids hold their GPUs; a freed GPU is usable at once. */
    fixture_make(&f, "RQQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 2, "0,2");
    job_gpus(&f, 2, 2, NULL);
    job_gpus(&f, 3, 1, NULL);
    assert_int_equal(fixture_pass(&f), 1);
    assert_gpu_ids(&f, 2, "1,3");
    assert_reason(&f, 3, SCHEDULER_REASON_PRIORITY);

    /* Greedy: a small job behind a waiting big one starts. */
    fixture_make(&f, "RQQ", (int[]){0, 50, 10});
    f.gpus = &g;
    job_gpus(&f, 1, 2, "1,2");
    job_gpus(&f, 2, 4, NULL);
    job_gpus(&f, 3, 2, NULL);
    assert_int_equal(fixture_pass(&f), 1);
    assert_int_equal(f.start[0]->id, 3);
    assert_gpu_ids(&f, 3, "0,3");
    assert_reason(&f, 2, SCHEDULER_REASON_RESOURCES);
    /* More GPUs than the machine has, or a lost GPU: Resources. */
    fixture_make(&f, "QQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 5, NULL);
    job_gpus(&f, 2, 4, NULL);
    gpu_arr[3].lost = true;
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 1, SCHEDULER_REASON_RESOURCES);
    /* It fits the machine, but not without the GPU whose state is unknown. */
    assert_reason(&f, 2, SCHEDULER_REASON_GPUS_UNAVAILABLE);
    fixture_make(&f, "", NULL); /* a fresh queue */
}

static void test_gpu_shared_packing(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(2, 80000, false);
    /* GPU 0: two shared jobs (50000 + 20000 declared); GPU 1: an exclusive job. */
    fixture_make(&f, "RRRQQQQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 1, "0");
    job_mem(&f, 1, 50000, true);
    job_gpus(&f, 2, 1, "0");
    job_mem(&f, 2, 20000, true);
    job_gpus(&f, 3, 1, "1");
    job_gpus(&f, 4, 1, NULL); /* shared, 20000: does not fit beside 70000 */
    job_mem(&f, 4, 20000, true);
    job_gpus(&f, 5, 1, NULL); /* shared, 10000: fits exactly */
    job_mem(&f, 5, 10000, true);
    job_gpus(&f, 6, 1, NULL); /* exclusive: GPU 0 has shared jobs, GPU 1 is held */
    job_gpus(&f, 7, 1, NULL); /* shared, 1 MiB: the packing is now full */
    job_mem(&f, 7, 1, true);
    assert_int_equal(fixture_pass(&f), 1);
    assert_int_equal(f.start[0]->id, 5);
    assert_gpu_ids(&f, 5, "0");
    assert_reason(&f, 4, SCHEDULER_REASON_GPU_MEMORY);
    assert_reason(&f, 6, SCHEDULER_REASON_RESOURCES);
    assert_reason(&f, 7, SCHEDULER_REASON_PRIORITY); /* job 5 took the room this pass */
    fixture_commit(&f, 1);
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 7, SCHEDULER_REASON_GPU_MEMORY);

    /* Shared jobs never go on a GPU held by an exclusive job, and pack together. */
    fixture_make(&f, "RQQQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 1, "0");
    for (int64_t id = 2; id <= 4; id++) {
        job_gpus(&f, id, 1, NULL);
        job_mem(&f, id, 30000, true);
    }
    assert_int_equal(fixture_pass(&f), 2);
    assert_gpu_ids(&f, 2, "1");
    assert_gpu_ids(&f, 3, "1");
    assert_reason(&f, 4, SCHEDULER_REASON_PRIORITY);
    /* Declared memory counts, not used memory: a shared job ignores memory_used. */
    fixture_make(&f, "Q", NULL);
    f.gpus = &g;
    gpu_arr[0].memory_used_mib = 79000;
    job_gpus(&f, 1, 1, NULL);
    job_mem(&f, 1, 30000, true);
    assert_int_equal(fixture_pass(&f), 1);
    assert_gpu_ids(&f, 1, "0");
    fixture_make(&f, "", NULL); /* a fresh queue */
}

static void test_gpu_memory_used(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(2, 81559, false);
    gpu_arr[0].memory_used_mib = 70000; /* 11559 free */
    fixture_make(&f, "QQQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 2, NULL);
    job_mem(&f, 1, 20000, false);
    job_gpus(&f, 2, 1, NULL);
    job_mem(&f, 2, 11559, false); /* exactly what is free on GPU 0 ... */
    job_gpus(&f, 3, 1, NULL);
    job_mem(&f, 3, 20000, false); /* ... but not this */
    assert_int_equal(fixture_pass(&f), 2);
    assert_reason(&f, 1, SCHEDULER_REASON_GPU_MEMORY);
    assert_gpu_ids(&f, 2, "0");
    assert_gpu_ids(&f, 3, "1");

    fixture_make(&f, "Q", NULL);
    f.gpus = &g;
    gpu_arr[1].memory_used_mib = 70000;
    job_gpus(&f, 1, 1, NULL);
    job_mem(&f, 1, 20000, false);
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 1, SCHEDULER_REASON_GPU_MEMORY);
    /* Unknown used memory: only the total is known. */
    gpu_arr[1].memory_used_mib = -1;
    assert_int_equal(fixture_pass(&f), 1);
    assert_gpu_ids(&f, 1, "1");
    fixture_make(&f, "", NULL); /* a fresh queue */
}

static void test_gpu_allowed_mask(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(4, 81559, false);
    fixture_make(&f, "RQQQ", NULL);
    f.gpus = &g;
    f.policy.allowed_gpus = 0x3 << 1; /* GPUs 1 and 2 */
    job_gpus(&f, 1, 1, "1");
    job_gpus(&f, 2, 2, NULL); /* 0 and 3 are free but not allowed */
    job_gpus(&f, 3, 1, NULL);
    job_gpus(&f, 4, 3, NULL); /* 3 GPUs free of jobs only without 1's: Resources */
    assert_int_equal(fixture_pass(&f), 1);
    assert_reason(&f, 2, SCHEDULER_REASON_GPUS_RESTRICTED);
    assert_gpu_ids(&f, 3, "2");
    assert_reason(&f, 4, SCHEDULER_REASON_RESOURCES);
    /* All allowed (0): job 2 fits. */
    fixture_make(&f, "RQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 1, "1");
    job_gpus(&f, 2, 2, NULL);
    assert_int_equal(fixture_pass(&f), 1);
    assert_gpu_ids(&f, 2, "0,2");
    fixture_make(&f, "", NULL); /* a fresh queue */
}

static void test_gpu_unmanaged_mask(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(2, 81559, false);
    fixture_make(&f, "QQ", NULL);
    f.gpus = &g;
    f.unmanaged = 1ULL << 1;
    job_gpus(&f, 1, 2, NULL);
    job_gpus(&f, 2, 1, NULL);
    assert_int_equal(fixture_pass(&f), 1);
    assert_reason(&f, 1, SCHEDULER_REASON_UNMANAGED);
    assert_gpu_ids(&f, 2, "0");

    /* The outside process also uses the memory: still Unmanaged, not GpuMemory. */
    fixture_make(&f, "RQ", NULL);
    f.gpus = &g;
    f.unmanaged = 1ULL << 1;
    gpu_arr[1].memory_used_mib = 80000;
    job_gpus(&f, 1, 1, "0");
    job_gpus(&f, 2, 1, NULL);
    job_mem(&f, 2, 20000, false);
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 2, SCHEDULER_REASON_UNMANAGED);
    /* Gone: the job starts (the next poll shows the memory free). */
    f.unmanaged = 0;
    gpu_arr[1].memory_used_mib = 0;
    assert_int_equal(fixture_pass(&f), 1);
    assert_gpu_ids(&f, 2, "1");
    /* Unmanaged and restricted both: relaxing the outside processes is reported. */
    fixture_make(&f, "Q", NULL);
    f.gpus = &g;
    f.unmanaged = 1ULL << 0;
    f.policy.allowed_gpus = 1ULL << 0;
    job_gpus(&f, 1, 1, NULL);
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 1, SCHEDULER_REASON_UNMANAGED);
    fixture_make(&f, "", NULL); /* a fresh queue */
}

/* A closed GPU (drained, compute mode Prohibited) takes no new job: as an unavailable
 * one; its running job runs on. A no-share GPU (EXCLUSIVE_PROCESS) takes no shared job. */
static void test_gpu_closed_and_no_share(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(2, 81559, false);
    fixture_make(&f, "RQQ", NULL);
    f.gpus = &g;
    f.closed = 1ULL << 0;
    job_gpus(&f, 1, 1, "0"); /* runs on the drained GPU */
    job_gpus(&f, 2, 2, NULL);
    job_gpus(&f, 3, 1, NULL);
    assert_int_equal(fixture_pass(&f), 1);
    assert_gpu_ids(&f, 3, "1");
    assert_reason(&f, 2, SCHEDULER_REASON_GPUS_UNAVAILABLE);

    fixture_make(&f, "QQQ", NULL);
    f.gpus = &g;
    f.no_share = 1ULL << 0;
    for (int64_t id = 1; id <= 2; id++) {
        job_gpus(&f, id, 1, NULL);
        job_mem(&f, id, 1000, true);
    }
    job_gpus(&f, 3, 1, NULL);
    assert_int_equal(fixture_pass(&f), 3);
    assert_gpu_ids(&f, 1, "1"); /* both shared jobs share GPU 1 */
    assert_gpu_ids(&f, 2, "1");
    assert_gpu_ids(&f, 3, "0"); /* an exclusive job may have the exclusive-mode GPU */
    fixture_make(&f, "", NULL);
}

static void test_gpu_max_running_and_cpu_jobs(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(4, 81559, false);
    fixture_make(&f, "QQQQ", NULL);
    f.gpus = &g;
    f.policy.max_running_jobs = 2;
    job_gpus(&f, 1, 8, NULL); /* never fits here: does not take a slot */
    job_gpus(&f, 2, 1, NULL);
    assert_int_equal(fixture_pass(&f), 2);
    assert_int_equal(f.start[0]->id, 2);
    assert_int_equal(f.start[1]->id, 3);
    assert_reason(&f, 1, SCHEDULER_REASON_RESOURCES);
    assert_reason(&f, 4, SCHEDULER_REASON_MAX_RUNNING);

    /* No GPU state at all (no NVML): CPU jobs run as before, GPU jobs wait. */
    fixture_make(&f, "QQQ", (int[]){10, 20, 10});
    job_gpus(&f, 2, 1, NULL);
    assert_int_equal(fixture_pass(&f), 2);
    assert_int_equal(f.start[0]->id, 1);
    assert_int_equal(f.start[1]->id, 3);
    assert_reason(&f, 2, SCHEDULER_REASON_RESOURCES);
    fixture_make(&f, "", NULL); /* a fresh queue */
}

static void test_gpu_topology_and_strategies(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(8, 81559, true);
    /* GPUs 0 and 1 busy in island A: a 4-GPU job gets island B, then a 2-GPU job gets
     * the NVLink pair left in A. */
    fixture_make(&f, "RRQQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 1, "0");
    job_gpus(&f, 2, 1, "1");
    job_gpus(&f, 3, 4, NULL);
    job_gpus(&f, 4, 2, NULL);
    assert_int_equal(fixture_pass(&f), 2);
    assert_gpu_ids(&f, 3, "4,5,6,7");
    assert_gpu_ids(&f, 4, "2,3");
    /* 0,1,2 busy: a 2-GPU job takes an NVLink pair (4,5), not 3,4. */
    fixture_make(&f, "RQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 3, "0,1,2");
    job_gpus(&f, 2, 2, NULL);
    assert_int_equal(fixture_pass(&f), 1);
    assert_gpu_ids(&f, 2, "4,5");
    /* Sequential: the lowest indices. */
    f.policy.gpu_strategy = GPUALLOC_SEQUENTIAL;
    job_by_id(&f, 2)->state = JOB_QUEUED;
    assert_int_equal(fixture_pass(&f), 1);
    assert_gpu_ids(&f, 2, "3,4");
    /* Random: seeded, free GPUs only, ascending in gpu_ids. */
    f.policy.gpu_strategy = GPUALLOC_RANDOM;
    bool seen[8] = {false};
    for (uint64_t seed = 0; seed < 64; seed++) {
        f.policy.random_seed = seed;
        assert_int_equal(fixture_pass(&f), 1);
        char first[256];
        snprintf(first, sizeof(first), "%s", gpu_ids(&f, 2));
        assert_int_equal(fixture_pass(&f), 1);
        assert_gpu_ids(&f, 2, first);
        int a, b;
        assert_int_equal(sscanf(first, "%d,%d", &a, &b), 2);
        assert_true(a >= 3 && a < b && b <= 7);
        seen[a] = seen[b] = true;
    }
    for (int i = 3; i < 8; i++)
        assert_true(seen[i]);
    fixture_make(&f, "", NULL); /* a fresh queue */
}

/* A machine like the e2e fixture: GPU 0 in MIG mode with 2x 1g.18gb and 1x 3g.71gb,
 * GPU 1 in MIG mode without instances, GPU 2 a plain GPU. */
static struct gpu_info mig_gpus[3];
static struct gpu_mig mig_list[3];
static struct gpu_set mig_machine(void)
{
    memset(mig_gpus, 0, sizeof(mig_gpus));
    memset(mig_list, 0, sizeof(mig_list));
    for (int i = 0; i < 3; i++) {
        mig_gpus[i].index = i;
        mig_gpus[i].memory_total_mib = 81559;
        mig_gpus[i].memory_used_mib = 0;
        mig_gpus[i].mig_enabled = i < 2;
    }
    static const char *const profiles[] = {"1g.18gb", "1g.18gb", "3g.71gb"};
    for (int i = 0; i < 3; i++) {
        mig_list[i].parent = 0;
        snprintf(mig_list[i].profile, sizeof(mig_list[i].profile), "%s", profiles[i]);
        snprintf(mig_list[i].uuid, sizeof(mig_list[i].uuid), "MIG-%d", i);
    }
    return (struct gpu_set){.gpus = mig_gpus, .n_gpus = 3, .migs = mig_list, .n_migs = 3};
}

static void mig_job(struct job *j, const char *profile, int n)
{
    free(j->mig_profile);
    j->mig_profile = strdup(profile);
    j->mig_count = n;
}

static void test_mig_choice(void **state)
{
    (void)state;
    struct gpu_set g = mig_machine();
    static struct fixture f;
    fixture_make(&f, "QQQQQ", NULL);
    f.gpus = &g;
    mig_job(&f.jobs[0], "1g.18gb", 1);
    mig_job(&f.jobs[1], "1g.18gb", 1);
    mig_job(&f.jobs[2], "1g.18gb", 1);
    f.jobs[3].gpus = 1;
    f.jobs[4].gpus = 2;
    assert_int_equal(fixture_pass(&f), 3);
    /* Two jobs, two different instances; whole GPUs only from the plain GPU. */
    assert_ptr_equal(f.start[0], &f.jobs[0]);
    assert_string_equal(f.jobs[0].mig_uuids, "MIG-0");
    assert_int_equal(f.jobs[0].gpu_mask, 0);
    assert_ptr_equal(f.start[1], &f.jobs[1]);
    assert_string_equal(f.jobs[1].mig_uuids, "MIG-1");
    assert_null(f.jobs[2].mig_uuids);
    assert_string_equal(f.jobs[2].wait_reason, SCHEDULER_REASON_PRIORITY);
    assert_ptr_equal(f.start[2], &f.jobs[3]);
    assert_int_equal(f.jobs[3].gpu_mask, 1u << 2);
    assert_string_equal(f.jobs[4].wait_reason, SCHEDULER_REASON_RESOURCES);

    /* The two hold their instances while running (by UUID): the third waits. */
    f.jobs[0].state = f.jobs[1].state = f.jobs[3].state = JOB_RUNNING;
    assert_int_equal(fixture_pass(&f), 0);
    assert_string_equal(f.jobs[2].wait_reason, SCHEDULER_REASON_RESOURCES);
    /* One ends: the third gets its instance. */
    f.jobs[1].state = JOB_FINISHED;
    assert_int_equal(fixture_pass(&f), 1);
    assert_string_equal(f.jobs[2].mig_uuids, "MIG-1");

    /* Outside processes on an instance keep jobs off it. */
    fixture_make(&f, "QQ", NULL);
    f.gpus = &g;
    mig_job(&f.jobs[0], "1g.18gb", 2);
    mig_job(&f.jobs[1], "3g.71gb", 1);
    f.mig_unmanaged = 1u << 0 | 1u << 2;
    assert_int_equal(fixture_pass(&f), 0);
    assert_string_equal(f.jobs[0].wait_reason, SCHEDULER_REASON_UNMANAGED);
    assert_string_equal(f.jobs[1].wait_reason, SCHEDULER_REASON_UNMANAGED);
    f.mig_unmanaged = 0;
    assert_int_equal(fixture_pass(&f), 2);
    assert_string_equal(f.jobs[0].mig_uuids, "MIG-0,MIG-1");
    assert_string_equal(f.jobs[1].mig_uuids, "MIG-2");

    /* Instances of a GPU that may not be used are not given out. */
    fixture_make(&f, "Q", NULL);
    f.gpus = &g;
    mig_job(&f.jobs[0], "3g.71gb", 1);
    f.policy.allowed_gpus = 1u << 2;
    assert_int_equal(fixture_pass(&f), 0);
    assert_string_equal(f.jobs[0].wait_reason, SCHEDULER_REASON_GPUS_RESTRICTED);
    /* Nor those of a lost GPU. */
    f.policy.allowed_gpus = 0;
    mig_gpus[0].lost = true;
    assert_int_equal(fixture_pass(&f), 0);
    assert_string_equal(f.jobs[0].wait_reason, SCHEDULER_REASON_GPUS_UNAVAILABLE);
    mig_gpus[0].lost = false;
    /* Nor one whose state NVML does not give; its GPU's own process list does not matter
     * (a driver refuses it to non-root callers on a MIG GPU). */
    snprintf(mig_list[2].unavailable, sizeof(mig_list[2].unavailable),
             "NVML: Insufficient Permissions (nvmlDeviceGetComputeRunningProcesses)");
    assert_int_equal(fixture_pass(&f), 0);
    assert_string_equal(f.jobs[0].wait_reason, SCHEDULER_REASON_GPUS_UNAVAILABLE);
    mig_list[2].unavailable[0] = '\0';
    snprintf(mig_gpus[0].unavailable, sizeof(mig_gpus[0].unavailable),
             "NVML: Insufficient Permissions (nvmlDeviceGetComputeRunningProcesses)");
    assert_int_equal(fixture_pass(&f), 1);
    assert_string_equal(f.jobs[0].mig_uuids, "MIG-2");
    mig_gpus[0].unavailable[0] = '\0';
    fixture_make(&f, "", NULL);
}

static void test_mig_feasible(void **state)
{
    (void)state;
    struct gpu_set g = mig_machine();
    struct job j;
    char *reason;
    job_init(&j);
    j.mig_profile = strdup("7g.80gb");
    j.mig_count = 1;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(reason, "requests MIG profile 7g.80gb but this machine has none (MIG "
                                "profiles here: 1g.18gb, 3g.71gb)");
    free(reason);
    free(j.mig_profile);
    j.mig_profile = strdup("1g.18gb");
    j.mig_count = 3;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(reason, "requests 3 MIG instances of 1g.18gb but this machine has 2");
    free(reason);
    j.mig_count = 2;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), 0);
    /* Only the allowed GPUs' instances count. */
    assert_int_equal(scheduler_check_feasible(&j, &g, 1u << 2, &reason), -1);
    assert_string_equal(reason,
                        "requests MIG profile 1g.18gb but this machine has no MIG instances");
    free(reason);
    /* Instances NVML cannot report do not count, and the refusal says why. */
    snprintf(mig_list[1].unavailable, sizeof(mig_list[1].unavailable),
             "NVML: Insufficient "
             "Permissions (nvmlDeviceGetComputeRunningProcesses)");
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(reason, "requests 2 MIG instances of 1g.18gb but only 1 of the 2 there "
                                "are usable (NVML: Insufficient Permissions "
                                "(nvmlDeviceGetComputeRunningProcesses))");
    free(reason);
    mig_list[1].unavailable[0] = '\0';
    free(j.mig_profile);
    j.mig_profile = NULL;
    /* Whole GPUs: the MIG GPUs do not count. */
    j.gpus = 1;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), 0);
    j.gpus = 2;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(reason, "requests 2 GPUs but this machine has 1 without MIG (2 GPUs are "
                                "in MIG mode: ask for instances with --mig PROFILE)");
    free(reason);
}

static void test_feasible(void **state)
{
    (void)state;
    struct gpu_set g = gpus_make(4, 81559, false);
    struct job j;
    char *reason;
    job_init(&j);
    assert_int_equal(scheduler_check_feasible(&j, NULL, 0, &reason), 0); /* CPU job */
    assert_null(reason);
    j.gpus = 4;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), 0);
    j.gpus = 5;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(reason, "requests 5 GPUs but this machine has 4");
    free(reason);
    j.gpus = 3;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0x5, &reason), -1);
    assert_string_equal(reason, "requests 3 GPUs but only 2 of this machine's 4 GPUs may be used");
    free(reason);
    j.gpus = 1;
    j.gpu_memory_mb = 90000;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(reason, "needs 90000 MiB of GPU memory but the largest GPU has 81559 MiB");
    free(reason);
    gpu_arr[2].memory_total_mib = 95000;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), 0);
    j.gpus = 2;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(
        reason, "needs 90000 MiB of GPU memory on each of 2 GPUs but only 1 GPU has that much");
    free(reason);
    j.gpus = 1;
    j.gpu_memory_mb = 0;
    j.shared = true;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(reason, "a shared job must declare its GPU memory (--gpu-memory)");
    free(reason);
    j.shared = false;
    assert_int_equal(scheduler_check_feasible(&j, NULL, 0, &reason), -1);
    assert_string_equal(reason, "requests 1 GPU but this machine has none");
    free(reason);
    struct gpu_set none = {.error = "no GPUs: NVML not found"};
    assert_int_equal(scheduler_check_feasible(&j, &none, 0, &reason), -1);
    assert_string_equal(reason,
                        "requests 1 GPU but this machine has none (no GPUs: NVML not found)");
    free(reason);
}

/* A GPU whose state NVML cannot tell is never given to a job: the job waits with
 * GpusUnavailable while only the unavailable GPUs stand in its way. */
static void test_gpu_unavailable(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(4, 81559, false);
    snprintf(gpu_arr[1].unavailable, sizeof(gpu_arr[1].unavailable),
             "NVML: Insufficient Permissions (nvmlDeviceGetComputeRunningProcesses)");
    fixture_make(&f, "QQQ", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 4, NULL); /* would need GPU 1 */
    job_gpus(&f, 2, 3, NULL); /* fits on 0, 2, 3 */
    job_gpus(&f, 3, 1, NULL); /* the others are taken: Resources, not GpusUnavailable */
    assert_int_equal(fixture_pass(&f), 1);
    assert_reason(&f, 1, SCHEDULER_REASON_GPUS_UNAVAILABLE);
    assert_gpu_ids(&f, 2, "0,2,3");
    fixture_commit(&f, 1);
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 3, SCHEDULER_REASON_RESOURCES);
    /* The GPU answers again: job 3 gets it. */
    gpu_arr[1].unavailable[0] = '\0';
    assert_int_equal(fixture_pass(&f), 1);
    assert_gpu_ids(&f, 3, "1");
    fixture_make(&f, "", NULL); /* a fresh queue */
}

/* An exclusive job's --gpu-memory must be free as NVML counts it: the driver's
 * reservation is in neither "used" nor "free". */
static void test_gpu_memory_free(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(1, 81559, false);
    gpu_arr[0].memory_used_mib = 60000;
    gpu_arr[0].memory_free_mib = 20559 - 600; /* 600 MiB reserved */
    fixture_make(&f, "Q", NULL);
    f.gpus = &g;
    job_gpus(&f, 1, 1, NULL);
    job_mem(&f, 1, 20559, false); /* total - used, but not free */
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 1, SCHEDULER_REASON_GPU_MEMORY);
    job_mem(&f, 1, 19959, false);
    assert_int_equal(fixture_pass(&f), 1);
    fixture_make(&f, "", NULL); /* a fresh queue */
}

/* Shared packing counts what outside processes (ignored ones too: not unmanaged) and
 * the driver take, not only the declarations: an 80 GB GPU with an ignored 60 GB
 * process has no room for two shared 40 GB jobs, nor for one. */
static void test_gpu_shared_outside_memory(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(1, 81920, false);
    int64_t outside[1] = {61440};
    gpu_arr[0].memory_used_mib = 61440;
    fixture_make(&f, "QQ", NULL);
    f.gpus = &g;
    f.outside_mib = outside;
    for (int64_t id = 1; id <= 2; id++) {
        job_gpus(&f, id, 1, NULL);
        job_mem(&f, id, 40960, true);
    }
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 1, SCHEDULER_REASON_GPU_MEMORY);
    assert_reason(&f, 2, SCHEDULER_REASON_GPU_MEMORY);
    /* 20 GB taken outside: one 40 GB job fits beside it, the second does not. */
    outside[0] = 20480;
    assert_int_equal(fixture_pass(&f), 1);
    assert_int_equal(f.start[0]->id, 1);
    assert_reason(&f, 2, SCHEDULER_REASON_PRIORITY);
    fixture_commit(&f, 1);
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 2, SCHEDULER_REASON_GPU_MEMORY);
    fixture_make(&f, "", NULL); /* a fresh queue */
}

static void test_feasible_unavailable(void **state)
{
    (void)state;
    struct gpu_set g = gpus_make(6, 81559, false);
    struct job j;
    char *reason;
    job_init(&j);
    gpu_arr[2].lost = true;
    snprintf(gpu_arr[2].unavailable, sizeof(gpu_arr[2].unavailable), "NVML: GPU is lost");
    snprintf(gpu_arr[5].unavailable, sizeof(gpu_arr[5].unavailable), "NVML: GPU is lost");
    snprintf(gpu_arr[4].unavailable, sizeof(gpu_arr[4].unavailable),
             "NVML: Insufficient Permissions (nvmlDeviceGetHandleByIndex)");
    j.gpus = 3;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), 0);
    j.gpus = 6;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(reason, "requests 6 GPUs but only 3 of the 6 GPUs are usable (GPU 2, 5: "
                                "NVML: GPU is lost; GPU 4: NVML: Insufficient Permissions "
                                "(nvmlDeviceGetHandleByIndex))");
    free(reason);
    /* Only the visible GPUs count, and only their reasons are told. */
    j.gpus = 3;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0x3 | 1 << 5, &reason), -1);
    assert_string_equal(reason,
                        "requests 3 GPUs but only 2 of the 3 GPUs are usable (GPU 5: NVML: GPU is "
                        "lost)");
    free(reason);
    /* An unavailable GPU's memory does not make a request feasible. */
    j.gpus = 1;
    j.gpu_memory_mb = 90000;
    gpu_arr[4].memory_total_mib = 95000;
    assert_int_equal(scheduler_check_feasible(&j, &g, 0, &reason), -1);
    assert_string_equal(reason, "needs 90000 MiB of GPU memory but the largest GPU has 81559 MiB");
    free(reason);
}

/* ---- the queue ---- */

static void assert_queue_sorted(const struct scheduler_queue *q)
{
    for (size_t i = 1; i < q->len; i++)
        assert_true(scheduler_order(q->jobs[i - 1], q->jobs[i]) < 0);
}

/* A queued job whose dependencies are not met is skipped with reason Dependency, takes
 * no GPU and no running slot, and runs once the daemon clears deps_blocked. */
static void test_dependency_gating(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    fixture_make(&f, "QQQ", (int[]){255, 10, 10});
    job_by_id(&f, 1)->sched.deps_blocked = true;
    assert_int_equal(fixture_run(&f, 1), 1);
    assert_int_equal(f.start[0]->id, 2);
    assert_string_equal(job_by_id(&f, 1)->wait_reason, SCHEDULER_REASON_DEPENDENCY);
    /* Behind the running limit a blocked job still says why it really waits. */
    assert_string_equal(job_by_id(&f, 3)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
    fixture_make(&f, "RQQ", NULL);
    job_by_id(&f, 3)->sched.deps_blocked = true;
    assert_int_equal(fixture_run(&f, 1), 0);
    assert_string_equal(job_by_id(&f, 2)->wait_reason, SCHEDULER_REASON_MAX_RUNNING);
    assert_string_equal(job_by_id(&f, 3)->wait_reason, SCHEDULER_REASON_DEPENDENCY);

    /* A blocked GPU job leaves the GPU to the job behind it. */
    struct gpu_set g = gpus_make(1, 81559, false);
    fixture_make(&f, "QQ", NULL);
    f.gpus = &g;
    job_by_id(&f, 1)->gpus = 1;
    job_by_id(&f, 1)->sched.deps_blocked = true;
    job_by_id(&f, 2)->gpus = 1;
    assert_int_equal(fixture_run(&f, 0), 1);
    assert_int_equal(f.start[0]->id, 2);
    assert_string_equal(job_by_id(&f, 1)->wait_reason, SCHEDULER_REASON_DEPENDENCY);
    /* Unblocked: it competes again (GPU 0 now held by job 2 once running). */
    fixture_commit(&f, 1);
    job_by_id(&f, 1)->sched.deps_blocked = false;
    assert_int_equal(fixture_run(&f, 0), 0);
    assert_string_equal(job_by_id(&f, 1)->wait_reason, SCHEDULER_REASON_RESOURCES);
    fixture_make(&f, "", NULL);
}

/* Host memory: a job waits (Memory) while the declared memory of the running jobs and
 * of those started before it in the pass plus its own exceeds the machine; jobs without
 * a declaration are not counted and never wait for it; an unknown total checks nothing. */
static void test_memory_gating(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    fixture_make(&f, "RQQQQ", NULL);
    f.memory_total_mb = 1000;
    job_by_id(&f, 1)->memory_mb = 600;
    job_by_id(&f, 2)->memory_mb = 500; /* 600 + 500 > 1000 */
    job_by_id(&f, 3)->memory_mb = 300; /* fits: 900 */
    job_by_id(&f, 4)->memory_mb = 200; /* 900 + 200 > 1000 */
    assert_int_equal(fixture_run(&f, 0), 2);
    assert_int_equal(f.start[0]->id, 3);
    assert_int_equal(f.start[1]->id, 5);
    assert_string_equal(job_by_id(&f, 2)->wait_reason, SCHEDULER_REASON_MEMORY);
    assert_string_equal(job_by_id(&f, 4)->wait_reason, SCHEDULER_REASON_MEMORY);
    /* The running job ends: job 2 fits, and then job 4 beside it (500 + 200). */
    fixture_commit(&f, 2);
    job_by_id(&f, 1)->state = JOB_FINISHED;
    job_by_id(&f, 3)->state = JOB_FINISHED;
    assert_int_equal(fixture_run(&f, 0), 2);
    assert_int_equal(f.start[0]->id, 2);
    assert_int_equal(f.start[1]->id, 4);
    /* Exactly full fits; no total known: no check at all. */
    fixture_make(&f, "RQ", NULL);
    f.memory_total_mb = 1000;
    job_by_id(&f, 1)->memory_mb = 400;
    job_by_id(&f, 2)->memory_mb = 600;
    assert_int_equal(fixture_run(&f, 0), 1);
    fixture_make(&f, "RQ", NULL);
    job_by_id(&f, 1)->memory_mb = 400000;
    job_by_id(&f, 2)->memory_mb = 600000;
    assert_int_equal(fixture_run(&f, 0), 1);
    fixture_make(&f, "", NULL);
}

/* A job whose begin_time is still to come waits (BeginTime), takes nothing, and the
 * pass reports the earliest such time; once it has come the job competes as usual. */
static void test_begin_time(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    fixture_make(&f, "QQQ", NULL);
    job_by_id(&f, 1)->begin_time = 1010.0; /* the fixture's pass runs at now = 1000 */
    job_by_id(&f, 2)->begin_time = 1005.5;
    job_by_id(&f, 3)->begin_time = 999.0;
    struct scheduler_queue q;
    scheduler_queue_init(&q);
    for (size_t i = 0; i < f.n; i++)
        scheduler_queue_insert(&q, f.ptrs[i]);
    double next = -1;
    struct scheduler_input in = {
        .queued = q.jobs, .n_queued = q.len, .now = 1000.0, .next_pass = &next};
    assert_int_equal(scheduler_pass(&in, &f.policy, f.start), 1);
    assert_int_equal(f.start[0]->id, 3);
    assert_string_equal(job_by_id(&f, 1)->wait_reason, SCHEDULER_REASON_BEGIN_TIME);
    assert_string_equal(job_by_id(&f, 2)->wait_reason, SCHEDULER_REASON_BEGIN_TIME);
    assert_true(next == 1005.5);
    /* Behind the running limit it still says BeginTime; at its time it starts. */
    f.policy.max_running_jobs = 1;
    struct job *run[1] = {job_by_id(&f, 3)};
    in.running = run;
    in.n_running = 1;
    scheduler_queue_remove(&q, job_by_id(&f, 3));
    in.queued = q.jobs;
    in.n_queued = q.len;
    assert_int_equal(scheduler_pass(&in, &f.policy, f.start), 0);
    assert_string_equal(job_by_id(&f, 2)->wait_reason, SCHEDULER_REASON_BEGIN_TIME);
    f.policy.max_running_jobs = 0;
    in.now = 1005.5;
    assert_int_equal(scheduler_pass(&in, &f.policy, f.start), 1);
    assert_int_equal(f.start[0]->id, 2);
    assert_true(next == 1010.0);
    in.now = 1010.0;
    assert_int_equal(scheduler_pass(&in, &f.policy, f.start), 2);
    assert_true(next == 0);
    scheduler_queue_free(&q);
    fixture_make(&f, "", NULL);
}

/* The rules that decide deps_blocked and auto-cancel (job.c), by kind and mode. */
static void test_dependency_outcome(void **state)
{
    (void)state;
    /* afterok: CD meets it; F, CA, TO never can. afterany: any end. afternotok: the
     * opposite of afterok. Active states are pending. */
    const enum job_state ended[] = {JOB_FINISHED, JOB_FAILED, JOB_CANCELLED, JOB_TIMEOUT};
    for (size_t i = 0; i < 4; i++) {
        bool ok = ended[i] == JOB_FINISHED;
        assert_int_equal(job_dep_status_for(JOB_DEP_AFTEROK, ended[i]),
                         ok ? JOB_DEP_MET : JOB_DEP_NEVER);
        assert_int_equal(job_dep_status_for(JOB_DEP_AFTERANY, ended[i]), JOB_DEP_MET);
        assert_int_equal(job_dep_status_for(JOB_DEP_AFTERNOTOK, ended[i]),
                         ok ? JOB_DEP_NEVER : JOB_DEP_MET);
    }
    const enum job_state active[] = {JOB_QUEUED, JOB_HELD, JOB_RUNNING};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(job_dep_status_for(JOB_DEP_AFTERANY, active[i]), JOB_DEP_PENDING);

    struct job j;
    job_init(&j);
    int64_t failed = -1;
    assert_int_equal(job_deps_outcome(&j, &failed), JOB_DEPS_READY); /* no deps */
    assert_int_equal(job_deps_parse(&j, "afterok:4:5,afternotok:6"), 0);
    assert_int_equal(j.n_deps, 3);
    /* all: every one met; one that never can fails the job, naming it. */
    assert_int_equal(job_deps_outcome(&j, NULL), JOB_DEPS_WAIT);
    j.deps[0].status = JOB_DEP_MET;
    j.deps[2].status = JOB_DEP_MET;
    assert_int_equal(job_deps_outcome(&j, NULL), JOB_DEPS_WAIT);
    j.deps[1].status = JOB_DEP_MET;
    assert_int_equal(job_deps_outcome(&j, NULL), JOB_DEPS_READY);
    j.deps[1].status = JOB_DEP_NEVER;
    assert_int_equal(job_deps_outcome(&j, &failed), JOB_DEPS_FAILED);
    assert_int_equal(failed, 5);
    /* any: one met suffices; failed only when none can be met. */
    j.deps_any = true;
    assert_int_equal(job_deps_outcome(&j, NULL), JOB_DEPS_READY);
    for (size_t i = 0; i < 3; i++)
        j.deps[i].status = JOB_DEP_PENDING;
    j.deps[0].status = JOB_DEP_NEVER;
    assert_int_equal(job_deps_outcome(&j, NULL), JOB_DEPS_WAIT);
    j.deps[1].status = JOB_DEP_NEVER;
    j.deps[2].status = JOB_DEP_NEVER;
    assert_int_equal(job_deps_outcome(&j, &failed), JOB_DEPS_FAILED);
    assert_int_equal(failed, 6);

    char *text = job_deps_format(&j);
    assert_string_equal(text, "afterok:4,afterok:5,afternotok:6");
    free(text);
    /* Duplicates collapse; bad text leaves no deps. */
    assert_int_equal(job_deps_parse(&j, "afterany:3,afterany:3"), 0);
    assert_int_equal(j.n_deps, 1);
    assert_int_equal(job_deps_parse(&j, "afterok:x"), -1);
    assert_int_equal(j.n_deps, 0);
    assert_int_equal(job_deps_parse(&j, "sometime:3"), -1);
    assert_int_equal(job_deps_parse(&j, "afterok:0"), -1);
    job_clear(&j);
}

/* Checks the heap property and every job's begin_heap_pos. */
static void heap_check(const struct scheduler_begin_heap *h)
{
    for (size_t i = 0; i < h->len; i++) {
        assert_int_equal(h->jobs[i]->sched.begin_heap_pos, i + 1);
        if (i > 0) {
            const struct job *p = h->jobs[(i - 1) / 2], *c = h->jobs[i];
            assert_true(p->begin_time < c->begin_time ||
                        (p->begin_time == c->begin_time && p->id < c->id));
        }
    }
}

/* The begin-time heap: jobs come out by begin time (then id), only once due; any job
 * can be removed (hold, cancel, a changed begin time) and pushed again. */
static void test_begin_heap(void **state)
{
    (void)state;
    enum { N = 1000 };
    struct job *jobs = calloc(N, sizeof(*jobs));
    struct scheduler_begin_heap h;
    scheduler_begin_heap_init(&h);
    assert_true(scheduler_begin_heap_next(&h) == 0);
    assert_null(scheduler_begin_heap_pop_due(&h, 1e12));
    srand(7);
    for (int i = 0; i < N; i++) {
        job_init(&jobs[i]);
        jobs[i].id = i + 1;
        jobs[i].begin_time = 1000 + rand() % 500; /* many equal times */
        scheduler_begin_heap_push(&h, &jobs[i]);
    }
    heap_check(&h);
    /* Remove every third job, from anywhere in the heap; removing twice fails. */
    for (int i = 0; i < N; i += 3) {
        assert_int_equal(scheduler_begin_heap_remove(&h, &jobs[i]), 0);
        assert_int_equal(jobs[i].sched.begin_heap_pos, 0);
        assert_int_equal(scheduler_begin_heap_remove(&h, &jobs[i]), -1);
    }
    heap_check(&h);
    /* A changed begin time: out, changed, in again. */
    assert_int_equal(scheduler_begin_heap_remove(&h, &jobs[1]), 0);
    jobs[1].begin_time = 999;
    scheduler_begin_heap_push(&h, &jobs[1]);
    heap_check(&h);
    assert_true(scheduler_begin_heap_next(&h) == 999);
    /* Nothing is due before its time. */
    assert_null(scheduler_begin_heap_pop_due(&h, 998.5));
    size_t left = h.len, popped = 0;
    struct job *prev = NULL, *j;
    while ((j = scheduler_begin_heap_pop_due(&h, 1200))) {
        assert_true(j->begin_time <= 1200);
        assert_int_equal(j->sched.begin_heap_pos, 0);
        if (prev)
            assert_true(prev->begin_time < j->begin_time ||
                        (prev->begin_time == j->begin_time && prev->id < j->id));
        prev = j;
        popped++;
    }
    heap_check(&h);
    assert_true(h.len == 0 || scheduler_begin_heap_next(&h) > 1200);
    /* What is left comes out at the end, all of it. */
    while ((j = scheduler_begin_heap_pop_due(&h, 1e12)))
        popped++;
    assert_int_equal(popped, left);
    assert_int_equal(h.len, 0);
    scheduler_begin_heap_free(&h);
    free(jobs);
}

static void test_queue(void **state)
{
    (void)state;
    enum { N = 2000 };
    struct job *jobs = calloc(N, sizeof(*jobs));
    struct job **ptrs = calloc(N, sizeof(*ptrs));
    assert_non_null(jobs);
    assert_non_null(ptrs);
    struct scheduler_queue q;
    scheduler_queue_init(&q);
    srand(3);
    for (int i = 0; i < N; i++) {
        job_init(&jobs[i]);
        jobs[i].id = i + 1;
        jobs[i].priority = rand() % 4 * 10;
        ptrs[i] = &jobs[i];
    }
    /* Submissions in id order, then requeued jobs with old ids in random order. */
    for (int i = 0; i < N; i++)
        if (i % 3)
            scheduler_queue_insert(&q, &jobs[i]);
    for (int i = N - 1; i >= 0; i--)
        if (i % 3 == 0)
            scheduler_queue_insert(&q, &jobs[i]);
    assert_int_equal(q.len, N);
    assert_queue_sorted(&q);
    /* Removal, and removing what is not there. */
    for (int i = 0; i < N; i += 2)
        assert_int_equal(scheduler_queue_remove(&q, &jobs[i]), 0);
    assert_int_equal(scheduler_queue_remove(&q, &jobs[0]), -1);
    assert_int_equal(q.len, N / 2);
    assert_queue_sorted(&q);
    for (size_t i = 0; i < q.len; i++)
        assert_int_equal(q.jobs[i]->id % 2, 0);
    /* remove_many takes jobs in queue order, as the pass returns them. */
    struct job *some[3] = {q.jobs[0], q.jobs[5], q.jobs[q.len - 1]};
    assert_int_equal(scheduler_queue_remove_many(&q, some, 3), 3);
    assert_int_equal(q.len, N / 2 - 3);
    assert_queue_sorted(&q);
    assert_int_equal(scheduler_queue_remove(&q, some[1]), -1);
    /* rebuild takes the PD jobs only. */
    for (int i = 0; i < N; i++)
        jobs[i].state = i % 5 == 0 ? JOB_HELD : JOB_QUEUED;
    scheduler_queue_rebuild(&q, ptrs, N);
    assert_int_equal(q.len, N - N / 5);
    assert_queue_sorted(&q);
    scheduler_queue_free(&q);
    free(jobs);
    free(ptrs);
}

static void test_group_limit(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    fixture_make(&f, "QQQQQ", NULL);
    struct job_group g = {.id = 1, .max_concurrent = 2};
    for (int64_t id = 1; id <= 4; id++) {
        job_by_id(&f, id)->sched.group = &g;
        job_by_id(&f, id)->group_id = 1;
    }
    struct scheduler_queue q;
    scheduler_queue_init(&q);
    for (size_t i = 0; i < f.n; i++)
        scheduler_queue_insert(&q, f.ptrs[i]);
    struct scheduler_input in = {.queued = q.jobs, .n_queued = q.len, .now = 1000.0};
    /* Two of the group start in one pass; job 5 (no group) is not held back. */
    assert_int_equal(scheduler_pass(&in, &f.policy, f.start), 3);
    assert_int_equal(f.start[0]->id, 1);
    assert_int_equal(f.start[1]->id, 2);
    assert_int_equal(f.start[2]->id, 5);
    assert_string_equal(job_by_id(&f, 3)->wait_reason, SCHEDULER_REASON_GROUP_LIMIT);
    assert_string_equal(job_by_id(&f, 4)->wait_reason, SCHEDULER_REASON_GROUP_LIMIT);
    /* With two running (counted by the caller), none of the rest starts. */
    scheduler_queue_remove_many(&q, f.start, 3);
    g.running = 2;
    in.queued = q.jobs;
    in.n_queued = q.len;
    assert_int_equal(scheduler_pass(&in, &f.policy, f.start), 0);
    assert_string_equal(job_by_id(&f, 3)->wait_reason, SCHEDULER_REASON_GROUP_LIMIT);
    /* One ended: one more starts. A raised limit lets the other start too. */
    g.running = 1;
    assert_int_equal(scheduler_pass(&in, &f.policy, f.start), 1);
    assert_int_equal(f.start[0]->id, 3);
    g.max_concurrent = 0;
    assert_int_equal(scheduler_pass(&in, &f.policy, f.start), 2);
    /* Behind the running limit, a full group still says JobArrayTaskLimit. */
    g.max_concurrent = 1;
    f.policy.max_running_jobs = 1;
    struct job *run[1] = {job_by_id(&f, 5)};
    in.running = run;
    in.n_running = 1;
    assert_int_equal(scheduler_pass(&in, &f.policy, f.start), 0);
    assert_string_equal(job_by_id(&f, 3)->wait_reason, SCHEDULER_REASON_GROUP_LIMIT);
    scheduler_queue_free(&q);
    fixture_make(&f, "", NULL);
}

/* ---- backfill ---- */

/* Job id runs on `ids` (as job_gpus), started at `start` with a time limit of `limit`
 * seconds (0: none). */
static void job_running(struct fixture *f, int64_t id, int gpus, const char *ids, double start,
                        int64_t limit)
{
    job_gpus(f, id, gpus, ids);
    job_by_id(f, id)->start_time = start;
    job_by_id(f, id)->time_limit = limit;
}

static void job_queued(struct fixture *f, int64_t id, int gpus, int64_t limit)
{
    job_gpus(f, id, gpus, NULL);
    job_by_id(f, id)->time_limit = limit;
}

/* A stream of 1-GPU jobs on a 4-GPU machine and one 4-GPU job ahead of them: greedy lets
 * the stream take every GPU that frees up, forever; backfill reserves the machine for the
 * big job at the time the running jobs end and starts it then. Passes every 5 s over
 * 1000 s: a 1-GPU job (time limit 100 s, runs 100 s) arrives every 10 s. */
static double stream_big_job_start(bool backfill)
{
    enum { MAXS = 128 };
    static struct job jobs[MAXS];
    struct job *running[MAXS], *start[MAXS];
    struct gpu_set g = gpus_make(4, 81559, false);
    size_t n = 0;
    for (size_t i = 0; i < MAXS; i++) {
        job_init(&jobs[i]);
        jobs[i].id = (int64_t)i + 1;
        jobs[i].state = JOB_HELD; /* not yet submitted */
    }
    /* Four 1-GPU jobs run, ending at 100, 125, 150, 175. */
    for (int k = 0; k < 4; k++, n++) {
        jobs[n].state = JOB_RUNNING;
        jobs[n].gpus = 1;
        jobs[n].gpu_mask = 1ULL << k;
        jobs[n].start_time = 25.0 * k;
        jobs[n].time_limit = 100;
    }
    struct job *big = &jobs[n++];
    big->state = JOB_QUEUED;
    big->gpus = 4;
    big->time_limit = 100;
    big->priority = 20; /* ahead of the stream */
    struct scheduler_policy policy = {.backfill = backfill};
    double big_start = -1;
    for (double now = 0; now <= 1000 && n < MAXS; now += 5) {
        if ((int)now % 10 == 0) {
            struct job *j = &jobs[n++];
            j->state = JOB_QUEUED;
            j->gpus = 1;
            j->time_limit = 100;
            j->submit_time = now;
        }
        size_t nr = 0;
        for (size_t i = 0; i < n; i++) {
            struct job *j = &jobs[i];
            if (j->state == JOB_RUNNING && j->start_time + (double)j->time_limit <= now) {
                j->state = JOB_FINISHED; /* ran its 100 s */
                j->gpu_mask = 0;
            }
            if (j->state == JOB_RUNNING)
                running[nr++] = j;
        }
        struct scheduler_queue q;
        scheduler_queue_init(&q);
        for (size_t i = 0; i < n; i++)
            if (jobs[i].state == JOB_QUEUED)
                scheduler_queue_insert(&q, &jobs[i]);
        struct scheduler_input in = {.queued = q.jobs,
                                     .n_queued = q.len,
                                     .running = running,
                                     .n_running = nr,
                                     .gpus = &g,
                                     .now = now};
        size_t ns = scheduler_pass(&in, &policy, start);
        if (backfill && big->state == JOB_QUEUED && ns == 0 && now >= 100 && now < 175) {
            /* GPUs are idle, kept for the big job: it expects them at 175. */
            assert_string_equal(big->wait_reason, SCHEDULER_REASON_RESOURCES);
            assert_true(big->expected_start == 175.0);
            assert_string_equal(q.jobs[1]->wait_reason, SCHEDULER_REASON_PRIORITY);
        }
        for (size_t i = 0; i < ns; i++) {
            start[i]->state = JOB_RUNNING;
            start[i]->start_time = now;
            if (start[i] == big)
                big_start = now;
        }
        scheduler_queue_free(&q);
    }
    return big_start;
}

static void test_backfill_no_starvation(void **state)
{
    (void)state;
    assert_true(stream_big_job_start(false) < 0); /* greedy: never in 1000 s */
    assert_true(stream_big_job_start(true) == 175.0);
}

/* A short job whose time limit ends before the blocked job's shadow time starts on its
 * reserved GPUs; a longer one waits with Priority. */
static void test_backfill_short_job(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(4, 81559, false);
    fixture_make(&f, "RQQQ", NULL);
    f.gpus = &g;
    f.policy.backfill = true;
    job_running(&f, 1, 3, "0,1,2", 900, 200); /* ends at 1100 */
    job_queued(&f, 2, 4, 3600);
    job_queued(&f, 3, 1, 500); /* would end at 1500: delays job 2 */
    job_queued(&f, 4, 1, 50);  /* ends at 1050: before the shadow time */
    assert_int_equal(fixture_pass(&f), 1);
    assert_int_equal(f.start[0]->id, 4);
    assert_gpu_ids(&f, 4, "3");
    assert_reason(&f, 2, SCHEDULER_REASON_RESOURCES);
    assert_true(job_by_id(&f, 2)->expected_start == 1100.0);
    assert_reason(&f, 3, SCHEDULER_REASON_PRIORITY);
    /* An estimate: after job 2's reservation, which holds every GPU until 4700. */
    assert_true(job_by_id(&f, 3)->expected_start == 4700.0);
    assert_true(job_by_id(&f, 4)->expected_start == 0); /* started */

    /* A running job past its time limit is expected to end at any moment. */
    f.now = 1200;
    job_by_id(&f, 4)->state = JOB_FINISHED;
    assert_int_equal(fixture_pass(&f), 0);
    assert_true(job_by_id(&f, 2)->expected_start == 1201.0);

    /* Off, the same queue is greedy: job 3 starts; expected_start is left alone (the
     * daemon shows none without backfill). */
    f.now = 0;
    f.policy.backfill = false;
    assert_int_equal(fixture_pass(&f), 1);
    assert_int_equal(f.start[0]->id, 3);
    assert_reason(&f, 2, SCHEDULER_REASON_RESOURCES);
    assert_true(job_by_id(&f, 2)->expected_start == 1201.0);
    fixture_make(&f, "", NULL);
}

/* With backfill_untimed = "outside", a job without a time limit may run past any shadow
 * time: it starts only on GPUs the reservation leaves out. Running jobs without a time
 * limit are planned with the policy's default_time_limit. */
static void test_backfill_no_time_limit(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(4, 81559, false);
    fixture_make(&f, "RQQQQ", NULL);
    f.gpus = &g;
    f.policy.backfill = true;
    f.policy.untimed_outside = true;
    f.policy.default_time_limit = 50;       /* would end before the shadow: still kept out */
    job_running(&f, 1, 2, "0,1", 900, 200); /* ends at 1100 */
    job_queued(&f, 2, 3, 600);              /* shadow 1100 on 0, 1 and one free GPU (2) */
    job_queued(&f, 3, 1, 0);                /* no limit: outside the reservation, GPU 3 */
    job_queued(&f, 4, 1, 0);                /* no limit and nothing outside: waits */
    job_queued(&f, 5, 1, 100);              /* ends at 1100: may use reserved GPU 2 */
    assert_int_equal(fixture_pass(&f), 2);
    assert_int_equal(f.start[0]->id, 3);
    assert_gpu_ids(&f, 3, "3");
    assert_int_equal(f.start[1]->id, 5);
    assert_gpu_ids(&f, 5, "2");
    assert_reason(&f, 2, SCHEDULER_REASON_RESOURCES);
    assert_true(job_by_id(&f, 2)->expected_start == 1100.0);
    assert_reason(&f, 4, SCHEDULER_REASON_PRIORITY);

    /* The running job has no time limit: it is planned to run default_time_limit. */
    fixture_make(&f, "RQ", NULL);
    f.gpus = &g;
    f.policy.backfill = true;
    job_running(&f, 1, 4, "0,1,2,3", 900, 0);
    job_queued(&f, 2, 1, 60);
    assert_int_equal(fixture_pass(&f), 0);
    assert_true(job_by_id(&f, 2)->expected_start == 900.0 + SCHEDULER_DEFAULT_TIME_LIMIT);
    f.policy.default_time_limit = 300;
    job_by_id(&f, 2)->submit_time = 990;
    assert_int_equal(fixture_pass(&f), 0);
    assert_true(job_by_id(&f, 2)->expected_start == 1200.0);
    /* The plan changes when job 1 reaches its planned end, or job 2 has waited 300 s. */
    assert_true(f.next_pass == 1200.0);
    job_by_id(&f, 2)->submit_time = 850;
    assert_int_equal(fixture_pass(&f), 0);
    assert_true(f.next_pass == 1150.0);
    f.policy.backfill = false; /* greedy plans nothing */
    assert_int_equal(fixture_pass(&f), 0);
    assert_true(f.next_pass == 0);
    fixture_make(&f, "", NULL);
}

/* backfill_untimed = "planned" (the default): a job without a time limit is planned to
 * run default_time_limit; it may end at the shadow time itself while the reserved job has
 * waited less than default_time_limit, and must end strictly before it after. */
static void test_backfill_untimed_planned(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(2, 81559, false);
    for (int waited = 0; waited < 2; waited++) {
        fixture_make(&f, "RQQ", NULL);
        f.gpus = &g;
        f.policy.backfill = true;
        f.policy.default_time_limit = 100;
        job_running(&f, 1, 1, "0", 500, 0); /* past its planned end (600): now + 100 */
        job_queued(&f, 2, 2, 600);          /* shadow 1100 on both GPUs */
        job_by_id(&f, 2)->submit_time = waited ? 900 : 950; /* waited 100 s or 50 s */
        job_queued(&f, 3, 1, 0);                            /* planned to end at 1100 */
        assert_int_equal(fixture_pass(&f), waited ? 0 : 1);
        assert_true(job_by_id(&f, 2)->expected_start == 1100.0);
        if (waited)
            assert_reason(&f, 3, SCHEDULER_REASON_PRIORITY);
        else
            assert_gpu_ids(&f, 3, "1");
    }
    /* A planned end past the shadow is never backfilled onto the reserved GPUs. */
    fixture_make(&f, "RQQ", NULL);
    f.gpus = &g;
    f.policy.backfill = true;
    f.policy.default_time_limit = 101;
    job_running(&f, 1, 1, "0", 900, 200); /* ends at 1100 */
    job_queued(&f, 2, 2, 600);
    job_by_id(&f, 2)->submit_time = 999;
    job_queued(&f, 3, 1, 0);
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 3, SCHEDULER_REASON_PRIORITY);
    fixture_make(&f, "", NULL);
}

/* Every waiting job gets an expected start, not only the reserved one: the jobs past
 * the reservations are planned in queue order, each at the time its k-th GPU is planned
 * free, holding the GPUs free latest by then until its planned end (no holes filled). A
 * begin-time job's is its begin time, a job blocked by its dependencies has none. */
static void test_backfill_estimates(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(2, 81559, false);
    fixture_make(&f, "RQQQQQQ", NULL);
    f.gpus = &g;
    f.policy.backfill = true;
    f.now = 500;
    job_running(&f, 1, 2, "0,1", 100, 900); /* ends at 1000 */
    job_queued(&f, 2, 2, 100);              /* reserved: 1000, until 1100 */
    job_queued(&f, 3, 1, 200);              /* 1100 until 1300 */
    job_queued(&f, 4, 1, 0);                /* untimed, planned 24 h: 1100 on the other GPU */
    job_queued(&f, 5, 2, 10);               /* both GPUs: when job 4 is planned done */
    job_queued(&f, 6, 1, 10);
    job_by_id(&f, 6)->begin_time = 5000;
    job_queued(&f, 7, 1, 10);
    job_by_id(&f, 7)->sched.deps_blocked = true;
    assert_int_equal(fixture_pass(&f), 0);
    assert_true(job_by_id(&f, 2)->expected_start == 1000.0);
    assert_true(job_by_id(&f, 3)->expected_start == 1100.0);
    assert_true(job_by_id(&f, 4)->expected_start == 1100.0);
    assert_true(job_by_id(&f, 5)->expected_start == 1100.0 + SCHEDULER_DEFAULT_TIME_LIMIT);
    assert_true(job_by_id(&f, 6)->expected_start == 5000.0);
    assert_true(job_by_id(&f, 7)->expected_start == 0);
    /* The untimed plan (daemon.default_time_plan) replaces the 24 h. */
    f.policy.untimed_plan = 600;
    assert_int_equal(fixture_pass(&f), 0);
    assert_true(job_by_id(&f, 5)->expected_start == 1700.0);
    /* The running-jobs limit: nothing is reserved, every job is estimated (a lower
     * bound), in the same order. */
    f.policy.max_running_jobs = 1;
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 2, SCHEDULER_REASON_MAX_RUNNING);
    assert_true(job_by_id(&f, 2)->expected_start == 1000.0);
    assert_true(job_by_id(&f, 3)->expected_start == 1100.0);
    assert_true(job_by_id(&f, 5)->expected_start == 1700.0);
    /* A job estimated before the reservation is made (it waits for host memory): the
     * estimates after it still plan around the reservation. */
    fixture_make(&f, "RQQQ", NULL);
    f.gpus = &g;
    f.policy.backfill = true;
    f.now = 500;
    f.memory_total_mb = 1000;
    job_running(&f, 1, 2, "0,1", 100, 900); /* ends at 1000 */
    job_queued(&f, 2, 1, 100);
    job_by_id(&f, 2)->memory_mb = 2000; /* Memory: estimated at 1000, on one GPU */
    job_queued(&f, 3, 2, 100);          /* reserved: 1000 until 1100 on both */
    job_queued(&f, 4, 1, 50);
    assert_int_equal(fixture_pass(&f), 0);
    assert_reason(&f, 2, SCHEDULER_REASON_MEMORY);
    assert_true(job_by_id(&f, 2)->expected_start == 1000.0);
    assert_true(job_by_id(&f, 3)->expected_start == 1000.0);
    assert_true(job_by_id(&f, 4)->expected_start == 1100.0);
    /* Greedy leaves them alone (the daemon clears them). */
    f.policy.max_running_jobs = 0;
    f.policy.backfill = false;
    job_by_id(&f, 3)->expected_start = 0;
    assert_int_equal(fixture_pass(&f), 0);
    assert_true(job_by_id(&f, 3)->expected_start == 0);
    fixture_make(&f, "", NULL);
}

/* Depth 2: the second blocked job gets a reservation too (after the first's on shared
 * GPUs), so a job that would delay it no longer starts; with depth 1 it does. */
static void test_backfill_depth(void **state)
{
    (void)state;
    struct fixture f = {.n = 0};
    struct gpu_set g = gpus_make(4, 81559, false);
    for (int depth = 1; depth <= 2; depth++) {
        fixture_make(&f, "RQQQ", NULL);
        f.gpus = &g;
        f.policy.backfill = true;
        f.policy.backfill_depth = depth;
        job_running(&f, 1, 2, "0,1", 1000, 500); /* ends at 1500 */
        job_queued(&f, 2, 3, 100);               /* shadow 1500 on 0, 1, 2 until 1600; GPU 3 left */
        /* Would end at 2000, delaying job 2; with depth 2 it reserves all four GPUs from
         * 1600 (GPU 3 included, which job 2 leaves out). */
        job_queued(&f, 3, 4, 1000);
        job_queued(&f, 4, 1, 1000); /* ends at 2000: after job 3's shadow time */
        size_t n = fixture_pass(&f);
        assert_reason(&f, 2, SCHEDULER_REASON_RESOURCES);
        assert_true(job_by_id(&f, 2)->expected_start == 1500.0);
        assert_reason(&f, 3, SCHEDULER_REASON_PRIORITY);
        if (depth == 1) {
            assert_int_equal(n, 1);
            assert_int_equal(f.start[0]->id, 4);
            assert_gpu_ids(&f, 4, "3");
            /* Estimated as depth 2 reserves it: when job 2's GPUs are planned free. */
            assert_true(job_by_id(&f, 3)->expected_start == 1600.0);
        } else {
            assert_int_equal(n, 0);
            assert_true(job_by_id(&f, 3)->expected_start == 1600.0);
            assert_reason(&f, 4, SCHEDULER_REASON_PRIORITY);
            /* A job that ends by 1500 delays neither. */
            job_by_id(&f, 4)->time_limit = 500;
            assert_int_equal(fixture_pass(&f), 1);
            assert_int_equal(f.start[0]->id, 4);
        }
    }
    fixture_make(&f, "", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_fifo_among_equals),
        cmocka_unit_test(test_max_running_counts_running),
        cmocka_unit_test(test_held_never_started),
        cmocka_unit_test(test_empty_and_no_limit),
        cmocka_unit_test(test_100k_jobs),
        cmocka_unit_test(test_dependency_gating),
        cmocka_unit_test(test_dependency_outcome),
        cmocka_unit_test(test_memory_gating),
        cmocka_unit_test(test_begin_time),
        cmocka_unit_test(test_group_limit),
        cmocka_unit_test(test_queue),
        cmocka_unit_test(test_begin_heap),
        cmocka_unit_test(test_gpu_exclusive_and_priority),
        cmocka_unit_test(test_backfill_no_starvation),
        cmocka_unit_test(test_backfill_short_job),
        cmocka_unit_test(test_backfill_no_time_limit),
        cmocka_unit_test(test_backfill_untimed_planned),
        cmocka_unit_test(test_backfill_depth),
        cmocka_unit_test(test_backfill_estimates),
        cmocka_unit_test(test_gpu_shared_packing),
        cmocka_unit_test(test_gpu_memory_used),
        cmocka_unit_test(test_gpu_allowed_mask),
        cmocka_unit_test(test_gpu_unmanaged_mask),
        cmocka_unit_test(test_gpu_closed_and_no_share),
        cmocka_unit_test(test_gpu_max_running_and_cpu_jobs),
        cmocka_unit_test(test_gpu_topology_and_strategies),
        cmocka_unit_test(test_feasible),
        cmocka_unit_test(test_gpu_unavailable),
        cmocka_unit_test(test_gpu_memory_free),
        cmocka_unit_test(test_gpu_shared_outside_memory),
        cmocka_unit_test(test_feasible_unavailable),
        cmocka_unit_test(test_mig_choice),
        cmocka_unit_test(test_mig_feasible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
