/* slurmspec: gflow jobs in Slurm's terms and back (see slurmspec.h). */
#include "slurmspec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Whether a script's first line names a shell (bash, sh, ...) that the activation lines
 * of --conda-env can be put after. */
static bool shell_shebang(const char *script)
{
    size_t n = strcspn(script, "\n");
    for (size_t i = 0; i + 1 < n; i++)
        if (script[i] == 's' && script[i + 1] == 'h')
            return true;
    return false;
}

char *slurmspec_refusal(const struct job *j)
{
    if (j->gpu_memory_mb > 0)
        return xstrdup("--gpu-memory cannot be asked of Slurm; ask whole GPUs (--gpus) instead");
    if (j->shared)
        return xstrdup("--shared GPUs cannot be asked of Slurm; leave out --shared");
    if (j->mig_profile)
        return xstrdup("--mig is not supported with the slurm backend yet; use --gpus");
    if (j->gpus_per_task > 0)
        return xstrdup("--gpus-per-task is not supported with the slurm backend yet");
    if (j->pty)
        return xstrdup("--pty jobs cannot be attached to on Slurm; leave out --pty");
    if (j->conda_env && j->script && str_starts_with(j->script, "#!") && !shell_shebang(j->script))
        return xstrdup("--conda-env needs a shell script on Slurm (its #! line names no shell)");
    return NULL;
}

/* Slurm's --time: minutes are its smallest unit in most sites' eyes, but H:M:S is
 * understood exactly. */
static void push_time(struct strvec *argv, int64_t secs)
{
    strvec_pushf(argv, "--time=%lld:%02lld:%02lld", (long long)(secs / 3600),
                 (long long)(secs / 60 % 60), (long long)(secs % 60));
}

static void push_site_args(struct strvec *argv, const char *args)
{
    if (!args)
        return;
    char *copy = xstrdup(args), *save = NULL;
    for (char *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
        strvec_push(argv, w);
    free(copy);
}

void slurmspec_sbatch_args(const struct job *j, const struct slurm_site *site, const char *log_path,
                           bool as_uid, struct strvec *argv)
{
    strvec_push(argv, "--parsable");
    strvec_pushf(argv, "--job-name=%s", j->name && j->name[0] ? j->name : "gflow");
    strvec_pushf(argv, "--comment=" SLURMSPEC_COMMENT_PREFIX "%s:%lld", site->tag,
                 (long long)j->id);
    if (j->workdir)
        strvec_pushf(argv, "--chdir=%s", j->workdir);
    /* Both streams into the one log gjob log reads, appended to (a requeue keeps it). */
    strvec_pushf(argv, "--output=%s", log_path);
    strvec_pushf(argv, "--error=%s", log_path);
    strvec_push(argv, "--open-mode=append");
    strvec_push(argv, "--export=ALL"); /* sbatch runs with the job's environment */
    strvec_push(argv, "--ntasks=1");
    if (j->gpus > 0)
        strvec_pushf(argv, "--gres=gpu:%d", j->gpus);
    if (j->time_limit > 0)
        push_time(argv, j->time_limit);
    if (j->memory_mb > 0)
        strvec_pushf(argv, "--mem=%lldM", (long long)j->memory_mb);
    if (j->warn_signal > 0)
        strvec_pushf(argv, "--signal=%s%d@%lld", j->warn_main_only ? "B:" : "", j->warn_signal,
                     (long long)j->warn_secs);
    if (j->requeue)
        strvec_push(argv, "--requeue");
    if (j->begin_time > 0) { /* Slurm reads it in its local time, as gflowd's */
        time_t t = (time_t)j->begin_time;
        struct tm tm;
        char buf[32];
        localtime_r(&t, &tm);
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
        strvec_pushf(argv, "--begin=%s", buf);
    }
    if (slurmspec_nice(j->priority) > 0)
        strvec_pushf(argv, "--nice=%d", slurmspec_nice(j->priority));
    if (as_uid) {
        strvec_pushf(argv, "--uid=%u", j->uid);
        strvec_pushf(argv, "--gid=%u", j->gid);
    }
    if (site->partition && site->partition[0])
        strvec_pushf(argv, "--partition=%s", site->partition);
    if (site->account && site->account[0])
        strvec_pushf(argv, "--account=%s", site->account);
    if (site->qos && site->qos[0])
        strvec_pushf(argv, "--qos=%s", site->qos);
    push_site_args(argv, site->sbatch_args);
}

void slurmspec_dependency_args(const struct slurm_dep *deps, size_t n, bool any, bool kill,
                               struct strvec *argv)
{
    if (n == 0)
        return;
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n; i++)
        strbuf_addf(&sb, "%s%s:%lld", i ? (any ? "?" : ",") : "", deps[i].kind,
                    (long long)deps[i].slurm_id);
    strvec_pushf(argv, "--dependency=%s", sb.buf);
    strvec_pushf(argv, "--kill-on-invalid-dep=%s", kill ? "yes" : "no");
    strbuf_free(&sb);
}

