/* Unit tests of src/core/jobcgroup: the gflow job named by a process's /proc/PID/cgroup,
 * in the names gflow-shim gives its job cgroups (src/shim/jobcg.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "jobcgroup.h"

static void test_v2_job_cgroup(void **state)
{
    (void)state;
    struct jobcgroup_ref r[4];
    assert_int_equal(jobcgroup_find("0::/user.slice/session-3.scope/gflow-job-42.9876\n", r, 4), 1);
    assert_int_equal(r[0].job_id, 42);
    assert_int_equal(r[0].shim_pid, 9876);
    /* A cgroup the job made below its own is still the job's. */
    assert_int_equal(jobcgroup_find("0::/gflow-job-7.100/inner/deeper", r, 4), 1);
    assert_int_equal(r[0].job_id, 7);
    assert_int_equal(r[0].shim_pid, 100);
}

static void test_v1_freezer_job_cgroup(void **state)
{
    (void)state;
    struct jobcgroup_ref r[4];
    const char *text = "12:pids:/\n"
                       "6:freezer:/docker/abc/gflow/job-5.321\n"
                       "5:devices:/gflow/job-5\n"
                       "1:name=systemd:/\n"
                       "0::/\n";
    assert_int_equal(jobcgroup_find(text, r, 4), 1);
    assert_int_equal(r[0].job_id, 5);
    assert_int_equal(r[0].shim_pid, 321);
}

static void test_same_job_in_two_hierarchies_counts_once(void **state)
{
    (void)state;
    struct jobcgroup_ref r[4];
    const char *text = "6:freezer:/gflow/job-9.55\n0::/gflow-job-9.55\n";
    assert_int_equal(jobcgroup_find(text, r, 4), 1);
    assert_int_equal(r[0].job_id, 9);
}

static void test_other_cgroups_name_no_job(void **state)
{
    (void)state;
    struct jobcgroup_ref r[4];
    const char *none[] = {
        "0::/\n",
        "0::/system.slice/docker-0123.scope\n",
        "0::/gflow-job-12\n",     /* no shim pid */
        "0::/gflow-job-.5\n",     /* no job id */
        "0::/gflow-job-3.1\n",    /* pid 1 is no shim */
        "0::/xgflow-job-3.44\n",  /* not the whole name */
        "0::/gflow-job-3.44x\n",  /* trailing garbage */
        "6:freezer:/job-5.321\n", /* v1 job cgroups live under gflow/ */
        "6:freezer:/notgflow/job-5.321\n",
        "5:devices:/gflow/job-5\n", /* the devices cgroup of constrain_devices */
        "garbage without colons\n",
        "",
    };
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        if (jobcgroup_find(none[i], r, 4) != 0)
            fail_msg("'%s' named job %lld", none[i], (long long)r[0].job_id);
    }
}

static void test_paths_with_colons_and_the_limit(void **state)
{
    (void)state;
    struct jobcgroup_ref r[1];
    assert_int_equal(jobcgroup_find("0::/a:b/gflow-job-8.77", r, 1), 1);
    assert_int_equal(r[0].job_id, 8);
    assert_int_equal(jobcgroup_find("0::/gflow-job-8.77\n6:freezer:/gflow/job-9.78\n", r, 1), 1);
    assert_int_equal(jobcgroup_find("0::/gflow-job-8.77", r, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v2_job_cgroup),
        cmocka_unit_test(test_v1_freezer_job_cgroup),
        cmocka_unit_test(test_same_job_in_two_hierarchies_counts_once),
        cmocka_unit_test(test_other_cgroups_name_no_job),
        cmocka_unit_test(test_paths_with_colons_and_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
