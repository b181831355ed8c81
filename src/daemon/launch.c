/* launch: starting one job's gflow-shim: its command line (the protocol is in
 * src/shim/main.c), the job's environment in a memfd, its script file, the lock file
 * the shim inherits, and its start (vfork, exec). Which failures are for lack of a resource (the
 * job waits and is tried again) and which are the job's (it fails). */
#include "launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "exitfile.h"
#include "files.h"
#include "gpu.h"
#include "jobenv.h"
#include "log.h"
#include "loop.h"
#include "procinfo.h"
#include "runner.h"
#include "slurm.h"
#include "store.h"
#include "util.h"

bool launch_short_of(int e)
{
    return e == EMFILE || e == ENFILE || e == EAGAIN || e == ENOMEM;
}

/* For daemon.constrain_devices: the GPUs the job was not given, to be denied. */
static bool gpu_denied(const struct gflowd *d, const struct job *j, int index)
{
    /* A MIG job opens its instances through their parent GPU's device. */
    uint64_t given = j->gpu_mask | gpu_mig_parents(d->gpus, j->mig_uuids);
    return index >= 0 && index < GPUINFO_MAX_GPUS && !(given & (1ULL << index));
}

/* Whether every GPU the job must be denied has a known /dev/nvidia minor; if not, *err
 * says which. The minor is NVML's (nvmlDeviceGetMinorNumber), not the index: the two
 * differ on some servers and in containers, and denying by index would hide the job's
 * own GPU and leave another open. */
static bool denied_minors_known(const struct gflowd *d, const struct job *j, char **err)
{
    const struct gpu_set *set = gpu_current(d->gpus);
    for (size_t i = 0; i < set->n_gpus; i++) {
        const struct gpu_info *g = &set->gpus[i];
        if (gpu_denied(d, j, g->index) && g->minor < 0) {
            *err = xasprintf("cannot constrain the job to its GPUs (daemon.constrain_devices): "
                             "the /dev/nvidia minor of GPU %d is unknown%s%s%s",
                             g->index, g->unavailable[0] ? " (" : "", g->unavailable,
                             g->unavailable[0] ? ")" : "");
            return false;
        }
    }
    return true;
}

/* For daemon.constrain_devices: the minors of the GPUs the job was not given, "1,3",
 * as the shim's --deny-devices wants them; NULL when it was given them all. The caller
 * has checked denied_minors_known(). */
static char *denied_gpu_minors(const struct gflowd *d, const struct job *j)
{
    const struct gpu_set *set = gpu_current(d->gpus);
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < set->n_gpus; i++) {
        const struct gpu_info *g = &set->gpus[i];
        if (gpu_denied(d, j, g->index) && g->minor >= 0)
            strbuf_addf(&sb, "%s%d", sb.len ? "," : "", g->minor);
    }
    if (sb.len == 0) {
        strbuf_free(&sb);
        return NULL;
    }
    return strbuf_detach(&sb);
}

/* Moves fd above the low numbers the shim's fds are placed on (3, 4). */
static int high_fd(int fd)
{
    if (fd < 0 || fd >= 10)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    return moved;
}

/* The supplementary groups of the users whose jobs started lately ("GID,GID,...", as
 * the shim's --groups wants them), so that neither gflowd nor each shim goes through
 * NSS (initgroups, getgrouplist) per job. An entry is used only while /etc/group is the
 * same file, unchanged (device, inode, size, modification and change times), and for
 * at most LAUNCH_GROUPS_TTL seconds for groups that come from elsewhere (sssd, LDAP):
 * a stale entry must not grant a group the user no longer has (DESIGN.md §6). */
#define LAUNCH_GROUPS_SLOTS 16
#define LAUNCH_GROUPS_TTL 10.0

struct launch_groups {
    uid_t uid;
    gid_t gid;
    char *user;
    char *list; /* NULL: a free slot */
    struct stat etc_group;
    double at; /* monotonic */
};

static struct launch_groups launch_groups_cache[LAUNCH_GROUPS_SLOTS];
static size_t launch_groups_next;

static bool launch_same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The groups of pw as getgrouplist gives them (a string the cache keeps), or NULL when
 * they cannot be listed (more than the kernel allows a process: the shim, given no
 * --groups, then refuses to start the job). */
