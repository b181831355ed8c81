"""End-to-end tests of MIG instances as schedulable devices (issue 9) against the NVML
simulator: a fixture with one MIG GPU split into 2x 1g.18gb + 1x 3g.71gb, one MIG GPU
without instances and one plain GPU. Jobs ask for instances with --mig PROFILE[:N] (or
--gres mig:PROFILE:N) and see exactly theirs in CUDA_VISIBLE_DEVICES; --gpus N jobs never
land on a MIG GPU; the assignment survives a daemon restart. Everything is awaited by
polling with a deadline.
"""
import json
import os
import re

from conftest import parse_show, parse_table, read_pid_file, wait_for, write_json_atomic
from test_gpus import SHOW_GPU_ENV, fixture_of, gpus_json, log_vars, sim, sim_gpu, wait_reason

MIG_A = "MIG-11111111-aaaa-5000-8000-000000000001"
MIG_B = "MIG-11111111-aaaa-5000-8000-000000000002"
MIG_C = "MIG-11111111-aaaa-5000-8000-000000000003"


def mig_fixture():
    mig = sim_gpu(0, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559, mig_mode=1,
                  mig_instances=[
                      {"profile": "1g.18gb", "uuid": MIG_A, "memory_total_mib": 16384,
                       "gi_id": 9, "ci_id": 0, "processes": []},
                      {"profile": "1g.18gb", "uuid": MIG_B, "memory_total_mib": 16384,
                       "gi_id": 10, "ci_id": 0, "processes": []},
                      {"profile": "3g.71gb", "uuid": MIG_C, "memory_total_mib": 71000,
                       "gi_id": 2, "ci_id": 0, "processes": []},
                  ])
    empty = sim_gpu(1, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559, mig_mode=1,
                    mig_instances=[])
    plain = sim_gpu(2)
    return fixture_of([mig, empty, plain])


def mig_sim(make_gflow, env=None):
    return sim(make_gflow, fixture=mig_fixture(), env=env)


def mig_of(job):
    return [u for u in (job.get("mig_devices") or "").split(",") if u]


def test_ginfo_lists_the_instances_under_their_gpu(make_gflow):
    g = mig_sim(make_gflow)
    gpus = gpus_json(g)["gpus"]
    assert [x["mig_enabled"] for x in gpus] == [True, True, False], gpus
    assert gpus[0]["state"] == "mig", gpus[0]
    assert gpus[1]["state"] == "unavailable" and "no MIG instances" in gpus[1]["reason"], gpus[1]
    assert gpus[2]["state"] == "idle" and gpus[2]["mig_instances"] == [], gpus[2]
    inst = gpus[0]["mig_instances"]
    assert [(m["profile"], m["uuid"], m["memory_total_mib"], m["state"]) for m in inst] == [
        ("1g.18gb", MIG_A, 16384, "idle"), ("1g.18gb", MIG_B, 16384, "idle"),
        ("3g.71gb", MIG_C, 71000, "idle")], inst
    assert inst[0]["name"] == "NVIDIA H100 80GB HBM3 MIG 1g.18gb" and inst[0]["gi_id"] == 9
    out = g.run("ginfo", check=True).stdout
    tail = out.split("MIG instances (", 1)[1].split("\n", 1)[1]
    # Columns are apart by two spaces or more (MEMORY reads "0/16384 MiB").
    lines = [re.split(r"\s{2,}", l.strip()) for l in tail.splitlines() if l.strip()]
    rows = [dict(zip(lines[0], l)) for l in lines[1:]]
    assert [(r["GPU"], r["PROFILE"], r["UUID"], r["STATE"]) for r in rows] == [
        ("0", "1g.18gb", MIG_A, "idle"), ("0", "1g.18gb", MIG_B, "idle"),
        ("0", "3g.71gb", MIG_C, "idle"), ("1", "-", "-", "unavailable")], out
    assert "0/16384 MiB" in tail, out


