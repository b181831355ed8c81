/* ginfo: shows the machine's GPUs as the daemon sees them, like gflow's ginfo / sinfo.
 *
 *   ginfo              gflow's table: GPUs grouped by state (idle ones together, busy ones
 *                      by the jobs holding them, unavailable ones with the reason)
 *   ginfo -v           one row per GPU: index, UUID, bus id, name, memory, utilisation,
 *                      temperature, state, job or reason; then every process on a GPU
 *                      that is not a gflow job's own (pid, user, memory, age, command)
 *   ginfo --topology   the interconnect matrix, like `nvidia-smi topo -m`
 *   ginfo -o json      the daemon's GET /v1/gpus answer, pretty-printed
 *
 * A metric the driver does not report is printed as "?", never as 0: a GPU that looks
 * idle because its memory reading is missing is how jobs land on busy GPUs. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backendtext.h"
#include "cli.h"
#include "clock.h"
#include "completion.h"
#include "output.h"
#include "parse.h"
#include "timefmt.h"
#include "util.h"

enum { OPT_TOPOLOGY = 256 };

static void ginfo_help(void)
{
    printf("ginfo - show the GPUs and which jobs use them\n"
           "\n"
           "Usage: ginfo [options]\n"
           "       ginfo completion SHELL  (bash, elvish, fish, powershell or zsh)\n"
           "\n"
           "Options:\n"
           "  -v, --verbose        one row per GPU (index, UUID, PCI bus id, name, memory\n"
           "                       used/total, utilisation, temperature, state, job or\n"
           "                       reason), then the processes on the GPUs that belong to\n"
           "                       no gflow job\n"
           "      --topology       the interconnect between the GPUs, like\n"
           "                       'nvidia-smi topo -m'\n"
           "  -o, --output FORMAT  table (the default) or json (the daemon's answer)\n"
           "      --socket PATH    the daemon's socket\n"
           "      --config FILE    the config file whose timezone (and\n"
           "                       daemon.socket_path) to use\n"
           "  -h, --help           show this help\n"
           "  -V, --version        show the version\n"
           "\n"
           "States: idle, allocated (gflow jobs), mixed (shared jobs with room left),\n"
           "unmanaged (busy with processes outside gflow; gflow never uses or stops them),\n"
           "restricted (not in the allowed set, see 'gctl show-gpus'), unavailable (NVML\n"
           "cannot tell its state: the reason names the NVML error; or \"Stray (job N)\":\n"
           "job N has a process there although it was not given the GPU; no job gets it),\n"
           "drained (its health calls for a reset: ECC errors, pending row remaps, a fatal\n"
           "Xid; its jobs run out, no job starts on it until 'gctl gpu resume'),\n"
           "mig (MIG mode: its instances are listed below the table, each with its own\n"
           "state; a GPU in MIG mode without instances is unavailable).\n"
           "Unknown metrics are shown as '?'.\n"
           "\n"
           "Under the slurm backend ([backend] kind = \"slurm\") the GPUs are Slurm's: ginfo\n"
           "shows the partition's nodes instead (state, GPUs in use of their Gres, CPUs,\n"
           "memory, Slurm's reason), as gflowd read them with 'scontrol show node' at its\n"
           "last poll; -o json has them under \"backend\".\n");
}

/* The integer value of key, or -1 when it is absent, null or negative (unknown). */
static int64_t ginfo_int(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        return json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
    if (json_is_real(v))
        return json_real_value(v) >= 0 ? (int64_t)json_real_value(v) : -1;
    return -1;
}

static const char *ginfo_str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The state as the tables show it: gflow's "allocated" for GPUs held by jobs, Slurm's
 * "mixed" for shared GPUs with room left, the daemon's word otherwise. */
static const char *ginfo_state_label(const char *state)
{
    if (!state)
        return "?";
    if (!strcmp(state, "busy"))
        return "allocated";
    if (!strcmp(state, "shared"))
        return "mixed";
    return state;
}

/* Names of the running jobs, to show "12 (train)" instead of a bare id. A failure
 * only costs the names. */
