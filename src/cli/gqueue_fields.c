/* gqueue_fields: the columns -f may name (the field table and each cell's formatter),
 * the sort keys -r takes beyond the API's own, and the parsing of -s states, comma lists
 * and -f formats. */

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "clock.h"
#include "gpuacct.h"
#include "gqueue_internal.h"
#include "job.h"
#include "output.h"
#include "parse.h"
#include "timefmt.h"
#include "util.h"

/* Appends a malloc'd display form and frees it. */
static void gqueue_put_owned(struct strbuf *sb, char *s)
{
    strbuf_adds(sb, s);
    free(s);
}

static void gqueue_put_int(struct strbuf *sb, long long v)
{
    char buf[24];
    strbuf_add(sb, buf, format_int(buf, v));
}

static void gqueue_jobid(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_int(sb, j->id);
}

void gqueue_name(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->name && *j->name ? j->name : "-");
}

void gqueue_st(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, job_display_state(j));
}

void gqueue_state(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, job_display_state_name(j));
}

/* gflow's elapsed time (TIME, RUNTIME, -o json's "time"): "00:15:23", the hours past 24
 * as they are ("26:00:00", gflow's format_duration); "-" before the job starts. */
void gqueue_time(struct strbuf *sb, const struct job *j, double now)
{
    if (j->start_time <= 0) {
        strbuf_addc(sb, '-');
        return;
    }
    double end = j->end_time > 0 ? j->end_time : (j->state == JOB_RUNNING ? now : j->start_time);
    gqueue_put_owned(sb, format_duration(end > j->start_time ? (int64_t)(end - j->start_time) : 0));
}

/* WAIT (gflow #115): the time from submission to the start, or until now while the job
 * waits (queued or held: a requeued job's earlier start does not end its wait), or until
 * its end for a job that ended without starting. */
static void gqueue_wait(struct strbuf *sb, const struct job *j, double now)
{
    double until = j->state == JOB_QUEUED || j->state == JOB_HELD || job_backend_pending(j) ? now
                   : j->start_time > 0 ? j->start_time
                                       : j->end_time;
    if (j->submit_time <= 0 || until <= 0) {
        strbuf_addc(sb, '-');
        return;
    }
    gqueue_put_owned(
        sb, format_duration(until > j->submit_time ? (int64_t)(until - j->submit_time) : 0));
}

static void gqueue_timelimit(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_job_time_limit(j));
}

static void gqueue_nodes(struct strbuf *sb, const struct job *j, double now)
{
    if (j->mig_profile) { /* MIG instances, not whole GPUs: "1g.18gb:2" */
        strbuf_adds(sb, j->mig_profile);
        strbuf_addc(sb, ':');
        gqueue_put_int(sb, j->mig_count);
        return;
    }
    gqueue_put_int(sb, j->gpus);
}

static void gqueue_nodelist(struct strbuf *sb, const struct job *j, double now)
{
    output_job_nodelist(sb, j);
}

static void gqueue_reason(struct strbuf *sb, const struct job *j, double now)
{
    char *r = output_job_reason(j);
    gqueue_put_owned(sb, r ? r : xstrdup("-"));
}

/* A waiting job's effective priority (rounded; with the default weights, its
 * --priority), other jobs' --priority. */
static void gqueue_priority(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_int(sb, j->effective_priority >= 0 ? (long long)llround(j->effective_priority)
                                                  : j->priority);
}

static void gqueue_user(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->user && *j->user ? j->user : "-");
}

static void gqueue_project(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->project && *j->project ? j->project : "-");
}

/* A failed job's failure class (failure triage; "-": none). */
static void gqueue_failure(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->failure_class && *j->failure_class ? j->failure_class : "-");
}

/* The slurm backend's job id ("-": none). */
static void gqueue_slurm_id(struct strbuf *sb, const struct job *j, double now)
{
    if (j->backend_id > 0)
        gqueue_put_int(sb, j->backend_id);
    else
        strbuf_adds(sb, "-");
}

