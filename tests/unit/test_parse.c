/* test_parse: the command-line grammars of src/core/parse.c, good and bad inputs; every
 * error must name the bad input. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parse.h"
#include "timefmt.h"
#include "util.h"

/* Checks that parsing failed (rc) with a one-line error that mentions the input (and
 * `also`, if set); frees err. */
static void check_err(int rc, char *err, const char *input, const char *also)
{
    assert_int_equal(rc, -1);
    assert_non_null(err);
    assert_non_null(strstr(err, input));
    assert_null(strchr(err, '\n'));
    if (also)
        assert_non_null(strstr(err, also));
    free(err);
}

static int64_t time_ok(const char *s)
{
    int64_t secs = -1;
    char *err = NULL;
    assert_int_equal(parse_time_limit(s, &secs, &err), 0);
    assert_null(err);
    return secs;
}

static void time_bad(const char *s, const char *also)
{
    int64_t secs = 0;
    char *err = NULL;
    int rc = parse_time_limit(s, &secs, &err);
    check_err(rc, err, s, also);
}

static void test_time_limit_forms(void **state)
{
    (void)state;
    assert_int_equal(time_ok("5"), 300);
    assert_int_equal(time_ok("90"), 5400); /* the leading field may be any size */
    assert_int_equal(time_ok("1:30"), 90);
    assert_int_equal(time_ok("120:00"), 7200);
    assert_int_equal(time_ok("0:01"), 1);
    assert_int_equal(time_ok("1:02:03"), 3723);
    assert_int_equal(time_ok("48:00:00"), 172800);
    assert_int_equal(time_ok("2-3"), 2 * 86400 + 3 * 3600);
    assert_int_equal(time_ok("2-03:04"), 2 * 86400 + 3 * 3600 + 4 * 60);
    assert_int_equal(time_ok("2-03:04:05"), 2 * 86400 + 3 * 3600 + 4 * 60 + 5);
    assert_int_equal(time_ok("0-0:0:1"), 1);
}

/* Settings' durations (scheduler.default_time_limit): N with a unit, or a time limit. */
static void test_duration(void **state)
{
    (void)state;
    int64_t secs = 0;
    char *err = NULL;
    const struct {
        const char *s;
        int64_t secs;
    } ok[] = {{"24h", 86400},        {"90m", 5400}, {"30s", 30}, {"2d", 172800},
              {"1-00:00:00", 86400}, {"90", 5400},  {"1:30", 90}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(parse_duration(ok[i].s, &secs, &err), 0);
        assert_int_equal(secs, ok[i].secs);
    }
    const char *bad[] = {"",     "h",    "0h", "-1h", "1w",
                         "1.5h", "soon", "h1", "0",   "99999999999999999d"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse_duration(bad[i], &secs, &err), -1);
        assert_non_null(strstr(err, "N followed by s, m, h or d"));
        free(err);
        err = NULL;
    }
}

static void test_time_limit_errors(void **state)
{
    (void)state;
    time_bad("1:2:3:4", "use MM, MM:SS, HH:MM:SS or D-HH:MM:SS");
    time_bad("", NULL);
    time_bad("abc", "D-HH:MM:SS");
    time_bad("5m", NULL);
    time_bad("-5", "positive");
    time_bad("0", "positive");
    time_bad("0:00", "positive");
    time_bad("0-0", "positive");
    time_bad("1:", NULL);
    time_bad(":30", NULL);
    time_bad("1::3", NULL);
    time_bad("-1:00", NULL);
    time_bad("1-", NULL);
    time_bad("-", NULL);
    time_bad("1-2-3", NULL);
    time_bad("+5", NULL);
    time_bad(" 5", NULL);
    time_bad("1:60", "under 60");
    time_bad("1:60:00", "under 60");
    time_bad("1:00:60", "under 60");
    time_bad("1-24", "under 24");
    time_bad("1-1:60", "under 60");
    time_bad("99999999999999999999", "too large");
    time_bad("9223372036854775807", "too large");
    time_bad("999999999999999-0", "too large");
}

static void duration_is(int64_t secs, const char *want)
{
    char *s = format_duration(secs);
    assert_string_equal(s, want);
    free(s);
}

static void test_format_duration(void **state)
{
    (void)state;
    /* gflow's HH:MM:SS, hours past 24 (no days form). */
    duration_is(0, "00:00:00");
    duration_is(5, "00:00:05");
    duration_is(754, "00:12:34");
    duration_is(3599, "00:59:59");
    duration_is(3600, "01:00:00");
    duration_is(3723, "01:02:03");
    duration_is(86399, "23:59:59");
    duration_is(86400, "24:00:00");
    duration_is(90000, "25:00:00");
    duration_is(400 * 86400, "9600:00:00");
    duration_is(-7, "00:00:00");
}

