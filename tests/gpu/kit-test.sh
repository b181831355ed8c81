#!/bin/sh
# kit-test.sh: checks a GPU kit tarball (make gpu-kit) the way the GPU machine will use
# it: unpacked into a fresh temp dir, with LD_LIBRARY_PATH unset, every dynamic program's
# RUNPATH is $ORIGIN/../lib and ldd resolves every library that is not glibc's from the
# kit's lib/ (the static ones need none); the kit holds no python and no CUDA or NVML
# library; the programs run; and the kit's own check.sh, with its own bin/, passes
# against the NVML simulator, the fake libcuda and the fake nvidia-smi of BUILD_DIR on
# FIXTURE.
# Usage: kit-test.sh TARBALL BUILD_DIR FIXTURE.json
set -u
[ $# -eq 3 ] || { echo "usage: kit-test.sh TARBALL BUILD_DIR FIXTURE.json" >&2; exit 2; }
tarball=$1
build=$(cd "$2" && pwd)
tmp=$(mktemp -d /tmp/gflow-kit-test.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "kit-test: FAIL: $*" >&2; exit 1; }

tar -xzf "$tarball" -C "$tmp" || fail "cannot unpack $tarball"
kit=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'gflow-gpu-kit-*')
[ -n "$kit" ] || fail "no gflow-gpu-kit-* folder in $tarball"
[ -x "$kit/check.sh" ] && [ -f "$kit/README.md" ] || fail "check.sh or README.md missing"
unset LD_LIBRARY_PATH
for p in gflowd gbatch gqueue ginfo gjob gctl gcancel gflow-shim nvml_probe cuda_probe \
    gflow-json-flat gflow-nvml-dump; do
    f=$kit/bin/$p
    [ -x "$f" ] || fail "bin/$p missing"
    # The shim and the commands are static: they must need no library at all.
    if ! readelf -l "$f" | grep -q 'program interpreter'; then
        readelf -d "$f" | grep -q '(NEEDED)' && fail "bin/$p: static, yet needs $(readelf -d "$f" | grep '(NEEDED)')"
        continue
    fi
    runpath=$(readelf -d "$f" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    [ "$runpath" = '$ORIGIN/../lib' ] || fail "bin/$p: RUNPATH '$runpath', want \$ORIGIN/../lib"
    ldd "$f" >"$tmp/ldd" 2>&1 || fail "ldd bin/$p: $(cat "$tmp/ldd")"
    grep -q 'not found' "$tmp/ldd" && fail "bin/$p: $(grep 'not found' "$tmp/ldd")"
    # Every library the kit has must be the one ldd picks, not a system copy.
    for lib in "$kit"/lib/*; do
        s=$(basename "$lib")
        where=$(sed -n "s/^[[:space:]]*$s => \([^ ]*\).*/\1/p" "$tmp/ldd")
        [ -z "$where" ] || [ "$(readlink -f "$where")" = "$(readlink -f "$lib")" ] || fail "bin/$p: $s resolves to $where, not the kit's"
    done
done
for lib in "$kit"/lib/*; do
    case $(basename "$lib") in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*)
        fail "glibc library $(basename "$lib") in the kit" ;;
    libcuda* | libnvidia* | libpython*) fail "$(basename "$lib") in the kit" ;;
    esac
    ldd "$lib" | grep -q 'not found' && fail "lib/$(basename "$lib"): $(ldd "$lib" | grep 'not found')"
done
find "$kit" -name '*.py' -o -name 'python*' | grep -q . && fail "python in the kit"
"$kit/bin/gflowd" --version >/dev/null || fail "bin/gflowd --version does not run"
"$kit/bin/ginfo" --help >/dev/null || fail "bin/ginfo --help does not run"

# The unpacked kit's check.sh with its own programs (GFLOW_BIN unset).
cp "$3" "$tmp/gpus.json"
OUT=$tmp/out NVIDIA_SMI=$build/gflow-fake-nvidia-smi GFLOW_NVML_LIBRARY=$build/libgflow-nvml-sim.so \
    GFLOW_CUDA_LIBRARY=$build/libgflow-cuda-sim.so GFLOW_NVML_SIM=$tmp/gpus.json \
    env -u GFLOW_BIN "$kit/check.sh" >"$tmp/check.out" 2>&1 ||
    { cat "$tmp/check.out" "$tmp/out/check.log"; fail "the kit's check.sh failed on the simulator"; }
echo "kit-test: $tarball is relocatable: $(ls "$kit/lib" | wc -l) libraries from its lib/; check.sh: $(grep -c '^PASS' "$tmp/out/summary.txt") checks passed, $(grep -c '^SKIP' "$tmp/out/summary.txt") skipped"
