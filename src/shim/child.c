/* child: the job's copies from fork to exec (step 4): forking them into one process
 * group (vfork), what each child does before exec (signals, cgroups, credentials,
 * workdir, log; only system calls after fork), and the pipe on which a child that
 * cannot start says why. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/close_range.h>

#include "util.h"

/* Reports why the job could not start, to its log and to the shim, and exits. */
__attribute__((noreturn)) static void shim_child_fail(const struct shim_exec *ex, int code,
                                                      const char *what, const char *arg, int e)
{
    char msg[PATH_MAX + 256];
    int n = snprintf(msg, sizeof(msg), "gflow-shim: %s %s: %s\n", what, arg, strerror(e));
    if (n < 0)
        _exit(code);
    if ((size_t)n >= sizeof(msg))
        n = (int)sizeof(msg) - 1;
    if (write(ex->log_fd, msg, (size_t)n) < 0) {
        /* nothing left to tell it to */
    }
    /* With the newline: copies share the pipe, and the shim keeps the first line. */
    if (write(ex->report_fd, msg, (size_t)n) < 0) {
        /* the exit code still says it */
    }
    _exit(code);
}

/* Restores the default action of sig. glibc's signal() refuses the two real-time
 * signals it reserves for itself (32, 33), yet a parent may have left them ignored and
 * the job would inherit that: those go through the system call directly. */
static void shim_child_default_signal(int sig)
{
    if (signal(sig, SIG_DFL) != SIG_ERR || errno != EINVAL)
        return;
    struct {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        unsigned long mask;
    } ksa = {SIG_DFL, 0, NULL, 0};
    syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
}

/* The signals this process ignores (bit s-1 for signal s), from the SigIgn line of
 * /proc/self/status: one read instead of a query per signal. All of them when it
 * cannot be read, so that the child then resets every one. */
static uint64_t shim_child_ignored_signals(void)
{
    uint64_t all = ~(uint64_t)0;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return all;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return all;
    buf[n] = '\0';
    const char *line = strstr(buf, "\nSigIgn:\t");
    if (!line)
        return all;
    char *end;
    errno = 0;
    unsigned long long mask = strtoull(line + strlen("\nSigIgn:\t"), &end, 16);
    if (errno || *end != '\n')
        return all;
    return (uint64_t)mask;
}

/* Runs in the forked child: becomes the job, or one copy of it with envp. Only
 * system calls from here on. */
