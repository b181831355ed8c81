/* Unit tests for the client's choice between the user's and the system socket
 * (client_choose_socket): a system socket that exists but cannot be reached is named,
 * not a per-user path that was never there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"

static char dir[] = "/tmp/gflow-test-client-XXXXXX";
static char user[128], sys_live[128], sys_stale[128], sys_locked[128], locked_dir[128];
static int listeners[2];

/* A listening socket at path (kept open), or with listen_too false a socket file that
 * nobody listens on any more. */
static int make_socket(const char *path, bool listen_too)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    if (!listen_too) {
        close(fd);
        return -1;
    }
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

static int setup(void **state)
{
    if (!mkdtemp(dir))
        return -1;
    chmod(dir, 0755);
    snprintf(user, sizeof(user), "%s/user.sock", dir);
    snprintf(sys_live, sizeof(sys_live), "%s/live.sock", dir);
    snprintf(sys_stale, sizeof(sys_stale), "%s/stale.sock", dir);
    snprintf(locked_dir, sizeof(locked_dir), "%s/locked", dir);
    snprintf(sys_locked, sizeof(sys_locked), "%s/locked/gflowd.sock", dir);
    mkdir(locked_dir, 0755);
    listeners[0] = make_socket(sys_live, true);
    listeners[1] = make_socket(sys_locked, true);
    make_socket(sys_stale, false);
    chmod(locked_dir, 0); /* as /run/gflow was when gflowd ran under umask 077 */
    return 0;
}

static int teardown(void **state)
{
    for (int i = 0; i < 2; i++)
        close(listeners[i]);
    chmod(locked_dir, 0755);
    unlink(sys_locked);
    rmdir(locked_dir);
    unlink(sys_live);
    unlink(sys_stale);
    unlink(user);
    rmdir(dir);
    return 0;
}

static void expect_choice(const char *u, const char *s, const char *want)
{
    char *got = client_choose_socket(u, s);
    assert_string_equal(got, want);
    free(got);
}

static void test_choice(void **state)
{
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/none/gflowd.sock", dir);
    /* Neither there: the user's own socket is named. */
    expect_choice(user, missing, user);
    /* A system daemon answers: it is used; a dead one's socket is still named. */
    expect_choice(user, sys_live, sys_live);
    expect_choice(user, sys_stale, sys_stale);
    /* The user's daemon answers: it wins. */
    int fd = make_socket(user, true);
    expect_choice(user, sys_live, user);
    close(fd);
    unlink(user);
}

/* A system socket in a directory this user may not enter is chosen (connecting then
 * fails with EACCES, which the error names) rather than a missing per-user socket.
 * As root, the check runs in a child that has become nobody (root passes any mode). */
static void test_unreachable_system_socket(void **state)
{
    if (geteuid() != 0) {
        expect_choice(user, sys_locked, sys_locked);
        return;
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) < 0 || setuid(65534) < 0)
            _exit(2);
        char *got = client_choose_socket(user, sys_locked);
        _exit(strcmp(got, sys_locked) == 0 ? 0 : 1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choice),
        cmocka_unit_test(test_unreachable_system_socket),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
