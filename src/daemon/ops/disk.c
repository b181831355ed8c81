/* disk: room on the filesystems gflowd writes to (see disk.h).
 *
 * statvfs says how much is free: for a root daemon all of it (f_bfree: root may use the
 * blocks a filesystem reserves for it), else what an unprivileged writer may use
 * (f_bavail). A write that failed for want of space (a commit, a job's launch) also
 * counts, for DISK_HOLD_SECS, whatever statvfs says. The message names the mount point
 * (found by walking up from the directory while the device stays the same), the
 * directory and what it holds. When the logs' filesystem is full, the message also names
 * the running job with the largest log there (the likely flooder): cancelling it gives
 * the space back, as its shim then cuts its log to its last daemon.log_keep_on_full_disk
 * bytes (src/shim/relay.c). The logs are only lstat'ed here, never opened. */
#include "disk.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "clock.h"
#include "jobs/jobs.h"
#include "log.h"
#include "util.h"

#define DISK_CACHE_SECS 0.1

struct disk_fs {
    char *dir;
    const char *holds; /* what gflowd keeps there, for the message */
    double noted_at;   /* monotonic time of the last write that failed for want of space */
    bool logs;         /* the job logs are there */
};

struct disk {
    struct disk_fs fs[2]; /* [0] the data directory, [1] the logs when elsewhere */
    int n;
    double checked_at; /* monotonic; 0: never */
    bool full;
    char *problem;
    const struct jobs *jobs; /* the running jobs, whose logs are looked at; NULL: none */
    char *log_dir;
    struct disk_flooder flooder; /* of the last look (id 0: none) */
};

static dev_t disk_dev(const char *dir)
{
    struct stat st;
    return stat(dir, &st) == 0 ? st.st_dev : (dev_t)-1;
}

struct disk *disk_new(const char *data_dir, const char *log_dir)
{
    struct disk *k = xcalloc(1, sizeof(*k));
    k->fs[0].dir = xstrdup(data_dir);
    k->log_dir = xstrdup(log_dir);
    k->n = 1;
    if (disk_dev(log_dir) != disk_dev(data_dir)) {
        k->fs[0].holds = "gflowd's database";
        k->fs[1].dir = xstrdup(log_dir);
        k->fs[1].holds = "the job logs, daemon.log_dir";
        k->fs[1].logs = true;
        k->n = 2;
    } else {
        k->fs[0].holds = "gflowd's database and the job logs";
        k->fs[0].logs = true;
    }
    return k;
}

void disk_set_jobs(struct disk *k, const struct jobs *jobs)
{
    k->jobs = jobs;
}

void disk_free(struct disk *k)
{
    if (!k)
        return;
    for (int i = 0; i < k->n; i++)
        free(k->fs[i].dir);
    free(k->log_dir);
    free(k->problem);
    free(k);
}

/* Where the filesystem holding dir is mounted (to free). */
static char *disk_mount_point(const char *dir)
{
    char *path = realpath(dir, NULL);
    if (!path)
        return xstrdup(dir);
    dev_t dev = disk_dev(path);
    for (;;) {
        char *slash = strrchr(path, '/');
        if (!slash || slash == path) {
            if (disk_dev("/") == dev)
                strcpy(path, "/");
            return path;
        }
        *slash = '\0';
        if (disk_dev(path) != dev) {
            *slash = '/';
            return path;
        }
    }
}

/* "512 bytes", "3.2 MiB" */
static char *disk_size(unsigned long long bytes)
{
    if (bytes < 1024)
        return xasprintf("%llu byte%s", bytes, plural_s((long long)bytes));
    if (bytes < 1024ULL * 1024)
        return xasprintf("%.1f KiB", (double)bytes / 1024);
    return xasprintf("%.1f MiB", (double)bytes / (1024.0 * 1024));
}

/* The running job with the largest log (id 0: none has one): by its size on the disk
 * (lstat: a link is not followed, and counts for nothing). */
static struct disk_flooder disk_find_flooder(const struct disk *k)
{
    struct disk_flooder best = {0};
    size_t n = 0;
    struct job **running = k->jobs ? jobs_running(k->jobs, &n) : NULL;
    for (size_t i = 0; i < n; i++) {
        /* The log's name as the runner gives it (runner_log_path; run is above ops). */
        char *path = xasprintf("%s/%lld.log", k->log_dir, (long long)running[i]->id);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > best.log_bytes) {
            best.id = running[i]->id;
            best.uid = running[i]->uid;
            best.log_bytes = st.st_size;
            snprintf(best.user, sizeof(best.user), "%s", running[i]->user ? running[i]->user : "?");
        }
        free(path);
    }
    return best;
}

