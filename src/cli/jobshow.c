/* jobshow: gjob show's "Key: value" form of a job (see jobshow.h). The lines come in
 * gflow's order (the job, what it runs, resources, dependencies, timing) followed by
 * what only we have (outcome details, supervision, notifications). A field the daemon
 * may not send (older daemons, fields added later) is printed when it is there. */
#include "jobshow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "gpuinfo.h"
#include "output.h"
#include "parse.h"
#include "termtext.h"
#include "util.h"

char *jobshow_mib(int64_t mb)
{
    if (mb <= 0)
        return xstrdup("none");
    if (mb % 1024 == 0)
        return xasprintf("%lldG", (long long)(mb / 1024));
    return xasprintf("%lldM", (long long)mb);
}

/* "123 KiB", "12.3 MiB", "1.50 GiB". */
static char *kib_text(int64_t kb)
{
    if (kb < 1024)
        return xasprintf("%lld KiB", (long long)kb);
    if (kb < 1024 * 1024)
        return xasprintf("%.1f MiB", kb / 1024.0);
    return xasprintf("%.2f GiB", kb / (1024.0 * 1024.0));
}

/* One line: controls (a newline too) and bidi overrides in the value are shown as
 * visible escapes (termtext.h), so one field stays one line and another user's job name
 * or command cannot drive the reader's terminal. */
static void field(const char *key, const char *value)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, key);
    strbuf_adds(&sb, ": ");
    value = value ? value : "-";
    termtext_escape(&sb, value, strlen(value), 0);
    strbuf_addc(&sb, '\n');
    fwrite(sb.buf, 1, sb.len, stdout);
    strbuf_free(&sb);
}

static void field_owned(const char *key, char *value)
{
    field(key, value);
    free(value);
}

static const char *get_str(const json_t *raw, const char *key)
{
    return json_string_value(json_object_get(raw, key));
}

/* An integer field as text, or "-" when null or absent. */
static char *int_text(const json_t *raw, const char *key)
{
    const json_t *v = json_object_get(raw, key);
    return json_is_integer(v) ? xasprintf("%lld", (long long)json_integer_value(v)) : xstrdup("-");
}

char *jobshow_params(const json_t *params)
{
    struct strbuf sb;
    strbuf_init(&sb);
    const char *key;
    const json_t *v;
    json_object_foreach ((json_t *)params, key, v) {
        char *q = shell_quote(json_is_string(v) ? json_string_value(v) : "");
        strbuf_addf(&sb, "%s%s=%s", sb.len ? " " : "", key, q);
        free(q);
    }
    return strbuf_detach(&sb);
}

/* ---- the job, what it runs ---- */

/* A waiting job's effective priority and its parts, as Slurm's sprio: "522.50 = 255 x
 * 0.0392 (priority) + 1000 x 0.5125 (fairshare) + 0 x 0.0012 (age)"; "-" for a job that
 * no longer waits. */
static char *priority_text(const json_t *detail)
{
    if (!json_is_object(detail))
        return xstrdup("-");
    const json_t *w = json_object_get(detail, "weights"), *f = json_object_get(detail, "factors");
    double eff = json_number_value(json_object_get(detail, "effective"));
    return xasprintf("%.2f = %lld x %.4f (priority) + %lld x %.4f (fairshare) + %lld x %.4f (age)",
                     eff, (long long)json_integer_value(json_object_get(w, "priority")),
                     json_number_value(json_object_get(f, "priority")),
                     (long long)json_integer_value(json_object_get(w, "fairshare")),
                     json_number_value(json_object_get(f, "fairshare")),
                     (long long)json_integer_value(json_object_get(w, "age")),
                     json_number_value(json_object_get(f, "age")));
}

