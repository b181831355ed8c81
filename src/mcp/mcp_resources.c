/* mcp_resources: jobs and their logs as MCP resources. gflow://jobs/{id} is the job (as
 * show_job gives it, JSON) and gflow://jobs/{id}/log its output: the last 64 KiB, with a
 * first line saying so when earlier output was left out (the job_log tool pages
 * through the rest). resources/list names the logs of the caller's latest jobs; both
 * forms are templates. */
#include <stdlib.h>
#include <string.h>

#include "jsonrpc.h"
#include "mcp.h"

#define URI_PREFIX "gflow://jobs/"

json_t *mcp_resource_templates(void)
{
    return json_pack(
        "{s:[{s:s, s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s, s:s}]}", "resourceTemplates",
        "uriTemplate", URI_PREFIX "{id}/log", "name", "job-log", "title", "Job log", "description",
        "a gflow job's output (stdout and stderr), its last 64 KiB", "mimeType", "text/plain",
        "uriTemplate", URI_PREFIX "{id}", "name", "job", "title", "Job", "description",
        "everything gflow knows about a job (as show_job)", "mimeType", "application/json");
}

json_t *mcp_resources_list(char **err)
{
    char *path = xasprintf("/v1/jobs?sort=-id&limit=%d", MCP_RESOURCE_JOBS);
    json_t *reply = NULL;
    int rc = mcp_daemon_json("GET", path, NULL, &reply, NULL, err);
    free(path);
    if (rc < 0)
        return NULL;
    json_t *list = json_array();
    size_t i;
    const json_t *job;
    json_array_foreach (json_object_get(reply, "jobs"), i, job) {
        json_int_t id = json_integer_value(json_object_get(job, "id"));
        const char *name = json_string_value(json_object_get(job, "name"));
        const char *state = json_string_value(json_object_get(job, "state"));
        char *uri = xasprintf(URI_PREFIX "%lld/log", (long long)id);
        char *title = xasprintf("Log of job %lld (%s, %s)", (long long)id, name ? name : "-",
                                state ? state : "?");
        char *rname = xasprintf("job-%lld-log", (long long)id);
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:s}", "uri", uri, "name", rname,
                                              "title", title, "mimeType", "text/plain"));
        free(uri);
        free(title);
        free(rname);
    }
    json_decref(reply);
    return json_pack("{s:o}", "resources", list);
}

/* The job id and part of a gflow:// URI: 0 for gflow://jobs/ID, 1 for .../ID/log;
 * -1 for anything else. */
static int parse_uri(const char *uri, int64_t *id)
{
    if (strncmp(uri, URI_PREFIX, strlen(URI_PREFIX)) != 0)
        return -1;
    const char *p = uri + strlen(URI_PREFIX);
    size_t digits = strspn(p, "0123456789");
    if (!digits || digits > 18 || p[0] == '0')
        return -1;
    char *num = xstrndup(p, digits);
    *id = strtoll(num, NULL, 10);
    free(num);
    if (!strcmp(p + digits, ""))
        return 0;
    if (!strcmp(p + digits, "/log"))
        return 1;
    return -1;
}

/* The error code of a daemon answer: 404 is MCP's "resource not found". */
static int error_code(int status)
{
    return status == 404 ? MCP_RESOURCE_NOT_FOUND : JSONRPC_INTERNAL_ERROR;
}

json_t *mcp_resource_read(const char *uri, int *code, char **err)
{
    int64_t id;
    int part = parse_uri(uri, &id);
    if (part < 0) {
        *code = MCP_RESOURCE_NOT_FOUND;
        *err = xasprintf(
            "no such resource: %s (gflow-mcp has " URI_PREFIX "ID and " URI_PREFIX "ID/log)", uri);
        return NULL;
    }
    int status = 0;
    json_t *content;
    if (part == 0) {
        char *path = xasprintf("/v1/jobs/%lld", (long long)id);
        json_t *job = NULL;
        int rc = mcp_daemon_json("GET", path, NULL, &job, &status, err);
        free(path);
        if (rc < 0) {
            *code = error_code(status);
            return NULL;
        }
        json_object_del(job, "env"); /* as show_job: secrets stay out unless asked for */
        char *text = json_dumps(job, JSON_COMPACT);
        json_decref(job);
        content = json_pack("{s:s, s:s, s:s}", "uri", uri, "mimeType", "application/json", "text",
                            text ? text : "{}");
        free(text);
    } else {
        struct strbuf log;
        strbuf_init(&log);
        bool cut = false;
        if (mcp_daemon_log(id, "last=1000000", MCP_LOG_BYTES_DEFAULT, true, &log, &cut, &status,
                           err) < 0) {
            *code = error_code(status);
            strbuf_free(&log);
            return NULL;
        }
        struct strbuf shown;
        strbuf_init(&shown);
        if (cut)
            strbuf_addf(&shown,
                        "[gflow-mcp: the last %d bytes; earlier output left out (the job_log "
                        "tool reads any part)]\n",
                        MCP_LOG_BYTES_DEFAULT);
        strbuf_add(&shown, log.buf ? log.buf : "", log.len);
        json_t *text = jsonrpc_text(shown.buf ? shown.buf : "", shown.len);
        content = json_pack("{s:s, s:s, s:o}", "uri", uri, "mimeType", "text/plain", "text", text);
        strbuf_free(&shown);
        strbuf_free(&log);
    }
    return json_pack("{s:[o]}", "contents", content);
}
