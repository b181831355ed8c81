/* slurm: the slurm backend (see slurm.h). */
#include "slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "files.h"
#include "jobenv.h"
#include "jobs/jobs.h"
#include "log.h"
#include "loop.h"
#include "run/runner.h"
#include "slurm_cmd.h"
#include "slurm_nodes.h"
#include "slurmspec.h"
#include "store/store.h"
#include "util.h"

/* sbatch commands running at once, so that a burst of submissions does not fork
 * thousands of processes; the rest wait for the next pass. */
#define SLURM_MAX_SUBMITS 8
/* How far into the backlog a drain looks for a job whose owner has no sbatch running. */
#define SLURM_BACKLOG_WINDOW 256

/* ---- the backend's state ---- */

/* The jobs the running sacct was asked of (by Slurm id). */
struct sacct_ask {
    int64_t *sids;
    size_t n;
};

/* Held by struct gflowd (d->slurm) from slurm_start to slurm_stop. */
struct slurm_backend {
    struct loop_timer *poll_timer;
    bool polling;
    bool reconciled; /* a first poll has answered */
    size_t submitting;
    bool querying; /* an sacct runs */
    char *tag;     /* slurm_site.tag */
    /* Jobs whose Slurm id came while a poll ran (its answer may predate them). */
    int64_t *fresh;
    size_t fresh_len, fresh_cap;
    int64_t *backlog; /* jobs waiting for a free sbatch slot (SLURM_MAX_SUBMITS) */
    size_t backlog_len, backlog_cap;
    /* The owners of the sbatch commands running: one at a time per user, so that Slurm
     * gets a user's jobs (an array's tasks) in gflow's order. */
    int64_t *busy_uids;
    size_t busy_len, busy_cap;
    struct sacct_ask asked;
    struct slurm_nodes *nodes; /* read at every poll, for status and ginfo */
};

static void push_id(int64_t **v, size_t *len, size_t *cap, int64_t id)
{
    if (*len == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *v = xrealloc(*v, *cap * sizeof(**v));
    }
    (*v)[(*len)++] = id;
}

static bool uid_busy(const struct slurm_backend *sl, int64_t uid)
{
    for (size_t i = 0; i < sl->busy_len; i++)
        if (sl->busy_uids[i] == uid)
            return true;
    return false;
}

static void uid_done(struct slurm_backend *sl, int64_t uid)
{
    for (size_t i = 0; i < sl->busy_len; i++)
        if (sl->busy_uids[i] == uid) {
            sl->busy_uids[i] = sl->busy_uids[--sl->busy_len];
            return;
        }
}

/* Sets j's backend_reason (reason copied; NULL: none); whether it changed. */
static bool set_backend_reason(struct job *j, const char *reason)
{
    if (reason && j->backend_reason && strcmp(reason, j->backend_reason) == 0)
        return false;
    if (!reason && !j->backend_reason)
        return false;
    free(j->backend_reason);
    j->backend_reason = reason ? xstrdup(reason) : NULL;
    return true;
}

/* Ends j as Slurm says it ended. */
static void end_job_for(struct gflowd *d, struct job *j, enum job_state state,
                        enum job_reason reason, int64_t reason_job, const char *detail)
{
    set_backend_reason(j, NULL);
    if (jobs_set_state(d->jobs, j, state, reason, reason_job, detail) < 0)
        log_error("job %lld: refused transition to %s", (long long)j->id, job_state_short(state));
    jobs_mark_dirty(d->jobs); /* its dependents and its group may go on */
    char *why = job_reason_string(j);
    log_info("job %lld (Slurm %lld) ended: %s%s%s", (long long)j->id, (long long)j->backend_id,
             job_state_short(state), why ? " " : "", why ? why : "");
    free(why);
}

static void end_job(struct gflowd *d, struct job *j, enum job_state state, enum job_reason reason,
                    const char *detail)
{
    end_job_for(d, j, state, reason, 0, detail);
}

/* The job j (cancelled by Slurm, not by gflow) waited for in Slurm and that can never
 * be met (Slurm's --kill-on-invalid-dep), or 0. */
static int64_t failed_dependency(const struct job *j, const struct slurm_job_info *s)
{
    int64_t failed = 0;
    if (j->n_deps && job_deps_outcome(j, &failed) == JOB_DEPS_FAILED && failed)
        return failed;
    if (strcmp(s->reason, "DependencyNeverSatisfied") != 0)
        return 0;
    for (size_t k = 0; k < j->n_deps; k++) /* gflow has not seen it end yet */
        if (j->deps[k].status != JOB_DEP_MET)
            return j->deps[k].id;
    return 0;
}

/* ---- submitting ---- */

static void drain_backlog(struct gflowd *d);

