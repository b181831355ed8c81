/* mcp_submit: submit_job. It builds the spec gbatch would send (src/cli/gbatch.c) for
 * the same choices, posts it to /v1/jobs, and lets gflowd judge it: the job runs in
 * workdir (an argument, or gflow-mcp's own directory) with gflow-mcp's environment, as a
 * job submitted from the shell that started it, with that shell's umask and conda
 * environment. Values in gbatch's own syntax ("1:30:00", "24G", "22:00") go through the
 * same parsers (src/core/parse.c), so they mean the same; a script's "# GFLOW" lines
 * are read as gbatch reads them (mcp_directives.c), under the arguments. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "files.h"
#include "job.h"
#include "jobopts.h"
#include "mcp.h"
#include "parse.h"

const char mcp_submit_schema[] =
    "{\"type\": \"object\", \"additionalProperties\": false, \"properties\": {"
    "\"command\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"a shell command "
    "line, run by /bin/bash -c (give this, script or script_file)\"},"
    "\"script\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"the text of a job "
    "script, stored with the job; its # GFLOW lines count as in gbatch (give this, command or "
    "script_file)\"},"
    "\"script_file\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"a job "
    "script to read, as 'gbatch FILE' (relative to workdir; give this, command or "
    "script)\"},"
    "\"name\": {\"type\": \"string\", \"description\": \"the job's name (default: the "
    "command's first word, or the script's file name)\"},"
    "\"workdir\": {\"type\": \"string\", \"description\": \"absolute directory the job runs in "
    "(default: gflow-mcp's current directory)\"},"
    "\"gpus\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"number of whole "
    "GPUs (default 0)\"},"
    "\"gpu_memory\": {\"type\": \"string\", \"description\": \"GPU memory per GPU, e.g. 20G "
    "(with shared: the job's share)\"},"
    "\"shared\": {\"type\": \"boolean\", \"description\": \"share the GPUs with other shared "
    "jobs (needs gpus and gpu_memory)\"},"
    "\"mig_profile\": {\"type\": \"string\", \"description\": \"a MIG instance profile such as "
    "1g.18gb, instead of whole GPUs\"},"
    "\"time\": {\"type\": \"string\", \"description\": \"time limit: HH:MM:SS, MM:SS, MM (a "
    "bare number is minutes) or D-HH:MM:SS\"},"
    "\"memory\": {\"type\": \"string\", \"description\": \"host memory limit, e.g. 4G or "
    "512M\"},"
    "\"priority\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 255, \"description\": "
    "\"0-255, higher runs first (default 10)\"},"
    "\"depends_on\": {\"type\": \"array\", \"maxItems\": 1000, \"items\": {\"type\": "
    "\"integer\", \"minimum\": 1}, \"description\": \"job ids this job waits for\"},"
    "\"dependency_kind\": {\"type\": \"string\", \"enum\": [\"afterok\", \"afterany\", "
    "\"afternotok\"], \"description\": \"start after they succeeded (afterok, default), "
    "ended in any state, or failed\"},"
    "\"dependency_mode\": {\"type\": \"string\", \"enum\": [\"all\", \"any\"], "
    "\"description\": \"all dependencies must be met (default), or one\"},"
    "\"begin\": {\"type\": \"string\", \"description\": \"start no earlier than this: HH:MM, "
    "YYYY-MM-DD[THH:MM], now+2h\"},"
    "\"hold\": {\"type\": \"boolean\", \"description\": \"submit held (start only once "
    "released)\"},"
    "\"conda_env\": {\"type\": \"string\", \"description\": \"conda environment to activate "
    "(default for a command: gflow-mcp's CONDA_DEFAULT_ENV)\"},"
    "\"project\": {\"type\": \"string\", \"description\": \"a project code\"},"
    "\"max_retries\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"run a failed "
    "job again up to N times\"},"
    "\"requeue\": {\"type\": \"boolean\", \"description\": \"the job may be preempted and "
    "queued again\"},"
    "\"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, "
    "\"description\": \"variables to set on top of gflow-mcp's environment\"},"
    "\"array\": {\"type\": \"string\", \"description\": \"one job per task id: 1-10, 1-10:2, "
    "1,3,7, with %K to run at most K at once\"},"
    "\"params\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"array\", "
    "\"items\": {\"type\": \"string\"}}, \"description\": \"a sweep: one job per combination, "
    "e.g. {\\\"lr\\\": [\\\"0.1\\\", \\\"0.01\\\"]}; {lr} in the command is replaced\"},"
    "\"name_template\": {\"type\": \"string\", \"description\": \"with params: job names such "
    "as lr{lr}\"},"
    "\"max_concurrent\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"at most K "
    "jobs of this submission run at once\"},"
    "\"dry_run\": {\"type\": \"boolean\", \"description\": \"check and show what would be "
    "submitted, submit nothing\"}}}";

/* gflow-mcp's environment, as gbatch captures the shell's (values that are not UTF-8
 * cannot travel in JSON and are left out), with the caller's additions on top. */
