"""gflowd in a delegated cgroup v2 (systemd's Delegate=yes), as the unit starts it:
`gflowd run` inside a cgroup of its own that is marked delegated. gflowd moves itself
into the leaf <cgroup>/gflowd, enables the memory controller for the cgroup's children,
and the shims put job cgroups beside the leaf, with memory.max (src/common/cgdelegate.c,
docs/operations.md "Memory limits under systemd").

The test makes the delegated cgroup itself under the cgroup2 mount. That needs root and
a cgroup2 hierarchy whose top enables the memory controller for its children (a pure v2
host); elsewhere (a hybrid host, where memory is bound to cgroup v1) it skips, saying
which."""
import errno
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import binary, parse_show, wait_for

# 300 MiB touched against a 100 MiB limit; the sleep is what an unenforced limit waits out.
OVER_LIMIT = 'python3 -c "b = bytearray(300*1024*1024); import time; time.sleep(5)"'
WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"


def cgroup2_mount():
    """The first cgroup2 mount point in /proc/self/mountinfo, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                return Path(left.split()[4].replace("\\040", " "))
    return None


def words(path):
    try:
        return path.read_text().split()
    except OSError:
        return []


def delegated_cgroup_or_skip():
    """Creates <cgroup2 mount>/gflow-e2e-<pid>, marked delegated as systemd marks a
    Delegate=yes unit's cgroup (trusted.delegate=1), and returns it; skips with the
    precise reason where the host does not allow it."""
    if os.geteuid() != 0:
        pytest.skip("making a delegated cgroup needs root")
    mount = cgroup2_mount()
    if mount is None:
        pytest.skip("no cgroup2 hierarchy is mounted")
    if "memory" not in words(mount / "cgroup.controllers"):
        pytest.skip(f"the memory controller is not in {mount}/cgroup.controllers "
                    f"({' '.join(words(mount / 'cgroup.controllers')) or 'empty'}): it is "
                    "bound to cgroup v1 on this (hybrid) host")
    cg = mount / f"gflow-e2e-{os.getpid()}"
    try:
        cg.mkdir()
    except OSError as e:
        pytest.skip(f"cannot create a cgroup under {mount}: {e}")
    if "memory" not in words(cg / "cgroup.controllers"):
        cg.rmdir()
        pytest.skip(f"{mount}/cgroup.subtree_control does not enable memory for its children "
                    f"({' '.join(words(mount / 'cgroup.subtree_control')) or 'empty'})")
    try:
        os.setxattr(cg, "trusted.delegate", b"1")
    except OSError as e:
        cg.rmdir()
        pytest.skip(f"cannot mark {cg} delegated (trusted.delegate): {e}")
    return cg


def remove_cgroup_tree(cg):
    """rmdir's cg and what is below it, deepest first (each must be empty of processes)."""
    for d in sorted((p for p in cg.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        try:
            d.rmdir()
        except FileNotFoundError:
            pass
    cg.rmdir()


@pytest.fixture
def delegated():
    """The delegated cgroup; requested before make_gflow, so that it is removed after the
    sandbox's processes are gone."""
    cg = delegated_cgroup_or_skip()
    yield cg
    wait_for(lambda: not any(words(p / "cgroup.procs") for p in [cg, *cg.rglob("*")]
                             if p.is_dir()),
             f"the processes in {cg} to be gone", timeout=20)
    remove_cgroup_tree(cg)


def run_log(g):
    """What `gflowd run` printed (its log goes to stderr, the journal under systemd)."""
    p = g.root / "gflowd-run.log"
    return p.read_text(errors="replace") if p.exists() else ""


def run_daemon_in(g, cg):
    """`gflowd run` as the unit starts it, born in cg (the child joins it before exec)."""
    def join():
        (cg / "cgroup.procs").write_text(str(os.getpid()))
    with open(g.root / "gflowd-run.log", "ab") as log:
        p = subprocess.Popen([binary("gflowd"), "run"], env=g.env, cwd=g.work,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=join)
    wait_for(lambda: g.sock.exists() and g.health_ok(), "gflowd run to answer", timeout=15)
    g.started = True
    return p


def stop_daemon(p):
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 0


def own_cgroup(pid):
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def job_cgroup(g, job):
    """The job's own cgroup, from the "cgroup:" line its shim writes into the lock file."""
    def find():
        lines = (g.data / "run" / f"{job}.lock").read_text(errors="replace").splitlines()
        return next((Path(l[len("cgroup: "):]) for l in lines if l.startswith("cgroup: ")), None)
    return wait_for(find, f"job {job}'s cgroup line in its lock file")


def test_daemon_moves_into_a_leaf_and_jobs_get_memory_max(delegated, make_gflow):
    cg = delegated
    mount = cgroup2_mount()
    g = make_gflow(start=False)
    p = run_daemon_in(g, cg)
    try:
        # gflowd is in the leaf, the memory controller is on for the cgroup's children.
        rel = "/" + str(cg.relative_to(mount))
        assert own_cgroup(p.pid) == f"{rel}/gflowd", own_cgroup(p.pid)
        assert words(cg / "cgroup.procs") == []
        assert "memory" in words(cg / "cgroup.subtree_control")
        assert f"cgroup v2 leaf: gflowd is in {cg}/gflowd" in run_log(g)
        status = g.gflowd("status", check=True).stdout
        line = next(l for l in status.splitlines() if l.startswith("Memory:"))
        assert "cgroup v2" in line, line

        # A job's cgroup goes beside the leaf, with its limit.
        job = g.submit("--memory", "100M", WAIT_GO)
        g.wait_state(job, "R")
        jcg = job_cgroup(g, job)
        assert jcg.parent == cg, jcg
        assert jcg.name.startswith(f"gflow-job-{job}."), jcg
        assert (jcg / "memory.max").read_text().strip() == str(100 * 1024 * 1024)

        # The daemon stops: the controllers go off (systemd must be able to put the next
        # gflowd into the cgroup); the job runs on, held by the shim's watchdog meanwhile.
        stop_daemon(p)
        wait_for(lambda: "memory" not in words(cg / "cgroup.subtree_control"),
                 "memory to be turned off in the service cgroup")
        assert not (jcg / "memory.max").exists()
        # The next gflowd turns it on again, and the shim writes the job's limit again.
        p = run_daemon_in(g, cg)
        assert own_cgroup(p.pid) == f"{rel}/gflowd"
        wait_for(lambda: (jcg / "memory.max").exists()
                 and (jcg / "memory.max").read_text().strip() == str(100 * 1024 * 1024),
                 "the shim to set the job's memory.max again")
        (g.work / "go").touch()
        assert g.wait_state(job)["state"] == "CD"

        # Over its limit: the kernel's OOM killer, reported as OutOfMemory.
        oom = g.submit("--memory", "100M", OVER_LIMIT)
        j = g.wait_state(oom, timeout=20)
        assert (j["state"], j["reason"], j["oom"]) == ("F", "OutOfMemory", True), j
        assert "exceeded its memory limit of 100 MiB (cgroup v2)" in g.log(oom)
        show = parse_show(g.run("gjob", "show", oom, check=True).stdout)[0]
        assert show["Reason"] == "OutOfMemory", show
    finally:
        if p.poll() is None:
            stop_daemon(p)


def test_shared_cgroup_is_left_alone(delegated, make_gflow):
    """A cgroup gflowd does not have to itself (another process in it) is not
    rearranged: today's layout, and one log line says why."""
    cg = delegated
    other = subprocess.Popen(["sleep", "60"],
                             preexec_fn=lambda: (cg / "cgroup.procs").write_text(str(os.getpid())))
    g = make_gflow(start=False)
    try:
        p = run_daemon_in(g, cg)
        try:
            assert not (cg / "gflowd").exists()
            assert "memory" not in words(cg / "cgroup.subtree_control")
            assert f"also holds process {other.pid}" in run_log(g), run_log(g)
        finally:
            stop_daemon(p)
    finally:
        other.kill()
        other.wait()


def test_unmarked_cgroup_is_not_touched(delegated, make_gflow):
    """Root's gflowd in a cgroup without systemd's delegation mark keeps today's layout."""
    cg = delegated
    try:
        os.removexattr(cg, "trusted.delegate")
    except OSError as e:
        if e.errno != errno.ENODATA:
            raise
    g = make_gflow(start=False)
    p = run_daemon_in(g, cg)
    try:
        assert not (cg / "gflowd").exists()
        assert own_cgroup(p.pid) == "/" + str(cg.relative_to(cgroup2_mount()))
        assert "is not marked as delegated" in run_log(g), run_log(g)
    finally:
        stop_daemon(p)
