#!/bin/sh
# cuda-sim-test.sh: the fake libcuda (libgflow-cuda-sim.so) numbers and selects devices
# as CUDA does (also behind a devices cgroup), answers peer access as NVML does, and its
# contexts appear in (and leave) the fixture NVML reads. Through
# cuda_probe and the fake nvidia-smi, as check.sh uses them. A meson test.
# Usage: cuda-sim-test.sh BUILD_DIR
set -u
build=$(cd "$1" && pwd)
tmp=$(mktemp -d /tmp/gflow-cuda-sim.XXXXXX) || exit 1
pids=""
trap 'for p in $pids; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
# GPU 0: bus 18, slower; GPU 1: bus 2A, faster (FASTEST_FIRST puts it first); GPU 0 has
# a MIG instance.
cat >"$tmp/gpus.json" <<'EOF'
{"gpus": [
  {"name": "A", "uuid": "GPU-0a000000-0000-4000-8000-000000000000", "pci_bus_id": "00000000:18:00.0",
   "memory_total_mib": 1000, "memory_used_mib": 0, "cuda_speed": 1,
   "mig_devices": [{"uuid": "MIG-0c000000-0000-4000-8000-000000000000", "profile": "1g.10gb"}]},
  {"name": "B", "uuid": "GPU-0b000000-0000-4000-8000-000000000001", "pci_bus_id": "00000000:2A:00.0",
   "memory_total_mib": 1000, "cuda_speed": 2}
]}
EOF
export GFLOW_NVML_SIM="$tmp/gpus.json" GFLOW_CUDA_LIBRARY="$build/libgflow-cuda-sim.so"
failed=0

# expect ORDER VISIBLE BUSES...: the bus ids CUDA shows, in order ("-": unset).
expect() {
    order=$1
    visible=$2
    shift 2
    want="$*"
    got=$(
        if [ "$order" = - ]; then unset CUDA_DEVICE_ORDER; else export CUDA_DEVICE_ORDER="$order"; fi
        if [ "$visible" = - ]; then unset CUDA_VISIBLE_DEVICES; else export CUDA_VISIBLE_DEVICES="$visible"; fi
        "$build/cuda_probe" | sed -n 's/^device\.[0-9]*\.bus_id=0000:\(.*\)/\1/p' | tr '\n' ' '
    )
    got=${got% }
    if [ "$got" != "$want" ]; then
        echo "FAIL: CUDA_DEVICE_ORDER=$order CUDA_VISIBLE_DEVICES='$visible': got '$got', want '$want'"
        failed=1
    fi
}
expect - - "2A:00.0 18:00.0"
expect PCI_BUS_ID - "18:00.0 2A:00.0"
expect FASTEST_FIRST 0 "2A:00.0"
expect PCI_BUS_ID 0 "18:00.0"
expect PCI_BUS_ID "1,0" "2A:00.0 18:00.0"
expect PCI_BUS_ID "1,foo,0" "2A:00.0"
expect PCI_BUS_ID "0,0,1" "18:00.0"
expect PCI_BUS_ID "2,0" ""
expect PCI_BUS_ID "-1" ""
expect PCI_BUS_ID ",0" ""
expect PCI_BUS_ID "" ""
expect - "GPU-0b" "2A:00.0"
expect - "GPU-0" ""
expect - "GPU-0a000000-0000-4000-8000-000000000000,GPU-0b" "18:00.0 2A:00.0"
expect - "GPU-ff" ""
expect - "MIG-0c000000-0000-4000-8000-000000000000,1" "18:00.0"
expect - "MIG-0c000000-0000-4000-8000-000000000001" ""
out=$(CUDA_VISIBLE_DEVICES= "$build/cuda_probe")
echo "$out" | grep -qx 'count=0' || { echo "FAIL: CUDA_VISIBLE_DEVICES='': $out"; failed=1; }

apps() { "$build/gflow-fake-nvidia-smi" --query-compute-apps=pid,used_memory,gpu_bus_id \
    --format=csv,noheader,nounits | tr -d ' '; }
wait_file() {
    i=0
    while [ ! -s "$1" ]; do
        i=$((i + 1))
        [ $i -lt 100 ] || return 1
        sleep 0.1
    done
}

# A context (and an allocation) shows in the fixture on its device, MIG included, and
# leaves it when the process releases it.
CUDA_DEVICE_ORDER=PCI_BUS_ID "$build/cuda_probe" --hold 60 --device 1 --alloc 100 \
    --ready "$tmp/r1" >"$tmp/p1" 2>&1 &
p1=$!
pids="$pids $p1"
CUDA_VISIBLE_DEVICES=MIG-0c000000-0000-4000-8000-000000000000 "$build/cuda_probe" --hold 60 \
    --ready "$tmp/r2" >"$tmp/p2" 2>&1 &
