/* fake_nvidia_smi (gflow-fake-nvidia-smi): the part of nvidia-smi that
 * tests/gpu/check.sh uses, answering from the NVML simulator's fixture
 * ($GFLOW_NVML_SIM, docs/simulator.md) in nvidia-smi's own formats, so the check that
 * compares gflow with nvidia-smi runs in `make check` too. It reads the fixture itself
 * (not through NVML), as nvidia-smi is a second opinion on the driver.
 *
 *   -L                                      the GPUs (and MIG devices) with their UUIDs
 *   --query-gpu=F,... --format=csv[,noheader][,nounits]
 *        F: index, name, uuid, pci.bus_id, memory.total, memory.used, memory.free,
 *           mig.mode.current, driver_version
 *   --query-compute-apps=F,... --format=...  F: pid, used_memory (used_gpu_memory),
 *           gpu_uuid, gpu_bus_id, process_name
 *   topo -m                                 the matrix (NV#, NODE, SYS)
 *   -q                                      a short report
 * $GFLOW_FAKE_SMI_FIXTURE, when set, is read instead: a second opinion that disagrees,
 * for the test that check.sh notices (tests/gpu/check-sim.sh).
 * Exit status as nvidia-smi: 0, 9 no driver (fixture unreadable), 2 bad arguments. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *root;

static const char *str_of(json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static long long int_of(json_t *o, const char *key, long long dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static json_t *gpu_at(size_t i)
{
    return json_array_get(json_object_get(root, "gpus"), i);
}

static size_t n_gpus(void)
{
    return json_array_size(json_object_get(root, "gpus"));
}

/* Defaults as the NVML simulator's. */
static void gpu_uuid(size_t i, char *out, size_t len)
{
    char def[64];
    snprintf(def, sizeof(def), "GPU-00000000-0000-0000-0000-%012zx", i);
    snprintf(out, len, "%s", str_of(gpu_at(i), "uuid", def));
}

