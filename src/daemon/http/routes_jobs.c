/* routes_jobs: the endpoints of one job and of submission (docs/api.md): submit, show,
 * cancel, hold, release, limit, update and redo (the log is routes_log.c's). Owners act on their own jobs,
 * admins on all (auth.c); what a job may be is checked by jobspec.c, changes to it are
 * jobs.c's and jobedit.c's, and ending a running one is the runner's. */
#include "jobs/priority.h"
#include "pathcheck.h"
#include "routes.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/slurm/slurm.h"
#include "clock.h"
#include "daemon.h"
#include "gpu/gpu.h"
#include "gpu/gpu_report.h"
#include "jobs/jobedit.h"
#include "jobs/jobs.h"
#include "jobspec.h"
#include "run/runner.h"
#include "store/store.h"
#include "util.h"

/* What a request may ask for on this machine, and who asks. */
static struct jobspec_limits limits_of(const struct gflowd *d)
{
    return (struct jobspec_limits){
        .memory_total_mb = d->mem_total_mb,
        .gpus = gpu_current(d->gpus),
        .visible = scheduler_allowed_mask(gpu_visible(d->gpus)),
        .gpus_pending = gpu_pending(d->gpus),
        .on_slurm = daemon_on_slurm(d),
    };
}

static struct jobspec_owner owner_of(const struct route_req *r)
{
    return (struct jobspec_owner){
        .user = r->who->user, .uid = r->who->uid, .gid = r->who->gid, .now = now_wall()};
}

