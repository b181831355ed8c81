/* gbatch_input: what gbatch checks and gathers before it submits: the path checks
 * (a script or program that would only fail when the job starts), the GPU options that
 * go together, the script's text (a file or standard input), the environment, and a
 * sweep's rows (--param, --param-file). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "files.h"
#include "gbatch_internal.h"
#include "job.h"
#include "parse.h"
#include "util.h"

/* The GPU options that only make sense together, checked once the command line and
 * the directives are merged. */
void gbatch_check_gpus(const json_t *spec)
{
    bool shared = json_is_true(json_object_get(spec, JOB_KEY_SHARED));
    bool gpu_memory = json_object_get(spec, JOB_KEY_GPU_MEMORY_MB) != NULL;
    json_int_t gpus = json_integer_value(json_object_get(spec, JOB_KEY_GPUS));
    if (shared && !gpu_memory)
        cli_usage_error("--shared needs --gpu-memory (the share of each GPU this job may use)");
    if (shared && gpus == 0)
        cli_usage_error("--shared needs --gpus N (the number of GPUs to share)");
    if (gpu_memory && gpus == 0)
        cli_usage_error("--gpu-memory is per GPU; it needs --gpus N");
    if (json_integer_value(json_object_get(spec, JOB_KEY_GPUS_PER_TASK)) == 1 && gpus == 0)
        cli_usage_error("--gpus-per-task 1 starts one copy per GPU; it needs --gpus N");
}

/* Checks that script text can travel as a JSON string. */
void gbatch_check_text(const char *text, size_t len, const char *what)
{
    if (memchr(text, '\0', len))
        cli_die(CLI_EXIT_FAIL, "%s is not a text file (it contains NUL bytes)", what);
    json_t *s = json_stringn(text, len);
    if (!s)
        cli_die(CLI_EXIT_FAIL, "%s is not valid UTF-8 text; gflow stores scripts as text", what);
    json_decref(s);
}

char *gbatch_read_stdin(size_t *len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    char buf[65536];
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            cli_die(CLI_EXIT_FAIL, "cannot read the script from standard input: %s",
                    strerror(errno));
        if (n == 0)
            break;
        strbuf_add(&sb, buf, (size_t)n);
    }
    *len = sb.len;
    strbuf_adds(&sb, ""); /* make sure buf is allocated */
    return strbuf_detach(&sb);
}

/* The sweep's rows: the cartesian product of the --param-file rows (if any) and each
 * --param's values, as {"names": [...], "rows": [[...], ...]}; NULL without a sweep. */
json_t *gbatch_sweep_rows(const struct gbatch_opts *o)
{
    if (!o->param_names && !o->param_file)
        return NULL;
    json_t *names = json_array(), *rows = json_array();
    json_array_append_new(rows, json_array());
    if (o->param_file) {
        size_t len;
        char *text = read_file(o->param_file, &len);
        if (!text)
            cli_die(CLI_EXIT_FAIL, "cannot read %s: %s", o->param_file, strerror(errno));
        char **header, **cells, *err = NULL;
        size_t nc, nr;
        if (parse_csv(text, &header, &nc, &cells, &nr, &err) < 0)
            cli_usage_error("--param-file %s: %s", o->param_file, err);
        json_t *csv_rows = json_array();
        for (size_t c = 0; c < nc; c++) {
            if (!param_name_valid(header[c]))
                cli_usage_error("--param-file %s: the column name '%s' must be letters, "
                                "digits and '_', not starting with a digit",
                                o->param_file, header[c]);
            json_array_append_new(names, json_string(header[c]));
        }
        for (size_t r = 0; r < nr; r++) {
            json_t *row = json_array();
            for (size_t c = 0; c < nc; c++) {
                json_t *v = json_string(cells[r * nc + c]);
                if (!v)
                    cli_usage_error("--param-file %s: row %zu is not valid UTF-8", o->param_file,
                                    r + 1);
                json_array_append_new(row, v);
            }
            json_array_append_new(csv_rows, row);
        }
        for (size_t i = 0; i < nc * (nr + 1); i++)
            free(header[i]);
        free(header);
        free(text);
        if (!nr)
            cli_usage_error("--param-file %s has no rows below its header", o->param_file);
        json_decref(rows);
        rows = csv_rows;
    }
    size_t pi;
    json_t *pname;
    json_array_foreach (o->param_names, pi, pname) {
        json_t *vals = json_array_get(o->param_values, pi);
        json_array_append(names, pname);
        json_t *next = json_array();
        size_t ri, vi;
        json_t *row, *v;
        json_array_foreach (rows, ri, row) {
            json_array_foreach (vals, vi, v) {
                json_t *r2 = json_copy(row);
                json_array_append(r2, v);
                json_array_append_new(next, r2);
            }
        }
        json_decref(rows);
        rows = next;
        if (json_array_size(rows) > 1000000)
            cli_usage_error("the sweep has more than 1,000,000 jobs");
    }
    size_t a, b;
    json_t *x, *y;
    json_array_foreach (names, a, x) {
        json_array_foreach (names, b, y) {
            if (b > a && json_equal(x, y))
                cli_usage_error("the parameter '%s' is given twice", json_string_value(x));
        }
    }
    return json_pack("{s:o, s:o}", "names", names, "rows", rows);
}

/* Refuses what would only fail when the job starts: a script or program given by a path
 * that does not exist, is a directory, or (a program with arguments) is not executable. */
void gbatch_check_path(int nwords, char **words)
{
    const char *w = words[0];
    size_t len = strlen(w);
    bool is_path = strchr(w, '/') || (len > 3 && !strcmp(w + len - 3, ".sh"));
    struct stat st;
    /* A single argument with shell syntax is a command line ('make && ./bench'), not a
     * path; so is a first word without '/' among several (a program found in PATH). */
    if (!is_path || (nwords == 1 && strpbrk(w, " \t\n;&|<>()$`'\"*?[]{}~=\\")) ||
        (nwords > 1 && !strchr(w, '/')))
        return;
    if (stat(w, &st) < 0) {
        if (nwords == 1)
            cli_die(CLI_EXIT_USAGE, "%s: no such file; give an existing script, or a command", w);
        cli_die(CLI_EXIT_USAGE, "%s: no such file; the job could not run it", w);
    }
    if (S_ISDIR(st.st_mode))
        cli_die(CLI_EXIT_USAGE, "%s is a directory; give a script or a command", w);
    if (nwords > 1 && access(w, X_OK) < 0)
        cli_die(CLI_EXIT_USAGE,
                "%s is not executable; chmod +x it, or run it with its "
                "interpreter (gbatch bash %s ...)",
                w, w);
}
