/* test_jobspec: job specs checked into jobs (src/core/jobspec.c) with the machine's
 * limits as parameters: defaults, every kind of refusal, whole submissions (batches,
 * arrays, sweeps, groups), a stored job rebuilt as a spec, merged with changes and
 * compared; and the environment a job sees (src/core/jobenv.c). */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "jobenv.h"
#include "jobspec.h"
#include "util.h"

/* A machine with 2 GPUs of 80 GiB and 1000 MiB of memory. */
static struct gpu_info two_gpus[2] = {
    {.index = 0, .memory_total_mib = 81920, .memory_used_mib = 0},
    {.index = 1, .memory_total_mib = 81920, .memory_used_mib = 0},
};
static const struct gpu_set machine_gpus = {.gpus = two_gpus, .n_gpus = 2};
static const struct jobspec_limits lim = {
    .memory_total_mb = 1000, .gpus = &machine_gpus, .visible = 0x3};
static const struct jobspec_owner bob = {.user = "bob", .uid = 1001, .gid = 100, .now = 1e9};

/* The job of a spec given as JSON text, or NULL with *err. */
static struct job *job_of(const char *text, char **err)
{
    json_error_t jerr;
    json_t *spec = json_loads(text, 0, &jerr);
    if (!spec)
        fail_msg("bad test JSON: %s", jerr.text);
    bool dry = false;
    struct job *j = jobspec_to_job(spec, &lim, &bob, &dry, err);
    json_decref(spec);
    return j;
}

/* The spec's refusal, which must contain want. */
static void refused(const char *text, const char *want)
{
    char *err = NULL;
    struct job *j = job_of(text, &err);
    if (j)
        fail_msg("accepted: %s", text);
    if (!err || !strstr(err, want))
        fail_msg("%s: got '%s', want '%s'", text, err ? err : "(none)", want);
    free(err);
}

static void test_defaults(void **state)
{
    (void)state;
    char *err = NULL;
    struct job *j =
        job_of("{\"command\": \"  /usr/bin/python train.py\", \"workdir\": \"/w\"}", &err);
    assert_non_null(j);
    assert_null(j->name); /* none given: the daemon's gjob-<id>, once it has the id */
    j->id = 7;
    job_name_default(j);
    assert_string_equal(j->name, "gjob-7");
    assert_string_equal(j->command, "  /usr/bin/python train.py");
    assert_int_equal(j->priority, JOB_PRIORITY_DEFAULT);
    assert_int_equal(j->state, JOB_QUEUED);
    assert_true(j->auto_cancel);
    assert_string_equal(j->user, "bob");
    assert_int_equal(j->uid, 1001);
    assert_int_equal(j->gid, 100);
    assert_true(j->submit_time == 1e9);
    assert_true(json_is_object(j->env));
    job_free(j);

    j = job_of("{\"script\": \"echo\", \"script_path\": \"/a/b/run.sh\", \"workdir\": \"/w\", "
               "\"hold\": true, \"gpus\": 2, \"gpu_memory_mb\": 1000, \"shared\": true, "
               "\"time_limit\": 60, \"signal_spec\": \"B:USR1@10\", \"memory_mb\": 1000, "
               "\"depends_on\": [3, {\"id\": 3}, {\"id\": 4, \"kind\": \"afterany\"}], "
               "\"depends_mode\": \"any\", \"auto_cancel\": false}",
               &err);
    assert_non_null(j);
    assert_null(j->name);
    assert_int_equal(j->state, JOB_HELD);
    assert_int_equal(j->reason, JOB_REASON_HELD_BY_USER);
    assert_true(j->shared);
    assert_int_equal(j->warn_signal, 10); /* SIGUSR1 */
    assert_int_equal(j->warn_secs, 10);
    assert_true(j->warn_main_only);
    assert_int_equal(j->n_deps, 2); /* the same (id, kind) once */
    assert_true(j->deps_any);
    assert_false(j->auto_cancel);
    job_free(j);

    j = job_of("{\"script\": \"echo\", \"workdir\": \"/w\"}", &err);
    assert_null(j->name);
    assert_string_equal(j->script_path, "-");
    job_free(j);
}

/* A name gflow makes up is always a valid name, so that gjob update and redo (which
 * check the stored job's spec again) accept the job (found by tests/fuzz/fuzz_jobspec):
 * gjob-<id>, and NAME_<task> cut to fit. A job's spec carries its own default name no
 * further (a redo, a new id, gets its own), a name it was given it does. */
