/* triage_run: a failed job's log tail read by a child as the job's user, classified
 * (see triage_run.h). */
#include "triage_run.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon.h"
#include "jobs/jobs.h"
#include "log.h"
#include "store/store.h"
#include "subproc.h"
#include "triage.h"
#include "util.h"

/* The most a tail may be, whatever triage.tail_bytes says: the child's output is held
 * in memory. */
#define TRIAGE_TAIL_MAX (16 << 20)
/* Failures waiting for a child; past this, they are classified without their log. */
#define TRIAGE_QUEUE_MAX 100000

/* A failure to classify: what the job's record said when it failed. */
struct failure {
    int64_t id;
    uint32_t uid, gid;
    int exit_code, signal;
    bool oom;
    char *launch_error;   /* LaunchFailed's detail: classified without the log */
    struct subproc *proc; /* reading its log; NULL while it waits */
    struct triage_runner *t;
    struct failure *next;
};

struct triage_runner {
    struct gflowd *d;
    struct failure *running; /* children in flight */
    size_t n_running;
    struct failure *head, *tail; /* waiting, oldest first */
    size_t n_waiting;
};

static void start_next(struct triage_runner *t);
static void failure_free(struct failure *f);

/* Writes the class of f to its row, in the loop iteration's transaction. */
static void record(struct triage_runner *t, const struct failure *f, const char *log, size_t len,
                   bool from_start)
{
    struct triage_input in = {.log = log,
                              .len = len,
                              .from_start = from_start,
                              .exit_code = f->exit_code,
                              .signal = f->signal,
                              .oom = f->oom,
                              .launch_error = f->launch_error};
    char *cls = NULL, *line = NULL;
    if (!triage_classify(&t->d->cfg.triage, &in, &cls, &line))
        return;
    struct store *s = t->d->store;
    struct job j;
    job_init(&j);
    /* The failure may have been undone meanwhile (a lost transaction): only an F row. */
    if (store_begin(s) == 0 && store_get_job(s, f->id, &j, false) == 0 && j.state == JOB_FAILED) {
        free(j.failure_class);
        free(j.failure_line);
        j.failure_class = cls;
        j.failure_line = line;
        cls = line = NULL;
        if (store_update_job(s, &j) < 0)
            log_warn("job %lld: cannot record its failure class: %s", (long long)f->id,
                     store_error(s));
        else
            log_info("job %lld failed: %s", (long long)f->id, j.failure_class);
    }
    job_clear(&j);
    free(cls);
    free(line);
}

static void unlink_running(struct triage_runner *t, struct failure *f)
{
    for (struct failure **p = &t->running; *p; p = &(*p)->next) {
        if (*p == f) {
            *p = f->next;
            t->n_running--;
            return;
        }
    }
}

static void child_done(void *arg, bool reaped, int status, struct strbuf *out)
{
    struct failure *f = arg;
    struct triage_runner *t = f->t;
    unlink_running(t, f);
    const char *text = out->buf ? out->buf : "";
    const char *nl = memchr(text, '\n', out->len);
    long long start = -1;
    if (reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0 && nl &&
        sscanf(text, "ok %lld", &start) == 1 && start >= 0) {
        size_t skip = (size_t)(nl - text) + 1;
        record(t, f, text + skip, out->len - skip, start == 0);
    } else {
        /* The log could not be read: the failure is classed by how the job ended. */
        if (reaped && WIFSIGNALED(status))
            log_warn("job %lld: its log was not read for triage: no answer in %lld s",
                     (long long)f->id, (long long)t->d->cfg.triage_timeout_secs);
        else {
            size_t len = nl ? (size_t)(nl - text) : out->len;
            if (len >= 7 && !strncmp(text, "error: ", 7))
                text += 7, len -= 7;
            log_info("job %lld: its log was not read for triage: %.*s", (long long)f->id, (int)len,
                     text);
        }
        record(t, f, NULL, 0, true);
    }
    failure_free(f);
    start_next(t);
}

