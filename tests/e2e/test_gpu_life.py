"""End-to-end tests of NVML's life in gflowd (issue 9, defects 4 and 10) and of
gpu_id_format = "auto" (the container case), against the NVML simulator.

- NVML that will not initialise at start (a driver not loaded yet at boot) is tried again
  with a back-off; GPU jobs queue meanwhile and start once the GPUs appear.
- An NVML call that hangs (a failing GPU) does not freeze the daemon: it keeps answering,
  the GPUs count as unavailable ("NVML: no answer for N s"), and nothing starts on them
  until the read comes back.
- A GPU process that left the job's process tree and session but stays in the job's
  cgroup is the job's, not an outside process.
- gpu_id_format "auto": UUIDs in CUDA_VISIBLE_DEVICES when indices would be wrong.

Everything is awaited by polling with a deadline.
"""
import json
import os
import re
import subprocess

from conftest import TERMINAL, read_pid_file, wait_for, write_json_atomic
from test_gpus import SHOW_GPU_ENV, fixture_of, gpus_json, log_vars, sim, sim_gpu, wait_reason

# NVML that does not open is tried again every second (not up to every minute).
FAST = {"GFLOW_DAEMON__NVML_RETRY_MAX_SECS": "1"}
# A read that takes 2 s counts as hung (not 10 s).
HANG = {**FAST, "GFLOW_DAEMON__NVML_TIMEOUT_SECS": "2"}


def status(g):
    return g.gflowd("status", check=True).stdout


# ---------------------------------------------------------------- defect 4: retry

def test_nvml_not_ready_at_start_is_retried_and_gpus_picked_up(make_gflow):
    fx = fixture_of([sim_gpu(i) for i in range(2)])
    fx["fail"] = {"nvmlInit": 9}  # DRIVER_NOT_LOADED, as at boot before the module loads
    g = sim(make_gflow, fixture=fx, env=FAST)

    st = status(g)
    assert re.search(r"no GPUs: NVML not ready \(nvmlInit failed: Driver Not Loaded\); "
                     r"(retrying in \d+ s|trying again now), \d+ tr(y|ies) so far", st), st
    info = g.run("ginfo", check=True).stdout
    assert "NVML not ready (nvmlInit failed: Driver Not Loaded)" in info, info
    # A GPU job is accepted while the GPUs are yet to come, and waits.
    j = g.submit("-g", 1, SHOW_GPU_ENV)
    wait_reason(g, j, "Resources")

    # Several tries, one log line: a state change is logged once, not every retry.
    wait_for(lambda: re.search(r"([3-9]|\d\d+) tries so far", status(g)), "three tries")
    assert g.daemon_log().count("Driver Not Loaded; trying again") == 1, g.daemon_log()

    fx["fail"] = {}
    write_json_atomic(g.fixture_path, fx)
    done = g.wait_state(j, TERMINAL, timeout=20)
    assert done["state"] == "CD" and done["gpu_ids"] in ("0", "1"), done
    assert log_vars(g, j)["CUDA_VISIBLE_DEVICES"] == done["gpu_ids"]
    info = gpus_json(g)
    assert info["error"] is None and len(info["gpus"]) == 2, info
    assert "NVML: ready" in status(g)
    assert "NVML is ready after" in g.daemon_log()


def test_nvml_that_goes_away_is_opened_again(make_gflow):
    """A driver that stops answering (unloaded for an upgrade) leaves no stale GPUs behind,
    and its GPUs come back when it answers again."""
    fx = fixture_of([sim_gpu(0)])
    g = sim(make_gflow, fixture=fx, env=FAST)
    assert len(gpus_json(g)["gpus"]) == 1
    fx["fail"] = {"nvmlDeviceGetCount": 9}
    write_json_atomic(g.fixture_path, fx)
    wait_for(lambda: "NVML not ready" in (gpus_json(g)["error"] or ""), "NVML to be not ready")
    assert gpus_json(g)["gpus"] == []
    j = g.submit("-g", 1, "true")
    wait_reason(g, j, "Resources")
    fx["fail"] = {}
    write_json_atomic(g.fixture_path, fx)
    assert g.wait_state(j, TERMINAL, timeout=20)["state"] == "CD"


# ---------------------------------------------------------------- defect 10: a hanging read

