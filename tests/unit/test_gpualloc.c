/* test_gpualloc: the GPU choice of src/core/gpualloc.c: sequential, topology on an 8-GPU
 * machine with two NVLink islands of four (0-3, 4-7; SYS between them), its best fit
 * (small jobs go into partly used islands, also over a random run of jobs coming and
 * going), topology on a uniform machine and without a link matrix (both equal
 * sequential), seeded random; NUMA and PCIe levels before NVLink (issue 28: NVSwitch
 * machines with two sockets, the PCIe switch, NVLink as the tie-breaker, fewest nodes). */
/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpualloc.h"

#define M(...) mask_of((int[]){__VA_ARGS__, -1})

static uint64_t mask_of(const int *idx)
{
    uint64_t m = 0;
    for (; *idx >= 0; idx++)
        m |= 1ULL << *idx;
    return m;
}

static struct gpu_info gpus8[8];
static enum gpu_link links8[64];

/* Two islands: NVLink inside, across NUMA nodes between them. */
static struct gpu_set islands(void)
{
    for (int i = 0; i < 8; i++) {
        memset(&gpus8[i], 0, sizeof(gpus8[i]));
        gpus8[i].index = i;
        gpus8[i].memory_total_mib = 81559;
        for (int j = 0; j < 8; j++)
            links8[i * 8 + j] = i == j             ? GPU_LINK_SELF
                                : (i / 4 == j / 4) ? GPU_LINK_NVLINK
                                                   : GPU_LINK_SYSTEM;
    }
    return (struct gpu_set){.gpus = gpus8, .n_gpus = 8, .link = links8};
}

static void test_strategy_names(void **state)
{
    (void)state;
    enum gpualloc_strategy s;
    assert_int_equal(gpualloc_strategy_parse("topology", &s), 0);
    assert_int_equal(s, GPUALLOC_TOPOLOGY);
    assert_int_equal(gpualloc_strategy_parse("Sequential", &s), 0);
    assert_int_equal(s, GPUALLOC_SEQUENTIAL);
    assert_int_equal(gpualloc_strategy_parse("random", &s), 0);
    assert_int_equal(s, GPUALLOC_RANDOM);
    assert_int_equal(gpualloc_strategy_parse("best", &s), -1);
    assert_string_equal(gpualloc_strategy_name(GPUALLOC_RANDOM), "random");
    /* The zero value is the default strategy. */
    assert_string_equal(gpualloc_strategy_name((enum gpualloc_strategy)0), "topology");
}

static void test_sequential(void **state)
{
    (void)state;
    struct gpu_set s = islands();
    uint64_t all = 0xff;
    assert_int_equal(gpualloc_choose(&s, all & ~M(1, 5), 3, GPUALLOC_SEQUENTIAL, NULL), M(0, 2, 3));
    /* Sequential ignores the islands. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 1, 2), 2, GPUALLOC_SEQUENTIAL, NULL), M(3, 4));
    assert_int_equal(gpualloc_choose(&s, M(6), 2, GPUALLOC_SEQUENTIAL, NULL), 0);
    assert_int_equal(gpualloc_choose(&s, all, 0, GPUALLOC_SEQUENTIAL, NULL), 0);
    /* Bits beyond the set are not GPUs. */
    assert_int_equal(gpualloc_choose(&s, M(7, 9), 2, GPUALLOC_SEQUENTIAL, NULL), 0);
}

