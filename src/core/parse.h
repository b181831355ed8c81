/* parse: the small grammars of the command line and the API, kept pure so they are
 * unit-tested once and shared by the CLI and the daemon. Every parser returns 0 on
 * success, or -1 with *err set to a one-line message the caller owns (free it). */
#ifndef GFLOW_PARSE_H
#define GFLOW_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Slurm time limits: "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS";
 * a bare number is minutes. Result in seconds, > 0. */
int parse_time_limit(const char *s, int64_t *secs, char **err);

/* A duration in a setting: N followed by s, m, h or d ("24h"), or a Slurm time limit
 * as above ("1-00:00:00"; a bare number is minutes). Result in seconds, > 0. */
int parse_duration(const char *s, int64_t *secs, char **err);

/* Job id lists: "1,3,5-7" (ranges inclusive, duplicates kept in order given), as the
 * ranges written ([lo, hi], lo >= 1), never expanded: a list may name more ids than
 * memory holds. Returns a malloc'd array in *ranges with *n entries. */
struct id_range {
    int64_t lo, hi;
};
int parse_id_ranges(const char *s, struct id_range **ranges, size_t *n, char **err);

/* The same list expanded into its ids, in a malloc'd array in *ids with *n entries; a
 * list that names more than PARSE_ID_LIST_MAX ids is refused. */
#define PARSE_ID_LIST_MAX 1000000
int parse_id_list(const char *s, int64_t **ids, size_t *n, char **err);

/* Job references "@" (most recent submission, back = 0) and "@~N" (back = N).
 * Returns 1 if s is such a reference, 0 if not, -1 on a malformed "@..." (err set). */
int parse_job_ref(const char *s, int *back, char **err);

/* Memory sizes: "512" (MiB), "512M", "24G", "1T", "2048K" (rounded up); result in MiB > 0. */
int parse_memory_mb(const char *s, int64_t *mb, char **err);

/* Slurm's --signal: "[B:]SIG[@SECS]". SIG is a name (USR1, SIGUSR1, any case) or a
 * number 1..64; SECS 0..65535 (default 60): how long before the time limit to send it.
 * "B:" (main_only): to the job's main processes only, not to every process it started. */
#define PARSE_SIGNAL_DEFAULT_SECS 60
int parse_signal_spec(const char *s, int *sig, int64_t *secs, bool *main_only, char **err);
/* A signal's name without "SIG" ("USR1", as glibc's sigabbrev_np gives it), or NULL for
 * a number without one (real-time signals). */
const char *signal_name(int sig);
/* The canonical text of a signal spec: "B:USR1@60", "TERM@10", "40@5" (malloc'd). */
char *format_signal_spec(int sig, int64_t secs, bool main_only);

/* A date and time: "YYYY-MM-DD" (midnight), "YYYY-MM-DDTHH:MM[:SS[.fff]]" (also with a
 * space for the T), then optionally a zone: "Z", "+08:00", "-0500" or "+08" (RFC 3339
 * and ISO 8601). Without one it is in the zone in use (timefmt.h: the `timezone`
 * setting, or local time). Result in *at, unix seconds; on error *err (if err is not
 * NULL) says what the forms are. */
int parse_datetime(const char *s, double *at, char **err);

/* Begin times (--begin, gjob release --at, reservations' --start), in the zone in use:
 * "HH:MM[:SS]" (today, or tomorrow if that moment has passed), a date and time as
 * parse_datetime reads it (so also with Z or an offset), "now", "now+N[s|m|h|d]" or
 * "+N[s|m|h|d]" (a bare N is minutes, as in gflow). now: the current unix time. Result
 * in *at, unix seconds. */
int parse_begin_time(const char *s, double now, double *at, char **err);

/* Priority 0..255. */
int parse_priority(const char *s, int *prio, char **err);

/* A umask as octal digits ("022", "0077"; 1 to 4 digits, at most 0777). */
int parse_umask(const char *s, int *mask, char **err);
/* The text form of a umask: four octal digits ("0022"). */
void format_umask(int mask, char buf[8]);

/* A word quoted for /bin/sh if it needs it ("a b" -> "'a b'", "x" -> "x"). */
char *shell_quote(const char *word);
struct strbuf;
/* shell_quote(word) appended to sb (no copy of its own). */
void shell_quote_add(struct strbuf *sb, const char *word);

/* Command words joined into one shell command line: a single word is used as it is
 * (it may hold shell syntax); several words are each quoted as needed. */
char *shell_join(int argc, char **argv);

/* Slurm's --array: "1-10", "1-10:2" (a step), "1,3,7", combinations "1-3,8,10-20:5", then
 * an optional "%K" (at most K tasks running at once). Task ids 0..PARSE_ARRAY_MAX_ID,
 * returned sorted without duplicates in a malloc'd *tasks; *max_concurrent is K, 0 if no
 * %K. At most PARSE_ARRAY_MAX_TASKS tasks. */
#define PARSE_ARRAY_MAX_ID 100000000
#define PARSE_ARRAY_MAX_TASKS 1000000
int parse_array_spec(const char *s, int64_t **tasks, size_t *n, int64_t *max_concurrent,
                     char **err);

/* One --param "NAME=SPEC" of a sweep. NAME: letters, digits and '_', not starting with a
 * digit. SPEC: a range "START:STOP[:STEP]" of numbers (STOP included, STEP default 1,
 * floats allowed: "0.1:0.5:0.1" gives 0.1 0.2 0.3 0.4 0.5; numbers printed with %g to 12
 * digits), else a comma list "a,b,c" taken as written. *values: n malloc'd strings. */
int parse_param(const char *s, char **name, char ***values, size_t *n, char **err);
bool param_name_valid(const char *name);

/* CSV text (RFC 4180: "..." quoting with "" for a quote, CRLF or LF line ends): a header
 * row and data rows, each with as many fields as the header. *cells is row-major, n_rows
 * data rows of n_cols fields (malloc'd strings); *header n_cols names. Blank lines are
 * skipped. */
int parse_csv(const char *text, char ***header, size_t *n_cols, char ***cells, size_t *n_rows,
              char **err);

#endif