static void gpu_bus(size_t i, char *out, size_t len)
{
    char def[32];
    snprintf(def, sizeof(def), "00000000:%02zX:00.0", i + 1);
    unsigned int dom = 0, bus = 0, dev = 0, fn = 0;
    sscanf(str_of(gpu_at(i), "pci_bus_id", def), "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
    snprintf(out, len, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
}

/* As the simulator: "memory_used_mib", else the known memory of the processes of all
 * three lists, a pid counted once. */
static long long gpu_used(size_t i)
{
    json_t *g = gpu_at(i);
    long long used = int_of(g, "memory_used_mib", -1);
    if (used >= 0)
        return used;
    used = 0;
    static const char *const lists[] = {"processes", "graphics_processes", "mps_processes"};
    json_t *seen = json_object();
    for (size_t l = 0; l < 3; l++) {
        size_t k;
        json_t *p;
        json_array_foreach (json_object_get(g, lists[l]), k, p) {
            char pid[32];
            snprintf(pid, sizeof(pid), "%lld", int_of(p, "pid", 0));
            long long m = int_of(p, "used_memory_mib", -1);
            if (m > 0 && !json_object_get(seen, pid))
                used += m;
            json_object_set_new(seen, pid, json_true());
        }
    }
    json_decref(seen);
    return used;
}

/* The MIG instances below a GPU entry: objects whose "uuid" starts with MIG-. */
static void collect_mig(json_t *o, json_t *out)
{
    if (json_is_object(o)) {
        const char *u = json_string_value(json_object_get(o, "uuid"));
        if (u && strncmp(u, "MIG-", 4) == 0)
            json_array_append(out, o);
        const char *k;
        json_t *v;
        json_object_foreach (o, k, v)
            collect_mig(v, out);
    } else if (json_is_array(o)) {
        size_t i;
        json_t *v;
        json_array_foreach (o, i, v)
            collect_mig(v, out);
    }
}

static int list_gpus(void)
{
    for (size_t i = 0; i < n_gpus(); i++) {
        char uuid[128];
        gpu_uuid(i, uuid, sizeof(uuid));
        printf("GPU %zu: %s (UUID: %s)\n", i, str_of(gpu_at(i), "name", "Simulated GPU"), uuid);
        json_t *migs = json_array();
        collect_mig(gpu_at(i), migs);
        size_t k;
        json_t *m;
        json_array_foreach (migs, k, m)
            printf("  MIG %-12s Device %2zu: (UUID: %s)\n", str_of(m, "profile", "?"), k,
                   str_of(m, "uuid", ""));
        json_decref(migs);
    }
    return 0;
}

struct fmt {
    bool header, units;
};

static int parse_format(const char *f, struct fmt *fmt)
{
    fmt->header = true;
    fmt->units = true;
    if (!f || strncmp(f, "csv", 3) != 0) {
        fprintf(stderr, "fake-nvidia-smi: only --format=csv[,noheader][,nounits]\n");
        return -1;
    }
    if (strstr(f, "noheader"))
        fmt->header = false;
    if (strstr(f, "nounits"))
        fmt->units = false;
    return 0;
}

static void mib(char *out, size_t len, long long v, const struct fmt *fmt)
{
    snprintf(out, len, fmt->units ? "%lld MiB" : "%lld", v);
}

/* One field of one GPU; false for a field this fake does not know. */
static bool gpu_field(size_t i, const char *f, const struct fmt *fmt, char *out, size_t len)
{
    json_t *g = gpu_at(i);
    long long total = int_of(g, "memory_total_mib", 0);
    if (!strcmp(f, "index"))
        snprintf(out, len, "%zu", i);
    else if (!strcmp(f, "name"))
        snprintf(out, len, "%s", str_of(g, "name", "Simulated GPU"));
    else if (!strcmp(f, "uuid"))
        gpu_uuid(i, out, len);
    else if (!strcmp(f, "pci.bus_id"))
        gpu_bus(i, out, len);
    else if (!strcmp(f, "memory.total"))
        mib(out, len, total, fmt);
    else if (!strcmp(f, "memory.used"))
        mib(out, len, gpu_used(i), fmt);
    else if (!strcmp(f, "memory.free"))
        mib(out, len, total > gpu_used(i) ? total - gpu_used(i) : 0, fmt);
    else if (!strcmp(f, "mig.mode.current")) {
        json_t *migs = json_array();
        collect_mig(g, migs);
        snprintf(out, len, "%s", json_array_size(migs) ? "Enabled" : "[N/A]");
        json_decref(migs);
    } else if (!strcmp(f, "driver_version"))
        snprintf(out, len, "%s", str_of(root, "driver_version", "gflow-sim"));
    else
        return false;
    return true;
}

static bool is_mem_field(const char *f)
{
    return !strncmp(f, "memory.", 7) || !strcmp(f, "used_memory") || !strcmp(f, "used_gpu_memory");
}

/* Splits "a,b,c" into fields; returns the count. */
static size_t split(char *s, char **out, size_t max)
{
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(s, ",", &save); t && n < max;
         t = strtok_r(NULL, ",", &save))
        out[n++] = t;
    return n;
}

static void print_header(char **fields, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        const char *f = !strcmp(fields[k], "used_memory") ? "used_gpu_memory" : fields[k];
        printf("%s%s%s", k ? ", " : "", f, is_mem_field(fields[k]) ? " [MiB]" : "");
    }
    printf("\n");
}

static int query_gpu(char *list, const struct fmt *fmt)
{
    char *fields[32];
    size_t n = split(list, fields, 32);
    char val[256];
    for (size_t k = 0; k < n; k++)
        if (!gpu_field(0, fields[k], fmt, val, sizeof(val)) && n_gpus() > 0) {
            fprintf(stderr, "Field \"%s\" is not a valid field to query.\n", fields[k]);
            return 2;
        }
    if (fmt->header)
        print_header(fields, n);
    for (size_t i = 0; i < n_gpus(); i++) {
        for (size_t k = 0; k < n; k++) {
            gpu_field(i, fields[k], fmt, val, sizeof(val));
            printf("%s%s", k ? ", " : "", val);
        }
        printf("\n");
    }
    return 0;
}

