"""gflow's slurm backend against a real single-node Slurm cluster (make check-slurm).

Each test submits through gflow's own commands and checks what gflow reports and what
Slurm did (its job's state, comment tag and environment)."""
import time

import pytest

from conftest import e2e

TERMINAL = e2e.TERMINAL
JOB_TIMEOUT = 60  # a Slurm job takes a poll or two to be seen (poll_secs = 1)


def slurm_jobs(cluster, g):
    """{gflow id: [Slurm ids]} of the jobs of g's daemon that Slurm knows (by the comment
    tags "gflow:<daemon>:<id>"; the daemon's tag is found in its log)."""
    tag = next(l.split("comment tag ")[1].split(";")[0] for l in g.daemon_log().splitlines()
               if "backend slurm:" in l)
    r = cluster.run("scontrol", "show", "job", "--oneliner")
    out = {}
    for line in r.stdout.splitlines():
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        comment = fields.get("Comment", "")
        if comment.startswith(f"gflow:{tag}:"):
            out.setdefault(int(comment.split(":")[2]), []).append(int(fields["JobId"]))
    return out


def test_command_runs_on_slurm_and_its_log_is_readable(sgflow, cluster):
    jid = sgflow.submit("echo hello from $SLURM_JOB_ID as gflow $GFLOW_JOB_ID")
    job = sgflow.wait_state(jid, timeout=JOB_TIMEOUT)
    assert job["state"] == "CD", job
    sids = slurm_jobs(cluster, sgflow)[jid]
    assert len(sids) == 1
    assert cluster.job_field(sids[0], "JobState") == "COMPLETED"
    log = sgflow.run("gjob", "log", jid, check=True).stdout
    assert f"hello from {sids[0]} as gflow {jid}" in log


def test_what_slurm_cannot_be_told_is_refused_at_submit(sgflow, cluster):
    before = slurm_jobs(cluster, sgflow)
    cp = sgflow.run("gbatch", "--gpus", "1", "--gpu-memory", "20G", "true")
    assert cp.returncode != 0
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    assert "--gpu-memory" in cp.stderr and "--gpus" in cp.stderr, cp.stderr
    assert slurm_jobs(cluster, sgflow) == before
    assert sgflow.health_ok()  # and the daemon keeps serving


def test_exit_code_comes_back_as_failed(sgflow):
    jid = sgflow.submit("exit 3")
    job = sgflow.wait_state(jid, timeout=JOB_TIMEOUT)
    assert job["state"] == "F", job
    assert job["exit_code"] == 3, job


def test_script_with_gflow_directives(sgflow, cluster):
    script = sgflow.work / "job.sh"
    script.write_text("#!/bin/bash\n# GFLOW --name=directed\n# GFLOW --time=5\n"
                      "echo name=$SLURM_JOB_NAME\n")
    jid = sgflow.submit(str(script))
    job = sgflow.wait_state(jid, timeout=JOB_TIMEOUT)
    assert job["state"] == "CD", job
    assert job["name"] == "directed"
    assert "name=directed" in sgflow.log(jid)
    sid = slurm_jobs(cluster, sgflow)[jid][0]
    assert cluster.job_field(sid, "TimeLimit") == "00:05:00"


def test_two_gpu_job_gets_cuda_visible_devices_from_slurm(sgflow):
    jid = sgflow.submit("--gpus", "2", "echo cvd=$CUDA_VISIBLE_DEVICES")
    job = sgflow.wait_state(jid, timeout=JOB_TIMEOUT)
    assert job["state"] == "CD", job
    line = [l for l in sgflow.log(jid).splitlines() if l.startswith("cvd=")]
    assert line and len(line[0][len("cvd="):].split(",")) == 2, sgflow.log(jid)