static void test_default_name_valid(void **state)
{
    (void)state;
    char *err = NULL;
    char *def = job_default_name(INT64_MAX);
    assert_true(job_name_valid(def));
    assert_true(job_name_is_default(def, INT64_MAX));
    assert_false(job_name_is_default(def, 1));
    assert_false(job_name_is_default(NULL, 1));
    free(def);

    struct strbuf name;
    strbuf_init(&name);
    for (int i = 0; i < 300; i++)
        strbuf_adds(&name, i % 2 ? "x" : "\u00e9"); /* 2-byte UTF-8 sequences */
    char *fit = job_name_fit(name.buf, "_12");
    assert_true(job_name_valid(fit));
    assert_true(strlen(fit) >= JOB_NAME_MAX - 1);
    assert_int_equal(strncmp(fit, "\xc3\xa9x", 3), 0);
    assert_string_equal(fit + strlen(fit) - 3, "_12");
    assert_int_not_equal((unsigned char)fit[strlen(fit) - 4], 0xc3); /* not cut in two */
    free(fit);
    strbuf_free(&name);

    struct job *j = job_of("{\"command\": \"x\", \"workdir\": \"/w\"}", &err);
    j->id = 5;
    job_name_default(j);
    json_t *spec = jobspec_from_job(j);
    assert_null(json_object_get(spec, "name"));
    json_decref(spec);
    free(j->name);
    j->name = xstrdup("gjob-4"); /* another job's default: a name like any */
    spec = jobspec_from_job(j);
    bool dry = false;
    struct job *again = jobspec_to_job(spec, &lim, &bob, &dry, &err);
    assert_non_null(again);
    assert_string_equal(again->name, "gjob-4");
    job_free(again);
    json_decref(spec);
    job_free(j);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("[]", "must be a JSON object");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"colour\": 1}", "unknown field 'colour'");
    refused("{\"command\": \"x\", \"script\": \"y\", \"workdir\": \"/w\"}", "exactly one of");
    refused("{\"workdir\": \"/w\"}", "exactly one of");
    refused("{\"command\": \"\", \"workdir\": \"/w\"}", "the command is empty");
    refused("{\"command\": \"x\", \"workdir\": \"rel\"}", "absolute directory");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"env\": {\"A\": 1}}", "env: 'A'");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"priority\": 256}", "0 to 255");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"time_limit\": -1}", "'time_limit'");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"name\": \"a\\nb\"}", "invalid job name");
    /* What this machine cannot give. */
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"memory_mb\": 2000}",
            "--memory asks for 2000 MiB but this machine has 1000 MiB");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"gpus\": 3}",
            "requests 3 GPUs but this machine has 2");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"gpus\": 1, \"gpu_memory_mb\": 90000}",
            "90000");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"gpus\": 65}", "'gpus' (0 to 64)");
    /* Options that need others. */
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"shared\": true}",
            "--shared needs --gpus N");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"gpus\": 1, \"shared\": true}",
            "--shared needs --gpu-memory");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"signal_spec\": \"USR1\"}",
            "--signal needs --time");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"time_limit\": 9, \"signal_spec\": "
            "\"NOPE\"}",
            "NOPE");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"depends_on\": [0]}", "depends_on");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"depends_on\": [{\"id\": 1, \"x\": 1}]}",
            "unknown field 'x'");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"depends_mode\": \"some\"}",
            "\"all\" or \"any\"");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"max_retries\": 1001}", "0 to 1000");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"conda_env\": \"a\\tb\"}", "conda_env");
    /* A umask is octal text, at most 0777. */
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"umask\": 18}", "'umask'");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"umask\": \"0800\"}", "'umask'");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"umask\": \"1000\"}", "'umask'");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"umask\": \"\"}", "'umask'");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"umask\": \"00022\"}", "'umask'");
}

