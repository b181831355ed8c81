"""Harness for the daemon-backed end-to-end tests.

Every test gets a fresh gflowd in its own temp dir (XDG_* and GFLOW_DAEMON__* pointed into
it, so a root run never touches /var/lib/gflow or /run/gflow). The binaries come from
$GFLOW_BUILD_DIR (default <repo>/build). Outcomes are awaited by polling with a deadline.

Teardown stops the daemon with `gflowd down`, then kills by pid (pinned with a pidfd) every
process that still belongs to the sandbox: the daemon, shims and jobs all carry the marker
variable GFLOW_E2E_SANDBOX=<root> in their environment or the sandbox path on their command
line; then it removes the cgroups those shims made for their jobs. It also fails the test
if the daemon's log shows a sanitizer report.
"""
import fcntl
import grp
import http.client
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("GFLOW_BUILD_DIR", REPO / "build")).resolve()
PROGRAMS = ("gflowd", "gbatch", "gqueue", "gjob", "gcancel", "gflow-shim", "ginfo", "gctl",
            "gstats", "gflow")
TERMINAL = ("CD", "F", "CA", "TO")
ACTIVE = ("PD", "H", "R")
CMD_TIMEOUT = 30          # seconds any one CLI command may take before the test fails
# Under pytest-xdist (make check runs the e2e tests in several workers) each worker is a
# session of its own: the users and groups it makes carry its name, so that workers never
# share, or remove, one another's.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


def per_worker(name):
    return f"{name}-{WORKER}" if WORKER else name


TEST_USER = per_worker("gflowtest")
TEST_GROUP = per_worker("gflowtest-extra")
NOBODY = 65534
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")

# Variables passed through from the outer environment (sanitizer knobs, PATH, locale).
_PASSTHROUGH = ("PATH", "LANG", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TMPDIR")


# ---------------------------------------------------------------- commands without a daemon

VERSION = (REPO / "VERSION").read_text().strip()


@pytest.fixture
def env(tmp_path):
    """For tests of the command line alone: an environment isolated in tmp_path, with a
    socket path nobody listens on."""
    e = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GFLOW_") and not k.startswith("XDG_")
    }
    e["HOME"] = str(tmp_path / "home")
    e["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    e["XDG_DATA_HOME"] = str(tmp_path / "data")
    e["XDG_RUNTIME_DIR"] = str(tmp_path / "run")
    e["GFLOW_SOCKET"] = str(tmp_path / "nowhere" / "gflowd.sock")
    return e


def run_cli(cmd, *args, env, stdin=subprocess.DEVNULL, cwd=None):
    """Runs a built command with env (the `env` fixture) and captures its output."""
    exe = BUILD_DIR / cmd
    if not exe.exists():
        pytest.fail(f"{exe} is missing; build with 'meson setup build && ninja -C build'")
    return subprocess.run([str(exe), *args], env=env, stdin=stdin, capture_output=True,
                          text=True, timeout=20, cwd=cwd)


def assert_one_line_error(r, cmd, status, *needles):
    """The command failed with status, printed nothing on stdout and exactly one line
    on stderr that starts with its name and contains every needle."""
    assert r.returncode == status, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.endswith("\n") and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"{cmd}: "), r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)


NOT_RUNNING = "gflowd is not running: start it with 'gflowd up'"


def assert_not_running(r, *needles, first=NOT_RUNNING):
    """The command found no daemon: status 1, nothing on stdout, and on stderr the line
    every program prints first (without its name in front), then the details (the
    socket, why, what named it), indented, on lines of their own that contain every
    needle."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines and lines[0] == first, r.stderr
    assert len(lines) >= 2 and all(l.startswith("  ") for l in lines[1:]), r.stderr
    details = "\n".join(lines[1:])
    for n in needles:
        assert n in details, (n, r.stderr)


def binary(name):
    return str(BUILD_DIR / name)


def wait_for(pred, what, timeout=10.0, interval=0.01):
    """Polls pred until it returns something truthy and returns that; fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# ---------------------------------------------------------------- processes

