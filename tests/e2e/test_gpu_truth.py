"""End-to-end tests of issue 9's rule: when gflow cannot know a GPU's state, the GPU is
unavailable, with a reason that names the NVML error, never idle.

Each test runs a fresh gflowd on a simulator fixture (docs/simulator.md) whose `fail`
switches make one NVML call fail on one GPU, and checks what the daemon and the commands
make of it: the GPU shown as unavailable with the error, never given to a job, not counted
at submit. The failing GPU is GPU 0 where a job would otherwise land on it first.
"""
import json
import os

from conftest import TERMINAL, wait_for, write_json_atomic
from test_gpus import (fixture_of, gpus_json, ids, outside_process, sim, sim_gpu,  # noqa: F401
                       sleeper, still_queued, wait_reason)

PERM = 4        # NVML_ERROR_NO_PERMISSION
UNKNOWN = 999   # NVML_ERROR_UNKNOWN
NOT_SUPPORTED = 3


def gpu(g, i):
    return gpus_json(g)["gpus"][i]


def assert_unavailable(g, i, reason):
    info = gpu(g, i)
    assert info["state"] == "unavailable" and info["reason"] == reason, info
    # The tables show it too, with the reason.
    assert f"({reason})" in g.run("ginfo", check=True).stdout
    verbose = g.run("ginfo", "-v", check=True).stdout
    row = [line for line in verbose.splitlines() if line.split()[:1] == [str(i)]]
    assert row and "unavailable" in row[0] and reason in row[0], verbose
    status = g.gflowd("status", check=True).stdout
    assert f"GPU {i} unavailable: {reason}" in status, status


# ---------------------------------------------------------------- 1. process lists

def test_process_list_error_makes_the_gpu_unavailable(make_gflow):
    """A 70 GB process the daemon may not list (NO_PERMISSION, as a non-root caller gets
    on a MIG GPU) must not make its GPU look idle."""
    fx = fixture_of([sim_gpu(0, memory_used_mib=70000,
                             processes=[{"pid": 4242, "used_memory_mib": 70000}],
                             fail={"nvmlDeviceGetComputeRunningProcesses": PERM}),
                     sim_gpu(1)])
    g = sim(make_gflow, fixture=fx)
    assert_unavailable(g, 0, "NVML: Insufficient Permissions "
                             "(nvmlDeviceGetComputeRunningProcesses)")
    j = g.wait_state(g.submit("-g", 1, "true"))
    assert j["state"] == "CD" and ids(j) == [1], j


def test_graphics_and_mps_processes_hold_their_gpu(make_gflow, outside_process):
    p, q = outside_process(), outside_process()
    fx = fixture_of([sim_gpu(0, graphics_processes=[{"pid": p.pid, "used_memory_mib": 500}]),
                     sim_gpu(1, mps_processes=[{"pid": q.pid, "used_memory_mib": 500}]),
                     sim_gpu(2)])
    g = sim(make_gflow, fixture=fx)
    info = gpus_json(g)["gpus"]
    assert [x["state"] for x in info] == ["unmanaged", "unmanaged", "idle"], info
    assert [x["pid"] for x in info[0]["processes"]] == [p.pid], info[0]
    j = g.wait_state(g.submit("-g", 1, "true"))
    assert j["state"] == "CD" and ids(j) == [2], j


def test_graphics_list_not_supported_is_fine_other_errors_are_not(make_gflow):
    fx = fixture_of([sim_gpu(0, fail={"nvmlDeviceGetMPSComputeRunningProcesses": UNKNOWN}),
                     sim_gpu(1, fail={"nvmlDeviceGetGraphicsRunningProcesses": NOT_SUPPORTED})])
    g = sim(make_gflow, fixture=fx)
    assert_unavailable(g, 0, "NVML: Unknown Error (nvmlDeviceGetMPSComputeRunningProcesses)")
    assert gpu(g, 1)["state"] == "idle"
    j = g.wait_state(g.submit("-g", 1, "true"))
    assert j["state"] == "CD" and ids(j) == [1], j


# ---------------------------------------------------------------- 2. memory

