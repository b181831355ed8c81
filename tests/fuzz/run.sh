#!/bin/sh
# Runs the libFuzzer harnesses of a -Dfuzz=true build (tests/fuzz/README.md).
#
#   tests/fuzz/run.sh BUILD SECS [HARNESS...]   fuzz each harness SECS seconds (make fuzz)
#   tests/fuzz/run.sh --smoke BUILD [HARNESS...]
#       replay each seed corpus, then FUZZ_SMOKE_RUNS (default 20000) mutations of it with
#       a fixed random seed, at most 10 s a harness (part of make check: the same inputs
#       every time, so that it does not fail by chance)
#
# Each harness starts from its seeds (tests/fuzz/corpus/NAME, never written to) and keeps
# what it finds in BUILD/fuzz/corpus/NAME, so that a later run goes on from there. A crash,
# a leak, a sanitizer report, a broken invariant or a timeout leaves its input in
# BUILD/fuzz/artifacts/NAME/ and makes the run fail; reproduce it with
#   BUILD/fuzz_NAME BUILD/fuzz/artifacts/NAME/crash-...
set -u
cd "$(dirname "$0")/../.."
smoke=0
if [ "${1:-}" = "--smoke" ]; then
    smoke=1
    shift
fi
build=${1:?usage: run.sh [--smoke] BUILD [SECS] [HARNESS...]}
shift
if [ $smoke -eq 1 ]; then
    secs=10
    runs=${FUZZ_SMOKE_RUNS:-20000}
else
    secs=${1:?usage: run.sh BUILD SECS [HARNESS...]}
    shift
fi
harnesses=${*:-toml config jobspec jobcodec exitfile parse cudavis client attachproto}

# Leaks are reported at exit and on every input libFuzzer finds suspicious.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=""
printf '%-9s %8s %10s %6s %6s  %s\n' harness seconds execs cov corpus result
for h in $harnesses; do
    exe="$build/fuzz_$h"
    if [ ! -x "$exe" ]; then
        echo "run.sh: $exe is missing (ninja -C $build fuzz)" >&2
        exit 2
    fi
    seeds=tests/fuzz/corpus/$h
    work="$build/fuzz/corpus/$h"
    art="$build/fuzz/artifacts/$h"
    log="$build/fuzz/$h.log"
    mkdir -p "$work" "$art"
    : >"$log"
    dict=""
    [ -f "tests/fuzz/$h.dict" ] && dict="-dict=tests/fuzz/$h.dict"
    result=ok
    if [ $smoke -eq 1 ]; then
        # Every seed once (a seed that crashes fails at once), then a little fuzzing.
        if ! "$exe" -runs=0 -timeout=10 -artifact_prefix="$art/" "$seeds" >>"$log" 2>&1; then
            result="FAILED on a seed"
        fi
    fi
    if [ "$result" = ok ] && [ $smoke -eq 1 ]; then
        # From the seeds alone, into a corpus thrown away.
        tmp=$(mktemp -d)
        # shellcheck disable=SC2086
        if ! "$exe" -seed=1 -runs="$runs" -max_total_time="$secs" -timeout=10 \
            -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" $dict \
            "$tmp" "$seeds" >>"$log" 2>&1; then
            result="FAILED"
        fi
        rm -rf "$tmp"
    elif [ "$result" = ok ]; then
        # shellcheck disable=SC2086
        if ! "$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$art/" $dict "$work" "$seeds" >>"$log" 2>&1; then
            result="FAILED"
        fi
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(sed -n 's/^#[0-9]*.*DONE *cov: \([0-9]*\).*/\1/p' "$log" | tail -1)
    [ -z "$cov" ] && cov=$(sed -n 's/^#[0-9]*.*cov: \([0-9]*\).*/\1/p' "$log" | tail -1)
    printf '%-9s %8s %10s %6s %6s  %s\n' "$h" "$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) .*/\1/p' "$log" | tail -1)" \
        "${execs:--}" "${cov:--}" "$(find "$work" -type f | wc -l)" "$result"
    if [ "$result" != ok ]; then
        failed="$failed $h"
        grep -E "ERROR|invariant broken|SUMMARY|Test unit written|first:|second:" "$log" |
            head -20 | sed "s/^/    $h: /"
        echo "    $h: full log: $log"
    fi
done
if [ -n "$failed" ]; then
    echo "run.sh: failed:$failed" >&2
    exit 1
fi
