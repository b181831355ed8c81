"""gjob update, gjob redo (--cascade) and --max-retries through the real binaries."""
import json

from conftest import parse_show, parse_table, wait_for

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"
# Fails on the first attempt (creating the marker), succeeds on the second.
FLAKY = "if [ -e marker ]; then echo second; else touch marker; echo first; exit 7; fi"


def show(gflow, job_id):
    return parse_show(gflow.run("gjob", "show", job_id, check=True).stdout)[0]


# ---- --max-retries ----

def test_retry_succeeds_on_attempt_two_and_releases_dependent(gflow):
    first = gflow.submit("--max-retries", "2", "-J", "flaky", f"{WAIT_GO}; {FLAKY}")
    dep = gflow.submit("--depends-on", first, "echo dep > dep.txt")
    (gflow.work / "go").touch()
    a = gflow.wait_state(first)
    assert (a["state"], a["reason"], a["exit_code"]) == ("F", "NonZeroExitCode", 7)
    assert a["attempt"] == 1 and a["max_retries"] == 2
    second = a["retried_as"]
    assert isinstance(second, int) and second > dep
    b = gflow.wait_state(second)
    assert b["state"] == "CD", b
    assert (b["attempt"], b["retry_of"], b["max_retries"], b["name"]) == (2, first, 2, "flaky")
    assert b["retried_as"] is None
    assert b["command"] == a["command"]
    d = gflow.wait_state(dep)
    assert d["state"] == "CD", d
    assert [x["id"] for x in d["depends_on"]] == [second]
    assert (gflow.work / "dep.txt").read_text() == "dep\n"
    assert gflow.job(second)["dependents"] == [dep]
    # Lineage in gjob show.
    s1, s2 = show(gflow, first), show(gflow, second)
    assert s1["Attempt"] == "1 of 3" and s1["RetriedAs"] == str(second)
    assert "RetryOf" not in s1
    assert s2["Attempt"] == "2 of 3" and s2["RetryOf"] == str(first)
    # gqueue -t: the second attempt under the first.
    out = gflow.run("gqueue", "-a", "-t", "-f", "JOBID,NAME,ST", check=True).stdout
    lines = out.splitlines()
    i = next(k for k, l in enumerate(lines) if l.split()[0] == str(first))
    assert lines[i + 1].split()[0] == str(second) and "─" in lines[i + 1]


def test_retry_rewiring_survives_a_restart(gflow):
    # Attempt 1 fails at once; attempt 2 waits for `go`, across a daemon restart.
    first = gflow.submit("--max-retries", "1",
                         f"if [ -e marker ]; then {WAIT_GO}; else touch marker; exit 1; fi")
    dep = gflow.submit("--depends-on", first, "true")
    second = gflow.wait_state(first)["retried_as"]
    gflow.wait_state(second, "R")
    gflow.down(check=True)
    gflow.up()
    assert [d["id"] for d in gflow.job(dep)["depends_on"]] == [second]
    assert gflow.job(second)["dependents"] == [dep]
    (gflow.work / "go").touch()
    assert gflow.wait_state(second)["state"] == "CD"
    assert gflow.wait_state(dep)["state"] == "CD"


def test_a_dependency_on_a_retried_job_follows_to_its_latest_attempt(gflow):
    # Submitted after the first attempt failed: the dependency is on the second.
    first = gflow.submit("--max-retries", "1",
                         f"if [ -e marker ]; then {WAIT_GO}; else touch marker; exit 1; fi")
    second = gflow.wait_state(first)["retried_as"]
    dep = gflow.submit("--depends-on", f"afterok:{first}", "--depends-on", second, "true")
    j = gflow.job(dep)
    assert [(d["id"], d["kind"]) for d in j["depends_on"]] == [(second, "afterok")], j
    assert j["state"] == "PD" and gflow.job(second)["dependents"] == [dep]
    (gflow.work / "go").touch()
    assert gflow.wait_state(dep)["state"] == "CD"


def test_retries_are_bounded_and_dependents_cancelled_at_the_end(gflow):
    first = gflow.submit("--max-retries", "1", "exit 3")
    dep = gflow.submit("--depends-on", first, "true")
    a = gflow.wait_state(first)
    second = a["retried_as"]
    b = gflow.wait_state(second)
    assert (b["state"], b["reason"], b["attempt"]) == ("F", "NonZeroExitCode", 2)
    assert gflow.job(second)["retried_as"] is None
    d = gflow.wait_state(dep)
    assert (d["state"], d["reason"]) == ("CA", f"DependencyFailed:{second}")
    assert len(gflow.jobs(state="F")) == 2


