/* child: the job's copies from fork to exec (step 4): forking them into one process
 * group (vfork), what each child does before exec (signals, cgroups, credentials,
 * workdir, log; only system calls after fork), and the pipe on which a child that
 * cannot start says why.
 *
 * A supervisor's job is forked instead (fork, not vfork, which would stop the
 * supervisor until the exec): its child makes the filesystem calls on the job user's
 * behalf itself (shim_prepare_files: the log, conda, the script, the PATH search), so
 * that a file system that never answers stops that job alone, and sends the log and
 * the lookup's answer back on a socket (SOCK_SEQPACKET) in place of the pipe: one
 * message with the log fd (SCM_RIGHTS) and "<lookup code>\0<lookup error>", or the
 * reason it could not start, as a shim's child writes it on the pipe. */
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/close_range.h>

#include "util.h"

/* Reports why the job could not start, to the shim only (text, one line), and exits. */
__attribute__((noreturn)) static void shim_child_fail_text(const struct shim_exec *ex, int code,
                                                           const char *text)
{
    if (write(ex->report_fd, text, strlen(text)) < 0) {
        /* the exit code still says it */
    }
    _exit(code);
}

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

/* A supervisor's forked child: closes every fd but those of its own job, so that a
 * child stuck in a hung file system holds nothing of the supervisor's other jobs (their
 * lock fds, whose flock says they run, their pipes and logs). */
static void shim_child_close_others(const struct shim_exec *ex)
{
    int keep[] = {ex->out_fd, ex->null_fd, ex->report_fd, ex->jobcg_procs_fd};
    int n = (int)(sizeof(keep) / sizeof(keep[0]));
    for (int i = 1; i < n; i++) /* sorted, a handful */
        for (int k = i; k > 0 && keep[k - 1] > keep[k]; k--) {
            int t = keep[k];
            keep[k] = keep[k - 1];
            keep[k - 1] = t;
        }
    unsigned from = 3;
    for (int i = 0; i < n; i++) {
        if (keep[i] < (int)from)
            continue;
        if (keep[i] > (int)from)
            syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
        from = (unsigned)keep[i] + 1;
    }
    syscall(SYS_close_range, from, ~0U, 0);
}

/* A supervisor's forked child, still root: makes the filesystem calls on the job user's
 * behalf (shim_prepare_files) and sends the supervisor the log and what a 127 or 126
 * will mean; when they fail, the reason instead, and exits 125. */
static void shim_child_files(struct shim_exec *ex)
{
    close(ex->log_fd); /* the supervisor's stand-in, closed already or not */
    ex->log_fd = -1;
    char *err = NULL;
    if (shim_prepare_files(ex->opts, ex, &err) < 0) {
        char *line = xasprintf("%s\n", err ? err : "cannot prepare the job");
        shim_child_fail_text(ex, JOB_EXIT_SETUP, line);
    }
    char code[16];
    size_t clen = (size_t)snprintf(code, sizeof(code), "%d", ex->lookup_code);
    const char *why = ex->lookup_error ? ex->lookup_error : "";
    size_t len = clen + 1 + strlen(why);
    char *text = xmalloc(len);
    memcpy(text, code, clen + 1);
    memcpy(text + clen + 1, why, strlen(why));
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof(control));
    struct iovec iov = {.iov_base = text, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.space,
                       .msg_controllen = sizeof(control.space)};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &ex->log_fd, sizeof(int));
    if (sendmsg(ex->report_fd, &m, MSG_NOSIGNAL) < 0)
        shim_child_fail(ex, JOB_EXIT_SETUP, "cannot pass the log", "to the supervisor", errno);
    free(text);
}

/* Runs in the forked child: becomes the job, or one copy of it with envp. Only
 * system calls from here on (but in a supervisor's child, which is forked). */
__attribute__((noreturn)) static void shim_child(struct shim_exec *ex, char *const *envp)
{
    if (ex->files_in_child)
        shim_child_close_others(ex);
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
    /* --cpus, after the cgroups (joining a cpuset resets the affinity to it): a
     * preference for speed, so a refusal (CPUs gone offline since) leaves the job
     * unpinned rather than failed. */
    if (ex->pin_cpus)
        (void)sched_setaffinity(0, sizeof(ex->cpus), &ex->cpus);
    if (ex->files_in_child) {
        shim_child_files(ex);
        envp = ex->envp; /* conda adds to it */
    }
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
    if (ex->files_in_child ? socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p)
                           : pipe2(p, O_CLOEXEC)) {
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
         * in the shared memory. A supervisor forks: its child looks at the user's files
         * (a hung mount must not stop the supervisor), and the supervisor is small. */
        pid_t pid = ex->files_in_child ? fork() : vfork();
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