def test_memory_v2_not_supported_falls_back_to_v1(make_gflow):
    fx = fixture_of([sim_gpu(0, memory_used_mib=1000,
                             fail={"nvmlDeviceGetMemoryInfo_v2": NOT_SUPPORTED})])
    g = sim(make_gflow, fixture=fx)
    info = gpu(g, 0)
    assert info["state"] == "idle" and info["memory_total_mib"] == 81920, info
    assert info["memory_used_mib"] == 1000 and info["memory_free_mib"] == 80920, info


def test_no_memory_reading_is_unavailable_not_idle(make_gflow):
    fx = fixture_of([sim_gpu(0, fail={"nvmlDeviceGetMemoryInfo": UNKNOWN}),
                     sim_gpu(1, memory_total_mib=0), sim_gpu(2)])
    g = sim(make_gflow, fixture=fx)
    assert_unavailable(g, 0, "NVML: Unknown Error (nvmlDeviceGetMemoryInfo)")
    assert_unavailable(g, 1, "NVML: total memory is 0 (nvmlDeviceGetMemoryInfo_v2)")
    verbose = g.run("ginfo", "-v", check=True).stdout
    assert "?/0 MiB" not in verbose, verbose
    j = g.wait_state(g.submit("-g", 1, "true"))
    assert j["state"] == "CD" and ids(j) == [2], j


def test_exclusive_gpu_memory_needs_nvml_free_memory(make_gflow):
    """total - used is 81920 MiB, but the driver reserves 6 GB: 76 GB are not free."""
    fx = fixture_of([sim_gpu(0, memory_reserved_mib=6144)])
    g = sim(make_gflow, fixture=fx)
    j = g.submit("-g", 1, "--gpu-memory", "76G", "true")
    wait_reason(g, j, "GpuMemory")
    still_queued(g, j, "GpuMemory")
    k = g.wait_state(g.submit("-g", 1, "--gpu-memory", "74G", "true"))
    assert k["state"] == "CD", k


def test_shared_jobs_pack_into_real_free_memory(make_gflow, outside_process):
    """An 80 GB GPU with an ignored 60 GB outside process: two shared 40 GB jobs must not
    both start; with 20 GB outside, one does."""
    p = outside_process()
    fx = fixture_of([sim_gpu(0, memory_used_mib=61440,
                             processes=[{"pid": p.pid, "used_memory_mib": 61440}])])
    g = sim(make_gflow, fixture=fx)
    wait_for(lambda: gpu(g, 0)["state"] == "unmanaged", "the outside process", timeout=5)
    g.run("gctl", "gpu-process", "ignore", "--gpu", 0, "--pid", p.pid, check=True)
    a = g.submit("-g", 1, "--shared", "--gpu-memory", "40G", "sleep 60")
    b = g.submit("-g", 1, "--shared", "--gpu-memory", "40G", "sleep 60")
    wait_reason(g, a, "GpuMemory")
    still_queued(g, b, "GpuMemory")
    fx["gpus"][0]["memory_used_mib"] = 20480
    fx["gpus"][0]["processes"][0]["used_memory_mib"] = 20480
    write_json_atomic(g.fixture_path, fx)
    assert g.wait_state(a, "R")["state"] == "R"
    still_queued(g, b, "GpuMemory")


# ---------------------------------------------------------------- 3. UUID

