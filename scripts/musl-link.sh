#!/bin/sh
# Builds a program against musl, statically and position-independent (static-pie, so it
# keeps ASLR): meson.build's gflow-shim where musl-gcc is there. A static glibc program
# spends ~1 ms of CPU starting on a VM (CPUID traps in its CPU-feature and cache probes,
# ~25 page faults), a musl one ~0.3 ms (docs/design.md §7, issue 10); the shim starts once
# per job.
#
#   musl-link.sh MUSL_GCC OUTPUT DEPFILE WORKDIR [COMPILER FLAG ...] -- SOURCE...
#
# Each source is compiled into WORKDIR, and DEPFILE lists every header they read.
# musl-gcc searches musl's own headers only; the kernel's (linux/, asm/) and jansson's
# (its header is named by src/core/job.h; nothing of it is linked) come from the system.
set -eu
cc=$1 out=$2 depfile=$3 dir=$4
shift 4
flags=
while [ "$1" != "--" ]; do
    flags="$flags $1"
    shift
done
shift

inc="$dir/include"
mkdir -p "$inc"
multiarch=$(gcc -print-multiarch)
for h in linux asm-generic jansson.h jansson_config.h; do
    ln -sfn "/usr/include/$h" "$inc/$h"
done
ln -sfn "/usr/include/$multiarch/asm" "$inc/asm"

lib=/usr/lib/$multiarch
case $multiarch in *-linux-gnu) lib=/usr/lib/${multiarch%-gnu}-musl ;; esac

objs=
for src; do
    obj="$dir/$(basename "$src" .c).o"
    # shellcheck disable=SC2086 # flags are words
    "$cc" -std=gnu11 -O2 -g -fPIE -Wall -Wextra $flags -isystem "$inc" \
        -MD -MF "$obj.d" -c "$src" -o "$obj"
    objs="$objs $obj"
done
# musl-gcc's specs always name a dynamic loader: the static-pie start file and flags are
# given here instead.
# shellcheck disable=SC2086
"$cc" -nostartfiles -o "$out" "$lib/rcrt1.o" "$lib/crti.o" "$(gcc -print-file-name=crtbeginS.o)" \
    $objs "$(gcc -print-file-name=crtendS.o)" "$lib/crtn.o" \
    -Wl,-static -Wl,-pie -Wl,--no-dynamic-linker -Wl,-z,text

{
    echo "$out: \\"
    for obj in $objs; do
        sed -e '1s/^[^:]*://' -e 's/\\$//' -e 's/$/ \\/' "$obj.d"
    done
    echo
} >"$depfile"
