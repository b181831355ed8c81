"""End-to-end tests of per-job GPU accounting (issue 30), against the NVML simulator:

- a finished GPU job has its GPUs' utilisation (mean, peak), memory peak and energy in
  `gjob show` (its "GPU Use" part), the API and gqueue's GPUUTIL, GPUMEM and ENERGY
  columns; a running job shows its figures so far; a CPU-only job has none;
- energy is the energy counter's difference (a counter that goes back, as after a driver
  reload, is bridged from the power reading), and the power readings times the time
  where the GPU has no counter;
- the accounting readings are made only for GPUs that hold a job;
- gstats totals the energy per user and per project, and --idle-gpus lists the jobs that
  held GPUs and used under 5 % of them (not the busy ones), with gstats' filters.

The simulator's fixture (docs/simulator.md) drives the figures; everything is awaited by
polling with a deadline.
"""
import json
import time

from conftest import TERMINAL, parse_show_parts, parse_table, wait_for, write_json_atomic
from test_gpus import fixture_of, sim, sim_gpu
from test_mcp import Mcp

STOP_FILE_JOB = "while [ ! -e {stop} ]; do sleep 0.05; done"
# The fixture's memory is used by no listed process (the job's own are not in NVML
# here): not to be taken for an outside user's.
NO_UNOWNED = {"GFLOW_DAEMON__UNOWNED_MEMORY_MIB": "0"}


def gpu_use(g, job_id):
    """gjob show's "GPU Use" part of the job ({} when it has none)."""
    out = g.run("gjob", "show", job_id, check=True).stdout
    return parse_show_parts(out)[0].get("GPU Use", {})