static json_t *ginfo_job_names(const json_t *gpus)
{
    bool any = false;
    size_t i;
    const json_t *g;
    json_array_foreach (gpus, i, g) {
        if (json_array_size(json_object_get(g, "jobs")) > 0)
            any = true;
        size_t k;
        const json_t *m;
        json_array_foreach (json_object_get(g, "mig_instances"), k, m) {
            if (json_is_integer(json_object_get(m, "job")))
                any = true;
        }
    }
    json_t *names = json_object();
    if (!any)
        return names;
    json_t *reply = NULL;
    if (cli_request_json("GET", "/v1/jobs?state=R&user=all", NULL, NULL, &reply) == 0) {
        const json_t *j;
        json_array_foreach (json_object_get(reply, "jobs"), i, j) {
            const json_t *id = json_object_get(j, "id");
            const char *name = ginfo_str(j, "name");
            if (json_is_integer(id) && name) {
                char key[32];
                snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(id));
                json_object_set_new(names, key, json_string(name));
            }
        }
    }
    json_decref(reply);
    return names;
}

/* "12 (train),14 (eval)" for a GPU's jobs; "(reason)" for an unavailable GPU; "-" when
 * there is nothing to say. Malloc'd. */
static char *ginfo_job_reason(const json_t *gpu, const json_t *names)
{
    const json_t *jobs = json_object_get(gpu, "jobs");
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "");
    size_t i;
    const json_t *id;
    json_array_foreach (jobs, i, id) {
        if (!json_is_integer(id))
            continue;
        char key[32];
        snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(id));
        const char *name = json_string_value(json_object_get(names, key));
        if (sb.len)
            strbuf_addc(&sb, ',');
        if (name)
            strbuf_addf(&sb, "%s (%s)", key, name);
        else
            strbuf_adds(&sb, key);
    }
    const char *reason = ginfo_str(gpu, "reason");
    const char *state = ginfo_str(gpu, "state");
    /* A drained GPU's jobs run out: both the jobs and why no more come. */
    if (sb.len && state && !strcmp(state, "drained") && reason && *reason)
        strbuf_addf(&sb, " (%s)", reason);
    if (sb.len)
        return strbuf_detach(&sb);
    if (reason && *reason)
        strbuf_addf(&sb, "(%s)", reason);
    else if (state && !strcmp(state, "unmanaged"))
        strbuf_adds(&sb, "(Unmanaged)");
    else if (state && !strcmp(state, "restricted"))
        strbuf_adds(&sb, "(GpusRestricted)");
    else if (state && (!strcmp(state, "unavailable") || !strcmp(state, "lost")))
        strbuf_adds(&sb, "(Unavailable)");
    else
        strbuf_adds(&sb, "-");
    return strbuf_detach(&sb);
}

/* gflow's default table: one row per group of GPUs with the same state and the same
 * jobs or reason, in the order of each group's lowest GPU index, idle GPUs first. */
static void ginfo_summary(const json_t *gpus, const json_t *names)
{
    static const char *const headers[] = {"PARTITION", "GPUS", "NODES", "STATE", "JOB(REASON)"};
    size_t n = json_array_size(gpus);
    char **state = xcalloc(n + 1, sizeof(char *));
    char **what = xcalloc(n + 1, sizeof(char *));
    bool *done = xcalloc(n + 1, sizeof(bool));
    for (size_t i = 0; i < n; i++) {
        const json_t *g = json_array_get(gpus, i);
        state[i] = xstrdup(ginfo_state_label(ginfo_str(g, "state")));
        what[i] = ginfo_job_reason(g, names);
    }
    struct output_table *t = output_table_new(5, headers);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            bool idle = !strcmp(state[i], "idle");
            if (done[i] || idle != (pass == 0))
                continue;
            struct strbuf nodes;
            strbuf_init(&nodes);
            size_t count = 0;
            for (size_t k = i; k < n; k++) {
                if (done[k] || strcmp(state[k], state[i]) || strcmp(what[k], what[i]))
                    continue;
                int64_t index = ginfo_int(json_array_get(gpus, k), "index");
                if (count++)
                    strbuf_addc(&nodes, ',');
                if (index >= 0)
                    strbuf_addf(&nodes, "%lld", (long long)index);
                else
                    strbuf_addc(&nodes, '?');
                done[k] = true;
            }
            char *cells[5] = {xstrdup("gpu"), xasprintf("%zu", count), strbuf_detach(&nodes),
                              xstrdup(state[i]), xstrdup(what[i])};
            output_table_add_row_owned(t, cells);
        }
    }
    output_table_print(t, stdout);
    output_table_free(t);
    for (size_t i = 0; i < n; i++) {
        free(state[i]);
        free(what[i]);
    }
    free(state);
    free(what);
    free(done);
}

