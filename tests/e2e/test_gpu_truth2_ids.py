"""End-to-end tests of issue 28's ids part against the NVML simulator and the fake libcuda
(libgflow-cuda-sim.so, which gflowd uses for its CUDA check on simulated GPUs):

- daemon.gpu_id_format = "auto" gives NVML indices unless an index would be wrong: UUIDs
  under a device cgroup (daemon.constrain_devices), when gflowd's own CUDA_VISIBLE_DEVICES
  names GPUs by UUID, and when CUDA's view of the GPUs (cuDeviceGetCount/cuDeviceGetUuid
  in a child, with CUDA_DEVICE_ORDER=PCI_BUS_ID) differs from NVML's; a container alone
  no longer makes UUIDs. `gflowd status` says which and why.
- GFLOW_GPU_UUIDS and NVIDIA_VISIBLE_DEVICES in every job's environment.
- --mig PROFILE:N with N > 1 is refused with a hint (a CUDA process uses one instance).
- daemon.constrain_devices denies a MIG job the other instances' /dev/nvidia-caps nodes.
"""
import json
import os
import stat

import pytest

from conftest import wait_for
from test_gpus import SHOW_GPU_ENV, fixture_of, log_vars, sim, sim_gpu

CONSTRAIN = {"GFLOW_DAEMON__CONSTRAIN_DEVICES": "true"}


def status(g):
    return g.gflowd("status", check=True).stdout


def id_line(g):
    """The `GPU ids for jobs:` line of gflowd status."""
    for line in status(g).splitlines():
        if line.startswith("GPU ids for jobs: "):
            return line[len("GPU ids for jobs: "):]
    raise AssertionError("gflowd status has no 'GPU ids for jobs' line")


def one_gpu_env(g):
    """Runs a 1-GPU job printing its GPU variables; (job, its variables)."""
    j = g.wait_state(g.submit("-g", 1, SHOW_GPU_ENV))
    assert j["state"] == "CD", j
    return j, log_vars(g, j["id"])


# ---------------------------------------------------------------- "auto" ids

def test_constrain_devices_gives_uuids(make_gflow):
    """Behind a device cgroup CUDA numbers the GPUs it can open from 0: an NVML index
    above 0 would be invalid, so the job gets its GPU's UUID."""
    fx = fixture_of([sim_gpu(i, minor_number=i) for i in range(4)])
    g = sim(make_gflow, fixture=fx, env=CONSTRAIN)
    assert id_line(g) == ("uuid (auto: daemon.constrain_devices: CUDA numbers the GPUs it "
                          "can open from 0)")
    busy = g.wait_state(g.submit("-g", 1, "sleep", 60), "R")
    j, env = one_gpu_env(g)
    assert j["gpu_ids"] == "1", (busy, j)
    assert env["CUDA_VISIBLE_DEVICES"] == fx["gpus"][1]["uuid"], env
    assert g.api("GET", "/v1/status").json()["gpus"]["id_format"].startswith(
        "uuid (auto: daemon.constrain_devices")


def test_indices_in_a_container_when_nvml_and_cuda_agree(make_gflow):
    fx = fixture_of([sim_gpu(i) for i in range(4)])
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__CONTAINER": "yes"})
    line = id_line(g)
    assert line.startswith("index (auto: NVML and CUDA agree on 4 GPUs"), line
    g.wait_state(g.submit("-g", 2, "sleep", 60), "R")
    j, env = one_gpu_env(g)
    assert env["CUDA_VISIBLE_DEVICES"] == j["gpu_ids"] == "2", (j, env)
    assert env["GFLOW_GPU_UUIDS"] == fx["gpus"][2]["uuid"], env


def test_indices_outside_a_container_too(make_gflow):
    g = sim(make_gflow, 2)
    assert id_line(g) == "index (auto: NVML and CUDA agree on 2 GPUs)"
    j, env = one_gpu_env(g)
    assert env["CUDA_VISIBLE_DEVICES"] == j["gpu_ids"] == "0", (j, env)


