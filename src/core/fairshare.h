/* fairshare: usage accounting per user and per project, and the multifactor priority
 * that orders the queued jobs (Slurm's multifactor idea, kept simple). Pure: the
 * daemon persists the accounts (its store's usage table) and the replay uses the same
 * code in virtual time.
 *
 * Usage: GPU-seconds with exponential decay (half-life h): a GPU-second used t seconds
 * ago counts 2^(-t/h). An account keeps its usage of ended jobs as a value at a time
 * (usage, at); it is decayed lazily, when read or charged, so nothing runs per second or
 * per job. A job is charged once, when it ends, with the exact decayed integral of its
 * run (gpus x h/ln2 x (2^(-(now-end)/h) - 2^(-(now-start)/h))); a running job's share so
 * far is computed from its start time whenever the factors are (fairshare_update). So
 * the stored usage never holds a running job's part: a restart neither loses nor counts
 * it twice, and nothing needs writing but the job's end.
 *
 * Fair-share factor (Slurm's classic): F = 2^(-U/S), U = the account's usage over the
 * usage of all accounts of its kind, S = its shares over the shares of all of them (an
 * account with no shares configured has 1). In 0..1: 1 with no usage, 0.5 for using
 * exactly one's share. A job's factor is its user's, times its project's if it has one.
 *
 * Effective priority = w_priority x priority/255 + w_fairshare x F + w_age x age, age =
 * min(1, waited / max_age) from submission (or --begin, if later). With w_fairshare =
 * w_age = 0 the order is exactly scheduler_order's (priority, then id), and the daemon
 * keeps it without sorting; otherwise it sorts the queue before each pass (O(users +
 * running jobs) for the factors, O(n log n) for the sort). */
#ifndef GFLOW_FAIRSHARE_H
#define GFLOW_FAIRSHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

enum fairshare_kind { FAIRSHARE_USER, FAIRSHARE_PROJECT, FAIRSHARE_KINDS };

struct fairshare_account {
    char *name;
    double usage;  /* decayed GPU-seconds of ended jobs, as of `at` */
    double at;     /* unix seconds */
    double raw;    /* GPU-seconds of ended jobs, not decayed */
    double shares; /* configured; 1 if not */
    bool stored;   /* has a row in the daemon's store (charged at least once) */
    /* Set by fairshare_update (with the running jobs' part; not stored). */
    double now_usage, now_raw, norm_usage, norm_shares, factor;
};

struct fairshare {
    double half_life; /* seconds; <= 0: no decay */
    struct fairshare_account *acct[FAIRSHARE_KINDS];
    size_t n[FAIRSHARE_KINDS], cap[FAIRSHARE_KINDS];
    /* Configured shares ("alice=2,bob=1"), kept to give new accounts theirs. */
    char *shares_text[FAIRSHARE_KINDS];
};

/* The weights of the effective priority (scheduler.priority_weight_*) and the wait that
 * gives the full age factor (scheduler.priority_max_age, seconds). */
struct priority_weights {
    int64_t priority, fairshare, age;
    double max_age;
};
/* scheduler.fairshare_half_life's and scheduler.priority_max_age's default: 7 days. */
#define FAIRSHARE_HALF_LIFE_DEFAULT (7 * 86400.0)
#define PRIORITY_MAX_AGE_DEFAULT (7 * 86400.0)
/* The default priority weight: a job's effective priority is then its --priority. */
#define PRIORITY_WEIGHT_PRIORITY_DEFAULT 255

/* A job's factors (each 0..1) and its effective priority. */
struct priority_factors {
    double priority, fairshare, age, effective;
};

void fairshare_init(struct fairshare *fs, double half_life);
void fairshare_free(struct fairshare *fs); /* leaves fs initialised, without accounts */
/* Forgets the accounts' usage (not their configured shares): before loading them again. */
void fairshare_clear_usage(struct fairshare *fs);

/* Parses shares text: "name=N,name=N" (N > 0, a number), "" for none. 0, or -1 with
 * *err naming the bad part. With fs, also applies them to accounts of `kind` (made if
 * missing; those not named get 1). */
int fairshare_set_shares(struct fairshare *fs, enum fairshare_kind kind, const char *text,
                         char **err);

/* v decayed over dt seconds. */
double fairshare_decay(double v, double dt, double half_life);
/* The decayed GPU-seconds, as of now, of gpus GPUs used from start to end (<= now). */
double fairshare_run_usage(int gpus, double start, double end, double now, double half_life);

/* The account of kind named name (NULL if none and !create). */
struct fairshare_account *fairshare_account(struct fairshare *fs, enum fairshare_kind kind,
                                            const char *name, bool create);
/* Adds a stored row (the daemon's load). */
void fairshare_load(struct fairshare *fs, enum fairshare_kind kind, const char *name, double usage,
                    double at, double raw);
/* Charges the ended (or ending) job j's run, from start_time to end_time, to its user
 * and project; out (may be NULL) gets the accounts charged (NULL where none): the
 * daemon writes them. Jobs without GPUs or that never started charge nothing. */
void fairshare_charge_job(struct fairshare *fs, const struct job *j,
                          struct fairshare_account *out[FAIRSHARE_KINDS]);

/* Computes every account's usage at now with the running jobs' part, and its factor. */
void fairshare_update(struct fairshare *fs, struct job *const *running, size_t n_running,
                      double now);
/* j's factors at now (after fairshare_update; a user or project without an account
 * counts as unused: factor 1). */
void fairshare_job_priority(struct fairshare *fs, const struct priority_weights *w,
                            const struct job *j, double now, struct priority_factors *out);
/* Whether the weights change the order from scheduler_order's. */
bool priority_weights_reorder(const struct priority_weights *w);
/* Writes queued[0..n) into out in effective-priority order (ties: scheduler_order),
 * making accounts for their users and projects and updating the factors first. */
void fairshare_order(struct fairshare *fs, const struct priority_weights *w,
                     struct job *const *queued, size_t n, struct job *const *running,
                     size_t n_running, double now, struct job **out);

#endif
