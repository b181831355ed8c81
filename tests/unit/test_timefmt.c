/* test_timefmt: the one time style (src/core/timefmt.c): moments as "YYYY-MM-DD
 * HH:MM:SS" in the zone in use, durations as HH:MM:SS, which zones are accepted, and
 * that the loader runs once, on first use. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "parse.h"
#include "timefmt.h"

static int loads;

static void load_shanghai(void)
{
    char *err = NULL;
    loads++;
    assert_int_equal(timefmt_use_zone("Asia/Shanghai", &err), 0);
}

static void time_is(double t, const char *want)
{
    char *s = format_time(t);
    assert_string_equal(s, want);
    free(s);
}

static void test_loader_and_zone(void **state)
{
    (void)state;
    setenv("TZ", "UTC", 1);
    timefmt_set_loader(load_shanghai);
    assert_int_equal(loads, 0);
    time_is(1764547200, "2025-12-01 08:00:00"); /* 00:00 UTC, in Shanghai */
    time_is(1764547200, "2025-12-01 08:00:00");
    assert_int_equal(loads, 1);
    char *z = format_time_zone(1764547200);
    assert_string_equal(z, "2025-12-01 08:00:00 CST");
    free(z);
    time_is(0, "-");
    time_is(-5, "-");
    /* A naive time is read in the same zone; one with an offset is not. */
    double at;
    assert_int_equal(parse_datetime("2025-12-01 08:00", &at, NULL), 0);
    assert_true(at == 1764547200);
    assert_int_equal(parse_datetime("2025-12-01T08:00:00Z", &at, NULL), 0);
    assert_true(at == 1764547200 + 8 * 3600);
    /* An explicit zone wins from then on. */
    char *err = NULL;
    assert_int_equal(timefmt_use_zone("UTC", &err), 0);
    time_is(1764547200, "2025-12-01 00:00:00");
    assert_int_equal(timefmt_use_zone("America/New_York", &err), 0);
    time_is(1764547200, "2025-11-30 19:00:00");
    assert_int_equal(loads, 1);
}

static void test_zone_check(void **state)
{
    (void)state;
    const char *good[] = {"UTC", "Asia/Shanghai", "Europe/Berlin", "America/Los_Angeles"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char *err = NULL;
        assert_int_equal(timefmt_zone_check(good[i], &err), 0);
        assert_null(err);
    }
    const char *bad[] = {
        "",      "Mars/Olympus", "Asia",           "../etc/passwd", "/etc/localtime", "Asia/../UTC",
        "local", "UTC ",         "Asia//Shanghai", "zone.tab"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *err = NULL;
        assert_int_equal(timefmt_zone_check(bad[i], &err), -1);
        assert_non_null(strstr(err, "unknown time zone"));
        assert_non_null(strstr(err, "Asia/Shanghai"));
        free(err);
    }
}

static void duration_is(int64_t secs, const char *want)
{
    char buf[32];
    format_duration_buf(buf, sizeof(buf), secs);
    assert_string_equal(buf, want);
    char *s = format_duration(secs);
    assert_string_equal(s, want);
    free(s);
}

static void test_duration(void **state)
{
    (void)state;
    duration_is(0, "00:00:00");
    duration_is(2, "00:00:02");
    duration_is(9045, "02:30:45");
    duration_is(90000, "25:00:00");
    duration_is(-1, "00:00:00");
}

/* The top-level `timezone` key: in the file (before any section), GFLOW_TIMEZONE, checked. */
static void load_is(const char *text, const char *zone, const char *err_has)
{
    struct gflow_config c;
    config_init(&c);
    char *err = NULL;
    int r = config_load_text(&c, "f.toml", text, strlen(text), &err);
    if (err_has) {
        assert_int_equal(r, -1);
        assert_non_null(strstr(err, err_has));
        free(err);
    } else {
        assert_int_equal(r, 0);
        if (zone)
            assert_string_equal(c.timezone, zone);
        else
            assert_null(c.timezone);
    }
    config_free(&c);
}

static void test_config_key(void **state)
{
    (void)state;
    load_is("", NULL, NULL);
    load_is("timezone = \"Asia/Shanghai\"\n[daemon]\nmax_running_jobs = 2\n", "Asia/Shanghai",
            NULL);
    load_is("timezone = \"UTC\"\n", "UTC", NULL);
    load_is("\n\ntimezone = \"Mars/Olympus\"\n", NULL,
            "f.toml:3: timezone: unknown time zone 'Mars/Olympus'");
    load_is("timezone = 8\n", NULL, "f.toml:1: timezone must be a string");
    load_is("[daemon]\ntimezone = \"UTC\"\n", NULL, "unknown key 'daemon.timezone'");
    load_is("[timezone]\nx = 1\n", NULL, "f.toml:1:");
    struct gflow_config c;
    config_init(&c);
    char *err = NULL;
    char *env_ok[] = {"GFLOW_TIMEZONE=Europe/Berlin", "GFLOW_SOCKET=/x", NULL};
    assert_int_equal(config_load_env(&c, env_ok, &err), 0);
    assert_string_equal(c.timezone, "Europe/Berlin");
    char *env_bad[] = {"GFLOW_TIMEZONE=Nowhere", NULL};
    assert_int_equal(config_load_env(&c, env_bad, &err), -1);
    assert_non_null(strstr(err, "GFLOW_TIMEZONE"));
    assert_non_null(strstr(err, "unknown time zone 'Nowhere'"));
    free(err);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader_and_zone),
        cmocka_unit_test(test_zone_check),
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_config_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