def test_dependency_chain_failure_cancels_dependents(sgflow, cluster):
    a = sgflow.submit("sleep 6")
    b = sgflow.submit("--depends-on", str(a), "exit 1")
    c = sgflow.submit("--depends-on", str(b), "echo never")
    # Each is handed to Slurm as soon as its parent has a Slurm id, with --dependency on
    # it: b and c wait in Slurm's queue (PD, Slurm: Dependency) while a runs.
    e2e.wait_for(lambda: sgflow.job(c)["slurm_id"], "c in Slurm", timeout=JOB_TIMEOUT)
    sa, sb, sc = (sgflow.job(x)["slurm_id"] for x in (a, b, c))
    assert cluster.job_field(sb, "Dependency") == f"afterok:{sa}(unfulfilled)"
    assert cluster.job_field(sc, "Dependency") == f"afterok:{sb}(unfulfilled)"
    e2e.wait_for(lambda: sgflow.job(c)["reason"] == "Slurm: Dependency", "c's reason",
                 timeout=JOB_TIMEOUT)
    assert sgflow.job(c)["state"] == "PD"
    assert sgflow.wait_state(a, timeout=JOB_TIMEOUT)["state"] == "CD"
    assert sgflow.wait_state(b, timeout=JOB_TIMEOUT)["state"] == "F"
    # Slurm cancels c (--kill-on-invalid-dep=yes); gflow says why, as in local mode.
    jc = sgflow.wait_state(c, timeout=JOB_TIMEOUT)
    assert jc["state"] == "CA", jc
    assert jc["reason"] == f"DependencyFailed:{b}", jc
    assert cluster.job_field(sc, "JobState") == "CANCELLED"
    assert "never" not in sgflow.log(c)
    assert slurm_jobs(cluster, sgflow)[c] == [sc]


def test_begin_and_any_dependency_wait_in_slurm(sgflow, cluster):
    begin = int(time.time()) + 3600
    late = sgflow.submit("--begin", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(begin)),
                         "echo late")
    e2e.wait_for(lambda: sgflow.job(late)["reason"] == "Slurm: BeginTime", "Slurm's BeginTime",
                 timeout=JOB_TIMEOUT)
    sl = sgflow.job(late)["slurm_id"]
    assert sgflow.job(late)["state"] == "PD"
    start = cluster.job_field(sl, "StartTime")
    assert start == time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(begin)), start
    # --depends-on-any: one of the two suffices ("?" in Slurm).
    ok = sgflow.submit("sleep 5")
    e2e.wait_for(lambda: sgflow.job(ok)["slurm_id"], "ok in Slurm", timeout=JOB_TIMEOUT)
    either = sgflow.submit("--depends-on-any", f"{late},{ok}", "echo either ran")
    e2e.wait_for(lambda: sgflow.job(either)["slurm_id"], "either in Slurm", timeout=JOB_TIMEOUT)
    dep = cluster.job_field(sgflow.job(either)["slurm_id"], "Dependency")
    assert dep and "?" in dep and str(sl) in dep, dep
    job = sgflow.wait_state(either, timeout=JOB_TIMEOUT)
    assert job["state"] == "CD", job
    assert "either ran" in sgflow.log(either)
    sgflow.run("gcancel", late, check=True)
    assert sgflow.wait_state(late, timeout=JOB_TIMEOUT)["state"] == "CA"


def test_array_with_throttle_runs_at_most_two_at_once(sgflow):
    marks = sgflow.work / "marks"
    marks.mkdir()
    cmd = (f"touch {marks}/start.$GFLOW_ARRAY_TASK_ID.$(date +%s%N); sleep 2; "
           f"touch {marks}/end.$GFLOW_ARRAY_TASK_ID.$(date +%s%N)")
    cp = sgflow.run("gbatch", "--parsable", "--array", "1-4%2", cmd, check=True)
    ids = [int(x) for x in cp.stdout.split()]
    if len(ids) == 1:  # the first id only: the tasks follow it
        ids = list(range(ids[0], ids[0] + 4))
    for jid in ids:
        assert sgflow.wait_state(jid, timeout=JOB_TIMEOUT)["state"] == "CD"
    events = []
    for p in marks.iterdir():
        kind, task, ns = p.name.split(".")
        events.append((int(ns), 1 if kind == "start" else -1))
    running = peak = 0
    for _, delta in sorted(events):
        running += delta
        peak = max(peak, running)
    assert len(events) == 8
    assert peak <= 2, sorted(events)


