"""Job dependencies through the real binaries: pipelines with @ and @~N, afterok /
afterany / afternotok, mode any, auto-cancel down a chain (and --no-auto-cancel), refusal
of unknown ids, gqueue -t, gcancel --dry-run, script directives, and a daemon restart."""
import json
import os

from conftest import parse_table, wait_for

# A job that waits until the test creates the file `go` in the job's working directory.
WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"


def reason(gflow, job_id):
    return gflow.job(job_id)["reason"]


def deps(job):
    """depends_on without the daemon's per-dependency status (shown for active jobs)."""
    return [{"id": d["id"], "kind": d["kind"]} for d in job["depends_on"]]


def test_pipeline_with_at_runs_in_order(gflow):
    first = gflow.submit(f"{WAIT_GO}; echo 1 >> order")
    second = gflow.submit("--depends-on", "@", "echo 2 >> order")
    third = gflow.submit("-d", "@", "echo 3 >> order")
    j2, j3 = gflow.job(second), gflow.job(third)
    assert deps(j2) == [{"id": first, "kind": "afterok"}]
    assert deps(j3) == [{"id": second, "kind": "afterok"}]
    assert j3["depends_mode"] == "all" and j3["auto_cancel"] is True
    wait_for(lambda: reason(gflow, third) == "Dependency", "job 3 waiting on Dependency")
    assert gflow.job(second)["state"] == "PD" and reason(gflow, second) == "Dependency"
    (gflow.work / "go").touch()
    for j in (first, second, third):
        assert gflow.wait_state(j)["state"] == "CD"
    assert (gflow.work / "order").read_text().split() == ["1", "2", "3"]
    a, b, c = (gflow.job(j) for j in (first, second, third))
    assert a["end_time"] <= b["start_time"] and b["end_time"] <= c["start_time"]
    assert gflow.job(first)["dependents"] == [second]


def test_failure_cancels_a_chain_of_three(gflow):
    bad = gflow.submit(f"{WAIT_GO}; exit 3")
    one = gflow.submit("--depends-on", bad, "true")
    two = gflow.submit("--depends-on", one, "true")
    three = gflow.submit("--dependency", f"afterok:{two}", "true")
    (gflow.work / "go").touch()
    assert gflow.wait_state(bad)["state"] == "F"
    for job, dep in ((one, bad), (two, one), (three, two)):
        j = gflow.wait_state(job)
        assert (j["state"], j["reason"]) == ("CA", f"DependencyFailed:{dep}"), j
        assert j["start_time"] is None
    # A dependency that has already failed is judged at submission.
    late = gflow.submit("--depends-on", bad, "true")
    j = gflow.wait_state(late)
    assert (j["state"], j["reason"]) == ("CA", f"DependencyFailed:{bad}")


def test_afterany_runs_after_a_failure(gflow):
    bad = gflow.submit(f"{WAIT_GO}; exit 1")
    after = gflow.submit("--dependency", f"afterany:{bad}", "echo ran > any.txt")
    wait_for(lambda: reason(gflow, after) == "Dependency", "afterany job waiting")
    (gflow.work / "go").touch()
    assert gflow.wait_state(bad)["state"] == "F"
    assert gflow.wait_state(after)["state"] == "CD"
    assert (gflow.work / "any.txt").read_text() == "ran\n"


def test_afternotok_runs_only_after_a_failure(gflow):
    ok = gflow.submit(f"{WAIT_GO}; true")
    bad = gflow.submit(f"{WAIT_GO}; false")
    on_ok = gflow.submit("--dependency", f"afternotok:{ok}", "echo x > on_ok")
    on_bad = gflow.submit("--dependency", f"afternotok:{bad}", "echo x > on_bad")
    (gflow.work / "go").touch()
    j = gflow.wait_state(on_ok)
    assert (j["state"], j["reason"]) == ("CA", f"DependencyFailed:{ok}")
    assert gflow.wait_state(on_bad)["state"] == "CD"
    assert not (gflow.work / "on_ok").exists()
    assert (gflow.work / "on_bad").exists()
    # Cancelled counts as "not ok" too.
    held = gflow.submit("--hold", "true")
    cleanup = gflow.submit("--dependency", f"afternotok:{held}", "true")
    gflow.run("gcancel", held, check=True)
    assert gflow.wait_state(cleanup)["state"] == "CD"


