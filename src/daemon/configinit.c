/* configinit: gflowd init (see configinit.h). The keys and defaults come from config.c's
 * table, so a new key shows up here by itself; this file only adds a line of help. */
#include "configinit.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "files.h"
#include "util.h"

struct key_help {
    const char *key;
    const char *help; /* NULL: left out of the file (an older name of another key) */
};

static const struct key_help key_helps[] = {
    {"timezone", "the zone the commands show and read times in, an IANA name such as "
                 "\"Asia/Shanghai\" or \"UTC\" (default: local time)"},
    {"daemon.socket_path", "Unix socket (default: $XDG_RUNTIME_DIR/gflow/gflowd.sock, "
                           "/run/gflow/gflowd.sock for the system daemon)  --socket"},
    {"daemon.data_dir", "database and logs (default: ~/.local/share/gflow, /var/lib/gflow "
                        "for the system daemon)  --data-dir"},
    {"daemon.max_running_jobs", "run at most this many jobs at once; 0 = no limit  "
                                "--max-running-jobs"},
    {"daemon.kill_grace_secs", "seconds between SIGTERM and SIGKILL  --kill-grace-secs"},
    {"daemon.max_request_bytes", NULL},
    {"daemon.admin_group", "members may act on every job and change GPU settings"},
    {"daemon.log_level", "error, warn, info or debug  --log-level, -v, -q"},
    {"daemon.gpus", "GPUs jobs may use: \"all\" or a list like \"0,2-3\"  --gpus"},
    {"daemon.nvml_library", "NVML library to load (default: libnvidia-ml.so.1)"},
    {"daemon.gpu_allocation_strategy", "topology, sequential or random  "
                                       "--gpu-allocation-strategy"},
    {"daemon.default_time_plan", "how long a job without --time is planned to run (backfill's "
                                 "plan, not enforced): \"p95\" = the 95th percentile of the "
                                 "last 1,000 ended jobs' run times (scheduler.default_time_limit "
                                 "until 20 have ended), or a duration: \"24h\", \"08:00:00\""},
    {"daemon.gpu_poll_interval_secs", "how often NVML is read  --gpu-poll-interval-secs"},
    {"daemon.gpu_samples_max", "GPU utilisation samples kept per GPU for gstats --gpu (one "
                               "per poll; the oldest are overwritten)"},
    {"daemon.gpu_id_format",
     "CUDA_VISIBLE_DEVICES of jobs: auto (indices unless one would be wrong), index or uuid"},
    {"daemon.container", "whether gflowd runs in a container: auto (detect), yes or no"},
    {"daemon.stray", "a job's process on a GPU it was not given: block (that GPU for "
                     "others until it is gone), kill (the job, GpuStray) or warn"},
    {"daemon.host_proc", "the host's /proc as mounted in gflowd's container, to match the "
                         "host pids NVML gives (e.g. \"/host/proc\"); default: none"},
    {"daemon.nvml_timeout_secs", "an NVML read that takes longer makes the GPUs unavailable"},
    {"daemon.nvml_retry_max_secs", "longest wait between tries to open NVML"},
    {"daemon.unowned_memory_mib", "a GPU with more memory used by no listed process (another "
                                  "container's, a leak) is busy; 0 = not checked"},
    {"daemon.constrain_devices", "deny jobs the GPUs they were not given (cgroup v1 devices)"},
    {"daemon.cpu_affinity", "pin GPU jobs to their GPUs' local CPUs (cpuset, else "
                            "sched_setaffinity)"},
    {"daemon.log_dir", "where job logs go (default: <data_dir>/logs; relative: to this "
                       "file's folder; writable by others: needs the sticky bit)"},
    {"daemon.max_log_bytes", "cap of one job log; 0 = no cap"},
    {"daemon.log_keep_on_full_disk", "a job ending while its log's filesystem is full keeps "
                                     "only its log's last N bytes; 0 = never cut"},
    {"daemon.keep_finished", "finished jobs kept: an age (\"90d\") or a count (\"100000\"); "
                             "default: all"},
    {"daemon.host", "gflow's key: the web dashboard's address (gflowd web: 127.0.0.1 or "
                    "localhost); the daemon itself listens on its Unix socket"},
    {"daemon.port", "gflow's key: the web dashboard's port (gflowd web); 0 = 8080"},
    {"daemon.fair_share.enabled", "gflow's fair-share: within one --priority, who used less "
                                  "GPU time lately goes first (on with a [daemon.fair_share] "
                                  "table; see scheduler.priority_weight_*)"},
    {"daemon.fair_share.half_life_secs", "fair-share's usage half-life in seconds (as "
                                         "scheduler.fairshare_half_life)"},
    {"projects.known_projects", "the projects jobs may name (gbatch --project), e.g. "
                                "[\"ml-research\", \"cv-team\"]; empty: any"},
    {"projects.require_project", "true: every job must name a project"},
    {"executor.type", "how jobs run: \"process\" (each under gflow-shim); gflow's \"tmux\" "
                      "is accepted with a warning"},
    {"scheduler.backfill", "true (default): a job that waits for GPUs gets them reserved at "
                           "the earliest time the running jobs' time limits free them, and "
                           "later jobs start only if they do not delay it; false: greedy "
                           "(every job that fits starts; a big job may wait for ever)"},
    {"scheduler.backfill_depth", "how many waiting jobs get a reservation (the first ones in "
                                 "the queue)"},
    {"scheduler.default_time_limit", "how long a job without --time is planned to run "
                                     "near gctl reservations, and backfill's plan until "
                                     "daemon.default_time_plan has its history (not "
                                     "enforced): \"24h\", \"90m\", \"1-00:00:00\""},
    {"scheduler.backfill_untimed", "planned: a job without --time is backfilled as if it "
                                   "ran daemon.default_time_plan (it may delay a reserved job by "
                                   "its overrun); outside: only onto GPUs nobody reserved"},
    {"scheduler.preempt", "true: a waiting job may stop running --requeue jobs of much lower "
                          "priority to get their GPUs (they are queued again); default false"},
    {"scheduler.preempt_priority_gap", "how much lower a job's priority must be for it to be "
                                       "preempted"},
    {"scheduler.preempt_grace", "a preempted job gets SIGTERM, then SIGKILL after this: "
                                "\"30s\", \"2m\""},
    {"scheduler.priority_weight_priority", "weight of --priority (0..255 as 0..1) in a waiting "
                                           "job's effective priority; 255: it is --priority"},
    {"scheduler.priority_weight_fairshare", "weight of the fair-share factor (0..1: 1 = unused "
                                            "share); 0 with priority_weight_age 0 keeps the "
                                            "order priority, then submission"},
    {"scheduler.priority_weight_age", "weight of the age factor (0..1: the wait over "
                                      "priority_max_age)"},
    {"scheduler.priority_max_age", "the wait that gives the full age factor"},
    {"scheduler.fairshare_half_life", "GPU time used this long ago counts half"},
    {"scheduler.fairshare_user_shares", "shares of users, e.g. \"alice=2,bob=1\" (others: 1)"},
    {"scheduler.fairshare_project_shares", "shares of projects (gbatch -P), e.g. "
                                           "\"vision=3\" (others: 1)"},
    {"metrics.listen", "\"127.0.0.1:9400\": also serve GET /metrics (only) on this TCP "
                       "port, for Prometheus; default: the Unix socket only"},
    {"reservations.who", "who may make GPU reservations (gctl reserve): admins, or users "
                         "too (within the limits below; admins are not bound)"},
    {"reservations.max_gpus", "users: GPUs one user's pending and active reservations name "
                              "together"},
    {"reservations.max_duration", "users: the longest reservation"},
    {"reservations.max_ahead", "users: how far ahead a reservation may begin"},
    {"reservations.max_per_user", "users: pending and active reservations of one user"},
    {"backend.kind", "where jobs run: local (this machine's GPUs) or slurm (each job is "
                     "submitted with sbatch; see docs/slurm.md)"},
    {"backend.partition", "slurm: sbatch --partition (\"\": Slurm's default)"},
    {"backend.account", "slurm: sbatch --account (\"\": none)"},
    {"backend.qos", "slurm: sbatch --qos (\"\": none)"},
    {"backend.sbatch_args", "slurm: more sbatch options, separated by spaces"},
    {"backend.poll_secs", "slurm: how often job states are read from Slurm"},
    {"hooks.pre", "command run before each job as its user, with its environment, in its "
                  "workdir, output in its log; failing: the job does not run (PrologFailed)"},
    {"hooks.post", "command run after each job (also cancelled or timed out) like hooks.pre, "
                   "with GFLOW_JOB_EXIT_CODE; failing: the job's reason is EpilogFailed"},
    {"hooks.timeout", "a hook running longer is killed and counts as failed: \"60s\", \"5m\""},
    {"limits.max_request_bytes", "largest request body"},
    {"limits.max_body_bytes_in_flight", "request bodies being received, all connections"},
    {"limits.max_body_bytes_per_user", "request bodies one user is sending (at least one "
                                       "of limits.max_request_bytes)"},
    {"limits.min_body_bytes_per_sec", "a body arriving slower is cut off with 408 (0: never)"},
    {"limits.body_rate_window_secs", "how long limits.min_body_bytes_per_sec is measured over"},
    {"limits.max_connections", "open connections, all users (at most half the open-file limit)"},
    {"limits.max_connections_per_user", "open connections of one user (at most a quarter of "
                                        "the connections the open-file limit allows)"},
    {"limits.idle_timeout_secs", "a connection that sends nothing is closed after this"},
    {"limits.max_jobs_per_request", "jobs one submission makes (an array, a sweep)"},
    {"limits.max_active_jobs_per_user", "queued, held and running jobs of one user"},
    {"limits.max_ids_per_request", "job ids one id list names"},
    {"limits.max_log_scan_bytes", "what gjob log --first/--last reads of a log"},
    {"limits.max_event_clients", "GET /v1/events streams (gqueue -w, gjob log -f), all users"},
    {"limits.max_event_clients_per_user", "GET /v1/events streams of one user"},
    {"limits.event_buffer_bytes", "what an event stream may fall behind before it is dropped"},
};

