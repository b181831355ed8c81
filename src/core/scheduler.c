/* scheduler: the scheduling pass. Queued jobs are moved to the front of the array, sorted
 * by priority (higher first) then id (submission order), and started in that order while
 * policy allows; the rest get a wait reason. O(n log n) in the queued jobs, one scan. */
#include "scheduler.h"

#include <stdlib.h>

static int sched_cmp(const void *a, const void *b)
{
    const struct job *x = *(struct job *const *)a;
    const struct job *y = *(struct job *const *)b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

size_t scheduler_pass(struct job **jobs, size_t n, const struct scheduler_policy *policy, double now,
                  struct job **start)
{
    size_t queued = 0, nstart = 0;
    int64_t running = 0;
    (void)now; /* begin times use it later */

    /* Queued jobs to the front; count running ones on the way. */
    for (size_t i = 0; i < n; i++) {
        if (jobs[i]->state == JOB_RUNNING)
            running++;
        if (jobs[i]->state == JOB_QUEUED) {
            struct job *t = jobs[queued];
            jobs[queued++] = jobs[i];
            jobs[i] = t;
        }
    }
    qsort(jobs, queued, sizeof(*jobs), sched_cmp);

    for (size_t i = 0; i < queued; i++) {
        struct job *j = jobs[i];
        bool limited = policy->max_running_jobs > 0 && running >= policy->max_running_jobs;
        if (limited) {
            j->wait_reason = SCHEDULER_REASON_MAX_RUNNING;
            continue;
        }
        /* Only the running limit holds a job back yet; the GPU and memory checks to come
         * give SCHEDULER_REASON_PRIORITY to jobs queued behind one they block. */
        j->wait_reason = NULL;
        start[nstart++] = j;
        running++;
    }
    return nstart;
}
