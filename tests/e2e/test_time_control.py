"""Time and control through the real binaries: --signal [B:]SIG@SECS sent before the
time limit (received by the job, re-armed after a daemon restart, sent late and then the
limit enforced when both passed while the daemon was down, never sent twice); --begin and
gjob release --at (an exact start, surviving a restart); jobs waiting for their begin
time or dependencies, kept out of the scheduling pass, keep their reasons through hold,
release, update, cancel and a restart."""
import time

from conftest import parse_show, parse_table, wait_for

# Traps USR1: writes the time it arrived (once) and keeps running until the limit.
TRAP_USR1 = ("trap 'date +%s.%N >> got_usr1' USR1; "
             "while true; do sleep 0.05; done")


def usr1_times(gflow):
    p = gflow.work / "got_usr1"
    return [float(x) for x in p.read_text().split()] if p.exists() else []


def test_signal_before_the_time_limit_reaches_the_job(gflow):
    # Due 4 s before the 5 s limit: at 1 s. Not at 4 s (@ read as "after"), nor at the
    # limit; the upper bound leaves a slow machine 2 s.
    job = gflow.submit("--time", "0:05", "--signal", "USR1@4", TRAP_USR1)
    j = gflow.wait_state(job, timeout=20)
    assert (j["state"], j["reason"]) == ("TO", "TimeLimit"), j
    assert j["signal_spec"] == "USR1@4"
    got = usr1_times(gflow)
    assert len(got) == 1, got  # exactly once, though every process of the job gets it
    assert 0.8 <= got[0] - j["start_time"] < 3, (got, j["start_time"])
    show = parse_show(gflow.run("gjob", "show", job, check=True).stdout)[0]
    assert show["WarnSignal"] == "USR1@4"


def test_batch_only_signal_and_directive(gflow):
    script = gflow.work / "ckpt.sh"
    script.write_text("#!/bin/bash\n# GFLOW --time=0:05\n# GFLOW --signal=B:SIGUSR1@4\n"
                      + TRAP_USR1 + "\n")
    job = gflow.submit(str(script))
    j = gflow.wait_state(job, timeout=20)
    assert (j["state"], j["signal_spec"]) == ("TO", "B:USR1@4"), j
    got = usr1_times(gflow)
    assert len(got) == 1 and 0.8 <= got[0] - j["start_time"] < 3, (got, j)  # due at 1 s


def test_signal_is_rearmed_after_a_restart(gflow):
    # Due at 4 s after the start. The restart comes after 1.5 s, so a signal re-armed from
    # the restart instead of the start would come after 5.5 s (or never, past the limit).
    job = gflow.submit("--time", "0:06", "--signal", "USR1@2", TRAP_USR1)
    start = gflow.wait_state(job, "R")["start_time"]
    wait_for(lambda: time.time() >= start + 1.5, "the job to have run 1.5 s", interval=0.05)
    gflow.down(check=True)
    gflow.up()
    assert usr1_times(gflow) == [], "the restart took so long that the signal came before it"
    j = gflow.wait_state(job, timeout=20)
    assert j["state"] == "TO", j
    got = usr1_times(gflow)
    assert len(got) == 1 and 3.8 <= got[0] - j["start_time"] < 5.5, (got, j["start_time"])


# Records USR1 (with its time) and TERM in the order the job handles them; builtins
# only, as the SIGTERM that follows the warning at once reaches every process of the job.
TRAP_BOTH = ("trap 'echo $EPOCHREALTIME >> got_usr1; echo USR1 >> events' USR1; "
             "trap 'echo TERM >> events; exit 143' TERM; "
             "while true; do sleep 0.05; done")


