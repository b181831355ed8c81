/* gpu_health: the GPUs' health as the daemon acts on it (gpu.h, "health"): drains (kept
 * in the store by UUID), Xid events from the thread of gpu_xid.c, the faults that end
 * jobs, memory used by no listed process, compute modes. Everything here runs on the
 * loop, over the reading gpu.c took last. */
#include "gpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_xid.h"
#include "log.h"
#include "nvml_types.h"
#include "store/store.h"
#include "util.h"

/* The store's setting: {"<uuid>": {"drained": "Xid 79" | null, "ack": "..." | null}}. */
#define SETTING_HEALTH "gpus.health"
#define MAX_FAULTS 64

/* What is kept of one GPU, by UUID. */
struct hentry {
    char uuid[96];
    char *drained; /* why it is drained, NULL: it is not */
    char *ack;     /* the condition an admin resumed it with (--force): not a drain again */
    long long xid; /* the last Xid seen, -1: none (not kept across restarts) */
};

struct gpu_health_state {
    struct gpu_xid *xid;
    struct hentry *e;
    size_t n;
    int64_t unowned_limit;
    uint64_t unowned;
    uint64_t closed, no_share; /* as of the last reading, to tell a change */
    int64_t unowned_mib[GPUINFO_MAX_GPUS];
    struct gpu_fault faults[MAX_FAULTS]; /* fatal Xids not handed out yet */
    size_t n_faults;
    char text[128];
};

static struct hentry *entry(struct gpu_health_state *h, const char *uuid, bool make)
{
    for (size_t i = 0; i < h->n; i++)
        if (!strcmp(h->e[i].uuid, uuid))
            return &h->e[i];
    if (!make || !uuid[0])
        return NULL;
    h->e = xrealloc(h->e, (h->n + 1) * sizeof(*h->e));
    struct hentry *e = &h->e[h->n++];
    memset(e, 0, sizeof(*e));
    snprintf(e->uuid, sizeof(e->uuid), "%s", uuid);
    e->xid = -1;
    return e;
}

static const struct hentry *entry_of(const struct gpus *g, size_t index)
{
    if (!g->health || index >= g->cur.n_gpus)
        return NULL;
    return entry(g->health, g->cur.gpus[index].uuid, false);
}

/* ---- the store ---- */

static void save(struct gpus *g)
{
    struct gpu_health_state *h = g->health;
    json_t *o = json_object();
    for (size_t i = 0; i < h->n; i++)
        if (h->e[i].drained || h->e[i].ack)
            json_object_set_new(
                o, h->e[i].uuid,
                json_pack("{s:o, s:o}", "drained",
                          h->e[i].drained ? json_string(h->e[i].drained) : json_null(), "ack",
                          h->e[i].ack ? json_string(h->e[i].ack) : json_null()));
    char *text = json_object_size(o) ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (store_begin(g->store) < 0 || store_set_setting(g->store, SETTING_HEALTH, text) < 0)
        log_error("cannot keep the GPUs' drains: %s", store_error(g->store));
    free(text);
}

static void load(struct gpus *g)
{
    char *text = NULL;
    if (!g->store || store_get_setting(g->store, SETTING_HEALTH, &text) != 0 || !text)
        return;
    json_t *o = json_loads(text, 0, NULL);
    free(text);
    const char *uuid;
    json_t *v;
    json_object_foreach (o, uuid, v) {
        struct hentry *e = entry(g->health, uuid, true);
        const char *d = json_string_value(json_object_get(v, "drained"));
        const char *a = json_string_value(json_object_get(v, "ack"));
        if (e && d)
            e->drained = xstrdup(d);
        if (e && a)
            e->ack = xstrdup(a);
    }
    json_decref(o);
}

void gpu_health_start(struct gpus *g, const char *library, int64_t unowned_memory_mib)
{
    g->health = xcalloc(1, sizeof(*g->health));
    g->health->unowned_limit = unowned_memory_mib;
    load(g);
    g->health->xid = xid_thread_start(library);
    if (!g->health->xid)
        log_warn("cannot start the thread that watches for Xid errors: %m");
}

