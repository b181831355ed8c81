"""make bench-scale: the scale figures of issue 10 with 1,000,000 finished and 100,000
queued jobs in one daemon (DESIGN.md §5).

The state is built through the daemon itself, the way users would make it: 100,000-task
arrays submitted held and cancelled at once with one gcancel of the range (the bulk
cancel), ten times; then a 100,000-task array submitted with a begin time a year ahead
(queued, PD, reason BeginTime). The finished jobs are cancelled (CA) ones: their rows are
what any ended job's are. The built data directory is cached under build/bench-scale-state
(keyed by the store's source, so a schema change rebuilds it); GFLOW_SCALE_FINISHED and
GFLOW_SCALE_QUEUED make a smaller state for a quick look.

Then 20,000 GPU reservations (issue 27; GFLOW_SCALE_RESERVATIONS changes the count) in a
daemon on 4 simulated GPUs with backfill: one-minute windows back to back on GPUs 2-3,
made latest first by the daemon's user (an admin) for another user, while a job waits
for all four GPUs, so that every pass plans it across every window. Printed: the time to
make them, and submit -> running of a one-GPU job next to the same daemon without them.
GFLOW_SCALE_ONLY=reservations runs that part alone.

Printed: daemon start (recovery) time, RSS, submit → running latency next to an empty
daemon's (the scheduling pass over the 100,000 queued is inside it), the submission rate
next to an empty daemon's, `gjob show` of any job, `gqueue` (active only) with the history
alone, `gqueue -a -n 10000` to a file, the database size per finished job, and bulk cancel,
hold and release of the 100,000 queued. Medians of several samples; the empty daemon's
samples are interleaved with the full one's so the machine's drift cancels.
"""
import glob
import hashlib
import os
import random
import shutil
import subprocess
import sys
import time

import bench  # bench.py, beside this file

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINISHED = int(os.environ.get("GFLOW_SCALE_FINISHED", "1000000"))
QUEUED = int(os.environ.get("GFLOW_SCALE_QUEUED", "100000"))
CHUNK = 100000


class Sandbox(bench.Sandbox):
    def __init__(self, data=None):
        super().__init__(data=data, prefix="gflow-scale.")

    def timed(self, *args, stdout=subprocess.DEVNULL):
        t0 = time.perf_counter()
        self.run(*args, stdout=stdout)
        return (time.perf_counter() - t0) * 1000

    def rss_mb(self):
        return self.rss_kb() / 1024

    def db_bytes(self):
        return sum(os.path.getsize(os.path.join(self.data, f)) for f in os.listdir(self.data)
                   if f.startswith("gflow.db"))


def report(name, value, unit, target=""):
    t = f"(target {target})" if target else ""
    print(f"{name:<56} {value:>10.2f} {unit:<6} {t}", flush=True)


def state_key():
    h = hashlib.sha1()
    for f in sorted(glob.glob(os.path.join(SRC, "src", "daemon", "store*"))):
        with open(f, "rb") as fh:
            h.update(fh.read())
    h.update(f"{FINISHED}/{QUEUED}".encode())
    return h.hexdigest()[:12]


def build_state(sb):
    """FINISHED cancelled jobs (held arrays cancelled by range), then QUEUED queued ones."""
    left = FINISHED
    t0 = time.perf_counter()
    cancels = []
    while left > 0:
        n = min(CHUNK, left)
        first = int(sb.run("gbatch", "-H", "--parsable", "--array", f"1-{n}", "true")
                    .stdout.split()[0])
        t1 = time.perf_counter()
        sb.run("gcancel", f"{first}-{first + n - 1}", stdout=subprocess.DEVNULL)
        cancels.append((time.perf_counter() - t1, n))
        left -= n
    print(f"built {FINISHED} finished jobs in {time.perf_counter() - t0:.1f} s", flush=True)
    return cancels


def queue_jobs(sb):
    out = sb.run("gbatch", "--parsable", "--begin", "now+365d", "--array", f"1-{QUEUED}",
                 "true").stdout.split()[0]
    return int(out)


def latency_ms(sb):
    """gbatch returned → the job is running (polling its state)."""
    jid = int(sb.run("gbatch", "--parsable", "-p", "255", "sleep", "0.2").stdout.split()[0])
    t0 = time.perf_counter()
    while sb.api("GET", f"/v1/jobs/{jid}")["state"] == "PD":
        pass
    return (time.perf_counter() - t0) * 1000


def submit_rate(sb, n=50):
    t0 = time.perf_counter()
    for _ in range(n):
        sb.run("gbatch", "-H", "true")
    return n / (time.perf_counter() - t0)


RESERVATIONS = int(os.environ.get("GFLOW_SCALE_RESERVATIONS", "20000"))


def gpu_latency_ms(sb):
    """gbatch of a one-GPU 30-second job returned → the job is running."""
    jid = int(sb.run("gbatch", "--parsable", "-p", "255", "-g", "1", "-t", "0:30", "sleep",
                     "0.2").stdout.split()[0])
    t0 = time.perf_counter()
    while sb.api("GET", f"/v1/jobs/{jid}")["state"] == "PD":
        pass
    ms = (time.perf_counter() - t0) * 1000
    while sb.api("GET", f"/v1/jobs/{jid}")["state"] in ("PD", "R"):
        time.sleep(0.05)  # its GPU free again for the next sample
    return ms