static void app_line(size_t i, json_t *p, char **fields, size_t n, const struct fmt *fmt)
{
    for (size_t k = 0; k < n; k++) {
        char val[256];
        const char *f = fields[k];
        if (!strcmp(f, "pid"))
            snprintf(val, sizeof(val), "%lld", int_of(p, "pid", 0));
        else if (!strcmp(f, "used_memory") || !strcmp(f, "used_gpu_memory")) {
            long long m = int_of(p, "used_memory_mib", -1);
            if (m < 0)
                snprintf(val, sizeof(val), "[N/A]");
            else
                mib(val, sizeof(val), m, fmt);
        } else if (!strcmp(f, "gpu_uuid"))
            gpu_uuid(i, val, sizeof(val));
        else if (!strcmp(f, "gpu_bus_id"))
            gpu_bus(i, val, sizeof(val));
        else if (!strcmp(f, "process_name"))
            snprintf(val, sizeof(val), "%s", "[sim]");
        else
            snprintf(val, sizeof(val), "[N/A]");
        printf("%s%s", k ? ", " : "", val);
    }
    printf("\n");
}

/* Processes of a GPU and of its MIG instances (nvidia-smi lists both). */
static void gpu_apps(size_t i, char **fields, size_t n, const struct fmt *fmt)
{
    size_t k;
    json_t *p, *m;
    json_array_foreach (json_object_get(gpu_at(i), "processes"), k, p)
        app_line(i, p, fields, n, fmt);
    json_t *migs = json_array();
    collect_mig(gpu_at(i), migs);
    size_t j;
    json_array_foreach (migs, j, m)
        json_array_foreach (json_object_get(m, "processes"), k, p)
            app_line(i, p, fields, n, fmt);
    json_decref(migs);
}

static int query_apps(char *list, const struct fmt *fmt)
{
    static const char *const known[] = {"pid",      "used_memory", "used_gpu_memory",
                                        "gpu_uuid", "gpu_bus_id",  "process_name"};
    char *fields[32];
    size_t n = split(list, fields, 32);
    for (size_t k = 0; k < n; k++) {
        bool ok = false;
        for (size_t j = 0; j < sizeof(known) / sizeof(known[0]); j++)
            ok |= !strcmp(fields[k], known[j]);
        if (!ok) {
            fprintf(stderr, "Field \"%s\" is not a valid field to query.\n", fields[k]);
            return 2;
        }
    }
    if (fmt->header)
        print_header(fields, n);
    for (size_t i = 0; i < n_gpus(); i++)
        gpu_apps(i, fields, n, fmt);
    return 0;
}

static int topo(void)
{
    size_t n = n_gpus();
    printf("\t");
    for (size_t i = 0; i < n; i++)
        printf("GPU%zu\t", i);
    printf("NUMA Affinity\n");
    for (size_t a = 0; a < n; a++) {
        printf("GPU%zu\t", a);
        for (size_t b = 0; b < n; b++) {
            if (a == b) {
                printf(" X \t");
                continue;
            }
            /* Direct links to b; through NVSwitches nvidia-smi shows the switch links
             * (NV18 on an HGX H100) for any two GPUs that have them. */
            long long links = 0;
            size_t k;
            json_t *peer;
            json_array_foreach (json_object_get(gpu_at(a), "nvlink"), k, peer)
                links += json_is_integer(peer) && json_integer_value(peer) == (json_int_t)b;
            long long sw_a = int_of(gpu_at(a), "nvswitch_links", 0);
            if (sw_a > 0 && int_of(gpu_at(b), "nvswitch_links", 0) > 0)
                links = sw_a;
            if (links)
                printf("NV%lld\t", links);
            else if (int_of(gpu_at(a), "numa_node", 0) == int_of(gpu_at(b), "numa_node", 0))
                printf("NODE\t");
            else
                printf("SYS\t");
        }
        printf("%lld\n", int_of(gpu_at(a), "numa_node", 0));
    }
    printf("\nLegend:\n\n  X    = Self\n  SYS  = PCIe + SMP interconnect between NUMA nodes\n"
           "  NODE = PCIe + interconnect between PCIe Host Bridges within a NUMA node\n"
           "  NV#  = Connection traversing a bonded set of # NVLinks\n");
    return 0;
}