void gpu_health_stop(struct gpus *g)
{
    struct gpu_health_state *h = g->health;
    if (!h)
        return;
    xid_thread_stop(h->xid);
    for (size_t i = 0; i < h->n; i++) {
        free(h->e[i].drained);
        free(h->e[i].ack);
    }
    free(h->e);
    free(h);
    g->health = NULL;
}

/* ---- drains ---- */

/* What in the GPU's health calls for a drain now, joined by "; " into buf ("" if
 * nothing); returns buf. */
static const char *conditions(const struct gpu_health *hl, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!hl->read)
        return buf;
    char ecc[48];
    snprintf(ecc, sizeof(ecc), "uncorrectable ECC errors: %lld", (long long)hl->ecc_volatile);
    const char *all[] = {hl->remap_pending == 1 ? "remapped rows pending" : NULL,
                         hl->remap_failed == 1 ? "remapped rows failed" : NULL,
                         hl->ecc_volatile > 0 ? ecc : NULL,
                         hl->retired_pending == 1 ? "retired pages pending" : NULL};
    for (size_t i = 0; i < sizeof(all) / sizeof(*all); i++)
        if (all[i])
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? "; " : "", all[i]);
    return buf;
}

/* The first of the conditions (as conditions() joins them) that ack (conditions an admin
 * resumed the GPU with) does not name, copied to out; false if none. */
static bool new_condition(const char *conds, const char *ack, char *out, size_t cap)
{
    for (const char *p = conds; *p;) {
        size_t len = strcspn(p, ";");
        snprintf(out, cap, "%.*s", (int)len, p);
        if (!ack || !strstr(ack, out))
            return true;
        p += len;
        while (*p == ';' || *p == ' ')
            p++;
    }
    return false;
}

static void drain(struct hentry *e, int index, const char *why)
{
    free(e->drained);
    e->drained = xstrdup(why);
    log_warn("GPU %d (%s) drained: %s; its jobs run out, then it takes none until an admin "
             "runs 'gctl gpu resume %d'",
             index, e->uuid, why, index);
}

/* Memory used on GPU i that no listed process accounts for (NVML's used memory, which
 * the _v2 call gives without the driver's reservation); 0 when it cannot be told. */
static int64_t unowned_of(const struct gpu_info *info)
{
    if (info->mig_enabled || info->memory_used_mib < 0 || !gpu_info_usable(info))
        return 0;
    int64_t listed = 0;
    for (size_t k = 0; k < info->n_procs; k++) {
        if (info->procs[k].used_mib < 0)
            return 0; /* a process of unknown size may hold it all */
        listed += info->procs[k].used_mib;
    }
    return info->memory_used_mib > listed ? info->memory_used_mib - listed : 0;
}

bool gpu_health_assess(struct gpus *g)
{
    struct gpu_health_state *h = g->health;
    if (!h)
        return false;
    bool changed = false, dirty = false;
    uint64_t unowned = 0;
    for (size_t i = 0; i < g->cur.n_gpus && i < GPUINFO_MAX_GPUS; i++) {
        const struct gpu_info *info = &g->cur.gpus[i];
        char conds[256], why[64];
        conditions(&info->health, conds, sizeof(conds));
        struct hentry *e = entry(h, info->uuid, conds[0] != '\0');
        if (e && !e->drained && new_condition(conds, e->ack, why, sizeof(why))) {
            drain(e, (int)i, why);
            changed = dirty = true;
        } else if (!conds[0] && e && e->ack) { /* what was resumed with --force is over */
            free(e->ack);
            e->ack = NULL;
            dirty = true;
        }
        h->unowned_mib[i] = unowned_of(info);
        if (h->unowned_limit > 0 && h->unowned_mib[i] > h->unowned_limit)
            unowned |= 1ULL << i;
    }
    if (dirty)
        save(g);
    changed |= unowned != h->unowned;
    h->unowned = unowned;
    /* Compute modes change without a drain: the scheduler must see that too. */
    uint64_t closed = gpu_closed(g), no_share = gpu_no_share(g);
    changed |= closed != h->closed || no_share != h->no_share;
    h->closed = closed;
    h->no_share = no_share;
    return changed;
}

/* ---- Xid events ---- */

static bool xid_fatal(unsigned long long xid)
{
    static const unsigned long long fatal[] = GPU_FATAL_XIDS;
    for (size_t i = 0; i < sizeof(fatal) / sizeof(*fatal); i++)
        if (fatal[i] == xid)
            return true;
    return false;
}