/* The submitter's umask travels with the job; without one it is -1 (gflowd's 0077). */
static void test_umask(void **state)
{
    (void)state;
    char *err = NULL;
    struct job *j = job_of("{\"command\": \"x\", \"workdir\": \"/w\", \"umask\": \"022\"}", &err);
    assert_non_null(j);
    assert_int_equal(j->umask, 022);
    json_t *spec = jobspec_from_job(j);
    assert_string_equal(json_string_value(json_object_get(spec, "umask")), "0022");
    json_t *o = job_to_json(j, false, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "umask")), "0022");
    struct job back;
    assert_int_equal(job_from_json(o, &back), 0);
    assert_int_equal(back.umask, 022);
    job_clear(&back);
    json_decref(o);
    json_decref(spec);
    job_free(j);
    j = job_of("{\"command\": \"x\", \"workdir\": \"/w\", \"umask\": \"0\"}", &err);
    assert_int_equal(j->umask, 0);
    job_free(j);
    j = job_of("{\"command\": \"x\", \"workdir\": \"/w\", \"umask\": null}", &err);
    assert_int_equal(j->umask, -1);
    spec = jobspec_from_job(j);
    assert_null(json_object_get(spec, "umask"));
    o = job_to_json(j, false, NULL);
    assert_true(json_is_null(json_object_get(o, "umask")));
    json_decref(o);
    json_decref(spec);
    job_free(j);
}

/* gflow's bookkeeping fields: checked, stored, round-tripped through the API's JSON and
 * back into a spec (redo). */
static void test_bookkeeping(void **state)
{
    (void)state;
    char *err = NULL;
    struct job *j = job_of("{\"command\": \"x\", \"workdir\": \"/w\", \"project\": \"  ml \", "
                           "\"nice\": 5, \"notify_email\": \"a@x.org,b@y.org\", "
                           "\"notify_on\": [\"job_failed\", \"job_held\"], \"auto_close\": true}",
                           &err);
    assert_non_null(j);
    assert_string_equal(j->project, "ml");
    assert_int_equal(j->nice, 5);
    assert_string_equal(j->notify_email, "a@x.org,b@y.org");
    assert_string_equal(j->notify_on, "job_failed,job_held");
    assert_true(j->auto_close);
    json_t *o = job_to_json(j, false, NULL);
    json_t *events = json_object_get(o, "notify_on");
    assert_int_equal(json_array_size(events), 2);
    assert_string_equal(json_string_value(json_array_get(events, 1)), "job_held");
    struct job back;
    assert_int_equal(job_from_json(o, &back), 0);
    assert_string_equal(back.notify_on, "job_failed,job_held");
    assert_string_equal(back.project, "ml");
    job_clear(&back);
    json_t *spec = jobspec_from_job(j);
    char *text = json_dumps(spec, 0);
    struct job *again = job_of(text, &err);
    free(text);
    assert_non_null(again);
    assert_string_equal(again->notify_on, "job_failed,job_held");
    assert_true(again->auto_close);
    job_free(again);
    json_decref(spec);
    json_decref(o);
    job_free(j);
    /* Defaults: nothing; an address alone gets gflow's default events; blank project. */
    j = job_of("{\"command\": \"x\", \"workdir\": \"/w\", \"notify_email\": \"a@x.org\", "
               "\"project\": \"  \"}",
               &err);
    assert_string_equal(j->notify_on, JOB_NOTIFY_DEFAULT);
    assert_null(j->project);
    o = job_to_json(j, false, NULL);
    assert_true(json_is_null(json_object_get(o, "project")));
    assert_false(json_is_true(json_object_get(o, "auto_close")));
    json_decref(o);
    job_free(j);
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"notify_on\": [\"job_boom\"]}",
            "--notify-on: unknown event 'job_boom'");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"notify_email\": \"nobody\"}",
            "--notify-email");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"notify_email\": \"a@x.org,\"}",
            "--notify-email");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"nice\": 256}", "--nice");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"project\": "
            "\"12345678901234567890123456789012345678901234567890123456789012345\"}",
            "--project: at most 64");
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"auto_close\": 1}", "'auto_close'");
}

/* A submission from JSON text: 0 and *sub, or -1 and *err. */
static int submission(const char *text, struct jobspec_submission *sub, char **err)
{
    json_t *root = json_loads(text, 0, NULL);
    assert_non_null(root);
    return jobspec_read_submission(root, &lim, &bob, sub, err);
}

