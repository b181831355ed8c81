/* test_sweep: arrays and parameter sweeps (src/core/sweep.c): expanding one spec into
 * many jobs (names, task ids, the shared environment, filled commands, the kept values
 * and templates, bad rows), rewriting a sweep's job for update/redo, and the safe
 * filling of values into shell text. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "sweep.h"
#include "util.h"

static struct job *base_job(const char *command)
{
    struct job *j = job_new();
    j->name = xstrdup("train");
    j->command = xstrdup(command);
    j->env = json_pack("{ss}", "PATH", "/usr/bin");
    return j;
}

static void free_jobs(struct job **jobs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        job_free(jobs[i]);
    free(jobs);
}

static void test_expand_array(void **state)
{
    (void)state;
    struct job *base = base_job("python run.py");
    json_t *array = json_string("1-5:2%2");
    struct job **jobs;
    size_t n;
    int64_t limit;
    char *err = NULL;
    assert_int_equal(sweep_expand(base, array, NULL, NULL, &jobs, &n, &limit, &err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(limit, 2);
    const int64_t tasks[] = {1, 3, 5};
    const char *names[] = {"train_1", "train_3", "train_5"};
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(jobs[i]->array_task, tasks[i]);
        assert_string_equal(jobs[i]->name, names[i]);
        assert_string_equal(jobs[i]->command, "python run.py");
        /* Every task shares one environment object: stored once (store_insert_job). */
        assert_ptr_equal(jobs[i]->env, jobs[0]->env);
        assert_null(jobs[i]->params);
    }
    free_jobs(jobs, n);
    json_decref(array);

    /* NAME_<task> longer than a name may be: NAME is cut so that every task's name is
     * valid (found by tests/fuzz/fuzz_jobspec). */
    base = base_job("x");
    free(base->name);
    base->name = xmalloc(JOB_NAME_MAX + 1);
    memset(base->name, 'n', JOB_NAME_MAX);
    base->name[JOB_NAME_MAX] = '\0';
    array = json_string("9,10");
    assert_int_equal(sweep_expand(base, array, NULL, NULL, &jobs, &n, &limit, &err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(strlen(jobs[0]->name), JOB_NAME_MAX);
    assert_string_equal(jobs[0]->name + JOB_NAME_MAX - 2, "_9");
    assert_int_equal(strlen(jobs[1]->name), JOB_NAME_MAX);
    assert_string_equal(jobs[1]->name + JOB_NAME_MAX - 3, "_10");
    assert_true(job_name_valid(jobs[0]->name) && job_name_valid(jobs[1]->name));
    free_jobs(jobs, n);
    json_decref(array);

    array = json_string("5-1");
    assert_int_equal(sweep_expand(base_job("x"), array, NULL, NULL, &jobs, &n, &limit, &err), -1);
    assert_non_null(err);
    free(err);
    json_decref(array);
}

static void test_expand_params(void **state)
{
    (void)state;
    json_t *params = json_pack("{s:[s,s], s:[[s,s],[s,s]]}", "names", "lr", "opt", "rows", "0.1",
                               "adam", "a b", "sgd");
    json_t *tmpl = json_string("lr{lr}-{opt}");
    struct job **jobs;
    size_t n;
    int64_t limit;
    char *err = NULL;
    assert_int_equal(sweep_expand(base_job("python t.py --lr {lr} --opt={opt}"), NULL, params, tmpl,
                                  &jobs, &n, &limit, &err),
                     0);
    assert_int_equal(n, 2);
    assert_int_equal(limit, 0);
    assert_string_equal(jobs[0]->command, "python t.py --lr 0.1 --opt=adam");
    assert_string_equal(jobs[1]->command, "python t.py --lr 'a b' --opt=sgd");
    assert_string_equal(jobs[0]->name, "lr0.1-adam");
    assert_string_equal(jobs[1]->name, "lra b-sgd");
    /* The values and templates are kept for gjob update --param: the values by each job,
     * the templates by the first, the group's leader, whose payload the store shares. */
    assert_string_equal(jobs[0]->command_template, "python t.py --lr {lr} --opt={opt}");
    assert_string_equal(jobs[0]->name_template, "lr{lr}-{opt}");
    assert_null(jobs[1]->command_template);
    assert_null(jobs[1]->name_template);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(json_object_size(jobs[i]->params), 2);
    assert_string_equal(json_string_value(json_object_get(jobs[1]->params, "lr")), "a b");
    free_jobs(jobs, n);

    /* Without a template, NAME_<row>. */
    assert_int_equal(
        sweep_expand(base_job("echo {lr}"), NULL, params, NULL, &jobs, &n, &limit, &err), 0);
    assert_string_equal(jobs[1]->name, "train_2");
    free_jobs(jobs, n);
    json_decref(tmpl);

    /* A row of the wrong size, a template making an invalid name, a bad name. */
    json_t *short_row = json_pack("{s:[s,s], s:[[s]]}", "names", "lr", "opt", "rows", "1");
    assert_int_equal(sweep_expand(base_job("x"), NULL, short_row, NULL, &jobs, &n, &limit, &err),
                     -1);
    assert_string_equal(err, "params: row 1 must be a list of 2 strings");
    free(err);
    json_t *ctl = json_string("a\n{lr}");
    assert_int_equal(sweep_expand(base_job("x"), NULL, params, ctl, &jobs, &n, &limit, &err), -1);
    assert_non_null(strstr(err, "is not valid"));
    free(err);
    json_t *bad_name = json_pack("{s:[s], s:[[s]]}", "names", "1x", "rows", "1");
    assert_int_equal(sweep_expand(base_job("x"), NULL, bad_name, NULL, &jobs, &n, &limit, &err),
                     -1);
    free(err);
    json_decref(short_row);
    json_decref(ctl);
    json_decref(bad_name);
    json_decref(params);
}

/* A stored sweep job: values, templates and the command they made. */
static struct job *sweep_job(void)
{
    struct job *f = base_job("python t.py --lr 0.1");
    f->id = 12;
    f->params = json_pack("{s:s, s:s}", "lr", "0.1", "bs", "32");
    f->command_template = xstrdup("python t.py --lr {lr}");
    f->name_template = xstrdup("lr{lr}");
    return f;
}

static void test_rewrite(void **state)
{
    (void)state;
    struct job *f = sweep_job();
    struct job carry;
    job_init(&carry);
    char *err = NULL;
    /* A new value fills the command and name again, safely quoted. */
    json_t *over = json_pack("{s:{s:s}}", "params", "lr", "x; rm -rf /");
    assert_int_equal(sweep_rewrite(f, over, &carry, &err), 0);
    assert_null(json_object_get(over, "params"));
    assert_string_equal(json_string_value(json_object_get(over, "command")),
                        "python t.py --lr 'x; rm -rf /'");
    assert_string_equal(json_string_value(json_object_get(over, "name")), "lrx; rm -rf /");
    assert_string_equal(json_string_value(json_object_get(carry.params, "lr")), "x; rm -rf /");
    assert_string_equal(json_string_value(json_object_get(carry.params, "bs")), "32");
    struct job *n = job_new();
    sweep_move(n, &carry);
    assert_string_equal(n->command_template, "python t.py --lr {lr}");
    assert_null(carry.params);
    job_free(n);
    job_clear(&carry);
    json_decref(over);

    /* A new command is the new template, filled with the values. */
    over = json_pack("{s:s}", "command", "echo {bs}");
    assert_int_equal(sweep_rewrite(f, over, &carry, &err), 0);
    assert_string_equal(json_string_value(json_object_get(over, "command")), "echo 32");
    assert_string_equal(carry.command_template, "echo {bs}");
    job_clear(&carry);
    json_decref(over);

    /* An unknown parameter is named, with the job's own. */
    over = json_pack("{s:{s:s}}", "params", "momentum", "0.9");
    assert_int_equal(sweep_rewrite(f, over, &carry, &err), -1);
    assert_string_equal(err, "job 12 has no parameter 'momentum' (its parameters: lr, bs)");
    free(err);
    job_clear(&carry);
    json_decref(over);
    job_free(f);

    /* A job not from a sweep passes, but cannot take params. */
    struct job *plain = base_job("echo hi");
    plain->id = 3;
    over = json_pack("{s:s}", "name", "x");
    assert_int_equal(sweep_rewrite(plain, over, &carry, &err), 0);
    json_object_set_new(over, "params", json_pack("{s:s}", "lr", "1"));
    assert_int_equal(sweep_rewrite(plain, over, &carry, &err), -1);
    assert_non_null(strstr(err, "has no parameters"));
    free(err);
    json_decref(over);
    job_clear(&carry);
    job_free(plain);
}

static void fill_is(const char *tmpl, const char *value, const char *want)
{
    char *names[] = {"v", "w"};
    char *values[] = {(char *)value, "W"};
    char *s = sweep_fill_command(tmpl, names, values, 2);
    assert_string_equal(s, want);
    free(s);
}

static void test_sweep_fill(void **state)
{
    (void)state;
    fill_is("echo {v} {w}", "0.1", "echo 0.1 W");
    fill_is("echo {v}", "a b", "echo 'a b'");
    fill_is("echo {v}", "'; touch pwned; '", "echo ''\\''; touch pwned; '\\'''");
    fill_is("echo '{v}'", "x'y", "echo 'x'\\''y'"); /* a whole quoted word: replaced */
    fill_is("echo '{v}'", "7", "echo 7");
    fill_is("echo 'a{v}'", "x y", "echo 'a''x y'''"); /* inside a longer quoted word */
    fill_is("echo \"{v}\"", "$(id)", "echo \"\"'$(id)'\"\"");
    fill_is("echo ${v} {x} \\{v}", "1", "echo ${v} {x} \\{v}");
    fill_is("--lr={v}", "1e-3", "--lr=1e-3");
    char *names[] = {"lr", "bs"};
    char *values[] = {"0.1", "32"};
    char *s = sweep_fill_name("lr{lr}_bs{bs}_{x}", names, values, 2);
    assert_string_equal(s, "lr0.1_bs32_{x}");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_array),
        cmocka_unit_test(test_expand_params),
        cmocka_unit_test(test_rewrite),
        cmocka_unit_test(test_sweep_fill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
