/* jobopts: the job options that gbatch, gjob update and gjob redo share (-J, -p, -t,
 * --gpus, --gres, --memory, --depends-on, ...): one table, one value parser per option
 * and one dependency parser, each writing the API's spec field ("time_limit",
 * "depends_on", ...) into a JSON spec object, so that an option means the same, with the
 * same bounds and messages, wherever it is given. Where submitting and changing a job
 * legitimately differ (update and redo may remove a field: -t 0, -m 0, --signal none,
 * --begin now, -d none), the table says so; there is no second parser.
 *
 * A command builds its getopt_long tables with jobopts_longopts / jobopts_shortopts
 * (the shared options plus its own; its own vals must be below JOBOPT_FIRST and must not
 * be the shared short letters J n p t g m d H), and hands every option it gets to
 * jobopts_apply first.
 *
 * A refused value is returned, never the end of the process: the parsers return -1 with
 * the message in the context's jobopts_err, so that gflow-mcp, which serves on after a
 * bad directive, calls them as the commands do; a command then ends with jobopts_exit. */
#ifndef GFLOW_JOBOPTS_H
#define GFLOW_JOBOPTS_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>

/* The commands that parse job options; each option of the table names those that
 * accept it. */
enum jobopts_cmd {
    JOBOPTS_SUBMIT = 1, /* gbatch and its "# GFLOW" directives */
    JOBOPTS_UPDATE = 2, /* gjob update: a value may remove a field */
    JOBOPTS_REDO = 4,   /* gjob redo: as update */
};

/* A refused value: the message as a command prints it after "<prog>: " ("<message>;
 * see '<usage> --help'", or in a directive "<file>:<line>: <message> (in a '# GFLOW'
 * directive)") and the status the command exits with: CLI_EXIT_USAGE, or CLI_EXIT_FAIL
 * where the daemon could not resolve a reference (@). */
struct jobopts_err {
    int status;
    char *message; /* malloc'd; the caller frees it */
};

/* Who is parsing: which rules apply, and where a bad value is reported. */
struct jobopts_ctx {
    enum jobopts_cmd cmd;
    const char *usage; /* the command as errors name it: "gbatch", "gjob update" */
    const char *file;  /* a script's "# GFLOW" directive: the script and its line */
    int line;
    struct jobopts_err *error; /* set where a parser returns -1 */
};

/* The getopt_long vals of the shared long-only options start here. */
#define JOBOPT_FIRST 1000

/* A job waits for at most this many jobs (after duplicates are dropped). */
#define JOBOPTS_DEPS_MAX 100000

/* getopt_long's long options: the shared ones, then extra (ends with a zero entry).
 * Every shared option is in it, also one the command refuses, which then gets a message
 * saying where it belongs. Caller frees. */
struct option *jobopts_longopts(const struct option *extra);

/* getopt_long's short options: prefix ("+:" or ":"), the shared ones, then extra. Caller
 * frees. */
char *jobopts_shortopts(const char *prefix, const char *extra);

/* The getopt_long val of the shared option named long_name ("conda-env"), for a
 * command's own short alias of it (gbatch -c); -1 if there is none. */
int jobopts_val(const char *long_name);

/* If c (from getopt_long over the tables above) is a shared option, parses arg into spec
 * and returns 1; 0 for the caller's own options; -1 for a bad value (ctx->error set). */
int jobopts_apply(const struct jobopts_ctx *ctx, int c, const char *arg, json_t *spec);

/* The dependency parser behind -d/--depends-on/--dependency (slurm true) and
 * --depends-on-all/-any (slurm false; mode "all" or "any"). arg: a list of ids, ranges and
 * references ("3,5-7,@,@~2", afterok), or with slurm Slurm's form
 * "afterok:ID[:ID...],afterany:ID" (all must hold) or "afterok:1?afternotok:2" (any one
 * suffices). ('none' for no dependencies is the option's, not the parser's.) Ids and ranges go
 * through parse_id_list, references through parse_job_ref and cli_try_resolve_ref
 * (which asks the daemon; its failure has status CLI_EXIT_FAIL). The entries are added
 * to spec's "depends_on" without repeating an (id, kind); "depends_mode" is set to
 * mode, or "all" if it has none yet. opt names the option in messages. Returns 0, or -1
 * (ctx->error set). */
int jobopts_deps(const struct jobopts_ctx *ctx, const char *opt, const char *arg, bool slurm,
                 const char *mode, json_t *spec);

/* A script's "# GFLOW" options under those of the command line: every field of from that
 * spec does not have; "depends_on" and "depends_mode" go together. */
void jobopts_merge(json_t *spec, const json_t *from);

/* Splits a "# GFLOW" directive's text into words (gbatch's and gflow-mcp's): blanks
 * separate, quotes group ('...' and "..." with \" inside). *words is a malloc'd,
 * NULL-terminated array of *n malloc'd words. Returns -1 on an unterminated quote. */
int jobopts_split_words(const char *s, char ***words, int *n);

/* Calls fn once per "# GFLOW" (or "#GFLOW") line of a script's text, with the line's
 * words after a program name "gbatch" (argv[argc] is NULL) and a context that names
 * file and the line and reports into error, for fn's messages. Stops at the first line
 * fn refuses (returns -1) or whose quote is unterminated, and returns -1 (error set);
 * 0 when all were read. */
typedef int (*jobopts_directive_fn)(int argc, char **argv, const struct jobopts_ctx *ctx,
                                    void *arg);
int jobopts_each_directive(const char *text, const char *file, jobopts_directive_fn fn, void *arg,
                           struct jobopts_err *error);

/* The sections of the help the shared options fall in. */
enum jobopts_section { JOBOPTS_GENERAL, JOBOPTS_GPUS, JOBOPTS_DEPS };

/* Prints the help lines of the shared options of section that cmd accepts. */
void jobopts_help(enum jobopts_section section, enum jobopts_cmd cmd);
/* One help line in the same layout: names from column 2, text wrapped from column 35. */
void jobopts_help_line(const char *names, const char *text);
/* A paragraph wrapped to the help's width. */
void jobopts_help_paragraph(const char *text);
/* "--name, --priority, ...": the canonical long names of the options cmd accepts, for a
 * sentence. Caller frees. */
char *jobopts_names(enum jobopts_cmd cmd);

/* A bad option value into ctx->error (status CLI_EXIT_USAGE, the message in the form
 * jobopts_err describes); returns -1, for "return jobopts_fail(...)". */
int jobopts_fail(const struct jobopts_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same with parse.h's message err (freed here), after "opt: " where opt is given. */
int jobopts_fail_err(const struct jobopts_ctx *ctx, const char *opt, char *err);

/* A command's end on a refused value: "<prog>: <message>" and exit with its status. */
void jobopts_exit(const struct jobopts_err *error) __attribute__((noreturn));

/* For a command's own options: jobopts_fail, then jobopts_exit. */
void jobopts_error(const struct jobopts_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* This process's environment as a job spec's "env" (gbatch's and gflow-mcp's): values
 * that are not UTF-8 cannot travel in JSON and are left out. */
json_t *jobopts_environment(void);

#endif