static void ids_are(const char *s, const int64_t *want, size_t nwant)
{
    int64_t *ids = NULL;
    size_t n = 0;
    char *err = NULL;
    assert_int_equal(parse_id_list(s, &ids, &n, &err), 0);
    assert_null(err);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
    free(ids);
}

static void ids_bad(const char *s, const char *also)
{
    int64_t *ids = NULL;
    size_t n = 0;
    char *err = NULL;
    int rc = parse_id_list(s, &ids, &n, &err);
    check_err(rc, err, s, also);
    assert_null(ids);
}

static void test_id_list(void **state)
{
    (void)state;
    ids_are("7", (int64_t[]){7}, 1);
    ids_are("1,3,5-7", (int64_t[]){1, 3, 5, 6, 7}, 5);
    ids_are("3,1,3", (int64_t[]){3, 1, 3}, 3);
    ids_are("4-4", (int64_t[]){4}, 1);
    ids_are("9-10,2", (int64_t[]){9, 10, 2}, 3);

    int64_t *ids = NULL;
    size_t n = 0;
    char *err = NULL;
    assert_int_equal(parse_id_list("1-1000000", &ids, &n, &err), 0);
    assert_int_equal(n, 1000000);
    assert_int_equal(ids[999999], 1000000);
    free(ids);
    /* The largest id, and a range ending there, do not overflow. */
    ids_are("9223372036854775807", (int64_t[]){INT64_MAX}, 1);
    ids_are("9223372036854775806-9223372036854775807", (int64_t[]){INT64_MAX - 1, INT64_MAX}, 2);
    /* A whole list is capped, however it is split into ranges. */
    ids_bad("1-600000,1-600000", "more than 1000000 ids");
}

static void test_id_list_errors(void **state)
{
    (void)state;
    int64_t *ids = NULL;
    size_t n = 0;
    char *err = NULL;
    assert_int_equal(parse_id_list("", &ids, &n, &err), -1);
    assert_non_null(strstr(err, "empty"));
    free(err);

    ids_bad("5-3", "5-3");
    ids_bad("a", "'a'");
    ids_bad("1,,2", "empty");
    ids_bad("1,", "empty");
    ids_bad(",1", "empty");
    ids_bad("0", "start at 1");
    ids_bad("0-3", "start at 1");
    ids_bad("-1", NULL);
    ids_bad("1-", NULL);
    ids_bad("1-2-3", NULL);
    ids_bad("1 ,2", NULL);
    ids_bad("2,x7", "x7");
    ids_bad("1-1000001", "1000000");
    ids_bad("99999999999999999999", "too large");
}

static void test_job_ref(void **state)
{
    (void)state;
    int back = -1;
    char *err = NULL;
    assert_int_equal(parse_job_ref("@", &back, &err), 1);
    assert_int_equal(back, 0);
    assert_int_equal(parse_job_ref("@~2", &back, &err), 1);
    assert_int_equal(back, 2);
    assert_int_equal(parse_job_ref("@~0", &back, &err), 1);
    assert_int_equal(back, 0);
    back = -1;
    assert_int_equal(parse_job_ref("12", &back, &err), 0);
    assert_int_equal(parse_job_ref("", &back, &err), 0);
    assert_int_equal(parse_job_ref("x@", &back, &err), 0);
    assert_int_equal(back, -1);
    assert_null(err);

    const char *bad[] = {"@x", "@~", "@~-1", "@~+1", "@~2x", "@@", "@~99999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        int rc = parse_job_ref(bad[i], &back, &err);
        check_err(rc, err, bad[i], "@~N");
    }
}

static int64_t mem_ok(const char *s)
{
    int64_t mb = -1;
    char *err = NULL;
    assert_int_equal(parse_memory_mb(s, &mb, &err), 0);
    assert_null(err);
    return mb;
}

static void mem_bad(const char *s, const char *also)
{
    int64_t mb = 0;
    char *err = NULL;
    int rc = parse_memory_mb(s, &mb, &err);
    check_err(rc, err, s, also);
}