/* An error result of an action on one job: {"error": msg}, *status set. */
static json_t *error_result(unsigned *status, unsigned code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static json_t *error_result(unsigned *status, unsigned code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    *status = code;
    json_t *o = json_pack("{s:s}", "error", msg);
    free(msg);
    return o;
}

/* The error result of store_get_job's rc for job id (1: not found; < 0: it failed). */
static json_t *load_error(const struct route_req *r, int64_t id, int rc, unsigned *status)
{
    if (rc == 1)
        return error_result(status, 404, "job %lld not found; 'gqueue -a' lists your jobs",
                            (long long)id);
    return error_result(status, 500, "cannot read job %lld: %s", (long long)id,
                        store_error(r->d->store));
}

int route_load_job(const struct route_req *r, int64_t id, bool with_payload, struct job *out,
                   struct reply *rep)
{
    int rc = store_get_job(r->d->store, id, out, with_payload);
    if (rc == 0)
        return 0;
    unsigned status;
    json_t *err = load_error(r, id, rc, &status);
    reply_json(rep, status, err);
    return -1;
}

/* The active job id, if the caller may act on it; else NULL with *errp set to an error
 * result (error_result). */
static struct job *active_job_for(const struct route_req *r, int64_t id, const char *verb,
                                  unsigned *status, json_t **errp)
{
    struct job *j = jobs_get(r->d->jobs, id);
    if (!j) {
        struct job old;
        job_init(&old);
        int rc = store_get_job(r->d->store, id, &old, false);
        if (rc != 0)
            *errp = load_error(r, id, rc, status);
        else
            *errp = error_result(status, 409, "job %lld has already ended (%s); nothing to %s",
                                 (long long)id, job_state_short(old.state), verb);
        job_clear(&old);
        return NULL;
    }
    if (!auth_may_act_on(r->who, j->uid)) {
        *errp = error_result(status, 403,
                             "job %lld belongs to %s; only its owner or an admin may %s it",
                             (long long)id, j->user, verb);
        return NULL;
    }
    return j;
}

/* The active job id, if the caller may act on it; else NULL with the reply set. */
static struct job *own_active_job(const struct route_req *r, int64_t id, const char *verb,
                                  struct reply *rep)
{
    unsigned status;
    json_t *err = NULL;
    struct job *j = active_job_for(r, id, verb, &status, &err);
    if (!j)
        reply_json(rep, status, err);
    return j;
}

static json_t *state_reply(const struct job *j)
{
    json_t *o = json_pack("{s:I, s:s}", "id", (json_int_t)j->id, "state", job_display_state(j));
    if (j->state == JOB_RUNNING && j->end_request != JOB_END_NONE)
        json_object_set_new(o, "cancelling", json_true());
    return o;
}

/* ---- submit ---- */

/* The reply's entry for a job of a dry run: what it would be (a job without a name:
 * the one it would get, were it submitted as id now). */
static json_t *dry_run_entry(const struct job *j, int64_t id, bool full)
{
    char *name = j->name ? xstrdup(j->name) : job_default_name(id);
    if (full) { /* ?detail=full: the job as it would be, for previews (gflow-mcp) */
        json_t *o = job_to_json(j, false, NULL);
        json_object_set_new(o, "id", json_null());
        json_object_set_new(o, "name", json_string(name));
        free(name);
        return o;
    }
    json_t *o =
        json_pack("{s:n, s:s, s:s}", "id", "name", name, "state", job_state_short(j->state));
    free(name);
    if (j->command)
        json_object_set_new(o, "command", json_string(j->command));
    if (j->array_task >= 0)
        json_object_set_new(o, "array_task", json_integer(j->array_task));
    return o;
}

/* Checks the dependencies of every job of the submission, each against the jobs that
 * exist before this request. 0, or -1 with the reply set. */
static int check_deps(const struct route_req *r, const struct jobspec_submission *sub,
                      struct reply *rep)
{
    int64_t next = jobs_next_id(r->d->jobs);
    for (size_t i = 0; i < sub->n; i++) {
        char *err = NULL;
        if (sub->jobs[i]->n_deps &&
            jobs_check_deps(r->d->jobs, sub->jobs[i], next + (int64_t)i, &err) < 0) {
            if (sub->batch)
                reply_error(rep, 400, "job %zu: %s", i + 1, err);
            else
                reply_error(rep, 400, "%s", err);
            free(err);
            return -1;
        }
    }
    return 0;
}

/* Refuses a working directory that does not exist (the job could never start in it);
 * one that cannot be looked into (EACCES, e.g. root-squashed NFS) or does not answer in
 * time (a hung mount: the look must never stop the daemon, pathcheck.h) is left to the
 * run. 0, or -1 with the reply set. */
static int check_workdirs(const struct jobspec_submission *sub, struct reply *rep)
{
    for (size_t i = 0; i < sub->n; i++) {
        const char *dir = sub->jobs[i]->workdir;
        if (!dir || (i > 0 && !strcmp(dir, sub->jobs[i - 1]->workdir)))
            continue;
        if (pathcheck_dir(dir) == PATHCHECK_MISSING) {
            reply_error(rep, 400,
                        "the working directory %s does not exist (or is not a "
                        "directory); submit from an existing one",
                        dir);
            return -1;
        }
    }
    return 0;
}

/* Whether the submission stays within limits.max_jobs_per_request and its owner within
 * limits.max_active_jobs_per_user, counted before any job is made. 0, or -1 with the
 * reply set (413, 429). */
static int check_counts(const struct route_req *r, const struct jobspec_submission *sub,
                        struct reply *rep)
{
    const struct gflow_limits *lim = &r->d->cfg.limits;
    size_t n = jobspec_count(sub);
    if ((int64_t)n > lim->max_jobs_per_request) {
        reply_error(rep, 413,
                    "this request makes %zu jobs; a request may make at most %lld "
                    "(limits.max_jobs_per_request in gflow.toml): split it",
                    n, (long long)lim->max_jobs_per_request);
        return -1;
    }
    size_t have = jobs_active_of(r->d->jobs, r->who->uid);
    if (!sub->dry_run && (int64_t)(have + n) > lim->max_active_jobs_per_user) {
        reply_error(rep, 429,
                    "%s has %zu queued, held or running job%s and this request adds %zu; a user "
                    "may have at most %lld (limits.max_active_jobs_per_user in gflow.toml)",
                    r->who->user, have, plural_s((long long)have), n,
                    (long long)lim->max_active_jobs_per_user);
        return -1;
    }
    return 0;
}

void route_submit(const struct route_req *r, struct reply *rep)
{
    json_error_t jerr;
    json_t *root = json_loadb(r->body, r->body_len, 0, &jerr);
    if (!root) {
        reply_error(rep, 400, "malformed JSON at line %d, column %d: %s", jerr.line, jerr.column,
                    jerr.text);
        return;
    }
    struct jobs *t = r->d->jobs;
    struct jobspec_limits lim = limits_of(r->d);
    struct jobspec_owner owner = owner_of(r);
    struct jobspec_submission sub;
    char *err = NULL;
    if (jobspec_read_submission(root, &lim, &owner, &sub, &err) < 0) {
        reply_error(rep, 400, "%s", err);
        free(err);
        return;
    }
    if (check_counts(r, &sub, rep) < 0 || check_workdirs(&sub, rep) < 0 ||
        check_deps(r, &sub, rep) < 0)
        goto out;
    if (jobspec_expand(&sub, &err) < 0) {
        reply_error(rep, 400, "%s", err);
        free(err);
        goto out;
    }
    for (size_t i = 0; i < sub.n; i++) { /* [projects]: gflow's project policy */
        if (config_check_project(&r->d->cfg, sub.jobs[i]->project, &err) < 0) {
            reply_error(rep, 400, "%s", err);
            free(err);
            goto out;
        }
    }
    if (!sub.dry_run && route_check_quota(r, sub.jobs, sub.n, rep) < 0)
        goto out;
    json_t *warnings = slurm_round_limits(r->d, sub.jobs, sub.n);
    /* A group (its id: the first job's) when the submission makes several jobs or limits
     * how many run at once. */
    int64_t limit = sub.max_concurrent > 0 ? sub.max_concurrent : 0;
    int64_t group_id = jobspec_grouped(&sub) ? jobs_next_id(t) : 0;
    json_t *list = json_array();
    json_t *o = json_pack("{s:o}", "jobs", list);
    if (sub.dry_run) {
        const char *detail = route_query(r, "detail");
        bool full = detail && !strcmp(detail, "full");
        for (size_t i = 0; i < sub.n; i++)
            json_array_append_new(list, dry_run_entry(sub.jobs[i], jobs_next_id(t) + (int64_t)i,
                                                      full && i < JOBSPEC_REPLY_MAX_JOBS));
        if (group_id > 0)
            json_object_set_new(o, "group_id", json_null());
    } else {
        if (group_id && jobs_group_set_limit(t, jobs_group(t, group_id, true), limit) < 0) {
            reply_error(rep, 500, "cannot store the submission's group; see gflowd.log");
            json_decref(o);
            json_decref(warnings);
            goto out;
        }
        for (size_t i = 0; i < sub.n; i++)
            sub.jobs[i]->group_id = group_id;
        size_t done;
        if (jobs_submit_all(t, sub.jobs, sub.n, &done) < 0) {
            /* The jobs before it stay submitted (the transaction holds other requests'
             * changes too), but this reply says the request failed. */
            reply_error(rep, 500, "cannot store job %zu of the request; see gflowd.log", done + 1);
            memset(sub.jobs, 0, done * sizeof(*sub.jobs)); /* the table's now */
            json_decref(o);
            json_decref(warnings);
            goto out;
        }
        /* A large submission lists its first jobs only: count and ids say the rest. */
        for (size_t i = 0; i < sub.n && i < JOBSPEC_REPLY_MAX_JOBS; i++)
            json_array_append_new(
                list, json_pack("{s:I, s:s, s:s}", "id", (json_int_t)sub.jobs[i]->id, "name",
                                sub.jobs[i]->name, "state", job_state_short(sub.jobs[i]->state)));
        if (group_id > 0) {
            json_object_set_new(o, "first_id", json_integer(sub.jobs[0]->id));
            json_object_set_new(o, "last_id", json_integer(sub.jobs[sub.n - 1]->id));
            json_object_set_new(o, "group_id", json_integer(group_id));
        }
    }
    if (group_id > 0) {
        json_object_set_new(o, "count", json_integer((json_int_t)sub.n));
        json_object_set_new(o, "max_concurrent", json_integer(limit));
    }
    if (warnings)
        json_object_set_new(o, "warnings", warnings);
    warnings = NULL;
    if (!sub.dry_run) /* the submitted jobs are the table's now */
        memset(sub.jobs, 0, sub.n * sizeof(*sub.jobs));
    reply_json(rep, sub.dry_run ? 200 : 201, o);
out:
    jobspec_submission_free(&sub);
}

/* ---- show ---- */

void route_show(const struct route_req *r, struct reply *rep)
{
    int64_t id = r->id;
    struct gflowd *d = r->d;
    struct job j;
    job_init(&j);
    if (route_load_job(r, id, true, &j, rep) < 0)
        return;
    struct job *live = jobs_get(d->jobs, id);
    if (live) {
        j.wait_reason = live->wait_reason;
        j.expected_start = live->expected_start;
        j.sched.group = live->sched.group; /* its max_concurrent */
        if (live->state == JOB_RUNNING)    /* its GPU figures so far: not stored yet */
            job_gpu_use_copy(&j, live);
    }
    if (!auth_may_act_on(r->who, j.uid)) { /* others see the job, not its environment */
        json_decref(j.env);
        j.env = NULL;
        free(j.script);
        j.script = NULL;
    }
    json_t *o = job_to_json(&j, true, d->paths.log_dir);
    int64_t *dependents = NULL;
    size_t n_dependents = 0;
    json_t *dl = json_array();
    if (store_dependents(d->store, id, &dependents, &n_dependents) == 0)
        for (size_t i = 0; i < n_dependents; i++)
            json_array_append_new(dl, json_integer(dependents[i]));
    free(dependents);
    json_object_set_new(o, "dependents", dl);
    json_t *prio = priority_breakdown_json(d, &j);
    json_object_set_new(o, "effective_priority",
                        json_is_object(prio) ? json_incref(json_object_get(prio, "effective"))
                                             : json_null());
    json_object_set_new(o, "priority_detail", prio);
    int64_t retried_as = 0;
    if (j.state == JOB_FAILED && store_retried_as(d->store, id, &retried_as) == 0 && retried_as)
        json_object_set_new(o, "retried_as", json_integer(retried_as));
    else
        json_object_set_new(o, "retried_as", json_null());
    if (live && live->n_deps) {
        /* Where each dependency stands (pending, met, never). */
        static const char *const names[] = {"pending", "met", "never"};
        json_t *arr = json_object_get(o, "depends_on");
        for (size_t i = 0; i < live->n_deps && i < json_array_size(arr); i++)
            json_object_set_new(json_array_get(arr, i), "status",
                                json_string(names[live->deps[i].status]));
    }
    /* A --pty job's attach socket (gflow-shim --pty), to its user and root only: the
     * socket itself lets no one else in either. */
    json_object_set_new(o, "attach_socket",
                        j.pty && j.state == JOB_RUNNING && auth_may_act_on(r->who, j.uid)
                            ? json_sprintf("%s/%lld.attach/sock", d->paths.run_dir, (long long)id)
                            : json_null());
    json_object_set_new(o, "gpus_detail", gpu_report_detail(d->gpus, j.gpu_mask));
    json_object_set_new(o, "mig_detail", gpu_report_mig_detail(d->gpus, j.mig_uuids));
    if (j.state == JOB_RUNNING) {
        size_t n;
        struct job **running = jobs_running(d->jobs, &n);
        json_object_set_new(o, "foreign_gpus",
                            gpu_report_foreign(d->gpus, j.id,
                                               j.gpu_mask | gpu_mig_parents(d->gpus, j.mig_uuids),
                                               running, n));
    }
    reply_json(rep, 200, o);
    job_clear(&j);
}

/* ---- cancel, hold, release, limit ---- */

/* The reply to a cancel: the job's state, and the jobs that its cancellation takes
 * along (auto-cancel of dependents; for a running job, once it has ended). */
static json_t *cancel_reply(const struct jobs *t, const struct job *j,
                            const struct jobs_cascade *also, size_t n)
{
    json_t *o = state_reply(j);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        const struct job *dep = jobs_get(t, also[i].id);
        json_array_append_new(arr, json_pack("{s:I, s:I, s:s}", "id", (json_int_t)also[i].id,
                                             "depends_on", (json_int_t)also[i].because, "state",
                                             dep ? job_display_state(dep) : "PD"));
    }
    json_object_set_new(o, "dependents_cancelled", arr);
    return o;
}

