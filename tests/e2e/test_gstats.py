"""gstats (GET /v1/stats) through the real daemon on the NVML simulator: jobs that
complete, fail, time out, are cancelled and still run, in two projects; every number
gstats prints is checked against what the jobs' own start/end times (the API's job
objects) say; --since/--until; -o json/csv/table; --gpu utilisation samples and their
bound; bad input."""
import csv
import io
import json
import math
import os
import sys
import time

from conftest import TEST_USER, as_user, assert_not_running, assert_one_line_error, wait_for

sys.path.insert(0, os.path.dirname(__file__))
from test_gpus import fixture_of, sim, sim_gpu  # noqa: E402  (the NVML simulator fixtures)

REASON_OF = {"F": "NonZeroExitCode", "TO": "TimeLimit", "CA": "CancelledByUser"}


def stats(g, *args):
    cp = g.run("gstats", *args, "-o", "json")
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


def all_jobs(g):
    return g.jobs()  # every state: the API's job objects (gqueue -o json is gflow's shape)


def p95(values):
    v = sorted(values)
    return v[max(0, math.ceil(0.95 * len(v)) - 1)]


def expected(jobs, key, now_lo, now_hi):
    """The numbers gstats must give for the jobs grouped by key(job) -> [names], as
    (lo, hi) GPU-hours bounds (a running job's time so far depends on when the daemon
    counted) and exact values for the rest."""
    out = {}
    for j in jobs:
        for name, share in key(j):
            e = out.setdefault(name, {"by_state": {}, "gpu_lo": 0.0, "gpu_hi": 0.0, "waits": [],
                                      "runs": [], "reasons": {}})
            e["by_state"][j["state"]] = e["by_state"].get(j["state"], 0) + 1
            if j["start_time"]:
                e["waits"].append(j["start_time"] - j["submit_time"])
            if j["state"] == "R":
                e["gpu_lo"] += share * (now_lo - j["start_time"]) / 3600
                e["gpu_hi"] += share * (now_hi - j["start_time"]) / 3600
            elif j["start_time"]:
                run = j["end_time"] - j["start_time"]
                e["gpu_lo"] += share * run / 3600
                e["gpu_hi"] += share * run / 3600
                e["runs"].append(run)
            if j["state"] in REASON_OF:
                e["reasons"][j["reason"]] = e["reasons"].get(j["reason"], 0) + 1
    return out


def check_group(got, e):
    st = e["by_state"]
    assert got["running"] == st.get("R", 0), got
    assert got["completed"] == st.get("CD", 0), got
    assert got["failed"] == st.get("F", 0), got
    assert got["cancelled"] == st.get("CA", 0), got
    assert got["timeout"] == st.get("TO", 0), got
    assert got["jobs"] == sum(st.values()), got
    assert e["gpu_lo"] - 1e-5 <= got["gpu_hours"] <= e["gpu_hi"] + 1e-5, (got, e)
    if e["waits"]:
        assert abs(got["wait_mean_secs"] - sum(e["waits"]) / len(e["waits"])) < 2e-3, (got, e)
        assert abs(got["wait_p95_secs"] - p95(e["waits"])) < 2e-3, (got, e)
    else:
        assert got["wait_mean_secs"] is None and got["wait_p95_secs"] is None
    if e["runs"]:
        assert abs(got["run_mean_secs"] - sum(e["runs"]) / len(e["runs"])) < 2e-3, (got, e)
    else:
        assert got["run_mean_secs"] is None
    ended = sum(n for s, n in st.items() if s != "R")
    bad = st.get("F", 0) + st.get("TO", 0)
    if ended:
        assert abs(got["failure_rate"] - bad / ended) < 1e-6, (got, e)
    else:
        assert got["failure_rate"] is None
    assert {r["reason"]: r["count"] for r in got["top_reasons"]} == e["reasons"], (got, e)