int slurmspec_nice(int priority)
{
    return priority < JOB_PRIORITY_DEFAULT ? (JOB_PRIORITY_DEFAULT - priority) * 100 : 0;
}

/* s in single quotes for a shell. */
static void add_quoted(struct strbuf *sb, const char *s)
{
    strbuf_adds(sb, "'");
    for (; *s; s++) {
        if (*s == '\'')
            strbuf_adds(sb, "'\\''");
        else
            strbuf_addf(sb, "%c", *s);
    }
    strbuf_adds(sb, "'");
}

char *slurmspec_batch_script(const struct job *j)
{
    struct strbuf sb;
    strbuf_init(&sb);
    const char *body = j->script ? j->script : (j->command ? j->command : "true");
    bool shebang = j->script && str_starts_with(body, "#!");
    if (shebang) { /* its first line stays first */
        size_t n = strcspn(body, "\n");
        strbuf_addf(&sb, "%.*s\n", (int)n, body);
        body += body[n] ? n + 1 : n;
    } else {
        strbuf_adds(&sb, "#!/bin/bash\n");
    }
    if (j->conda_env) {
        strbuf_adds(&sb, "eval \"$(conda shell.bash hook)\" && conda activate ");
        add_quoted(&sb, j->conda_env);
        strbuf_adds(&sb, " || exit 1\n");
    }
    strbuf_adds(&sb, body);
    if (!sb.len || sb.buf[sb.len - 1] != '\n')
        strbuf_adds(&sb, "\n");
    return strbuf_detach(&sb);
}

bool slurmspec_env_is_local_gpu(const char *entry)
{
    static const char *const names[] = {"CUDA_VISIBLE_DEVICES=", "GFLOW_GPU_UUIDS=",
                                        "NVIDIA_VISIBLE_DEVICES=", "CUDA_DEVICE_ORDER=", NULL};
    for (size_t i = 0; names[i]; i++)
        if (str_starts_with(entry, names[i]))
            return true;
    return false;
}

int64_t slurmspec_parse_sbatch(const char *out)
{
    char *end;
    long long id = strtoll(out, &end, 10);
    if (end == out || id <= 0 || (*end && *end != ';' && *end != '\n'))
        return -1;
    return id;
}

/* The value of " KEY=" in line (to the next space), copied into buf. */
static bool field(const char *line, const char *key, char *buf, size_t size)
{
    size_t klen = strlen(key);
    for (const char *p = line; (p = strstr(p, key)); p += klen) {
        if ((p == line || p[-1] == ' ') && p[klen] == '=') {
            const char *v = p + klen + 1;
            size_t n = strcspn(v, " \n");
            if (n >= size)
                n = size - 1;
            memcpy(buf, v, n);
            buf[n] = '\0';
            return true;
        }
    }
    return false;
}

char *slurmspec_daemon_tag(const char *host, const char *data_dir)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const char *p = host; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ ':') * 1099511628211ULL;
    for (const char *p = data_dir; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return xasprintf("%012llx", (unsigned long long)(h >> 16));
}

int64_t slurmspec_comment_id(const char *comment, const char *tag)
{
    if (!str_starts_with(comment, SLURMSPEC_COMMENT_PREFIX))
        return 0;
    const char *p = comment + strlen(SLURMSPEC_COMMENT_PREFIX);
    size_t n = strlen(tag);
    if (strncmp(p, tag, n) != 0 || p[n] != ':')
        return 0;
    char *end;
    long long id = strtoll(p + n + 1, &end, 10);
    return *end || id <= 0 ? 0 : id;
}

/* Slurm's local time "2026-12-02T08:50:00" in unix seconds; 0: "Unknown", "None"... */
static double slurm_time(const char *s)
{
    struct tm tm = {0};
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end || *end)
        return 0;
    tm.tm_isdst = -1;
    time_t t = mktime(&tm);
    return t > 0 ? (double)t : 0;
}

