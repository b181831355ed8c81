"""Issue 31 item 5 against the real throwaway cluster (make check-slurm): gflowd status,
ginfo, GET /v1/backend, /v1/status and /v1/gpus show the backend, the partition, its node
and their GPUs from `scontrol show node`, refreshed at every poll, and NVML is not tried.
tests/e2e/test_slurm_backend_status.py checks the same with fake Slurm commands (and the
dashboard)."""
import json

from cluster import GPUS, PARTITION
from conftest import e2e

JOB_TIMEOUT = 60


def backend(g):
    r = g.api("GET", "/v1/backend")
    assert r.status == 200, r.text
    return r.json()


def read_nodes(g):
    e2e.wait_for(lambda: backend(g)["read_at"] is not None, "the nodes read from scontrol",
                 timeout=20)
    return backend(g)


def test_backend_shows_the_partitions_node_and_its_gpus(make_slurm_gflow, cluster):
    g = make_slurm_gflow(env={"GFLOW_BACKEND__PARTITION": PARTITION})
    b = read_nodes(g)
    assert b["kind"] == "slurm" and b["partition"] == PARTITION and b["error"] is None
    assert [n["name"] for n in b["nodes"]] == [cluster.node]
    node = b["nodes"][0]
    assert node["gpus"] == GPUS and PARTITION in node["partitions"]
    assert node["gres"].startswith("gpu")
    assert b["gpus"]["total"] == GPUS
    assert g.api("GET", "/v1/status").json()["backend"]["nodes"][0]["name"] == cluster.node
    assert g.api("GET", "/v1/gpus").json()["backend"]["kind"] == "slurm"


def test_gpus_in_use_follow_a_running_job(sgflow, cluster):
    read_nodes(sgflow)
    jid = sgflow.submit("--gpus", "2", "sleep", "60")
    e2e.wait_for(lambda: sgflow.job(jid)["state"] == "R" and not sgflow.job(jid)["reason"],
                 "the job started in Slurm", timeout=JOB_TIMEOUT)
    try:
        e2e.wait_for(lambda: backend(sgflow)["gpus"]["used"] == 2, "Slurm's GresUsed at a poll",
                     timeout=JOB_TIMEOUT)
    except AssertionError:
        raise AssertionError(f"{backend(sgflow)}\n{cluster.run('scontrol', 'show', 'node', '-o')}")
    sgflow.run("gcancel", str(jid), check=True)
    e2e.wait_for(lambda: backend(sgflow)["gpus"]["used"] == 0, "the GPUs free again",
                 timeout=JOB_TIMEOUT)


def test_status_and_ginfo_name_the_backend_without_nvml(sgflow, cluster):
    read_nodes(sgflow)
    out = sgflow.gflowd("status").stdout
    assert "Backend: slurm, partition (Slurm's default)" in out
    assert f"Slurm nodes: 1, GPUs 0 in use of {GPUS}" in out
    assert f"  {cluster.node} " in out
    assert "NVML: not used" in out and "retrying" not in out and "tries" not in out
    st = sgflow.api("GET", "/v1/status").json()
    assert st["gpus"]["nvml"].startswith("not used")
    assert "NVML" not in sgflow.daemon_log()
    cp = sgflow.run("ginfo")
    assert cp.returncode == 0 and f"  {cluster.node} " in cp.stdout, cp.stdout
    assert "no GPUs" not in cp.stdout
    js = json.loads(sgflow.run("ginfo", "-o", "json").stdout)
    assert js["backend"]["nodes"][0]["gpus"] == GPUS
