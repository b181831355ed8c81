"""End-to-end tests of issue 28's strays (item 2) and PID namespaces (item 9).

A job that ignores CUDA_VISIBLE_DEVICES (a hard-coded cuda:1) puts a process on a GPU it
was not given. The simulator fixture lists the job's own child on that GPU, as NVML would.
daemon.stray decides what gflow does: "block" (the default) keeps the GPU from every other
job, shared ones too, with reason "Stray (job N)", until the process is gone; "kill" ends
the job with reason GpuStray; "warn" only tells. The job's owner is told in gjob show, the
job's `stray` field (kept after the job ended and across restarts) and the event stream.

PID namespaces: gflowd runs inside a PID namespace of its own (unshare --pid --fork, with
its own /proc), NVML gives the host's pids (the job's process as the root namespace sees
it: the first field of NSpid), and the host's /proc is where daemon.host_proc says.
"""
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (TERMINAL, assert_one_line_error, binary, parse_show, read_pid_file,
                      wait_for, write_json_atomic)
from test_events import Stream
from test_gpus import fixture_of, gpus_json, gpus_reread, ids, sim, sim_gpu, still_queued

# The job's shell starts a child (the CUDA program) and records its pid.
CHILD_JOB = "sleep 300 & echo $! > child.pid; wait"


def start_stray(g, fx, on=1):
    """Runs a 1-GPU job (it gets GPU 0) whose child the fixture lists on GPU 0 and on GPU
    `on` (not the job's): returns (job id, child pid)."""
    j = g.submit("-g", 1, CHILD_JOB)
    job = g.wait_state(j, "R")
    assert ids(job) == [0], job
    child = wait_for(lambda: read_pid_file(g.work / "child.pid"), "the job's child pid")
    fx["gpus"][0]["processes"] = [{"pid": child, "used_memory_mib": 500}]
    fx["gpus"][on]["processes"] = [{"pid": child, "used_memory_mib": 300}]
    write_json_atomic(g.fixture_path, fx)
    return j, child


def gpu(g, i):
    return gpus_json(g)["gpus"][i]


def wait_gpu(g, i, pred, what, timeout=10):
    last = {}

    def check():
        last["gpu"] = gpu(g, i)
        return last["gpu"] if pred(last["gpu"]) else None
    try:
        return wait_for(check, what, timeout=timeout, interval=0.05)
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen: {last.get('gpu')}") from None


def stray_gone(g, fx, on=1):
    fx["gpus"][on]["processes"] = []
    write_json_atomic(g.fixture_path, fx)


def show(g, j):
    return parse_show(g.run("gjob", "show", j, check=True).stdout)[0]


# ---------------------------------------------------------------- block (the default)

def test_stray_blocks_its_gpu_for_others_until_it_is_gone(make_gflow):
    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx)
    j, child = start_stray(g, fx)
    info = wait_gpu(g, 1, lambda x: x["state"] == "unavailable", "GPU 1 blocked by the stray")
    assert info["reason"] == f"Stray (job {j})" and info["stray_jobs"] == [j], info
    assert gpu(g, 0)["stray_jobs"] == [], gpu(g, 0)
    # ginfo shows it, with the reason; gflowd status too.
    assert f"(Stray (job {j}))" in g.run("ginfo", check=True).stdout
    assert f"GPU 1 unavailable: Stray (job {j})" in g.gflowd("status", check=True).stdout

    # A 1-GPU job that could only go to GPU 1 waits, and so does a shared one (GPU 0 is
    # job j's; the scheduler's reason stays Resources, as for any unavailable GPU when
    # the others are taken: ginfo names the stray). With backfill (the default) b holds a
    # reservation for GPU 0, so s, behind it, says Priority (as Slurm).
    b = g.submit("-g", 1, "true")
    s = g.submit("-g", 1, "--shared", "--gpu-memory", "1000", "true")
    still_queued(g, b, "Resources")
    still_queued(g, s, "Priority")

    # The owner is told: the job's stray field, gjob show.
    text = g.job(j)["stray"]
    assert text == (f"process {child} on GPU 1, not the job's (GPU 0); GPU 1 blocked for "
                    "others"), text
    assert show(g, j)["Stray"] == text
    assert "stray" in g.daemon_log() and f"job {j}" in g.daemon_log()

    # The stray process is gone: GPU 1 is taken up again at the next read.
    stray_gone(g, fx)
    done = g.wait_state(b, TERMINAL, timeout=10)
    assert done["state"] == "CD" and ids(done) == [1], done
    assert g.wait_state(s, TERMINAL, timeout=10)["state"] == "CD"
    assert gpu(g, 1)["stray_jobs"] == []
    # What the job did stays on its record, after it ended and across a restart.
    g.run("gcancel", j, check=True)
    g.wait_state(j, TERMINAL)
    assert g.down().returncode == 0
    g.up("--simulate-gpus", g.fixture_path)
    assert g.job(j)["stray"] == text
    assert show(g, j)["Stray"] == text


