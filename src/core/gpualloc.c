/* gpualloc: the GPU choice for one job. The topology strategy looks, for each link level
 * from the closest outwards, for the lowest set of k candidates whose every pair is at
 * least that close (a k-clique of the "close enough" graph), found by a depth-first
 * search over bitmasks in ascending order, so the first set found is the lowest one.
 * Real link matrices are nearly hierarchical (PCIe trees, NVLink islands), which keeps
 * the search short; a step budget bounds the odd case, which then falls to the next
 * level (whose graph is denser). */
#include "gpualloc.h"

#include <strings.h>

static const char *const strategy_names[] = {
    [GPUALLOC_TOPOLOGY] = "topology",
    [GPUALLOC_SEQUENTIAL] = "sequential",
    [GPUALLOC_RANDOM] = "random",
};

const char *gpualloc_strategy_name(enum gpualloc_strategy s)
{
    if ((unsigned)s >= sizeof(strategy_names) / sizeof(*strategy_names))
        return "?";
    return strategy_names[s];
}

int gpualloc_strategy_parse(const char *s, enum gpualloc_strategy *out)
{
    for (size_t i = 0; i < sizeof(strategy_names) / sizeof(*strategy_names); i++)
        if (strcasecmp(s, strategy_names[i]) == 0) {
            *out = (enum gpualloc_strategy)i;
            return 0;
        }
    return -1;
}

static int lowest_bit(uint64_t m)
{
    return __builtin_ctzll(m);
}

static int popcount(uint64_t m)
{
    return __builtin_popcountll(m);
}

/* The lowest k bits of m (m has at least k). */
static uint64_t lowest_k(uint64_t m, int k)
{
    uint64_t out = 0;
    for (int i = 0; i < k; i++) {
        uint64_t b = m & -m;
        out |= b;
        m &= ~b;
    }
    return out;
}

static enum gpu_link link_at(const struct gpu_set *set, size_t a, size_t b)
{
    if (a == b)
        return GPU_LINK_SELF;
    if (!set->link)
        return GPU_LINK_SYSTEM;
    enum gpu_link l = set->link[a * set->n_gpus + b];
    return (unsigned)l > GPU_LINK_UNKNOWN ? GPU_LINK_UNKNOWN : l;
}

enum gpu_link gpualloc_worst_link(const struct gpu_set *set, uint64_t mask)
{
    enum gpu_link worst = GPU_LINK_SELF;
    for (uint64_t a = mask; a; a &= a - 1)
        for (uint64_t b = a & (a - 1); b; b &= b - 1) {
            enum gpu_link l = link_at(set, (size_t)lowest_bit(a), (size_t)lowest_bit(b));
            if (l > worst)
                worst = l;
        }
    return worst;
}

struct clique_search {
    const uint64_t *adj; /* adj[i]: candidates close enough to i, above i */
    int k;
    long budget;
};

/* Extends chosen (n members) from cand, lowest first. Returns the clique or 0. */
static uint64_t clique_dfs(struct clique_search *cs, uint64_t chosen, int n, uint64_t cand)
{
    if (n == cs->k)
        return chosen;
    while (cand && popcount(cand) >= cs->k - n) {
        if (--cs->budget < 0)
            return 0;
        int i = lowest_bit(cand);
        cand &= cand - 1;
        uint64_t r = clique_dfs(cs, chosen | (1ULL << i), n + 1, cand & cs->adj[i]);
        if (r)
            return r;
    }
    return 0;
}

static uint64_t choose_topology(const struct gpu_set *set, uint64_t candidates, int k)
{
    if (k == 1 || !set->link)
        return lowest_k(candidates, k);
    uint64_t adj[GPUINFO_MAX_GPUS];
    for (int level = GPU_LINK_NVLINK; level < GPU_LINK_UNKNOWN; level++) {
        for (uint64_t a = candidates; a; a &= a - 1) {
            int i = lowest_bit(a);
            adj[i] = 0;
            for (uint64_t b = a & (a - 1); b; b &= b - 1) {
                int j = lowest_bit(b);
                if ((int)link_at(set, (size_t)i, (size_t)j) <= level)
                    adj[i] |= 1ULL << j;
            }
        }
        struct clique_search cs = {.adj = adj, .k = k, .budget = 100000};
        uint64_t r = clique_dfs(&cs, 0, 0, candidates);
        if (r)
            return r;
    }
    /* Every pair counts at the last level (unknown links included). */
    return lowest_k(candidates, k);
}

/* splitmix64: small, seedable, good enough to spread jobs over GPUs. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t choose_random(uint64_t candidates, int k, uint64_t *rng)
{
    uint64_t local = 0;
    if (!rng)
        rng = &local;
    int pos[GPUINFO_MAX_GPUS];
    int n = 0;
    for (uint64_t a = candidates; a; a &= a - 1)
        pos[n++] = lowest_bit(a);
    uint64_t out = 0;
    for (int i = 0; i < k; i++) { /* partial Fisher-Yates */
        int j = i + (int)(rng_next(rng) % (uint64_t)(n - i));
        int t = pos[i];
        pos[i] = pos[j];
        pos[j] = t;
        out |= 1ULL << pos[i];
    }
    return out;
}

uint64_t gpualloc_choose(const struct gpu_set *set, uint64_t candidates, int k,
                         enum gpualloc_strategy strategy, uint64_t *rng)
{
    if (set && set->n_gpus < 64)
        candidates &= (1ULL << set->n_gpus) - 1;
    if (!set || k < 1 || popcount(candidates) < k)
        return 0;
    switch (strategy) {
    case GPUALLOC_SEQUENTIAL:
        return lowest_k(candidates, k);
    case GPUALLOC_RANDOM:
        return choose_random(candidates, k, rng);
    case GPUALLOC_TOPOLOGY:
    default:
        return choose_topology(set, candidates, k);
    }
}