def test_mig_job_sees_exactly_its_instance(make_gflow):
    g = mig_sim(make_gflow)
    j = g.submit("--mig", "3g.71gb", SHOW_GPU_ENV)
    job = g.wait_state(j)
    assert job["state"] == "CD", job
    assert mig_of(job) == [MIG_C] and job["gpu_ids"] is None, job
    env = log_vars(g, j)
    assert env["CUDA_VISIBLE_DEVICES"] == MIG_C, env
    assert env["NVIDIA_VISIBLE_DEVICES"] == MIG_C, env
    assert env["GFLOW_GPU_UUIDS"] == MIG_C, env


def test_mig_uuid_even_with_index_ids_and_gres_form(make_gflow):
    g = mig_sim(make_gflow, env={"GFLOW_DAEMON__GPU_ID_FORMAT": "index"})
    j = g.submit("--gres", "mig:1g.18gb:1", SHOW_GPU_ENV)
    job = g.wait_state(j)
    assert job["state"] == "CD" and job["mig_profile"] == "1g.18gb" and job["mig_count"] == 1
    env = log_vars(g, j)
    assert env["CUDA_VISIBLE_DEVICES"] in (MIG_A, MIG_B), env
    assert env["CUDA_VISIBLE_DEVICES"] == mig_of(job)[0], env


def test_two_jobs_get_different_instances_a_third_waits(make_gflow):
    g = mig_sim(make_gflow)
    a = g.wait_state(g.submit("--mig", "1g.18gb", "sleep", 60), "R")
    b = g.wait_state(g.submit("--mig", "1g.18gb:1", "sleep", 60), "R")
    assert sorted(mig_of(a) + mig_of(b)) == sorted([MIG_A, MIG_B]), (a, b)
    third = g.submit("--mig", "1g.18gb", "true")
    wait_reason(g, third, "Resources")
    rows = {int(r["JOBID"]): r for r in parse_table(g.run("gqueue", check=True).stdout)}
    assert rows[a["id"]]["NODES"] == "1g.18gb:1", rows
    assert rows[a["id"]]["NODELIST(REASON)"] == mig_of(a)[0], rows
    assert rows[third]["NODELIST(REASON)"] == "(Resources)", rows
    inst = {m["uuid"]: m for m in gpus_json(g)["gpus"][0]["mig_instances"]}
    assert inst[mig_of(a)[0]]["state"] == "busy" and inst[mig_of(a)[0]]["job"] == a["id"]
    assert inst[MIG_C]["state"] == "idle"
    show = parse_show(g.run("gjob", "show", a["id"], check=True).stdout)[0]
    assert show["MIG"] == "1g.18gb:1" and show["MIG 0"].startswith(mig_of(a)[0]), show
    # One ends: the third gets the instance it freed.
    assert g.run("gcancel", a["id"]).returncode == 0
    done = g.wait_state(third)
    assert done["state"] == "CD" and mig_of(done) == mig_of(a), done


def test_gpus_jobs_never_land_on_a_mig_gpu(make_gflow):
    g = mig_sim(make_gflow)
    one = g.wait_state(g.submit("--gpus", 1, "sleep", 60), "R")
    assert one["gpu_ids"] == "2", one
    other = g.submit("--gpus", 1, "true")
    wait_reason(g, other, "Resources")
    cp = g.run("gbatch", "--gpus", 2, "true")
    assert cp.returncode != 0 and "MIG mode" in cp.stderr, cp
    cp = g.run("gbatch", "--mig", "1g.18gb", "--gpus", 1, "true")
    assert cp.returncode != 0 and "cannot be combined" in cp.stderr, cp
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_unknown_profile_refused_at_submit(make_gflow):
    g = mig_sim(make_gflow)
    cp = g.run("gbatch", "--mig", "7g.80gb", "true")
    assert cp.returncode != 0, cp
    assert "7g.80gb" in cp.stderr and "1g.18gb, 3g.71gb" in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    cp = g.run("gbatch", "--mig", "1g.18gb:3", "true")
    assert cp.returncode != 0 and "sees only one MIG instance" in cp.stderr, cp
    cp = g.run("gbatch", "--mig", "big", "true")
    assert cp.returncode == 2 and "MIG profile" in cp.stderr, cp
    assert g.jobs() == []


