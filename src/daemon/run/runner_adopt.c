/* runner_adopt: re-adoption of the jobs that were running when gflowd stopped (see
 * runner.h): each job's lock file tells whether its shim still runs (the lock is held)
 * and which process it is, else how the job ended. */
#include "runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "daemon.h"
#include "exitfile.h"
#include "jobs/jobs.h"
#include "launch.h"
#include "log.h"
#include "loop.h"
#include "procinfo.h"
#include "runner_internal.h"
#include "util.h"

static void adopt(struct gflowd *d, struct job *j);

static void adopt_retry_cb(void *arg)
{
    struct run *r = arg;
    r->retry_timer = NULL;
    struct job *j = run_timer_job(r);
    if (j)
        adopt(r->d, j);
}

/* Requeues a job whose shim never started: it has not run at all. */
static void requeue(struct gflowd *d, struct job *j)
{
    log_info("job %lld: shim never started; queued again", (long long)j->id);
    run_put_back(d, j);
}

/* Adoption cannot go on now: again shortly. */
void run_adopt_later(struct run *r, double delay)
{
    r->retry_timer = loop_add_timer(delay, adopt_retry_cb, r);
}

/* A job whose shim is gone without a pid line of its own: its exit file says how it
 * ended, else the shim never started and it is queued again (or, when the file cannot
 * be read now, adoption tries again shortly). */
static void adopt_by_exit_file(struct gflowd *d, struct job *j, struct run *r)
{
    int rc = run_apply_exit_file(d, j);
    if (rc == -2)
        run_adopt_later(r, 0.1);
    else if (rc == -1)
        requeue(d, j);
}

/* False when the exit record in a dead shim's lock file (text, len bytes) is another
 * job's: an ended job's lock file, reused for job id by a daemon that crashed before it
 * had blanked it, so before id's shim started (earlier builds renamed the spare into
 * place first and blanked it there, launch.c); its lines are that job's too. */
static bool record_is_its_own(const char *text, size_t len, int64_t id)
{
    struct exit_record rec;
    bool own = exitfile_lock_record(text, len, &rec) < 0 || rec.job_id < 0 || rec.job_id == id;
    exit_record_free(&rec);
    return own;
}

static void adopt(struct gflowd *d, struct job *j)
{
    struct run *r = j->daemon.runtime ? j->daemon.runtime : run_new(d, j);
    char *lock_path = run_job_file(d->paths.run_dir, j->id, ".lock");
    int fd = open(lock_path, O_RDWR | O_CLOEXEC);
    int e = errno;
    free(lock_path);
    if (fd < 0 && launch_short_of(e)) { /* out of descriptors: nothing can be concluded */
        run_adopt_later(r, 0.1);
        return;
    }
    if (fd < 0) {
        adopt_by_exit_file(d, j, r);
        return;
    }
    /* The lock lines and the exit record: one read (the loop's thread only). */
    static char buf[EXITFILE_RECORD_AT + EXITFILE_RESERVE];
    ssize_t n = pread(fd, buf, sizeof(buf), 0);
    size_t len = n > 0 ? (size_t)n : 0;
    struct exit_lock lock;
    bool have_pid = exitfile_lock_parse(buf, len, &lock) == 0;
    int64_t pid = lock.pid, start = lock.start;
    bool warned = lock.forwarded > 0;
    bool alive = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    /* A supervisor's job: its socket first, then the lock again, so that an end between
     * the two is not missed (the supervisor tells the end to whoever is connected). */
    if (alive && have_pid && lock.supervisor && !r->sup && proc_start_time((pid_t)pid) == start &&
        (r->sup = launch_supervisor_attach(d, lock.supervisor, (pid_t)pid, start))) {
        launch_supervisor_use(r->sup);
        alive = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    }
    exitfile_lock_free(&lock);
    close(fd);
    if (!alive && have_pid && !record_is_its_own(buf, len, j->id)) {
        log_warn("job %lld: its lock file still holds the exit record of another job (an "
                 "ended job's lock file, taken for it before its shim started): it never ran",
                 (long long)j->id);
        have_pid = false;
    }
    if (!alive && have_pid) { /* it ran: its exit file, or what is left of the job */
        run_shim_gone(d, j, 0, false);
        return;
    }
    if (!alive) {
        adopt_by_exit_file(d, j, r);
        return;
    }
    if (!have_pid) { /* the shim is starting up: look again shortly */
        run_adopt_later(r, 0.02);
        return;
    }
    /* A supervisor that cannot be reached: its pidfd, as a shim's (it exits once it has
     * no job left and no gflowd). */
    if (!r->sup && (proc_start_time((pid_t)pid) != start || run_watch_shim(r, (pid_t)pid) < 0 ||
                    proc_start_time((pid_t)pid) != start)) {
        /* Not the process that holds the lock: it ended between the checks. */
        run_unwatch_shim(r);
        run_adopt_later(r, 0.02);
        return;
    }
    j->shim_pid = pid;
    j->shim_start = start;
    r->start = start;
    log_info("job %lld re-adopted (shim pid %lld)", (long long)j->id, (long long)pid);
    run_arm_time_limit(j, r, warned);
    if (j->end_request != JOB_END_NONE)
        runner_signal(j, SIGTERM);
}

/* Removes exit, lock, env and script files of jobs that are no longer running. */
static void sweep_dir(const struct gflowd *d, const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *e;
    while ((e = readdir(dp))) {
        char *end;
        long long id = strtoll(e->d_name, &end, 10);
        if (end == e->d_name || *end != '.')
            continue;
        struct job *j = jobs_get(d->jobs, id);
        if (!j || j->state != JOB_RUNNING) {
            char *path = xasprintf("%s/%s", dir, e->d_name);
            unlink(path);
            free(path);
        }
    }
    closedir(dp);
}

void runner_recover(struct gflowd *d)
{
    size_t n;
    struct job **running = jobs_running(d->jobs, &n);
    /* adopt() may move jobs out of the table, so walk a copy. */
    if (n == 0)
        return;
    struct job **copy = xmalloc(n * sizeof(*copy));
    memcpy(copy, running, n * sizeof(*copy));
    for (size_t i = 0; i < n; i++)
        adopt(d, copy[i]);
    free(copy);
}

void runner_sweep(const struct gflowd *d)
{
    sweep_dir(d, d->paths.exit_dir);
    sweep_dir(d, d->paths.run_dir);
}
