/* jobshow: gjob show's form of a job (see jobshow.h): gflow's grouped layout, a heading
 * per part ("Job Details:", "Resources:", ...) and one "  Key=Value" line per field,
 * in gflow's order, with what only we have under the parts it belongs to and two parts
 * of our own (Outcome, Supervision). A field with nothing to say (no limit, no project,
 * not started) is left out, as gflow does; --verbose prints it too, as "-". A field
 * the daemon may not send (older daemons, fields added later) is printed when it is
 * there. */
#include "jobshow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "gpuacct.h"
#include "gpuinfo.h"
#include "output.h"
#include "parse.h"
#include "termtext.h"
#include "timefmt.h"
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

/* ---- the lines ---- */

/* Where the printing is: whether empty fields are shown, and the heading of the part
 * being printed, written before its first line (a part with no line has no heading). */
struct show {
    bool verbose;
    const char *heading;
    bool first_part;
};

static void part(struct show *s, const char *heading)
{
    s->heading = heading;
}

/* One line. Controls (a newline too) and bidi overrides in the value are shown as
 * visible escapes (termtext.h), so one field stays one line and another user's job name
 * or command cannot drive the reader's terminal. */
static void kv(struct show *s, const char *key, const char *value)
{
    struct strbuf sb;
    strbuf_init(&sb);
    if (s->heading) {
        strbuf_addf(&sb, "%s%s:\n", s->first_part ? "" : "\n", s->heading);
        s->heading = NULL;
        s->first_part = false;
    }
    strbuf_adds(&sb, "  ");
    termtext_escape(&sb, key, strlen(key), 0);
    strbuf_addc(&sb, '=');
    value = value ? value : "-";
    termtext_escape(&sb, value, strlen(value), 0);
    strbuf_addc(&sb, '\n');
    fwrite(sb.buf, 1, sb.len, stdout);
    strbuf_free(&sb);
}

static void kv_owned(struct show *s, const char *key, char *value)
{
    kv(s, key, value);
    free(value);
}

/* A field that may have nothing to say: printed when shown, else only with --verbose
 * (its value, or "-" when NULL). value is freed either way. */
static void kv_if(struct show *s, bool shown, const char *key, char *value)
{
    if (shown || s->verbose)
        kv(s, key, value);
    free(value);
}

static const char *get_str(const json_t *raw, const char *key)
{
    return json_string_value(json_object_get(raw, key));
}

/* A text field: printed when set. */
static void kv_str(struct show *s, const char *key, const char *value)
{
    kv_if(s, value && *value, key, value && *value ? xstrdup(value) : NULL);
}

/* A count: printed when > 0 (--verbose: 0 too). */
static void kv_count(struct show *s, const char *key, long long v)
{
    kv_if(s, v > 0, key, xasprintf("%lld", v));
}

/* A job id or pid: printed when set (--verbose: "-" when not). */
static void kv_pos(struct show *s, const char *key, long long v)
{
    kv_if(s, v > 0, key, v > 0 ? xasprintf("%lld", v) : NULL);
}

static long long get_int(const json_t *raw, const char *key)
{
    return (long long)json_integer_value(json_object_get(raw, key));
}

/* ---- Job Details: the job, what it runs ---- */

/* A waiting job's effective priority and its parts, as Slurm's sprio: "522.50 = 255 x
 * 0.0392 (priority) + 1000 x 0.5125 (fairshare) + 0 x 0.0012 (age)"; NULL for a job
 * that no longer waits. */
static char *priority_text(const json_t *detail)
{
    if (!json_is_object(detail))
        return NULL;
    const json_t *w = json_object_get(detail, "weights"), *f = json_object_get(detail, "factors");
    double eff = json_number_value(json_object_get(detail, "effective"));
    return xasprintf("%.2f = %lld x %.4f (priority) + %lld x %.4f (fairshare) + %lld x %.4f (age)",
                     eff, get_int(w, "priority"), json_number_value(json_object_get(f, "priority")),
                     get_int(w, "fairshare"), json_number_value(json_object_get(f, "fairshare")),
                     get_int(w, "age"), json_number_value(json_object_get(f, "age")));
}