static void submitted_cb(struct child *c, bool ok)
{
    struct gflowd *d = c->d;
    struct slurm_backend *sl = d->slurm;
    sl->submitting--;
    uid_done(sl, c->uid);
    struct job *j = jobs_get(d->jobs, c->job_id);
    int64_t sid = ok && c->out.len ? slurmspec_parse_sbatch(c->out.buf) : -1;
    if (!j || j->state != JOB_RUNNING) {
        drain_backlog(d);
        if (sid > 0) { /* it ended (cancelled) while sbatch ran */
            log_info("job %lld: submitted as Slurm %lld after it ended; cancelling that",
                     (long long)c->job_id, (long long)sid);
            struct job gone = {.id = c->job_id, .backend_id = sid};
            slurm_signal(d, &gone, SIGTERM);
        }
        return;
    }
    if (sid <= 0) {
        char *why = first_line(c);
        log_error("job %lld: sbatch failed: %s", (long long)j->id, why);
        /* Slurm's text already names its command ("sbatch: error: ..."): said once. */
        char *detail =
            str_starts_with(why, "sbatch: ") ? xstrdup(why) : xasprintf("sbatch: %s", why);
        j->backend_id = 0;
        end_job(d, j, JOB_FAILED, JOB_REASON_LAUNCH_FAILED, detail);
        free(detail);
        free(why);
    } else {
        j->backend_id = sid;
        set_backend_reason(j, "Slurm: submitted");
        if (jobs_save(d->jobs, j) < 0) /* the comment tag finds it if this is lost */
            log_error("job %lld: cannot store its Slurm id %lld", (long long)j->id, (long long)sid);
        if (sl->polling)
            push_id(&sl->fresh, &sl->fresh_len, &sl->fresh_cap, j->id);
        log_info("job %lld submitted to Slurm as job %lld", (long long)j->id, (long long)sid);
        jobs_deps_handed_over(d->jobs, j);
        if (j->end_request != JOB_END_NONE) /* cancelled while sbatch ran */
            slurm_signal(d, j, SIGTERM);
    }
    drain_backlog(d);
    if (jobs_commit(d->jobs) < 0)
        log_error("slurm: cannot commit a submission's outcome");
}

/* The environment sbatch runs with, which it exports to the job: the job's (gflow's
 * variables included) less gflow's word on GPUs (Slurm sets its own) and any Slurm or
 * sbatch setting the submitter's shell carried, plus the daemon's SLURM_CONF. */
static void sbatch_env(const struct gflowd *d, const struct job *full, struct strvec *env)
{
    struct strbuf built;
    strbuf_init(&built);
    struct jobenv_input in = {.uuids = ""};
    jobenv_build(full, &in, &built);
    for (size_t at = 0; at < built.len; at += strlen(built.buf + at) + 1) {
        const char *e = built.buf + at;
        if (!slurmspec_env_is_local_gpu(e) && !str_starts_with(e, "SLURM_") &&
            !str_starts_with(e, "SBATCH_"))
            strvec_push(env, e);
    }
    strbuf_free(&built);
    (void)d;
    const char *conf = getenv("SLURM_CONF");
    if (conf)
        strvec_pushf(env, "SLURM_CONF=%s", conf);
    if (!env->v)
        strvec_push(env, "GFLOW_BACKEND=slurm");
}

static void submit(struct gflowd *d, struct job *j);

/* Submits the jobs that wait for a free sbatch slot, in order, while there are slots. */
static void drain_backlog(struct gflowd *d)
{
    struct slurm_backend *sl = d->slurm;
    /* A window of the backlog is looked at (a long one is not walked at each sbatch's
     * end): a job goes if a slot is free and its owner has no sbatch running; the rest
     * keep their order. */
    size_t window = sl->backlog_len < SLURM_BACKLOG_WINDOW ? sl->backlog_len : SLURM_BACKLOG_WINDOW;
    size_t keep = 0, i = 0;
    for (; i < window && sl->submitting < SLURM_MAX_SUBMITS; i++) {
        int64_t id = sl->backlog[i];
        struct job *j = jobs_get(d->jobs, id);
        if (!j || j->state != JOB_RUNNING || j->backend_id != 0)
            continue; /* ended meanwhile */
        if (uid_busy(sl, j->uid))
            sl->backlog[keep++] = id;
        else
            submit(d, j);
    }
    if (i == 0)
        return; /* nothing looked at (and maybe no backlog array at all) */
    memmove(sl->backlog + keep, sl->backlog + i, (sl->backlog_len - i) * sizeof(*sl->backlog));
    sl->backlog_len = keep + (sl->backlog_len - i);
}

/* [hooks] are run by gflow-shim, which jobs in Slurm do not have: said once for each
 * setting of them (a reload that sets other ones says it again), never silently. Slurm's
 * own Prolog/Epilog (slurm.conf) are the place for them there. */
static void warn_hooks(const struct gflowd *d)
{
    static char *warned; /* the hooks last warned about, "pre\npost" */
    const char *pre = d->cfg.hooks_pre ? d->cfg.hooks_pre : "";
    const char *post = d->cfg.hooks_post ? d->cfg.hooks_post : "";
    if (!*pre && !*post)
        return;
    char *now = xasprintf("%s\n%s", pre, post);
    if (warned && strcmp(warned, now) == 0) {
        free(now);
        return;
    }
    free(warned);
    warned = now;
    log_warn("[hooks] pre/post are not run for jobs of the Slurm backend (backend.kind = "
             "\"slurm\"): set Prolog/Epilog in slurm.conf instead");
}

