/* Unit tests of src/common/cgdelegate: finding gflowd's own cgroup v2 directory, and
 * moving gflowd into a leaf of a delegated cgroup, on a fake cgroup tree of plain files
 * (cgroup.controllers, cgroup.subtree_control, cgroup.procs) in a temp dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cgdelegate.h"
#include "files.h"
#include "util.h"

/* A uid that is not root, so that delegation means "writable" (the test's files are). */
#define USER_UID 4242
#define GFLOWD_PID 777

struct fixture {
    char root[64]; /* the fake cgroup2 mount */
    char *svc;     /* <root>/system.slice/gflowd.service */
};

static void put(const char *dir, const char *file, const char *text)
{
    char *path = xasprintf("%s/%s", dir, file);
    if (write_file(path, text, strlen(text), 0644) < 0)
        fail_msg("cannot write %s", path);
    free(path);
}

/* The contents of dir/file ("" when it is missing). */
static char *get(const char *dir, const char *file)
{
    char *path = xasprintf("%s/%s", dir, file);
    char *text = read_file(path, NULL);
    free(path);
    return text ? text : xstrdup("");
}

static void assert_file(const char *dir, const char *file, const char *expected)
{
    char *text = get(dir, file);
    assert_string_equal(text, expected);
    free(text);
}

/* A fake cgroup dir with the three files. */
static void make_cgroup(const char *dir, const char *controllers, const char *procs)
{
    if (mkdir_p(dir, 0755) < 0)
        fail_msg("cannot create %s", dir);
    put(dir, "cgroup.controllers", controllers);
    put(dir, "cgroup.subtree_control", "");
    put(dir, "cgroup.procs", procs);
}

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof(*f));
    snprintf(f->root, sizeof(f->root), "/tmp/test_cgdelegate.XXXXXX");
    if (!mkdtemp(f->root))
        return -1;
    f->svc = xasprintf("%s/system.slice/gflowd.service", f->root);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char *cmd = xasprintf("rm -rf '%s'", f->root);
    int rc = system(cmd);
    (void)rc;
    free(cmd);
    free(f->svc);
    free(f);
    return 0;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_own_dir_pure_v2(void **state)
{
    (void)state;
    const char *mi = "22 1 0:21 / /proc rw - proc proc rw\n"
                     "30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
    bool is_root = true;
    char *dir = cgdelegate_own_dir(mi, "0::/system.slice/gflowd.service\n", &is_root);
    assert_string_equal(dir, "/sys/fs/cgroup/system.slice/gflowd.service");
    assert_false(is_root);
    free(dir);
    dir = cgdelegate_own_dir(mi, "0::/\n", &is_root);
    assert_string_equal(dir, "/sys/fs/cgroup");
    assert_true(is_root);
    free(dir);
}

static void test_own_dir_hybrid_and_namespaced(void **state)
{
    (void)state;
    /* Hybrid: v1 controllers, the unified hierarchy beside them. */
    const char *hybrid = "31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                         "32 25 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
    bool is_root = false;
    char *dir = cgdelegate_own_dir(hybrid, "4:memory:/x\n0::/\n", &is_root);
    assert_string_equal(dir, "/sys/fs/cgroup/unified");
    assert_true(is_root);
    free(dir);
    /* A mount showing only a subtree, and a mount point with a space in it. */
    const char *sub = "40 1 0:30 /outer /mnt/cg\\040two rw - cgroup2 none rw\n";
    dir = cgdelegate_own_dir(sub, "0::/outer/a/b\n", &is_root);
    assert_string_equal(dir, "/mnt/cg two/a/b");
    assert_false(is_root);
    free(dir);
    assert_null(cgdelegate_own_dir(sub, "0::/elsewhere\n", &is_root));
    /* No cgroup2 mount, or no unified line. */
    assert_null(
        cgdelegate_own_dir("31 25 0:27 / /a rw - cgroup cgroup rw,memory\n", "0::/\n", &is_root));
    assert_null(cgdelegate_own_dir(hybrid, "4:memory:/x\n", &is_root));
}

static void test_moves_into_leaf_and_enables(void **state)
{
    struct fixture *f = *state;
    make_cgroup(f->svc, "cpu io memory pids\n", "777\n");
    struct cgdelegate d;
    char *why = NULL;
    assert_int_equal(cgdelegate_setup(f->svc, false, USER_UID, GFLOWD_PID, &d, &why), 1);
    assert_null(why);
    char *leaf = xasprintf("%s/gflowd", f->svc);
    assert_string_equal(d.service_dir, f->svc);
    assert_string_equal(d.leaf_dir, leaf);
    assert_true(d.moved);
    assert_string_equal(d.enabled, "memory pids");
    assert_file(leaf, "cgroup.procs", "777");
    assert_file(f->svc, "cgroup.subtree_control", "+memory +pids");
    /* At exit, the same controllers go off again. */
    assert_int_equal(cgdelegate_release(&d, &why), 0);
    assert_file(f->svc, "cgroup.subtree_control", "-memory -pids");
    cgdelegate_free(&d);
    free(leaf);
}

