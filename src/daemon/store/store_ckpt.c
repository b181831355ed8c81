/* store_ckpt: the daemon's WAL checkpoints, run by a thread of their own on a connection of
 * their own, so that the loop never waits for one. A checkpoint copies the log's pages
 * into the database file: after a 100,000-job submission that is ~10,000 pages, 0.5-0.7 s
 * that the loop spent inside a commit (the next request's reply waited for it) before.
 * SQLite lets a checkpoint run beside the writer on another connection (PASSIVE: it
 * copies what no reader still needs and never blocks the writer, who starts the log
 * again from its beginning once everything in it was copied).
 *
 * Requests are coalesced (one flag): a request made while a checkpoint runs gets one
 * more after it. Failures are not reported: the next request tries again, and the log
 * only grows meanwhile. Without the thread (store_ckpt_start not called: tools and
 * tests), store.c checkpoints on the caller's connection as before. */
#include "store_internal.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>

#include "loop.h"
#include "util.h"

struct store_ckpt {
    sqlite3 *db;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool requested, stopping;
    uint64_t done; /* checkpoints run, for tests */
};

/* What store_ckpt_start made; the thread is not running (any more). */
static void ckpt_free(struct store_ckpt *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    sqlite3_close(c->db);
    free(c);
}

static void *ckpt_main(void *arg)
{
    struct store_ckpt *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->requested && !c->stopping)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stopping)
            break;
        c->requested = false;
        pthread_mutex_unlock(&c->mu);
        sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        pthread_mutex_lock(&c->mu);
        c->done++;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int store_ckpt_start(struct store *s)
{
    if (s->ckpt)
        return 0;
    const char *path = sqlite3_db_filename(s->db, "main");
    struct store_ckpt *c = xcalloc(1, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    /* One read, so that the connection has read the file's header and knows it is in WAL
     * mode: until then a checkpoint on it does nothing. */
    if (!path ||
        sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(c->db, "SELECT 1 FROM sqlite_schema LIMIT 1", NULL, NULL, NULL) != SQLITE_OK) {
        store_set_err(s, "opening the database for checkpoints: %s",
                      c->db ? sqlite3_errmsg(c->db) : "out of memory");
        ckpt_free(c);
        return -1;
    }
    /* The database file grows in the same allocated chunks as the writer's (store.c). */
    int chunk = STORE_CHUNK_BYTES;
    sqlite3_file_control(c->db, "main", SQLITE_FCNTL_CHUNK_SIZE, &chunk);
    if (loop_thread_create(&c->thread, NULL, ckpt_main, c) != 0) {
        store_set_err(s, "starting the checkpoint thread failed");
        ckpt_free(c);
        return -1;
    }
    s->ckpt = c;
    return 0;
}

void store_ckpt_stop(struct store *s)
{
    struct store_ckpt *c = s->ckpt;
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    ckpt_free(c);
    s->ckpt = NULL;
}

bool store_ckpt_request(struct store *s)
{
    struct store_ckpt *c = s->ckpt;
    if (!c)
        return false;
    pthread_mutex_lock(&c->mu);
    c->requested = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return true;
}

uint64_t store_ckpt_done(struct store *s)
{
    struct store_ckpt *c = s->ckpt;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    uint64_t n = c->done;
    pthread_mutex_unlock(&c->mu);
    return n;
}
