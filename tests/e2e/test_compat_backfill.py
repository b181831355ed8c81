"""Backfill (issue 12, [scheduler] backfill): a job that waits for GPUs gets them reserved
from the time the running jobs' time limits free them, so a 4-GPU job is not overtaken
forever by a stream of 1-GPU jobs; a short job that ends before then still runs while the
big job waits. On the NVML simulator; jobs wait for a file so the test says when they end."""
from conftest import parse_show, wait_for


def wait_go(name):
    return f"while [ ! -e {name} ]; do sleep 0.02; done"


def sim(make_gflow, n=4, **env):
    env.setdefault("backfill", "true")  # the default since issue 30; said here all the same
    g = make_gflow(start=False, env={f"GFLOW_SCHEDULER__{k.upper()}": v for k, v in env.items()})
    g.up("--simulate-gpus", n)
    return g


def show(g, job_id):
    return parse_show(g.run("gjob", "show", job_id, check=True).stdout)[0]


def stream_against_big_job(g):
    """Four 1-GPU jobs run; a 4-GPU job waits ahead of a stream of 1-GPU jobs (all with
    time limits); the running ones end one by one, a new 1-GPU job coming after each.
    Returns (big job, stream jobs) once the big job has started."""
    running = [g.submit("-g", "1", "-t", "10:00", wait_go(f"go{k}")) for k in range(4)]
    for job in running:
        g.wait_state(job, "R")
    big = g.submit("-g", "4", "-t", "10:00", "true")
    stream = [g.submit("-g", "1", "-t", "10:00", wait_go("stream"))]
    for k, job in enumerate(running):
        (g.work / f"go{k}").touch()
        g.wait_state(job)
        stream.append(g.submit("-g", "1", "-t", "10:00", wait_go("stream")))
        if k < 3:
            # Greedy gives the freed GPU to the stream; the big job must not wait behind it.
            if g.job(big)["state"] != "PD":
                break
    return big, stream


def test_big_job_not_overtaken_by_stream(make_gflow):
    g = sim(make_gflow)
    big, stream = stream_against_big_job(g)
    done = g.wait_state(big)
    assert done["state"] == "CD", done
    # No 1-GPU job of the stream started before the big job did.
    for job in stream:
        j = g.job(job)
        assert j["state"] == "PD" or j["start_time"] >= done["start_time"], (j, done)
    # Then the stream runs (the big job is gone).
    g.wait_state(stream[0], "R")
    (g.work / "stream").touch()
    for job in stream:
        assert g.wait_state(job)["state"] == "CD"


def test_greedy_lets_the_stream_overtake(make_gflow):
    """The same with backfill = false: the freed GPUs go to the stream, the big job waits."""
    g = sim(make_gflow, backfill="false")
    big, stream = stream_against_big_job(g)
    wait_for(lambda: g.job(stream[0])["state"] == "R", "the stream to overtake the big job")
    assert g.job(big)["state"] == "PD"
    assert g.job(big)["expected_start"] is None
    assert "ExpectedStart" not in show(g, big)
    (g.work / "stream").touch()
    for k in range(4):
        (g.work / f"go{k}").touch()
    assert g.wait_state(big, timeout=20)["state"] == "CD"


