#!/usr/bin/python3
"""Crash and fault injection against the real binaries (make stress; not part of make check).

Every scenario runs its own daemon in a sandbox under /tmp (XDG_* and GFLOW_DAEMON__*
pointed into it, as tests/e2e/conftest.py does), drives it with the real commands, and
ends with figures:

  acknowledged  jobs whose id a client got back (gbatch exited 0)
  lost          acknowledged jobs the daemon no longer knows, or whose id now names
                another job
  run twice     jobs that started more than once (every job appends $GFLOW_JOB_ID to a
                shared file first thing)
  stuck         acknowledged jobs not in a terminal state when the scenario gave up
  escaped       live processes of jobs that have ended (found by GFLOW_JOB_ID in
                /proc/*/environ)
  wrong         acknowledged jobs that ended in another state than expected

Scenarios (--scenario, default all):
  kill-daemon  SIGKILL of gflowd at random moments (some during its start-up), >= 20
               times, while several clients submit jobs, arrays, GPU jobs, jobs with a
               time limit, and cancel jobs; gflowd is started again after each kill and
               must re-adopt the running jobs.
  kill-shim    SIGKILL of gflow-shim processes of jobs that left children behind (plain,
               in the background, in a new session, ignoring SIGTERM, daemonized), with
               the daemon up and while it is down; gcancel of the same jobs as the
               control.
  disk-full    the data directory on a small tmpfs that a job fills: submissions while
               it is full, a restart while it is full, then the space freed.
  fd-limit     the daemon's RLIMIT_NOFILE lowered (prlimit): many idle connections,
               then many jobs running at once.

Run as root (tmpfs mounts, prlimit on the daemon). Exit status 0 when every figure is
0 and the daemon survived everything, 1 otherwise. Everything started is stopped by pid
(marked with GFLOW_STRESS_SANDBOX=<dir> in its environment), mounts are removed.

    /usr/bin/python3 tests/stress/stress.py [--build DIR] [--scenario NAME]...
        [--kills N] [--clients N] [--seed N] [--keep]
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TERMINAL = ("CD", "F", "CA", "TO")
FIGURES = ("acknowledged", "lost", "run twice", "stuck", "escaped", "wrong")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- processes

def proc_stat(pid):
    """(state, start time in ticks) of pid, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[19])


def alive(pid, start=None):
    st = proc_stat(pid)
    if st is None or st[0] in ("Z", "X"):
        return False
    return start is None or st[1] == start