def test_no_uuid_is_unavailable(make_gflow):
    fx = fixture_of([sim_gpu(0, fail={"nvmlDeviceGetUUID": UNKNOWN}), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__GPU_ID_FORMAT": "uuid"})
    assert_unavailable(g, 0, "NVML: Unknown Error (nvmlDeviceGetUUID)")
    j = g.wait_state(g.submit("-g", 1, "echo CVD=$CUDA_VISIBLE_DEVICES"))
    assert j["state"] == "CD" and ids(j) == [1], j
    assert f"CVD={fx['gpus'][1]['uuid']}" in g.log(j["id"]), g.log(j["id"])


# ---------------------------------------------------------------- 5. handles, submit

def test_handle_error_is_named_and_refused_at_submit(make_gflow):
    fx = fixture_of([sim_gpu(i) for i in range(6)])
    fx["gpus"][2]["fail"] = {"nvmlDeviceGetHandleByIndex": 15}
    fx["gpus"][5]["fail"] = {"nvmlDeviceGetHandleByIndex": 15}
    fx["gpus"][4]["fail"] = {"nvmlDeviceGetHandleByIndex": PERM}
    g = sim(make_gflow, fixture=fx)
    assert_unavailable(g, 4, "NVML: Insufficient Permissions (nvmlDeviceGetHandleByIndex)")
    assert gpu(g, 2)["lost"] is True and gpu(g, 4)["lost"] is False
    cp = g.run("gbatch", "-g", 6, "true")
    assert cp.returncode != 0, cp
    assert ("requests 6 GPUs but only 3 of the 6 GPUs are usable (GPU 2, 5: NVML: GPU is lost "
            "(nvmlDeviceGetHandleByIndex); GPU 4: NVML: Insufficient Permissions "
            "(nvmlDeviceGetHandleByIndex))") in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    assert g.jobs() == []
    j = g.wait_state(g.submit("-g", 3, "true"))
    assert j["state"] == "CD" and ids(j) == [0, 1, 3], j


def test_queued_job_waits_gpus_unavailable_while_a_gpu_is_lost(make_gflow):
    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx)
    a = sleeper(g, "-g", 1)["id"]
    both = g.submit("-g", 2, "true")
    wait_reason(g, both, "Resources")
    fx["gpus"][1]["fail"] = {"nvmlDeviceGetMemoryInfo": 15}
    write_json_atomic(g.fixture_path, fx)
    wait_reason(g, both, "GpusUnavailable")
    g.run("gcancel", a, check=True)
    g.wait_state(a)
    still_queued(g, both, "GpusUnavailable")
    assert "GpusUnavailable" in g.run("gqueue", check=True).stdout
    fx["gpus"][1]["fail"] = {}
    write_json_atomic(g.fixture_path, fx)
    done = g.wait_state(both, TERMINAL, timeout=5)
    assert done["state"] == "CD" and ids(done) == [0, 1], done


# ---------------------------------------------------------------- 6. device minors

def shim_args(g, job_id):
    """The command line of the job's gflow-shim (found by its --log in our sandbox)."""
    log_file = str(g.data / "logs" / f"{job_id}.log")

    def find():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            argv = [a.decode(errors="replace") for a in argv]
            if "--job-id" in argv and str(job_id) in argv and log_file in argv:
                return argv
        return None
    return wait_for(find, f"the shim of job {job_id} ({log_file})", timeout=5)


def test_constrain_devices_denies_nvml_minors(make_gflow):
    fx = fixture_of([sim_gpu(0, minor_number=5), sim_gpu(1, minor_number=2),
                     sim_gpu(2, minor_number=0)])
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__CONSTRAIN_DEVICES": "true"})
    assert gpu(g, 1)["minor"] == 2
    j = sleeper(g, "-g", 1)
    assert ids(j) == [0], j
    argv = shim_args(g, j["id"])
    assert argv[argv.index("--deny-devices") + 1] == "2,0", argv


def test_constrain_devices_with_an_unknown_minor_fails_the_launch(make_gflow):
    fx = fixture_of([sim_gpu(0), sim_gpu(1, minor_number=None)])
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__CONSTRAIN_DEVICES": "true"})
    j = g.wait_state(g.submit("-g", 1, "true"))
    assert j["state"] != "CD", j
    text = json.dumps(j)
    assert "the /dev/nvidia minor of GPU 1 is unknown" in text, j


# ---------------------------------------------------------------- 7. topology

def test_nvswitch_box_is_all_pairs_nv18(make_gflow):
    fx = fixture_of([sim_gpu(i, nvswitch_links=18) for i in range(4)])
    g = sim(make_gflow, fixture=fx)
    topo = gpus_json(g)["topology"]
    for i in range(4):
        for k in range(4):
            assert topo[i][k] == ("X" if i == k else "NV18"), topo
    out = g.run("ginfo", "--topology", check=True).stdout
    assert out.count("NV18") == 12, out


def test_nvlink_counts_and_link_gaps(make_gflow):
    fx = fixture_of([sim_gpu(0, nvlink=[None, 1, 1]), sim_gpu(1, nvlink=[0, 0]), sim_gpu(2)])
    g = sim(make_gflow, fixture=fx)
    topo = gpus_json(g)["topology"]
    assert topo[0][1] == topo[1][0] == "NV2", topo
    assert topo[0][2] == "NODE", topo
