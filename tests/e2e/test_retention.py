"""History retention (daemon.keep_finished) through the real daemon: by count and by
age, pruned in the background; a group's first job kept while the group has other jobs
(their payload is in it); a job an active job depends on kept; a dependency on a pruned
job refused as unknown; the logs left in place; a bad value refused at start."""
import time

from conftest import wait_for


def gone(g, jid):
    return g.api("GET", f"/v1/jobs/{jid}").status == 404


def test_keep_a_count_prunes_the_oldest(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__KEEP_FINISHED": "3"})
    ids = [g.submit("echo hi") for _ in range(6)]
    # Not the oldest three: on a slow machine they may be pruned before they are asked for.
    for i in ids[3:]:
        g.wait_state(i)
    wait_for(lambda: all(gone(g, i) for i in ids[:3]), "the 3 oldest pruned", timeout=30)
    assert all(g.job(i)["state"] == "CD" for i in ids[3:])
    out = g.run("gqueue", "-a", "-f", "JOBID", check=True).stdout.split()[1:]
    assert [int(x) for x in out] == ids[3:]
    # The logs are the user's: left in place.
    assert (g.data / "logs" / f"{ids[0]}.log").exists()
    # A new job may not depend on a pruned one (its outcome is gone).
    cp = g.run("gbatch", "--depends-on", str(ids[0]), "true")
    assert cp.returncode != 0 and f"--depends-on: no job {ids[0]}" in cp.stderr, cp.stderr
    # Counts (gflowd status / ginfo) follow.
    assert g.api("GET", "/v1/status").json()["counts"].get("CD", 0) == 3


def test_keep_an_age(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__KEEP_FINISHED": "1s"})
    ids = [g.submit("true") for _ in range(3)]
    held = g.submit("-H", "true")
    for i in ids:
        g.wait_state(i)
    time.sleep(1.2)
    g.down()  # the first look comes a second after start
    g.up()
    wait_for(lambda: all(gone(g, i) for i in ids), "jobs older than 1s pruned", timeout=15)
    assert g.job(held)["state"] == "H"  # active jobs are never pruned


def test_group_first_job_and_dependencies_kept(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__KEEP_FINISHED": "0"})
    first = g.submit("-H", "--array", "1-3", "echo task")
    dep = g.submit("true")
    g.wait_state(dep)
    waiter = g.submit("-H", "--depends-on", str(dep), "true")
    g.run("gcancel", str(first), check=True)
    time.sleep(2.5)  # a look at the history has come and gone
    # The array's first job holds the others' payload: kept while they remain.
    assert g.job(first)["state"] == "CA"
    assert g.job(first + 1)["command"] == "echo task"
    # The job a held job waits on is kept too.
    assert g.job(dep)["state"] == "CD"
    g.run("gcancel", f"{first + 1}-{first + 2}", str(waiter), check=True)
    wait_for(lambda: all(gone(g, i) for i in (first, first + 1, first + 2, dep, waiter)),
             "everything finished pruned", timeout=30)


def test_bad_value_refused_at_start(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__KEEP_FINISHED": "90 days"}, start=False)
    cp = g.gflowd("up")
    assert cp.returncode != 0
    assert "daemon.keep_finished" in cp.stdout + cp.stderr
