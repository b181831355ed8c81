#!/bin/sh
# check.sh: proves gflow on a machine's real NVIDIA GPUs (docs/gpu-kit.md). It ships in
# the kit that `make gpu-kit` builds and needs nothing but the NVIDIA driver: no
# network, no python, no CUDA toolkit. It runs in a few minutes.
#
# It writes $OUT/summary.txt, one line per check (PASS, FAIL, SKIP where the machine
# lacks what the check needs, or NOTE, a name, what was seen), and the raw evidence
# beside it: nvidia-smi's answers, nvml_probe's (what NVML
# itself answers), cuda_probe's (what CUDA shows a process), ginfo's JSON, every job's
# log and every daemon's log. Exit status: 0 no FAIL, 1 some FAIL, 2 usage.
#
# Every gflowd it starts is sandboxed in a temp dir (its own data dir, socket and config
# file: -c FILE, GFLOW_DAEMON__DATA_DIR, GFLOW_DAEMON__SOCKET_PATH, GFLOW_SOCKET) and
# stopped by its pid; processes it starts are stopped by pid too.
#
# Where the tools are (so the same script runs against the simulator in `make check`):
#   GFLOW_BIN           gflowd, gbatch, ..., nvml_probe, cuda_probe, gflow-json-flat
#                       (default: bin/ beside this script, the kit's layout)
#   NVIDIA_SMI          nvidia-smi (default: nvidia-smi on PATH)
#   GFLOW_NVML_LIBRARY  NVML (default libnvidia-ml.so.1), for gflowd and nvml_probe
#   GFLOW_CUDA_LIBRARY  the CUDA driver (default libcuda.so.1), for cuda_probe
#   GFLOW_CHECK_DEV_DIR where the GPUs' device nodes nvidia<minor> are (default /dev; the
#                       simulator's check makes them with mknod in a temp dir)
set -u

usage() {
    echo "Usage: check.sh [-o OUTDIR]"
    echo "Checks gflow against this machine's NVIDIA GPUs; writes OUTDIR/summary.txt and the"
    echo "evidence (default OUTDIR: \$OUT, else ./gflow-gpu-check-<date>). See docs/gpu-kit.md."
}

