#!/bin/sh
# Installs every Debian package the build, the tests and the demo need (clang and its
# libFuzzer/sanitizer runtimes for the fuzz harnesses of make check).
# systemd (systemd-analyze verify), groff and man-db: tests/e2e/test_service.py.
# chromium and chromium-driver: the web dashboard tested in a browser (tests/e2e/test_web.py).
# musl-tools: gflow-shim is linked against musl where it is there (meson.build).
# zsh and fish: the completion scripts are parsed by their shells (tests/e2e/test_gflow_cmds.py).
# Idempotent and fast when everything is present (dpkg is asked first).
# --bench: also the peers that make bench measures gflow against (task-spooler) and gnuplot
# for make replay's plot; not needed by the build or make check.
# --slurm: also Debian's Slurm daemons, client and munge, for make check-slurm (tests/slurm
# starts a throwaway single-node cluster from them); not needed by make check.
set -e
PKGS="build-essential meson ninja-build pkg-config libmicrohttpd-dev libjansson-dev
libsqlite3-dev libcurl4-openssl-dev libcmocka-dev python3 python3-pytest python3-pytest-xdist util-linux procps passwd clang-format patchelf
musl-tools clang libclang-rt-14-dev systemd groff man-db chromium chromium-driver zsh fish"
case "${1:-}" in
--bench) PKGS="$PKGS task-spooler gnuplot-nox" ;;
--slurm) PKGS="$PKGS slurmctld slurmd slurm-client munge" ;;
esac
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "install-deps: installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
