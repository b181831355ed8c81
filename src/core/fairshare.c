/* fairshare: usage accounting and the multifactor priority (see fairshare.h). A lab has
 * few users and projects, so the accounts are short arrays searched in order. */
#include "fairshare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"
#include "util.h"

void fairshare_init(struct fairshare *fs, double half_life)
{
    memset(fs, 0, sizeof(*fs));
    fs->half_life = half_life;
}

void fairshare_free(struct fairshare *fs)
{
    double h = fs->half_life;
    for (int k = 0; k < FAIRSHARE_KINDS; k++) {
        for (size_t i = 0; i < fs->n[k]; i++)
            free(fs->acct[k][i].name);
        free(fs->acct[k]);
        free(fs->shares_text[k]);
    }
    fairshare_init(fs, h);
}

void fairshare_clear_usage(struct fairshare *fs)
{
    for (int k = 0; k < FAIRSHARE_KINDS; k++)
        for (size_t i = 0; i < fs->n[k]; i++) {
            struct fairshare_account *a = &fs->acct[k][i];
            a->usage = a->at = a->raw = 0;
            a->stored = false;
        }
}

double fairshare_decay(double v, double dt, double half_life)
{
    if (half_life <= 0 || dt <= 0)
        return v;
    return v * exp2(-dt / half_life);
}

double fairshare_run_usage(int gpus, double start, double end, double now, double half_life)
{
    if (gpus <= 0 || start <= 0 || end <= start)
        return 0;
    if (half_life <= 0)
        return gpus * (end - start);
    /* The integral of gpus x 2^(-(now - t)/h) over [start, end]. */
    double k = half_life / M_LN2;
    return gpus * k * (exp2(-(now - end) / half_life) - exp2(-(now - start) / half_life));
}

/* The configured shares of name in text ("a=2,b=1"), 1 if it is not named. */
static double shares_of(const char *text, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = text; p && *p;) {
        const char *eq = strchr(p, '=');
        if (!eq)
            break;
        if ((size_t)(eq - p) == len && strncmp(p, name, len) == 0)
            return strtod(eq + 1, NULL);
        p = strchr(eq, ',');
        p = p ? p + 1 : NULL;
    }
    return 1;
}

struct fairshare_account *fairshare_account(struct fairshare *fs, enum fairshare_kind kind,
                                            const char *name, bool create)
{
    for (size_t i = 0; i < fs->n[kind]; i++)
        if (strcmp(fs->acct[kind][i].name, name) == 0)
            return &fs->acct[kind][i];
    if (!create)
        return NULL;
    if (fs->n[kind] == fs->cap[kind]) {
        fs->cap[kind] = fs->cap[kind] ? fs->cap[kind] * 2 : 16;
        fs->acct[kind] = xrealloc(fs->acct[kind], fs->cap[kind] * sizeof(*fs->acct[kind]));
    }
    struct fairshare_account *a = &fs->acct[kind][fs->n[kind]++];
    memset(a, 0, sizeof(*a));
    a->name = xstrdup(name);
    a->shares = shares_of(fs->shares_text[kind], name);
    a->factor = 1;
    return a;
}

int fairshare_set_shares(struct fairshare *fs, enum fairshare_kind kind, const char *text,
                         char **err)
{
    const char *p = text ? text : "";
    while (*p) { /* every item, the empty one after a trailing ',' too */
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char *item = xstrndup(p, len);
        char *eq = strchr(item, '='), *end = NULL;
        double v = eq ? strtod(eq + 1, &end) : 0;
        if (!eq || eq == item || end == eq + 1 || *end || !(v > 0) || !isfinite(v)) {
            *err = xasprintf("bad share '%s': write NAME=N (N > 0), joined by ','", item);
            free(item);
            return -1;
        }
        free(item);
        if (!comma)
            break;
        p = comma + 1;
        if (!*p) {
            *err = xstrdup("bad share '': write NAME=N (N > 0), joined by ','");
            return -1;
        }
    }
    if (!fs)
        return 0;
    free(fs->shares_text[kind]);
    fs->shares_text[kind] = xstrdup(text ? text : "");
    for (size_t i = 0; i < fs->n[kind]; i++)
        fs->acct[kind][i].shares = shares_of(text, fs->acct[kind][i].name);
    /* Named accounts exist, so that they show in the usage listing. */
    for (const char *q = text; q && *q;) {
        const char *eq = strchr(q, '=');
        char *name = xstrndup(q, (size_t)(eq - q));
        fairshare_account(fs, kind, name, true);
        free(name);
        q = strchr(eq, ',');
        q = q ? q + 1 : NULL;
    }
    return 0;
}

void fairshare_load(struct fairshare *fs, enum fairshare_kind kind, const char *name, double usage,
                    double at, double raw)
{
    struct fairshare_account *a = fairshare_account(fs, kind, name, true);
    a->usage = usage;
    a->at = at;
    a->raw = raw;
    a->stored = true;
}

/* Adds usage (decayed as of t) and raw GPU-seconds to a, bringing both to the later time. */
static void charge(struct fairshare *fs, struct fairshare_account *a, double usage, double raw,
                   double t)
{
    if (t >= a->at) {
        a->usage = fairshare_decay(a->usage, t - a->at, fs->half_life) + usage;
        a->at = t;
    } else { /* a job that ended while the account was charged later */
        a->usage += fairshare_decay(usage, a->at - t, fs->half_life);
    }
    a->raw += raw;
}