def test_sweep_with_max_concurrent(sgflow, cluster):
    cp = sgflow.run("gbatch", "--parsable", "--param", "lr=0.1,0.01,0.001", "--max-concurrent",
                    "1", "--name-template", "lr{lr}", "echo lr={lr}", check=True)
    first = int(cp.stdout.split()[0])
    ids = list(range(first, first + 3))
    logs = set()
    for jid in ids:
        assert sgflow.wait_state(jid, timeout=JOB_TIMEOUT)["state"] == "CD"
        logs.add(sgflow.log(jid).strip())
        sid = slurm_jobs(cluster, sgflow)[jid][0]
        assert cluster.job_field(sid, "JobName") == sgflow.job(jid)["name"]
    assert logs == {"lr=0.1", "lr=0.01", "lr=0.001"}
    # --max-concurrent 1: each ran after the one before had ended.
    spans = sorted((cluster.job_field(s, "StartTime"), cluster.job_field(s, "EndTime"))
                   for jid in ids for s in slurm_jobs(cluster, sgflow)[jid])
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, spans


def test_cancel_reaches_slurm(sgflow, cluster):
    jid = sgflow.submit("sleep 300")
    e2e.wait_for(lambda: jid in slurm_jobs(cluster, sgflow), "the job in Slurm", timeout=JOB_TIMEOUT)
    sid = slurm_jobs(cluster, sgflow)[jid][0]
    e2e.wait_for(lambda: cluster.job_field(sid, "JobState") == "RUNNING", "it to run",
                 timeout=JOB_TIMEOUT)
    sgflow.run("gcancel", jid, check=True)
    job = sgflow.wait_state(jid, timeout=JOB_TIMEOUT)
    assert job["state"] == "CA", job
    e2e.wait_for(lambda: cluster.job_field(sid, "JobState") == "CANCELLED",
                 "Slurm to cancel it", timeout=JOB_TIMEOUT)


@pytest.mark.long
def test_time_limit_is_timeout(sgflow):
    jid = sgflow.submit("--time", "1", "sleep 300")  # minutes: Slurm's smallest useful unit
    job = sgflow.wait_state(jid, timeout=150)
    assert job["state"] == "TO", job


def test_daemon_sigkill_during_submissions_submits_each_job_once(make_slurm_gflow, cluster):
    g = make_slurm_gflow()
    # One request of 30 jobs; the daemon runs at most 8 sbatch at once, so the kill lands
    # while some are submitted, some in flight and some not yet begun.
    cp = g.run("gbatch", "--parsable", "--array", "1-30", "true", check=True)
    first = int(cp.stdout.split()[0])
    ids = list(range(first, first + 30))
    g.kill_daemon()
    g.up()
    for jid in ids:
        assert g.wait_state(jid, timeout=120)["state"] == "CD"
    known = slurm_jobs(cluster, g)
    for jid in ids:
        assert len(known.get(jid, [])) == 1, (jid, known.get(jid))
    assert "submitted after the restart" in g.daemon_log() or \
        "found in Slurm" in g.daemon_log(), g.daemon_log()[-3000:]


def _gqueue_row(g, jid, fields="JOBID,SLURMID,ST,REASON", states=None):
    """One job's row of `gqueue -f FIELDS` as a dict (REASON last: it may hold spaces)."""
    names = fields.split(",")
    out = g.run("gqueue", "-a", "-f", fields, *(["-s", states] if states else []),
                check=True).stdout
    for line in out.splitlines()[1:]:
        words = line.split(None, len(names) - 1)
        if words and words[0] == str(jid):
            return dict(zip(names, words))
    return None