int gpu_xid_fd(const struct gpus *g)
{
    return g->health ? xid_thread_fd(g->health->xid) : -1;
}

bool gpu_xid_collect(struct gpus *g)
{
    struct gpu_health_state *h = g->health;
    struct gpu_xid_event ev[16];
    size_t n;
    bool changed = false;
    while (h && (n = xid_thread_take(h->xid, ev, 16)) > 0) {
        for (size_t k = 0; k < n; k++) {
            int index = ev[k].index;
            for (size_t i = 0; i < g->cur.n_gpus; i++) /* the index by UUID, as it is now */
                if (!strcmp(g->cur.gpus[i].uuid, ev[k].uuid))
                    index = (int)i;
            struct hentry *e = entry(h, ev[k].uuid, true);
            if (!e)
                continue;
            e->xid = (long long)ev[k].xid;
            if (!xid_fatal(ev[k].xid)) {
                log_info("GPU %d (%s): Xid %llu (not one that needs a reset)", index, e->uuid,
                         ev[k].xid);
                continue;
            }
            char what[32];
            snprintf(what, sizeof(what), "Xid %llu", ev[k].xid);
            if (!e->drained) {
                drain(e, index, what);
                save(g);
            }
            if (h->n_faults < MAX_FAULTS) {
                h->faults[h->n_faults].index = index;
                snprintf(h->faults[h->n_faults].what, sizeof(h->faults[0].what), "%s", what);
                h->n_faults++;
            }
            changed = true;
        }
    }
    return changed;
}

size_t gpu_take_faults(struct gpus *g, struct gpu_fault *out, size_t cap)
{
    size_t k = 0;
    struct gpu_health_state *h = g->health;
    for (size_t i = 0; h && i < h->n_faults && k < cap; i++)
        out[k++] = h->faults[i];
    if (h)
        h->n_faults = 0;
    for (size_t i = 0; i < g->cur.n_gpus && k < cap; i++) {
        if (!g->cur.gpus[i].lost)
            continue;
        out[k].index = (int)i;
        snprintf(out[k].what, sizeof(out[k].what), "GPU lost");
        k++;
    }
    return k;
}

/* ---- what the scheduler and the reports see ---- */

const char *gpu_drained(const struct gpus *g, size_t index)
{
    const struct hentry *e = entry_of(g, index);
    return e ? e->drained : NULL;
}

static int compute_mode(const struct gpus *g, size_t i)
{
    const struct gpu_health *hl = &g->cur.gpus[i].health;
    return hl->read ? hl->compute_mode : -1;
}

uint64_t gpu_closed(const struct gpus *g)
{
    uint64_t m = 0;
    for (size_t i = 0; i < g->cur.n_gpus && i < GPUINFO_MAX_GPUS; i++)
        if (gpu_drained(g, i) || compute_mode(g, i) == NVML_COMPUTEMODE_PROHIBITED)
            m |= 1ULL << i;
    return m;
}

uint64_t gpu_no_share(const struct gpus *g)
{
    uint64_t m = 0;
    for (size_t i = 0; i < g->cur.n_gpus && i < GPUINFO_MAX_GPUS; i++) {
        int mode = compute_mode(g, i);
        if (mode == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS || mode == NVML_COMPUTEMODE_EXCLUSIVE_THREAD)
            m |= 1ULL << i;
    }
    return m;
}

uint64_t gpu_unowned(const struct gpus *g)
{
    return g->health ? g->health->unowned : 0;
}

const char *gpu_health_block(const struct gpus *g, size_t index, const char **state)
{
    const char *why = gpu_drained(g, index);
    if (why) {
        *state = "drained";
        return why;
    }
    if (index < g->cur.n_gpus && compute_mode(g, index) == NVML_COMPUTEMODE_PROHIBITED) {
        *state = "unavailable";
        return "compute mode Prohibited";
    }
    return NULL;
}

const char *gpu_unowned_reason(const struct gpus *g, size_t index)
{
    if (index >= GPUINFO_MAX_GPUS || !(gpu_unowned(g) & (1ULL << index)))
        return NULL;
    snprintf(g->health->text, sizeof(g->health->text),
             "Unmanaged: %lld MiB used by no visible process",
             (long long)g->health->unowned_mib[index]);
    return g->health->text;
}

