/* hook: the admin's pre and post hooks ([hooks] pre and post in gflowd's config, passed
 * as --prolog and --epilog). Each is `/bin/bash -c HOOK`, started exactly as a copy of
 * the job would be (child.c: the job's cgroups, user, groups, umask, workdir and
 * environment, plus GFLOW_HOOK=pre|post and, after a job that ran, GFLOW_JOB_EXIT_CODE),
 * with its output in the job's log after a line of the shim's own, and supervised by the
 * job's loop (supervise.c): a cancel during the pre hook stops it (and the job is not
 * started), the post hook runs to its end whatever comes, and --hook-timeout stops
 * either (SIGTERM, SIGKILL after the kill grace), which counts as its failure. What is
 * left of a hook is killed before the job, or the shim's end, goes on.
 *
 * A hook is never run by a supervisor of many jobs (gflowd gives a job with hooks a shim
 * of its own), and never as root for another user's job: the credentials are the job's. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static const char *shim_hook_name(enum shim_hook which)
{
    return which == SHIM_HOOK_PRE ? "pre" : "post";
}

/* The job's environment with the hook's own variables (the array is to free; its
 * strings are ex's and vars'). */
static char **shim_hook_env(struct shim_exec *ex, char *const *vars, size_t nvars)
{
    size_t n = 0;
    while (ex->envp[n])
        n++;
    struct shim_exec tmp = {.envp = xmalloc((n + 1) * sizeof(*ex->envp))};
    memcpy(tmp.envp, ex->envp, (n + 1) * sizeof(*ex->envp));
    shim_env_set(&tmp, vars, nvars); /* frees the copy, makes the new array */
    return tmp.envp;
}

/* What the hook's wait status says, as the reason of its failure (to free), or NULL
 * when it exited 0. */
