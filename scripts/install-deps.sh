#!/bin/sh
# Installs every Debian package the build, the tests and the demo need (clang and its
# libFuzzer/sanitizer runtimes for the fuzz harnesses of make check).
# systemd (systemd-analyze verify), groff and man-db: tests/e2e/test_service.py.
# chromium and chromium-driver: the web dashboard tested in a browser (tests/e2e/test_web.py).
# musl-tools: gflow-shim is linked against musl where it is there (meson.build).
# zsh and fish: the completion scripts are parsed by their shells (tests/e2e/test_gflow_cmds.py).
# nodejs and npm (unless there): the official MCP SDK client of tests/e2e/test_gflow_umbrella.py, which
# this script installs into tests/mcp/node_modules (gitignored) at the version that
# tests/mcp/package-lock.json pins.
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
# Debian's nodejs and npm, unless node and npm are there already (a NodeSource nodejs
# brings its own npm and conflicts with Debian's).
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    echo "install-deps: installing:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
# The MCP SDK for the tests' real MCP client, once (npm ci: exactly the locked versions).
mcp_dir=$(dirname "$0")/../tests/mcp
if [ ! -f "$mcp_dir/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
    echo "install-deps: installing the MCP SDK into tests/mcp/node_modules"
    (cd "$mcp_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