def test_outside_process_on_an_instance_blocks_it_the_jobs_own_do_not(make_gflow):
    g = mig_sim(make_gflow)
    fx = mig_fixture()
    # An outside process (this test's own pid: alive, not under any job) on MIG_C.
    fx["gpus"][0]["mig_instances"][2]["processes"] = [{"pid": os.getpid(),
                                                       "used_memory_mib": 100}]
    write_json_atomic(g.fixture_path, fx)
    wait_for(lambda: gpus_json(g)["gpus"][0]["mig_instances"][2]["state"] == "unmanaged",
             "the instance to be unmanaged", timeout=5)
    j = g.submit("--mig", "3g.71gb", "true")
    wait_reason(g, j, "Unmanaged")
    fx["gpus"][0]["mig_instances"][2]["processes"] = []
    write_json_atomic(g.fixture_path, fx)
    assert g.wait_state(j)["state"] == "CD"
    # A job's own process on its instance counts as the job's, with its memory.
    k = g.submit("--mig", "3g.71gb", "sleep 60 & echo $! > child.pid; wait")
    g.wait_state(k, "R")
    child = wait_for(lambda: read_pid_file(g.work / "child.pid"), "the job's child pid")
    fx["gpus"][0]["mig_instances"][2]["processes"] = [{"pid": child, "used_memory_mib": 700}]
    # Real drivers list an instance's processes on its GPU too.
    fx["gpus"][0]["processes"] = [{"pid": child, "used_memory_mib": 700}]
    write_json_atomic(g.fixture_path, fx)

    def seen():
        # Both lists: the simulator reads its fixture once per NVML call, so one poll can
        # straddle the write above.
        gpu = gpus_json(g)["gpus"][0]
        m = gpu["mig_instances"][2]
        return m if m["processes"] and gpu["processes"] else None
    m = wait_for(seen, "the job's process on its instance", timeout=5)
    assert m["processes"][0]["job"] == k and m["state"] == "busy", m
    assert m["memory_used_mib"] == 700, m
    assert g.job(k)["mig_detail"][0]["memory_used_mib"] == 700
    parent = gpus_json(g)["gpus"][0]
    assert parent["jobs"] == [k] and parent["state"] == "mig", parent
    assert [p["job"] for p in parent["processes"]] == [k], parent
    assert "foreign" not in parent["processes"][0], parent
    assert g.job(k)["foreign_gpus"] == []
    assert "not its GPU" not in g.run("ginfo", "-v", check=True).stdout


def test_restart_keeps_the_assignment(make_gflow):
    g = mig_sim(make_gflow)
    a = g.wait_state(g.submit("--mig", "1g.18gb", "sleep", 60), "R")
    assert g.down().returncode == 0
    g.up("--simulate-gpus", g.fixture_path)
    again = g.job(a["id"])
    assert again["state"] == "R" and mig_of(again) == mig_of(a), again
    # The re-adopted job still holds its instance: the next job gets the other one,
    # and one more waits.
    b = g.wait_state(g.submit("--mig", "1g.18gb", "sleep", 60), "R")
    assert mig_of(b) and mig_of(b) != mig_of(a), (a, b)
    c = g.submit("--mig", "1g.18gb", "true")
    wait_reason(g, c, "Resources")


