/* gflow-replay: replays a job trace through the real scheduling pass in virtual time and
 * prints, per policy, the waits, starvation, utilisation, slowdown and fairness the
 * trace got (docs/replay.md). Installed with the daemon (make install), so that an
 * operator can replay their own trace. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gflow_build.h"
#include "metrics.h"
#include "parse.h"
#include "sim.h"
#include "trace.h"
#include "util.h"

#define PROG "gflow-replay"

static const char usage[] =
    "Usage: gflow-replay [OPTIONS] TRACE.csv\n"
    "       gflow-replay [OPTIONS] --synthetic N [--seed S]\n"
    "Replays a job trace through gflowd's scheduling pass in virtual time and prints, per\n"
    "policy, the jobs' waits (mean, p50, p95, p99; the same for jobs of >= 4 GPUs), the\n"
    "maximum wait, GPU utilisation, mean bounded slowdown and Jain's fairness index over\n"
    "the users' GPU-time (docs/replay.md). Installed with gflowd (make install): replay\n"
    "your own trace to weigh scheduler.* settings before changing them.\n"
    "\n"
    "TRACE.csv: a header line, then one job per line; columns by name: submit_s, gpus,\n"
    "runtime_s (needed), time_limit_s, user, project (optional); others are ignored.\n"
    "\n"
    "Options:\n"
    "  --gpus N          GPUs of the simulated machine, 1-64 (default 8); jobs asking more\n"
    "                    are skipped and counted\n"
    "  --policy NAME     a policy, several joined by ',', or all (default): greedy\n"
    "                    (scheduler.backfill = false), backfill (the daemon's default:\n"
    "                    backfill, untimed jobs planned at default_time_plan p95),\n"
    "                    backfill-24h (untimed jobs planned at 24h), backfill-outside,\n"
    "                    fairshare, backfill+fairshare\n"
    "  --synthetic N     replay a synthetic lab trace of N jobs instead of a file\n"
    "  --seed S          the synthetic trace's seed (default 1)\n"
    "  --load K          compress arrival times K-fold (K > 0, default 1)\n"
    "  --time-limits H   the jobs' time limits: trace (as given, default), exact (each\n"
    "                    job's run time: perfect estimates) or none (no job has one)\n"
    "  --csv             print a CSV table (one row per policy) instead of the text table\n"
    "  --cdf FILE        write the wait-time CDF of each policy to FILE (gnuplot data)\n"
    "  --half-life D     usage half-life of the fair-share policies (default 1h; the\n"
    "                    daemon's scheduler.fairshare_half_life is 7d): 30m, 1h, 7d\n"
    "  --time-plan P     daemon.default_time_plan of backfill and backfill+fairshare\n"
    "                    (default p95, the daemon's): pN = the Nth percentile of the run\n"
    "                    times of the jobs ended so far (24h until 20 have), or a\n"
    "                    duration (24h, 08:00:00)\n"
    "  -h, --help        show this help\n"
    "  -V, --version     show the version\n";

struct options {
    const char *trace;
    int gpus;
    char *policies[16];
    size_t n_policies;
    long long synthetic; /* 0: a file */
    unsigned long long seed;
    double load;
    enum replay_limits limits;
    bool csv;
    const char *cdf;
};

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static long long parse_count(const char *flag, const char *arg, long long min, long long max)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (!*arg || *end || errno || v < min || v > max)
        die_usage("%s '%s' is not a whole number from %lld to %lld", flag, arg, min, max);
    return v;
}