static void test_topology_islands(void **state)
{
    (void)state;
    struct gpu_set s = islands();
    uint64_t all = 0xff;
    /* Two busy in island A, none in B: a 4-GPU job gets all of island B. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 1), 4, GPUALLOC_TOPOLOGY, NULL),
                     M(4, 5, 6, 7));
    assert_int_equal(gpualloc_choose(&s, all & ~M(1, 2), 4, GPUALLOC_TOPOLOGY, NULL),
                     M(4, 5, 6, 7));
    /* Island B busier: the 4-GPU job gets island A. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(6), 4, GPUALLOC_TOPOLOGY, NULL), M(0, 1, 2, 3));
    /* A 2-GPU job prefers an NVLink pair over the lowest indices (3,4 cross islands). */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 1, 2), 2, GPUALLOC_TOPOLOGY, NULL), M(4, 5));
    /* Ties go to the lowest indices: both islands free. */
    assert_int_equal(gpualloc_choose(&s, all, 2, GPUALLOC_TOPOLOGY, NULL), M(0, 1));
    assert_int_equal(gpualloc_choose(&s, all, 4, GPUALLOC_TOPOLOGY, NULL), M(0, 1, 2, 3));
    /* A 3-GPU job fits in the island with three free. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 4, 5), 3, GPUALLOC_TOPOLOGY, NULL),
                     M(1, 2, 3));
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 1, 4), 3, GPUALLOC_TOPOLOGY, NULL),
                     M(5, 6, 7));
    /* No island has room: the job spans both, lowest indices. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 4), 4, GPUALLOC_TOPOLOGY, NULL),
                     M(1, 2, 3, 5));
    /* One GPU: the lowest free of the island already in use. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0), 1, GPUALLOC_TOPOLOGY, NULL), M(1));
    assert_int_equal(gpualloc_worst_link(&s, M(4, 5, 6, 7)), GPU_LINK_NVLINK);
    assert_int_equal(gpualloc_worst_link(&s, M(3, 4)), GPU_LINK_SYSTEM);
    assert_int_equal(gpualloc_worst_link(&s, M(3)), GPU_LINK_SELF);
}

/* Defect 8 of issue 9: a 4-GPU job on island A, a 1-GPU job on 4, the 4-GPU job ends: the
 * next 1-GPU job must join island B (not take 0), so island A stays whole. */
static void test_topology_best_fit_keeps_islands_whole(void **state)
{
    (void)state;
    struct gpu_set s = islands();
    uint64_t all = 0xff;
    assert_int_equal(gpualloc_choose(&s, all & ~M(4), 1, GPUALLOC_TOPOLOGY, NULL), M(5));
    assert_int_equal(gpualloc_choose(&s, all & ~M(4, 5), 4, GPUALLOC_TOPOLOGY, NULL),
                     M(0, 1, 2, 3));
    /* The fullest island that still has room, whichever side it is on. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 5, 6), 1, GPUALLOC_TOPOLOGY, NULL), M(4));
    assert_int_equal(gpualloc_choose(&s, all & ~M(1, 2, 4), 1, GPUALLOC_TOPOLOGY, NULL), M(0));
    /* Idle machine: the lowest GPU. */
    assert_int_equal(gpualloc_choose(&s, all, 1, GPUALLOC_TOPOLOGY, NULL), M(0));
    /* A 2-GPU job: the tightest island that holds two (B has 3 free, A 4). */
    assert_int_equal(gpualloc_choose(&s, all & ~M(4), 2, GPUALLOC_TOPOLOGY, NULL), M(5, 6));
    assert_int_equal(gpualloc_choose(&s, all & ~M(4, 5, 6), 2, GPUALLOC_TOPOLOGY, NULL), M(0, 1));
}

/* Wider levels break ties: 8 GPUs, NVLink pairs (0,1) (2,3) on NUMA node 0 and (4,5) (6,7)
 * on node 1, one PCIe switch per node. */
static void test_topology_best_fit_levels(void **state)
{
    (void)state;
    struct gpu_set s = islands();
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            links8[i * 8 + j] = i == j             ? GPU_LINK_SELF
                                : (i / 2 == j / 2) ? GPU_LINK_NVLINK
                                : (i / 4 == j / 4) ? GPU_LINK_SINGLE
                                                   : GPU_LINK_SYSTEM;
    uint64_t all = 0xff;
    /* Pairs (0,1) and (6,7) half used: node 1's is chosen only on a tie, so the lowest. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 6), 1, GPUALLOC_TOPOLOGY, NULL), M(1));
    /* Both pairs half used, node 1 busier: its pair. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 6, 4, 5), 1, GPUALLOC_TOPOLOGY, NULL), M(7));
    /* No pair half used: the whole pair on the busier node. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0, 1), 1, GPUALLOC_TOPOLOGY, NULL), M(2));
    assert_int_equal(gpualloc_choose(&s, all & ~M(4, 5), 2, GPUALLOC_TOPOLOGY, NULL), M(6, 7));
    /* A 3-GPU job on a node (PIX): the half-free pair first, then a whole pair, leaving the
     * other node whole. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(1), 3, GPUALLOC_TOPOLOGY, NULL), M(0, 2, 3));
}

/* Members come from the tightest subgroups, even when their indices interleave: NVLink
 * pairs (0,3) (1,4) (2,5), NODE between them. */
static void test_topology_best_fit_members(void **state)
{
    (void)state;
    struct gpu_info g[6];
    enum gpu_link l[36];
    memset(g, 0, sizeof(g));
    for (int i = 0; i < 6; i++) {
        g[i].index = i;
        for (int j = 0; j < 6; j++)
            l[i * 6 + j] = i == j           ? GPU_LINK_SELF
                           : i % 3 == j % 3 ? GPU_LINK_NVLINK
                                            : GPU_LINK_NODE;
    }
    struct gpu_set s = {.gpus = g, .n_gpus = 6, .link = l};
    /* 5 is busy: the job takes the lone 2 and the pair (0,3), leaving (1,4) whole. */
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2, 3, 4), 3, GPUALLOC_TOPOLOGY, NULL), M(0, 2, 3));
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2, 3, 4), 2, GPUALLOC_TOPOLOGY, NULL), M(0, 3));
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2, 3, 4), 1, GPUALLOC_TOPOLOGY, NULL), M(2));
}

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* 1-GPU and 4-GPU jobs come and go at random on the two islands. Whenever the free GPUs
 * include a whole island, a 4-GPU job gets a whole island; and a 1-GPU job never takes a
 * GPU of a wholly free island while the other island has room. */