static void gqueue_exitcode(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_job_exit_code(j));
}

static void gqueue_submit(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_time(j->submit_time));
}

static void gqueue_start(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_time(j->start_time));
}

static void gqueue_end(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_time(j->end_time));
}

static void gqueue_workdir(struct strbuf *sb, const struct job *j, double now)
{
    strbuf_adds(sb, j->workdir ? j->workdir : "-");
}

static void gqueue_command(struct strbuf *sb, const struct job *j, double now)
{
    if (j->command)
        strbuf_adds(sb, j->command);
    else
        strbuf_adds(sb, j->script_path ? j->script_path : "-");
}

/* "24G", "512M", "-" for none. */
static void gqueue_memory(struct strbuf *sb, const struct job *j, double now)
{
    if (j->memory_mb <= 0) {
        strbuf_adds(sb, "-");
        return;
    }
    bool gib = j->memory_mb % 1024 == 0;
    gqueue_put_int(sb, gib ? j->memory_mb / 1024 : j->memory_mb);
    strbuf_addc(sb, gib ? 'G' : 'M');
}

/* squeue --start's START_TIME: when a queued job is expected to start (backfill's plan),
 * or when a job started. */
static void gqueue_start_time(struct strbuf *sb, const struct job *j, double now)
{
    double t = j->state == JOB_QUEUED ? j->expected_start : j->start_time;
    gqueue_put_owned(sb, output_time(t));
}

static void gqueue_begin(struct strbuf *sb, const struct job *j, double now)
{
    gqueue_put_owned(sb, output_time(j->begin_time));
}

/* GPU accounting (gpuacct.h): "78%" mean utilisation, "61.2GiB" peak memory of one GPU,
 * "412Wh"; "-" when unknown (no GPU, not read yet). No space inside: one word a cell. */
static void gqueue_gpuutil(struct strbuf *sb, const struct job *j, double now)
{
    if (j->gpu_util_mean < 0) {
        strbuf_addc(sb, '-');
        return;
    }
    gqueue_put_int(sb, j->gpu_util_mean);
    strbuf_addc(sb, '%');
}

static void gqueue_gpumem(struct strbuf *sb, const struct job *j, double now)
{
    if (j->gpu_mem_peak_mb < 0)
        strbuf_addc(sb, '-');
    else
        gqueue_put_owned(sb, gpuacct_mib_text(j->gpu_mem_peak_mb, ""));
}

static void gqueue_energy(struct strbuf *sb, const struct job *j, double now)
{
    if (j->energy_wh < 0)
        strbuf_addc(sb, '-');
    else
        gqueue_put_owned(sb, gpuacct_energy_text(j->energy_wh, ""));
}

