/* triage: a failed job's class, named from how it ended (exit code, signal, the OOM
 * killer) and the tail of its log: "CudaOOM", "NcclError", "PythonException: ValueError",
 * "Segfault", "Killed (SIGKILL)", ... with the log line that showed it. Pure: the daemon
 * reads the log (as the job's user, off its loop: daemon/ops/triage_run.c) and hands the
 * text here.
 *
 * The admin's classes come first ([[triage.classes]] name and pattern, POSIX extended
 * regular expressions, in the file's order), then the built-ins from the most specific to
 * the least (docs/config.md "Failure triage"): a CUDA OOM inside a Python traceback is
 * CudaOOM. */
#ifndef GFLOW_TRIAGE_H
#define GFLOW_TRIAGE_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct toml_value;

/* The longest class name and matched line kept (bytes; a longer line is cut, on a
 * character boundary, and ends with "..."). */
#define TRIAGE_NAME_MAX 64
#define TRIAGE_LINE_MAX 400

/* Classes the daemon names by itself. */
#define TRIAGE_HOST_OOM "HostOOM"

struct triage_class {
    char *name;    /* shown as the job's reason */
    char *pattern; /* as the file wrote it */
    regex_t re;    /* compiled REG_EXTENDED | REG_NOSUB */
};

struct triage_config {
    struct triage_class *classes; /* [[triage.classes]], in the file's order */
    size_t n_classes;
};

void triage_config_init(struct triage_config *c);
void triage_config_free(struct triage_config *c);
void triage_config_copy(struct triage_config *dst, const struct triage_config *src);
/* Reads triage.classes (an array of tables with name and pattern) into c, replacing what
 * it held. 0, or -1 with *err (one line naming the key: "triage.classes[2].pattern: ...")
 * and *line. */
int triage_config_from_toml(struct triage_config *c, const struct toml_value *v, char **err,
                            int *line);
/* Adds one class (a test's, or one read above). 0, or -1 with *err. */
int triage_config_add(struct triage_config *c, const char *name, const char *pattern, char **err);
bool triage_config_equal(const struct triage_config *a, const struct triage_config *b);

/* How the job ended, and the tail of its log (may be NULL; from_start: the text begins
 * at the log's first byte, else its first line is cut and is skipped). */
struct triage_input {
    const char *log;
    size_t len;
    bool from_start;
    int exit_code; /* -1: none (a signal) */
    int signal;    /* 0: none */
    bool oom;      /* the OOM killer (or the memory limit) ended it */
    /* LaunchFailed's detail (the shim found the command's first word missing before
     * running it: "command not found: NAME"); NULL: it was started. */
    const char *launch_error;
};

/* The class of a failure: 1 with *cls (and *line, the matched log line, NULL when no line
 * showed it) malloc'd, or 0 when nothing is recognised (*cls and *line NULL). */
int triage_classify(const struct triage_config *c, const struct triage_input *in, char **cls,
                    char **line);

#endif