/* Whether the GPU's jobs list holds job. */
static bool ginfo_gpu_has_job(const json_t *gpu, json_int_t job)
{
    size_t i;
    const json_t *id;
    json_array_foreach (json_object_get(gpu, "jobs"), i, id) {
        if (json_is_integer(id) && json_integer_value(id) == job)
            return true;
    }
    return false;
}

/* The processes worth a line: those of no gflow job (they make a GPU unmanaged unless
 * ignored) and a job's processes found on a GPU the job was not given. */
static void ginfo_processes(const json_t *gpus)
{
    static const char *const headers[] = {"GPU", "PID", "USER", "MEMORY", "AGE", "NOTE", "COMMAND"};
    struct output_table *t = output_table_new(7, headers);
    size_t i, k;
    const json_t *g, *p;
    json_array_foreach (gpus, i, g) {
        json_array_foreach (json_object_get(g, "processes"), k, p) {
            const json_t *job = json_object_get(p, "job");
            char *note;
            if (json_is_integer(job)) {
                if (ginfo_gpu_has_job(g, json_integer_value(job)))
                    continue;
                note =
                    xasprintf("job %lld, not its GPU (stray)", (long long)json_integer_value(job));
            } else if (json_is_true(json_object_get(p, "ignored"))) {
                note = xstrdup("outside gflow, ignored");
            } else {
                note = xstrdup("outside gflow");
            }
            int64_t index = ginfo_int(g, "index");
            int64_t pid = ginfo_int(p, "pid");
            int64_t mem = ginfo_int(p, "used_memory_mib");
            int64_t age = ginfo_int(p, "age_secs");
            const char *user = ginfo_str(p, "user");
            const char *cmd = ginfo_str(p, "command");
            char *cells[7] = {
                index >= 0 ? xasprintf("%lld", (long long)index) : xstrdup("?"),
                pid >= 0 ? xasprintf("%lld", (long long)pid) : xstrdup("?"),
                xstrdup(user ? user : "?"),
                mem >= 0 ? xasprintf("%lld MiB", (long long)mem) : xstrdup("?"),
                age >= 0 ? format_duration(age) : xstrdup("?"),
                note,
                xstrdup(cmd ? cmd : "?"),
            };
            output_table_add_row_owned(t, cells);
        }
    }
    if (output_table_rows(t) > 0) {
        printf("\nProcesses on the GPUs that gflow did not start:\n");
        output_table_print(t, stdout);
    }
    output_table_free(t);
}

static void ginfo_verbose(const json_t *gpus, const json_t *names)
{
    static const char *const headers[] = {"INDEX", "UUID", "BUS-ID", "NAME",       "MEMORY",
                                          "UTIL",  "TEMP", "STATE",  "JOB(REASON)"};
    struct output_table *t = output_table_new(9, headers);
    size_t i;
    const json_t *g;
    json_array_foreach (gpus, i, g) {
        int64_t index = ginfo_int(g, "index");
        int64_t used = ginfo_int(g, "memory_used_mib");
        int64_t total = ginfo_int(g, "memory_total_mib");
        if (total == 0)
            total = -1; /* no reading (an unavailable GPU), not a GPU without memory */
        int64_t util = ginfo_int(g, "utilization_gpu");
        int64_t temp = ginfo_int(g, "temperature_c");
        const char *uuid = ginfo_str(g, "uuid");
        const char *bus = ginfo_str(g, "pci_bus_id");
        const char *name = ginfo_str(g, "name");
        char *u = output_mib_or_unknown(used), *tot = output_mib_or_unknown(total);
        char *cells[9] = {
            index >= 0 ? xasprintf("%lld", (long long)index) : xstrdup("?"),
            xstrdup(uuid ? uuid : "?"),
            xstrdup(bus ? bus : "?"),
            xstrdup(name ? name : "?"),
            xasprintf("%s/%s MiB", u, tot),
            util >= 0 ? xasprintf("%lld%%", (long long)util) : xstrdup("?"),
            temp >= 0 ? xasprintf("%lldC", (long long)temp) : xstrdup("?"),
            xstrdup(ginfo_state_label(ginfo_str(g, "state"))),
            ginfo_job_reason(g, names),
        };
        free(u);
        free(tot);
        output_table_add_row_owned(t, cells);
    }
    output_table_print(t, stdout);
    output_table_free(t);
    ginfo_processes(gpus);
}

