/* gflow-mcp: a Model Context Protocol server (revision 2025-06-18) on standard input and
 * output, for AI assistants. It reads one JSON-RPC message per line and answers on
 * stdout (nothing else is written there); messages for people go to stderr. Every tool
 * is a request to gflowd over its Unix socket as the user who runs gflow-mcp, found as
 * the other commands find it (--socket, GFLOW_SOCKET, the config, the usual places).
 *
 * The session: initialize (the protocol version negotiated: the client's if we speak it,
 * else ours), notifications/initialized, then tools/list, tools/call, resources/list,
 * resources/templates/list, resources/read and ping, in any order, one at a time. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "completion.h"
#include "gflow_build.h"
#include "jsonrpc.h"
#include "mcp.h"

/* The protocol revisions gflow-mcp speaks, the newest first (what it offers when the
 * client asks for one it does not know). */
static const char *const protocol_versions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};

static const char instructions[] =
    "gflow is the GPU job scheduler of this machine. Use submit_job (dry_run first when "
    "unsure) to queue work, list_jobs/show_job to follow it, job_log to read its output, "
    "cancel_job/hold_job/release_job to control it, list_gpus and stats for the machine. "
    "gflow's tools are here too: prefer read-only tools (get_health, get_queue_pressure, "
    "triage_job) and the preview_* dry runs before submit_jobs, update_job or redo_job; tools "
    "that change scheduler state need the user's explicit confirmation. "
    "Everything runs as the user who started this server.";

static void mcp_help(void)
{
    printf("gflow-mcp - gflow for AI assistants: a Model Context Protocol server\n"
           "\n"
           "Usage: gflow-mcp [--socket PATH]\n"
           "       gflow-mcp completion SHELL  (bash, elvish, fish, powershell or zsh)\n"
           "\n"
           "Speaks MCP (revision 2025-06-18) as JSON-RPC on standard input and output, one\n"
           "message per line: an assistant starts it and talks to it. It acts as the user\n"
           "who runs it, through gflowd's socket, so it can do nothing that user cannot.\n"
           "\n"
           "Tools:\n"
           "  list_jobs       jobs, newest first (filters: state, user, project, limit;\n"
           "                  before_id for the next page)\n"
           "  show_job        one job in full (its environment only when asked)\n"
           "  submit_job      a command or script, as gbatch (dry_run to check only)\n"
           "  cancel_job      cancel a job (dry_run to see what would be cancelled)\n"
           "  hold_job        hold a queued job\n"
           "  release_job     release a held job\n"
           "  job_log         a job's output: last or first lines, or from an offset;\n"
           "                  64 KiB by default, at most 1 MiB\n"
           "  list_gpus       the GPUs, their use and their jobs\n"
           "  stats           job statistics of a period, or GPU utilization\n"
           "\n"
           "gflow's tools, with its names and argument shapes (job_id, ...):\n"
           "  get_health          whether gflowd answers, and its pid\n"
           "  get_info            the GPUs: free or not and why, the allowed ones\n"
           "  get_job             one job (as show_job)\n"
           "  get_job_log         a job's log (as job_log), terminal escapes removed\n"
           "  get_stats           job statistics since a time (default all time)\n"
           "  get_queue_pressure  free GPUs, waiting and running jobs of everyone, the\n"
           "                      GPUs asked for, why jobs wait, users, reservations\n"
           "  list_reservations   the GPU reservations\n"
           "  triage_job          why a job waits or failed: reason, exit, log tail\n"
           "                      (80 lines, 20000 bytes), the queue ahead of it, your\n"
           "                      recent failures, hints\n"
           "  preview_submit_jobs submit_jobs as gflowd's dry run: nothing is made\n"
           "  submit_jobs         gflow's submission schema (command or script path,\n"
           "                      time_limit_secs, param sweeps, ...), at most 1000 jobs\n"
           "  preview_update_job  update_job as gflowd's dry run: before and after\n"
           "  update_job          change a queued or held job\n"
           "  redo_job            submit a copy of a job (cascade: and its cancelled\n"
           "                      dependents)\n"
           "\n"
           "Resources:\n"
           "  gflow://jobs/ID/log  a job's log (its last 64 KiB)\n"
           "  gflow://jobs/ID      a job (JSON)\n"
           "\n"
           "Options:\n"
           "      --socket PATH  the daemon's socket (default: $GFLOW_SOCKET, the config,\n"
           "                     then the usual places)\n"
           "  -h, --help         show this help\n"
           "  -V, --version      show the version\n"
           "\n"
           "Registering it with an assistant (gflow mcp serve runs this server):\n"
           "  claude mcp add gflow -- gflow mcp serve\n"
           "  claude mcp add gflow -- gflow-mcp            (the same server)\n"
           "  {\"mcpServers\": {\"gflow\": {\"command\": \"gflow\", \"args\": [\"mcp\", "
           "\"serve\"]}}}\n");
}