/* A bulk dry run's refusal (ended: 409, not yours: 403) carries the job's state, for
 * gcancel --dry-run's "ID STATE invalid" line; an unknown job has none. */
static void dry_run_state(const struct route_req *r, int64_t id, json_t *err)
{
    const struct job *a = jobs_get(r->d->jobs, id);
    if (a) {
        json_object_set_new(err, "state", json_string(job_display_state(a)));
        return;
    }
    struct job old;
    job_init(&old);
    if (store_get_job(r->d->store, id, &old, false) == 0)
        json_object_set_new(err, "state", json_string(job_state_short(old.state)));
    job_clear(&old);
}

/* Cancels job id (dry: only says what would happen) at time now: the reply's body,
 * *status set. */
/* The reply body (status; results: its per-job array, or NULL), at once, or once the
 * Slurm commands w waits for have returned (slurm.h); w is the reply's then. */
static void reply_waiting(struct reply *rep, struct slurm_wait *w, json_t *body, unsigned status,
                          json_t *results)
{
    if (slurm_wait_pending(w)) {
        slurm_wait_set(w, body, status, results);
        reply_defer(rep, slurm_wait_work, w, slurm_wait_release);
        return;
    }
    slurm_wait_release(w);
    reply_json(rep, status, body);
}

static json_t *cancel_one(const struct route_req *r, int64_t id, bool dry, bool bulk, double now,
                          unsigned *status, struct slurm_wait *w)
{
    json_t *err = NULL;
    struct job *j = active_job_for(r, id, "cancel", status, &err);
    if (!j) {
        if (dry && bulk)
            dry_run_state(r, id, err);
        return err;
    }
    struct jobs_cascade *also;
    size_t n_also = jobs_cascade_preview(r->d->jobs, j, &also);
    /* In Slurm: scancel now, the reply once it has returned (what Slurm did). */
    if (!dry && w && j->state == JOB_RUNNING && daemon_on_slurm(r->d) && j->backend_id > 0 &&
        j->end_request == JOB_END_NONE) {
        char *why = slurm_cancel(r->d, j, w);
        if (why) {
            free(also);
            json_t *o = error_result(status, 500, "%s", why);
            free(why);
            return o;
        }
        j->end_request = JOB_END_CANCEL;
        jobs_save(r->d->jobs, j); /* (a failure is logged; the poll ends it anyway) */
        *status = 200;
        json_t *o = cancel_reply(r->d->jobs, j, also, n_also);
        free(also);
        return o;
    }
    if (!dry) {
        if (j->state == JOB_RUNNING) {
            runner_request_end(r->d, j, JOB_END_CANCEL);
        } else {
            j->end_time = now;
            jobs_set_state(r->d->jobs, j, JOB_CANCELLED, JOB_REASON_CANCELLED_BY_USER, 0, NULL);
        }
    }
    *status = 200;
    json_t *o;
    /* A dry run always says the job's state (gcancel --dry-run prints it). */
    if (bulk && !n_also && !dry && j->state == JOB_CANCELLED)
        o = json_integer(id); /* route_bulk's short form: done as asked */
    else
        o = cancel_reply(r->d->jobs, j, also, n_also);
    free(also);
    return o;
}

