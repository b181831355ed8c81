"""Preemption (issue 12, opt-in: scheduler.preempt): a job of much higher priority that
waits for GPUs stops running `gbatch --requeue` jobs of lower priority (SIGTERM, SIGKILL
after scheduler.preempt_grace), which go back to PD with the same id and run again later,
their log continued. Never a job without --requeue, never one within the priority gap,
nothing with preemption off. On the NVML simulator; jobs wait for files the test makes."""
from conftest import parse_show, wait_for


def wait_go(name):
    return f"while [ ! -e {name} ]; do sleep 0.02; done"


# A --requeue job that notes each run and each SIGTERM (then exits, as a job that
# checkpoints would), and ends once `name` exists.
def polite(name):
    return (f"trap 'echo TERM >> {name}.term; exit 0' TERM; "
            f"echo run-$(( $(cat {name}.runs 2>/dev/null | wc -l) + 1 )); echo run >> {name}.runs; "
            f"while [ ! -e {name} ]; do sleep 0.02; done")


# The same, but it ignores SIGTERM: only the SIGKILL after the grace stops it.
def stubborn(name):
    return (f"trap 'echo TERM >> {name}.term' TERM; echo run >> {name}.runs; "
            f"while [ ! -e {name} ]; do sleep 0.02; done")


def sim(make_gflow, n=1, **cfg):
    env = {f"GFLOW_SCHEDULER__{k.upper()}": v for k, v in cfg.items()}
    g = make_gflow(start=False, env=env)
    g.up("--simulate-gpus", n)
    return g


def show(g, job_id):
    return parse_show(g.run("gjob", "show", job_id, check=True).stdout)[0]


def waits_for_gpus(g, job_id):
    """Waits until a pass has given the job a reason for waiting for GPUs (preemption is
    decided right after that pass, in the same step, so the API then shows it)."""
    return wait_for(lambda: g.job(job_id)["reason"] in ("Resources", "Priority")
                    and g.job(job_id), f"job {job_id} to wait for GPUs")


def test_high_priority_job_preempts_a_requeue_job(make_gflow):
    g = sim(make_gflow, preempt="true", preempt_grace="30s")
    low = g.submit("-g", "1", "-p", "5", "--requeue", polite("low"))
    g.wait_state(low, "R")
    wait_for(lambda: (g.work / "low.runs").exists(), "the low job to run")
    high = g.submit("-g", "1", "-p", "20", wait_go("high"))
    # The low job gets SIGTERM, ends, and is queued again under the same id.
    j = g.wait_state(low, "PD")
    assert j["requeue"] is True and j["requeue_count"] == 1 and j["preempted_by"] == high, j
    assert (g.work / "low.term").read_text() == "TERM\n"
    assert j["start_time"] is None and j["gpu_ids"] is None, j
    g.wait_state(high, "R")
    s = show(g, low)
    assert s["State"] == "Queued (PD)", s
    assert s["Requeue"].startswith("yes"), s
    assert s["Requeued"].startswith("1 time"), s
    assert s["PreemptedBy"].startswith(f"job {high}"), s
    # It waits behind the high job and runs again once that has ended.
    (g.work / "high").touch()
    assert g.wait_state(high)["state"] == "CD"
    g.wait_state(low, "R")
    wait_for(lambda: (g.work / "low.runs").read_text() == "run\nrun\n", "the second run")
    (g.work / "low").touch()
    done = g.wait_state(low)
    assert done["state"] == "CD" and done["requeue_count"] == 1, done
    # One log, continued: both runs are in it.
    log = g.log(low)
    assert "run-1" in log and "run-2" in log, log
    assert f"job {low} (priority 5) preempted for job {high}" in g.daemon_log()


def test_sigkill_after_the_grace(make_gflow):
    g = sim(make_gflow, preempt="true", preempt_grace="1s")
    low = g.submit("-g", "1", "-p", "0", "--requeue", stubborn("low"))
    g.wait_state(low, "R")
    wait_for(lambda: (g.work / "low.runs").exists(), "the low job to run")
    high = g.submit("-g", "1", "-p", "50", wait_go("high"))
    # SIGTERM is ignored: the job is still there, being preempted, until the grace ends.
    wait_for(lambda: (g.work / "low.term").exists(), "SIGTERM to reach the job")
    j = g.job(low)
    assert j["state"] == "R" and j.get("preempting") is True, j
    assert "Preempting" in show(g, low)
    j = g.wait_state(low, "PD", timeout=15)
    assert j["requeue_count"] == 1, j
    assert "sending SIGKILL" in g.daemon_log()
    g.wait_state(high, "R")
    (g.work / "high").touch()
    g.wait_state(low, "R")
    (g.work / "low").touch()
    assert g.wait_state(low)["state"] == "CD"


def test_job_without_requeue_is_never_preempted(make_gflow):
    g = sim(make_gflow, n=2, preempt="true", preempt_grace="1s")
    plain = g.submit("-g", "1", "-p", "0", wait_go("plain"))
    close = g.submit("-g", "1", "-p", "15", "--requeue", wait_go("close"))  # within the gap
    g.wait_state(plain, "R")
    g.wait_state(close, "R")
    high = g.submit("-g", "1", "-p", "20", wait_go("high"))
    waits_for_gpus(g, high)
    for job in (plain, close):
        j = g.job(job)
        assert j["state"] == "R" and not j.get("preempting") and j["requeue_count"] == 0, j
    assert "preempted for" not in g.daemon_log()
    # A --requeue job low enough is preempted as soon as one runs.
    low = g.submit("-g", "1", "-p", "10", "--requeue", wait_go("low"))
    assert g.job(low)["state"] == "PD"  # no GPU for it either
    (g.work / "close").touch()
    g.wait_state(close)
    g.wait_state(high, "R")  # the freed GPU goes to the high job, first in the queue
    for name in ("plain", "high", "low"):
        (g.work / name).touch()
    for job in (plain, high, low):
        assert g.wait_state(job)["state"] == "CD"


