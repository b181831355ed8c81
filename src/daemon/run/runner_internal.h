/* What runner.c (a running job's life) and runner_adopt.c (re-adopting running jobs after
 * a restart) share. Not for other modules: runner.h is the runner's interface. */
#ifndef GFLOW_RUNNER_INTERNAL_H
#define GFLOW_RUNNER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "exitfile.h"

struct gflowd;
struct job;
struct loop_timer;
struct orphans;

/* Per running job, in job->daemon.runtime. */
struct run {
    struct gflowd *d;
    int64_t job_id;
    pid_t pid;
    int64_t start;  /* the shim's /proc start time */
    int pidfd;      /* -1 while an adopted shim's pid is not known yet, and once it is gone */
    bool our_child; /* forked by this daemon, so we reap it */
    int sock;       /* a standby's socket (launch.h, SHIM_CTL_*); -1: none */
    struct supervisor *sup; /* the supervisor that runs the job (launch.h); NULL: a shim */
    struct loop_timer *limit_timer;
    struct loop_timer *warn_timer; /* --signal: SECS before the time limit */
    struct loop_timer *kill_timer; /* preemption: SIGKILL once its grace is over */
    double preempt_grace;          /* seconds between the preemption's SIGTERM and SIGKILL */
    /* Adoption waiting for the shim to write its pid; a pidfd that could not be opened. */
    struct loop_timer *retry_timer;
    /* Once the shim is gone (the job stays R, with its GPUs, until this is done): */
    bool gone;
    bool have_status; /* our child: how it ended */
    int wait_status;
    struct loop_timer *gone_timer; /* the next look at what it left */
    double gone_delay;             /* backoff while its files cannot be read */
    double round_delay;            /* backoff between rounds of killing what it left */
    double gone_at;                /* monotonic, when the daemon noticed */
    bool lost;                     /* no exit file: the verdict below is set */
    struct exit_verdict verdict;   /* how the job ends once nothing is left */
    struct orphans *orphans;       /* what is left of the job (NULL: nothing ran) */
    struct gpuacct *acct;          /* its GPU accounting (gpuacct_run.h); NULL: none yet */
};
/* dir/<id><suffix>, malloc'd. */
char *run_job_file(const char *dir, int64_t id, const char *suffix);
/* j's run (job->daemon.runtime), made for it. */
struct run *run_new(struct gflowd *d, struct job *j);
/* The job of a timer's run, if it still runs under that run. */
struct job *run_timer_job(struct run *r);
/* Starts watching the shim through a pidfd: 0, or -1 if it is gone (or no pidfd now). */
int run_watch_shim(struct run *r, pid_t pid);
/* Stops watching the shim's pidfd. */
void run_unwatch_shim(struct run *r);
/* The shim has ended: no more watching, no more timers; then collect what it left. */
void run_shim_gone(struct gflowd *d, struct job *j, int status, bool have_status);
/* Reads an old shim's exit file into j and ends it: 0; -1 none; -2 not now (errno). */
int run_apply_exit_file(struct gflowd *d, struct job *j);
/* Arms j's time limit and --signal warning (warned: it was sent already). */
void run_arm_time_limit(struct job *j, struct run *r, bool warned);
/* Puts a job committed as R but never launched back in the queue. */
void run_put_back(struct gflowd *d, struct job *j);
/* Re-adopts r's job after delay seconds (runner_adopt.c). */
void run_adopt_later(struct run *r, double delay);

#endif