static bool dry_run_of(const struct route_req *r)
{
    const char *dry = route_query(r, "dry_run");
    return dry && strcmp(dry, "0") != 0;
}

void route_cancel(const struct route_req *r, struct reply *rep)
{
    int64_t id = r->id;
    unsigned status;
    struct slurm_wait *w = daemon_on_slurm(r->d) ? slurm_wait_new() : NULL;
    json_t *o = cancel_one(r, id, dry_run_of(r), false, now_wall(), &status, w);
    reply_waiting(rep, w, o, status, NULL);
}

/* Holds (hold) or releases job id (begin >= 0: not started before then): the reply's
 * body, *status set. */
static json_t *hold_one(const struct route_req *r, int64_t id, bool hold, double begin, bool bulk,
                        unsigned *status, struct slurm_wait *w)
{
    json_t *err = NULL;
    struct job *j = active_job_for(r, id, hold ? "hold" : "release", status, &err);
    if (!j)
        return err;
    enum job_state from = hold ? JOB_QUEUED : JOB_HELD;
    if (j->state == JOB_RUNNING && daemon_on_slurm(r->d)) { /* in Slurm: scontrol hold|release */
        /* answered once scontrol has returned, with its error if it failed */
        char *why = slurm_hold(r->d, j, hold, w);
        if (why) {
            json_t *o = error_result(status, 409, "%s", why);
            free(why);
            return o;
        }
        *status = 200;
        return bulk ? json_integer(id) : state_reply(j);
    }
    if (j->state != from)
        return error_result(status, 409, "job %lld is %s (%s); only %s jobs can be %s",
                            (long long)id, job_state_name(j->state), job_state_short(j->state),
                            hold ? "queued (PD)" : "held (H)", hold ? "held" : "released");
    if (begin >= 0)
        j->begin_time = begin;
    jobs_set_state(r->d->jobs, j, hold ? JOB_HELD : JOB_QUEUED,
                   hold ? JOB_REASON_HELD_BY_USER : JOB_REASON_NONE, 0, NULL);
    *status = 200;
    return bulk ? json_integer(id) : state_reply(j);
}