p2=$!
pids="$pids $p2"
wait_file "$tmp/r1" && wait_file "$tmp/r2" || { echo "FAIL: no context: $(cat "$tmp/p1" "$tmp/p2")"; exit 1; }
a=$(apps)
echo "$a" | grep -qx "$p1,356,00000000:2A:00.0" || { echo "FAIL: pid $p1 (356 MiB on 2A) not in: $a"; failed=1; }
echo "$a" | grep -qx "$p2,256,00000000:18:00.0" || { echo "FAIL: pid $p2 (MIG on 18) not in: $a"; failed=1; }
kill -TERM "$p1"
wait "$p1"
apps | grep -q "^$p1," && { echo "FAIL: pid $p1 still listed after SIGTERM"; failed=1; }
# A process killed outright is dropped at the next rewrite.
kill -KILL "$p2"
wait "$p2" 2>/dev/null
"$build/cuda_probe" --hold 0 >/dev/null 2>&1 || { echo "FAIL: a context after a SIGKILL"; failed=1; }
a=$(apps)
[ -z "$a" ] || { echo "FAIL: stale entries: $a"; failed=1; }
# Peer access (cuDeviceCanAccessPeer) is what NVML's P2P read status says: over NVLink
# (0-1, though GPU 1's PCIe forbids P2P), over PCIe (0-2), not at all (1-2).
cat >"$tmp/p2p.json" <<'EOF'
{"gpus": [
  {"name": "A", "pci_bus_id": "00000000:18:00.0", "nvlink": [1]},
  {"name": "B", "pci_bus_id": "00000000:2A:00.0", "nvlink": [0], "pcie_p2p": false},
  {"name": "C", "pci_bus_id": "00000000:3B:00.0"}
]}
EOF
peers=$(GFLOW_NVML_SIM=$tmp/p2p.json CUDA_DEVICE_ORDER=PCI_BUS_ID "$build/cuda_probe" --peers |
    sed -n 's/^peer\.//p' | tr '\n' ' ')
[ "$peers" = "0.1=1 0.2=1 1.0=1 1.2=0 2.0=1 2.1=0 " ] || { echo "FAIL: peers '$peers'"; failed=1; }
reads=$(GFLOW_NVML_SIM=$tmp/p2p.json GFLOW_NVML_LIBRARY=$build/libgflow-nvml-sim.so \
    "$build/nvml_probe" | sed -n 's/^p2p\.\([0-9]\.[0-9]\)\.read=/\1=/p' | tr '\n' ' ')
[ "$reads" = "0.1=OK 0.2=OK 1.0=OK 1.2=CHIPSET_NOT_SUPPORTED 2.0=OK 2.1=CHIPSET_NOT_SUPPORTED " ] ||
    { echo "FAIL: NVML P2P read '$reads'"; failed=1; }

# Behind a devices cgroup that denies GPU 0's node, CUDA numbers only GPUs 1 and 2, from
# 0 (GFLOW_CUDA_SIM_DEV_DIR). Needs root and the cgroup v1 devices controller.
cg=/sys/fs/cgroup/devices/gflow-cuda-sim-test.$$
if mkdir "$tmp/dev" && mknod "$tmp/dev/nvidia0" c 195 0 2>/dev/null &&
    mknod "$tmp/dev/nvidia1" c 195 1 && mknod "$tmp/dev/nvidia2" c 195 2 &&
    mkdir "$cg" 2>/dev/null; then
    echo "c 195:0 rwm" >"$cg/devices.deny"
    export GFLOW_CUDA_SIM_DEV_DIR=$tmp/dev GFLOW_NVML_SIM=$tmp/p2p.json CUDA_DEVICE_ORDER=PCI_BUS_ID
    got=$(sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2/cuda_probe"' sh "$cg" "$build" 2>&1 |
        sed -n 's/^device\.\([0-9]\)\.bus_id=0000:/\1:/p' | tr '\n' ' ')
    [ "$got" = "0:2A:00.0 1:3B:00.0 " ] || { echo "FAIL: behind the cgroup CUDA shows '$got'"; failed=1; }
    got=$("$build/cuda_probe" | grep -c '^device\.[0-9]*\.bus_id=')
    [ "$got" = 3 ] || { echo "FAIL: outside the cgroup CUDA shows $got devices"; failed=1; }
    unset GFLOW_CUDA_SIM_DEV_DIR CUDA_DEVICE_ORDER
    rmdir "$cg"
else
    echo "cuda-sim-test: no devices cgroup case (needs root and cgroup v1 devices)"
fi
[ $failed -eq 0 ] && echo "cuda-sim-test: all cases passed"
exit $failed