def test_timeouts_and_cancellations_are_not_retried(gflow):
    slow = gflow.submit("--max-retries", "3", "-t", "0:01", "sleep 30")
    held = gflow.submit("--max-retries", "3", "--hold", "true")
    running = gflow.submit("--max-retries", "3", "sleep 30")
    gflow.wait_state(running, "R")
    gflow.run("gcancel", held, running, check=True)
    assert gflow.wait_state(held)["state"] == "CA"
    assert gflow.wait_state(running)["state"] == "CA"
    assert gflow.wait_state(slow, timeout=15)["state"] == "TO"
    for j in (slow, held, running):
        assert gflow.job(j)["retried_as"] is None
    assert len(gflow.jobs()) == 3


def test_max_retries_directive_and_validation(gflow):
    script = gflow.work / "job.sh"
    script.write_text("#!/bin/bash\n# GFLOW --max-retries=4\ntrue\n")
    j = gflow.submit(script)
    assert gflow.job(j)["max_retries"] == 4
    cp = gflow.run("gbatch", "--max-retries", "-1", "true")
    assert cp.returncode != 0 and "--max-retries" in cp.stderr
    r = gflow.api("POST", "/v1/jobs", {"command": "true", "workdir": str(gflow.work),
                                       "max_retries": "x"})
    assert r.status == 400 and "max_retries" in r.json()["error"]


# ---- gjob update ----

def test_update_priority_time_and_command_of_queued_and_held_jobs(gflow):
    blocker = gflow.submit(WAIT_GO)
    gflow.wait_state(blocker, "R")
    # One slot: the blocker holds it, so the jobs below stay queued.
    queued = gflow.submit("--depends-on", blocker, "-t", "1:00:00", "echo old > out.txt")
    held = gflow.submit("--hold", "-J", "h", "echo held")
    cp = gflow.run("gjob", "update", queued, "-p", "50", "-t", "2:00:00",
                   "-c", "echo new > out.txt", check=True)
    line = cp.stdout.strip()
    assert line.startswith(f"Job {queued} updated: "), line
    assert "--priority: 10 -> 50" in line and "--time: 01:00:00 -> 02:00:00" in line, line
    assert "--command: echo old > out.txt -> echo new > out.txt" in line, line
    j = gflow.job(queued)
    assert (j["priority"], j["time_limit"], j["command"], j["state"]) == (
        50, 7200, "echo new > out.txt", "PD")
    cp = gflow.run("gjob", "update", held, "--name", "renamed", "--max-retries", "2", check=True)
    assert "--name: h -> renamed" in cp.stdout and "--max-retries: 0 -> 2" in cp.stdout
    h = gflow.job(held)
    assert (h["name"], h["max_retries"], h["state"]) == ("renamed", 2, "H")
    # Invalid values are refused like a submission, and nothing changes.
    cp = gflow.run("gjob", "update", queued, "-p", "999")
    assert cp.returncode != 0
    r = gflow.api("PATCH", f"/v1/jobs/{queued}", {"priority": 300})
    assert r.status == 400 and "priority" in r.json()["error"]
    assert gflow.job(queued)["priority"] == 50
    (gflow.work / "go").touch()
    assert gflow.wait_state(queued)["state"] == "CD"
    assert (gflow.work / "out.txt").read_text() == "new\n"
    gflow.run("gcancel", held, check=True)


def test_update_refused_for_running_and_ended_jobs(gflow):
    running = gflow.submit(WAIT_GO)
    gflow.wait_state(running, "R")
    cp = gflow.run("gjob", "update", running, "-p", "20")
    assert cp.returncode != 0
    assert "only queued (PD) or held (H) jobs can be updated" in cp.stderr, cp.stderr
    r = gflow.api("PATCH", f"/v1/jobs/{running}", {"priority": 20})
    assert r.status == 409
    (gflow.work / "go").touch()
    gflow.wait_state(running)
    r = gflow.api("PATCH", f"/v1/jobs/{running}", {"priority": 20})
    assert r.status == 409
    r = gflow.api("PATCH", "/v1/jobs/9999", {"priority": 20})
    assert r.status == 404