here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-}
while [ $# -gt 0 ]; do
    case $1 in
    -o) [ $# -ge 2 ] || { usage >&2; exit 2; }; OUT=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "check.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
[ -n "$OUT" ] || OUT=$PWD/gflow-gpu-check-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
BIN=${GFLOW_BIN:-$here/bin}
SMI=${NVIDIA_SMI:-nvidia-smi}
SUMMARY=$OUT/summary.txt
LOG=$OUT/check.log
: >"$SUMMARY"
: >"$LOG"
fails=0
T=$(mktemp -d /tmp/gflow-check.XXXXXX) || exit 2
START=$(date +%s)

log() { echo "$(date +%H:%M:%S) $*" >>"$LOG"; }
pass() { echo "PASS $1: $2" | tee -a "$SUMMARY"; log "PASS $1: $2"; }
fail() { echo "FAIL $1: $2" | tee -a "$SUMMARY"; log "FAIL $1: $2"; fails=$((fails + 1)); }
note() { echo "NOTE $1: $2" | tee -a "$SUMMARY"; log "NOTE $1: $2"; }
skip() { echo "SKIP $1: $2" | tee -a "$SUMMARY"; log "SKIP $1: $2"; }

# The value of key in a key=value file (the first).
val() { sed -n "s/^$1=//p" "$2" | head -n 1; }
# A PCI bus id as BB:DD.F with the domain as a bare number: nvidia-smi writes
# 00000000:3B:00.0, CUDA 0000:3b:00.0.
norm_bus() { echo "$1" | tr a-f A-F | sed 's/^0*\([0-9A-F]*\):/\1:/; s/^:/0:/'; }

# Polls "$@" every 0.2 s until it succeeds; fails after $1 seconds.
wait_for() {
    _secs=$1
    shift
    _end=$(($(date +%s) + _secs))
    while ! "$@"; do
        [ "$(date +%s)" -lt "$_end" ] || return 1
        sleep 0.2
    done
    return 0
}

# ---- processes we start outside gflow (stopped by pid at exit) ----
bg_pids=""
stop_pid() {
    kill -TERM "$1" 2>/dev/null || return 0
    wait_for 10 eval "! kill -0 $1 2>/dev/null" || kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}

# ---- sandboxed daemons ----
dname=""
dpid=""
djobs=""
daemon_start() { # NAME POLL_SECS ID_FORMAT [MORE_DAEMON_KEYS]
    dname=$1
    _d=$T/$1
    mkdir -p "$_d"
    cat >"$_d/gflow.toml" <<EOF
[daemon]
gpu_poll_interval_secs = $2
gpu_id_format = "$3"
kill_grace_secs = 5
${4:-}
EOF
    export GFLOW_DAEMON__DATA_DIR="$_d/data" GFLOW_DAEMON__SOCKET_PATH="$_d/gflowd.sock"
    export GFLOW_SOCKET="$_d/gflowd.sock"
    djobs=""
    if ! "$BIN/gflowd" -c "$_d/gflow.toml" up >"$OUT/daemon-$1.txt" 2>&1; then
        fail "daemon-$1" "gflowd up failed: $(tail -n 1 "$OUT/daemon-$1.txt")"
        cp "$_d/data/gflowd.log" "$OUT/daemon-$1.log" 2>/dev/null
        dpid=""
        return 1
    fi
    dpid=$(cut -d' ' -f1 "$_d/data/gflowd.lock")
    log "daemon $1 started, pid $dpid"
    return 0
}

daemon_stop() {
    [ -n "$dpid" ] || return 0
    for _j in $djobs; do
        "$BIN/gcancel" "$_j" >/dev/null 2>&1
    done
    for _j in $djobs; do
        wait_for 20 job_ended "$_j" || log "job $_j did not end"
    done
    "$BIN/gctl" show-gpus >>"$LOG" 2>&1
    stop_pid "$dpid"
    # A shim removes its job's cgroup; one that could not leaves it named in its lock file.
    for _l in "$T/$dname/data/run/"*.lock; do
        [ -f "$_l" ] || continue
        sed -n 's/^cgroup: //p' "$_l" | while read -r _cg; do
            rmdir "$_cg" 2>/dev/null && log "removed the leftover cgroup $_cg"
        done
    done
    cp "$T/$dname/data/gflowd.log" "$OUT/daemon-$dname.log" 2>/dev/null
    log "daemon $dname stopped"
    dpid=""
}

cleanup() {
    daemon_stop
    for _p in $bg_pids; do
        stop_pid "$_p"
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# ---- jobs ----
job_state() { "$BIN/gqueue" -a -j "$1" -f ST -o csv 2>/dev/null | tail -n 1; }
job_reason() { "$BIN/gqueue" -a -j "$1" -f REASON -o csv 2>/dev/null | tail -n 1; }
job_ended() { case $(job_state "$1") in CD | F | CA | TO) return 0 ;; esac; return 1; }
job_reason_is() { [ "$(job_reason "$1")" = "$2" ]; }

# Submits a job (gbatch ARGS...); its id in $jid, or "" with a FAIL for check $1.
submit() {
    _check=$1
    shift
    jid=$("$BIN/gbatch" --parsable "$@" 2>"$T/gbatch.err")
    if [ -z "$jid" ]; then
        fail "$_check" "gbatch $* failed: $(head -n 1 "$T/gbatch.err")"
        return 1
    fi
    djobs="$djobs $jid"
    log "job $jid: gbatch $*"
    return 0
}

# Waits for job $2 to end, saves its log as $OUT/job-$1.txt; FAIL for check $1 if it
# did not end in $3 s or did not complete.
finish_job() {
    if ! wait_for "$3" job_ended "$2"; then
        fail "$1" "job $2 did not end within $3 s (state $(job_state "$2"), reason $(job_reason "$2"))"
        return 1
    fi
    "$BIN/gjob" log "$2" >"$OUT/job-$1.txt" 2>&1
    if [ "$(job_state "$2")" != CD ]; then
        fail "$1" "job $2 ended $(job_state "$2"): $(tail -n 1 "$OUT/job-$1.txt")"
        return 1
    fi
    return 0
}

# ginfo -o json flattened to path=value lines in $T/ginfo.flat (and saved as $OUT/$1).
ginfo_read() {
    "$BIN/ginfo" -o json >"$T/ginfo.json" 2>"$T/ginfo.err" &&
        "$BIN/gflow-json-flat" "$T/ginfo.json" >"$T/ginfo.flat" || return 1
    [ -z "${1:-}" ] || cp "$T/ginfo.json" "$OUT/$1"
}

# The index of the process with pid $2 in ginfo's list for GPU $1 ("" if none).
ginfo_proc() {
    sed -n "s/^gpus\.$1\.processes\.\([0-9]*\)\.pid=$2\$/\1/p" "$T/ginfo.flat" | head -n 1
}
ginfo_has_proc() { ginfo_read && [ -n "$(ginfo_proc "$1" "$2")" ]; }
ginfo_proc_is_job() {
    ginfo_read || return 1
    _k=$(ginfo_proc "$1" "$2")
    [ -n "$_k" ] && [ "$(val "gpus\.$1\.processes\.$_k\.job" "$T/ginfo.flat")" = "$3" ]
}

# ---- the isolation checks (issue 28): several jobs at once, what each job can reach ----

# GPU $1's UUID as cuda_probe prints it (nvidia-smi's without "GPU-", lower case).
cuda_uuid() { sed 's/^GPU-//' "$T/smi_uuid_$1" | tr A-F a-f; }

# The GPUs gflow recorded for job $1: NVML indices, space-separated ("" if none).
job_gpus() {
    "$BIN/gjob" show -o json "$1" 2>/dev/null | "$BIN/gflow-json-flat" - 2>/dev/null |
        sed -n 's/^0\.gpu_ids\(\.[0-9]*\)\{0,1\}=//p' | tr ',' '\n' | grep -v '^null$' |
        tr '\n' ' ' | sed 's/ *$//'
}

# Whether the CUDA devices in cuda_probe's output $1 are exactly GPUs $2 (indices): the
# count and the UUIDs. What the output shows is left in $seen.
cuda_sees_exactly() {
    _cf=$1
    _cc=$(val count "$_cf")
    _cwant=$(for _cg in $2; do cuda_uuid "$_cg"; done | sort | tr '\n' ' ')
    _cgot=$(
        _ck=0
        while [ "$_ck" -lt "${_cc:-0}" ] 2>/dev/null; do
            val "device\.$_ck\.uuid" "$_cf"
            _ck=$((_ck + 1))
        done | sort | tr '\n' ' '
    )
    seen="count ${_cc:-?}, CUDA_VISIBLE_DEVICES=$(val CUDA_VISIBLE_DEVICES "$_cf"), UUIDs ${_cgot:-none}"
    [ "$_cc" = "$(echo $2 | wc -w | tr -d ' ')" ] && [ "$_cgot" = "$_cwant" ]
}

# Whether the files $1.0 .. $1.<$2 - 1> (cuda_probe's --ready) all exist.
all_ready() {
    _ri=0
    while [ "$_ri" -lt "$2" ]; do
        [ -s "$1.$_ri" ] || return 1
        _ri=$((_ri + 1))
    done
}

# Cancels jobs "$@" and waits for them to end.
cancel_jobs() {
    for _cj in "$@"; do
        "$BIN/gcancel" "$_cj" >>"$LOG" 2>&1
    done
    for _cj in "$@"; do
        wait_for 30 job_ended "$_cj" || log "job $_cj did not end after gcancel"
    done
}

job_not_pending() { [ "$(job_state "$1")" != PD ]; }
gpu_state_is() { ginfo_read && [ "$(val "gpus\.$1\.state" "$T/ginfo.flat")" = "$2" ]; }

# p2p: a 2-GPU job (what NCCL runs in) sees exactly its two GPUs, and CUDA's peer access
# between them (cuDeviceCanAccessPeer) is what NVML's P2P read status says.
p2p_check() {
    if [ -z "$second" ]; then
        skip p2p "fewer than two GPUs take whole-GPU jobs"
        return
    fi
    submit p2p --gpus 2 "$BIN/cuda_probe" --peers || return
    _pj=$jid
    finish_job p2p "$_pj" 60 || return
    _pf=$OUT/job-p2p.txt
    _pg=$(job_gpus "$_pj")
    if ! cuda_sees_exactly "$_pf" "$_pg"; then
        fail p2p "job $_pj, given GPUs '$_pg', sees $seen"
        return
    fi
    _pa=$(smi_index_of_bus "$(val 'device\.0\.bus_id' "$_pf")")
    _pb=$(smi_index_of_bus "$(val 'device\.1\.bus_id' "$_pf")")
    _pbad=""
    _pwhat=""
    for _pp in "0 1 $_pa $_pb" "1 0 $_pb $_pa"; do
        set -- $_pp
        _pcu=$(val "peer\.$1\.$2" "$_pf")
        _pnv=$(val "p2p\.$3\.$4\.read" "$OUT/nvml_probe.txt")
        case $_pnv in
        OK) _pwant=1 ;;
        error:* | "") _pwant=$_pcu ;; # NVML cannot tell: nothing to compare with
        *) _pwant=0 ;;
        esac
        _pwhat="$_pwhat GPU $3->$4 CUDA peer ${_pcu:-?}, NVML P2P read ${_pnv:-?};"
        [ "$_pcu" = "$_pwant" ] && [ -n "$_pcu" ] || _pbad=1
    done
    if [ -n "$_pbad" ]; then
        fail p2p "job $_pj on GPUs $_pg: CUDA's peer access differs from NVML's:$_pwhat"
    else
        pass p2p "job $_pj sees exactly its GPUs $_pg ($seen);$_pwhat"
    fi
}

