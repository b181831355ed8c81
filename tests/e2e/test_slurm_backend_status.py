"""Issue 31 item 5, without a cluster: a daemon in slurm mode whose `scontrol`, `sbatch`,
`scancel` and `sacct` are fakes on PATH (a shell script answering as Slurm 22.05 does).
It shows the backend, the partition's nodes and their GPUs in gflowd status, ginfo,
GET /v1/backend, /v1/status, /v1/gpus; NVML is not opened. tests/slurm/test_slurm_status.py
does the same against a real cluster."""
import json
import os
import shutil
import stat
import tempfile

import pytest

from conftest import wait_for
from test_web import Browser, Web

NODES = (
    "NodeName=gpu1 Arch=x86_64 CoresPerSocket=8 CPUAlloc=2 CPUTot=16 CPULoad=0.10 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:a100:4 NodeAddr=gpu1 "
    "NodeHostName=gpu1 RealMemory=64000 AllocMem=0 FreeMem=60000 Sockets=2 Boards=1 "
    "State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
    "Partitions=gpu,all BootTime=None SlurmdStartTime=None "
    "CfgTRES=cpu=16,mem=64000M,billing=16,gres/gpu=4 AllocTRES=cpu=2,gres/gpu=1 "
    "GresUsed=gpu:a100:1(IDX:0)\n"
    "NodeName=gpu2 Arch=x86_64 CPUAlloc=0 CPUTot=8 Gres=gpu:2 RealMemory=32000 "
    "State=DRAIN ThreadsPerCore=1 Partitions=gpu GresUsed=gpu:0 Reason=bad_fan\n"
    "NodeName=cpu1 Arch=x86_64 CPUAlloc=0 CPUTot=32 Gres=(null) RealMemory=128000 "
    "State=IDLE Partitions=cpu,all\n"
)


