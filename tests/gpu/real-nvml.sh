#!/bin/sh
# real-nvml.sh: compares gflow's reading of the real NVIDIA driver (gflow-nvml-dump,
# the same loader as gflowd) with nvidia-smi's, field for field:
#   nvidia-smi --query-gpu=index,uuid,pci.bus_id,memory.total --format=csv
# Needs a machine with an NVIDIA GPU and driver; elsewhere it says so and exits 0.
# Not part of `make check`. Usage: tests/gpu/real-nvml.sh [BUILD_DIR]
# (default: $GFLOW_BUILD_DIR, else ./build).
# Then it runs one job on GPU 1 (GPU 0 on a one-GPU machine) under a sandboxed gflowd and
# checks through CUDA (cuda_bus_id.py, libcuda from the driver) that the job's device 0 is
# that physical GPU: the bus id nvidia-smi gives for the index gflow allocated.
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

if ! diff -u "$tmp/smi.csv" "$tmp/ours.csv"; then
    echo "real-nvml: FAIL: gflow's reading (+) differs from nvidia-smi's (-)" >&2
    exit 1
fi
ngpus=$(($(wc -l <"$tmp/ours.csv") - 1))
echo "real-nvml: OK: $ngpus GPU(s) read alike by gflow and nvidia-smi"
env -u GFLOW_NVML_LIBRARY -u GFLOW_NVML_SIM "$dump" -v | grep '^#'

# ---- one job on one physical GPU ----
target=1
[ "$ngpus" -ge 2 ] || target=0
export GFLOW_DAEMON__DATA_DIR="$tmp/data" GFLOW_DAEMON__SOCKET_PATH="$tmp/gflowd.sock"
export GFLOW_SOCKET="$tmp/gflowd.sock"
unset GFLOW_NVML_LIBRARY GFLOW_NVML_SIM CUDA_VISIBLE_DEVICES
trap '"$build/gflowd" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
"$build/gflowd" up --gpus "$target" || exit 1
id=$("$build/gbatch" --parsable --gpus 1 python3 "$here/cuda_bus_id.py") || exit 1
i=0
until "$build/gqueue" -j "$id" -a -f ST | grep -Eq 'CD|F|CA|TO'; do
    i=$((i + 1))
    [ $i -lt 600 ] || { echo "real-nvml: FAIL: job $id did not end within 60 s" >&2; exit 1; }
    sleep 0.1
done
out=$("$build/gjob" log "$id")
want=$(awk -F', ' -v t="$target" 'NR > 1 && $1 == t { print $3 }' "$tmp/smi.csv")
got=$(echo "$out" | sed -n 's/.*bus_id=//p')
echo "real-nvml: job $id on GPU $target: $out"
# nvidia-smi writes 00000000:3B:00.0, CUDA 0000:3B:00.0: compare bus:device.function.
norm() { echo "$1" | tr a-f A-F | sed 's/^.*:\([0-9A-F]*:[0-9A-F]*\.[0-9A-F]*\)$/\1/'; }
if [ -n "$got" ] && [ "$(norm "$want")" = "$(norm "$got")" ]; then
    echo "real-nvml: OK: the job's CUDA device 0 is GPU $target ($want)"
    exit 0
fi
echo "real-nvml: FAIL: the job's CUDA device 0 is $got, GPU $target is $want" >&2
exit 1