static void test_memory(void **state)
{
    (void)state;
    assert_int_equal(mem_ok("512"), 512);
    assert_int_equal(mem_ok("512M"), 512);
    assert_int_equal(mem_ok("512MB"), 512);
    assert_int_equal(mem_ok("512MiB"), 512);
    assert_int_equal(mem_ok("512m"), 512);
    assert_int_equal(mem_ok("512mib"), 512);
    assert_int_equal(mem_ok("24G"), 24576);
    assert_int_equal(mem_ok("24GB"), 24576);
    assert_int_equal(mem_ok("24GiB"), 24576);
    assert_int_equal(mem_ok("24g"), 24576);
    assert_int_equal(mem_ok("1T"), 1048576);
    assert_int_equal(mem_ok("1tb"), 1048576);
    assert_int_equal(mem_ok("2048K"), 2);
    assert_int_equal(mem_ok("2049K"), 3);
    assert_int_equal(mem_ok("1K"), 1);
    assert_int_equal(mem_ok("1kib"), 1);
}

static void test_memory_errors(void **state)
{
    (void)state;
    mem_bad("0", "positive");
    mem_bad("0G", "positive");
    mem_bad("-1", "positive");
    mem_bad("-1G", "positive");
    mem_bad("", NULL);
    mem_bad("G", NULL);
    mem_bad("abc", "24G");
    mem_bad("12X", NULL);
    mem_bad("1.5G", NULL);
    mem_bad("12 G", NULL);
    mem_bad("12GG", NULL);
    mem_bad("99999999999T", "too large");
    mem_bad("99999999999999999999", "too large");
}

static void test_priority(void **state)
{
    (void)state;
    int prio = -1;
    char *err = NULL;
    assert_int_equal(parse_priority("0", &prio, &err), 0);
    assert_int_equal(prio, 0);
    assert_int_equal(parse_priority("255", &prio, &err), 0);
    assert_int_equal(prio, 255);
    assert_int_equal(parse_priority("10", &prio, &err), 0);
    assert_int_equal(prio, 10);
    assert_null(err);

    const char *bad[] = {"256", "-1", "", "x", "1.5", " 3", "+3", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        int rc = parse_priority(bad[i], &prio, &err);
        check_err(rc, err, bad[i], "0 to 255");
    }
}

static void test_umask(void **state)
{
    (void)state;
    int mask = -1;
    char *err = NULL;
    static const struct {
        const char *text;
        int mask;
        const char *shown;
    } good[] = {{"022", 022, "0022"},
                {"0077", 077, "0077"},
                {"0", 0, "0000"},
                {"777", 0777, "0777"},
                {"0002", 02, "0002"}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_int_equal(parse_umask(good[i].text, &mask, &err), 0);
        assert_int_equal(mask, good[i].mask);
        char buf[8];
        format_umask(mask, buf);
        assert_string_equal(buf, good[i].shown);
    }
    assert_null(err);
    const char *bad[] = {"", "8", "0800", "1000", "00022", "-22", "22 ", "0x12", "u=rwx"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        int rc = parse_umask(bad[i], &mask, &err);
        check_err(rc, err, bad[i], "octal digits");
    }
}

static void quote_is(const char *word, const char *want)
{
    char *q = shell_quote(word);
    assert_string_equal(q, want);
    free(q);
}

static void sig_ok(const char *s, int want_sig, int64_t want_secs, bool want_main,
                   const char *canonical)
{
    int sig = 0;
    int64_t secs = -1;
    bool main_only = !want_main;
    char *err = NULL;
    assert_int_equal(parse_signal_spec(s, &sig, &secs, &main_only, &err), 0);
    assert_null(err);
    assert_int_equal(sig, want_sig);
    assert_int_equal(secs, want_secs);
    assert_int_equal(main_only, want_main);
    char *text = format_signal_spec(sig, secs, main_only);
    assert_string_equal(text, canonical);
    free(text);
}

static void test_signal_spec(void **state)
{
    (void)state;
    sig_ok("USR1@2", SIGUSR1, 2, false, "USR1@2");
    sig_ok("SIGUSR1@2", SIGUSR1, 2, false, "USR1@2");
    sig_ok("sigusr2", SIGUSR2, 60, false, "USR2@60");
    sig_ok("B:USR1@300", SIGUSR1, 300, true, "B:USR1@300");
    sig_ok("b:term", SIGTERM, 60, true, "B:TERM@60");
    sig_ok("10@0", 10, 0, false, "USR1@0");
    sig_ok("INT@65535", SIGINT, 65535, false, "INT@65535");
    const char *bad[] = {"",       "B:",  "@5",   "USR1@",      "USR1@-1", "USR1@x",
                         "NOPE@5", "0@5", "65@5", "USR1@65536", "USR1@5s", "A:USR1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int sig;
        int64_t secs;
        bool main_only;
        char *err = NULL;
        int rc = parse_signal_spec(bad[i], &sig, &secs, &main_only, &err);
        check_err(rc, err, bad[i], "[B:]SIG[@SECS]");
    }
}

