/* mcp_tools: gflow-mcp's tools. Each is one or two requests to gflowd's API
 * (docs/api.md), made as the user who runs gflow-mcp; every refusal comes back as a tool
 * error carrying the daemon's own message. submit_job is mcp_submit.c's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "jsonrpc.h"
#include "mcp.h"

void mcp_reply_error(struct mcp_reply *reply, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(reply->error);
    reply->error = xvasprintf(fmt, ap);
    va_end(ap);
}

/* A request whose 2xx reply is the tool's result; an error becomes the tool's error. */
static void tool_request(const char *method, const char *path, const json_t *body,
                         struct mcp_reply *reply)
{
    char *err = NULL;
    if (mcp_daemon_json(method, path, body, &reply->structured, NULL, &err) < 0) {
        reply->error = err;
        return;
    }
    if (!json_is_object(reply->structured)) { /* structuredContent must be an object */
        json_t *wrapped = json_object();
        json_object_set_new(wrapped, "result", reply->structured ? reply->structured : json_null());
        reply->structured = wrapped;
    }
}

/* ---- list_jobs ---- */

/* The fields of a job a listing shows (show_job gives all of them). */
static const char *const list_fields[] = {
    "id",          "name",       "user",       "state",       "state_name", "reason",
    "priority",    "gpus",       "gpu_ids",    "mig_profile", "memory_mb",  "time_limit",
    "submit_time", "start_time", "end_time",   "exit_code",   "command",    "script_path",
    "workdir",     "project",    "depends_on", NULL,
};

static void tool_list_jobs(const json_t *args, struct mcp_reply *reply)
{
    struct strbuf path;
    strbuf_init(&path);
    strbuf_adds(&path, "/v1/jobs");
    const char *state = mcp_arg_str(args, "state", NULL);
    const char *user = mcp_arg_str(args, "user", NULL);
    const char *project = mcp_arg_str(args, "project", NULL);
    if (state)
        client_query_add(&path, "state", state);
    if (user)
        client_query_add(&path, "user", user);
    if (project)
        client_query_add(&path, "project", project);
    int64_t before = mcp_arg_int(args, "before_id", 0);
    int64_t limit = mcp_arg_int(args, "limit", MCP_LIST_DEFAULT);
    int64_t offset = mcp_arg_int(args, "offset", 0); /* gflow's paging */
    const char *detail = mcp_arg_str(args, "detail", "summary");
    if (before == 1) { /* nothing is older than job 1 */
        reply->structured = json_pack("{s:[], s:i, s:b}", "jobs", "count", 0, "more", 0);
        strbuf_free(&path);
        return;
    }
    if (before > 1)
        strbuf_addf(&path, "%cid=1-%lld", strchr(path.buf, '?') ? '&' : '?', (long long)before - 1);
    const json_t *after = json_object_get(args, "created_after");
    if (after)
        strbuf_addf(&path, "%csince=%lld", strchr(path.buf, '?') ? '&' : '?',
                    (long long)json_integer_value(after));
    /* The newest first, unless gflow's order asks otherwise: what an assistant asks
     * about is usually recent. */
    const char *order = mcp_arg_str(args, "order", "desc");
    client_query_add(&path, "sort", strcmp(order, "asc") ? "-id" : "id");
    /* offset + limit, and one more: is there more? */
    strbuf_addf(&path, "&limit=%lld", (long long)(offset + limit + 1));
    json_t *all = NULL;
    char *err = NULL;
    if (mcp_daemon_json("GET", path.buf, NULL, &all, NULL, &err) < 0) {
        reply->error = err;
        strbuf_free(&path);
        return;
    }
    strbuf_free(&path);
    bool full = !strcmp(detail, "full");
    json_t *jobs = json_array();
    size_t i;
    const json_t *job;
    json_array_foreach (json_object_get(all, "jobs"), i, job) {
        if ((int64_t)i < offset)
            continue;
        if ((int64_t)i == offset + limit)
            break;
        if (full) {
            json_array_append(jobs, (json_t *)job);
            continue;
        }
        json_t *brief = json_object();
        for (const char *const *f = list_fields; *f; f++) {
            json_t *v = json_object_get(job, *f);
            if (v)
                json_object_set(brief, *f, v);
        }
        json_array_append_new(jobs, brief);
    }
    bool more = json_array_size(json_object_get(all, "jobs")) > (size_t)(offset + limit);
    json_decref(all);
    json_int_t count = (json_int_t)json_array_size(jobs);
    reply->structured = json_pack(
        "{s:o, s:I, s:b, s:b, s:o, s:I, s:I, s:s}", "jobs", jobs, "count", count, "more", more,
        "has_more", more, "next_offset", more ? json_integer(offset + count) : json_null(), "limit",
        (json_int_t)limit, "offset", (json_int_t)offset, "detail", detail);
}