# concurrent: N 1-GPU jobs (N = whole GPUs, at most 4) run at once, each on a GPU of its
# own, each seeing only the GPU gflow recorded for it.
concurrent_check() {
    set -- $whole
    _cn=$#
    [ "$_cn" -le 4 ] || _cn=4
    if [ "$_cn" -lt 2 ]; then
        skip concurrent "fewer than two GPUs take whole-GPU jobs"
        return
    fi
    _cjobs=""
    _ck=0
    while [ "$_ck" -lt "$_cn" ]; do
        rm -f "$T/conc.$_ck"
        submit concurrent --gpus 1 "$BIN/cuda_probe" --hold 240 --ready "$T/conc.$_ck" || break
        _cjobs="$_cjobs $jid"
        _ck=$((_ck + 1))
    done
    if [ "$_ck" -lt "$_cn" ]; then
        :
    elif ! wait_for 60 all_ready "$T/conc" "$_cn"; then
        _cst=$(for _cj in $_cjobs; do printf ' %s:%s(%s)' "$_cj" "$(job_state "$_cj")" "$(job_reason "$_cj")"; done)
        fail concurrent "$_cn 1-GPU jobs did not all hold a context at once within 60 s:$_cst"
    else
        _cbad=""
        _cused=" "
        _cwhat=""
        _ck=0
        for _cj in $_cjobs; do
            _cf=$OUT/job-concurrent-$_ck.txt
            "$BIN/gjob" log "$_cj" >"$_cf" 2>&1
            [ "$(job_state "$_cj")" = R ] || _cbad="$_cbad job $_cj is $(job_state "$_cj");"
            _cg=$(job_gpus "$_cj")
            cuda_sees_exactly "$_cf" "$_cg" || _cbad="$_cbad job $_cj given GPU '$_cg' sees $seen;"
            case $_cused in *" $_cg "*) _cbad="$_cbad job $_cj was given GPU $_cg too;" ;; esac
            _cused="$_cused$_cg "
            _cwhat="$_cwhat $_cj:$_cg"
            _ck=$((_ck + 1))
        done
        if [ -z "$_cbad" ]; then
            pass concurrent "$_cn jobs ran at once, one GPU each, each seeing only its own (job:GPU$_cwhat)"
        else
            fail concurrent "$_cn jobs at once:$_cbad"
        fi
    fi
    cancel_jobs $_cjobs
}

# shared: two --shared jobs whose GPU memory fits run on one GPU at the same time.
shared_check() {
    [ -n "$first" ] || return
    "$BIN/gctl" set-gpus "$first" >>"$LOG" 2>&1
    _sjobs=""
    for _sk in 0 1; do
        rm -f "$T/shared.$_sk"
        submit shared --gpus 1 --shared --gpu-memory 1024 "$BIN/cuda_probe" --hold 240 \
            --ready "$T/shared.$_sk" || break
        _sjobs="$_sjobs $jid"
    done
    if [ "$(echo $_sjobs | wc -w | tr -d ' ')" != 2 ]; then
        :
    elif ! wait_for 60 all_ready "$T/shared" 2; then
        _sst=$(for _sj in $_sjobs; do printf ' %s:%s(%s)' "$_sj" "$(job_state "$_sj")" "$(job_reason "$_sj")"; done)
        fail shared "two --shared --gpu-memory 1024 jobs for GPU $first did not run together within 60 s:$_sst"
    else
        _sbad=""
        _sk=0
        for _sj in $_sjobs; do
            _sf=$OUT/job-shared-$_sk.txt
            "$BIN/gjob" log "$_sj" >"$_sf" 2>&1
            [ "$(job_state "$_sj")" = R ] || _sbad="$_sbad job $_sj is $(job_state "$_sj");"
            _sg=$(job_gpus "$_sj")
            [ "$_sg" = "$first" ] || _sbad="$_sbad job $_sj was given GPU '$_sg';"
            cuda_sees_exactly "$_sf" "$first" || _sbad="$_sbad job $_sj sees $seen;"
            _sk=$((_sk + 1))
        done
        if [ -z "$_sbad" ]; then
            pass shared "jobs$_sjobs (--shared --gpu-memory 1024) ran together on GPU $first, each seeing it"
        else
            fail shared "two --shared jobs on GPU $first:$_sbad"
        fi
    fi
    cancel_jobs $_sjobs
    "$BIN/gctl" set-gpus all >>"$LOG" 2>&1
}

# stray: job A, given GPU a, opens GPU b itself (CUDA_VISIBLE_DEVICES reset inside it, as
# a hard-coded cuda:1 or a library does). While that process runs, GPU b is unavailable
# ("Stray (job A)", stray_jobs [A]) and a job for the GPU that is left waits; once A
# ends, that job runs.
stray_check() {
    if [ -z "$second" ]; then
        skip stray "fewer than two GPUs take whole-GPU jobs"
        return
    fi
    _ga=$first
    _gb=$second
    "$BIN/gctl" set-gpus "$_ga" >>"$LOG" 2>&1
    rm -f "$T/stray.ready"
    if ! submit stray --gpus 1 "$BIN/cuda_probe" --visible "$(cat "$T/smi_uuid_$_gb")" \
        --hold 240 --ready "$T/stray.ready"; then
        "$BIN/gctl" set-gpus all >>"$LOG" 2>&1
        return
    fi
    _sa=$jid
    if ! wait_for 60 test -s "$T/stray.ready"; then
        fail stray "job $_sa did not create its context on GPU $_gb (state $(job_state "$_sa")): $("$BIN/gjob" log "$_sa" 2>&1 | tail -n 1)"
        cancel_jobs "$_sa"
        "$BIN/gctl" set-gpus all >>"$LOG" 2>&1
        return
    fi
    _spid=$(cat "$T/stray.ready")
    # gflow has seen the process on GPU b before a second job may ask for a GPU.
    wait_for 30 ginfo_has_proc "$_gb" "$_spid" || log "pid $_spid not in ginfo on GPU $_gb within 30 s"
    "$BIN/gctl" set-gpus "$_ga,$_gb" >>"$LOG" 2>&1
    if ! submit stray --gpus 1 "$BIN/cuda_probe" --list; then
        cancel_jobs "$_sa"
        "$BIN/gctl" set-gpus all >>"$LOG" 2>&1
        return
    fi
    _sb=$jid
    wait_for 30 gpu_state_is "$_gb" unavailable
    # A scheduler that ignores the stray starts job b on GPU b within a poll or two.
    wait_for 5 job_not_pending "$_sb"
    ginfo_read ginfo-stray.json
    _sst=$(val "gpus\.$_gb\.state" "$T/ginfo.flat")
    _sre=$(val "gpus\.$_gb\.reason" "$T/ginfo.flat")
    _ssj=$(sed -n "s/^gpus\.$_gb\.stray_jobs\.[0-9]*=//p" "$T/ginfo.flat" | tr '\n' ' ' | sed 's/ $//')
    _sbs=$(job_state "$_sb")
    "$BIN/gjob" log "$_sa" >"$OUT/job-stray-owner.txt" 2>&1
    _sbad=""
    [ "$_sbs" = PD ] || _sbad="$_sbad job $_sb was started ($_sbs, GPU '$(job_gpus "$_sb")') while job $_sa's pid $_spid held GPU $_gb;"
    [ "$_sst" = unavailable ] || _sbad="$_sbad GPU $_gb is '$_sst' (want unavailable);"
    [ "$_sre" = "Stray (job $_sa)" ] || _sbad="$_sbad its reason is '$_sre' (want 'Stray (job $_sa)');"
    case " $_ssj " in *" $_sa "*) ;; *) _sbad="$_sbad stray_jobs [$_ssj] lacks $_sa;" ;; esac
    cancel_jobs "$_sa"
    if [ -n "$_sbad" ]; then
        fail stray "job $_sa (GPU $_ga) opened GPU $_gb:$_sbad"
        cancel_jobs "$_sb"
    elif finish_job stray "$_sb" 60; then
        pass stray "job $_sa (GPU $_ga) opened GPU $_gb (pid $_spid): GPU $_gb unavailable, '$_sre', stray_jobs [$_ssj]; job $_sb waited, and ran once job $_sa ended"
    fi
    "$BIN/gctl" set-gpus all >>"$LOG" 2>&1
}

