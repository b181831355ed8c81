/* sweep: one submission that makes many jobs. An array (--array 1-10%2: one job per
 * task id) or a parameter sweep (--param / --param-file: one job per row of values,
 * each "{NAME}" of the command, script and name template filled in with the row's
 * values, quoted for the shell where it lands). A sweep's job keeps its values and the
 * templates, so that `gjob update/redo --param` can fill them in again. Pure. */
#ifndef GFLOW_SWEEP_H
#define GFLOW_SWEEP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

/* Expands base (from a spec with "array", or "params" {"names": [...], "rows": [[...]]}
 * and an optional "name_template" string) into *out (malloc'd, *n_out jobs); base is
 * consumed either way. Array tasks are named NAME_<task>; sweep jobs NAME_<row> or from
 * the template; without a NAME (or template) they get none here (the daemon's
 * gjob-<id>). *limit gets the array's %K (0 if none). 0, or -1 with *err (a 400
 * message). */
int sweep_expand(struct job *base, const json_t *array, const json_t *params,
                 const json_t *name_template, struct job ***out, size_t *n_out, int64_t *limit,
                 char **err);

/* A sweep's job in an update or a redo. f: the stored job (with payload); over: the
 * request's spec fields. Its "params" (new values for names the job already has) is
 * taken out of over; a command, script or name given in over becomes the new template;
 * and the command (or script) and name are filled again from the templates and values
 * and put into over. carry (initialised) gets the new values and templates, for the new
 * job (sweep_move). A job not from a sweep passes unchanged, unless over has "params"
 * (an error). 0, or -1 + *err (a 400 message). */
int sweep_rewrite(const struct job *f, json_t *over, struct job *carry, char **err);
/* Moves carry's sweep fields (sweep_rewrite) into the new job n. */
void sweep_move(struct job *n, struct job *carry);

/* A sweep's command: each "{NAME}" of names[0..n) in tmpl replaced by its value, quoted
 * for the shell where it lands (outside quotes: shell_quote; inside '...' or "...": the
 * quote is closed, the quoted value put in, and the quote reopened), so that a value is
 * always one literal piece of one word. "${NAME}" and other braces are left alone. */
char *sweep_fill_command(const char *tmpl, char *const *names, char *const *values, size_t n);
/* A name template: each "{NAME}" replaced by its value as it is. */
char *sweep_fill_name(const char *tmpl, char *const *names, char *const *values, size_t n);

#endif
