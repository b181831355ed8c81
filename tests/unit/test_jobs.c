/* test_jobs: the daemon's job table (src/daemon/jobs/jobs*.c) and job edits
 * (src/daemon/jobs/jobedit.c) on a store in a temp dir, with no loop, GPUs or processes: the
 * dependency cascade (auto-cancel down a chain in one change, or waiting with
 * DependencyFailed), its preview, retries (dependents moved to the new attempt), the
 * scheduling pass and what waits for the commit, group limits, gjob update, gjob redo
 * with its cascade, the reload that undoes a lost transaction, jobs waiting for their
 * begin time or dependencies kept out of the queue, and what a bulk change writes. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jobs/jobedit.h"
#include "jobs/jobs.h"
#include "log.h"
#include "store/store.h"
#include "util.h"

struct fixture {
    char dir[64];
    char path[128];
    struct store *s;
    struct jobs *t;
    /* Signals the table asked for, once committed. */
    int64_t signalled[16];
    int signals[16];
    int n_signalled;
};

static void signal_cb(void *arg, struct job *j, int sig)
{
    struct fixture *f = arg;
    if (f->n_signalled < 16) {
        f->signalled[f->n_signalled] = j->id;
        f->signals[f->n_signalled++] = sig;
    }
}

static int setup(void **state)
{
    log_threshold = LOG_WARN; /* the daemon's info lines are not the test's output */
    struct fixture *f = xcalloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_jobs.XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/gflow.db", f->dir);
    char *err = NULL;
    f->s = store_open(f->path, &err);
    if (!f->s)
        return -1;
    f->t = jobs_new(f->s);
    jobs_set_signal_cb(f->t, signal_cb, f);
    if (jobs_load(f->t, &err) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    jobs_commit(f->t);
    jobs_free(f->t);
    store_close(f->s);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    char mark[160]; /* the ids' high-water mark beside the database (store_ids.c) */
    snprintf(mark, sizeof(mark), "%s/next_job_id", f->dir);
    unlink(mark);
    rmdir(f->dir);
    free(f);
    return 0;
}

static const struct gpu_set no_gpus = {0};
static const struct jobspec_limits lim = {.gpus = &no_gpus};
static const struct jobspec_owner bob = {.user = "bob", .uid = 1001, .gid = 100, .now = 1e9};

/* Submits a job of bob's from a spec (JSON text): its id. */
static int64_t submit(struct fixture *f, const char *spec_text)
{
    json_t *spec = json_loads(spec_text, 0, NULL);
    assert_non_null(spec);
    char *err = NULL;
    bool dry = false;
    struct job *j = jobspec_to_job(spec, &lim, &bob, &dry, &err);
    json_decref(spec);
    if (!j)
        fail_msg("spec: %s", err);
    if (j->n_deps && jobs_check_deps(f->t, j, jobs_next_id(f->t), &err) < 0)
        fail_msg("deps: %s", err);
    assert_int_equal(jobs_submit(f->t, j), 0);
    return j->id;
}

/* A command job depending on the job ids of deps (afterok, all), auto-cancelled or not. */
static int64_t submit_after(struct fixture *f, const char *deps, bool auto_cancel)
{
    char *spec = xasprintf("{\"command\": \"true\", \"workdir\": \"/\", \"depends_on\": [%s], "
                           "\"auto_cancel\": %s}",
                           deps, auto_cancel ? "true" : "false");
    int64_t id = submit(f, spec);
    free(spec);
    return id;
}

/* The state of job id, from the store (the truth once committed). */
static enum job_state stored_state(struct fixture *f, int64_t id)
{
    enum job_state st;
    assert_int_equal(store_job_state(f->s, id, &st), 0);
    return st;
}

/* Job id from the store (with reason and attempt), to be cleared. */
static struct job stored(struct fixture *f, int64_t id)
{
    struct job j;
    assert_int_equal(store_get_job(f->s, id, &j, false), 0);
    return j;
}

/* Runs a pass on a machine without GPUs: every ready job starts. */
static size_t pass(struct fixture *f)
{
    struct jobs_machine m = {.gpus = &no_gpus};
    struct job **started;
    double next_pass;
    size_t n = jobs_schedule(f->t, &m, 1e9, &started, &next_pass);
    free(started);
    return n;
}

/* Moves running job id to an end state with a reason. */
static void end(struct fixture *f, int64_t id, enum job_state st, enum job_reason r)
{
    struct job *j = jobs_get(f->t, id);
    assert_non_null(j);
    assert_int_equal(j->state, JOB_RUNNING);
    assert_int_equal(jobs_set_state(f->t, j, st, r, 0, NULL), 0);
}

static void test_cascade(void **state)
{
    struct fixture *f = *state;
    int64_t a = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    int64_t b = submit_after(f, "1", true);
    int64_t c = submit_after(f, "2", true);
    int64_t d = submit_after(f, "3", false); /* --no-auto-cancel: it waits */
    int64_t e = submit(f, "{\"command\": \"true\", \"workdir\": \"/\", \"depends_on\": "
                          "[{\"id\": 1, \"kind\": \"afternotok\"}]}");
    assert_true(jobs_get(f->t, b)->sched.deps_blocked);

    /* What cancelling a would take along: b because of a, c because of b; not d. */
    struct jobs_cascade *also;
    size_t n = jobs_cascade_preview(f->t, jobs_get(f->t, a), &also);
    assert_int_equal(n, 2);
    assert_int_equal(also[0].id, b);
    assert_int_equal(also[0].because, a);
    assert_int_equal(also[1].id, c);
    assert_int_equal(also[1].because, b);
    free(also);

    assert_int_equal(pass(f), 1); /* only a is ready */
    end(f, a, JOB_FAILED, JOB_REASON_NON_ZERO_EXIT);
    /* The whole chain went in the same change. */
    assert_null(jobs_get(f->t, b));
    assert_null(jobs_get(f->t, c));
    struct job *dj = jobs_get(f->t, d);
    assert_non_null(dj);
    assert_int_equal(dj->state, JOB_QUEUED);
    assert_int_equal(dj->reason, JOB_REASON_DEPENDENCY_FAILED);
    assert_int_equal(dj->reason_job, c);
    assert_true(dj->sched.deps_blocked);
    assert_false(jobs_get(f->t, e)->sched.deps_blocked); /* afternotok: a failed */
    assert_int_equal(jobs_commit(f->t), 0);
    jobs_collect(f->t);

    struct job sb = stored(f, b), sc = stored(f, c);
    assert_int_equal(sb.state, JOB_CANCELLED);
    assert_int_equal(sb.reason, JOB_REASON_DEPENDENCY_FAILED);
    assert_int_equal(sb.reason_job, a);
    assert_int_equal(sc.reason_job, b);
    job_clear(&sb);
    job_clear(&sc);
    assert_int_equal(stored_state(f, d), JOB_QUEUED);

    /* A restarted daemon comes to the same verdict from the store. */
    jobs_free(f->t);
    f->t = jobs_new(f->s);
    char *err = NULL;
    assert_int_equal(jobs_load(f->t, &err), 0);
    assert_true(jobs_get(f->t, d)->sched.deps_blocked);
    assert_false(jobs_get(f->t, e)->sched.deps_blocked);
}

static void test_retries(void **state)
{
    struct fixture *f = *state;
    int64_t r = submit(f, "{\"command\": \"false\", \"workdir\": \"/\", \"max_retries\": 1}");
    int64_t s = submit_after(f, "1", true);
    assert_int_equal(pass(f), 1);
    end(f, r, JOB_FAILED, JOB_REASON_NON_ZERO_EXIT);
    /* A new attempt, and the dependent waits on it instead of being cancelled. */
    int64_t r2 = jobs_next_id(f->t) - 1;
    assert_int_equal(r2, s + 1);
    struct job *a2 = jobs_get(f->t, r2);
    assert_non_null(a2);
    assert_int_equal(a2->attempt, 2);
    assert_int_equal(a2->retry_of, r);
    assert_int_equal(a2->state, JOB_QUEUED);
    struct job *sj = jobs_get(f->t, s);
    assert_non_null(sj);
    assert_int_equal(sj->deps[0].id, r2);
    assert_int_equal(sj->deps[0].status, JOB_DEP_PENDING);
    assert_int_equal(jobs_commit(f->t), 0);
    int64_t again;
    assert_int_equal(store_retried_as(f->s, r, &again), 0);
    assert_int_equal(again, r2);

    /* The last attempt fails: no retry left, the dependent goes. */
    assert_int_equal(pass(f), 1);
    end(f, r2, JOB_FAILED, JOB_REASON_SIGNAL);
    assert_null(jobs_get(f->t, s));
    assert_int_equal(jobs_next_id(f->t), r2 + 1);
    assert_int_equal(jobs_commit(f->t), 0);
    struct job st = stored(f, s);
    assert_int_equal(st.reason, JOB_REASON_DEPENDENCY_FAILED);
    assert_int_equal(st.reason_job, r2);
    job_clear(&st);

    /* A time limit or a launch failure is not retried. */
    int64_t t = submit(f, "{\"command\": \"sleep 9\", \"workdir\": \"/\", \"max_retries\": 3}");
    assert_int_equal(pass(f), 1);
    end(f, t, JOB_TIMEOUT, JOB_REASON_TIME_LIMIT);
    int64_t l = submit(f, "{\"command\": \"x\", \"workdir\": \"/\", \"max_retries\": 3}");
    assert_int_equal(pass(f), 1);
    end(f, l, JOB_FAILED, JOB_REASON_LAUNCH_FAILED);
    assert_int_equal(jobs_next_id(f->t), l + 1);
}

static void test_pass_and_commit(void **state)
{
    struct fixture *f = *state;
    int64_t a = submit(f, "{\"command\": \"true\", \"workdir\": \"/\", \"priority\": 1}");
    int64_t b = submit(f, "{\"command\": \"true\", \"workdir\": \"/\", \"priority\": 9}");
    int64_t h = submit(f, "{\"command\": \"true\", \"workdir\": \"/\", \"hold\": true}");
    int64_t later = submit(f, "{\"command\": \"true\", \"workdir\": \"/\", \"begin_time\": 2e9, "
                              "\"priority\": 0}");
    struct jobs_machine m = {.gpus = &no_gpus, .max_running_jobs = 1};
    struct job **started;
    double next_pass;
    /* The running-jobs limit: the higher priority first. */
    assert_int_equal(jobs_schedule(f->t, &m, 1e9, &started, &next_pass), 1);
    assert_int_equal(started[0]->id, b);
    free(started);
    assert_true(next_pass == 2e9); /* when the --begin job must be looked at again */
    /* Starting a job is a change (one more pass, which starts nothing); then nothing
     * changed: no pass at all. */
    assert_int_equal(jobs_schedule(f->t, &m, 1e9, &started, &next_pass), 0);
    assert_string_equal(jobs_get(f->t, a)->wait_reason, "MaxRunningJobs");
    assert_int_equal(jobs_schedule(f->t, &m, 1e9, &started, &next_pass), 0);
    assert_true(next_pass == -1);
    m.max_running_jobs = 0;
    jobs_mark_dirty(f->t);
    assert_int_equal(jobs_schedule(f->t, &m, 1e9, &started, &next_pass), 1);
    assert_int_equal(started[0]->id, a);
    free(started);
    assert_true(next_pass == 2e9);
    assert_string_equal(jobs_get(f->t, later)->wait_reason, "BeginTime");
    assert_int_equal(jobs_get(f->t, h)->state, JOB_HELD);

    /* A signal waits for the commit, and goes to running jobs only. */
    jobs_after_commit_signal(f->t, a, SIGTERM);
    jobs_after_commit_signal(f->t, h, SIGTERM);
    assert_int_equal(f->n_signalled, 0);
    assert_int_equal(jobs_commit(f->t), 0);
    assert_int_equal(f->n_signalled, 1);
    assert_int_equal(f->signalled[0], a);
    assert_int_equal(f->signals[0], SIGTERM);
    assert_int_equal(stored_state(f, a), JOB_RUNNING);
}

static void test_group_limit(void **state)
{
    struct fixture *f = *state;
    int64_t a = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    int64_t b = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    /* A job alone gets a group of its own; another joins by group id. */
    char *err = NULL;
    assert_int_equal(jobs_limit_group(f->t, jobs_get(f->t, a), 0, 1, &err), 0);
    struct job *bj = jobs_get(f->t, b);
    bj->group_id = a;
    bj->sched.group = jobs_group(f->t, a, false);
    assert_non_null(bj->sched.group);
    assert_int_equal(pass(f), 1);
    assert_string_equal(bj->wait_reason, "JobArrayTaskLimit");
    assert_int_equal(jobs_group(f->t, a, false)->running, 1);
    assert_int_equal(jobs_limit_group(f->t, NULL, a, 0, &err), 0);
    assert_int_equal(pass(f), 1);
}

/* The slurm backend's pass: jobs asking more GPUs than this machine has (none) are handed
 * over all the same, jobs waiting on a dependency are not, and a group's throttle holds
 * across passes. */
static size_t hand_over(struct fixture *f)
{
    struct job **started;
    double next_pass;
    jobs_mark_dirty(f->t);
    size_t n = jobs_hand_over(f->t, 1e9, &started, &next_pass);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(started[i]->state, JOB_RUNNING);
    free(started);
    return n;
}

static void test_hand_over(void **state)
{
    struct fixture *f = *state;
    struct jobspec_limits on_slurm = {.gpus = &no_gpus, .on_slurm = true};
    json_t *spec = json_loads("{\"command\": \"true\", \"workdir\": \"/\", \"gpus\": 4}", 0, NULL);
    char *err = NULL;
    bool dry = false;
    struct job *gj = jobspec_to_job(spec, &on_slurm, &bob, &dry, &err);
    json_decref(spec);
    assert_non_null(gj); /* not checked against this machine's (no) GPUs */
    assert_int_equal(jobs_submit(f->t, gj), 0);
    int64_t g = gj->id;
    int64_t a = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    int64_t b = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    char *deps = xasprintf("%lld", (long long)g);
    int64_t d = submit_after(f, deps, true);
    free(deps);
    assert_int_equal(jobs_limit_group(f->t, jobs_get(f->t, a), 0, 1, &err), 0);
    struct job *bj = jobs_get(f->t, b);
    bj->group_id = a;
    bj->sched.group = jobs_group(f->t, a, false);
    assert_int_equal(hand_over(f), 2); /* g and a; b waits for a, d for g */
    assert_int_equal(jobs_get(f->t, g)->state, JOB_RUNNING);
    assert_string_equal(bj->wait_reason, "JobArrayTaskLimit");
    assert_int_equal(jobs_get(f->t, d)->state, JOB_QUEUED);
    assert_int_equal(hand_over(f), 0); /* the throttle holds in the next pass too */
    end(f, a, JOB_FINISHED, JOB_REASON_NONE);
    end(f, g, JOB_FINISHED, JOB_REASON_NONE);
    assert_int_equal(hand_over(f), 2); /* b, and d now that g is done */
    assert_int_equal(jobs_commit(f->t), 0);
    assert_int_equal(stored_state(f, d), JOB_RUNNING);
}

static void test_update(void **state)
{
    struct fixture *f = *state;
    int64_t a = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    int64_t b = submit(f, "{\"command\": \"echo\", \"workdir\": \"/\", \"hold\": true}");
    struct jobedit_ctx c = {f->t, &lim, &bob, 0, NULL};
    json_t *changes;
    char *err = NULL;

    json_t *over = json_pack("{s:i, s:s}", "priority", 50, "command", "echo hi");
    assert_int_equal(jobedit_update(&c, jobs_get(f->t, b), over, 2, false, &changes, &err), 0);
    assert_int_equal(json_array_size(changes), 3); /* command, priority, max_concurrent */
    json_decref(changes);
    json_decref(over);
    assert_int_equal(jobs_get(f->t, b)->priority, 50);
    assert_int_equal(jobs_commit(f->t), 0);
    struct job full;
    assert_int_equal(store_get_job(f->s, b, &full, true), 0);
    assert_string_equal(full.command, "echo hi");
    assert_int_equal(full.priority, 50);
    job_clear(&full);

    /* A change that could not be submitted is refused; nothing changes. */
    over = json_pack("{s:i}", "priority", 300);
    assert_int_equal(jobedit_update(&c, jobs_get(f->t, b), over, -1, false, &changes, &err), 400);
    assert_non_null(strstr(err, "0 to 255"));
    free(err);
    json_decref(over);
    over = json_pack("{s:[i]}", "depends_on", 99);
    assert_int_equal(jobedit_update(&c, jobs_get(f->t, b), over, -1, false, &changes, &err), 400);
    assert_non_null(strstr(err, "--depends-on: no job 99"));
    free(err);
    json_decref(over);
    assert_int_equal(jobs_get(f->t, b)->priority, 50);

    /* Someone else (an admin, as far as jobedit knows) may change the priority and the
     * resources, never what the job runs or its environment. */
    const struct jobspec_owner eve = {.user = "eve", .uid = 1002, .now = 1e9};
    struct jobedit_ctx admin = {f->t, &lim, &eve, 0, NULL};
    const char *const owner_only[] = {"command", "workdir", "conda_env", "script"};
    for (size_t i = 0; i < 4; i++) {
        over = json_pack("{s:i, s:s}", "priority", 7, owner_only[i], "/tmp");
        assert_int_equal(jobedit_update(&admin, jobs_get(f->t, b), over, -1, false, &changes, &err),
                         403);
        assert_non_null(strstr(err, owner_only[i]));
        assert_non_null(strstr(err, "only its owner may change"));
        free(err);
        json_decref(over);
    }
    over = json_pack("{s:{s:s}}", "env", "LD_PRELOAD", "/tmp/x.so");
    assert_int_equal(jobedit_update(&admin, jobs_get(f->t, b), over, -1, false, &changes, &err),
                     403);
    free(err);
    json_decref(over);
    assert_int_equal(jobs_get(f->t, b)->priority, 50);
    over = json_pack("{s:i, s:i}", "priority", 60, "time_limit", 600);
    assert_int_equal(jobedit_update(&admin, jobs_get(f->t, b), over, -1, false, &changes, &err), 0);
    json_decref(changes);
    json_decref(over);
    assert_int_equal(jobs_get(f->t, b)->priority, 60);
    assert_int_equal(jobs_get(f->t, b)->uid, bob.uid);
    assert_int_equal(jobs_commit(f->t), 0);
    assert_int_equal(store_get_job(f->s, b, &full, true), 0);
    assert_string_equal(full.command, "echo hi");
    job_clear(&full);

    /* Dependencies rewired both ways; a running job cannot be updated. */
    over = json_pack("{s:[i]}", "depends_on", (int)a);
    assert_int_equal(jobedit_update(&c, jobs_get(f->t, b), over, -1, false, &changes, &err), 0);
    json_decref(changes);
    json_decref(over);
    assert_true(jobs_get(f->t, b)->sched.deps_blocked);
    assert_int_equal(jobs_get(f->t, a)->daemon.n_dependents, 1);
    assert_int_equal(pass(f), 1);
    over = json_pack("{s:i}", "priority", 1);
    assert_int_equal(jobedit_update(&c, jobs_get(f->t, a), over, -1, false, &changes, &err), 409);
    free(err);
    json_decref(over);
    /* a cancelled: b, held with auto-cancel, goes with it. */
    assert_int_equal(jobs_set_state(f->t, jobs_get(f->t, a), JOB_CANCELLED,
                                    JOB_REASON_CANCELLED_BY_USER, 0, NULL),
                     0);
    assert_null(jobs_get(f->t, b));
}

static void test_redo_cascade(void **state)
{
    struct fixture *f = *state;
    int64_t a = submit(f, "{\"command\": \"false\", \"workdir\": \"/\", \"name\": \"a\"}");
    int64_t b = submit_after(f, "1", true);
    int64_t c = submit_after(f, "2", true);
    assert_int_equal(pass(f), 1);
    end(f, a, JOB_FAILED, JOB_REASON_NON_ZERO_EXIT);
    assert_int_equal(jobs_commit(f->t), 0);
    jobs_collect(f->t);

    struct jobedit_ctx ctx = {f->t, &lim, &bob, 0, NULL};
    json_t *out;
    char *err = NULL;
    json_t *over = json_pack("{s:s}", "command", "true");
    assert_int_equal(jobedit_redo(&ctx, a, over, true, &out, &err), 0);
    json_decref(over);
    /* a, then b and c in id order, each wired to the new copy of its cause. */
    assert_int_equal(json_array_size(out), 3);
    int64_t ids[3], of[3];
    for (size_t i = 0; i < 3; i++) {
        ids[i] = json_integer_value(json_object_get(json_array_get(out, i), "id"));
        of[i] = json_integer_value(json_object_get(json_array_get(out, i), "redo_of"));
    }
    json_decref(out);
    assert_int_equal(of[0], a);
    assert_int_equal(of[1], b);
    assert_int_equal(of[2], c);
    struct job *na = jobs_get(f->t, ids[0]), *nb = jobs_get(f->t, ids[1]),
               *nc = jobs_get(f->t, ids[2]);
    assert_string_equal(na->command, "true");
    assert_string_equal(na->name, "a");
    assert_int_equal(nb->deps[0].id, ids[0]);
    assert_int_equal(nc->deps[0].id, ids[1]);
    assert_true(nb->sched.deps_blocked && nc->sched.deps_blocked);

    /* Only the owner may redo; a job that does not exist is 404. */
    const struct jobspec_owner eve = {.user = "eve", .uid = 1002, .now = 1e9};
    struct jobedit_ctx other = {f->t, &lim, &eve, 0, NULL};
    assert_int_equal(jobedit_redo(&other, a, NULL, false, &out, &err), 403);
    assert_string_equal(err, "job 1 belongs to bob; only its owner may redo it");
    free(err);
    assert_int_equal(jobedit_redo(&ctx, 999, NULL, false, &out, &err), 404);
    free(err);
    /* A bad change is refused and submits nothing. */
    int64_t next = jobs_next_id(f->t);
    over = json_pack("{s:s}", "workdir", "relative");
    assert_int_equal(jobedit_redo(&ctx, a, over, false, &out, &err), 400);
    free(err);
    json_decref(over);
    assert_int_equal(jobs_next_id(f->t), next);

    /* At the per-user limit a redo is refused; the count follows the table. */
    assert_int_equal(jobs_active_of(f->t, bob.uid), 3);
    assert_int_equal(jobs_active_of(f->t, eve.uid), 0);
    struct jobedit_ctx full = {f->t, &lim, &bob, 3, NULL};
    assert_int_equal(jobedit_redo(&full, a, NULL, false, &out, &err), 429);
    assert_non_null(strstr(err, "limits.max_active_jobs_per_user"));
    free(err);
    assert_int_equal(jobs_next_id(f->t), next);
    assert_int_equal(jobs_set_state(f->t, nc, JOB_CANCELLED, JOB_REASON_CANCELLED_BY_USER, 0, NULL),
                     0);
    assert_int_equal(jobs_active_of(f->t, bob.uid), 2);
    assert_int_equal(jobedit_redo(&full, a, NULL, false, &out, &err), 0);
    json_decref(out);
    assert_int_equal(jobs_active_of(f->t, bob.uid), 3);
}

/* A transaction the store lost (rolled back) is undone in memory by reloading the table:
 * a job's end, with its retry and the dependents it took along, is as it was before,
 * a submission is gone, and what waited for the commit (a signal, a file's removal)
 * never happens. The table stays usable at the same address. */
static void test_reload_after_a_lost_transaction(void **state)
{
    struct fixture *f = *state;
    int64_t r = submit(f, "{\"command\": \"false\", \"workdir\": \"/\", \"max_retries\": 1}");
    int64_t d = submit_after(f, "1", true);
    assert_int_equal(pass(f), 1);
    assert_int_equal(jobs_commit(f->t), 0);

    /* One iteration's changes: r fails (and is retried), a submission, a signal and a
     * file's removal waiting for the commit. */
    end(f, r, JOB_FAILED, JOB_REASON_NON_ZERO_EXIT);
    int64_t lost = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    jobs_after_commit_signal(f->t, r, SIGTERM);
    char keep[160];
    snprintf(keep, sizeof(keep), "%s/keep", f->dir);
    FILE *fp = fopen(keep, "w");
    assert_non_null(fp);
    fclose(fp);
    jobs_after_commit_unlink(f->t, xstrdup(keep));
    assert_null(jobs_get(f->t, r));

    store_rollback(f->s); /* what serve.c does once the store says it was lost */
    struct jobs *before = f->t;
    char *err = NULL;
    assert_int_equal(jobs_reload(f->t, &err), 0);
    assert_ptr_equal(f->t, before);
    struct job *rj = jobs_get(f->t, r);
    assert_non_null(rj);
    assert_int_equal(rj->state, JOB_RUNNING);
    assert_int_equal(rj->attempt, 1);
    assert_null(jobs_get(f->t, lost));
    assert_null(jobs_get(f->t, lost + 1)); /* no retry either */
    struct job *dj = jobs_get(f->t, d);
    assert_non_null(dj);
    assert_int_equal(dj->deps[0].id, r);
    assert_int_equal(dj->deps[0].status, JOB_DEP_PENDING);
    assert_true(jobs_next_id(f->t) > lost); /* an id handed out is not handed out again */
    assert_int_equal(jobs_commit(f->t), 0);
    assert_int_equal(f->n_signalled, 0);
    assert_int_equal(access(keep, F_OK), 0);
    unlink(keep);

    /* Done again, it all happens as it should have. */
    end(f, r, JOB_FAILED, JOB_REASON_NON_ZERO_EXIT);
    assert_int_equal(jobs_commit(f->t), 0);
    assert_int_equal(stored_state(f, r), JOB_FAILED);
    int64_t again;
    assert_int_equal(store_retried_as(f->s, r, &again), 0);
    assert_true(again > lost);
    assert_int_equal(jobs_get(f->t, d)->deps[0].id, again);
}

/* A job of bob's with a begin time. */
static int64_t submit_at(struct fixture *f, double begin)
{
    char *spec =
        xasprintf("{\"command\": \"true\", \"workdir\": \"/\", \"begin_time\": %.0f}", begin);
    int64_t id = submit(f, spec);
    free(spec);
    return id;
}

/* Runs a pass at time now: how many start (the first in *first), the next begin time. */
static size_t pass_at(struct fixture *f, double now, int64_t *first, double *next_pass)
{
    struct jobs_machine m = {.gpus = &no_gpus};
    struct job **started;
    jobs_mark_dirty(f->t);
    size_t n = jobs_schedule(f->t, &m, now, &started, next_pass);
    *first = n ? started[0]->id : 0;
    free(started);
    return n;
}

/* Jobs waiting for their begin time (a heap) or their dependencies are kept out of the
 * queue with their reason, and come back when it is over: after a hold and a release, a
 * changed priority, a bulk hold and release, a reload. */
static void test_begin_and_deps_aside(void **state)
{
    struct fixture *f = *state;
    double now = (double)time(NULL);
    int64_t far = submit_at(f, now + 1000), far2 = submit_at(f, now + 1000);
    int64_t soon = submit_at(f, now + 100);
    char ids[32];
    snprintf(ids, sizeof(ids), "%lld", (long long)far);
    int64_t dep = submit_after(f, ids, true);
    int64_t ready = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    int64_t first;
    double next;
    assert_int_equal(pass_at(f, now, &first, &next), 1);
    assert_int_equal(first, ready);
    assert_true(next == now + 100);
    assert_string_equal(jobs_get(f->t, far)->wait_reason, "BeginTime");
    assert_string_equal(jobs_get(f->t, soon)->wait_reason, "BeginTime");
    assert_string_equal(jobs_get(f->t, dep)->wait_reason, "Dependency");

    /* Held, then released with a begin time already passed: it starts. */
    struct job *j = jobs_get(f->t, far2);
    assert_int_equal(jobs_set_state(f->t, j, JOB_HELD, JOB_REASON_HELD_BY_USER, 0, NULL), 0);
    assert_null(j->wait_reason);
    j->begin_time = now - 1;
    assert_int_equal(jobs_set_state(f->t, j, JOB_QUEUED, JOB_REASON_NONE, 0, NULL), 0);
    assert_int_equal(pass_at(f, now, &first, &next), 1);
    assert_int_equal(first, far2);

    /* A changed priority keeps it waiting. */
    struct jobedit_ctx c = {f->t, &lim, &bob, 0, NULL};
    json_t *changes, *over = json_pack("{s:i}", "priority", 99);
    char *err = NULL;
    assert_int_equal(jobedit_update(&c, jobs_get(f->t, far), over, 1, false, &changes, &err), 0);
    json_decref(changes);
    json_decref(over);
    assert_string_equal(jobs_get(f->t, far)->wait_reason, "BeginTime");

    /* Its time come, soon starts; far still waits, and the next begin is its. */
    assert_int_equal(pass_at(f, now + 100, &first, &next), 1);
    assert_int_equal(first, soon);
    assert_true(next == now + 1000);

    /* Held and released in bulk. */
    jobs_bulk_begin(f->t, 3);
    j = jobs_get(f->t, far);
    assert_int_equal(jobs_set_state(f->t, j, JOB_HELD, JOB_REASON_HELD_BY_USER, 0, NULL), 0);
    assert_int_equal(jobs_set_state(f->t, j, JOB_QUEUED, JOB_REASON_NONE, 0, NULL), 0);
    jobs_bulk_end(f->t);
    assert_string_equal(jobs_get(f->t, far)->wait_reason, "BeginTime");
    assert_int_equal(pass_at(f, now + 100, &first, &next), 0);
    assert_true(next == now + 1000);

    /* A reload puts each where it waits. */
    assert_int_equal(jobs_commit(f->t), 0);
    assert_int_equal(jobs_reload(f->t, &err), 0);
    assert_string_equal(jobs_get(f->t, far)->wait_reason, "BeginTime");
    assert_string_equal(jobs_get(f->t, dep)->wait_reason, "Dependency");
    assert_int_equal(pass_at(f, now + 100, &first, &next), 0);
    assert_true(next == now + 1000);
    assert_int_equal(pass_at(f, now + 1000, &first, &next), 1);
    assert_int_equal(first, far);
    assert_true(next == 0);
    /* far done, its dependent goes into the queue and starts. */
    end(f, far, JOB_FINISHED, JOB_REASON_NONE);
    assert_int_equal(pass_at(f, now + 1000, &first, &next), 1);
    assert_int_equal(first, dep);
}

/* A bulk change writes its state changes at its end, a run of consecutive ids with the
 * same values in one statement: what the store then holds is each job's own state,
 * reason and times, whether it was in a run, alone, or changed twice. */
static void test_bulk_saves(void **state)
{
    struct fixture *f = *state;
    int64_t id[7];
    for (int i = 0; i < 7; i++)
        id[i] = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    assert_int_equal(id[6], id[0] + 6);
    jobs_get(f->t, id[4])->begin_time = 2e9; /* breaks the run 3-5 (released below) */
    assert_int_equal(jobs_commit(f->t), 0);

    jobs_bulk_begin(f->t, 7);
    for (int i = 0; i < 7; i++) {
        struct job *j = jobs_get(f->t, id[i]);
        if (i == 2) { /* cancelled amid the held: its own values */
            j->end_time = 1e9 + 5;
            assert_int_equal(
                jobs_set_state(f->t, j, JOB_CANCELLED, JOB_REASON_CANCELLED_BY_USER, 0, NULL), 0);
        } else {
            assert_int_equal(jobs_set_state(f->t, j, JOB_HELD, JOB_REASON_HELD_BY_USER, 0, NULL),
                             0);
        }
    }
    /* Held, then released in the same change. */
    for (int i = 3; i < 6; i++)
        assert_int_equal(
            jobs_set_state(f->t, jobs_get(f->t, id[i]), JOB_QUEUED, JOB_REASON_NONE, 0, NULL), 0);
    jobs_bulk_end(f->t);
    assert_null(jobs_get(f->t, id[2]));
    assert_int_equal(jobs_commit(f->t), 0);
    jobs_collect(f->t);

    enum job_state want[] = {JOB_HELD,   JOB_HELD,   JOB_CANCELLED, JOB_QUEUED,
                             JOB_QUEUED, JOB_QUEUED, JOB_HELD};
    for (int i = 0; i < 7; i++) {
        struct job j = stored(f, id[i]);
        assert_int_equal(j.state, want[i]);
        assert_int_equal(j.reason, want[i] == JOB_HELD        ? JOB_REASON_HELD_BY_USER
                                   : want[i] == JOB_CANCELLED ? JOB_REASON_CANCELLED_BY_USER
                                                              : JOB_REASON_NONE);
        assert_true(j.begin_time == (i == 4 ? 2e9 : 0));
        assert_true(j.end_time == (i == 2 ? 1e9 + 5 : 0));
        job_clear(&j);
    }

    /* A run whose rows are not all there is refused, and so is one that is no range. */
    struct job *j = jobs_get(f->t, id[0]);
    assert_int_equal(store_update_state(f->s, j, id[0] + 100), -1);
    assert_int_equal(store_update_state(f->s, j, id[0] - 1), -1);
    assert_true(store_same_state(jobs_get(f->t, id[0]), jobs_get(f->t, id[1])));
    assert_false(store_same_state(jobs_get(f->t, id[3]), jobs_get(f->t, id[4])));
    store_rollback(f->s);
}
/* may_start of the test below: the jobs of user "bob" while known is false. */
static bool users_known;
static bool bob_known(void *arg, const struct job *j)
{
    (void)arg;
    return users_known || strcmp(j->user, "bob") != 0;
}

/* A job the pass chose whose user is not known yet waits aside (UserLookup), out of the
 * queue, and no pass starts it until an answer comes; cancelling it then works. */
static void test_user_lookup_aside(void **state)
{
    struct fixture *f = *state;
    int64_t a = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    int64_t b = submit(f, "{\"command\": \"true\", \"workdir\": \"/\"}");
    struct jobs_machine m = {.gpus = &no_gpus, .may_start = bob_known};
    struct job **started = NULL;
    double next_pass;
    users_known = false;
    assert_int_equal(jobs_schedule(f->t, &m, 1e9, &started, &next_pass), 0);
    assert_string_equal(jobs_get(f->t, a)->wait_reason, "UserLookup");
    assert_int_equal(jobs_get(f->t, a)->state, JOB_QUEUED);
    size_t n;
    jobs_queued(f->t, &n);
    assert_int_equal(n, 0);
    assert_int_equal(jobs_schedule(f->t, &m, 1e9, &started, &next_pass), 0);
    users_known = true; /* still aside until the answer is told */
    assert_int_equal(jobs_schedule(f->t, &m, 1e9, &started, &next_pass), 0);
    assert_int_equal(jobs_set_state(f->t, jobs_get(f->t, b), JOB_CANCELLED,
                                    JOB_REASON_CANCELLED_BY_USER, 0, NULL),
                     0);
    jobs_users_answered(f->t);
    assert_int_equal(jobs_schedule(f->t, &m, 1e9, &started, &next_pass), 1);
    assert_int_equal(started[0]->id, a);
    free(started);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_cascade),
        T(test_retries),
        T(test_pass_and_commit),
        T(test_group_limit),
        T(test_hand_over),
        T(test_update),
        T(test_redo_cascade),
        T(test_reload_after_a_lost_transaction),
        T(test_begin_and_deps_aside),
        T(test_bulk_saves),
        T(test_user_lookup_aside),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
