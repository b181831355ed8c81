/* test_config: unit tests of the settings module (src/core/config.c): defaults, reading
 * a TOML file, errors that name the file, line and key, environment overrides
 * (GFLOW_<SECTION>__<KEY>), config_set, and the precedence of the sources. Each test
 * writes its files in a fresh temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_file.h"
#include "files.h"
#include "gpualloc.h"
#include "paths.h"
#include "util.h"

struct fixture {
    char dir[64];
    char *path; /* <dir>/gflow.toml */
};

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_config.XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    f->path = xasprintf("%s/gflow.toml", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    unlink(f->path);
    rmdir(f->dir);
    free(f->path);
    free(f);
    return 0;
}

static void write_config(const struct fixture *f, const char *text)
{
    if (write_file_atomic(f->path, text, strlen(text), 0600) < 0)
        fail_msg("cannot write %s", f->path);
}

/* Loads text from the fixture's file, expecting an error; returns it (caller frees). */
static char *load_error(const struct fixture *f, const char *text)
{
    struct gflow_config c;
    config_init(&c);
    write_config(f, text);
    char *err = NULL;
    assert_int_equal(config_load_file(&c, f->path, true, &err), -1);
    assert_non_null(err);
    config_free(&c);
    return err;
}

static void assert_error(char *err, const char *expected)
{
    assert_string_equal(err, expected);
    free(err);
}

/* The same with an expected text that was made for the check (and is freed by it). */
static void assert_error_owned(char *err, char *expected)
{
    assert_error(err, expected);
    free(expected);
}

static void test_defaults(void **state)
{
    struct gflow_config c;
    config_init(&c);
    assert_null(c.socket_path);
    assert_null(c.data_dir);
    assert_null(c.admin_group);
    assert_null(c.source_path);
    assert_int_equal(c.max_running_jobs, 0);
    assert_int_equal(c.kill_grace_secs, 10);
    assert_int_equal(c.limits.max_request_bytes, 8 * 1024 * 1024);
    assert_string_equal(c.log_level, "info");
    assert_null(c.log_dir);
    assert_int_equal(c.max_log_bytes, 1024LL * 1024 * 1024);
    config_free(&c);
}

static void test_file_load(void **state)
{
    struct fixture *f = *state;
    write_config(f, "# gflow settings\n"
                    "[daemon]\n"
                    "socket_path = \"/run/x.sock\"\n"
                    "data_dir = '/srv/gflow'\n"
                    "max_running_jobs = 4\n"
                    "kill_grace_secs = 0\n"
                    "admin_group = \"lab\"\n"
                    "log_level = \"debug\"\n");
    struct gflow_config c;
    config_init(&c);
    char *err = NULL;
    assert_int_equal(config_load_file(&c, f->path, true, &err), 0);
    assert_string_equal(c.socket_path, "/run/x.sock");
    assert_string_equal(c.data_dir, "/srv/gflow");
    assert_int_equal(c.max_running_jobs, 4);
    assert_int_equal(c.kill_grace_secs, 0);
    assert_int_equal(c.limits.max_request_bytes, 8388608); /* absent: keeps its value */
    assert_string_equal(c.admin_group, "lab");
    assert_string_equal(c.log_level, "debug");
    assert_string_equal(c.source_path, f->path);
    config_free(&c);
}

static void test_missing_file(void **state)
{
    struct fixture *f = *state;
    struct gflow_config c;
    config_init(&c);
    char *err = NULL;
    assert_int_equal(config_load_file(&c, f->path, false, &err), 0);
    assert_null(c.source_path);
    assert_int_equal(config_load_file(&c, f->path, true, &err), -1);
    char *expected = xasprintf("%s: No such file or directory", f->path);
    assert_error(err, expected);
    free(expected);
    config_free(&c);
}