def test_slurm_id_stored_pending_reason_hold_release_update(make_slurm_gflow, cluster):
    g = make_slurm_gflow()
    # All the node's GPUs taken: the next GPU job pends in Slurm (Resources).
    big = g.submit("--gpus", "4", "sleep 300")
    e2e.wait_for(lambda: g.job(big)["state"] == "R", "the first job to run in Slurm",
                 timeout=JOB_TIMEOUT)
    small = g.submit("--gpus", "1", "echo small ran")
    e2e.wait_for(lambda: g.job(small)["slurm_id"], "its Slurm id", timeout=JOB_TIMEOUT)
    job = g.job(small)
    sid = job["slurm_id"]
    assert sid and slurm_jobs(cluster, g)[small] == [sid], (job, slurm_jobs(cluster, g))
    assert job["state"] == "PD", job  # pending in Slurm: not R
    e2e.wait_for(lambda: g.job(small)["reason"] in ("Slurm: Resources", "Slurm: Priority"),
                 "Resources", timeout=JOB_TIMEOUT)
    row = _gqueue_row(g, small)
    assert row["SLURMID"] == str(sid) and row["ST"] == "PD", row
    assert row["REASON"].startswith("Slurm: "), row
    show = g.run("gjob", "show", small, check=True).stdout
    assert f"SlurmJobId" in show and str(sid) in show, show
    assert _gqueue_row(g, big)["ST"] == "R"
    # gqueue -s filters on the state shown.
    assert _gqueue_row(g, small, states="PD") and not _gqueue_row(g, small, states="R")
    assert _gqueue_row(g, big, states="R") and not _gqueue_row(g, big, states="PD")

    # gjob hold / release -> scontrol hold / release.
    g.run("gjob", "hold", small, check=True)
    e2e.wait_for(lambda: cluster.job_field(sid, "Reason") == "JobHeldUser", "Slurm's hold",
                 timeout=JOB_TIMEOUT)
    e2e.wait_for(lambda: g.job(small)["reason"] == "Slurm: JobHeldUser", "the hold in gflow",
                 timeout=JOB_TIMEOUT)
    g.run("gjob", "release", small, check=True)
    e2e.wait_for(lambda: cluster.job_field(sid, "Reason") != "JobHeldUser", "Slurm's release",
                 timeout=JOB_TIMEOUT)
    # A running job cannot be held: one line saying so.
    cp = g.run("gjob", "hold", big)
    assert cp.returncode != 0 and "runs in Slurm" in cp.stderr, cp
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr

    # gjob update -> scontrol update of what Slurm can change; the rest refused.
    g.run("gjob", "update", small, "--time", "7", "--name", "renamed", check=True)
    e2e.wait_for(lambda: cluster.job_field(sid, "TimeLimit") == "00:07:00", "Slurm's time limit",
                 timeout=JOB_TIMEOUT)
    assert cluster.job_field(sid, "JobName") == "renamed"
    e2e.wait_for(lambda: g.job(small)["name"] == "renamed", "gflow's record",
                 timeout=JOB_TIMEOUT)
    assert g.job(small)["time_limit"] == 420
    cp = g.run("gjob", "update", small, "--memory", "1G")
    assert cp.returncode != 0, cp
    assert len(cp.stderr.strip().splitlines()) == 1 and "memory" in cp.stderr, cp.stderr
    g.run("gjob", "update", small, "--priority", "5", check=True)
    e2e.wait_for(lambda: cluster.job_field(sid, "Nice") == "500", "Slurm's nice",
                 timeout=JOB_TIMEOUT)

    # The id survives a restart (stored), and the poll follows it: R once Slurm runs it.
    g.kill_daemon()
    g.up()
    assert g.job(small)["slurm_id"] == sid
    g.run("gcancel", big, check=True)
    job = g.wait_state(small, timeout=JOB_TIMEOUT)
    assert job["state"] == "CD", job
    assert "small ran" in g.log(small)
    assert slurm_jobs(cluster, g)[small] == [sid]  # never submitted twice


def test_job_purged_while_daemon_away(make_slurm_gflow, cluster):
    """A job that ended and left scontrol (older than MinJobAge) while gflowd was down is
    asked of sacct; the test cluster has no accounting storage, so its end is unknown and
    REASON says so. Run last: it lowers the cluster's MinJobAge for a while."""
    g = make_slurm_gflow()
    jid = g.submit("sleep 2")
    e2e.wait_for(lambda: g.job(jid)["slurm_id"], "its Slurm id", timeout=JOB_TIMEOUT)
    sid = g.job(jid)["slurm_id"]
    g.kill_daemon()
    conf = cluster.conf.read_text()
    cluster.conf.write_text(conf.replace("MinJobAge=600", "MinJobAge=2"))
    try:
        assert cluster.run("scontrol", "reconfigure").returncode == 0
        e2e.wait_for(lambda: cluster.run("scontrol", "show", "job", str(sid)).returncode != 0,
                     "Slurm to purge the job", timeout=150)
    finally:
        cluster.conf.write_text(conf)
        cluster.run("scontrol", "reconfigure")
    g.up()
    job = g.wait_state(jid, timeout=JOB_TIMEOUT)
    assert job["state"] == "F", job
    assert job["reason"] == "Slurm: job purged before gflow read its end", job
    assert slurm_jobs(cluster, g).get(jid) is None  # not submitted again
    assert "sacct" in g.daemon_log()