def test_no_auto_cancel_waits_with_the_reason(gflow):
    bad = gflow.submit("exit 2")
    gflow.wait_state(bad)
    keep = gflow.submit("--no-auto-cancel", "--depends-on", bad, "true")
    j = gflow.job(keep)
    assert (j["state"], j["reason"], j["auto_cancel"]) == ("PD", f"DependencyFailed:{bad}",
                                                           False)
    rows = parse_table(gflow.run("gqueue", check=True).stdout)
    assert rows[0]["NODELIST(REASON)"] == f"(DependencyFailed:{bad})"
    # Held and released, it still says why it waits.
    gflow.run("gjob", "hold", keep, check=True)
    gflow.run("gjob", "release", keep, check=True)
    j = gflow.job(keep)
    assert (j["state"], j["reason"]) == ("PD", f"DependencyFailed:{bad}")
    # The scheduler does not start it.
    assert gflow.job(keep)["start_time"] is None


def test_unknown_ids_refused(gflow):
    first = gflow.submit("true")
    cp = gflow.run("gbatch", "--depends-on-all", f"{first},998,999", "true")
    assert cp.returncode != 0
    assert "998, 999" in cp.stderr and str(first) not in cp.stderr.split("ids")[-1], cp.stderr
    r = gflow.api("POST", "/v1/jobs", {"command": "true", "workdir": "/tmp",
                                       "depends_on": [{"id": 4242, "kind": "afterok"}]})
    assert r.status == 400 and "4242" in r.json()["error"]
    r = gflow.api("POST", "/v1/jobs", {"command": "true", "workdir": "/tmp",
                                       "depends_on": [{"id": first, "kind": "after"}]})
    assert r.status == 400 and "kind" in r.json()["error"]
    # Entries of one batch cannot depend on each other: only on jobs that existed.
    nxt = first + 1
    r = gflow.api("POST", "/v1/jobs", {"jobs": [
        {"command": "true", "workdir": "/tmp"},
        {"command": "true", "workdir": "/tmp", "depends_on": [{"id": nxt}]}]})
    assert r.status == 400 and "job 2" in r.json()["error"] and str(nxt) in r.json()["error"]
    assert len(gflow.jobs()) == 1  # nothing of the refused batch was submitted
    cp = gflow.run("gbatch", "--dependency", f"after:{first}", "true")
    assert cp.returncode == 2 and "afterok, afterany or afternotok" in cp.stderr


def test_at_tilde_n_and_mode_any(gflow):
    a = gflow.submit(f"{WAIT_GO}; exit 1")
    b = gflow.submit(f"{WAIT_GO}; true")
    c = gflow.submit("-d", "@~1", "true")  # @~1 is a
    assert deps(gflow.job(c)) == [{"id": a, "kind": "afterok"}]
    d = gflow.submit("--depends-on-any", f"{a},{b}", "echo any > any.txt")
    j = gflow.job(d)
    assert j["depends_mode"] == "any"
    assert {x["id"] for x in j["depends_on"]} == {a, b}
    e = gflow.submit("--depends-on-any", "@~3,@~2", "true")  # a and b again, via refs
    assert {x["id"] for x in gflow.job(e)["depends_on"]} == {a, b}
    (gflow.work / "go").touch()
    assert gflow.wait_state(c)["state"] == "CA"  # a failed
    assert gflow.wait_state(d)["state"] == "CD"  # b succeeded: any one suffices
    assert gflow.wait_state(e)["state"] == "CD"
    # Mode any with every dependency failed: cancelled.
    f = gflow.submit("--depends-on-any", f"{a},{c}", "true")
    assert gflow.wait_state(f)["state"] == "CA"


def test_slurm_dependency_forms(gflow):
    a = gflow.submit("true")
    b = gflow.submit("false")
    gflow.wait_state(a)
    gflow.wait_state(b)
    j = gflow.submit("--dependency", f"afterok:{a},afternotok:{b},afterany:{a}:{b}", "true")
    assert deps(gflow.job(j)) == [
        {"id": a, "kind": "afterok"}, {"id": b, "kind": "afternotok"},
        {"id": a, "kind": "afterany"}, {"id": b, "kind": "afterany"}]
    assert gflow.wait_state(j)["state"] == "CD"
    k = gflow.submit("--dependency", f"afterok:{b}?afterok:{a}", "true")
    assert gflow.job(k)["depends_mode"] == "any"
    assert gflow.wait_state(k)["state"] == "CD"