/* --policy: names joined by ',', or all. */
static void parse_policies(struct options *o, const char *arg)
{
    o->n_policies = 0;
    if (strcmp(arg, "all") == 0) {
        for (const char *const *p = replay_policy_names; *p; p++)
            o->policies[o->n_policies++] = xstrdup(*p);
        return;
    }
    char *copy = xstrdup(arg);
    for (char *save = NULL, *name = strtok_r(copy, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        struct scheduler_policy unused;
        if (replay_policy(name, &unused) < 0) {
            struct strbuf known;
            strbuf_init(&known);
            for (const char *const *p = replay_policy_names; *p; p++)
                strbuf_addf(&known, "%s, ", *p);
            die_usage("--policy: no policy '%s'; choose from %sall", name, known.buf);
        }
        if (o->n_policies == sizeof(o->policies) / sizeof(o->policies[0]))
            die_usage("--policy: too many policies; name at most 16");
        o->policies[o->n_policies++] = xstrdup(name);
    }
    free(copy);
    if (o->n_policies == 0)
        die_usage("--policy needs a policy name (or all)");
}

static void parse_options(int argc, char **argv, struct options *o)
{
    enum {
        OPT_GPUS = 256,
        OPT_POLICY,
        OPT_SYNTHETIC,
        OPT_SEED,
        OPT_LOAD,
        OPT_LIMITS,
        OPT_CSV,
        OPT_CDF,
        OPT_HALF_LIFE,
        OPT_TIME_PLAN
    };
    static const struct option longopts[] = {
        {"gpus", required_argument, NULL, OPT_GPUS},
        {"policy", required_argument, NULL, OPT_POLICY},
        {"synthetic", required_argument, NULL, OPT_SYNTHETIC},
        {"seed", required_argument, NULL, OPT_SEED},
        {"load", required_argument, NULL, OPT_LOAD},
        {"time-limits", required_argument, NULL, OPT_LIMITS},
        {"csv", no_argument, NULL, OPT_CSV},
        {"cdf", required_argument, NULL, OPT_CDF},
        {"half-life", required_argument, NULL, OPT_HALF_LIFE},
        {"time-plan", required_argument, NULL, OPT_TIME_PLAN},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct options){.gpus = 8, .seed = 1, .load = 1};
    parse_policies(o, "all");
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case OPT_GPUS:
            o->gpus = (int)parse_count("--gpus", optarg, 1, GPUINFO_MAX_GPUS);
            break;
        case OPT_POLICY:
            for (size_t i = 0; i < o->n_policies; i++)
                free(o->policies[i]);
            parse_policies(o, optarg);
            break;
        case OPT_SYNTHETIC:
            o->synthetic = parse_count("--synthetic", optarg, 1, 10000000);
            break;
        case OPT_SEED:
            o->seed = (unsigned long long)parse_count("--seed", optarg, 0, INT64_MAX);
            break;
        case OPT_LOAD:
            errno = 0;
            o->load = strtod(optarg, &end);
            if (!*optarg || *end || errno || !isfinite(o->load) || o->load <= 0)
                die_usage("--load '%s' is not a number > 0 (2 = arrivals twice as dense)", optarg);
            break;
        case OPT_LIMITS:
            if (!strcmp(optarg, "trace"))
                o->limits = REPLAY_LIMITS_TRACE;
            else if (!strcmp(optarg, "exact"))
                o->limits = REPLAY_LIMITS_EXACT;
            else if (!strcmp(optarg, "none"))
                o->limits = REPLAY_LIMITS_NONE;
            else
                die_usage("--time-limits '%s': use trace, exact or none", optarg);
            break;
        case OPT_CSV:
            o->csv = true;
            break;
        case OPT_CDF:
            o->cdf = optarg;
            break;
        case OPT_HALF_LIFE: {
            int64_t secs;
            char *err = NULL;
            if (parse_duration(optarg, &secs, &err) < 0)
                die_usage("--half-life '%s' is not a duration: use e.g. 1h, 30m or 7d", optarg);
            replay_set_half_life((double)secs);
            break;
        }
        case OPT_TIME_PLAN: {
            struct time_plan plan;
            char *err = NULL;
            if (time_plan_parse(optarg, &plan, &err) < 0)
                die_usage("--time-plan '%s': use a percentile of the run times so far (p1-p100, "
                          "e.g. p95) or a duration (e.g. 24h, 08:00:00)",
                          optarg);
            replay_set_time_plan(&plan);
            break;
        }
        case 'h':
            fputs(usage, stdout);
            exit(0);
        case 'V':
            printf(PROG " %s\n", GFLOW_VERSION);
            exit(0);
        case ':':
            die_usage("%s needs a value; see gflow-replay --help", argv[optind - 1]);
        default:
            die_usage("unknown option %s; see gflow-replay --help", argv[optind - 1]);
        }
    }
    if (optind < argc)
        o->trace = argv[optind++];
    if (optind < argc)
        die_usage("one trace at most (got also '%s'); see gflow-replay --help", argv[optind]);
    if (o->trace && o->synthetic)
        die_usage("give a trace file or --synthetic N, not both");
    if (!o->trace && !o->synthetic)
        die_usage("no trace: give TRACE.csv or --synthetic N; see gflow-replay --help");
}

