/* test_exitfile: the shim<->daemon protocol of src/core/exitfile.c: the exit file's text
 * (exact form, round trip, escaping, nulls, garbage), the lock file's lines, and every
 * rule of the two verdicts. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "exitfile.h"
#include "util.h"

/* A record with every field set; strings copied so that exit_record_free may free them. */
static struct exit_record full_record(const char *error, const char *method)
{
    struct exit_record r;
    exit_record_init(&r);
    r.job_id = 42;
    r.exit_code = 3;
    r.signal = 0;
    r.oom = false;
    r.started_at = 1700000000.25;
    r.finished_at = 1700000001.5;
    r.max_rss_kb = 123456;
    r.error = error ? xstrdup(error) : NULL;
    r.memory_enforcement = method ? xstrdup(method) : NULL;
    return r;
}

static struct exit_record decoded(const char *text)
{
    struct exit_record r;
    assert_int_equal(exit_record_decode(text, strlen(text), &r), 0);
    return r;
}

static void test_encode_exact_text(void **state)
{
    (void)state;
    struct exit_record r = full_record(NULL, NULL);
    char *s = exit_record_encode(&r);
    assert_string_equal(s, "{\"job_id\":42,\"exit_code\":3,\"signal\":null,\"oom\":false,"
                           "\"started_at\":1700000000.25,\"finished_at\":1700000001.5,"
                           "\"max_rss_kb\":123456,\"error\":null}\n");
    free(s);
    exit_record_free(&r);

    r = full_record("cannot chdir to /x: No such file or directory", "cgroup v2");
    r.exit_code = -1;
    r.signal = 9;
    r.oom = true;
    s = exit_record_encode(&r);
    assert_string_equal(s, "{\"job_id\":42,\"exit_code\":null,\"signal\":9,\"oom\":true,"
                           "\"started_at\":1700000000.25,\"finished_at\":1700000001.5,"
                           "\"max_rss_kb\":123456,\"error\":\"cannot chdir to /x: No such "
                           "file or directory\",\"memory_enforcement\":\"cgroup v2\"}\n");
    free(s);
    exit_record_free(&r);
}

static void test_round_trip(void **state)
{
    (void)state;
    const char *errors[] = {
        "plain",
        "quotes \"inside\" and a \\ backslash",
        "two\nlines\tand a tab\r",
        "control \x01\x1f bytes",
        "UTF-8: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80",
        "",
    };
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        struct exit_record r = full_record(errors[i], i % 2 ? "watchdog" : NULL);
        r.job_id = (int64_t)i;
        r.exit_code = (int)i + 120;
        r.log_lost_bytes = (int64_t)i * 4096; /* 0 (left out) for the first */
        char *s = exit_record_encode(&r);
        assert_non_null(strchr(s, '\n'));
        assert_ptr_equal(strchr(s, '\n'), s + strlen(s) - 1); /* one line */
        struct exit_record back = decoded(s);
        assert_int_equal(back.job_id, r.job_id);
        assert_int_equal(back.exit_code, r.exit_code);
        assert_int_equal(back.signal, 0);
        assert_false(back.oom);
        assert_true(back.started_at == r.started_at);
        assert_true(back.finished_at == r.finished_at);
        assert_int_equal(back.max_rss_kb, r.max_rss_kb);
        assert_int_equal(back.log_lost_bytes, r.log_lost_bytes);
        assert_true((strstr(s, "log_lost_bytes") != NULL) == (i > 0));
        assert_string_equal(back.error, errors[i]);
        if (r.memory_enforcement)
            assert_string_equal(back.memory_enforcement, r.memory_enforcement);
        else
            assert_null(back.memory_enforcement);
        free(s);
        exit_record_free(&back);
        exit_record_free(&r);
    }
}

