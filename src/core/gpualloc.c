/* gpualloc: the GPU choice for one job. The topology strategy ranks every pair of GPUs
 * by its PCIe level first (one PCIe switch, several, the host bridge, one NUMA node,
 * across NUMA nodes: nvmlDeviceGetTopologyCommonAncestor) and by NVLink second, so that
 * NVLink breaks ties between pairs at one PCIe level and never overrides the level: on
 * an NVSwitch machine every pair has NVLink, and the sockets must still count (issue 28,
 * item 6: with GPU 0 busy a 4-GPU job got 1,2,3,4 across both sockets, not 4-7).
 * Then it works in three steps.
 * 0. NUMA nodes: a job that no single node can hold is confined to the fewest nodes
 *    that hold it (of those, the set with the fewest free GPUs: best fit), when every
 *    candidate's node is known.
 * 1. The rank: for each rank from the closest outwards, is there a set of k candidates
 *    whose every pair is at least that close (a k-clique of the "close enough" graph)?
 *    A depth-first search over bitmasks answers; real link matrices are nearly
 *    hierarchical (PCIe trees, NVLink islands), which keeps it short, and a step budget
 *    bounds the odd case, which then falls to the next rank (whose graph is denser).
 * 2. Best fit at that rank: the job goes into the group (the GPUs close enough to one
 *    seed GPU) with the fewest free GPUs that still holds k, ties broken by the groups
 *    around it at the wider ranks, then by the lowest position; inside that group the k
 *    GPUs are taken one at a time from the tightest free subgroups. So a 1-GPU job lands
 *    in an NVLink island that is already partly used, and whole islands stay free for
 *    the jobs that need them (issue 9, defect 8: lowest-free placement fragmented them).
 * So the order of preference is (NUMA nodes spanned, worst PCIe level, NVLink).
 * Cost: O(ranks * n^2) for the neighbour masks plus O(ranks * k * n) for the choice. */
#include "gpualloc.h"

#include <stdbool.h>
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

/* A pair's rank, closest first: twice its PCIe level, plus one without NVLink between
 * them. (A matrix that gives GPU_LINK_NVLINK as the level still sorts first.) */