def run_the_mix(g):
    """alpha: one that completes, one that fails (exit 3); beta: one that times out, one
    cancelled while it runs, one cancelled while queued (held), one still running.
    Returns the running job's id."""
    done = g.submit("-P", "alpha", "-g", "1", "sleep 0.3")
    fail = g.submit("-P", "alpha", "-g", "1", "sleep 0.2; exit 3")
    to = g.submit("-P", "beta", "-g", "1", "--time", "0:01", "sleep 30")
    cancel = g.submit("-P", "beta", "sleep 30")
    held = g.submit("-P", "beta", "--hold", "true")
    for jid in (done, fail, to):
        g.wait_state(jid, timeout=20)
    g.wait_state(cancel, "R")
    assert g.run("gcancel", cancel).returncode == 0
    assert g.run("gcancel", held).returncode == 0
    for jid in (cancel, held):
        g.wait_state(jid, timeout=20)
    running = g.submit("-P", "beta", "-g", "2", "sleep 300")
    g.wait_state(running, "R")
    return running


def test_gstats_numbers_by_project_user_and_gpu(make_gflow):
    g = sim(make_gflow, n=2)
    running = run_the_mix(g)
    jobs = all_jobs(g)
    assert sorted(j["state"] for j in jobs) == ["CA", "CA", "CD", "F", "R", "TO"], jobs

    now_lo = time.time()
    by_project = stats(g, "--by", "project")
    by_user = stats(g)
    by_gpu = stats(g, "--by", "gpu")
    now_hi = time.time()

    exp = expected(jobs, lambda j: [(j["project"], j["gpus"])], now_lo, now_hi)
    assert [x["name"] for x in by_project["groups"]] == ["alpha", "beta"]
    for grp in by_project["groups"]:
        check_group(grp, exp[grp["name"]])
    check_group(by_project["total"], expected(jobs, lambda j: [("t", j["gpus"])], now_lo,
                                              now_hi)["t"])

    user = jobs[0]["user"]
    exp = expected(jobs, lambda j: [(j["user"], j["gpus"])], now_lo, now_hi)
    assert [x["name"] for x in by_user["groups"]] == [user]
    check_group(by_user["groups"][0], exp[user])

    def gpus_of(j):
        ids = j.get("gpu_ids") or ""
        ids = ids.split(",") if isinstance(ids, str) else ids
        return [(str(i), 1) for i in ids if str(i)] or [("(none)", 0)]
    exp = expected(jobs, gpus_of, now_lo, now_hi)
    assert sorted(x["name"] for x in by_gpu["groups"]) == sorted(exp)
    for grp in by_gpu["groups"]:
        check_group(grp, exp[grp["name"]])

    # The table says the same, with a TOTAL row; -u narrows to one user.
    cp = g.run("gstats", "--by", "project", check=True)
    lines = cp.stdout.splitlines()
    assert lines[0].startswith(f"Jobs of {jobs[0]['user']}, all time (to "), lines
    header = lines[1].split()
    assert header[:7] == ["PROJECT", "JOBS", "R", "CD", "F", "CA", "TO"], header
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert rows["alpha"][1:7] == ["2", "0", "1", "1", "0", "0"], rows
    assert rows["beta"][1:7] == ["4", "1", "0", "0", "2", "1"], rows
    assert rows["TOTAL"][1] == "6" and rows["alpha"][11] == "50.0%", rows
    alpha = next(x for x in by_project["groups"] if x["name"] == "alpha")
    assert rows["alpha"][7] == f"{alpha['gpu_hours']:.2f}", (rows, alpha)
    w = int(alpha["wait_mean_secs"] + 0.5)  # lround; durations are HH:MM:SS everywhere
    assert rows["alpha"][8] == f"{w // 3600:02}:{w // 60 % 60:02}:{w % 60:02}", (rows, alpha)
    assert rows["alpha"][12] == "NonZeroExitCode:1", rows
    assert set(rows["beta"][12].split(",")) == {"CancelledByUser:2", "TimeLimit:1"}, rows
    assert stats(g, "-u", user)["total"]["jobs"] == 6
    assert stats(g, "-u", "nobody-here")["groups"] == []
    assert g.run("gcancel", running).returncode == 0