# health: ginfo gives every GPU a "health" object with the keys of issue 28, each read
# without error: numbers, booleans, a compute mode or null where the driver does not
# support it; never an NVML error. nvml_probe.txt has the driver's raw answers beside.
health_check() {
    if ! ginfo_read ginfo-health.json; then
        fail health "ginfo -o json failed: $(head -n 1 "$T/ginfo.err")"
        return
    fi
    _hf=$T/ginfo.flat
    _hbad=""
    _hwhat=""
    _hi=0
    while [ "$_hi" -lt "$n" ]; do
        _h="gpus\.$_hi\.health"
        if ! grep -q "^$_h[.=]" "$_hf"; then
            _hbad="$_hbad GPU $_hi has no \"health\";"
            _hi=$((_hi + 1))
            continue
        fi
        for _hk in ecc_uncorrectable_volatile ecc_uncorrectable_aggregate retired_pages last_xid \
            unowned_mib retired_pages_pending remapped_rows_pending remapped_rows_failed compute_mode; do
            if ! grep -q "^$_h\.$_hk=" "$_hf"; then
                _hbad="$_hbad GPU $_hi: no $_hk;"
                continue
            fi
            _hv=$(val "$_h\.$_hk" "$_hf")
            case $_hk:$_hv in
            unowned_mib:null) _hok=no ;;
            *:null) _hok=yes ;;
            retired_pages_pending:* | remapped_rows_*:*)
                case $_hv in true | false) _hok=yes ;; *) _hok=no ;; esac ;;
            compute_mode:*)
                case $_hv in Default | ExclusiveProcess | Prohibited | ExclusiveThread) _hok=yes ;; *) _hok=no ;; esac ;;
            *:*[!0-9]* | *:) _hok=no ;;
            *) _hok=yes ;;
            esac
            [ "$_hok" = yes ] || _hbad="$_hbad GPU $_hi: $_hk=$_hv;"
        done
        if ! grep -q "^$_h\.throttle_reasons[.=]" "$_hf"; then
            _hbad="$_hbad GPU $_hi: no throttle_reasons;"
        elif grep "^$_h\.throttle_reasons\.[0-9]*=" "$_hf" | grep -qiE 'error|nvml|unknown'; then
            _hbad="$_hbad GPU $_hi: throttle_reasons $(sed -n "s/^$_h\.throttle_reasons\.[0-9]*=//p" "$_hf" | tr '\n' ',');"
        fi
        _hwhat="$_hwhat $_hi: ecc $(val "$_h\.ecc_uncorrectable_volatile" "$_hf")/$(val "$_h\.ecc_uncorrectable_aggregate" "$_hf") retired $(val "$_h\.retired_pages" "$_hf") remap-pending $(val "$_h\.remapped_rows_pending" "$_hf") xid $(val "$_h\.last_xid" "$_hf") mode $(val "$_h\.compute_mode" "$_hf") throttle [$(sed -n "s/^$_h\.throttle_reasons\.[0-9]*=//p" "$_hf" | tr '\n' ' ' | sed 's/ $//')] unowned $(val "$_h\.unowned_mib" "$_hf") MiB;"
        _hi=$((_hi + 1))
    done
    if [ -n "$_hbad" ]; then
        fail health "ginfo's health fields:$_hbad"
    else
        pass health "every GPU's health read without error (NVML's raw answers in nvml_probe.txt):$_hwhat"
    fi
}

# mig-1: a `--mig PROFILE:1` job sees exactly one instance: one MIG- UUID that NVML lists,
# and CUDA counts one device.
mig_one_check() {
    if ! jid=$("$BIN/gbatch" --parsable --mig "$1:1" "$BIN/cuda_probe" --list 2>"$T/gbatch.err"); then
        fail mig-1 "gbatch --mig $1:1 refused: $(head -n 1 "$T/gbatch.err")"
        return
    fi
    djobs="$djobs $jid"
    finish_job mig-1 "$jid" 60 || return
    _mf=$OUT/job-mig-1.txt
    _mv=$(val CUDA_VISIBLE_DEVICES "$_mf")
    _mc=$(val count "$_mf")
    case $_mv in
    MIG-*,* | *,MIG-*) _mok="more than one instance" ;;
    MIG-*)
        if grep -q "^gpu\.[0-9]*\.mig\.[0-9]*\.uuid=$_mv\$" "$OUT/nvml_probe.txt" && [ "$_mc" = 1 ]; then
            _mok=""
        else
            _mok="count ${_mc:-?}, or not one of nvml_probe's instances"
        fi
        ;;
    *) _mok="not a MIG- UUID" ;;
    esac
    if [ -z "$_mok" ]; then
        pass mig-1 "job $jid (--mig $1:1) sees exactly one instance, $_mv (CUDA count $_mc)"
    else
        fail mig-1 "job $jid (--mig $1:1): CUDA_VISIBLE_DEVICES=$_mv: $_mok"
    fi
}

# The checks that run in daemon "main" after the single-job ones.
isolation_checks() {
    p2p_check
    concurrent_check
    shared_check
    stray_check
    health_check
}