def test_hanging_nvml_read_does_not_freeze_the_daemon(make_gflow):
    fx = fixture_of([sim_gpu(i) for i in range(2)])
    g = sim(make_gflow, fixture=fx, env=HANG)
    # The system part of the read hangs (the count): no GPU can be seen. (One GPU's call
    # that hangs hides only that GPU: test_gpu_truth2_worker.py.)
    fx["hang"] = {"nvmlDeviceGetCount": 600}
    write_json_atomic(g.fixture_path, fx)

    def unavailable():
        gpus = gpus_json(g)["gpus"]
        return all(x["state"] == "unavailable" and
                   re.fullmatch(r"NVML: no answer for \d+ s", x["reason"] or "") for x in gpus)
    wait_for(unavailable, "the GPUs of the hanging read to be unavailable", timeout=15)
    assert re.search(r"NVML: busy: no answer for \d+ s", status(g))

    # The daemon keeps serving (each command fails the test past its usual timeout) ...
    j = g.submit("-g", 1, "true")
    cpu = g.submit("true")
    assert g.wait_state(cpu)["state"] == "CD"
    rows = g.run("gqueue", "-a", check=True).stdout
    assert str(j) in rows
    # ... and places nothing on a GPU it cannot see.
    wait_reason(g, j, "GpusUnavailable")
    assert "(NVML: no answer for" in g.run("ginfo", check=True).stdout
    assert g.daemon_log().count("NVML gives no answer") == 1

    del fx["hang"]
    write_json_atomic(g.fixture_path, fx)
    assert g.wait_state(j, TERMINAL, timeout=20)["state"] == "CD"
    assert {x["state"] for x in gpus_json(g)["gpus"]} == {"idle"}
    assert "NVML answers again" in g.daemon_log()


def test_topology_is_read_again_only_when_the_gpu_set_changes(make_gflow):
    fx = fixture_of([sim_gpu(i, nvlink=[1 - i]) for i in range(2)])
    g = sim(make_gflow, fixture=fx, env=FAST)
    assert gpus_json(g)["topology"][0][1] == "NV1"
    # The links change but not the GPUs: the matrix stays as read (it is not re-read at
    # every poll) while memory and processes are read again.
    fx["gpus"][0]["nvlink"] = []
    fx["gpus"][1]["nvlink"] = []
    fx["gpus"][0]["memory_used_mib"] = 1234
    write_json_atomic(g.fixture_path, fx)
    wait_for(lambda: gpus_json(g)["gpus"][0]["memory_used_mib"] == 1234, "the new memory")
    assert gpus_json(g)["topology"][0][1] == "NV1"
    # A new GPU: the set changed, the topology is read again.
    fx["gpus"].append(sim_gpu(2))
    write_json_atomic(g.fixture_path, fx)
    wait_for(lambda: len(gpus_json(g)["gpus"]) == 3, "the third GPU")
    topo = gpus_json(g)["topology"]
    assert len(topo) == 3 and not topo[0][1].startswith("NV"), topo
    assert "topology read again" in g.daemon_log()


# ---------------------------------------------------------------- defect 10: attribution

def job_cgroup(g, job_id):
    """The job's own cgroup directory, from the "cgroup:" line of its lock file."""
    def read():
        p = g.data / "run" / f"{job_id}.lock"
        text = p.read_text() if p.exists() else ""
        m = re.search(r"^cgroup: (.+)$", text, re.M)
        return m.group(1) if m else None
    return wait_for(read, f"job {job_id}'s cgroup in its lock file")


def test_gpu_process_in_the_jobs_cgroup_is_the_jobs(make_gflow):
    """A GPU process outside the job's process tree and session (as one a container
    runtime starts for the job, or one that daemonized past the shim) but inside the
    job's cgroup belongs to the job: it blocks nothing and is not an outside process."""
    fx = fixture_of([sim_gpu(i) for i in range(2)])
    # daemon.stray = "warn": its stray on the other GPU keeps nothing from the next job.
    g = sim(make_gflow, fixture=fx, env={**FAST, "GFLOW_DAEMON__STRAY": "warn"})
    # The job daemonizes a process (setsid + double fork) that records its pid.
    j = g.submit("-g", 1, "setsid -f sh -c 'echo $$ > daemonized.pid; exec sleep 120'; "
                 "sleep 120")
    job = g.wait_state(j, "R")
    daemonized = wait_for(lambda: read_pid_file(g.work / "daemonized.pid"), "the daemonized pid")
    # A process that is none of the job's descendants and in a session of its own, moved
    # into the job's cgroup from outside.
    stray = subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        cg = job_cgroup(g, j)
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(stray.pid))
        mine = int(job["gpu_ids"])
        other = 1 - mine
        fx["gpus"][mine]["processes"] = [{"pid": daemonized, "used_memory_mib": 100},
                                         {"pid": stray.pid, "used_memory_mib": 200}]
        fx["gpus"][other]["processes"] = [{"pid": stray.pid, "used_memory_mib": 20}]
        write_json_atomic(g.fixture_path, fx)

        def seen():
            gpus = {x["index"]: x for x in gpus_json(g)["gpus"]}
            return gpus if len(gpus[mine]["processes"]) == 2 else None
        gpus = wait_for(seen, "the job's GPU processes")
        for p in gpus[mine]["processes"]:
            assert p["job"] == j, gpus[mine]
        # On a GPU the job was not given: the job's, reported as foreign, not unmanaged.
        assert gpus[other]["processes"][0]["job"] == j, gpus[other]
        assert gpus[other]["state"] != "unmanaged", gpus[other]
        assert g.job(j)["foreign_gpus"] == [other]
        # So the other GPU takes the next job.
        k = g.submit("-g", 1, "true")
        assert g.wait_state(k, TERMINAL)["state"] == "CD"
    finally:
        g.run("gcancel", j)
        g.wait_state(j, TERMINAL)
        if stray.poll() is None:
            stray.kill()
        stray.wait()