static int rank_at(const struct gpu_set *set, size_t a, size_t b)
{
    if (a == b)
        return 0;
    bool nvlink = set->nvlinks && set->nvlinks[a * set->n_gpus + b] > 0;
    return 2 * (int)link_at(set, a, b) + !nvlink;
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

/* The lowest k-clique of within at this rank, or 0 (none, or over the step budget). */
static uint64_t lowest_clique(uint64_t (*close)[GPUINFO_MAX_GPUS], int level, uint64_t within,
                              int k)
{
    uint64_t adj[GPUINFO_MAX_GPUS];
    for (uint64_t a = within; a; a &= a - 1) {
        int i = lowest_bit(a);
        adj[i] = close[level][i] & within & ~((2ULL << i) - 1); /* above i */
    }
    struct clique_search cs = {.adj = adj, .k = k, .budget = 100000};
    return clique_dfs(&cs, 0, 0, within);
}

/* Ranks 0 (a GPU with itself) .. N_RANKS - 1 (an unknown pair without NVLink). */
#define N_RANKS (2 * (GPU_LINK_UNKNOWN + 1))

/* Compares GPUs a and b as homes for one more GPU of a job: the one whose free group is
 * smaller at the first rank (from..N_RANKS - 1) where they differ is the better fit,
 * then the lower position. <0: a is better. */
static int fit_cmp(uint64_t (*close)[GPUINFO_MAX_GPUS], uint64_t free, int from, int a, int b)
{
    for (int l = from; l < N_RANKS; l++) {
        int fa = popcount(close[l][a] & free), fb = popcount(close[l][b] & free);
        if (fa != fb)
            return fa - fb;
    }
    return a - b;
}

#define MAX_NODES_EXACT 12 /* more NUMA nodes than this: chosen greedily */

/* Step 0: a job that no one NUMA node can hold keeps to the fewest nodes that can, of
 * those the set with the fewest free GPUs (the lowest nodes on a tie). The candidates
 * unchanged when one node holds it or a candidate's node is unknown. */
static uint64_t numa_confine(const struct gpu_set *set, uint64_t candidates, int k)
{
    int node[GPUINFO_MAX_GPUS], n_nodes = 0;
    uint64_t on[GPUINFO_MAX_GPUS]; /* on[x]: the candidates on node[x] */
    for (uint64_t a = candidates; a; a &= a - 1) {
        int i = lowest_bit(a), x = 0, id = set->gpus[i].numa_node;
        if (id < 0)
            return candidates;
        while (x < n_nodes && node[x] != id)
            x++;
        if (x == n_nodes) {
            node[n_nodes] = id;
            on[n_nodes++] = 0;
        }
        on[x] |= 1ULL << i;
    }
    for (int x = 0; x < n_nodes; x++)
        if (popcount(on[x]) >= k)
            return candidates;
    if (n_nodes > MAX_NODES_EXACT) { /* greedy: the fullest nodes first */
        uint64_t out = 0;
        bool used[GPUINFO_MAX_GPUS] = {false};
        while (popcount(out) < k) {
            int best = -1;
            for (int x = 0; x < n_nodes; x++)
                if (!used[x] && (best < 0 || popcount(on[x]) > popcount(on[best])))
                    best = x;
            used[best] = true;
            out |= on[best];
        }
        return out;
    }
    uint64_t best = 0;
    int best_nodes = 0, best_free = 0;
    for (unsigned s = 1; s < 1u << n_nodes; s++) {
        uint64_t m = 0;
        for (int x = 0; x < n_nodes; x++)
            if (s >> x & 1)
                m |= on[x];
        int nodes = __builtin_popcount(s), free = popcount(m);
        if (free >= k &&
            (!best || nodes < best_nodes || (nodes == best_nodes && free < best_free))) {
            best = m;
            best_nodes = nodes;
            best_free = free;
        }
    }
    return best ? best : candidates;
}

static uint64_t choose_topology(const struct gpu_set *set, uint64_t candidates, int k)
{
    candidates = numa_confine(set, candidates, k);
    if (!set->link)
        return lowest_k(candidates, k);
    /* close[l][i]: the candidates ranked l or closer to i, i included; present: the
     * ranks some pair has (only those can change the answer of step 1). */
    uint64_t close[N_RANKS][GPUINFO_MAX_GPUS];
    unsigned present = 0;
    for (uint64_t a = candidates; a; a &= a - 1) {
        int i = lowest_bit(a);
        for (int l = 0; l < N_RANKS; l++)
            close[l][i] = 1ULL << i;
        for (uint64_t b = candidates & ~(1ULL << i); b; b &= b - 1) {
            int j = lowest_bit(b), r = rank_at(set, (size_t)i, (size_t)j);
            present |= 1u << r;
            for (int l = r; l < N_RANKS; l++)
                close[l][i] |= 1ULL << j;
        }
    }
    /* 1. The closest rank that holds k; every pair counts at the last. */
    int level = k == 1 ? 0 : N_RANKS - 1;
    uint64_t lowest = lowest_k(candidates, k);
    for (int l = 1; k > 1 && l < N_RANKS - 1; l++) {
        if (!(present >> l & 1))
            continue;
        uint64_t r = lowest_clique(close, l, candidates, k);
        if (r) {
            level = l;
            lowest = r;
            break;
        }
    }
    /* 2a. The seed whose group at this rank is the tightest that still holds k. */
    int seed = -1;
    for (uint64_t a = candidates; a; a &= a - 1) {
        int i = lowest_bit(a);
        if (popcount(close[level][i]) >= k &&
            (seed < 0 || fit_cmp(close, candidates, level, i, seed) < 0))
            seed = i;
    }
    if (seed < 0)
        return lowest;
    /* 2b. Its members one at a time, each from the tightest free subgroup, keeping every
     * pair within the rank (a non-hierarchical matrix may leave no way on: then any
     * clique of the group, else the lowest one overall). */
    uint64_t group = close[level][seed], pool = group, chosen = 0;
    for (int n = 0; n < k; n++) {
        if (popcount(pool) < k - n) {
            uint64_t r = lowest_clique(close, level, group, k);
            return r ? r : lowest;
        }
        int best = -1;
        for (uint64_t a = pool; a; a &= a - 1) {
            int i = lowest_bit(a);
            if (best < 0 || fit_cmp(close, candidates & ~chosen, 1, i, best) < 0)
                best = i;
        }
        chosen |= 1ULL << best;
        pool &= close[level][best] & ~(1ULL << best);
    }
    return chosen;
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