static void test_invalid_utf8_still_parses(void **state)
{
    (void)state;
    /* A latin-1 path, a lone continuation byte, an overlong '/', a surrogate, a cut
     * sequence at the end. */
    struct exit_record r = full_record("caf\xe9 \x80 \xc0\xaf \xed\xa0\x80 \xe2\x82", NULL);
    char *s = exit_record_encode(&r);
    struct exit_record back = decoded(s);
    assert_string_equal(back.error, "caf\xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd "
                                    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                                    "\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
    exit_record_free(&back);
    exit_record_free(&r);
}

static void test_nulls_and_missing_fields(void **state)
{
    (void)state;
    struct exit_record r;
    exit_record_init(&r);
    char *s = exit_record_encode(&r);
    assert_string_equal(s, "{\"job_id\":null,\"exit_code\":null,\"signal\":null,\"oom\":false,"
                           "\"started_at\":0.0,\"finished_at\":0.0,\"max_rss_kb\":0,"
                           "\"error\":null}\n");
    struct exit_record back = decoded(s);
    assert_int_equal(back.job_id, -1);
    assert_int_equal(back.exit_code, -1);
    assert_int_equal(back.signal, 0);
    assert_null(back.error);
    assert_null(back.memory_enforcement);
    free(s);
    exit_record_free(&back);

    /* Only what an older shim might write; the rest keeps its null value. */
    back = decoded("{\"job_id\": 7, \"exit_code\": 0, \"finished_at\": 12}");
    assert_int_equal(back.job_id, 7);
    assert_int_equal(back.exit_code, 0);
    assert_int_equal(back.signal, 0);
    assert_false(back.oom);
    assert_true(back.started_at == 0.0);
    assert_true(back.finished_at == 12.0);
    assert_int_equal(back.max_rss_kb, 0);
    assert_null(back.error);
    exit_record_free(&back);

    /* Mistyped and out-of-range fields read as null. */
    back = decoded("{\"job_id\": \"7\", \"exit_code\": 3.5, \"signal\": -2, \"oom\": 1, "
                   "\"started_at\": \"now\", \"finished_at\": -1, \"max_rss_kb\": -5, "
                   "\"error\": 17, \"memory_enforcement\": false, \"extra\": [1]}");
    assert_int_equal(back.job_id, -1);
    assert_int_equal(back.exit_code, -1);
    assert_int_equal(back.signal, 0);
    assert_false(back.oom);
    assert_true(back.started_at == 0.0 && back.finished_at == 0.0);
    assert_int_equal(back.max_rss_kb, 0);
    assert_null(back.error);
    assert_null(back.memory_enforcement);
    exit_record_free(&back);

    back = decoded("{\"exit_code\": 256, \"signal\": 300}");
    assert_int_equal(back.exit_code, -1);
    assert_int_equal(back.signal, 0);
    exit_record_free(&back);
}

static void test_garbage_is_refused(void **state)
{
    (void)state;
    const char *bad[] = {"",
                         "   ",
                         "{",
                         "[1,2]",
                         "null",
                         "42",
                         "\"text\"",
                         "{\"job_id\":1}x",
                         "{\"job_id\":1,}",
                         "\xff\xfe"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct exit_record r;
        r.error = NULL;
        assert_int_equal(exit_record_decode(bad[i], strlen(bad[i]), &r), -1);
        assert_int_equal(r.job_id, -1);
        assert_int_equal(r.exit_code, -1);
        assert_null(r.error);
        assert_null(r.memory_enforcement);
    }
    struct exit_record r;
    assert_int_equal(exit_record_decode(NULL, 0, &r), -1);
    /* Not NUL-terminated: only len bytes count. */
    const char text[] = "{\"exit_code\":4}garbage";
    assert_int_equal(exit_record_decode(text, strlen("{\"exit_code\":4}"), &r), 0);
    assert_int_equal(r.exit_code, 4);
    exit_record_free(&r);
}

/* A record written into the reserved exit file is cut to fit it: its error shortened,
 * still a record that reads back, with the other fields intact. */
static void test_encode_max_cuts_the_error(void **state)
{
    (void)state;
    struct exit_record rec;
    exit_record_init(&rec);
    rec.job_id = 7;
    rec.exit_code = 127;
    rec.started_at = 1.5;
    rec.finished_at = 2.5;
    char *small = exit_record_encode_max(&rec, 4096); /* fits: unchanged */
    char *plain = exit_record_encode(&rec);
    assert_string_equal(small, plain);
    free(small);
    free(plain);
    size_t n = 100000;
    rec.error = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++)
        rec.error[i] = i % 3 ? 'a' : '"'; /* escaped: two bytes in the text */
    rec.error[n] = '\0';
    char *text = exit_record_encode_max(&rec, 16384);
    assert_true(strlen(text) <= 16384);
    assert_true(strlen(text) > 8000);
    struct exit_record back;
    assert_int_equal(exit_record_decode(text, strlen(text), &back), 0);
    assert_int_equal(back.job_id, 7);
    assert_int_equal(back.exit_code, 127);
    assert_non_null(back.error);
    assert_int_equal(strncmp(back.error, rec.error, strlen(back.error)), 0);
    exit_record_free(&back);
    free(text);
    exit_record_free(&rec);
}