static const char *launch_user_groups(const struct passwd *pw)
{
    struct stat st;
    if (stat("/etc/group", &st) < 0)
        memset(&st, 0, sizeof(st));
    double now = now_mono();
    for (size_t i = 0; i < LAUNCH_GROUPS_SLOTS; i++) {
        struct launch_groups *c = &launch_groups_cache[i];
        if (c->list && c->uid == pw->pw_uid && c->gid == pw->pw_gid &&
            strcmp(c->user, pw->pw_name) == 0 && launch_same_file(&c->etc_group, &st) &&
            now - c->at < LAUNCH_GROUPS_TTL && now >= c->at)
            return c->list;
    }
    int n = 32;
    gid_t *groups = xmalloc((size_t)n * sizeof(*groups));
    while (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) < 0) {
        if (n <= 0 || n > 65536) {
            free(groups);
            return NULL;
        }
        groups = xrealloc(groups, (size_t)n * sizeof(*groups));
    }
    struct strbuf sb;
    strbuf_init(&sb);
    for (int i = 0; i < n; i++)
        strbuf_addf(&sb, "%s%u", i ? "," : "", (unsigned)groups[i]);
    free(groups);
    struct launch_groups *c = &launch_groups_cache[launch_groups_next];
    launch_groups_next = (launch_groups_next + 1) % LAUNCH_GROUPS_SLOTS;
    free(c->user);
    free(c->list);
    *c = (struct launch_groups){.uid = pw->pw_uid,
                                .gid = pw->pw_gid,
                                .user = xstrdup(pw->pw_name),
                                .list = strbuf_detach(&sb),
                                .etc_group = st,
                                .at = now};
    return c->list;
}

/* The shim's command line up to what the job runs (gflow-shim --help; the protocol is
 * in src/shim). */
static void shim_args(const struct gflowd *d, const struct job *j, const struct job *full,
                      const struct passwd *pw, const char *uuids, struct strvec *argv)
{
    strvec_push(argv, d->shim_path);
    strvec_push(argv, "--job-id");
    strvec_pushf(argv, "%lld", (long long)j->id);
    strvec_push(argv, "--log");
    strvec_pushf(argv, "%s/%lld.log", d->paths.log_dir, (long long)j->id);
    if (d->cfg.max_log_bytes > 0) {
        strvec_push(argv, "--log-max-bytes");
        strvec_pushf(argv, "%lld", (long long)d->cfg.max_log_bytes);
    }
    strvec_push(argv, "--workdir");
    strvec_push(argv, full->workdir ? full->workdir : "/");
    strvec_push(argv, "--kill-grace");
    strvec_pushf(argv, "%lld", (long long)d->cfg.kill_grace_secs);
    strvec_push(argv, "--lock-fd");
    strvec_push(argv, "3");
    strvec_push(argv, "--env-fd");
    strvec_push(argv, "4");
    if (pw) {
        strvec_push(argv, "--uid");
        strvec_pushf(argv, "%u", (unsigned)pw->pw_uid);
        strvec_push(argv, "--gid");
        strvec_pushf(argv, "%u", (unsigned)pw->pw_gid);
        strvec_push(argv, "--user");
        strvec_push(argv, pw->pw_name);
        const char *groups = launch_user_groups(pw);
        if (groups) {
            strvec_push(argv, "--groups");
            strvec_push(argv, groups);
        }
    }
    if (j->gpus_per_task && j->gpus > 1) { /* one copy of the command per GPU */
        strvec_push(argv, "--tasks");
        strvec_pushf(argv, "%d", j->gpus);
        strvec_push(argv, "--task-gpus");
        char *cuda = jobenv_cuda_devices(j->gpu_mask, uuids, gpu_uuid_ids(d->gpus));
        strvec_push(argv, cuda);
        free(cuda);
    }
    char *deny = d->cfg.constrain_devices ? denied_gpu_minors(d, j) : NULL;
    if (deny) {
        strvec_push(argv, "--deny-devices");
        strvec_push(argv, deny);
        free(deny);
    }
    if (j->memory_mb > 0) { /* held to it: cgroup v2, else v1, else a watchdog (the shim) */
        strvec_push(argv, "--memory-limit");
        strvec_pushf(argv, "%lld", (long long)j->memory_mb);
    }
    /* The submitter's umask; a job stored without one keeps gflowd's own, 0077. */
    strvec_push(argv, "--umask");
    strvec_pushf(argv, "%04o", j->umask >= 0 ? (unsigned)j->umask : 077u);
    if (j->conda_env) { /* activated through the installation's shell hook (the shim) */
        strvec_push(argv, "--conda-env");
        strvec_push(argv, j->conda_env);
    }
    if (j->pty) { /* the shim owns the job's terminal and serves it to `gjob attach` */
        strvec_push(argv, "--pty");
        strvec_pushf(argv, "%s/%lld.attach", d->paths.run_dir, (long long)j->id);
    }
    if (d->nofile_raised) { /* the job gets the limit gflowd was started with */
        strvec_push(argv, "--nofile");
        strvec_pushf(argv, "%lld", (long long)d->nofile_soft);
    }
}