def proc_stat(pid):
    """(state, start_time_ticks) of pid from /proc/PID/stat, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[19])


def start_time(pid):
    st = proc_stat(pid)
    return st[1] if st else None


def alive(pid, start=None):
    """True if pid exists, is not a zombie, and (if given) has this start time."""
    st = proc_stat(pid)
    if st is None or st[0] in ("Z", "X"):
        return False
    return start is None or st[1] == start


def read_pid_file(path):
    """The pid a job wrote with `echo $pid > file`, once the line is complete; else None."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") and text.strip() else None


def kill_pid(pid, start, sig=signal.SIGKILL):
    """Signals pid only if it is still the process that had this start time (pidfd-pinned)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        if start_time(pid) != start:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def sandbox_processes(root):
    """Live pids (with start times) whose environment carries this sandbox's marker or
    whose command line names a path inside it."""
    marker = f"GFLOW_E2E_SANDBOX={root}".encode()
    root_b = str(root).encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        env = _read(f"/proc/{pid}/environ").split(b"\0")
        cmd = _read(f"/proc/{pid}/cmdline")
        if marker in env or root_b in cmd:
            st = proc_stat(pid)
            if st and st[0] not in ("Z", "X"):
                found.append((pid, st[1]))
    return found


# ---------------------------------------------------------------- users

_created = []  # ("user" | "group", name) made by this session; removed when it ends


def ensure_group(name):
    """The gid of group name, creating it (we are root)."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        subprocess.run(["groupadd", name], check=True, capture_output=True)
        _created.append(("group", name))
        return grp.getgrnam(name).gr_gid


