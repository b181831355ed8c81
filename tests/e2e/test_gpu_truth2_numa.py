"""Issue 28, item 6: NUMA- and switch-aware placement, NVLink as the tie-breaker, and CPU
pinning (gbatch --cpus-per-gpu, daemon.cpu_affinity).

On an NVSwitch machine every pair of GPUs has NVLink (NV18), and the sockets must still
count: a 4-GPU job goes to the NUMA node that holds four free GPUs. Two GPUs on one PCIe
switch (the simulator's "pcie_switch" key) beat two that meet at the host bridge. A job
is pinned to its GPUs' local CPUs (the simulator's "cpus" key answers
nvmlDeviceGetCpuAffinity), within the CPUs gflowd itself may use, and the job sees it in
its own /proc/self/status; gjob show prints them.
"""
import json
import os

from test_gpus import fixture_of, gpus_json, ids, sim, sim_gpu, sleeper

AFFINITY = {"GFLOW_DAEMON__CPU_AFFINITY": "true"}
CPUS_CMD = "grep Cpus_allowed_list /proc/self/status"


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "gpu", "fixtures")


def nvswitch_2numa():
    """An HGX H100: 8 GPUs behind NVSwitches (all pairs NV18), 0-3 on NUMA node 0 and 4-7
    on node 1, two per PCIe switch (tests/gpu/fixtures/8gpus-nvswitch-2numa.json)."""
    with open(os.path.join(FIXTURES, "8gpus-nvswitch-2numa.json")) as f:
        return json.load(f)


def cpus_allowed(g, job_id):
    """The Cpus_allowed_list the job printed (from /proc/self/status, inside the job)."""
    line = [x for x in g.log(job_id).splitlines() if x.startswith("Cpus_allowed_list:")]
    assert line, g.log(job_id)
    return line[0].split(":", 1)[1].strip()


def show(g, job_id):
    return g.run("gjob", "show", job_id, check=True).stdout


# ---------------------------------------------------------------- placement

def test_nvswitch_two_sockets_gpu0_busy_4gpu_job_gets_4_to_7(make_gflow):
    g = sim(make_gflow, fixture=nvswitch_2numa())
    busy = sleeper(g, "-g", 1)
    assert ids(busy) == [0], busy
    j = sleeper(g, "-g", 4)
    assert ids(j) == [4, 5, 6, 7], j
    # The matrix still shows NVLink where it exists, as nvidia-smi topo -m does.
    topo = gpus_json(g)["topology"]
    assert topo[0][5] == topo[1][2] == "NV18", topo


def test_nvswitch_two_sockets_2gpu_job_takes_a_pcie_switch_pair(make_gflow):
    """GPU 0 busy: a 2-GPU job gets the pair behind one PCIe switch on node 0 (2,3),
    not 1,2, which meet only at the node's host bridges."""
    g = sim(make_gflow, fixture=nvswitch_2numa())
    assert ids(sleeper(g, "-g", 1)) == [0]
    j = sleeper(g, "-g", 2)
    assert ids(j) == [2, 3], j


def test_two_gpus_on_one_pcie_switch_beat_the_host_bridge(make_gflow):
    fx = fixture_of([sim_gpu(0), sim_gpu(1), sim_gpu(2, pcie_switch=7),
                     sim_gpu(3, pcie_switch=7)])
    g = sim(make_gflow, fixture=fx)
    topo = gpus_json(g)["topology"]
    assert topo[2][3] == "PIX" and topo[0][1] == "NODE", topo
    j = sleeper(g, "-g", 2)
    assert ids(j) == [2, 3], j


def test_pcie_switch_beats_an_nvlink_pair_across_the_host(make_gflow):
    """NVLink breaks ties, it does not override the PCIe level: GPUs 0 and 1 have
    NVLink but meet at NODE level; 2 and 3 share a PCIe switch."""
    fx = fixture_of([sim_gpu(0, nvlink=[1]), sim_gpu(1, nvlink=[0]),
                     sim_gpu(2, pcie_switch=1), sim_gpu(3, pcie_switch=1)])
    g = sim(make_gflow, fixture=fx)
    j = sleeper(g, "-g", 2)
    assert ids(j) == [2, 3], j