/* The lock file text for pid, start and an error (NULL: none) before the job. */
static char *lock_text(int64_t pid, int64_t start, const char *error)
{
    struct exit_lock lock = {.pid = pid, .start = start, .error = (char *)error};
    return exitfile_lock_format(&lock);
}

/* exitfile_lock_parse into separate out values, as the tests below read them. */
static int lock_parse(const char *text, size_t len, int64_t *pid, int64_t *start, char **error)
{
    struct exit_lock lock;
    int rc = exitfile_lock_parse(text, len, &lock);
    *pid = lock.pid;
    *start = lock.start;
    *error = lock.error; /* the caller frees it */
    return rc;
}

static void test_lock_line_without_error(void **state)
{
    (void)state;
    char *s = lock_text(1234, 987654321, NULL);
    assert_string_equal(s, "1234 987654321\n");
    int64_t pid = -1, start = -1;
    char *error = (char *)"x";
    assert_int_equal(lock_parse(s, strlen(s), &pid, &start, &error), 0);
    assert_int_equal(pid, 1234);
    assert_int_equal(start, 987654321);
    assert_null(error);
    free(s);
    /* Without its newline (as the daemon's old reader accepted it) too. */
    assert_int_equal(lock_parse("5 6", 3, &pid, &start, &error), 0);
    assert_int_equal(pid, 5);
    assert_int_equal(start, 6);
}

static void test_lock_line_with_error(void **state)
{
    (void)state;
    char *s = lock_text(77, 5, "cannot write /x/exit.json: No such file");
    assert_string_equal(s, "77 5\nerror: cannot write /x/exit.json: No such file\n");
    int64_t pid, start;
    char *error;
    assert_int_equal(lock_parse(s, strlen(s), &pid, &start, &error), 0);
    assert_int_equal(pid, 77);
    assert_int_equal(start, 5);
    assert_string_equal(error, "cannot write /x/exit.json: No such file");
    free(error);
    free(s);

    /* One line whatever the message holds. */
    s = lock_text(77, 5, "two\nlines\r\tand \x7f caf\xc3\xa9");
    assert_string_equal(s, "77 5\nerror: two lines  and   caf\xc3\xa9\n");
    assert_int_equal(lock_parse(s, strlen(s), &pid, &start, &error), 0);
    assert_string_equal(error, "two lines  and   caf\xc3\xa9");
    free(error);
    free(s);

    /* An empty message is still a line; the verdict treats it as none. */
    s = lock_text(1, 2, "");
    assert_string_equal(s, "1 2\nerror: \n");
    free(s);

    /* After the job ran: a "lost" line. */
    struct exit_lock lock = {
        .pid = 9, .start = 8, .error = (char *)"cannot write x", .job_ran = true};
    s = exitfile_lock_format(&lock);
    assert_string_equal(s, "9 8\nlost: cannot write x\n");
    struct exit_lock back;
    assert_int_equal(exitfile_lock_parse(s, strlen(s), &back), 0);
    assert_string_equal(back.error, "cannot write x");
    assert_true(back.job_ran);
    exitfile_lock_free(&back);
    free(s);
}

static void test_lock_line_is_capped(void **state)
{
    (void)state;
    /* A long message of 2-byte characters is cut at a character boundary (the odd
     * length of "1234 456\n" puts the limit in the middle of one). */
    struct strbuf sb;
    strbuf_init(&sb);
    for (int i = 0; i < EXITFILE_LOCK_MAX; i++)
        strbuf_adds(&sb, "\xc3\xa9");
    char *s = lock_text(1234, 456, sb.buf);
    size_t n = strlen(s);
    assert_true(n <= EXITFILE_LOCK_MAX);
    assert_true(n > EXITFILE_LOCK_MAX - 8);
    assert_int_equal(s[n - 1], '\n');
    assert_int_equal((unsigned char)s[n - 2], 0xa9); /* a whole é before the newline */
    int64_t pid, start;
    char *error;
    assert_int_equal(lock_parse(s, n, &pid, &start, &error), 0);
    assert_int_equal(pid, 1234);
    assert_true(strlen(error) % 2 == 0);
    free(error);
    free(s);
    strbuf_free(&sb);
}