static void test_unknown_key_names_file_line_key(void **state)
{
    struct fixture *f = *state;
    char *expected = xasprintf("%s:3: unknown key 'daemon.foo'", f->path);
    assert_error(load_error(f, "[daemon]\nkill_grace_secs = 3\nfoo = 1\n"), expected);
    free(expected);

    expected = xasprintf("%s:2: unknown section 'web'", f->path);
    assert_error(load_error(f, "\n[web]\nport = 1\n"), expected);
    free(expected);

    expected = xasprintf("%s:1: unknown key 'log_level'", f->path);
    assert_error(load_error(f, "log_level = 'info'\n"), expected);
    free(expected);

    expected = xasprintf("%s:2: unknown key 'daemon.log'", f->path);
    assert_error(load_error(f, "[daemon]\nlog.level = 'info'\n"), expected);
    free(expected);
}

static void test_wrong_type(void **state)
{
    struct fixture *f = *state;
    char *expected = xasprintf("%s:4: daemon.kill_grace_secs must be an integer >= 0", f->path);
    assert_error(load_error(f, "[daemon]\n\nlog_level = 'warn'\nkill_grace_secs = \"5\"\n"),
                 expected);
    assert_error(load_error(f, "[daemon]\n\n\nkill_grace_secs = -1\n"), expected);
    free(expected);

    expected = xasprintf("%s:2: daemon.max_request_bytes must be an integer > 0", f->path);
    assert_error(load_error(f, "[daemon]\nmax_request_bytes = 0\n"), expected);
    free(expected);

    expected = xasprintf("%s:2: daemon.log_level must be one of error, warn, info, debug", f->path);
    assert_error(load_error(f, "[daemon]\nlog_level = 'loud'\n"), expected);
    free(expected);

    expected = xasprintf("%s:2: daemon.socket_path must be a string", f->path);
    assert_error(load_error(f, "[daemon]\nsocket_path = 1\n"), expected);
    free(expected);
}

static void test_syntax_error_and_atomicity(void **state)
{
    struct fixture *f = *state;
    char *expected = xasprintf("%s:2:21: expected a newline, found 'x'", f->path);
    assert_error(load_error(f, "[daemon]\nkill_grace_secs = 3 x\n"), expected);
    free(expected);

    /* A file with an error changes nothing, even keys before the error. */
    struct gflow_config c;
    config_init(&c);
    write_config(f, "[daemon]\nkill_grace_secs = 3\nlog_level = 'debug'\nbogus = 1\n");
    char *err = NULL;
    assert_int_equal(config_load_file(&c, f->path, true, &err), -1);
    free(err);
    assert_int_equal(c.kill_grace_secs, 10);
    assert_string_equal(c.log_level, "info");
    config_free(&c);
}

static void test_bool_key(void **state)
{
    struct fixture *f = *state;
    struct gflow_config c;
    char *err = NULL;
    config_init(&c);
    assert_false(c.constrain_devices);
    write_config(f, "[daemon]\nconstrain_devices = true\n");
    assert_int_equal(config_load_file(&c, f->path, true, &err), 0);
    assert_true(c.constrain_devices);
    assert_int_equal(config_set(&c, "daemon.constrain_devices", "false", &err), 0);
    assert_false(c.constrain_devices);
    assert_int_equal(config_set(&c, "daemon.constrain_devices", "yes", &err), -1);
    assert_non_null(strstr(err, "daemon.constrain_devices must be true or false"));
    free(err);
    config_free(&c);

    char *expected = xasprintf("%s:2: daemon.constrain_devices must be true or false", f->path);
    assert_error(load_error(f, "[daemon]\nconstrain_devices = 'true'\n"), expected);
    free(expected);
}

static void test_env_override(void **state)
{
    char *envp[] = {
        "GFLOW_DAEMON__KILL_GRACE_SECS=3",
        "GFLOW_DAEMON__ADMIN_GROUP=wheel",
        "GFLOW_SOCKET=/ignored.sock", /* not of the <SECTION>__<KEY> shape */
        "GFLOW_JOB_ID=7",
        "HOME=/root",
        NULL,
    };
    struct gflow_config c;
    config_init(&c);
    char *err = NULL;
    assert_int_equal(config_load_env(&c, envp, &err), 0);
    assert_int_equal(c.kill_grace_secs, 3);
    assert_string_equal(c.admin_group, "wheel");
    assert_null(c.socket_path);
    config_free(&c);
}

