/* cli: what every gflow command-line program shares on top of the client (client.h):
 * the one-line error conventions, JSON requests, and job id arguments (`1,3,5-7`, `@`,
 * `@~N`). Functions that "die" print "<prog>: <message>" on stderr and exit. */
#ifndef GFLOW_CLI_H
#define GFLOW_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"

/* Exit statuses shared by the commands. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1  /* the request failed, or some of the ids did */
#define CLI_EXIT_USAGE 2 /* bad command line */

/* Sets the program name used in messages (the base name of argv[0]). Call first. */
void cli_init(const char *prog);

/* Messages are printed with controls and bidi overrides shown as visible escapes
 * (termtext.h; newlines and tabs kept): they quote what other users wrote. */
/* printf to stdout for text a person reads (never JSON, which stays exact). */
void cli_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "<prog>: <message>" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "<prog>: <message>" on stderr and exits with status. */
void cli_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
/* A usage error: the message, a pointer to --help, exit 2. */
void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A usage error if word, the first operand after options, is "completion": `PROG
 * completion SHELL` (completion.h) takes no options before it. word may be NULL. */
void cli_refuse_completion(const char *word);

/* After getopt_long returned c ('?' or ':'; the option string must start with ':'
 * after any '+'), says what was wrong: "unknown option --foo", "option -t needs a
 * value", "option --hold takes no value". Caller frees. */
char *cli_option_error(char **argv, int c, const struct option *longopts);

/* The values of --socket and --config in the options every command takes (above any of
 * its own). */
#define CLI_OPT_SOCKET 0x1000
#define CLI_OPT_CONFIG 0x1001
/* The options every command takes, before the end of its long options: --socket,
 * --config (the file whose daemon.socket_path and timezone the command uses, as gflow's
 * commands take it), --help, --version. */
/* clang-format off */
#define CLI_COMMON_LONGOPTS                               \
    {"socket", required_argument, NULL, CLI_OPT_SOCKET}, \
    {"config", required_argument, NULL, CLI_OPT_CONFIG}, \
    {"help", no_argument, NULL, 'h'},                     \
    {"version", no_argument, NULL, 'V'}
/* clang-format on */
/* Prints "<name> <version>" (-V, --version). */
void cli_print_version(const char *name);
/* getopt_long's c when it is none of the command's own options: --socket is taken, -h
 * and --help print help(), -V and --version the version, both then exit 0; anything else
 * is a usage error (cli_option_error, exit 2). */
void cli_common_option(int c, char **argv, const struct option *longopts, const char *name,
                       void (*help)(void));

/* A JSON request: body_json may be NULL (no body); it is not consumed. On a 2xx reply
 * returns 0 with *reply the parsed body (NULL if empty). On an error reply returns -1
 * with *reply the parsed body (usually {"error": ...}; a synthesised one otherwise).
 * *status gets the HTTP status (may be NULL). If the daemon cannot be reached the
 * program prints the connect message and exits 1. */
int cli_request_json(const char *method, const char *path_query, json_t *body_json, int *status,
                     json_t **reply);

/* The "error" text of an error reply (never NULL). */
const char *cli_error_text(const json_t *reply);

/* cli_request_json that treats any error reply as fatal: prints "<prog>: <error>" and
 * exits 1. Returns the parsed 2xx reply (caller decrefs; may be NULL). */
json_t *cli_call(const char *method, const char *path_query, json_t *body_json);

/* Resolves "@" / "@~N" to the id of the caller's N-th most recent submission. A
 * reference that does not resolve is fatal (exit 1). */
int64_t cli_resolve_ref(int back);

/* cli_resolve_ref for a caller that goes on after a failure (gflow-mcp): 0 with *id, or
 * -1 with *err (the message, caller frees), also where the daemon cannot be reached. */
int cli_try_resolve_ref(int back, int64_t *id, char **err);

/* Parses job id arguments: each of args is an id list ("1,3,5-7") or a reference
 * ("@", "@~2"). Bad syntax is a usage error (exit 2). Returns a malloc'd array. */
int64_t *cli_parse_ids(int argc, char **argv, size_t *n);

/* Shows and reads times in zone (a --timezone flag) instead of the config's; an unknown
 * zone is a usage error. */
void cli_use_timezone(const char *zone);

/* A point in time as --since and --until take it (gqueue, gstats): a duration ago (30m,
 * 1h, 2d, 1w; also s), today, yesterday, a date or time (2026-03-01, 2026-03-01T09:30,
 * '2026-03-01 09:30:00', in the configured timezone; Z or +08:00 for another) or unix
 * seconds. Seconds since the epoch, or
 * -1 when text is none of these. */
double cli_parse_when(const char *text, double now);

/* The end of a command: closes the connection and flushes stdout. Returns status, or 1
 * with a message if the output could not be written (a full disk, a closed pipe). */
int cli_finish(int status);

#endif
