"""End-to-end tests of issue 28's sick GPUs (item 3, "Health") on the NVML simulator.

A GPU whose health NVML reports bad (pending or failed row remaps, uncorrectable
volatile ECC errors, pages pending retirement, a fatal Xid) is drained: its running jobs
run out, no job starts on it until an admin runs `gctl gpu resume N`. A fatal Xid (or a
GPU that falls off the bus) under a running job ends the job with GpuFault, and requeues
it when it was submitted with --requeue. Memory used by no listed process makes the GPU
busy; compute modes EXCLUSIVE_PROCESS / PROHIBITED keep shared jobs / every job off.
The fixture keys are docs/simulator.md's "Health" subsection.
"""
import os

import pytest

from conftest import as_user, ensure_test_user, wait_for, write_json_atomic
from test_gpus import fixture_of, gpus_json, ids, sim, sim_gpu, sleeper, wait_reason

LOST = 15  # NVML_ERROR_GPU_IS_LOST


def gpu(g, i):
    return gpus_json(g)["gpus"][i]


def rewrite(g, gpus):
    write_json_atomic(g.fixture_path, fixture_of(gpus))


def wait_gpu(g, i, pred, what, timeout=8):
    last = {}

    def check():
        last["g"] = gpu(g, i)
        return pred(last["g"])
    wait_for(check, f"{what} (last: {last.get('g')})", timeout=timeout)
    return last["g"]


def resume(g, i, *args, user=None):
    return g.run("gctl", "gpu", "resume", i, *args, user=user)


# Each trigger: the fixture keys that drain a GPU, the drain reason, and the keys once
# the condition is gone (a GPU reset).
TRIGGERS = [
    ({"remapped_rows": {"correctable": 0, "uncorrectable": 1, "pending": True,
                        "failed": False}},
     "remapped rows pending",
     {"remapped_rows": {"correctable": 0, "uncorrectable": 1, "pending": False,
                        "failed": False}}),
    ({"remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False,
                        "failed": True}},
     "remapped rows failed",
     {"remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False,
                        "failed": False}}),
    ({"ecc_uncorrectable_volatile": 3, "ecc_uncorrectable_aggregate": 3},
     "uncorrectable ECC errors: 3",
     {"ecc_uncorrectable_volatile": 0, "ecc_uncorrectable_aggregate": 3}),
    ({"retired_pages": 2, "retired_pages_pending": True}, "retired pages pending",
     {"retired_pages": 2, "retired_pages_pending": False}),
]


@pytest.mark.parametrize("bad,why,fixed", TRIGGERS, ids=[t[1] for t in TRIGGERS])
def test_each_health_trigger_drains_until_resume(make_gflow, bad, why, fixed):
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0, **bad), sim_gpu(1)]))
    info = wait_gpu(g, 0, lambda x: x["state"] == "drained", "GPU 0 drained")
    assert info["drained"] == why and info["reason"] == why, info
    assert gpu(g, 1)["drained"] is None and gpu(g, 1)["state"] == "idle"
    # ginfo and gflowd status say so.
    assert f"({why})" in g.run("ginfo", check=True).stdout
    status = g.gflowd("status", check=True).stdout
    assert f"GPU 0 drained: {why}" in status, status
    # No job gets it: a 2-GPU job waits (it is not refused: the drain is not forever).
    two = g.submit("-g", 2, "true")
    wait_reason(g, two, "GpusUnavailable")
    # Resume refuses while the condition still holds, and says how to force it.
    cp = resume(g, 0)
    assert cp.returncode != 0 and f"{why} still" in cp.stderr and "--force" in cp.stderr, cp
    assert cp.stderr.count("\n") == 1, cp.stderr
    assert gpu(g, 0)["state"] == "drained"
    # The GPU is reset: the condition is gone, but the drain stays until an admin resumes.
    rewrite(g, [sim_gpu(0, **fixed), sim_gpu(1)])
    wait_gpu(g, 0, lambda x: x["health"]["remapped_rows_pending"] is not True
             and x["health"]["remapped_rows_failed"] is not True
             and x["health"]["retired_pages_pending"] is not True
             and not x["health"]["ecc_uncorrectable_volatile"], "condition gone")
    assert gpu(g, 0)["state"] == "drained"
    cp = resume(g, 0)
    assert cp.returncode == 0 and "GPU 0 resumed" in cp.stdout, cp
    assert gpu(g, 0)["drained"] is None
    assert g.wait_state(two)["state"] == "CD"


def test_forced_resume_does_not_drain_again_for_the_same_reason(make_gflow):
    bad = {"remapped_rows": {"correctable": 0, "uncorrectable": 1, "pending": True,
                             "failed": False}}
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0, **bad)]))
    wait_gpu(g, 0, lambda x: x["state"] == "drained", "GPU 0 drained")
    assert resume(g, 0, "--force").returncode == 0
    j = g.wait_state(g.submit("-g", 1, "true"))
    assert j["state"] == "CD" and ids(j) == [0], j
    assert gpu(g, 0)["drained"] is None
    # A new condition drains it again.
    rewrite(g, [sim_gpu(0, ecc_uncorrectable_volatile=1, **bad)])
    wait_gpu(g, 0, lambda x: x["drained"] == "uncorrectable ECC errors: 1", "drained again")