def test_gstats_period_filters_and_formats(make_gflow):
    g = sim(make_gflow, n=2)
    first = g.submit("-P", "alpha", "true")
    j1 = g.wait_state(first)
    wait_for(lambda: time.time() > j1["end_time"] + 0.2, "time to pass")
    second = g.submit("-P", "beta", "sh -c 'exit 2'")
    j2 = g.wait_state(second)

    # Half-open [since, until): the first job ends before since, the second at until.
    s = stats(g, "--since", f"{j1['end_time'] + 0.01:.3f}", "--by", "project")
    assert [x["name"] for x in s["groups"]] == ["beta"]
    s = stats(g, "--until", f"{j2['end_time'] - 0.01:.3f}", "--by", "project")
    assert [x["name"] for x in s["groups"]] == ["alpha"]
    s = stats(g, "-t", "1h", "-a", "--until", f"{time.time() + 60:.0f}")
    assert s["total"]["jobs"] == 2 and s["total"]["failed"] == 1
    assert abs(s["since"] - (time.time() - 3600)) < 30 and s["user"] is None
    cp = g.run("gstats", "-t", "1h", "-a", check=True)
    assert cp.stdout.startswith("Jobs of everyone from "), cp.stdout
    # A period before anything ran: an empty answer, and the table says so.
    old = ["--since", "2020-01-01", "--until", "2020-01-02T00:00"]
    assert stats(g, *old)["groups"] == []
    cp = g.run("gstats", *old, check=True)
    assert "no job ended or ran in this period" in cp.stdout
    # The default period is all time (gflow's), of the caller's jobs.
    s = stats(g)
    assert s["since"] is None and s["total"]["jobs"] == 2
    assert s["user"] == g.job(first)["user"], s

    # CSV: the groups, same numbers as JSON.
    cp = g.run("gstats", "--by", "project", "-o", "csv", check=True)
    rows = list(csv.DictReader(io.StringIO(cp.stdout)))
    js = {x["name"]: x for x in stats(g, "--by", "project")["groups"]}
    assert [r["project"] for r in rows] == ["alpha", "beta"]
    for r in rows:
        want = js[r["project"]]
        for k in ("jobs", "running", "completed", "failed", "cancelled", "timeout"):
            assert int(r[k]) == want[k], (k, r, want)
        for k in ("gpu_hours", "wait_mean_secs", "wait_p95_secs", "run_mean_secs",
                  "failure_rate"):
            assert abs(float(r[k]) - want[k]) < 1e-3 * max(1, abs(want[k])), (k, r, want)
    assert rows[1]["top_reasons"] == "NonZeroExitCode:1" and rows[0]["top_reasons"] == "-"


def test_gstats_gpu_samples_exist_and_are_bounded(make_gflow):
    fx = fixture_of([sim_gpu(0, utilization_gpu=40), sim_gpu(1, utilization_gpu=85)])
    g = sim(make_gflow, fixture=fx, env={"GFLOW_DAEMON__GPU_SAMPLES_MAX": "3"})

    def gpus():
        return stats(g, "--gpu")["gpus"]
    # Samples every poll (1 s here); the ring keeps 3 per GPU, the oldest overwritten.
    wait_for(lambda: len(gpus()) == 2 and all(x["samples"] == 3 for x in gpus()),
             "3 samples per GPU", timeout=20)
    before = gpus()
    wait_for(lambda: gpus()[0]["last"] > before[0]["last"] + 1.5, "two more polls", timeout=20)
    after = gpus()
    assert [x["samples"] for x in after] == [3, 3], after
    assert after[0]["first"] > before[0]["first"], (before, after)  # the oldest went
    assert [(x["index"], x["mean"], x["max"]) for x in after] == [(0, 40, 40), (1, 85, 85)]

    # A time series with -o json/csv; the table shows mean and max per GPU.
    s = stats(g, "--gpu", "--since", "5m", "--buckets", "5")
    assert abs(s["bucket_secs"] - 60) < 1e-6
    assert sum(b["samples"] for b in s["gpus"][1]["series"]) == 3
    cp = g.run("gstats", "--gpu", "--since", "5m", "--buckets", "5", "-o", "csv", check=True)
    rows = list(csv.DictReader(io.StringIO(cp.stdout)))
    assert {r["gpu"] for r in rows} == {"0", "1"}
    assert sum(int(r["samples"]) for r in rows if r["gpu"] == "1") == 3
    assert all(float(r["mean"]) == (40 if r["gpu"] == "0" else 85) for r in rows)
    cp = g.run("gstats", "--gpu", check=True)
    table = cp.stdout.splitlines()
    assert table[1].split() == ["GPU", "SAMPLES", "MEAN", "MAX", "FIRST", "LAST"]
    assert table[2].split()[:4] == ["0", "3", "40.0%", "40%"], table
    assert table[3].split()[:4] == ["1", "3", "85.0%", "85%"], table

    # The samples taken in memory are written when the daemon stops; a restart with a
    # smaller bound keeps that many.
    g.down()
    g.env["GFLOW_DAEMON__GPU_SAMPLES_MAX"] = "2"
    g.up("--simulate-gpus", g.fixture_path)
    assert [x["samples"] for x in gpus()] == [2, 2], gpus()
    assert gpus()[0]["last"] >= after[0]["last"], (after, gpus())