def test_short_job_backfilled_while_big_job_waits(make_gflow):
    g = sim(make_gflow)
    a = g.submit("-g", "3", "-t", "10:00", wait_go("go"))
    started = g.wait_state(a, "R")["start_time"]
    big = g.submit("-g", "4", "-t", "10:00", "true")
    short = g.submit("-g", "1", "-t", "0:30", "true")  # ends long before the big job's start
    long_ = g.submit("-g", "1", "-t", "20:00", "true")  # would delay the big job
    unlimited = g.submit("-g", "1", "true")  # no --time: planned 24 h (no run history yet)
    assert g.wait_state(short)["state"] == "CD"
    b = g.job(big)
    assert b["state"] == "PD" and b["reason"] == "Resources", b
    # Expected when job a's time limit ends (the pass may run a little after it started).
    assert abs(b["expected_start"] - (started + 600)) < 1, (b, started)
    s = show(g, big)
    assert s["ExpectedStart"] not in ("", "-"), s
    for job in (long_, unlimited):
        j = g.job(job)
        assert j["state"] == "PD" and j["reason"] == "Priority", j
        # Not reserved (depth 1), but estimated (issue 30): after the big job's 10 min.
        assert abs(j["expected_start"] - (b["expected_start"] + 600)) < 1, (j, b)
        assert show(g, job)["ExpectedStart"] not in ("", "-")
    q = g.run("gqueue", "-f", "JOBID,ST,REASON", check=True).stdout
    assert any(l.split()[:3] == [str(long_), "PD", "Priority"] for l in q.splitlines()), q
    (g.work / "go").touch()
    for job in (a, big, long_, unlimited):
        assert g.wait_state(job, timeout=20)["state"] == "CD"


def test_gqueue_start_lists_expected_starts(make_gflow):
    """gqueue --start (squeue --start): queued jobs, the reserved one with its expected
    start first; held and running jobs are left out; a held job loses its plan."""
    g = sim(make_gflow, n=2, backfill_depth="2")
    a = g.submit("-g", "2", "-t", "10:00", wait_go("go"))
    started = g.wait_state(a, "R")["start_time"]
    first = g.submit("-g", "2", "-t", "5:00", "true")
    second = g.submit("-g", "1", "-t", "5:00", "true")
    third = g.submit("-d", a, "-g", "1", "true")  # waits for a: no plan (unknown)
    held = g.submit("-H", "-g", "1", "true")
    wait_for(lambda: g.job(second)["expected_start"] is not None, "depth 2's reservations")
    out = g.run("gqueue", "--start", check=True).stdout.splitlines()
    assert out[0].split() == ["JOBID", "NAME", "USER", "ST", "START_TIME", "NODES",
                              "NODELIST(REASON)"], out
    rows = [line.split() for line in out[1:]]
    assert [r[0] for r in rows] == [str(first), str(second), str(third)], out
    assert all(r[3] == "PD" for r in rows), out
    assert rows[2][4] == "-", out  # no reservation: unknown, listed last
    exp = [g.job(j)["expected_start"] for j in (first, second)]
    assert abs(exp[0] - (started + 600)) < 1 and abs(exp[1] - (exp[0] + 300)) < 1, exp
    # -r -start_time: latest expected start first, the unknown ones still last.
    out = g.run("gqueue", "--start", "-r", "-start_time", "-f", "JOBID", check=True).stdout
    assert out.split()[1:] == [str(second), str(first), str(third)], out
    # -o json carries the same field; a job that leaves the queue loses its plan.
    g.run("gjob", "hold", first, check=True)
    assert g.job(first)["expected_start"] is None
    cp = g.run("gqueue", "--start", "--completed")
    assert cp.returncode == 2 and "--start lists queued jobs" in cp.stderr, cp.stderr
    (g.work / "go").touch()
    g.run("gjob", "release", first, check=True)
    for job in (a, first, second, third):
        assert g.wait_state(job, timeout=20)["state"] == "CD"
    g.run("gcancel", held, check=True)


def test_untimed_job_planned_or_kept_outside(make_gflow):
    """A job without --time is backfilled as if it ran scheduler.default_time_limit
    (backfill_untimed = "planned", the default), or never onto reserved GPUs ("outside")."""
    for mode in ("planned", "outside"):
        g = sim(make_gflow, default_time_limit="1m", backfill_untimed=mode)
        a = g.submit("-g", "3", "-t", "10:00", wait_go("go"))
        g.wait_state(a, "R")
        big = g.submit("-g", "4", "-t", "10:00", "true")
        untimed = g.submit("-g", "1", "true")  # planned 1 minute: before the big job's start
        if mode == "planned":
            assert g.wait_state(untimed)["state"] == "CD"
        else:
            wait_for(lambda: g.job(untimed)["reason"] == "Priority", "the untimed job to wait")
        assert g.job(big)["reason"] == "Resources"
        (g.work / "go").touch()
        for job in (a, big, untimed):
            assert g.wait_state(job, timeout=20)["state"] == "CD"
        g.down()