def test_drain_is_kept_across_a_restart_and_resume_is_for_admins(make_gflow):
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0, ecc_uncorrectable_volatile=2),
                                            sim_gpu(1)]))
    wait_gpu(g, 0, lambda x: x["state"] == "drained", "GPU 0 drained")
    rewrite(g, [sim_gpu(0, ecc_uncorrectable_volatile=0), sim_gpu(1)])  # driver reloaded
    assert g.down().returncode == 0
    g.up("--simulate-gpus", g.fixture_path)
    info = gpu(g, 0)
    assert info["state"] == "drained" and info["drained"] == "uncorrectable ECC errors: 2", info
    uid, gid, _ = ensure_test_user()
    user = as_user(uid, gid)
    os.chmod(g.root, 0o755)
    os.chmod(g.work, 0o777)
    cp = resume(g, 0, user=user)
    assert cp.returncode != 0 and "admin" in cp.stderr and cp.stderr.count("\n") == 1, cp
    cp = resume(g, 7)
    assert cp.returncode != 0 and "no GPU 7" in cp.stderr, cp
    cp = resume(g, 1)
    assert cp.returncode != 0 and "GPU 1 is not drained" in cp.stderr, cp
    assert resume(g, 0).returncode == 0
    assert g.down().returncode == 0
    g.up("--simulate-gpus", g.fixture_path)
    assert gpu(g, 0)["state"] == "idle"


def test_running_job_runs_out_on_a_drained_gpu(make_gflow):
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0), sim_gpu(1)]))
    a = g.submit("-g", 1, "sleep 2")
    a = g.wait_state(a, "R")
    k = ids(a)[0]
    gpus = [sim_gpu(0), sim_gpu(1)]
    gpus[k] = sim_gpu(k, remapped_rows={"correctable": 0, "uncorrectable": 1,
                                        "pending": True, "failed": False})
    rewrite(g, gpus)
    info = wait_gpu(g, k, lambda x: x["state"] == "drained", f"GPU {k} drained")
    assert info["jobs"] == [a["id"]], info
    assert g.job(a["id"])["state"] == "R"
    # It runs out normally; the next 1-GPU jobs go to the other GPU, never to it.
    assert g.wait_state(a["id"])["state"] == "CD"
    for _ in range(2):
        j = g.wait_state(g.submit("-g", 1, "true"))
        assert j["state"] == "CD" and ids(j) == [1 - k], j


@pytest.mark.parametrize("requeue", [False, True], ids=["plain", "requeue"])
def test_xid_79_ends_the_job_with_gpufault(make_gflow, requeue):
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0), sim_gpu(1)]))
    a = sleeper(g, "-g", 1, *(["--requeue"] if requeue else []))
    k = ids(a)[0]
    gpus = [sim_gpu(0), sim_gpu(1)]
    gpus[k] = sim_gpu(k, xid_events=[79])
    rewrite(g, gpus)
    if requeue:
        wait_for(lambda: g.job(a["id"]).get("requeue_count") == 1, "job requeued", timeout=10)
        j = g.wait_state(a["id"], "R")  # again, on the other GPU
        assert ids(j) == [1 - k], j
    else:
        j = g.wait_state(a["id"], timeout=15)
        assert j["state"] == "F" and j["reason"] == "GpuFault (Xid 79)", j
    info = gpu(g, k)
    assert info["state"] == "drained" and info["drained"] == "Xid 79", info
    assert info["health"]["last_xid"] == 79, info
    assert "GPU %d drained: Xid 79" % k in g.gflowd("status", check=True).stdout
    # A non-fatal Xid (13: a graphics engine exception, the application's) drains nothing.
    gpus[1 - k] = sim_gpu(1 - k, xid_events=[13])
    rewrite(g, gpus)
    wait_gpu(g, 1 - k, lambda x: x["health"]["last_xid"] == 13, "Xid 13 seen")
    assert gpu(g, 1 - k)["drained"] is None
    # Xids cannot be read back: resume needs no --force.
    assert resume(g, k).returncode == 0


def test_lost_gpu_ends_its_job(make_gflow):
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0), sim_gpu(1)]))
    a = sleeper(g, "-g", 1)
    b = sleeper(g, "-g", 1, "--requeue")
    gpus = [sim_gpu(0, fail={"nvmlDeviceGetUUID": LOST}),
            sim_gpu(1, fail={"nvmlDeviceGetUUID": LOST})]
    rewrite(g, gpus)
    j = g.wait_state(a["id"], timeout=15)
    assert j["state"] == "F" and j["reason"] == "GpuFault (GPU lost)", j
    wait_for(lambda: g.job(b["id"]).get("requeue_count") == 1, "job b requeued", timeout=10)
    assert g.job(b["id"])["state"] == "PD"


