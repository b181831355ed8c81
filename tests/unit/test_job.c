/* test_job: the job model of src/core/job.c: state names and parsing, the state machine,
 * the JSON form (round trip, nulls, reasons), deep copies and signal names. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "util.h"

static void test_state_names(void **state)
{
    (void)state;
    static const char *const shorts[] = {"PD", "H", "R", "CD", "F", "CA", "TO"};
    static const char *const longs[] = {"Queued", "Hold",      "Running", "Finished",
                                        "Failed", "Cancelled", "Timeout"};
    for (int s = 0; s < JOB_STATE_COUNT; s++) {
        assert_string_equal(job_state_short((enum job_state)s), shorts[s]);
        assert_string_equal(job_state_name((enum job_state)s), longs[s]);
    }
    assert_string_equal(job_state_short(JOB_STATE_COUNT), "?");
    assert_string_equal(job_state_name(JOB_STATE_COUNT), "Unknown");
}

static void parses_to(const char *s, enum job_state want)
{
    enum job_state got = JOB_STATE_COUNT;
    assert_int_equal(job_state_parse(s, &got), 0);
    assert_int_equal(got, want);
}

static void test_state_parse(void **state)
{
    (void)state;
    for (int s = 0; s < JOB_STATE_COUNT; s++) {
        parses_to(job_state_short((enum job_state)s), (enum job_state)s);
        parses_to(job_state_name((enum job_state)s), (enum job_state)s);
    }
    parses_to("pd", JOB_QUEUED);
    parses_to("RUNNING", JOB_RUNNING);
    parses_to("to", JOB_TIMEOUT);
    /* Aliases from gflow and Slurm. */
    parses_to("pending", JOB_QUEUED);
    parses_to("PENDING", JOB_QUEUED);
    parses_to("held", JOB_HELD);
    parses_to("completed", JOB_FINISHED);
    parses_to("canceled", JOB_CANCELLED);
    parses_to("timedout", JOB_TIMEOUT);
    parses_to("CG", JOB_RUNNING);

    enum job_state got = JOB_FAILED;
    const char *bad[] = {"", "X", "queue", "P", "running ", "CDX"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(job_state_parse(bad[i], &got), -1);
    assert_int_equal(got, JOB_FAILED);
}

/* CG: a running job with a cancel asked is shown as Cancelling, and read back so. */
static void test_display_state_cancelling(void **state)
{
    (void)state;
    struct job j;
    job_init(&j);
    j.state = JOB_RUNNING;
    assert_string_equal(job_display_state(&j), "R");
    j.end_request = JOB_END_TIMEOUT; /* a time-limit kill stays R */
    assert_false(job_is_cancelling(&j));
    assert_string_equal(job_display_state_name(&j), "Running");
    j.end_request = JOB_END_CANCEL;
    assert_true(job_is_cancelling(&j));
    assert_string_equal(job_display_state(&j), "CG");
    assert_string_equal(job_display_state_name(&j), "Cancelling");
    json_t *o = job_to_json(&j, false, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "state")), "CG");
    assert_string_equal(json_string_value(json_object_get(o, "state_name")), "Cancelling");
    json_object_del(o, "cancelling"); /* the state alone says it */
    struct job back;
    assert_int_equal(job_from_json(o, &back), 0);
    assert_int_equal(back.state, JOB_RUNNING);
    assert_true(job_is_cancelling(&back));
    job_clear(&back);
    json_decref(o);
    j.state = JOB_CANCELLED; /* once ended, its own state */
    assert_string_equal(job_display_state(&j), "CA");
    assert_true(job_state_is_cancelling_name("cancelling"));
    assert_true(job_state_is_cancelling_name("cg"));
    assert_false(job_state_is_cancelling_name("R"));
    parses_to("Cancelling", JOB_RUNNING);
    job_clear(&j);
}

static void test_state_classes(void **state)
{
    (void)state;
    for (int s = 0; s < JOB_STATE_COUNT; s++) {
        bool active = s == JOB_QUEUED || s == JOB_HELD || s == JOB_RUNNING;
        assert_int_equal(job_state_is_active((enum job_state)s), active);
        assert_int_equal(job_state_is_terminal((enum job_state)s), !active);
    }
}

