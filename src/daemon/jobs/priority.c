/* priority: fair-share's settings and a job's priority breakdown (see priority.h). */
#include "priority.h"

#include <stdlib.h>

#include "clock.h"
#include "daemon.h"
#include "jobs.h"
#include "log.h"
#include "parse.h"
#include "util.h"

struct priority_weights priority_weights_of(const struct gflow_config *c)
{
    struct config_priority p; /* [scheduler]'s weights, or gflow's [daemon.fair_share] */
    config_priority(c, &p);
    return (struct priority_weights){
        .priority = p.weight_priority,
        .fairshare = p.weight_fairshare,
        .age = p.weight_age,
        .max_age = (double)c->parsed.priority_max_age_secs,
    };
}

void priority_configure(struct gflowd *d)
{
    char *err = NULL;
    struct config_priority p;
    config_priority(&d->cfg, &p);
    double h = (double)p.half_life_secs;
    if (jobs_fairshare_configure(d->jobs, h, d->cfg.scheduler_fairshare_user_shares,
                                 d->cfg.scheduler_fairshare_project_shares, &err) < 0) {
        log_warn("fair-share shares not applied: %s", err); /* checked when read: not seen */
        free(err);
    }
}

json_t *priority_breakdown_json(struct gflowd *d, const struct job *j)
{
    if (j->state != JOB_QUEUED && j->state != JOB_HELD)
        return json_null();
    struct priority_weights w = priority_weights_of(&d->cfg);
    jobs_priority_refresh(d->jobs, &w, now_wall()); /* the accounts' factors now */
    struct priority_factors f;
    fairshare_job_priority(jobs_fairshare(d->jobs), &w, j, now_wall(), &f);
    return json_pack("{s:f, s:{s:I, s:I, s:I, s:f}, s:{s:f, s:f, s:f}}", "effective", f.effective,
                     "weights", "priority", (json_int_t)w.priority, "fairshare",
                     (json_int_t)w.fairshare, "age", (json_int_t)w.age, "max_age_s", w.max_age,
                     "factors", "priority", f.priority, "fairshare", f.fairshare, "age", f.age);
}
