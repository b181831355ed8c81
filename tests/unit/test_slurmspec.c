/* test_slurmspec: a gflow job in Slurm's terms and back (src/core/slurmspec.c): the sbatch
 * options of a job with every mapped field, the site's options, the batch script of a
 * command, a script and a conda job, what is refused, the environment left out, sbatch's
 * answer, `scontrol show job -o` lines, the comment tag, and the state table. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "slurmspec.h"

static bool has_arg(const struct strvec *v, const char *arg)
{
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->v[i], arg) == 0)
            return true;
    return false;
}

static void test_sbatch_args_of_a_full_job(void **state)
{
    (void)state;
    struct job j;
    job_init(&j);
    j.id = 42;
    j.name = strdup("train");
    j.workdir = strdup("/home/a/run");
    j.gpus = 2;
    j.time_limit = 3 * 3600 + 5 * 60 + 7;
    j.memory_mb = 4096;
    j.warn_signal = SIGUSR1;
    j.warn_secs = 90;
    j.warn_main_only = true;
    j.uid = 1001;
    j.gid = 1002;
    struct slurm_site site = {.partition = "gpu",
                              .account = "lab",
                              .qos = "",
                              .sbatch_args = " --nodes=1  --constraint=a100 ",
                              .tag = "abc"};
    struct strvec v;
    strvec_init(&v);
    slurmspec_sbatch_args(&j, &site, "/data/logs/42.log", true, &v);
    const char *want[] = {"--parsable",
                          "--job-name=train",
                          "--comment=gflow:abc:42",
                          "--chdir=/home/a/run",
                          "--output=/data/logs/42.log",
                          "--error=/data/logs/42.log",
                          "--open-mode=append",
                          "--export=ALL",
                          "--gres=gpu:2",
                          "--time=3:05:07",
                          "--mem=4096M",
                          "--signal=B:10@90",
                          "--uid=1001",
                          "--gid=1002",
                          "--partition=gpu",
                          "--account=lab",
                          "--nodes=1",
                          "--constraint=a100"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_true(has_arg(&v, want[i]));
    for (size_t i = 0; i < v.n; i++) { /* an empty qos gives no option, no empty word */
        assert_null(strstr(v.v[i], "--qos"));
        assert_true(v.v[i][0] != '\0');
    }
    strvec_free(&v);
    job_clear(&j);
}

static void test_minimal_job_asks_no_gpus_or_time(void **state)
{
    (void)state;
    struct job j;
    job_init(&j);
    j.id = 1;
    struct slurm_site site = {.tag = "t"};
    struct strvec v;
    strvec_init(&v);
    slurmspec_sbatch_args(&j, &site, "/l/1.log", false, &v);
    assert_true(has_arg(&v, "--job-name=gflow"));
    for (size_t i = 0; i < v.n; i++) {
        assert_null(strstr(v.v[i], "--gres"));
        assert_null(strstr(v.v[i], "--time"));
        assert_null(strstr(v.v[i], "--uid"));
    }
    strvec_free(&v);
}

static void test_batch_scripts(void **state)
{
    (void)state;
    struct job j;
    job_init(&j);
    j.command = strdup("python train.py --lr 0.1");
    char *s = slurmspec_batch_script(&j);
    assert_string_equal(s, "#!/bin/bash\npython train.py --lr 0.1\n");
    free(s);
    j.conda_env = strdup("it's");
    s = slurmspec_batch_script(&j);
    assert_string_equal(s, "#!/bin/bash\neval \"$(conda shell.bash hook)\" && conda activate "
                           "'it'\\''s' || exit 1\npython train.py --lr 0.1\n");
    free(s);
    free(j.command);
    j.command = NULL;
    j.script = strdup("#!/bin/sh\n# GFLOW --gpus 1\necho hi");
    s = slurmspec_batch_script(&j);
    assert_string_equal(s, "#!/bin/sh\neval \"$(conda shell.bash hook)\" && conda activate "
                           "'it'\\''s' || exit 1\n# GFLOW --gpus 1\necho hi\n");
    free(s);
    free(j.conda_env);
    j.conda_env = NULL;
    s = slurmspec_batch_script(&j);
    assert_string_equal(s, "#!/bin/sh\n# GFLOW --gpus 1\necho hi\n");
    free(s);
    job_clear(&j);
}

