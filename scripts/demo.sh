#!/bin/bash
# make demo: a small workflow against a daemon in a throw-away sandbox.
# Everything (database, logs, socket) lives in a temporary directory that is removed at
# the end; the daemon is stopped by its own pid.
set -eu
BUILD=${1:-build}
BIN=$(cd "$BUILD" && pwd)
SANDBOX=$(mktemp -d /tmp/gflow-demo.XXXXXX)
chmod 755 "$SANDBOX"
export XDG_DATA_HOME="$SANDBOX/data" XDG_CONFIG_HOME="$SANDBOX/config" XDG_RUNTIME_DIR="$SANDBOX/run"
export GFLOW_DAEMON__DATA_DIR="$SANDBOX/gflow" GFLOW_DAEMON__SOCKET_PATH="$SANDBOX/gflowd.sock"
export GFLOW_SOCKET="$SANDBOX/gflowd.sock" GFLOW_DAEMON__KILL_GRACE_SECS=2
export PATH="$BIN:$PATH"

cleanup() {
    gflowd down >/dev/null 2>&1 || true
    rm -rf "$SANDBOX"
}
trap cleanup EXIT INT TERM

# Shows a command as one would type it, then runs it.
run() {
    local shown="" a
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then shown+=" $a"; else shown+=" '$a'"; fi
    done
    printf '\n\033[1m$%s\033[0m\n' "$shown"
    "$@"
}

cd "$SANDBOX"
cat > train.sh <<'SCRIPT'
#!/bin/bash
# GFLOW --name=train
# GFLOW --priority 20
echo "training in $(pwd) as job $GFLOW_JOB_ID on GPUs $CUDA_VISIBLE_DEVICES ($GFLOW_GPU_UUIDS)"
for epoch in 1 2 3; do echo "epoch $epoch: loss 0.$((9 - epoch))"; done
SCRIPT

# Real GPUs if this machine has an NVIDIA driver, else 4 simulated ones.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    run gflowd up
else
    run gflowd up --simulate-gpus 4
fi
run ginfo
run gbatch --gpus 2 train.sh
run gbatch --name fails sh -c 'echo about to fail; exit 3'
run gbatch --name to-cancel sleep 600
run gbatch --name limited --time 0:03 sleep 600
run gqueue

# Wait until the first three have settled, then cancel the sleeper.
deadline=$(($(date +%s) + 20))
until gqueue -j 3 -f ST | grep -q '^R'; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "job 3 did not start" >&2; exit 1; }
    sleep 0.1
done
run gcancel 3
echo "(job 4 runs into its 3 s time limit...)"
deadline=$(($(date +%s) + 20))
until gqueue -j 4 -a -f ST | grep -q TO; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "job 4 did not time out" >&2; exit 1; }
    sleep 0.2
done
run gqueue -a -f JOBID,NAME,ST,TIME,NODES,EXITCODE,NODELIST\(REASON\)
run gjob log 1
run gjob show 2
run gflowd status
run gflowd down
