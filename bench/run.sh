#!/bin/sh
# make bench: the figures of DESIGN.md §5 for this build.
set -eu
exec /usr/bin/python3 "$(dirname "$0")/bench.py" "${1:-build}"