static void print_identity(const json_t *raw, const struct job *j)
{
    field_owned(JOB_LABEL_ID, xasprintf("%lld", (long long)j->id));
    field(JOB_LABEL_NAME, j->name);
    /* CG (Cancelling) for a running job being cancelled, as gqueue shows it. */
    field_owned(JOB_LABEL_STATE,
                xasprintf("%s (%s)", job_display_state(j), job_display_state_name(j)));
    field_owned(JOB_LABEL_PRIORITY, xasprintf("%d", j->priority));
    field_owned(JOB_LABEL_EFFECTIVE_PRIORITY,
                priority_text(json_object_get(raw, "priority_detail")));
    if (json_object_get(raw, JOB_KEY_NICE))
        field_owned(JOB_LABEL_NICE, int_text(raw, JOB_KEY_NICE));
    field_owned(JOB_LABEL_USER,
                xasprintf("%s (uid %lld)", j->user ? j->user : "?",
                          (long long)json_integer_value(json_object_get(raw, JOB_KEY_UID))));
    if (json_object_get(raw, JOB_KEY_PROJECT))
        field(JOB_LABEL_PROJECT, get_str(raw, JOB_KEY_PROJECT));
    field_owned(JOB_LABEL_GROUP_ID, int_text(raw, JOB_KEY_GROUP_ID));
    field_owned(JOB_LABEL_ARRAY_TASK, int_text(raw, JOB_KEY_ARRAY_TASK));
    /* The limit of the job's group (gbatch --max-concurrent, gctl set-limit). */
    const json_t *mc = json_object_get(raw, JOB_KEY_MAX_CONCURRENT);
    field_owned(JOB_LABEL_MAX_CONCURRENT, json_is_integer(mc) && json_integer_value(mc) > 0
                                              ? xasprintf("%lld", (long long)json_integer_value(mc))
                                              : xstrdup("-"));
}

/* Retries: the limit, "Attempt: 2 of 4", where it came from and what replaced it. */
static void print_retries(const json_t *raw, const struct job *j)
{
    field_owned(JOB_LABEL_MAX_RETRIES, xasprintf("%d", j->max_retries));
    field_owned(JOB_LABEL_ATTEMPT, xasprintf("%d of %d", j->attempt, j->max_retries + 1));
    if (j->retry_of > 0)
        field_owned(JOB_LABEL_RETRY_OF, xasprintf("%lld", (long long)j->retry_of));
    const json_t *next = json_object_get(raw, "retried_as");
    if (json_is_integer(next))
        field_owned("RetriedAs", xasprintf("%lld", (long long)json_integer_value(next)));
}

static void print_what(const json_t *raw, const struct job *j)
{
    if (j->command) {
        field(JOB_LABEL_COMMAND, j->command);
    } else {
        /* The text is in -o json (for its owner); here its path and size. */
        const char *text = get_str(raw, JOB_KEY_SCRIPT);
        const char *path = j->script_path ? j->script_path : "-";
        size_t lines = 0;
        for (const char *p = text; p && *p; p++)
            lines += *p == '\n';
        field_owned("Script",
                    text ? xasprintf("%s (%zu lines stored; -o json has the text)", path, lines)
                         : xstrdup(path));
    }
    const json_t *params = json_object_get(raw, JOB_KEY_PARAMS);
    if (json_is_object(params))
        field_owned("Parameters", jobshow_params(params));
    field(JOB_LABEL_WORKDIR, j->workdir);
    const json_t *env = json_object_get(raw, JOB_KEY_ENV);
    if (json_is_object(env))
        field_owned("Env", xasprintf("%zu variables (-o json lists them)", json_object_size(env)));
    else
        field("Env", "- (not shown to other users)");
    /* A job stored without one runs with gflowd's own (docs/usage.md). */
    const char *mask = get_str(raw, JOB_KEY_UMASK);
    field_owned(JOB_LABEL_UMASK, mask ? xstrdup(mask) : xstrdup("0077 (none given)"));
}

/* ---- resources ---- */

/* A MIG job: "MIG: 1g.18gb:1", then one line per instance it holds with its memory
 * ("MIG 0: MIG-<uuid> 1g.18gb on GPU 0, 2048/18176 MiB"). */