static void print_identity(struct show *s, const json_t *raw, const struct job *j)
{
    part(s, "Job Details");
    kv_owned(s, JOB_LABEL_ID, xasprintf("%lld", (long long)j->id));
    kv(s, JOB_LABEL_NAME, j->name);
    /* gflow's "Running (R)"; CG (Cancelling) for a running job being cancelled, as
     * gqueue shows it. */
    kv_owned(s, JOB_LABEL_STATE,
             xasprintf("%s (%s)", job_display_state_name(j), job_display_state(j)));
    /* Why it waits or ended (Slurm's Reason, beside its state as in scontrol). */
    char *reason = output_job_reason(j);
    kv_if(s, reason != NULL, JOB_LABEL_REASON, reason);
    bool cancelling = json_is_true(json_object_get(raw, "cancelling"));
    kv_if(s, cancelling, "Cancelling",
          xstrdup(cancelling ? "yes (being stopped; CA once its processes are gone)" : "no"));
    kv_owned(s, JOB_LABEL_PRIORITY, xasprintf("%d", j->priority));
    char *eff = priority_text(json_object_get(raw, "priority_detail"));
    kv_if(s, eff != NULL, JOB_LABEL_EFFECTIVE_PRIORITY, eff);
    kv_if(s, j->nice != 0, JOB_LABEL_NICE, xasprintf("%d", j->nice));
    kv_owned(s, JOB_LABEL_USER,
             xasprintf("%s (uid %lld)", j->user ? j->user : "?", get_int(raw, JOB_KEY_UID)));
    kv_str(s, JOB_LABEL_PROJECT, get_str(raw, JOB_KEY_PROJECT));
    /* Retries: the limit, "Attempt: 2 of 4", where it came from and what replaced it. */
    kv_count(s, JOB_LABEL_MAX_RETRIES, j->max_retries);
    kv_if(s, j->max_retries > 0 || j->attempt > 1, JOB_LABEL_ATTEMPT,
          xasprintf("%d of %d", j->attempt, j->max_retries + 1));
    kv_pos(s, JOB_LABEL_RETRY_OF, j->retry_of);
    kv_pos(s, "RetriedAs", get_int(raw, "retried_as"));
    kv_pos(s, JOB_LABEL_GROUP_ID, get_int(raw, JOB_KEY_GROUP_ID));
    /* The limit of the job's group (gbatch --max-concurrent, gctl set-limit). */
    kv_count(s, JOB_LABEL_MAX_CONCURRENT, get_int(raw, JOB_KEY_MAX_CONCURRENT));
    if (j->command) {
        kv(s, JOB_LABEL_COMMAND, j->command);
    } else {
        /* The text is in -o json (for its owner); here its path and size. */
        const char *text = get_str(raw, JOB_KEY_SCRIPT);
        const char *path = j->script_path ? j->script_path : "-";
        size_t lines = 0;
        for (const char *p = text; p && *p; p++)
            lines += *p == '\n';
        kv_owned(s, "Script",
                 text ? xasprintf("%s (%zu line%s stored; -o json has the text)", path, lines,
                                  plural_s((long long)lines))
                      : xstrdup(path));
    }
}

/* A sweep's values, one line each, as gflow's "Parameters:" part. */
static void print_params(struct show *s, const json_t *raw)
{
    const json_t *params = json_object_get(raw, JOB_KEY_PARAMS);
    if (!json_object_size(params))
        return;
    part(s, "Parameters");
    const char *key;
    const json_t *v;
    json_object_foreach ((json_t *)params, key, v)
        kv(s, key, json_is_string(v) ? json_string_value(v) : "");
}

/* ---- Resources ---- */

/* A MIG job: "MIG=1g.18gb:1", then one line per instance it holds with its memory
 * ("MIG 0=MIG-<uuid> 1g.18gb on GPU 0, 2048/18176 MiB"). */