static void test_refusals(void **state)
{
    (void)state;
    struct job j;
    job_init(&j);
    j.command = strdup("true");
    assert_null(slurmspec_refusal(&j));
    j.gpu_memory_mb = 1000;
    char *why = slurmspec_refusal(&j);
    assert_non_null(why);
    assert_non_null(strstr(why, "--gpu-memory"));
    free(why);
    j.gpu_memory_mb = 0;
    j.pty = true;
    why = slurmspec_refusal(&j);
    assert_non_null(strstr(why, "--pty"));
    free(why);
    j.pty = false;
    free(j.command);
    j.command = NULL;
    j.script = strdup("#!/usr/bin/env python3\nprint(1)\n");
    j.conda_env = strdup("torch");
    why = slurmspec_refusal(&j);
    assert_non_null(strstr(why, "--conda-env"));
    free(why);
    job_clear(&j);
}

static void test_local_gpu_variables_are_left_out(void **state)
{
    (void)state;
    assert_true(slurmspec_env_is_local_gpu("CUDA_VISIBLE_DEVICES=0,1"));
    assert_true(slurmspec_env_is_local_gpu("GFLOW_GPU_UUIDS="));
    assert_true(slurmspec_env_is_local_gpu("NVIDIA_VISIBLE_DEVICES=none"));
    assert_false(slurmspec_env_is_local_gpu("CUDA_HOME=/usr/local/cuda"));
    assert_false(slurmspec_env_is_local_gpu("GFLOW_JOB_ID=3"));
}

static void test_sbatch_answer(void **state)
{
    (void)state;
    assert_int_equal(slurmspec_parse_sbatch("123\n"), 123);
    assert_int_equal(slurmspec_parse_sbatch("77;cluster2\n"), 77);
    assert_int_equal(slurmspec_parse_sbatch("sbatch: error: Batch job submission failed"), -1);
    assert_int_equal(slurmspec_parse_sbatch(""), -1);
    assert_int_equal(slurmspec_parse_sbatch("12abc"), -1);
}

static void test_scontrol_line_and_comment_tag(void **state)
{
    (void)state;
    const char *line = "JobId=17 JobName=train UserId=root(0) Priority=1 Reason=None "
                       "Dependency=(null) JobState=FAILED ExitCode=3:0 Comment=gflow:abc:42 "
                       "StdOut=/x";
    struct slurm_job_info s;
    assert_int_equal(slurmspec_parse_job_line(line, &s), 0);
    assert_int_equal(s.slurm_id, 17);
    assert_string_equal(s.state, "FAILED");
    assert_string_equal(s.reason, "None");
    assert_int_equal(s.exit_code, 3);
    assert_int_equal(s.exit_signal, 0);
    assert_int_equal(slurmspec_comment_id(s.comment, "abc"), 42);
    assert_int_equal(slurmspec_comment_id(s.comment, "ab"), 0);   /* another daemon's */
    assert_int_equal(slurmspec_comment_id(s.comment, "abcd"), 0); /* another daemon's */
    assert_int_equal(slurmspec_comment_id("gflow:abc:4x", "abc"), 0);
    assert_int_equal(slurmspec_comment_id("", "abc"), 0);
    assert_int_equal(slurmspec_parse_job_line("No jobs in the system", &s), -1);
    /* The tag is stable and differs by data directory. */
    char *a = slurmspec_daemon_tag("vm", "/d1"), *a2 = slurmspec_daemon_tag("vm", "/d1");
    char *b = slurmspec_daemon_tag("vm", "/d2");
    assert_string_equal(a, a2);
    assert_string_not_equal(a, b);
    assert_null(strpbrk(a, ": "));
    free(a);
    free(a2);
    free(b);
}

/* A pending job's reason, a running one's start, sacct's lines and the nice mapping. */
static void test_pending_sacct_and_nice(void **state)
{
    (void)state;
    struct slurm_job_info s;
    assert_int_equal(slurmspec_parse_job_line("JobId=5 JobName=x JobState=PENDING "
                                              "Reason=Resources StartTime=2030-01-01T00:00:00 "
                                              "EndTime=Unknown Comment=gflow:t:1",
                                              &s),
                     0);
    assert_true(slurmspec_pending(&s));
    assert_string_equal(s.reason, "Resources");
    assert_true(s.start_time == 0); /* a pending job's StartTime is only a plan */
    assert_int_equal(
        slurmspec_parse_job_line("JobId=6 JobState=RUNNING Reason=None "
                                 "StartTime=2026-12-02T08:50:00 EndTime=2027-01-01T00:00:00",
                                 &s),
        0);
    assert_false(slurmspec_pending(&s));
    assert_true(s.start_time > 1.7e9);
    assert_true(s.end_time == 0); /* not ended: EndTime is the limit's */
    assert_int_equal(slurmspec_parse_job_line("JobId=7 JobState=COMPLETED Reason=None "
                                              "StartTime=2026-12-02T08:50:00 "
                                              "EndTime=2026-12-02T08:50:09",
                                              &s),
                     0);
    assert_true(s.end_time - s.start_time == 9);
    assert_int_equal(slurmspec_parse_sacct_line("41|CANCELLED by 0|0:15|None", &s), 0);
    assert_int_equal(s.slurm_id, 41);
    assert_string_equal(s.state, "CANCELLED");
    assert_int_equal(s.exit_signal, 15);
    assert_int_equal(slurmspec_parse_sacct_line("42|FAILED|3:0|NonZeroExitCode", &s), 0);
    assert_int_equal(s.exit_code, 3);
    assert_string_equal(s.reason, "NonZeroExitCode");
    assert_int_equal(slurmspec_parse_sacct_line("42.batch|FAILED|3:0|None", &s), -1);
    assert_int_equal(slurmspec_parse_sacct_line("", &s), -1);
    assert_int_equal(slurmspec_nice(JOB_PRIORITY_DEFAULT), 0);
    assert_int_equal(slurmspec_nice(200), 0);
    assert_int_equal(slurmspec_nice(5), 500);
    assert_int_equal(slurmspec_nice(0), 1000);
}