static char *shim_hook_failure(enum shim_hook which, int status, bool timed_out, double timeout,
                               bool stopped)
{
    const char *name = shim_hook_name(which);
    if (timed_out)
        return xasprintf("%s hook timed out after %g s (hooks.timeout) and was killed", name,
                         timeout);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return stopped && which == SHIM_HOOK_PRE
                   ? xasprintf("the job was asked to end during its %s hook", name)
                   : NULL;
    if (WIFEXITED(status))
        return xasprintf("%s hook exited with status %d", name, WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return xasprintf("%s hook killed by signal %d", name, WTERMSIG(status));
    return xasprintf("%s hook ended abnormally", name);
}

/* The job's run state, put aside while the hook is the only "copy" of the loop. */
struct shim_hook_saved {
    struct shim_task *tasks;
    int ntasks, nreaped, first_failed, report_rd;
    pid_t pgid;
};

static void shim_hook_take_loop(struct shim_run *r, struct shim_hook_saved *s)
{
    *s = (struct shim_hook_saved){r->tasks,        r->ntasks,    r->nreaped,
                                  r->first_failed, r->report_rd, r->pgid};
    r->tasks = NULL;
    r->ntasks = r->nreaped = 0;
    r->first_failed = -1;
    r->report_rd = -1;
    r->pgid = 0;
    /* Whatever ended the job (a cancel's grace, the re-kill period) is over: the hook
     * gets a timer of its own, and a cancel of its own. */
    r->term_sent = r->kill_phase = false;
    shim_supervise_disarm(r->tfd);
}

static void shim_hook_give_back_loop(struct shim_run *r, const struct shim_hook_saved *s)
{
    free(r->tasks);
    if (r->report_rd >= 0)
        close(r->report_rd);
    r->tasks = s->tasks;
    r->ntasks = s->ntasks;
    r->nreaped = s->nreaped;
    r->first_failed = s->first_failed;
    r->report_rd = s->report_rd;
    r->pgid = s->pgid;
    r->term_sent = r->kill_phase = false;
    shim_supervise_disarm(r->tfd);
}

int shim_hook_run(const struct shim_opts *o, struct shim_exec *ex, struct shim_run *r,
                  enum shim_hook which, const char *exit_code, char **why)
{
    const char *cmd = which == SHIM_HOOK_PRE ? o->prolog : o->epilog;
    const char *name = shim_hook_name(which);
    *why = NULL;
    char *line = xasprintf("gflow-shim: %s hook\n", name);
    shim_relay_line_start(&r->relay, line);
    free(line);

    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        *why = xasprintf("%s hook could not start: cannot make its output pipe: %s", name,
                         strerror(errno));
        return SHIM_HOOK_SETUP;
    }
    char *vars[2] = {xasprintf("GFLOW_HOOK=%s", name), NULL};
    size_t nvars = 1;
    if (exit_code)
        vars[nvars++] = xasprintf("GFLOW_JOB_EXIT_CODE=%s", exit_code);
    struct shim_exec hx = *ex;
    hx.path = "/bin/bash";
    hx.argv[0] = "bash";
    hx.argv[1] = "-c";
    hx.argv[2] = cmd;
    hx.argv[3] = NULL;
    hx.direct_argv = hx.direct_paths = NULL;
    hx.ntasks = 1;
    hx.task_envp = NULL;
    hx.pgid = 0;
    hx.out_fd = p[1];
    hx.pty_slave = -1; /* the terminal is the job's: the hook writes to the log */
    hx.files_in_child = false;
    hx.envp = shim_hook_env(ex, vars, nvars);

    struct shim_hook_saved saved;
    shim_hook_take_loop(r, &saved);
    r->phase = which == SHIM_HOOK_PRE ? SHIM_PHASE_PRE : SHIM_PHASE_POST;
    r->hook_timed_out = false;
    bool stopped_before = r->stop_asked;
    char *err = NULL;
    int started = shim_child_spawn(&hx, r, &err);
    close(p[1]);
    int rc = SHIM_HOOK_OK;
    if (started == 0) {
        *why = xasprintf("%s hook could not start: %s", name, err);
        rc = SHIM_HOOK_SETUP;
    } else {
        /* The hook's pipe stands in for the job's while it runs (the job's, or its
         * terminal, holds nothing yet before the job, and nothing more after it). */
        int job_rd = r->relay.rd;
        r->relay.rd = p[0];
        p[0] = -1;
        fcntl(r->relay.rd, F_SETFL, O_NONBLOCK);
        if (r->hook_tfd < 0)
            r->hook_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (r->hook_tfd >= 0 && o->hook_timeout > 0)
            shim_supervise_arm(r->hook_tfd, o->hook_timeout, 0);
        /* A cancel that came before the pre hook stops it at once. */
        if (which == SHIM_HOOK_PRE && stopped_before)
            shim_supervise_terminate(r);
        if (shim_supervise_run(r, &err) < 0) {
            fprintf(stderr, "gflow-shim: job %lld: %s hook: %s\n", (long long)o->job_id, name, err);
            shim_supervise_kill_all(r);
        }
        shim_supervise_disarm(r->hook_tfd);
        shim_relay_pump(&r->relay); /* every writer is gone: to its end */
        if (r->relay.rd >= 0)
            close(r->relay.rd);
        r->relay.rd = job_rd;
        char *report = shim_child_report(r->report_rd);
        int status = r->tasks[0].status;
        if (report && WIFEXITED(status) && WEXITSTATUS(status) == JOB_EXIT_SETUP) {
            /* The job's own set-up failed in the hook's child (its user, its workdir, its
             * cgroup): the job would fail the same way; it is that, not the hook. */
            *why = report;
            report = NULL;
            rc = SHIM_HOOK_SETUP;
        } else {
            *why =
                shim_hook_failure(which, status, r->hook_timed_out, o->hook_timeout, r->stop_asked);
            rc = *why ? SHIM_HOOK_FAILED : SHIM_HOOK_OK;
        }
        free(report);
    }
    if (p[0] >= 0)
        close(p[0]);
    r->phase = SHIM_PHASE_JOB;
    shim_hook_give_back_loop(r, &saved);
    free(err);
    free(hx.envp);
    for (size_t i = 0; i < nvars; i++)
        free(vars[i]);
    if (*why) {
        line = xasprintf("gflow-shim: %s%s\n", *why,
                         which == SHIM_HOOK_PRE && rc != SHIM_HOOK_OK ? "; the job is not started"
                                                                      : "");
        shim_relay_line_start(&r->relay, line);
        free(line);
    }
    return rc;
}