def test_unowned_memory_makes_the_gpu_unmanaged(make_gflow):
    big = {"memory_total_mib": 143771, "memory_used_mib": 140000}
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0, **big), sim_gpu(1)]))
    info = wait_gpu(g, 0, lambda x: x["state"] == "unmanaged", "GPU 0 unmanaged")
    assert info["reason"] == "Unmanaged: 140000 MiB used by no visible process", info
    assert info["health"]["unowned_mib"] == 140000, info
    assert gpu(g, 1)["health"]["unowned_mib"] == 0
    j = g.wait_state(g.submit("-g", 1, "true"))
    assert j["state"] == "CD" and ids(j) == [1], j
    two = g.submit("-g", 2, "true")
    wait_reason(g, two, "Unmanaged")
    # Memory that listed processes account for is theirs, not unowned; under the limit
    # it is not enough to block the GPU either.
    rewrite(g, [sim_gpu(0, memory_total_mib=143771, memory_used_mib=900), sim_gpu(1)])
    assert g.wait_state(two)["state"] == "CD"


def test_exclusive_process_keeps_shared_jobs_off(make_gflow):
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0, compute_mode="ExclusiveProcess"),
                                            sim_gpu(1)]))
    assert gpu(g, 0)["health"]["compute_mode"] == "ExclusiveProcess"
    assert gpu(g, 1)["health"]["compute_mode"] == "Default"
    a = sleeper(g, "-g", 1, "--shared", "--gpu-memory", "1G")
    b = sleeper(g, "-g", 1, "--shared", "--gpu-memory", "1G")
    assert ids(a) == [1] and ids(b) == [1], (a, b)
    # An exclusive job may have it.
    c = sleeper(g, "-g", 1)
    assert ids(c) == [0], c


def test_prohibited_keeps_every_job_off(make_gflow):
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0, compute_mode="Prohibited"),
                                            sim_gpu(1)]))
    info = gpu(g, 0)
    assert info["state"] == "unavailable" and info["reason"] == "compute mode Prohibited", info
    a = g.wait_state(g.submit("-g", 1, "true"))
    assert ids(a) == [1], a
    two = g.submit("-g", 2, "true")
    wait_reason(g, two, "GpusUnavailable")
    rewrite(g, [sim_gpu(0), sim_gpu(1)])
    assert g.wait_state(two)["state"] == "CD"


def test_health_fields_in_ginfo_json(make_gflow):
    g = sim(make_gflow, fixture=fixture_of([
        sim_gpu(0, ecc_uncorrectable_volatile=0, ecc_uncorrectable_aggregate=5,
                retired_pages=4, retired_pages_pending=False,
                remapped_rows={"correctable": 2, "uncorrectable": 0, "pending": False,
                               "failed": False},
                throttle_reasons=["SwPowerCap", "HwSlowdown"]),
        sim_gpu(1, compute_mode=None)]))
    h0, h1 = gpu(g, 0)["health"], gpu(g, 1)["health"]
    assert h0 == {"ecc_uncorrectable_volatile": 0, "ecc_uncorrectable_aggregate": 5,
                  "retired_pages": 4, "retired_pages_pending": False,
                  "remapped_rows_pending": False, "remapped_rows_failed": False,
                  "last_xid": None, "throttle_reasons": ["SwPowerCap", "HwSlowdown"],
                  "compute_mode": "Default", "unowned_mib": 0}, h0
    # Not supported (a board without ECC or a row remapper): unknown, and the GPU is fine.
    assert h1 == {"ecc_uncorrectable_volatile": None, "ecc_uncorrectable_aggregate": None,
                  "retired_pages": None, "retired_pages_pending": None,
                  "remapped_rows_pending": None, "remapped_rows_failed": None,
                  "last_xid": None, "throttle_reasons": [], "compute_mode": None,
                  "unowned_mib": 0}, h1
    assert gpu(g, 1)["state"] == "idle" and gpu(g, 0)["state"] == "idle"


def test_metrics_show_drained_gpus(make_gflow):
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0, ecc_uncorrectable_volatile=1),
                                            sim_gpu(1, ecc_uncorrectable_volatile=0)]))
    wait_gpu(g, 0, lambda x: x["state"] == "drained", "GPU 0 drained")
    text = g.api("GET", "/metrics").body.decode()
    lines = [x for x in text.splitlines() if x.startswith("gflow_gpu_drained{")]
    assert any('gpu="0"' in x and 'reason="uncorrectable ECC errors: 1"' in x
               and x.endswith(" 1") for x in lines), lines
    assert any('gpu="1"' in x and x.endswith(" 0") for x in lines), lines
    assert any(x.startswith('gflow_gpu_ecc_uncorrectable_volatile{gpu="0"') and
               x.endswith(" 1") for x in text.splitlines()), text