static void test_lock_parse_refuses_bad_pid_lines(void **state)
{
    (void)state;
    const char *bad[] = {"",
                         "\n",
                         "0 5\n",
                         "-3 5\n",
                         "12\n",
                         "12 \n",
                         "12 x\n",
                         "a b\n",
                         "12 5 6\n",
                         " 12 5\n",
                         "99999999999999999999 1\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t pid = -1, start = -1;
        char *error = (char *)"x";
        assert_int_equal(lock_parse(bad[i], strlen(bad[i]), &pid, &start, &error), -1);
        assert_int_equal(pid, 0);
        assert_int_equal(start, 0);
        assert_null(error);
    }
    /* No pid but an error line: the error is still read. */
    int64_t pid, start;
    char *error;
    const char *t = "\nerror: early\n";
    assert_int_equal(lock_parse(t, strlen(t), &pid, &start, &error), -1);
    assert_string_equal(error, "early");
    free(error);
    assert_int_equal(lock_parse(NULL, 0, &pid, &start, &error), -1);
    assert_null(error);
}

/* The verdict on rec for req, as its reason text. */
static void expect_verdict(const struct exit_record *rec, enum job_end_request req,
                           enum job_state state, enum job_reason reason, const char *text)
{
    struct exit_verdict v = exit_verdict_of(rec, req);
    assert_int_equal(v.state, state);
    assert_int_equal(v.reason, reason);
    char *t = job_reason_text(v.reason, 0, v.detail);
    if (text)
        assert_string_equal(t, text);
    else
        assert_null(t);
    free(t);
    exit_verdict_free(&v);
    assert_null(v.detail);
}

static void test_verdict_rules(void **state)
{
    (void)state;
    struct exit_record r;
    exit_record_init(&r);
    r.exit_code = 0;
    expect_verdict(&r, JOB_END_NONE, JOB_FINISHED, JOB_REASON_NONE, NULL);
    r.exit_code = 2;
    expect_verdict(&r, JOB_END_NONE, JOB_FAILED, JOB_REASON_NON_ZERO_EXIT, "NonZeroExitCode");
    r.exit_code = 127; /* no error: the job's own status */
    expect_verdict(&r, JOB_END_NONE, JOB_FAILED, JOB_REASON_NON_ZERO_EXIT, "NonZeroExitCode");
    r.exit_code = -1;
    expect_verdict(&r, JOB_END_NONE, JOB_FAILED, JOB_REASON_NON_ZERO_EXIT, "NonZeroExitCode");
    r.signal = SIGSEGV;
    expect_verdict(&r, JOB_END_NONE, JOB_FAILED, JOB_REASON_SIGNAL, "Signal");
    r.error = xstrdup("command not found: nosuch");
    r.exit_code = 127;
    r.signal = 0;
    expect_verdict(&r, JOB_END_NONE, JOB_FAILED, JOB_REASON_LAUNCH_FAILED,
                   "LaunchFailed: command not found: nosuch");
    r.signal = SIGKILL; /* the error outranks a signal */
    expect_verdict(&r, JOB_END_NONE, JOB_FAILED, JOB_REASON_LAUNCH_FAILED,
                   "LaunchFailed: command not found: nosuch");
    r.error[0] = '\0'; /* an empty error is none */
    expect_verdict(&r, JOB_END_NONE, JOB_FAILED, JOB_REASON_SIGNAL, "Signal");
    r.oom = true; /* oom outranks everything the job did */
    free(r.error);
    r.error = xstrdup("x");
    expect_verdict(&r, JOB_END_NONE, JOB_FAILED, JOB_REASON_OUT_OF_MEMORY, "OutOfMemory");
    /* A request of the daemon outranks everything. */
    expect_verdict(&r, JOB_END_CANCEL, JOB_CANCELLED, JOB_REASON_CANCELLED_BY_USER,
                   "CancelledByUser");
    expect_verdict(&r, JOB_END_TIMEOUT, JOB_TIMEOUT, JOB_REASON_TIME_LIMIT, "TimeLimit");
    /* A preempted job goes back to the queue, whatever it did (here: out of memory). */
    struct exit_verdict pv = exit_verdict_of(&r, JOB_END_PREEMPT);
    assert_int_equal(pv.state, JOB_QUEUED);
    assert_int_equal(pv.reason, JOB_REASON_NONE);
    assert_null(pv.detail);
    exit_verdict_free(&pv);
    exit_record_free(&r);
    r.exit_code = 0;
    expect_verdict(&r, JOB_END_CANCEL, JOB_CANCELLED, JOB_REASON_CANCELLED_BY_USER,
                   "CancelledByUser");
    expect_verdict(&r, JOB_END_TIMEOUT, JOB_TIMEOUT, JOB_REASON_TIME_LIMIT, "TimeLimit");
}