/* A duration for the text table: "42s", "12.5m", "3.1h", "4.2d"; "-" when undefined. */
static const char *fmt_duration(char *buf, size_t cap, double s)
{
    if (isnan(s))
        snprintf(buf, cap, "-");
    else if (s < 100)
        snprintf(buf, cap, "%.0fs", s);
    else if (s < 6000)
        snprintf(buf, cap, "%.1fm", s / 60);
    else if (s < 172800)
        snprintf(buf, cap, "%.1fh", s / 3600);
    else
        snprintf(buf, cap, "%.1fd", s / 86400);
    return buf;
}

/* The POLICY column is as wide as the longest name asked for. */
static void print_text_header(int width)
{
    printf("%-*s %7s %8s %8s %8s %8s | %6s %8s %8s %8s %8s | %8s %6s %7s %6s\n", width, "POLICY",
           "JOBS", "WAIT", "P50", "P95", "P99", "JOBS4+", "WAIT4+", "P50", "P95", "P99", "MAXWAIT",
           "UTIL", "BSLD", "JAIN");
}

static void print_text_row(int width, const char *policy, const struct replay_metrics *m)
{
    char b[10][32];
    if (isnan(m->jain))
        snprintf(b[9], 32, "-");
    else
        snprintf(b[9], 32, "%.3f", m->jain);
    printf("%-*s %7zu %8s %8s %8s %8s | %6zu %8s %8s %8s %8s | %8s %5.1f%% %7.2f %6s\n", width,
           policy, m->jobs, fmt_duration(b[0], 32, m->all.mean), fmt_duration(b[1], 32, m->all.p50),
           fmt_duration(b[2], 32, m->all.p95), fmt_duration(b[3], 32, m->all.p99), m->big.jobs,
           fmt_duration(b[4], 32, m->big.mean), fmt_duration(b[5], 32, m->big.p50),
           fmt_duration(b[6], 32, m->big.p95), fmt_duration(b[7], 32, m->big.p99),
           fmt_duration(b[8], 32, m->max_wait), 100 * m->utilisation, m->slowdown, b[9]);
}

static const char csv_header[] =
    "policy,load,offered_load,gpus,jobs,skipped,wait_mean_s,wait_p50_s,wait_p95_s,wait_p99_s,"
    "big_jobs,big_wait_mean_s,big_wait_p50_s,big_wait_p95_s,big_wait_p99_s,max_wait_s,utilisation,"
    "bounded_slowdown,jain,jain_total,contended_windows,users";

/* A number for the CSV table; an undefined one (no such jobs) is an empty field. */
static void csv_num(double v)
{
    if (isnan(v))
        printf(",");
    else
        printf(",%.10g", v);
}

