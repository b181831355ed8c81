"""make bench: measures the figures of DESIGN.md §5 against a daemon in a sandbox.

First gflow and task-spooler side by side, interleaved sample by sample (one gflow sample,
one task-spooler sample, and so on, so the machine's drift cancels), each figure printed
with the peer's, the ratio and the goal of issue 10; then gflow's own figures against their
targets; then the idle daemon's CPU use and the cost of one GPU poll. Each figure is the
median of several rounds from this one run: compare ratios from the same run, not single
timings. The method is described in docs/design.md (performance).
"""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")


def api_request(sock, method, path, body=None):
    """One request to gflowd's socket; the JSON answer (None if empty)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: gflow\r\nConnection: close\r\n"
              f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
              .encode() + data)
    chunks = []
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        chunks.append(b)
    s.close()
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    return json.loads(payload) if payload.strip() else None


class Sandbox:
    """A daemon of its own: data, socket, config file (-c, an empty one: as root gflowd
    would read /etc/gflow/gflow.toml otherwise) and XDG dirs in a temp dir. data: a data
    directory to start from (copied)."""

    def __init__(self, up_args=(), data=None, prefix="gflow-bench.", **extra_env):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.dir, 0o755)
        self.sock = os.path.join(self.dir, "gflowd.sock")
        self.data = os.path.join(self.dir, "data")
        self.conf = os.path.join(self.dir, "gflow.toml")
        open(self.conf, "w").close()
        if data:
            shutil.copytree(data, self.data)
        self.up_args = up_args
        self.env = dict(os.environ)
        self.env.update({
            "XDG_DATA_HOME": os.path.join(self.dir, "xdg-data"),
            "XDG_CONFIG_HOME": os.path.join(self.dir, "xdg-config"),
            "XDG_RUNTIME_DIR": os.path.join(self.dir, "xdg-run"),
            "GFLOW_DAEMON__DATA_DIR": self.data,
            "GFLOW_DAEMON__SOCKET_PATH": self.sock,
            "GFLOW_SOCKET": self.sock,
            "GFLOW_DAEMON__LOG_LEVEL": "warn",
            "PATH": BUILD + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
        })
        self.env.update(extra_env)
        self.up()

    def up(self):
        """Starts the daemon; the seconds `gflowd up` took."""
        t0 = time.perf_counter()
        self.run("gflowd", "-c", self.conf, "up", *self.up_args)
        elapsed = time.perf_counter() - t0
        self.pid = self.api("GET", "/v1/status")["pid"]
        return elapsed

    def down(self):
        self.run("gflowd", "-c", self.conf, "down", check=False)

    def run(self, *args, check=True, stdout=subprocess.PIPE):
        return subprocess.run([os.path.join(BUILD, args[0]), *args[1:]], env=self.env,
                              cwd=self.dir, check=check, stdout=stdout,
                              stderr=subprocess.PIPE, text=True)

    def api(self, method, path, body=None):
        return api_request(self.sock, method, path, body)

    def spec(self, command, **kw):
        d = {"command": command, "workdir": self.dir, "env": {"PATH": "/usr/bin:/bin"}}
        d.update(kw)
        return d

    def counts(self):
        return self.api("GET", "/v1/status")["counts"]

    def wait_counts(self, pred, timeout=120, step=0.002):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            c = self.counts()
            if pred(c):
                return c
            time.sleep(step)
        raise RuntimeError("timed out waiting for jobs")

    def events(self, query):
        """A stream of GET /v1/events?QUERY, subscribed when this returns: its socket and
        what came after the answer's head."""
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
        s.sendall(f"GET /v1/events?{query} HTTP/1.1\r\nHost: gflow\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        return s, head.partition(b"\r\n\r\n")[2]

    @staticmethod
    def wait_events(stream, name, n, timeout=120):
        """Blocks until n events called name have come on stream (chunked SSE), as
        `tsp -w` blocks: no polling. Then closes it."""
        stream, raw = stream
        stream.settimeout(timeout)
        body, seen = b"", 0
        marker = f"event: {name}".encode()
        try:
            while seen < n:
                while True:  # undo the chunked encoding of what has come
                    size_end = raw.find(b"\r\n")
                    if size_end < 0:
                        break
                    size = int(raw[:size_end].split(b";")[0] or b"0", 16)
                    if len(raw) < size_end + 2 + size + 2:
                        break
                    body += raw[size_end + 2:size_end + 2 + size]
                    raw = raw[size_end + 2 + size + 2:]
                events = body.split(b"\n\n")
                body = events.pop()
                lines = [e.split(b"\n") for e in events]
                seen += sum(marker in l for l in lines)
                if any(b"event: resync" in l for l in lines):
                    raise RuntimeError("the event stream resynced")
                if seen < n:
                    more = stream.recv(1 << 16)
                    if not more:
                        raise RuntimeError("the event stream ended")
                    raw += more
        finally:
            stream.close()

    def rss_kb(self):
        return proc_status(f"/proc/{self.pid}/status", "VmRSS:")

    def close(self):
        self.down()
        shutil.rmtree(self.dir, ignore_errors=True)


def proc_status(path, key):
    """The number after `key` in a /proc status file (0 if absent)."""
    with open(path) as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def median(xs):
    return statistics.median(xs)


def mark(ok):
    return "PASS" if ok else "MISS"


def report(name, value, unit, target, ok=None):
    """One of gflow's own figures, with its goal and, where it has one, PASS/MISS."""
    tail = f"{mark(ok)}  goal {target}" if ok is not None else f"      {target}"
    print(f"{name:<52} {value:>9.2f} {unit:<7} {tail}", flush=True)


def compare(name, ours, theirs, unit, goal, ratio_ok, samples=None):
    """A figure measured for both gflow and task-spooler in this run. The ratio is always
    gflow / task-spooler (for a rate, > 1 is better; for a time, < 1 is better)."""
    ratio = ours / theirs if theirs else float("inf")
    print(f"{name:<44} {ours:>8.2f} {unit:<3} {theirs:>8.2f} {unit:<3} {ratio:>6.2f}x  "
          f"{mark(ratio_ok(ratio))}  goal {goal}", flush=True)
    if samples and os.environ.get("BENCH_VERBOSE"):
        for who, xs in zip(("gflow", "tsp"), samples):
            print(f"    {who}: " + " ".join(f"{x:.2f}" for x in xs))


JOB = "date +%s.%N > f"  # the job of every peer figure: sh -c 'date +%s.%N > f'


class Tsp:
    """task-spooler (Debian's `tsp`) isolated in a temp dir: its own socket (TS_SOCKET)
    and output files (TMPDIR); 2 slots; output capture on (tsp's default, as gflow's jobs
    always log). Killed at the end: tsp -K on its socket, then by pid whatever is left
    that was started with that socket."""

    def __init__(self, binary):
        self.bin = binary
        self.dir = tempfile.mkdtemp(prefix="tsp-bench.")
        self.sock = os.path.join(self.dir, "tsp.sock")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TS_")}
        self.env.update({"TS_SOCKET": self.sock, "TMPDIR": self.dir})
        self.run("-S", "2")
        # A gate for blocker jobs: held open read-write by us, so a blocker's
        # `read x < gate` never waits to open it, only to read a line.
        self.gate = os.path.join(self.dir, "gate")
        os.mkfifo(self.gate)
        self.gate_fd = None

    def run(self, *args):
        return subprocess.run([self.bin, *args], env=self.env, cwd=self.dir, check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=300)

    def submit(self, *cmd):
        return int(self.run(*cmd).stdout.strip())

    def block_slots(self):
        """Occupies both slots until open_gate(): what is submitted meanwhile waits."""
        self.gate_fd = os.open(self.gate, os.O_RDWR)
        for _ in range(2):
            self.submit("sh", "-c", "read x < gate")

    def open_gate(self):
        os.write(self.gate_fd, b"go\ngo\n")
        os.close(self.gate_fd)
        self.gate_fd = None

    def close(self):
        subprocess.run([self.bin, "-K"], env=self.env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        # Its server and any client still waiting: tsp processes started with our socket.
        mine = f"TS_SOCKET={self.sock}".encode()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() != "tsp":
                        continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if mine in f.read().split(b"\0"):
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_stamp(path, t0, timeout=10):
    """The job's timestamp in `path` minus t0, in ms."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return (float(text) - t0) * 1000
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.0002)
    raise RuntimeError(f"no timestamp in {path}")


def peer_latency(sb, ts, rounds=21):
    """From the moment the submit command returned to the job's timestamp, idle daemons,
    alternately gflow then task-spooler."""
    ours, theirs = [], []
    gbatch = os.path.join(BUILD, "gbatch")
    for _ in range(rounds):
        for cmd, env, cwd, out in (([gbatch, "sh", "-c", JOB], sb.env, sb.dir, ours),
                                   ([ts.bin, "sh", "-c", JOB], ts.env, ts.dir, theirs)):
            f = os.path.join(cwd, "f")
            if os.path.exists(f):
                os.unlink(f)
            subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
            t0 = time.time()
            out.append(wait_stamp(f, t0))
            time.sleep(0.03)  # let the job finish: measure an idle daemon
    compare(f"submit -> job running, idle (median of {rounds})", median(ours), median(theirs),
            "ms", "<= 1.0x", lambda r: r <= 1.0, (ours, theirs))


def peer_drain(sb, ts, rounds=3, n=500):
    """n trivial jobs drained. gflow: from sending all n in one request to the last one
    done. task-spooler (one job per command): n jobs queued behind two blockers that hold
    its 2 slots (untimed), then from releasing the blockers to the last job done."""
    ours, theirs = [], []
    loop = (f"i=1; while [ $i -lt {n} ]; do {ts.bin} sh -c '{JOB}' >/dev/null; "
            f"i=$((i+1)); done")
    for _ in range(rounds):
        # Waited for as task-spooler's are (`tsp -w`): blocked until told, here by the
        # daemon's event stream, subscribed before the submission.
        before = sb.counts()["CD"]
        stream = sb.events("user=all&types=job_ended")
        t0 = time.perf_counter()
        sb.api("POST", "/v1/jobs", {"jobs": [sb.spec(f"sh -c '{JOB}'") for _ in range(n)]})
        sb.wait_events(stream, "job_ended", n)
        ours.append(time.perf_counter() - t0)
        if sb.counts()["CD"] < before + n:
            raise RuntimeError("a drained job did not complete")

        ts.block_slots()
        subprocess.run(["sh", "-c", loop], env=ts.env, cwd=ts.dir, check=True)
        last = ts.submit("sh", "-c", JOB)  # the n-th job
        t0 = time.perf_counter()
        ts.open_gate()
        ts.run("-w", str(last))
        ts.run("-w", str(last - 1))  # 2 slots: the one before may end after the last
        theirs.append(time.perf_counter() - t0)
    compare(f"{n} trivial jobs drained (median of {rounds})", median(ours), median(theirs),
            "s", "<= 0.8x", lambda r: r <= 0.8, (ours, theirs))


def peer_submissions(sb, ts, blocks=6, n=50):
    """Sequential submissions from a shell loop (the client's whole process: start-up,
    connect, request, exit), in blocks of n alternating gflow / task-spooler. The jobs do
    not run meanwhile: gbatch --hold; task-spooler's queue behind two blockers."""
    gbatch = os.path.join(BUILD, "gbatch")
    t_ours, t_theirs = [], []
    ts.block_slots()
    for _ in range(blocks):
        for sub, env, cwd in ((f"{gbatch} --hold", sb.env, sb.dir), (ts.bin, ts.env, ts.dir)):
            loop = (f"i=0; while [ $i -lt {n} ]; do {sub} sh -c '{JOB}' >/dev/null; "
                    f"i=$((i+1)); done")
            t0 = time.perf_counter()
            subprocess.run(["sh", "-c", loop], env=env, cwd=cwd, check=True)
            dt = time.perf_counter() - t0
            (t_theirs if sub == ts.bin else t_ours).append(dt)
    ts.open_gate()
    ts.run("-w")  # drained before the next figure
    total = blocks * n
    compare(f"sequential submissions ({total} each)", total / sum(t_ours),
            total / sum(t_theirs), "/s", ">= 1.3x", lambda r: r >= 1.3,
            ([n / t for t in t_ours], [n / t for t in t_theirs]))


def bench_peers(tsp):
    print(f"{'side by side, interleaved':<44} {'gflow':>12} {'task-spooler':>12} {'ratio':>7}")
    sb = Sandbox()
    ts = Tsp(tsp)
    try:
        peer_latency(sb, ts)
        peer_drain(sb, ts)
        peer_submissions(sb, ts)
    finally:
        ts.close()
        sb.close()
    print()


def bench_queue_10k():
    sb = Sandbox(GFLOW_DAEMON__MAX_RUNNING_JOBS="1")
    try:
        sb.api("POST", "/v1/jobs", {"jobs": [sb.spec("sleep 600")]})
        for _ in range(10):
            sb.api("POST", "/v1/jobs", {"jobs": [sb.spec("true") for _ in range(1000)]})
        sb.wait_counts(lambda c: c["PD"] == 10000 and c["R"] == 1)
        rows = sb.run("gqueue", "-a").stdout.count("\n") - 1
        times = []
        gqueue = os.path.join(BUILD, "gqueue")
        out = os.path.join(sb.dir, "gqueue.out")
        for _ in range(11):
            with open(out, "w") as f:
                t0 = time.perf_counter()
                subprocess.run([gqueue, "-a"], env=sb.env, stdout=f, check=True)
                times.append((time.perf_counter() - t0) * 1000)
        ms = median(times)
        report(f"gqueue -a, 10,000 queued, to a file ({rows} rows)", ms, "ms", "<= 15 ms",
               ms <= 15)
        mb = sb.rss_kb() / 1024
        report("daemon memory with 10,000 queued (RSS)", mb, "MB", "<= 15 MB", mb <= 15)
        sb.run("gcancel", "1")
    finally:
        sb.close()


def bench_array_100k():
    sb = Sandbox()
    try:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            sb.run("gbatch", "--hold", "--parsable", "--array", "1-100000", "true")
            times.append(time.perf_counter() - t0)
        report("100,000-task array accepted (one gbatch)", median(times), "s", "<= 1 s",
               median(times) <= 1)
    finally:
        sb.close()
    sb = Sandbox()
    try:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            sb.run("gbatch", "--hold", "--parsable", "--param", "x=1:100000", "echo", "{x}")
            times.append(time.perf_counter() - t0)
        report("100,000-job sweep accepted (one gbatch)", median(times), "s", "<= 1.5 s",
               median(times) <= 1.5)
    finally:
        sb.close()


def bench_scheduler():
    subprocess.run(["ninja", "-C", BUILD, "sched_bench"], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([os.path.join(BUILD, "sched_bench")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    for line in out.splitlines():
        if "10k queued GPU jobs, 8 GPUs all busy" in line:
            ms = float(line.split("median")[1].split()[0])
            report("scheduling pass, 10,000 queued GPU jobs, 8 GPUs", ms, "ms", "< 1 ms",
                   ms < 1)
        if "100k --begin waiting in heap + 8 start" in line:
            ms = float(line.split("median")[1].split()[0])
            report("scheduling pass, 100,000 jobs waiting for --begin + 8 that start", ms, "ms",
                   "< 2 ms", ms < 2)


def bench_ginfo():
    sb = Sandbox(up_args=("--simulate-gpus", "8"))
    try:
        ginfo = os.path.join(BUILD, "ginfo")
        times = []
        for _ in range(11):
            t0 = time.perf_counter()
            subprocess.run([ginfo, "-v"], env=sb.env, stdout=subprocess.DEVNULL, check=True)
            times.append((time.perf_counter() - t0) * 1000)
        report("ginfo -v, 8 simulated GPUs", median(times), "ms", "< 10 ms",
               median(times) < 10)
    finally:
        sb.close()


def bench_freed_gpu(rounds=11):
    """From a GPU job's end to the start of the job that waited for its GPU, as the
    daemon records them, on one simulated GPU whose NVML poll is far away (60 s): once
    for an exclusive job, once for a shared one that waited for GPU memory."""
    for label, extra in (("exclusive", {}), ("shared", {"shared": True, "gpu_memory_mb": 51200})):
        sb = Sandbox(up_args=("--simulate-gpus", "1"), GFLOW_DAEMON__GPU_POLL_INTERVAL_SECS="60")
        try:
            go = os.path.join(sb.dir, "go")
            gaps = []
            for _ in range(rounds):
                a, b = (x["id"] for x in sb.api("POST", "/v1/jobs", {"jobs": [
                    sb.spec("while [ ! -e go ]; do sleep 0.01; done", gpus=1, **extra),
                    sb.spec("true", gpus=1, **extra)]})["jobs"])
                deadline = time.monotonic() + 10
                while sb.api("GET", f"/v1/jobs/{a}")["state"] != "R":
                    if time.monotonic() > deadline:
                        raise RuntimeError("the first job did not start")
                    time.sleep(0.002)
                open(go, "w").close()
                deadline = time.monotonic() + 10
                while (jb := sb.api("GET", f"/v1/jobs/{b}"))["state"] != "CD":
                    if time.monotonic() > deadline:
                        raise RuntimeError("the second job did not run")
                    time.sleep(0.002)
                ja = sb.api("GET", f"/v1/jobs/{a}")
                gaps.append((jb["start_time"] - ja["end_time"]) * 1000)
                os.unlink(go)
            report(f"freed GPU -> next job running ({label})", median(gaps), "ms", "< 5 ms",
                   median(gaps) < 5)
        finally:
            sb.close()


def thread_cpu(pid):
    """{tid: CPU ns} of each thread of pid (schedstat: nanoseconds run, not 10 ms ticks)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        except OSError:
            pass
    return out


def wakeups(pid):
    """Voluntary context switches of the loop thread (its sleeps in epoll_wait and on I/O)."""
    return proc_status(f"/proc/{pid}/task/{pid}/status", "voluntary_ctxt_switches:")


def bench_idle(secs=10):
    """An idle daemon on 8 simulated GPUs with the default GPU poll (every 10 s): CPU of
    its loop thread and of its NVML thread (src/daemon/gpu/gpu_worker.c) over `secs`, read
    from /proc/<pid>/task/*/schedstat."""
    sb = Sandbox(up_args=("--simulate-gpus", "8"))
    try:
        pid = sb.pid
        time.sleep(1)  # the start-up's first GPU read and scheduling pass are done
        a, wa = thread_cpu(pid), wakeups(pid)
        time.sleep(secs)
        b, wb = thread_cpu(pid), wakeups(pid)
        loop_ns = b[pid] - a[pid]
        all_ns = sum(b[t] - a.get(t, 0) for t in b)
        pct = loop_ns / (secs * 1e9) * 100
        report(f"idle daemon CPU, loop thread ({(wb - wa) / secs * 60:.0f} wake-ups/min)", pct,
               "%", "0%", pct < 0.05)
        report("idle daemon CPU, all threads (incl. simulated NVML)", all_ns / (secs * 1e9) * 100,
               "%", "(no goal: the GPU polls' cost)")
    finally:
        sb.close()


def bench_gpu_poll(secs=6, step=0.01):
    """The CPU one GPU poll of 8 simulated GPUs costs: a daemon polling every second,
    sampled every 10 ms; a poll is a burst of CPU on the NVML thread (a rising edge at
    least half a second after the last one: a burst the scheduler cut in two is one poll),
    its cost that thread's CPU over the polls, plus the loop thread's (taking the reading,
    the scheduling pass it triggers) over the same polls."""
    sb = Sandbox(up_args=("--simulate-gpus", "8"), GFLOW_DAEMON__GPU_POLL_INTERVAL_SECS="1")
    try:
        pid = sb.pid
        time.sleep(0.5)
        first = prev = thread_cpu(pid)
        workers = [t for t in first if t != pid]
        polls, last_edge = 0, -1.0
        deadline = time.monotonic() + secs
        while (now := time.monotonic()) < deadline:
            time.sleep(step)
            cur = thread_cpu(pid)
            if any(cur.get(t, 0) > prev.get(t, 0) for t in workers) and now - last_edge > 0.5:
                polls += 1
                last_edge = now
            prev = cur
        time.sleep(0.2)  # the last poll's burst ends inside the window
        last = thread_cpu(pid)
        nvml_ns = sum(last.get(t, 0) - first[t] for t in workers)
        loop_ns = last[pid] - first[pid]
        if polls:
            report(f"GPU poll, 8 simulated GPUs: NVML thread ({polls} polls)",
                   nvml_ns / polls / 1e6, "ms CPU", "(no goal: mostly the simulator's, NVML calls "
                   "answered from its fixture)")
            report("GPU poll, 8 simulated GPUs: loop thread", loop_ns / polls / 1e6, "ms CPU",
                   "(no goal: taking the reading, the scheduling pass)")
    finally:
        sb.close()


def bench_replay(rounds=3):
    """gflow-replay of 100,000 synthetic jobs (docs/replay.md), every policy."""
    exe = os.path.join(BUILD, "gflow-replay")
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        subprocess.run([exe, "--synthetic", "100000", "--csv"], check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    report("gflow-replay, 100,000 synthetic jobs, every policy", median(times), "s", "< 10 s",
           median(times) < 10)


SECTIONS = {
    "queue": bench_queue_10k,
    "array": bench_array_100k,
    "sched": bench_scheduler,
    "ginfo": bench_ginfo,
    "freed-gpu": bench_freed_gpu,
    "idle": bench_idle,
    "gpu-poll": bench_gpu_poll,
    "replay": bench_replay,
}


def main():
    """bench.py [BUILD [SECTION...]]: every section, or those named (peers and SECTIONS)."""
    start = time.monotonic()
    only = sys.argv[2:]
    unknown = set(only) - set(SECTIONS) - {"peers"}
    if unknown:
        sys.exit(f"bench: unknown section(s) {' '.join(sorted(unknown))}; "
                 f"sections: peers {' '.join(SECTIONS)}")
    print(f"gflow benchmarks ({BUILD}), medians of several rounds\n")
    if not only or "peers" in only:
        tsp = shutil.which("tsp")
        if tsp:
            bench_peers(tsp)
        else:
            print("task-spooler (tsp) not installed: no side-by-side figures "
                  "(scripts/install-deps.sh --bench installs it)\n")
    for name, fn in SECTIONS.items():
        if not only or name in only:
            fn()
    print(f"\n(make bench took {time.monotonic() - start:.0f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