static void test_topology_best_fit_random_run(void **state)
{
    (void)state;
    struct gpu_set s = islands();
    const uint64_t island[2] = {0x0f, 0xf0};
    uint64_t jobs[64];
    int n_jobs = 0, placed4 = 0, placed1 = 0, whole_probes = 0;
    uint64_t busy = 0, x = 12345;
    for (int step = 0; step < 20000; step++) {
        uint64_t free = 0xff & ~busy;
        bool whole_free = (free & island[0]) == island[0] || (free & island[1]) == island[1];
        /* A 4-GPU probe at every step, placed or not. */
        uint64_t four = gpualloc_choose(&s, free, 4, GPUALLOC_TOPOLOGY, NULL);
        if (whole_free) {
            whole_probes++;
            assert_true(four == island[0] || four == island[1]);
        }
        int r = (int)(lcg(&x) % 100);
        if (n_jobs > 0 && (r < 45 || n_jobs == 64)) { /* a job ends */
            int j = (int)(lcg(&x) % (uint64_t)n_jobs);
            busy &= ~jobs[j];
            jobs[j] = jobs[--n_jobs];
        } else if (r < 85) { /* a 1-GPU job */
            uint64_t one = gpualloc_choose(&s, free, 1, GPUALLOC_TOPOLOGY, NULL);
            if (!one)
                continue;
            int side = (one & island[0]) ? 0 : 1;
            bool other_has_room = (free & island[!side]) && (busy & island[!side]);
            if ((free & island[side]) == island[side])
                assert_false(other_has_room);
            busy |= one;
            jobs[n_jobs++] = one;
            placed1++;
        } else if (four) {
            busy |= four;
            jobs[n_jobs++] = four;
            placed4++;
        }
    }
    /* The run did exercise both kinds. */
    assert_true(placed1 > 1000 && placed4 > 100 && whole_probes > 1000);
}

static void test_topology_mixed_levels(void **state)
{
    (void)state;
    /* 4 GPUs: 0-1 on one PCIe switch, 2-3 on another, host bridge between them. */
    struct gpu_info g[4];
    enum gpu_link l[16];
    memset(g, 0, sizeof(g));
    for (int i = 0; i < 4; i++) {
        g[i].index = i;
        for (int j = 0; j < 4; j++)
            l[i * 4 + j] = i == j           ? GPU_LINK_SELF
                           : i / 2 == j / 2 ? GPU_LINK_SINGLE
                                            : GPU_LINK_HOSTBRIDGE;
    }
    struct gpu_set s = {.gpus = g, .n_gpus = 4, .link = l};
    assert_int_equal(gpualloc_choose(&s, M(1, 2, 3), 2, GPUALLOC_TOPOLOGY, NULL), M(2, 3));
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2, 3), 2, GPUALLOC_TOPOLOGY, NULL), M(0, 1));
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2, 3), 3, GPUALLOC_TOPOLOGY, NULL), M(0, 1, 2));
    /* Unknown pairs rank last. */
    l[2 * 4 + 3] = l[3 * 4 + 2] = GPU_LINK_UNKNOWN;
    assert_int_equal(gpualloc_choose(&s, M(1, 2, 3), 2, GPUALLOC_TOPOLOGY, NULL), M(1, 2));
}