# ---------------------------------------------------------------- CPU pinning

def test_gpus_report_their_local_cpus(make_gflow):
    fx = fixture_of([sim_gpu(0, cpus="0-15,32-47"), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx)
    info = gpus_json(g)["gpus"]
    assert info[0]["cpus"] == "0-15,32-47" and info[1]["cpus"] is None, info


def test_cpu_affinity_pins_a_job_to_its_gpus_cpus(make_gflow):
    """GPU 0's CPU is 0, GPU 1's is 1: a job on GPU 1 runs with Cpus_allowed_list 1."""
    fx = fixture_of([sim_gpu(0, cpus="0"), sim_gpu(1, cpus="1")])
    g = sim(make_gflow, fixture=fx, env=AFFINITY)
    busy = sleeper(g, "-g", 1)
    assert ids(busy) == [0], busy
    j = g.wait_state(g.submit("-g", 1, CPUS_CMD))
    assert j["state"] == "CD" and ids(j) == [1], j
    assert cpus_allowed(g, j["id"]) == "1"
    assert j["cpus"] == "1", j
    assert "CPUs=1 (near GPU 1)" in show(g, j["id"])
    assert g.job(busy["id"])["cpus"] == "0"


def test_without_the_setting_jobs_are_not_pinned(make_gflow):
    fx = fixture_of([sim_gpu(0, cpus="0"), sim_gpu(1, cpus="1")])
    g = sim(make_gflow, fixture=fx)
    j = g.wait_state(g.submit("-g", 1, CPUS_CMD))
    assert j["state"] == "CD" and j.get("cpus") is None, j
    assert cpus_allowed(g, j["id"]) == "0-%d" % (os.cpu_count() - 1)
    assert "CPUs:" not in show(g, j["id"])


def test_cpus_per_gpu_takes_cpus_not_given_to_other_pinned_jobs(make_gflow):
    """Both GPUs are local to CPUs 0-1: with --cpus-per-gpu 1 the first job gets CPU 0,
    the second (running meanwhile) CPU 1."""
    fx = fixture_of([sim_gpu(0, cpus="0-1"), sim_gpu(1, cpus="0-1")])
    g = sim(make_gflow, fixture=fx)
    a = sleeper(g, "-g", 1, "--cpus-per-gpu", 1)
    assert a["cpus"] == "0" and a["cpus_per_gpu"] == 1, a
    b = g.wait_state(g.submit("-g", 1, "--cpus-per-gpu", 1, CPUS_CMD))
    assert b["state"] == "CD" and ids(b) == [1], b
    assert cpus_allowed(g, b["id"]) == "1"
    out = show(g, b["id"])
    assert "CPUsPerGPU=1" in out and "CPUs=1 (near GPU 1)" in out, out


def test_cpus_per_gpu_is_updatable_while_pending(make_gflow):
    g = sim(make_gflow, n=1)
    jid = g.submit("-H", "-g", 1, "true")
    g.run("gjob", "update", jid, "--cpus-per-gpu", 2, check=True)
    assert g.job(jid)["cpus_per_gpu"] == 2
    assert "CPUsPerGPU=2" in show(g, jid)


def test_bad_cpus_per_gpu_is_a_one_line_error(make_gflow):
    g = sim(make_gflow, n=1)
    for bad in ("x", "-1", "99999"):
        cp = g.run("gbatch", "-g", 1, "--cpus-per-gpu", bad, "true")
        assert cp.returncode != 0, cp
        lines = cp.stderr.strip().splitlines()
        assert len(lines) == 1 and "--cpus-per-gpu" in lines[0], cp.stderr
    cp = g.run("gbatch", "--cpus-per-gpu", 1, "true")
    assert cp.returncode != 0 and "--cpus-per-gpu needs --gpus N" in cp.stderr, cp
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    # The daemon keeps serving.
    assert g.health_ok()