/* The help of key; "" if it has none yet, NULL if it is left out. */
static const char *key_help(const char *key)
{
    for (size_t i = 0; i < sizeof(key_helps) / sizeof(key_helps[0]); i++)
        if (!strcmp(key_helps[i].key, key))
            return key_helps[i].help;
    return "";
}

/* s as a TOML basic string. */
static void add_quoted(struct strbuf *sb, const char *s)
{
    strbuf_addc(sb, '"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            strbuf_addf(sb, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            strbuf_addf(sb, "\\u%04x", ch);
        else
            strbuf_addc(sb, (char)ch);
    }
    strbuf_addc(sb, '"');
}

/* The value v gives key, NULL if none. */
static const char *value_of(const struct configinit_values *v, const char *key)
{
    if (!v)
        return NULL;
    return !strcmp(key, "daemon.gpus")                      ? v->gpus
           : !strcmp(key, "daemon.host")                    ? v->host
           : !strcmp(key, "daemon.port")                    ? v->port
           : !strcmp(key, "daemon.gpu_allocation_strategy") ? v->strategy
           : !strcmp(key, "daemon.gpu_poll_interval_secs")  ? v->poll_secs
                                                            : NULL;
}

/* "a,b" as a TOML list of strings. */
static void add_list(struct strbuf *sb, const char *joined)
{
    strbuf_addc(sb, '[');
    const char *p = joined;
    for (bool first = true; *p; first = false) {
        size_t n = strcspn(p, ",");
        char *one = xstrndup(p, n);
        if (!first)
            strbuf_adds(sb, ", ");
        add_quoted(sb, one);
        free(one);
        p += n + (p[n] == ',');
    }
    strbuf_addc(sb, ']');
}