# constrain-devices: under daemon.constrain_devices = true (ids as "auto" gives them), a
# job given GPU g can open only its own /dev/nvidia<minor> (another GPU's node: EPERM),
# and CUDA counts 1 device, GPU g. On the last whole GPU, which CUDA does not number 0.
constrain_check() {
    if [ -z "$second" ]; then
        skip constrain-devices "fewer than two GPUs take whole-GPU jobs: no other GPU to deny"
        return
    fi
    _kg=$last
    _ko=$first
    _kmg=$(val "gpu\.$_kg\.minor" "$OUT/nvml_probe.txt")
    _kmo=$(val "gpu\.$_ko\.minor" "$OUT/nvml_probe.txt")
    case "$_kmg:$_kmo" in
    *[!0-9:]* | :* | *:)
        skip constrain-devices "NVML gives no /dev/nvidia minor for GPU $_kg ('$_kmg') or $_ko ('$_kmo')"
        return
        ;;
    esac
    _kd=${GFLOW_CHECK_DEV_DIR:-/dev}
    daemon_start constrain 1 auto "constrain_devices = true" || return
    "$BIN/gctl" set-gpus "$_kg" >>"$LOG" 2>&1
    if submit constrain-devices --gpus 1 "$BIN/cuda_probe" --open "$_kd/nvidia$_kmg" \
        --open "$_kd/nvidia$_kmo" && finish_job constrain-devices "$jid" 60; then
        _kf=$OUT/job-constrain-devices.txt
        _kown=$(val 'open\.0' "$_kf")
        _koth=$(val 'open\.1' "$_kf")
        _kwhy=$(sed -n 's/^gflow-shim: device isolation unavailable: //p' "$_kf" | head -n 1)
        _kcu=yes
        cuda_sees_exactly "$_kf" "$_kg" || _kcu=no
        _kwhat="own $_kd/nvidia$_kmg: $_kown; GPU $_ko's $_kd/nvidia$_kmo: $_koth; devices cgroup $(val cgroup.devices "$_kf"); CUDA $seen"
        if [ "$_kcu" = no ]; then
            fail constrain-devices "job $jid given GPU $_kg: CUDA does not see exactly that GPU ($_kwhat)"
        elif [ -n "$_kwhy" ]; then
            skip constrain-devices "gflow-shim: device isolation unavailable: $_kwhy ($_kwhat)"
        elif [ ! -e "$_kd/nvidia$_kmg" ] || [ ! -e "$_kd/nvidia$_kmo" ]; then
            skip constrain-devices "no device nodes $_kd/nvidia$_kmg, $_kd/nvidia$_kmo to open: the cgroup cannot be tried ($_kwhat)"
        else
            case $_kown in
            ok | error:ENXIO*) _kok=yes ;; # ENXIO: allowed, no driver behind the node (simulator)
            *) _kok=no ;;
            esac
            case $_koth in error:EPERM*) ;; *) _kok=no ;; esac
            if [ "$_kok" = yes ]; then
                pass constrain-devices "job $jid given GPU $_kg opens only its node: $_kwhat"
            else
                fail constrain-devices "job $jid given GPU $_kg: $_kwhat (want its own node allowed, the other EPERM)"
            fi
        fi
    fi
    daemon_stop
}

# ---- nvidia-smi: the reference ----
log "GFLOW_BIN=$BIN NVIDIA_SMI=$SMI GFLOW_NVML_LIBRARY=${GFLOW_NVML_LIBRARY:-} GFLOW_CUDA_LIBRARY=${GFLOW_CUDA_LIBRARY:-}"
note environment "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>} CUDA_DEVICE_ORDER=${CUDA_DEVICE_ORDER-<unset>} (both unset for the checks); uid $(id -u); $(uname -r)"
unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
for p in gflowd gbatch gqueue ginfo gjob gctl gcancel gflow-shim nvml_probe cuda_probe gflow-json-flat; do
    if [ ! -x "$BIN/$p" ]; then
        fail tools "$BIN/$p is missing (set GFLOW_BIN to the kit's bin/)"
        exit 1
    fi
done
"$BIN/gflowd" --version >"$OUT/gflow-version.txt" 2>&1
note gflow "$(head -n 1 "$OUT/gflow-version.txt")"

fields=index,name,uuid,pci.bus_id,memory.total,memory.used
"$SMI" -L >"$OUT/nvidia-smi-L.txt" 2>&1
"$SMI" --query-gpu=$fields --format=csv >"$OUT/nvidia-smi-query.csv" 2>&1
"$SMI" topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1
"$SMI" -q >"$OUT/nvidia-smi-q.txt" 2>&1
# Without nvidia-smi nothing can be compared; the probes' evidence is still worth having.
smi_missing() {
    fail nvidia-smi "$1"
    "$BIN/nvml_probe" >"$OUT/nvml_probe.txt" 2>&1
    "$BIN/cuda_probe" >"$OUT/cuda_probe.txt" 2>&1
    exit 1
}
if ! "$SMI" --query-gpu=$fields --format=csv,noheader,nounits >"$T/smi.csv" 2>"$T/smi.err"; then
    smi_missing "$SMI --query-gpu failed: $(cat "$T/smi.err" "$T/smi.csv" | head -n 1)"
fi
# One file per field: smi_<field>_<index>.
n=0
while IFS=, read -r s_index s_name s_uuid s_bus s_total _; do
    i=$(echo "$s_index" | tr -d ' ')
    echo "$s_name" | sed 's/^ *//' >"$T/smi_name_$i"
    echo "$s_uuid" | tr -d ' ' >"$T/smi_uuid_$i"
    echo "$s_bus" | tr -d ' ' >"$T/smi_bus_$i"
    echo "$s_total" | tr -d ' ' >"$T/smi_total_$i"
    n=$((n + 1))
done <"$T/smi.csv"
[ "$n" -gt 0 ] || smi_missing "nvidia-smi lists no GPU"
pass nvidia-smi "$n GPU(s): $(cat "$T"/smi_name_* | sort | uniq -c | sed 's/^ *//' | tr '\n' ';')"
smi_bus() { cat "$T/smi_bus_$1"; }
# The nvidia-smi index of a bus id (any form), or "".
smi_index_of_bus() {
    _want=$(norm_bus "$1")
    _i=0
    while [ $_i -lt "$n" ]; do
        [ "$(norm_bus "$(smi_bus $_i)")" = "$_want" ] && { echo $_i; return; }
        _i=$((_i + 1))
    done
}

# ---- NVML and CUDA as they are, outside gflow ----
if "$BIN/nvml_probe" >"$OUT/nvml_probe.txt" 2>&1; then
    P=$OUT/nvml_probe.txt
    minors=""
    i=0
    while [ $i -lt "$n" ]; do
        minors="$minors $i:$(val "gpu\.$i\.minor" "$P")"
        i=$((i + 1))
    done
    note nvml "count v2=$(val count_v2 "$P") v1=$(val count_v1 "$P"); driver $(val driver_version "$P"); index:minor$minors"
    note nvml-memory "GPU 0 v1: $(val 'gpu\.0\.memory_v1' "$P" | sed 's/.*(//; s/)//') v2: $(val 'gpu\.0\.memory_v2' "$P" | sed 's/.*(//; s/)//') (MiB total/free/used, v2 total/reserved/free/used)"
    links=$(grep -c '^gpu\.[0-9]*\.nvlink\.[0-9]*=up' "$P")
    types=$(sed -n 's/^gpu\.[0-9]*\.nvlink\.[0-9]*=up remote_type:\([A-Za-z]*\).*/\1/p' "$P" | sort | uniq -c | sed 's/^ *//' | tr '\n' ' ')
    p2p=$(sed -n 's/^p2p\.[0-9]*\.[0-9]*\.nvlink=//p' "$P" | sort | uniq -c | sed 's/^ *//' | tr '\n' ' ')
    note nvlink "$links link(s) up; remote types: ${types:-none}; P2P over NVLink per ordered pair: ${p2p:-n/a}"