static double begin_ok(const char *s, double now)
{
    double at = -1;
    char *err = NULL;
    assert_int_equal(parse_begin_time(s, now, &at, &err), 0);
    assert_null(err);
    return at;
}

static void test_begin_time(void **state)
{
    (void)state;
    setenv("TZ", "UTC", 1);
    tzset();
    const double now = 1764475200.25; /* 2025-11-30 04:00:00.25 UTC */
    assert_true(begin_ok("now", now) == now);
    assert_true(begin_ok("now+2s", now) == now + 2);
    assert_true(begin_ok("now+30", now) == now + 30 * 60); /* gflow: a bare N is minutes */
    assert_true(begin_ok("now+90s", now) == now + 90);
    assert_true(begin_ok("+30m", now) == now + 1800);
    assert_true(begin_ok("+2h", now) == now + 7200);
    assert_true(begin_ok("+1d", now) == now + 86400);
    assert_true(begin_ok("+45", now) == now + 45 * 60);
    assert_true(begin_ok("2025-12-01 10:20", now) == 1764547200 + 10 * 3600 + 20 * 60);
    assert_true(begin_ok("NOW+5m", now) == now + 300);
    assert_true(begin_ok("now+1h", now) == now + 3600);
    assert_true(begin_ok("now+2d", now) == now + 2 * 86400);
    /* Clock times: today, or tomorrow once passed. */
    assert_true(begin_ok("05:30", now) == 1764475200 + 5400);
    assert_true(begin_ok("5:30:15", now) == 1764475200 + 5415);
    assert_true(begin_ok("03:00", now) == 1764475200 - 3600 + 86400);
    assert_true(begin_ok("04:00", now) == 1764475200); /* this very second */
    assert_true(begin_ok("2025-12-01", now) == 1764547200);
    assert_true(begin_ok("2025-12-01T10:20", now) == 1764547200 + 10 * 3600 + 20 * 60);
    assert_true(begin_ok("2025-12-01T10:20:30", now) == 1764547200 + 10 * 3600 + 20 * 60 + 30);
    assert_true(begin_ok("2024-02-29", now) == 1709164800); /* leap day */
    /* An explicit zone: Z, +08:00, -0500, +08, fractions of a second dropped. */
    setenv("TZ", "Asia/Shanghai", 1);
    tzset();
    assert_true(begin_ok("2025-12-01T10:20:00Z", now) == 1764547200 + 10 * 3600 + 20 * 60);
    assert_true(begin_ok("2025-12-01T10:20:00z", now) == 1764547200 + 10 * 3600 + 20 * 60);
    assert_true(begin_ok("2025-12-01T18:20+08:00", now) == 1764547200 + 10 * 3600 + 20 * 60);
    assert_true(begin_ok("2025-12-01 05:20:00-0500", now) == 1764547200 + 10 * 3600 + 20 * 60);
    assert_true(begin_ok("2025-12-01 18:20 +08", now) == 1764547200 + 10 * 3600 + 20 * 60);
    assert_true(begin_ok("2025-12-01T10:20:00.123Z", now) == 1764547200 + 10 * 3600 + 20 * 60);
    /* Without one, the zone in use: 18:20 in Shanghai is 10:20 UTC. */
    assert_true(begin_ok("2025-12-01 18:20", now) == 1764547200 + 10 * 3600 + 20 * 60);
    setenv("TZ", "UTC", 1);
    tzset();
    const char *bad[] = {"",
                         "now+",
                         "now-5",
                         "now+5x",
                         "now+5ss",
                         "tomorrow",
                         "24:00",
                         "12:60",
                         "12:5",
                         "12:00:60",
                         "2025-13-01",
                         "2025-02-30",
                         "2025-12-01T",
                         "2025-12-01T25:00",
                         "2025-12-1",
                         "12:00 ",
                         "now+1y",
                         "+",
                         "+-5",
                         "+5x",
                         "++5",
                         "2025-12-01T10:20+8:00",
                         "2025-12-01T10:20+08:",
                         "2025-12-01T10:20+24:00",
                         "2025-12-01T10:20+08:60",
                         "2025-12-01T10:20Zx",
                         "2025-12-01T10:20 ",
                         "2025-12-01T10:20.Z",
                         "2025-12-01T10:20UTC"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        double at;
        char *err = NULL;
        int rc = parse_begin_time(bad[i], now, &at, &err);
        check_err(rc, err, bad[i], "now+N");
    }
}

