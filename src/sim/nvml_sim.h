/* nvml_sim: what the simulator's files share (nvml_sim.c: the fixture, GPUs and
 * metrics; nvml_sim_mig.c: MIG devices). Not installed; the library's only interface is
 * the NVML symbols it exports. */
#ifndef GFLOW_NVML_SIM_H
#define GFLOW_NVML_SIM_H

#include <jansson.h>
#include <stdbool.h>

#include "nvml_types.h"

#define SIM_EXPORT __attribute__((visibility("default")))

/* The error code configured for fn in a "fail" map (exact name, then without _vN). */
nvmlReturn_t sim_fail_in(json_t *map, const char *fn);
/* Starts a call: loads the fixture into *root and applies the global "fail" map. */
nvmlReturn_t sim_begin(const char *fn, json_t **root, bool need_init);
/* Starts a per-device call: as sim_begin, then finds the GPU (*gpu, its fixture object)
 * and applies its own "fail" and "hang" maps. */
nvmlReturn_t sim_begin_dev(const char *fn, nvmlDevice_t dev, json_t **root, json_t **gpu);
long long sim_int(json_t *obj, const char *key, long long dflt);
const char *sim_str(json_t *obj, const char *key, const char *dflt);

/* Starts a per-device call: the fixture in *root (the caller's to decref), the GPU's
 * object in *gpu, the global and the GPU's own "fail" maps and "hang" applied. */
nvmlReturn_t sim_begin_dev(const char *fn, nvmlDevice_t dev, json_t **root, json_t **gpu);

/* Whether dev is a MIG device handle (nvml_sim_mig.c). GPU handles are index + 1; MIG
 * handles carry a tag bit above any GPU index, the parent's index and the instance's
 * position, so that no GPU call mistakes one for the other. */
bool sim_mig_is_handle(nvmlDevice_t dev);
/* As sim_begin_dev for a MIG handle: *obj is the instance's fixture object, with its
 * "name", "uuid", "gi_id" (its position) and "ci_id" (0) filled in when the fixture leaves
 * them out, so the per-device calls
 * (UUID, name, memory, processes) answer for the instance. The global "fail" map
 * applies, then the instance's own (not its GPU's). */
nvmlReturn_t sim_mig_begin_dev(const char *fn, nvmlDevice_t dev, json_t **root, json_t **obj);
/* Fills in a parsed fixture's MIG instances' default names, UUIDs and ids. */
void sim_mig_fill_defaults(json_t *root);

#endif
