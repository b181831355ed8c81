/* fuzz_exitfile: the daemon's readers of what a shim leaves behind (runner.c reads both
 * after a job ends or after a restart): exit_record_decode on an exit file, and
 * exitfile_lock_parse on a lock file. The first byte chooses which; the rest is the
 * file.
 *
 * Invariants: a decoded exit record keeps its fields in range (exit code 0..255 or null,
 * signal 1..255 or null, times finite and >= 0), encodes into one line of JSON that
 * decodes into a record that encodes the same (encode -> decode is stable), and every
 * verdict drawn from it is a terminal state. A parsed lock file with a pid formats
 * (exitfile_lock_format) into at most EXITFILE_LOCK_MAX bytes that parse back into the
 * same pid, start and kind of error, and format the same. No crash, no leak. */
#include <math.h>
#include <string.h>

#include "exitfile.h"
#include "fuzz.h"
#include "job.h"
#include "util.h"

static void check_verdict(struct exit_verdict v)
{
    FUZZ_CHECK(job_state_is_terminal(v.state));
    FUZZ_CHECK((v.detail != NULL) ==
               (v.reason == JOB_REASON_LAUNCH_FAILED || v.reason == JOB_REASON_SHIM_LOST));
    exit_verdict_free(&v);
}

static void fuzz_exit_record(const uint8_t *data, size_t size)
{
    struct exit_record rec;
    if (exit_record_decode((const char *)data, size, &rec) < 0) {
        FUZZ_CHECK(rec.job_id == -1 && rec.exit_code == -1 && !rec.error &&
                   !rec.memory_enforcement);
        return;
    }
    FUZZ_CHECK(rec.exit_code >= -1 && rec.exit_code <= 255);
    FUZZ_CHECK(rec.signal >= 0 && rec.signal <= 255);
    FUZZ_CHECK(isfinite(rec.started_at) && rec.started_at >= 0);
    FUZZ_CHECK(isfinite(rec.finished_at) && rec.finished_at >= 0);
    FUZZ_CHECK(rec.max_rss_kb >= 0 && rec.job_id >= -1);
    for (int req = JOB_END_NONE; req <= JOB_END_TIMEOUT; req++)
        check_verdict(exit_verdict_of(&rec, (enum job_end_request)req));

    char *text1 = exit_record_encode(&rec);
    size_t len1 = strlen(text1);
    FUZZ_CHECK(len1 > 0 && text1[len1 - 1] == '\n' && !memchr(text1, '\n', len1 - 1));
    struct exit_record again;
    FUZZ_CHECK(exit_record_decode(text1, len1, &again) == 0);
    char *text2 = exit_record_encode(&again);
    FUZZ_CHECK_TEXT(strcmp(text1, text2) == 0, text1, text2);
    FUZZ_CHECK(again.job_id == rec.job_id && again.exit_code == rec.exit_code &&
               again.signal == rec.signal && again.oom == rec.oom &&
               again.max_rss_kb == rec.max_rss_kb);
    free(text1);
    free(text2);
    exit_record_free(&again);
    exit_record_free(&rec);
}

static void fuzz_lock(const uint8_t *data, size_t size)
{
    struct exit_lock lock;
    int rc = exitfile_lock_parse((const char *)data, size, &lock);
    for (int how = SHIM_END_UNKNOWN; how <= SHIM_END_SIGNALED; how++)
        for (int req = JOB_END_NONE; req <= JOB_END_TIMEOUT; req++)
            check_verdict(exit_verdict_lost((enum shim_end)how, size ? data[0] : 0, &lock,
                                            (enum job_end_request)req));
    if (rc < 0) {
        FUZZ_CHECK(lock.pid == 0 && lock.start == 0);
        exitfile_lock_free(&lock);
        return;
    }
    FUZZ_CHECK(lock.pid > 0 && lock.start >= 0);
    char *text1 = exitfile_lock_format(&lock);
    size_t len1 = strlen(text1);
    FUZZ_CHECK(len1 <= EXITFILE_LOCK_MAX);
    struct exit_lock again;
    FUZZ_CHECK(exitfile_lock_parse(text1, len1, &again) == 0);
    FUZZ_CHECK(again.pid == lock.pid && again.start == lock.start);
    FUZZ_CHECK(!again.error == !lock.error && again.job_ran == lock.job_ran);
    char *text2 = exitfile_lock_format(&again);
    FUZZ_CHECK_TEXT(strcmp(text1, text2) == 0, text1, text2);
    free(text1);
    free(text2);
    exitfile_lock_free(&again);
    exitfile_lock_free(&lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        fuzz_lock(data + 1, size - 1);
    else
        fuzz_exit_record(data + 1, size - 1);
    return 0;
}