/* The job's environment in a memfd (no file on disk to create and remove), and what
 * it runs: the command, or the script written to run/<id>.script. Returns the memfd,
 * or -1 with *err. */
static int prepare_inputs(const struct gflowd *d, const struct job *full, const struct passwd *pw,
                          const char *uuids, struct strvec *argv, int *why, char **err)
{
    struct strbuf env;
    strbuf_init(&env);
    struct jobenv_input in = {
        .uuids = uuids,
        .uuid_format = gpu_uuid_ids(d->gpus),
        .user = pw ? pw->pw_name : NULL,
        .home = pw ? pw->pw_dir : NULL,
        .shell = pw ? pw->pw_shell : NULL,
    };
    jobenv_build(full, &in, &env);
    int fd = high_fd(memfd_create("gflow-job-env", MFD_CLOEXEC));
    bool ok = fd >= 0 && (env.len == 0 || write(fd, env.buf, env.len) == (ssize_t)env.len);
    strbuf_free(&env);
    if (!ok) {
        *why = errno;
        *err = xasprintf("cannot pass the environment: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (full->script) {
        char *script_path = xasprintf("%s/%lld.script", d->paths.run_dir, (long long)full->id);
        if (write_file(script_path, full->script, strlen(full->script), 0700) < 0 ||
            (pw && chown(script_path, pw->pw_uid, pw->pw_gid) < 0)) {
            *why = errno;
            *err = xasprintf("cannot write %s: %s", script_path, strerror(errno));
            free(script_path);
            close(fd);
            return -1;
        }
        strvec_push(argv, "--script");
        strvec_push(argv, script_path);
        free(script_path);
    } else {
        strvec_push(argv, "--command");
        strvec_push(argv, full->command ? full->command : "true");
    }
    return fd;
}

/* The child of spawn_shim, sharing the daemon's memory until it execs: only system
 * calls, on its own frames. Sets *err to the errno of what failed and exits. */
__attribute__((noreturn)) static void spawn_child(char *const *argv, char *const *envp, int lock_fd,
                                                  int env_fd, volatile int *err)
{
    /* Above 4 first, so that no dup2 below overwrites another's source (/dev/null may
     * open as 3 or 4: it is on 0 before those are taken). */
    int lock = fcntl(lock_fd, F_DUPFD, 5);
    int env = fcntl(env_fd, F_DUPFD, 5);
    int null = open("/dev/null", O_RDONLY);
    if (lock < 0 || env < 0 || null < 0 || dup2(null, 0) < 0 || dup2(lock, 3) < 0 ||
        dup2(env, 4) < 0) {
        *err = errno;
        _exit(127);
    }
    close_range(5, ~0U, 0);
    /* What gflowd changed: SIGPIPE ignored, and every signal blocked (by spawn_shim). */
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(argv[0], argv, envp);
    *err = errno;
    _exit(127);
}

/* Starts the shim with the lock on fd 3 and the environment on fd 4, an empty signal
 * mask and default handling of every signal. With vfork: the daemon's page tables are
 * not copied as a fork per job would, and unlike posix_spawn, whose child queries and
 * resets all 64 signal actions one by one (~120 system calls while the daemon waits),
 * the child resets only the one gflowd changed (gflowd sets no handlers: signals come
 * through a signalfd). All signals are blocked around the vfork, so none is handled
 * in the child, which shares the daemon's memory until it execs. */
static pid_t spawn_shim(char *const *argv, int lock_fd, int env_fd)
{
    /* A fixed PATH, and the shim's own knobs from gflowd's environment
     * (GFLOW_SHIM_CGROUP, GFLOW_SHIM_MEMORY_METHOD: tests force a method with them). */
    struct strvec env;
    strvec_init(&env);
    strvec_push(&env, "PATH=/usr/local/bin:/usr/bin:/bin");
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "GFLOW_SHIM_", strlen("GFLOW_SHIM_")) == 0)
            strvec_push(&env, *e);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    volatile int err = 0;
    pid_t pid = vfork();
    if (pid == 0)
        spawn_child(argv, env.v, lock_fd, env_fd, &err);
    int e = pid < 0 ? errno : err;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    strvec_free(&env);
    if (pid > 0 && e) /* it exited without exec'ing */
        waitpid(pid, NULL, 0);
    if (e) {
        errno = e;
        return -1;
    }
    return pid;
}