static void test_submissions(void **state)
{
    (void)state;
    struct jobspec_submission sub;
    char *err = NULL;
    /* A batch names the spec that is wrong. */
    assert_int_equal(submission("{\"jobs\": [{\"command\": \"a\", \"workdir\": \"/w\"}, "
                                "{\"command\": \"b\", \"workdir\": \"w\"}]}",
                                &sub, &err),
                     -1);
    assert_string_equal(err, "job 2: 'workdir' must be an absolute directory path");
    free(err);
    assert_int_equal(submission("{\"jobs\": [{\"command\": \"a\", \"workdir\": \"/w\", "
                                "\"array\": \"1-2\"}]}",
                                &sub, &err),
                     -1);
    assert_non_null(strstr(err, "belong to a single-spec submission"));
    free(err);
    assert_int_equal(submission("{\"jobs\": [], \"dry_run\": true}", &sub, &err), -1);
    assert_string_equal(err, "'jobs' must be a non-empty array of job specs");
    free(err);
    assert_int_equal(submission("{\"command\": \"a\", \"workdir\": \"/w\", \"array\": \"1-2\", "
                                "\"params\": {\"names\": [\"x\"], \"rows\": [[\"1\"]]}}",
                                &sub, &err),
                     -1);
    assert_non_null(strstr(err, "either an array"));
    free(err);
    assert_int_equal(submission("{\"command\": \"a\", \"workdir\": \"/w\", \"name_template\": "
                                "\"x\"}",
                                &sub, &err),
                     -1);
    free(err);
    assert_int_equal(submission("{\"command\": \"a\", \"workdir\": \"/w\", \"max_concurrent\": "
                                "-1}",
                                &sub, &err),
                     -1);
    free(err);

    /* A batch of two with a limit: a group, a dry run. */
    assert_int_equal(submission("{\"jobs\": [{\"command\": \"a\", \"workdir\": \"/w\"}, "
                                "{\"command\": \"b\", \"workdir\": \"/w\"}], \"dry_run\": true, "
                                "\"max_concurrent\": 1}",
                                &sub, &err),
                     0);
    assert_int_equal(sub.n, 2);
    assert_true(sub.batch && sub.dry_run && jobspec_grouped(&sub));
    assert_int_equal(sub.max_concurrent, 1);
    assert_int_equal(jobspec_expand(&sub, &err), 0); /* nothing to expand */
    assert_int_equal(sub.n, 2);
    jobspec_submission_free(&sub);

    /* An array: its %K is the group's limit unless one is given. */
    assert_int_equal(submission("{\"command\": \"a\", \"workdir\": \"/w\", \"array\": "
                                "\"1-3%2\"}",
                                &sub, &err),
                     0);
    assert_int_equal(sub.n, 1);
    assert_int_equal(jobspec_expand(&sub, &err), 0);
    assert_int_equal(sub.n, 3);
    assert_int_equal(sub.max_concurrent, 2);
    assert_null(sub.jobs[2]->name); /* no NAME: each task its gjob-<id> */
    jobspec_submission_free(&sub);

    /* One job alone is no group. */
    assert_int_equal(submission("{\"command\": \"a\", \"workdir\": \"/w\"}", &sub, &err), 0);
    assert_false(jobspec_grouped(&sub));
    jobspec_submission_free(&sub);
}

/* The MIG machine of the e2e fixture: GPU 0 in MIG mode (2x 1g.18gb, 1x 3g.71gb), GPU 1
 * a plain one. */
static struct gpu_info mig_gpus[2] = {
    {.index = 0, .memory_total_mib = 81920, .memory_used_mib = 0, .mig_enabled = true},
    {.index = 1, .memory_total_mib = 81920, .memory_used_mib = 0},
};
static struct gpu_mig mig_list[3] = {
    {.parent = 0, .profile = "1g.18gb", .uuid = "MIG-a"},
    {.parent = 0, .profile = "1g.18gb", .uuid = "MIG-b"},
    {.parent = 0, .profile = "3g.71gb", .uuid = "MIG-c"},
};
static const struct gpu_set mig_machine = {
    .gpus = mig_gpus, .n_gpus = 2, .migs = mig_list, .n_migs = 3};
static const struct jobspec_limits mig_lim = {.memory_total_mb = 1000, .gpus = &mig_machine};

static struct job *mig_job_of(const char *text, char **err)
{
    json_t *spec = json_loads(text, 0, NULL);
    assert_non_null(spec);
    bool dry = false;
    struct job *j = jobspec_to_job(spec, &mig_lim, &bob, &dry, err);
    json_decref(spec);
    return j;
}

static void mig_refused(const char *text, const char *want)
{
    char *err = NULL;
    struct job *j = mig_job_of(text, &err);
    if (j)
        fail_msg("accepted: %s", text);
    if (!err || !strstr(err, want))
        fail_msg("%s: got '%s', want '%s'", text, err ? err : "(none)", want);
    free(err);
}

