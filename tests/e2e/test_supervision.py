"""No job escapes supervision: when a job's gflow-shim dies, the daemon kills what is left
of the job (through its cgroup, or its marker and session where it has none) before the
job's GPUs go to the next job, also after a restart; the daemon survives running out of
file descriptors without failing jobs; --signal warnings and time limits whose moment
passed while the daemon was down are enforced on restart."""
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import (TERMINAL, TEST_USER, alive, as_user, ensure_test_user, kill_pid,
                      read_pid_file, start_time, wait_for)

# A job of five processes, two of which leave its session (setsid) and one of which is
# reparented away from the job (the subshell that started it exits): each writes its pid
# to `pids`, the main shell last.
ESCAPING_JOB = ("sleep 300 & echo $! >> pids; "
                "setsid sleep 301 & echo $! >> pids; "
                "(setsid sh -c 'sleep 302 & echo $! >> pids; echo $$ >> pids; exec sleep 303' &); "
                "while [ $(wc -l < pids) -lt 4 ]; do sleep 0.01; done; echo $$ >> pids; wait")
ESCAPING_COUNT = 5


def job_pids(workdir, n=ESCAPING_COUNT):
    """The (pid, start time) of each process ESCAPING_JOB wrote to workdir/pids."""
    path = Path(workdir) / "pids"

    def complete():
        try:
            lines = path.read_text().split()
        except FileNotFoundError:
            return None
        return lines if len(lines) >= n and path.read_text().endswith("\n") else None
    pids = [int(p) for p in wait_for(complete, "the job's processes to write their pids")]
    return [(p, start_time(p)) for p in pids]


def shim_of(g, job):
    """(pid, start time) of a running job's shim, from its lock file."""
    lock = g.data / "run" / f"{job}.lock"
    pid, st = wait_for(lambda: lock.exists() and lock.read_text().split("\n")[0].split(),
                       "the shim's lock line")
    return int(pid), int(st)


def lock_cgroups(g, job):
    return [l.split(": ", 1)[1] for l in (g.data / "run" / f"{job}.lock").read_text().splitlines()
            if l.startswith("cgroup: ")]


def assert_killed_reason(j, n=ESCAPING_COUNT):
    assert (j["state"], j["reason"]) == (
        "F", f"ShimLost: gflow-shim killed by SIGKILL; its {n} processes were killed"), j


# ---- item: a job whose shim dies does not run on -----------------------------------------

def test_shim_killed_the_job_is_killed_before_its_gpu_is_handed_on(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 1)
    a = g.submit("--gpus", 1, ESCAPING_JOB)
    g.wait_state(a, "R")
    procs = job_pids(g.work)
    b = g.submit("--gpus", 1, "echo $CUDA_VISIBLE_DEVICES")
    assert g.job(b)["state"] == "PD"
    cgroups = lock_cgroups(g, a)
    assert cgroups, "no cgroup of its own for the job on this host"
    shim = shim_of(g, a)
    t0 = time.monotonic()
    kill_pid(*shim)
    j = g.wait_state(a, timeout=10)
    elapsed = time.monotonic() - t0
    assert_killed_reason(j)
    # The daemon ended the job only once nothing of it was left.
    for pid, st in procs:
        assert not alive(pid, st), f"process {pid} of the job outlived its shim"
    assert elapsed < 5, f"cleaning up took {elapsed:.1f} s"
    jb = g.wait_state(b, timeout=10)
    assert jb["state"] == "CD" and jb["start_time"] >= j["end_time"], (j, jb)
    log = g.daemon_log()
    assert re.search(rf"job {a}: its shim is gone; killed {ESCAPING_COUNT} processes left of "
                     r"it \(\d+ ms\)", log), log
    # Its cgroup is gone with it.
    for d in cgroups:
        assert not Path(d).exists(), f"{d} left behind"


FREEZER = Path("/sys/fs/cgroup/freezer")


@pytest.mark.skipif(os.geteuid() != 0 or not (FREEZER / "cgroup.procs").exists(),
                    reason="needs root and the cgroup v1 freezer (a frozen process cannot "
                           "die of SIGKILL until thawed)")
