/* gbatch_print: what a submission prints: the "Submitted batch job" lines (one job;
 * an array's or sweep's, up to GBATCH_LINES_MAX, then a summary line; --parsable: the
 * ids alone), a dry run's description of the job, and the notes after a submission. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "gbatch_internal.h"
#include "job.h"
#include "output.h"
#include "parse.h"
#include "timefmt.h"
#include "util.h"

void gbatch_print_dry_run(const json_t *spec, const json_t *reply)
{
    const json_t *job = json_array_get(json_object_get(reply, "jobs"), 0);
    const char *name = json_string_value(json_object_get(job, "name"));
    if (!name)
        name = json_string_value(json_object_get(spec, JOB_KEY_NAME));
    const char *state = json_string_value(json_object_get(job, "state"));
    const json_t *prio = json_object_get(spec, JOB_KEY_PRIORITY);
    const json_t *tl = json_object_get(spec, JOB_KEY_TIME_LIMIT);
    char *limit = json_is_integer(tl) && json_integer_value(tl) > 0
                      ? format_duration(json_integer_value(tl))
                      : xstrdup("UNLIMITED");
    cli_printf("Dry run: nothing was submitted. The job would be:\n");
    cli_printf("  Name:      %s\n", name ? name : "(chosen by the daemon)");
    if (json_object_get(spec, JOB_KEY_COMMAND))
        cli_printf("  Command:   %s\n", json_string_value(json_object_get(spec, JOB_KEY_COMMAND)));
    else
        cli_printf("  Script:    %s\n",
                   json_string_value(json_object_get(spec, JOB_KEY_SCRIPT_PATH)));
    cli_printf("  Priority:  %lld\n",
               json_is_integer(prio) ? (long long)json_integer_value(prio) : JOB_PRIORITY_DEFAULT);
    cli_printf("  TimeLimit: %s\n", limit);
    const json_t *gpus = json_object_get(spec, JOB_KEY_GPUS);
    char *gpu_req =
        output_gpu_request(json_is_integer(gpus) ? json_integer_value(gpus) : 0,
                           json_is_true(json_object_get(spec, JOB_KEY_SHARED)),
                           json_integer_value(json_object_get(spec, JOB_KEY_GPU_MEMORY_MB)));
    cli_printf("  GPUs:      %s%s\n", gpu_req,
               json_integer_value(json_object_get(spec, JOB_KEY_GPUS_PER_TASK)) > 0
                   ? ", one copy of the command per GPU (--gpus-per-task 1)"
                   : "");
    free(gpu_req);
    const json_t *deps = json_object_get(spec, JOB_KEY_DEPENDS_ON);
    if (json_array_size(deps)) {
        cli_printf("  Depends:   ");
        size_t i;
        const json_t *d;
        json_array_foreach (deps, i, d) {
            cli_printf("%s%s:%lld", i ? "," : "", json_string_value(json_object_get(d, "kind")),
                       (long long)json_integer_value(json_object_get(d, "id")));
        }
        const char *mode = json_string_value(json_object_get(spec, JOB_KEY_DEPENDS_MODE));
        cli_printf(" (%s)%s\n", mode && !strcmp(mode, "any") ? "any one" : "all",
                   json_is_false(json_object_get(spec, JOB_KEY_AUTO_CANCEL)) ? ", no auto-cancel"
                                                                             : "");
    }
    const json_t *begin = json_object_get(spec, JOB_KEY_BEGIN_TIME);
    if (begin) {
        char *when = output_time(json_number_value(begin));
        cli_printf("  Begin:     %s\n", when);
        free(when);
    }
    const char *sigspec = json_string_value(json_object_get(spec, JOB_KEY_SIGNAL_SPEC));
    if (sigspec)
        cli_printf("  Signal:    %s (before the time limit)\n", sigspec);
    const json_t *mem = json_object_get(spec, JOB_KEY_MEMORY_MB);
    if (json_integer_value(mem) > 0)
        cli_printf("  Memory:    %lld MiB\n", (long long)json_integer_value(mem));
    const char *conda = json_string_value(json_object_get(spec, JOB_KEY_CONDA_ENV));
    if (conda)
        cli_printf("  CondaEnv:  %s\n", conda);
    const char *project = json_string_value(json_object_get(spec, JOB_KEY_PROJECT));
    if (project)
        cli_printf("  Project:   %s\n", project);
    const json_t *retries = json_object_get(spec, JOB_KEY_MAX_RETRIES);
    if (json_integer_value(retries) > 0)
        cli_printf("  Retries:   up to %lld\n", (long long)json_integer_value(retries));
    if (json_is_true(json_object_get(spec, JOB_KEY_REQUEUE)))
        cli_printf("  Requeue:   yes (may be preempted)\n");
    if (json_is_true(json_object_get(spec, JOB_KEY_PTY)))
        cli_printf("  Pty:       yes (gjob attach ID while it runs)\n");
    cli_printf("  WorkDir:   %s\n", json_string_value(json_object_get(spec, JOB_KEY_WORKDIR)));
    cli_printf("  State:     %s\n", state                                         ? state
                                    : json_is_true(json_object_get(spec, "hold")) ? "H"
                                                                                  : "PD");
    free(limit);
}

/* Prints the submission's jobs as gflow does: one "Submitted batch job ID (NAME)" line
 * each, up to GBATCH_LINES_MAX, then one line with the count and the id range; with
 * parsable only the ids, one per line. */
void gbatch_print_many(const json_t *reply, bool parsable)
{
    const json_t *list = json_object_get(reply, "jobs");
    long long first_id = json_integer_value(json_object_get(reply, "first_id"));
    long long last = json_integer_value(json_object_get(reply, "last_id"));
    long long count = json_integer_value(json_object_get(reply, "count"));
    size_t i;
    const json_t *jb;
    if (parsable) {
        if (last - first_id + 1 == count) { /* the reply lists only the first jobs */
            for (long long id = first_id; id <= last; id++)
                cli_printf("%lld\n", id);
        } else {
            json_array_foreach (list, i, jb)
                cli_printf("%lld\n", (long long)json_integer_value(json_object_get(jb, "id")));
        }
        return;
    }
    json_array_foreach (list, i, jb) {
        if (i >= GBATCH_LINES_MAX)
            break;
        const char *name = json_string_value(json_object_get(jb, "name"));
        cli_printf("Submitted batch job %lld (%s)\n",
                   (long long)json_integer_value(json_object_get(jb, "id")), name ? name : "-");
    }
    cli_printf("Submitted %lld batch jobs %lld-%lld (group %lld)%s\n", count, first_id, last,
               (long long)json_integer_value(json_object_get(reply, "group_id")),
               count > GBATCH_LINES_MAX ? "; the lines above show the first 100" : "");
}

/* What the daemon understood of --begin (not with parsable). */
void gbatch_print_notes(const json_t *spec, bool parsable)
{
    const json_t *begin = json_object_get(spec, JOB_KEY_BEGIN_TIME);
    if (!parsable && json_is_number(begin) && json_number_value(begin) > 0) {
        char buf[64];
        format_time_buf(buf, sizeof(buf), json_number_value(begin));
        cli_printf("Begins at %s\n", buf);
    }
}