static void print_mig(struct show *s, const json_t *raw, const struct job *j)
{
    if (!j->mig_profile) {
        kv_if(s, false, JOB_LABEL_MIG_PROFILE, NULL);
        return;
    }
    kv_owned(s, JOB_LABEL_MIG_PROFILE, xasprintf("%s:%d", j->mig_profile, j->mig_count));
    size_t i;
    const json_t *m;
    json_array_foreach (json_object_get(raw, "mig_detail"), i, m) {
        const json_t *used = json_object_get(m, "memory_used_mib");
        char *key = xasprintf("MIG %zu", i);
        char *usedtxt = json_is_integer(used)
                            ? xasprintf("%lld", (long long)json_integer_value(used))
                            : xstrdup("?");
        kv_owned(s, key,
                 xasprintf("%s %s on GPU %lld, %s/%lld MiB", get_str(m, "uuid"),
                           get_str(m, "profile"), get_int(m, "parent"), usedtxt,
                           get_int(m, "memory_total_mib")));
        free(usedtxt);
        free(key);
    }
    if (!json_array_size(json_object_get(raw, "mig_detail")) &&
        json_array_size(json_object_get(raw, JOB_KEY_MIG_DEVICES)))
        kv_owned(s, JOB_LABEL_MIG_DEVICES,
                 output_json_list(json_object_get(raw, JOB_KEY_MIG_DEVICES), "-"));
}

/* CPU pinning: "CPUsPerGPU=2" when asked, and the CPUs the job was pinned to with
 * where they are: "CPUs=1 (near GPU 1)", or "CPUs=0-5 (2 not near GPUs 0,1)". */
static void print_cpus(struct show *s, const struct job *j)
{
    kv_count(s, JOB_LABEL_CPUS_PER_GPU, j->cpus_per_gpu);
    if (!j->cpus) {
        kv_if(s, false, JOB_LABEL_CPUS, NULL);
        return;
    }
    char *ids = gpu_mask_format(j->gpu_mask);
    const char *pl = strchr(ids, ',') ? "s" : "";
    if (j->cpus_far > 0)
        kv_owned(s, JOB_LABEL_CPUS,
                 xasprintf("%s (%d not near GPU%s %s)", j->cpus, j->cpus_far, pl, ids));
    else
        kv_owned(s, JOB_LABEL_CPUS, xasprintf("%s (near GPU%s %s)", j->cpus, pl, ids));
    free(ids);
}

/* The GPU request as gflow shows it (GPUs, GPUSharing, GPUMemoryLimit), the ids once
 * allocated, and one line per allocated GPU from gpus_detail ("GPU 0=GPU-<uuid>
 * 00000000:3B:00.0") so the physical GPU is never in doubt. */
static void print_gpus(struct show *s, const json_t *raw, const struct job *j)
{
    kv_owned(s, JOB_LABEL_GPUS, xasprintf("%d", j->gpus));
    kv_if(s, j->gpus > 0, JOB_LABEL_SHARED,
          xstrdup(json_is_true(json_object_get(raw, JOB_KEY_SHARED)) ? "shared" : "exclusive"));
    int64_t mem = get_int(raw, JOB_KEY_GPU_MEMORY_MB);
    kv_if(s, mem > 0, JOB_LABEL_GPU_MEMORY_MB, jobshow_mib(mem)); /* "none" */
    kv_count(s, JOB_LABEL_GPUS_PER_TASK, get_int(raw, JOB_KEY_GPUS_PER_TASK));
    kv_if(s, j->gpu_mask != 0, JOB_LABEL_GPU_IDS,
          j->gpu_mask ? gpu_mask_format(j->gpu_mask) : NULL);
    size_t i;
    const json_t *g;
    json_array_foreach (json_object_get(raw, "gpus_detail"), i, g) {
        const json_t *index = json_object_get(g, "index");
        const char *uuid = get_str(g, "uuid");
        const char *bus = get_str(g, "pci_bus_id");
        char *key = json_is_integer(index)
                        ? xasprintf("GPU %lld", (long long)json_integer_value(index))
                        : xstrdup("GPU ?");
        kv_owned(s, key, xasprintf("%s %s", uuid ? uuid : "?", bus ? bus : "?"));
        free(key);
    }
    /* Processes of this job seen on GPUs it was not given (a program that ignores
     * CUDA_VISIBLE_DEVICES): worth a warning line. */
    const json_t *foreign = json_object_get(raw, "foreign_gpus");
    if (json_array_size(foreign)) {
        char *ids = output_json_list(foreign, "-");
        kv_owned(s, "ForeignGPUs",
                 xasprintf("%s (the job runs processes on GPUs it was not given)", ids));
        free(ids);
    } else {
        kv_if(s, false, "ForeignGPUs", NULL);
    }
    print_cpus(s, j);
    print_mig(s, raw, j);
}