void slurm_launch(struct gflowd *d, struct job *j)
{
    struct slurm_backend *sl = d->slurm;
    warn_hooks(d);
    /* The hand-over is no start: a job has a start time once Slurm says it started. */
    if (j->start_time != 0) {
        j->start_time = 0;
        if (jobs_save(d->jobs, j) < 0)
            log_error("job %lld: cannot store that Slurm has not started it", (long long)j->id);
    }
    if (j->end_request == JOB_END_NONE && sl->reconciled &&
        (sl->submitting >= SLURM_MAX_SUBMITS || sl->backlog_len || uid_busy(sl, j->uid))) {
        push_id(&sl->backlog, &sl->backlog_len, &sl->backlog_cap, j->id); /* in order */
        j->backend_id = 0;
        drain_backlog(d);
        return;
    }
    submit(d, j);
}

/* --dependency on the Slurm ids of the jobs j still waits for (each in Slurm: the pass
 * hands j over only then, jobs_set_hand_over_early); those already ended were judged by
 * gflow. */
static void push_dependency(struct gflowd *d, const struct job *j, struct strvec *argv)
{
    if (job_deps_outcome(j, NULL) == JOB_DEPS_READY) /* met (for --depends-on-any: one) */
        return;
    struct slurm_dep *deps = xmalloc((j->n_deps ? j->n_deps : 1) * sizeof(*deps));
    size_t n = 0;
    for (size_t k = 0; k < j->n_deps; k++) {
        const struct job *x = jobs_get(d->jobs, j->deps[k].id);
        if (j->deps[k].status == JOB_DEP_PENDING && x && x->backend_id > 0)
            deps[n++] = (struct slurm_dep){job_dep_kind_name(j->deps[k].kind), x->backend_id};
    }
    slurmspec_dependency_args(deps, n, j->deps_any, j->auto_cancel, argv);
    free(deps);
}

static void submit(struct gflowd *d, struct job *j)
{
    struct slurm_backend *sl = d->slurm;
    if (j->end_request != JOB_END_NONE) { /* cancelled while its start waited for a commit */
        end_job(d, j, JOB_CANCELLED, JOB_REASON_CANCELLED_BY_USER, NULL);
        return;
    }
    if (!sl->reconciled && sl->submitting == 0) { /* (an sbatch still running gives its id) */
        j->backend_id = 0; /* the first poll submits it if Slurm does not know it */
        return;
    }
    struct job full;
    job_init(&full);
    if (store_get_job(d->store, j->id, &full, true) != 0) {
        job_clear(&full);
        end_job(d, j, JOB_FAILED, JOB_REASON_LAUNCH_FAILED, "cannot read the job from the store");
        return;
    }
    char *refusal = slurmspec_refusal(&full);
    if (refusal) { /* refused at submit; this is for a job from before the switch */
        end_job(d, j, JOB_FAILED, JOB_REASON_LAUNCH_FAILED, refusal);
        free(refusal);
        job_clear(&full);
        return;
    }
    char *script = slurmspec_batch_script(&full);
    char *script_path = xasprintf("%s/%lld.slurm", d->paths.run_dir, (long long)j->id);
    if (write_file(script_path, script, strlen(script), 0755) < 0 ||
        (d->system && j->uid && chown(script_path, j->uid, j->gid) < 0)) {
        char *why = xasprintf("cannot write %s: %s", script_path, strerror(errno));
        end_job(d, j, JOB_FAILED, JOB_REASON_LAUNCH_FAILED, why);
        free(why);
        free(script);
        free(script_path);
        job_clear(&full);
        return;
    }
    free(script);
    struct slurm_site site = {
        .partition = d->cfg.backend_partition,
        .account = d->cfg.backend_account,
        .qos = d->cfg.backend_qos,
        .sbatch_args = d->cfg.backend_sbatch_args,
        .tag = sl->tag,
    };
    struct strvec argv, env;
    strvec_init(&argv);
    strvec_init(&env);
    strvec_push(&argv, "sbatch");
    char *log_path = runner_log_path(d, j->id);
    slurmspec_sbatch_args(&full, &site, log_path, d->system && j->uid != d->uid, &argv);
    free(log_path);
    push_dependency(d, j, &argv);
    strvec_push(&argv, script_path);
    sbatch_env(d, &full, &env);
    job_clear(&full);
    struct child *c = child_new(d, j->id, submitted_cb);
    c->script_path = script_path;
    if (child_run(c, argv.v, env.v) < 0) {
        char *why = xasprintf("cannot run sbatch: %s", strerror(errno));
        end_job(d, j, JOB_FAILED, JOB_REASON_LAUNCH_FAILED, why);
        free(why);
        child_free(c);
    } else {
        j->backend_id = -1;
        sl->submitting++;
        c->uid = j->uid;
        push_id(&sl->busy_uids, &sl->busy_len, &sl->busy_cap, j->uid);
    }
    strvec_free(&argv);
    strvec_free(&env);
}

/* ---- replies waiting for commands ---- */

struct slurm_wait {
    int fd[2];       /* the last command's end writes a byte to fd[1] */
    int refs;        /* the reply and each command (the loop's thread only) */
    int pending;     /* commands not yet ended */
    size_t cur;      /* the result the next command answers (slurm_wait_at) */
    json_t *body;    /* the reply */
    json_t *results; /* in body: one result per job (NULL: body is the one job's) */
    unsigned status;
};