static const struct gqueue_field gqueue_fields[] = {
    {JOB_HEADER_ID, gqueue_jobid, {JOB_FIELD_ID}},
    {JOB_HEADER_NAME, gqueue_name, {JOB_FIELD_NAME}},
    {JOB_HEADER_STATE, gqueue_st, {JOB_FIELD_STATE}},
    {"STATE", gqueue_state, {JOB_FIELD_STATE}},
    {"TIME", gqueue_time, {JOB_FIELD_STATE, JOB_FIELD_START_TIME, JOB_FIELD_END_TIME}},
    {"WAIT",
     gqueue_wait,
     {JOB_FIELD_STATE, JOB_FIELD_SUBMIT_TIME, JOB_FIELD_START_TIME, JOB_FIELD_END_TIME}},
    {"RUNTIME", gqueue_time, {JOB_FIELD_STATE, JOB_FIELD_START_TIME, JOB_FIELD_END_TIME}},
    {JOB_HEADER_TIME_LIMIT, gqueue_timelimit, {JOB_FIELD_TIME_LIMIT}},
    {"NODES", gqueue_nodes, {JOB_FIELD_GPUS, JOB_FIELD_MIG_PROFILE, JOB_FIELD_MIG_COUNT}},
    {"NODELIST(REASON)",
     gqueue_nodelist,
     {JOB_FIELD_STATE, JOB_FIELD_GPU_IDS, JOB_FIELD_REASON, JOB_FIELD_MIG_DEVICES}},
    {"NODELIST",
     gqueue_nodelist,
     {JOB_FIELD_STATE, JOB_FIELD_GPU_IDS, JOB_FIELD_REASON, JOB_FIELD_MIG_DEVICES}},
    {JOB_HEADER_REASON, gqueue_reason, {JOB_FIELD_STATE, JOB_FIELD_REASON}},
    {JOB_HEADER_PRIORITY, gqueue_priority, {JOB_FIELD_PRIORITY, JOB_FIELD_EFFECTIVE_PRIORITY}},
    {JOB_HEADER_USER, gqueue_user, {JOB_FIELD_USER}},
    {JOB_HEADER_EXIT_CODE, gqueue_exitcode, {JOB_FIELD_EXIT_CODE, JOB_FIELD_SIGNAL}},
    {JOB_HEADER_SUBMIT_TIME, gqueue_submit, {JOB_FIELD_SUBMIT_TIME}},
    {JOB_HEADER_START_TIME, gqueue_start, {JOB_FIELD_START_TIME}},
    {JOB_HEADER_END_TIME, gqueue_end, {JOB_FIELD_END_TIME}},
    {JOB_HEADER_WORKDIR, gqueue_workdir, {JOB_FIELD_WORKDIR}},
    {JOB_HEADER_COMMAND, gqueue_command, {JOB_FIELD_COMMAND, JOB_FIELD_SCRIPT_PATH}},
    {JOB_HEADER_MEMORY_MB, gqueue_memory, {JOB_FIELD_MEMORY_MB}},
    {JOB_HEADER_BEGIN_TIME, gqueue_begin, {JOB_FIELD_BEGIN_TIME}},
    {JOB_HEADER_PROJECT, gqueue_project, {JOB_FIELD_PROJECT}},
    {"START_TIME",
     gqueue_start_time,
     {JOB_FIELD_STATE, JOB_FIELD_EXPECTED_START, JOB_FIELD_START_TIME}},
    {JOB_HEADER_SLURM_ID, gqueue_slurm_id, {JOB_FIELD_SLURM_ID}},
    {JOB_HEADER_GPU_UTIL_MEAN, gqueue_gpuutil, {JOB_FIELD_GPU_UTIL_MEAN}},
    {JOB_HEADER_GPU_MEM_PEAK_MB, gqueue_gpumem, {JOB_FIELD_GPU_MEM_PEAK_MB}},
    {JOB_HEADER_ENERGY_WH, gqueue_energy, {JOB_FIELD_ENERGY_WH}},
    {JOB_HEADER_FAILURE_CLASS, gqueue_failure, {JOB_FIELD_FAILURE_CLASS}},
};
#define GQUEUE_NFIELDS (sizeof(gqueue_fields) / sizeof(gqueue_fields[0]))

/* Sort keys beyond the API's own (job_sort_parse): the column names gqueue shows, and
 * the GPU count and expected start, which the API does not sort by (sorted here). */
static const struct {
    const char *name;
    const char *api;
    gqueue_cmp_fn local;
} gqueue_sort_aliases[] = {
    {"jobid", "id", NULL},
    {"st", "state", NULL},
    {"gpus", NULL, gqueue_cmp_gpus},
    {"nodes", NULL, gqueue_cmp_gpus},
    {"start_time", NULL, gqueue_cmp_expected},
    {"expected", NULL, gqueue_cmp_expected},
};

/* The API's name for a sort key the user typed (any case), or NULL and *local for one
 * sorted here. A usage error if it is none. */