static void test_shell_quote(void **state)
{
    (void)state;
    quote_is("x", "x");
    quote_is("/usr/bin/python3", "/usr/bin/python3");
    quote_is("--lr=0.1,a:b@c%d+e_f", "--lr=0.1,a:b@c%d+e_f");
    quote_is("", "''");
    quote_is("a b", "'a b'");
    quote_is("$HOME", "'$HOME'");
    quote_is("it's", "'it'\\''s'");
    quote_is("'", "''\\'''");
    quote_is("a;b", "'a;b'");
    quote_is("*", "'*'");
    quote_is("~", "'~'");
    quote_is("a\nb", "'a\nb'");
}

static void join_is(int argc, char **argv, const char *want)
{
    char *s = shell_join(argc, argv);
    assert_string_equal(s, want);
    free(s);
}

static void test_shell_join(void **state)
{
    (void)state;
    join_is(1, (char *[]){"echo hi && sleep 1"}, "echo hi && sleep 1");
    join_is(1, (char *[]){""}, "");
    join_is(2, (char *[]){"echo", "hello world"}, "echo 'hello world'");
    join_is(3, (char *[]){"python", "train.py", "--name=it's"},
            "python train.py '--name=it'\\''s'");
    join_is(2, (char *[]){"printf", ""}, "printf ''");
}

static void array_is(const char *spec, const char *want, int64_t want_k)
{
    int64_t *t = NULL, k = -1;
    size_t n = 0;
    char *err = NULL;
    assert_int_equal(parse_array_spec(spec, &t, &n, &k, &err), 0);
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n; i++)
        strbuf_addf(&sb, "%s%lld", i ? "," : "", (long long)t[i]);
    assert_string_equal(sb.buf ? sb.buf : "", want);
    assert_int_equal(k, want_k);
    strbuf_free(&sb);
    free(t);
}

static void array_bad(const char *spec)
{
    int64_t *t = NULL, k;
    size_t n;
    char *err = NULL;
    assert_int_equal(parse_array_spec(spec, &t, &n, &k, &err), -1);
    assert_non_null(err);
    assert_null(t);
    free(err);
}

static void test_array_spec(void **state)
{
    (void)state;
    array_is("1-10", "1,2,3,4,5,6,7,8,9,10", 0);
    array_is("1-10:2", "1,3,5,7,9", 0);
    array_is("1,3,7", "1,3,7", 0);
    array_is("0-3%2", "0,1,2,3", 2);
    array_is("7,1-3,2", "1,2,3,7", 0);
    array_is("5", "5", 0);
    array_is("0-20:10,3%1", "0,3,10,20", 1);
    /* A step past the end does not overflow (t += step did). */
    array_is("1-5:9223372036854775807", "1", 0);
    array_is("3-100000000:9223372036854775807,2", "2,3", 0);
    int64_t *t, k;
    size_t n;
    char *err = NULL;
    assert_int_equal(parse_array_spec("0-99999", &t, &n, &k, &err), 0);
    assert_int_equal(n, 100000);
    assert_int_equal(t[99999], 99999);
    free(t);
    array_bad("");
    array_bad("a");
    array_bad("1-");
    array_bad("-3");
    array_bad("1,");
    array_bad(",1");
    array_bad("3-1");
    array_bad("1-10:0");
    array_bad("1:2");
    array_bad("1-10%");
    array_bad("1-10%0");
    array_bad("1-10%x");
    array_bad("0-2000000");
    array_bad("%2");
}

static void param_is(const char *s, const char *want_name, const char *want)
{
    char *name, **v, *err = NULL;
    size_t n;
    assert_int_equal(parse_param(s, &name, &v, &n, &err), 0);
    assert_string_equal(name, want_name);
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n; i++) {
        strbuf_addf(&sb, "%s%s", i ? "|" : "", v[i]);
        free(v[i]);
    }
    assert_string_equal(sb.buf ? sb.buf : "", want);
    strbuf_free(&sb);
    free(v);
    free(name);
}

static void param_bad(const char *s)
{
    char *name, **v, *err = NULL;
    size_t n;
    assert_int_equal(parse_param(s, &name, &v, &n, &err), -1);
    assert_non_null(err);
    free(err);
}