/* --dependency: all (",") or any ("?"), and whether Slurm cancels the job on a failure. */
static void test_dependency_args(void **state)
{
    (void)state;
    struct strvec v;
    strvec_init(&v);
    slurmspec_dependency_args(NULL, 0, false, true, &v);
    assert_int_equal(v.n, 0);
    struct slurm_dep deps[] = {{"afterok", 12}, {"afternotok", 13}};
    slurmspec_dependency_args(deps, 2, false, true, &v);
    assert_int_equal(v.n, 2);
    assert_string_equal(v.v[0], "--dependency=afterok:12,afternotok:13");
    assert_string_equal(v.v[1], "--kill-on-invalid-dep=yes");
    strvec_free(&v);
    strvec_init(&v);
    slurmspec_dependency_args(deps, 2, true, false, &v);
    assert_string_equal(v.v[0], "--dependency=afterok:12?afternotok:13");
    assert_string_equal(v.v[1], "--kill-on-invalid-dep=no");
    strvec_free(&v);
}

static void test_state_table(void **state)
{
    (void)state;
    struct slurm_job_info s = {0};
    enum job_state st;
    enum job_reason r;
    const char *detail;
    static const char *const active[] = {"PENDING",     "RUNNING",   "COMPLETING",
                                         "CONFIGURING", "SUSPENDED", "REQUEUED"};
    for (size_t i = 0; i < sizeof(active) / sizeof(active[0]); i++) {
        strcpy(s.state, active[i]);
        assert_false(slurmspec_ended(&s, false, &st, &r, &detail));
    }
    struct {
        const char *slurm;
        int sig;
        bool cancel;
        enum job_state st;
        enum job_reason r;
    } cases[] = {
        {"COMPLETED", 0, false, JOB_FINISHED, JOB_REASON_NONE},
        {"FAILED", 0, false, JOB_FAILED, JOB_REASON_NON_ZERO_EXIT},
        {"FAILED", 9, false, JOB_FAILED, JOB_REASON_SIGNAL},
        {"OUT_OF_MEMORY", 0, false, JOB_FAILED, JOB_REASON_OUT_OF_MEMORY},
        {"TIMEOUT", 0, false, JOB_TIMEOUT, JOB_REASON_TIME_LIMIT},
        {"CANCELLED", 0, true, JOB_CANCELLED, JOB_REASON_CANCELLED_BY_USER},
        {"CANCELLED", 0, false, JOB_CANCELLED, JOB_REASON_OTHER},
        {"NODE_FAIL", 0, false, JOB_FAILED, JOB_REASON_OTHER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        strcpy(s.state, cases[i].slurm);
        s.exit_signal = cases[i].sig;
        assert_true(slurmspec_ended(&s, cases[i].cancel, &st, &r, &detail));
        assert_int_equal(st, cases[i].st);
        assert_int_equal(r, cases[i].r);
        if (r == JOB_REASON_OTHER)
            assert_non_null(detail);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sbatch_args_of_a_full_job),
        cmocka_unit_test(test_minimal_job_asks_no_gpus_or_time),
        cmocka_unit_test(test_batch_scripts),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_local_gpu_variables_are_left_out),
        cmocka_unit_test(test_sbatch_answer),
        cmocka_unit_test(test_scontrol_line_and_comment_tag),
        cmocka_unit_test(test_pending_sacct_and_nice),
        cmocka_unit_test(test_dependency_args),
        cmocka_unit_test(test_state_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