static json_t *submit_environment(const json_t *extra)
{
    json_t *env = jobopts_environment();
    json_object_update(env, (json_t *)extra);
    return env;
}

/* A sweep's rows: the cartesian product of params' value lists, as gbatch sends them
 * ({"names": [...], "rows": [[...], ...]}); NULL with an error when it is too large. */
static json_t *submit_sweep(const json_t *params, struct mcp_reply *reply)
{
    json_t *names = json_array(), *rows = json_array();
    json_array_append_new(rows, json_array());
    const char *name;
    const json_t *values;
    json_object_foreach ((json_t *)params, name, values) {
        if (!param_name_valid(name) || !json_array_size(values)) {
            mcp_reply_error(reply,
                            "params: '%s' must be a name of letters, digits and '_' with a "
                            "non-empty list of values",
                            name);
            goto bad;
        }
        if (json_array_size(rows) * json_array_size(values) > MCP_SWEEP_MAX) {
            mcp_reply_error(reply, "params: the sweep has more than %d jobs", MCP_SWEEP_MAX);
            goto bad;
        }
        json_array_append_new(names, json_string(name));
        json_t *next = json_array();
        size_t ri, vi;
        json_t *row, *v;
        json_array_foreach (rows, ri, row) {
            json_array_foreach ((json_t *)values, vi, v) {
                json_t *r2 = json_copy(row);
                json_array_append(r2, v);
                json_array_append_new(next, r2);
            }
        }
        json_decref(rows);
        rows = next;
    }
    return json_pack("{s:o, s:o}", "names", names, "rows", rows);
bad:
    json_decref(names);
    json_decref(rows);
    return NULL;
}

/* The fields given in gbatch's syntax, parsed into the spec's; -1 with the error set. */
static int submit_parsed_fields(const json_t *args, json_t *spec, struct mcp_reply *reply)
{
    char *err = NULL;
    const char *time = mcp_arg_str(args, "time", NULL);
    const char *memory = mcp_arg_str(args, "memory", NULL);
    const char *gpu_memory = mcp_arg_str(args, "gpu_memory", NULL);
    const char *begin = mcp_arg_str(args, "begin", NULL);
    int64_t v;
    if (time) {
        if (parse_time_limit(time, &v, &err) < 0)
            goto bad;
        json_object_set_new(spec, JOB_KEY_TIME_LIMIT, json_integer(v));
    }
    if (memory) {
        if (parse_memory_mb(memory, &v, &err) < 0)
            goto bad;
        json_object_set_new(spec, JOB_KEY_MEMORY_MB, json_integer(v));
    }
    if (gpu_memory) {
        if (parse_memory_mb(gpu_memory, &v, &err) < 0)
            goto bad;
        json_object_set_new(spec, JOB_KEY_GPU_MEMORY_MB, json_integer(v));
    }
    if (begin) {
        double at;
        if (parse_begin_time(begin, now_wall(), &at, &err) < 0)
            goto bad;
        json_object_set_new(spec, JOB_KEY_BEGIN_TIME, json_real(at));
    }
    return 0;
bad:
    mcp_reply_error(reply, "%s", err);
    free(err);
    return -1;
}