def test_stray_is_an_event_for_the_owner(make_gflow):
    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx)
    s = Stream(g, "/v1/events?types=job_updated")
    s.hello()
    j, child = start_stray(g, fx)
    got = s.until(lambda e: e["data"].get("id") == j and e["data"].get("stray"),
                  "the job's stray update", timeout=10)
    assert f"process {child} on GPU 1" in got[-1]["data"]["stray"], got[-1]
    s.close()


def test_a_strays_own_gpu_is_not_blocked_and_mig_strays_block_the_instance(make_gflow):
    """The job's process on its own GPU is no stray (GPU 0 stays the job's, nothing is
    blocked when no other GPU is touched)."""
    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx)
    j = g.submit("-g", 1, CHILD_JOB)
    g.wait_state(j, "R")
    child = wait_for(lambda: read_pid_file(g.work / "child.pid"), "the job's child pid")
    fx["gpus"][0]["processes"] = [{"pid": child, "used_memory_mib": 500}]
    write_json_atomic(g.fixture_path, fx)
    wait_gpu(g, 0, lambda x: x["processes"], "the job's process")
    gpus_reread(g)
    assert [x["stray_jobs"] for x in gpus_json(g)["gpus"]] == [[], []]
    assert g.job(j).get("stray") is None
    done = g.wait_state(g.submit("-g", 1, "true"))
    assert done["state"] == "CD" and ids(done) == [1], done


# ---------------------------------------------------------------- warn and kill

def test_warn_tells_but_does_not_block(make_gflow):
    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__STRAY": "warn"})
    j, child = start_stray(g, fx)
    info = wait_gpu(g, 1, lambda x: x["stray_jobs"] == [j], "the stray on GPU 1")
    assert info["state"] == "idle" and info["reason"] is None, info
    text = wait_for(lambda: g.job(j).get("stray"), "the job's stray record")
    assert text == (f"process {child} on GPU 1, not the job's (GPU 0); GPU 1 not blocked "
                    "(daemon.stray = warn)"), text
    done = g.wait_state(g.submit("-g", 1, "true"))
    assert done["state"] == "CD" and ids(done) == [1], done
    assert g.job(j)["state"] == "R"


def test_kill_ends_the_job_with_gpu_stray(make_gflow):
    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__STRAY": "kill"})
    j, child = start_stray(g, fx)
    b = g.submit("-g", 1, "true")
    ended = g.wait_state(j, TERMINAL, timeout=20)
    assert ended["state"] == "F" and ended["reason"] == "GpuStray", ended
    assert ended["stray"].startswith(f"process {child} on GPU 1, not the job's (GPU 0)"), ended
    sh = show(g, j)
    assert sh["Reason"].startswith("GpuStray"), sh
    assert sh["Stray"] == ended["stray"], sh
    rows = g.run("gqueue", "-a", "-j", j, check=True).stdout
    assert "GpuStray" in rows and re.search(rf"\b{j}\b.*\bF\b", rows), rows
    # Its process is gone with it; the next job gets the GPU once NVML no longer lists it.
    fx["gpus"][0]["processes"] = []
    stray_gone(g, fx)
    assert g.wait_state(b, TERMINAL, timeout=10)["state"] == "CD"


# ---------------------------------------------------------------- the setting

