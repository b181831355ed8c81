/* launch: starting one job's gflow-shim: its command line (the protocol is in
 * src/shim/main.c), the job's environment in a memfd, its script file, the lock file
 * the shim inherits; which process takes the job is launch_shims.c. Which failures are
 * for lack of a resource (the job waits and is tried again) and which are the job's (it
 * fails). */
#include "launch.h"
#include "launch_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "exitfile.h"
#include "files.h"
#include "gpu/gpu.h"
#include "jobenv.h"
#include "log.h"
#include "migcaps.h"
#include "store/store.h"
#include "userdb.h"
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
 * and for a MIG job the other instances' /dev/nvidia-caps nodes ("241:30"), as the
 * shim's --deny-devices wants them; *deny NULL when there are none. The caller has
 * checked denied_minors_known(). 0, or -1 with *err (a MIG instance's caps unknown). */
static int denied_devices(const struct gflowd *d, const struct job *j, char **deny, char **err)
{
    const struct gpu_set *set = gpu_current(d->gpus);
    struct strbuf sb;
    strbuf_init(&sb);
    *deny = NULL;
    for (size_t i = 0; i < set->n_gpus; i++) {
        const struct gpu_info *g = &set->gpus[i];
        if (gpu_denied(d, j, g->index) && g->minor >= 0)
            strbuf_addf(&sb, "%s%d", sb.len ? "," : "", g->minor);
    }
    if (j->mig_uuids && *j->mig_uuids && migcaps_deny(set, j->mig_uuids, &sb, err) < 0) {
        strbuf_free(&sb);
        return -1;
    }
    if (sb.len == 0) {
        strbuf_free(&sb);
        return 0;
    }
    *deny = strbuf_detach(&sb);
    return 0;
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

/* The shim's command line up to what the job runs (gflow-shim --help; the protocol is
 * in src/shim). */
static void shim_args(const struct gflowd *d, const struct job *j, const struct job *full,
                      const struct userdb_user *pw, const char *uuids, const char *deny,
                      struct strvec *argv)
{
    strvec_push(argv, d->shim_path);
    strvec_push(argv, "--job-id");
    strvec_pushf(argv, "%lld", (long long)j->id);
    strvec_push(argv, "--log");
    strvec_pushf(argv, "%s/%lld.log", d->paths.log_dir, (long long)j->id);
    /* A requeued job's log goes on (one log, both runs); any other file at its name is
     * moved aside by the shim (a restored database's ids start again). */
    if (j->requeue_count > 0)
        strvec_push(argv, "--log-continue");
    if (d->cfg.max_log_bytes > 0) {
        strvec_push(argv, "--log-max-bytes");
        strvec_pushf(argv, "%lld", (long long)d->cfg.max_log_bytes);
    }
    if (d->cfg.log_keep_on_full_disk > 0) {
        strvec_push(argv, "--log-keep-on-full");
        strvec_pushf(argv, "%lld", (long long)d->cfg.log_keep_on_full_disk);
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
        strvec_pushf(argv, "%u", (unsigned)pw->uid);
        strvec_push(argv, "--gid");
        strvec_pushf(argv, "%u", (unsigned)pw->gid);
        strvec_push(argv, "--user");
        strvec_push(argv, pw->name);
        /* So that neither gflowd nor the shim goes through NSS per job (userdb.h says
         * how fresh they are); without, the shim refuses the job (too many to list). */
        if (pw->groups) {
            strvec_push(argv, "--groups");
            strvec_push(argv, pw->groups);
        }
    }
    if (j->gpus_per_task && j->gpus > 1) { /* one copy of the command per GPU */
        strvec_push(argv, "--tasks");
        strvec_pushf(argv, "%d", j->gpus);
        strvec_push(argv, "--task-gpus");
        char *cuda = jobenv_cuda_devices(j->gpu_mask, uuids, gpu_uuid_ids(d->gpus));
        strvec_push(argv, cuda);
        free(cuda);
        strvec_push(argv, "--task-uuids"); /* each copy's GFLOW_GPU_UUIDS: its own GPU */
        strvec_push(argv, uuids);
    }
    if (deny) {
        strvec_push(argv, "--deny-devices");
        strvec_push(argv, deny);
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
    if (j->cpus) { /* chosen by the runner (cpupin.c) */
        strvec_push(argv, "--cpus");
        strvec_push(argv, j->cpus);
    }
    /* [hooks]: the shim runs them around the job as the job's user (src/shim/hook.c);
     * read at each launch, so a reload counts from the next job on. */
    if (d->cfg.hooks_pre && *d->cfg.hooks_pre) {
        strvec_push(argv, "--prolog");
        strvec_push(argv, d->cfg.hooks_pre);
    }
    if (d->cfg.hooks_post && *d->cfg.hooks_post) {
        strvec_push(argv, "--epilog");
        strvec_push(argv, d->cfg.hooks_post);
    }
    if ((d->cfg.hooks_pre && *d->cfg.hooks_pre) || (d->cfg.hooks_post && *d->cfg.hooks_post)) {
        strvec_push(argv, "--hook-timeout");
        strvec_pushf(argv, "%lld", (long long)d->cfg.parsed.hooks_timeout_secs);
    }
    if (d->nofile_raised) { /* the job gets the limit gflowd was started with */
        strvec_push(argv, "--nofile");
        strvec_pushf(argv, "%lld", (long long)d->nofile_soft);
    }
}

/* The job's environment in a memfd (no file on disk to create and remove), and what
 * it runs: the command, or the script written to run/<id>.script. Returns the memfd,
 * or -1 with *err. */
static int prepare_inputs(const struct gflowd *d, const struct job *full,
                          const struct userdb_user *pw, const char *uuids, struct strvec *argv,
                          int *why, char **err)
{
    struct strbuf env;
    strbuf_init(&env);
    struct jobenv_input in = {
        .uuids = uuids,
        .uuid_format = gpu_uuid_ids(d->gpus),
        .user = pw ? pw->name : NULL,
        .home = pw ? pw->home : NULL,
        .shell = pw ? pw->shell : NULL,
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
            (pw && chown(script_path, pw->uid, pw->gid) < 0)) {
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

static char *spare_path(const struct gflowd *d, int64_t id)
{
    return xasprintf("%s/spare/%lld", d->paths.run_dir, (long long)id);
}

int launch_init(struct gflowd *d, char **err)
{
    if (!d->launcher) {
        d->launcher = xcalloc(1, sizeof(*d->launcher));
        d->launcher->supervisor_failed_at = -1e9;
    }
    d->launcher->n_spares = 0;
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

void launch_free(struct gflowd *d)
{
    free(d->launcher);
    d->launcher = NULL;
}

void launch_keep_lock(const struct gflowd *d, int64_t id)
{
    char *lock_path = xasprintf("%s/%lld.lock", d->paths.run_dir, (long long)id);
    struct launcher *l = d->launcher;
    if (l->n_spares == LAUNCH_SPARE_MAX) {
        unlink(lock_path);
    } else {
        char *to = spare_path(d, id);
        if (rename(lock_path, to) < 0) {
            if (errno != ENOENT)
                unlink(lock_path);
        } else {
            l->spares[l->n_spares++] = id;
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
    struct launcher *l = d->launcher;
    while (l->n_spares > 0) {
        char *from = spare_path(d, l->spares[--l->n_spares]);
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

bool launch_user_ready(void *arg, const struct job *j)
{
    struct gflowd *d = arg;
    if (!d->system)
        return true;
    char *why = NULL;
    bool ready =
        userdb_uid_fresh(d->userdb, j->uid, USERDB_LAUNCH_WAIT_SECS, NULL, &why) == USERDB_FOUND;
    if (!ready)
        log_info("job %lld: launch put off: %s; queued again, waiting for its user (UserLookup)",
                 (long long)j->id, why);
    free(why);
    return ready;
}

enum launch_result launch_shim(struct gflowd *d, const struct job *j, pid_t *pid, int64_t *start,
                               int *sock, struct supervisor **sup, char **err)
{
    *sock = -1;
    *sup = NULL;
    struct job full;
    job_init(&full);
    char *uuids = NULL, *deny = NULL;
    struct strvec argv;
    strvec_init(&argv);
    int lock_fd = -1, env_fd = -1, why = 0;
    enum launch_result result = LAUNCH_OK;
    *err = NULL;
    if (store_get_job(d->store, j->id, &full, true) != 0) {
        *err = xasprintf("cannot read the job back: %s", store_error(d->store));
        goto out;
    }
    /* The pass let it start only once its user was known (launch_user_ready); known
     * no longer is rare (the answer aged in between): it waits again, as then. */
    struct userdb_user user = {0}, *pw = NULL;
    if (d->system) {
        char *why_not = NULL;
        if (userdb_uid_fresh(d->userdb, j->uid, 0, &user, &why_not) != USERDB_FOUND) {
            *err = why_not;
            result = LAUNCH_USER_LOOKUP;
            goto out;
        }
        pw = &user;
    }
    if (d->cfg.constrain_devices &&
        (!denied_minors_known(d, j, err) || denied_devices(d, j, &deny, err) < 0))
        goto out;
    /* A MIG job's devices are its instances, named by their MIG UUIDs. */
    uuids = j->mig_uuids ? xstrdup(j->mig_uuids) : gpu_uuids(d->gpus, j->gpu_mask);
    full.gpu_mask = j->gpu_mask; /* chosen by the pass that started it */
    free(full.mig_uuids);
    full.mig_uuids = j->mig_uuids ? xstrdup(j->mig_uuids) : NULL;
    shim_args(d, j, &full, pw, uuids, deny, &argv);
    env_fd = prepare_inputs(d, &full, pw, uuids, &argv, &why, err);
    if (env_fd < 0)
        goto out;
    lock_fd = lock_and_reserve(d, j->id, &why, err);
    if (lock_fd < 0)
        goto out;
    *pid = launch_hand_over(d, argv.v, lock_fd, env_fd, start, sock, sup);
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
    free(deny);
    job_clear(&full);
    strvec_free(&argv);
    userdb_user_clear(&user);
    if (result != LAUNCH_OK)
        return result;
    if (!*err)
        return LAUNCH_OK;
    if (why == ENOSPC || why == EDQUOT)
        return LAUNCH_NO_SPACE;
    return launch_short_of(why) ? LAUNCH_SHORT : LAUNCH_FAILED;
}