def test_preemption_off_by_default(make_gflow):
    g = sim(make_gflow)
    low = g.submit("-g", "1", "-p", "0", "--requeue", wait_go("low"))
    g.wait_state(low, "R")
    high = g.submit("-g", "1", "-p", "255", wait_go("high"))
    waits_for_gpus(g, high)
    j = g.job(low)
    assert j["state"] == "R" and not j.get("preempting") and j["requeue_count"] == 0, j
    (g.work / "low").touch()
    g.wait_state(high, "R")
    (g.work / "high").touch()
    assert g.wait_state(high)["state"] == "CD"


def test_freed_gpus_are_kept_for_the_preempting_job(make_gflow):
    """While a preempted job stops, the free GPU is not given to a job behind the one that
    preempted; that job starts on both GPUs once the preempted one has gone."""
    g = sim(make_gflow, n=2, preempt="true", preempt_grace="3s")
    low = g.submit("-g", "1", "-p", "0", "--requeue", stubborn("low"))
    g.wait_state(low, "R")
    wait_for(lambda: (g.work / "low.runs").exists(), "the low job to run")
    big = g.submit("-g", "2", "-p", "30", wait_go("big"))
    wait_for(lambda: (g.work / "low.term").exists(), "SIGTERM to reach the job")
    small = g.submit("-g", "1", "-p", "10", wait_go("small"))  # would fit on the free GPU
    wait_for(lambda: g.job(small)["reason"] is not None, "a pass over the small job")
    assert g.job(small)["state"] == "PD" and g.job(low)["state"] == "R"
    b = g.wait_state(big, "R", timeout=15)
    assert b["gpu_ids"] == "0,1", b
    assert g.job(low)["state"] == "PD" and g.job(small)["state"] == "PD"
    (g.work / "big").touch()
    g.wait_state(big)
    for name in ("low", "small"):
        (g.work / name).touch()
    for job in (low, small):
        assert g.wait_state(job)["state"] == "CD"


def test_requeue_directive_and_update(make_gflow):
    g = sim(make_gflow)
    script = g.work / "job.sh"
    script.write_text("#!/bin/bash\n# GFLOW --requeue\n# GFLOW --hold\ntrue\n")
    job = g.submit(str(script))
    assert g.job(job)["requeue"] is True
    r = g.run("gjob", "update", job, "--no-requeue", check=True)
    assert "requeue" in r.stdout, r.stdout
    assert g.job(job)["requeue"] is False
    assert "Requeue" not in show(g, job)  # nothing to say: left out
    assert parse_show(g.run("gjob", "show", "-v", job, check=True).stdout)[0]["Requeue"] == "no"
    g.run("gjob", "update", job, "--requeue", check=True)
    assert g.job(job)["requeue"] is True
    plain = g.submit("--hold", "true")
    assert g.job(plain)["requeue"] is False
    for args in (("--requeue", "--no-requeue"), ("--no-requeue", "--requeue")):
        r = g.run("gjob", "update", job, *args)
        assert r.returncode == 2 and r.stdout == "", r
        assert r.stderr.strip().splitlines() == [
            "gjob: --requeue and --no-requeue cannot be used together; "
            "see 'gjob update --help'"], r.stderr
    assert g.job(job)["requeue"] is True
    dry = g.run("gbatch", "--dry-run", "--requeue", "true", check=True)
    assert "Requeue:   yes" in dry.stdout, dry.stdout


def test_preemption_survives_a_daemon_restart(make_gflow):
    """gflowd killed during the grace: the restarted daemon still knows the job is being
    preempted, stops it through its shim (SIGKILL after daemon.kill_grace_secs) and
    queues it again."""
    g = make_gflow(start=False, env={"GFLOW_SCHEDULER__PREEMPT": "true",
                                     "GFLOW_SCHEDULER__PREEMPT_GRACE": "10m",
                                     "GFLOW_DAEMON__KILL_GRACE_SECS": "1"})
    g.up("--simulate-gpus", 1)
    low = g.submit("-g", "1", "-p", "0", "--requeue", stubborn("low"))
    g.wait_state(low, "R")
    wait_for(lambda: (g.work / "low.runs").exists(), "the low job to run")
    high = g.submit("-g", "1", "-p", "50", wait_go("high"))
    wait_for(lambda: (g.work / "low.term").exists(), "SIGTERM to reach the job")
    assert g.job(low).get("preempting") is True
    g.kill_daemon()
    g.up("--simulate-gpus", 1)
    j = g.wait_state(low, "PD", timeout=15)
    assert j["requeue_count"] == 1 and j["preempted_by"] == high, j
    g.wait_state(high, "R")
    (g.work / "high").touch()
    (g.work / "low").touch()
    assert g.wait_state(high)["state"] == "CD"
    assert g.wait_state(low)["state"] == "CD"
