/* slurm_nodes: the partition's nodes (see slurm_nodes.h). */
#include "slurm_nodes.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "slurm.h"
#include "slurm_cmd.h"
#include "util.h"

struct slurm_nodes {
    bool reading;
    json_t *nodes;  /* the last answer; NULL before the first */
    char *error;    /* why the last read failed; NULL if it did not */
    double read_at; /* wall time of the last answer */
};

struct slurm_nodes *slurm_nodes_new(void)
{
    return xcalloc(1, sizeof(struct slurm_nodes));
}

void slurm_nodes_free(struct slurm_nodes *n)
{
    if (!n)
        return;
    json_decref(n->nodes);
    free(n->error);
    free(n);
}

/* The value of key= in a `--oneliner` line (copied), or NULL. Values end at a space. */
static char *field(const char *line, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = line; *p;) {
        while (*p == ' ')
            p++;
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1, *e = strchr(v, ' ');
            return xstrndup(v, e ? (size_t)(e - v) : strlen(v));
        }
        const char *e = strchr(p, ' ');
        if (!e)
            break;
        p = e;
    }
    return NULL;
}

/* The GPUs of a Gres/GresUsed value ("gpu:4", "gpu:a100:2(IDX:0-1),shard:8"): their count. */
static long long gres_gpus(const char *gres)
{
    long long total = 0;
    for (const char *p = gres; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (strncmp(p, "gpu:", 4) == 0 || (len == 3 && strncmp(p, "gpu", 3) == 0)) {
            char *one = xstrndup(p, len);
            char *paren = strchr(one, '(');
            if (paren)
                *paren = '\0';
            const char *colon = strrchr(one, ':');
            long long v = colon ? strtoll(colon + 1, NULL, 10) : 1;
            total += v > 0 ? v : 0;
            free(one);
        }
        /* a "(IDX:0,2)" may hold commas */
        const char *open = memchr(p, '(', len);
        if (open) {
            const char *close = strchr(open, ')');
            e = close ? strchr(close, ',') : NULL;
        }
        p = e ? e + 1 : NULL;
    }
    return total;
}

static bool in_list(const char *list, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == nl && strncmp(p, name, nl) == 0)
            return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

static json_int_t num(const char *s)
{
    return s ? (json_int_t)strtoll(s, NULL, 10) : 0;
}

json_t *slurm_node_parse(const char *line, const char *partition)
{
    char *name = field(line, "NodeName");
    if (!name)
        return NULL;
    char *parts = field(line, "Partitions");
    if (partition && *partition && !in_list(parts, partition)) {
        free(name);
        free(parts);
        return NULL;
    }
    char *state = field(line, "State"), *gres = field(line, "Gres");
    char *used = field(line, "GresUsed"), *cpus = field(line, "CPUTot");
    char *alloc = field(line, "CPUAlloc"), *mem = field(line, "RealMemory");
    char *reason = field(line, "Reason");
    json_t *ps = json_array();
    for (const char *p = parts; p && *p;) {
        const char *e = strchr(p, ',');
        json_array_append_new(ps, json_stringn(p, e ? (size_t)(e - p) : strlen(p)));
        p = e ? e + 1 : NULL;
    }
    bool no_gres = !gres || strcmp(gres, "(null)") == 0;
    json_t *o = json_pack("{s:s, s:s, s:o, s:s, s:I, s:I, s:I, s:I, s:I}", "name", name, "state",
                          state ? state : "UNKNOWN", "partitions", ps, "gres", no_gres ? "" : gres,
                          "gpus", (json_int_t)gres_gpus(no_gres ? NULL : gres), "gpus_used",
                          (json_int_t)gres_gpus(used), "cpus", num(cpus), "cpus_alloc", num(alloc),
                          "memory_mb", num(mem));
    if (reason)
        json_object_set_new(o, "reason", json_string(reason));
    free(name);
    free(parts);
    free(state);
    free(gres);
    free(used);
    free(cpus);
    free(alloc);
    free(mem);
    free(reason);
    return o;
}

static void read_done_cb(struct child *c, bool ok)
{
    struct slurm_nodes *n = slurm_backend_nodes(c->d);
    if (!n) /* gflowd stopped the backend meanwhile */
        return;
    n->reading = false;
    if (!ok) {
        char *why = first_line(c);
        if (!n->error)
            log_warn("slurm: scontrol show node failed: %s", why);
        free(n->error);
        n->error = xasprintf("scontrol show node: %s", why);
        free(why);
        return;
    }
    free(n->error);
    n->error = NULL;
    json_t *nodes = json_array();
    const char *part = c->d->cfg.backend_partition;
    char *out = xstrndup(c->out.buf ? c->out.buf : "", c->out.len);
    for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        json_t *node = slurm_node_parse(line, part);
        if (node)
            json_array_append_new(nodes, node);
    }
    free(out);
    json_decref(n->nodes);
    n->nodes = nodes;
    n->read_at = now_wall();
}

void slurm_nodes_refresh(struct gflowd *d, struct slurm_nodes *n)
{
    if (n->reading)
        return;
    /* --details: Slurm 22.05 says GresUsed (the GPUs in use) only then. */
    char *argv[] = {"scontrol", "--details", "--oneliner", "show", "node", NULL};
    struct child *c = child_new(d, 0, read_done_cb);
    if (child_run(c, argv, NULL) < 0) {
        free(n->error);
        n->error = xasprintf("cannot run scontrol: %s", strerror(errno));
        child_free(c);
        return;
    }
    n->reading = true;
}

json_t *backend_json(const struct gflowd *d)
{
    if (!daemon_on_slurm(d))
        return json_pack("{s:s}", "kind", "local");
    const struct slurm_nodes *n = slurm_backend_nodes(d);
    json_t *nodes = n && n->nodes ? json_deep_copy(n->nodes) : json_array();
    json_int_t total = 0, used = 0;
    size_t i;
    json_t *v;
    json_array_foreach (nodes, i, v) {
        total += json_integer_value(json_object_get(v, "gpus"));
        used += json_integer_value(json_object_get(v, "gpus_used"));
    }
    const char *part = d->cfg.backend_partition;
    json_t *o =
        json_pack("{s:s, s:o, s:o, s:{s:I, s:I}, s:o, s:o, s:I}", "kind", "slurm", "partition",
                  part && *part ? json_string(part) : json_null(), "nodes", nodes, "gpus", "total",
                  total, "used", used, "error", n && n->error ? json_string(n->error) : json_null(),
                  "read_at", n && n->nodes ? json_real(n->read_at) : json_null(), "poll_secs",
                  (json_int_t)d->cfg.backend_poll_secs);
    return o;
}