int slurmspec_parse_job_line(const char *line, struct slurm_job_info *out)
{
    memset(out, 0, sizeof(*out));
    char buf[128];
    if (!field(line, "JobId", buf, sizeof(buf)) || (out->slurm_id = atoll(buf)) <= 0)
        return -1;
    field(line, "Comment", out->comment, sizeof(out->comment));
    if (!field(line, "JobState", out->state, sizeof(out->state)))
        return -1;
    if (!field(line, "Reason", out->reason, sizeof(out->reason)))
        strcpy(out->reason, "None");
    if (field(line, "ExitCode", buf, sizeof(buf)))
        sscanf(buf, "%d:%d", &out->exit_code, &out->exit_signal);
    if (!slurmspec_pending(out)) {
        if (field(line, "StartTime", buf, sizeof(buf)))
            out->start_time = slurm_time(buf);
        out->ran = strcmp(out->state, "CANCELLED") != 0 ||
                   (field(line, "RunTime", buf, sizeof(buf)) && strspn(buf, "0:-") != strlen(buf));
        if (field(line, "EndTime", buf, sizeof(buf)) && slurmspec_ended_state(out->state))
            out->end_time = slurm_time(buf);
    }
    return 0;
}

int slurmspec_parse_sacct_line(const char *line, struct slurm_job_info *out)
{
    memset(out, 0, sizeof(*out));
    char *end;
    long long id = strtoll(line, &end, 10);
    if (end == line || id <= 0 || *end != '|')
        return -1;
    out->slurm_id = id;
    const char *p = end + 1;
    size_t n = strcspn(p, "| "); /* "CANCELLED by 0": the first word */
    if (n == 0 || n >= sizeof(out->state))
        return -1;
    memcpy(out->state, p, n);
    p = strchr(p, '|');
    if (!p)
        return -1;
    sscanf(p + 1, "%d:%d", &out->exit_code, &out->exit_signal);
    p = strchr(p + 1, '|');
    n = p ? strcspn(p + 1, "|\n") : 0;
    if (n == 0 || n >= sizeof(out->reason))
        strcpy(out->reason, "None");
    else
        memcpy(out->reason, p + 1, n);
    out->ran = strcmp(out->state, "CANCELLED") != 0; /* (sacct is asked no times) */
    return 0;
}

bool slurmspec_pending(const struct slurm_job_info *s)
{
    return strcmp(s->state, "PENDING") == 0 || str_starts_with(s->state, "REQUEUE") ||
           strcmp(s->state, "RESV_DEL_HOLD") == 0;
}

bool slurmspec_ended_state(const char *state)
{
    static const char *const ended[] = {
        "COMPLETED", "FAILED",    "OUT_OF_MEMORY", "TIMEOUT",   "DEADLINE",
        "CANCELLED", "NODE_FAIL", "BOOT_FAIL",     "PREEMPTED", NULL,
    };
    for (size_t i = 0; ended[i]; i++)
        if (strcmp(state, ended[i]) == 0)
            return true;
    return false;
}

bool slurmspec_ended(const struct slurm_job_info *s, bool cancel_requested, enum job_state *state,
                     enum job_reason *reason, const char **detail)
{
    *detail = NULL;
    if (strcmp(s->state, "COMPLETED") == 0) {
        *state = JOB_FINISHED;
        *reason = JOB_REASON_NONE;
    } else if (strcmp(s->state, "FAILED") == 0) {
        *state = JOB_FAILED;
        *reason = s->exit_signal ? JOB_REASON_SIGNAL : JOB_REASON_NON_ZERO_EXIT;
    } else if (strcmp(s->state, "OUT_OF_MEMORY") == 0) {
        *state = JOB_FAILED;
        *reason = JOB_REASON_OUT_OF_MEMORY;
    } else if (strcmp(s->state, "TIMEOUT") == 0 || strcmp(s->state, "DEADLINE") == 0) {
        *state = JOB_TIMEOUT;
        *reason = JOB_REASON_TIME_LIMIT;
    } else if (strcmp(s->state, "CANCELLED") == 0) {
        *state = JOB_CANCELLED;
        *reason = cancel_requested ? JOB_REASON_CANCELLED_BY_USER : JOB_REASON_OTHER;
        *detail = cancel_requested ? NULL : "Slurm: CANCELLED outside gflow";
    } else if (strcmp(s->state, "NODE_FAIL") == 0 || strcmp(s->state, "BOOT_FAIL") == 0 ||
               strcmp(s->state, "PREEMPTED") == 0) {
        *state = JOB_FAILED;
        *reason = JOB_REASON_OTHER;
        *detail = strcmp(s->state, "NODE_FAIL") == 0   ? "Slurm: NODE_FAIL"
                  : strcmp(s->state, "BOOT_FAIL") == 0 ? "Slurm: BOOT_FAIL"
                                                       : "Slurm: PREEMPTED";
    } else {
        return false; /* PENDING, RUNNING, COMPLETING, CONFIGURING, SUSPENDED, REQUEUED... */
    }
    return true;
}