static void print_mig(const json_t *raw, const struct job *j)
{
    if (!j->mig_profile)
        return;
    field_owned(JOB_LABEL_MIG_PROFILE, xasprintf("%s:%d", j->mig_profile, j->mig_count));
    size_t i;
    const json_t *m;
    json_array_foreach (json_object_get(raw, "mig_detail"), i, m) {
        const json_t *used = json_object_get(m, "memory_used_mib");
        char *key = xasprintf("MIG %zu", i);
        char *usedtxt = json_is_integer(used)
                            ? xasprintf("%lld", (long long)json_integer_value(used))
                            : xstrdup("?");
        field_owned(
            key,
            xasprintf("%s %s on GPU %lld, %s/%lld MiB", get_str(m, "uuid"), get_str(m, "profile"),
                      (long long)json_integer_value(json_object_get(m, "parent")), usedtxt,
                      (long long)json_integer_value(json_object_get(m, "memory_total_mib"))));
        free(usedtxt);
        free(key);
    }
    if (!json_array_size(json_object_get(raw, "mig_detail")) &&
        json_array_size(json_object_get(raw, JOB_KEY_MIG_DEVICES)))
        field_owned(JOB_LABEL_MIG_DEVICES,
                    output_json_list(json_object_get(raw, JOB_KEY_MIG_DEVICES), "-"));
}

/* CPU pinning: "CPUsPerGPU: 2" when asked, and the CPUs the job was pinned to with
 * where they are: "CPUs: 1 (near GPU 1)", or "CPUs: 0-5 (2 not near GPUs 0,1)". */
static void print_cpus(const struct job *j)
{
    if (j->cpus_per_gpu > 0)
        field_owned(JOB_LABEL_CPUS_PER_GPU, xasprintf("%d", j->cpus_per_gpu));
    if (!j->cpus)
        return;
    char *ids = gpu_mask_format(j->gpu_mask);
    const char *s = strchr(ids, ',') ? "s" : "";
    if (j->cpus_far > 0)
        field_owned(JOB_LABEL_CPUS,
                    xasprintf("%s (%d not near GPU%s %s)", j->cpus, j->cpus_far, s, ids));
    else
        field_owned(JOB_LABEL_CPUS, xasprintf("%s (near GPU%s %s)", j->cpus, s, ids));
    free(ids);
}

/* The GPU request as gflow shows it (GPUs, GPUSharing, GPUMemoryLimit), the ids once
 * allocated, and one line per allocated GPU from gpus_detail ("GPU 0: GPU-<uuid>
 * 00000000:3B:00.0") so the physical GPU is never in doubt. */
static void print_gpus(const json_t *raw, const struct job *j)
{
    field_owned(JOB_LABEL_GPUS, xasprintf("%d", j->gpus));
    if (j->gpus > 0) {
        field(JOB_LABEL_SHARED,
              json_is_true(json_object_get(raw, JOB_KEY_SHARED)) ? "shared" : "exclusive");
        const json_t *mem = json_object_get(raw, JOB_KEY_GPU_MEMORY_MB);
        field_owned(JOB_LABEL_GPU_MEMORY_MB,
                    jobshow_mib(json_is_integer(mem) ? json_integer_value(mem) : 0));
        const json_t *per_task = json_object_get(raw, JOB_KEY_GPUS_PER_TASK);
        field_owned(JOB_LABEL_GPUS_PER_TASK,
                    xasprintf("%lld", json_is_integer(per_task)
                                          ? (long long)json_integer_value(per_task)
                                          : 0LL));
    }
    field_owned(JOB_LABEL_GPU_IDS, j->gpu_mask ? gpu_mask_format(j->gpu_mask) : NULL);
    size_t i;
    const json_t *g;
    json_array_foreach (json_object_get(raw, "gpus_detail"), i, g) {
        const json_t *index = json_object_get(g, "index");
        const char *uuid = get_str(g, "uuid");
        const char *bus = get_str(g, "pci_bus_id");
        char *key = json_is_integer(index)
                        ? xasprintf("GPU %lld", (long long)json_integer_value(index))
                        : xstrdup("GPU ?");
        field_owned(key, xasprintf("%s %s", uuid ? uuid : "?", bus ? bus : "?"));
        free(key);
    }
    /* Processes of this job seen on GPUs it was not given (a program that ignores
     * CUDA_VISIBLE_DEVICES): worth a warning line. */
    const json_t *foreign = json_object_get(raw, "foreign_gpus");
    if (json_array_size(foreign)) {
        char *ids = output_json_list(foreign, "-");
        field_owned("ForeignGPUs",
                    xasprintf("%s (the job runs processes on GPUs it was not given)", ids));
        free(ids);
    }
    /* What gflow saw and did (daemon.stray), kept after the job ended. */
    if (j->stray)
        field(JOB_LABEL_STRAY, j->stray);
    print_cpus(j);
    print_mig(raw, j);
    field_owned(JOB_LABEL_MEMORY_MB, jobshow_mib(j->memory_mb));
    field(JOB_LABEL_CONDA_ENV, j->conda_env);
}