/* ---- standby shims ---- */

/* Shims started ahead of their jobs (gflow-shim --standby, src/shim/standby.c): a job's
 * start hands one the arguments and fds instead of waiting for a shim's exec and start-up
 * (~1.5 ms here, the largest step between a submission and its job running), and a
 * standby whose job is over comes back (launch_standby_back) for the next one. At most
 * LAUNCH_IDLE_MAX wait; serve.c has one started a moment after a launch took the last. */
#define LAUNCH_IDLE_MAX 8

struct standby {
    pid_t pid;
    int64_t start; /* its /proc start time */
    int sock;      /* our end of its SOCK_SEQPACKET socket */
};
static struct standby idle[LAUNCH_IDLE_MAX];
static size_t n_idle;

/* Reaps a standby that exits at the end of its socket. */
static void standby_reap_cb(int fd, uint32_t events, void *arg)
{
    (void)events;
    pid_t pid = (pid_t)(intptr_t)arg;
    if (waitpid(pid, NULL, WNOHANG) == 0)
        return; /* not yet reapable; epoll will tell again */
    loop_del_fd(fd);
    close(fd);
}

/* Closes a standby's socket, which ends it, and reaps it once it has exited: at once when
 * wait (it is idle or killed: a moment), else when its pidfd says so. */
static void standby_drop(pid_t pid, int sock, bool wait)
{
    close(sock);
    if (wait) {
        waitpid(pid, NULL, 0);
        return;
    }
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0 && fcntl(pidfd, F_SETFD, FD_CLOEXEC) == 0 &&
        loop_add_fd(pidfd, EPOLLIN, standby_reap_cb, (void *)(intptr_t)pid) == 0)
        return;
    if (pidfd >= 0)
        close(pidfd);
    waitpid(pid, NULL, 0); /* no pidfd now: wait for it (it exits at once) */
}

bool launch_standby_ready(void)
{
    return n_idle > 0;
}

void launch_standby_start(const struct gflowd *d)
{
    if (n_idle > 0)
        return;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return;
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* Room for the job's arguments in its command line (ps shows them; standby.c). */
    static char room[EXITFILE_STANDBY_ROOM + 1];
    memset(room, ' ', EXITFILE_STANDBY_ROOM);
    char *argv[] = {d->shim_path, "--standby", room, NULL};
    pid_t pid = null < 0 ? -1 : spawn_shim(argv, sv[1], null);
    if (null >= 0)
        close(null);
    close(sv[1]);
    if (pid < 0) {
        log_debug("cannot start a standby shim: %s", strerror(errno));
        close(sv[0]);
        return;
    }
    idle[n_idle++] = (struct standby){pid, proc_start_time(pid), sv[0]};
}

void launch_standby_back(pid_t pid, int64_t start, int sock)
{
    if (n_idle < LAUNCH_IDLE_MAX)
        idle[n_idle++] = (struct standby){pid, start, sock};
    else
        standby_drop(pid, sock, false);
}

void launch_standby_stop(void)
{
    while (n_idle > 0) {
        n_idle--;
        standby_drop(idle[n_idle].pid, idle[n_idle].sock, true);
    }
}

/* Sends a job to a standby or the supervisor: argv (less argv[0]), each NUL-terminated,
 * with the two fds. 0, or -1 (errno) when the socket cannot take it now, or the
 * arguments are longer than a shim takes in a message (EXITFILE_STANDBY_MAX). */
static int send_job(int sock, char *const *argv, int lock_fd, int env_fd)
{
    struct strbuf args;
    strbuf_init(&args);
    for (char *const *a = argv + 1; *a; a++)
        strbuf_add(&args, *a, strlen(*a) + 1);
    int rc = -1;
    errno = E2BIG;
    if (args.len <= EXITFILE_STANDBY_MAX) {
        int fds[2] = {lock_fd, env_fd};
        union {
            struct cmsghdr h;
            char space[CMSG_SPACE(sizeof(fds))];
        } control;
        memset(&control, 0, sizeof(control));
        struct iovec iov = {.iov_base = args.buf, .iov_len = args.len};
        struct msghdr m = {.msg_iov = &iov,
                           .msg_iovlen = 1,
                           .msg_control = control.space,
                           .msg_controllen = sizeof(control.space)};
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(fds));
        memcpy(CMSG_DATA(h), fds, sizeof(fds));
        if (sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)args.len)
            rc = 0;
    }
    strbuf_free(&args);
    return rc;
}

