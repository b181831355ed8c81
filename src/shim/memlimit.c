/* memlimit: --memory-limit (step 8): choosing how the limit is held (cgroup v2, cgroup
 * v1, or the RSS watchdog), creating the job's memory cgroup, noticing that the job went
 * over its limit (the OOM-kill counters, the watchdog's sum), killing it for that, and
 * removing a v1 memory cgroup after the job (on v2 the limit is set on the job's own
 * cgroup, jobcg.c). */
#include "shim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgdelegate.h"
#include "files.h"
#include "util.h"

/* The names the exit file and the job log use, by enum shim_mem_method. */
static const char *const shim_memlimit_method_names[] = {NULL, "cgroup v2", "cgroup v1",
                                                         "watchdog"};

const char *shim_memlimit_method_name(enum shim_mem_method method)
{
    return shim_memlimit_method_names[method];
}

/* One file of the job's memory cgroup to write; an optional one may be missing (no
 * swap accounting, an older kernel). */
struct shim_memlimit_setting {
    const char *file;
    const char *value;
    bool optional;
};

/* Creates dir (an empty leftover of a shim that died goes first, so that the job gets
 * exactly this run's limits), writes the settings in order and opens its cgroup.procs
 * for the children to join. 0, or -1 with *why and dir removed again. */
static int shim_memlimit_make(const char *dir, const struct shim_memlimit_setting *set, size_t n,
                              int *procs_fd, char **why)
{
    rmdir(dir);
    if (mkdir_p(dir, 0755) < 0) {
        *why = xasprintf("cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (shim_cgroup_write(dir, set[i].file, set[i].value) == 0 ||
            (set[i].optional && errno == ENOENT))
            continue;
        *why = xasprintf("cannot write %s/%s: %s", dir, set[i].file, strerror(errno));
        rmdir(dir);
        return -1;
    }
    if (shim_cgroup_open_procs(dir, procs_fd, why) == 0)
        return 0;
    rmdir(dir);
    return -1;
}

/* Writes memory.max (and memory.swap.max = 0, memory.oom.group = 1 where they exist) of
 * the job's v2 cgroup dir. 0, or -1 with *why (NULL: not wanted). */