const char *gqueue_sort_key(const char *key, const char *given, gqueue_cmp_fn *local)
{
    *local = NULL;
    char lower[32];
    size_t n = strlen(key);
    for (size_t i = 0; i < n && i + 1 < sizeof(lower); i++)
        lower[i] = (char)tolower((unsigned char)key[i]);
    lower[n < sizeof(lower) ? n : sizeof(lower) - 1] = '\0';
    enum job_sort k;
    if (job_sort_parse(lower, &k) == 0)
        return job_sort_name(k);
    for (size_t i = 0; i < sizeof(gqueue_sort_aliases) / sizeof(gqueue_sort_aliases[0]); i++)
        if (!strcmp(lower, gqueue_sort_aliases[i].name)) {
            *local = gqueue_sort_aliases[i].local;
            return gqueue_sort_aliases[i].api;
        }
    cli_usage_error("unknown sort field '%s'; use %s, gpus or start_time (prefix '-' for "
                    "descending)",
                    given, job_sort_names());
}

/* "PD,running" -> "PD,R" (validated). */
char *gqueue_states(const char *list)
{
    struct strbuf sb;
    strbuf_init(&sb);
    char *copy = xstrdup(list);
    char *save = NULL;
    if (!*list)
        cli_usage_error("empty state list for -s");
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        enum job_state st;
        while (*tok == ' ')
            tok++;
        size_t l = strlen(tok);
        while (l && tok[l - 1] == ' ')
            tok[--l] = '\0';
        if (job_state_parse(tok, &st) < 0)
            cli_usage_error("unknown job state '%s'; use PD, H, R, CG, CD, F, CA, TO or "
                            "Queued, Hold, Running, Cancelling, Finished, Failed, Cancelled, "
                            "Timeout",
                            tok);
        if (sb.len)
            strbuf_addc(&sb, ',');
        strbuf_adds(&sb, job_state_is_cancelling_name(tok) ? "CG" : job_state_short(st));
    }
    free(copy);
    if (!sb.len)
        cli_usage_error("empty state list for -s");
    return strbuf_detach(&sb);
}

/* Splits a comma list into its non-empty items, blanks around them trimmed. */
char **gqueue_split(const char *list, size_t *n)
{
    char *copy = xstrdup(list), *save = NULL;
    char **out = xcalloc(strlen(list) / 2 + 2, sizeof(*out));
    *n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        size_t l = strlen(tok);
        while (l && tok[l - 1] == ' ')
            tok[--l] = '\0';
        if (l)
            out[(*n)++] = xstrdup(tok);
    }
    free(copy);
    return out;
}

/* Every field -f takes, in table order, joined by sep. */
void gqueue_field_names(struct strbuf *sb, const char *sep)
{
    for (size_t i = 0; i < GQUEUE_NFIELDS; i++)
        strbuf_addf(sb, "%s%s", i ? sep : "", gqueue_fields[i].name);
}

/* Parses -f into field pointers. */
const struct gqueue_field **gqueue_format(const char *spec, size_t *n)
{
    char **names = gqueue_split(spec, n);
    const struct gqueue_field **out = xcalloc(*n + 1, sizeof(*out));
    for (size_t k = 0; k < *n; k++) {
        for (size_t i = 0; i < GQUEUE_NFIELDS && !out[k]; i++)
            if (!strcasecmp(names[k], gqueue_fields[i].name))
                out[k] = &gqueue_fields[i];
        if (!out[k]) {
            struct strbuf all; /* made from the table, so that no field is left out */
            strbuf_init(&all);
            gqueue_field_names(&all, ", ");
            cli_usage_error("unknown field '%s' in -f; use %s", names[k], all.buf);
        }
        free(names[k]);
    }
    free(names);
    if (*n == 0)
        cli_usage_error("no fields in -f; e.g. -f " GQUEUE_DEFAULT_FORMAT);
    return out;
}