static const char *env_get(const struct strbuf *sb, const char *key);

static void test_mig_spec(void **state)
{
    (void)state;
    assert_true(gpu_mig_profile_valid("1g.18gb"));
    assert_true(gpu_mig_profile_valid("3g.71gb"));
    assert_true(gpu_mig_profile_valid("1g.10gb+me"));
    assert_false(gpu_mig_profile_valid("1g"));
    assert_false(gpu_mig_profile_valid("0g.10gb"));
    assert_false(gpu_mig_profile_valid("1g.10GB"));
    assert_false(gpu_mig_profile_valid("1g.10gb "));
    assert_false(gpu_mig_profile_valid(""));
    char prof[GPUINFO_MIG_PROFILE_MAX];
    gpu_mig_profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb", prof, sizeof(prof));
    assert_string_equal(prof, "1g.10gb");
    gpu_mig_profile_from_name("NVIDIA H100 80GB HBM3", prof, sizeof(prof));
    assert_string_equal(prof, "");

    char *err = NULL;
    struct job *j = mig_job_of("{\"command\": \"x\", \"workdir\": \"/w\", \"mig_profile\": "
                               "\"1g.18gb\"}",
                               &err);
    assert_non_null(j);
    assert_string_equal(j->mig_profile, "1g.18gb");
    assert_int_equal(j->mig_count, 1);
    assert_int_equal(j->gpus, 0);
    /* As a spec and back: the same job. */
    json_t *spec = jobspec_from_job(j);
    bool dry = false;
    struct job *again = jobspec_to_job(spec, &mig_lim, &bob, &dry, &err);
    assert_non_null(again);
    json_t *changes = jobspec_changes(j, again, spec);
    assert_int_equal(json_array_size(changes), 0);
    json_decref(changes);
    job_free(again);
    /* Whole GPUs instead: the MIG request goes. */
    json_t *over = json_pack("{s:i}", "gpus", 1);
    assert_int_equal(jobspec_merge(spec, over, false, &err), 0);
    json_decref(over);
    again = jobspec_to_job(spec, &mig_lim, &bob, &dry, &err);
    assert_non_null(again);
    assert_null(again->mig_profile);
    assert_int_equal(again->gpus, 1);
    job_free(again);
    /* And back to MIG: the GPUs go. */
    over = json_pack("{s:s, s:i}", "mig_profile", "3g.71gb", "mig_count", 1);
    assert_int_equal(jobspec_merge(spec, over, false, &err), 0);
    json_decref(over);
    again = jobspec_to_job(spec, &mig_lim, &bob, &dry, &err);
    assert_non_null(again);
    assert_string_equal(again->mig_profile, "3g.71gb");
    assert_int_equal(again->gpus, 0);
    job_free(again);
    json_decref(spec);
    job_free(j);

    /* A CUDA process uses one MIG instance: more is refused, with the way to get them. */
    mig_refused("{\"command\": \"x\", \"workdir\": \"/w\", \"mig_profile\": \"1g.18gb\", "
                "\"mig_count\": 2}",
                "--mig 1g.18gb:2: a CUDA process sees only one MIG instance; submit one job per "
                "instance (--mig 1g.18gb, e.g. with --array 1-2)");

    mig_refused("{\"command\": \"x\", \"workdir\": \"/w\", \"mig_profile\": \"1g\"}",
                "'mig_profile' must be a MIG profile");
    mig_refused("{\"command\": \"x\", \"workdir\": \"/w\", \"mig_profile\": \"1g.18gb\", "
                "\"mig_count\": 0}",
                "'mig_count' must be an integer from 1 to 64");
    mig_refused("{\"command\": \"x\", \"workdir\": \"/w\", \"mig_count\": 2}", "--mig PROFILE[:N]");
    mig_refused("{\"command\": \"x\", \"workdir\": \"/w\", \"mig_profile\": \"1g.18gb\", "
                "\"gpus\": 1}",
                "--mig and --gpus cannot be combined");
    mig_refused("{\"command\": \"x\", \"workdir\": \"/w\", \"mig_profile\": \"7g.80gb\"}",
                "requests MIG profile 7g.80gb but this machine has none (MIG profiles here: "
                "1g.18gb, 3g.71gb)");
    mig_refused("{\"command\": \"x\", \"workdir\": \"/w\", \"gpus\": 2}",
                "requests 2 GPUs but this machine has 1 without MIG");
    /* A MIG job sees its instances by UUID, whatever gpu_id_format says. */
    j = job_new();
    j->id = 6;
    j->mig_profile = xstrdup("1g.18gb");
    j->mig_count = 2;
    j->mig_uuids = xstrdup("MIG-a,MIG-b");
    j->env = json_object();
    struct strbuf sb;
    strbuf_init(&sb);
    struct jobenv_input in = {.uuids = "MIG-a,MIG-b", .uuid_format = false};
    jobenv_build(j, &in, &sb);
    assert_string_equal(env_get(&sb, "CUDA_VISIBLE_DEVICES"), "MIG-a,MIG-b");
    assert_string_equal(env_get(&sb, "NVIDIA_VISIBLE_DEVICES"), "MIG-a,MIG-b");
    assert_string_equal(env_get(&sb, "GFLOW_GPU_UUIDS"), "MIG-a,MIG-b");
    strbuf_free(&sb);
    job_free(j);
    /* A machine without MIG. */
    refused("{\"command\": \"x\", \"workdir\": \"/w\", \"mig_profile\": \"1g.18gb\"}",
            "this machine has no MIG instances");
}

