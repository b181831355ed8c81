/* backendtext: the backend as text (see backendtext.h). */
#include "backendtext.h"

#include <stdlib.h>
#include <string.h>

#include "termtext.h"

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static long long num(const json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

static void add_escaped(struct strbuf *out, const char *s)
{
    char *e = termtext_dup(s, 0);
    strbuf_adds(out, e ? e : "");
    free(e);
}

void backendtext(const json_t *backend, double now, bool nodes, struct strbuf *out)
{
    const char *kind = str(backend, "kind");
    if (strcmp(kind, "slurm") != 0) {
        strbuf_adds(out, "Backend: local (jobs run on this machine's GPUs)\n");
        return;
    }
    const char *part = str(backend, "partition");
    strbuf_adds(out, "Backend: slurm, partition ");
    if (*part)
        add_escaped(out, part);
    else
        strbuf_adds(out, "(Slurm's default)");
    strbuf_adds(out, "\n");
    const json_t *list = json_object_get(backend, "nodes");
    const json_t *gpus = json_object_get(backend, "gpus");
    const json_t *read_at = json_object_get(backend, "read_at");
    const char *err = str(backend, "error");
    if (!json_is_number(read_at)) {
        strbuf_adds(out, "Slurm nodes: not read yet");
    } else {
        size_t n = json_array_size(list);
        strbuf_addf(out, "Slurm nodes: %zu, GPUs %lld in use of %lld (read %.0f s ago)", n,
                    num(gpus, "used"), num(gpus, "total"),
                    now > json_number_value(read_at) ? now - json_number_value(read_at) : 0.0);
    }
    if (*err) {
        strbuf_adds(out, "; last read failed: ");
        add_escaped(out, err);
    }
    strbuf_adds(out, "\n");
    if (!nodes)
        return;
    size_t i;
    const json_t *v;
    json_array_foreach (list, i, v) {
        strbuf_adds(out, "  ");
        add_escaped(out, str(v, "name"));
        strbuf_adds(out, " ");
        add_escaped(out, str(v, "state"));
        strbuf_addf(out, ", GPUs %lld/%lld in use", num(v, "gpus_used"), num(v, "gpus"));
        if (*str(v, "gres")) {
            strbuf_adds(out, " (");
            add_escaped(out, str(v, "gres"));
            strbuf_adds(out, ")");
        }
        strbuf_addf(out, ", CPUs %lld/%lld, %lld MiB", num(v, "cpus_alloc"), num(v, "cpus"),
                    num(v, "memory_mb"));
        if (*str(v, "reason")) {
            strbuf_adds(out, ", reason: ");
            add_escaped(out, str(v, "reason"));
        }
        strbuf_adds(out, "\n");
    }
}
