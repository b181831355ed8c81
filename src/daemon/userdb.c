/* userdb: NSS lookups on worker threads, cached (see userdb.h). The loop and the workers
 * share the entries under one mutex; a worker holds it only to take an entry from the
 * queue and to write its answer back, never while NSS runs. */
#include "userdb.h"

#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "loop.h"
#include "util.h"

/* Lookups that may hang at once (one slow user does not hold up the others). */
#define USERDB_THREADS 4
/* Entries kept; beyond, the least recently used that nothing waits for goes. */
#define USERDB_MAX_ENTRIES 4096

enum ud_kind { UD_UID, UD_USER, UD_GROUP };

struct ud_entry {
    enum ud_kind kind;
    uid_t uid;  /* UD_UID: the key */
    char *name; /* UD_USER, UD_GROUP: the key */
    /* The last lookup's outcome. */
    bool answered;            /* a lookup has ended */
    bool found_ever;          /* user / id hold an answer that found it */
    enum userdb_answer state; /* the last lookup's */
    int err;                  /* USERDB_UNKNOWN: its errno */
    struct userdb_user user;  /* UD_UID */
    uint32_t id;              /* UD_USER: the uid, UD_GROUP: the gid */
    double found_at;          /* monotonic: when it was last found */
    struct stat etc_group;    /* /etc/group when it was last found */
    /* Lookups. */
    bool queued; /* waiting for a worker, or with one */
    bool wanted; /* a job waits for it: retried while not found */
    double backoff, retry_at, used_at;
    struct ud_entry *next_queued;
};

struct userdb {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* a lookup is queued, or quit */
    pthread_cond_t done_cv; /* a lookup has ended (a loop waiting with a deadline) */
    pthread_t threads[USERDB_THREADS];
    size_t n_threads;
    size_t working; /* workers inside NSS */
    bool quit;
    struct ud_entry *head, *tail; /* the queue */
    struct ud_entry **entries;
    size_t n, cap;
    int efd;
    /* The loop's own. */
    userdb_answered_cb answered;
    void *arg;
    struct loop_timer *retry_timer;
    double retry_timer_at;
};

void userdb_user_clear(struct userdb_user *p)
{
    free(p->name);
    free(p->home);
    free(p->shell);
    free(p->groups);
    memset(p, 0, sizeof(*p));
}

static void user_copy(struct userdb_user *to, const struct userdb_user *from)
{
    *to = (struct userdb_user){.uid = from->uid,
                               .gid = from->gid,
                               .name = xstrdup(from->name),
                               .home = xstrdup(from->home),
                               .shell = xstrdup(from->shell),
                               .groups = from->groups ? xstrdup(from->groups) : NULL};
}

/* ---- the workers' side: NSS ---- */