static void print_resources(struct show *s, const json_t *raw, const struct job *j)
{
    part(s, "Resources");
    print_gpus(s, raw, j);
    kv_if(s, j->memory_mb > 0, JOB_LABEL_MEMORY_MB, jobshow_mib(j->memory_mb)); /* "none" */
    kv_str(s, JOB_LABEL_CONDA_ENV, j->conda_env);
}

/* ---- Execution ---- */

static void print_execution(struct show *s, const json_t *raw, const struct job *j)
{
    part(s, "Execution");
    kv(s, JOB_LABEL_WORKDIR, j->workdir);
    const json_t *env = json_object_get(raw, JOB_KEY_ENV);
    if (json_is_object(env))
        kv_owned(s, "Env",
                 xasprintf("%zu variable%s (-o json lists them)", json_object_size(env),
                           plural_s((long long)json_object_size(env))));
    else
        kv(s, "Env", "- (not shown to other users)");
    /* A job stored without one runs with gflowd's own (docs/usage.md). */
    const char *mask = get_str(raw, JOB_KEY_UMASK);
    kv_if(s, mask != NULL, JOB_LABEL_UMASK, xstrdup(mask ? mask : "0077 (none given)"));
    kv_str(s, "LogPath", get_str(raw, "log_path"));
    /* gbatch --pty: the terminal, and where `gjob attach` reaches it while it runs. */
    const char *sock = get_str(raw, "attach_socket");
    if (sock)
        kv_owned(s, JOB_LABEL_PTY,
                 xasprintf("yes ('gjob attach %lld'; %s)", (long long)j->id, sock));
    else
        kv_if(s, j->pty, JOB_LABEL_PTY, xstrdup(j->pty ? "yes (gjob attach while it runs)" : "no"));
    /* Mail on job events (gbatch --notify-email/--notify-on/--auto-close). */
    kv_str(s, JOB_LABEL_NOTIFY_EMAIL, get_str(raw, JOB_KEY_NOTIFY_EMAIL));
    const json_t *on = json_object_get(raw, JOB_KEY_NOTIFY_ON);
    kv_if(s, json_array_size(on) > 0, JOB_LABEL_NOTIFY_ON, output_json_list(on, "-"));
    const json_t *close = json_object_get(raw, JOB_KEY_AUTO_CLOSE);
    kv_if(s, json_is_true(close), JOB_LABEL_AUTO_CLOSE,
          close ? xstrdup(json_is_true(close) ? "yes" : "no") : NULL);
}

/* ---- Dependencies ---- */

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
        strbuf_addf(&path, "%s%lld", i ? "," : "", get_int(d, "id"));
    }
    json_t *reply = NULL;
    json_t *states = NULL;
    if (cli_request_json("GET", path.buf, NULL, NULL, &reply) == 0) {
        states = json_object();
        json_array_foreach (json_object_get(reply, "jobs"), i, d) {
            char key[24];
            format_int(key, get_int(d, JOB_KEY_ID));
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
        format_int(key, get_int(d, "id"));
        const char *state = json_string_value(json_object_get(dep_states, key));
        const char *status = get_str(d, "status");
        strbuf_addf(&sb, "%s%s (%s: %s%s%s)", i ? ", " : "", key, get_str(d, "kind"),
                    state ? state : "?", status ? ", " : "", status ? status : "");
    }
    return strbuf_detach(&sb);
}

/* gflow's part (DependsOn, Mode, AutoCancel, TaskID), with the jobs that wait for this
 * one (Dependents). */