def fake_slurm(root):
    """A bin directory of fake Slurm commands; `scontrol show node` prints NODES (from a
    file the test may rewrite), `scontrol show job` knows no job."""
    bindir = root / "fake-slurm"
    bindir.mkdir()
    (root / "nodes.txt").write_text(NODES)
    script = f"""#!/bin/sh
case "$*" in
*"show node"*)  # Slurm 22.05 tells GresUsed only with --details
  case "$*" in *--details*) cat '{root}/nodes.txt' ;; *) sed 's/ GresUsed=[^ ]*//' '{root}/nodes.txt' ;; esac ;;
*"show job"*) echo "No jobs in the system" ;;
*) ;;
esac
exit 0
"""
    for name in ("scontrol", "scancel", "sacct", "sbatch"):
        p = bindir / name
        p.write_text(script if name == "scontrol" else "#!/bin/sh\nexit 1\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bindir


def slurm_gflow(make_gflow, tmp_path, partition="gpu"):
    bindir = fake_slurm(tmp_path)
    env = {
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "GFLOW_BACKEND__KIND": "slurm",
        "GFLOW_BACKEND__POLL_SECS": "1",
    }
    if partition:
        env["GFLOW_BACKEND__PARTITION"] = partition
    return make_gflow(env=env)


def read_backend(g):
    r = g.api("GET", "/v1/backend")
    assert r.status == 200, r.text
    return r.json()


def wait_nodes(g):
    wait_for(lambda: read_backend(g)["read_at"] is not None, "the nodes read from scontrol")
    return read_backend(g)


def test_backend_endpoint_lists_the_partitions_nodes(make_gflow, tmp_path):
    g = slurm_gflow(make_gflow, tmp_path)
    b = wait_nodes(g)
    assert b["kind"] == "slurm" and b["partition"] == "gpu" and b["error"] is None
    names = [n["name"] for n in b["nodes"]]
    assert names == ["gpu1", "gpu2"]  # cpu1 is not in partition gpu
    gpu1, gpu2 = b["nodes"]
    assert (gpu1["gpus"], gpu1["gpus_used"], gpu1["state"]) == (4, 1, "MIXED")
    assert gpu1["gres"] == "gpu:a100:4" and gpu1["partitions"] == ["gpu", "all"]
    assert (gpu1["cpus"], gpu1["cpus_alloc"], gpu1["memory_mb"]) == (16, 2, 64000)
    assert (gpu2["gpus"], gpu2["gpus_used"], gpu2["reason"]) == (2, 0, "bad_fan")
    assert b["gpus"] == {"total": 6, "used": 1}
    # the same object in /v1/status and /v1/gpus
    assert g.api("GET", "/v1/status").json()["backend"]["nodes"] == b["nodes"]
    assert g.api("GET", "/v1/gpus").json()["backend"]["kind"] == "slurm"


def test_nodes_refreshed_at_every_poll(make_gflow, tmp_path):
    g = slurm_gflow(make_gflow, tmp_path, partition="")
    b = wait_nodes(g)
    assert b["partition"] is None and len(b["nodes"]) == 3  # no partition: every node
    (tmp_path / "nodes.txt").write_text(NODES.replace("GresUsed=gpu:0", "GresUsed=gpu:2"))
    wait_for(lambda: read_backend(g)["gpus"]["used"] == 3, "the next poll's GPU use")


def test_status_names_the_backend_and_no_nvml_retries(make_gflow, tmp_path):
    g = slurm_gflow(make_gflow, tmp_path)
    wait_nodes(g)
    out = g.gflowd("status").stdout
    assert "Backend: slurm, partition gpu" in out
    assert "Slurm nodes: 2, GPUs 1 in use of 6" in out
    assert "gpu1 MIXED, GPUs 1/4 in use (gpu:a100:4)" in out
    assert "reason: bad_fan" in out
    assert "NVML: not used" in out
    assert "retrying" not in out and "tries" not in out
    st = g.api("GET", "/v1/status").json()
    assert st["gpus"]["nvml"].startswith("not used") and st["gpus"]["error"] is None
    log = g.daemon_log()
    assert "NVML" not in log and "trying again" not in log, log


def test_local_status_names_the_local_backend(gflow):
    out = gflow.gflowd("status").stdout
    assert "Backend: local" in out
    assert gflow.api("GET", "/v1/backend").json() == {"kind": "local"}


def test_ginfo_shows_the_nodes(make_gflow, tmp_path):
    g = slurm_gflow(make_gflow, tmp_path)
    wait_nodes(g)
    cp = g.run("ginfo")
    assert cp.returncode == 0, cp.stderr
    assert "Backend: slurm, partition gpu" in cp.stdout
    assert "gpu2 DRAIN, GPUs 0/2 in use (gpu:2)" in cp.stdout
    assert "no GPUs" not in cp.stdout and "simulate" not in cp.stdout
    js = json.loads(g.run("ginfo", "-o", "json").stdout)
    assert [n["name"] for n in js["backend"]["nodes"]] == ["gpu1", "gpu2"]


def test_scontrol_failure_is_said(make_gflow, tmp_path):
    g = slurm_gflow(make_gflow, tmp_path)
    wait_nodes(g)
    (tmp_path / "fake-slurm" / "scontrol").write_text(
        "#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\n"
        "exit 1\n")
    wait_for(lambda: read_backend(g)["error"] is not None, "the failed read")
    assert "Unable to contact slurm controller" in read_backend(g)["error"]
    assert "last read failed" in g.gflowd("status").stdout


# ---------------------------------------------------------------- the dashboard

def fake_slurm_jobs(root):
    """Fakes that also run one job: sbatch answers Slurm id 101; scontrol show job tells
    it PENDING with the reason in job.txt; scontrol uhold/release change that reason."""
    bindir = root / "fake-slurm"
    (root / "reason.txt").write_text("Priority")
    (bindir / "sbatch").write_text(f"#!/bin/sh\ntouch '{root}/submitted'\necho 101\n")
    (bindir / "scontrol").write_text(f"""#!/bin/sh
case "$*" in
*"show node"*)  # Slurm 22.05 tells GresUsed only with --details
  case "$*" in *--details*) cat '{root}/nodes.txt' ;; *) sed 's/ GresUsed=[^ ]*//' '{root}/nodes.txt' ;; esac ;;
*"show job"*)
  if [ -e '{root}/submitted' ]; then
    echo "JobId=101 JobName=web UserId=root(0) Reason=$(cat '{root}/reason.txt') \\
JobState=PENDING ExitCode=0:0"
  else echo "No jobs in the system"; fi ;;
uhold*) echo JobHeldUser > '{root}/reason.txt' ;;
release*) echo Priority > '{root}/reason.txt' ;;
esac
exit 0
""")


def test_dashboard_shows_nodes_slurm_ids_and_releases_a_slurm_hold(make_gflow, tmp_path):
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/install-deps.sh)")
    g = slurm_gflow(make_gflow, tmp_path)
    fake_slurm_jobs(tmp_path)
    wait_nodes(g)
    job = g.submit("--name", "web", "true")
    wait_for(lambda: g.job(job).get("slurm_id") == 101, "the job submitted to (fake) Slurm")
    w = Web(g)
    profile = tempfile.mkdtemp(prefix="gf-chromium-")
    b = Browser(profile)
    try:
        b.go(w.url)
        b.wait_css('article.gpu[data-node="gpu1"]', "the node cards")
        assert len(b.find_all("article.gpu[data-node]")) == 2
        head = b.js("return document.querySelector('main p.muted').textContent")
        assert "Slurm partition gpu" in head and "GPUs 1 / 6 in use" in head, head
        b.js("location.hash = '#/queue'")
        b.wait_css(f'tr[data-job="{job}"] td[data-field="slurm_id"]', "the queue's Slurm id")
        cell = b.js(f"return document.querySelector('tr[data-job=\"{job}\"] "
                    "td[data-field=\"slurm_id\"]').textContent")
        assert cell == "101"
        b.js(f"location.hash = '#/job/{job}'")
        b.wait_css("#job-hold", "Hold for a job Slurm has not started")
        assert b.find_all("#job-release") == []
        assert g.run("gjob", "hold", str(job)).returncode == 0
        wait_for(lambda: "JobHeldUser" in (g.job(job).get("reason") or ""), "Slurm's hold")
        b.js(f"location.hash = '#/queue'; location.hash = '#/job/{job}'")
        release = b.wait_css("#job-release", "Release for a job held in Slurm", timeout=15)[0]
        assert b.find_all("#job-hold") == []
        b.click(release)
        wait_for(lambda: b.js("return document.getElementById('confirm').open"), "the confirm")
        b.click(b.find_all("#confirm-yes")[0])
        wait_for(lambda: (tmp_path / "reason.txt").read_text().strip() == "Priority",
                 "scontrol release run by the Release button")
    finally:
        b.quit()
        shutil.rmtree(profile, ignore_errors=True)
        w.stop()


def test_gflow_status_shows_the_nodes(make_gflow, tmp_path):
    g = slurm_gflow(make_gflow, tmp_path)
    wait_nodes(g)
    cp = g.run("gflow", "status")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.startswith("Backend: slurm, partition gpu\n"), cp.stdout
    assert "gpu1 MIXED, GPUs 1/4 in use" in cp.stdout
    data = json.loads(g.run("gflow", "status", "-o", "json").stdout)
    assert data["backend"]["gpus"] == {"total": 6, "used": 1}


def test_mcp_tools_show_the_backend(make_gflow, tmp_path):
    from test_mcp import Mcp
    g = slurm_gflow(make_gflow, tmp_path)
    wait_nodes(g)
    m = Mcp(g)
    try:
        m.initialize()
        info = m.ok("get_info")
        assert [n["name"] for n in info["backend"]["nodes"]] == ["gpu1", "gpu2"]
        assert m.ok("list_gpus")["backend"]["gpus"] == {"total": 6, "used": 1}
        health = m.ok("get_health")
        assert health["ok"] is True and health["backend"]["kind"] == "slurm"
    finally:
        m.close()