/* A release's optional begin_time in body o (a member of it, or the whole body): 0 with
 * *begin set (-1: none), or -1 if o has other members (beyond ids, when bulk). */
static int release_begin(json_t *o, bool bulk, double *begin)
{
    json_t *b = json_object_get(o, "begin_time");
    const char *key;
    json_t *v;
    bool ok = json_is_object(o) && (!b || (json_is_number(b) && json_number_value(b) >= 0));
    json_object_foreach (o, key, v) {
        if (strcmp(key, "begin_time") != 0 && !(bulk && strcmp(key, "ids") == 0))
            ok = false;
    }
    if (b && ok)
        *begin = json_number_value(b);
    return ok ? 0 : -1;
}

/* A release takes an optional body {"begin_time": unix seconds}: released now, but not
 * started before then (gjob release --at). */
static void hold_release(const struct route_req *r, bool hold, struct reply *rep)
{
    double begin = -1;
    if (!hold && r->body_len) {
        json_t *o = json_loadb(r->body, r->body_len, 0, NULL);
        int ok = release_begin(o, false, &begin);
        json_decref(o);
        if (ok < 0) {
            reply_error(rep, 400, "a release takes no body or {\"begin_time\": unix seconds}");
            return;
        }
    }
    unsigned status;
    struct slurm_wait *w = daemon_on_slurm(r->d) ? slurm_wait_new() : NULL;
    json_t *o = hold_one(r, r->id, hold, begin, false, &status, w);
    reply_waiting(rep, w, o, status, NULL);
}