static int report(void)
{
    printf("==============NVSMI LOG==============\n\n");
    printf("Driver Version                            : %s\n",
           str_of(root, "driver_version", "gflow-sim"));
    printf("Attached GPUs                             : %zu\n", n_gpus());
    for (size_t i = 0; i < n_gpus(); i++) {
        char uuid[128], bus[32];
        gpu_uuid(i, uuid, sizeof(uuid));
        gpu_bus(i, bus, sizeof(bus));
        long long total = int_of(gpu_at(i), "memory_total_mib", 0), used = gpu_used(i);
        printf("GPU %s\n", bus);
        printf("    Product Name                          : %s\n",
               str_of(gpu_at(i), "name", "Simulated GPU"));
        printf("    GPU UUID                              : %s\n", uuid);
        json_t *minor = json_object_get(gpu_at(i), "minor_number");
        if (json_is_null(minor))
            printf("    Minor Number                          : N/A\n");
        else
            printf("    Minor Number                          : %lld\n",
                   int_of(gpu_at(i), "minor_number", (long long)i));
        printf("    FB Memory Usage\n");
        printf("        Total                             : %lld MiB\n", total);
        printf("        Used                              : %lld MiB\n", used);
        printf("        Free                              : %lld MiB\n",
               total > used ? total - used : 0);
        printf("    Processes\n");
        size_t k;
        json_t *p;
        json_array_foreach (json_object_get(gpu_at(i), "processes"), k, p)
            printf("        Process ID                        : %lld\n"
                   "            Used GPU Memory               : %lld MiB\n",
                   int_of(p, "pid", 0), int_of(p, "used_memory_mib", -1));
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = getenv("GFLOW_FAKE_SMI_FIXTURE");
    if (!path || !*path)
        path = getenv("GFLOW_NVML_SIM");
    root = path && *path ? json_load_file(path, 0, NULL) : NULL;
    if (!root) {
        fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                        "driver. (fake: $GFLOW_NVML_SIM unreadable)\n");
        return 9;
    }
    const char *query = NULL, *apps = NULL, *format = NULL;
    int rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-L"))
            rc = list_gpus();
        else if (!strcmp(a, "-q"))
            rc = report();
        else if (!strcmp(a, "topo") && i + 1 < argc && !strcmp(argv[i + 1], "-m"))
            rc = topo();
        else if (!strncmp(a, "--query-gpu=", 12))
            query = a + 12;
        else if (!strncmp(a, "--query-compute-apps=", 21))
            apps = a + 21;
        else if (!strncmp(a, "--format=", 9))
            format = a + 9;
        else {
            fprintf(stderr, "fake-nvidia-smi: unsupported argument '%s'\n", a);
            rc = 2;
        }
    }
    if (rc < 0 && (query || apps)) {
        struct fmt fmt;
        char *list = strdup(query ? query : apps);
        rc = !list || parse_format(format, &fmt) < 0 ? 2
             : query                                 ? query_gpu(list, &fmt)
                                                     : query_apps(list, &fmt);
        free(list);
    }
    if (rc < 0) {
        fprintf(stderr, "fake-nvidia-smi: give -L, -q, topo -m, --query-gpu= or "
                        "--query-compute-apps=\n");
        rc = 2;
    }
    json_decref(root);
    return rc;
}