def test_late_warning_then_time_limit_on_restart(gflow):
    """The daemon is down across both the warning's moment (2 s after the start) and the
    time limit (5 s): once up again it sends the warning at once, then ends the job."""
    job = gflow.submit("--time", "0:05", "--signal", "USR1@3", TRAP_BOTH)
    start = gflow.wait_state(job, "R")["start_time"]
    gflow.down(check=True)
    assert usr1_times(gflow) == [], "the daemon took 2 s to stop: the warning came before"
    wait_for(lambda: time.time() >= start + 5.5, "both moments to pass", timeout=10,
             interval=0.05)
    up_at = time.time()
    gflow.up()
    j = gflow.wait_state(job, timeout=15)
    assert (j["state"], j["reason"]) == ("TO", "TimeLimit"), j
    assert j["end_time"] - up_at < 5, "the time limit was not enforced promptly"
    got = usr1_times(gflow)
    assert len(got) == 1 and got[0] >= up_at, (got, up_at)
    assert (gflow.work / "events").read_text().split() == ["USR1", "TERM"]
    assert f"job {job}: sent SIGUSR1, late" in gflow.daemon_log(), gflow.daemon_log()


def test_warning_sent_before_a_restart_is_not_sent_again(gflow):
    # Due at 1 s; the restart comes after it, before the limit at 5 s.
    job = gflow.submit("--time", "0:05", "--signal", "USR1@4", TRAP_USR1)
    wait_for(lambda: usr1_times(gflow), "the warning", timeout=10)
    gflow.down(check=True)
    gflow.up()
    j = gflow.wait_state(job, timeout=20)
    assert j["state"] == "TO", j
    assert len(usr1_times(gflow)) == 1, usr1_times(gflow)


def test_signal_needs_a_time_limit_and_a_valid_spec(gflow):
    cp = gflow.run("gbatch", "--signal", "USR1@10", "true")
    assert cp.returncode == 2 and "needs --time" in cp.stderr, cp
    cp = gflow.run("gbatch", "--time", "5", "--signal", "NOSUCH@10", "true")
    assert cp.returncode == 2 and "invalid signal spec 'NOSUCH@10'" in cp.stderr, cp
    r = gflow.api("POST", "/v1/jobs", {"command": "true", "workdir": "/",
                                       "signal_spec": "USR1@10"})
    assert r.status == 400 and "--signal needs --time" in r.json()["error"], r
    # Defaults: 60 s, a number as SIG.
    job = gflow.submit("--hold", "--time", "5", "--signal", "10", "true")
    assert gflow.job(job)["signal_spec"] == "USR1@60"
    assert gflow.job(gflow.submit("true"))["signal_spec"] is None


# ---- --begin and gjob release --at ---------------------------------------------------

def test_begin_starts_at_the_time(gflow):
    t0 = time.time()
    job = gflow.submit("--begin", "now+3s", "true")
    j = gflow.job(job)
    assert j["state"] == "PD" and t0 + 3 <= j["begin_time"] <= time.time() + 3, j
    wait_for(lambda: gflow.job(job)["reason"] == "BeginTime", "the BeginTime reason")
    row = {r["JOBID"]: r for r in parse_table(gflow.run("gqueue", check=True).stdout)}[str(job)]
    assert row["NODELIST(REASON)"] == "(BeginTime)", row
    j = gflow.wait_state(job, timeout=15)
    assert j["state"] == "CD", j
    # Started by the begin timer (no poll would start it this soon); the bound leaves a
    # slow machine room.
    assert j["begin_time"] <= j["start_time"] < j["begin_time"] + 3, j
    show = parse_show(gflow.run("gjob", "show", job, check=True).stdout)[0]
    assert show["BeginTime"] != "-"