def test_default_time_limit_plans_jobs_without_time(make_gflow):
    """A running job without --time is planned to run scheduler.default_time_limit."""
    g = sim(make_gflow, n=1, default_time_limit="2h", backfill_depth="2")
    a = g.submit("-g", "1", wait_go("go"))
    started = g.wait_state(a, "R")["start_time"]
    first = g.submit("-g", "1", "-t", "1:00:00", "true")
    second = g.submit("-g", "1", "-t", "10:00", "true")
    wait_for(lambda: g.job(second)["expected_start"] is not None, "depth 2's reservation")
    assert abs(g.job(first)["expected_start"] - (started + 7200)) < 1
    # The second one is planned after the first (its hour) on the only GPU.
    assert abs(g.job(second)["expected_start"] - (started + 7200 + 3600)) < 1
    (g.work / "go").touch()
    for job in (a, first, second):
        assert g.wait_state(job, timeout=20)["state"] == "CD"


def test_config_keys(make_gflow):
    g = make_gflow(start=False, env={"GFLOW_SCHEDULER__DEFAULT_TIME_LIMIT": "soon"})
    cp = g.gflowd("up")
    assert cp.returncode != 0
    assert "scheduler.default_time_limit: invalid duration 'soon'" in cp.stderr, cp.stderr
    g.env["GFLOW_SCHEDULER__DEFAULT_TIME_LIMIT"] = "1-00:00:00"
    g.env["GFLOW_SCHEDULER__BACKFILL_DEPTH"] = "0"
    cp = g.gflowd("up")
    assert cp.returncode != 0 and "scheduler.backfill_depth must be an integer > 0" in cp.stderr
    g.env["GFLOW_SCHEDULER__BACKFILL_DEPTH"] = "2"
    g.env["GFLOW_SCHEDULER__BACKFILL_UNTIMED"] = "never"
    cp = g.gflowd("up")
    assert cp.returncode != 0 and "scheduler.backfill_untimed" in cp.stderr, cp.stderr
    assert "planned" in cp.stderr and "outside" in cp.stderr, cp.stderr
    conf = g.root / "gflow.toml"
    g.gflowd("-c", conf, "init", check=True)
    text = conf.read_text()
    assert "[scheduler]" in text and "# backfill = true" in text, text
    assert '# default_time_plan = "p95"' in text, text
    assert "# backfill_depth = 1" in text and '# default_time_limit = "24h"' in text, text
    assert '# backfill_untimed = "planned"' in text, text


def test_reload_turns_backfill_off(make_gflow):
    """scheduler.backfill applies on reload: the job kept off the reserved GPUs starts."""
    g = make_gflow(start=False)
    conf = g.root / "gflow.toml"
    conf.write_text("[scheduler]\nbackfill = true\n")
    g.up("-c", conf, "--simulate-gpus", 2)
    a = g.submit("-g", "1", wait_go("go"))
    g.wait_state(a, "R")
    big = g.submit("-g", "2", "true")
    loose = g.submit("-g", "1", "true")  # no --time: may not take the reserved free GPU
    wait_for(lambda: g.job(loose)["reason"] == "Priority", "the job to wait behind the big one")
    assert g.job(big)["expected_start"] is not None
    conf.write_text("[scheduler]\nbackfill = false\n")
    out = g.gflowd("-c", conf, "reload", check=True)
    assert "scheduler.backfill" in out.stdout + out.stderr, out
    assert g.wait_state(loose)["state"] == "CD"
    assert g.job(big)["state"] == "PD" and g.job(big)["expected_start"] is None
    (g.work / "go").touch()
    assert g.wait_state(big, timeout=20)["state"] == "CD"