/* [hooks]: the records' prolog_error and epilog_error, through the codec and the verdict. */
static void test_hook_errors(void **state)
{
    (void)state;
    struct exit_record r;
    exit_record_init(&r);
    r.job_id = 4;
    r.prolog_error = xstrdup("pre hook exited with status 3");
    char *text = exit_record_encode(&r);
    exit_record_free(&r);
    assert_non_null(strstr(text, ",\"prolog_error\":\"pre hook exited with status 3\"}"));
    assert_null(strstr(text, "epilog_error")); /* left out when none */
    struct exit_record back;
    assert_int_equal(exit_record_decode(text, strlen(text), &back), 0);
    free(text);
    assert_string_equal(back.prolog_error, "pre hook exited with status 3");
    assert_null(back.epilog_error);
    assert_int_equal(back.exit_code, -1);
    /* The job never ran: PrologFailed, whatever the post hook did. */
    back.epilog_error = xstrdup("post hook exited with status 1");
    expect_verdict(&back, JOB_END_NONE, JOB_FAILED, JOB_REASON_PROLOG_FAILED,
                   "PrologFailed: pre hook exited with status 3");
    /* A cancel (or time limit, preemption) outranks it, as any other outcome. */
    expect_verdict(&back, JOB_END_CANCEL, JOB_CANCELLED, JOB_REASON_CANCELLED_BY_USER,
                   "CancelledByUser");
    free(back.prolog_error);
    back.prolog_error = NULL;
    /* A failed post hook is the reason of a job that ended on its own: done, failed,
     * killed, out of memory; the exit code stays the job's. */
    back.exit_code = 0;
    expect_verdict(&back, JOB_END_NONE, JOB_FAILED, JOB_REASON_EPILOG_FAILED,
                   "EpilogFailed: post hook exited with status 1");
    back.exit_code = 2;
    expect_verdict(&back, JOB_END_NONE, JOB_FAILED, JOB_REASON_EPILOG_FAILED,
                   "EpilogFailed: post hook exited with status 1");
    back.oom = true;
    expect_verdict(&back, JOB_END_NONE, JOB_FAILED, JOB_REASON_EPILOG_FAILED,
                   "EpilogFailed: post hook exited with status 1");
    /* ...but not one that could not start (that says more), nor one the daemon ended. */
    back.oom = false;
    back.exit_code = 127;
    back.error = xstrdup("command not found: nosuch");
    expect_verdict(&back, JOB_END_NONE, JOB_FAILED, JOB_REASON_LAUNCH_FAILED,
                   "LaunchFailed: command not found: nosuch");
    expect_verdict(&back, JOB_END_TIMEOUT, JOB_TIMEOUT, JOB_REASON_TIME_LIMIT, "TimeLimit");
    exit_record_free(&back);
    /* The text forms read back as the codes (an old database, the API's reason). */
    int64_t job;
    char *detail;
    assert_int_equal(job_reason_parse("PrologFailed: pre hook exited with status 3", &job, &detail),
                     JOB_REASON_PROLOG_FAILED);
    assert_string_equal(detail, "pre hook exited with status 3");
    free(detail);
    assert_int_equal(job_reason_parse("EpilogFailed", &job, &detail), JOB_REASON_EPILOG_FAILED);
    assert_null(detail);
}

static void expect_lost(enum shim_end how, int value, const char *lock_error,
                        enum job_end_request req, enum job_state state, const char *text)
{
    struct exit_lock lock = {.error = (char *)lock_error};
    struct exit_verdict v = exit_verdict_lost(how, value, &lock, req);
    assert_int_equal(v.state, state);
    char *t = job_reason_text(v.reason, 0, v.detail);
    assert_string_equal(t, text);
    free(t);
    exit_verdict_free(&v);
}