/* "; job 12 (alice, uid 1001) has the largest log there (11.2 MiB): cancel it ..." or "". */
static char *disk_flooder_text(const struct disk_flooder *f)
{
    if (!f->id)
        return xstrdup("");
    char *size = disk_size((unsigned long long)f->log_bytes);
    char *text = xasprintf("; job %lld (%s, uid %lld) has the largest log there (%s): cancel "
                           "it and its log is cut to its last bytes as it ends "
                           "(daemon.log_keep_on_full_disk)",
                           (long long)f->id, f->user, (long long)f->uid, size);
    free(size);
    return text;
}

/* Whether fs is full now; then *msg says so (to free). */
static bool disk_fs_full(struct disk *k, struct disk_fs *fs, double now, char **msg)
{
    struct statvfs sv;
    bool noted = fs->noted_at > 0 && now - fs->noted_at < DISK_HOLD_SECS;
    if (statvfs(fs->dir, &sv) < 0 && !noted)
        return false; /* cannot tell: the writes themselves will */
    bool root = geteuid() == 0;
    unsigned long long bytes = (unsigned long long)(root ? sv.f_bfree : sv.f_bavail) * sv.f_frsize;
    unsigned long long inodes = root ? sv.f_ffree : sv.f_favail;
    bool no_inodes = sv.f_files > 0 && inodes < DISK_MIN_FREE_INODES;
    if (!noted && !no_inodes && bytes >= (unsigned long long)DISK_MIN_FREE_BYTES)
        return false;
    char *mount = disk_mount_point(fs->dir);
    char *free_text = no_inodes ? xasprintf("%llu inodes free", inodes) : disk_size(bytes);
    if (!no_inodes) {
        char *t = xasprintf("%s free", free_text);
        free(free_text);
        free_text = t;
    }
    if (fs->logs)
        k->flooder = disk_find_flooder(k);
    char *flooder = disk_flooder_text(&k->flooder);
    *msg = xasprintf("the filesystem mounted at %s (holding %s: %s) is full (%s)%s; free some "
                     "space there (or cancel the job that fills it) and gflowd resumes by "
                     "itself, no restart needed",
                     mount, fs->dir, fs->holds, free_text, flooder);
    free(flooder);
    free(mount);
    free(free_text);
    return true;
}

/* Looks at the first count filesystems; the message of the first that is full. */
static bool disk_look(struct disk *k, int count, char **msg)
{
    double now = now_mono();
    k->flooder = (struct disk_flooder){0};
    for (int i = 0; i < count && i < k->n; i++)
        if (disk_fs_full(k, &k->fs[i], now, msg))
            return true;
    return false;
}

bool disk_full(struct disk *k)
{
    double now = now_mono();
    if (k->checked_at > 0 && now - k->checked_at < DISK_CACHE_SECS)
        return k->full;
    k->checked_at = now;
    char *msg = NULL;
    bool full = disk_look(k, k->n, &msg);
    if (full && !k->full)
        log_warn("%s; jobs wait and requests that write are refused meanwhile", msg);
    else if (!full && k->full)
        log_info("there is room again: jobs start and requests that write are accepted");
    k->full = full;
    free(k->problem);
    k->problem = msg;
    return full;
}

void disk_note_full(struct disk *k, const char *path)
{
    double now = now_mono();
    size_t best = 0;
    int which = 0;
    /* The filesystem whose directory path lies under (the longest such). */
    for (int i = 0; i < k->n; i++) {
        size_t len = strlen(k->fs[i].dir);
        if (strncmp(path, k->fs[i].dir, len) == 0 && (path[len] == '/' || !path[len]) &&
            len > best) {
            best = len;
            which = i;
        }
    }
    k->fs[which].noted_at = now;
    k->checked_at = 0; /* look again at the next question */
}

int disk_check_write(struct disk *k, bool new_jobs, char **msg)
{
    return disk_look(k, new_jobs ? k->n : 1, msg) ? -1 : 0;
}

const char *disk_problem(struct disk *k)
{
    return k->full ? k->problem : NULL;
}

struct disk_flooder disk_flooder(struct disk *k)
{
    return k->full ? k->flooder : (struct disk_flooder){0};
}
