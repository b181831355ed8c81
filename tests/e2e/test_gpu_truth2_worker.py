"""End-to-end tests of issue 28 items 4 and 8, against the NVML simulator:

- One slow GPU does not stop the others: an NVML call that hangs on one GPU makes that
  GPU unavailable ("NVML: no answer for N s (<function>)") while the others keep being
  read and keep taking jobs; the GPU comes back once its call returns.
- A driver upgrade without a reboot: a change of the driver version NVML reports, or an
  NVML/RM version mismatch (NVML 18), makes every GPU unavailable with a reason starting
  "DriverChanged"; no job is started meanwhile, running jobs go on, NVML is closed and
  opened again, and once it opens cleanly the GPUs are taken up again.

Everything is awaited by polling with a deadline.
"""
import os
import re

from conftest import TERMINAL, wait_for, write_json_atomic
from test_gpus import fixture_of, gpus_json, sim, sim_gpu, wait_reason

# A call that takes 2 s counts as hung (not 10 s); NVML that will not open is tried
# again every second.
ENV = {"GFLOW_DAEMON__NVML_TIMEOUT_SECS": "2", "GFLOW_DAEMON__NVML_RETRY_MAX_SECS": "1"}
HANG_REASON = r"NVML: no answer for \d+ s \(nvmlDeviceGetMemoryInfo(_v2)?\)"


def status(g):
    return g.gflowd("status", check=True).stdout


def states(g):
    return [(x["state"], x["reason"]) for x in gpus_json(g)["gpus"]]


def gpu_ids(job):
    return [int(x) for x in job["gpu_ids"].split(",")] if job.get("gpu_ids") else []


# ---------------------------------------------------------------- item 4: per-GPU timeouts

def test_one_hung_gpu_leaves_the_others_scheduling(make_gflow):
    fx = fixture_of([sim_gpu(i) for i in range(4)])
    g = sim(make_gflow, fixture=fx, env=ENV)
    fx["gpus"][2]["hang"] = {"nvmlDeviceGetMemoryInfo": 600}
    write_json_atomic(g.fixture_path, fx)

    def gpu2_hung():
        s = states(g)
        return s if s[2][0] == "unavailable" and re.fullmatch(HANG_REASON, s[2][1] or "") else None
    s = wait_for(gpu2_hung, "GPU 2 to be unavailable with the hang's reason", timeout=15)
    assert [x[0] for x in s] == ["idle", "idle", "unavailable", "idle"], s

    # Submitted after the hang started: three one-GPU jobs run, on 0, 1 and 3, at once.
    marker = g.root / "go"
    jobs = [g.submit("-g", 1, f"while [ ! -e {marker} ]; do sleep 0.05; done") for _ in range(3)]
    for j in jobs:
        g.wait_state(j, "R", timeout=15)
    used = sorted(gpu_ids(g.job(j))[0] for j in jobs)
    assert used == [0, 1, 3], used
    # A fourth waits (the others are busy): the only GPU left is the hung one.
    fourth = g.submit("-g", 1, "true")
    wait_reason(g, fourth, "Resources", timeout=10)
    # The others are still read: a change on GPU 0 is seen while GPU 2 hangs.
    fx["gpus"][0]["temperature_c"] = 77
    write_json_atomic(g.fixture_path, fx)
    wait_for(lambda: gpus_json(g)["gpus"][0]["temperature_c"] == 77, "GPU 0 read again")
    assert states(g)[2][0] == "unavailable"

    st = status(g)
    assert re.search(r"GPU 2 unavailable: " + HANG_REASON, st), st
    assert re.search(r"NVML: ready", st), st
    info = g.run("ginfo", check=True).stdout
    assert "NVML: no answer for" in info and "nvmlDeviceGetMemoryInfo" in info, info
    log = g.daemon_log()
    assert re.search(r"GPU 2 gives no answer", log), log
    assert "NVML gives no answer" not in log, log  # not the whole read

    # The hang ends: GPU 2 comes back and takes the waiting job.
    del fx["gpus"][2]["hang"]
    write_json_atomic(g.fixture_path, fx)
    marker.write_text("")
    done = g.wait_state(fourth, TERMINAL, timeout=20)
    assert done["state"] == "CD", done
    for j in jobs:
        assert g.wait_state(j, TERMINAL, timeout=20)["state"] == "CD"
    wait_for(lambda: all(x[0] == "idle" for x in states(g)), "every GPU idle again", timeout=10)
    assert "GPU 2 answers again" in g.daemon_log()