static void test_env_errors(void **state)
{
    struct gflow_config c;
    config_init(&c);
    char *err = NULL;
    char *unknown[] = {"GFLOW_DAEMON__FOO=1", NULL};
    assert_int_equal(config_load_env(&c, unknown, &err), -1);
    assert_error(err, "environment GFLOW_DAEMON__FOO: unknown key 'daemon.foo'");

    char *bad[] = {"GFLOW_DAEMON__MAX_RUNNING_JOBS=lots", NULL};
    assert_int_equal(config_load_env(&c, bad, &err), -1);
    assert_error(err, "environment GFLOW_DAEMON__MAX_RUNNING_JOBS: daemon.max_running_jobs "
                      "must be an integer >= 0 (got 'lots')");
    config_free(&c);
}

static void test_config_set(void **state)
{
    struct gflow_config c;
    config_init(&c);
    char *err = NULL;
    assert_int_equal(config_set(&c, "daemon.max_running_jobs", "12", &err), 0);
    assert_int_equal(c.max_running_jobs, 12);
    assert_int_equal(config_set(&c, "daemon.data_dir", " /with space ", &err), 0);
    assert_string_equal(c.data_dir, " /with space ");
    assert_int_equal(config_set(&c, "daemon.log_level", "error", &err), 0);
    assert_string_equal(c.log_level, "error");

    static const char *const not_decimal[] = {"", " 5", "5 ", "+5", "0x10", "1e3", "5s", "-"};
    for (size_t i = 0; i < sizeof(not_decimal) / sizeof(not_decimal[0]); i++) {
        assert_int_equal(config_set(&c, "daemon.kill_grace_secs", not_decimal[i], &err), -1);
        free(err);
    }
    assert_int_equal(config_set(&c, "daemon.kill_grace_secs", "-1", &err), -1);
    assert_error(err, "daemon.kill_grace_secs must be an integer >= 0 (got '-1')");
    assert_int_equal(config_set(&c, "daemon.max_request_bytes", "99999999999999999999", &err), -1);
    free(err);
    assert_int_equal(c.kill_grace_secs, 10);
    assert_int_equal(config_set(&c, "daemon.nope", "1", &err), -1);
    assert_error(err, "unknown key 'daemon.nope'");
    config_free(&c);
}

/* The settings the daemon reads often are parsed once, with their text: defaults, a
 * change, and a refused change that leaves both as they were. */
static void test_parsed_settings(void **state)
{
    struct gflow_config c;
    config_init(&c);
    assert_int_equal(c.parsed.default_time_limit_secs, 24 * 3600);
    assert_int_equal(c.parsed.preempt_grace_secs, 30);
    assert_int_equal(c.parsed.priority_max_age_secs, 7 * 86400);
    assert_int_equal(c.parsed.fairshare_half_life_secs, 7 * 86400);
    assert_int_equal(c.parsed.gpu_allocation_strategy, GPUALLOC_TOPOLOGY);
    assert_int_equal(c.parsed.backfill_untimed, CONFIG_UNTIMED_PLANNED);
    assert_int_equal(c.parsed.backend, CONFIG_BACKEND_LOCAL);
    char *err = NULL;
    assert_int_equal(config_set(&c, "scheduler.default_time_limit", "90m", &err), 0);
    assert_int_equal(config_set(&c, "scheduler.preempt_grace", "2m", &err), 0);
    assert_int_equal(config_set(&c, "scheduler.priority_max_age", "1d", &err), 0);
    assert_int_equal(config_set(&c, "scheduler.fairshare_half_life", "12h", &err), 0);
    assert_int_equal(config_set(&c, "daemon.gpu_allocation_strategy", "random", &err), 0);
    assert_int_equal(config_set(&c, "scheduler.backfill_untimed", "outside", &err), 0);
    assert_int_equal(config_set(&c, "backend.kind", "slurm", &err), 0);
    assert_int_equal(c.parsed.default_time_limit_secs, 90 * 60);
    assert_int_equal(c.parsed.preempt_grace_secs, 120);
    assert_int_equal(c.parsed.priority_max_age_secs, 86400);
    assert_int_equal(c.parsed.fairshare_half_life_secs, 12 * 3600);
    assert_int_equal(c.parsed.gpu_allocation_strategy, GPUALLOC_RANDOM);
    assert_int_equal(c.parsed.backfill_untimed, CONFIG_UNTIMED_OUTSIDE);
    assert_int_equal(c.parsed.backend, CONFIG_BACKEND_SLURM);
    assert_int_equal(config_set(&c, "scheduler.preempt_grace", "soon", &err), -1);
    free(err);
    assert_int_equal(config_set(&c, "backend.kind", "pbs", &err), -1);
    free(err);
    assert_string_equal(c.scheduler_preempt_grace, "2m");
    assert_int_equal(c.parsed.preempt_grace_secs, 120);
    assert_int_equal(c.parsed.backend, CONFIG_BACKEND_SLURM);
    config_free(&c);
}