/* --advanced's answers, as gflow's init writes them. */
static void add_notifications(struct strbuf *sb, const struct configinit_values *v)
{
    const char *p = v->webhooks ? v->webhooks : "";
    while (*p) {
        size_t n = strcspn(p, ",");
        char *url = xstrndup(p, n);
        strbuf_adds(sb, "\n[[notifications.webhooks]]\nurl = ");
        add_quoted(sb, url);
        strbuf_adds(sb, "\nevents = [\"*\"]\ntimeout_secs = 10\nmax_retries = 3\n");
        free(url);
        p += n + (p[n] == ',');
    }
    if (v->smtp_url && *v->smtp_url) {
        strbuf_adds(sb, "\n[[notifications.emails]]\nsmtp_url = ");
        add_quoted(sb, v->smtp_url);
        strbuf_adds(sb, "\nfrom = ");
        add_quoted(sb, v->mail_from ? v->mail_from : "");
        strbuf_adds(sb, "\nto = ");
        add_list(sb, v->mail_to ? v->mail_to : "");
        strbuf_adds(sb, "\nevents = [\"*\"]\n");
        if (v->subject_prefix && *v->subject_prefix) {
            strbuf_adds(sb, "subject_prefix = ");
            add_quoted(sb, v->subject_prefix);
            strbuf_addc(sb, '\n');
        }
        strbuf_adds(sb, "timeout_secs = 10\nmax_retries = 3\n");
    }
}

