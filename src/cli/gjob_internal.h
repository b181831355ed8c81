/* gjob's own parts (not part of the cli library): gjob.c holds the dispatch, show, hold and
 * release; gjob_log.c gjob log; gjob_why.c gjob why; gjob_update.c gjob update and redo; gjob_sessions.c
 * gjob close-sessions. */
#ifndef GFLOW_GJOB_INTERNAL_H
#define GFLOW_GJOB_INTERNAL_H

#include <getopt.h>

/* getopt values of the long options that have no short letter. */
enum { OPT_FOLLOW = 256, OPT_FIRST, OPT_RAW };

/* Dies with usage status for an unknown option or a missing argument of 'gjob <cmd>'. */
void __attribute__((noreturn))
gjob_bad_option(const char *cmd, char **argv, int c, const struct option *longopts);

/* The subcommands: argv[0] is the subcommand's name; each returns the exit status. */
int gjob_log(int argc, char **argv);
int gjob_why(int argc, char **argv); /* gjob_why.c */
int gjob_update(int argc, char **argv);
int gjob_redo(int argc, char **argv);
int gjob_attach(int argc, char **argv);
int gjob_close_sessions(int argc, char **argv); /* gjob_sessions.c */

#endif
