/* metrics: the Prometheus exposition of GET /metrics (see metrics.h). */
#include "metrics.h"
#include "notify.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "gpu/gpu.h"
#include "jobs/jobs.h"
#include "store/store.h"
#include "util.h"

/* ---- the text format ---- */

static void head(struct strbuf *out, const char *name, const char *type, const char *help)
{
    strbuf_addf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value, escaped as the format wants (\\, \", \n). */
static void label_value(struct strbuf *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            strbuf_addc(out, '\\');
        if (*v == '\n') {
            strbuf_adds(out, "\\n");
            continue;
        }
        strbuf_addc(out, *v);
    }
}

static void histogram(struct strbuf *out, const char *name, const char *help,
                      const struct metrics_histogram *h, const double *bounds)
{
    head(out, name, "histogram", help);
    uint64_t cumulative = 0;
    for (int b = 0; b < METRICS_BUCKETS; b++) {
        cumulative += h->buckets[b];
        if (b < METRICS_BUCKETS - 1)
            strbuf_addf(out, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[b],
                        (unsigned long long)cumulative);
        else
            strbuf_addf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cumulative);
    }
    strbuf_addf(out, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name,
                (unsigned long long)h->count);
}

/* Active jobs by state and user: the table is walked once (a lab has few users). */
static void active_jobs(const struct gflowd *d, struct strbuf *out)
{
    static const enum job_state shown[] = {JOB_QUEUED, JOB_HELD, JOB_RUNNING};
    struct user_jobs {
        const char *user;
        uint64_t n[3];
    } *users = NULL;
    size_t n_users = 0, n;
    struct job **active = jobs_active(d->jobs, &n);
    for (size_t i = 0; i < n; i++) {
        const struct job *j = active[i];
        const char *user = j->user ? j->user : "";
        size_t u = 0;
        while (u < n_users && strcmp(users[u].user, user) != 0)
            u++;
        if (u == n_users) {
            users = xrealloc(users, (n_users + 1) * sizeof(*users));
            users[n_users++] = (struct user_jobs){user, {0}};
        }
        for (int s = 0; s < 3; s++)
            users[u].n[s] += j->state == shown[s];
    }
    head(out, "gflow_jobs", "gauge", "Active jobs by state (PD, H, R) and user.");
    uint64_t queued = 0;
    for (size_t u = 0; u < n_users; u++)
        for (int s = 0; s < 3; s++) {
            queued += shown[s] == JOB_QUEUED ? users[u].n[s] : 0;
            strbuf_addf(out, "gflow_jobs{state=\"%s\",user=\"", job_state_short(shown[s]));
            label_value(out, users[u].user);
            strbuf_addf(out, "\"} %llu\n", (unsigned long long)users[u].n[s]);
        }
    free(users);

    /* One indexed count per state, as GET /v1/status. */
    int64_t counts[JOB_STATE_COUNT] = {0};
    store_count_states(d->store, counts);
    head(out, "gflow_jobs_finished", "gauge", "Ended jobs in the history, by final state.");
    for (int s = 0; s < JOB_STATE_COUNT; s++)
        if (job_state_is_terminal((enum job_state)s))
            strbuf_addf(out, "gflow_jobs_finished{state=\"%s\"} %lld\n",
                        job_state_short((enum job_state)s), (long long)counts[s]);
    head(out, "gflow_queue_depth", "gauge",
         "Queued (PD) jobs, those waiting for a begin time or dependencies included.");
    strbuf_addf(out, "gflow_queue_depth %llu\n", (unsigned long long)queued);
}

static void counters(const struct metrics_counters *m, struct strbuf *out)
{
    head(out, "gflow_submissions_total", "counter", "Jobs submitted since gflowd started.");
    strbuf_addf(out, "gflow_submissions_total %llu\n", (unsigned long long)m->submitted);
    head(out, "gflow_job_starts_total", "counter", "Jobs started since gflowd started.");
    strbuf_addf(out, "gflow_job_starts_total %llu\n", (unsigned long long)m->started);
    head(out, "gflow_job_ends_total", "counter",
         "Jobs ended since gflowd started, by final state and reason.");
    for (int s = 0; s < JOB_STATE_COUNT; s++)
        for (int r = 0; r < JOB_REASON_COUNT; r++)
            if (m->ended[s][r])
                strbuf_addf(out, "gflow_job_ends_total{state=\"%s\",reason=\"%s\"} %llu\n",
                            job_state_short((enum job_state)s), job_reason_name((enum job_reason)r),
                            (unsigned long long)m->ended[s][r]);
    histogram(out, "gflow_job_wait_seconds", "Time from submission to start.", &m->wait,
              jobs_counters_job_bounds);
    histogram(out, "gflow_job_run_seconds", "Run time of the jobs that ended after running.",
              &m->run, jobs_counters_job_bounds);
    histogram(out, "gflow_scheduler_pass_seconds", "Duration of a scheduling pass.", &m->pass,
              jobs_counters_pass_bounds);
}