static void test_topology_uniform_is_sequential(void **state)
{
    (void)state;
    struct gpu_set s = islands();
    for (int i = 0; i < 64; i++)
        links8[i] = i % 9 == 0 ? GPU_LINK_SELF : GPU_LINK_NODE;
    srand(7);
    for (int t = 0; t < 500; t++) {
        uint64_t cand = (uint64_t)rand() & 0xff;
        int k = 1 + rand() % 8;
        assert_int_equal(gpualloc_choose(&s, cand, k, GPUALLOC_TOPOLOGY, NULL),
                         gpualloc_choose(&s, cand, k, GPUALLOC_SEQUENTIAL, NULL));
    }
    /* No link matrix: the same. */
    s.link = NULL;
    assert_int_equal(gpualloc_choose(&s, 0xff & ~M(0, 1, 2), 2, GPUALLOC_TOPOLOGY, NULL), M(3, 4));
}

/* Issue 28, item 6: 8 GPUs behind NVSwitches (every pair NV18), 0-3 on NUMA node 0 and
 * 4-7 on node 1, as the loader gives them: link is the PCIe level (NODE inside a node,
 * SYS across), nvlinks the link counts. */
static int nvlinks8[64];
static struct gpu_set nvswitch_2numa(void)
{
    struct gpu_set s = islands();
    for (int i = 0; i < 8; i++) {
        gpus8[i].numa_node = i / 4;
        for (int j = 0; j < 8; j++) {
            links8[i * 8 + j] = i == j             ? GPU_LINK_SELF
                                : (i / 4 == j / 4) ? GPU_LINK_NODE
                                                   : GPU_LINK_SYSTEM;
            nvlinks8[i * 8 + j] = i == j ? 0 : 18;
        }
    }
    s.nvlinks = nvlinks8;
    return s;
}

static void test_numa_nvswitch(void **state)
{
    (void)state;
    struct gpu_set s = nvswitch_2numa();
    uint64_t all = 0xff;
    /* GPU 0 busy: the 4-GPU job gets node 1, not 1,2,3,4 across both sockets. */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0), 4, GPUALLOC_TOPOLOGY, NULL), M(4, 5, 6, 7));
    assert_int_equal(gpualloc_choose(&s, all & ~M(5), 4, GPUALLOC_TOPOLOGY, NULL), M(0, 1, 2, 3));
    /* A 2-GPU job with 3 free on node 0: both there (best fit keeps node 1 whole). */
    assert_int_equal(gpualloc_choose(&s, all & ~M(0), 2, GPUALLOC_TOPOLOGY, NULL), M(1, 2));
    /* Six GPUs span both nodes: the freer node whole, then the rest. */
    assert_int_equal(__builtin_popcountll(gpualloc_choose(&s, all, 6, GPUALLOC_TOPOLOGY, NULL)), 6);
}

/* One NUMA node: GPUs 0 and 1 meet at the host bridge but have NVLink, 2 and 3 share a
 * PCIe switch without it. The switch wins: NVLink does not override the PCIe level. */
static void test_pcie_switch_before_nvlink(void **state)
{
    (void)state;
    struct gpu_info g[4];
    enum gpu_link l[16];
    int nv[16];
    memset(g, 0, sizeof(g));
    memset(nv, 0, sizeof(nv));
    for (int i = 0; i < 4; i++) {
        g[i].index = i;
        for (int j = 0; j < 4; j++)
            l[i * 4 + j] = i == j               ? GPU_LINK_SELF
                           : (i >= 2 && j >= 2) ? GPU_LINK_SINGLE
                           : (i + j == 1)       ? GPU_LINK_HOSTBRIDGE
                                                : GPU_LINK_NODE;
    }
    nv[0 * 4 + 1] = nv[1 * 4 + 0] = 4;
    struct gpu_set s = {.gpus = g, .n_gpus = 4, .link = l, .nvlinks = nv};
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2, 3), 2, GPUALLOC_TOPOLOGY, NULL), M(2, 3));
    /* Without the switch pair, the host bridge pair (NVLink too) before NODE pairs. */
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2), 2, GPUALLOC_TOPOLOGY, NULL), M(0, 1));
}