static void test_transitions(void **state)
{
    (void)state;
    static const enum job_state allowed[][2] = {
        {JOB_QUEUED, JOB_HELD},      {JOB_HELD, JOB_QUEUED},       {JOB_QUEUED, JOB_RUNNING},
        {JOB_QUEUED, JOB_CANCELLED}, {JOB_HELD, JOB_CANCELLED},    {JOB_RUNNING, JOB_FINISHED},
        {JOB_RUNNING, JOB_FAILED},   {JOB_RUNNING, JOB_CANCELLED}, {JOB_RUNNING, JOB_TIMEOUT},
        {JOB_RUNNING, JOB_QUEUED},
    };
    static const enum job_state refused[][2] = {
        {JOB_QUEUED, JOB_QUEUED}, {JOB_QUEUED, JOB_FINISHED}, {JOB_QUEUED, JOB_TIMEOUT},
        {JOB_HELD, JOB_RUNNING},  {JOB_HELD, JOB_FINISHED},   {JOB_HELD, JOB_HELD},
        {JOB_RUNNING, JOB_HELD},  {JOB_RUNNING, JOB_RUNNING}, {JOB_HELD, JOB_TIMEOUT},
    };
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
        assert_true(job_transition_allowed(allowed[i][0], allowed[i][1]));
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        assert_false(job_transition_allowed(refused[i][0], refused[i][1]));
    /* Terminal states are final. */
    for (int from = JOB_FINISHED; from < JOB_STATE_COUNT; from++)
        for (int to = 0; to < JOB_STATE_COUNT; to++)
            assert_false(job_transition_allowed((enum job_state)from, (enum job_state)to));
}

static struct job *job_sample(void)
{
    struct job *j = job_new();
    j->id = 42;
    j->name = strdup("train");
    j->user = strdup("alice");
    j->uid = 1000;
    j->state = JOB_FINISHED;
    j->priority = 200;
    j->time_limit = 3600;
    j->command = strdup("python train.py --lr 0.1");
    j->script = strdup("#!/bin/bash\necho hi\n");
    j->script_path = strdup("run.sh");
    j->workdir = strdup("/home/alice");
    j->env = json_pack("{ss}", "PATH", "/usr/bin");
    j->submit_time = 1700000000.25;
    j->start_time = 1700000001.5;
    j->end_time = 1700000100.75;
    j->exit_code = 3;
    j->signal = 0;
    j->oom = true;
    job_set_reason(j, JOB_REASON_LAUNCH_FAILED, 0, "cannot chdir to /x: gone");
    j->gpus = 2;
    j->gpu_mask = 0x5; /* GPUs 0 and 2 */
    j->shim_pid = 1234;
    j->max_rss_kb = 4096;
    return j;
}

/* job_to_json, through text and back. */
static void job_round_trip(const struct job *in, struct job *out, bool full)
{
    json_t *o = job_to_json(in, full, "/logs");
    char *text = json_dumps(o, 0);
    json_decref(o);
    json_t *back = json_loads(text, 0, NULL);
    assert_non_null(back);
    assert_int_equal(job_from_json(back, out), 0);
    json_decref(back);
    free(text);
}

/* Times beyond what fits in microseconds as a 64-bit integer (a --begin of 1e300 is
 * accepted) are written as numbers, not as whatever the conversion gave (undefined
 * behaviour, found by tests/fuzz/fuzz_jobcodec); infinities as null. */
static void test_json_huge_times(void **state)
{
    (void)state;
    struct job *in = job_sample();
    in->begin_time = 1e300;
    in->end_time = 1e12;
    struct job out;
    job_round_trip(in, &out, false);
    assert_true(out.begin_time == 1e300);
    assert_true(out.end_time == 1e12);
    job_clear(&out);
    in->begin_time = INFINITY;
    struct strbuf sb;
    strbuf_init(&sb);
    job_append_field(&sb, in, JOB_FIELD_BEGIN_TIME, true);
    assert_string_equal(sb.buf, "\\N");
    strbuf_free(&sb);
    job_free(in);
}

static void test_json_round_trip(void **state)
{
    (void)state;
    struct job *in = job_sample();
    struct job out;
    job_round_trip(in, &out, true);
    assert_int_equal(out.id, 42);
    assert_string_equal(out.name, "train");
    assert_string_equal(out.user, "alice");
    assert_int_equal(out.uid, 1000);
    assert_int_equal(out.state, JOB_FINISHED);
    assert_int_equal(out.priority, 200);
    assert_int_equal(out.time_limit, 3600);
    assert_string_equal(out.command, "python train.py --lr 0.1");
    assert_string_equal(out.script, "#!/bin/bash\necho hi\n");
    assert_string_equal(out.script_path, "run.sh");
    assert_string_equal(out.workdir, "/home/alice");
    assert_true(json_equal(out.env, in->env));
    assert_true(out.submit_time == in->submit_time);
    assert_true(out.start_time == in->start_time);
    assert_true(out.end_time == in->end_time);
    assert_int_equal(out.exit_code, 3);
    assert_int_equal(out.signal, 0);
    assert_true(out.oom);
    assert_int_equal(out.reason, JOB_REASON_LAUNCH_FAILED);
    assert_string_equal(out.reason_detail, "cannot chdir to /x: gone");
    assert_int_equal(out.gpus, 2);
    assert_int_equal(out.gpu_mask, 0x5);
    assert_int_equal(out.shim_pid, 1234);
    assert_int_equal(out.max_rss_kb, 4096);
    job_clear(&out);

    /* Without full, no payload. */
    json_t *o = job_to_json(in, false, "/logs");
    assert_null(json_object_get(o, "script"));
    assert_null(json_object_get(o, "env"));
    assert_null(json_object_get(o, "log_path"));
    json_decref(o);
    o = job_to_json(in, true, "/logs");
    assert_string_equal(json_string_value(json_object_get(o, "log_path")), "/logs/42.log");
    assert_string_equal(json_string_value(json_object_get(o, "state_name")), "Finished");
    json_decref(o);
    job_free(in);
}