char *configinit_text(const struct configinit_values *v)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "# gflow configuration, written by 'gflowd init'.\n"
                     "# Every key is listed with its default, commented out: uncomment a line\n"
                     "# to change it. GFLOW_<SECTION>__<KEY> variables and gflowd's flags win\n"
                     "# over this file. 'gflowd reload' (or SIGHUP) reads it again; it says\n"
                     "# which changes need 'gflowd restart'. A key shown without a value is\n"
                     "# unset by default: the daemon picks, as its comment says.\n");
    /* Top-level keys (timezone) come before the first [section]; one given to
     * 'gflowd init --timezone' is written with its value. */
    for (size_t i = 0; config_key_name(i); i++) {
        const char *name = config_key_name(i), *help = key_help(name);
        if (strchr(name, '.') || !help)
            continue;
        if (v && v->timezone && !strcmp(name, "timezone")) {
            strbuf_addf(&sb, "\n# %s\n%s = ", help, name);
            add_quoted(&sb, v->timezone);
            strbuf_addc(&sb, '\n');
        } else {
            strbuf_addf(&sb, "\n# %s\n# %s =\n", help, name);
        }
    }
    size_t section_len = 0;
    const char *section = NULL;
    for (size_t i = 0; config_key_name(i); i++) {
        const char *name = config_key_name(i), *dot = strchr(name, '.');
        const char *help = key_help(name);
        if (!help || !dot)
            continue;
        if (!section || section_len != (size_t)(dot - name) ||
            strncmp(section, name, section_len)) {
            section = name;
            section_len = (size_t)(dot - name);
            strbuf_addf(&sb, "\n[%.*s]\n", (int)section_len, name);
        }
        if (*help)
            strbuf_addf(&sb, "# %s\n", help);
        const char *def = config_key_default(i), *set = value_of(v, name);
        if (set && config_key_is_string(i)) {
            strbuf_addf(&sb, "%s = ", dot + 1);
            add_quoted(&sb, set);
            strbuf_addc(&sb, '\n');
        } else if (set)
            strbuf_addf(&sb, "%s = %s\n", dot + 1, set);
        else if (!def)
            strbuf_addf(&sb, "# %s =\n", dot + 1);
        else if (config_key_is_string(i))
            strbuf_addf(&sb, "# %s = \"%s\"\n", dot + 1, def);
        else
            strbuf_addf(&sb, "# %s = %s\n", dot + 1, def);
    }
    /* [quota] is not in the key table: its users and projects are the admin's names. */
    strbuf_adds(&sb, "\n[quota]\n"
                     "# per-user and per-project limits (none by default); 'gctl quota set'\n"
                     "# overrides them at runtime. Limits: max_running_jobs, max_running_gpus,\n"
                     "# max_queued_jobs (refused at submit), max_gpu_hours (per period)\n"
                     "# period = \"week\"   # day, week or month: max_gpu_hours' window\n"
                     "# default_user = { max_running_gpus = 4, max_queued_jobs = 500 }\n"
                     "# default_project = { max_gpu_hours = 1000 }\n"
                     "# users = { alice = { max_running_jobs = 2 } }\n"
                     "# projects = { nlp = { max_running_gpus = 6 } }\n");
    /* Nor is [notifications]: its webhooks are a list of tables. */
    strbuf_adds(&sb,
                "\n[notifications]\n"
                "# job notifications: e-mail for gbatch --notify-email (sendmail -t, run as\n"
                "# the submitter) and the webhooks below (each delivery retried with backoff)\n"
                "# enabled = true\n"
                "# max_concurrent_deliveries = 16\n"
                "# sendmail = \"/usr/sbin/sendmail\"   # default: sendmail found on PATH\n"
                "# email_max_retries = 3\n"
                "# max_pending_per_user = 1000   # undelivered notifications kept per user\n"
                "# keep_secs = 86400   # sent and failed ones are forgotten after this\n"
                "# A webhook (an example, not a default: none is set):\n"
                "# [[notifications.webhooks]]\n"
                "#   url = \"https://api.example.com/gflow/events\"\n"
                "#   events = [\"job_completed\", \"job_failed\", \"job_timeout\"]   # or [\"*\"]\n"
                "#   filter_users = [\"alice\", \"bob\"]   # default: every user's jobs\n"
                "#   headers = { Authorization = \"Bearer token123\" }\n"
                "#   timeout_secs = 10\n"
                "#   max_retries = 3\n"
                "#   secret = \"...\"   # X-Gflow-Signature: sha256=<HMAC-SHA256 of the body>\n"
                "# E-mail through an SMTP server (gflow's; without one, sendmail -t):\n"
                "# [[notifications.emails]]\n"
                "#   smtp_url = \"smtps://user:pass@smtp.example.com:465\"\n"
                "#   from = \"gflow <noreply@example.com>\"\n"
                "#   to = [\"alerts@example.com\"]   # every event's recipients (optional)\n"
                "#   events = [\"job_failed\", \"job_timeout\"]   # or [\"*\"]\n"
                "#   filter_users = [\"alice\"]\n"
                "#   subject_prefix = \"[gflow]\"\n"
                "#   timeout_secs = 10\n"
                "#   max_retries = 3\n");
    if (v)
        add_notifications(&sb, v);
    return strbuf_detach(&sb);
}

