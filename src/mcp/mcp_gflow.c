/* mcp_gflow: gflow's MCP tools with gflow's names and argument shapes (gflow's
 * src/multicall/mcp/server), so that an assistant set up for gflow works unchanged:
 * submit_jobs and preview_submit_jobs ({"jobs": [gflow's SubmitJobRequest]}),
 * update_job and preview_update_job, redo_job, and get_job, get_job_log, get_info and
 * get_stats. Each argument is translated to the daemon's own spec fields and the
 * daemon judges them: the previews are the daemon's dry runs (POST /v1/jobs with
 * dry_run, PATCH /v1/jobs/{id}?dry_run=1), so they run exactly the checks of the real
 * call and change nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "jsonrpc.h"
#include "mcp.h"
#include "parse.h"

/* gflow's submit_jobs takes at most this many jobs (after sweeps) in one call. */
#define GFLOW_SUBMIT_MAX 1000

#define JOB_ID_ARG                                                                                 \
    "\"job_id\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"the job id\"}"
#define DEP_MODE_ENUM "{\"type\": \"string\", \"enum\": [\"All\", \"Any\", \"all\", \"any\"]}"

const char mcp_submit_jobs_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"jobs\"], "
    "\"properties\": {\"jobs\": {\"type\": \"array\", \"maxItems\": 1000, \"items\": "
    "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {"
    "\"command\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"a shell command "
    "line (give this or script)\"},"
    "\"script\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"path of a job "
    "script (relative to run_dir)\"},"
    "\"gpus\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"conda_env\": {\"type\": \"string\"},"
    "\"run_dir\": {\"type\": \"string\", \"description\": \"absolute directory the job runs "
    "in (default: the server's)\"},"
    "\"priority\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 255},"
    "\"depends_on\": {\"type\": \"integer\", \"minimum\": 1},"
    "\"depends_on_ids\": {\"type\": \"array\", \"maxItems\": 1000, \"items\": {\"type\": "
    "\"integer\", \"minimum\": 1}},"
    "\"dependency_mode\": " DEP_MODE_ENUM ","
    "\"auto_cancel_on_dependency_failure\": {\"type\": \"boolean\"},"
    "\"shared\": {\"type\": \"boolean\"},"
    "\"gpu_memory_limit_mb\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"time_limit_secs\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"memory_limit_mb\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"submitted_by\": {\"type\": \"string\", \"description\": \"must be you: gflowd takes "
    "the submitter from the kernel\"},"
    "\"param\": {\"type\": \"array\", \"maxItems\": 64, \"items\": {\"type\": \"string\"}, "
    "\"description\": \"sweeps such as lr=0.001,0.01 (or START:STOP:STEP); one job per "
    "combination\"},"
    "\"parameters\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, "
    "\"description\": \"values for {name} in the command or script\"},"
    "\"run_name\": {\"type\": \"string\"},"
    "\"project\": {\"type\": \"string\"},"
    "\"max_concurrent\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"max_retries\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"auto_close_tmux\": {\"type\": \"boolean\"},"
    "\"notify_email\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
    "\"notify_on\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}}}}}";

const char mcp_update_job_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"job_id\"], "
    "\"properties\": {" JOB_ID_ARG ","
    "\"command\": {\"type\": \"string\", \"minLength\": 1},"
    "\"script\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"path of the new "
    "job script (relative to the job's directory)\"},"
    "\"gpus\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"conda_env\": {\"type\": \"string\"}, \"clear_conda_env\": {\"type\": \"boolean\"},"
    "\"priority\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 255},"
    "\"parameters\": {\"type\": \"object\", \"additionalProperties\": {\"type\": "
    "\"string\"}, \"description\": \"new values of a sweep job's parameters\"},"
    "\"time_limit_secs\": {\"type\": \"integer\", \"minimum\": 1}, \"clear_time_limit\": "
    "{\"type\": \"boolean\"},"
    "\"memory_limit_mb\": {\"type\": \"integer\", \"minimum\": 1}, \"clear_memory_limit\": "
    "{\"type\": \"boolean\"},"
    "\"gpu_memory_limit_mb\": {\"type\": \"integer\", \"minimum\": 1}, "
    "\"clear_gpu_memory_limit\": {\"type\": \"boolean\"},"
    "\"depends_on_ids\": {\"type\": \"array\", \"maxItems\": 1000, \"items\": {\"type\": "
    "\"integer\", \"minimum\": 1}},"
    "\"dependency_mode\": " DEP_MODE_ENUM ", \"clear_dependency_mode\": {\"type\": "
    "\"boolean\"},"
    "\"auto_cancel_on_dependency_failure\": {\"type\": \"boolean\"},"
    "\"max_concurrent\": {\"type\": \"integer\", \"minimum\": 1}, \"clear_max_concurrent\": "
    "{\"type\": \"boolean\"},"
    "\"max_retries\": {\"type\": \"integer\", \"minimum\": 0}, \"clear_max_retries\": "
    "{\"type\": \"boolean\"},"
    "\"notify_email\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
    "\"notify_on\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}}";

