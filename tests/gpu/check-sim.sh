#!/bin/sh
# check-sim.sh: runs tests/gpu/check.sh, the real-hardware check of the GPU kit, against
# the NVML simulator, the fake libcuda (libgflow-cuda-sim.so) and the fake nvidia-smi,
# so that the script cannot rot. A meson test (make check), once per fixture.
# Usage: check-sim.sh BUILD_DIR FIXTURE.json [SMI_FIXTURE.json FAIL_CHECKS]
# It fails when check.sh reports any FAIL, or when a check that the fixture allows is
# missing from the summary (a check that silently stopped running).
# The simulated GPUs get device nodes: as root, `mknod DIR/nvidia<minor> c 195 <minor>`
# for each GPU's NVML minor, in a temp dir that check.sh (GFLOW_CHECK_DEV_DIR) and the
# fake libcuda (GFLOW_CUDA_SIM_DEV_DIR) use instead of /dev. No driver is behind them
# (open gives ENXIO), but the kernel's devices cgroup decides first (EPERM), so
# daemon.constrain_devices is tried for real. Where nodes or a v1 devices cgroup cannot
# be had, check.sh must SKIP constrain-devices instead.
# With SMI_FIXTURE the fake nvidia-smi reads that file instead (a second opinion that
# disagrees): then check.sh must exit 1 with FAIL lines for exactly the checks named in
# FAIL_CHECKS (space-separated) and PASS the others.
set -u
[ $# -eq 2 ] || [ $# -eq 4 ] || {
    echo "usage: check-sim.sh BUILD_DIR FIXTURE.json [SMI_FIXTURE.json FAIL_CHECKS]" >&2
    exit 2
}
smi_fixture=${3:-}
expect_fail=${4:-}
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/gflow-check-sim.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
# The fake libcuda writes its processes into the fixture: work on a copy.
cp "$2" "$tmp/gpus.json"
mkdir "$tmp/dev"
nodes=yes
for m in $(GFLOW_NVML_SIM=$2 GFLOW_NVML_LIBRARY=$build/libgflow-nvml-sim.so "$build/nvml_probe" |
    sed -n 's/^gpu\.[0-9]*\.minor=\([0-9][0-9]*\)$/\1/p'); do
    mknod "$tmp/dev/nvidia$m" c 195 "$m" 2>/dev/null || nodes=no
done

GFLOW_CHECK_DEV_DIR=$tmp/dev GFLOW_CUDA_SIM_DEV_DIR=$tmp/dev \
    GFLOW_FAKE_SMI_FIXTURE=$smi_fixture OUT=$tmp/out GFLOW_BIN=$build NVIDIA_SMI=$build/gflow-fake-nvidia-smi \
    GFLOW_NVML_LIBRARY=$build/libgflow-nvml-sim.so GFLOW_CUDA_LIBRARY=$build/libgflow-cuda-sim.so \
    GFLOW_NVML_SIM=$tmp/gpus.json sh "$here/check.sh" >"$tmp/stdout" 2>&1
rc=$?
cat "$tmp/out/summary.txt"
show() {
    echo "---- check.log"
    cat "$tmp/out/check.log"
    for f in "$tmp"/out/daemon-*.log; do
        [ -f "$f" ] && { echo "---- $f (last lines)"; tail -n 20 "$f"; }
    done
}
if [ -n "$smi_fixture" ]; then
    got=$(sed -n 's/^FAIL \([^:]*\):.*/\1/p' "$tmp/out/summary.txt" | sort | tr '\n' ' ')
    want=$(for c in $expect_fail; do echo "$c"; done | sort | tr '\n' ' ')
    if [ $rc -ne 1 ] || [ "$got" != "$want" ]; then
        echo "check-sim: nvidia-smi disagreeing: check.sh exited $rc with FAIL for '$got', expected 1 and '$want'"
        show
        exit 1
    fi
    echo "check-sim: check.sh noticed nvidia-smi disagreeing: FAIL $got"
    exit 0
fi
if [ $rc -ne 0 ]; then
    echo "check-sim: check.sh exited $rc"
    show
    exit 1
fi
n=$(GFLOW_NVML_SIM=$2 "$build/gflow-fake-nvidia-smi" -L | grep -c "^GPU ")
# health and stray need issue 28's health and stray parts of gflowd (until then they FAIL).
want="nvidia-smi cuda ginfo outside-process outside-blocks outside-ignore job-process
no-gpu-job reuse-after-cancel gpu-id-format-uuid health"
# GPUs in MIG mode take no whole-GPU jobs: a --mig job is checked instead.
mig=$(sed -n 's/^gpu\.\([0-9]*\)\.mig_mode=current:1.*/\1/p' "$tmp/out/nvml_probe.txt" 2>/dev/null |
    tr '\n' ' ')
whole=0
i=0
while [ $i -lt "$n" ]; do
    case " $mig " in
    *" $i "*) ;;
    *) want="$want pinned-gpu-$i"; whole=$((whole + 1)) ;;
    esac
    i=$((i + 1))
done
[ -n "$mig" ] && want="$want mig-job mig-1"
[ "$whole" -ge 1 ] && want="$want shared"
[ "$whole" -ge 2 ] && want="$want order-unset order-fastest-first order-pci-bus-id p2p concurrent stray"
# constrain-devices: tried for real where this root made the nodes and can make a v1
# devices cgroup; else check.sh must say why it skipped it.
skip_ok=""
if [ "$whole" -ge 2 ]; then
    if [ "$nodes" = yes ] && [ "$(id -u)" = 0 ] && [ -w /sys/fs/cgroup/devices ]; then
        want="$want constrain-devices"
    else
        skip_ok="constrain-devices"
    fi
fi
[ "$n" -ge 2 ] && want="$want topology"
for c in $want; do
    if ! grep -q "^PASS $c:" "$tmp/out/summary.txt"; then
        echo "check-sim: no PASS line for '$c'"
        show
        exit 1
    fi
done
for c in $skip_ok; do
    if ! grep -qE "^(PASS|SKIP) $c:" "$tmp/out/summary.txt"; then
        echo "check-sim: no PASS or SKIP line for '$c'"
        show
        exit 1
    fi
done
if [ "$whole" -lt 2 ] && ! grep -q '^NOTE ordering:' "$tmp/out/summary.txt"; then
    echo "check-sim: fewer than two whole GPUs but no NOTE that ordering is not tested"
    exit 1
fi
grep -q '^NOTE mig:' "$tmp/out/summary.txt" || { echo "check-sim: MIG state not recorded"; exit 1; }
echo "check-sim: $(grep -c '^PASS' "$tmp/out/summary.txt") checks passed"