/* ---- dependencies ---- */

json_t *jobshow_dep_states(const json_t *raw)
{
    const json_t *deps = json_object_get(raw, JOB_KEY_DEPENDS_ON);
    if (!json_array_size(deps))
        return NULL;
    struct strbuf path;
    strbuf_init(&path);
    strbuf_adds(&path, "/v1/jobs?user=all&id=");
    size_t i;
    const json_t *d;
    json_array_foreach (deps, i, d) {
        if (i == JOBSHOW_DEPS_MAX)
            break;
        strbuf_addf(&path, "%s%lld", i ? "," : "",
                    (long long)json_integer_value(json_object_get(d, "id")));
    }
    json_t *reply = NULL;
    json_t *states = NULL;
    if (cli_request_json("GET", path.buf, NULL, NULL, &reply) == 0) {
        states = json_object();
        json_array_foreach (json_object_get(reply, "jobs"), i, d) {
            char key[24];
            format_int(key, (long long)json_integer_value(json_object_get(d, JOB_KEY_ID)));
            json_object_set(states, key, json_object_get(d, JOB_KEY_STATE));
        }
    }
    json_decref(reply);
    strbuf_free(&path);
    return states;
}

/* "5 (afterok: CD, met), 7 (afterany: R, pending)": each dependency with its kind, the
 * state of the job it waits for and, while this job waits, whether it is met. */
static char *deps_text(const json_t *deps, const json_t *dep_states)
{
    struct strbuf sb;
    strbuf_init(&sb);
    size_t i;
    const json_t *d;
    json_array_foreach (deps, i, d) {
        if (i == JOBSHOW_DEPS_MAX) {
            strbuf_addf(&sb, ", ... and %zu more (-o json lists them)", json_array_size(deps) - i);
            break;
        }
        char key[24];
        format_int(key, (long long)json_integer_value(json_object_get(d, "id")));
        const char *state = json_string_value(json_object_get(dep_states, key));
        const char *status = get_str(d, "status");
        strbuf_addf(&sb, "%s%s (%s: %s%s%s)", i ? ", " : "", key, get_str(d, "kind"),
                    state ? state : "?", status ? ", " : "", status ? status : "");
    }
    if (!sb.len)
        strbuf_adds(&sb, "-");
    return strbuf_detach(&sb);
}

static void print_deps(const json_t *raw, const struct job *j, const json_t *dep_states)
{
    const json_t *deps = json_object_get(raw, JOB_KEY_DEPENDS_ON);
    field_owned(JOB_LABEL_DEPENDS_ON, deps_text(deps, dep_states));
    if (json_array_size(deps)) {
        field("Mode",
              j->deps_any ? "any (one dependency suffices)" : "all (every dependency must be met)");
        field(JOB_LABEL_AUTO_CANCEL, j->auto_cancel ? "enabled" : "disabled");
    }
    field_owned("Dependents", output_json_list(json_object_get(raw, "dependents"), "-"));
}

/* ---- timing, outcome, supervision ---- */

static void print_timing(const json_t *raw, const struct job *j)
{
    field_owned(JOB_LABEL_TIME_LIMIT, output_job_time_limit(j));
    field(JOB_LABEL_SIGNAL_SPEC, get_str(raw, JOB_KEY_SIGNAL_SPEC));
    field_owned(JOB_LABEL_BEGIN_TIME, output_time(j->begin_time));
    field_owned(JOB_LABEL_SUBMIT_TIME, output_time(j->submit_time));
    field_owned(JOB_LABEL_START_TIME, output_time(j->start_time));
    /* As Slurm's squeue --start: when backfill expects the queued job to start. */
    const json_t *expected = json_object_get(raw, JOB_KEY_EXPECTED_START);
    field_owned("StartTime (expected)",
                json_is_number(expected) ? output_time(json_number_value(expected)) : xstrdup("-"));
    field_owned(JOB_LABEL_END_TIME, output_time(j->end_time));
    field_owned("Elapsed", output_job_elapsed(j, now_wall()));
}