def reservations_bench():
    """RESERVATIONS one-minute windows on GPUs 2-3 for another user (pwd: nobody), from
    a minute ahead, made latest first; an untimed job holds a GPU and a 5-minute job
    waits for all four: backfill plans it after the last window in every pass."""
    env = {"GFLOW_SCHEDULER__BACKFILL": "true", "GFLOW_SCHEDULER__DEFAULT_TIME_LIMIT": "1h"}
    full = bench.Sandbox(up_args=("--simulate-gpus", "4"), prefix="gflow-scale.", **env)
    empty = bench.Sandbox(up_args=("--simulate-gpus", "4"), prefix="gflow-scale.", **env)
    try:
        t0 = time.time() + 60
        t = time.perf_counter()
        for k in reversed(range(RESERVATIONS)):
            r = full.api("POST", "/v1/reservations", {"user": "nobody", "gpu_spec": [2, 3],
                                                      "start": t0 + 60 * k, "duration": 60})
            if "id" not in (r or {}):
                raise SystemExit(f"reservation {k}: {r}")
        report(f"make {RESERVATIONS} reservations (one request each)",
               time.perf_counter() - t, "s")
        for sb in (full, empty):
            sb.run("gbatch", "-g", "1", "sleep", "3600")  # untimed: off GPUs 2-3
            sb.run("gbatch", "-g", "4", "-t", "5:00", "true")  # waits; planned each pass
        full_ms, empty_ms = [], []
        for _ in range(7):
            full_ms.append(gpu_latency_ms(full))
            empty_ms.append(gpu_latency_ms(empty))
        report(f"submit -> running, {RESERVATIONS} reservations", bench.median(full_ms), "ms")
        report("submit -> running, no reservations", bench.median(empty_ms), "ms")
        report("  difference (bounds the pass's reservation work)",
               bench.median(full_ms) - bench.median(empty_ms), "ms", "<= 2 ms")
    finally:
        full.close()
        empty.close()


def main():
    if os.environ.get("GFLOW_SCALE_ONLY") == "reservations":
        reservations_bench()
        return
    cache = os.path.join(BUILD, "bench-scale-state")
    key = state_key()
    cached = os.path.join(cache, key)
    if os.path.isdir(os.path.join(cached, "data")):
        print(f"using the cached state {cached}", flush=True)
        sb = Sandbox(os.path.join(cached, "data"))
        cancels = []
    else:
        sb = Sandbox()
        cancels = build_state(sb)
        sb.down()
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(sb.data, os.path.join(cached, "data"))
        sb.up()
    empty = Sandbox()
    try:
        if cancels:
            report("gcancel of a 100,000-task array (median, building)",
                   bench.median([t for t, n in cancels if n == CHUNK] or [0]), "s", "<= 1 s")
        report("database size per finished job", sb.db_bytes() / max(FINISHED, 1), "bytes")
        # Listing with the history alone (nothing active but what the bench submits).
        ids = [random.randint(1, FINISHED) for _ in range(21)]
        report("gjob show of any job (1M finished)",
               bench.median([sb.timed("gjob", "show", str(i)) for i in ids]), "ms", "<= 5 ms")
        report("gqueue, active only (1M finished)", bench.median([sb.timed("gqueue") for _ in range(11)]),
               "ms", "<= 5 ms")
        out = os.path.join(sb.dir, "list.txt")
        samples = []
        for _ in range(11):
            with open(out, "w") as f:
                samples.append(sb.timed("gqueue", "-a", "-n", "10000", stdout=f))
        report("gqueue -a -n 10000 to a file (1M finished)", bench.median(samples), "ms", "<= 15 ms")

        first_q = queue_jobs(sb)
        rng = f"{first_q}-{first_q + QUEUED - 1}"
        print(f"state: {FINISHED} finished, {QUEUED} queued", flush=True)
        starts = []
        for _ in range(3):
            sb.down()
            starts.append(sb.up())
        report("daemon start (recovery), 1M finished + 100k queued", bench.median(starts), "s", "<= 2 s")
        report("daemon RSS after start", sb.rss_mb(), "MB", "<= 150 MB")
        report("gjob show of any job (full state)",
               bench.median([sb.timed("gjob", "show", str(i)) for i in ids]), "ms", "<= 5 ms")
        full, base = [], []
        for _ in range(7):
            full.append(latency_ms(sb))
            base.append(latency_ms(empty))
        report("submit -> running, full state", bench.median(full), "ms")
        report("submit -> running, empty daemon", bench.median(base), "ms")
        report("  difference (bounds the scheduling pass)", bench.median(full) - bench.median(base), "ms",
               "pass <= 2 ms")
        rf, re_ = [], []
        for _ in range(3):
            rf.append(submit_rate(sb))
            re_.append(submit_rate(empty))
        report("sequential submissions, full / empty daemon", bench.median(rf) / bench.median(re_), "ratio",
               ">= 0.9")
        for verb in (("gjob", "hold"), ("gjob", "release", "--at", "now+365d"), ("gcancel",)):
            t0 = time.perf_counter()
            sb.run(*verb, rng, stdout=subprocess.DEVNULL)
            report(f"{' '.join(verb[:2])} of the 100,000 queued (one request)",
                   time.perf_counter() - t0, "s", "<= 1 s")
    finally:
        empty.close()
        sb.close()
    reservations_bench()


if __name__ == "__main__":
    main()