def ensure_user(name, groups=()):
    """(uid, gid, home) of the unprivileged user name, creating it when we are root and
    making it a member of the supplementary groups (created too when missing). Users and
    groups this session made are removed when it ends."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        if os.geteuid() != 0:
            pytest.skip(f"needs root or an existing user '{name}'")
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True,
                       capture_output=True)
        _created.append(("user", name))
        pw = pwd.getpwnam(name)
    if os.geteuid() == 0:
        for g in groups:
            ensure_group(g)
            if name not in grp.getgrnam(g).gr_mem:
                subprocess.run(["usermod", "-aG", g, name], check=True, capture_output=True)
    return pw.pw_uid, pw.pw_gid, pw.pw_dir


def ensure_test_user():
    """(uid, gid, home) of the unprivileged test user TEST_USER, a member of the
    supplementary group TEST_GROUP (so that tests can check that jobs get the
    submitter's supplementary groups)."""
    return ensure_user(TEST_USER, (TEST_GROUP,) if os.geteuid() == 0 else ())


@pytest.fixture
def owner():
    """ensure_test_user() for tests that switch uids (skipped unless root)."""
    if os.geteuid() != 0:
        pytest.skip("these tests switch uids with setpriv and need root")
    return ensure_test_user()


def pytest_sessionfinish(session, exitstatus):
    for kind, name in reversed(_created):
        cmd = ["userdel", "-r", name] if kind == "user" else ["groupdel", name]
        subprocess.run(cmd, capture_output=True)
    _created.clear()


def as_user(uid, gid=None):
    """Command prefix that runs a program with another uid (we are root)."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    if uid == NOBODY:
        return ["setpriv", f"--reuid={uid}", f"--regid={NOBODY}", "--clear-groups"]
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups"]


# ---------------------------------------------------------------- HTTP over the socket

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = str(path)

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self):
        return self.body.decode(errors="replace")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<Response {self.status} {self.body[:300]!r}>"


# ---------------------------------------------------------------- the sandbox

class Gflow:
    """One isolated gflow installation: its dirs, its env, and a daemon that may run."""

    def __init__(self, env=None, make_root=None):
        self.root = Path(make_root() if make_root else tempfile.mkdtemp(prefix="gf-", dir="/tmp"))
        self.data = self.root / "data"
        self.sock = self.root / "gflowd.sock"
        self.work = self.root / "work"
        for d in ("xdg-data", "xdg-run", "xdg-config", "work"):
            (self.root / d).mkdir(exist_ok=True)
        base = {k: os.environ[k] for k in _PASSTHROUGH if k in os.environ}
        base.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        base.setdefault("LANG", "C.UTF-8")
        base.update({
            "HOME": os.environ.get("HOME", "/root"),
            "XDG_DATA_HOME": str(self.root / "xdg-data"),
            "XDG_RUNTIME_DIR": str(self.root / "xdg-run"),
            "XDG_CONFIG_HOME": str(self.root / "xdg-config"),
            "GFLOW_DAEMON__DATA_DIR": str(self.data),
            "GFLOW_DAEMON__SOCKET_PATH": str(self.sock),
            "GFLOW_SOCKET": str(self.sock),
            "GFLOW_E2E_SANDBOX": str(self.root),
            # The tests may run in a container: gpu_id_format "auto" would then give jobs
            # UUIDs. Tests of that set GFLOW_DAEMON__CONTAINER themselves.
            "GFLOW_DAEMON__CONTAINER": "no",
        })
        base.update(env or {})
        self.env = base
        self.started = False

    # -- running commands

    def run(self, prog, *args, input=None, cwd=None, env=None, user=None,
            timeout=CMD_TIMEOUT, check=False):
        """Runs one of the programs (or any command when prog contains a '/' or is not
        one of ours) with the sandbox env. user: a setpriv prefix from as_user()."""
        argv = [binary(prog) if prog in PROGRAMS else prog, *map(str, args)]
        if user:
            argv = list(user) + argv
        full_env = dict(self.env)
        if env:
            full_env.update(env)
        cp = subprocess.run(argv, input=input, cwd=str(cwd or self.work), env=full_env,
                            stdin=subprocess.DEVNULL if input is None else None,
                            capture_output=True, text=True, timeout=timeout)
        for bad in SANITIZER_MARKS:
            if bad in cp.stderr:
                raise AssertionError(f"sanitizer report from {argv}:\n{cp.stderr[-4000:]}")
        if check and cp.returncode != 0:
            raise AssertionError(f"{argv} exited {cp.returncode}\nstdout: {cp.stdout}\n"
                                 f"stderr: {cp.stderr}")
        return cp

    def gflowd(self, *args, **kw):
        return self.run("gflowd", *args, **kw)

    def up(self, *args, **kw):
        cp = self.gflowd(*args, "up", **kw)
        assert cp.returncode == 0, f"gflowd up failed: {cp.stdout}{cp.stderr}{self.daemon_log()}"
        self.started = True
        return cp

    def down(self, **kw):
        return self.gflowd("down", **kw)

    def submit(self, *args, **kw):
        """gbatch --parsable ARGS; returns the job id (an array's or sweep's first)."""
        cp = self.run("gbatch", "--parsable", *args, **kw)
        assert cp.returncode == 0, f"gbatch {args} failed ({cp.returncode}): {cp.stderr}"
        return int(cp.stdout.split()[0])

    # -- daemon process

    def lock_holder(self):
        """(pid, start) named by the lock file if that process is alive with that start."""
        try:
            pid, start = (self.data / "gflowd.lock").read_text().split()[:2]
        except (FileNotFoundError, ValueError):
            return None
        pid, start = int(pid), int(start)
        return (pid, start) if alive(pid, start) else None

    def daemon_pid(self):
        holder = self.lock_holder()
        return holder[0] if holder else None

    def kill_daemon(self):
        """SIGKILL the daemon by pid and waits until it is gone."""
        holder = self.lock_holder()
        assert holder, "no daemon to kill"
        kill_pid(*holder)
        wait_for(lambda: not alive(*holder), "the killed daemon to be gone", timeout=5)
        # A shim the daemon was starting holds the lock's descriptor until its exec (the
        # daemon's vfork child, launch_shims.c): gone a moment later, as a restart expects.
        wait_for(self.lock_free, "the killed daemon's lock to be free", timeout=5)

    def lock_free(self):
        try:
            fd = os.open(self.data / "gflowd.lock", os.O_RDONLY)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    def daemon_log(self):
        p = self.data / "gflowd.log"
        return p.read_text(errors="replace") if p.exists() else ""

    # -- HTTP

    def api(self, method, path, body=None, headers=None, timeout=10):
        """One request on a fresh connection. body: dict/list (sent as JSON), str or bytes."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        hdrs = dict(headers or {})
        if body is not None:
            hdrs.setdefault("Content-Type", "application/json")
        conn = UnixHTTPConnection(self.sock, timeout=timeout)
        try:
            try:
                conn.request(method, path, body=body, headers=hdrs)
            except BrokenPipeError:
                pass  # answered (413, 503) and closed before the body was read: read it
            r = conn.getresponse()
            return Response(r.status, dict(r.getheaders()), r.read())
        finally:
            conn.close()

    def health_ok(self):
        r = self.api("GET", "/v1/health")
        return r.status == 200 and r.json() == {"status": "ok"}

    def job(self, job_id):
        r = self.api("GET", f"/v1/jobs/{job_id}")
        assert r.status == 200, r
        return r.json()

    def jobs(self, **query):
        q = "&".join(f"{k}={v}" for k, v in query.items())
        r = self.api("GET", "/v1/jobs" + ("?" + q if q else ""))
        assert r.status == 200, r
        return r.json()["jobs"]

    def wait_state(self, job_id, states=TERMINAL, timeout=10):
        """Waits until the job is in one of states; returns the job object."""
        if isinstance(states, str):
            states = (states,)
        last = {}

        def check():
            last["job"] = self.job(job_id)
            return last["job"] if last["job"]["state"] in states else None
        try:
            return wait_for(check, f"job {job_id} to reach {states}", timeout=timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; last seen: {last.get('job')}") from None

    def log(self, job_id):
        p = self.data / "logs" / f"{job_id}.log"
        return p.read_text() if p.exists() else ""

    # -- teardown

    def remove_job_cgroups(self):
        """Removes the cgroups the shims made for their jobs (their lock files name them):
        a shim killed by the teardown, with no daemon left to clean up after it, leaves
        its job's cgroup behind. Only once the sandbox's processes are gone."""
        problems = []
        for lock in (self.data / "run").glob("*.lock"):
            try:
                lines = lock.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for d in (Path(l[len("cgroup: "):]) for l in lines if l.startswith("cgroup: ")):
                deadline = time.monotonic() + 5
                while True:
                    try:
                        d.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError as e:  # EBUSY until its last process is reaped
                        if time.monotonic() > deadline:
                            problems.append(f"cannot remove {d}: {e}")
                            break
                        time.sleep(0.02)
        return problems

    def cleanup(self):
        problems = []
        try:
            if self.lock_holder():
                self.down(timeout=20)
        except Exception as e:  # still kill everything below
            problems.append(f"gflowd down failed: {e}")
        deadline = time.monotonic() + 10
        while True:
            procs = sandbox_processes(self.root)
            if not procs:
                break
            if time.monotonic() > deadline:
                problems.append(f"processes survived SIGKILL: {procs}")
                break
            for pid, st in procs:
                kill_pid(pid, st)
            time.sleep(0.02)
        problems += self.remove_job_cgroups()
        logs = [self.data / "gflowd.log", *sorted((self.data / "logs").glob("*.log"))]
        for path in logs:
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            if any(bad in text for bad in SANITIZER_MARKS):
                problems.append(f"sanitizer report in {path.name}:\n{text[-4000:]}")
        shutil.rmtree(self.root, ignore_errors=True)
        return problems


@pytest.fixture
def make_gflow():
    """Factory: make_gflow(env={...}, start=True, args=()) -> a Gflow sandbox."""
    missing = [p for p in PROGRAMS if not (BUILD_DIR / p).exists()]
    if missing:
        pytest.fail(f"missing binaries in {BUILD_DIR}: {missing}; run 'ninja -C {BUILD_DIR}'")
    made = []

    def make(env=None, start=True, args=(), make_root=None):
        g = Gflow(env=env, make_root=make_root)
        made.append(g)
        if start:
            g.up(*args)
        return g

    yield make
    problems = []
    for g in made:
        problems += g.cleanup()
    if problems:
        pytest.fail("teardown: " + "\n".join(problems))


@pytest.fixture
def gflow(make_gflow):
    """A fresh running daemon with default settings."""
    return make_gflow()


def write_json_atomic(path, obj):
    """Writes obj as JSON to path through a temp file and rename, so that a reader (the
    NVML simulator re-reads its fixture on every call) never sees a half-written file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def _display_columns(line):
    """(column, char) for each character of line, wide (CJK) characters taking two."""
    col, out = 0, []
    for ch in line:
        out.append((col, ch))
        col += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return out


def parse_table(text):
    """A gqueue table as a list of dicts keyed by the header words. Cells are cut at the
    columns where the header words start (the tables are left-aligned), so that a cell
    with spaces in it (a time "2026-12-05 06:48:29", a command) stays one cell."""
    lines = [l for l in text.splitlines() if l.strip()]
    words = list(re.finditer(r"\S+", lines[0]))
    header = [w.group() for w in words]
    starts = [w.start() for w in words] + [float("inf")]
    rows = []
    for l in lines[1:]:
        cells = [""] * len(header)
        for col, ch in _display_columns(l):
            i = next(k for k in range(len(header)) if starts[k] <= col < starts[k + 1]) \
                if col >= starts[0] else 0
            cells[i] += ch
        rows.append(dict(zip(header, (c.strip() for c in cells))))
    return rows


SHOW_SEPARATOR = "=" * 80


def parse_show(text):
    """`gjob show` output as a list of dicts (one per job) of its '  Key=Value' lines
    (the headings, 'Resources:' and the like, are left out; parse_show_parts keeps
    them); a sweep's values, the 'Parameters:' part, as one "Parameters": "lr=0.1
    bs=32". Jobs are separated by a line of 80 '='."""
    out = []
    for job in parse_show_parts(text):
        flat = {}
        for part, fields in job.items():
            if part == "Parameters":
                flat["Parameters"] = " ".join(f"{k}={v}" for k, v in fields.items())
            else:
                flat.update(fields)
        out.append(flat)
    return out


def parse_show_parts(text):
    """`gjob show` output as a list of {heading: {key: value}}, one per job."""
    jobs, cur, part = [], {}, None
    for line in text.splitlines():
        if line == SHOW_SEPARATOR:
            jobs.append(cur)
            cur, part = {}, None
        elif line.startswith("  "):
            key, sep, value = line[2:].partition("=")
            assert sep and part is not None, f"not a '  Key=Value' line under a heading: {line!r}"
            cur[part][key] = value
        elif line.strip():
            assert line.endswith(":") and not line.startswith(" "), f"not a heading: {line!r}"
            part = line[:-1]
            assert part not in cur, f"heading {part!r} twice in one job:\n{text}"
            cur[part] = {}
    if cur:
        jobs.append(cur)
    return jobs


@pytest.fixture
def throwaway_user():
    """A user made for this test alone (no home, no groups of its own beyond its group),
    removed afterwards. Request it before make_gflow, so that the sandbox (and every
    process of the user's) is gone before the user is removed."""
    if os.geteuid() != 0:
        pytest.skip("needs root to add a user and run jobs as it")
    name = f"gft{os.getpid() % 100000}"
    subprocess.run(["useradd", "-M", "-d", "/nonexistent", "-s", "/bin/sh", "-U", name],
                   check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        cp = subprocess.run(["userdel", name], capture_output=True, text=True)
        assert cp.returncode == 0, cp.stderr