def test_gqueue_tree(gflow):
    root = gflow.submit("-J", "prep", WAIT_GO)
    train = gflow.submit("-J", "train", "-d", root, "true")
    gflow.submit("-J", "eval", "-d", train, "true")
    gflow.submit("-J", "report", "-d", root, "true")
    other = gflow.submit("-J", "other", WAIT_GO)
    out = gflow.run("gqueue", "-t", "-f", "JOBID,NAME,ST", check=True).stdout
    lines = [l.rstrip() for l in out.splitlines()]
    assert lines[0].split() == ["JOBID", "NAME", "ST"]
    names = [l.split(None, 1)[1].rsplit(None, 1)[0] for l in lines[1:]]
    assert names == ["prep", "├─ train", "│  └─ eval", "└─ report", "other"], out
    ids = [int(l.split()[0]) for l in lines[1:]]
    assert ids == [root, train, train + 1, train + 2, other]
    # The long option, and the default columns.
    out = gflow.run("gqueue", "--tree", check=True).stdout
    assert "└─ report" in out and "(Dependency)" in out
    (gflow.work / "go").touch()


def test_gcancel_dry_run_lists_the_chain(gflow):
    root = gflow.submit(WAIT_GO)
    a = gflow.submit("-d", root, "true")
    b = gflow.submit("-d", a, "true")
    c = gflow.submit("--dependency", f"afterany:{root}", "true")  # runs anyway: not listed
    d = gflow.submit("--no-auto-cancel", "-d", a, "true")  # waits instead: not listed
    cp = gflow.run("gcancel", "--dry-run", root, check=True)
    lines = cp.stdout.splitlines()
    assert lines[0] in (f"{root}\tQueued\tok", f"{root}\tRunning\tok"), cp.stdout
    assert lines[1:] == [f"{a}\tQueued\tblocked\t{root}", f"{b}\tQueued\tblocked\t{a}"], cp.stdout
    assert all(gflow.job(j)["state"] in ("PD", "R") for j in (root, a, b, c, d))
    # The real thing cancels the same jobs, and says so.
    cp = gflow.run("gcancel", a, check=True)
    assert f"Job {a} cancelled." in cp.stdout
    assert f"Job {b} cancelled too (depends on {a}" in cp.stdout
    assert gflow.job(b)["reason"] == f"DependencyFailed:{a}"
    j = gflow.job(d)
    assert (j["state"], j["reason"]) == ("PD", f"DependencyFailed:{a}")
    # Several ids where one takes the other along: no error for the second.
    x = gflow.submit("--hold", "true")
    y = gflow.submit("-d", x, "true")
    cp = gflow.run("gcancel", x, y)
    assert cp.returncode == 0, cp.stderr
    assert gflow.job(y)["state"] == "CA"
    (gflow.work / "go").touch()
    assert gflow.wait_state(c)["state"] == "CD"


def test_directive_in_a_script(gflow):
    first = gflow.submit(f"{WAIT_GO}; echo first >> order")
    script = gflow.work / "step.sh"
    script.write_text("#!/bin/bash\n# GFLOW --depends-on=@\n# GFLOW --no-auto-cancel\n"
                      "echo second >> order\n")
    second = gflow.submit(str(script))
    j = gflow.job(second)
    assert deps(j) == [{"id": first, "kind": "afterok"}]
    assert j["auto_cancel"] is False
    # The command line wins over the directive.
    third = gflow.submit("--depends-on", second, str(script))
    assert deps(gflow.job(third)) == [{"id": second, "kind": "afterok"}]
    (gflow.work / "go").touch()
    assert gflow.wait_state(third)["state"] == "CD"
    assert (gflow.work / "order").read_text().split() == ["first", "second", "second"]


def test_restart_keeps_dependencies(gflow):
    root = gflow.submit(WAIT_GO)
    child = gflow.submit("-d", root, "echo child > child.txt")
    failing = gflow.submit("--hold", "true")
    doomed = gflow.submit("-d", failing, "true")
    waiting = gflow.submit("--no-auto-cancel", "-d", failing, "true")
    gflow.wait_state(root, "R")
    gflow.down(check=True)
    gflow.up()
    j = gflow.job(child)
    assert (j["state"], j["reason"]) == ("PD", "Dependency")
    assert j["depends_on"] == [{"id": root, "kind": "afterok", "status": "pending"}]
    # The dependents are known again after the restart: cancelling cascades.
    cp = gflow.run("gcancel", failing, check=True)
    assert str(doomed) in cp.stdout
    assert gflow.job(doomed)["reason"] == f"DependencyFailed:{failing}"
    assert gflow.job(waiting)["reason"] == f"DependencyFailed:{failing}"
    # A restart keeps the failed reason of a job that waits anyway.
    gflow.down(check=True)
    gflow.up()
    j = gflow.job(waiting)
    assert (j["state"], j["reason"]) == ("PD", f"DependencyFailed:{failing}")
    (gflow.work / "go").touch()
    assert gflow.wait_state(child)["state"] == "CD"
    assert (gflow.work / "child.txt").exists()
