/* completion: `PROG completion SHELL`, the shell completion scripts of every gflow program
 * (completion.c). It prints and returns; it never exits, so gflowd links it as well. */
#ifndef GFLOW_COMPLETION_H
#define GFLOW_COMPLETION_H

/* Prints the completion script for shell ("bash", "elvish", "fish", "powershell" or
 * "zsh"); -1 for another. */
int completion_print(const char *shell);

/* `prog completion ARGS...` (argv: the words after "completion"): the script, or help
 * (-h), or a one-line error on stderr for a missing, unknown or extra word. Returns the
 * exit status: 0, 1 (stdout could not be written) or 2 (bad command line). */
int completion_main(const char *prog, int argc, char **argv);

#endif
