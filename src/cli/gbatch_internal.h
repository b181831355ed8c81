/* gbatch_internal: what gbatch's files share (gbatch.c: the options, the directives,
 * the submission; gbatch_new.c: the 'new' and 'completion' subcommands; gbatch_input.c:
 * the submit-time checks, the script, environment and sweep rows; gbatch_print.c: what
 * a submission prints). Not for the other commands. */
#ifndef GFLOW_CLI_GBATCH_INTERNAL_H
#define GFLOW_CLI_GBATCH_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gbatch_opts {
    json_t *spec; /* the job options (jobopts), as spec fields */
    bool dry_run, parsable;
    char *array;            /* --array (Slurm syntax, checked here, expanded by gflowd) */
    int64_t max_concurrent; /* --max-concurrent; -1 = not given */
    json_t *param_names;    /* --param / --param-file: names and one list of values each */
    json_t *param_values;   /* [[v, ...], ...] per --param; NULL if none */
    char *param_file;
    char *name_template;
};

/* A sweep or array prints one "Submitted batch job" line per job up to this many. */
#define GBATCH_LINES_MAX 100

/* gbatch_new.c */
int gbatch_new(int argc, char **argv);
bool gbatch_is_subcommand(const char *word);

/* gbatch_input.c */
void gbatch_check_gpus(const json_t *spec);
void gbatch_check_text(const char *text, size_t len, const char *what);
char *gbatch_read_stdin(size_t *len);
json_t *gbatch_sweep_rows(const struct gbatch_opts *o);
void gbatch_check_path(int nwords, char **words);

/* gbatch_print.c */
void gbatch_print_dry_run(const json_t *spec, const json_t *reply);
void gbatch_print_many(const json_t *reply, bool parsable);
void gbatch_print_notes(const json_t *spec, bool parsable);

#endif