static void test_memory_only_without_pids(void **state)
{
    struct fixture *f = *state;
    make_cgroup(f->svc, "memory\n", "777\n");
    struct cgdelegate d;
    char *why = NULL;
    assert_int_equal(cgdelegate_setup(f->svc, false, USER_UID, GFLOWD_PID, &d, &why), 1);
    assert_string_equal(d.enabled, "memory");
    assert_file(f->svc, "cgroup.subtree_control", "+memory");
    cgdelegate_free(&d);
}

/* Each case where it does not apply leaves the tree as it was and says why. */
static void assert_not_used(const struct fixture *f, bool is_root, uid_t euid, const char *reason)
{
    struct cgdelegate d;
    char *why = NULL;
    assert_int_equal(cgdelegate_setup(f->svc, is_root, euid, GFLOWD_PID, &d, &why), 0);
    assert_non_null(why);
    if (!strstr(why, reason))
        fail_msg("'%s' does not say '%s'", why, reason);
    free(why);
    assert_null(d.service_dir);
    char *leaf = xasprintf("%s/gflowd", f->svc);
    assert_false(is_dir(leaf));
    free(leaf);
    assert_file(f->svc, "cgroup.subtree_control", "");
}

static void test_not_used_without_memory_or_shared_or_root(void **state)
{
    struct fixture *f = *state;
    make_cgroup(f->svc, "cpu pids\n", "777\n");
    assert_not_used(f, false, USER_UID, "memory controller is not available");
    make_cgroup(f->svc, "memory pids\n", "777\n1234\n");
    assert_not_used(f, false, USER_UID, "also holds process 1234");
    make_cgroup(f->svc, "memory pids\n", "777\n");
    assert_not_used(f, true, USER_UID, "root cgroup");
}

/* Root needs systemd's mark on the cgroup: a cgroup merely writable to root was not
 * given to it. */
static void test_root_needs_delegate_mark(void **state)
{
    struct fixture *f = *state;
    make_cgroup(f->svc, "memory pids\n", "777\n");
    assert_not_used(f, false, 0, "not marked as delegated");
    if (setxattr(f->svc, "user.delegate", "1", 1, 0) < 0) {
        print_message("skipped the marked half: user xattrs unsupported in /tmp (%s)\n",
                      strerror(errno));
        return;
    }
    struct cgdelegate d;
    char *why = NULL;
    assert_int_equal(cgdelegate_setup(f->svc, false, 0, GFLOWD_PID, &d, &why), 1);
    assert_true(d.moved);
    cgdelegate_free(&d);
}

static void test_not_writable_is_not_delegated(void **state)
{
    struct fixture *f = *state;
    if (geteuid() == 0) {
        print_message("skipped: run as root, which access() lets write anything\n");
        skip();
    }
    make_cgroup(f->svc, "memory pids\n", "777\n");
    char *procs = xasprintf("%s/cgroup.procs", f->svc);
    chmod(procs, 0444);
    assert_not_used(f, false, geteuid(), "not writable");
    chmod(procs, 0644);
    free(procs);
}

/* The kernel refuses +memory (here: cgroup.subtree_control cannot be written): gflowd
 * goes back where it was. (The leaf's rmdir cannot be seen here: on the fake tree the
 * move left a plain file in it.) */
static void test_failure_is_undone(void **state)
{
    struct fixture *f = *state;
    make_cgroup(f->svc, "memory pids\n", "777\n");
    char *ctl = xasprintf("%s/cgroup.subtree_control", f->svc);
    unlink(ctl);
    mkdir(ctl, 0755); /* open(O_WRONLY) fails: EISDIR */
    struct cgdelegate d;
    char *why = NULL;
    assert_int_equal(cgdelegate_setup(f->svc, false, USER_UID, GFLOWD_PID, &d, &why), -1);
    assert_non_null(strstr(why, "cannot enable the memory controller"));
    free(why);
    assert_null(d.service_dir);
    assert_file(f->svc, "cgroup.procs", "777");
    free(ctl);
}

/* systemd put gflowd into <service>/gflowd itself (DelegateSubgroup=gflowd): the parent
 * is the service cgroup, and nothing is given back at exit. */
static void test_already_in_leaf(void **state)
{
    struct fixture *f = *state;
    make_cgroup(f->svc, "memory pids\n", "");
    char *leaf = xasprintf("%s/gflowd", f->svc);
    make_cgroup(leaf, "memory pids\n", "777\n");
    struct cgdelegate d;
    char *why = NULL;
    assert_int_equal(cgdelegate_setup(leaf, false, USER_UID, GFLOWD_PID, &d, &why), 1);
    assert_string_equal(d.service_dir, f->svc);
    assert_string_equal(d.leaf_dir, leaf);
    assert_false(d.moved);
    assert_file(f->svc, "cgroup.subtree_control", "+memory +pids");
    assert_file(leaf, "cgroup.procs", "777\n");
    put(f->svc, "cgroup.subtree_control", "memory pids\n");
    assert_int_equal(cgdelegate_release(&d, &why), 0);
    assert_file(f->svc, "cgroup.subtree_control", "memory pids\n");
    cgdelegate_free(&d);
    free(leaf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_dir_pure_v2),
        cmocka_unit_test(test_own_dir_hybrid_and_namespaced),
        cmocka_unit_test_setup_teardown(test_moves_into_leaf_and_enables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_only_without_pids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_used_without_memory_or_shared_or_root, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_root_needs_delegate_mark, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_writable_is_not_delegated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_is_undone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_already_in_leaf, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