static void test_spec_round_trip_and_merge(void **state)
{
    (void)state;
    char *err = NULL;
    struct job *j = job_of("{\"command\": \"python t.py\", \"workdir\": \"/w\", \"gpus\": 1, "
                           "\"gpu_memory_mb\": 100, \"time_limit\": 60, \"signal_spec\": "
                           "\"USR1@5\", \"conda_env\": \"ml\", \"priority\": 3, "
                           "\"depends_on\": [7], \"env\": {\"A\": \"1\"}}",
                           &err);
    assert_non_null(j);
    /* The stored job as a spec gives the same job again. */
    json_t *spec = jobspec_from_job(j);
    bool dry = false;
    struct job *again = jobspec_to_job(spec, &lim, &bob, &dry, &err);
    assert_non_null(again);
    json_t *changes = jobspec_changes(j, again, spec);
    assert_int_equal(json_array_size(changes), 0);
    json_decref(changes);
    job_free(again);

    /* A command with a script_path (accepted, display only) keeps it: an update must not
     * report a change nobody asked for (found by tests/fuzz/fuzz_jobspec). */
    struct job *cp = job_of("{\"command\": \"x\", \"script_path\": \"/s.sh\", \"workdir\": "
                            "\"/w\"}",
                            &err);
    json_t *cp_spec = jobspec_from_job(cp);
    again = jobspec_to_job(cp_spec, &lim, &bob, &dry, &err);
    assert_string_equal(again->script_path, "/s.sh");
    changes = jobspec_changes(cp, again, cp_spec);
    assert_int_equal(json_array_size(changes), 0);
    json_decref(changes);
    json_decref(cp_spec);
    job_free(again);
    job_free(cp);

    /* Changes: a script replaces the command, no GPUs drops the per-GPU settings, no time
     * limit drops the signal, null removes the conda environment. */
    json_t *over = json_pack("{s:s, s:i, s:i, s:n, s:i}", "script", "echo hi", "gpus", 0,
                             "time_limit", 0, "conda_env", "priority", 9);
    assert_int_equal(jobspec_merge(spec, over, false, &err), 0);
    struct job *n = jobspec_to_job(spec, &lim, &bob, &dry, &err);
    assert_non_null(n);
    assert_null(n->command);
    assert_string_equal(n->script, "echo hi");
    assert_int_equal(n->gpus, 0);
    assert_int_equal(n->gpu_memory_mb, 0);
    assert_int_equal(n->warn_signal, 0);
    assert_null(n->conda_env);
    assert_true(jobspec_changes_what(over));
    changes = jobspec_changes(j, n, over);
    /* priority, time_limit, gpus, gpu_memory_mb, conda_env, signal_spec, command,
     * script_path: each reported once with its old and new value. */
    size_t i;
    json_t *c;
    bool saw_priority = false;
    json_array_foreach (changes, i, c) {
        if (!strcmp(json_string_value(json_object_get(c, "field")), "priority")) {
            saw_priority = true;
            assert_int_equal(json_integer_value(json_object_get(c, "old")), 3);
            assert_int_equal(json_integer_value(json_object_get(c, "new")), 9);
        }
    }
    assert_true(saw_priority);
    json_decref(changes);
    job_free(n);
    json_decref(over);

    /* "hold" is for a redo only; a field outside the spec is refused. */
    over = json_pack("{s:b}", "hold", 1);
    assert_int_equal(jobspec_merge(spec, over, false, &err), -1);
    assert_string_equal(err, "'hold' cannot be changed here");
    free(err);
    assert_int_equal(jobspec_merge(spec, over, true, &err), 0);
    json_decref(over);
    over = json_pack("{s:b}", "dry_run", 1);
    assert_int_equal(jobspec_merge(spec, over, true, &err), -1);
    free(err);
    json_decref(over);
    over = json_object();
    assert_false(jobspec_changes_what(over));
    json_decref(over);
    json_decref(spec);
    job_free(j);
}