static void test_json_nulls(void **state)
{
    (void)state;
    struct job *in = job_new(); /* exit_code -1, signal 0, no times, no strings */
    in->id = 7;
    json_t *o = job_to_json(in, false, NULL);
    const char *null_keys[] = {"exit_code",  "signal",   "signal_name", "time_limit",
                               "start_time", "end_time", "name",        "reason",
                               "gpu_ids",    "shim_pid", "max_rss_kb"};
    for (size_t i = 0; i < sizeof(null_keys) / sizeof(null_keys[0]); i++)
        assert_true(json_is_null(json_object_get(o, null_keys[i])));
    json_decref(o);

    struct job out;
    job_round_trip(in, &out, false);
    assert_int_equal(out.exit_code, -1);
    assert_int_equal(out.signal, 0);
    assert_null(out.name);
    assert_int_equal(out.reason, JOB_REASON_NONE);
    assert_null(out.env);
    assert_int_equal(out.time_limit, 0);
    assert_true(out.start_time == 0);
    job_clear(&out);

    /* Exit code 0 is a value, not null; a signal comes with its name. */
    in->state = JOB_FAILED;
    in->exit_code = 0;
    in->signal = SIGKILL;
    o = job_to_json(in, false, NULL);
    assert_int_equal(json_integer_value(json_object_get(o, "exit_code")), 0);
    assert_int_equal(json_integer_value(json_object_get(o, "signal")), 9);
    assert_string_equal(json_string_value(json_object_get(o, "signal_name")), "SIGKILL");
    json_decref(o);
    job_round_trip(in, &out, false);
    assert_int_equal(out.exit_code, 0);
    assert_int_equal(out.signal, 9);
    job_clear(&out);
    job_free(in);
}

static void test_json_bad_input(void **state)
{
    (void)state;
    struct job out;
    json_t *arr = json_array();
    assert_int_equal(job_from_json(arr, &out), -1);
    json_decref(arr);
    json_t *o = json_pack("{sI}", "id", (json_int_t)1);
    assert_int_equal(job_from_json(o, &out), -1); /* no state */
    json_object_set_new(o, "state", json_string("ZZ"));
    assert_int_equal(job_from_json(o, &out), -1);
    json_object_set_new(o, "state", json_string("R"));
    json_object_set_new(o, "cancelling", json_true());
    assert_int_equal(job_from_json(o, &out), 0);
    assert_int_equal(out.state, JOB_RUNNING);
    assert_int_equal(out.end_request, JOB_END_CANCEL);
    assert_int_equal(out.priority, JOB_PRIORITY_DEFAULT);
    assert_int_equal(out.exit_code, -1);
    job_clear(&out);
    json_decref(o);
}

static const char *json_reason(const struct job *j)
{
    static char buf[64];
    json_t *o = job_to_json(j, false, NULL);
    const json_t *r = json_object_get(o, "reason");
    snprintf(buf, sizeof(buf), "%s", json_is_string(r) ? json_string_value(r) : "(null)");
    json_decref(o);
    return buf;
}

static void test_reason_fallback(void **state)
{
    (void)state;
    struct job *j = job_new();
    j->wait_reason = "MaxRunningJobs";
    assert_string_equal(json_reason(j), "MaxRunningJobs");
    job_set_reason(j, JOB_REASON_DEPENDENCY_FAILED, 7, NULL);
    assert_string_equal(json_reason(j), "DependencyFailed:7");
    job_set_reason(j, JOB_REASON_NONE, 0, NULL);
    j->state = JOB_HELD; /* the wait reason is only for queued jobs */
    assert_string_equal(json_reason(j), "(null)");
    j->state = JOB_RUNNING;
    assert_string_equal(json_reason(j), "(null)");
    job_free(j);
}

/* Every reason's text reads back as itself: parsed with a copied detail
 * (job_reason_parse) or one pointing into the text (job_reason_parse_in), and written
 * with or without an allocation (job_reason_text, job_reason_append). */
