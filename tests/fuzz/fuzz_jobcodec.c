/* fuzz_jobcodec: the decoders the CLI runs on what the daemon sends: job_from_json (a
 * job object of GET /v1/jobs, gjob show) and job_from_tsv (a line of gqueue's
 * format=tsv listing).
 *
 * Input: the first byte chooses the decoder. JSON: the rest is the object. TSV: the
 * second byte is a field count, the next bytes the fields (as enum job_field numbers;
 * repeats are skipped, as gqueue never asks twice), the rest the line (up to its first
 * newline).
 *
 * Invariants: whatever was decoded, written again (job_to_json / job_append_tsv), reads
 * back into a job that writes the same text (decode -> encode -> decode -> encode is
 * stable); a TSV line read by copying and by borrowing gives the same job; every line
 * written is one line with the requested number of fields. No crash, no leak. */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "job.h"
#include "util.h"

static char *dump(const json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    FUZZ_CHECK(s != NULL);
    return s;
}

/* Whether a time survives text -> double -> text to the microsecond: none (<= 0), or
 * from 1 s to 2^31 s (year 2038; later the spacing of doubles passes half a
 * microsecond and the last digit may move; below a microsecond, 0.000000 reads back as
 * none). Otherwise only the shape of what is written is checked. */
static bool time_exact(double t)
{
    return !(t > 0) || (t >= 1 && t < 2147483648.0);
}

static bool times_exact(const struct job *j)
{
    return time_exact(j->submit_time) && time_exact(j->start_time) && time_exact(j->end_time) &&
           time_exact(j->begin_time);
}

static void fuzz_json(const uint8_t *data, size_t size)
{
    json_t *o = json_loadb((const char *)data, size, 0, NULL);
    if (!o)
        return;
    struct job j;
    if (job_from_json(o, &j) < 0) {
        json_decref(o);
        return;
    }
    json_decref(o);
    json_t *o1 = job_to_json(&j, true, NULL);
    FUZZ_CHECK(json_is_object(o1));
    struct job k;
    FUZZ_CHECK(job_from_json(o1, &k) == 0);
    json_t *o2 = job_to_json(&k, true, NULL);
    if (times_exact(&j) && !json_equal(o1, o2)) {
        char *a = dump(o1), *b = dump(o2);
        FUZZ_CHECK_TEXT(json_equal(o1, o2), a, b);
    }
    json_decref(o1);
    json_decref(o2);
    job_clear(&j);
    job_clear(&k);
}

/* Writes j's fields as one TSV line; checks its shape. */
static void write_tsv(struct strbuf *sb, const struct job *j, const int *fields, size_t n)
{
    strbuf_reset(sb);
    job_append_tsv(sb, j, fields, n);
    FUZZ_CHECK(sb->len > 0 && sb->buf[sb->len - 1] == '\n');
    FUZZ_CHECK(memchr(sb->buf, '\n', sb->len) == sb->buf + sb->len - 1);
    size_t tabs = 0;
    for (size_t i = 0; i < sb->len; i++)
        tabs += sb->buf[i] == '\t';
    FUZZ_CHECK(tabs + 1 == n);
}

static void fuzz_tsv(const uint8_t *data, size_t size)
{
    if (size < 1)
        return;
    size_t want = data[0] % (JOB_FIELD_COUNT + 1);
    data++;
    size--;
    int fields[JOB_FIELD_COUNT];
    size_t n = 0;
    bool seen[JOB_FIELD_COUNT] = {false};
    while (want > 0 && size > 0) {
        int f = data[0] % JOB_FIELD_COUNT;
        data++;
        size--;
        want--;
        if (!seen[f]) {
            seen[f] = true;
            fields[n++] = f;
        }
    }
    if (n == 0)
        return;
    const uint8_t *nl = memchr(data, '\n', size);
    char *line = xstrndup((const char *)data, nl ? (size_t)(nl - data) : size);
    char *copy = xstrdup(line);

    struct job j, b;
    int rc = job_from_tsv(&j, fields, n, line, false);
    int rcb = job_from_tsv(&b, fields, n, copy, true);
    FUZZ_CHECK(rc == rcb);
    if (rc == 0) {
        struct strbuf s1, s2, s3;
        strbuf_init(&s1);
        strbuf_init(&s2);
        strbuf_init(&s3);
        write_tsv(&s1, &j, fields, n);
        write_tsv(&s3, &b, fields, n);
        FUZZ_CHECK_TEXT(s1.len == s3.len && memcmp(s1.buf, s3.buf, s1.len) == 0, s1.buf, s3.buf);
        char *again = xstrndup(s1.buf, s1.len - 1);
        struct job k;
        FUZZ_CHECK(job_from_tsv(&k, fields, n, again, false) == 0);
        write_tsv(&s2, &k, fields, n);
        if (times_exact(&j))
            FUZZ_CHECK_TEXT(s1.len == s2.len && memcmp(s1.buf, s2.buf, s1.len) == 0, s1.buf,
                            s2.buf);
        job_clear(&k);
        free(again);
        strbuf_free(&s1);
        strbuf_free(&s2);
        strbuf_free(&s3);
    }
    job_clear(&j);
    free(b.deps); /* the one owned part of a borrowed job (as gqueue frees it) */
    free(line);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        fuzz_tsv(data + 1, size - 1);
    else
        fuzz_json(data + 1, size - 1);
    return 0;
}