/* The GPU options that only make sense together (gbatch_check_gpus). */
static int submit_check_gpus(const json_t *spec, struct mcp_reply *reply)
{
    bool shared = json_is_true(json_object_get(spec, JOB_KEY_SHARED));
    bool gpu_memory = json_object_get(spec, JOB_KEY_GPU_MEMORY_MB) != NULL;
    json_int_t gpus = json_integer_value(json_object_get(spec, JOB_KEY_GPUS));
    if (shared && !gpu_memory)
        mcp_reply_error(reply, "shared needs gpu_memory (the share of each GPU this job may use)");
    else if (shared && gpus == 0)
        mcp_reply_error(reply, "shared needs gpus (the number of GPUs to share)");
    else if (gpu_memory && gpus == 0)
        mcp_reply_error(reply, "gpu_memory is per GPU; it needs gpus");
    return reply->error ? -1 : 0;
}

/* The job's script from script_file (relative to workdir) into spec: its text and its
 * real path, as gbatch sends them. -1 with the error set. */
int mcp_script_file(const char *file, const char *workdir, json_t *spec, struct mcp_reply *reply)
{
    char *path = file[0] == '/' ? xstrdup(file) : xasprintf("%s/%s", workdir, file);
    char *real = realpath(path, NULL);
    struct stat st;
    size_t len = 0;
    char *text = NULL;
    json_t *t = NULL, *p = NULL;
    if (!real || stat(real, &st) < 0) {
        mcp_reply_error(reply, "cannot read script %s: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        mcp_reply_error(reply, "%s is not a file; give a job script", path);
    } else if (st.st_size > MCP_SCRIPT_MAX) {
        mcp_reply_error(reply, "%s is larger than %d bytes; a job script is text", path,
                        MCP_SCRIPT_MAX);
    } else if (!(text = read_file(real, &len))) {
        mcp_reply_error(reply, "cannot read script %s: %s", path, strerror(errno));
    } else if (memchr(text, '\0', len) || !(t = json_stringn(text, len))) {
        mcp_reply_error(reply, "%s is not a text file (NUL bytes, or not UTF-8)", path);
    } else if (!(p = json_string(real))) {
        mcp_reply_error(reply, "the script's path is not valid UTF-8");
    } else {
        json_object_set_new(spec, JOB_KEY_SCRIPT, t);
        json_object_set_new(spec, JOB_KEY_SCRIPT_PATH, p);
        t = NULL;
    }
    json_decref(t);
    free(text);
    free(real);
    free(path);
    return reply->error ? -1 : 0;
}

/* The job's command or script into spec (its directives are read later, once the
 * arguments' fields are in: submit_directives). */
static int submit_what(const json_t *args, const char *workdir, json_t *spec,
                       struct mcp_reply *reply)
{
    const json_t *command = json_object_get(args, "command");
    const json_t *script = json_object_get(args, "script");
    const char *file = mcp_arg_str(args, "script_file", NULL);
    if (!!command + !!script + !!file != 1) {
        mcp_reply_error(reply, "give exactly one of command (a shell command line), script (a "
                               "script's text) and script_file (a script to read)");
        return -1;
    }
    if (command) {
        json_object_set(spec, JOB_KEY_COMMAND, (json_t *)command);
        return 0;
    }
    if (script) {
        json_object_set(spec, JOB_KEY_SCRIPT, (json_t *)script);
        json_object_set_new(spec, JOB_KEY_SCRIPT_PATH, json_string("-"));
        return 0;
    }
    return mcp_script_file(file, workdir, spec, reply);
}

/* The directives of spec's script under the fields already there; -1 with the error. */
static int submit_directives(json_t *spec, struct mcp_reply *reply)
{
    const char *script = json_string_value(json_object_get(spec, JOB_KEY_SCRIPT));
    if (!script)
        return 0;
    const char *path = json_string_value(json_object_get(spec, JOB_KEY_SCRIPT_PATH));
    char *err = NULL;
    json_t *d = mcp_directives(script, strcmp(path, "-") ? path : "script", &err);
    if (!d) {
        mcp_reply_error(reply, "%s", err);
        free(err);
        return -1;
    }
    jobopts_merge(spec, d);
    json_decref(d);
    if (json_is_null(json_object_get(spec, JOB_KEY_CONDA_ENV))) /* --conda-env '': none */
        json_object_del(spec, JOB_KEY_CONDA_ENV);
    return 0;
}

json_t *mcp_submit_spec(const json_t *args, struct mcp_reply *reply)
{
    json_t *spec = json_object();
    const char *workdir = mcp_arg_str(args, "workdir", NULL);
    char *cwd = workdir ? NULL : getcwd(NULL, 0);
    if (!workdir && !cwd) {
        mcp_reply_error(reply, "cannot determine gflow-mcp's current directory (%s); give workdir",
                        strerror(errno));
        goto bad;
    }
    json_t *wd = json_string(workdir ? workdir : cwd);
    if (!wd) {
        mcp_reply_error(reply, "gflow-mcp's current directory is not valid UTF-8; give workdir");
        free(cwd);
        goto bad;
    }
    json_object_set_new(spec, JOB_KEY_WORKDIR, wd);
    int rc = submit_what(args, json_string_value(wd), spec, reply);
    free(cwd);
    if (rc < 0)
        goto bad;
    /* The arguments that are spec fields as they are. */
    static const char *const same[] = {
        "name",        "gpus",    "shared", "mig_profile",    "priority",  "hold",    "project",
        "max_retries", "requeue", "array",  "max_concurrent", "conda_env", "dry_run", NULL};
    for (const char *const *f = same; *f; f++) {
        json_t *v = json_object_get(args, *f);
        if (v)
            json_object_set(spec, *f, v);
    }
    const json_t *deps = json_object_get(args, "depends_on");
    if (json_array_size(deps)) {
        const char *kind = mcp_arg_str(args, "dependency_kind", "afterok");
        json_t *list = json_array();
        size_t i;
        const json_t *id;
        json_array_foreach (deps, i, id)
            json_array_append_new(list, json_pack("{s:O, s:s}", "id", id, "kind", kind));
        json_object_set_new(spec, JOB_KEY_DEPENDS_ON, list);
        json_object_set_new(spec, JOB_KEY_DEPENDS_MODE,
                            json_string(mcp_arg_str(args, "dependency_mode", "all")));
    }
    if (submit_parsed_fields(args, spec, reply) < 0 || submit_directives(spec, reply) < 0 ||
        submit_check_gpus(spec, reply) < 0)
        goto bad;
    json_object_set_new(spec, JOB_KEY_ENV, submit_environment(json_object_get(args, "env")));
    if (!json_object_get(spec, JOB_KEY_UMASK)) { /* a directive's --umask wins */
        mode_t mask = umask(0);
        umask(mask);
        char text[8];
        format_umask((int)mask, text);
        json_object_set_new(spec, JOB_KEY_UMASK, json_string(text));
    }
    /* A command job runs in the starting shell's conda environment, as with gbatch. */
    const char *conda = getenv("CONDA_DEFAULT_ENV");
    json_t *conda_json;
    if (!json_object_get(spec, JOB_KEY_CONDA_ENV) && json_object_get(spec, JOB_KEY_COMMAND) &&
        conda && *conda && (conda_json = json_string(conda)))
        json_object_set_new(spec, JOB_KEY_CONDA_ENV, conda_json);

    const json_t *params = json_object_get(args, "params");
    if (json_object_size(params)) {
        json_t *rows = submit_sweep(params, reply);
        if (!rows)
            goto bad;
        json_object_set_new(spec, JOB_KEY_PARAMS, rows);
        const json_t *tmpl = json_object_get(args, "name_template");
        if (tmpl)
            json_object_set(spec, JOB_KEY_NAME_TEMPLATE, (json_t *)tmpl);
    } else if (json_object_get(args, "name_template")) {
        mcp_reply_error(reply, "name_template names the jobs of a sweep: it needs params");
        goto bad;
    }
    return spec;
bad:
    json_decref(spec);
    return NULL;
}

void mcp_tool_submit(const json_t *args, struct mcp_reply *reply)
{
    json_t *spec = mcp_submit_spec(args, reply);
    if (!spec)
        return;
    char *err = NULL;
    json_t *answer = NULL;
    if (mcp_daemon_json("POST", "/v1/jobs", spec, &answer, NULL, &err) < 0) {
        reply->error = err;
    } else {
        if (!json_is_object(answer)) {
            json_decref(answer);
            answer = json_object();
        }
        bool dry = mcp_arg_bool(args, "dry_run", false);
        json_object_set_new(answer, "dry_run", json_boolean(dry));
        if (dry) /* what would run, as gbatch --dry-run shows it */
            json_object_set_new(answer, "workdir",
                                json_deep_copy(json_object_get(spec, JOB_KEY_WORKDIR)));
        reply->structured = answer;
    }
    json_decref(spec);
}
