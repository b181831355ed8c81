/* output: how the commands print results: aligned tables (squeue / gflow look: a header
 * row, left-aligned columns sized to their widest cell), CSV, pretty JSON, and the
 * display form of job fields (elapsed time, exit code or signal, reason, times) that
 * gqueue and gjob share. */
#ifndef GFLOW_OUTPUT_H
#define GFLOW_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "job.h"

enum output_format { OUTPUT_TABLE, OUTPUT_JSON, OUTPUT_CSV, OUTPUT_YAML };

/* "table", "json" or "csv" (any case; yaml is gqueue's alone). 0, or -1 if unknown. */
int output_format_parse(const char *s, enum output_format *out);

struct output_table;
struct output_table *output_table_new(size_t ncols, const char *const *headers);
void output_table_free(struct output_table *t);
/* Adds a row taking ownership of the malloc'd cells (the array itself is not freed). */
void output_table_add_row_owned(struct output_table *t, char **cells);
/* Or cell by cell, without an allocation per cell: append the next cell's text to the
 * buffer output_table_cell returns, then call output_table_cell_end (a row is ncols
 * cells, filled left to right). */
struct strbuf;
struct strbuf *output_table_cell(struct output_table *t);
/* Room for rows more rows of about bytes of text in all (growing by doubling copies
 * a large table several times), its memory touched at once: on a VM a page faulted in
 * one by one costs ~10 us, one of many populated by one madvise ~4 us. */
void output_table_reserve(struct output_table *t, size_t rows, size_t bytes);
void output_table_cell_end(struct output_table *t);
size_t output_table_rows(const struct output_table *t);
/* For a terminal: the table is made to fit this many columns (0: no limit, the
 * default), the widest columns giving way and cut cells ending in an ellipsis. Widths
 * are display columns (CJK characters take two). */
void output_table_set_max_width(struct output_table *t, size_t columns);
/* Colour for a column's body cells: fn returns an SGR escape sequence for the cell (or
 * NULL for none); the cell is followed by a reset. For terminals only. */
typedef const char *output_cell_style_fn(const char *cell, size_t len);
void output_table_set_style(struct output_table *t, size_t col, output_cell_style_fn *style);
/* Columns separated by two spaces, no trailing blanks. Control characters and bidi
 * overrides in cells (tables and CSV alike) are shown as visible escapes ("\x1b",
 * "\u202e": termtext.h), so one job stays one line and no cell drives the terminal. */
void output_table_print(const struct output_table *t, FILE *out);
/* RFC 4180: a header line, then one line per row; fields quoted when needed. */
void output_table_print_csv(const struct output_table *t, FILE *out);

/* Pretty-printed JSON (two-space indent) and a newline; reals in their shortest form
 * (json_text_short_reals). */
void output_json(const json_t *j, FILE *out);
/* The same value as a YAML document (block style; strings quoted when YAML would read
 * them as something else). */
void output_yaml(const json_t *j, FILE *out);

/* Display forms of job fields; each returns a malloc'd string. */
/* A JSON array of strings and integers as "a,1,b" (anything else shows as '?');
 * if_empty when it has none (or is not an array). Caller frees. */
char *output_json_list(const json_t *arr, const char *if_empty);
/* "YYYY-MM-DD HH:MM:SS" in the configured timezone (format_time, timefmt.h: the one
 * style of every command), or "-" when t is 0 (not happened). */
char *output_time(double t);
/* Elapsed run time: now - start while running, end - start once ended, "-"
 * before it started (as gqueue's TIME). */
char *output_job_elapsed(const struct job *j, double now);
/* "02:00:00" (format_duration) or "UNLIMITED". */
char *output_job_time_limit(const struct job *j);
/* The exit code ("0", "3"), the signal name for a job killed by a signal ("SIGKILL"),
 * or "-" while unknown. */
char *output_job_exit_code(const struct job *j);
/* NODELIST(REASON), appended to sb: GPU ids of a running job ("-" if none), "(Reason)"
 * for a waiting or ended job, "-" when there is no reason. */
void output_job_nodelist(struct strbuf *sb, const struct job *j);
/* The reason without parentheses, with the defaults a waiting job gets when the daemon
 * sent none (PD: Priority, H: JobHeldUser); NULL if none. Malloc'd. */
char *output_job_reason(const struct job *j);

/* A job's GPU request as gbatch --dry-run and gjob show print it: "2", "2 (shared,
 * 20480 MiB each)", "1 (8192 MiB free each)" for an exclusive job that needs free
 * memory, "0". Malloc'd. */
char *output_gpu_request(int64_t gpus, bool shared, int64_t gpu_memory_mb);
/* A MiB amount, or "?" when unknown (negative): NVML metrics a driver does not
 * report are shown as unknown, never as 0. Malloc'd. */
char *output_mib_or_unknown(int64_t mib);

#endif