static void print_outcome(const json_t *raw, const struct job *j)
{
    field_owned(JOB_LABEL_EXIT_CODE,
                j->exit_code >= 0 ? xasprintf("%d", j->exit_code) : xstrdup("-"));
    const char *sig = get_str(raw, JOB_KEY_SIGNAL_NAME);
    if (j->signal > 0)
        field_owned(JOB_LABEL_SIGNAL,
                    xasprintf("%s (%d)", sig ? sig : job_signal_name(j->signal), j->signal));
    else
        field(JOB_LABEL_SIGNAL, "-");
    field(JOB_LABEL_OOM, j->oom ? "yes" : "no");
    field_owned(JOB_LABEL_REASON, output_job_reason(j));
    if (json_is_true(json_object_get(raw, "cancelling")))
        field("Cancelling", "yes (being stopped; CA once its processes are gone)");
    if (j->backend_id > 0)
        field_owned(JOB_LABEL_SLURM_ID, xasprintf("%lld", (long long)j->backend_id));
    field_owned("ShimPID",
                j->shim_pid > 0 ? xasprintf("%lld", (long long)j->shim_pid) : xstrdup("-"));
    field_owned(JOB_LABEL_MAX_RSS_KB, j->max_rss_kb > 0 ? kib_text(j->max_rss_kb) : xstrdup("-"));
    /* Output the log could not take: its filesystem was full (another job's flood). */
    if (j->log_lost_bytes > 0)
        field_owned(JOB_LABEL_LOG_LOST_BYTES,
                    xasprintf("%lld bytes of output (the log's filesystem was full)",
                              (long long)j->log_lost_bytes));
    field("LogPath", get_str(raw, "log_path"));
    /* gbatch --pty: the terminal, and where `gjob attach` reaches it while it runs. */
    const char *sock = json_string_value(json_object_get(raw, "attach_socket"));
    if (sock)
        field_owned(JOB_LABEL_PTY,
                    xasprintf("yes ('gjob attach %lld'; %s)", (long long)j->id, sock));
    else
        field(JOB_LABEL_PTY, j->pty ? "yes (gjob attach while it runs)" : "no");
}

/* Preemption (gbatch --requeue): whether the job may be preempted, how often it was
 * requeued and for which job; while it is being stopped, that it is. */
static void print_requeue(const json_t *raw, const struct job *j)
{
    field(JOB_LABEL_REQUEUE, j->requeue ? "yes (may be preempted)" : "no");
    if (j->requeue_count > 0)
        field_owned(JOB_LABEL_REQUEUE_COUNT, xasprintf("%d time%s (preempted)", j->requeue_count,
                                                       j->requeue_count == 1 ? "" : "s"));
    if (j->preempted_by > 0)
        field_owned(JOB_LABEL_PREEMPTED_BY, xasprintf("job %lld (the last job it was stopped for)",
                                                      (long long)j->preempted_by));
    if (json_is_true(json_object_get(raw, "preempting")))
        field_owned("Preempting", xasprintf("yes (being stopped for job %lld; queued again once "
                                            "its processes are gone)",
                                            (long long)j->preempted_by));
}

/* Mail on job events (gbatch --notify-email/--notify-on/--auto-close), when the daemon
 * sends these fields. */
static void print_notify(const json_t *raw)
{
    if (json_object_get(raw, JOB_KEY_NOTIFY_EMAIL))
        field(JOB_LABEL_NOTIFY_EMAIL, get_str(raw, JOB_KEY_NOTIFY_EMAIL));
    if (json_object_get(raw, JOB_KEY_NOTIFY_ON))
        field_owned(JOB_LABEL_NOTIFY_ON,
                    output_json_list(json_object_get(raw, JOB_KEY_NOTIFY_ON), "-"));
    const json_t *close = json_object_get(raw, JOB_KEY_AUTO_CLOSE);
    if (close)
        field(JOB_LABEL_AUTO_CLOSE, json_is_true(close) ? "yes" : "no");
}

void jobshow_print(const json_t *raw, const struct job *j, const json_t *dep_states)
{
    print_identity(raw, j);
    print_retries(raw, j);
    print_what(raw, j);
    print_gpus(raw, j);
    print_deps(raw, j, dep_states);
    print_timing(raw, j);
    print_outcome(raw, j);
    print_requeue(raw, j);
    print_notify(raw);
}
