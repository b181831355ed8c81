/* stray_run: the job's side of a stray (see stray_run.h). */
#include "stray_run.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "daemon.h"
#include "gpu/gpu.h"
#include "gpuinfo.h"
#include "jobs/jobs.h"
#include "log.h"
#include "runner.h"
#include "util.h"

/* "GPU 0", "GPUs 0,2", "MIG-a" or "it has none": what the job was given. */
static char *given_text(const struct job *j)
{
    if (j->mig_uuids && *j->mig_uuids)
        return xstrdup(j->mig_uuids);
    if (!j->gpu_mask)
        return xstrdup("it has none");
    char *ids = gpu_mask_format(j->gpu_mask);
    char *s = xasprintf("GPU%s %s", __builtin_popcountll(j->gpu_mask) > 1 ? "s" : "", ids);
    free(ids);
    return s;
}

/* "process 1234 on GPU 1, not the job's (GPU 0); GPU 1 blocked for others". */
static char *stray_text(struct gflowd *d, const struct job *j, const struct gpu_stray *s)
{
    char *where = s->mig >= 0 ? xasprintf("MIG instance %s (GPU %d)",
                                          gpu_current(d->gpus)->migs[s->mig].uuid, s->gpu)
                              : xasprintf("GPU %d", s->gpu);
    char *given = given_text(j);
    const char *what = s->mig >= 0 ? "the instance" : where;
    char *done;
    switch (d->cfg.parsed.stray) {
    case CONFIG_STRAY_KILL:
        done = xasprintf("the job is ended (daemon.stray = kill); %s blocked for others until "
                         "the process is gone",
                         what);
        break;
    case CONFIG_STRAY_WARN:
        done = xasprintf("%s not blocked (daemon.stray = warn)", what);
        break;
    default:
        done = xasprintf("%s blocked for others", what);
    }
    char *text =
        xasprintf("process %lld on %s, not the job's (%s); %s", s->pid, where, given, done);
    free(where);
    free(given);
    free(done);
    return text;
}

/* The first stray of each job is what its record says (one line is enough to tell). */
static void note(struct gflowd *d, struct job *j, const struct gpu_stray *s)
{
    char *text = stray_text(d, j, s);
    if (!j->stray || strcmp(j->stray, text) != 0) {
        log_warn("job %lld (user %s) strays: %s", (long long)j->id, j->user ? j->user : "?", text);
        free(j->stray);
        j->stray = text;
        text = NULL;
        jobs_save_updated(d->jobs, j);
    }
    free(text);
    if (d->cfg.parsed.stray == CONFIG_STRAY_KILL && j->end_request == JOB_END_NONE) {
        log_warn("job %lld: ended for its stray process (daemon.stray = kill)", (long long)j->id);
        runner_request_end(d, j, JOB_END_STRAY);
    }
}

void stray_run(struct gflowd *d)
{
    size_t n;
    const struct gpu_stray *strays = gpu_strays(d->gpus, &n);
    for (size_t i = 0; i < n; i++) {
        bool first = true; /* of its job in the list */
        for (size_t k = 0; k < i && first; k++)
            first = strays[k].job_id != strays[i].job_id;
        struct job *j = first ? jobs_get(d->jobs, strays[i].job_id) : NULL;
        if (j && j->state == JOB_RUNNING)
            note(d, j, &strays[i]);
    }
}
