#!/bin/sh
# make replay: gflow-replay (docs/replay.md) on the Philly subset at two loads and on the
# synthetic lab trace at two loads, every policy; writes each run's CSV table and CDF
# data, results.csv (all rows), wait-cdf.png (the wait-time CDF per policy, one panel
# per run) drawn with gnuplot, and default-vs-greedy.txt (the daemon's default policy's
# waits against the old greedy pass, printed last).
# Usage: scripts/replay.sh BUILD_DIR OUT_DIR
# REPLAY_PHILLY: the Philly subset (default ../shared/data/traces/philly-subset.csv).
set -e
build=$1
out=$2
[ -n "$build" ] && [ -n "$out" ] || { echo "usage: scripts/replay.sh BUILD_DIR OUT_DIR" >&2; exit 2; }
cd "$(dirname "$0")/.."
philly=${REPLAY_PHILLY:-../shared/data/traces/philly-subset.csv}
replay="$build/gflow-replay"
mkdir -p "$out"

# name|arguments: the runs, one panel each.
runs="synthetic-x1|--synthetic 10000 --seed 1 --load 1
synthetic-x1.25|--synthetic 10000 --seed 1 --load 1.25"
if [ -r "$philly" ]; then
    # At load 1 the subset offers ~31x what 8 GPUs can do (it comes from a cluster);
    # at 0.01 about 0.3.
    runs="philly-x1|$philly --load 1
philly-x0.01|$philly --load 0.01
$runs"
else
    echo "replay: $philly not found: the Philly runs are left out" >&2
fi

rm -f "$out/results.csv"
plot="$out/wait-cdf.gp"
{
    echo "set terminal pngcairo size 1400,1000 font ',10'"
    echo "set output '$out/wait-cdf.png'"
    echo "set multiplot layout 2,2 title 'gflow-replay: wait-time CDF per policy (8 GPUs)'"
    echo "set logscale x"
    echo "set xrange [1.0/60:*]"
    echo "set yrange [0:1]"
    echo "set xlabel 'wait (hours, log scale; waits under a minute are at the left edge)'"
    echo "set ylabel 'fraction of jobs waiting at most'"
    echo "set key bottom right"
    echo "set grid"
} > "$plot"
echo "$runs" | while IFS='|' read -r name args; do
    # shellcheck disable=SC2086 # args are words on purpose
    "$replay" $args --policy all 2>/dev/null
    # shellcheck disable=SC2086
    "$replay" $args --policy all --csv --cdf "$out/$name.cdf" > "$out/$name.csv"
    if [ -f "$out/results.csv" ]; then
        tail -n +2 "$out/$name.csv" >> "$out/results.csv"
    else
        cp "$out/$name.csv" "$out/results.csv"
    fi
    echo
    offered=$(awk -F, 'NR == 2 { print $3 }' "$out/$name.csv")
    policies=$(awk -F, 'NR > 1 { print $1 }' "$out/$name.csv")
    echo "set title '$name (offered load $offered)'" >> "$plot"
    i=0
    cmd="plot"
    for p in $policies; do
        # A job that never waited is drawn at the left edge (log scale has no 0).
        cmd="$cmd '$out/$name.cdf' index $i using (\$1 < 60 ? 1.0/60 : \$1/3600):2 with steps lw 2 title '$p',"
        i=$((i + 1))
    done
    echo "${cmd%,}" >> "$plot"
done
echo "unset multiplot" >> "$plot"
gnuplot "$plot"

# The daemon's default (policy backfill: scheduler.backfill = true, untimed jobs planned at
# daemon.default_time_plan) against the old default, the greedy pass, per run: printed
# last and kept in default-vs-greedy.txt.
summary="$out/default-vs-greedy.txt"
{
    echo "Default (backfill, default_time_plan p95) vs the old greedy pass, 8 GPUs"
    printf '%-16s %-9s %9s %9s %9s %9s %9s %9s\n' RUN POLICY MEAN P50 P95 MEAN4+ P95_4+ MAXWAIT
    echo "$runs" | while IFS='|' read -r name args; do
        awk -F, -v run="$name" '
            function d(s) {
                if (s == "") return "-"
                if (s >= 86400) return sprintf("%.1fd", s / 86400)
                if (s >= 3600) return sprintf("%.1fh", s / 3600)
                if (s >= 60) return sprintf("%.1fm", s / 60)
                return sprintf("%.0fs", s)
            }
            NR > 1 && ($1 == "greedy" || $1 == "backfill") {
                printf "%-16s %-9s %9s %9s %9s %9s %9s %9s\n", run,
                       $1 == "backfill" ? "default" : "greedy", d($7), d($8), d($9), d($12),
                       d($14), d($16)
            }' "$out/$name.csv"
    done
    echo "(MEAN4+, P95_4+: jobs of 4 GPUs or more; the Philly subset has only such jobs)"
} > "$summary"
echo
cat "$summary"
echo "replay: tables in $out/*.csv (all rows: $out/results.csv), plot: $out/wait-cdf.png," \
    "default vs greedy: $summary"
