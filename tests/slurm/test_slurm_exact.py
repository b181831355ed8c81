"""Issue 31 on the slurm backend: a job's start and exit code only as Slurm says them,
time limits as Slurm enforces them (whole minutes), hold/release/update/cancel answered
once Slurm has answered, submissions in order, and Slurm's messages passed on once."""
import json
import os
import shutil

from conftest import e2e

JOB_TIMEOUT = 60


def _fill_node(g):
    """A job that takes all the node's GPUs, running in Slurm: the next GPU job pends."""
    big = g.submit("--gpus", "4", "sleep 300")
    e2e.wait_for(lambda: g.job(big)["state"] == "R", "the filler to run in Slurm",
                 timeout=JOB_TIMEOUT)
    return big


def _pending(g):
    small = g.submit("--gpus", "1", "echo small ran")
    e2e.wait_for(lambda: g.job(small)["slurm_id"], "its Slurm id", timeout=JOB_TIMEOUT)
    e2e.wait_for(lambda: g.job(small)["reason"] in ("Slurm: Resources", "Slurm: Priority"),
                 "Slurm's reason", timeout=JOB_TIMEOUT)
    return small


def _show(g, jid):
    return e2e.parse_show(g.run("gjob", "show", jid, check=True).stdout)[0]


def test_pending_job_has_no_start_and_cancelled_one_no_exit_code(make_slurm_gflow, cluster):
    g = make_slurm_gflow()
    big = _fill_node(g)
    assert g.job(big)["start_time"], g.job(big)
    small = _pending(g)
    job = g.job(small)
    assert job["state"] == "PD" and job["start_time"] is None, job
    out = g.run("gqueue", "-a", "-f", "JOBID,ST,TIME", check=True).stdout
    row = next(l.split() for l in out.splitlines()[1:] if l.split()[0] == str(small))
    assert row[1] == "PD" and row[2] == "-", out
    show = _show(g, small)
    assert show.get("StartTime", "-") in ("-", "None", "N/A") and "Started" not in show, show
    cp = g.run("gcancel", small, check=True)
    assert "removed from Slurm's queue" in cp.stdout, cp.stdout
    assert "SIGTERM" not in cp.stdout, cp.stdout
    job = g.wait_state(small, timeout=JOB_TIMEOUT)
    assert job["state"] == "CA", job
    assert job["start_time"] is None and job["exit_code"] is None, job
    g.run("gcancel", big, check=True)


def test_time_limit_rounded_up_to_whole_minutes(sgflow, cluster):
    g = sgflow
    cp = g.run("gbatch", "--time", "0:00:10", "sleep 300", check=True)
    assert "rounded up to 0:01:00" in cp.stderr and "minutes" in cp.stderr, cp.stderr
    jid = int(cp.stdout.split()[3])
    assert g.job(jid)["time_limit"] == 60, g.job(jid)
    assert "rounded up to 0:01:00" in g.job(jid)["slurm_note"], g.job(jid)
    show = _show(g, jid)
    assert "rounded up to 0:01:00" in show.get("SlurmNote", ""), show
    e2e.wait_for(lambda: g.job(jid)["slurm_id"], "its Slurm id", timeout=JOB_TIMEOUT)
    assert cluster.job_field(g.job(jid)["slurm_id"], "TimeLimit") == "00:01:00"
    # The API reply carries the warning.
    r = g.api("POST", "/v1/jobs", {"command": "true", "time_limit": 90,
                                   "workdir": str(g.work)})
    assert r.status == 201, r
    assert any("rounded up to 0:02:00" in w for w in r.json().get("warnings", [])), r
    # Whole minutes: no warning.
    cp = g.run("gbatch", "--time", "2", "true", check=True)
    assert "rounded" not in cp.stderr, cp.stderr
    g.run("gcancel", jid, check=True)


def _slow_slurm_commands(tmp_path, cluster):
    """A PATH whose scontrol and scancel take a second before they do anything: an answer
    given before they have returned shows as Slurm not having acted yet."""
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    for name in ("scontrol", "scancel"):
        real = shutil.which(name, path=cluster.env["PATH"])
        (slow / name).write_text(f'#!/bin/sh\nsleep 1\nexec {real} "$@"\n')
        (slow / name).chmod(0o755)
    return f"{slow}:{cluster.env['PATH']}"


def test_hold_update_cancel_answer_after_slurm(make_slurm_gflow, cluster, tmp_path):
    g = make_slurm_gflow(env={"PATH": _slow_slurm_commands(tmp_path, cluster)})
    big = _fill_node(g)
    small = _pending(g)
    sid = g.job(small)["slurm_id"]
    # When gjob hold returns, Slurm holds it already (no waiting for a poll), however long
    # scontrol takes.
    g.run("gjob", "hold", small, check=True)
    assert cluster.job_field(sid, "Reason") == "JobHeldUser"
    g.run("gjob", "release", small, check=True)
    assert cluster.job_field(sid, "Reason") != "JobHeldUser"
    g.run("gjob", "update", small, "--name", "renamed", check=True)
    assert cluster.job_field(sid, "JobName") == "renamed"
    assert g.job(small)["name"] == "renamed"
    g.run("gcancel", small, check=True)
    assert cluster.job_field(sid, "JobState") == "CANCELLED"
    g.run("gcancel", big, check=True)


def test_slurm_refusal_is_the_commands_error(make_slurm_gflow, cluster, tmp_path):
    # An scontrol that refuses holds (as Slurm does for another user's job): gjob hold
    # fails with its text, at once, not a later log line.
    real = shutil.which("scontrol", path=cluster.env["PATH"])
    (tmp_path / "scontrol").write_text(
        "#!/bin/sh\nif [ \"$1\" = uhold ]; then "
        "echo 'scontrol: error: Access/permission denied for job' >&2; exit 1; fi\n"
        f"exec {real} \"$@\"\n")
    os.chmod(tmp_path / "scontrol", 0o755)
    g = make_slurm_gflow(env={"PATH": f"{tmp_path}:{cluster.env['PATH']}"})
    big = _fill_node(g)
    small = _pending(g)
    cp = g.run("gjob", "hold", small)
    assert cp.returncode != 0, cp
    assert "Access/permission denied" in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    g.run("gcancel", big, check=True)
    g.run("gcancel", small, check=True)


def test_array_tasks_reach_slurm_in_order(sgflow, cluster):
    g = sgflow
    cp = g.run("gbatch", "--parsable", "--array", "1-12", "true", check=True)
    first = int(cp.stdout.split()[0])
    ids = list(range(first, first + 12))
    for jid in ids:
        e2e.wait_for(lambda: g.job(jid)["slurm_id"], "its Slurm id", timeout=JOB_TIMEOUT)
    sids = [g.job(jid)["slurm_id"] for jid in ids]
    assert sids == sorted(sids), sids


def test_sbatch_error_said_once(make_slurm_gflow):
    g = make_slurm_gflow(env={"GFLOW_BACKEND__PARTITION": "nosuchpartition"})
    jid = g.submit("true")
    job = g.wait_state(jid, timeout=JOB_TIMEOUT)
    assert job["state"] == "F", job
    why = json.dumps(job)
    assert "sbatch: error" in why and "sbatch: sbatch:" not in why, job