static void test_verdict_without_exit_file(void **state)
{
    (void)state;
    expect_lost(SHIM_END_EXITED, SHIM_EXIT_FAIL, "cannot open log /x: Permission denied",
                JOB_END_NONE, JOB_FAILED, "LaunchFailed: cannot open log /x: Permission denied");
    expect_lost(SHIM_END_EXITED, SHIM_EXIT_FAIL, NULL, JOB_END_NONE, JOB_FAILED,
                "LaunchFailed: gflow-shim exited with status 1 before starting the job; see "
                "gflowd.log");
    expect_lost(SHIM_END_EXITED, SHIM_EXIT_USAGE, "", JOB_END_NONE, JOB_FAILED,
                "LaunchFailed: gflow-shim exited with status 2 before starting the job; see "
                "gflowd.log");
    expect_lost(SHIM_END_EXITED, 0, NULL, JOB_END_NONE, JOB_FAILED,
                "ShimLost: gflow-shim exited with status 0 without an exit file");
    expect_lost(SHIM_END_EXITED, 127, NULL, JOB_END_NONE, JOB_FAILED,
                "ShimLost: gflow-shim exited with status 127 without an exit file");
    expect_lost(SHIM_END_SIGNALED, SIGKILL, NULL, JOB_END_NONE, JOB_FAILED,
                "ShimLost: gflow-shim killed by SIGKILL");
    expect_lost(SHIM_END_UNKNOWN, 0, NULL, JOB_END_NONE, JOB_FAILED,
                "ShimLost: gflow-shim ended without an exit file");
    /* A re-adopted shim's status is unknown; its lock file still says why it failed. */
    expect_lost(SHIM_END_UNKNOWN, 0, "cannot write exit file", JOB_END_NONE, JOB_FAILED,
                "LaunchFailed: cannot write exit file");
    expect_lost(SHIM_END_SIGNALED, SIGKILL, NULL, JOB_END_CANCEL, JOB_CANCELLED, "CancelledByUser");
    expect_lost(SHIM_END_EXITED, SHIM_EXIT_FAIL, "why", JOB_END_TIMEOUT, JOB_TIMEOUT, "TimeLimit");
    expect_lost(SHIM_END_UNKNOWN, 0, NULL, JOB_END_CANCEL, JOB_CANCELLED, "CancelledByUser");
    struct exit_verdict pv = exit_verdict_lost(SHIM_END_SIGNALED, SIGKILL, NULL, JOB_END_PREEMPT);
    assert_int_equal(pv.state, JOB_QUEUED);
    exit_verdict_free(&pv);
    /* The job ran and only its outcome was lost: not a launch failure. */
    struct exit_lock ran = {.error = (char *)"cannot write /x: No space left on device",
                            .job_ran = true};
    struct exit_verdict v = exit_verdict_lost(SHIM_END_EXITED, SHIM_EXIT_FAIL, &ran, JOB_END_NONE);
    assert_int_equal(v.state, JOB_FAILED);
    assert_int_equal(v.reason, JOB_REASON_SHIM_LOST);
    assert_string_equal(v.detail, "cannot write /x: No space left on device");
    exit_verdict_free(&v);
    v = exit_verdict_lost(SHIM_END_UNKNOWN, 0, NULL, JOB_END_NONE);
    assert_int_equal(v.reason, JOB_REASON_SHIM_LOST);
    exit_verdict_free(&v);
}

static void test_lock_cgroup_and_forwarded_lines(void **state)
{
    (void)state;
    /* What a running shim appends, line by line. */
    char *cg = exitfile_lock_cgroup_line("/sys/fs/cgroup/gflow-job-7.123");
    assert_string_equal(cg, "cgroup: /sys/fs/cgroup/gflow-job-7.123\n");
    char *fw = exitfile_lock_forwarded_line(10);
    assert_string_equal(fw, "forwarded: 10\n");
    assert_null(exitfile_lock_cgroup_line("/a\nb"));
    assert_null(exitfile_lock_cgroup_line(""));
    char *text = xasprintf("55 66\n%scgroup: /sys/fs/cgroup/freezer/gflow/job-7.123\n%s", cg, fw);
    struct exit_lock lock;
    assert_int_equal(exitfile_lock_parse(text, strlen(text), &lock), 0);
    assert_int_equal(lock.pid, 55);
    assert_int_equal(lock.start, 66);
    assert_int_equal(lock.n_cgroups, 2);
    assert_string_equal(lock.cgroups[0], "/sys/fs/cgroup/gflow-job-7.123");
    assert_string_equal(lock.cgroups[1], "/sys/fs/cgroup/freezer/gflow/job-7.123");
    assert_int_equal(lock.forwarded, 10);
    assert_null(lock.error);
    /* The whole file round-trips, an error line after the others. */
    lock.error = xstrdup("cannot write x");
    lock.job_ran = true;
    char *again = exitfile_lock_format(&lock);
    assert_string_equal(again, "55 66\ncgroup: /sys/fs/cgroup/gflow-job-7.123\n"
                               "cgroup: /sys/fs/cgroup/freezer/gflow/job-7.123\n"
                               "forwarded: 10\nlost: cannot write x\n");
    exitfile_lock_free(&lock);
    assert_int_equal(lock.n_cgroups, 0);
    free(again);
    free(text);
    free(cg);
    free(fw);
    /* Relative paths, bad signals and lines past the limit are not taken. */
    const char odd[] = "1 2\ncgroup: relative\nforwarded: 0\nforwarded: x\ncgroup:/x\n";
    assert_int_equal(exitfile_lock_parse(odd, strlen(odd), &lock), 0);
    assert_int_equal(lock.n_cgroups, 0);
    assert_int_equal(lock.forwarded, 0);
    exitfile_lock_free(&lock);
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "1 2\n");
    for (int i = 0; i < EXITFILE_LOCK_MAX_CGROUPS + 3; i++)
        strbuf_addf(&sb, "cgroup: /cg/%d\n", i);
    assert_int_equal(exitfile_lock_parse(sb.buf, sb.len, &lock), 0);
    assert_int_equal(lock.n_cgroups, EXITFILE_LOCK_MAX_CGROUPS);
    exitfile_lock_free(&lock);
    strbuf_free(&sb);
}