/* Hands argv and the two fds to a waiting standby, the last to come back (its pages are
 * the likeliest to be in memory): 0 with *taken, or -1 when there is none, the
 * arguments are too long for one, or each is gone (then it is reaped). */
static int standby_take(char *const *argv, int lock_fd, int env_fd, struct standby *taken)
{
    while (n_idle > 0) {
        struct standby s = idle[--n_idle];
        if (send_job(s.sock, argv, lock_fd, env_fd) == 0) {
            *taken = s;
            return 0;
        }
        if (errno == E2BIG) {
            idle[n_idle++] = s;
            return -1;
        }
        log_debug("a standby shim is gone (%s)", strerror(errno));
        kill(s.pid, SIGKILL); /* our unreaped child: the pid is still its own */
        standby_drop(s.pid, s.sock, true);
    }
    return -1;
}

/* ---- the supervisor ---- */

/* gflow-shim --supervisor (src/shim/supervisor.c): one process that supervises the jobs
 * that need nothing a shim of their own gives (no --tasks, --pty, --memory-limit or
 * --deny-devices), so that a job costs no shim process. Ours (started by this daemon,
 * our child) takes new jobs; those of an earlier daemon, still running jobs it
 * adopted, are reached on their control socket (launch_supervisor_attach) until their
 * last job here is over. */
struct supervisor {
    struct supervisor *next;
    struct gflowd *d;
    pid_t pid;
    int64_t start;
    int sock;        /* -1 once it is gone */
    int pidfd;       /* ours, gone: waiting for it to be reapable; else -1 */
    bool ours;       /* our child, for new jobs */
    size_t users;    /* the runs that name it (job->runtime->sup) */
    size_t capacity; /* ours: the jobs its open-file limit (our own) leaves room for */
};

/* The supervisor's descriptors: those it keeps whatever it runs (and a job's while it
 * starts), and those each running job keeps there (lock, output pipe, log; a timer
 * when it is ended). */
#define SUPERVISOR_BASE_FDS 32
#define SUPERVISOR_JOB_FDS 4
static struct supervisor *supervisors;
static struct supervisor *supervisor_ours(struct gflowd *d);
/* When ours last exited before it was ready: another is not started for a while. */
#define SUPERVISOR_RETRY_SECS 60.0
static double supervisor_failed_at = -1e9;

static void supervisor_free(struct supervisor *s)
{
    struct supervisor **p = &supervisors;
    while (*p != s)
        p = &(*p)->next;
    *p = s->next;
    if (s->sock >= 0) {
        loop_del_fd(s->sock);
        close(s->sock);
    }
    if (s->pidfd >= 0) {
        loop_del_fd(s->pidfd);
        close(s->pidfd);
    }
    free(s);
}

/* Ours has exited (its pidfd): its jobs are lost, with how it ended. */
static void supervisor_exit_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct supervisor *s = arg;
    int status;
    if (waitpid(s->pid, &status, WNOHANG) == 0)
        return; /* not yet reapable; epoll will tell again */
    runner_supervisor_gone(s->d, s, status, true);
    supervisor_free(s);
}

/* What the supervisor says: "D<id>", a job is over. The end of the socket: it is gone,
 * and so is the supervision of every job it had (ours: once it is reaped). */
static void supervisor_cb(int fd, uint32_t events, void *arg)
{
    (void)fd;
    (void)events;
    struct supervisor *s = arg;
    char msg[SHIM_CTL_MAX], what;
    int64_t id;
    int value;
    ssize_t n = recv(s->sock, msg, sizeof(msg), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0) {
        if (exitfile_ctl_parse(msg, (size_t)n, &what, &id, &value) == 0 && what == SHIM_CTL_DONE)
            runner_supervised_done(s->d, id);
        return;
    }
    if (s->ours || s->users)
        log_warn("the job supervisor (pid %ld) is gone", (long)s->pid);
    loop_del_fd(s->sock);
    close(s->sock);
    s->sock = -1;
    if (s->ours) {
        s->ours = false; /* no new jobs for it */
        s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
        if (s->pidfd >= 0 && fcntl(s->pidfd, F_SETFD, FD_CLOEXEC) == 0 &&
            loop_add_fd(s->pidfd, EPOLLIN, supervisor_exit_cb, s) == 0)
            return;
        int status;
        bool reaped = waitpid(s->pid, &status, 0) == s->pid; /* no pidfd: it is exiting */
        runner_supervisor_gone(s->d, s, status, reaped);
    } else {
        runner_supervisor_gone(s->d, s, 0, false);
    }
    supervisor_free(s);
}