def wait_job(g, job_id, pred, what, timeout=10):
    last = {}

    def check():
        j = last["job"] = g.job(job_id)
        return j if pred(j) else None
    try:
        return wait_for(check, what, timeout=timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen: {last.get('job')}") from None


def set_gpus(g, fx, **kw):
    """Sets kw on every GPU of the fixture and writes it."""
    for gpu in fx["gpus"]:
        gpu.update(kw)
    write_json_atomic(g.fixture_path, fx)


# ---------------------------------------------------------------- one job's figures

def test_finished_gpu_job_has_utilisation_memory_and_energy(make_gflow):
    fx = fixture_of([sim_gpu(i, utilization_gpu=78, memory_used_mib=6144, power_w=300)
                     for i in range(2)])
    g = sim(make_gflow, fixture=fx, env=NO_UNOWNED)
    stop = g.root / "stop"
    j = g.submit("-g", 1, STOP_FILE_JOB.format(stop=stop))

    # While it runs: its figures so far, in the API and gjob show.
    running = wait_job(g, j, lambda x: x["state"] == "R" and x["gpu_util_mean"] == 78
                       and x["energy_wh"] is not None, "running figures")
    assert running["gpu_util_peak"] == 78 and running["gpu_mem_peak_mb"] == 6144, running
    assert running["gpu_idle"] is False, running
    assert gpu_use(g, j)["GPUUtil"] == "78% mean, 78% peak"

    # A different reading moves the peak, and the mean (time-weighted) once the first
    # figures have covered a while.
    wait_for(lambda: time.time() - running["start_time"] > 2, "two seconds at 78 %")
    set_gpus(g, fx, utilization_gpu=99, memory_used_mib=7168)
    wait_job(g, j, lambda x: x["gpu_util_peak"] == 99 and x["gpu_mem_peak_mb"] == 7168,
             "the peak of the new reading")
    stop.touch()
    done = g.wait_state(j, TERMINAL)
    assert done["state"] == "CD", done
    assert 78 < done["gpu_util_mean"] < 99 and done["gpu_util_peak"] == 99, done
    assert done["gpu_mem_peak_mb"] == 7168 and done["gpu_idle"] is False, done
    # The simulator's counter rises at the fixture's 300 W: about 300 W x the run time.
    run = done["end_time"] - done["start_time"]
    expected = 300 * run / 3600
    assert 0 < done["energy_wh"] and abs(done["energy_wh"] - expected) <= 0.25 * expected + 0.01, \
        (done, expected)

    use = gpu_use(g, j)
    mean = done["gpu_util_mean"]
    assert use["GPUUtil"] == f"{mean}% mean, 99% peak", use
    assert use["GPUMemPeak"] == "7.0 GiB", use
    assert use["Energy"].endswith(" Wh") and float(use["Energy"].split()[0]) > 0, use
    assert "GPUIdle" not in use, use  # shown only when the job sat on its GPUs

    # gqueue's columns, and its JSON: our keys after gflow's.
    rows = parse_table(g.run("gqueue", "-a", "-f", "JOBID,GPUUTIL,GPUMEM,ENERGY",
                             check=True).stdout)
    row = next(r for r in rows if r["JOBID"] == str(j))
    assert row["GPUUTIL"] == f"{mean}%" and row["GPUMEM"] == "7.0GiB", row
    assert row["ENERGY"].endswith("Wh") and float(row["ENERGY"][:-2]) > 0, row
    doc = json.loads(g.run("gqueue", "-a", "-o", "json", check=True).stdout)
    job = next(x for x in doc["jobs"] if x["id"] == j)
    keys = list(job)
    assert keys.index("gpu_util_mean") > keys.index("time_limit" if "time_limit" in job
                                                    else "reason" if "reason" in job
                                                    else "user"), keys
    assert job["gpu_util_peak"] == 99 and job["energy_wh"] == done["energy_wh"], job


def test_cpu_only_job_has_no_gpu_figures(make_gflow):
    g = sim(make_gflow, fixture=fixture_of([sim_gpu(0, utilization_gpu=50)]))
    j = g.submit("sleep 1.5")
    done = g.wait_state(j, TERMINAL)
    assert done["state"] == "CD", done
    for k in ("gpu_util_mean", "gpu_util_peak", "gpu_mem_peak_mb", "energy_wh", "gpu_idle"):
        assert done[k] is None, (k, done)
    assert gpu_use(g, j) == {}
    rows = parse_table(g.run("gqueue", "-a", "-f", "JOBID,GPUUTIL,GPUMEM,ENERGY",
                             check=True).stdout)
    row = next(r for r in rows if r["JOBID"] == str(j))
    assert row["GPUUTIL"] == row["GPUMEM"] == row["ENERGY"] == "-", row


# ---------------------------------------------------------------- energy

def test_energy_from_the_counter_bridges_a_reset(make_gflow):
    # No power draw: only the counter's steps count, so the figures are exact.
    fx = fixture_of([sim_gpu(0, utilization_gpu=50, power_w=0, energy_mj=1_000_000)])
    g = sim(make_gflow, fixture=fx)
    stop = g.root / "stop"
    j = g.submit("-g", 1, STOP_FILE_JOB.format(stop=stop))
    wait_job(g, j, lambda x: x["state"] == "R" and x["energy_wh"] == 0, "a first reading")

    # (Small steps: a step past what a GPU can draw, 5 kW, is not taken from a counter.)
    set_gpus(g, fx, energy_mj=1_000_000 + 360_000)  # 0.1 Wh
    wait_job(g, j, lambda x: x["energy_wh"] == 0.1, "0.1 Wh from the counter")
    # The counter went back (a driver reload): that stretch is counted from the power
    # (0 W), and the counter goes on from there. The new peak tells it was read.
    set_gpus(g, fx, energy_mj=5_000, utilization_gpu=51)
    wait_job(g, j, lambda x: x["gpu_util_peak"] == 51, "the reset read")
    assert g.job(j)["energy_wh"] == 0.1
    set_gpus(g, fx, energy_mj=5_000 + 180_000)  # 0.05 Wh more
    wait_job(g, j, lambda x: x["energy_wh"] == 0.15, "0.05 Wh more after the reset")
    stop.touch()
    done = g.wait_state(j, TERMINAL)
    assert done["state"] == "CD" and done["energy_wh"] == 0.15, done
    assert gpu_use(g, j)["Energy"] == "0.15 Wh"


def test_energy_from_power_without_a_counter(make_gflow):
    fx = fixture_of([sim_gpu(0, utilization_gpu=60, power_w=360)])
    fx["fail"] = {"nvmlDeviceGetTotalEnergyConsumption": 3}  # NOT_SUPPORTED
    g = sim(make_gflow, fixture=fx)
    j = g.submit("-g", 1, "sleep 2.5")
    done = g.wait_state(j, TERMINAL)
    assert done["state"] == "CD", done
    # 360 W all along: 0.1 Wh per second of its run.
    expected = 0.1 * (done["end_time"] - done["start_time"])
    assert abs(done["energy_wh"] - expected) < 0.002, (done, expected)
    assert done["gpu_util_mean"] == 60, done


def test_accounting_calls_only_for_held_gpus(make_gflow):
    # An energy reading that hangs makes its GPU unavailable: none is made while no job
    # holds the GPU, one is once a job does.
    fx = fixture_of([sim_gpu(0, hang={"nvmlDeviceGetTotalEnergyConsumption": 600})])
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__NVML_TIMEOUT_SECS": "2"})
    try:
        deadline = time.monotonic() + 3.5  # three polls at 1 s, each a full read
        while time.monotonic() < deadline:
            gpu = json.loads(g.run("ginfo", "-o", "json", check=True).stdout)["gpus"][0]
            assert gpu["state"] == "idle", gpu
            time.sleep(0.2)
        j = g.submit("-g", 1, "sleep 30")
        wait_for(lambda: "nvmlDeviceGetTotalEnergyConsumption" in
                 (json.loads(g.run("ginfo", "-o", "json", check=True).stdout)["gpus"][0]
                  .get("reason") or ""), "the held GPU's energy reading", timeout=10)
        g.run("gcancel", j, check=True)
    finally:
        del fx["gpus"][0]["hang"]
        write_json_atomic(g.fixture_path, fx)


def test_adopted_job_goes_on_from_the_stopped_daemons_figures(make_gflow):
    fx = fixture_of([sim_gpu(0, utilization_gpu=30, power_w=0, energy_mj=0)])
    g = sim(make_gflow, fixture=fx)
    stop = g.root / "stop"
    j = g.submit("-g", 1, STOP_FILE_JOB.format(stop=stop))
    wait_job(g, j, lambda x: x["state"] == "R" and x["energy_wh"] == 0, "a first reading")
    set_gpus(g, fx, energy_mj=360_000)  # 0.1 Wh
    wait_job(g, j, lambda x: x["energy_wh"] == 0.1, "0.1 Wh")

    g.down()  # the job runs on; its figures so far are stored
    g.up("--simulate-gpus", g.fixture_path)
    wait_for(lambda: f"job {j} re-adopted" in g.daemon_log(), "the re-adoption")
    after = g.job(j)
    assert after["state"] == "R" and after["energy_wh"] == 0.1, after
    assert after["gpu_util_mean"] == 30 and after["gpu_util_peak"] == 30, after
    # The new daemon's counter readings add to them (its first reading is the base:
    # a new peak tells it was taken).
    set_gpus(g, fx, utilization_gpu=40)
    wait_job(g, j, lambda x: x["gpu_util_peak"] == 40, "the new daemon's first reading")
    set_gpus(g, fx, energy_mj=540_000, utilization_gpu=60)
    wait_job(g, j, lambda x: x["energy_wh"] == 0.15 and x["gpu_util_peak"] == 60,
             "0.05 Wh more, read by the new daemon")
    stop.touch()
    done = g.wait_state(j, TERMINAL)
    assert done["state"] == "CD" and done["energy_wh"] == 0.15, done
    assert 30 < done["gpu_util_mean"] < 60, done


# ---------------------------------------------------------------- gstats

def test_gstats_energy_per_user_and_project(make_gflow):
    fx = fixture_of([sim_gpu(i, utilization_gpu=40, power_w=0, energy_mj=0) for i in range(2)])
    g = sim(make_gflow, fixture=fx)
    stops = [g.root / "stop-a", g.root / "stop-b"]
    a = g.submit("-g", 1, "-P", "vision", STOP_FILE_JOB.format(stop=stops[0]))
    b = g.submit("-g", 1, "-P", "nlp", STOP_FILE_JOB.format(stop=stops[1]))
    for j in (a, b):
        wait_job(g, j, lambda x: x["state"] == "R" and x["energy_wh"] == 0, "a first reading")
    set_gpus(g, fx, energy_mj=720_000)  # 0.2 Wh on each GPU
    for j in (a, b):
        wait_job(g, j, lambda x: x["energy_wh"] == 0.2, "0.2 Wh")
    for s in stops:
        s.touch()
    for j in (a, b):
        assert g.wait_state(j, TERMINAL)["state"] == "CD"
    cpu = g.submit("-P", "vision", "true")  # no energy: counts nowhere
    g.wait_state(cpu, TERMINAL)

    st = json.loads(g.run("gstats", "-o", "json", check=True).stdout)
    assert st["total"]["energy_kwh"] == 0.0004, st["total"]
    assert [(e["name"], e["energy_kwh"], e["jobs"]) for e in st["energy"]["projects"]] == \
        [("nlp", 0.0002, 1), ("vision", 0.0002, 1)], st["energy"]
    users = st["energy"]["users"]
    assert len(users) == 1 and users[0]["energy_kwh"] == 0.0004, users
    by_project = json.loads(g.run("gstats", "--by", "project", "-o", "json",
                                  check=True).stdout)
    assert {x["name"]: x["energy_kwh"] for x in by_project["groups"]} == \
        {"nlp": 0.0002, "vision": 0.0002}, by_project["groups"]

    text = g.run("gstats", check=True).stdout
    table = parse_table("\n".join(l for l in text.splitlines()[1:]
                                  if not l.startswith("Energy")))
    assert table[-1]["USER"] == "TOTAL" and table[-1]["ENERGY_KWH"] == "0.0004", text
    assert "Energy (kWh) by project: nlp 0.0002, vision 0.0002" in text, text
    assert f"Energy (kWh) by user: {users[0]['name']} 0.0004" in text, text
    csv = g.run("gstats", "-o", "csv", check=True).stdout.splitlines()
    assert csv[0].endswith(",energy_kwh") and csv[1].endswith(",0.0004"), csv

    # The MCP tools pass the figures through.
    m = Mcp(g)
    try:
        m.initialize()
        assert m.ok("get_job", job_id=a)["energy_wh"] == 0.2
        assert m.ok("get_stats")["energy"]["projects"] == st["energy"]["projects"]
    finally:
        m.close()


def test_gstats_idle_gpus_lists_jobs_that_sat_on_their_gpus(make_gflow):
    fx = fixture_of([sim_gpu(0, utilization_gpu=2)])
    g = sim(make_gflow, fixture=fx)
    stop = g.root / "stop"
    idle = g.submit("-g", 1, "-J", "sitter", STOP_FILE_JOB.format(stop=stop))
    wait_job(g, idle, lambda x: x["state"] == "R" and x["gpu_idle"] is True, "idle so far")
    # A running job that sits on its GPU is listed already (its figures so far).
    now = json.loads(g.run("gstats", "--idle-gpus", "-o", "json", check=True).stdout)
    assert [(x["id"], x["state"]) for x in now["jobs"]] == [(idle, "R")], now
    stop.touch()
    g.wait_state(idle, TERMINAL)

    set_gpus(g, fx, utilization_gpu=90)
    stop.unlink()
    busy = g.submit("-g", 1, "-J", "worker", STOP_FILE_JOB.format(stop=stop))
    wait_job(g, busy, lambda x: x["state"] == "R" and x["gpu_util_mean"] == 90, "busy")
    stop.touch()
    done = g.wait_state(busy, TERMINAL)
    assert done["gpu_idle"] is False, done
    cpu = g.submit("sleep 0.2")  # held no GPU: never idle
    g.wait_state(cpu, TERMINAL)

    st = json.loads(g.run("gstats", "--idle-gpus", "-o", "json", check=True).stdout)
    assert [x["id"] for x in st["jobs"]] == [idle], st
    x = st["jobs"][0]
    assert x["name"] == "sitter" and x["gpu_ids"] == "0" and x["gpus"] == 1, x
    assert x["gpu_util_mean"] == 2 and x["runtime_secs"] > 0 and x["state"] == "CD", x
    text = g.run("gstats", "--idle-gpus", check=True).stdout
    rows = parse_table("\n".join(text.splitlines()[1:]))
    assert [(r["JOBID"], r["NAME"], r["GPUS"], r["GPUUTIL"]) for r in rows] == \
        [(str(idle), "sitter", "0", "2%")], text

    # gstats' filters: another user's jobs, a period that ended before.
    other = json.loads(g.run("gstats", "--idle-gpus", "-u", "nobody", "-o", "json",
                             check=True).stdout)
    assert other["jobs"] == [], other
    early = json.loads(g.run("gstats", "--idle-gpus", "--until",
                             str(int(x_start(g, idle)) - 5), "-o", "json", check=True).stdout)
    assert early["jobs"] == [], early
    assert "no job held GPUs" in g.run("gstats", "--idle-gpus", "-u", "nobody",
                                       check=True).stdout
    bad = g.run("gstats", "--idle-gpus", "--gpu")
    assert bad.returncode == 2 and "--idle-gpus and --gpu" in bad.stderr, bad


def x_start(g, job_id):
    return g.job(job_id)["start_time"]
