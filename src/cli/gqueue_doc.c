/* gqueue_doc: gqueue -o json / yaml / csv in gflow's shapes (gflow's gqueue
 * commands/list/output.rs): a job as gflow's JobOutput (its keys and types, then the
 * API's other keys, those whose names gflow uses differently renamed), the CSV's columns,
 * and the {jobs, total, timestamp} document. The older shape (the API's job objects, the
 * table's columns as CSV) stays behind -o json-v0 / yaml-v0 / csv-v0. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "gpuinfo.h"
#include "gqueue_internal.h"
#include "job.h"
#include "output.h"
#include "timefmt.h"
#include "util.h"

/* gflow's seven state names: a job being cancelled is still Running, one the slurm backend
 * has not started yet Queued (ours: "st" says CG / PD). */
static const char *gqueue_doc_state(const struct job *j)
{
    return job_state_name(job_backend_pending(j) ? JOB_QUEUED : j->state);
}

/* gflow gives a reason only to queued, held and cancelled jobs (the table's, without its
 * parentheses; "-" for a cancelled job without one). NULL for the others. Malloc'd. */
static char *gqueue_doc_reason(const struct job *j)
{
    const char *st = gqueue_doc_state(j);
    if (strcmp(st, job_state_name(JOB_QUEUED)) && strcmp(st, job_state_name(JOB_HELD)) &&
        strcmp(st, job_state_name(JOB_CANCELLED)))
        return NULL;
    char *r = output_job_reason(j);
    return r ? r : xstrdup("-");
}

/* RFC 3339 in UTC to the second, as gflow's submitted_at: "2026-03-01T09:30:00Z". */
static void gqueue_doc_utc(struct strbuf *sb, double t)
{
    time_t secs = (time_t)t;
    struct tm tm;
    char buf[32];
    gmtime_r(&secs, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    strbuf_adds(sb, buf);
}

/* ---- CSV: gflow's columns id,name,state,time,gpus,user,submitted_at,reason ---- */

static void gqueue_csv_id(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_addf(sb, "%lld", (long long)j->id);
}

static void gqueue_csv_state(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, gqueue_doc_state(j));
}

/* The GPU ids as a list, "[0,1]", "[]" for none. */
static void gqueue_csv_gpus(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_addc(sb, '[');
    if (j->gpu_mask) {
        char *ids = gpu_mask_format(j->gpu_mask);
        strbuf_adds(sb, ids);
        free(ids);
    }
    strbuf_addc(sb, ']');
}

static void gqueue_csv_user(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->user && *j->user ? j->user : "-");
}

static void gqueue_csv_submitted(struct strbuf *sb, const struct job *j, double now)
{
    if (j->submit_time > 0)
        gqueue_doc_utc(sb, j->submit_time);
    else
        strbuf_addc(sb, '-');
}

static void gqueue_csv_reason(struct strbuf *sb, const struct job *j, double now)
{
    char *r = gqueue_doc_reason(j);
    strbuf_adds(sb, r ? r : "-");
    free(r);
}

static const struct gqueue_field gqueue_csv_fields[] = {
    {"id", gqueue_csv_id, {JOB_FIELD_ID}},
    {"name", gqueue_name, {JOB_FIELD_NAME}},
    {"state", gqueue_csv_state, {JOB_FIELD_STATE}},
    {"time", gqueue_time, {JOB_FIELD_STATE, JOB_FIELD_START_TIME, JOB_FIELD_END_TIME}},
    {"gpus", gqueue_csv_gpus, {JOB_FIELD_GPU_IDS}},
    {"user", gqueue_csv_user, {JOB_FIELD_USER}},
    {"submitted_at", gqueue_csv_submitted, {JOB_FIELD_SUBMIT_TIME}},
    {"reason", gqueue_csv_reason, {JOB_FIELD_STATE, JOB_FIELD_REASON}},
};

const struct gqueue_field **gqueue_doc_csv_fields(size_t *n)
{
    *n = sizeof(gqueue_csv_fields) / sizeof(gqueue_csv_fields[0]);
    const struct gqueue_field **out = xcalloc(*n + 1, sizeof(*out));
    for (size_t i = 0; i < *n; i++)
        out[i] = &gqueue_csv_fields[i];
    return out;
}