/* r's user's groups as the shim's --groups wants them, or NULL (too many). */
static char *groups_of(const char *name, gid_t gid)
{
    int n = 32;
    gid_t *groups = xmalloc((size_t)n * sizeof(*groups));
    while (getgrouplist(name, gid, groups, &n) < 0) {
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
    return strbuf_detach(&sb);
}

/* One lookup of e's key into the fields of out (what the worker found, not yet shared):
 * its outcome, with *err for USERDB_UNKNOWN. */
static enum userdb_answer nss_lookup(const struct ud_entry *e, struct ud_entry *out, int *err)
{
    size_t size = 1024;
    char *buf = xmalloc(size);
    int rc;
    struct passwd pw, *pwr = NULL;
    struct group gr, *grr = NULL;
    for (;;) {
        if (e->kind == UD_UID)
            rc = getpwuid_r(e->uid, &pw, buf, size, &pwr);
        else if (e->kind == UD_USER)
            rc = getpwnam_r(e->name, &pw, buf, size, &pwr);
        else
            rc = getgrnam_r(e->name, &gr, buf, size, &grr);
        if (rc != ERANGE || size >= (1 << 20))
            break;
        size *= 2;
        buf = xrealloc(buf, size);
    }
    enum userdb_answer a = USERDB_FOUND;
    if (rc != 0) {
        *err = rc;
        a = USERDB_UNKNOWN;
    } else if (!pwr && !grr) {
        a = USERDB_ABSENT;
    } else if (e->kind == UD_GROUP) {
        out->id = grr->gr_gid;
    } else if (e->kind == UD_USER) {
        out->id = pwr->pw_uid;
    } else {
        if (stat("/etc/group", &out->etc_group) < 0) /* before the groups are read */
            memset(&out->etc_group, 0, sizeof(out->etc_group));
        out->user = (struct userdb_user){.uid = pwr->pw_uid,
                                         .gid = pwr->pw_gid,
                                         .name = xstrdup(pwr->pw_name),
                                         .home = xstrdup(pwr->pw_dir ? pwr->pw_dir : "/"),
                                         .shell = xstrdup(pwr->pw_shell ? pwr->pw_shell : ""),
                                         .groups = groups_of(pwr->pw_name, pwr->pw_gid)};
    }
    free(buf);
    return a;
}

/* Writes a lookup's outcome into e (under mu). */
static void take_answer(struct ud_entry *e, enum userdb_answer a, int err, struct ud_entry *got)
{
    double now = now_mono();
    e->answered = true;
    e->queued = false;
    e->state = a;
    e->err = err;
    if (a == USERDB_FOUND) {
        userdb_user_clear(&e->user);
        e->user = got->user;
        e->id = got->id;
        e->etc_group = got->etc_group;
        e->found_ever = true;
        e->found_at = now;
        e->backoff = 0;
        e->wanted = false;
        return;
    }
    e->backoff = e->backoff > 0 ? e->backoff * 2 : 1;
    if (e->backoff > USERDB_BACKOFF_MAX_SECS)
        e->backoff = USERDB_BACKOFF_MAX_SECS;
    e->retry_at = now + e->backoff;
}

static void *worker_main(void *arg)
{
    struct userdb *u = arg;
    pthread_mutex_lock(&u->mu);
    for (;;) {
        while (!u->quit && !u->head)
            pthread_cond_wait(&u->work_cv, &u->mu);
        if (u->quit)
            break;
        struct ud_entry *e = u->head;
        u->head = e->next_queued;
        if (!u->head)
            u->tail = NULL;
        e->next_queued = NULL;
        u->working++;
        pthread_mutex_unlock(&u->mu);
        struct ud_entry got = {0};
        int err = 0;
        enum userdb_answer a = nss_lookup(e, &got, &err); /* the key does not change */
        pthread_mutex_lock(&u->mu);
        u->working--;
        take_answer(e, a, err, &got);
        pthread_cond_broadcast(&u->done_cv);
        uint64_t one = 1;
        ssize_t w = write(u->efd, &one, sizeof(one));
        (void)w; /* a full counter wakes the loop all the same */
    }
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

/* ---- the loop's side ---- */

static void queue_lookup(struct userdb *u, struct ud_entry *e)
{
    if (e->queued)
        return;
    e->queued = true;
    if (u->tail)
        u->tail->next_queued = e;
    else
        u->head = e;
    u->tail = e;
    pthread_cond_signal(&u->work_cv);
}

static void entry_free(struct ud_entry *e)
{
    free(e->name);
    userdb_user_clear(&e->user);
    free(e);
}

/* The entry of the key (kind, uid or name), made when missing (under mu). */
static struct ud_entry *entry_of(struct userdb *u, enum ud_kind kind, uid_t uid, const char *name)
{
    for (size_t i = 0; i < u->n; i++) {
        struct ud_entry *e = u->entries[i];
        if (e->kind == kind && (name ? strcmp(e->name, name) == 0 : e->uid == uid))
            return e;
    }
    if (u->n >= USERDB_MAX_ENTRIES) { /* room: the least recently used that is idle */
        size_t victim = u->n;
        for (size_t i = 0; i < u->n; i++) {
            struct ud_entry *e = u->entries[i];
            if (!e->queued && !e->wanted &&
                (victim == u->n || e->used_at < u->entries[victim]->used_at))
                victim = i;
        }
        if (victim < u->n) {
            entry_free(u->entries[victim]);
            u->entries[victim] = u->entries[--u->n];
        }
    }
    if (u->n == u->cap) {
        u->cap = u->cap ? u->cap * 2 : 16;
        u->entries = xrealloc(u->entries, u->cap * sizeof(*u->entries));
    }
    struct ud_entry *e = xcalloc(1, sizeof(*e));
    e->kind = kind;
    e->uid = uid;
    e->name = name ? xstrdup(name) : NULL;
    u->entries[u->n++] = e;
    return e;
}

/* Starts a lookup of e when it has none, an old answer or a retry that is due. */
static void refresh(struct userdb *u, struct ud_entry *e, double now)
{
    if (!e->answered)
        queue_lookup(u, e);
    else if (e->state == USERDB_FOUND && now - e->found_at >= USERDB_REFRESH_SECS)
        queue_lookup(u, e);
    else if (e->state != USERDB_FOUND && now >= e->retry_at)
        queue_lookup(u, e);
}

/* Waits (mu held) up to wait seconds for e's first answer. */
static void wait_answer(struct userdb *u, struct ud_entry *e, double wait)
{
    if (e->answered || wait <= 0)
        return;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long long ns = until.tv_nsec + (long long)(wait * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    while (!e->answered && !u->quit)
        if (pthread_cond_timedwait(&u->done_cv, &u->mu, &until) == ETIMEDOUT)
            break;
}

/* What is known of e's lookup that has not found it, to free. */
static char *why_not(const struct ud_entry *e, const char *what)
{
    if (!e->answered)
        return e->found_ever ? xasprintf("%s: looking it up again", what)
                             : xasprintf("looking up %s (the user database has not answered "
                                         "yet)",
                                         what);
    if (e->state == USERDB_ABSENT)
        return xasprintf("the user database has no %s", what);
    if (e->state == USERDB_UNKNOWN)
        return xasprintf("cannot look up %s: %s", what, strerror(e->err));
    return xasprintf("%s: its entry is being looked up again", what);
}

enum userdb_answer userdb_uid(struct userdb *u, uid_t uid, double wait, struct userdb_user *out,
                              char **why)
{
    if (!u) {
        if (why)
            *why = xstrdup("no user database");
        return USERDB_UNKNOWN;
    }
    pthread_mutex_lock(&u->mu);
    double now = now_mono();
    struct ud_entry *e = entry_of(u, UD_UID, uid, NULL);
    e->used_at = now;
    refresh(u, e, now);
    wait_answer(u, e, wait);
    enum userdb_answer a = e->state == USERDB_ABSENT ? USERDB_ABSENT
                           : e->found_ever           ? USERDB_FOUND
                                                     : USERDB_UNKNOWN;
    if (a == USERDB_FOUND && out)
        user_copy(out, &e->user);
    if (a != USERDB_FOUND && why) {
        char *what = xasprintf("uid %u", (unsigned)uid);
        *why = why_not(e, what);
        free(what);
    }
    pthread_mutex_unlock(&u->mu);
    return a;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static void arm_retries(struct userdb *u);

/* Waits (mu held) up to wait seconds for e's lookup under way to end. */
static void wait_lookup(struct userdb *u, struct ud_entry *e, double wait)
{
    if (!e->queued || wait <= 0)
        return;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long long ns = until.tv_nsec + (long long)(wait * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    while (e->queued && !u->quit)
        if (pthread_cond_timedwait(&u->done_cv, &u->mu, &until) == ETIMEDOUT)
            break;
}

static bool is_fresh(const struct ud_entry *e, const struct stat *etc_group, double now)
{
    return e->answered && e->state == USERDB_FOUND && now - e->found_at < USERDB_FRESH_SECS &&
           now >= e->found_at && same_file(&e->etc_group, etc_group);
}

enum userdb_answer userdb_uid_fresh(struct userdb *u, uid_t uid, double wait,
                                    struct userdb_user *out, char **why)
{
    if (!u) {
        if (why)
            *why = xstrdup("no user database");
        return USERDB_UNKNOWN;
    }
    struct stat st;
    if (stat("/etc/group", &st) < 0)
        memset(&st, 0, sizeof(st));
    pthread_mutex_lock(&u->mu);
    double now = now_mono();
    struct ud_entry *e = entry_of(u, UD_UID, uid, NULL);
    e->used_at = now;
    /* A quick answer (/etc/passwd's) is taken at once; a lookup that was under way
     * already is not waited for again (the next job of the same user in a pass). */
    if (!is_fresh(e, &st, now) && !e->queued &&
        (!e->answered || e->state == USERDB_FOUND || now >= e->retry_at)) {
        queue_lookup(u, e);
        wait_lookup(u, e, wait);
        now = now_mono();
    }
    if (is_fresh(e, &st, now)) {
        if (now - e->found_at >= USERDB_FRESH_SECS / 2) /* fresh still when the next asks */
            queue_lookup(u, e);
        if (out)
            user_copy(out, &e->user);
        pthread_mutex_unlock(&u->mu);
        return USERDB_FOUND;
    }
    e->wanted = true;
    if (!e->answered || e->state == USERDB_FOUND || now >= e->retry_at)
        queue_lookup(u, e);
    if (why) {
        char *what = xasprintf("uid %u", (unsigned)uid);
        *why = why_not(e, what);
        free(what);
    }
    pthread_mutex_unlock(&u->mu);
    arm_retries(u);
    return USERDB_UNKNOWN;
}

static enum userdb_answer named(struct userdb *u, enum ud_kind kind, const char *name, double wait,
                                uint32_t *id)
{
    if (!u)
        return USERDB_UNKNOWN;
    pthread_mutex_lock(&u->mu);
    double now = now_mono();
    struct ud_entry *e = entry_of(u, kind, 0, name);
    e->used_at = now;
    refresh(u, e, now);
    wait_answer(u, e, wait);
    enum userdb_answer a = e->state == USERDB_ABSENT ? USERDB_ABSENT
                           : e->found_ever           ? USERDB_FOUND
                                                     : USERDB_UNKNOWN;
    if (a == USERDB_FOUND)
        *id = e->id;
    pthread_mutex_unlock(&u->mu);
    return a;
}

enum userdb_answer userdb_user_named(struct userdb *u, const char *name, double wait, uid_t *uid)
{
    uint32_t id = 0;
    enum userdb_answer a = named(u, UD_USER, name, wait, &id);
    *uid = (uid_t)id;
    return a;
}

enum userdb_answer userdb_group_named(struct userdb *u, const char *name, double wait, gid_t *gid)
{
    uint32_t id = 0;
    enum userdb_answer a = named(u, UD_GROUP, name, wait, &id);
    *gid = (gid_t)id;
    return a;
}

/* The retries of the entries jobs wait for: each when its back-off is over. */
static void retry_cb(void *arg)
{
    struct userdb *u = arg;
    u->retry_timer = NULL;
    pthread_mutex_lock(&u->mu);
    double now = now_mono();
    for (size_t i = 0; i < u->n; i++) {
        struct ud_entry *e = u->entries[i];
        if (e->wanted && e->answered && e->state != USERDB_FOUND && now >= e->retry_at)
            queue_lookup(u, e);
    }
    pthread_mutex_unlock(&u->mu);
    arm_retries(u);
}

static void arm_retries(struct userdb *u)
{
    double next = 0;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n; i++) {
        struct ud_entry *e = u->entries[i];
        if (e->wanted && !e->queued && e->answered && e->state != USERDB_FOUND &&
            (next == 0 || e->retry_at < next))
            next = e->retry_at;
    }
    pthread_mutex_unlock(&u->mu);
    if (u->retry_timer && (next == 0 || u->retry_timer_at <= next))
        return;
    if (u->retry_timer)
        loop_cancel_timer(u->retry_timer);
    u->retry_timer = NULL;
    if (next == 0)
        return;
    double now = now_mono();
    u->retry_timer_at = next;
    u->retry_timer = loop_add_timer(next > now ? next - now : 0, retry_cb, u);
}

static void answers_cb(int fd, uint32_t events, void *arg)
{
    (void)events;
    struct userdb *u = arg;
    uint64_t count;
    if (read(fd, &count, sizeof(count)) < 0)
        return;
    arm_retries(u);
    if (u->answered)
        u->answered(u->arg);
}

struct userdb *userdb_new(userdb_answered_cb answered, void *arg, char **err)
{
    struct userdb *u = xcalloc(1, sizeof(*u));
    u->answered = answered;
    u->arg = arg;
    u->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (u->efd < 0) {
        *err = xasprintf("cannot make an eventfd for the user lookups: %s", strerror(errno));
        free(u);
        return NULL;
    }
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->work_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&u->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = 0;
    for (; u->n_threads < USERDB_THREADS && rc == 0; u->n_threads++)
        rc = loop_thread_create(&u->threads[u->n_threads], NULL, worker_main, u);
    if (rc != 0) /* the last one did not start; fewer will do */
        u->n_threads--;
    if (u->n_threads == 0) {
        *err = xasprintf("cannot start a thread for the user lookups: %s", strerror(rc));
        userdb_free(u);
        return NULL;
    }
    if (loop_add_fd(u->efd, EPOLLIN, answers_cb, u) < 0) {
        *err = xstrdup("cannot watch the user lookups' eventfd");
        userdb_free(u);
        return NULL;
    }
    return u;
}

void userdb_free(struct userdb *u)
{
    if (!u)
        return;
    if (u->retry_timer)
        loop_cancel_timer(u->retry_timer);
    pthread_mutex_lock(&u->mu);
    u->quit = true;
    bool stuck = u->working > 0;
    pthread_cond_broadcast(&u->work_cv);
    pthread_cond_broadcast(&u->done_cv);
    pthread_mutex_unlock(&u->mu);
    loop_del_fd(u->efd); /* nothing when it was never added */
    if (stuck) {
        /* A lookup may never come back; what the workers use stays allocated. */
        for (size_t i = 0; i < u->n_threads; i++)
            pthread_detach(u->threads[i]);
        log_debug("a user lookup is still running at exit; left behind");
        return;
    }
    for (size_t i = 0; i < u->n_threads; i++)
        pthread_join(u->threads[i], NULL);
    for (size_t i = 0; i < u->n; i++)
        entry_free(u->entries[i]);
    free(u->entries);
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->work_cv);
    pthread_cond_destroy(&u->done_cv);
    close(u->efd);
    free(u);
}
