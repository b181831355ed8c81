/* scheduler_queue: the order the scheduling pass walks and the structures that keep it.
 * The scheduling queue (scheduler_queue_*: the queued jobs, sorted by scheduler_order)
 * and the begin-time heap (scheduler_begin_heap_*: jobs held until their --begin time,
 * earliest first). The pass itself, and feasibility at submit, are in scheduler.c. */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- queue ---- */

int scheduler_order(const struct job *a, const struct job *b)
{
    if (a->priority != b->priority)
        return a->priority > b->priority ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

void scheduler_queue_init(struct scheduler_queue *q)
{
    memset(q, 0, sizeof(*q));
}

void scheduler_queue_free(struct scheduler_queue *q)
{
    free(q->jobs);
    memset(q, 0, sizeof(*q));
}

/* The first position whose job does not go before j. */
static size_t queue_lower_bound(const struct scheduler_queue *q, const struct job *j)
{
    size_t lo = 0, hi = q->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (scheduler_order(q->jobs[mid], j) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void scheduler_queue_insert(struct scheduler_queue *q, struct job *j)
{
    if (q->len == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 256;
        q->jobs = xrealloc(q->jobs, q->cap * sizeof(*q->jobs));
    }
    /* The common case, a new job behind every other of its priority, costs nothing. */
    size_t i = q->len;
    if (i > 0 && scheduler_order(q->jobs[i - 1], j) > 0)
        i = queue_lower_bound(q, j);
    memmove(q->jobs + i + 1, q->jobs + i, (q->len - i) * sizeof(*q->jobs));
    q->jobs[i] = j;
    q->len++;
}

int scheduler_queue_remove(struct scheduler_queue *q, struct job *j)
{
    size_t i = queue_lower_bound(q, j);
    if (i >= q->len || q->jobs[i] != j)
        return -1;
    memmove(q->jobs + i, q->jobs + i + 1, (q->len - i - 1) * sizeof(*q->jobs));
    q->len--;
    j->expected_start = 0; /* held, waiting for its begin time...: no plan until it is back */
    return 0;
}

size_t scheduler_queue_remove_many(struct scheduler_queue *q, struct job *const *jobs, size_t n)
{
    size_t k = 0, out = 0;
    for (size_t i = 0; i < q->len; i++) {
        if (k < n && q->jobs[i] == jobs[k]) {
            k++;
            continue;
        }
        q->jobs[out++] = q->jobs[i];
    }
    q->len = out;
    return k;
}

static int queue_qsort_cmp(const void *a, const void *b)
{
    return scheduler_order(*(struct job *const *)a, *(struct job *const *)b);
}

void scheduler_queue_rebuild(struct scheduler_queue *q, struct job *const *jobs, size_t n)
{
    q->len = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i]->state != JOB_QUEUED)
            continue;
        if (q->len == q->cap) {
            q->cap = q->cap ? q->cap * 2 : 256;
            q->jobs = xrealloc(q->jobs, q->cap * sizeof(*q->jobs));
        }
        q->jobs[q->len++] = jobs[i];
    }
    if (q->len)
        qsort(q->jobs, q->len, sizeof(*q->jobs), queue_qsort_cmp);
}

/* ---- begin-time heap ---- */

void scheduler_begin_heap_init(struct scheduler_begin_heap *h)
{
    memset(h, 0, sizeof(*h));
}

void scheduler_begin_heap_free(struct scheduler_begin_heap *h)
{
    free(h->jobs);
    memset(h, 0, sizeof(*h));
}

static bool begin_before(const struct job *a, const struct job *b)
{
    if (a->begin_time != b->begin_time)
        return a->begin_time < b->begin_time;
    return a->id < b->id;
}

static void heap_set(struct scheduler_begin_heap *h, size_t i, struct job *j)
{
    h->jobs[i] = j;
    j->sched.begin_heap_pos = i + 1;
}

/* Moves the job at i up or down to its place. */
static void heap_fix(struct scheduler_begin_heap *h, size_t i)
{
    struct job *j = h->jobs[i];
    while (i > 0 && begin_before(j, h->jobs[(i - 1) / 2])) {
        heap_set(h, i, h->jobs[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len)
            break;
        if (c + 1 < h->len && begin_before(h->jobs[c + 1], h->jobs[c]))
            c++;
        if (!begin_before(h->jobs[c], j))
            break;
        heap_set(h, i, h->jobs[c]);
        i = c;
    }
    heap_set(h, i, j);
}

void scheduler_begin_heap_push(struct scheduler_begin_heap *h, struct job *j)
{
    if (h->len == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 256;
        h->jobs = xrealloc(h->jobs, h->cap * sizeof(*h->jobs));
    }
    h->jobs[h->len++] = j;
    heap_fix(h, h->len - 1);
}

int scheduler_begin_heap_remove(struct scheduler_begin_heap *h, struct job *j)
{
    size_t pos = j->sched.begin_heap_pos;
    if (pos == 0 || pos > h->len || h->jobs[pos - 1] != j)
        return -1;
    j->sched.begin_heap_pos = 0;
    struct job *last = h->jobs[--h->len];
    if (last != j) {
        h->jobs[pos - 1] = last;
        heap_fix(h, pos - 1);
    }
    return 0;
}

double scheduler_begin_heap_next(const struct scheduler_begin_heap *h)
{
    return h->len ? h->jobs[0]->begin_time : 0;
}

struct job *scheduler_begin_heap_pop_due(struct scheduler_begin_heap *h, double now)
{
    if (h->len == 0 || h->jobs[0]->begin_time > now)
        return NULL;
    struct job *j = h->jobs[0];
    scheduler_begin_heap_remove(h, j);
    return j;
}