static void print_deps(struct show *s, const json_t *raw, const struct job *j,
                       const json_t *dep_states)
{
    part(s, "Dependencies");
    const json_t *deps = json_object_get(raw, JOB_KEY_DEPENDS_ON);
    bool any = json_array_size(deps) > 0;
    kv_if(s, any, JOB_LABEL_DEPENDS_ON, any ? deps_text(deps, dep_states) : NULL);
    kv_if(s, any, "Mode",
          xstrdup(j->deps_any ? "any (one dependency suffices)"
                              : "all (every dependency must be met)"));
    kv_if(s, any, JOB_LABEL_AUTO_CANCEL, xstrdup(j->auto_cancel ? "enabled" : "disabled"));
    const json_t *dependents = json_object_get(raw, "dependents");
    kv_if(s, json_array_size(dependents) > 0, "Dependents", output_json_list(dependents, "-"));
    const json_t *task = json_object_get(raw, JOB_KEY_ARRAY_TASK);
    kv_if(s, json_is_integer(task), JOB_LABEL_ARRAY_TASK,
          json_is_integer(task) ? xasprintf("%lld", (long long)json_integer_value(task)) : NULL);
}

/* ---- Timing ---- */

/* "2026-12-05T10:00:00 (waited 0:05)": a time and, when known, how long something took. */
static char *time_with(double t, const char *what, double secs, const char *after)
{
    char *when = output_time(t);
    if (secs < 0)
        return when;
    char *d = format_duration((int64_t)secs);
    char *out = xasprintf("%s (%s %s%s)", when, what, d, after);
    free(d);
    free(when);
    return out;
}

static void print_timing(struct show *s, const json_t *raw, const struct job *j)
{
    part(s, "Timing");
    kv_if(s, j->time_limit > 0, JOB_LABEL_TIME_LIMIT, output_job_time_limit(j)); /* UNLIMITED */
    kv_str(s, JOB_LABEL_SIGNAL_SPEC, get_str(raw, JOB_KEY_SIGNAL_SPEC));
    kv_if(s, j->begin_time > 0, JOB_LABEL_BEGIN_TIME,
          j->begin_time > 0 ? output_time(j->begin_time) : NULL);
    /* As gflow: how long the job waited, once it started. */
    bool started = j->start_time > 0;
    kv_if(
        s, j->submit_time > 0, JOB_LABEL_SUBMIT_TIME,
        time_with(j->submit_time, "waited",
                  started && j->start_time >= j->submit_time ? j->start_time - j->submit_time : -1,
                  ""));
    /* As Slurm's squeue --start: when backfill expects the queued job to start. */
    const json_t *expected = json_object_get(raw, JOB_KEY_EXPECTED_START);
    kv_if(s, json_is_number(expected), "ExpectedStart",
          json_is_number(expected) ? output_time(json_number_value(expected)) : NULL);
    bool ended = j->end_time > 0;
    if (started && !ended && j->state == JOB_RUNNING) {
        double so_far = now_wall() - j->start_time;
        kv_owned(s, JOB_LABEL_START_TIME,
                 time_with(j->start_time, "running", so_far > 0 ? so_far : 0, " so far"));
    } else {
        kv_if(s, started, JOB_LABEL_START_TIME, started ? output_time(j->start_time) : NULL);
    }
    kv_if(s, ended, JOB_LABEL_END_TIME,
          !ended ? NULL
                 : time_with(j->end_time, "runtime",
                             started && j->end_time >= j->start_time ? j->end_time - j->start_time
                                                                     : -1,
                             ""));
}

/* ---- Outcome, Supervision (ours) ---- */

static void print_outcome(struct show *s, const json_t *raw, const struct job *j)
{
    part(s, "Outcome");
    kv_if(s, j->exit_code >= 0, JOB_LABEL_EXIT_CODE,
          j->exit_code >= 0 ? xasprintf("%d", j->exit_code) : NULL);
    const char *sig = get_str(raw, JOB_KEY_SIGNAL_NAME);
    kv_if(s, j->signal > 0, JOB_LABEL_SIGNAL,
          j->signal > 0 ? xasprintf("%s (%d)", sig ? sig : job_signal_name(j->signal), j->signal)
                        : NULL);
    kv_if(s, j->oom, JOB_LABEL_OOM, xstrdup(j->oom ? "yes" : "no"));
    kv_if(s, j->max_rss_kb > 0, JOB_LABEL_MAX_RSS_KB,
          j->max_rss_kb > 0 ? kib_text(j->max_rss_kb) : NULL);
    /* Output the log could not take: its filesystem was full (another job's flood). */
    kv_if(s, j->log_lost_bytes > 0, JOB_LABEL_LOG_LOST_BYTES,
          j->log_lost_bytes <= 0
              ? NULL
              : xasprintf("%lld byte%s of output (the log's filesystem was full)",
                          (long long)j->log_lost_bytes, plural_s(j->log_lost_bytes)));
    /* Failure triage: the class (shown here when the Reason does not read it already:
     * OutOfMemory's class is HostOOM) and the log line that showed it. */
    const char *reason = get_str(raw, JOB_KEY_REASON);
    bool in_reason = reason && j->failure_class && !strcmp(reason, j->failure_class);
    kv_str(s, JOB_LABEL_FAILURE_CLASS, in_reason ? NULL : j->failure_class);
    kv_str(s, JOB_LABEL_FAILURE_LINE, j->failure_line);
}