static void print_csv_row(const char *policy, const struct options *o, double offered,
                          const struct replay_metrics *m)
{
    printf("%s,%g,%.4g,%d,%zu,%zu", policy, o->load, offered, o->gpus, m->jobs, m->skipped);
    const double waits[] = {m->all.mean, m->all.p50, m->all.p95, m->all.p99};
    for (int i = 0; i < 4; i++)
        csv_num(waits[i]);
    printf(",%zu", m->big.jobs);
    const double rest[] = {m->big.mean,    m->big.p50,  m->big.p95, m->big.p99,   m->max_wait,
                           m->utilisation, m->slowdown, m->jain,    m->jain_total};
    for (int i = 0; i < 9; i++)
        csv_num(rest[i]);
    printf(",%zu,%zu\n", m->contended_windows, m->users);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv)
{
    struct options o;
    parse_options(argc, argv, &o);

    struct replay_trace t;
    replay_trace_init(&t);
    char *err = NULL;
    if (o.trace && replay_trace_load(&t, o.trace, &err) < 0)
        die_usage("%s", err);
    if (o.synthetic)
        replay_trace_synthetic(&t, (size_t)o.synthetic, o.seed);
    replay_trace_compress(&t, o.load);
    replay_trace_set_limits(&t, o.limits);
    replay_trace_sort(&t);

    double offered = replay_offered_load(&t, o.gpus);
    FILE *cdf = NULL;
    if (o.cdf && !(cdf = fopen(o.cdf, "w")))
        die_usage("--cdf: cannot write %s: %s", o.cdf, strerror(errno));

    if (o.csv) {
        puts(csv_header);
    } else {
        if (o.trace)
            printf("trace: %s, %zu job%s, load x%g", o.trace, t.n, plural_s((long long)t.n),
                   o.load);
        else
            printf("trace: synthetic (seed %llu), %zu job%s, load x%g", o.seed, t.n,
                   plural_s((long long)t.n), o.load);
        printf(" (offered load %.2f); machine: %d GPU%s\n", offered, o.gpus, plural_s(o.gpus));
    }
    bool header_done = false;
    int width = 10;
    for (size_t p = 0; p < o.n_policies; p++)
        if ((int)strlen(o.policies[p]) > width)
            width = (int)strlen(o.policies[p]);
    for (size_t p = 0; p < o.n_policies; p++) {
        struct scheduler_policy policy;
        replay_policy(o.policies[p], &policy);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        struct replay_outcome out;
        replay_simulate(&t, o.gpus, &policy, &out);
        double elapsed = seconds_since(&t0);
        struct replay_metrics m;
        replay_metrics_compute(&t, &out, &m);
        if (o.csv) {
            print_csv_row(o.policies[p], &o, offered, &m);
        } else {
            if (!header_done && m.skipped)
                printf("skipped: %zu job%s ask%s for more than %d GPU%s (not replayed)\n",
                       m.skipped, plural_s((long long)m.skipped), m.skipped == 1 ? "s" : "", o.gpus,
                       plural_s(o.gpus));
            if (!header_done)
                print_text_header(width);
            header_done = true;
            print_text_row(width, o.policies[p], &m);
            fprintf(stderr, "%s: %zu job%s, %zu pass%s, replayed in %.2f s\n", o.policies[p],
                    m.jobs, plural_s((long long)m.jobs), out.passes, out.passes == 1 ? "" : "es",
                    elapsed);
        }
        if (out.unstarted)
            fprintf(stderr, PROG ": %s never started %zu queued job%s (a policy bug)\n",
                    o.policies[p], out.unstarted, plural_s((long long)out.unstarted));
        if (cdf)
            replay_write_cdf(cdf, o.policies[p], &out);
        replay_outcome_free(&out);
    }
    if (cdf && fclose(cdf) != 0)
        die_usage("--cdf: cannot write %s: %s", o.cdf, strerror(errno));
    for (size_t p = 0; p < o.n_policies; p++)
        free(o.policies[p]);
    replay_trace_free(&t);
    return 0;
}