struct slurm_wait *slurm_wait_new(void)
{
    struct slurm_wait *w = xcalloc(1, sizeof(*w));
    if (pipe2(w->fd, O_CLOEXEC) < 0) {
        free(w);
        return NULL;
    }
    w->refs = 1;
    w->status = 200;
    return w;
}

void slurm_wait_at(struct slurm_wait *w, size_t index)
{
    if (w)
        w->cur = index;
}

bool slurm_wait_pending(const struct slurm_wait *w)
{
    return w && w->pending > 0;
}

void slurm_wait_set(struct slurm_wait *w, json_t *body, unsigned status, json_t *results)
{
    json_decref(w->body);
    w->body = body;
    w->status = status;
    w->results = results;
}

void slurm_wait_release(void *arg)
{
    struct slurm_wait *w = arg;
    if (!w || --w->refs > 0)
        return;
    close(w->fd[0]);
    close(w->fd[1]);
    json_decref(w->body);
    free(w);
}

json_t *slurm_wait_work(void *arg, unsigned *status)
{
    struct slurm_wait *w = arg;
    char b;
    ssize_t n;
    do
        n = read(w->fd[0], &b, 1);
    while (n < 0 && errno == EINTR);
    *status = w->status;
    json_t *body = w->body;
    w->body = NULL;
    return body;
}

/* c, a command a reply waits for (w), has been started. */
static void wait_attach(struct child *c, struct slurm_wait *w)
{
    if (!w)
        return;
    c->wait = w;
    c->wait_index = w->cur;
    w->refs++;
    w->pending++;
}

/* The command of c has ended (ok: it succeeded; slurm_said: what Slurm did, or NULL):
 * its result in the waiting reply says so; the last one lets the reply go. */
static void wait_answer(struct child *c, bool ok, const char *slurm_said)
{
    struct slurm_wait *w = c->wait;
    if (!w)
        return;
    c->wait = NULL;
    json_t *entry = w->results ? json_array_get(w->results, c->wait_index) : w->body;
    if (ok) {
        if (slurm_said && json_is_object(entry))
            json_object_set_new(entry, "slurm", json_string(slurm_said));
    } else {
        char *why = first_line(c);
        json_t *err = json_pack("{s:s}", "error", *why ? why : "the Slurm command failed");
        free(why);
        if (w->results) { /* as route_bulk says a refused id */
            json_object_set_new(err, "id", json_integer(c->job_id));
            json_object_set_new(err, "status", json_integer(409));
            json_array_set_new(w->results, c->wait_index, err);
        } else {
            slurm_wait_set(w, err, 409, NULL);
        }
    }
    if (--w->pending == 0) {
        ssize_t n;
        do
            n = write(w->fd[1], "", 1);
        while (n < 0 && errno == EINTR);
    }
    slurm_wait_release(w);
}

/* ---- cancelling ---- */

static void scancel_done_cb(struct child *c, bool ok)
{
    struct job *j = jobs_get(c->d->jobs, c->job_id);
    char *said = NULL;
    if (ok && c->wait)
        said = j && j->state == JOB_RUNNING && j->backend_reason /* Slurm had not started it */
                   ? xasprintf("scancel: job %lld removed from Slurm's queue",
                               (long long)j->backend_id)
                   : xasprintf("scancel: job %lld signalled; CG until Slurm has stopped it",
                               j ? (long long)j->backend_id : 0LL);
    wait_answer(c, ok, said);
    free(said);
    if (!ok) {
        char *why = first_line(c);
        log_warn("job %lld: scancel failed: %s", (long long)c->job_id, why);
        free(why);
    }
}

static int run_scancel(struct gflowd *d, struct job *j, int sig, struct slurm_wait *w)
{
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "scancel");
    if (sig != SIGTERM && sig != SIGKILL)
        strvec_pushf(&argv, "--signal=%d", sig);
    strvec_pushf(&argv, "%lld", (long long)j->backend_id);
    struct child *c = child_new(d, j->id, scancel_done_cb);
    int rc = child_run(c, argv.v, NULL);
    if (rc < 0) {
        log_error("job %lld: cannot run scancel: %s", (long long)j->id, strerror(errno));
        child_free(c);
    } else {
        wait_attach(c, w);
    }
    strvec_free(&argv);
    return rc;
}

char *slurm_cancel(struct gflowd *d, struct job *j, struct slurm_wait *w)
{
    if (run_scancel(d, j, SIGTERM, w) < 0)
        return xasprintf("cannot run scancel: %s", strerror(errno));
    return NULL;
}

void slurm_signal(struct gflowd *d, struct job *j, int sig)
{
    if (j->backend_id <= 0)
        return; /* not in Slurm yet: submitted_cb or the poll cancels it when it is */
    run_scancel(d, j, sig, NULL);
}

void slurm_signal_cb(void *arg, struct job *j, int sig)
{
    slurm_signal(arg, j, sig);
}

/* ---- hold, release, update: scontrol ---- */

static void arm_poll(struct gflowd *d, double delay);

