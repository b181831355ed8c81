#!/bin/sh
# make-gpu-kit.sh: builds the relocatable GPU kit (make gpu-kit; docs/gpu-kit.md):
#   KIT_DIR/gflow-gpu-kit-<version>.tar.gz holding gflow-gpu-kit-<version>/
#     check.sh        tests/gpu/check.sh, run on the GPU machine
#     README.md       docs/gpu-kit.md
#     bin/            gflowd, the commands, gflow-shim (gflowd finds it beside itself),
#                     nvml_probe, cuda_probe, gflow-json-flat, gflow-nvml-dump;
#                     RUNPATH $ORIGIN/../lib
#     lib/            their shared libraries except glibc's own; RUNPATH $ORIGIN
# No python, no CUDA (the driver's libcuda and libnvidia-ml are the target's), no NVML
# simulator. Then tests/gpu/kit-test.sh checks the tarball where it was unpacked.
# Usage: make-gpu-kit.sh BUILD_DIR KIT_DIR
set -eu
[ $# -eq 2 ] || { echo "usage: make-gpu-kit.sh BUILD_DIR KIT_DIR" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2"
kit_dir=$(cd "$2" && pwd)
command -v patchelf >/dev/null || { echo "make-gpu-kit: patchelf is missing (make deps)" >&2; exit 1; }
version=$(cat "$repo/VERSION")
name=gflow-gpu-kit-$version
programs="gflowd gbatch gqueue ginfo gjob gctl gcancel gflow-shim nvml_probe cuda_probe gflow-json-flat
gflow-nvml-dump"

stage=$(mktemp -d /tmp/gflow-kit.XXXXXX)
trap 'rm -rf "$stage"' EXIT
root=$stage/$name
mkdir -p "$root/bin" "$root/lib"

# glibc's own libraries (and the loader, the vDSO) come from the target system: a copy
# would have to match its loader exactly.
is_glibc() {
    case $1 in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | \
        librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libnsl.so.* | libmvec.so.*)
        return 0 ;;
    esac
    return 1
}

for p in $programs; do
    [ -x "$build/$p" ] || { echo "make-gpu-kit: $build/$p is not built" >&2; exit 1; }
    cp "$build/$p" "$root/bin/$p"
    strip --strip-debug "$root/bin/$p"
    # ldd lists the whole closure (a library's own dependencies too): "soname => path (...)".
    env -u LD_LIBRARY_PATH ldd "$build/$p" | while read -r soname arrow path _; do
        [ "$arrow" = "=>" ] || continue
        is_glibc "$soname" && continue
        case $path in
        /*) [ -f "$root/lib/$soname" ] || cp -L "$path" "$root/lib/$soname" ;;
        *) echo "make-gpu-kit: $p needs $soname, which is not found" >&2; exit 1 ;;
        esac
    done
done
chmod u+w "$root"/lib/*
for f in "$root"/bin/*; do
    # The shim and the commands are static (no interpreter, nothing to find; patchelf
    # would break them).
    patchelf --print-interpreter "$f" >/dev/null 2>&1 || continue
    patchelf --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$root"/lib/*; do
    patchelf --set-rpath '$ORIGIN' "$f"
done
cp "$repo/tests/gpu/check.sh" "$root/check.sh"
chmod 755 "$root/check.sh"
cp "$repo/docs/gpu-kit.md" "$root/README.md"
"$build/gflowd" --version >"$root/VERSION"
tarball=$kit_dir/$name.tar.gz
tar -czf "$tarball.tmp" -C "$stage" "$name"
mv "$tarball.tmp" "$tarball"
echo "make-gpu-kit: $tarball ($(du -k "$tarball" | cut -f1) KiB, $(ls "$root/lib" | wc -l) libraries)"