const char mcp_redo_job_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"job_id\"], "
    "\"properties\": {" JOB_ID_ARG ","
    "\"gpus\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"priority\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 255},"
    "\"depends_on\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"the new job "
    "waits for this one instead\"},"
    "\"time_limit_secs\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"memory_limit_mb\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"gpu_memory_limit_mb\": {\"type\": \"integer\", \"minimum\": 0},"
    "\"conda_env\": {\"type\": \"string\"},"
    "\"clear_deps\": {\"type\": \"boolean\", \"description\": \"the new job depends on "
    "nothing\"},"
    "\"cascade\": {\"type\": \"boolean\", \"description\": \"also redo the jobs cancelled "
    "because this one failed\"}}}";

const char mcp_get_job_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"job_id\"], "
    "\"properties\": {" JOB_ID_ARG "}}";

/* clang-format off */
const char mcp_get_job_log_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"required\": [\"job_id\"], "
    "\"properties\": {" JOB_ID_ARG ","
    "\"first_lines\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"maximum\": " MCP_STR(MCP_LOG_LINES_MAX) "},"
    "\"last_lines\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"maximum\": " MCP_STR(MCP_LOG_LINES_MAX) "},"
    "\"tail_lines\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"maximum\": " MCP_STR(MCP_LOG_LINES_MAX) "},"
    "\"max_bytes\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"maximum\": " MCP_STR(MCP_LOG_BYTES_MAX) "}}}";
/* clang-format on */