static void scontrol_done_cb(struct child *c, bool ok)
{
    struct gflowd *d = c->d;
    struct slurm_backend *sl = d->slurm;
    struct job *j = jobs_get(d->jobs, c->job_id);
    wait_answer(c, ok, NULL); /* (sent once this returns: the record follows first) */
    if (!ok) {
        char *why = first_line(c);
        log_warn("job %lld: scontrol failed: %s", (long long)c->job_id, why);
        free(why);
        return;
    }
    if (!sl->polling) /* its new reason soon */
        arm_poll(d, 0.2);
    if (!c->update || !j)
        return;
    json_t *v;
    if ((v = json_object_get(c->update, JOB_KEY_NAME))) {
        free(j->name);
        j->name = xstrdup(json_string_value(v));
    }
    if ((v = json_object_get(c->update, JOB_KEY_TIME_LIMIT)))
        j->time_limit = (int64_t)json_integer_value(v);
    if ((v = json_object_get(c->update, JOB_KEY_PRIORITY)))
        j->priority = (int)json_integer_value(v);
    if ((v = json_object_get(c->update, JOB_KEY_NICE)))
        j->nice = (int)json_integer_value(v);
    if (jobs_save(d->jobs, j) < 0 || jobs_commit(d->jobs) < 0)
        log_error("job %lld: cannot store its update", (long long)j->id);
}

static char *run_scontrol(struct gflowd *d, struct job *j, struct strvec *argv, json_t *update,
                          struct slurm_wait *w)
{
    struct child *c = child_new(d, j->id, scontrol_done_cb);
    c->update = update ? json_incref(update) : NULL;
    if (child_run(c, argv->v, NULL) < 0) {
        char *why = xasprintf("cannot run scontrol: %s", strerror(errno));
        child_free(c);
        return why;
    }
    wait_attach(c, w);
    return NULL;
}

/* Why j cannot be changed in Slurm now, or NULL. */
static char *not_in_slurm(const struct job *j, const char *what)
{
    if (j->backend_id <= 0)
        return xasprintf("job %lld is being submitted to Slurm; %s it once it is there (a "
                         "moment)",
                         (long long)j->id, what);
    return NULL;
}

char *slurm_hold(struct gflowd *d, struct job *j, bool hold, struct slurm_wait *w)
{
    char *why = not_in_slurm(j, hold ? "hold" : "release");
    if (why)
        return why;
    if (!job_backend_pending(j))
        return xasprintf("job %lld runs in Slurm (job %lld); only a job Slurm has not started "
                         "can be %s",
                         (long long)j->id, (long long)j->backend_id, hold ? "held" : "released");
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "scontrol");
    /* uhold: a user's hold (JobHeldUser), which the user may release; a plain hold by
     * root would be an admin's (JobHeldAdmin). */
    strvec_push(&argv, hold ? "uhold" : "release");
    strvec_pushf(&argv, "%lld", (long long)j->backend_id);
    why = run_scontrol(d, j, &argv, NULL, w);
    strvec_free(&argv);
    if (!why)
        log_info("job %lld: scontrol %s %lld", (long long)j->id, hold ? "uhold" : "release",
                 (long long)j->backend_id);
    return why;
}