void fairshare_charge_job(struct fairshare *fs, const struct job *j,
                          struct fairshare_account *out[FAIRSHARE_KINDS])
{
    const char *names[FAIRSHARE_KINDS] = {j->user, j->project};
    for (int k = 0; k < FAIRSHARE_KINDS; k++) {
        if (out)
            out[k] = NULL;
        if (j->gpus <= 0 || j->start_time <= 0 || j->end_time <= j->start_time || !names[k] ||
            !*names[k])
            continue;
        struct fairshare_account *a = fairshare_account(fs, (enum fairshare_kind)k, names[k], true);
        double used =
            fairshare_run_usage(j->gpus, j->start_time, j->end_time, j->end_time, fs->half_life);
        charge(fs, a, used, j->gpus * (j->end_time - j->start_time), j->end_time);
        if (out)
            out[k] = a;
    }
}

void fairshare_update(struct fairshare *fs, struct job *const *running, size_t n_running,
                      double now)
{
    for (int k = 0; k < FAIRSHARE_KINDS; k++)
        for (size_t i = 0; i < fs->n[k]; i++) {
            struct fairshare_account *a = &fs->acct[k][i];
            a->now_usage = fairshare_decay(a->usage, now - a->at, fs->half_life);
            a->now_raw = a->raw;
        }
    for (size_t r = 0; r < n_running; r++) {
        const struct job *j = running[r];
        const char *names[FAIRSHARE_KINDS] = {j->user, j->project};
        if (j->gpus <= 0 || j->start_time <= 0 || now <= j->start_time)
            continue;
        for (int k = 0; k < FAIRSHARE_KINDS; k++) {
            if (!names[k] || !*names[k])
                continue;
            struct fairshare_account *a =
                fairshare_account(fs, (enum fairshare_kind)k, names[k], true);
            a->now_usage += fairshare_run_usage(j->gpus, j->start_time, now, now, fs->half_life);
            a->now_raw += j->gpus * (now - j->start_time);
        }
    }
    for (int k = 0; k < FAIRSHARE_KINDS; k++) {
        double usage = 0, shares = 0;
        for (size_t i = 0; i < fs->n[k]; i++) {
            usage += fs->acct[k][i].now_usage;
            shares += fs->acct[k][i].shares;
        }
        for (size_t i = 0; i < fs->n[k]; i++) {
            struct fairshare_account *a = &fs->acct[k][i];
            a->norm_usage = usage > 0 ? a->now_usage / usage : 0;
            a->norm_shares = shares > 0 ? a->shares / shares : 0;
            a->factor = a->norm_shares > 0 ? exp2(-a->norm_usage / a->norm_shares) : 0;
        }
    }
}

/* The factor of name's account of kind (1: none, or no account). */
static double account_factor(struct fairshare *fs, enum fairshare_kind kind, const char *name)
{
    if (!name || !*name)
        return 1;
    struct fairshare_account *a = fairshare_account(fs, kind, name, false);
    return a ? a->factor : 1;
}

void fairshare_job_priority(struct fairshare *fs, const struct priority_weights *w,
                            const struct job *j, double now, struct priority_factors *out)
{
    out->priority = (double)j->priority / JOB_PRIORITY_MAX;
    out->fairshare = account_factor(fs, FAIRSHARE_USER, j->user) *
                     account_factor(fs, FAIRSHARE_PROJECT, j->project);
    double eligible = j->begin_time > j->submit_time ? j->begin_time : j->submit_time;
    double waited = now > eligible ? now - eligible : 0;
    out->age = w->max_age > 0 ? (waited < w->max_age ? waited / w->max_age : 1) : 1;
    out->effective = (double)w->priority * out->priority + (double)w->fairshare * out->fairshare +
                     (double)w->age * out->age;
}

bool priority_weights_reorder(const struct priority_weights *w)
{
    return w->fairshare != 0 || w->age != 0;
}

struct order_key {
    double effective;
    struct job *j;
};

static int order_key_cmp(const void *pa, const void *pb)
{
    const struct order_key *a = pa, *b = pb;
    if (a->effective != b->effective)
        return a->effective > b->effective ? -1 : 1;
    return scheduler_order(a->j, b->j);
}

void fairshare_order(struct fairshare *fs, const struct priority_weights *w,
                     struct job *const *queued, size_t n, struct job *const *running,
                     size_t n_running, double now, struct job **out)
{
    /* Accounts for the queued jobs' users and projects first: they count in the total
     * shares. Consecutive jobs mostly share a user, so the last one is remembered. */
    const char *last[FAIRSHARE_KINDS] = {NULL, NULL};
    for (size_t i = 0; i < n; i++) {
        const char *names[FAIRSHARE_KINDS] = {queued[i]->user, queued[i]->project};
        for (int k = 0; k < FAIRSHARE_KINDS; k++)
            if (names[k] && *names[k] && (!last[k] || strcmp(names[k], last[k]) != 0)) {
                fairshare_account(fs, (enum fairshare_kind)k, names[k], true);
                last[k] = names[k];
            }
    }
    fairshare_update(fs, running, n_running, now);
    struct order_key *keys = xmalloc((n ? n : 1) * sizeof(*keys));
    for (size_t i = 0; i < n; i++) {
        struct priority_factors f;
        fairshare_job_priority(fs, w, queued[i], now, &f);
        keys[i] = (struct order_key){f.effective, queued[i]};
    }
    qsort(keys, n, sizeof(*keys), order_key_cmp);
    for (size_t i = 0; i < n; i++)
        out[i] = keys[i].j;
    free(keys);
}