def test_gpu_stays_held_while_anything_of_the_job_is_left(make_gflow):
    """A process of the job that cannot die yet (frozen: its SIGKILL waits) keeps the job
    R and its GPU held; once it dies, the job ends and the next one gets the GPU."""
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 1)
    a = g.submit("--gpus", 1, "sleep 300 & echo $! > frozen.pid; wait")
    g.wait_state(a, "R")
    pid = wait_for(lambda: read_pid_file(g.work / "frozen.pid"), "frozen.pid")
    st = start_time(pid)
    fz = FREEZER / f"gflow-e2e-{uuid.uuid4().hex[:8]}"
    fz.mkdir()
    try:
        (fz / "cgroup.procs").write_text(str(pid))
        (fz / "freezer.state").write_text("FROZEN")
        wait_for(lambda: (fz / "freezer.state").read_text().strip() == "FROZEN", "the freeze")
        b = g.submit("--gpus", 1, "true")
        shim = shim_of(g, a)
        kill_pid(*shim)
        wait_for(lambda: f"job {a}: gflow-shim (pid {shim[0]}) is gone" in g.daemon_log(),
                 "the daemon to notice the shim's loss")
        # Observed for a while: the frozen process is left, so nothing moves.
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert g.job(a)["state"] == "R", g.job(a)
            assert g.job(b)["state"] == "PD", g.job(b)
            time.sleep(0.05)
        assert alive(pid, st)
    finally:
        (fz / "freezer.state").write_text("THAWED")
    j = g.wait_state(a, timeout=10)
    assert_killed_reason(j, 2)  # the main shell and the frozen sleep
    assert not alive(pid, st)
    jb = g.wait_state(b, timeout=10)
    assert jb["state"] == "CD" and jb["start_time"] >= j["end_time"]
    wait_for(lambda: not (fz / "cgroup.procs").read_text().strip(), "the test cgroup to empty")
    fz.rmdir()


def cgroup_kind_unavailable(kind):
    """Why a shim of a root daemon here cannot give its job that kind of cgroup, or None."""
    if kind == "none":
        return None
    if os.geteuid() != 0:
        return "making cgroups needs root"
    mount = "cgroup2" if kind == "v2" else "freezer"
    with open("/proc/self/mountinfo") as f:
        if not any((line.split(" - ")[1].split()[0] == "cgroup2") if kind == "v2" else
                   (" - cgroup " in line and mount in line.split()[-1].split(","))
                   for line in f):
            return f"no {mount} hierarchy is mounted"
    return None


@pytest.mark.parametrize("kind", ["v2", "v1", "none"])
def test_shim_killed_whatever_holds_the_job(make_gflow, kind):
    """The job's own cgroup holds it (v2: killed with cgroup.kill; v1 freezer: each
    member through a pidfd), or, where no cgroup can be made, its processes are found by
    their session and the GFLOW_SHIM_ID marker in their environment (which setsid and
    reparenting keep). A process that only looks like the job's (same job id, another
    run's marker) is left alone."""
    why = cgroup_kind_unavailable(kind)
    if why:
        pytest.skip(f"job cgroup {kind} unavailable: {why}")
    g = make_gflow(env={"GFLOW_SHIM_CGROUP": kind})
    a = g.submit(ESCAPING_JOB)
    g.wait_state(a, "R")
    procs = job_pids(g.work)
    cgroups = lock_cgroups(g, a)
    shim = shim_of(g, a)
    if kind == "none":
        assert cgroups == []
    else:
        assert len(cgroups) == 1 and (f"gflow-job-{a}.{shim[0]}" if kind == "v2" else
                                      f"/gflow/job-{a}.{shim[0]}") in cgroups[0], cgroups
    env = dict(g.env)
    lookalikes = [
        subprocess.Popen(["sleep", "300"], env={**env, "GFLOW_JOB_ID": str(a)}),
        subprocess.Popen(["sleep", "300"],
                         env={**env, "GFLOW_JOB_ID": str(a),
                              "GFLOW_SHIM_ID": f"{shim[0]}:{shim[1] + 1}"}),
    ]
    try:
        kill_pid(*shim)
        j = g.wait_state(a, timeout=10)
        assert_killed_reason(j)
        for pid, st in procs:
            assert not alive(pid, st), f"process {pid} of the job outlived its shim"
        for p in lookalikes:
            assert p.poll() is None, "a process that is not the job's was killed"
        for d in cgroups:
            assert not Path(d).exists(), f"{d} left behind"
    finally:
        for p in lookalikes:
            p.kill()
            p.wait()