/* ---- show_job, cancel_job, hold_job, release_job ---- */

static void tool_show_job(const json_t *args, struct mcp_reply *reply)
{
    char *path = xasprintf("/v1/jobs/%lld", (long long)mcp_arg_int(args, "id", 0));
    tool_request("GET", path, NULL, reply);
    free(path);
    /* The environment is the submitter's whole environment (tokens and keys too): only
     * when asked for. */
    if (reply->structured && !mcp_arg_bool(args, "include_env", false) &&
        json_object_get(reply->structured, "env")) {
        json_object_set_new(
            reply->structured, "env_vars",
            json_integer((json_int_t)json_object_size(json_object_get(reply->structured, "env"))));
        json_object_del(reply->structured, "env");
    }
    /* A script can be megabytes: its start is what an assistant needs. */
    const json_t *script = json_object_get(reply->structured, "script");
    if (json_string_length(script) > MCP_SCRIPT_SHOWN) {
        json_object_set_new(reply->structured, "script",
                            jsonrpc_text(json_string_value(script), MCP_SCRIPT_SHOWN));
        json_object_set_new(reply->structured, "script_truncated", json_true());
    }
}

static void job_action(const json_t *args, const char *action, struct mcp_reply *reply)
{
    bool dry_run = mcp_arg_bool(args, "dry_run", false);
    int64_t id = mcp_arg_int(args, "id", mcp_arg_int(args, "job_id", 0));
    if (!id) {
        mcp_reply_error(reply, "give the job's id: 'id' (or 'job_id', gflow's name)");
        return;
    }
    char *path =
        xasprintf("/v1/jobs/%lld/%s%s", (long long)id, action, dry_run ? "?dry_run=1" : "");
    tool_request("POST", path, NULL, reply);
    free(path);
    if (reply->structured && dry_run)
        json_object_set_new(reply->structured, "dry_run", json_true());
}

static void tool_cancel_job(const json_t *args, struct mcp_reply *reply)
{
    job_action(args, "cancel", reply);
}

static void tool_hold_job(const json_t *args, struct mcp_reply *reply)
{
    job_action(args, "hold", reply);
}

static void tool_release_job(const json_t *args, struct mcp_reply *reply)
{
    job_action(args, "release", reply);
}

/* ---- job_log ---- */

static void tool_job_log(const json_t *args, struct mcp_reply *reply)
{
    int64_t id = mcp_arg_int(args, "id", 0);
    int64_t first = mcp_arg_int(args, "first_lines", 0);
    int64_t last = mcp_arg_int(args, "last_lines", 0);
    int64_t offset = mcp_arg_int(args, "offset", -1);
    size_t max = (size_t)mcp_arg_int(args, "max_bytes", MCP_LOG_BYTES_DEFAULT);
    if ((first > 0) + (last > 0) + (offset >= 0) > 1) {
        mcp_reply_error(reply, "give one of first_lines, last_lines and offset");
        return;
    }
    char *query;
    bool tail = false;
    if (first > 0) {
        query = xasprintf("first=%lld", (long long)first);
    } else if (offset >= 0) {
        query = xasprintf("offset=%lld&length=%zu", (long long)offset, max + 1);
    } else {
        query = xasprintf("last=%lld", (long long)(last > 0 ? last : MCP_LOG_LINES_DEFAULT));
        tail = true;
    }
    struct strbuf text;
    strbuf_init(&text);
    bool cut = false;
    int status;
    char *err = NULL;
    int rc = mcp_daemon_log(id, query, max, tail, &text, &cut, &status, &err);
    free(query);
    if (rc < 0) {
        reply->error = err;
        strbuf_free(&text);
        return;
    }
    json_t *log = jsonrpc_text(text.buf ? text.buf : "", text.len);
    reply->structured = json_pack("{s:I, s:o, s:I, s:b}", "id", (json_int_t)id, "text", log,
                                  "bytes", (json_int_t)text.len, "truncated", cut);
    if (offset >= 0)
        json_object_set_new(reply->structured, "offset", json_integer(offset));
    /* The content is the log itself, with a note when part of it was left out. */
    struct strbuf shown;
    strbuf_init(&shown);
    if (cut && tail)
        strbuf_addf(&shown,
                    "[gflow-mcp: only the last %zu bytes of these lines; ask for "
                    "fewer lines or more max_bytes]\n",
                    max);
    strbuf_adds(&shown, json_string_value(log));
    if (cut && !tail)
        strbuf_addf(&shown, "\n[gflow-mcp: cut at %zu bytes; read on with offset]", max);
    if (!text.len)
        strbuf_adds(&shown, "(the log is empty: the job has not written anything, or has not "
                            "started)");
    reply->text = strbuf_detach(&shown);
    strbuf_free(&text);
}