char *slurm_update(struct gflowd *d, struct job *j, json_t *over, struct slurm_wait *w)
{
    char *why = not_in_slurm(j, "update");
    if (why)
        return why;
    const char *key;
    json_t *v;
    json_object_foreach (over, key, v) {
        bool ok = strcmp(key, JOB_KEY_NAME) == 0 ? json_is_string(v) && *json_string_value(v) &&
                                                       !strpbrk(json_string_value(v), " \t\n")
                  : strcmp(key, JOB_KEY_TIME_LIMIT) == 0
                      ? json_is_integer(v) && json_integer_value(v) > 0
                  : strcmp(key, JOB_KEY_PRIORITY) == 0 || strcmp(key, JOB_KEY_NICE) == 0
                      ? json_is_integer(v) && json_integer_value(v) >= 0 &&
                            json_integer_value(v) <= JOB_PRIORITY_MAX
                      : false;
        if (!ok)
            return xasprintf("job %lld is in Slurm (job %lld): only --time (> 0), --name (no "
                             "spaces) and --priority/--nice can be changed there, not '%s'",
                             (long long)j->id, (long long)j->backend_id, key);
    }
    struct strvec argv;
    strvec_init(&argv);
    strvec_push(&argv, "scontrol");
    strvec_push(&argv, "update");
    strvec_pushf(&argv, "JobId=%lld", (long long)j->backend_id);
    if ((v = json_object_get(over, JOB_KEY_NAME)))
        strvec_pushf(&argv, "JobName=%s", json_string_value(v));
    if ((v = json_object_get(over, JOB_KEY_TIME_LIMIT))) {
        /* whole minutes, as at submit: the record is what Slurm enforces */
        long long s = (long long)slurm_round_limit(json_integer_value(v));
        json_object_set_new(over, JOB_KEY_TIME_LIMIT, json_integer(s));
        strvec_pushf(&argv, "TimeLimit=%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    }
    if ((v = json_object_get(over, JOB_KEY_PRIORITY)) || (v = json_object_get(over, JOB_KEY_NICE)))
        strvec_pushf(&argv, "Nice=%d", slurmspec_nice((int)json_integer_value(v)));
    why = run_scontrol(d, j, &argv, over, w);
    strvec_free(&argv);
    return why;
}

/* ---- time limits: whole minutes ---- */

int64_t slurm_round_limit(int64_t secs)
{
    return secs > 0 && secs % 60 ? (secs / 60 + 1) * 60 : secs;
}

json_t *slurm_round_limits(const struct gflowd *d, struct job **jobs, size_t n)
{
    if (!daemon_on_slurm(d))
        return NULL;
    json_t *warnings = NULL;
    for (size_t i = 0; i < n; i++) {
        int64_t was = jobs[i]->time_limit, now = slurm_round_limit(was);
        if (now == was)
            continue;
        jobs[i]->time_limit = now;
        if (!warnings)
            warnings = json_array();
        char *note =
            xasprintf("time limit %lld:%02lld:%02lld rounded up to %lld:%02lld:%02lld: "
                      "Slurm counts whole minutes",
                      (long long)(was / 3600), (long long)(was / 60 % 60), (long long)(was % 60),
                      (long long)(now / 3600), (long long)(now / 60 % 60), (long long)(now % 60));
        if (json_array_size(warnings) < 10) /* an array of 1000 tasks says it once */
            json_array_append_new(warnings, json_string(note));
        free(jobs[i]->backend_note); /* gjob show's SlurmNote */
        jobs[i]->backend_note = note;
    }
    if (warnings && json_array_size(warnings) > 1) { /* the same words for every task */
        json_t *first = json_incref(json_array_get(warnings, 0));
        json_t *all = json_array();
        const char *w0 = json_string_value(first);
        bool same = true;
        size_t k;
        json_t *w;
        json_array_foreach (warnings, k, w)
            same = same && strcmp(json_string_value(w), w0) == 0;
        if (same) {
            json_array_append(all, first);
            json_decref(warnings);
            warnings = all;
        } else {
            json_decref(all);
        }
        json_decref(first);
    }
    return warnings;
}

/* ---- the poll ---- */

static void poll_cb(void *arg);

static void arm_poll(struct gflowd *d, double delay)
{
    struct slurm_backend *sl = d->slurm;
    loop_cancel_timer(sl->poll_timer);
    sl->poll_timer = loop_add_timer(delay, poll_cb, d);
}

/* Applies what Slurm says of j (its job s->slurm_id). */
static void apply_info(struct gflowd *d, struct job *j, const struct slurm_job_info *s)
{
    enum job_state state;
    enum job_reason reason;
    const char *detail;
    if (slurmspec_ended(s, j->end_request == JOB_END_CANCEL, &state, &reason, &detail)) {
        /* Slurm gives a job cancelled while pending a StartTime (its end) but no run
         * time: it never started, so it has no start and no exit code. */
        bool ran = j->start_time > 0 || s->ran;
        if (ran && s->start_time > 0)
            j->start_time = s->start_time;
        if (s->end_time > 0)
            j->end_time = s->end_time;
        j->exit_code = !ran || s->exit_signal ? -1 : s->exit_code;
        j->signal = ran ? s->exit_signal : 0;
        int64_t failed = state == JOB_CANCELLED && j->end_request != JOB_END_CANCEL
                             ? failed_dependency(j, s)
                             : 0;
        if (failed) /* as gflow's auto-cancel says it */
            end_job_for(d, j, state, JOB_REASON_DEPENDENCY_FAILED, failed, NULL);
        else
            end_job(d, j, state, reason, detail);
        return;
    }
    bool changed;
    if (slurmspec_pending(s)) { /* PD in gflow, with Slurm's reason */
        char *why = xasprintf("Slurm: %s", s->reason);
        changed = set_backend_reason(j, why);
        free(why);
    } else if ((changed = set_backend_reason(j, NULL))) { /* Slurm has started it */
        j->start_time = s->start_time > 0 ? s->start_time : now_wall();
        log_info("job %lld (Slurm %lld) started", (long long)j->id, (long long)j->backend_id);
    }
    if (changed && jobs_save(d->jobs, j) < 0)
        log_error("job %lld: cannot store its state in Slurm", (long long)j->id);
}

/* Applies what Slurm says of its job s, which names the gflow job id in its comment tag
 * (a job whose Slurm id gflow does not know: sbatch answered while gflowd was away). */
static void adopt(struct gflowd *d, const struct slurm_job_info *s, int64_t id)
{
    struct job *j = jobs_get(d->jobs, id);
    if (!j || j->state != JOB_RUNNING || j->backend_id > 0)
        return; /* another daemon's, long gone, or an older submission (cancelled) */
    if (j->backend_id == 0)
        log_info("job %lld found in Slurm as job %lld", (long long)j->id, (long long)s->slurm_id);
    j->backend_id = s->slurm_id;
    if (jobs_save(d->jobs, j) < 0)
        log_error("job %lld: cannot store its Slurm id", (long long)j->id);
    jobs_deps_handed_over(d->jobs, j);
    if (j->end_request != JOB_END_NONE)
        slurm_signal(d, j, SIGTERM);
    apply_info(d, j, s);
}

/* The R jobs with a Slurm id, by it (for the poll's lookups). */
struct by_sid {
    int64_t sid;
    int64_t id;
    bool seen;
};

static int by_sid_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct by_sid *)a)->sid, y = ((const struct by_sid *)b)->sid;
    return x < y ? -1 : x > y;
}

