/* Unit tests of src/common/prockill: a process is signalled only while it is the one
 * named by pid and start time; a cgroup's members are all signalled (cgroup.kill on v2,
 * one by one otherwise) and its emptiness is seen. The cgroup tests make a cgroup below
 * this test's own and are skipped where that cannot be done (not root, no hierarchy). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "files.h"
#include "procinfo.h"
#include "prockill.h"
#include "util.h"

/* A child that waits to be killed (joining the cgroup at procs first, if given). */
static pid_t spawn_sleeper(const char *procs)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (procs && write_file(procs, "0", 1, 0644) < 0)
            _exit(3);
        for (;;)
            pause();
    }
    return pid;
}

/* Waits for pid and returns the signal that ended it (0: it exited). */
static int reap(pid_t pid)
{
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_pid_only_while_it_is_the_same_process(void **state)
{
    (void)state;
    pid_t pid = spawn_sleeper(NULL);
    int64_t start = proc_start_time(pid);
    assert_true(start > 0);
    /* Another start time: the pid stands for another process now. Nothing is sent. */
    assert_int_equal(prockill_pid(pid, start + 1, SIGKILL), 0);
    assert_int_equal(kill(pid, 0), 0);
    assert_int_equal(prockill_pid(pid, start, SIGTERM), 1);
    assert_int_equal(reap(pid), SIGTERM);
    /* Gone (reaped): nothing to signal, and no error. */
    assert_int_equal(prockill_pid(pid, start, SIGKILL), 0);
}

static void test_procs_are_counted_once(void **state)
{
    (void)state;
    struct prockill_procs p = {0};
    prockill_procs_add(&p, 10, 100);
    prockill_procs_add(&p, 10, 100);
    prockill_procs_add(&p, 10, 101); /* the same pid, another process */
    for (int i = 0; i < 40; i++)
        prockill_procs_add(&p, 20 + i, 5);
    assert_int_equal(p.n, 42);
    prockill_procs_free(&p);
    assert_int_equal(p.n, 0);
}

static void test_not_a_cgroup(void **state)
{
    (void)state;
    assert_int_equal(prockill_cgroup_version("/"), -1);
    assert_int_equal(errno, ENOTDIR);
    assert_int_equal(prockill_cgroup_version("/nonexistent/gflow"), -1);
    assert_int_equal(errno, ENOENT);
    /* A cgroup that is gone holds nothing, and killing it finds nothing. */
    assert_int_equal(prockill_cgroup_populated("/nonexistent/gflow"), 0);
    assert_int_equal(prockill_cgroup("/nonexistent/gflow", SIGKILL, NULL), 0);
}

/* The directory of this process's cgroup in the hierarchy mounted with fstype (and
 * super option opt, for v1), or NULL. */
static char *own_cgroup_dir(const char *fstype, const char *opt)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096], point[1024] = "", root[1024] = "";
    while (f && fgets(line, sizeof(line), f)) {
        char *sep = strstr(line, " - ");
        char fs[64], src[256], super[1024];
        if (!sep || sscanf(sep + 3, "%63s %255s %1023s", fs, src, super) != 3 ||
            strcmp(fs, fstype) != 0 || (opt && !strstr(super, opt)))
            continue;
        sscanf(line, "%*s %*s %*s %1023s %1023s", root, point);
        break;
    }
    if (f)
        fclose(f);
    if (!*point)
        return NULL;
    f = fopen("/proc/self/cgroup", "re");
    char *dir = NULL;
    while (f && !dir && fgets(line, sizeof(line), f)) {
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *b++ = '\0';
        b[strcspn(b, "\n")] = '\0';
        bool match = opt ? strstr(a + 1, opt) != NULL : (line[0] == '0' && a[1] == '\0');
        if (!match)
            continue;
        const char *rel = strcmp(root, "/") == 0 ? b : b + strlen(root);
        dir = xasprintf("%s%s", point, strcmp(rel, "/") == 0 ? "" : rel);
    }
    if (f)
        fclose(f);
    return dir;
}

/* Makes a cgroup below this test's own (fstype, opt as own_cgroup_dir), or skips. */
static char *make_cgroup(const char *fstype, const char *opt)
{
    if (geteuid() != 0)
        skip();
    char *base = own_cgroup_dir(fstype, opt);
    if (!base)
        skip();
    char *dir = xasprintf("%s/gflow-unit-%ld", base, (long)getpid());
    free(base);
    rmdir(dir);
    if (mkdir(dir, 0755) < 0) {
        free(dir);
        skip();
    }
    return dir;
}

static void wait_members(const char *dir, ssize_t n)
{
    for (int i = 0; i < 500; i++) {
        pid_t *pids;
        ssize_t m = prockill_cgroup_members(dir, &pids);
        free(pids);
        if (m == n)
            return;
        sleep_ms(10);
    }
    fail_msg("%s never had %zd members", dir, n);
}

static void remove_cgroup(char *dir)
{
    for (int i = 0; i < 200 && rmdir(dir) < 0 && errno == EBUSY; i++)
        sleep_ms(10);
    free(dir);
}

/* Two members: a signal other than SIGKILL reaches each through a pidfd; SIGKILL takes
 * the whole cgroup (cgroup.kill on v2); then it is empty. */
static void check_cgroup(char *dir, int version)
{
    char *procs = xasprintf("%s/cgroup.procs", dir);
    pid_t a = spawn_sleeper(procs), b = spawn_sleeper(procs);
    free(procs);
    wait_members(dir, 2);
    assert_int_equal(prockill_cgroup_version(dir), version);
    assert_int_equal(prockill_cgroup_populated(dir), 1);
    struct prockill_procs hit = {0};
    assert_int_equal(prockill_cgroup(dir, SIGTERM, &hit), 2);
    assert_int_equal(hit.n, 2);
    assert_int_equal(reap(a), SIGTERM);
    assert_int_equal(reap(b), SIGTERM);
    prockill_procs_free(&hit);

    procs = xasprintf("%s/cgroup.procs", dir);
    a = spawn_sleeper(procs);
    free(procs);
    wait_members(dir, 1);
    int64_t start = proc_start_time(a);
    assert_int_equal(prockill_cgroup(dir, SIGKILL, &hit), 1);
    assert_int_equal(hit.n, 1);
    assert_int_equal(hit.v[0].pid, a);
    assert_true(hit.v[0].start == start);
    assert_int_equal(reap(a), SIGKILL);
    assert_int_equal(prockill_cgroup_populated(dir), 0);
    assert_int_equal(prockill_cgroup(dir, SIGKILL, &hit), 0);
    prockill_procs_free(&hit);
    remove_cgroup(dir);
}

static void test_cgroup_v2(void **state)
{
    (void)state;
    check_cgroup(make_cgroup("cgroup2", NULL), 2);
}

static void test_cgroup_v1_freezer(void **state)
{
    (void)state;
    check_cgroup(make_cgroup("cgroup", "freezer"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pid_only_while_it_is_the_same_process),
        cmocka_unit_test(test_procs_are_counted_once),
        cmocka_unit_test(test_not_a_cgroup),
        cmocka_unit_test(test_cgroup_v2),
        cmocka_unit_test(test_cgroup_v1_freezer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