static int shim_memlimit_v2_write(const char *dir, long long bytes, char **why)
{
    char limit[32];
    snprintf(limit, sizeof(limit), "%lld", bytes);
    const struct shim_memlimit_setting set[] = {{"memory.max", limit, false},
                                                {"memory.swap.max", "0", true},
                                                {"memory.oom.group", "1", true}};
    for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
        if (shim_cgroup_write(dir, set[i].file, set[i].value) < 0 &&
            !(set[i].optional && errno == ENOENT)) {
            if (why)
                *why = xasprintf("cannot write %s/%s: %s", dir, set[i].file, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* cgroup v2: the job's own cgroup (step 9) with memory.max. Its parent, the shim's own
 * cgroup, must have the memory controller and enable it for its children; a cgroup
 * with processes in it (the shim's, unless it is the root) cannot enable controllers
 * for its children: then the kernel refuses the "+memory" below and the next method is
 * tried. memory.oom.group makes the kernel kill the whole job at once, as the other
 * methods do. 0, or -1 with *why. */
static int shim_memlimit_v2(const struct shim_jobcg *cg, long long bytes, char **why)
{
    if (cg->version != 2) {
        *why = xstrdup("the job has no cgroup v2 of its own");
        return -1;
    }
    char *base = xstrdup(cg->dir);
    *strrchr(base, '/') = '\0';
    int rc = -1;
    if (!cgdelegate_has_word(base, "cgroup.controllers", "memory")) {
        *why = xasprintf("the memory controller is not available in %s (bound to cgroup v1, "
                         "or not delegated)",
                         base);
    } else if (!cgdelegate_has_word(base, "cgroup.subtree_control", "memory") &&
               shim_cgroup_write(base, "cgroup.subtree_control", "+memory") < 0) {
        *why = xasprintf("cannot enable the memory controller in %s/cgroup.subtree_control: %s",
                         base, strerror(errno));
    } else {
        rc = shim_memlimit_v2_write(cg->dir, bytes, why);
    }
    free(base);
    return rc;
}

/* cgroup v1: <the shim's own memory cgroup>/gflow/job-<id> with
 * memory.limit_in_bytes, and memory.memsw.limit_in_bytes the same (memory plus swap:
 * no swapping past the limit) where swap is accounted. Returns the cgroup's directory,
 * or NULL with *why. */
static char *shim_memlimit_v1(int64_t job_id, long long bytes, int *procs_fd, char **why)
{
    char *point, *root;
    if (shim_cgroup_mount("memory", &point, &root) < 0) {
        *why = xstrdup("no cgroup v1 memory controller is mounted");
        return NULL;
    }
    char *base = shim_cgroup_base("memory", point, root);
    char *dir = xasprintf("%s/gflow/job-%lld", base, (long long)job_id);
    free(base);
    free(point);
    free(root);
    char limit[32];
    snprintf(limit, sizeof(limit), "%lld", bytes);
    /* The memsw limit may never be below the memory limit: memory first. */
    const struct shim_memlimit_setting set[] = {{"memory.limit_in_bytes", limit, false},
                                                {"memory.memsw.limit_in_bytes", limit, true}};
    if (shim_memlimit_make(dir, set, sizeof(set) / sizeof(set[0]), procs_fd, why) < 0) {
        free(dir);
        return NULL;
    }
    return dir;
}

/* Step 8 before fork: with --memory-limit, picks how the limit is enforced (cgroup v2:
 * the job's own cgroup, else a cgroup v1 memory cgroup, else the watchdog; or only the
 * method GFLOW_SHIM_MEMORY_METHOD names, for tests) and sets up the memory cgroup. 0, or -1 with *err when the
 * forced method is unavailable. */
int shim_memlimit_setup(const struct shim_opts *o, struct shim_exec *ex,
                        const struct shim_jobcg *cg, struct shim_memlimit *m, char **err)
{
    m->limit_mb = o->memory_limit_mb;
    if (!m->limit_mb)
        return 0;
    const char *force = getenv("GFLOW_SHIM_MEMORY_METHOD");
    if (force && !*force)
        force = NULL;
    if (force && strcmp(force, "v2") != 0 && strcmp(force, "v1") != 0 &&
        strcmp(force, "watchdog") != 0) {
        *err = xasprintf("GFLOW_SHIM_MEMORY_METHOD '%s' is none of v2, v1, watchdog", force);
        return -1;
    }
    long long bytes = (long long)m->limit_mb * 1048576;
    char *why = NULL;
    if ((!force || strcmp(force, "v2") == 0) && shim_memlimit_v2(cg, bytes, &why) == 0) {
        m->dir = xstrdup(cg->dir); /* the job joins it as its own cgroup */
        m->method = SHIM_MEM_V2;
    }
    if (!m->dir && (!force || strcmp(force, "v1") == 0)) {
        free(why);
        why = NULL;
        m->dir = shim_memlimit_v1(o->job_id, bytes, &ex->memcg_procs_fd, &why);
        m->own_dir = m->dir != NULL;
        m->method = SHIM_MEM_V1;
    }
    if (!m->dir && force && strcmp(force, "watchdog") != 0) {
        *err = xasprintf("memory enforcement %s unavailable: %s", force, why);
        free(why);
        return -1;
    }
    free(why);
    if (!m->dir)
        m->method = SHIM_MEM_WATCHDOG;
    return 0;
}

/* Whether the job's processes together hold more than its limit (the watchdog's sum). */
static bool shim_memlimit_rss_over(const struct shim_run *r)
{
    return shim_proctree_rss_kb(r->self) > (long long)r->mem.limit_mb * 1024;
}

/* Whether the memory controller's files are gone from the job's v2 cgroup (turned off
 * above it), rather than only an old kernel's memory.events lacking "oom_kill". */
static bool shim_memlimit_v2_gone(const char *dir)
{
    char *path = xasprintf("%s/memory.max", dir);
    bool gone = access(path, F_OK) < 0 && errno == ENOENT;
    free(path);
    return gone;
}

/* cgroup v2: whether the OOM killer struck in the job's cgroup. A gflowd in a leaf of
 * its service's cgroup turns the memory controller off there when it exits (systemd
 * could not start the next one in that cgroup otherwise): memory.max is gone until
 * the next gflowd turns it on again, with the limit reset to "max". Meanwhile the
 * watchdog's sum holds the job to its limit, and the limit is written again once the
 * controller is back. */
static bool shim_memlimit_v2_over(struct shim_run *r)
{
    long long kills = shim_cgroup_read_num(r->mem.dir, "memory.events", "oom_kill");
    if (kills > 0)
        return true;
    if (kills < 0 && shim_memlimit_v2_gone(r->mem.dir)) {
        r->mem.lapsed = true;
        return shim_memlimit_rss_over(r);
    }
    if (r->mem.lapsed &&
        shim_memlimit_v2_write(r->mem.dir, (long long)r->mem.limit_mb * 1048576, NULL) == 0)
        r->mem.lapsed = false;
    return false;
}

/* Whether the job is over its memory limit now: for the watchdog its RSS, for a
 * memory cgroup whether the kernel's OOM killer has struck in it. */
static bool shim_memlimit_over(struct shim_run *r)
{
    switch (r->mem.method) {
    case SHIM_MEM_WATCHDOG:
        return shim_memlimit_rss_over(r);
    case SHIM_MEM_V2:
        return shim_memlimit_v2_over(r);
    case SHIM_MEM_V1:
        /* "oom_kill N" exists since Linux 4.13; before, only the end can tell. */
        return shim_cgroup_read_num(r->mem.dir, "memory.oom_control", "oom_kill") > 0;
    case SHIM_MEM_NONE:
        break;
    }
    return false;
}

/* Records that the job was killed for memory, with its one line in the job log. */
static void shim_memlimit_record_oom(struct shim_run *r)
{
    r->mem.oom = true;
    char line[160];
    int n =
        snprintf(line, sizeof(line), "gflow-shim: job exceeded its memory limit of %lld MiB (%s)\n",
                 (long long)r->mem.limit_mb, shim_memlimit_method_names[r->mem.method]);
    (void)n;
    shim_relay_line(&r->relay, line); /* if it cannot be written, the exit file still says it */
}

/* The job went over its limit: all of it is SIGKILLed at once (no grace: it would
 * only go on allocating), then again at the re-kill period until nothing is left. A
 * memory cgroup's OOM killer may have taken one process only; the job ends as a
 * whole, whichever method caught it. */
static void shim_memlimit_exceeded(struct shim_run *r)
{
    shim_memlimit_record_oom(r);
    struct itimerspec off = {0};
    timerfd_settime(r->mem_tfd, 0, &off, NULL);
    shim_supervise_kill_now(r);
}

/* The memory check period is over: is the job over its limit? */
void shim_memlimit_tick(struct shim_run *r)
{
    uint64_t ticks;
    if (read(r->mem_tfd, &ticks, sizeof(ticks)) < 0)
        return; /* spurious wakeup */
    if (!r->mem.oom && shim_memlimit_over(r))
        shim_memlimit_exceeded(r);
}

/* With --memory-limit: the memory check timer (the line saying the job exceeded its
 * limit goes through the relay). 0, or -1 with *err. */
int shim_memlimit_open(struct shim_run *r, const struct shim_exec *ex, char **err)
{
    (void)ex;
    if (!r->mem.limit_mb)
        return 0;
    r->mem_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (r->mem_tfd < 0) {
        *err = xasprintf("memory limit timerfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

void shim_memlimit_start(struct shim_run *r)
{
    if (r->mem_tfd >= 0)
        shim_supervise_arm(r->mem_tfd, SHIM_MEM_TICK_NS / 1e9, SHIM_MEM_TICK_NS);
}

/* After the job: a memory cgroup's counters may show an OOM kill the last check did not
 * see; then a v1 memory cgroup is removed (a v2 one is the job's own: jobcg.c). Without the oom_kill counter (cgroup v1 before
 * Linux 4.13), a job that hit its limit (failcnt) and died of SIGKILL counts as killed
 * for memory. */
void shim_memlimit_last_look(struct shim_run *r)
{
    if (!r->mem.dir || r->mem.looked)
        return;
    r->mem.looked = true;
    if (!r->mem.oom && r->ntasks > 0) {
        bool oom = shim_memlimit_over(r);
        int st = shim_supervise_deciding(r)->status;
        if (!oom && r->mem.method == SHIM_MEM_V1 &&
            shim_cgroup_read_num(r->mem.dir, "memory.oom_control", "oom_kill") < 0)
            oom = shim_cgroup_read_num(r->mem.dir, "memory.failcnt", NULL) > 0 && WIFSIGNALED(st) &&
                  WTERMSIG(st) == SIGKILL;
        if (oom)
            shim_memlimit_record_oom(r);
    }
}

void shim_memlimit_end(struct shim_run *r, int64_t job_id)
{
    if (!r->mem.dir)
        return;
    shim_memlimit_last_look(r);
    if (r->mem.own_dir)
        shim_cgroup_remove(r->mem.dir, job_id);
    free(r->mem.dir);
    r->mem.dir = NULL;
}
