/* jobs_fairshare: the daemon's fair-share accounts (src/core/fairshare.h) kept with the
 * jobs: loaded with them, charged in the transaction that ends a running job, and the
 * effective priority of the waiting jobs for the listings. */
#include "jobs_internal.h"

#include <stdlib.h>

#include "store/store.h"
#include "util.h"

struct fairshare *jobs_fairshare(struct jobs *t)
{
    return &t->fs;
}

int jobs_fairshare_configure(struct jobs *t, double half_life, const char *user_shares,
                             const char *project_shares, char **err)
{
    if (fairshare_set_shares(NULL, FAIRSHARE_USER, user_shares, err) < 0 ||
        fairshare_set_shares(NULL, FAIRSHARE_PROJECT, project_shares, err) < 0)
        return -1;
    fairshare_set_shares(&t->fs, FAIRSHARE_USER, user_shares, err);
    fairshare_set_shares(&t->fs, FAIRSHARE_PROJECT, project_shares, err);
    t->fs.half_life = half_life;
    return 0;
}

static void usage_load_cb(int kind, const char *name, double usage, double at, double raw,
                          void *arg)
{
    if (kind >= 0 && kind < FAIRSHARE_KINDS)
        fairshare_load(arg, (enum fairshare_kind)kind, name, usage, at, raw);
}

int jobs_fairshare_load(struct jobs *t, char **err)
{
    fairshare_clear_usage(&t->fs);
    if (store_load_usage(t->store, usage_load_cb, &t->fs) < 0) {
        *err = xasprintf("cannot load the usage accounts: %s", store_error(t->store));
        return -1;
    }
    return 0;
}

int jobs_fairshare_charge(struct jobs *t, struct job *j)
{
    struct fairshare_account *charged[FAIRSHARE_KINDS];
    fairshare_charge_job(&t->fs, j, charged);
    int rc = 0;
    for (int k = 0; k < FAIRSHARE_KINDS; k++) {
        struct fairshare_account *a = charged[k];
        if (!a)
            continue;
        a->stored = true;
        rc |= store_put_usage(t->store, k, a->name, a->usage, a->at, a->raw);
    }
    return rc;
}

void jobs_priority_refresh(struct jobs *t, const struct priority_weights *w, double now)
{
    for (size_t i = 0; i < t->table_len; i++) { /* they count in the total shares */
        struct job *j = t->table[i];
        if (j->state != JOB_QUEUED && j->state != JOB_HELD)
            continue;
        if (j->user && *j->user)
            fairshare_account(&t->fs, FAIRSHARE_USER, j->user, true);
        if (j->project && *j->project)
            fairshare_account(&t->fs, FAIRSHARE_PROJECT, j->project, true);
    }
    fairshare_update(&t->fs, t->run_list, t->running, now);
    for (size_t i = 0; i < t->table_len; i++) {
        struct job *j = t->table[i];
        if (j->state != JOB_QUEUED && j->state != JOB_HELD) {
            j->effective_priority = -1;
            continue;
        }
        struct priority_factors f;
        fairshare_job_priority(&t->fs, w, j, now, &f);
        j->effective_priority = f.effective;
    }
}
