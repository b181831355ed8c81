/* cpumask: CPU sets, their list text, and the choice of a job's CPUs (cpumask.h). */
#include "cpumask.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

#define CPUMASK_WORDS (CPUMASK_MAX / 64)

void cpumask_set(struct cpumask *m, int cpu)
{
    if (cpu >= 0 && cpu < CPUMASK_MAX)
        m->w[cpu / 64] |= 1ULL << (cpu % 64);
}

bool cpumask_has(const struct cpumask *m, int cpu)
{
    return cpu >= 0 && cpu < CPUMASK_MAX && (m->w[cpu / 64] >> (cpu % 64) & 1);
}

int cpumask_count(const struct cpumask *m)
{
    int n = 0;
    for (int i = 0; i < CPUMASK_WORDS; i++)
        n += __builtin_popcountll(m->w[i]);
    return n;
}

bool cpumask_empty(const struct cpumask *m)
{
    return cpumask_count(m) == 0;
}

void cpumask_or(struct cpumask *m, const struct cpumask *other)
{
    for (int i = 0; i < CPUMASK_WORDS; i++)
        m->w[i] |= other->w[i];
}

void cpumask_and(struct cpumask *m, const struct cpumask *other)
{
    for (int i = 0; i < CPUMASK_WORDS; i++)
        m->w[i] &= other->w[i];
}

char *cpumask_format(const struct cpumask *m)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (int c = 0; c < CPUMASK_MAX; c++) {
        if (!cpumask_has(m, c))
            continue;
        int last = c;
        while (last + 1 < CPUMASK_MAX && cpumask_has(m, last + 1))
            last++;
        strbuf_addf(&sb, "%s%d", sb.len ? "," : "", c);
        if (last > c)
            strbuf_addf(&sb, "-%d", last);
        c = last;
    }
    return strbuf_detach(&sb);
}

/* A CPU number at *p (moved past it): 0, or -1. */
static int parse_cpu(const char **p, int *cpu)
{
    if (**p < '0' || **p > '9')
        return -1;
    long v = 0;
    while (**p >= '0' && **p <= '9') {
        v = v * 10 + (**p - '0');
        if (v >= CPUMASK_MAX)
            return -1;
        (*p)++;
    }
    *cpu = (int)v;
    return 0;
}

int cpumask_parse(const char *s, struct cpumask *out)
{
    memset(out, 0, sizeof(*out));
    const char *p = s;
    while (*p == ' ')
        p++;
    if (!*p || !strcmp(p, "\n"))
        return 0;
    for (;;) {
        int lo, hi;
        if (parse_cpu(&p, &lo) < 0)
            return -1;
        hi = lo;
        if (*p == '-') {
            p++;
            if (parse_cpu(&p, &hi) < 0 || hi < lo)
                return -1;
        }
        for (int c = lo; c <= hi; c++)
            cpumask_set(out, c);
        if (*p != ',')
            break;
        p++;
    }
    while (*p == ' ' || *p == '\n')
        p++;
    return *p ? -1 : 0;
}

/* Adds up to *want CPUs of from (lowest first) not yet in out to out. */
static void take_from(const struct cpumask *from, struct cpumask *out, int *want)
{
    for (int c = 0; c<CPUMASK_MAX && * want> 0; c++)
        if (cpumask_has(from, c) && !cpumask_has(out, c)) {
            cpumask_set(out, c);
            (*want)--;
        }
}

void cpumask_pin(const struct cpumask *near, int n_gpus, int per_gpu, const struct cpumask *allowed,
                 const struct cpumask *taken, struct cpumask *out)
{
    memset(out, 0, sizeof(*out));
    if (per_gpu <= 0) {
        for (int g = 0; g < n_gpus; g++)
            cpumask_or(out, &near[g]);
        cpumask_and(out, allowed);
        return;
    }
    struct cpumask free_cpus = *allowed;
    for (int i = 0; i < CPUMASK_WORDS; i++)
        free_cpus.w[i] &= ~taken->w[i];
    for (int g = 0; g < n_gpus; g++) {
        struct cpumask near_ok = near[g], near_free = near[g];
        cpumask_and(&near_ok, allowed);
        cpumask_and(&near_free, &free_cpus);
        int want = per_gpu;
        take_from(&near_free, out, &want);
        take_from(&near_ok, out, &want);
        take_from(&free_cpus, out, &want);
        take_from(allowed, out, &want);
    }
}