else
    fail nvml_probe "nvml_probe failed: $(tail -n 1 "$OUT/nvml_probe.txt")"
fi

# The GPUs that take whole-GPU jobs: not in MIG mode (their instances are what jobs get).
whole=""
i=0
while [ $i -lt "$n" ]; do
    if grep -q "^gpu\.$i\.mig_mode=current:1" "$OUT/nvml_probe.txt" 2>/dev/null; then
        note "pinned-gpu-$i" "GPU $i is in MIG mode: no whole-GPU job checks on it"
    else
        whole="$whole $i"
    fi
    i=$((i + 1))
done
first=$(echo $whole | cut -d' ' -f1)
second=$(echo $whole | cut -d' ' -f2 -s)
last=$(echo $whole | tr ' ' '\n' | tail -n 1)
if [ -z "$whole" ]; then
    note gpus "every GPU is in MIG mode: only the MIG checks run"
fi

# gflow's own NVML reading without a daemon, for a person to compare (not a check).
[ ! -x "$BIN/gflow-nvml-dump" ] || "$BIN/gflow-nvml-dump" -v >"$OUT/gflow-nvml-dump.txt" 2>&1

"$BIN/cuda_probe" >"$OUT/cuda_probe.txt" 2>&1
C=$OUT/cuda_probe.txt
c_count=$(val count "$C")
if [ -z "$c_count" ]; then
    fail cuda "cuda_probe saw no device count: $(tail -n 1 "$C")"
else
    buses=""
    i=0
    while [ $i -lt "$c_count" ]; do
        buses="$buses $(norm_bus "$(val "device\.$i\.bus_id" "$C")")"
        i=$((i + 1))
    done
    want=""
    i=0
    while [ $i -lt "$n" ]; do
        want="$want $(norm_bus "$(smi_bus $i)")"
        i=$((i + 1))
    done
    s1=$(echo $buses | tr ' ' '\n' | sort | tr '\n' ' ')
    s2=$(echo $want | tr ' ' '\n' | sort | tr '\n' ' ')
    if [ "$s1" = "$s2" ]; then
        pass cuda "CUDA sees the $n GPU(s) nvidia-smi lists; CUDA's default order:$buses"
    elif grep -q 'mig_mode=current:1' "$OUT/nvml_probe.txt" 2>/dev/null; then
        note cuda "CUDA sees$buses, nvidia-smi$want (MIG is enabled: CUDA lists instances)"
    else
        fail cuda "CUDA sees$buses, nvidia-smi$want"
    fi
fi

# ---- daemon "main": polls every second ----
daemon_start main 1 index || exit 1

# ginfo equals nvidia-smi (waiting, within reason, for the daemon's first reading).
ginfo_count_is() { ginfo_read && [ "$(grep -c '^gpus\.[0-9]*\.index=' "$T/ginfo.flat")" = "$1" ]; }
wait_for 30 ginfo_count_is "$n"
if ! ginfo_read ginfo.json; then
    fail ginfo "ginfo -o json failed: $(head -n 1 "$T/ginfo.err")"
else
    F=$T/ginfo.flat
    g_n=$(grep -c '^gpus\.[0-9]*\.index=' "$F")
    bad=""
    [ "$g_n" = "$n" ] || bad="$bad count $g_n (nvidia-smi $n; ginfo's error: $(val error "$F"));"
    i=0
    while [ $i -lt "$n" ]; do
        [ "$(val "gpus\.$i\.name" "$F")" = "$(cat "$T/smi_name_$i")" ] ||
            bad="$bad GPU $i name '$(val "gpus\.$i\.name" "$F")' (nvidia-smi '$(cat "$T/smi_name_$i")');"
        [ "$(val "gpus\.$i\.uuid" "$F")" = "$(cat "$T/smi_uuid_$i")" ] ||
            bad="$bad GPU $i uuid $(val "gpus\.$i\.uuid" "$F") (nvidia-smi $(cat "$T/smi_uuid_$i"));"
        [ "$(norm_bus "$(val "gpus\.$i\.pci_bus_id" "$F")")" = "$(norm_bus "$(smi_bus $i)")" ] ||
            bad="$bad GPU $i bus $(val "gpus\.$i\.pci_bus_id" "$F") (nvidia-smi $(smi_bus $i));"
        # 1 MiB apart is rounding (bytes to MiB), not a different reading.
        _gm=$(val "gpus\.$i\.memory_total_mib" "$F")
        _sm=$(cat "$T/smi_total_$i")
        [ -n "$_gm" ] && [ "$_gm" -le $((_sm + 1)) ] 2>/dev/null && [ "$_gm" -ge $((_sm - 1)) ] ||
            bad="$bad GPU $i memory $(val "gpus\.$i\.memory_total_mib" "$F") MiB (nvidia-smi $(cat "$T/smi_total_$i"));"
        i=$((i + 1))
    done
    states=""
    i=0
    while [ $i -lt "$g_n" ]; do
        states="$states $i:$(val "gpus\.$i\.state" "$F")"
        r=$(val "gpus\.$i\.reason" "$F")
        [ -z "$r" ] || [ "$r" = null ] || states="$states ($r)"
        i=$((i + 1))
    done
    note gpu-states "as the daemon first saw them:$states"
    if [ -z "$bad" ]; then
        pass ginfo "ginfo equals nvidia-smi for $n GPU(s): names, UUIDs, bus ids, memory"
    else
        fail ginfo "ginfo differs from nvidia-smi:$bad"
    fi
    if [ "$n" -eq 1 ]; then
        note ordering "one GPU: the count is checked, device ordering cannot be"
    fi
    # The link between each pair, as `nvidia-smi topo -m` gives it (NV# for NVLink, also
    # through NVSwitch; else the PCIe level): ginfo's matrix says the same (NV, or NV#).
    if [ "$n" -ge 2 ]; then
        # Rows start with their GPU at column 0 (the header is indented); nvidia-smi
        # may underline labels with terminal escapes.
        esc=$(printf '\033')
        sed "s/$esc\[[0-9;]*m//g" "$OUT/nvidia-smi-topo.txt" |
            awk -v n="$n" '/^GPU[0-9]+[ \t]/ { a = substr($1, 4); for (b = 0; b < n; b++) print a, b, $(b + 2) }' >"$T/smi-topo"
        bad=""
        while read -r a b want; do
            [ "$a" != "$b" ] || continue
            got=$(val "topology\.$a\.$b" "$F")
            case $want in
            NV*) case $got in NV | "$want") continue ;; esac ;;
            *) [ "$got" != "$want" ] || continue ;;
            esac
            bad="$bad $a-$b: ginfo ${got:-?}, nvidia-smi $want;"
        done <"$T/smi-topo"
        if [ ! -s "$T/smi-topo" ]; then
            fail topology "no GPU rows in nvidia-smi topo -m (see nvidia-smi-topo.txt)"
        elif [ -z "$bad" ]; then
            pass topology "ginfo's links equal nvidia-smi topo -m for every pair ($(cut -d' ' -f3 "$T/smi-topo" | grep -v '^X$' | sort | uniq -c | sed 's/^ *//' | tr '\n' ' '| sed 's/ $//'))"
        else
            fail topology "ginfo's links differ from nvidia-smi topo -m:$bad"
        fi
    fi