/* ---- list_gpus, stats ---- */

static void tool_list_gpus(const json_t *args, struct mcp_reply *reply)
{
    tool_request("GET", "/v1/gpus", NULL, reply);
}

static void tool_stats(const json_t *args, struct mcp_reply *reply)
{
    struct strbuf path;
    strbuf_init(&path);
    strbuf_adds(&path, "/v1/stats");
    const char *by = mcp_arg_str(args, "by", NULL);
    const char *user = mcp_arg_str(args, "user", NULL);
    if (by)
        client_query_add(&path, "by", by);
    if (user)
        client_query_add(&path, "user", user);
    const char *times[] = {"since", "until"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *t = json_object_get(args, times[i]);
        if (t)
            strbuf_addf(&path, "%c%s=%.3f", strchr(path.buf, '?') ? '&' : '?', times[i],
                        json_number_value(t));
    }
    if (mcp_arg_bool(args, "gpu_utilization", false))
        strbuf_addf(&path, "%cgpu=1", strchr(path.buf, '?') ? '&' : '?');
    tool_request("GET", path.buf, NULL, reply);
    strbuf_free(&path);
}

/* ---- the table ---- */

#define NO_ARGS "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {}}"
/* cancel_job, hold_job and release_job are gflow's names too, and gflow calls the id
 * job_id: either is taken (no top-level anyOf in the schema to say "one of them": some
 * assistants' APIs refuse such input schemas; job_action checks). */