static void parse_args(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    if (argc > 1 && !strcmp(argv[1], "completion"))
        exit(completion_main("gflow-mcp", argc - 2, argv + 2));
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            client_set_socket(optarg);
            break;
        case 'h':
            mcp_help();
            exit(0);
        case 'V':
            printf("gflow-mcp %s\n", GFLOW_VERSION);
            exit(0);
        case ':':
            fprintf(stderr, "gflow-mcp: option %s needs a value; see 'gflow-mcp --help'\n",
                    argv[optind - 1]);
            exit(2);
        default:
            fprintf(stderr, "gflow-mcp: unknown option %s; see 'gflow-mcp --help'\n",
                    argv[optind - 1]);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr,
                "gflow-mcp: unexpected argument '%s'; gflow-mcp takes no arguments (an "
                "assistant starts it and talks to it on stdin/stdout)\n",
                argv[optind]);
        exit(2);
    }
}

/* ---- methods: each returns the response to send ---- */

static json_t *method_initialize(const json_t *id, const json_t *params)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    if (!asked)
        return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                             "initialize needs params.protocolVersion (a string such as "
                             "\"2025-06-18\")");
    const char *version = protocol_versions[0];
    for (size_t i = 0; i < sizeof(protocol_versions) / sizeof(protocol_versions[0]); i++)
        if (!strcmp(asked, protocol_versions[i]))
            version = protocol_versions[i];
    return jsonrpc_result(id, json_pack("{s:s, s:{s:{s:b}, s:{s:b, s:b}}, s:{s:s, s:s, s:s}, s:s}",
                                        "protocolVersion", version, "capabilities", "tools",
                                        "listChanged", 0, "resources", "subscribe", 0,
                                        "listChanged", 0, "serverInfo", "name", "gflow-mcp",
                                        "title", "gflow GPU job scheduler", "version",
                                        GFLOW_VERSION, "instructions", instructions));
}

static json_t *method_tools_list(const json_t *id)
{
    size_t n;
    const struct mcp_tool *tools = mcp_tools(&n);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *schema = json_loads(tools[i].input_schema, 0, NULL);
        if (!schema) /* a bug in the table: say so rather than send a broken list */
            return jsonrpc_error(id, JSONRPC_INTERNAL_ERROR, "the schema of tool %s is broken",
                                 tools[i].name);
        json_array_append_new(list,
                              json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name",
                                        tools[i].name, "title", tools[i].title, "description",
                                        tools[i].description, "inputSchema", schema, "annotations",
                                        "title", tools[i].title, "readOnlyHint", tools[i].read_only,
                                        "destructiveHint", tools[i].destructive, "idempotentHint",
                                        tools[i].idempotent, "openWorldHint", 0));
    }
    return jsonrpc_result(id, json_pack("{s:o}", "tools", list));
}

static json_t *method_tools_call(const json_t *id, const json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    if (!name)
        return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                             "tools/call needs params.name, the tool to call");
    const struct mcp_tool *tool = mcp_tool_find(name);
    if (!tool)
        return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                             "unknown tool '%s'; tools/list names the tools", name);
    json_t *args = json_object_get(params, "arguments");
    json_t *empty = json_object();
    if (!args || json_is_null(args))
        args = empty;
    json_t *schema = json_loads(tool->input_schema, 0, NULL);
    char *err = NULL;
    if (!schema || mcp_args_check(schema, args, &err) < 0) {
        json_t *e = jsonrpc_error(id, JSONRPC_INVALID_PARAMS, "%s: %s", name,
                                  err ? err : "its schema is broken");
        free(err);
        json_decref(schema);
        json_decref(empty);
        return e;
    }
    json_decref(schema);
    struct mcp_reply reply = {0};
    tool->call(args, &reply);
    json_decref(empty);
    json_t *result = json_object();
    if (reply.error) {
        json_object_set_new(result, "content",
                            json_pack("[{s:s, s:o}]", "type", "text", "text",
                                      jsonrpc_text(reply.error, strlen(reply.error))));
        json_object_set_new(result, "isError", json_true());
        json_decref(reply.structured);
    } else {
        if (!reply.structured) /* structuredContent is always an object */
            reply.structured = json_object();
        char *text = reply.text ? reply.text : json_dumps(reply.structured, JSON_COMPACT);
        reply.text = NULL;
        json_object_set_new(result, "content",
                            json_pack("[{s:s, s:o}]", "type", "text", "text",
                                      jsonrpc_text(text ? text : "", text ? strlen(text) : 0)));
        free(text);
        json_object_set_new(result, "structuredContent", reply.structured);
        json_object_set_new(result, "isError", json_false());
    }
    free(reply.error);
    free(reply.text);
    return jsonrpc_result(id, result);
}