/* Starts f's child; without one, classifies f by its exit alone. */
static void start_one(struct triage_runner *t, struct failure *f)
{
    struct gflowd *d = t->d;
    int64_t bytes =
        d->cfg.triage_tail_bytes < TRIAGE_TAIL_MAX ? d->cfg.triage_tail_bytes : TRIAGE_TAIL_MAX;
    char uid[16], gid[16], n[24], id[24];
    snprintf(uid, sizeof(uid), "%" PRIu32, f->uid);
    snprintf(gid, sizeof(gid), "%" PRIu32, f->gid);
    snprintf(n, sizeof(n), "%lld", (long long)bytes);
    snprintf(id, sizeof(id), "%lld", (long long)f->id);
    char *argv[] = {"/proc/self/exe", "__log-tail", uid, gid, n, d->paths.log_dir, id, NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    struct subproc_spec spec = {.argv = argv,
                                .envp = envp,
                                .stdin_fd = -1,
                                .capture_stdout = true,
                                .timeout = (double)d->cfg.triage_timeout_secs};
    f->proc = subproc_start(&spec, child_done, f);
    if (!f->proc) {
        log_warn("job %lld: cannot start the read of its log for triage: %s", (long long)f->id,
                 strerror(errno));
        record(t, f, NULL, 0, true);
        failure_free(f);
        return;
    }
    f->next = t->running;
    t->running = f;
    t->n_running++;
}

static void start_next(struct triage_runner *t)
{
    while (t->head && t->n_running < TRIAGE_RUN_MAX) {
        struct failure *f = t->head;
        t->head = f->next;
        if (!t->head)
            t->tail = NULL;
        t->n_waiting--;
        f->next = NULL;
        start_one(t, f);
    }
}

static void failure_free(struct failure *f)
{
    free(f->launch_error);
    free(f);
}

/* jobs_event_cb: a job failed by its own doing, or its command was not found; the
 * other failures (ShimLost, GpuFault, hooks...) have a reason that says more than its
 * log would. */
static void on_event(void *arg, const struct job *j, enum job_event event)
{
    struct triage_runner *t = arg;
    bool not_found = j->reason == JOB_REASON_LAUNCH_FAILED && j->reason_detail &&
                     !strncmp(j->reason_detail, "command not found", 17);
    if (event != JOB_EVENT_FAILED ||
        (j->reason != JOB_REASON_NON_ZERO_EXIT && j->reason != JOB_REASON_SIGNAL &&
         j->reason != JOB_REASON_OUT_OF_MEMORY && !not_found))
        return;
    struct failure *f = xcalloc(1, sizeof(*f));
    *f = (struct failure){.id = j->id,
                          .uid = j->uid,
                          .gid = j->gid,
                          .exit_code = (int)j->exit_code,
                          .signal = j->signal,
                          .oom = j->oom || j->reason == JOB_REASON_OUT_OF_MEMORY,
                          .launch_error = not_found ? xstrdup(j->reason_detail) : NULL,
                          .t = t};
    /* The OOM killer's and the shim's word need no log (triage_classify); nor does a
     * full queue. */
    if (f->oom || f->launch_error || t->n_waiting >= TRIAGE_QUEUE_MAX) {
        record(t, f, NULL, 0, true);
        failure_free(f);
        return;
    }
    if (t->tail)
        t->tail->next = f;
    else
        t->head = f;
    t->tail = f;
    t->n_waiting++;
    start_next(t);
}

struct triage_runner *triage_runner_start(struct gflowd *d)
{
    struct triage_runner *t = xcalloc(1, sizeof(*t));
    t->d = d;
    jobs_observe(d->jobs, on_event, t);
    return t;
}

void triage_runner_stop(struct triage_runner *t)
{
    if (!t)
        return;
    jobs_unobserve(t->d->jobs, on_event, t);
    while (t->running) {
        struct failure *f = t->running;
        t->running = f->next;
        subproc_forget(f->proc);
        failure_free(f);
    }
    while (t->head) {
        struct failure *f = t->head;
        t->head = f->next;
        failure_free(f);
    }
    free(t);
}

/* ---- the child ------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static int child_fail(int err, const char *fmt, ...)
{
    printf("error: ");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (err)
        printf(": %s", strerror(err));
    printf("\n");
    return 1;
}

static bool parse_u32(const char *s, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* Becomes uid:gid for good (a root gflowd; a per-user one is that user already). */
static int drop_to(uid_t uid, gid_t gid)
{
    if (geteuid() == uid)
        return 0;
    if (geteuid() != 0) {
        errno = EPERM;
        return -1;
    }
    if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
        return -1;
    if (uid != 0 && setuid(0) == 0) { /* it must not come back */
        errno = EPERM;
        return -1;
    }
    return 0;
}

int triage_child_main(int argc, char **argv)
{
    uint32_t uid, gid, bytes, id;
    if (argc != 7 || !parse_u32(argv[2], &uid) || !parse_u32(argv[3], &gid) ||
        !parse_u32(argv[4], &bytes) || !parse_u32(argv[6], &id))
        return child_fail(0, "usage: gflowd __log-tail UID GID BYTES DIR ID");
    if (drop_to(uid, gid) < 0)
        return child_fail(errno, "cannot become uid %s", argv[2]);
    int dir = open(argv[5], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return child_fail(errno, "cannot open %s", argv[5]);
    char name[32];
    snprintf(name, sizeof(name), "%" PRIu32 ".log", id);
    /* O_NOFOLLOW: a link is refused (ELOOP); O_NONBLOCK: a FIFO does not hang the open. */
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return errno == ELOOP ? child_fail(0, "%s is a symbolic link: not read", name)
                              : child_fail(errno, "cannot open %s", name);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return child_fail(errno, "cannot stat %s", name);
    if (!S_ISREG(st.st_mode))
        return child_fail(0, "%s is not a regular file: not read", name);
    if (st.st_uid != uid)
        return child_fail(0, "%s is a file of another user: not read", name);
    off_t start = st.st_size > (off_t)bytes ? st.st_size - (off_t)bytes : 0;
    printf("ok %lld\n", (long long)start);
    fflush(stdout);
    char buf[65536];
    off_t pos = start;
    while (pos < st.st_size) {
        size_t want =
            (size_t)(st.st_size - pos) < sizeof(buf) ? (size_t)(st.st_size - pos) : sizeof(buf);
        ssize_t got = pread(fd, buf, want, pos);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        if (fwrite(buf, 1, (size_t)got, stdout) != (size_t)got)
            return 1;
        pos += got;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
