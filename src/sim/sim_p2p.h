/* sim_p2p: the one rule both simulators (nvml_sim.c's nvmlDeviceGetP2PStatus and
 * cuda_sim.c's cuDeviceCanAccessPeer) answer peer-to-peer questions by, so that NVML and
 * CUDA agree as they do on a real machine (docs/simulator.md, "P2P"). */
#ifndef GFLOW_SIM_P2P_H
#define GFLOW_SIM_P2P_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Whether an NVLink joins GPUs a and b (indices into the fixture's "gpus"): both have
 * NVSwitch links, or a lists b in its "nvlink". */
bool sim_p2p_nvlink(json_t *gpus, size_t a, size_t b);
/* Whether a can read/write b's memory peer to peer: over NVLink, or over PCIe unless
 * either GPU has "pcie_p2p": false. */
bool sim_p2p_access(json_t *gpus, size_t a, size_t b);

#endif