static struct supervisor *supervisor_add(struct gflowd *d, pid_t pid, int64_t start, int sock,
                                         bool ours)
{
    struct supervisor *s = xcalloc(1, sizeof(*s));
    *s = (struct supervisor){supervisors, d, pid, start, sock, -1, ours, 0, 0};
    struct rlimit rl;
    if (ours && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > SUPERVISOR_BASE_FDS)
        s->capacity = (rl.rlim_cur - SUPERVISOR_BASE_FDS) / SUPERVISOR_JOB_FDS;
    if (loop_add_fd(sock, EPOLLIN, supervisor_cb, s) < 0) {
        close(sock);
        free(s);
        return NULL;
    }
    supervisors = s;
    return s;
}

void launch_supervisor_start(struct gflowd *d)
{
    supervisor_ours(d);
}

/* Ours, started if there is none. NULL when it cannot be started (then jobs get shims). */
static struct supervisor *supervisor_ours(struct gflowd *d)
{
    for (struct supervisor *s = supervisors; s; s = s->next)
        if (s->ours)
            return s;
    if (slurm_mode(d) || now_mono() - supervisor_failed_at < SUPERVISOR_RETRY_SECS)
        return NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return NULL;
    /* Room for a burst of jobs while it starts them (a full socket: they get shims). */
    int room = 4 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &room, sizeof(room));
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    char *argv[] = {d->shim_path, "--supervisor", d->paths.run_dir, NULL};
    pid_t pid = null < 0 ? -1 : spawn_shim(argv, sv[1], null);
    if (null >= 0)
        close(null);
    close(sv[1]);
    /* Its "H" says it is set up (a moment): no job goes to one that fails to start. */
    struct timeval wait = {.tv_sec = 2};
    char hello = 0;
    if (pid > 0 && (setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) < 0 ||
                    recv(sv[0], &hello, 1, 0) != 1 || hello != SHIM_CTL_HELLO)) {
        kill(pid, SIGKILL); /* our unreaped child: the pid is still its own */
        waitpid(pid, NULL, 0);
        pid = -1;
        errno = 0;
    }
    if (pid < 0) {
        log_warn("cannot start the job supervisor (%s); jobs get shims of their own for %.0f s",
                 errno ? strerror(errno) : "its reason is in gflowd's output",
                 SUPERVISOR_RETRY_SECS);
        supervisor_failed_at = now_mono();
        close(sv[0]);
        return NULL;
    }
    return supervisor_add(d, pid, proc_start_time(pid), sv[0], true);
}

struct supervisor *launch_supervisor_attach(struct gflowd *d, const char *path, pid_t pid,
                                            int64_t start)
{
    for (struct supervisor *s = supervisors; s; s = s->next)
        if (s->pid == pid && s->start == start)
            return s;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path))
        return NULL;
    strcpy(a.sun_path, path);
    /* Its "H" says it took the connection: a job that ends from then on is told here;
     * the caller reads the lock files again for those that ended before. */
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct timeval wait = {.tv_sec = 2};
    char hello = 0;
    errno = 0;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) < 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || recv(fd, &hello, 1, 0) != 1 ||
        hello != SHIM_CTL_HELLO) {
        log_warn("cannot reach the job supervisor (pid %ld) at %s: %s", (long)pid, path,
                 hello   ? "unexpected answer"
                 : errno ? strerror(errno)
                         : "refused");
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    log_info("reached the job supervisor of an earlier gflowd (pid %ld)", (long)pid);
    return supervisor_add(d, pid, start, fd, false);
}

void launch_supervisor_use(struct supervisor *s)
{
    s->users++;
}

void launch_supervisor_unuse(struct supervisor *s)
{
    /* An earlier daemon's, with no job of ours left: closing its socket ends it. */
    if (--s->users == 0 && !s->ours && s->pidfd < 0)
        supervisor_free(s);
}