static struct by_sid *by_sid_build(struct gflowd *d, size_t *n)
{
    size_t nr;
    struct job **running = jobs_running(d->jobs, &nr);
    struct by_sid *v = xmalloc((nr ? nr : 1) * sizeof(*v));
    *n = 0;
    for (size_t i = 0; i < nr; i++)
        if (running[i]->backend_id > 0)
            v[(*n)++] = (struct by_sid){running[i]->backend_id, running[i]->id, false};
    qsort(v, *n, sizeof(*v), by_sid_cmp);
    return v;
}

static struct by_sid *by_sid_find(struct by_sid *v, size_t n, int64_t sid)
{
    struct by_sid key = {.sid = sid};
    return bsearch(&key, v, n, sizeof(*v), by_sid_cmp);
}

static bool is_fresh(const struct slurm_backend *sl, int64_t id)
{
    for (size_t i = 0; i < sl->fresh_len; i++)
        if (sl->fresh[i] == id)
            return true;
    return false;
}

static void query_sacct(struct gflowd *d, const int64_t *sids, size_t n);

static void polled_cb(struct child *c, bool ok)
{
    struct gflowd *d = c->d;
    struct slurm_backend *sl = d->slurm;
    sl->polling = false;
    arm_poll(d, (double)d->cfg.backend_poll_secs);
    if (!ok) {
        char *why = first_line(c);
        log_warn("slurm: scontrol show job failed: %s", why);
        free(why);
        sl->fresh_len = 0;
        return;
    }
    strbuf_adds(&c->out, ""); /* NUL-terminated */
    size_t nk;
    struct by_sid *known = by_sid_build(d, &nk);
    char *save = NULL;
    for (char *line = strtok_r(c->out.buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        struct slurm_job_info s;
        if (slurmspec_parse_job_line(line, &s) < 0)
            continue;
        struct by_sid *k = by_sid_find(known, nk, s.slurm_id);
        struct job *j;
        int64_t id;
        if (k) {
            k->seen = true;
            if ((j = jobs_get(d->jobs, k->id)) && j->state == JOB_RUNNING &&
                j->backend_id == s.slurm_id)
                apply_info(d, j, &s);
        } else if ((id = slurmspec_comment_id(s.comment, sl->tag)) > 0) {
            adopt(d, &s, id);
        }
    }
    /* Jobs Slurm no longer shows (ended longer than its MinJobAge ago, while gflowd was
     * away or slow): their end is asked of sacct. */
    int64_t *gone = xmalloc((nk ? nk : 1) * sizeof(*gone));
    size_t ng = 0;
    for (size_t i = 0; i < nk; i++) {
        struct job *j = jobs_get(d->jobs, known[i].id);
        if (!known[i].seen && !is_fresh(d->slurm, known[i].id) && j && j->state == JOB_RUNNING &&
            j->backend_id == known[i].sid)
            gone[ng++] = known[i].sid;
    }
    sl->fresh_len = 0;
    free(known);
    if (ng && !sl->querying)
        query_sacct(d, gone, ng);
    free(gone);
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    if (!sl->reconciled && sl->submitting == 0) { /* (an sbatch still running gives its id) */
        /* R jobs Slurm does not know were never submitted: now they are. */
        sl->reconciled = true;
        struct job **todo = xmalloc((n ? n : 1) * sizeof(*todo));
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (running[i]->backend_id == 0)
                todo[m++] = running[i];
        for (size_t i = 0; i < m; i++)
            slurm_launch(d, todo[i]);
        free(todo);
        if (m)
            log_info("slurm: %zu job%s submitted after the restart", m, m == 1 ? "" : "s");
    }
    if (jobs_commit(d->jobs) < 0)
        log_error("slurm: cannot commit the states read from Slurm");
}

/* ---- jobs Slurm has forgotten: sacct ---- */

#define PURGED_REASON "Slurm: job purged before gflow read its end"

/* Ends an R job Slurm no longer knows and sacct cannot tell of: its end is unknown,
 * so it is F (its dependents on success do not run). */
static void end_purged(struct gflowd *d, int64_t sid, const char *why)
{
    size_t nr;
    struct job **running = jobs_running(d->jobs, &nr);
    for (size_t i = 0; i < nr; i++) {
        struct job *j = running[i];
        if (j->backend_id != sid)
            continue;
        log_warn("job %lld: Slurm job %lld is gone from scontrol and %s", (long long)j->id,
                 (long long)sid, why);
        end_job(d, j, JOB_FAILED, JOB_REASON_OTHER, PURGED_REASON);
        return;
    }
}

static void sacct_done_cb(struct child *c, bool ok)
{
    struct gflowd *d = c->d;
    struct slurm_backend *sl = d->slurm;
    sl->querying = false;
    strbuf_adds(&c->out, "");
    if (!ok && !strstr(c->out.buf, "disabled")) { /* a passing failure: asked again */
        char *why = first_line(c);
        log_warn("slurm: sacct failed: %s", why);
        free(why);
    } else if (!ok) { /* no accounting storage: their ends are lost */
        for (size_t i = 0; i < sl->asked.n; i++)
            end_purged(d, sl->asked.sids[i], "sacct has no accounting storage");
    } else {
        bool *found = xcalloc(sl->asked.n ? sl->asked.n : 1, sizeof(*found));
        char *save = NULL;
        for (char *line = strtok_r(c->out.buf, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            struct slurm_job_info s;
            if (slurmspec_parse_sacct_line(line, &s) < 0)
                continue;
            for (size_t i = 0; i < sl->asked.n; i++) {
                if (sl->asked.sids[i] != s.slurm_id || found[i])
                    continue;
                size_t nr;
                struct job **running = jobs_running(d->jobs, &nr);
                for (size_t r = 0; r < nr; r++)
                    if (running[r]->backend_id == s.slurm_id) {
                        found[i] = true;
                        apply_info(d, running[r], &s);
                        break;
                    }
            }
        }
        for (size_t i = 0; i < sl->asked.n; i++)
            if (!found[i])
                end_purged(d, sl->asked.sids[i], "sacct does not know it");
        free(found);
    }
    free(sl->asked.sids);
    sl->asked.sids = NULL;
    sl->asked.n = 0;
    if (jobs_commit(d->jobs) < 0)
        log_error("slurm: cannot commit the states read from sacct");
}

static void query_sacct(struct gflowd *d, const int64_t *sids, size_t n)
{
    struct slurm_backend *sl = d->slurm;
    struct strbuf list;
    strbuf_init(&list);
    for (size_t i = 0; i < n; i++)
        strbuf_addf(&list, "%s%lld", i ? "," : "", (long long)sids[i]);
    char *jobs = strbuf_detach(&list);
    char *argv[] = {"sacct",
                    "--noheader",
                    "--parsable2",
                    "--allocations",
                    "--format=JobIDRaw,State,ExitCode,Reason",
                    "--jobs",
                    jobs,
                    NULL};
    struct child *c = child_new(d, 0, sacct_done_cb);
    if (child_run(c, argv, NULL) < 0) {
        log_warn("slurm: cannot run sacct: %s", strerror(errno));
        child_free(c);
    } else {
        sl->querying = true;
        sl->asked.sids = xmalloc(n * sizeof(*sl->asked.sids));
        memcpy(sl->asked.sids, sids, n * sizeof(*sl->asked.sids));
        sl->asked.n = n;
    }
    free(jobs);
}

static void poll_cb(void *arg)
{
    struct gflowd *d = arg;
    struct slurm_backend *sl = d->slurm;
    sl->poll_timer = NULL;
    slurm_nodes_refresh(d, sl->nodes); /* even with no jobs: ginfo shows them */
    size_t n;
    jobs_running(d->jobs, &n);
    if (n == 0 && sl->reconciled) {
        arm_poll(d, (double)d->cfg.backend_poll_secs);
        return;
    }
    char *argv[] = {"scontrol", "show", "job", "--oneliner", NULL};
    struct child *c = child_new(d, 0, polled_cb);
    if (child_run(c, argv, NULL) < 0) {
        log_warn("slurm: cannot run scontrol: %s", strerror(errno));
        child_free(c);
        arm_poll(d, (double)d->cfg.backend_poll_secs);
        return;
    }
    sl->polling = true;
}

void slurm_start(struct gflowd *d)
{
    struct slurm_backend *sl = d->slurm = xcalloc(1, sizeof(*d->slurm));
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    sl->tag = slurmspec_daemon_tag(host, d->paths.data_dir);
    sl->nodes = slurm_nodes_new();
    log_info("backend slurm: jobs are submitted with sbatch%s%s, comment tag %s; states polled "
             "every %lld s",
             d->cfg.backend_partition[0] ? " to partition " : "", d->cfg.backend_partition, sl->tag,
             (long long)d->cfg.backend_poll_secs);
    arm_poll(d, 0);
}

struct slurm_nodes *slurm_backend_nodes(const struct gflowd *d)
{
    return d->slurm ? d->slurm->nodes : NULL;
}

int slurm_reload(struct gflowd *d)
{
    struct slurm_backend *sl = d->slurm;
    char *err = NULL;
    if (jobs_reload(d->jobs, &err) < 0) {
        loop_fail("cannot read the jobs back from the database (%s); exiting so that a restart "
                  "recovers them (Slurm's jobs keep running)",
                  err);
        free(err);
        return -1;
    }
    sl->reconciled = false;
    sl->backlog_len = 0; /* their jobs are R with no Slurm id: the poll submits them */
    if (!sl->polling)
        arm_poll(d, 0);
    return 0;
}

void slurm_stop(struct gflowd *d)
{
    struct slurm_backend *sl = d->slurm;
    if (!sl)
        return;
    loop_cancel_timer(sl->poll_timer);
    free(sl->backlog);
    free(sl->busy_uids);
    free(sl->fresh);
    free(sl->asked.sids);
    free(sl->tag);
    slurm_nodes_free(sl->nodes);
    free(sl);
    d->slurm = NULL;
}