/* What the job did with its GPUs (gpuacct.h), once known: so far while it runs. */
static void print_gpu_use(struct show *s, const struct job *j)
{
    part(s, "GPU Use");
    kv_if(s, j->gpu_util_mean >= 0, JOB_LABEL_GPU_UTIL_MEAN,
          j->gpu_util_mean < 0 ? NULL
                               : xasprintf("%d%% mean, %d%% peak", j->gpu_util_mean,
                                           j->gpu_util_peak >= 0 ? j->gpu_util_peak : 0));
    kv_if(s, j->gpu_mem_peak_mb >= 0, JOB_LABEL_GPU_MEM_PEAK_MB,
          j->gpu_mem_peak_mb < 0 ? NULL : gpuacct_mib_text(j->gpu_mem_peak_mb, " "));
    kv_if(s, j->energy_wh >= 0, JOB_LABEL_ENERGY_WH,
          j->energy_wh < 0 ? NULL : gpuacct_energy_text(j->energy_wh, " "));
    kv_if(s, j->gpu_idle > 0, JOB_LABEL_GPU_IDLE,
          j->gpu_idle < 0 ? NULL
          : j->gpu_idle
              ? xasprintf("yes (held its GPUs at under %d%% mean utilisation)", GPUACCT_IDLE_PCT)
              : xstrdup("no"));
}

/* How gflow runs and watches the job: its shim, a Slurm job standing for it, what was
 * seen running beside it, and preemption (gbatch --requeue). */
static void print_supervision(struct show *s, const json_t *raw, const struct job *j)
{
    part(s, "Supervision");
    kv_pos(s, "ShimPID", j->shim_pid);
    kv_pos(s, JOB_LABEL_SLURM_ID, j->backend_id);
    /* What gflow saw and did (daemon.stray), kept after the job ended. */
    kv_str(s, JOB_LABEL_STRAY, j->stray);
    kv_str(s, JOB_LABEL_SLURM_NOTE, j->backend_note); /* e.g. its limit rounded for Slurm */
    kv_if(s, j->requeue, JOB_LABEL_REQUEUE, xstrdup(j->requeue ? "yes (may be preempted)" : "no"));
    kv_if(s, j->requeue_count > 0, JOB_LABEL_REQUEUE_COUNT,
          xasprintf("%d time%s (preempted)", j->requeue_count, plural_s(j->requeue_count)));
    kv_if(s, j->preempted_by > 0, JOB_LABEL_PREEMPTED_BY,
          j->preempted_by > 0
              ? xasprintf("job %lld (the last job it was stopped for)", (long long)j->preempted_by)
              : NULL);
    bool preempting = json_is_true(json_object_get(raw, "preempting"));
    kv_if(s, preempting, "Preempting",
          !preempting
              ? xstrdup("no")
              : xasprintf("yes (being stopped for job %lld; queued again once its processes are "
                          "gone)",
                          (long long)j->preempted_by));
}

void jobshow_print(const json_t *raw, const struct job *j, const json_t *dep_states, bool verbose)
{
    struct show s = {.verbose = verbose, .first_part = true};
    print_identity(&s, raw, j);
    print_params(&s, raw);
    print_resources(&s, raw, j);
    print_execution(&s, raw, j);
    print_deps(&s, raw, j, dep_states);
    print_timing(&s, raw, j);
    print_outcome(&s, raw, j);
    print_gpu_use(&s, j);
    print_supervision(&s, raw, j);
}