def test_shim_dead_while_the_daemon_was_down(make_gflow):
    """A shim found dead when a restarted daemon re-adopts its job: the job's processes
    are killed then, from what the lock file and the job's row say."""
    g = make_gflow()
    a = g.submit(ESCAPING_JOB)
    g.wait_state(a, "R")
    procs = job_pids(g.work)
    g.down(check=True)
    kill_pid(*shim_of(g, a))
    time.sleep(0.2)  # not needed for correctness: the job's processes run on meanwhile
    for pid, st in procs:
        assert alive(pid, st), "the job died with its shim: nothing would be tested"
    g.up()
    j = g.wait_state(a, timeout=10)
    assert (j["state"], j["reason"]) == (
        "F", f"ShimLost: gflow-shim ended without an exit file; its {ESCAPING_COUNT} "
             "processes were killed"), j
    for pid, st in procs:
        assert not alive(pid, st), f"process {pid} of the job outlived its shim"


@pytest.fixture
def test_user():
    if os.geteuid() != 0:
        pytest.skip("running a daemon as another user needs root")
    return ensure_test_user()


def test_per_user_daemon_without_cgroups_kills_what_a_dead_shim_left(make_gflow, test_user):
    """An unprivileged per-user daemon: its shims cannot make cgroups (the host's are
    root's), the jobs run anyway, and a dead shim's job is still found and killed."""
    uid, gid, home = test_user
    g = make_gflow(start=False)
    for dirpath, _, _ in os.walk(g.root):
        os.chown(dirpath, uid, gid)
    os.chmod(g.root, 0o755)
    who = as_user(uid, gid)
    user_env = {"HOME": home, "USER": TEST_USER, "LOGNAME": TEST_USER}
    cp = g.run("gflowd", "up", user=who, env=user_env)
    assert cp.returncode == 0, cp.stderr + g.daemon_log()
    a = int(g.run("gbatch", "--parsable", ESCAPING_JOB, user=who, env=user_env,
                  check=True).stdout)

    def state():
        return g.run("gqueue", "-a", "-j", a, "-f", "ST,REASON", user=who, env=user_env,
                     check=True).stdout.splitlines()[-1]
    wait_for(lambda: state().split()[0] == "R", "the job to run", timeout=10)
    procs = job_pids(g.work)
    assert lock_cgroups(g, a) == [], "an unprivileged shim made a cgroup"
    kill_pid(*shim_of(g, a))
    wait_for(lambda: state().split()[0] in TERMINAL, "the job to end", timeout=10)
    cp = g.run("gjob", "show", a, user=who, env=user_env, check=True)
    assert (f"  Reason=ShimLost: gflow-shim killed by SIGKILL; its {ESCAPING_COUNT} processes were "
            "killed") in cp.stdout, cp.stdout
    for pid, st in procs:
        assert not alive(pid, st), f"process {pid} of the job outlived its shim"
    g.run("gflowd", "down", user=who, env=user_env)


# ---- item: running out of file descriptors -------------------------------------------

def daemon_limits(g):
    pid = g.daemon_pid()
    text = Path(f"/proc/{pid}/limits").read_text()
    soft, hard = re.search(r"Max open files\s+(\d+)\s+(\d+)", text).groups()
    return int(soft), int(hard)


def test_daemon_raises_its_open_file_limit_and_jobs_keep_the_original(make_gflow):
    g = make_gflow(start=False)
    g.up(user=["prlimit", "--nofile=40:4096"])
    assert daemon_limits(g) == (4096, 4096)
    assert "open-file limit raised from 40 to 4096 (jobs get 40)" in g.daemon_log()
    job = g.submit("echo $(ulimit -Sn) $(ulimit -Hn)")
    assert g.wait_state(job)["state"] == "CD"
    assert g.log(job) == "40 4096\n"