/* ---- checking what was given ---- */

/* "all" or GPU indices: "0", "0,2", "0-3", "1,3-5". */
static bool gpus_ok(const char *s)
{
    if (!strcmp(s, "all"))
        return true;
    for (const char *p = s;;) {
        size_t n = strspn(p, "0123456789");
        if (!n)
            return false;
        p += n;
        if (*p == '-') {
            size_t m = strspn(p + 1, "0123456789");
            if (!m)
                return false;
            p += 1 + m;
        }
        if (!*p)
            return true;
        if (*p++ != ',')
            return false;
    }
}

/* An IANA zone (a file under /usr/share/zoneinfo) or UTC; "local" or "": none. */
static int check_timezone(const char **tz)
{
    if (!*tz)
        return 0;
    if (!**tz || !strcasecmp(*tz, "local")) {
        *tz = NULL;
        return 0;
    }
    if (!strcmp(*tz, "UTC"))
        return 0;
    char *file = xasprintf("/usr/share/zoneinfo/%s", *tz);
    bool ok = (*tz)[0] != '/' && !strstr(*tz, "..") && access(file, R_OK) == 0;
    free(file);
    if (ok)
        return 0;
    fprintf(stderr,
            "gflowd: --timezone '%s' is not a time zone: use an IANA name such as "
            "\"Asia/Shanghai\" or \"UTC\", or \"local\" to leave it unset\n",
            *tz);
    return -1;
}