/* The daemon process, under the names Prometheus' client libraries use. */
static void process(const struct gflowd *d, size_t event_clients, struct strbuf *out)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    head(out, "gflow_event_clients", "gauge", "Clients streaming GET /v1/events.");
    strbuf_addf(out, "gflow_event_clients %zu\n", event_clients);
    head(out, "process_resident_memory_bytes", "gauge", "Resident memory of gflowd.");
    strbuf_addf(out, "process_resident_memory_bytes %lld\n",
                (long long)rss * (long long)sysconf(_SC_PAGESIZE));
    long fds = 0;
    DIR *dir = opendir("/proc/self/fd");
    if (dir) {
        for (struct dirent *e; (e = readdir(dir));)
            fds += e->d_name[0] != '.';
        closedir(dir);
        fds--; /* the directory's own */
    }
    head(out, "process_open_fds", "gauge", "Open file descriptors of gflowd.");
    strbuf_addf(out, "process_open_fds %ld\n", fds);
    head(out, "process_start_time_seconds", "gauge", "When gflowd started (unix seconds).");
    strbuf_addf(out, "process_start_time_seconds %.3f\n", d->started_at);
}

/* The ids of the running jobs on the GPU with NVML index idx, joined by ','. */
static void gpu_jobs(struct job *const *running, size_t n, int idx, struct strbuf *out)
{
    bool first = true;
    for (size_t i = 0; i < n; i++)
        if (idx >= 0 && idx < 64 && (running[i]->gpu_mask >> idx & 1)) {
            strbuf_addf(out, "%s%lld", first ? "" : ",", (long long)running[i]->id);
            first = false;
        }
}

/* One DCGM-named series per GPU whose value NVML knows (-1: unknown, left out). */
static void gpu_series(const struct gflowd *d, struct strbuf *out)
{
    static const struct {
        const char *name, *help;
    } fields[] = {
        {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."},
        {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."},
        {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."},
        {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."},
        {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."},
    };
    const struct gpu_set *set = gpu_current(d->gpus);
    size_t n_running;
    struct job **running = jobs_running(d->jobs, &n_running);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
        head(out, fields[f].name, "gauge", fields[f].help);
        for (size_t i = 0; i < set->n_gpus; i++) {
            const struct gpu_info *g = &set->gpus[i];
            int64_t v = f == 0   ? g->utilization_gpu
                        : f == 1 ? g->memory_used_mib
                        : f == 2 ? g->memory_free_mib
                        : f == 3 ? g->temperature_c
                                 : g->power_w;
            if (v < 0 || !gpu_info_usable(g))
                continue;
            strbuf_addf(out, "%s{gpu=\"%d\",UUID=\"", fields[f].name, g->index);
            label_value(out, g->uuid);
            strbuf_addf(out, "\",device=\"nvidia%d\",modelName=\"",
                        g->minor >= 0 ? g->minor : g->index);
            label_value(out, g->name);
            strbuf_adds(out, "\",Hostname=\"");
            label_value(out, host);
            strbuf_adds(out, "\",gflow_job=\"");
            gpu_jobs(running, n_running, g->index, out);
            strbuf_addf(out, "\"} %lld\n", (long long)v);
        }
    }
}

/* Per GPU, whether it is drained (gctl gpu resume), with the reason as a label; and
 * its uncorrectable volatile ECC errors where NVML reports them. */
static void gpu_health_series(const struct gflowd *d, struct strbuf *out)
{
    const struct gpu_set *set = gpu_current(d->gpus);
    head(out, "gflow_gpu_drained", "gauge",
         "1 when the GPU is drained (a fatal Xid, ECC, pending remaps: gctl gpu resume).");
    for (size_t i = 0; i < set->n_gpus; i++) {
        const char *why = gpu_drained(d->gpus, i);
        strbuf_addf(out, "gflow_gpu_drained{gpu=\"%d\",UUID=\"", set->gpus[i].index);
        label_value(out, set->gpus[i].uuid);
        strbuf_adds(out, "\",reason=\"");
        label_value(out, why ? why : "");
        strbuf_addf(out, "\"} %d\n", why ? 1 : 0);
    }
    head(out, "gflow_gpu_ecc_uncorrectable_volatile", "gauge",
         "Uncorrectable ECC errors since the driver loaded (NVML, volatile).");
    for (size_t i = 0; i < set->n_gpus; i++) {
        const struct gpu_health *h = &set->gpus[i].health;
        if (!h->read || h->ecc_volatile < 0)
            continue;
        strbuf_addf(out, "gflow_gpu_ecc_uncorrectable_volatile{gpu=\"%d\",UUID=\"",
                    set->gpus[i].index);
        label_value(out, set->gpus[i].uuid);
        strbuf_addf(out, "\"} %lld\n", (long long)h->ecc_volatile);
    }
}

void metrics_render(const struct gflowd *d, size_t event_clients, struct strbuf *out)
{
    active_jobs(d, out);
    counters(jobs_counters(d->jobs), out);
    notifier_metrics(d->notifier, out);
    process(d, event_clients, out);
    gpu_series(d, out);
    gpu_health_series(d, out);
}