void route_hold(const struct route_req *r, struct reply *rep)
{
    hold_release(r, true, rep);
}

void route_release(const struct route_req *r, struct reply *rep)
{
    hold_release(r, false, rep);
}

/* POST /v1/jobs/cancel|hold|release {"ids": [...]} (release: and "begin_time"): the
 * action on each job in order, as one request and one transaction (the table and queue
 * are updated once at the end, jobs_bulk_begin). The reply is {"results": [...]}, one
 * per id, in order: the bare id when done as asked (cancelled, with no dependents taken
 * along; held; released) -- the short form keeps 100,000 results cheap to build and
 * read --, else what the single-job endpoint answers, with "id" and, for a refused id,
 * "status" (its HTTP status). 200 unless the body is malformed. */
void route_bulk(const struct route_req *r, struct reply *rep)
{
    const char *action = r->url + strlen("/v1/jobs/");
    json_t *o = route_body_object(r, rep);
    if (!o)
        return;
    bool cancel = strcmp(action, "cancel") == 0, hold = strcmp(action, "hold") == 0;
    json_t *ids = json_object_get(o, "ids");
    double begin = -1;
    bool ok = json_is_array(ids);
    if (!cancel && !hold)
        ok = ok && release_begin(o, true, &begin) == 0;
    else
        ok = ok && json_object_size(o) == 1;
    size_t i;
    json_t *v;
    json_array_foreach (ids, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) <= 0)
            ok = false;
    }
    if (!ok) {
        reply_error(rep, 400, "the body must be {\"ids\": [job ids]}%s",
                    !cancel && !hold ? ", with an optional \"begin_time\": unix seconds" : "");
        json_decref(o);
        return;
    }
    if ((int64_t)json_array_size(ids) > r->d->cfg.limits.max_ids_per_request) {
        reply_error(rep, 413, "%zu ids in one request; at most %lld (limits.max_ids_per_request)",
                    json_array_size(ids), (long long)r->d->cfg.limits.max_ids_per_request);
        json_decref(o);
        return;
    }
    bool dry = cancel && dry_run_of(r);
    /* One request, one moment: the jobs it cancels end at the same time (and a run of
     * them is then one UPDATE, jobs_bulk_end). */
    double now = now_wall();
    json_t *results = json_array();
    struct slurm_wait *w = daemon_on_slurm(r->d) ? slurm_wait_new() : NULL;
    jobs_bulk_begin(r->d->jobs, json_array_size(ids));
    json_array_foreach (ids, i, v) {
        int64_t id = (int64_t)json_integer_value(v);
        unsigned status;
        slurm_wait_at(w, i);
        json_t *res = cancel ? cancel_one(r, id, dry, true, now, &status, w)
                             : hold_one(r, id, hold, begin, true, &status, w);
        if (status != 200) {
            json_object_set_new(res, "id", json_integer(id));
            json_object_set_new(res, "status", json_integer(status));
        }
        json_array_append_new(results, res);
    }
    jobs_bulk_end(r->d->jobs);
    json_decref(o);
    reply_waiting(rep, w, json_pack("{s:O}", "results", results), 200, results);
    json_decref(results);
}