fi

# An outside process (not under gflow) holding a context: seen with its pid and MiB,
# and it blocks its GPU until ignored.
opid=""
[ -z "$first" ] || {
    CUDA_VISIBLE_DEVICES=$(cat "$T/smi_uuid_$first") "$BIN/cuda_probe" --hold 240 --alloc 64 \
        --ready "$T/outside.ready" >"$OUT/outside-process.txt" 2>&1 &
    opid=$!
    bg_pids="$bg_pids $opid"
}
if [ -z "$opid" ]; then
    :
elif ! wait_for 60 test -s "$T/outside.ready"; then
    fail outside-process "cuda_probe could not hold a context: $(tail -n 1 "$OUT/outside-process.txt")"
else
    og=$(smi_index_of_bus "$(val 'device\.0\.bus_id' "$OUT/outside-process.txt")")
    [ -n "$og" ] || og=$first
    "$BIN/nvml_probe" >"$OUT/nvml_probe-busy.txt" 2>&1
    "$SMI" --query-compute-apps=pid,used_memory,gpu_bus_id --format=csv >"$OUT/nvidia-smi-apps.csv" 2>&1
    smi_mib=$("$SMI" --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
        tr -d ' ' | sed -n "s/^$opid,//p" | head -n 1)
    if wait_for 30 ginfo_has_proc "$og" "$opid"; then
        cp "$T/ginfo.json" "$OUT/ginfo-outside.json"
        k=$(ginfo_proc "$og" "$opid")
        g_mib=$(val "gpus\.$og\.processes\.$k\.used_memory_mib" "$T/ginfo.flat")
        if [ -z "$smi_mib" ]; then
            fail outside-process "ginfo shows pid $opid on GPU $og ($g_mib MiB) but nvidia-smi does not list it"
        elif [ "$g_mib" = "$smi_mib" ]; then
            pass outside-process "pid $opid on GPU $og with $g_mib MiB, as nvidia-smi says"
        elif [ "$g_mib" = null ] && [ "$smi_mib" = "[N/A]" ]; then
            pass outside-process "pid $opid on GPU $og, its memory unknown to NVML (nvidia-smi: [N/A])"
        else
            fail outside-process "pid $opid on GPU $og: ginfo $g_mib MiB, nvidia-smi $smi_mib MiB"
        fi
    elif [ -z "$smi_mib" ]; then
        fail outside-process "neither ginfo nor nvidia-smi lists pid $opid (a PID namespace hides it?); see nvml_probe-busy.txt"
    else
        fail outside-process "nvidia-smi lists pid $opid ($smi_mib MiB), ginfo does not within 30 s (GPU $og: $(val "gpus\.$og\.state" "$T/ginfo.flat"))"
    fi
    # It blocks its GPU: a job for that GPU waits (Unmanaged) until an admin ignores it.
    "$BIN/gctl" set-gpus "$og" >>"$LOG" 2>&1
    if submit outside-blocks --gpus 1 "$BIN/cuda_probe" --list; then
        bj=$jid
        if wait_for 30 job_reason_is "$bj" Unmanaged; then
            pass outside-blocks "job $bj waits for GPU $og with reason Unmanaged while pid $opid runs"
        else
            fail outside-blocks "job $bj for GPU $og: state $(job_state "$bj"), reason $(job_reason "$bj") (expected PD, Unmanaged)"
        fi
        if ! "$BIN/gctl" gpu-process ignore --gpu "$og" --pid "$opid" >"$T/ignore.out" 2>&1; then
            fail outside-ignore "gctl gpu-process ignore failed: $(head -n 1 "$T/ignore.out")"
        elif finish_job outside-ignore "$bj" 60; then
            got=$(norm_bus "$(val 'device\.0\.bus_id' "$OUT/job-outside-ignore.txt")")
            if [ "$got" = "$(norm_bus "$(smi_bus "$og")")" ]; then
                pass outside-ignore "after 'gctl gpu-process ignore' job $bj ran on GPU $og beside pid $opid"
            else
                fail outside-ignore "job $bj ran but its CUDA device 0 is '$got', GPU $og is $(smi_bus "$og")"
            fi
        fi
    fi
    "$BIN/gctl" set-gpus all >>"$LOG" 2>&1
fi
[ -z "$opid" ] || stop_pid "$opid"

# A job's own CUDA process is the job's.
if [ -n "$whole" ] && submit job-process --gpus 1 "$BIN/cuda_probe" --hold 240 --alloc 32 --ready "$T/job.ready"; then
    aj=$jid
    if wait_for 60 test -s "$T/job.ready"; then
        apid=$(cat "$T/job.ready")
        "$BIN/gjob" log "$aj" >"$T/aj.log" 2>&1
        ag=$(smi_index_of_bus "$(val 'device\.0\.bus_id' "$T/aj.log")")
        if [ -n "$ag" ] && wait_for 30 ginfo_proc_is_job "$ag" "$apid" "$aj"; then
            cp "$T/ginfo.json" "$OUT/ginfo-job.json"
            st=$(val "gpus\.$ag\.state" "$T/ginfo.flat")
            pass job-process "pid $apid of job $aj shown on GPU $ag as the job's (GPU state $st)"
        else
            fail job-process "pid $apid of job $aj (GPU ${ag:-?}) not shown as the job's within 30 s"
            ginfo_read ginfo-job.json
        fi
    else
        fail job-process "job $aj did not create its context (state $(job_state "$aj")): $("$BIN/gjob" log "$aj" 2>&1 | tail -n 1)"
    fi
    "$BIN/gcancel" "$aj" >>"$LOG" 2>&1
    wait_for 30 job_ended "$aj"
    "$BIN/gjob" log "$aj" >"$OUT/job-job-process.txt" 2>&1
fi

# A job without GPUs sees none.
if submit no-gpu-job "$BIN/cuda_probe" --list && finish_job no-gpu-job "$jid" 60; then
    c=$(val count "$OUT/job-no-gpu-job.txt")
    v=$(val CUDA_VISIBLE_DEVICES "$OUT/job-no-gpu-job.txt")
    if [ "$c" = 0 ]; then
        pass no-gpu-job "a job without --gpus sees 0 CUDA devices (CUDA_VISIBLE_DEVICES='$v')"
    else
        fail no-gpu-job "a job without --gpus sees ${c:-?} CUDA device(s) (CUDA_VISIBLE_DEVICES='$v')"
    fi
fi