static json_t *method_resources_read(const json_t *id, const json_t *params)
{
    const char *uri = json_string_value(json_object_get(params, "uri"));
    if (!uri)
        return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                             "resources/read needs params.uri, e.g. gflow://jobs/12/log");
    int code = 0;
    char *err = NULL;
    json_t *result = mcp_resource_read(uri, &code, &err);
    if (!result) {
        json_t *e = jsonrpc_error(id, code, "%s", err);
        json_object_set_new(json_object_get(e, "error"), "data", json_pack("{s:s}", "uri", uri));
        free(err);
        return e;
    }
    return jsonrpc_result(id, result);
}

static json_t *dispatch(const struct jsonrpc_msg *m)
{
    const char *method = m->method;
    const json_t *id = m->id;
    json_t *params = m->params;
    if (params && !json_is_object(params))
        return jsonrpc_error(id, JSONRPC_INVALID_PARAMS, "%s: params must be an object", method);
    if (!strcmp(method, "initialize"))
        return method_initialize(id, params);
    if (!strcmp(method, "ping"))
        return jsonrpc_result(id, json_object());
    if (!strcmp(method, "tools/list"))
        return method_tools_list(id);
    if (!strcmp(method, "tools/call"))
        return method_tools_call(id, params);
    if (!strcmp(method, "resources/list") || !strcmp(method, "resources/templates/list")) {
        if (!strcmp(method, "resources/templates/list"))
            return jsonrpc_result(id, mcp_resource_templates());
        char *err = NULL;
        json_t *list = mcp_resources_list(&err);
        if (!list) {
            json_t *e = jsonrpc_error(id, JSONRPC_INTERNAL_ERROR, "%s", err);
            free(err);
            return e;
        }
        return jsonrpc_result(id, list);
    }
    if (!strcmp(method, "resources/read"))
        return method_resources_read(id, params);
    return jsonrpc_error(id, JSONRPC_METHOD_NOT_FOUND,
                         "method not found: %s (gflow-mcp has initialize, ping, tools/list, "
                         "tools/call, resources/list, resources/templates/list and "
                         "resources/read)",
                         method);
}

/* One line of input: the response to send, or NULL when none is due. */
static json_t *handle_line(const char *line, size_t len)
{
    struct jsonrpc_msg m;
    json_t *error = NULL;
    jsonrpc_parse(line, len, &m, &error);
    json_t *out = error;
    if (m.kind == JSONRPC_REQUEST)
        out = dispatch(&m);
    /* Notifications (initialized, cancelled, ...) and answers to us need no reply. */
    jsonrpc_msg_free(&m);
    return out;
}

int main(int argc, char **argv)
{
    client_init(argv[0]);
    parse_args(argc, argv);
    /* The config's timezone, for the begin times tools are given without an offset. */
    char *zone_err = NULL;
    if (client_load_timezone(&zone_err) < 0) {
        fprintf(stderr, "gflow-mcp: %s; times without an offset are read in local time\n",
                zone_err);
        free(zone_err);
    }
    /* A client that went away must not kill us in the middle of a write. */
    signal(SIGPIPE, SIG_IGN);
    struct jsonrpc_reader reader;
    jsonrpc_reader_init(&reader, STDIN_FILENO, JSONRPC_LINE_MAX);
    int status = 0;
    for (;;) {
        const char *line;
        size_t len;
        enum jsonrpc_read got = jsonrpc_read_line(&reader, &line, &len);
        if (got == JSONRPC_EOF)
            break;
        if (got == JSONRPC_ERROR) {
            perror("gflow-mcp: cannot read standard input");
            status = 1;
            break;
        }
        json_t *out;
        if (got == JSONRPC_TOO_LONG) {
            out = jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
                                "message longer than %u bytes; it was dropped", JSONRPC_LINE_MAX);
        } else {
            if (strspn(line, " \t\r") == len)
                continue; /* blank lines between messages are harmless */
            out = handle_line(line, len);
        }
        if (out && jsonrpc_write(stdout, out) < 0) {
            json_decref(out);
            fprintf(stderr, "gflow-mcp: cannot write to standard output; stopping\n");
            status = 1;
            break;
        }
        json_decref(out);
    }
    jsonrpc_reader_free(&reader);
    client_close();
    return status;
}