__attribute__((noreturn)) static void shim_child(const struct shim_exec *ex, char *const *envp)
{
    /* Handlers are reset by exec, but ignored signals and the mask are inherited: only
     * the ignored ones need resetting. */
    for (int s = 1; s < NSIG && s <= 64; s++)
        if (ex->sig_ignored & ((uint64_t)1 << (s - 1)))
            shim_child_default_signal(s);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, NULL);
    /* Own process group, or the first copy's: one kill(-pgid) reaches the whole job.
     * With --pty, a session of its own instead (its group too), whose controlling
     * terminal is the shim's pseudo-terminal: Ctrl-C typed there reaches the job. */
    if (ex->pty_slave >= 0) {
        if (setsid() < 0 || ioctl(ex->pty_slave, TIOCSCTTY, 0) < 0)
            shim_child_fail(ex, JOB_EXIT_SETUP, "cannot take the terminal", "of the job", errno);
    } else {
        setpgid(0, ex->pgid);
    }
    /* Step 9, while still root and before exec: the job never runs outside its own
     * cgroup ("0" is the writer itself), so nothing it starts can leave supervision
     * unseen. Failing closed: the shim has told the daemon the job is in it. */
    if (ex->jobcg_procs_fd >= 0 && write(ex->jobcg_procs_fd, "0", 1) != 1)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot join the cgroup", "of the job", errno);
    /* Step 7, likewise: the job never runs outside its devices cgroup. Failing closed: a job that was to be
     * isolated must not run unisolated because joining went wrong. */
    if (ex->cgroup_procs_fd >= 0 && write(ex->cgroup_procs_fd, "0", 1) != 1)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot join the devices cgroup", "of the job", errno);
    /* Step 8, likewise: a job process outside the memory cgroup escapes the limit. */
    if (ex->memcg_procs_fd >= 0 && write(ex->memcg_procs_fd, "0", 1) != 1)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot join the memory cgroup", "of the job", errno);
    if (ex->set_creds) {
        if (setgroups((size_t)ex->ngroups, ex->groups) < 0)
            shim_child_fail(ex, JOB_EXIT_SETUP, "cannot set groups of user", ex->user, errno);
        if (setgid(ex->gid) < 0)
            shim_child_fail(ex, JOB_EXIT_SETUP, "cannot setgid for user", ex->user, errno);
        if (setuid(ex->uid) < 0)
            shim_child_fail(ex, JOB_EXIT_SETUP, "cannot setuid to user", ex->user, errno);
    }
    if (ex->umask >= 0)
        umask((mode_t)ex->umask);
    /* --nofile: the limit the daemon was started with, not the one it raised for
     * itself (only the soft limit: the hard one is the same). */
    if (ex->nofile >= 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
            rl.rlim_cur = (rlim_t)ex->nofile < rl.rlim_max ? (rlim_t)ex->nofile : rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    /* After setuid: the directory must be one the job user may enter. */
    if (chdir(ex->workdir) < 0)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot chdir to", ex->workdir, errno);
    int in_fd = ex->pty_slave >= 0 ? ex->pty_slave : ex->null_fd;
    int out_fd = ex->pty_slave >= 0 ? ex->pty_slave : ex->out_fd;
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot redirect output to", "log", errno);
    /* Whatever the daemon leaked to us without close-on-exec stays out of the job.
     * Best effort: kernels before 5.11 lack the flag, and the daemon opens its fds
     * close-on-exec anyway. */
    syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
    /* The direct exec tries the candidates as bash's search would pick them: the first
     * that is there and executable. Any other failure (ENOEXEC: a file bash would run
     * as a script) leaves the decision to bash itself. */
    if (ex->direct_paths)
        for (char **p = ex->direct_paths + ex->direct_first; *p; p++) {
            execve(*p, ex->direct_argv, envp);
            if (errno != ENOENT && errno != ENOTDIR && errno != EACCES)
                break;
        }
    execve(ex->path, (char *const *)ex->argv, envp);
    int e = errno;
    shim_child_fail(ex, e == ENOENT || e == ENOTDIR ? JOB_EXIT_NOTFOUND : JOB_EXIT_NOEXEC,
                    "cannot execute", ex->path, e);
}

/* Step 4: forks the copies of the job into r->tasks, all in the first one's process
 * group. Returns how many were forked; when not all, *err says why. */
int shim_child_spawn(struct shim_exec *ex, struct shim_run *r, char **err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        *err = xasprintf("pipe: %s", strerror(errno));
        return 0;
    }
    /* Read only once all copies are gone: many failing copies must not block on a full
     * pipe meanwhile (a lost line costs nothing, the first is what counts). */
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    ex->report_fd = p[1];
    ex->sig_ignored = shim_child_ignored_signals();
    r->tasks = xcalloc((size_t)ex->ntasks, sizeof(*r->tasks));
    int n;
    for (n = 0; n < ex->ntasks; n++) {
        /* vfork: the shim waits until the copy has exec'd (or exited), and neither its
         * page tables are copied nor its pages copied on write afterwards. The child
         * only makes system calls on its own stack frame below this one and never
         * returns; the shim catches signals through a signalfd, so no handler can run
         * in the shared memory. */
        pid_t pid = vfork();
        if (pid == 0)
            shim_child(ex, ex->task_envp ? ex->task_envp[n] : ex->envp);
        if (pid < 0) {
            *err = xasprintf("cannot fork the job: %s", strerror(errno));
            break;
        }
        if (n == 0)
            ex->pgid = pid;
        /* Also in the parent, so that the job's pgid is set whichever runs first and a
         * kill(-pgid) right away cannot miss. EACCES: the child already exec'd. */
        setpgid(pid, ex->pgid);
        r->tasks[n].pid = pid;
    }
    close(p[1]);
    r->ntasks = n;
    r->pgid = ex->pgid;
    r->report_rd = p[0];
    return n;
}

/* Reads the child's reason for not starting, if any; the pipe is at EOF once every
 * copy exec'd or exited. Returns NULL or a string to free: the first copy's line. */
char *shim_child_report(int fd)
{
    char buf[PATH_MAX + 256];
    size_t len = 0;
    while (len < sizeof(buf) - 1) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return len ? xstrndup(buf, strcspn(buf, "\n")) : NULL;
}