def test_fifty_jobs_under_a_low_open_file_limit_all_complete(make_gflow):
    """With 40 descriptors (soft and hard: nothing to raise), 50 jobs used to end F
    LaunchFailed "Too many open files"; now the daemon runs as many at once as its
    descriptors allow and the rest wait."""
    g = make_gflow(start=False)
    g.up(user=["prlimit", "--nofile=40:40"])
    assert daemon_limits(g) == (40, 40)
    jobs = [g.submit("sleep 0.3") for _ in range(50)]

    def all_ended():
        js = [j for j in g.jobs(user="all", state="CD,F,CA,TO")]
        return js if len(js) == 50 else None
    ended = wait_for(all_ended, "all 50 jobs to end", timeout=60, interval=0.2)
    assert sorted(j["id"] for j in ended) == jobs
    assert {j["state"] for j in ended} == {"CD"}, [j for j in ended if j["state"] != "CD"]
    assert re.search(r"at most \d+ jobs run at once: the open-file limit is 40",
                     g.daemon_log()), g.daemon_log()


def test_launch_put_off_while_descriptors_run_out(make_gflow):
    """The daemon runs out of descriptors (its open-file limit lowered from outside below
    the numbers it has open): the launch of a released job then fails with EMFILE, the
    job goes back to the queue (gflowd.log says why), and it runs once descriptors are
    free again. (Idle connections cannot do this any more: listener.c keeps them within
    the limit.) A new connection meanwhile is refused with the descriptor kept spare for
    that, not left pending."""
    g = make_gflow()
    job = g.submit("--hold", "true")
    pid = g.daemon_pid()
    release = connect(g.sock)
    held = []
    limits = f"/proc/{pid}/limits"
    before = [l for l in open(limits) if l.startswith("Max open files")][0].split()[3:5]

    def set_limit(n):
        g.run("prlimit", f"--pid={pid}", f"--nofile={n}:{before[1]}", check=True)

    def open_fds():
        return sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))
    try:
        # One answer on the release connection first: the daemon has accepted it then, so
        # the limit below cannot make that accept the one refused.
        release.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(release).startswith(b"HTTP/1.1 200")
        # Below the lowest free number, less a few a connection still closing may free.
        fds = open_fds()
        lowest_free = next(i for i in range(len(fds) + 1) if i not in fds)
        set_limit(max(lowest_free - 3, 1))
        release.sendall(f"POST /v1/jobs/{job}/release HTTP/1.1\r\nHost: x\r\n"
                        "Content-Length: 0\r\n\r\n".encode())
        assert release.recv(4096).startswith(b"HTTP/1.1 200"), "the release was refused"
        wait_for(lambda: f"job {job}: launch put off" in g.daemon_log(),
                 "the launch to be put off", timeout=20)
        # Room for what is open and no more: connections are taken until the last
        # descriptor, then refused with 503 (the spare one is below the limit).
        set_limit(max(open_fds()) + 1)
        answers = []
        for _ in range(20):
            s = connect(g.sock)
            held.append(s)
            try:
                s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
            except BrokenPipeError:
                pass
            answers.append(s.recv(4096))
            if not answers[-1].startswith(b"HTTP/1.1 200"):
                while chunk := s.recv(4096):  # a refusal is closed after its answer
                    answers[-1] += chunk
                break
        assert answers[-1].startswith(b"HTTP/1.1 503"), answers
        assert b"out of file descriptors" in answers[-1], answers
    finally:
        set_limit(before[0])
        release.close()
        for s in held:
            s.close()
    j = g.wait_state(job, timeout=20)
    assert j["state"] == "CD", j
    log = g.daemon_log()
    assert re.search(rf"job {job}: launch put off: .*Too many open files; queued again", log), log
    assert "launch failed" not in log, log