def test_update_switches_between_mig_and_gpus(make_gflow):
    g = mig_sim(make_gflow)
    j = g.submit("--hold", "--mig", "1g.18gb", "true")
    cp = g.run("gjob", "update", j, "--gpus", 1)
    assert cp.returncode == 0, cp
    job = g.job(j)
    assert job["mig_profile"] is None and job["gpus"] == 1, job
    cp = g.run("gjob", "update", j, "--mig", "3g.71gb")
    assert cp.returncode == 0, cp
    job = g.job(j)
    assert job["mig_profile"] == "3g.71gb" and job["gpus"] == 0, job
    assert g.run("gjob", "release", j).returncode == 0
    done = g.wait_state(j)
    assert done["state"] == "CD" and mig_of(done) == [MIG_C], done
    assert json.loads(json.dumps(done))["mig_count"] == 1


def test_instances_usable_when_the_gpus_own_process_list_is_refused(make_gflow):
    """Without root a driver refuses a MIG GPU's own process list: the GPU is no use
    whole, but its instances that NVML reports are; one whose process list is refused
    too is unavailable, and a request only it could meet is refused at submit."""
    fx = mig_fixture()
    refused = {"nvmlDeviceGetComputeRunningProcesses": 4}  # NO_PERMISSION
    fx["gpus"][0]["fail"] = refused
    fx["gpus"][0]["mig_instances"][2]["fail"] = refused
    g = sim(make_gflow, fixture=fx)
    gpu = gpus_json(g)["gpus"][0]
    assert gpu["state"] == "mig", gpu
    states = [(m["uuid"], m["state"]) for m in gpu["mig_instances"]]
    assert states == [(MIG_A, "idle"), (MIG_B, "idle"), (MIG_C, "unavailable")], gpu
    assert "Insufficient Permissions" in gpu["mig_instances"][2]["reason"], gpu
    done = g.wait_state(g.submit("--mig", "1g.18gb", "true"))
    assert done["state"] == "CD" and mig_of(done) == [MIG_A], done
    cp = g.run("gbatch", "--mig", "3g.71gb", "true")
    assert cp.returncode != 0 and "usable" in cp.stderr and "Permissions" in cp.stderr, cp


def test_no_instance_is_given_while_an_nvml_read_hangs(make_gflow):
    """While a MIG GPU's read hangs neither it nor its instances can be seen (they are
    part of its read): a --mig job waits (GpusUnavailable) and starts once NVML answers
    again."""
    fx = mig_fixture()
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__NVML_TIMEOUT_SECS": "2"})
    fx["gpus"][0]["hang"] = {"nvmlDeviceGetMemoryInfo": 600}
    write_json_atomic(g.fixture_path, fx)

    def unseen():
        gpu = gpus_json(g)["gpus"][0]
        return gpu if gpu["state"] == "unavailable" else None
    gpu = wait_for(unseen, "the MIG GPU to be unavailable while the read hangs", timeout=15)
    assert {m["state"] for m in gpu["mig_instances"]} == {"unavailable"}, gpu
    assert all("no answer" in m["reason"] for m in gpu["mig_instances"]), gpu
    j = g.submit("--mig", "1g.18gb", "true")
    wait_reason(g, j, "GpusUnavailable")
    del fx["gpus"][0]["hang"]
    write_json_atomic(g.fixture_path, fx)
    done = g.wait_state(j, timeout=20)
    assert done["state"] == "CD" and mig_of(done) == [MIG_A], done


def test_gflowd_status_names_the_mig_gpus(make_gflow):
    g = mig_sim(make_gflow)
    st = g.api("GET", "/v1/status").json()
    assert st["gpus"]["mig"] == [{"index": 0, "profiles": {"1g.18gb": 2, "3g.71gb": 1}},
                                 {"index": 1, "profiles": {}}], st["gpus"]
    out = g.gflowd("status", check=True).stdout
    assert "GPU 0 MIG instances: 2 x 1g.18gb, 1 x 3g.71gb" in out, out
    assert "GPU 1 MIG instances: none" in out, out