/* Each value through the key it sets, so that init refuses what the daemon would. */
static int check_values(struct configinit_values *v)
{
    static const struct {
        const char *option, *key;
        size_t off;
    } given[] = {
        {"--host", "daemon.host", offsetof(struct configinit_values, host)},
        {"--port", "daemon.port", offsetof(struct configinit_values, port)},
        {"--gpu-allocation-strategy", "daemon.gpu_allocation_strategy",
         offsetof(struct configinit_values, strategy)},
        {"--gpu-poll-interval-secs", "daemon.gpu_poll_interval_secs",
         offsetof(struct configinit_values, poll_secs)},
    };
    if (v->gpus && !gpus_ok(v->gpus)) {
        fprintf(stderr,
                "gflowd: --gpus '%s' is not a GPU list: use \"all\" or indices like "
                "0,2 or 0-3\n",
                v->gpus);
        return -1;
    }
    struct gflow_config c;
    config_init(&c);
    int rc = 0;
    for (size_t i = 0; i < sizeof(given) / sizeof(given[0]) && rc == 0; i++) {
        const char *value = *(const char **)((const char *)v + given[i].off);
        char *err = NULL;
        if (!value || config_set(&c, given[i].key, value, &err) == 0)
            continue;
        size_t klen = strlen(given[i].key);
        fprintf(stderr, "gflowd: %s%s\n", given[i].option,
                strncmp(err, given[i].key, klen) ? err : err + klen);
        free(err);
        rc = -1;
    }
    if (rc == 0 && v->port) {
        int64_t port = c.port;
        if (port < 1 || port > 65535) {
            fprintf(stderr, "gflowd: --port needs a TCP port 1-65535, not '%s'\n", v->port);
            rc = -1;
        }
    }
    config_free(&c);
    if (rc == 0 && check_timezone(&v->timezone) < 0)
        rc = -1;
    return rc;
}

/* ---- asking, on a terminal ---- */

/* The lines answered, freed when init is done (the values point into them). */
static char *answers[32];
static size_t n_answers;

static void answers_free(void)
{
    for (size_t i = 0; i < n_answers; i++)
        free(answers[i]);
    n_answers = 0;
}

/* One answer; def when the line is empty. The text lives until answers_free. */
static const char *ask(const char *question, const char *def)
{
    printf("%s%s%s%s: ", question, def ? " [" : "", def ? def : "", def ? "]" : "");
    fflush(stdout);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return def;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = '\0';
    const char *p = line + strspn(line, " \t");
    if (!*p || n_answers == sizeof(answers) / sizeof(answers[0])) {
        free(line);
        return def;
    }
    answers[n_answers++] = line;
    return p;
}

static bool ask_yes(const char *question, bool def)
{
    const char *a = ask(question, def ? "Y/n" : "y/N");
    if (!a || a[0] == 'Y' || a[0] == 'N')
        return def;
    return a[0] == 'y';
}