static void test_marker_and_killed_count(void **state)
{
    (void)state;
    char *m = exitfile_marker(4321, 98765);
    assert_string_equal(m, "GFLOW_SHIM_ID=4321:98765");
    free(m);
    struct exit_verdict v = exit_verdict_lost(SHIM_END_SIGNALED, SIGKILL, NULL, JOB_END_NONE);
    exit_verdict_add_killed(&v, 0);
    assert_string_equal(v.detail, "gflow-shim killed by SIGKILL");
    exit_verdict_add_killed(&v, 3);
    assert_string_equal(v.detail, "gflow-shim killed by SIGKILL; its 3 processes were killed");
    exit_verdict_free(&v);
    v = exit_verdict_lost(SHIM_END_UNKNOWN, 0, NULL, JOB_END_NONE);
    exit_verdict_add_killed(&v, 1);
    assert_string_equal(v.detail,
                        "gflow-shim ended without an exit file; its 1 process was killed");
    exit_verdict_free(&v);
    /* A cancelled job's verdict has no detail to add to. */
    v = exit_verdict_lost(SHIM_END_SIGNALED, SIGKILL, NULL, JOB_END_CANCEL);
    exit_verdict_add_killed(&v, 2);
    assert_int_equal(v.state, JOB_CANCELLED);
    assert_null(v.detail);
    exit_verdict_free(&v);
}

/* The lock file with the record at EXITFILE_RECORD_AT: the lines end at the first NUL
 * (what is left of longer lines padded away), the record is read from its offset, and a
 * record cut short or missing is none. */
static void test_record_in_the_lock_file(void **state)
{
    (void)state;
    struct exit_record rec;
    exit_record_init(&rec);
    rec.job_id = 12;
    rec.exit_code = 3;
    rec.started_at = 100;
    rec.finished_at = 101;
    char *text = exit_record_encode(&rec);
    size_t rlen = strlen(text);
    size_t len = EXITFILE_RECORD_AT + rlen;
    char *file = xcalloc(1, len);
    const char *lines = "77 1234\nerror: no log\n";
    memcpy(file, lines, strlen(lines));
    memcpy(file + strlen(lines) + 5, "cgroup: /stale\n", 15); /* after the NUL padding */
    memcpy(file + EXITFILE_RECORD_AT, text, rlen);

    struct exit_lock lock;
    assert_int_equal(exitfile_lock_parse(file, len, &lock), 0);
    assert_int_equal(lock.pid, 77);
    assert_int_equal(lock.start, 1234);
    assert_string_equal(lock.error, "no log");
    assert_int_equal(lock.n_cgroups, 0);
    exitfile_lock_free(&lock);

    struct exit_record back;
    assert_int_equal(exitfile_lock_record(file, len, &back), 0);
    assert_int_equal(back.job_id, 12);
    assert_int_equal(back.exit_code, 3);
    exit_record_free(&back);
    /* A reused lock file: NULs past the record. */
    char *padded = xcalloc(1, len + 100);
    memcpy(padded, file, len);
    assert_int_equal(exitfile_lock_record(padded, len + 100, &back), 0);
    assert_int_equal(back.exit_code, 3);
    exit_record_free(&back);
    free(padded);
    /* Cut short (the shim died writing it), absent, or no lock file at all: none. */
    assert_int_equal(exitfile_lock_record(file, len - 5, &back), -1);
    assert_int_equal(back.job_id, -1);
    assert_int_equal(exitfile_lock_record(file, EXITFILE_RECORD_AT, &back), -1);
    assert_int_equal(exitfile_lock_record(file, strlen(lines), &back), -1);
    assert_int_equal(exitfile_lock_record(NULL, 0, &back), -1);
    free(file);
    free(text);
}

