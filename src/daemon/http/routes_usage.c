/* routes_usage: GET /v1/usage (docs/api.md), the fair-share accounts of users and
 * projects as of now, for gctl usage. */
#include "routes.h"

#include "clock.h"
#include "daemon.h"
#include "fairshare.h"
#include "jobs/jobs.h"
#include "jobs/priority.h"

static json_t *accounts_json(struct fairshare *fs, enum fairshare_kind kind)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < fs->n[kind]; i++) {
        const struct fairshare_account *a = &fs->acct[kind][i];
        json_array_append_new(arr, json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:f}", "name", a->name,
                                             "raw_gpu_s", a->now_raw, "usage_gpu_s", a->now_usage,
                                             "shares", a->shares, "norm_shares", a->norm_shares,
                                             "norm_usage", a->norm_usage, "fairshare", a->factor));
    }
    return arr;
}

void route_usage(const struct route_req *r, struct reply *rep)
{
    struct gflowd *d = r->d;
    struct priority_weights w = priority_weights_of(&d->cfg);
    jobs_priority_refresh(d->jobs, &w, now_wall());
    struct fairshare *fs = jobs_fairshare(d->jobs);
    reply_json(rep, 200,
               json_pack("{s:f, s:o, s:o}", "half_life_s", fs->half_life, "users",
                         accounts_json(fs, FAIRSHARE_USER), "projects",
                         accounts_json(fs, FAIRSHARE_PROJECT)));
}