def test_update_that_removes_a_dependency_lets_the_job_run(gflow):
    blocker = gflow.submit(WAIT_GO)
    waiting = gflow.submit("--depends-on", blocker, "echo ran > ran.txt")
    wait_for(lambda: gflow.job(waiting)["reason"] == "Dependency", "waiting on Dependency")
    cp = gflow.run("gjob", "update", waiting, "--depends-on", "none", check=True)
    assert f"--depends-on: afterok:{blocker} -> none" in cp.stdout, cp.stdout
    assert gflow.wait_state(waiting)["state"] == "CD"
    assert (gflow.work / "ran.txt").exists()
    assert gflow.job(waiting)["depends_on"] == []
    assert gflow.job(blocker)["dependents"] == []
    assert gflow.job(blocker)["state"] == "R"
    # Replacing: a new dependency, then --no-dependencies.
    other = gflow.submit("--hold", "true")
    third = gflow.submit("--depends-on", blocker, "true")
    gflow.run("gjob", "update", third, "-d", other, check=True)
    assert [d["id"] for d in gflow.job(third)["depends_on"]] == [other]
    # A cycle is refused.
    r = gflow.api("PATCH", f"/v1/jobs/{other}", {"depends_on": [{"id": third}]})
    assert r.status == 400 and "cycle" in r.json()["error"]
    gflow.run("gjob", "update", third, "--no-dependencies", check=True)
    assert gflow.wait_state(third)["state"] == "CD"
    (gflow.work / "go").touch()
    assert gflow.wait_state(blocker)["state"] == "CD"
    gflow.run("gcancel", other, check=True)


# ---- gjob redo ----

def test_redo_with_overrides(gflow):
    old = gflow.submit("-J", "orig", "-p", "7", "echo $GREETING-$MARK > redo-$MARK.txt",
                       env={"GREETING": "hi", "MARK": "a"})
    assert gflow.wait_state(old)["state"] == "CD"
    cp = gflow.run("gjob", "redo", old, "-p", "30", "-J", "again", check=True)
    new = int(cp.stdout.split()[3])
    assert cp.stdout.strip() == f"Submitted batch job {new} (again) (redo of {old})"
    j = gflow.wait_state(new)
    assert (j["state"], j["priority"], j["name"], j["command"]) == (
        "CD", 30, "again", gflow.job(old)["command"])
    assert j["env"]["GREETING"] == "hi"
    cp = gflow.run("gjob", "redo", "@", "--hold", "-c", "true", check=True)
    latest = int(cp.stdout.split()[3])
    assert f"(redo of {new})" in cp.stdout
    j = gflow.job(latest)
    assert (j["state"], j["command"], j["name"]) == ("H", "true", "again")
    gflow.run("gcancel", latest, check=True)


def test_redo_cascade_recreates_the_cancelled_chain(gflow):
    root = gflow.submit("-J", "root", "if [ -e fixed ]; then echo ok; else exit 1; fi")
    one = gflow.submit("-J", "one", "--depends-on", root, "echo one >> chain")
    two = gflow.submit("-J", "two", "--depends-on", one, "echo two >> chain")
    side = gflow.submit("-J", "side", "--dependency", f"afterany:{root}", "echo side")
    for j in (one, two):
        assert gflow.wait_state(j)["state"] == "CA"
    assert gflow.wait_state(side)["state"] == "CD"
    (gflow.work / "fixed").touch()
    cp = gflow.run("gjob", "redo", root, "--cascade", check=True)
    lines = cp.stdout.strip().splitlines()
    assert len(lines) == 3, lines
    new = [int(l.split()[3]) for l in lines]
    assert [l.split("(redo of ")[1].rstrip(")") for l in lines] == [str(root), str(one), str(two)]
    assert "(root)" in lines[0] and "(one)" in lines[1] and "(two)" in lines[2]
    for j in new:
        assert gflow.wait_state(j)["state"] == "CD"
    assert [d["id"] for d in gflow.job(new[1])["depends_on"]] == [new[0]]
    assert [d["id"] for d in gflow.job(new[2])["depends_on"]] == [new[1]]
    assert (gflow.work / "chain").read_text().split() == ["one", "two"]
    # Without --cascade only the job itself.
    cp = gflow.run("gjob", "redo", root, check=True)
    assert len(cp.stdout.strip().splitlines()) == 1
    r = gflow.api("POST", "/v1/jobs/9999/redo", {})
    assert r.status == 404