/* [hooks]: none by default, a 60 s timeout; set from a file, refused when wrong. */
static void test_hooks_keys(void **state)
{
    (void)state;
    struct gflow_config c;
    config_init(&c);
    assert_string_equal(c.hooks_pre, "");
    assert_string_equal(c.hooks_post, "");
    assert_int_equal(c.parsed.hooks_timeout_secs, 60);
    const char *text = "[hooks]\npre = \"/opt/site/pre.sh\"\npost = \"rm -rf /tmp/$GFLOW_JOB_ID\"\n"
                       "timeout = \"5m\"\n";
    char *err = NULL;
    assert_int_equal(config_load_text(&c, "h.toml", text, strlen(text), &err), 0);
    assert_string_equal(c.hooks_pre, "/opt/site/pre.sh");
    assert_string_equal(c.hooks_post, "rm -rf /tmp/$GFLOW_JOB_ID");
    assert_int_equal(c.parsed.hooks_timeout_secs, 300);
    text = "[hooks]\ntimeout = \"soon\"\n";
    assert_int_equal(config_load_text(&c, "h.toml", text, strlen(text), &err), -1);
    assert_non_null(strstr(err, "h.toml:2: hooks.timeout"));
    free(err);
    err = NULL;
    text = "[hooks]\nprolog = \"x\"\n";
    assert_int_equal(config_load_text(&c, "h.toml", text, strlen(text), &err), -1);
    assert_string_equal(err, "h.toml:2: unknown key 'hooks.prolog'");
    free(err);
    assert_int_equal(c.parsed.hooks_timeout_secs, 300); /* all or nothing */
    config_free(&c);
}

static void test_precedence_env_over_file(void **state)
{
    struct fixture *f = *state;
    write_config(f, "[daemon]\nkill_grace_secs = 5\nmax_running_jobs = 2\n");
    setenv("GFLOW_DAEMON__KILL_GRACE_SECS", "3", 1);
    struct gflow_config c;
    char *err = NULL;
    int r = config_load(&c, f->path, &err);
    unsetenv("GFLOW_DAEMON__KILL_GRACE_SECS");
    assert_int_equal(r, 0);
    assert_int_equal(c.kill_grace_secs, 3);  /* environment beats the file */
    assert_int_equal(c.max_running_jobs, 2); /* the file beats the default */
    assert_int_equal(c.limits.max_request_bytes, 8388608);
    /* flags come last: the caller applies them with config_set */
    assert_int_equal(config_set(&c, "daemon.kill_grace_secs", "1", &err), 0);
    assert_int_equal(c.kill_grace_secs, 1);
    config_free(&c);
}

/* daemon.log_dir moves the job logs away from the data directory (and its database);
 * daemon.max_log_bytes caps each job's log, 0 meaning no cap. */