def test_a_gpu_cuda_cannot_see_gives_uuids_with_the_reason(make_gflow):
    """NVML lists 3 GPUs; CUDA cannot open GPU 1 (a device node missing from the
    container, say): CUDA's device 1 is NVML's GPU 2, so indices would be wrong."""
    fx = fixture_of([sim_gpu(0), sim_gpu(1, cuda_hidden=True), sim_gpu(2)])
    g = sim(make_gflow, fixture=fx)
    line = id_line(g)
    assert line.startswith("uuid (auto: NVML and CUDA disagree: "), line
    assert "CUDA sees 2 GPUs, NVML 3" in line and fx["gpus"][2]["uuid"] in line, line
    g.wait_state(g.submit("-g", 2, "sleep", 60), "R")
    j, env = one_gpu_env(g)
    assert j["gpu_ids"] == "2" and env["CUDA_VISIBLE_DEVICES"] == fx["gpus"][2]["uuid"], env


def test_nvml_order_other_than_pci_order_gives_uuids(make_gflow):
    """NVML's index 0 is not the first GPU on the PCI bus: CUDA's PCI_BUS_ID numbering
    differs from NVML's."""
    fx = fixture_of([sim_gpu(0, pci_bus_id="00000000:40:00.0"), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx)
    line = id_line(g)
    assert line.startswith("uuid (auto: NVML and CUDA disagree: CUDA's GPU 0 is "
                           f"{fx['gpus'][1]['uuid']}, NVML's GPU 0 {fx['gpus'][0]['uuid']}"), line
    j, env = one_gpu_env(g)
    assert env["CUDA_VISIBLE_DEVICES"] == fx["gpus"][int(j["gpu_ids"])]["uuid"], env


def test_no_cuda_driver_keeps_indices_and_says_so(make_gflow):
    g = sim(make_gflow, 2, env={"GFLOW_CUDA_LIBRARY": "/nonexistent/libcuda.so.1"})
    assert id_line(g) == "index (auto: CUDA driver not found, not checked)"
    j, env = one_gpu_env(g)
    assert env["CUDA_VISIBLE_DEVICES"] == "0", env


def test_a_hanging_cuinit_does_not_stop_the_daemon(make_gflow):
    """cuInit that does not return: the check runs in a child, the daemon serves
    meanwhile, jobs get UUIDs (right whatever CUDA's numbering) until it is known."""
    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    fx["cuda_init_sleep_secs"] = 30
    g = sim(make_gflow, fixture=fx)
    line = id_line(g)
    assert line == "uuid (auto: checking CUDA's view of the GPUs)", line
    j, env = one_gpu_env(g)
    assert env["CUDA_VISIBLE_DEVICES"] == fx["gpus"][int(j["gpu_ids"])]["uuid"], env


# ---------------------------------------------------------------- every job's variables

def test_gpu_uuids_and_nvidia_visible_devices_in_every_job(make_gflow):
    fx = fixture_of([sim_gpu(i) for i in range(2)])
    g = sim(make_gflow, fixture=fx)
    uuids = [x["uuid"] for x in fx["gpus"]]
    one = g.submit("-g", 1, SHOW_GPU_ENV)
    two = g.submit("-g", 2, "--gpus-per-task", 1, f"( {SHOW_GPU_ENV} ) > {g.work}/copy$RANK")
    none = g.submit(SHOW_GPU_ENV)
    for j in (one, two, none):
        assert g.wait_state(j)["state"] == "CD", g.job(j)
    env = log_vars(g, one)
    assert env["GFLOW_GPU_UUIDS"] == env["NVIDIA_VISIBLE_DEVICES"] == uuids[0], env
    # Each copy of a per-task job: its own GPU, by index and by UUID.
    copies = [dict(l.split("=", 1) for l in (g.work / f"copy{k}").read_text().splitlines())
              for k in (0, 1)]
    got = sorted((c["CUDA_VISIBLE_DEVICES"], c["GFLOW_GPU_UUIDS"]) for c in copies)
    assert got == [("0", uuids[0]), ("1", uuids[1])], copies
    for c in copies:
        assert c["NVIDIA_VISIBLE_DEVICES"] == c["GFLOW_GPU_UUIDS"], c
    env = log_vars(g, none)
    assert env["GFLOW_GPU_UUIDS"] == "" and env["NVIDIA_VISIBLE_DEVICES"] == "none", env
    assert env["CUDA_VISIBLE_DEVICES"] == "", env


# ---------------------------------------------------------------- MIG :N

MIG_A = "MIG-22222222-aaaa-5000-8000-000000000001"
MIG_B = "MIG-22222222-aaaa-5000-8000-000000000002"
MIG_C = "MIG-22222222-aaaa-5000-8000-000000000003"


def mig_fixture():
    mig = sim_gpu(0, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559, mig_mode=1,
                  minor_number=0, mig_instances=[
                      {"profile": "1g.18gb", "uuid": MIG_A, "memory_total_mib": 16384,
                       "gi_id": 9, "ci_id": 0, "processes": []},
                      {"profile": "1g.18gb", "uuid": MIG_B, "memory_total_mib": 16384,
                       "gi_id": 10, "ci_id": 0, "processes": []},
                      {"profile": "3g.71gb", "uuid": MIG_C, "memory_total_mib": 71000,
                       "gi_id": 2, "ci_id": 0, "processes": []},
                  ])
    return fixture_of([mig, sim_gpu(1, minor_number=1)])


def test_mig_n_above_one_is_refused_with_a_hint(make_gflow):
    g = sim(make_gflow, fixture=mig_fixture())
    for args in (("--mig", "1g.18gb:2"), ("--gres", "mig:1g.18gb:2")):
        cp = g.run("gbatch", *args, "true")
        assert cp.returncode != 0, cp
        lines = cp.stderr.strip().splitlines()
        assert len(lines) == 1, cp.stderr
        assert "1g.18gb:2: a CUDA process sees only one MIG instance" in lines[0], lines
        assert "--mig 1g.18gb" in lines[0] and "--array 1-2" in lines[0], lines
    r = g.api("POST", "/v1/jobs", {"command": "true", "workdir": str(g.work),
                                   "mig_profile": "1g.18gb", "mig_count": 2})
    assert r.status == 400 and "one MIG instance" in r.json()["error"], r
    assert g.jobs() == []
    # One instance each: fine.
    j = g.wait_state(g.submit("--mig", "1g.18gb", SHOW_GPU_ENV))
    assert j["state"] == "CD" and log_vars(g, j["id"])["CUDA_VISIBLE_DEVICES"] in (MIG_A, MIG_B)


# ---------------------------------------------------------------- MIG and /dev/nvidia-caps

CAPS_MAJOR = 241  # a "local/experimental" char major: no driver, open() gives ENXIO
CAPS_MINORS = {MIG_A: (21, 22), MIG_B: (30, 31), MIG_C: (40, 41)}
GI_CI = {MIG_A: (9, 0), MIG_B: (10, 0), MIG_C: (2, 0)}

CAPS_PROBE = r"""
import errno, sys
for path in sys.argv[1:]:
    try:
        open(path, "rb").close()
        print(path.rsplit("/", 1)[1] + "=opened")
    except OSError as e:
        print(path.rsplit("/", 1)[1] + "=" + errno.errorcode[e.errno])
"""


def devices_v1_mounted():
    with open("/proc/self/mountinfo") as f:
        return any(l.partition(" - ")[2].split()[:1] == ["cgroup"] and
                   "devices" in l.partition(" - ")[2].split()[2].split(",") for l in f)


def make_caps(root):
    """A fake /proc/driver/nvidia/capabilities for GPU minor 0 and /dev/nvidia-caps
    nodes (char CAPS_MAJOR:N), as the driver makes them for the fixture's instances."""
    proc, dev = root / "proc-caps", root / "dev-caps"
    dev.mkdir(mode=0o755)
    for uuid, (gi, ci) in GI_CI.items():
        gi_minor, ci_minor = CAPS_MINORS[uuid]
        gdir = proc / "gpu0" / "mig" / f"gi{gi}"
        (gdir / f"ci{ci}").mkdir(parents=True)
        (gdir / "access").write_text(f"DeviceFileMinor: {gi_minor}\nDeviceFileMode: 292\n")
        (gdir / f"ci{ci}" / "access").write_text(
            f"DeviceFileMinor: {ci_minor}\nDeviceFileMode: 292\n")
        for m in (gi_minor, ci_minor):
            os.mknod(dev / f"nvidia-cap{m}", 0o666 | stat.S_IFCHR, os.makedev(CAPS_MAJOR, m))
    return proc, dev


def shim_argv(job_id):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")
        except OSError:
            continue
        if "--job-id" in argv and argv[argv.index("--job-id") + 1] == str(job_id) and \
                "--deny-devices" in argv:
            return argv
    return None


def test_mig_job_gets_only_its_own_caps(make_gflow, tmp_path):
    proc, dev = make_caps(tmp_path)
    (tmp_path / "probe.py").write_text(CAPS_PROBE)
    nodes = " ".join(str(dev / f"nvidia-cap{m}") for pair in CAPS_MINORS.values() for m in pair)
    g = sim(make_gflow, fixture=mig_fixture(),
            env={**CONSTRAIN, "GFLOW_NVIDIA_CAPS_PROC": str(proc),
                 "GFLOW_NVIDIA_CAPS_DIR": str(dev)})
    j = g.submit("--mig", "1g.18gb", f"python3 {tmp_path}/probe.py {nodes}; sleep 60")
    job = g.wait_state(j, "R")
    mine = job["mig_devices"]
    others = [u for u in CAPS_MINORS if u != mine]
    argv = wait_for(lambda: shim_argv(j), "the shim's arguments", timeout=5)
    denied = argv[argv.index("--deny-devices") + 1].split(",")
    assert {f"{CAPS_MAJOR}:{m}" for u in others for m in CAPS_MINORS[u]} <= set(denied), denied
    assert not {f"{CAPS_MAJOR}:{m}" for m in CAPS_MINORS[mine]} & set(denied), denied
    assert "1" in denied and "0" not in denied, denied  # whole GPUs by minor, as before
    if os.geteuid() != 0 or not devices_v1_mounted():
        g.run("gcancel", j)
        pytest.skip("the cgroup v1 devices controller is needed to see the denial work")

    def probed():
        s = {k: v for k, _, v in (l.partition("=") for l in g.log(j).splitlines())
             if k.startswith("nvidia-cap")}
        return s if len(s) == 6 else None
    seen = wait_for(probed, "the probe's six lines")
    for m in CAPS_MINORS[mine]:
        assert seen[f"nvidia-cap{m}"] in ("ENXIO", "ENODEV"), seen
    for u in others:
        for m in CAPS_MINORS[u]:
            assert seen[f"nvidia-cap{m}"] == "EPERM", seen
    g.run("gcancel", j)


def test_mig_job_without_readable_caps_fails_the_launch(make_gflow):
    """Isolation was asked for and cannot be had: the job fails with why, as for a GPU
    whose /dev/nvidia minor is unknown."""
    g = sim(make_gflow, fixture=mig_fixture(),
            env={**CONSTRAIN, "GFLOW_NVIDIA_CAPS_PROC": "/nonexistent/capabilities"})
    j = g.wait_state(g.submit("--mig", "3g.71gb", "true"))
    assert j["state"] != "CD", j
    assert "cannot constrain the job to its MIG instance" in json.dumps(j), j
    assert "/nonexistent/capabilities/gpu0/mig/gi" in json.dumps(j), j