/* Whether a topology cell is "NV<count>" (n: any count) or exactly code. */
static bool ginfo_cell_is(const char *cell, const char *code)
{
    if (strcmp(code, "NV#") != 0)
        return strcmp(cell, code) == 0;
    if (strncmp(cell, "NV", 2) != 0 || !cell[2])
        return false;
    for (const char *p = cell + 2; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

/* The legend of the codes the matrix shows, and only those: it is made from the cells,
 * so the two cannot disagree (a bare "NV", an NVLink whose count the driver did not
 * give, gets a line of its own). */
static void ginfo_topology_legend(const json_t *topo)
{
    static const struct {
        const char *code, *meaning;
    } legend[] = {
        {"X", "the GPU itself"},
        {"NV#", "joined by # bonded NVLinks (through NVSwitches: the links to the fabric)"},
        {"NV", "joined by NVLink (the driver did not say how many links)"},
        {"PIX", "through at most one PCIe bridge"},
        {"PXB", "through several PCIe bridges, not the host bridge"},
        {"PHB", "through a PCIe host bridge (the CPU)"},
        {"NODE", "between PCIe host bridges of one NUMA node"},
        {"SYS", "across NUMA nodes (QPI/UPI, Infinity Fabric)"},
        {"?", "not known (the driver did not answer)"},
    };
    printf("\nLegend:\n");
    for (size_t l = 0; l < sizeof(legend) / sizeof(legend[0]); l++) {
        bool shown = false;
        size_t i, k;
        const json_t *row, *cell;
        json_array_foreach (topo, i, row) {
            json_array_foreach (row, k, cell) {
                const char *v = json_string_value(cell);
                shown = shown || ginfo_cell_is(v ? v : "?", legend[l].code);
            }
        }
        if (shown)
            printf("  %-5s %s\n", legend[l].code, legend[l].meaning);
    }
}

/* The matrix of GET /v1/gpus "topology" (rows and columns in the order of "gpus"), with
 * each GPU's NUMA node, as nvidia-smi topo -m lays it out. */
static void ginfo_topology(const json_t *gpus, const json_t *topo)
{
    size_t n = json_array_size(gpus);
    if (!json_is_array(topo) || json_array_size(topo) != n || n == 0) {
        printf("No topology information from the driver.\n");
        return;
    }
    const char **headers = xcalloc(n + 2, sizeof(char *));
    char **labels = xcalloc(n, sizeof(char *));
    headers[0] = "";
    for (size_t i = 0; i < n; i++) {
        int64_t index = ginfo_int(json_array_get(gpus, i), "index");
        labels[i] = index >= 0 ? xasprintf("GPU%lld", (long long)index) : xstrdup("GPU?");
        headers[i + 1] = labels[i];
    }
    headers[n + 1] = "NUMA Affinity";
    struct output_table *t = output_table_new(n + 2, headers);
    for (size_t r = 0; r < n; r++) {
        const json_t *row = json_array_get(topo, r);
        char **cells = xcalloc(n + 2, sizeof(char *));
        cells[0] = xstrdup(labels[r]);
        for (size_t c = 0; c < n; c++) {
            const char *v = json_string_value(json_array_get(row, c));
            cells[c + 1] = xstrdup(v ? v : "?");
        }
        int64_t numa = ginfo_int(json_array_get(gpus, r), "numa_node");
        cells[n + 1] = numa >= 0 ? xasprintf("%lld", (long long)numa) : xstrdup("N/A");
        output_table_add_row_owned(t, cells);
        free(cells);
    }
    output_table_print(t, stdout);
    output_table_free(t);
    for (size_t i = 0; i < n; i++)
        free(labels[i]);
    free(labels);
    free(headers);
    ginfo_topology_legend(topo);
}

/* The MIG instances, one row each under its GPU (profile, UUID, memory, state, job),
 * and the MIG GPUs without instances; nothing when no GPU is in MIG mode. */
static void ginfo_mig(const json_t *gpus, const json_t *names)
{
    static const char *const headers[] = {"GPU", "PROFILE", "UUID", "MEMORY", "STATE", "JOB"};
    struct output_table *t = output_table_new(6, headers);
    size_t i, k;
    const json_t *g, *m;
    json_array_foreach (gpus, i, g) {
        if (!json_is_true(json_object_get(g, "mig_enabled")))
            continue;
        int64_t index = ginfo_int(g, "index");
        const json_t *list = json_object_get(g, "mig_instances");
        if (json_array_size(list) == 0) {
            char *cells[6] = {xasprintf("%lld", (long long)index),
                              xstrdup("-"),
                              xstrdup("-"),
                              xstrdup("-"),
                              xstrdup("unavailable"),
                              xstrdup("(MIG mode, no instances)")};
            output_table_add_row_owned(t, cells);
            continue;
        }
        json_array_foreach (list, k, m) {
            char *u = output_mib_or_unknown(ginfo_int(m, "memory_used_mib"));
            char *tot = output_mib_or_unknown(ginfo_int(m, "memory_total_mib"));
            const json_t *job = json_object_get(m, "job");
            char *who;
            if (json_is_integer(job)) {
                char key[32];
                snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(job));
                const char *name = json_string_value(json_object_get(names, key));
                who = name ? xasprintf("%s (%s)", key, name) : xstrdup(key);
            } else {
                who = xstrdup("-");
            }
            const char *profile = ginfo_str(m, "profile");
            const char *uuid = ginfo_str(m, "uuid");
            char *cells[6] = {xasprintf("%lld", (long long)index),
                              xstrdup(profile && *profile ? profile : "?"),
                              xstrdup(uuid ? uuid : "?"),
                              xasprintf("%s/%s MiB", u, tot),
                              xstrdup(ginfo_state_label(ginfo_str(m, "state"))),
                              who};
            free(u);
            free(tot);
            output_table_add_row_owned(t, cells);
        }
    }
    if (output_table_rows(t) > 0) {
        printf("\nMIG instances (ask for them with gbatch --mig PROFILE[:N]):\n");
        output_table_print(t, stdout);
    }
    output_table_free(t);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"verbose", no_argument, NULL, 'v'},
        {"topology", no_argument, NULL, OPT_TOPOLOGY},
        {"output", required_argument, NULL, 'o'},
        CLI_COMMON_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    cli_init(argv[0]);
    if (argc > 1 && !strcmp(argv[1], "completion"))
        return completion_main("ginfo", argc - 2, argv + 2);
    bool verbose = false, topology = false;
    enum output_format fmt = OUTPUT_TABLE;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vo:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'v':
            verbose = true;
            break;
        case OPT_TOPOLOGY:
            topology = true;
            break;
        case 'o':
            if (output_format_parse(optarg, &fmt) < 0 || fmt == OUTPUT_CSV)
                cli_usage_error("unknown output format '%s'; use table or json", optarg);
            break;
        default:
            cli_common_option(c, argv, longopts, "ginfo", ginfo_help);
        }
    }
    cli_refuse_completion(optind < argc ? argv[optind] : NULL);
    if (optind < argc)
        cli_usage_error("unexpected argument '%s'", argv[optind]);
    if (verbose && topology)
        cli_usage_error("-v and --topology show different things; use one");

    json_t *reply = cli_call("GET", "/v1/gpus", NULL);
    if (fmt == OUTPUT_JSON) {
        output_json(reply, stdout);
        json_decref(reply);
        return cli_finish(0);
    }
    const json_t *backend = json_object_get(reply, "backend");
    if (json_is_object(backend) && strcmp(ginfo_str(backend, "kind") ?: "", "slurm") == 0) {
        /* The GPUs are the partition's nodes' (GET /v1/backend), not this machine's. */
        struct strbuf text;
        strbuf_init(&text);
        backendtext(backend, now_wall(), true, &text);
        fputs(text.buf ? text.buf : "", stdout);
        strbuf_free(&text);
        json_decref(reply);
        return cli_finish(0);
    }
    if (json_is_true(json_object_get(reply, "simulated")))
        cli_printf("GPUs simulated (libgflow-nvml-sim)\n");
    const char *error = ginfo_str(reply, "error");
    const json_t *gpus = json_object_get(reply, "gpus");
    if (error && *error) {
        /* No NVML is a state of the machine, not a failure of ginfo. */
        cli_printf("%s%s\n", str_starts_with(error, "no GPUs") ? "" : "no GPUs: ", error);
        if (!json_is_true(json_object_get(reply, "simulated")))
            printf("To try gflow without an NVIDIA driver, run the daemon on simulated GPUs:\n"
                   "  gflowd down; gflowd up --simulate-gpus N   (N GPUs, e.g. 2)\n");
    } else if (topology) {
        ginfo_topology(gpus, json_object_get(reply, "topology"));
    } else {
        json_t *names = ginfo_job_names(gpus);
        if (verbose)
            ginfo_verbose(gpus, names);
        else
            ginfo_summary(gpus, names);
        ginfo_mig(gpus, names);
        json_decref(names);
    }
    json_decref(reply);
    return cli_finish(0);
}