/* POST /v1/jobs/{id}/limit {"max_concurrent": K}: how many jobs of the submission group
 * of job id (a group's id is its first job's id) may run at once; 0 = no limit. A job
 * submitted alone gets a group of its own. */
void route_limit(const struct route_req *r, struct reply *rep)
{
    int64_t id = r->id;
    json_t *o = route_body_object(r, rep);
    if (!o)
        return;
    json_t *k = json_object_get(o, "max_concurrent");
    if (!json_is_integer(k) || json_integer_value(k) < 0 || json_object_size(o) != 1) {
        reply_error(rep, 400, "the body must be {\"max_concurrent\": K} with K >= 0 (0: no limit)");
        json_decref(o);
        return;
    }
    int64_t limit = (int64_t)json_integer_value(k);
    json_decref(o);
    struct job *j = jobs_get(r->d->jobs, id);
    struct job old;
    job_init(&old);
    if (!j && route_load_job(r, id, false, &old, rep) < 0) {
        job_clear(&old);
        return;
    }
    const struct job *known = j ? j : &old;
    int64_t gid = known->group_id;
    if (!auth_may_act_on(r->who, known->uid)) {
        reply_error(rep, 403,
                    "job %lld belongs to %s; only its owner or an admin may change "
                    "its limit",
                    (long long)id, known->user ? known->user : "another user");
        job_clear(&old);
        return;
    }
    job_clear(&old);
    if (gid == 0 && !j) {
        reply_error(rep, 409, "job %lld has ended and belongs to no group; nothing to limit",
                    (long long)id);
        return;
    }
    char *err = NULL;
    if (jobs_limit_group(r->d->jobs, j, gid, limit, &err) < 0) {
        reply_error(rep, 500, "%s", err);
        free(err);
        return;
    }
    reply_json(rep, 200,
               json_pack("{s:I, s:I}", "group_id", (json_int_t)(gid ? gid : id), "max_concurrent",
                         (json_int_t)limit));
}

/* ---- update and redo ---- */