/* The value of key in a NUL-separated environment, or NULL. */
static const char *env_get(const struct strbuf *sb, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = sb->buf; p < sb->buf + sb->len; p += strlen(p) + 1)
        if (!strncmp(p, key, n) && p[n] == '=')
            return p + n + 1;
    return NULL;
}

static void test_jobenv(void **state)
{
    (void)state;
    struct job *j = job_new();
    j->id = 5;
    j->name = xstrdup("train");
    j->array_task = 3;
    j->gpu_mask = 0x6; /* GPUs 1 and 2 */
    j->env = json_pack("{s:s, s:s, s:s, s:s}", "PATH", "/bin", "CUDA_VISIBLE_DEVICES", "7", "HOME",
                       "/old", "GFLOW_JOB_ID", "99");
    struct strbuf sb;
    strbuf_init(&sb);
    struct jobenv_input in = {.uuids = "GPU-b,GPU-c"};
    jobenv_build(j, &in, &sb);
    assert_string_equal(env_get(&sb, "PATH"), "/bin");
    assert_string_equal(env_get(&sb, "GFLOW_JOB_ID"), "5"); /* ours win */
    assert_string_equal(env_get(&sb, "GFLOW_JOB_NAME"), "train");
    assert_string_equal(env_get(&sb, "GFLOW_ARRAY_TASK_ID"), "3");
    assert_string_equal(env_get(&sb, "SLURM_ARRAY_TASK_ID"), "3");
    assert_string_equal(env_get(&sb, "CUDA_VISIBLE_DEVICES"), "1,2");
    assert_string_equal(env_get(&sb, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    assert_string_equal(env_get(&sb, "GFLOW_GPU_UUIDS"), "GPU-b,GPU-c");
    assert_string_equal(env_get(&sb, "NVIDIA_VISIBLE_DEVICES"), "GPU-b,GPU-c");
    assert_string_equal(env_get(&sb, "PYTHONUNBUFFERED"), "1");
    assert_string_equal(env_get(&sb, "HOME"), "/old"); /* a per-user daemon keeps it */
    strbuf_free(&sb);

    /* As the submitter of a system daemon, with UUIDs; no GPUs at all. */
    strbuf_init(&sb);
    in = (struct jobenv_input){
        .uuids = "GPU-b,GPU-c", .uuid_format = true, .user = "bob", .home = "/home/bob"};
    jobenv_build(j, &in, &sb);
    assert_string_equal(env_get(&sb, "CUDA_VISIBLE_DEVICES"), "GPU-b,GPU-c");
    assert_string_equal(env_get(&sb, "HOME"), "/home/bob");
    assert_string_equal(env_get(&sb, "USER"), "bob");
    assert_string_equal(env_get(&sb, "LOGNAME"), "bob");
    assert_string_equal(env_get(&sb, "SHELL"), "/bin/sh");
    strbuf_free(&sb);
    j->gpu_mask = 0;
    j->array_task = -1;
    strbuf_init(&sb);
    in = (struct jobenv_input){.uuids = ""};
    jobenv_build(j, &in, &sb);
    assert_string_equal(env_get(&sb, "CUDA_VISIBLE_DEVICES"), "");
    assert_string_equal(env_get(&sb, "NVIDIA_VISIBLE_DEVICES"), "none");
    assert_null(env_get(&sb, "GFLOW_ARRAY_TASK_ID"));
    strbuf_free(&sb);
    job_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_default_name_valid),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_submissions),
        cmocka_unit_test(test_spec_round_trip_and_merge),
        cmocka_unit_test(test_jobenv),
        cmocka_unit_test(test_umask),
        cmocka_unit_test(test_bookkeeping),
        cmocka_unit_test(test_mig_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