#define JOB_ID_ARG                                                                                 \
    "\"job_id\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"the job id (gflow's "  \
    "name for id)\"}"
#define ID_ARG "\"id\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"the job id\"}"

static const struct mcp_tool tools[] = {
    {"list_jobs", "List jobs",
     "Lists gflow jobs, newest first: by default your own jobs in every state; more says "
     "whether older ones matched too (ask again with before_id). Each job "
     "has its id, name, state (PD queued, H held, R running, CD finished, F failed, CA "
     "cancelled, TO timed out), reason, GPUs and times (unix seconds).",
     "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {"
     "\"state\": {\"type\": \"string\", \"description\": \"comma list of states: PD, H, R, "
     "CD, F, CA, TO (or Queued, Running, ...); default all\"},"
     "\"user\": {\"type\": \"string\", \"description\": \"a login name, or all; default "
     "you\"},"
     "\"project\": {\"type\": \"string\", \"description\": \"comma list of project codes\"},"
     "\"before_id\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"only jobs "
     "with a smaller id: the next page when more is true\"},"
     "\"offset\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 100000, "
     "\"description\": \"skip this many (gflow's paging; next_offset gives the next page)\"},"
     "\"created_after\": {\"type\": \"integer\", \"description\": \"only jobs submitted "
     "at or after this (unix seconds)\"},"
     "\"order\": {\"type\": \"string\", \"enum\": [\"asc\", \"desc\"], \"description\": "
     "\"by id: desc (newest first, the default) or asc\"},"
     "\"detail\": {\"type\": \"string\", \"enum\": [\"summary\", \"full\"], "
     "\"description\": \"summary (the default: the main fields) or full (every field)\"},"
     "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": " MCP_STR(
         MCP_LIST_MAX) ", \"description\": "
                       "\"at most this many jobs (default 50)\"}}}",
     true, false, true, tool_list_jobs},
    {"show_job", "Show a job",
     "Everything gflow knows about one job: its state and reason, command or script, "
     "resources, times, exit code, dependencies and log path. The submitter's "
     "environment is left out unless include_env is true, and a script is cut at 64 KiB.",
     "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"id\"], "
     "\"properties\": {" ID_ARG ", \"include_env\": {\"type\": \"boolean\", \"description\": "
     "\"also the job's environment variables (may hold secrets)\"}}}",
     true, false, true, tool_show_job},
    {"submit_job", "Submit a job",
     "Submits a job to the gflow GPU scheduler, as gbatch does: a shell command or a script, "
     "run in workdir (default: gflow-mcp's directory) with gflow-mcp's environment. Set "
     "dry_run to check a submission without making any job. The daemon checks everything "
     "and says what is wrong.",
     mcp_submit_schema, false, false, false, mcp_tool_submit},
    {"cancel_job", "Cancel a job",
     "Cancels a queued, held or running job (a running job gets SIGTERM, then SIGKILL), and "
     "the queued jobs that depend on it and could then never run. dry_run says what would "
     "be cancelled.",
     "{\"type\": \"object\", \"additionalProperties\": false, "
     "\"properties\": {" ID_ARG ", " JOB_ID_ARG
     ", \"dry_run\": {\"type\": \"boolean\", \"description\": "
     "\"check only, change nothing\"}}}",
     false, true, true, tool_cancel_job},
    {"hold_job", "Hold a job", "Holds a queued job (PD to H): it does not start until released.",
     "{\"type\": \"object\", \"additionalProperties\": false, "
     "\"properties\": {" ID_ARG ", " JOB_ID_ARG "}}",
     false, false, true, tool_hold_job},
    {"release_job", "Release a job", "Releases a held job (H to PD): it may start again.",
     "{\"type\": \"object\", \"additionalProperties\": false, "
     "\"properties\": {" ID_ARG ", " JOB_ID_ARG "}}",
     false, false, true, tool_release_job},
    {"job_log", "Read a job's log",
     "A job's output (stdout and stderr together), bounded: by default its last 200 lines, "
     "at most 64 KiB. first_lines, last_lines or a byte offset choose another part; "
     "max_bytes (up to 1 MiB) the size.",
     "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"id\"], "
     "\"properties\": {" ID_ARG ","
     "\"last_lines\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": " MCP_STR(
         MCP_LOG_LINES_MAX) ", "
                            "\"description\": \"the last N lines (default 200)\"},"
                            "\"first_lines\": {\"type\": \"integer\", \"minimum\": 1, "
                            "\"maximum\": " MCP_STR(
                                MCP_LOG_LINES_MAX) ", "
                                                   "\"description\": \"the first N lines "
                                                   "instead\"},"
                                                   "\"offset\": {\"type\": \"integer\", "
                                                   "\"minimum\": 0, \"description\": \"read from "
                                                   "this "
                                                   "byte offset instead (to page through a long "
                                                   "log)\"},"
                                                   "\"max_bytes\": {\"type\": \"integer\", "
                                                   "\"minimum\": 1, \"maximum\": " MCP_STR(
                                                       MCP_LOG_BYTES_MAX) ", "
                                                                          "\"description\": \"at "
                                                                          "most this many bytes "
                                                                          "(default 65536)\"}}}",
     true, false, true, tool_job_log},
    {"list_gpus", "List GPUs",
     "The machine's GPUs as gflow sees them: index, name, memory, utilization, "
     "temperature, which jobs hold them, MIG instances, and which GPUs gflow may use; "
     "'backend' says where jobs run (local, or slurm with the partition's nodes and GPUs).",
     "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {}}", true, false,
     true, tool_list_gpus},
    {"stats", "Job statistics",
     "What gstats shows: jobs of a period (default all time) per user, project or GPU: "
     "counts by outcome, GPU hours, wait and run times, failure rate, top reasons; or with "
     "gpu_utilization the GPUs' sampled utilization.",
     "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {"
     "\"by\": {\"type\": \"string\", \"enum\": [\"user\", \"project\", \"gpu\"], "
     "\"description\": \"how to group the jobs (default user)\"},"
     "\"user\": {\"type\": \"string\", \"description\": \"this user's jobs (default "
     "yours; 'all': everyone's)\"},"
     "\"since\": {\"type\": \"number\", \"description\": \"start of the period, unix "
     "seconds\"},"
     "\"until\": {\"type\": \"number\", \"description\": \"end of the period, unix seconds "
     "(default now)\"},"
     "\"gpu_utilization\": {\"type\": \"boolean\", \"description\": \"the GPUs' sampled "
     "utilization instead of the jobs\"}}}",
     true, false, true, tool_stats},
    /* gflow's tools, with its names and argument shapes (mcp_gflow.c, mcp_queue.c,
     * mcp_triage.c). */
    {"get_health", "Daemon health",
     "Check whether the local gflow daemon is running and responsive: ok, the HTTP status "
     "of its health check, its pid and its backend (ok false with the error when it does not "
     "answer).",
     NO_ARGS, true, false, true, mcp_tool_get_health},
    {"get_info", "Scheduler info",
     "Read scheduler and GPU status from the local gflow daemon: each GPU's index, uuid, "
     "whether it is free (available) and why not, the GPUs gflow may use and the "
     "allocation strategy; 'backend' says where jobs run (local, or slurm with the "
     "partition's nodes and their GPUs).",
     NO_ARGS, true, false, true, mcp_tool_get_info},
    {"get_job", "Get a job",
     "Get a single job by ID (as show_job, with gflow's job_id argument; its environment "
     "left out).",
     mcp_get_job_schema, true, false, true, mcp_tool_get_job},
    {"get_job_log", "Get a job's log",
     "Read the log of a job: its last 200 lines by default (last_lines or tail_lines, or "
     "first_lines), at most max_bytes (64 KiB by default), terminal escapes removed.",
     mcp_get_job_log_schema, true, false, true, mcp_tool_get_job_log},
    {"get_stats", "Usage statistics",
     "Read usage statistics from the local gflow daemon: the jobs since a time (unix "
     "seconds; default all time) of one user (default everyone), as the stats tool.",
     mcp_get_stats_schema, true, false, true, mcp_tool_get_stats},
    {"get_queue_pressure", "Queue pressure",
     "Summarize queue pressure and GPU availability for agent planning: free and busy GPUs "
     "(and why), running, queued and held jobs of every user, the GPUs the queued jobs ask "
     "for against those the running ones hold, why jobs wait, the users and projects "
     "asking most, and reservations. Read-only.",
     NO_ARGS, true, false, true, mcp_tool_get_queue_pressure},
    {"list_reservations", "List reservations",
     "List GPU reservations from the local gflow daemon (pending, active, completed and "
     "cancelled): id, user, GPUs, start, end and status.",
     NO_ARGS, true, false, true, mcp_tool_list_reservations},
    {"triage_job", "Triage a job",
     "Summarize why a job is queued or failed, including recent log evidence and retry "
     "hints: its state, reason, exit status (code, signal or OOM), run and wait time, the "
     "tail of its log (last 80 lines, at most 20000 bytes by default), for a waiting job "
     "the queue ahead of it and the GPUs free, and for a failed one what your latest "
     "other failures looked like. Read-only.",
     mcp_triage_schema, true, false, true, mcp_tool_triage_job},
    {"preview_submit_jobs", "Preview a submission",
     "Preview one or more job submissions without creating jobs: gflowd checks each exactly "
     "as submit_jobs would (dry run) and shows the jobs it would make, sweeps expanded. "
     "Read-only; the same schema as submit_jobs.",
     mcp_submit_jobs_schema, true, false, true, mcp_tool_preview_submit_jobs},
    {"submit_jobs", "Submit jobs",
     "MUTATES scheduler state: submit one or more jobs (gflow's simplified schema: "
     "command or script path, gpus, time_limit_secs, memory_limit_mb, depends_on_ids, "
     "param sweeps, ...), each on its own; at most 1000 jobs in all. Prefer "
     "preview_submit_jobs first and require explicit user confirmation.",
     mcp_submit_jobs_schema, false, false, false, mcp_tool_submit_jobs},
    {"preview_update_job", "Preview an update",
     "Preview mutable job parameter changes without updating scheduler state: gflowd checks "
     "the change exactly as update_job would (dry run) and shows the job before and after. "
     "Read-only.",
     mcp_update_job_schema, true, false, true, mcp_tool_preview_update_job},
    {"update_job", "Update a job",
     "MUTATES scheduler state: update mutable parameters of a queued or held job. Prefer "
     "preview_update_job first and require explicit user confirmation.",
     mcp_update_job_schema, false, false, false, mcp_tool_update_job},
    {"redo_job", "Redo a job",
     "MUTATES scheduler state: resubmit a finished job with the same or overridden "
     "parameters, optionally cascading to dependency-cancelled child jobs. Prefer "
     "triage_job first and require explicit user confirmation.",
     mcp_redo_job_schema, false, false, false, mcp_tool_redo_job},
};

const struct mcp_tool *mcp_tools(size_t *n)
{
    *n = sizeof(tools) / sizeof(tools[0]);
    return tools;
}

const struct mcp_tool *mcp_tool_find(const char *name)
{
    for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
        if (!strcmp(tools[i].name, name))
            return &tools[i];
    return NULL;
}
