"""make bench: measures the figures of DESIGN.md §5 against a daemon in a sandbox.

Each figure is the median of several rounds from this one run, printed next to its target.
The machine is noisy: compare medians and ratios from the same run, not single timings.
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


class Sandbox:
    def __init__(self, **extra_env):
        self.dir = tempfile.mkdtemp(prefix="gflow-bench.")
        os.chmod(self.dir, 0o755)
        self.sock = os.path.join(self.dir, "gflowd.sock")
        self.env = dict(os.environ)
        self.env.update({
            "XDG_DATA_HOME": os.path.join(self.dir, "xdg-data"),
            "XDG_CONFIG_HOME": os.path.join(self.dir, "xdg-config"),
            "XDG_RUNTIME_DIR": os.path.join(self.dir, "xdg-run"),
            "GFLOW_DAEMON__DATA_DIR": os.path.join(self.dir, "data"),
            "GFLOW_DAEMON__SOCKET_PATH": self.sock,
            "GFLOW_SOCKET": self.sock,
            "GFLOW_DAEMON__LOG_LEVEL": "warn",
            "PATH": BUILD + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
        })
        self.env.update(extra_env)
        self.run("gflowd", "up")
        self.pid = self.api("GET", "/v1/status")["pid"]

    def run(self, *args, check=True):
        return subprocess.run([os.path.join(BUILD, args[0]), *args[1:]], env=self.env,
                              cwd=self.dir, check=check, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)

    def api(self, method, path, body=None):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
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

    def spec(self, command, **kw):
        d = {"command": command, "workdir": self.dir, "env": {"PATH": "/usr/bin:/bin"}}
        d.update(kw)
        return d

    def counts(self):
        return self.api("GET", "/v1/status")["counts"]

    def wait_counts(self, pred, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            c = self.counts()
            if pred(c):
                return c
            time.sleep(0.002)
        raise RuntimeError("timed out waiting for jobs")

    def rss_kb(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def close(self):
        self.run("gflowd", "down", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


def median(xs):
    return statistics.median(xs)


def report(name, value, unit, target):
    print(f"{name:<48} {value:>10.2f} {unit:<8} (target {target})", flush=True)


def bench_submissions(sb, rounds=3, n=200):
    """Submissions from a shell loop, the way people submit sweeps."""
    gbatch = os.path.join(BUILD, "gbatch")
    loop = f"i=0; while [ $i -lt {n} ]; do {gbatch} --hold --parsable true >/dev/null; i=$((i+1)); done"
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        subprocess.run(["sh", "-c", loop], env=sb.env, cwd=sb.dir, check=True)
        rates.append(n / (time.perf_counter() - t0))
    report("sequential gbatch submissions (shell loop)", median(rates), "per s",
           ">= 1.3x task-spooler (650-820/s)")


def bench_latency(sb, rounds=21):
    """From starting gbatch to the job's program running (it prints the time)."""
    lat = []
    logs = os.path.join(sb.env["GFLOW_DAEMON__DATA_DIR"], "logs")
    for _ in range(rounds):
        t0 = time.time()
        jid = sb.run("gbatch", "--parsable", "date", "+%s.%N").stdout.strip()
        path = os.path.join(logs, f"{jid}.log")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    lat.append((float(text) - t0) * 1000)
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.0002)
        time.sleep(0.02)  # let the job finish: measure an idle daemon
    report("submit -> job running (idle daemon)", median(lat), "ms", "<= 3 ms")


def bench_throughput(sb, rounds=3, n=500):
    times = []
    for _ in range(rounds):
        before = sb.counts()["CD"]
        t0 = time.perf_counter()
        sb.api("POST", "/v1/jobs", {"jobs": [sb.spec("true") for _ in range(n)]})
        sb.wait_counts(lambda c: c["CD"] >= before + n)
        times.append(time.perf_counter() - t0)
    report(f"{n} trivial jobs to completion", median(times), "s", "<= task-spooler (0.44-0.55 s)")


def bench_queue_10k():
    sb = Sandbox(GFLOW_DAEMON__MAX_RUNNING_JOBS="1")
    try:
        sb.api("POST", "/v1/jobs", {"jobs": [sb.spec("sleep 600")]})
        for _ in range(10):
            sb.api("POST", "/v1/jobs", {"jobs": [sb.spec("true") for _ in range(1000)]})
        sb.wait_counts(lambda c: c["PD"] == 10000 and c["R"] == 1)
        rows = sb.run("gqueue").stdout.count("\n") - 1
        times = []
        gqueue = os.path.join(BUILD, "gqueue")
        for _ in range(11):
            t0 = time.perf_counter()
            subprocess.run([gqueue], env=sb.env, stdout=subprocess.DEVNULL, check=True)
            times.append((time.perf_counter() - t0) * 1000)
        report(f"gqueue with 10,000 queued ({rows} rows)", median(times), "ms", "<= 15 ms")
        report("daemon memory with 10,000 queued (RSS)", sb.rss_kb() / 1024, "MB", "<= 15 MB")
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
        report("100,000-task array accepted (one gbatch)", median(times), "s", "<= 2 s")
    finally:
        sb.close()
    sb = Sandbox()
    try:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            sb.run("gbatch", "--hold", "--parsable", "--param", "x=1:100000", "echo", "{x}")
            times.append(time.perf_counter() - t0)
        report("100,000-job sweep accepted (one gbatch)", median(times), "s", "<= 2 s")
    finally:
        sb.close()


def bench_scheduler():
    subprocess.run(["ninja", "-C", BUILD, "sched_bench"], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([os.path.join(BUILD, "sched_bench")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    for line in out.splitlines():
        if "10k queued GPU jobs, 8 GPUs all busy" in line:
            ms = float(line.split("median")[1].split()[0])
            report("scheduling pass, 10,000 queued GPU jobs, 8 GPUs", ms, "ms", "< 1 ms")


def bench_ginfo():
    sb = Sandbox()
    try:
        sb.run("gflowd", "down")
        sb.run("gflowd", "up", "--simulate-gpus", "8")
        ginfo = os.path.join(BUILD, "ginfo")
        times = []
        for _ in range(11):
            t0 = time.perf_counter()
            subprocess.run([ginfo, "-v"], env=sb.env, stdout=subprocess.DEVNULL, check=True)
            times.append((time.perf_counter() - t0) * 1000)
        report("ginfo -v, 8 simulated GPUs", median(times), "ms", "< 10 ms")
    finally:
        sb.close()


def bench_freed_gpu(rounds=11):
    """From a GPU job's end to the start of the job that waited for its GPU, as the
    daemon records them, on one simulated GPU whose NVML poll is far away (60 s): once
    for an exclusive job, once for a shared one that waited for GPU memory."""
    for label, extra in (("exclusive", {}), ("shared", {"shared": True, "gpu_memory_mb": 51200})):
        sb = Sandbox(GFLOW_DAEMON__GPU_POLL_INTERVAL_SECS="60")
        try:
            sb.run("gflowd", "down")
            sb.run("gflowd", "up", "--simulate-gpus", "1")
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
            report(f"freed GPU -> next job running ({label})", median(gaps), "ms", "<= 10 ms")
        finally:
            sb.close()


def main():
    print(f"gflow benchmarks ({BUILD}), medians of several rounds\n")
    sb = Sandbox()
    try:
        bench_submissions(sb)
        bench_latency(sb)
        bench_throughput(sb)
    finally:
        sb.close()
    bench_queue_10k()
    bench_array_100k()
    bench_scheduler()
    bench_ginfo()
    bench_freed_gpu()


if __name__ == "__main__":
    main()
