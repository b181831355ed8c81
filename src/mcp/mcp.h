/* mcp: what gflow-mcp's files share. gflow-mcp is a Model Context Protocol server on
 * stdio (mcp.c: the session and its methods) that lets an AI assistant use gflow as the
 * user who runs it: every tool is a request to gflowd over its Unix socket (the client
 * library, src/client), so it can do nothing that user cannot. mcp_tools.c: the tools;
 * mcp_submit.c: submit_job's spec, built as gbatch builds it; mcp_directives.c: a
 * script's "# GFLOW" lines, read with gbatch's parsers; mcp_resources.c: job logs and
 * jobs as resources; mcp_daemon.c: requests that report errors instead of exiting;
 * mcp_args.c: tool arguments checked against each tool's input schema; jsonrpc.c: the
 * framing. */
#ifndef GFLOW_MCP_H
#define GFLOW_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The bounds of what one call reads from the daemon and returns to the assistant (plain
 * numbers: the tools' schemas spell them with MCP_STR). */
#define MCP_LOG_BYTES_DEFAULT 65536
#define MCP_LOG_BYTES_MAX 1048576
#define MCP_LOG_LINES_DEFAULT 200
#define MCP_LOG_LINES_MAX 100000
#define MCP_LIST_DEFAULT 50
#define MCP_LIST_MAX 1000
/* resources/list names the logs of this many of the caller's latest jobs. */
#define MCP_RESOURCE_JOBS 20
/* A sweep given to submit_job makes at most this many jobs. */
#define MCP_SWEEP_MAX 100000

#define MCP_STR_(x) #x
#define MCP_STR(x) MCP_STR_(x)
/* show_job shows at most this many bytes of a job's script. */
#define MCP_SCRIPT_SHOWN 65536
/* submit_job reads a script_file of at most this many bytes. */
#define MCP_SCRIPT_MAX (16 << 20)

/* ---- mcp_daemon.c ---- */

/* A JSON request to gflowd. 0 with *reply the parsed 2xx body (NULL if empty); -1 with
 * *err (caller frees) the daemon's own message (its "error"), or why it could not be
 * reached. *status: the HTTP status, 0 when there was no answer (may be NULL). */
int mcp_daemon_json(const char *method, const char *path, const json_t *body, json_t **reply,
                    int *status, char **err);

/* A bounded read of GET /v1/jobs/{id}/log?query into out: at most max bytes, the first
 * ones (keep_tail false) or the last ones (true); *cut says whether more was there. */
int mcp_daemon_log(int64_t id, const char *query, size_t max, bool keep_tail, struct strbuf *out,
                   bool *cut, int *status, char **err);

/* ---- mcp_args.c ---- */

/* Checks a tools/call's arguments against the tool's input schema (the subset of JSON
 * Schema the tools use: type, properties, required, additionalProperties, enum,
 * minimum, maximum, minLength, items, maxItems). 0, or -1 with *err saying which
 * argument is wrong and what it should be (caller frees). */
int mcp_args_check(const json_t *schema, const json_t *args, char **err);

/* Arguments already checked: the value, or dflt when absent. */
const char *mcp_arg_str(const json_t *args, const char *name, const char *dflt);
int64_t mcp_arg_int(const json_t *args, const char *name, int64_t dflt);
bool mcp_arg_bool(const json_t *args, const char *name, bool dflt);

/* ---- mcp_tools.c ---- */

/* What a tool answers: the structured result, or an error the assistant sees as a tool
 * error (isError); text is what the content shows (NULL: structured as JSON). */
struct mcp_reply {
    json_t *structured;
    char *text;
    char *error;
};

struct mcp_tool {
    const char *name, *title, *description;
    const char *input_schema; /* JSON text */
    bool read_only, destructive, idempotent;
    void (*call)(const json_t *args, struct mcp_reply *reply);
};

/* The tools, in the order tools/list gives them; *n of them. */
const struct mcp_tool *mcp_tools(size_t *n);
/* The tool named name, or NULL. */
const struct mcp_tool *mcp_tool_find(const char *name);

/* Sets reply->error (formatted). */
void mcp_reply_error(struct mcp_reply *reply, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- mcp_submit.c ---- */

/* submit_job: the spec gbatch would send for these arguments, posted to /v1/jobs. */
void mcp_tool_submit(const json_t *args, struct mcp_reply *reply);
extern const char mcp_submit_schema[];
/* The spec submit_job would post for args (already checked against its schema), or
 * NULL with reply's error set. */
json_t *mcp_submit_spec(const json_t *args, struct mcp_reply *reply);
/* A script file (relative to workdir) into spec's script and script_path, as gbatch
 * sends them; -1 with reply's error set. */
int mcp_script_file(const char *file, const char *workdir, json_t *spec, struct mcp_reply *reply);

/* ---- mcp_gflow.c: gflow's tools, with its names and argument shapes ---- */

/* preview_submit_jobs, submit_jobs, preview_update_job, update_job, redo_job, and
 * gflow's names for what the tools above do: get_job, get_job_log, get_info,
 * get_stats. */
void mcp_tool_preview_submit_jobs(const json_t *args, struct mcp_reply *reply);
void mcp_tool_submit_jobs(const json_t *args, struct mcp_reply *reply);
void mcp_tool_preview_update_job(const json_t *args, struct mcp_reply *reply);
void mcp_tool_update_job(const json_t *args, struct mcp_reply *reply);
void mcp_tool_redo_job(const json_t *args, struct mcp_reply *reply);
void mcp_tool_get_job(const json_t *args, struct mcp_reply *reply);
void mcp_tool_get_job_log(const json_t *args, struct mcp_reply *reply);
void mcp_tool_get_info(const json_t *args, struct mcp_reply *reply);
void mcp_tool_get_stats(const json_t *args, struct mcp_reply *reply);
extern const char mcp_submit_jobs_schema[], mcp_update_job_schema[], mcp_redo_job_schema[],
    mcp_get_job_schema[], mcp_get_job_log_schema[], mcp_get_stats_schema[];

/* ---- mcp_queue.c: the queue as a whole ---- */

/* get_queue_pressure, list_reservations, get_health. */
void mcp_tool_get_queue_pressure(const json_t *args, struct mcp_reply *reply);
void mcp_tool_list_reservations(const json_t *args, struct mcp_reply *reply);
void mcp_tool_get_health(const json_t *args, struct mcp_reply *reply);

/* ---- mcp_triage.c ---- */

/* triage_job: why a job waits or failed, from its record, its log's tail, the queue and
 * the caller's recent failures. */
void mcp_tool_triage_job(const json_t *args, struct mcp_reply *reply);
extern const char mcp_triage_schema[];

/* A log's text made readable: ANSI escape sequences dropped, and of a line that a
 * carriage return rewrote (progress bars) only what was written last. Caller frees. */
char *mcp_clean_log(const char *text, size_t len);

/* ---- mcp_directives.c ---- */

/* The spec fields of text's "# GFLOW" directives, parsed as gbatch parses them (file
 * names the script in messages); NULL with *err, gbatch's one-line message. */
json_t *mcp_directives(const char *text, const char *file, char **err);

/* ---- mcp_resources.c ---- */

/* The results of resources/list and resources/templates/list. */
json_t *mcp_resources_list(char **err);
json_t *mcp_resource_templates(void);
/* resources/read: the result, or NULL with *code (a JSON-RPC error code) and *err. */
json_t *mcp_resource_read(const char *uri, int *code, char **err);

#endif