/* ---- JSON / YAML ---- */

static void gqueue_doc_set_text(json_t *o, const char *key, struct strbuf *sb)
{
    json_object_set_new(o, key, json_string(sb->buf ? sb->buf : ""));
    strbuf_reset(sb);
}

/* The API's keys that gflow's JobOutput uses with another meaning, and the names they
 * keep here. */
static const struct {
    const char *api, *ours;
} gqueue_doc_renamed[] = {
    {"state", "st"},                   /* "R", "CG": gqueue's ST; gflow's state is the name */
    {"gpus", "gpu_count"},             /* the GPUs asked for; gflow's gpus: the ids given */
    {"time_limit", "time_limit_secs"}, /* seconds; gflow's time_limit: "HH:MM:SS" */
    {"reason", "state_reason"},        /* in every state (Slurm's name); gflow's: PD, H, CA */
};

json_t *gqueue_doc_job(const json_t *raw, const struct job *j, double now)
{
    json_t *o = json_object();
    struct strbuf sb;
    strbuf_init(&sb);
    /* gflow's keys, in gflow's order; the optional ones only when set, as gflow. */
    json_object_set_new(o, "id", json_integer(j->id));
    json_t *name = json_object_get(raw, "name");
    json_object_set_new(o, "name", json_is_string(name) ? json_incref(name) : json_null());
    json_object_set_new(o, "state", json_string(gqueue_doc_state(j)));
    gqueue_time(&sb, j, now);
    gqueue_doc_set_text(o, "time", &sb);
    json_t *gpus = json_array();
    for (int g = 0; g < 64; g++)
        if (j->gpu_mask & (UINT64_C(1) << g))
            json_array_append_new(gpus, json_integer(g));
    json_object_set_new(o, "gpus", gpus);
    json_object_set_new(o, "user", json_string(j->user ? j->user : ""));
    if (j->project && *j->project)
        json_object_set_new(o, "project", json_string(j->project));
    if (j->submit_time > 0) {
        gqueue_doc_utc(&sb, j->submit_time);
        gqueue_doc_set_text(o, "submitted_at", &sb);
    }
    char *reason = gqueue_doc_reason(j);
    if (reason)
        json_object_set_new(o, "reason", json_string(reason));
    free(reason);
    if (j->memory_mb > 0)
        json_object_set_new(o, "memory_mb", json_integer(j->memory_mb));
    if (j->time_limit > 0) {
        char *limit = format_duration(j->time_limit);
        json_object_set_new(o, "time_limit", json_string(limit));
        free(limit);
    }
    strbuf_free(&sb);

    /* Then ours: every other key of the API's object, in its order. */
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)raw, key, v) {
        const char *as = key;
        for (size_t i = 0; i < sizeof(gqueue_doc_renamed) / sizeof(gqueue_doc_renamed[0]); i++)
            if (!strcmp(key, gqueue_doc_renamed[i].api))
                as = gqueue_doc_renamed[i].ours;
        if (!strcmp(key, "project") || !strcmp(key, "memory_mb")) /* gflow's: omitted if none */
            continue;
        if (!json_object_get(o, as))
            json_object_set(o, as, v);
    }
    return o;
}

void gqueue_doc_print(const struct gqueue_opts *o, json_t *jobs, FILE *out)
{
    double now = now_wall();
    time_t secs = (time_t)now;
    struct tm tm;
    char stamp[64], when[32];
    gmtime_r(&secs, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp, sizeof(stamp), "%s.%06d+00:00", when, (int)((now - (double)secs) * 1e6));
    json_t *doc = json_pack("{s:O, s:I, s:s}", "jobs", jobs, "total",
                            (json_int_t)json_array_size(jobs), "timestamp", stamp);
    if (o->outfmt == OUTPUT_YAML)
        output_yaml(doc, out);
    else
        output_json(doc, out);
    json_decref(doc);
}