static json_t *opt_int(int64_t v)
{
    return v >= 0 ? json_integer(v) : json_null();
}

static json_t *opt_bool(int v)
{
    return v < 0 ? json_null() : json_boolean(v);
}

static json_t *mode_json(int mode)
{
    switch (mode) {
    case NVML_COMPUTEMODE_DEFAULT:
        return json_string("Default");
    case NVML_COMPUTEMODE_EXCLUSIVE_PROCESS:
    case NVML_COMPUTEMODE_EXCLUSIVE_THREAD: /* deprecated; as exclusive as a process */
        return json_string("ExclusiveProcess");
    case NVML_COMPUTEMODE_PROHIBITED:
        return json_string("Prohibited");
    default:
        return json_null();
    }
}

/* NVML's names of the clocks event reason bits, lowest first. */
static const char *const reason_names[] = {"GpuIdle",
                                           "ApplicationsClocksSetting",
                                           "SwPowerCap",
                                           "HwSlowdown",
                                           "SyncBoost",
                                           "SwThermalSlowdown",
                                           "HwThermalSlowdown",
                                           "HwPowerBrakeSlowdown",
                                           "DisplayClockSetting"};

json_t *gpu_health_json(const struct gpus *g, size_t index)
{
    const struct gpu_health *hl = &g->cur.gpus[index].health;
    struct gpu_health none = {.read = false};
    if (!hl->read) {
        memset(&none, 0xff, sizeof(none)); /* every field -1: unknown */
        none.read = false;
        hl = &none;
    }
    json_t *reasons = json_array();
    for (size_t b = 0; hl->throttle > 0 && b < sizeof(reason_names) / sizeof(*reason_names); b++)
        if (hl->throttle & (1LL << b))
            json_array_append_new(reasons, json_string(reason_names[b]));
    const struct hentry *e = entry_of(g, index);
    json_t *o = json_object();
    json_object_set_new(o, "ecc_uncorrectable_volatile", opt_int(hl->ecc_volatile));
    json_object_set_new(o, "ecc_uncorrectable_aggregate", opt_int(hl->ecc_aggregate));
    json_object_set_new(o, "retired_pages", opt_int(hl->retired_pages));
    json_object_set_new(o, "retired_pages_pending", opt_bool(hl->retired_pending));
    json_object_set_new(o, "remapped_rows_pending", opt_bool(hl->remap_pending));
    json_object_set_new(o, "remapped_rows_failed", opt_bool(hl->remap_failed));
    json_object_set_new(o, "last_xid", e && e->xid >= 0 ? json_integer(e->xid) : json_null());
    json_object_set_new(o, "throttle_reasons", reasons);
    json_object_set_new(o, "compute_mode", mode_json(hl->compute_mode));
    json_object_set_new(
        o, "unowned_mib",
        json_integer(g->health && index < GPUINFO_MAX_GPUS ? g->health->unowned_mib[index] : 0));
    return o;
}

int gpu_resume(struct gpus *g, int index, bool force, char **err)
{
    if (index < 0 || (size_t)index >= g->cur.n_gpus) {
        *err = xasprintf("no GPU %d on this machine ('ginfo' lists them)", index);
        return -1;
    }
    const struct gpu_info *info = &g->cur.gpus[index];
    struct hentry *e = g->health ? entry(g->health, info->uuid, false) : NULL;
    if (!e || !e->drained) {
        *err = xasprintf("GPU %d is not drained", index);
        return -1;
    }
    char buf[256];
    const char *still = conditions(&info->health, buf, sizeof(buf));
    if (!still[0])
        still = NULL;
    if (still && !force) {
        *err = xasprintf("GPU %d: %s still (a GPU reset clears it: nvidia-smi -r -i %d); "
                         "'gctl gpu resume %d --force' resumes it anyway",
                         index, still, index, index);
        return -1;
    }
    log_info("GPU %d (%s) resumed (it was drained: %s)%s", index, e->uuid, e->drained,
             still ? "; forced while that still holds" : "");
    free(e->drained);
    e->drained = NULL;
    free(e->ack);
    e->ack = still ? xstrdup(still) : NULL;
    save(g);
    return 0;
}