const char mcp_get_stats_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {"
    "\"user\": {\"type\": \"string\", \"description\": \"only this user's jobs\"},"
    "\"since\": {\"type\": \"integer\", \"description\": \"unix seconds\"}}}";

/* ---- submit_jobs, preview_submit_jobs ---- */

/* "All"/"all" -> "all". */
static const char *dep_mode(const char *m)
{
    return m && (m[0] == 'A' || m[0] == 'a') && m[1] == 'n' ? "any" : "all";
}

/* A gflow sweep (param: ["lr=0.1,0.01"], parameters: {"bs": "32"}) as submit_job's
 * params ({"lr": ["0.1", "0.01"], "bs": ["32"]}); NULL with the error, or a new empty
 * object when there is none. *count: the number of jobs it makes. */
static json_t *gflow_sweep(const json_t *job, size_t *count, struct mcp_reply *reply)
{
    json_t *params = json_object();
    *count = 1;
    size_t i;
    const json_t *spec;
    json_array_foreach (json_object_get(job, "param"), i, spec) {
        char *name = NULL, **values = NULL, *err = NULL;
        size_t n = 0;
        if (parse_param(json_string_value(spec), &name, &values, &n, &err) < 0) {
            mcp_reply_error(reply, "param '%s': %s", json_string_value(spec), err);
            free(err);
            json_decref(params);
            return NULL;
        }
        json_t *list = json_array();
        for (size_t k = 0; k < n; k++) {
            json_array_append_new(list, json_string(values[k]));
            free(values[k]);
        }
        free(values);
        if (json_object_get(params, name))
            mcp_reply_error(reply, "param names '%s' twice", name);
        json_object_set_new(params, name, list);
        *count = n && *count <= SIZE_MAX / n ? *count * n : SIZE_MAX;
        free(name);
        if (reply->error) {
            json_decref(params);
            return NULL;
        }
    }
    const char *key;
    const json_t *value;
    json_object_foreach ((json_t *)json_object_get(job, "parameters"), key, value) {
        if (json_object_get(params, key)) {
            mcp_reply_error(reply,
                            "submit_job cannot use the same key in both 'parameters' and "
                            "'param': %s",
                            key);
            json_decref(params);
            return NULL;
        }
        json_object_set_new(params, key, json_pack("[O]", value));
    }
    return params;
}

/* The spec of one of gflow's SubmitJobRequest, built as submit_job builds its own (the
 * environment, umask and conda environment of gflow-mcp, a script's directives), or NULL
 * with the error. *count: how many jobs it makes. */
static json_t *gflow_submit_spec(const json_t *job, bool dry_run, size_t *count,
                                 struct mcp_reply *reply)
{
    const json_t *command = json_object_get(job, "command");
    const json_t *script = json_object_get(job, "script");
    if (!command && !script) {
        mcp_reply_error(reply, "submit_job requires either 'command' or 'script'");
        return NULL;
    }
    if (command && script) {
        mcp_reply_error(reply, "submit_job accepts either 'command' or 'script', not both");
        return NULL;
    }
    if (json_is_true(json_object_get(job, "shared")) &&
        !json_object_get(job, "gpu_memory_limit_mb")) {
        mcp_reply_error(reply, "submit_job requires 'gpu_memory_limit_mb' when 'shared' is true");
        return NULL;
    }
    const char *by = json_string_value(json_object_get(job, "submitted_by"));
    const char *me = getenv("USER");
    if (by && me && strcmp(by, me) != 0) {
        mcp_reply_error(reply,
                        "submitted_by '%s': gflowd records the user who runs gflow-mcp (the "
                        "kernel says who), here '%s'; leave submitted_by out",
                        by, me);
        return NULL;
    }
    if (json_object_get(job, "notify_on") && !json_object_get(job, "notify_email")) {
        mcp_reply_error(reply, "submit_job requires 'notify_email' when 'notify_on' is set");
        return NULL;
    }
    json_t *params = gflow_sweep(job, count, reply);
    if (!params)
        return NULL;
    /* submit_job's arguments for the same job. */
    json_t *args = json_object();
    if (command)
        json_object_set(args, "command", (json_t *)command);
    else
        json_object_set(args, "script_file", (json_t *)script);
    static const char *const same[][2] = {
        {"gpus", "gpus"},
        {"conda_env", "conda_env"},
        {"run_dir", "workdir"},
        {"priority", "priority"},
        {"shared", "shared"},
        {"run_name", "name"},
        {"project", "project"},
        {"max_concurrent", "max_concurrent"},
        {"max_retries", "max_retries"},
    };
    for (size_t k = 0; k < sizeof(same) / sizeof(same[0]); k++) {
        json_t *v = json_object_get(job, same[k][0]);
        if (v)
            json_object_set(args, same[k][1], v);
    }
    const json_t *gm = json_object_get(job, "gpu_memory_limit_mb");
    if (gm)
        json_object_set_new(args, "gpu_memory",
                            json_sprintf("%lldM", (long long)json_integer_value(gm)));
    const json_t *mem = json_object_get(job, "memory_limit_mb");
    if (mem && json_integer_value(mem) > 0)
        json_object_set_new(args, "memory",
                            json_sprintf("%lldM", (long long)json_integer_value(mem)));
    json_t *deps = json_array();
    if (json_object_get(job, "depends_on"))
        json_array_append(deps, json_object_get(job, "depends_on"));
    json_array_extend(deps, json_object_get(job, "depends_on_ids"));
    if (json_array_size(deps)) {
        json_object_set(args, "depends_on", deps);
        json_object_set_new(
            args, "dependency_mode",
            json_string(dep_mode(json_string_value(json_object_get(job, "dependency_mode")))));
    }
    json_decref(deps);
    if (json_object_size(params))
        json_object_set(args, "params", params);
    json_decref(params);
    json_object_set_new(args, "dry_run", json_boolean(dry_run));
    json_t *spec = mcp_submit_spec(args, reply);
    json_decref(args);
    if (!spec)
        return NULL;
    /* The fields submit_job has no argument for, straight into the spec. */
    const json_t *tl = json_object_get(job, "time_limit_secs");
    if (tl)
        json_object_set(spec, "time_limit", (json_t *)tl);
    const json_t *ac = json_object_get(job, "auto_cancel_on_dependency_failure");
    if (ac)
        json_object_set(spec, "auto_cancel", (json_t *)ac);
    const json_t *close = json_object_get(job, "auto_close_tmux");
    if (close)
        json_object_set(spec, "auto_close", (json_t *)close);
    const json_t *emails = json_object_get(job, "notify_email");
    if (json_array_size(emails)) {
        struct strbuf sb;
        strbuf_init(&sb);
        size_t i;
        const json_t *e;
        json_array_foreach (emails, i, e)
            strbuf_addf(&sb, "%s%s", i ? "," : "", json_string_value(e));
        json_object_set_new(spec, "notify_email", json_string(sb.buf));
        strbuf_free(&sb);
        const json_t *on = json_object_get(job, "notify_on");
        if (on)
            json_object_set(spec, "notify_on", (json_t *)on);
    }
    return spec;
}

/* The jobs' specs (NULL entries where one is wrong, with its error in errors), and the
 * total they make; -1 with reply's error when there are too many. */
static int gflow_submit_all(const json_t *args, bool dry_run, json_t *specs, json_t *errors,
                            struct mcp_reply *reply)
{
    size_t total = 0, i;
    const json_t *job;
    json_array_foreach (json_object_get(args, "jobs"), i, job) {
        struct mcp_reply one = {0};
        size_t count = 1;
        json_t *spec = gflow_submit_spec(job, dry_run, &count, &one);
        json_array_append_new(specs, spec ? spec : json_null());
        json_array_append_new(errors, one.error ? json_string(one.error) : json_null());
        free(one.error);
        total += spec ? count : 0;
    }
    if (total > GFLOW_SUBMIT_MAX) {
        mcp_reply_error(reply, "submit_jobs accepts at most %d jobs (these make %zu)",
                        GFLOW_SUBMIT_MAX, total);
        return -1;
    }
    return 0;
}

void mcp_tool_preview_submit_jobs(const json_t *args, struct mcp_reply *reply)
{
    json_t *specs = json_array(), *errors = json_array();
    if (gflow_submit_all(args, true, specs, errors, reply) < 0)
        goto out;
    json_t *results = json_array();
    bool valid = true;
    size_t expanded = 0, i;
    json_t *spec;
    json_array_foreach (specs, i, spec) {
        json_t *answer = NULL;
        char *err = NULL;
        if (json_is_null(spec)) {
            err = xstrdup(json_string_value(json_array_get(errors, i)));
        } else if (mcp_daemon_json("POST", "/v1/jobs?detail=full", spec, &answer, NULL, &err) ==
                   0) {
            size_t k;
            json_t *job;
            json_array_foreach (json_object_get(answer, "jobs"), k, job)
                json_array_append_new(results, json_pack("{s:I, s:I, s:b, s:O, s:n, s:[]}",
                                                         "input_index", (json_int_t)i,
                                                         "expanded_index", (json_int_t)expanded++,
                                                         "ok", 1, "job", job, "error", "warnings"));
        }
        if (err) {
            valid = false;
            json_array_append_new(results,
                                  json_pack("{s:I, s:I, s:b, s:n, s:s, s:[]}", "input_index",
                                            (json_int_t)i, "expanded_index", (json_int_t)expanded++,
                                            "ok", 0, "job", "error", err, "warnings"));
            free(err);
        }
        json_decref(answer);
    }
    reply->structured =
        json_pack("{s:b, s:b, s:I, s:I, s:o, s:[]}", "dry_run", 1, "valid", valid, "input_count",
                  (json_int_t)json_array_size(specs), "expanded_count", (json_int_t)expanded,
                  "jobs", results, "warnings");
out:
    json_decref(specs);
    json_decref(errors);
}

void mcp_tool_submit_jobs(const json_t *args, struct mcp_reply *reply)
{
    json_t *specs = json_array(), *errors = json_array();
    if (gflow_submit_all(args, false, specs, errors, reply) < 0)
        goto out;
    json_t *results = json_array();
    json_int_t submitted = 0, failed = 0;
    size_t i;
    json_t *spec;
    json_array_foreach (specs, i, spec) {
        json_t *answer = NULL;
        char *err = NULL;
        if (json_is_null(spec))
            err = xstrdup(json_string_value(json_array_get(errors, i)));
        else if (mcp_daemon_json("POST", "/v1/jobs", spec, &answer, NULL, &err) == 0) {
            size_t k;
            json_t *job;
            json_array_foreach (json_object_get(answer, "jobs"), k, job) {
                submitted++;
                json_array_append_new(results,
                                      json_pack("{s:I, s:b, s:O, s:O, s:n}", "index", (json_int_t)i,
                                                "ok", 1, "job_id", json_object_get(job, "id"),
                                                "run_name", json_object_get(job, "name"), "error"));
            }
        }
        if (err) {
            failed++;
            json_array_append_new(results,
                                  json_pack("{s:I, s:b, s:n, s:n, s:s}", "index", (json_int_t)i,
                                            "ok", 0, "job_id", "run_name", "error", err));
            free(err);
        }
        json_decref(answer);
    }
    reply->structured =
        json_pack("{s:o, s:I, s:I}", "results", results, "submitted", submitted, "failed", failed);
out:
    json_decref(specs);
    json_decref(errors);
}

/* ---- update_job, preview_update_job ---- */

/* gflow's "set X" / "clear X" pair into body's field: the value, or clear_value when
 * clear is true (-1 with gflow's error when both are given). */
static int set_or_clear(const json_t *args, const char *name, const char *clear, json_t *body,
                        const char *field, json_t *clear_value, struct mcp_reply *reply)
{
    const json_t *v = json_object_get(args, name);
    bool cl = mcp_arg_bool(args, clear, false);
    if (v && cl) {
        mcp_reply_error(reply, "Cannot set and clear %s in the same request", name);
        json_decref(clear_value);
        return -1;
    }
    if (v)
        json_object_set(body, field, (json_t *)v);
    else if (cl)
        json_object_set(body, field, clear_value);
    json_decref(clear_value);
    return 0;
}

/* The PATCH body for gflow's UpdateJobToolRequest; NULL with the error. */
static json_t *gflow_update_body(const json_t *args, const char *workdir, struct mcp_reply *reply)
{
    json_t *body = json_object();
    if (json_object_get(args, "notify_email") || json_object_get(args, "notify_on")) {
        mcp_reply_error(reply, "notify_email and notify_on are fixed at submission in gflowd; "
                               "redo_job submits a copy, or cancel and submit again");
        goto bad;
    }
    const json_t *command = json_object_get(args, "command");
    const char *script = mcp_arg_str(args, "script", NULL);
    if (command && script) {
        mcp_reply_error(reply, "give command or script, not both");
        goto bad;
    }
    if (command)
        json_object_set(body, "command", (json_t *)command);
    if (script && mcp_script_file(script, workdir, body, reply) < 0)
        goto bad;
    static const char *const same[][2] = {
        {"gpus", "gpus"},
        {"priority", "priority"},
        {"parameters", "params"},
        {"auto_cancel_on_dependency_failure", "auto_cancel"},
    };
    for (size_t k = 0; k < sizeof(same) / sizeof(same[0]); k++) {
        json_t *v = json_object_get(args, same[k][0]);
        if (v)
            json_object_set(body, same[k][1], v);
    }
    if (set_or_clear(args, "conda_env", "clear_conda_env", body, "conda_env", json_null(), reply) <
            0 ||
        set_or_clear(args, "time_limit_secs", "clear_time_limit", body, "time_limit",
                     json_integer(0), reply) < 0 ||
        set_or_clear(args, "memory_limit_mb", "clear_memory_limit", body, "memory_mb",
                     json_integer(0), reply) < 0 ||
        set_or_clear(args, "gpu_memory_limit_mb", "clear_gpu_memory_limit", body, "gpu_memory_mb",
                     json_integer(0), reply) < 0 ||
        set_or_clear(args, "max_concurrent", "clear_max_concurrent", body, "max_concurrent",
                     json_integer(0), reply) < 0 ||
        set_or_clear(args, "max_retries", "clear_max_retries", body, "max_retries", json_integer(0),
                     reply) < 0)
        goto bad;
    const char *mode = mcp_arg_str(args, "dependency_mode", NULL);
    bool clear_mode = mcp_arg_bool(args, "clear_dependency_mode", false);
    if (mode && clear_mode) {
        mcp_reply_error(reply, "Cannot set and clear dependency_mode in the same request");
        goto bad;
    }
    if (mode || clear_mode) /* "all" is the default a cleared mode falls back to */
        json_object_set_new(body, "depends_mode", json_string(dep_mode(mode)));
    const json_t *deps = json_object_get(args, "depends_on_ids");
    if (deps) {
        json_t *list = json_array();
        size_t i;
        const json_t *id;
        json_array_foreach (deps, i, id)
            json_array_append_new(list, json_pack("{s:O, s:s}", "id", id, "kind", "afterok"));
        json_object_set_new(body, "depends_on", list);
    }
    if (!json_object_size(body)) {
        mcp_reply_error(reply, "nothing to update: give at least one field to change");
        goto bad;
    }
    return body;
bad:
    json_decref(body);
    return NULL;
}

/* The job (GET /v1/jobs/{id}) without its environment, as show_job gives it. */
static json_t *get_job(int64_t id, int *status, char **err)
{
    char *path = xasprintf("/v1/jobs/%lld", (long long)id);
    json_t *job = NULL;
    int rc = mcp_daemon_json("GET", path, NULL, &job, status, err);
    free(path);
    if (rc < 0)
        return NULL;
    json_object_del(job, "env");
    return job;
}

/* The names of the fields a PATCH reply's changes list. */
static json_t *changed_fields(const json_t *changes)
{
    json_t *names = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach (changes, i, c)
        json_array_append(names, json_object_get(c, "field"));
    return names;
}

/* PATCH /v1/jobs/{id} of gflow's update arguments: 0 with the job before and the reply,
 * or -1 with the error (*before set when the job could be read). */
static int gflow_update(const json_t *args, bool dry, json_t **before, json_t **answer,
                        struct mcp_reply *reply)
{
    int64_t id = mcp_arg_int(args, "job_id", 0);
    char *err = NULL;
    *answer = NULL;
    *before = get_job(id, NULL, &err);
    if (!*before) {
        reply->error = err;
        return -1;
    }
    const char *workdir = json_string_value(json_object_get(*before, "workdir"));
    json_t *body = gflow_update_body(args, workdir ? workdir : ".", reply);
    if (!body) { /* wrong arguments fail the tool, as gflow's; only the daemon's refusal
                  * is a preview's answer */
        json_decref(*before);
        *before = NULL;
        return -1;
    }
    char *path = xasprintf("/v1/jobs/%lld%s", (long long)id, dry ? "?dry_run=1" : "");
    int rc = mcp_daemon_json("PATCH", path, body, answer, NULL, &err);
    free(path);
    json_decref(body);
    if (rc < 0)
        reply->error = err;
    return rc;
}

void mcp_tool_preview_update_job(const json_t *args, struct mcp_reply *reply)
{
    json_t *before = NULL, *answer = NULL;
    int64_t id = mcp_arg_int(args, "job_id", 0);
    if (gflow_update(args, true, &before, &answer, reply) < 0) {
        if (!before) /* no such job, wrong arguments: the tool fails, as gflow's */
            return;
        /* A change the daemon refuses is the preview's answer, not a failure of it. */
        reply->structured = json_pack("{s:b, s:b, s:I, s:o, s:n, s:[], s:s, s:[]}", "dry_run", 1,
                                      "ok", 0, "job_id", (json_int_t)id, "before", before, "after",
                                      "updated_fields", "error", reply->error, "warnings");
        free(reply->error);
        reply->error = NULL;
        return;
    }
    json_t *after = json_deep_copy(before);
    const json_t *changes = json_object_get(answer, "changes");
    size_t i;
    const json_t *c;
    json_array_foreach (changes, i, c) {
        const char *field = json_string_value(json_object_get(c, "field"));
        json_t *v = json_object_get(c, "new");
        if (field && v)
            json_object_set(after, field, v);
    }
    reply->structured = json_pack("{s:b, s:b, s:I, s:o, s:o, s:o, s:n, s:[], s:O}", "dry_run", 1,
                                  "ok", 1, "job_id", (json_int_t)id, "before", before, "after",
                                  after, "updated_fields", changed_fields(changes), "error",
                                  "warnings", "changes", changes ? changes : json_null());
    json_decref(answer);
}

void mcp_tool_update_job(const json_t *args, struct mcp_reply *reply)
{
    json_t *before = NULL, *answer = NULL;
    int rc = gflow_update(args, false, &before, &answer, reply);
    json_decref(before);
    if (rc < 0)
        return;
    char *err = NULL;
    json_t *job = get_job(mcp_arg_int(args, "job_id", 0), NULL, &err);
    if (!job) {
        reply->error = err;
        json_decref(answer);
        return;
    }
    const json_t *changes = json_object_get(answer, "changes");
    reply->structured =
        json_pack("{s:o, s:o, s:O}", "job", job, "updated_fields", changed_fields(changes),
                  "changes", changes ? changes : json_null());
    json_decref(answer);
}

/* ---- redo_job ---- */

void mcp_tool_redo_job(const json_t *args, struct mcp_reply *reply)
{
    int64_t id = mcp_arg_int(args, "job_id", 0);
    json_t *body = json_object();
    static const char *const same[][2] = {
        {"gpus", "gpus"},
        {"priority", "priority"},
        {"time_limit_secs", "time_limit"},
        {"memory_limit_mb", "memory_mb"},
        {"gpu_memory_limit_mb", "gpu_memory_mb"},
        {"conda_env", "conda_env"},
        {"cascade", "cascade"},
    };
    for (size_t k = 0; k < sizeof(same) / sizeof(same[0]); k++) {
        json_t *v = json_object_get(args, same[k][0]);
        if (v)
            json_object_set(body, same[k][1], v);
    }
    const json_t *dep = json_object_get(args, "depends_on");
    bool clear = mcp_arg_bool(args, "clear_deps", false);
    if (dep && clear) {
        mcp_reply_error(reply, "give depends_on or clear_deps, not both");
        json_decref(body);
        return;
    }
    if (dep)
        json_object_set_new(body, "depends_on",
                            json_pack("[{s:O, s:s}]", "id", dep, "kind", "afterok"));
    else if (clear)
        json_object_set_new(body, "depends_on", json_array());
    char *path = xasprintf("/v1/jobs/%lld/redo", (long long)id);
    json_t *answer = NULL;
    char *err = NULL;
    int rc = mcp_daemon_json("POST", path, body, &answer, NULL, &err);
    free(path);
    json_decref(body);
    if (rc < 0) {
        reply->error = err;
        return;
    }
    const json_t *jobs = json_object_get(answer, "jobs");
    const json_t *first = json_array_get(jobs, 0);
    json_t *cascaded = json_array();
    size_t i;
    const json_t *j;
    json_array_foreach (jobs, i, j) {
        if (i)
            json_array_append_new(cascaded, json_pack("{s:O, s:O, s:O}", "original_job_id",
                                                      json_object_get(j, "redo_of"), "new_job_id",
                                                      json_object_get(j, "id"), "run_name",
                                                      json_object_get(j, "name")));
    }
    reply->structured =
        json_pack("{s:I, s:O, s:O, s:o, s:I}", "original_job_id", (json_int_t)id, "new_job_id",
                  json_object_get(first, "id"), "run_name", json_object_get(first, "name"),
                  "cascaded_jobs", cascaded, "cascaded_count",
                  (json_int_t)(json_array_size(jobs) ? json_array_size(jobs) - 1 : 0));
    json_decref(answer);
}

/* ---- get_job, get_job_log, get_info, get_stats ---- */

void mcp_tool_get_job(const json_t *args, struct mcp_reply *reply)
{
    char *err = NULL;
    reply->structured = get_job(mcp_arg_int(args, "job_id", 0), NULL, &err);
    if (!reply->structured)
        reply->error = err;
}

void mcp_tool_get_job_log(const json_t *args, struct mcp_reply *reply)
{
    int64_t id = mcp_arg_int(args, "job_id", 0);
    int64_t first = mcp_arg_int(args, "first_lines", 0);
    int64_t last = mcp_arg_int(args, "last_lines", mcp_arg_int(args, "tail_lines", 0));
    size_t max = (size_t)mcp_arg_int(args, "max_bytes", MCP_LOG_BYTES_DEFAULT);
    if (first && last) {
        mcp_reply_error(reply, "give first_lines or last_lines, not both");
        return;
    }
    char *err = NULL;
    json_t *job = get_job(id, NULL, &err);
    if (!job) {
        reply->error = err;
        return;
    }
    char *query = first ? xasprintf("first=%lld", (long long)first)
                        : xasprintf("last=%lld", (long long)(last ? last : MCP_LOG_LINES_DEFAULT));
    struct strbuf text;
    strbuf_init(&text);
    bool cut = false;
    int status;
    int rc = mcp_daemon_log(id, query, max, !first, &text, &cut, &status, &err);
    free(query);
    if (rc < 0) {
        reply->error = err;
    } else {
        char *clean = mcp_clean_log(text.buf ? text.buf : "", text.len);
        json_t *t = jsonrpc_text(clean, strlen(clean));
        reply->structured = json_pack("{s:I, s:O, s:O, s:n, s:o, s:b}", "job_id", (json_int_t)id,
                                      "log_path", json_object_get(job, "log_path"), "text", t,
                                      "program_output", "full_text", t, "truncated", cut);
        free(clean);
    }
    strbuf_free(&text);
    json_decref(job);
}

void mcp_tool_get_info(const json_t *args, struct mcp_reply *reply)
{
    (void)args;
    json_t *gpus = NULL;
    char *err = NULL;
    if (mcp_daemon_json("GET", "/v1/gpus", NULL, &gpus, NULL, &err) < 0) {
        reply->error = err;
        return;
    }
    json_t *list = json_array();
    size_t i;
    const json_t *g;
    json_array_foreach (json_object_get(gpus, "gpus"), i, g) {
        const char *state = json_string_value(json_object_get(g, "state"));
        bool idle = state && !strcmp(state, "idle");
        json_t *reason = json_object_get(g, "reason");
        if (json_is_null(reason))
            reason = NULL;
        json_array_append_new(
            list,
            json_pack("{s:O, s:O, s:b, s:O, s:O, s:O, s:O}", "uuid", json_object_get(g, "uuid"),
                      "index", json_object_get(g, "index"), "available", idle, "reason",
                      reason ? reason
                      : idle ? json_null()
                             : json_object_get(g, "state"),
                      "name", json_object_get(g, "name"), "state", json_object_get(g, "state"),
                      "jobs", json_object_get(g, "jobs")));
    }
    json_t *allowed = json_object_get(gpus, "allowed");
    reply->structured = json_pack(
        "{s:o, s:O, s:O, s:O}", "gpus", list, "allowed_gpu_indices",
        allowed ? allowed : json_null(), "gpu_allocation_strategy",
        json_object_get(gpus, "strategy") ? json_object_get(gpus, "strategy") : json_null(),
        "error", json_object_get(gpus, "error") ? json_object_get(gpus, "error") : json_null());
    /* Under Slurm the GPUs are the partition's nodes' (GET /v1/backend's shape). */
    json_t *backend = json_object_get(gpus, "backend");
    if (backend)
        json_object_set(reply->structured, "backend", backend);
    json_decref(gpus);
}

void mcp_tool_get_stats(const json_t *args, struct mcp_reply *reply)
{
    struct strbuf path;
    strbuf_init(&path);
    strbuf_adds(&path, "/v1/stats");
    const char *user = mcp_arg_str(args, "user", NULL);
    if (user)
        client_query_add(&path, "user", user);
    /* gflow's default period is all time; ours is the last 7 days. */
    strbuf_addf(&path, "%csince=%lld", strchr(path.buf, '?') ? '&' : '?',
                (long long)mcp_arg_int(args, "since", 0));
    char *err = NULL;
    if (mcp_daemon_json("GET", path.buf, NULL, &reply->structured, NULL, &err) < 0)
        reply->error = err;
    strbuf_free(&path);
}