def kill_pid(pid, start, sig=signal.SIGKILL):
    """Signals pid only if it is still the process with that start time (pidfd-pinned)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        st = proc_stat(pid)
        if not st or st[1] != start:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def wait_for(pred, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


# ---------------------------------------------------------------- the sandbox

class Sandbox:
    """One daemon's world: directories, environment, commands, API, processes."""

    def __init__(self, build, name, data_dir=None):
        self.build = Path(build).resolve()
        self.root = Path(tempfile.mkdtemp(prefix=f"gf-stress-{name}-", dir="/tmp"))
        self.data = Path(data_dir) if data_dir else self.root / "data"
        self.sock = self.root / "gflowd.sock"
        self.work = self.root / "work"
        self.runs = self.root / "runs"
        self.mounts = []
        for d in ("xdg-data", "xdg-run", "xdg-config", "work"):
            (self.root / d).mkdir()
        self.runs.touch()
        self.marker = f"GFLOW_STRESS_SANDBOX={self.root}".encode()
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": os.environ.get("HOME", "/root"),
            "XDG_DATA_HOME": str(self.root / "xdg-data"),
            "XDG_RUNTIME_DIR": str(self.root / "xdg-run"),
            "XDG_CONFIG_HOME": str(self.root / "xdg-config"),
            "GFLOW_DAEMON__DATA_DIR": str(self.data),
            "GFLOW_DAEMON__SOCKET_PATH": str(self.sock),
            "GFLOW_SOCKET": str(self.sock),
            "GFLOW_STRESS_SANDBOX": str(self.root),
        }
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                self.env[k] = os.environ[k]

    # -- commands

    def run(self, prog, *args, timeout=30):
        """Runs one of our programs; a timeout gives returncode None."""
        argv = [str(self.build / prog), *map(str, args)]
        try:
            return subprocess.run(argv, env=self.env, cwd=self.work, capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(argv, None, e.stdout or "", e.stderr or "")

    def popen(self, prog, *args):
        """Starts one of our programs in the sandbox without waiting for it."""
        return subprocess.Popen([str(self.build / prog), *map(str, args)], env=self.env,
                                cwd=self.work, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def up(self, *opts):
        cp = self.run("gflowd", *opts, "up", timeout=60)
        return cp.returncode == 0, (cp.stdout + cp.stderr).strip()

    def down(self):
        return self.run("gflowd", "down", timeout=60)

    def job_cmd(self, tail):
        """A job command line that first records that the job started."""
        return f"echo $GFLOW_JOB_ID >> {self.runs}; {tail}"

    def submit(self, *args, timeout=30):
        """gbatch ARGS; (list of acknowledged ids, error text)."""
        cp = self.run("gbatch", *args, timeout=timeout)
        if cp.returncode is None:
            return [], f"no answer within {timeout} s"
        if cp.returncode != 0:
            return [], (cp.stderr.strip() or f"exit {cp.returncode}")
        m = re.search(r"Submitted (\d+) batch jobs (\d+)-(\d+)", cp.stdout)
        if m:
            return list(range(int(m.group(2)), int(m.group(3)) + 1)), None
        m = re.search(r"Submitted batch job (\d+)", cp.stdout)
        if m:
            return [int(m.group(1))], None
        return [], f"unexpected gbatch output: {cp.stdout!r}"

    # -- the daemon

    def daemon(self):
        """(pid, start) of the live daemon named by the lock file, or None."""
        try:
            pid, start = (self.data / "gflowd.lock").read_text().split()[:2]
            pid, start = int(pid), int(start)
        except (OSError, ValueError):
            return None
        return (pid, start) if alive(pid, start) else None

    def kill_daemon(self):
        holder = self.daemon()
        if not holder:
            return False
        kill_pid(*holder)
        wait_for(lambda: not alive(*holder), 10)
        return True

    def daemon_log(self):
        return read_bytes(self.data / "gflowd.log").decode(errors="replace")

    # -- the API

    def api(self, method, path, body=None, timeout=10):
        """(status, parsed JSON or text) of one request, or None when unreachable."""
        data = json.dumps(body).encode() if body is not None else b""
        head = (f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(str(self.sock))
            s.sendall(head.encode() + data)
            chunks = []
            while True:
                c = s.recv(65536)
                if not c:
                    break
                chunks.append(c)
        except OSError:
            return None
        finally:
            s.close()
        raw = b"".join(chunks)
        if b"\r\n\r\n" not in raw:
            return None
        head, body = raw.split(b"\r\n\r\n", 1)
        try:
            status = int(head.split()[1])
        except (IndexError, ValueError):
            return None
        if b"chunked" in head.lower():
            return status, body
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body

    def job(self, job_id):
        """The job's object, {} if the daemon does not know it, None if unreachable."""
        r = self.api("GET", f"/v1/jobs/{job_id}")
        if r is None:
            return None
        return r[1] if r[0] == 200 else {}

    def jobs(self):
        """Every job the daemon knows, by id (None if unreachable)."""
        r = self.api("GET", "/v1/jobs?user=all", timeout=30)
        if r is None or r[0] != 200:
            return None
        return {j["id"]: j for j in r[1]["jobs"]}

    def wait_terminal(self, ids, timeout):
        """Waits until every job of ids is terminal; returns {id: last seen job}."""
        seen = {}
        deadline = time.monotonic() + timeout
        answered = time.monotonic()
        pending = set(ids)
        while pending and time.monotonic() < deadline:
            all_jobs = self.jobs()
            if all_jobs is None:
                if time.monotonic() - answered > 20:
                    break  # not answering: the caller decides what to do
                time.sleep(0.2)
                continue
            answered = time.monotonic()
            for i in list(pending):
                j = all_jobs.get(i)
                seen[i] = j if j else {}
                if j and j["state"] in TERMINAL:
                    pending.discard(i)
            if pending:
                time.sleep(0.2)
        all_jobs = self.jobs() if time.monotonic() - answered <= 20 else None
        if all_jobs is not None:
            for i in ids:
                seen[i] = all_jobs.get(i) or self.job(i) or {}
        return seen

    def runs_count(self):
        lines = read_bytes(self.runs).decode(errors="replace").split()
        return collections.Counter(int(x) for x in lines if x.isdigit())

    # -- processes of the sandbox

    def processes(self):
        """[(pid, start, job id or None, argv0)] of live processes carrying our marker."""
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            if pid == os.getpid():
                continue
            env = read_bytes(f"/proc/{pid}/environ").split(b"\0")
            if self.marker not in env:
                continue
            st = proc_stat(pid)
            if not st or st[0] in ("Z", "X"):
                continue
            job_id = None
            for e in env:
                if e.startswith(b"GFLOW_JOB_ID="):
                    try:
                        job_id = int(e.split(b"=", 1)[1])
                    except ValueError:
                        pass
            cmd = read_bytes(f"/proc/{pid}/cmdline").split(b"\0")[0].decode(errors="replace")
            found.append((pid, st[1], job_id, cmd))
        return found

    def job_processes(self, job_id):
        """Live processes of one job, shims excluded."""
        return [p for p in self.processes()
                if p[2] == job_id and not p[3].endswith("gflow-shim")]

    def escaped(self, jobs):
        """Live processes (not shims) of the jobs that are terminal in jobs {id: job}."""
        ended = {i for i, j in jobs.items() if j and j.get("state") in TERMINAL}
        return [p for p in self.processes()
                if p[2] in ended and not p[3].endswith("gflow-shim")]

    def mount_tmpfs(self, path, size):
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                        str(path)], check=True)
        self.mounts.append(path)

    def remove_job_cgroups(self):
        """Removes the cgroups the shims made for their jobs (named by "cgroup: PATH" lines
        of the lock files): a shim killed here, or by a scenario while no daemon was left
        to clean up after it, leaves its job's cgroup behind. Once the processes are gone."""
        for lock in (self.data / "run").glob("*.lock"):
            lines = read_bytes(lock).decode(errors="replace").splitlines()
            for d in (Path(x[len("cgroup: "):]) for x in lines if x.startswith("cgroup: ")):
                deadline = time.monotonic() + 5
                while True:
                    try:
                        d.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:  # EBUSY until its last process is reaped
                        if time.monotonic() > deadline:
                            log(f"cannot remove the cgroup {d}")
                            break
                        time.sleep(0.02)

    def cleanup(self, keep=False):
        if self.daemon():
            self.down()
        deadline = time.monotonic() + 15
        while True:
            procs = self.processes()
            if not procs or time.monotonic() > deadline:
                break
            for pid, start, _, _ in procs:
                kill_pid(pid, start)
            time.sleep(0.05)
        left = self.processes()
        self.remove_job_cgroups()
        for m in reversed(self.mounts):
            if subprocess.run(["umount", str(m)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(m)], capture_output=True)
        if keep:
            log(f"sandbox kept: {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)
        return left


# ---------------------------------------------------------------- checking outcomes

def ensure_answering(sb, notes, *opts):
    """Before the count: a daemon that is gone or no longer answers is killed and started
    again (what an admin would do), so that what it lost can be told from what it cannot
    say. True if it had to be."""
    if sb.daemon() and sb.api("GET", "/v1/health", timeout=5) is not None:
        return False
    notes.append("before the count the daemon was " +
                 ("alive but not answering" if sb.daemon() else "not running") +
                 "; it was (killed and) started again to count")
    sb.kill_daemon()
    ok, msg = sb.up(*opts)
    if not ok:
        notes.append(f"gflowd up failed: {msg[-300:]}")
    return True


def log_lines(sb, patterns, notes, limit=3):
    """Notes the first lines of gflowd.log that contain one of patterns."""
    shown = 0
    for line in sb.daemon_log().splitlines():
        if any(p in line for p in patterns) and shown < limit:
            notes.append(f"gflowd.log: {line[24:][:200]}")
            shown += 1

def judge(sb, acked, jobs, notes):
    """Figures for the acknowledged jobs acked {id: expectation} against jobs {id: job}.
    An expectation: {"name": str, "states": set of states, "ran": bool (must have run)}."""
    runs = sb.runs_count()
    fig = dict.fromkeys(FIGURES, 0)
    fig["acknowledged"] = len(acked)
    examples = collections.defaultdict(list)
    for i, want in sorted(acked.items()):
        j = jobs.get(i) or {}
        if not j:
            fig["lost"] += 1
            examples["lost"].append(f"{i} ({want['name']}): unknown to the daemon")
            continue
        if j.get("name") != want["name"]:
            fig["lost"] += 1
            examples["lost"].append(f"{i}: expected {want['name']}, the id names {j.get('name')}")
            continue
        if j["state"] not in TERMINAL:
            fig["stuck"] += 1
            examples["stuck"].append(f"{i} ({want['name']}): {j['state']} {j.get('reason')}")
            continue
        bad = j["state"] not in want["states"]
        if not bad and want.get("ran") and runs[i] == 0:
            bad = True
        if bad:
            fig["wrong"] += 1
            examples["wrong"].append(
                f"{i} ({want['name']}): {j['state']} {j.get('reason')} exit={j.get('exit_code')}"
                f" ran={runs[i]}x, expected {'/'.join(sorted(want['states']))}")
    twice = {i: n for i, n in runs.items() if n > 1}
    fig["run twice"] = len(twice)
    for i, n in sorted(twice.items())[:5]:
        examples["run twice"].append(f"{i}: started {n} times")
    esc = sb.escaped(jobs)
    fig["escaped"] = len(esc)
    for pid, _, jid, cmd in esc[:5]:
        examples["escaped"].append(f"pid {pid} ({cmd}) of job {jid}, which is "
                                   f"{(jobs.get(jid) or {}).get('state')}")
    for k, lines in examples.items():
        for line in lines[:5]:
            notes.append(f"{k}: {line}")
        if len(lines) > 5:
            notes.append(f"{k}: ... and {len(lines) - 5} more")
    return fig


def sanitizer_notes(sb, notes):
    text = sb.daemon_log()
    for mark in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
        if mark in text:
            notes.append(f"sanitizer report in gflowd.log: {mark}")


# ---------------------------------------------------------------- scenario: kill the daemon

def scenario_kill_daemon(args, rng):
    sb = Sandbox(args.build, "kill-daemon")
    notes, result = [], {}
    try:
        ok, msg = sb.up("--simulate-gpus", "2")
        if not ok:
            raise RuntimeError(f"gflowd up failed: {msg}")
        acked, lock = {}, threading.Lock()
        errors = collections.Counter()
        stop = threading.Event()

        def client(cid):
            r = random.Random(args.seed * 1000 + cid)
            seq = 0
            while not stop.is_set():
                seq += 1
                kind = r.choices(["ok", "fail", "array", "timeout", "cancel", "gpu"],
                                 weights=[40, 10, 10, 5, 15, 10])[0]
                name = f"c{cid}-{seq}-{kind}"
                nap = f"{r.uniform(0, 1.5):.2f}"
                opts = ["--name", name]
                states, ran = {"CD"}, True
                if kind == "ok":
                    cmd = sb.job_cmd(f"sleep {nap}")
                elif kind == "gpu":
                    cmd, opts = sb.job_cmd(f"sleep {nap}"), opts + ["--gpus", "1"]
                elif kind == "fail":
                    cmd, states = sb.job_cmd(f"sleep {nap}; exit 3"), {"F"}
                elif kind == "array":
                    cmd, opts = sb.job_cmd(f"sleep {nap}"), opts + ["--array", "1-3"]
                elif kind == "timeout":
                    cmd, opts, states = sb.job_cmd("sleep 30"), opts + ["-t", "0:02"], {"TO"}
                else:  # cancel
                    cmd, states, ran = sb.job_cmd("sleep 30"), {"CA"}, False
                ids, err = sb.submit(*opts, cmd)
                if err:
                    err = err.removeprefix("gbatch: ").replace(str(sb.root), "SANDBOX")
                    errors[re.sub(r"\d+", "N", err)[:80]] += 1
                    time.sleep(0.1)
                    continue
                with lock:
                    for n, i in enumerate(ids):
                        want = f"{name}_{n + 1}" if kind == "array" else name
                        acked[i] = {"name": want, "states": states, "ran": ran, "kind": kind}
                if kind == "cancel":
                    time.sleep(r.uniform(0, 1.0))
                    deadline = time.monotonic() + 25
                    while time.monotonic() < deadline:
                        cp = sb.run("gcancel", ids[0])
                        if cp.returncode == 0:
                            break
                        if "already ended" in cp.stderr:
                            with lock:
                                acked[ids[0]]["states"] = set(TERMINAL)
                            break
                        time.sleep(0.1)
                    else:
                        with lock:  # never acknowledged: it may just run out
                            acked[ids[0]]["states"] = {"CA", "CD"}
                        notes.append(f"gcancel {ids[0]} never answered")

        threads = [threading.Thread(target=client, args=(c,), daemon=True)
                   for c in range(args.clients)]
        for t in threads:
            t.start()
        restarts = early = extra_kills = failed_starts = 0
        for k in range(args.kills):
            time.sleep(rng.uniform(0.1, 1.5))
            old = sb.daemon()
            if not old:
                notes.append(f"kill {k + 1}: no daemon was running")
            else:
                kill_pid(*old)
                wait_for(lambda o=old: not alive(*o), 10)
            if rng.random() < 0.25:
                # Kill it again while it starts (re-adoption, migrations, socket).
                p = sb.popen("gflowd", "--simulate-gpus", "2", "up")
                new = wait_for(lambda o=old: (sb.daemon() or o) != o and sb.daemon(), 10,
                               interval=0.001)
                if new:
                    time.sleep(rng.uniform(0, 0.03))
                    kill_pid(*new)
                # gflowd up fails when its daemon died before it answered: a kill during
                # start-up; else the start was already over.
                if p.wait(timeout=60) != 0:
                    early += 1
                else:
                    extra_kills += 1
            for attempt in range(10):
                ok, msg = sb.up("--simulate-gpus", "2")
                if ok:
                    break
                failed_starts += 1
                notes.append(f"kill {k + 1}: gflowd up failed: {msg[-200:]}")
                time.sleep(0.5)
            else:
                notes.append("gflowd would not start again; stopping")
                break
            restarts += 1
        stop.set()
        for t in threads:
            t.join(timeout=60)
        log(f"kill-daemon: {args.kills + early + extra_kills} kills ({early} during start-up),"
            f" {restarts} restarts, {len(acked)} acknowledged; waiting for every job to end")
        jobs = sb.wait_terminal(list(acked), timeout=120)
        if ensure_answering(sb, notes, "--simulate-gpus", "2"):
            jobs = sb.wait_terminal(list(acked), timeout=60)
        time.sleep(2)  # processes of jobs that just ended
        result = judge(sb, acked, jobs, notes)
        everything = sb.jobs() or {}
        extra = [i for i in everything if i not in acked]
        result.update({"kills": args.kills + early + extra_kills,
                       "kills during start-up (gflowd up failed)": early,
                       "failed starts": failed_starts,
                       "jobs re-adopted (log lines)": sb.daemon_log().count(" re-adopted"),
                       "submissions refused or cut": sum(errors.values()),
                       "jobs without an ack": len(extra)})
        for e, n in errors.most_common(3):
            notes.append(f"gbatch error x{n}: {e}")
        if extra:
            notes.append(f"jobs that exist although gbatch got no reply (fine): {len(extra)}")
        sanitizer_notes(sb, notes)
    finally:
        left = sb.cleanup(args.keep)
        if left:
            notes.append(f"processes survived the cleanup: {left}")
    return result, notes


# ---------------------------------------------------------------- scenario: kill shims

SHIM_JOB_TYPES = {
    # what the job leaves behind besides its main process
    "plain": "sleep 60",
    "background": "sleep 60 & sleep 60 & wait",
    "new-session": "setsid sleep 60 & sleep 60",
    "ignores-TERM": "(trap '' TERM; sleep 60) & sleep 60",
    "daemonized": "sh -c 'sleep 60 >/dev/null 2>&1 &'; sleep 60",
}


def scenario_kill_shim(args, rng):
    sb = Sandbox(args.build, "kill-shim")
    notes, result = [], dict.fromkeys(FIGURES, 0)
    grace = 2
    try:
        ok, msg = sb.up("--kill-grace-secs", grace)
        if not ok:
            raise RuntimeError(f"gflowd up failed: {msg}")
        per = {}
        variants = ("gcancel (control)", "shim killed, daemon up", "shim killed, daemon down")
        for v, variant in enumerate(variants):
            acked = {}
            for typ, tail in SHIM_JOB_TYPES.items():
                name = f"v{v}-{typ}"
                ids, err = sb.submit("--name", name, sb.job_cmd(tail))
                if err:
                    notes.append(f"{variant}: submit {typ} failed: {err}")
                    continue
                acked[ids[0]] = {"name": name, "typ": typ, "ran": True,
                                 "states": {"CA"} if variant.startswith("gcancel") else {"F"}}
            # Running, with every process started (the main one and what it left).
            counts = {"plain": 1, "background": 3, "new-session": 2, "ignores-TERM": 2,
                      "daemonized": 2}
            for i, want in acked.items():
                if not wait_for(lambda i=i, w=want: len(sb.job_processes(i)) >= counts[w["typ"]],
                                10):
                    notes.append(f"{variant}: job {i} ({want['typ']}) did not start all its "
                                 f"processes")
            jobs = {i: sb.job(i) for i in acked}
            if variant.startswith("gcancel"):
                for i in acked:
                    sb.run("gcancel", i)
            else:
                if variant.endswith("down"):
                    sb.kill_daemon()
                for i, j in jobs.items():
                    pid = (j or {}).get("shim_pid")
                    st = proc_stat(pid) if pid else None
                    cmd = read_bytes(f"/proc/{pid}/cmdline") if pid else b""
                    if st and b"gflow-shim" in cmd:
                        kill_pid(pid, st[1])
                    else:
                        notes.append(f"{variant}: job {i} has no live shim ({pid})")
                if variant.endswith("down"):
                    time.sleep(0.5)
                    ok, msg = sb.up("--kill-grace-secs", grace)
                    if not ok:
                        notes.append(f"{variant}: gflowd up failed: {msg}")
            jobs = sb.wait_terminal(list(acked), timeout=30)
            if ensure_answering(sb, notes, "--kill-grace-secs", grace):
                jobs = sb.wait_terminal(list(acked), timeout=30)
            time.sleep(grace + 3)  # the grace of a SIGTERM, and a margin
            sub_notes = []
            fig = judge(sb, acked, jobs, sub_notes)
            by_type = collections.Counter()
            for pid, _, jid, cmd in sb.escaped(jobs):
                by_type[acked[jid]["typ"] if jid in acked else "?"] += 1
            per[variant] = (fig, dict(by_type),
                            {acked[i]["typ"]: f"{(j or {}).get('state')} {(j or {}).get('reason')}"
                             for i, j in jobs.items()})
            for k in FIGURES:
                result[k] += fig[k]
            notes.extend(f"{variant}: {n}" for n in sub_notes if not n.startswith("escaped"))
            # Leave nothing for the next variant.
            for pid, start, jid, _ in sb.processes():
                if jid in acked:
                    kill_pid(pid, start)
        for variant, (fig, by_type, states) in per.items():
            notes.append(f"{variant}: escaped {fig['escaped']} "
                         f"{json.dumps(by_type) if by_type else ''}; stuck {fig['stuck']}; "
                         f"wrong {fig['wrong']}")
            for typ, st in states.items():
                notes.append(f"    {typ:13s} -> {st}")
        sanitizer_notes(sb, notes)
    finally:
        left = sb.cleanup(args.keep)
        if left:
            notes.append(f"processes survived the cleanup: {left}")
    return result, notes


# ---------------------------------------------------------------- scenario: disk full

def scenario_disk_full(args, rng):
    """Phases, each one's figures noted: (1) a job fills the data directory and keeps
    running: submissions while it is full (quiet jobs, and jobs whose log cannot be
    written); (2) the filler is cancelled while the disk is still full (its end must be
    committed); (3) the daemon is killed and started while full; (4) the space is freed,
    the daemon started if needed, and every acknowledged job must end as expected."""
    root = Path(tempfile.mkdtemp(prefix="gf-stress-disk-", dir="/tmp"))
    small = root / "small"
    sb = Sandbox(args.build, "disk-full", data_dir=small / "data")
    notes, result = [], {}

    def answers():
        return sb.daemon() is not None and sb.api("GET", "/v1/health") is not None
    try:
        sb.mount_tmpfs(small, "32m")  # gflowd keeps 4 MiB free (disk.h)
        ok, msg = sb.up()
        if not ok:
            raise RuntimeError(f"gflowd up failed: {msg}")
        acked = {}
        for n in range(5):
            ids, err = sb.submit("--name", f"before-{n}", sb.job_cmd("true"))
            for i in ids:
                acked[i] = {"name": f"before-{n}", "states": {"CD"}, "ran": True}
        sb.wait_terminal(list(acked), 30)
        filler = small / "filler"
        ids, err = sb.submit("--name", "filler", sb.job_cmd(
            f"dd if=/dev/zero of={filler} bs=64k 2>/dev/null; sleep 300"))
        if err:
            raise RuntimeError(f"the filler was refused: {err}")
        filler_id = ids[0]
        acked[filler_id] = {"name": "filler", "states": set(TERMINAL), "ran": True}

        def full():
            st = os.statvfs(small)
            return st.f_bavail * st.f_frsize < 64 * 1024
        if not wait_for(full, 30):
            notes.append("the tmpfs never filled up")

        # 1. Submissions while full.
        log("disk-full: the data directory is full; submitting")
        acked_full, errors = {}, collections.Counter()
        for n in range(20):
            chatty = n % 5 == 4  # its log cannot be written
            tail = "head -c 200000 /dev/zero | tr '\\0' x; echo" if chatty else "true"
            ids2, err = sb.submit("--name", f"full-{n}", sb.job_cmd(tail), timeout=15)
            if err:
                errors[err.removeprefix("gbatch: ").replace(str(sb.root), "SANDBOX")[:110]] += 1
            for i in ids2:
                acked_full[i] = {"name": f"full-{n}", "states": {"CD"}, "ran": True}
        time.sleep(2)
        survived_submit = answers()
        jobs_full = {i: sb.job(i) for i in acked_full}
        states_full = collections.Counter(
            f"{(j or {}).get('state', '?')} {(j or {}).get('reason') or ''}".strip()
            for j in jobs_full.values())

        # 2. A job's end while full.
        cancel = sb.run("gcancel", filler_id, timeout=15)
        if cancel.returncode == 0:
            acked[filler_id]["states"] = {"CA"}
        time.sleep(3)
        survived_end = answers()

        # 3. A restart while full.
        log("disk-full: restarting the daemon while the disk is full")
        sb.kill_daemon()
        restart_ok, restart_msg = sb.up()

        # 4. Space again.
        filler.unlink(missing_ok=True)
        if not sb.daemon():
            ok, msg = sb.up()
            if not ok:
                notes.append(f"gflowd up failed even with space again: {msg}")
        acked.update(acked_full)
        ensure_answering(sb, notes)
        if cancel.returncode != 0:  # the filler still sleeps: end it now
            if sb.run("gcancel", filler_id).returncode == 0:
                acked[filler_id]["states"] = {"CA"}
        jobs = sb.wait_terminal(list(acked), 60)
        time.sleep(1)
        result = judge(sb, acked, jobs, notes)
        result.update({
            "acknowledged while full": len(acked_full),
            "refused while full": sum(errors.values()),
            "daemon answers after submissions while full": "yes" if survived_submit else "NO",
            "gcancel of the filler while full": "ok" if cancel.returncode == 0 else
            f"FAILED ({cancel.stderr.strip()[-100:]})",
            "daemon answers after a job ended while full": "yes" if survived_end else "NO",
            "restart while full": "ok" if restart_ok else "FAILED",
        })
        notes.append(f"while full, the acknowledged jobs were: {dict(states_full)}")
        notes.append(f"the filler ended: {(jobs.get(filler_id) or {}).get('state')} "
                     f"{(jobs.get(filler_id) or {}).get('reason')}")
        for e, n in errors.most_common(3):
            notes.append(f"gbatch error x{n}: {e}")
        if not restart_ok:
            notes.append(f"gflowd up while full said: {restart_msg[-300:]}")
        logtext = sb.daemon_log()
        for pat in ("No space left", "SQLITE_FULL", "database or disk is full"):
            c = logtext.count(pat)
            if c:
                notes.append(f"gflowd.log mentions '{pat}' {c} times")
        log_lines(sb, (" error: ", "exiting"), notes, limit=4)
        sanitizer_notes(sb, notes)
    finally:
        try:  # the data directory goes with the tmpfs: keep the daemon's log
            shutil.copyfile(sb.data / "gflowd.log", sb.root / "gflowd.log")
        except OSError:
            pass
        left = sb.cleanup(args.keep)
        if left:
            notes.append(f"processes survived the cleanup: {left}")
        shutil.rmtree(root, ignore_errors=True)
    return result, notes


# ---------------------------------------------------------------- scenario: fd limit

def scenario_fd_limit(args, rng):
    sb = Sandbox(args.build, "fd-limit")
    notes, result = [], {}
    held = []
    try:
        ok, msg = sb.up()
        if not ok:
            raise RuntimeError(f"gflowd up failed: {msg}")
        pid, start = sb.daemon()
        idle = len(os.listdir(f"/proc/{pid}/fd"))
        limit = idle + 16

        def lower_limit():
            pid = sb.daemon()[0]
            subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={limit}:{limit}"], check=True)
        lower_limit()
        notes.append(f"the daemon holds {idle} fds when idle; RLIMIT_NOFILE set to {limit}")
        acked, errors = {}, collections.Counter()

        # 1. Many idle connections, then submissions.
        for _ in range(3 * limit):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(1)  # a full listen backlog makes connect() wait
            try:
                s.connect(str(sb.sock))
            except OSError as e:
                errors[f"idle connection: {e.strerror or type(e).__name__}"] += 1
                s.close()
                continue
            held.append(s)
        time.sleep(0.5)
        t0 = time.monotonic()
        for n in range(5):
            ids, err = sb.submit("--name", f"crowded-{n}", sb.job_cmd("true"), timeout=10)
            if err:
                errors[f"while crowded: {err[:100]}"] += 1
            for i in ids:
                acked[i] = {"name": f"crowded-{n}", "states": {"CD"}, "ran": True}
        crowded_secs = time.monotonic() - t0
        for s in held:
            s.close()
        held.clear()
        time.sleep(1)
        alive1 = sb.daemon() is not None and sb.api("GET", "/v1/health") is not None
        if not alive1:
            # Say how it looks, then go on with a fresh daemon (same limit).
            holder = sb.daemon()
            if holder:
                fds = len(os.listdir(f"/proc/{holder[0]}/fd"))
                wchan = read_bytes(f"/proc/{holder[0]}/wchan").decode()
                queued = "?"
                ss = subprocess.run(["ss", "-xl", "src", str(sb.sock)], capture_output=True,
                                    text=True).stdout.split("\n")
                if len(ss) > 1 and ss[1].split():
                    queued = ss[1].split()[2]
                notes.append(f"after the idle connections closed, the daemon (alive, {fds} fds, "
                             f"in {wchan}) did not answer; its listen queue holds {queued} "
                             f"connections; it was killed and started again")
            sb.kill_daemon()
            ok, msg = sb.up()
            if not ok:
                raise RuntimeError(f"gflowd up failed: {msg}")
            lower_limit()

        # 2. Many jobs at once (each running job holds fds in the daemon).
        lock = threading.Lock()

        def submit_many(c):
            for n in range(10):
                name = f"many-{c}-{n}"
                ids, err = sb.submit("--name", name, sb.job_cmd("sleep 3"))
                with lock:
                    if err:
                        errors[f"many jobs: {err[:100]}"] += 1
                    for i in ids:
                        acked[i] = {"name": name, "states": {"CD"}, "ran": True}
        threads = [threading.Thread(target=submit_many, args=(c,)) for c in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        jobs = sb.wait_terminal(list(acked), 90)
        time.sleep(1)
        alive2 = sb.daemon() is not None and sb.api("GET", "/v1/health") is not None
        ids, err = sb.submit("--name", "after", sb.job_cmd("true"), timeout=10)
        if ids:
            acked[ids[0]] = {"name": "after", "states": {"CD"}, "ran": True}
        if ensure_answering(sb, notes) or ids:
            jobs = sb.wait_terminal(list(acked), 60)
        result = judge(sb, acked, jobs, notes)
        result.update({
            "daemon answers after idle connections": "yes" if alive1 else "NO",
            "daemon alive after many jobs": "yes" if alive2 else "NO",
            "submission after the load": "ok" if ids else f"FAILED ({err})",
            "submissions refused": sum(errors.values()),
        })
        notes.append(f"5 submissions with {3 * limit} idle connections open took "
                     f"{crowded_secs:.1f} s")
        for e, n in errors.most_common(4):
            notes.append(f"client error x{n}: {e}")
        logtext = sb.daemon_log()
        for pat in ("Too many open files", "EMFILE"):
            c = logtext.count(pat)
            if c:
                notes.append(f"gflowd.log mentions '{pat}' {c} times")
        log_lines(sb, ("Too many open files", "error"), notes)
        sanitizer_notes(sb, notes)
    finally:
        for s in held:
            s.close()
        left = sb.cleanup(args.keep)
        if left:
            notes.append(f"processes survived the cleanup: {left}")
    return result, notes


SCENARIOS = {
    "kill-daemon": scenario_kill_daemon,
    "kill-shim": scenario_kill_shim,
    "disk-full": scenario_disk_full,
    "fd-limit": scenario_fd_limit,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS))
    ap.add_argument("--kills", type=int, default=25)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--keep", action="store_true", help="keep the sandboxes")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("stress.py: run as root (tmpfs mounts, prlimit on the daemon)")
    for prog in ("gflowd", "gbatch", "gcancel", "gflow-shim"):
        if not (Path(args.build) / prog).exists():
            sys.exit(f"stress.py: {args.build}/{prog} is missing (ninja -C {args.build})")
    log(f"seed {args.seed} (--seed {args.seed} repeats the random choices)")
    rng = random.Random(args.seed)
    results = {}
    for name in args.scenario or list(SCENARIOS):
        log(f"scenario {name}")
        t0 = time.monotonic()
        try:
            fig, notes = SCENARIOS[name](args, rng)
        except Exception as e:  # report and go on with the next scenario
            fig, notes = {}, [f"the scenario failed: {type(e).__name__}: {e}"]
        results[name] = (fig, notes, time.monotonic() - t0)

    bad = False
    print("\n==================== stress figures ====================")
    for name, (fig, notes, secs) in results.items():
        print(f"\n{name} ({secs:.0f} s)")
        if not fig:
            bad = True
        for k in FIGURES:
            if k in fig:
                print(f"  {k:46s} {fig[k]}")
                if k != "acknowledged" and fig[k]:
                    bad = True
        for k, v in fig.items():
            if k not in FIGURES:
                print(f"  {k:46s} {v}")
                if v in ("NO", "FAILED") or str(v).startswith("FAILED"):
                    bad = True
        for n in notes:
            print(f"  - {n}")
    print()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