static void test_log_keys(void **state)
{
    struct fixture *f = *state;
    write_config(f, "[daemon]\n"
                    "data_dir = '/srv/gflow'\n"
                    "log_dir = '/scratch/gflow-logs'\n"
                    "max_log_bytes = 4096\n");
    struct gflow_config c;
    config_init(&c);
    char *err = NULL;
    assert_int_equal(config_load_file(&c, f->path, true, &err), 0);
    assert_string_equal(c.log_dir, "/scratch/gflow-logs");
    assert_int_equal(c.max_log_bytes, 4096);
    struct gflow_paths p;
    paths_resolve(&p, &c, true);
    assert_string_equal(p.log_dir, "/scratch/gflow-logs");
    assert_string_equal(p.db_path, "/srv/gflow/gflow.db");
    paths_free(&p);
    free(c.log_dir);
    c.log_dir = NULL;
    paths_resolve(&p, &c, true);
    assert_string_equal(p.log_dir, "/srv/gflow/logs"); /* the default: <data>/logs */
    paths_free(&p);

    assert_int_equal(config_set(&c, "daemon.max_log_bytes", "0", &err), 0); /* no cap */
    assert_int_equal(c.max_log_bytes, 0);
    assert_int_equal(config_set(&c, "daemon.max_log_bytes", "-1", &err), -1);
    assert_string_equal(err, "daemon.max_log_bytes must be an integer >= 0 (got '-1')");
    free(err);
    err = NULL;
    char *env[] = {"GFLOW_DAEMON__LOG_DIR=/elsewhere", "GFLOW_DAEMON__MAX_LOG_BYTES=1048576", NULL};
    assert_int_equal(config_load_env(&c, env, &err), 0);
    assert_string_equal(c.log_dir, "/elsewhere");
    assert_int_equal(c.max_log_bytes, 1048576);
    config_free(&c);
    char *expected = xasprintf("%s:2: daemon.max_log_bytes must be an integer >= 0", f->path);
    assert_error(load_error(f, "[daemon]\nmax_log_bytes = '1G'\n"), expected);
    free(expected);
}