static void test_supervisor_line_and_job_marker(void **state)
{
    (void)state;
    /* A supervisor's job: the second line names its socket, and round-trips. */
    struct exit_lock lock = {.pid = 7, .start = 8, .supervisor = "/run/gflow/run/shim-7.sock"};
    char *text = exitfile_lock_format(&lock);
    assert_string_equal(text, "7 8\nsupervisor: /run/gflow/run/shim-7.sock\n");
    struct exit_lock back;
    assert_int_equal(exitfile_lock_parse(text, strlen(text), &back), 0);
    assert_string_equal(back.supervisor, "/run/gflow/run/shim-7.sock");
    exitfile_lock_free(&back);
    assert_null(back.supervisor);
    free(text);
    const char relative[] = "7 8\nsupervisor: shim-7.sock\n";
    assert_int_equal(exitfile_lock_parse(relative, strlen(relative), &back), 0);
    assert_null(back.supervisor);
    exitfile_lock_free(&back);
    char *m = exitfile_job_marker(4321, 98765, 12);
    assert_string_equal(m, "GFLOW_SHIM_ID=4321:98765:12");
    free(m);
}

static void test_ctl_messages(void **state)
{
    (void)state;
    char buf[SHIM_CTL_MAX], what;
    int64_t id;
    int value;
    int n = exitfile_ctl_format(buf, SHIM_CTL_FORWARD, 9007199254740993LL, 0x10a);
    assert_string_equal(buf, "F9007199254740993 266");
    assert_int_equal(exitfile_ctl_parse(buf, (size_t)n, &what, &id, &value), 0);
    assert_int_equal(what, SHIM_CTL_FORWARD);
    assert_int_equal(id, 9007199254740993LL);
    assert_int_equal(value, 0x10a);
    n = exitfile_ctl_format(buf, SHIM_CTL_TERM, 5, 99);
    assert_string_equal(buf, "T5");
    assert_int_equal(exitfile_ctl_parse(buf, (size_t)n, &what, &id, &value), 0);
    assert_int_equal(what, SHIM_CTL_TERM);
    assert_int_equal(id, 5);
    assert_int_equal(value, 0);
    n = exitfile_ctl_format(buf, SHIM_CTL_DONE, 6, 0);
    assert_int_equal(exitfile_ctl_parse(buf, (size_t)n, &what, &id, &value), 0);
    assert_int_equal(what, SHIM_CTL_DONE);
    /* Anything else is none: no id, junk after it, an unknown letter, no value. */
    const char *bad[] = {"T",   "Tx",    "T5x", "X5", "F5",
                         "F5 ", "F5 1x", "D-1", "H",  "F5 99999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(exitfile_ctl_parse(bad[i], strlen(bad[i]), &what, &id, &value), -1);
    char longer[SHIM_CTL_MAX + 4];
    memset(longer, '1', sizeof(longer));
    longer[0] = 'T';
    assert_int_equal(exitfile_ctl_parse(longer, sizeof(longer), &what, &id, &value), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_exact_text),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_invalid_utf8_still_parses),
        cmocka_unit_test(test_nulls_and_missing_fields),
        cmocka_unit_test(test_garbage_is_refused),
        cmocka_unit_test(test_encode_max_cuts_the_error),
        cmocka_unit_test(test_lock_line_without_error),
        cmocka_unit_test(test_lock_line_with_error),
        cmocka_unit_test(test_lock_line_is_capped),
        cmocka_unit_test(test_lock_parse_refuses_bad_pid_lines),
        cmocka_unit_test(test_verdict_rules),
        cmocka_unit_test(test_hook_errors),
        cmocka_unit_test(test_verdict_without_exit_file),
        cmocka_unit_test(test_lock_cgroup_and_forwarded_lines),
        cmocka_unit_test(test_marker_and_killed_count),
        cmocka_unit_test(test_record_in_the_lock_file),
        cmocka_unit_test(test_supervisor_line_and_job_marker),
        cmocka_unit_test(test_ctl_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
