/* startopts: the options a daemon was started with (--simulate-gpus, --gpus and the
 * flags that set config keys), kept in <data>/gflowd.options.json so that 'gflowd
 * restart' without them starts the same daemon again. */
#ifndef GFLOWD_STARTOPTS_H
#define GFLOWD_STARTOPTS_H

#include <jansson.h>

struct gflowd;

/* Writes the file for the daemon that is starting, with its --simulate-gpus and --gpus
 * (NULL: not given), atomically; a failure is logged. */
void startopts_save(const struct gflowd *d, const char *simulate_gpus, const char *flag_gpus);

/* The saved options, or NULL if there are none: {"simulate_gpus": S, "gpus": S,
 * "settings": {"daemon.key": "value", ...}}. */
json_t *startopts_load(const char *data_dir);

/* 'gctl set-gpus' replaced the --gpus the daemon was started with: a restart must not
 * bring it back. */
void startopts_forget_gpus(const char *data_dir);

#endif