static void test_default_path(void **state)
{
    char *saved_xdg = getenv("XDG_CONFIG_HOME") ? xstrdup(getenv("XDG_CONFIG_HOME")) : NULL;
    char *saved_home = getenv("HOME") ? xstrdup(getenv("HOME")) : NULL;
    setenv("XDG_CONFIG_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    char *p = config_default_path(false);
    assert_string_equal(p, "/xdg/gflow/gflow.toml");
    free(p);
    unsetenv("XDG_CONFIG_HOME");
    p = config_default_path(false);
    assert_string_equal(p, "/home/u/.config/gflow/gflow.toml");
    free(p);
    p = config_default_path(true);
    assert_string_equal(p, "/etc/gflow/gflow.toml");
    free(p);
    if (saved_xdg)
        setenv("XDG_CONFIG_HOME", saved_xdg, 1);
    if (saved_home)
        setenv("HOME", saved_home, 1);
    else
        unsetenv("HOME");
    free(saved_xdg);
    free(saved_home);
}

/* gflow's keys: lists, the nested [daemon.fair_share], [projects], [executor]. */
static void test_gflow_keys(void **state)
{
    struct fixture *f = *state;
    write_config(f, "[daemon]\nhost = \"localhost\"\nport = 59000\ngpus = [0, 2]\n"
                    "gpu_allocation_strategy = \"sequential\"\n"
                    "[daemon.fair_share]\nhalf_life_secs = 3600\n"
                    "[projects]\nknown_projects = [\"ml-research\", \"cv-team\"]\n"
                    "require_project = true\n[executor]\ntype = \"tmux\"\n");
    struct gflow_config c;
    config_init(&c);
    assert_false(c.fair_share_enabled);
    assert_int_equal(c.n_warnings, 0);
    char *err = NULL;
    assert_int_equal(config_load_file(&c, f->path, true, &err), 0);
    assert_string_equal(c.host, "localhost");
    assert_int_equal(c.port, 59000);
    assert_string_equal(c.gpus, "0,2");
    assert_true(c.fair_share_enabled); /* the table's own default, as gflow's */
    assert_int_equal(c.fair_share_half_life_secs, 3600);
    assert_string_equal(c.known_projects, "ml-research,cv-team");
    assert_true(c.require_project);
    /* One warning, for tmux. */
    assert_int_equal(c.n_warnings, 1);
    assert_non_null(strstr(c.warnings[0], "executor.type"));
    /* The env's nested keys: every "__" is a level. */
    char *env[] = {"GFLOW_DAEMON__FAIR_SHARE__ENABLED=false", "GFLOW_EXECUTOR__TYPE=process", NULL};
    assert_int_equal(config_load_env(&c, env, &err), 0);
    assert_false(c.fair_share_enabled);
    assert_int_equal(c.n_warnings, 0);
    config_free(&c);

    assert_error_owned(load_error(f, "[daemon]\ngpus = []\n"),
                       xasprintf("%s:2: daemon.gpus = [] names no GPU; leave it out (or \"all\") "
                                 "for every GPU",
                                 f->path));
    assert_error_owned(load_error(f, "[daemon.fair_share]\nenable = true\n"),
                       xasprintf("%s:2: unknown key 'daemon.fair_share.enable'", f->path));
    assert_error_owned(
        load_error(f, "[projects]\nknown_projects = [\"a,b\"]\n"),
        xasprintf("%s:2: projects.known_projects must be a list of names without ',' "
                  "(e.g. [\"a\", \"b\"])",
                  f->path));
    assert_error_owned(load_error(f, "[executor]\ntype = \"docker\"\n"),
                       xasprintf("%s:2: executor.type must be one of process, tmux", f->path));
}

static void test_fair_share_priority(void **state)
{
    struct gflow_config c;
    config_init(&c);
    struct config_priority p;
    config_priority(&c, &p);
    assert_int_equal(p.weight_priority, 255);
    assert_int_equal(p.weight_fairshare, 0);
    assert_int_equal(p.half_life_secs, 7 * 86400);
    char *err = NULL;
    assert_int_equal(config_set(&c, "daemon.fair_share.enabled", "true", &err), 0);
    assert_int_equal(config_set(&c, "daemon.fair_share.half_life_secs", "60", &err), 0);
    config_priority(&c, &p);
    /* One --priority step (1000) outweighs the whole fair-share factor (999). */
    assert_int_equal(p.weight_priority, 255000);
    assert_int_equal(p.weight_fairshare, 999);
    assert_int_equal(p.half_life_secs, 60);
    /* Weights and a half-life of one's own win. */
    assert_int_equal(config_set(&c, "scheduler.priority_weight_fairshare", "5", &err), 0);
    assert_int_equal(config_set(&c, "scheduler.fairshare_half_life", "1d", &err), 0);
    config_priority(&c, &p);
    assert_int_equal(p.weight_priority, 255);
    assert_int_equal(p.weight_fairshare, 5);
    assert_int_equal(p.half_life_secs, 86400);
    config_free(&c);
}

static void test_project_policy(void **state)
{
    struct gflow_config c;
    config_init(&c);
    char *err = NULL;
    assert_int_equal(config_check_project(&c, NULL, &err), 0);
    assert_int_equal(config_check_project(&c, "any", &err), 0);
    assert_int_equal(config_set(&c, "projects.known_projects", "ml,cv", &err), 0);
    assert_int_equal(config_check_project(&c, NULL, &err), 0);
    assert_int_equal(config_check_project(&c, "cv", &err), 0);
    assert_int_equal(config_check_project(&c, "c", &err), -1);
    assert_error(err, "unknown project 'c' (projects.known_projects): use one of ml,cv");
    assert_int_equal(config_set(&c, "projects.require_project", "true", &err), 0);
    assert_int_equal(config_check_project(&c, "", &err), -1);
    assert_error(err, "a project is required (projects.require_project): submit with --project "
                      "NAME, one of ml,cv");
    assert_int_equal(config_set(&c, "projects.known_projects", "a, b", &err), -1);
    free(err);
    config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test_setup_teardown(test_file_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_key_names_file_line_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_syntax_error_and_atomicity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bool_key, setup, teardown),
        cmocka_unit_test(test_env_override),
        cmocka_unit_test(test_env_errors),
        cmocka_unit_test(test_config_set),
        cmocka_unit_test(test_parsed_settings),
        cmocka_unit_test(test_hooks_keys),
        cmocka_unit_test_setup_teardown(test_precedence_env_over_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_keys, setup, teardown),
        cmocka_unit_test(test_default_path),
        cmocka_unit_test_setup_teardown(test_gflow_keys, setup, teardown),
        cmocka_unit_test(test_fair_share_priority),
        cmocka_unit_test(test_project_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