# ---------------------------------------------------------------- gpu_id_format = "auto"

def test_auto_ids_are_uuids_when_the_daemon_sees_gpus_by_uuid(make_gflow):
    """The daemon was given its GPUs by UUID (a container's GPUs): host indices mean
    nothing to the job, so it gets the UUID."""
    fx = fixture_of([sim_gpu(i) for i in range(4)])
    uuid2 = fx["gpus"][2]["uuid"]
    g = sim(make_gflow, fixture=fx, up_env={"CUDA_VISIBLE_DEVICES": uuid2},
            env={"GFLOW_DAEMON__GPU_ID_FORMAT": "auto"})
    st = status(g)
    assert "GPU ids for jobs: uuid (auto: the daemon's CUDA_VISIBLE_DEVICES " \
           "names GPUs by UUID)" in st, st
    j = g.wait_state(g.submit("-g", 1, SHOW_GPU_ENV))
    assert j["state"] == "CD" and j["gpu_ids"] == "2", j
    env = log_vars(g, j["id"])
    assert env["CUDA_VISIBLE_DEVICES"] == uuid2, env
    assert env["NVIDIA_VISIBLE_DEVICES"] == uuid2, env


def test_auto_ids_in_a_container_and_forced_formats(make_gflow):
    fx = fixture_of([sim_gpu(i) for i in range(2)])
    uuids = [x["uuid"] for x in fx["gpus"]]
    # In a container that shares its view with its jobs, NVML's and CUDA's numbering
    # agree (the CUDA check): indices; the container is only mentioned (issue 28).
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__CONTAINER": "yes"})
    assert ("index (auto: NVML and CUDA agree on 2 GPUs; gflowd runs in a container: "
            "daemon.container = \"yes\")") in status(g)
    j = g.wait_state(g.submit("-g", 1, SHOW_GPU_ENV))
    assert log_vars(g, j["id"])["CUDA_VISIBLE_DEVICES"] == j["gpu_ids"]
    assert log_vars(g, j["id"])["GFLOW_GPU_UUIDS"] == uuids[int(j["gpu_ids"])]

    # Not in a container: indices (the conftest's daemons say container = "no").
    h = sim(make_gflow, fixture=fx)
    assert "index (auto: NVML and CUDA agree on 2 GPUs)" in status(h)
    j = h.wait_state(h.submit("-g", 1, SHOW_GPU_ENV))
    assert log_vars(h, j["id"])["CUDA_VISIBLE_DEVICES"] == j["gpu_ids"]

    # "index" forces indices even in a container.
    k = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__CONTAINER": "yes",
                                         "GFLOW_DAEMON__GPU_ID_FORMAT": "index"})
    assert "index (daemon.gpu_id_format)" in status(k)
    j = k.wait_state(k.submit("-g", 1, SHOW_GPU_ENV))
    assert log_vars(k, j["id"])["CUDA_VISIBLE_DEVICES"] == j["gpu_ids"]


def test_status_json_reports_nvml_and_id_format(make_gflow):
    g = sim(make_gflow, 2)
    r = g.api("GET", "/v1/status")
    assert r.status == 200, r
    gp = r.json()["gpus"]
    assert gp["nvml"] == "ready" and gp["id_format"].startswith("index (auto"), gp
    json.dumps(gp)
