/* completion: shell completion scripts for the gflow commands (gbatch completion SHELL). */
#ifndef GFLOW_COMPLETION_H
#define GFLOW_COMPLETION_H

/* Prints the completion script for shell ("bash", "zsh" or "fish"); -1 for another. */
int completion_print(const char *shell);

#endif
