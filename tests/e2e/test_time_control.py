"""Time and control through the real binaries: --signal [B:]SIG@SECS sent before the
time limit (received by the job, re-armed after a daemon restart); --begin and gjob
release --at (an exact start, surviving a restart)."""
import time

from conftest import parse_show, parse_table, wait_for

# Traps USR1: writes the time it arrived (once) and keeps running until the limit.
TRAP_USR1 = ("trap 'date +%s.%N >> got_usr1' USR1; "
             "while true; do sleep 0.05; done")


def usr1_times(gflow):
    p = gflow.work / "got_usr1"
    return [float(x) for x in p.read_text().split()] if p.exists() else []


def test_signal_before_the_time_limit_reaches_the_job(gflow):
    job = gflow.submit("--time", "0:03", "--signal", "USR1@2", TRAP_USR1)
    j = gflow.wait_state(job, timeout=15)
    assert (j["state"], j["reason"]) == ("TO", "TimeLimit"), j
    assert j["signal_spec"] == "USR1@2"
    got = usr1_times(gflow)
    assert len(got) == 1, got  # exactly once, though every process of the job gets it
    assert 0.8 <= got[0] - j["start_time"] <= 1.5, (got, j["start_time"])
    show = parse_show(gflow.run("gjob", "show", job, check=True).stdout)[0]
    assert show["WarnSignal"] == "USR1@2"


def test_batch_only_signal_and_directive(gflow):
    script = gflow.work / "ckpt.sh"
    script.write_text("#!/bin/bash\n# GFLOW --time=0:03\n# GFLOW --signal=B:SIGUSR1@2\n"
                      + TRAP_USR1 + "\n")
    job = gflow.submit(str(script))
    j = gflow.wait_state(job, timeout=15)
    assert (j["state"], j["signal_spec"]) == ("TO", "B:USR1@2"), j
    got = usr1_times(gflow)
    assert len(got) == 1 and 0.8 <= got[0] - j["start_time"] <= 1.5, (got, j)


def test_signal_is_rearmed_after_a_restart(gflow):
    job = gflow.submit("--time", "0:05", "--signal", "USR1@2", TRAP_USR1)
    gflow.wait_state(job, "R")
    gflow.down(check=True)
    gflow.up()
    j = gflow.wait_state(job, timeout=15)
    assert j["state"] == "TO", j
    got = usr1_times(gflow)
    assert len(got) == 1 and 2.8 <= got[0] - j["start_time"] <= 3.5, (got, j["start_time"])


def test_signal_needs_a_time_limit_and_a_valid_spec(gflow):
    cp = gflow.run("gbatch", "--signal", "USR1@10", "true")
    assert cp.returncode == 2 and "needs --time" in cp.stderr, cp
    cp = gflow.run("gbatch", "--time", "5", "--signal", "NOSUCH@10", "true")
    assert cp.returncode == 2 and "invalid signal spec 'NOSUCH@10'" in cp.stderr, cp
    r = gflow.api("POST", "/v1/jobs", {"command": "true", "workdir": "/",
                                       "signal_spec": "USR1@10"})
    assert r.status == 400 and "time_limit" in r.json()["error"], r
    # Defaults: 60 s, a number as SIG.
    job = gflow.submit("--hold", "--time", "5", "--signal", "10", "true")
    assert gflow.job(job)["signal_spec"] == "USR1@60"
    assert gflow.job(gflow.submit("true"))["signal_spec"] is None


# ---- --begin and gjob release --at ---------------------------------------------------

def test_begin_starts_within_a_second_of_the_time(gflow):
    t0 = time.time()
    job = gflow.submit("--begin", "now+2s", "true")
    j = gflow.job(job)
    assert j["state"] == "PD" and t0 + 2 <= j["begin_time"] <= time.time() + 2, j
    wait_for(lambda: gflow.job(job)["reason"] == "BeginTime", "the BeginTime reason")
    row = {r["JOBID"]: r for r in parse_table(gflow.run("gqueue", check=True).stdout)}[str(job)]
    assert row["NODELIST(REASON)"] == "(BeginTime)", row
    j = gflow.wait_state(job, timeout=10)
    assert j["state"] == "CD", j
    assert j["begin_time"] <= j["start_time"] <= j["begin_time"] + 1.0, j
    show = parse_show(gflow.run("gjob", "show", job, check=True).stdout)[0]
    assert show["BeginTime"] != "-"


def test_begin_survives_a_restart(gflow):
    job = gflow.submit("--begin", "now+3s", "true")
    begin = gflow.job(job)["begin_time"]
    gflow.down(check=True)
    gflow.up()
    j = gflow.job(job)
    assert (j["state"], j["begin_time"]) == ("PD", begin), j
    j = gflow.wait_state(job, timeout=10)
    assert j["state"] == "CD" and begin <= j["start_time"] <= begin + 1.0, j


def test_release_at_and_begin_forms(gflow):
    job = gflow.submit("--hold", "true")
    cp = gflow.run("gjob", "release", job, "--at", "now+2s", check=True)
    assert "to start at" in cp.stdout, cp.stdout
    j = gflow.job(job)
    assert j["state"] == "PD" and j["begin_time"] > time.time() + 1, j
    j = gflow.wait_state(job, timeout=10)
    assert j["state"] == "CD" and j["begin_time"] <= j["start_time"] <= j["begin_time"] + 1.0, j
    # The other forms are accepted (far away: the jobs wait); bad ones are usage errors.
    far = gflow.submit("--begin", "2099-01-01T10:00", "true")
    assert gflow.job(far)["begin_time"] > time.time() + 86400 * 365
    clock = gflow.submit("--begin", time.strftime("%H:%M", time.localtime(time.time() - 120)),
                         "true")  # passed today: tomorrow
    assert gflow.job(clock)["begin_time"] > time.time() + 86400 - 300
    script = gflow.work / "b.sh"
    script.write_text("#!/bin/bash\n# GFLOW --begin=now+1d\ntrue\n")
    s = gflow.submit(str(script))
    assert gflow.job(s)["begin_time"] > time.time() + 86000
    for bad in ("tomorrow", "25:00", "now+3y"):
        cp = gflow.run("gbatch", "--begin", bad, "true")
        assert cp.returncode == 2 and "now+N" in cp.stderr, cp
    cp = gflow.run("gjob", "release", far, "--at", "soon")
    assert cp.returncode == 2 and "--at" in cp.stderr, cp