int launch_ctl_send(int sock, char what, int64_t id, int value)
{
    if (sock < 0) {
        errno = EPIPE;
        return -1;
    }
    char msg[SHIM_CTL_MAX];
    int n = exitfile_ctl_format(msg, what, id, value);
    return send(sock, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n ? 0 : -1;
}

int launch_supervisor_send(struct supervisor *s, char what, int64_t id, int value)
{
    return launch_ctl_send(s->sock, what, id, value);
}

void launch_supervisor_stop(void)
{
    while (supervisors) {
        supervisors->ours = false; /* not killed: it goes on with its jobs */
        supervisor_free(supervisors);
    }
}

/* Whether the job needs a shim of its own (options the supervisor does not take). */
static bool needs_own_shim(char *const *argv)
{
    static const char *const own[] = {"--tasks", "--pty", "--memory-limit", "--deny-devices"};
    for (char *const *a = argv + 1; *a; a++)
        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
            if (strcmp(*a, own[i]) == 0)
                return true;
    return false;
}

/* Hands the job to our supervisor: 0 with it in *sup, or -1 (it gets a shim). */
static int supervisor_take(struct gflowd *d, char *const *argv, int lock_fd, int env_fd,
                           struct supervisor **sup)
{
    if (needs_own_shim(argv))
        return -1;
    struct supervisor *s = supervisor_ours(d);
    if (!s || s->users >= s->capacity || send_job(s->sock, argv, lock_fd, env_fd) < 0)
        return -1;
    *sup = s;
    return 0;
}

/* The spare lock files (launch_keep_lock): their ids, the last kept on top. */
static int64_t spares[LAUNCH_SPARE_MAX];
static size_t n_spares;

static char *spare_path(const struct gflowd *d, int64_t id)
{
    return xasprintf("%s/spare/%lld", d->paths.run_dir, (long long)id);
}

int launch_spares_init(const struct gflowd *d, char **err)
{
    n_spares = 0;
    char *dir = xasprintf("%s/spare", d->paths.run_dir);
    int rc = 0;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        *err = xasprintf("cannot create %s: %s", dir, strerror(errno));
        rc = -1;
    }
    DIR *dp = rc == 0 ? opendir(dir) : NULL;
    struct dirent *e;
    while (dp && (e = readdir(dp))) {
        if (e->d_name[0] == '.')
            continue;
        char *path = xasprintf("%s/%s", dir, e->d_name);
        unlink(path);
        free(path);
    }
    if (dp)
        closedir(dp);
    free(dir);
    return rc;
}

void launch_keep_lock(const struct gflowd *d, int64_t id)
{
    char *lock_path = xasprintf("%s/%lld.lock", d->paths.run_dir, (long long)id);
    if (n_spares == LAUNCH_SPARE_MAX) {
        unlink(lock_path);
    } else {
        char *to = spare_path(d, id);
        if (rename(lock_path, to) < 0) {
            if (errno != ENOENT)
                unlink(lock_path);
        } else {
            spares[n_spares++] = id;
        }
        free(to);
    }
    free(lock_path);
}

/* Empties a reused lock file for its new shim: NULs over what its last job's shim
 * wrote (the lines end at the first NUL, and so does the record). Not a truncation,
 * which would free the blocks allocated for the record and cost as much as a new file
 * to allocate them again. 0 or -1 (errno). */
static int blank_lock(int fd)
{
    static const char zeros[EXITFILE_RECORD_AT + EXITFILE_RESERVE];
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    if (st.st_size > (off_t)sizeof(zeros))
        return ftruncate(fd, 0);
    size_t n = (size_t)st.st_size;
    return pwrite(fd, zeros, n, 0) == (ssize_t)n ? 0 : -1;
}

/* A spare lock file, blanked, renamed to lock_path: its fd, or -1 when there is none
 * (or none could be used). It is blanked while it is still in run/spare, which a
 * restarted daemon empties: a crash at any point never leaves lock_path holding an
 * ended job's lines and exit record, which the restarted daemon would take for those
 * of the job it names (a job that never ran would end CD, by another job's record). */
static int take_spare(const struct gflowd *d, const char *lock_path)
{
    while (n_spares > 0) {
        char *from = spare_path(d, spares[--n_spares]);
        int fd = high_fd(open(from, O_RDWR | O_CLOEXEC | O_NOFOLLOW));
        if (fd >= 0 && (blank_lock(fd) < 0 || rename(from, lock_path) < 0)) {
            close(fd);
            unlink(from);
            fd = -1;
        }
        free(from);
        if (fd >= 0)
            return fd;
    }
    return -1;
}