# A job pinned to GPU $2 sees exactly that GPU (check $1). $3: the CUDA_DEVICE_ORDER of
# the submitter ("-" unset); $4: the CUDA_VISIBLE_DEVICES the job must get, if given.
pin_check() {
    _name=$1
    _g=$2
    "$BIN/gctl" set-gpus "$_g" >>"$LOG" 2>&1
    jid=$(
        if [ "$3" = - ]; then unset CUDA_DEVICE_ORDER; else export CUDA_DEVICE_ORDER="$3"; fi
        "$BIN/gbatch" --parsable --gpus 1 "$BIN/cuda_probe" --list 2>"$T/gbatch.err"
    )
    if [ -z "$jid" ]; then
        fail "$_name" "gbatch failed: $(head -n 1 "$T/gbatch.err")"
        return
    fi
    djobs="$djobs $jid"
    log "job $jid: pinned to GPU $_g, submitter's CUDA_DEVICE_ORDER $3"
    finish_job "$_name" "$jid" 60 || return
    _f=$OUT/job-$_name.txt
    _c=$(val count "$_f")
    _b=$(val 'device\.0\.bus_id' "$_f")
    _v=$(val CUDA_VISIBLE_DEVICES "$_f")
    _o=$(val CUDA_DEVICE_ORDER "$_f")
    _seen="sees ${_c:-?} device(s), device 0 '$_b' (CUDA_VISIBLE_DEVICES=$_v, CUDA_DEVICE_ORDER=$_o; submitter's $3)"
    if [ "$_c" != 1 ] || [ "$(norm_bus "$_b")" != "$(norm_bus "$(smi_bus "$_g")")" ]; then
        fail "$_name" "job $jid on GPU $_g ($(smi_bus "$_g")) $_seen"
    elif [ -n "${4:-}" ] && [ "$_v" != "$4" ]; then
        fail "$_name" "job $jid on GPU $_g got CUDA_VISIBLE_DEVICES=$_v, expected $4"
    else
        pass "$_name" "job $jid on GPU $_g $_seen"
    fi
}
for i in $whole; do
    pin_check "pinned-gpu-$i" "$i" -
done
# The second GPU (index 1 unless that one is in MIG mode), where an index is wrong
# unless CUDA numbers GPUs as NVML does.
if [ -n "$second" ]; then
    pin_check order-unset "$second" -
    pin_check order-fastest-first "$second" FASTEST_FIRST
    pin_check order-pci-bus-id "$second" PCI_BUS_ID
elif [ "$n" -ge 2 ]; then
    note ordering "fewer than two GPUs take whole-GPU jobs: device ordering cannot be tested"
fi
"$BIN/gctl" set-gpus all >>"$LOG" 2>&1

# MIG: the state is recorded; with instances, a --mig job sees exactly its instance.
P=$OUT/nvml_probe.txt
mig_gpus=$(sed -n 's/^gpu\.\([0-9]*\)\.mig_mode=current:1.*/\1/p' "$P" 2>/dev/null | tr '\n' ' ')
mig_modes=$(sed -n 's/^gpu\.\([0-9]*\)\.mig_mode=\(.*\)/\1:\2/p' "$P" 2>/dev/null | tr '\n' ';')
if [ -z "$mig_gpus" ]; then
    note mig "no GPU has MIG enabled (${mig_modes:-mig mode not reported}); --mig not tested"
else
    inst=$(grep -c '^gpu\.[0-9]*\.mig\.[0-9]*\.uuid=MIG-' "$P")
    note mig "MIG enabled on GPU(s) $mig_gpus; $inst instance(s): $(sed -n 's/^gpu\.\([0-9]*\)\.mig\.\([0-9]*\)\.name=.* MIG \(.*\)/\1.\2:\3/p' "$P" | tr '\n' ' ')"
    if [ "$inst" -gt 0 ]; then
        key=$(grep -m 1 '^gpu\.[0-9]*\.mig\.[0-9]*\.name=' "$P" | sed 's/\.name=.*//')
        profile=$(val "$key\.name" "$P" | sed 's/.* MIG //')
        if ! jid=$("$BIN/gbatch" --parsable --mig "$profile" "$BIN/cuda_probe" --list 2>"$T/gbatch.err"); then
            note mig-job "gbatch --mig $profile refused: $(head -n 1 "$T/gbatch.err")"
        else
            djobs="$djobs $jid"
            if finish_job mig-job "$jid" 60; then
                f=$OUT/job-mig-job.txt
                v=$(val CUDA_VISIBLE_DEVICES "$f")
                ok=""
                cu=$(val 'device\.0\.uuid' "$f")
                if grep -q "^gpu\.[0-9]*\.mig\.[0-9]*\.uuid=$v\$" "$P" && [ "$(val count "$f")" = 1 ]; then
                    case $v in MIG-*) ;; *) ok="not a MIG- UUID" ;; esac
                else
                    ok="count $(val count "$f"), not one of nvml_probe's instances"
                fi
                if [ -z "$ok" ]; then
                    pass mig-job "job $jid (--mig $profile) sees exactly its instance $v (CUDA's uuid $cu)"
                else
                    fail mig-job "job $jid (--mig $profile): CUDA_VISIBLE_DEVICES=$v: $ok"
                fi
            fi
            mig_one_check "$profile"
        fi
    fi
fi
isolation_checks
daemon_stop

# ---- daemon "reuse": no polling, so a GPU is free again only through the job's end ----
if [ -n "$whole" ] && daemon_start reuse 600 index; then
    "$BIN/gctl" set-gpus "$first" >>"$LOG" 2>&1
    rm -f "$T/reuse.ready"
    if submit reuse-after-cancel --gpus 1 "$BIN/cuda_probe" --hold 240 --ready "$T/reuse.ready"; then
        rj=$jid
        if ! wait_for 60 test -s "$T/reuse.ready"; then
            fail reuse-after-cancel "job $rj did not create its context (state $(job_state "$rj"))"
        else
            "$BIN/gcancel" "$rj" >>"$LOG" 2>&1
            if wait_for 30 job_ended "$rj" && submit reuse-after-cancel --gpus 1 "$BIN/cuda_probe" --list; then
                nj=$jid
                # The poll interval is 600 s: 60 s is "at once" with a wide margin.
                if finish_job reuse-after-cancel "$nj" 60; then
                    pass reuse-after-cancel "GPU $first ran job $nj right after job $rj was cancelled"
                fi
            else
                fail reuse-after-cancel "job $rj did not end after gcancel (state $(job_state "$rj"))"
            fi
        fi
    fi
    daemon_stop
fi

# ---- daemon "uuid": gpu_id_format = "uuid" ----
if [ -n "$whole" ] && daemon_start uuid 1 uuid; then
    pin_check gpu-id-format-uuid $last - "$(cat "$T/smi_uuid_$last")"
    daemon_stop
fi

# ---- daemon "constrain": daemon.constrain_devices = true, ids as "auto" gives them ----
[ -z "$whole" ] || constrain_check

note time "$(($(date +%s) - START)) s"
if [ "$fails" -gt 0 ]; then
    echo "check.sh: $fails check(s) failed; see $SUMMARY and the evidence in $OUT" >&2
    exit 1
fi
echo "check.sh: all checks passed; summary in $SUMMARY"
exit 0