def test_bad_stray_setting_is_refused_and_reload_applies_it(make_gflow):
    g = make_gflow(start=False)
    cp = g.gflowd("up", env={"GFLOW_DAEMON__STRAY": "ignore"})
    assert_one_line_error(cp, "gflowd", 1, "daemon.stray", "block", "kill", "warn")

    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    g.fixture_path = g.root / "gpus.json"
    write_json_atomic(g.fixture_path, fx)
    conf = g.root / "c.toml"
    conf.write_text('[daemon]\nstray = "block"\ngpu_poll_interval_secs = 1\n')
    g.up("-c", conf, "--simulate-gpus", g.fixture_path)
    j, child = start_stray(g, fx)
    wait_gpu(g, 1, lambda x: x["state"] == "unavailable", "GPU 1 blocked by the stray")
    b = g.submit("-g", 1, "true")
    still_queued(g, b, "Resources")

    conf.write_text('[daemon]\nstray = "sometimes"\ngpu_poll_interval_secs = 1\n')
    cp = g.gflowd("-c", conf, "reload")
    assert_one_line_error(cp, "gflowd", 1, "daemon.stray", "block, kill, warn")

    conf.write_text('[daemon]\nstray = "warn"\ngpu_poll_interval_secs = 1\n')
    cp = g.gflowd("-c", conf, "reload")
    assert cp.returncode == 0 and "daemon.stray" in cp.stdout, cp
    assert "Applied now" in cp.stdout and "restart" not in cp.stdout.split("daemon.stray")[0]
    done = g.wait_state(b, TERMINAL, timeout=10)
    assert done["state"] == "CD" and ids(done) == [1], done


# ---------------------------------------------------------------- PID namespaces

def nspid(pid):
    """The NSpid list of pid as the root namespace's /proc shows it."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    return []


def host_pid_of(ns_of, inner):
    """The pid in the root namespace of the process that is `inner` in the PID namespace
    of process ns_of (both as the root namespace sees them)."""
    want = os.readlink(f"/proc/{ns_of}/ns/pid")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/ns/pid") == want and nspid(name)[-1] == inner:
                return int(name)
        except OSError:
            continue
    return None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root and unshare")
def test_host_pids_in_a_pid_namespace_are_the_jobs(make_gflow):
    """gflowd in a PID namespace with its own /proc: NVML (the fixture) lists the job's
    child by its host pid. Through daemon.host_proc (the host's /proc, bind-mounted before
    the namespace's own was mounted) gflowd finds it by NSpid: the job's process, on its
    own GPU (busy, not unmanaged) and a stray on the other."""
    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    g = make_gflow(env={"GFLOW_DAEMON__GPU_POLL_INTERVAL_SECS": "1"}, start=False)
    g.fixture_path = g.root / "gpus.json"
    write_json_atomic(g.fixture_path, fx)
    hostproc = g.root / "hostproc"
    hostproc.mkdir()
    # In a mount namespace of its own: the host's /proc stays at hostproc, a new /proc is
    # mounted for the new PID namespace, and gflowd serves in the foreground as its pid 1.
    script = (f"mount --bind /proc {hostproc} && mount -t proc proc /proc && "
              f"exec {binary('gflowd')} --simulate-gpus {g.fixture_path} run")
    env = dict(g.env, GFLOW_DAEMON__HOST_PROC=str(hostproc))
    outer = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--pid",
                              "--fork", "sh", "-c", script], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: g.sock.exists() and g.health_ok(), "gflowd in its namespace",
                 timeout=20, interval=0.1)
        g.started = True
        j = g.submit("-g", 1, CHILD_JOB)
        job = g.wait_state(j, "R")
        assert ids(job) == [0], job
        inner = wait_for(lambda: read_pid_file(g.work / "child.pid"), "the job's child pid")
        # The daemon is the namespace's pid 1: find it, then the child's host pid.
        daemon = wait_for(lambda: next((int(p) for p in os.listdir("/proc") if p.isdigit()
                                        and os.getpgid(int(p)) == outer.pid
                                        and nspid(p)[-1:] == [1]), None),
                          "the daemon's host pid", timeout=5)
        host = host_pid_of(daemon, inner)
        assert host and host != inner, (host, inner)
        fx["gpus"][0]["processes"] = [{"pid": host, "used_memory_mib": 500}]
        fx["gpus"][1]["processes"] = [{"pid": host, "used_memory_mib": 300}]
        write_json_atomic(g.fixture_path, fx)
        info0 = wait_gpu(g, 0, lambda x: x["processes"], "the job's process on GPU 0")
        assert info0["processes"][0]["job"] == j, info0
        assert info0["state"] == "busy", info0
        info1 = wait_gpu(g, 1, lambda x: x["state"] != "idle", "GPU 1 to change")
        assert info1["processes"][0]["job"] == j, info1
        assert info1["state"] == "unavailable" and info1["stray_jobs"] == [j], info1
        g.run("gcancel", j, check=True)
        g.wait_state(j, TERMINAL)
    finally:
        if g.sock.exists():
            g.down(timeout=20)
        try:
            outer.wait(timeout=15)
        except subprocess.TimeoutExpired:
            outer.kill()
            outer.wait()
