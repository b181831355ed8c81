#!/bin/sh
# real-nvml.sh: compares gflow's reading of the real NVIDIA driver (gflow-nvml-dump,
# the same loader as gflowd) with nvidia-smi's, field for field:
#   nvidia-smi --query-gpu=index,uuid,pci.bus_id,memory.total --format=csv
# Needs a machine with an NVIDIA GPU and driver; elsewhere it says so and exits 0.
# Not part of `make check`. Usage: tests/gpu/real-nvml.sh [BUILD_DIR]
# (default: $GFLOW_BUILD_DIR, else ./build).
# Still to come with the daemon side of issue 3: run one job on GPU 1 and check with
# nvidia-smi which physical GPU it got.
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${GFLOW_BUILD_DIR:-$here/../../build}}
dump=$build/gflow-nvml-dump

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "real-nvml: no NVIDIA GPU here; skipped (nvidia-smi missing or no driver/GPU)"
    exit 0
fi
if [ ! -x "$dump" ]; then
    echo "real-nvml: $dump not built (ninja -C $build gflow-nvml-dump)" >&2
    exit 1
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

nvidia-smi --query-gpu=index,uuid,pci.bus_id,memory.total --format=csv >"$tmp/smi.csv" || {
    echo "real-nvml: nvidia-smi --query-gpu failed" >&2
    exit 1
}
# Our reading must come from the real driver, not a simulator named in the environment.
if ! env -u GFLOW_NVML_LIBRARY -u GFLOW_NVML_SIM "$dump" >"$tmp/ours.csv" 2>"$tmp/ours.err"; then
    echo "real-nvml: FAIL: nvidia-smi sees GPUs but gflow does not: $(cat "$tmp/ours.err")" >&2
    exit 1
fi

if diff -u "$tmp/smi.csv" "$tmp/ours.csv"; then
    echo "real-nvml: OK: $(($(wc -l <"$tmp/ours.csv") - 1)) GPU(s) read alike by gflow and nvidia-smi"
    env -u GFLOW_NVML_LIBRARY -u GFLOW_NVML_SIM "$dump" -v | grep '^#'
    exit 0
fi
echo "real-nvml: FAIL: gflow's reading (+) differs from nvidia-smi's (-)" >&2
exit 1