/* Takes the lock (fd 3 of the shim) and reserves the room for the shim's lock lines
 * and its exit record, which it writes into the lock file (src/core/exitfile.h): the
 * blocks are allocated, the size stays 0. So a job whose filesystem fills up while it
 * runs still has its outcome recorded, and a job has one file besides its log. The
 * lock's fd, or -1 with *err and *why (an errno). A reservation that fails for another
 * reason than space is only logged (once for a filesystem that cannot allocate ahead):
 * the shim reports what it cannot write, as ever. */
static int lock_and_reserve(const struct gflowd *d, int64_t id, int *why, char **err)
{
    static bool unsupported_logged;
    char *lock_path = xasprintf("%s/%lld.lock", d->paths.run_dir, (long long)id);
    int fd = take_spare(d, lock_path);
    if (fd < 0)
        fd = high_fd(open(lock_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd < 0 || flock(fd, LOCK_EX) < 0) {
        *why = errno;
        *err = xasprintf("cannot lock %s: %s", lock_path, strerror(errno));
    } else if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, EXITFILE_RECORD_AT + EXITFILE_RESERVE) < 0) {
        if (errno == ENOSPC || errno == EDQUOT) {
            *why = errno;
            *err = xasprintf("cannot reserve room for %s: %s", lock_path, strerror(errno));
        } else if (errno != EOPNOTSUPP || !unsupported_logged) {
            unsupported_logged = unsupported_logged || errno == EOPNOTSUPP;
            log_warn("job %lld: cannot reserve room for %s: %s", (long long)id, lock_path,
                     strerror(errno));
        }
    }
    free(lock_path);
    if (*err && fd >= 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

enum launch_result launch_shim(struct gflowd *d, const struct job *j, pid_t *pid, int64_t *start,
                               int *sock, struct supervisor **sup, char **err)
{
    *sock = -1;
    *sup = NULL;
    struct job full;
    job_init(&full);
    char *uuids = NULL;
    struct strvec argv;
    strvec_init(&argv);
    int lock_fd = -1, env_fd = -1, why = 0;
    *err = NULL;
    if (store_get_job(d->store, j->id, &full, true) != 0) {
        *err = xasprintf("cannot read the job back: %s", store_error(d->store));
        goto out;
    }
    struct passwd *pw = NULL;
    if (d->system) {
        errno = 0;
        pw = getpwuid(j->uid);
        if (!pw) {
            why = errno; /* set when the lookup failed, not when there is no such user */
            *err = launch_short_of(why)
                       ? xasprintf("cannot look up uid %u: %s", j->uid, strerror(why))
                       : xasprintf("no user with uid %u", j->uid);
            goto out;
        }
    }
    if (d->cfg.constrain_devices && !denied_minors_known(d, j, err))
        goto out;
    /* A MIG job's devices are its instances, named by their MIG UUIDs. */
    uuids = j->mig_uuids ? xstrdup(j->mig_uuids) : gpu_uuids(d->gpus, j->gpu_mask);
    full.gpu_mask = j->gpu_mask; /* chosen by the pass that started it */
    free(full.mig_uuids);
    full.mig_uuids = j->mig_uuids ? xstrdup(j->mig_uuids) : NULL;
    shim_args(d, j, &full, pw, uuids, &argv);
    env_fd = prepare_inputs(d, &full, pw, uuids, &argv, &why, err);
    if (env_fd < 0)
        goto out;
    lock_fd = lock_and_reserve(d, j->id, &why, err);
    if (lock_fd < 0)
        goto out;
    struct standby taken;
    if (supervisor_take(d, argv.v, lock_fd, env_fd, sup) == 0) {
        *pid = (*sup)->pid;
        *start = (*sup)->start;
    } else if (standby_take(argv.v, lock_fd, env_fd, &taken) == 0) {
        *pid = taken.pid;
        *start = taken.start;
        *sock = taken.sock;
    } else {
        *pid = spawn_shim(argv.v, lock_fd, env_fd);
        *start = *pid > 0 ? proc_start_time(*pid) : 0;
    }
    if (*pid < 0) {
        why = errno;
        *err = xasprintf("cannot start %s: %s", d->shim_path, strerror(errno));
    }
out:
    if (lock_fd >= 0)
        close(lock_fd);
    if (env_fd >= 0)
        close(env_fd);
    free(uuids);
    job_clear(&full);
    strvec_free(&argv);
    if (!*err)
        return LAUNCH_OK;
    if (why == ENOSPC || why == EDQUOT)
        return LAUNCH_NO_SPACE;
    return launch_short_of(why) ? LAUNCH_SHORT : LAUNCH_FAILED;
}