def read_answer(s):
    """One whole HTTP answer (headers and its Content-Length body) from socket s."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        assert chunk, f"connection closed mid-answer: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?i)content-length:\s*(\d+)", head)
    while m and len(body) < int(m.group(1)):
        chunk = s.recv(4096)
        assert chunk, f"connection closed mid-answer: {data!r}"
        body += chunk
    return head + b"\r\n\r\n" + body


def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(str(path))
    return s


# ---------------------------------------------------------------- the standby shim

# A job with a memory limit: one the supervisor does not take, so a standby shim runs it;
# held to its limit by the watchdog, which works on any host.
OWN_SHIM = ("--memory", "64M")
WATCHDOG = {"GFLOW_SHIM_MEMORY_METHOD": "watchdog"}


def standby_shims(daemon_pid):
    """(pid, start) of the daemon's children that are a standby shim (not yet a job's)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == daemon_pid and len(argv) > 1 and argv[1] == b"--standby":
            start = start_time(int(name))
            if start is not None and alive(int(name), start):
                found.append((int(name), start))
    return found


def test_standby_shim_runs_the_next_job_and_a_new_one_follows(make_gflow):
    """The daemon keeps one shim started ahead of its job: the next job that needs a shim
    of its own is that process (its command line then shows the job's arguments), and
    another standby follows."""
    g = make_gflow(env=WATCHDOG)
    pid = g.daemon_pid()
    first = wait_for(lambda: standby_shims(pid), "a standby shim")
    assert len(first) == 1, first
    j = g.submit(*OWN_SHIM, "sleep", "300")
    shim_pid = wait_for(lambda: g.job(j).get("shim_pid"), "the job's shim pid")
    assert shim_pid == first[0][0]
    # The standby writes the job's arguments over its command line once it has read
    # them, which may come after the daemon has recorded its pid.
    def job_args():
        with open(f"/proc/{shim_pid}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
        return argv if argv[1:3] == ["--job-id", str(j)] else None

    wait_for(job_args, "the job's arguments in the shim's command line")
    second = wait_for(lambda: standby_shims(pid), "the next standby shim")
    assert second[0][0] != shim_pid
    g.run("gcancel", str(j), check=True)
    assert g.wait_state(j)["state"] == "CA"


def test_standby_shim_serves_job_after_job(make_gflow):
    """A standby shim whose job is over waits for the next one: jobs run one after another
    share the shims (the one started ahead of the first job and at most one more), each
    back as a standby with its command line restored and no fd of its jobs left (the
    lock's among them: its flock). One whose daemon went down meanwhile exits after its
    job, which the restarted daemon collects."""
    g = make_gflow(env=WATCHDOG)
    pid = g.daemon_pid()
    shims = []
    for i in range(6):
        j = g.submit(*OWN_SHIM, "sh", "-c", f"echo {i} > out{i}")
        job = g.wait_state(j)
        assert job["state"] == "CD", job
        assert (g.work / f"out{i}").read_text() == f"{i}\n"
        shims.append(job["shim_pid"])
    assert len(set(shims)) <= 2, shims
    wait_for(lambda: set(shims) <= {s[0] for s in standby_shims(pid)}, "the shims back as standbys")
    for shim in set(shims):
        fds = {fd: os.readlink(f"/proc/{shim}/fd/{fd}") for fd in os.listdir(f"/proc/{shim}/fd")}
        others = [link for fd, link in fds.items() if fd not in ("0", "1", "2")]
        assert len(others) == 1 and others[0].startswith("socket:"), fds

    j = g.submit(*OWN_SHIM, "sh", "-c", "while [ ! -e go ]; do sleep 0.02; done")
    g.wait_state(j, "R")
    shim = shim_of(g, j)
    assert shim[0] in shims
    assert g.down().returncode == 0
    g.up()
    (g.work / "go").touch()
    assert g.wait_state(j)["state"] == "CD"
    wait_for(lambda: not alive(*shim), "the shim to exit after its job")


def test_standby_shim_killed_jobs_still_start(make_gflow):
    """A standby that died (killed by someone) is noticed at the next launch, which
    starts a shim of its own; the job runs and a new standby follows."""
    g = make_gflow(env=WATCHDOG)
    pid = g.daemon_pid()
    (standby,) = wait_for(lambda: standby_shims(pid), "a standby shim")
    kill_pid(*standby)
    wait_for(lambda: not alive(*standby), "the standby to die")
    j = g.submit(*OWN_SHIM, "true")
    assert g.wait_state(j)["state"] == "CD"
    wait_for(lambda: [s for s in standby_shims(pid) if s != standby], "a new standby")


@pytest.mark.parametrize("busy", [False, True])
def test_standby_shim_job_cgroup_over_a_leftover_of_its_name(make_gflow, busy):
    """The job cgroup a standby shim makes for its job (with the cgroup2 mount it read
    while it waited) replaces an empty leftover of the same name, gflow-job-<id>.<pid>
    (a dead shim with the same pid); one that still holds a process is not shared: with
    v2 forced, the job does not start and says why, and that process is left alone."""
    why = cgroup_kind_unavailable("v2")
    if why:
        pytest.skip(f"job cgroup v2 unavailable: {why}")
    g = make_gflow(env={"GFLOW_SHIM_CGROUP": "v2", **WATCHDOG})
    pid = g.daemon_pid()
    # Where this daemon's shims make job cgroups: the parent of a first job's.
    first = g.submit(*OWN_SHIM, "sleep", "300")
    g.wait_state(first, "R")
    (cg,) = wait_for(lambda: lock_cgroups(g, first), "the first job's cgroup line")
    base = Path(cg).parent
    first_shim = shim_of(g, first)
    g.run("gcancel", str(first), check=True)
    g.wait_state(first)
    # The next job's shim is one of those waiting: the first job's, back for another,
    # or one started ahead of the next job (only if the first was not back by then). A
    # leftover for each.
    standbys = wait_for(lambda: first_shim in standby_shims(pid) and standby_shims(pid),
                        "the first job's shim back as a standby")
    leftovers = {s[0]: base / f"gflow-job-{first + 1}.{s[0]}" for s in standbys}
    squatters = []
    try:
        for leftover in leftovers.values():
            # exist_ok: a job 2 of an earlier test's daemon may have left one behind
            # under a pid that has come round again; it is just as much a leftover.
            leftover.mkdir(exist_ok=True)
            if busy:
                squatters.append(subprocess.Popen(["sleep", "300"]))
                (leftover / "cgroup.procs").write_text(str(squatters[-1].pid))
        j = g.submit(*OWN_SHIM, "sh", "-c", "cat /proc/self/cgroup > cg")
        assert j == first + 1
        job = g.wait_state(j)
        leftover = leftovers[job["shim_pid"]]
        if busy:
            assert job["state"] == "F" and job["exit_code"] == 125, job
            # EBUSY in the words of the shim's libc: glibc's, or musl's (meson.build).
            assert job["reason"] in (
                f"LaunchFailed: job cgroup v2 unavailable: cannot create {leftover}: {text}"
                for text in ("Device or resource busy", "Resource busy")), job
            for squatter, other in zip(squatters, leftovers.values()):
                assert squatter.poll() is None
                assert str(squatter.pid) in (other / "cgroup.procs").read_text().split()
        else:
            assert job["state"] == "CD", job
            line = [l for l in (g.work / "cg").read_text().splitlines() if l.startswith("0::")]
            assert line and line[0].endswith(f"/{leftover.name}"), line
            wait_for(lambda: not leftover.exists(), "the job's cgroup to be removed")
    finally:
        for squatter in squatters:
            squatter.kill()
            squatter.wait()
        for leftover in leftovers.values():
            if leftover.exists():
                wait_for(lambda: not (leftover / "cgroup.procs").read_text().split(),
                         "the leftover to empty")
                leftover.rmdir()


def test_standby_shim_ends_with_the_daemon(make_gflow):
    """gflowd down: the standby, which has no job, exits (running jobs' shims stay)."""
    g = make_gflow()
    (standby,) = wait_for(lambda: standby_shims(g.daemon_pid()), "a standby shim")
    assert g.down().returncode == 0
    wait_for(lambda: not alive(*standby), "the standby to exit with the daemon")


# ---------------------------------------------------------------- the supervisor

# A job for the supervisor: writes its marker and the pid (and start time) of a
# background process it leaves behind, then waits for its gate file.
def gated_job(name):
    return (f"echo $GFLOW_SHIM_ID > id.{name}; sleep 300 & echo $! > bg.{name}; "
            f"while [ ! -e go.{name} ]; do sleep 0.02; done")


def bg_proc(g, name):
    pid = int(wait_for(lambda: (g.work / f"bg.{name}").exists() and
                       (g.work / f"bg.{name}").read_text().strip(), f"job {name}'s background pid"))
    return pid, wait_for(lambda: start_time(pid), f"the start time of {pid}")


def test_supervisor_runs_jobs_side_by_side(make_gflow):
    """Jobs that need no shim of their own run under one supervisor process, each with a
    marker of its own (GFLOW_SHIM_ID=<pid>:<start>:<job>) and a lock file that names the
    supervisor's socket. Cancelling one ends it alone; a job whose main process exits has
    what it left behind killed, and nothing of the other jobs."""
    g = make_gflow()
    jobs = {name: g.submit(gated_job(name)) for name in ("a", "b", "c")}
    for j in jobs.values():
        g.wait_state(j, "R")
    bg = {name: bg_proc(g, name) for name in jobs}
    sup = shim_of(g, jobs["a"])
    for name, j in jobs.items():
        assert shim_of(g, j) == sup
        assert g.job(j)["shim_pid"] == sup[0]
        assert (g.work / f"id.{name}").read_text().split() == [f"{sup[0]}:{sup[1]}:{j}"]
        lines = (g.data / "run" / f"{j}.lock").read_text().split("\n")
        assert f"supervisor: {g.data / 'run' / f'shim-{sup[0]}.sock'}" in lines, lines

    g.run("gcancel", str(jobs["b"]), check=True)
    assert g.wait_state(jobs["b"])["state"] == "CA"
    assert not alive(*bg["b"])
    assert all(alive(*bg[n]) for n in "ac") and g.job(jobs["a"])["state"] == "R"

    (g.work / "go.a").touch()
    assert g.wait_state(jobs["a"])["state"] == "CD"
    assert not alive(*bg["a"]), "a job's leftover outlived it"
    assert alive(*bg["c"]) and g.job(jobs["c"])["state"] == "R"
    (g.work / "go.c").touch()
    assert g.wait_state(jobs["c"])["state"] == "CD"
    assert not alive(*bg["c"])
    assert alive(*sup), "the supervisor stays for the next jobs"


def test_supervisor_jobs_outlive_a_restart(make_gflow):
    """gflowd down and up: the supervisor's jobs run on, and the restarted daemon reaches
    it at the socket their lock files name: a cancel goes through it, and a job's end is
    heard while the supervisor still runs another. Once its last job is over the old
    supervisor exits; new jobs go to the new daemon's."""
    g = make_gflow()
    jobs = {name: g.submit(gated_job(name)) for name in ("a", "b", "c")}
    for j in jobs.values():
        g.wait_state(j, "R")
    sup = shim_of(g, jobs["a"])
    assert g.down().returncode == 0
    g.up()
    assert alive(*sup)
    g.run("gcancel", str(jobs["a"]), check=True)
    assert g.wait_state(jobs["a"])["state"] == "CA"
    (g.work / "go.b").touch()
    assert g.wait_state(jobs["b"])["state"] == "CD"
    assert alive(*sup) and g.job(jobs["c"])["state"] == "R"
    (g.work / "go.c").touch()
    assert g.wait_state(jobs["c"])["state"] == "CD"
    wait_for(lambda: not alive(*sup), "the old supervisor to exit after its last job")
    d = g.submit("true")
    assert g.wait_state(d)["state"] == "CD"
    assert g.job(d)["shim_pid"] != sup[0]


def test_supervisor_killed_its_jobs_are_lost_and_the_next_runs(make_gflow):
    """The supervisor killed: each of its jobs ends F (ShimLost) with what was left of it
    killed, and a new supervisor runs the next job."""
    g = make_gflow()
    jobs = {name: g.submit(gated_job(name)) for name in ("a", "b")}
    for j in jobs.values():
        g.wait_state(j, "R")
    bg = {name: bg_proc(g, name) for name in jobs}
    sup = shim_of(g, jobs["a"])
    kill_pid(*sup)
    for name, j in jobs.items():
        job = g.wait_state(j)
        assert job["state"] == "F" and job["reason"].startswith(
            "ShimLost: gflow-shim killed by SIGKILL"), job
        assert not alive(*bg[name])
    d = g.submit("true")
    assert g.wait_state(d)["state"] == "CD"
    assert g.job(d)["shim_pid"] != sup[0]