void route_update(const struct route_req *r, struct reply *rep)
{
    int64_t id = r->id;
    json_t *over = route_body_object(r, rep);
    if (!over)
        return;
    if (json_object_size(over) == 0) {
        reply_error(rep, 400, "an update is a JSON object with the spec fields to change");
        json_decref(over);
        return;
    }
    json_t *mc = json_object_get(over, "max_concurrent");
    if (mc && (!json_is_integer(mc) || json_integer_value(mc) < 0)) {
        reply_error(rep, 400, "'max_concurrent' must be an integer >= 0 (0: no limit)");
        json_decref(over);
        return;
    }
    int64_t max_concurrent = mc ? (int64_t)json_integer_value(mc) : -1;
    json_object_del(over, "max_concurrent");
    struct job *j = own_active_job(r, id, "update", rep);
    if (!j) {
        json_decref(over);
        return;
    }
    bool dry = dry_run_of(r);
    if (j->state == JOB_RUNNING && daemon_on_slurm(r->d)) { /* in Slurm: scontrol update */
        json_t *changes = json_array();
        const char *key;
        json_t *v;
        json_object_foreach (over, key, v) {
            json_t *old = !strcmp(key, "name")         ? json_string(j->name ? j->name : "")
                          : !strcmp(key, "time_limit") ? json_integer(j->time_limit)
                          : !strcmp(key, "priority")   ? json_integer(j->priority)
                                                       : json_integer(j->nice);
            json_array_append_new(changes,
                                  json_pack("{s:s, s:o, s:O}", "field", key, "old", old, "new", v));
        }
        json_t *o = state_reply(j);
        json_object_set_new(o, "changes", changes);
        if (dry) {
            json_decref(over);
            json_object_set_new(o, "dry_run", json_true());
            reply_json(rep, 200, o);
            return;
        }
        /* answered once scontrol has returned: its error, or the record updated */
        struct slurm_wait *w = slurm_wait_new();
        char *why = max_concurrent >= 0
                        ? xasprintf("job %lld is in Slurm: set --max-concurrent on a queued job of "
                                    "its group",
                                    (long long)id)
                        : slurm_update(r->d, j, over, w);
        json_decref(over);
        if (why) {
            slurm_wait_release(w);
            json_decref(o);
            reply_error(rep, 409, "%s", why);
            free(why);
            return;
        }
        json_object_set_new(o, "slurm",
                            json_string(slurm_wait_pending(w) ? "scontrol update done"
                                                              : "scontrol update sent; gflow's "
                                                                "record follows"));
        reply_waiting(rep, w, o, slurm_wait_pending(w) ? 200 : 202, NULL);
        return;
    }
    struct jobspec_limits lim = limits_of(r->d);
    struct jobspec_owner owner = owner_of(r);
    struct jobedit_ctx c = {r->d->jobs, &lim, &owner, r->d->cfg.limits.max_active_jobs_per_user,
                            &r->d->cfg};
    json_t *changes;
    char *err = NULL;
    int status = jobedit_update(&c, j, over, max_concurrent, dry, &changes, &err);
    json_decref(over);
    if (status) {
        reply_error(rep, (unsigned)status, "%s", err);
        free(err);
        return;
    }
    json_t *o = state_reply(j);
    json_object_set_new(o, "changes", changes);
    if (dry)
        json_object_set_new(o, "dry_run", json_true());
    reply_json(rep, 200, o);
}

void route_redo(const struct route_req *r, struct reply *rep)
{
    int64_t id = r->id;
    json_t *over = r->body_len ? route_body_object(r, rep) : json_object();
    if (!over)
        return;
    json_t *cascade = json_object_get(over, "cascade");
    if (cascade && !json_is_boolean(cascade)) {
        reply_error(rep, 400, "'cascade' must be true or false");
        json_decref(over);
        return;
    }
    bool do_cascade = json_is_true(cascade);
    json_object_del(over, "cascade");
    struct jobspec_limits lim = limits_of(r->d);
    struct jobspec_owner owner = owner_of(r);
    struct jobedit_ctx c = {r->d->jobs, &lim, &owner, r->d->cfg.limits.max_active_jobs_per_user,
                            &r->d->cfg};
    json_t *out;
    char *err = NULL;
    int status = jobedit_redo(&c, id, over, do_cascade, &out, &err);
    json_decref(over);
    if (status) {
        reply_error(rep, (unsigned)status, "%s", err);
        free(err);
        return;
    }
    reply_json(rep, 201, json_pack("{s:o}", "jobs", out));
}