static void test_param(void **state)
{
    (void)state;
    param_is("lr=0.1,0.01", "lr", "0.1|0.01");
    param_is("bs=32", "bs", "32");
    param_is("x=a b,'; rm -rf /'", "x", "a b|'; rm -rf /'");
    param_is("i=1:5", "i", "1|2|3|4|5");
    param_is("i=0:10:5", "i", "0|5|10");
    param_is("lr=0.1:0.5:0.1", "lr", "0.1|0.2|0.3|0.4|0.5");
    param_is("f=0:1:0.25", "f", "0|0.25|0.5|0.75|1");
    param_is("n=-1:1", "n", "-1|0|1");
    param_is("t=1:4:2", "t", "1|3");
    param_is("u=a:b,c", "u", "a:b|c"); /* a comma makes it a list */
    param_bad("_x1=");
    param_bad("novalue");
    param_bad("1x=1");
    param_bad("a-b=1");
    param_bad("=1");
    param_bad("x=1:a");
    param_bad("x=5:1");
    param_bad("x=1:5:0");
    param_bad("x=1:5:-1");
    param_bad("x=0:1e9:1e-3");
}

static void test_csv(void **state)
{
    (void)state;
    char **h, **c, *err = NULL;
    size_t nc, nr;
    assert_int_equal(
        parse_csv("lr,bs\n0.1,32\r\n\"0,2\",\"say \"\"hi\"\"\"\n\n", &h, &nc, &c, &nr, &err), 0);
    assert_int_equal(nc, 2);
    assert_int_equal(nr, 2);
    assert_string_equal(h[0], "lr");
    assert_string_equal(h[1], "bs");
    assert_string_equal(c[0], "0.1");
    assert_string_equal(c[1], "32");
    assert_string_equal(c[2], "0,2");
    assert_string_equal(c[3], "say \"hi\"");
    for (size_t i = 0; i < nc * (nr + 1); i++)
        free(h[i]);
    free(h);
    assert_int_equal(parse_csv("a,b\n1\n", &h, &nc, &c, &nr, &err), -1);
    free(err);
    err = NULL;
    assert_int_equal(parse_csv("", &h, &nc, &c, &nr, &err), -1);
    free(err);
    err = NULL;
    assert_int_equal(parse_csv("a\n\"x\n", &h, &nc, &c, &nr, &err), -1);
    free(err);
}

/* Reals as their shortest text that reads back the same (gflow's, serde's): what -o json
 * prints; plural endings. */
static void test_short_reals(void **state)
{
    (void)state;
    char out[32];
    const struct {
        double v;
        const char *text;
    } cases[] = {{0.02319, "0.02319"},
                 {0.1 + 0.2, "0.30000000000000004"},
                 {1.0 / 3, "0.3333333333333333"},
                 {2.0, "2.0"},
                 {-0.5, "-0.5"},
                 {1765000000.25, "1765000000.25"},
                 {1e21, "1e+21"},
                 {0.0, "0.0"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = format_real_short(out, cases[i].v);
        assert_string_equal(out, cases[i].text);
        assert_int_equal(n, strlen(cases[i].text));
        assert_true(strtod(out, NULL) == cases[i].v);
    }
    char *t = json_text_short_reals("{\"a\": 0.023189999999999999, \"b\": [12, -3, 1.0e2], "
                                    "\"s\": \"0.10000000000000001 \\\" 2.50\", \"n\": null}");
    assert_string_equal(t, "{\"a\": 0.02319, \"b\": [12, -3, 100.0], "
                           "\"s\": \"0.10000000000000001 \\\" 2.50\", \"n\": null}");
    free(t);
    assert_string_equal(plural_s(1), "");
    assert_string_equal(plural_s(0), "s");
    assert_string_equal(plural_s(2), "s");
    assert_string_equal(plural_s(-1), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_limit_forms),
        cmocka_unit_test(test_time_limit_errors),
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_format_duration),
        cmocka_unit_test(test_id_list),
        cmocka_unit_test(test_id_list_errors),
        cmocka_unit_test(test_job_ref),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_memory_errors),
        cmocka_unit_test(test_priority),
        cmocka_unit_test(test_umask),
        cmocka_unit_test(test_shell_quote),
        cmocka_unit_test(test_shell_join),
        cmocka_unit_test(test_signal_spec),
        cmocka_unit_test(test_begin_time),
        cmocka_unit_test(test_array_spec),
        cmocka_unit_test(test_param),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_short_reals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