def test_begin_waiting_jobs_among_many(gflow):
    """The daemon keeps jobs that wait for --begin or for dependencies out of the
    scheduling pass: among 200 far-off jobs one whose time comes starts, its dependent
    after it, and the waiting jobs show BeginTime / Dependency throughout: held and
    released, updated (begin time, priority), cancelled, and after a restart."""
    far = gflow.submit("--begin", "now+365d", "true")
    gflow.run("gbatch", "--begin", "now+365d", "--array", "1-199", "true", check=True)
    last = far + 199
    assert gflow.job(last)["state"] == "PD"
    near = gflow.submit("--begin", "now+3s", "--priority", "1", "true")  # behind them all
    dep = gflow.submit("--depends-on", near, "true")
    on_far = gflow.submit("--depends-on", far, "true")

    def reason(job):
        return gflow.job(job)["reason"]
    wait_for(lambda: reason(near) == "BeginTime", "the BeginTime reason")
    rows = {r["JOBID"]: r for r in parse_table(gflow.run("gqueue", check=True).stdout)}
    assert rows[str(near)]["NODELIST(REASON)"] == "(BeginTime)", rows[str(near)]
    assert rows[str(dep)]["NODELIST(REASON)"] == "(Dependency)", rows[str(dep)]
    assert rows[str(last)]["NODELIST(REASON)"] == "(BeginTime)", rows[str(last)]
    j = gflow.wait_state(near, timeout=20)
    assert j["state"] == "CD" and j["start_time"] >= j["begin_time"], j
    assert gflow.wait_state(dep, timeout=20)["state"] == "CD"
    assert (gflow.job(far)["state"], reason(far)) == ("PD", "BeginTime")
    assert (gflow.job(on_far)["state"], reason(on_far)) == ("PD", "Dependency")

    # Held and released with a new time; its begin time moved by gjob update.
    gflow.run("gjob", "hold", far + 1, check=True)
    assert gflow.job(far + 1)["state"] == "H"
    gflow.run("gjob", "release", far + 1, "--at", "now+1s", check=True)
    assert gflow.job(far + 1)["state"] == "PD"
    gflow.run("gjob", "update", far + 2, "--begin", "now+1s", check=True)
    # A priority change keeps it waiting; a cancelled one leaves.
    gflow.run("gjob", "update", far + 3, "--priority", "200", check=True)
    gflow.run("gcancel", far + 4, check=True)
    for job in (far + 1, far + 2):
        j = gflow.wait_state(job, timeout=20)
        assert j["state"] == "CD" and j["start_time"] >= j["begin_time"], j
    assert gflow.job(far + 4)["state"] == "CA"
    wait_for(lambda: reason(far + 3) == "BeginTime", "BeginTime after a priority change")
    assert gflow.job(far + 3)["state"] == "PD"

    # A restart rebuilds where each job waits.
    gflow.down(check=True)
    gflow.up()
    for job in (far, far + 3, last):
        wait_for(lambda: reason(job) == "BeginTime", f"job {job}'s BeginTime after a restart")
        assert gflow.job(job)["state"] == "PD"
    assert reason(on_far) == "Dependency"
    soon = gflow.submit("--begin", "now+1s", "true")
    now = gflow.submit("true")
    assert gflow.wait_state(now, timeout=20)["state"] == "CD"
    assert gflow.wait_state(soon, timeout=20)["state"] == "CD"
    # Its dependency cancelled, the dependent goes too (auto-cancel).
    gflow.run("gcancel", far, check=True)
    assert gflow.wait_state(on_far, timeout=20)["state"] == "CA"


def test_begin_survives_a_restart(gflow):
    job = gflow.submit("--begin", "now+3s", "true")
    begin = gflow.job(job)["begin_time"]
    gflow.down(check=True)
    gflow.up()
    j = gflow.job(job)
    assert (j["state"], j["begin_time"]) == ("PD", begin), j
    j = gflow.wait_state(job, timeout=15)
    assert j["state"] == "CD" and begin <= j["start_time"] < begin + 3, j


def test_release_at_and_begin_forms(gflow):
    job = gflow.submit("--hold", "true")
    t0 = time.time()
    cp = gflow.run("gjob", "release", job, "--at", "now+2s", check=True)
    assert "to start at" in cp.stdout, cp.stdout
    j = gflow.job(job)
    assert j["state"] == "PD" and t0 + 2 <= j["begin_time"] <= time.time() + 2, j
    j = gflow.wait_state(job, timeout=15)
    assert j["state"] == "CD" and j["begin_time"] <= j["start_time"] < j["begin_time"] + 3, j
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
