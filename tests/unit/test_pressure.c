/* test_pressure: the queue's pressure (src/core/pressure.c), as get_queue_pressure and
 * gflow status report it: free and busy GPUs, counts of running, queued and held jobs,
 * GPUs asked and held, reasons, the users' and projects' order, reservations. */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "pressure.h"

static json_t *load(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    assert_non_null(j);
    return j;
}

static json_int_t geti(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static void test_pressure_counts(void **state)
{
    (void)state;
    json_t *gpus = load("{\"gpus\": [{\"index\": 0, \"state\": \"busy\", \"jobs\": [1], "
                        "\"reason\": null}, {\"index\": 1, \"state\": \"idle\", \"jobs\": []},"
                        "{\"index\": 2, \"state\": \"unavailable\", \"reason\": \"NVML: x\"},"
                        "{\"index\": 3, \"state\": \"busy\", \"jobs\": [1, 7]}]}");
    json_t *jobs = load(
        "[{\"id\": 1, \"state\": \"R\", \"user\": \"a\", \"gpus\": 2, \"gpu_ids\": \"0,3\"},"
        "{\"id\": 7, \"state\": \"CG\", \"user\": \"b\", \"gpus\": 1, \"gpu_ids\": [3],"
        " \"project\": \"nlp\"},"
        "{\"id\": 8, \"state\": \"PD\", \"user\": \"b\", \"gpus\": 4, \"reason\": \"Resources\","
        " \"project\": \"nlp\"},"
        "{\"id\": 9, \"state\": \"PD\", \"user\": \"a\", \"gpus\": 1, \"reason\": null},"
        "{\"id\": 10, \"state\": \"H\", \"user\": \"c\", \"gpus\": 8},"
        "{\"id\": 11, \"state\": \"CD\", \"user\": \"c\", \"gpus\": 8}]");
    json_t *resv = load("[{\"status\": \"active\"}, {\"status\": \"pending\"},"
                        "{\"start\": 10, \"end\": 20, \"cancelled_at\": null}]");
    json_t *p = pressure_build(gpus, jobs, resv, 15);
    assert_int_equal(geti(p, "generated_at"), 15);
    assert_int_equal(geti(p, "total_gpus"), 4);
    assert_int_equal(json_array_size(json_object_get(p, "available_gpus")), 1);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(p, "available_gpus"), 0)),
                     1);
    const json_t *un = json_object_get(p, "unavailable_gpus");
    assert_int_equal(json_array_size(un), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(un, 0), "reason")),
                        "busy: job 1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(un, 1), "reason")),
                        "NVML: x");
    assert_string_equal(json_string_value(json_object_get(json_array_get(un, 2), "reason")),
                        "busy: jobs 1, 7");
    assert_int_equal(geti(p, "running_jobs"), 2);
    assert_int_equal(geti(p, "queued_jobs"), 2);
    assert_int_equal(geti(p, "held_jobs"), 1);
    /* Held jobs' GPUs are not asked for yet (gflow counts queued ones only). */
    assert_int_equal(geti(p, "queued_requested_gpus"), 5);
    assert_int_equal(geti(p, "running_allocated_gpus"), 3);
    const json_t *reasons = json_object_get(p, "blocked_reasons");
    assert_int_equal(geti(reasons, "Resources"), 2); /* no reason: Resources, as gflow */
    assert_int_equal(geti(reasons, "JobHeldUser"), 1);
    /* Users: most GPUs asked first (c's held 8 count as asked in its group, as gflow). */
    const json_t *users = json_object_get(p, "users");
    assert_int_equal(json_array_size(users), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(users, 0), "name")), "c");
    assert_string_equal(json_string_value(json_object_get(json_array_get(users, 1), "name")), "b");
    assert_int_equal(geti(json_array_get(users, 1), "running"), 1);
    assert_int_equal(geti(json_array_get(users, 1), "queued"), 1);
    const json_t *projects = json_object_get(p, "projects");
    assert_int_equal(json_array_size(projects), 1);
    assert_int_equal(geti(json_array_get(projects, 0), "requested_gpus"), 4);
    assert_int_equal(geti(p, "reservations_total"), 3);
    assert_int_equal(geti(p, "reservations_active"), 2);
    json_decref(p);
    json_decref(gpus);
    json_decref(jobs);
    json_decref(resv);
}

static void test_pressure_empty_and_helpers(void **state)
{
    (void)state;
    json_t *gpus = load("{\"gpus\": [], \"error\": \"no GPUs\"}");
    json_t *jobs = json_array();
    json_t *p = pressure_build(gpus, jobs, NULL, 1);
    assert_int_equal(geti(p, "total_gpus"), 0);
    assert_int_equal(geti(p, "running_jobs") + geti(p, "queued_jobs"), 0);
    assert_int_equal(json_object_size(json_object_get(p, "blocked_reasons")), 0);
    assert_int_equal(geti(p, "reservations_total"), 0);
    json_decref(p);
    json_decref(gpus);
    json_decref(jobs);
    json_t *s = json_string("0,2,5");
    assert_int_equal(pressure_gpu_count(s), 3);
    json_decref(s);
    s = json_string("");
    assert_int_equal(pressure_gpu_count(s), 0);
    json_decref(s);
    assert_int_equal(pressure_gpu_count(NULL), 0);
    json_t *j = load("{\"state\": \"H\", \"reason\": \"\"}");
    assert_string_equal(pressure_reason(j), "JobHeldUser");
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pressure_counts),
        cmocka_unit_test(test_pressure_empty_and_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