/* Among pairs at one PCIe level, the NVLink pair wins over the lowest positions. */
static void test_nvlink_breaks_ties(void **state)
{
    (void)state;
    struct gpu_info g[4];
    enum gpu_link l[16];
    int nv[16];
    memset(g, 0, sizeof(g));
    memset(nv, 0, sizeof(nv));
    for (int i = 0; i < 4; i++) {
        g[i].index = i;
        for (int j = 0; j < 4; j++)
            l[i * 4 + j] = i == j ? GPU_LINK_SELF : GPU_LINK_NODE;
    }
    nv[2 * 4 + 3] = nv[3 * 4 + 2] = 2;
    struct gpu_set s = {.gpus = g, .n_gpus = 4, .link = l, .nvlinks = nv};
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2, 3), 2, GPUALLOC_TOPOLOGY, NULL), M(2, 3));
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2), 2, GPUALLOC_TOPOLOGY, NULL), M(0, 1));
    /* A 1-GPU job keeps the NVLink pair whole. */
    assert_int_equal(gpualloc_choose(&s, M(0, 1, 2, 3), 1, GPUALLOC_TOPOLOGY, NULL), M(0));
}

/* Four NUMA nodes of two GPUs: a job no node can hold spans the fewest nodes (3 GPUs on
 * nodes 0 and 2, not one on each of three nodes). */
static void test_numa_fewest_nodes(void **state)
{
    (void)state;
    struct gpu_set s = islands();
    for (int i = 0; i < 8; i++) {
        gpus8[i].numa_node = i / 2;
        for (int j = 0; j < 8; j++)
            links8[i * 8 + j] = i == j             ? GPU_LINK_SELF
                                : (i / 2 == j / 2) ? GPU_LINK_NODE
                                                   : GPU_LINK_SYSTEM;
    }
    assert_int_equal(gpualloc_choose(&s, M(0, 2, 4, 5, 6, 7), 3, GPUALLOC_TOPOLOGY, NULL),
                     M(0, 4, 5));
    /* Unknown nodes: no confinement, the pairwise choice alone. */
    gpus8[0].numa_node = -1;
    assert_int_equal(
        __builtin_popcountll(gpualloc_choose(&s, M(0, 2, 4, 5, 6, 7), 3, GPUALLOC_TOPOLOGY, NULL)),
        3);
}

static void test_random(void **state)
{
    (void)state;
    struct gpu_set s = islands();
    uint64_t cand = 0xff & ~M(1, 5);
    int seen[8] = {0};
    for (uint64_t seed = 0; seed < 400; seed++) {
        uint64_t a = seed, b = seed;
        uint64_t m = gpualloc_choose(&s, cand, 2, GPUALLOC_RANDOM, &a);
        /* Seeded: the same seed gives the same choice, and the state advances. */
        assert_int_equal(m, gpualloc_choose(&s, cand, 2, GPUALLOC_RANDOM, &b));
        assert_int_not_equal(a, seed);
        assert_int_equal(__builtin_popcountll(m), 2);
        assert_int_equal(m & ~cand, 0);
        for (int i = 0; i < 8; i++)
            seen[i] += (int)(m >> i & 1);
    }
    /* Every candidate is picked sometimes, the busy ones never. */
    for (int i = 0; i < 8; i++) {
        if (i == 1 || i == 5)
            assert_int_equal(seen[i], 0);
        else
            assert_true(seen[i] > 50);
    }
    uint64_t r = 1;
    assert_int_equal(gpualloc_choose(&s, cand, 6, GPUALLOC_RANDOM, &r), cand);
    assert_int_equal(gpualloc_choose(&s, cand, 7, GPUALLOC_RANDOM, &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strategy_names),
        cmocka_unit_test(test_sequential),
        cmocka_unit_test(test_topology_islands),
        cmocka_unit_test(test_topology_best_fit_keeps_islands_whole),
        cmocka_unit_test(test_topology_best_fit_levels),
        cmocka_unit_test(test_topology_best_fit_members),
        cmocka_unit_test(test_topology_best_fit_random_run),
        cmocka_unit_test(test_topology_mixed_levels),
        cmocka_unit_test(test_topology_uniform_is_sequential),
        cmocka_unit_test(test_numa_nvswitch),
        cmocka_unit_test(test_pcie_switch_before_nvlink),
        cmocka_unit_test(test_nvlink_breaks_ties),
        cmocka_unit_test(test_numa_fewest_nodes),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
