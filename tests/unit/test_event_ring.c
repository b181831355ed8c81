/* test_event_ring: the ring of recent events behind GET /v1/events' Last-Event-ID
 * (src/daemon/http/event_ring.c): numbering, the oldest giving way, lookups at the edges,
 * and whether a client that saw a given event can be resumed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "http/event_ring.h"
#include "util.h"

static struct event make(int64_t job_id)
{
    struct event e = {.type = "job_started", .job_id = job_id};
    e.user = xstrdup("alice");
    e.data = xasprintf("{\"id\":%lld}", (long long)job_id);
    e.data_len = strlen(e.data);
    return e;
}

static void test_numbers_and_lookup(void **state)
{
    (void)state;
    struct event_ring r;
    event_ring_init(&r, 4);
    assert_int_equal(event_ring_oldest(&r), 1);
    assert_null(event_ring_get(&r, 0));
    assert_null(event_ring_get(&r, 1));
    assert_true(event_ring_can_resume(&r, 0)); /* saw nothing yet: nothing missed */
    for (int i = 1; i <= 3; i++)
        assert_int_equal(event_ring_push(&r, make(100 + i))->seq, (uint64_t)i);
    assert_int_equal(event_ring_oldest(&r), 1);
    assert_int_equal(event_ring_get(&r, 2)->job_id, 102);
    assert_string_equal(event_ring_get(&r, 3)->data, "{\"id\":103}");
    assert_null(event_ring_get(&r, 4));
    event_ring_free(&r);
}

static void test_oldest_gives_way(void **state)
{
    (void)state;
    struct event_ring r;
    event_ring_init(&r, 4);
    for (int i = 1; i <= 10; i++)
        event_ring_push(&r, make(i));
    assert_int_equal(r.last_seq, 10);
    assert_int_equal(event_ring_oldest(&r), 7);
    assert_null(event_ring_get(&r, 6));
    for (uint64_t s = 7; s <= 10; s++)
        assert_int_equal(event_ring_get(&r, s)->job_id, (int64_t)s);
    event_ring_free(&r);
}

static void test_can_resume(void **state)
{
    (void)state;
    struct event_ring r;
    event_ring_init(&r, 3);
    for (int i = 1; i <= 5; i++)
        event_ring_push(&r, make(i));
    /* Kept: 3, 4, 5. A client that saw 2 misses 3..5, all kept; one that saw 1 missed 2. */
    assert_true(event_ring_can_resume(&r, 2));
    assert_true(event_ring_can_resume(&r, 5));
    assert_false(event_ring_can_resume(&r, 1));
    assert_false(event_ring_can_resume(&r, 0));
    assert_false(event_ring_can_resume(&r, 6)); /* an id this run never gave */
    event_ring_free(&r);
}

static void test_forget_leaves_a_gap(void **state)
{
    (void)state;
    struct event_ring r;
    event_ring_init(&r, 4);
    for (int i = 1; i <= 3; i++)
        event_ring_push(&r, make(i));
    event_ring_forget(&r);
    /* A client that saw everything up to 3 missed what came while nothing was kept. */
    assert_false(event_ring_can_resume(&r, 3));
    assert_null(event_ring_get(&r, 3));
    const struct event *e = event_ring_push(&r, make(9));
    assert_int_equal(e->seq, 5);
    assert_true(event_ring_can_resume(&r, 4)); /* one given after the gap */
    assert_false(event_ring_can_resume(&r, 3));
    event_ring_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_and_lookup),
        cmocka_unit_test(test_oldest_gives_way),
        cmocka_unit_test(test_can_resume),
        cmocka_unit_test(test_forget_leaves_a_gap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
