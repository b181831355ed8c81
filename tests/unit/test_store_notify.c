/* test_store_notify: the notification outbox of src/daemon/store/store_notify.c on a database in
 * a temp dir: rows recorded in a transaction, due ones oldest first, the next due time,
 * an attempt's outcome, the per-user pending count, pruning, and rows kept across a
 * reopen (what a restart after a crash finds). */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"
#include "util.h"

struct fixture {
    char dir[64];
    char path[128];
    struct store *s;
};

static struct store *open_ok(const char *path)
{
    char *err = NULL;
    struct store *s = store_open(path, &err);
    if (!s)
        fail_msg("store_open: %s", err);
    return s;
}

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_store_notify.XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/gflow.db", f->dir);
    f->s = open_ok(f->path);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    store_close(f->s);
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    char mark[160]; /* the ids' high-water mark beside the database (store_ids.c) */
    snprintf(mark, sizeof(mark), "%s/next_job_id", f->dir);
    unlink(mark);
    rmdir(f->dir);
    free(f);
    return 0;
}

struct seen {
    int64_t ids[8];
    char events[8][32];
    int attempts[8];
    size_t n;
};

static void seen_cb(const struct store_notify_row *r, void *arg)
{
    struct seen *s = arg;
    assert_true(s->n < 8);
    s->ids[s->n] = r->id;
    snprintf(s->events[s->n], sizeof(s->events[0]), "%s", r->event);
    s->attempts[s->n] = r->attempts;
    s->n++;
}

struct counts {
    uint32_t uid[4];
    int64_t count[4];
    size_t n;
};

static void counts_cb(uint32_t uid, int64_t n, void *arg)
{
    struct counts *c = arg;
    assert_true(c->n < 4);
    c->uid[c->n] = uid;
    c->count[c->n++] = n;
}

static int64_t add(struct store *s, int64_t job, const char *event, uint32_t uid, double at)
{
    struct store_notify_row r = {
        .job_id = job,
        .event = event,
        .kind = STORE_NOTIFY_WEBHOOK,
        .dest = "http://127.0.0.1:1/hook",
        .user = "alice",
        .uid = uid,
        .gid = uid,
        .payload = "{}",
        .next_at = at,
    };
    assert_int_equal(store_notify_add(s, &r), 0);
    assert_true(r.id > 0);
    return r.id;
}

static void test_outbox_round_trip(void **state)
{
    struct fixture *f = *state;
    struct store *s = f->s;
    assert_int_equal(store_begin(s), 0);
    int64_t a = add(s, 1, "job_started", 1000, 100);
    int64_t b = add(s, 1, "job_completed", 1000, 50);
    int64_t c = add(s, 2, "job_failed", 2000, 300);
    assert_int_equal(store_commit(s), 0);

    struct seen due = {0};
    assert_int_equal(store_notify_due(s, 200, 10, seen_cb, &due), 0);
    assert_int_equal(due.n, 2); /* c is not due yet */
    assert_int_equal(due.ids[0], b);
    assert_int_equal(due.ids[1], a);
    assert_string_equal(due.events[0], "job_completed");
    memset(&due, 0, sizeof(due));
    assert_int_equal(store_notify_due(s, 200, 1, seen_cb, &due), 0);
    assert_int_equal(due.n, 1); /* the limit */

    double next = 0;
    assert_int_equal(store_notify_next_after(s, 200, &next), 0);
    assert_true(next == 300);
    struct counts counts = {0};
    assert_int_equal(store_notify_pending_by_uid(s, counts_cb, &counts), 0);
    assert_int_equal(counts.n, 2);
    assert_int_equal(counts.uid[0] + counts.uid[1], 3000);
    assert_int_equal(counts.count[counts.uid[0] == 1000 ? 0 : 1], 2);
    int64_t n = 0;

    /* a fails and waits; b is sent. */
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_notify_set(s, a, STORE_NOTIFY_PENDING, 1, 250, "HTTP 500", 0), 0);
    assert_int_equal(store_notify_set(s, b, STORE_NOTIFY_SENT, 1, 200, NULL, 200), 0);
    assert_int_equal(store_commit(s), 0);
    memset(&counts, 0, sizeof(counts));
    assert_int_equal(store_notify_pending_by_uid(s, counts_cb, &counts), 0);
    assert_int_equal(counts.count[counts.uid[0] == 1000 ? 0 : 1], 1);
    assert_int_equal(store_notify_next_after(s, 200, &next), 0);
    assert_true(next == 250);

    /* A reopen (a restart after a crash) finds the pending rows as they were. */
    store_close(f->s);
    s = f->s = open_ok(f->path);
    memset(&due, 0, sizeof(due));
    assert_int_equal(store_notify_due(s, 1000, 10, seen_cb, &due), 0);
    assert_int_equal(due.n, 2);
    assert_int_equal(due.ids[0], a);
    assert_int_equal(due.attempts[0], 1);
    assert_int_equal(due.ids[1], c);
    assert_int_equal(store_notify_count_pending(s, &n), 0);
    assert_int_equal(n, 2);

    /* Pruning takes the done rows done before the bound, never pending ones. */
    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_notify_prune(s, 199), 0);
    assert_int_equal(store_notify_prune(s, 1e9), 1);
    assert_int_equal(store_commit(s), 0);
    assert_int_equal(store_notify_count_pending(s, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(store_notify_next_after(s, 1e9, &next), 1);
}

static void test_outbox_rolled_back_with_the_change(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(store_begin(f->s), 0);
    add(f->s, 7, "job_completed", 1000, 1);
    store_rollback(f->s);
    int64_t n = -1;
    assert_int_equal(store_notify_count_pending(f->s, &n), 0);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_outbox_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outbox_rolled_back_with_the_change, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
