/* fuzz_jobspec: a submission body (POST /v1/jobs) read as the daemon reads it:
 * json_loadb, then jobspec_read_submission against a machine of 4 simulated GPUs, then
 * jobspec_expand when the array or sweep is small.
 *
 * Invariants: a refused submission gives a message and leaves nothing behind; every job
 * of an accepted one, given an id and its default name as the daemon gives them
 * (job_name_default: gjob-<id> when it has none),
 *  - has a valid name and the submitter's identity;
 *  - turned back into a spec (jobspec_from_job, what gjob update and redo start from) is
 *    accepted again, into a job with the same spec, and jobspec_changes between the two
 *    is empty;
 *  - written as the API's JSON (job_to_json) reads back (job_from_json) into a job that
 *    writes the same JSON;
 *  - written as gqueue's TSV with every field reads back (job_from_tsv, copying and
 *    borrowing) into a job that writes the same line.
 * No crash, no leak. */
#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "job.h"
#include "jobspec.h"
#include "util.h"

static struct gpu_info fuzz_gpus[4];
/* MIG instances too, so that MIG requests can be accepted (their parent's mode does not
 * matter to the spec). */
static struct gpu_mig fuzz_migs[3] = {
    {.parent = 0, .profile = "1g.10gb", .uuid = "MIG-0"},
    {.parent = 0, .profile = "1g.10gb", .uuid = "MIG-1"},
    {.parent = 0, .profile = "3g.40gb", .uuid = "MIG-2"},
};
static struct gpu_set fuzz_set = {.gpus = fuzz_gpus, .n_gpus = 4, .migs = fuzz_migs, .n_migs = 3};
static const struct jobspec_limits fuzz_limits = {.memory_total_mb = 64 * 1024, .gpus = &fuzz_set};
static const struct jobspec_owner fuzz_owner = {
    .user = "fuzz", .uid = 1000, .gid = 1000, .now = 1700000000.25};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    for (int i = 0; i < 4; i++) {
        fuzz_gpus[i].index = i;
        snprintf(fuzz_gpus[i].uuid, sizeof(fuzz_gpus[i].uuid), "GPU-fuzz-%d", i);
        fuzz_gpus[i].memory_total_mib = i < 2 ? 24576 : 81920;
        fuzz_gpus[i].memory_used_mib = 0;
    }
    return 0;
}

static char *dump(const json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    FUZZ_CHECK(s != NULL);
    return s;
}

/* spec -> job -> spec -> job: the second job has the first one's spec. */
static void check_spec_round_trip(const struct job *j)
{
    json_t *spec = jobspec_from_job(j);
    char *err = NULL;
    bool dry = false;
    struct job *again = jobspec_to_job(spec, &fuzz_limits, &fuzz_owner, &dry, &err);
    if (!again) {
        char *s = dump(spec);
        FUZZ_CHECK_TEXT(again != NULL, s, err);
    }
    again->id = j->id; /* as an update keeps the id, and so the default name */
    job_name_default(again);
    json_t *spec2 = jobspec_from_job(again);
    if (!json_equal(spec, spec2)) {
        char *a = dump(spec), *b = dump(spec2);
        FUZZ_CHECK_TEXT(json_equal(spec, spec2), a, b);
    }
    /* A sweep's values are not part of its spec: an update carries them over
     * (sweep_move), and so does this. */
    if (j->params)
        again->params = json_incref(j->params);
    json_t *changes = jobspec_changes(j, again, spec);
    if (json_array_size(changes) != 0) {
        char *a = dump(spec), *b = dump(changes);
        FUZZ_CHECK_TEXT(json_array_size(changes) == 0, a, b);
    }
    json_decref(changes);
    json_decref(spec2);
    json_decref(spec);
    job_free(again);
}

/* job -> JSON -> job -> JSON: the same JSON. */
static void check_json_round_trip(const struct job *j)
{
    json_t *o = job_to_json(j, true, "/logs");
    FUZZ_CHECK(json_is_object(o));
    struct job back;
    FUZZ_CHECK(job_from_json(o, &back) == 0);
    json_t *o2 = job_to_json(&back, true, "/logs");
    if (!json_equal(o, o2)) {
        char *a = dump(o), *b = dump(o2);
        FUZZ_CHECK_TEXT(json_equal(o, o2), a, b);
    }
    json_decref(o2);
    job_clear(&back);
    json_decref(o);
}

/* job -> TSV (every field) -> job -> TSV: the same line, copied or borrowed. */
static void check_tsv_round_trip(const struct job *j)
{
    int fields[JOB_FIELD_COUNT];
    for (int i = 0; i < JOB_FIELD_COUNT; i++)
        fields[i] = i;
    struct strbuf a, b;
    strbuf_init(&a);
    strbuf_init(&b);
    job_append_tsv(&a, j, fields, JOB_FIELD_COUNT);
    FUZZ_CHECK(a.len > 0 && a.buf[a.len - 1] == '\n');
    FUZZ_CHECK(memchr(a.buf, '\n', a.len) == a.buf + a.len - 1); /* one line */
    for (int borrow = 0; borrow < 2; borrow++) {
        char *line = xstrndup(a.buf, a.len - 1);
        struct job back;
        FUZZ_CHECK(job_from_tsv(&back, fields, JOB_FIELD_COUNT, line, borrow) == 0);
        strbuf_reset(&b);
        job_append_tsv(&b, &back, fields, JOB_FIELD_COUNT);
        FUZZ_CHECK_TEXT(a.len == b.len && memcmp(a.buf, b.buf, a.len) == 0, a.buf, b.buf);
        if (!borrow)
            job_clear(&back);
        else
            free(back.deps); /* the only thing a borrowed job owns (job_deps_parse) */
        free(line);
    }
    strbuf_free(&a);
    strbuf_free(&b);
}

static void check_job(struct job *j, int64_t id)
{
    j->id = id;
    job_name_default(j);
    FUZZ_CHECK(j->name && job_name_valid(j->name));
    FUZZ_CHECK(j->user && strcmp(j->user, "fuzz") == 0 && j->uid == 1000);
    FUZZ_CHECK(j->workdir && j->workdir[0] == '/');
    FUZZ_CHECK(!!j->command != !!j->script);
    check_spec_round_trip(j);
    check_json_round_trip(j);
    check_tsv_round_trip(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data, size, 0, &jerr);
    if (!root)
        return 0;
    struct jobspec_submission sub;
    char *err = NULL;
    if (jobspec_read_submission(root, &fuzz_limits, &fuzz_owner, &sub, &err) < 0) {
        FUZZ_CHECK(err && *err);
        FUZZ_CHECK(sub.n == 0 && sub.jobs == NULL && !sub.array && !sub.params);
        free(err);
        return 0;
    }
    FUZZ_CHECK(sub.n >= 1);
    for (size_t i = 0; i < sub.n; i++)
        check_job(sub.jobs[i], (int64_t)i + 1);
    if ((sub.array || sub.params) && jobspec_count(&sub) <= 64) {
        if (jobspec_expand(&sub, &err) < 0) {
            FUZZ_CHECK(err && *err && sub.n == 0);
            free(err);
        } else {
            FUZZ_CHECK(sub.n >= 1);
            for (size_t i = 0; i < sub.n; i++)
                check_job(sub.jobs[i], (int64_t)i + 1);
        }
    }
    jobspec_submission_free(&sub);
    return 0;
}
