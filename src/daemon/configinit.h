/* configinit: gflowd init, which writes a configuration file listing every key with its
 * default, commented out, so that a setting is changed by uncommenting its line. */
#ifndef GFLOWD_CONFIGINIT_H
#define GFLOWD_CONFIGINIT_H

#include <stdbool.h>

/* The commented file's text. Malloc'd. */
char *configinit_text(void);

/* Writes it to path (its folder made if needed); an existing file is replaced only with
 * force. Prints what it did; returns the exit status. */
int configinit_write(const char *path, bool force);

#endif
