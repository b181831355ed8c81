#!/bin/sh
# check-sim.sh: runs tests/gpu/check.sh, the real-hardware check of the GPU kit, against
# the NVML simulator, the fake libcuda (libgflow-cuda-sim.so) and the fake nvidia-smi,
# so that the script cannot rot. A meson test (make check), once per fixture.
# Usage: check-sim.sh BUILD_DIR FIXTURE.json [SMI_FIXTURE.json FAIL_CHECKS]
# It fails when check.sh reports any FAIL, or when a check that the fixture allows is
# missing from the summary (a check that silently stopped running).
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
want="nvidia-smi cuda ginfo outside-process outside-blocks outside-ignore job-process
no-gpu-job reuse-after-cancel gpu-id-format-uuid"
i=0
while [ $i -lt "$n" ]; do
    want="$want pinned-gpu-$i"
    i=$((i + 1))
done
[ "$n" -ge 2 ] && want="$want order-unset order-fastest-first order-pci-bus-id topology"
for c in $want; do
    if ! grep -q "^PASS $c:" "$tmp/out/summary.txt"; then
        echo "check-sim: no PASS line for '$c'"
        show
        exit 1
    fi
done
if [ "$n" -eq 1 ] && ! grep -q '^NOTE ordering:' "$tmp/out/summary.txt"; then
    echo "check-sim: one GPU but no NOTE that ordering is not tested"
    exit 1
fi
grep -q '^NOTE mig:' "$tmp/out/summary.txt" || { echo "check-sim: MIG state not recorded"; exit 1; }
echo "check-sim: $(grep -c '^PASS' "$tmp/out/summary.txt") checks passed"