/* gflow's wizard: the values not given as flags, asked one by one. */
static void wizard(struct configinit_values *v, bool advanced)
{
    printf("gflow Configuration Wizard\n\n");
    if (!v->gpus) {
        const char *g =
            ask("[1/4] Which GPUs should gflow manage? (all, or e.g. 0,2 or 0-3)", "all");
        v->gpus = strcmp(g, "all") ? g : NULL;
    }
    if (!v->host) {
        const char *h = ask("[2/4] Web dashboard host (gflowd web)", "localhost");
        v->host = strcmp(h, "localhost") ? h : NULL;
    }
    if (!v->port) {
        const char *p = ask("      Web dashboard port (0: 8080)", "0");
        v->port = strcmp(p, "0") ? p : NULL;
    }
    if (!v->timezone) {
        const char *tz =
            ask("[3/4] Time zone (an IANA name such as Asia/Shanghai, or local)", "local");
        v->timezone = tz;
    }
    if (advanced || ask_yes("[4/4] Configure notifications (webhooks, e-mail)?", false)) {
        const char *urls = ask("Webhook URL(s), separated by ',' (empty: none)", NULL);
        v->webhooks = urls;
        const char *smtp = ask("SMTP URL, e.g. smtps://user:pass@smtp.example.com:465 "
                               "(empty: sendmail)",
                               NULL);
        if (smtp) {
            v->smtp_url = smtp;
            v->mail_from = ask("From address", "gflow <gflow@localhost>");
            v->mail_to = ask("Recipient address(es), separated by ','", NULL);
            v->subject_prefix = ask("Subject prefix (optional)", NULL);
        }
    }
    printf("\n");
}

/* The folder of path, made if missing. */
static int make_parent(const char *path)
{
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    int r = 0;
    if (slash && slash != dir) {
        *slash = '\0';
        r = mkdir_p(dir, 0755);
    }
    free(dir);
    return r;
}

/* What was set, as gflow's init sums it up. */
static void print_summary(const char *path, const struct configinit_values *v)
{
    printf("Configuration saved to: %s\n\nConfiguration Summary:\n", path);
    printf("  GPUs: %s\n", v->gpus ? v->gpus : "all");
    printf("  Dashboard host: %s\n", v->host ? v->host : "127.0.0.1 (default)");
    printf("  Dashboard port: %s\n", v->port ? v->port : "8080 (default)");
    printf("  GPU allocation strategy: %s\n", v->strategy ? v->strategy : "topology (default)");
    printf("  GPU poll interval: %ss\n", v->poll_secs ? v->poll_secs : "10");
    printf("  Timezone: %s\n", v->timezone ? v->timezone : "local");
    printf("\nEvery other key is in the file with its default, commented out.\n"
           "Next steps:\n  1. Start the daemon: gflowd up\n  2. Check status: gflowd status\n"
           "  3. Submit a job: gbatch --gpus 1 script.sh\n");
}

static int run(const struct configinit_opts *o)
{
    if (!o->force && access(o->path, F_OK) == 0) {
        fprintf(stderr,
                "gflowd: config file already exists: %s (use 'gflowd init --force' to "
                "overwrite it)\n",
                o->path);
        return 1;
    }
    struct configinit_values v = {.gpus = o->gpus,
                                  .host = o->host,
                                  .port = o->port,
                                  .timezone = o->timezone,
                                  .strategy = o->strategy,
                                  .poll_secs = o->poll_secs};
    if (check_values(&v) < 0)
        return 1;
    bool interactive = !o->yes && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    if (interactive) {
        wizard(&v, o->advanced);
        if (check_values(&v) < 0)
            return 1;
    }
    char *text = configinit_text(&v);
    if (interactive) {
        printf("Configuration preview:\n\n%s\n", text);
        char *q = xasprintf("Write configuration to %s?", o->path);
        bool go = ask_yes(q, true);
        free(q);
        if (!go) {
            free(text);
            fprintf(stderr, "gflowd: aborted; nothing was written\n");
            return 1;
        }
    }
    int r = make_parent(o->path) < 0 ? -1 : write_file_atomic(o->path, text, strlen(text), 0644);
    free(text);
    if (r < 0) {
        fprintf(stderr, "gflowd: cannot write %s: %s\n", o->path, strerror(errno));
        return 1;
    }
    print_summary(o->path, &v);
    return 0;
}

int configinit_run(const struct configinit_opts *o)
{
    int rc = run(o);
    answers_free();
    return rc;
}
