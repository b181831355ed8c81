#!/bin/sh
# make bench: the figures of DESIGN.md §5 for this build.
# bench/run.sh [BUILD [SECTION...]]: only the sections named (make bench BENCH="peers idle").
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
exec /usr/bin/python3 "$(dirname "$0")/bench.py" "$build" "$@"
