/* migcaps: daemon.constrain_devices for MIG jobs. A MIG job opens its instance through
 * its GPU's /dev/nvidia<minor>, which it must be allowed; what keeps it off the other
 * instances of that GPU are their capability nodes, /dev/nvidia-caps/nvidia-cap<N>,
 * where N is the "DeviceFileMinor" of
 * /proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<gi>/access (the GPU instance) and
 * of .../gi<gi>/ci<ci>/access (the compute instance). The job is denied the nodes of
 * every other instance on its GPUs, except those it shares (its own GPU instance's,
 * when another compute instance is in it). The major is the node's (or /proc/devices'
 * "nvidia-caps"). $GFLOW_NVIDIA_CAPS_PROC and $GFLOW_NVIDIA_CAPS_DIR stand for
 * /proc/driver/nvidia/capabilities and /dev/nvidia-caps (tests). */
#ifndef GFLOWD_MIGCAPS_H
#define GFLOWD_MIGCAPS_H

#include "gpuinfo.h"
#include "util.h"

/* Appends ",MAJOR:MINOR" for each node to deny the job holding the instances `mine`
 * ("MIG-a,MIG-b") to sb (a leading comma only when sb is not empty). 0, or -1 with
 * *err ("cannot constrain the job to its MIG instance ...: cannot read PATH: ..."). */
int migcaps_deny(const struct gpu_set *set, const char *mine, struct strbuf *sb, char **err);

#endif