def test_a_hung_gpu_is_not_asked_again_until_it_answers(make_gflow):
    """At most one call per GPU is outstanding: the hung GPU is not asked again at every
    poll (no thread pile-up), and its reason counts from when the call began."""
    fx = fixture_of([sim_gpu(i) for i in range(2)])
    g = sim(make_gflow, fixture=fx, env=ENV)
    fx["gpus"][1]["hang"] = {"nvmlDeviceGetComputeRunningProcesses": 600}
    write_json_atomic(g.fixture_path, fx)
    pat = r"NVML: no answer for (\d+) s \(nvmlDeviceGetComputeRunningProcesses(_v\d)?\)"

    def hung_for():
        reason = states(g)[1][1] or ""
        m = re.fullmatch(pat, reason)
        return int(m.group(1)) if m else None
    first = wait_for(hung_for, "GPU 1 hung", timeout=15)
    # Several polls later (1 s each) the same call is still the one waited for.
    later = wait_for(lambda: (hung_for() or 0) >= first + 3 and hung_for(), "time to pass",
                     timeout=15)
    assert later >= first + 3
    n = len(os.listdir(f"/proc/{g.daemon_pid()}/task"))
    assert n < 16, f"gflowd has {n} threads: NVML readers pile up"
    assert g.daemon_log().count("GPU 1 gives no answer") == 1
    del fx["gpus"][1]["hang"]
    write_json_atomic(g.fixture_path, fx)
    wait_for(lambda: states(g)[1][0] == "idle", "GPU 1 back", timeout=10)


# ---------------------------------------------------------------- item 8: driver upgrade

def test_driver_version_change_reopens_nvml(make_gflow):
    fx = fixture_of([sim_gpu(i) for i in range(2)])
    g = sim(make_gflow, fixture=fx, env=ENV)
    marker = g.root / "go"
    running = g.submit("-g", 1, f"while [ ! -e {marker} ]; do sleep 0.05; done")
    g.wait_state(running, "R", timeout=10)

    # The package is upgraded and the module reloaded: NVML reports another version,
    # and (for the test to see the state in between) the reopen fails at first.
    fx["driver_version"] = "555.42.02"
    fx["fail"] = {"nvmlInit": 18}
    write_json_atomic(g.fixture_path, fx)

    def changed():
        s = states(g)
        return s if all(x == ("unavailable", "DriverChanged: 550.54.15 -> 555.42.02")
                        for x in s) else None
    wait_for(changed, "every GPU unavailable with DriverChanged", timeout=15)
    j = g.submit("-g", 1, "true")
    wait_reason(g, j, "GpusUnavailable", timeout=10)
    st = status(g)
    assert "DriverChanged: 550.54.15 -> 555.42.02" in st, st
    assert "GPU 0 unavailable: DriverChanged" in st, st
    info = g.run("ginfo", check=True).stdout
    assert "DriverChanged: 550.54.15 -> 555.42.02" in info, info
    assert g.job(running)["state"] == "R"  # running jobs are not killed
    assert g.job(j)["state"] == "PD"

    fx["fail"] = {}
    write_json_atomic(g.fixture_path, fx)
    done = g.wait_state(j, TERMINAL, timeout=20)
    assert done["state"] == "CD", done
    assert gpus_json(g)["driver_version"] == "555.42.02"
    assert "NVML: ready" in status(g)
    marker.write_text("")
    assert g.wait_state(running, TERMINAL, timeout=20)["state"] == "CD"
    log = g.daemon_log()
    assert "DriverChanged: 550.54.15 -> 555.42.02" in log, log
    assert "NVML is ready after" in log or "reopened" in log, log


def test_version_mismatch_reopens_nvml(make_gflow):
    """The simulator's model of an upgrade (docs/simulator.md): the library on disk is
    upgraded first (the loaded one still matches the kernel module, nothing changes);
    then the module is reloaded: the loaded library's calls answer 18, and so does a
    fresh nvmlInit until library and module agree."""
    fx = fixture_of([sim_gpu(i) for i in range(2)])
    g = sim(make_gflow, fixture=fx, env=ENV)
    fx["driver_version"] = "555.42.02"  # the new library on disk
    fx["kernel_driver_version"] = "550.54.15"  # the old module, still loaded
    write_json_atomic(g.fixture_path, fx)
    fx["gpus"][0]["temperature_c"] = 66
    write_json_atomic(g.fixture_path, fx)
    wait_for(lambda: gpus_json(g)["gpus"][0]["temperature_c"] == 66, "a read after it")
    assert {x[0] for x in states(g)} == {"idle"}
    assert gpus_json(g)["driver_version"] == "550.54.15"

    fx["kernel_driver_version"] = "560.35.03"  # another module: neither library matches
    write_json_atomic(g.fixture_path, fx)
    reason = "DriverChanged: library/driver version mismatch (NVML 18)"
    wait_for(lambda: all(x == ("unavailable", reason) for x in states(g)),
             "every GPU unavailable with the mismatch", timeout=15)
    j = g.submit("-g", 1, "true")
    wait_reason(g, j, "GpusUnavailable", timeout=10)
    assert reason in status(g)

    fx["kernel_driver_version"] = "555.42.02"  # the module of the new library
    write_json_atomic(g.fixture_path, fx)
    assert g.wait_state(j, TERMINAL, timeout=20)["state"] == "CD"
    assert gpus_json(g)["driver_version"] == "555.42.02"
    assert {x[0] for x in states(g)} == {"idle"}
