/* configinit: gflowd init (see configinit.h). The keys and defaults come from config.c's
 * table, so a new key shows up here by itself; this file only adds a line of help. */
#include "configinit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    {"scheduler.backfill", "true: a job that waits for GPUs gets them reserved at the earliest "
                           "time the running jobs' time limits free them, and later jobs start "
                           "only if they do not delay it; false: greedy (every job that fits "
                           "starts)"},
    {"scheduler.backfill_depth", "how many waiting jobs get a reservation (the first ones in "
                                 "the queue)"},
    {"scheduler.default_time_limit", "how long a job without --time is planned to run (for "
                                     "backfill only, not enforced): \"24h\", \"90m\", "
                                     "\"1-00:00:00\""},
    {"scheduler.backfill_untimed", "planned: a job without --time is backfilled as if it "
                                   "ran default_time_limit (it may delay a reserved job by "
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

char *configinit_text(void)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "# gflow configuration, written by 'gflowd init'.\n"
                     "# Every key is listed with its default, commented out: uncomment a line\n"
                     "# to change it. GFLOW_<SECTION>__<KEY> variables and gflowd's flags win\n"
                     "# over this file. 'gflowd reload' (or SIGHUP) reads it again; it says\n"
                     "# which changes need 'gflowd restart'. A key shown without a value is\n"
                     "# unset by default: the daemon picks, as its comment says.\n");
    /* Top-level keys (timezone) come before the first [section]. */
    for (size_t i = 0; config_key_name(i); i++) {
        const char *name = config_key_name(i), *help = key_help(name);
        if (strchr(name, '.') || !help)
            continue;
        strbuf_addf(&sb, "\n# %s\n# %s =\n", help, name);
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
        const char *def = config_key_default(i);
        if (!def)
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
                "#   secret = \"...\"   # X-Gflow-Signature: sha256=<HMAC-SHA256 of the body>\n");
    return strbuf_detach(&sb);
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

int configinit_write(const char *path, bool force)
{
    if (!force && access(path, F_OK) == 0) {
        fprintf(stderr, "gflowd: %s already exists; use 'gflowd init --force' to replace it\n",
                path);
        return 1;
    }
    char *text = configinit_text();
    int r = make_parent(path) < 0 ? -1 : write_file_atomic(path, text, strlen(text), 0644);
    free(text);
    if (r < 0) {
        fprintf(stderr, "gflowd: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("Wrote %s (every key with its default, commented out)\n", path);
    return 0;
}
