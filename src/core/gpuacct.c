/* gpuacct: a job's GPU use from the daemon's reads (gpuacct.h). */
#include "gpuacct.h"

#include <math.h>
#include <string.h>

#include "util.h"

void gpuacct_init(struct gpuacct *a, double start)
{
    memset(a, 0, sizeof(*a));
    a->start = start;
    a->util_peak = -1;
    a->mem_peak_mib = -1;
    for (size_t i = 0; i < GPUINFO_MAX_GPUS; i++)
        a->gpus[i].index = -1;
}

double gpuacct_stretch_joules(int64_t mj0, int64_t mj1, int power0, int power1, double secs)
{
    if (!(secs > 0))
        secs = 0;
    if (mj0 >= 0 && mj1 >= mj0) {
        double j = (double)(mj1 - mj0) / 1000.0;
        /* A counter that leaps past any GPU's draw is not one we trust (a reset
         * between two readings can look like that, so can a bad driver). */
        if (j <= GPUACCT_MAX_WATTS * secs + 1.0)
            return j;
    }
    if (power0 >= 0 && power1 >= 0)
        return (power0 + power1) / 2.0 * secs;
    if (power0 >= 0 || power1 >= 0)
        return (power0 >= 0 ? power0 : power1) * secs;
    return -1;
}

static struct gpuacct_gpu *slot_of(struct gpuacct *a, int index)
{
    for (size_t i = 0; i < a->n_gpus; i++)
        if (a->gpus[i].index == index)
            return &a->gpus[i];
    if (a->n_gpus >= GPUINFO_MAX_GPUS)
        return NULL;
    struct gpuacct_gpu *g = &a->gpus[a->n_gpus++];
    g->index = index;
    g->last_t = 0;
    g->last_util = g->last_power = -1;
    g->last_mj = -1;
    g->share = 1;
    return g;
}

static void add_energy(struct gpuacct *a, double joules, double share)
{
    if (joules < 0)
        return;
    a->energy_j += joules * share;
    a->energy_known = true;
}

void gpuacct_add(struct gpuacct *a, const struct gpuacct_reading *r)
{
    struct gpuacct_gpu *g = slot_of(a, r->gpu);
    if (!g || (g->last_t > 0 && r->t < g->last_t))
        return;
    double share = r->share > 0 && r->share <= 1 ? r->share : 1;
    bool first = g->last_t == 0;
    double since = first ? a->start : g->last_t;
    double secs = r->t > since ? r->t - since : 0;

    if (first) /* before its first reading: at the power read now */
        add_energy(a, gpuacct_stretch_joules(-1, -1, r->power_w, -1, secs), share);
    else
        add_energy(
            a, gpuacct_stretch_joules(g->last_mj, r->energy_mj, g->last_power, r->power_w, secs),
            share);

    if (r->util >= 0) {
        /* The reading counts for the time before it; one at the very start for a moment. */
        double w = secs > 0 ? secs : 1e-3;
        a->util_ws += r->util * w;
        a->util_s += w;
        if (r->util > a->util_peak)
            a->util_peak = r->util;
    }
    if (r->mem_mib >= 0 && r->mem_mib > a->mem_peak_mib)
        a->mem_peak_mib = r->mem_mib;

    g->last_t = r->t;
    g->last_util = r->util;
    g->last_power = r->power_w;
    g->last_mj = r->energy_mj; /* -1 too: the next stretch is then counted from the power */
    g->share = share;
    if (r->t > a->last_t)
        a->last_t = r->t;
}

void gpuacct_figures(const struct gpuacct *a, double until, struct gpuacct_figures *out)
{
    double util_ws = a->util_ws, util_s = a->util_s, energy = a->energy_j;
    bool energy_known = a->energy_known;
    for (size_t i = 0; i < a->n_gpus; i++) {
        const struct gpuacct_gpu *g = &a->gpus[i];
        if (g->last_t <= 0 || until <= g->last_t)
            continue;
        double secs = until - g->last_t;
        if (g->last_util >= 0) {
            util_ws += g->last_util * secs;
            util_s += secs;
        }
        double j = gpuacct_stretch_joules(-1, -1, g->last_power, -1, secs);
        if (j >= 0) {
            energy += j * g->share;
            energy_known = true;
        }
    }
    out->util_peak = a->util_peak;
    out->util_mean = util_s > 0 ? (int)lround(util_ws / util_s) : -1;
    out->mem_peak_mib = a->mem_peak_mib;
    out->energy_wh = energy_known ? energy / 3600.0 : -1;
    out->idle = util_s > 0 ? util_ws / util_s < GPUACCT_IDLE_PCT : -1;
}

void gpuacct_seed(struct gpuacct *a, const struct gpuacct_figures *f, double secs)
{
    if (!(secs > 0))
        secs = 1e-3;
    if (f->util_mean >= 0) {
        a->util_ws = (double)f->util_mean * secs;
        a->util_s = secs;
    }
    a->util_peak = f->util_peak;
    a->mem_peak_mib = f->mem_peak_mib;
    if (f->energy_wh >= 0) {
        a->energy_j = f->energy_wh * 3600.0;
        a->energy_known = true;
    }
    a->start += secs; /* the readings from now on count from here */
}

char *gpuacct_energy_text(double wh, const char *sep)
{
    if (wh < 1)
        return xasprintf("%.2f%sWh", wh, sep);
    if (wh < 100)
        return xasprintf("%.1f%sWh", wh, sep);
    return xasprintf("%.0f%sWh", wh, sep);
}

char *gpuacct_mib_text(int64_t mib, const char *sep)
{
    if (mib < 1024)
        return xasprintf("%lld%sMiB", (long long)mib, sep);
    return xasprintf("%.1f%sGiB", (double)mib / 1024.0, sep);
}
