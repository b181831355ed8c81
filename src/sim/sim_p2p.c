/* sim_p2p: the peer-to-peer rule shared by the NVML simulator and the fake libcuda
 * (sim_p2p.h). */
#include "sim_p2p.h"

static long long sim_p2p_int(json_t *gpu, const char *key, long long dflt)
{
    json_t *v = json_object_get(gpu, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

bool sim_p2p_nvlink(json_t *gpus, size_t a, size_t b)
{
    json_t *ga = json_array_get(gpus, a), *gb = json_array_get(gpus, b);
    if (!ga || !gb)
        return false;
    if (sim_p2p_int(ga, "nvswitch_links", 0) > 0 && sim_p2p_int(gb, "nvswitch_links", 0) > 0)
        return true;
    size_t i;
    json_t *p;
    json_array_foreach (json_object_get(ga, "nvlink"), i, p) {
        if (json_is_integer(p) && json_integer_value(p) == (long long)b)
            return true;
    }
    return false;
}

bool sim_p2p_access(json_t *gpus, size_t a, size_t b)
{
    json_t *ga = json_array_get(gpus, a), *gb = json_array_get(gpus, b);
    if (!ga || !gb || a == b)
        return false;
    if (sim_p2p_nvlink(gpus, a, b))
        return true;
    /* A PCIe path that forbids P2P (across the sockets of many servers, in most VMs). */
    return !json_is_false(json_object_get(ga, "pcie_p2p")) &&
           !json_is_false(json_object_get(gb, "pcie_p2p"));
}