def test_gstats_bad_input(gflow):
    g = gflow
    for args, needle in [
        (["--by", "team"], "unknown --by 'team'; use user, project or gpu"),
        (["--since", "lastweek"], "invalid --since 'lastweek'"),
        (["--until", "soon"], "invalid --until 'soon'"),
        (["--since", "1h", "--until", "2h"], "--since must be before --until"),
        (["-o", "yaml"], "unknown output format 'yaml'"),
        (["--buckets", "5"], "--buckets needs --gpu"),
        (["--gpu", "--buckets", "0"], "invalid --buckets '0'"),
        (["--gpu", "--by", "user"], "--by does not apply to --gpu"),
        (["--gpu", "-u", "root"], "-u does not apply to --gpu"),
        (["-u", ""], "empty user for -u"),
        (["extra"], "unexpected argument 'extra'"),
        (["-a", "completion", "bash"], "'completion' comes first"),
        (["-a", "-u", "root"], "-a (everyone) and -u root (one user) contradict"),
        (["--frobnicate"], "--frobnicate"),
    ]:
        assert_one_line_error(g.run("gstats", *args), "gstats", 2, needle)
    # The route checks what it is given too.
    assert g.api("GET", "/v1/stats?by=team").status == 400
    assert g.api("GET", "/v1/stats?since=10&until=5").status == 400
    assert g.api("GET", "/v1/stats?since=x").status == 400
    assert g.api("GET", "/v1/stats?gpu=1&buckets=0").status == 400
    assert g.api("POST", "/v1/stats").status == 405
    r = g.api("GET", "/v1/stats?by=gpu")
    assert r.status == 200 and r.json()["by"] == "gpu"
    # Without a daemon: the usual connect message, exit 1.
    g.down()
    assert_not_running(g.run("gstats"))


def test_gstats_two_users_and_everyone_sees_everyones_numbers(make_gflow, owner):
    """Jobs of root and of an unprivileged user: one row each; the unprivileged user's
    gstats shows their own (gflow's default), -a shows both (as gqueue -u all does), and
    -u narrows to one."""
    uid, gid, _ = owner
    g = make_gflow()
    os.chmod(g.root, 0o755)
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    them = as_user(uid, gid)
    mine = g.submit("true")
    theirs = [g.submit("true", user=them, cwd=workdir),
              g.submit("exit 4", user=them, cwd=workdir)]
    for jid in [mine, *theirs]:
        g.wait_state(jid)
    cp = g.run("gstats", "-o", "json", user=them, cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    assert [x["name"] for x in json.loads(cp.stdout)["groups"]] == [TEST_USER], cp.stdout
    cp = g.run("gstats", "-a", "-o", "json", user=them, cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    rows = {x["name"]: x for x in json.loads(cp.stdout)["groups"]}
    root_name = g.job(mine)["user"]
    assert set(rows) == {root_name, TEST_USER}, rows
    assert (rows[root_name]["jobs"], rows[root_name]["completed"]) == (1, 1)
    assert (rows[TEST_USER]["jobs"], rows[TEST_USER]["failed"]) == (2, 1)
    assert rows[TEST_USER]["failure_rate"] == 0.5
    s = stats(g, "-u", TEST_USER)
    assert [x["name"] for x in s["groups"]] == [TEST_USER] and s["total"]["jobs"] == 2
