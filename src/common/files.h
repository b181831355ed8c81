/* files: whole-file reads and writes, atomic replacement, mkdir -p. */
#ifndef GFLOW_FILES_H
#define GFLOW_FILES_H

#include <stddef.h>

/* Reads a whole file; returns NULL and sets errno on failure. *len may be NULL. */
char *read_file(const char *path, size_t *len);
/* Writes data to path (created or truncated, with mode), without syncing: for files
 * that only need to outlive a fork, not a crash. 0 or -1. */
int write_file(const char *path, const void *data, size_t len, unsigned mode);
/* Writes data to path atomically (temp file, fsync, rename, fsync dir). 0 or -1. */
int write_file_atomic(const char *path, const void *data, size_t len, unsigned mode);
/* Writes data over the start of the existing file path (its space allocated
 * beforehand), cuts it to len and fsyncs it: for when write_file_atomic finds no room
 * for its temp file. Not atomic: a reader must tolerate a partial file. 0 or -1. */
int write_file_in_place(const char *path, const void *data, size_t len);
/* mkdir -p with the given mode for created directories. 0 or -1. */
int mkdir_p(const char *path, unsigned mode);

#endif