static void test_reason_text_round_trip(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "TimeLimit",
        "CancelledByUser",
        "DependencyFailed:42",
        "LaunchFailed",
        "LaunchFailed: why",
        "ShimLost: gone",
        "JobHeldUser",
        "MaxRunningJobs",
        "Priority",
        "DependencyFailed:x",
        "Launch",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        int64_t job, job_in;
        char *detail;
        const char *detail_in;
        enum job_reason r = job_reason_parse(texts[i], &job, &detail);
        assert_int_equal(job_reason_parse_in(texts[i], &job_in, &detail_in), r);
        assert_int_equal(job_in, job);
        if (detail) {
            assert_non_null(detail_in);
            assert_string_equal(detail_in, detail);
            assert_true(detail_in >= texts[i] && detail_in < texts[i] + strlen(texts[i]));
        } else {
            assert_null(detail_in);
        }
        char *text = job_reason_text(r, job, detail);
        assert_string_equal(text, texts[i]);
        struct strbuf sb;
        strbuf_init(&sb);
        strbuf_adds(&sb, "(");
        job_reason_append(&sb, r, job, detail_in);
        assert_string_equal(sb.buf + 1, texts[i]);
        strbuf_free(&sb);
        free(text);
        free(detail);
    }
    int64_t job;
    char *detail;
    assert_int_equal(job_reason_parse("MaxRunningJobs", &job, &detail), JOB_REASON_OTHER);
    free(detail);
    assert_null(job_reason_text(JOB_REASON_NONE, 0, NULL));
}

static void test_dup(void **state)
{
    (void)state;
    struct job *src = job_sample();
    src->wait_reason = "Priority";
    struct job *with = job_dup(src, true);
    struct job *without = job_dup(src, false);
    job_free(src); /* the copies own everything they point at */

    assert_int_equal(with->id, 42);
    assert_string_equal(with->name, "train");
    assert_string_equal(with->user, "alice");
    assert_string_equal(with->command, "python train.py --lr 0.1");
    assert_string_equal(with->script_path, "run.sh");
    assert_string_equal(with->workdir, "/home/alice");
    assert_int_equal(with->reason, JOB_REASON_LAUNCH_FAILED);
    assert_string_equal(with->reason_detail, "cannot chdir to /x: gone");
    assert_int_equal(with->gpu_mask, 0x5);
    assert_string_equal(with->wait_reason, "Priority");
    assert_string_equal(with->script, "#!/bin/bash\necho hi\n");
    assert_string_equal(json_string_value(json_object_get(with->env, "PATH")), "/usr/bin");

    assert_string_equal(without->name, "train");
    assert_string_equal(without->command, "python train.py --lr 0.1");
    assert_null(without->script);
    assert_null(without->env);
    assert_int_equal(without->exit_code, 3);
    assert_true(without->name != with->name);
    job_free(with);
    job_free(without);

    struct job *empty = job_new();
    struct job *copy = job_dup(empty, true);
    assert_null(copy->name);
    assert_null(copy->env);
    assert_int_equal(copy->exit_code, -1);
    job_free(copy);
    job_free(empty);
    job_free(NULL);
}

static void test_signal_name(void **state)
{
    (void)state;
    assert_string_equal(job_signal_name(9), "SIGKILL");
    assert_string_equal(job_signal_name(SIGTERM), "SIGTERM");
    assert_string_equal(job_signal_name(SIGSEGV), "SIGSEGV");
    assert_string_equal(job_signal_name(1000), "SIG1000");
}

static void test_init_defaults(void **state)
{
    (void)state;
    struct job j;
    job_init(&j);
    assert_int_equal(j.state, JOB_QUEUED);
    assert_int_equal(j.priority, JOB_PRIORITY_DEFAULT);
    assert_int_equal(j.exit_code, -1);
    assert_int_equal(j.array_task, -1);
    assert_int_equal(j.attempt, 1);
    j.name = strdup("x");
    j.priority = 1;
    job_clear(&j);
    assert_null(j.name);
    assert_int_equal(j.priority, JOB_PRIORITY_DEFAULT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_names),
        cmocka_unit_test(test_state_parse),
        cmocka_unit_test(test_state_classes),
        cmocka_unit_test(test_transitions),
        cmocka_unit_test(test_display_state_cancelling),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_nulls),
        cmocka_unit_test(test_json_huge_times),
        cmocka_unit_test(test_json_bad_input),
        cmocka_unit_test(test_reason_fallback),
        cmocka_unit_test(test_reason_text_round_trip),
        cmocka_unit_test(test_dup),
        cmocka_unit_test(test_signal_name),
        cmocka_unit_test(test_init_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
