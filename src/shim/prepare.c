/* prepare: steps 1-4 up to the fork: leaving the daemon's session and taking over its
 * lock, the environment, the job log, the job user's credentials and groups, conda, the
 * program to execute and the copies' environments; and freeing all of it once the job
 * holds its own copies. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "util.h"

/* Step 1: own session, lock file, subreaper. */
static int shim_prepare_detach(const struct shim_opts *o, char **err)
{
    /* setsid fails only for a process group leader, which a fresh child of the daemon
     * never is. Started by hand from a shell, staying in the shell's session is what
     * the user expects (Ctrl-C cancels the job), so go on. */
    if (setsid() < 0 && errno != EPERM) {
        *err = xasprintf("setsid: %s", strerror(errno));
        return -1;
    }
    if (o->lock_fd >= 0 && shim_report_lock(o->lock_fd, !o->exit_file, err) < 0)
        return -1;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
        *err = xasprintf("cannot become a subreaper: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Decides whether the job changes user: only a root shim can, and a non-root shim
 * asked to run as someone else must not quietly run the job as itself. */
static int shim_prepare_want_creds(const struct shim_opts *o, bool *set_creds, char **err)
{
    *set_creds = false;
    if (o->uid < 0)
        return 0;
    if (geteuid() == 0) {
        *set_creds = true;
        return 0;
    }
    if ((uid_t)o->uid == geteuid() && (gid_t)o->gid == getegid())
        return 0;
    *err = xasprintf("--uid %lld needs a root shim", (long long)o->uid);
    return -1;
}

/* The job user's supplementary groups: those gflowd resolved (--groups, which opts.c
 * requires with --uid). The shim never looks them up: it has no NSS (it is linked
 * statically), and the lookup has no place in the child between fork and exec. */
static void shim_prepare_groups(const struct shim_opts *o, struct shim_exec *ex)
{
    ex->groups = xcalloc((size_t)o->ngroups, sizeof(gid_t));
    memcpy(ex->groups, o->groups, (size_t)o->ngroups * sizeof(gid_t));
    ex->ngroups = o->ngroups;
}

/* Whether gid is in the list, or is the primary group: for access checks the kernel
 * counts the effective gid whether or not it is also a supplementary group, and a
 * process whose real, effective and saved gid are all the primary one has no other to
 * change to (root excepted, which can set any groups anyway). */
static bool shim_prepare_has_group(const gid_t *list, int n, gid_t primary, gid_t gid)
{
    if (gid == primary)
        return true;
    for (int i = 0; i < n; i++)
        if (list[i] == gid)
            return true;
    return false;
}

/* Whether the shim already is the job user: real, effective and saved uid and gid, and
 * the same supplementary groups (up to the primary group). Then there are no
 * credentials to change, in the child or for the checks. */
static bool shim_prepare_is_own(const struct shim_exec *ex)
{
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru != ex->uid ||
        eu != ex->uid || su != ex->uid || rg != ex->gid || eg != ex->gid || sg != ex->gid)
        return false;
    gid_t own[256];
    int n = getgroups(256, own);
    if (n < 0)
        return false;
    for (int i = 0; i < n; i++)
        if (!shim_prepare_has_group(ex->groups, ex->ngroups, ex->gid, own[i]))
            return false;
    for (int k = 0; k < ex->ngroups; k++)
        if (!shim_prepare_has_group(own, n, ex->gid, ex->groups[k]))
            return false;
    return true;
}

/* The filesystem checks made for the job before it starts (conda and its environment,
 * the command's lookup, the script's first bytes) are made as the job user, so that a
 * root shim answers only what that user could find out (docs/security.md: a CONDA_EXE or
 * --conda-env path under a directory only root can read is "not found", exactly like
 * one that does not exist). The shim takes the job user's effective gid, groups and uid
 * for them and then its own back: its real and saved uid stay 0, which is what lets it
 * return, and keeps the user's processes from signalling or tracing it meanwhile (the
 * kernel checks those against the real and saved ids). Nothing is opened for writing
 * or created in between, but the job's log in a directory others may write (joblog.c). */
int shim_prepare_as_user(const struct shim_exec *ex, struct shim_prepare_ids *saved, char **err)
{
    memset(saved, 0, sizeof(*saved));
    if (!ex->set_creds || geteuid() != 0)
        return 0;
    saved->egid = getegid();
    int n = getgroups(0, NULL);
    saved->groups = xcalloc(n > 0 ? (size_t)n : 1, sizeof(gid_t));
    saved->ngroups = n > 0 ? getgroups(n, saved->groups) : 0;
    if (saved->ngroups < 0 || setgroups((size_t)ex->ngroups, ex->groups) < 0 ||
        setegid(ex->gid) < 0 || seteuid(ex->uid) < 0) {
        *err = xasprintf("cannot take the identity of user %s for the job's checks: %s", ex->user,
                         strerror(errno));
        saved->switched = true; /* whatever changed goes back */
        return -1;
    }
    saved->switched = true;
    return 0;
}

/* Back to the shim's own ids (the uid first: setgroups and setegid need root). 0, or
 * -1 with *err when that fails: the shim must not go on as anyone else. */
int shim_prepare_as_root(struct shim_prepare_ids *saved, char **err)
{
    int rc = 0;
    if (saved->switched && (seteuid(0) < 0 || setegid(saved->egid) < 0 ||
                            setgroups((size_t)saved->ngroups, saved->groups) < 0)) {
        if (err && !*err)
            *err = xasprintf("cannot return to the shim's own identity: %s", strerror(errno));
        rc = -1;
    }
    free(saved->groups);
    memset(saved, 0, sizeof(*saved));
    return rc;
}

/* Frees and closes what shim_prepare put in ex. */
void shim_prepare_free(struct shim_exec *ex)
{
    free(ex->direct_argv);
    if (ex->direct_paths)
        for (char **p = ex->direct_paths; *p; p++)
            free(*p);
    free(ex->direct_paths);
    free(ex->direct_buf);
    if (ex->task_envp) {
        for (int i = 0; i < ex->ntasks; i++) {
            char **env = ex->task_envp[i];
            for (size_t j = ex->task_env_shared; env && env[j]; j++)
                free(env[j]);
            free(env);
        }
        free(ex->task_envp);
    }
    free(ex->envp);
    for (size_t i = 0; i < SHIM_N_CONDA_VARS; i++)
        free(ex->conda_vars[i]);
    free(ex->conda_prefix);
    free(ex->conda_base);
    free(ex->lookup_error);
    free(ex->marker);
    free(ex->env_buf);
    free(ex->groups);
    if (ex->log_fd >= 0)
        close(ex->log_fd);
    if (ex->out_fd >= 0)
        close(ex->out_fd);
    if (ex->pty_slave >= 0) /* the job's own now: its last close ends the terminal */
        close(ex->pty_slave);
    if (ex->null_fd >= 0)
        close(ex->null_fd);
    if (ex->jobcg_procs_fd >= 0)
        close(ex->jobcg_procs_fd);
    if (ex->cgroup_procs_fd >= 0)
        close(ex->cgroup_procs_fd);
    if (ex->memcg_procs_fd >= 0)
        close(ex->memcg_procs_fd);
}

void shim_prepare_init(struct shim_exec *ex)
{
    *ex = (struct shim_exec){.log_fd = -1,
                             .out_fd = -1,
                             .pty_slave = -1,
                             .null_fd = -1,
                             .report_fd = -1,
                             .jobcg_procs_fd = -1,
                             .cgroup_procs_fd = -1,
                             .memcg_procs_fd = -1};
}

/* The filesystem calls made on the job user's behalf before the job starts: the log,
 * conda and its environment, the script's first bytes, the command's lookup. They may
 * wait for ever on a file system that does not answer (a hung NFS or FUSE mount on the
 * job's PATH, its workdir or script), so a supervisor makes them in the job's own
 * process after fork (child.c), never in the process its other jobs depend on; a shim
 * of one job makes them itself. 0 or -1 with *err. */
int shim_prepare_files(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    ex->log_fd = shim_joblog_open(o, ex, err);
    if (ex->log_fd < 0)
        return -1;
    struct shim_prepare_ids saved;
    int rc = shim_prepare_as_user(ex, &saved, err);
    if (rc == 0)
        rc = shim_conda_prepare(o, ex, err);
    if (rc == 0) {
        shim_command_prepare(o, ex);
        shim_lookup_prepare(o, ex);
    }
    if (shim_prepare_as_root(&saved, err) < 0 || rc < 0)
        return -1;
    return 0;
}

/* Steps 1-4 up to the fork. Returns 0 or -1 with *err set; fills ex. */
int shim_prepare(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    if (shim_prepare_detach(o, err) < 0 || shim_env_read(o, ex, err) < 0 ||
        shim_prepare_want_creds(o, &ex->set_creds, err) < 0)
        return -1;
    /* Step 2: the marker that names this run of the job in every process of it. */
    ex->marker = shim_supervisor_path
                     ? exitfile_job_marker(getpid(), shim_report_self_start(), o->job_id)
                     : exitfile_marker(getpid(), shim_report_self_start());
    shim_env_set(ex, &ex->marker, 1);
    ex->nofile = o->nofile;
    if (ex->set_creds) {
        ex->uid = (uid_t)o->uid;
        ex->gid = (gid_t)o->gid;
        ex->user = o->user;
        shim_prepare_groups(o, ex);
    }
    if (ex->set_creds && shim_prepare_is_own(ex))
        ex->set_creds = false;
    ex->null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (ex->null_fd < 0) {
        *err = xasprintf("cannot open /dev/null: %s", strerror(errno));
        return -1;
    }
    ex->workdir = o->workdir;
    ex->umask = o->umask;
    ex->opts = o;
    if (shim_supervisor_path) {
        /* The job's own process opens the log and passes it back (child.c); until then
         * the relay holds /dev/null in its place. */
        ex->files_in_child = true;
        ex->log_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (ex->log_fd < 0) {
            *err = xasprintf("cannot open /dev/null: %s", strerror(errno));
            return -1;
        }
    } else if (shim_prepare_files(o, ex, err) < 0) {
        return -1;
    }
    return shim_env_tasks(o, ex, err);
}
