"""Starvation-free by default (issue 30): backfill with a reservation for the first blocked
job is on with no scheduler keys, jobs without --time are planned at
daemon.default_time_plan (a percentile of recent run times, or a duration), every waiting
job has an expected start, and make install installs gflow-replay. On the NVML
simulator; jobs wait for a file where the test must say when they end."""
import json
import subprocess
import time

from conftest import BUILD_DIR, assert_one_line_error, parse_show, wait_for


def wait_go(name):
    return f"while [ ! -e {name} ]; do sleep 0.02; done"


def sim(make_gflow, n=4, env=None):
    """A daemon with the default config (no scheduler keys) on n simulated GPUs."""
    g = make_gflow(start=False, env=env or {})
    g.up("--simulate-gpus", n)
    return g


def show(g, job_id):
    return parse_show(g.run("gjob", "show", job_id, check=True).stdout)[0]


def queue_json(g):
    out = json.loads(g.run("gqueue", "-o", "json", check=True).stdout)
    return {j["id"]: j for j in (out["jobs"] if isinstance(out, dict) else out)}


def test_big_job_starts_behind_a_stream_with_the_default_config(make_gflow):
    """A 4-GPU job behind a stream of 2-s 1-GPU jobs with --time on 4 GPUs, a submitter
    keeping the GPUs busy: greedy let it wait for ever (issue 30 measured > 40 s); the
    default now reserves the GPUs for it when the running jobs' limits free them."""
    g = sim(make_gflow)
    length = 2.0
    stream = [g.submit("-g", "1", "-t", "0:10", f"sleep {length}") for _ in range(6)]
    wait_for(lambda: sum(g.job(j)["state"] == "R" for j in stream) == 4, "4 stream jobs to run")
    big = g.submit("-g", "4", "-t", "0:10", "true")
    submitted = g.job(big)["submit_time"]
    after = []
    deadline = time.monotonic() + 8 * length + 10
    while g.job(big)["state"] == "PD":
        assert time.monotonic() < deadline, ("the 4-GPU job still waits", g.job(big))
        waiting = sum(g.job(j)["state"] == "PD" for j in stream + after)
        if waiting < 4:  # keep the stream coming
            after.append(g.submit("-g", "1", "-t", "0:10", f"sleep {length}"))
        time.sleep(0.05)
    done = g.wait_state(big, timeout=20)
    assert done["state"] == "CD", done
    # Within a few of the stream's lengths: the running jobs end, then it starts.
    assert done["start_time"] - submitted < 4 * length + 3, (done, submitted)
    # No stream job submitted after it started before it.
    for job in after:
        j = g.job(job)
        assert j["state"] == "PD" or j["start_time"] >= done["start_time"], (j, done)
    for job in stream + after:
        assert g.wait_state(job, timeout=30)["state"] == "CD"


def test_every_waiting_job_has_an_expected_start(make_gflow):
    """Not only the reserved job: every job waiting for GPUs (or behind them), in queue
    order, in the API, gqueue -o json, gqueue --start and gjob show. A held job and one
    whose dependencies are not met have none; a --begin job's is its begin time."""
    g = sim(make_gflow, n=2)
    a = g.submit("-g", "2", "-t", "10:00", wait_go("go"))
    started = g.wait_state(a, "R")["start_time"]
    big = g.submit("-g", "2", "-t", "5:00", "true")  # reserved: when a's limit ends
    one = g.submit("-g", "1", "-t", "5:00", "true")  # after big (no hole filling)
    untimed = g.submit("-g", "1", "true")  # planned at default_time_plan (24 h: no history)
    two = g.submit("-g", "2", "-t", "1:00", "true")
    cpu = g.submit("-t", "1:00", "true")  # no GPUs: starts now
    held = g.submit("-H", "-g", "1", "true")
    dep = g.submit("-d", str(a), "-g", "1", "true")
    begin = g.submit("--begin", "+1h", "-g", "1", "true")
    g.wait_state(cpu)
    waiting = [big, one, untimed, two]
    wait_for(lambda: all(g.job(j)["expected_start"] is not None for j in waiting),
             "expected starts for every waiting job")
    exp = {j: g.job(j)["expected_start"] for j in waiting}
    assert abs(exp[big] - (started + 600)) < 1, (exp, started)
    assert abs(exp[one] - (exp[big] + 300)) < 1, exp  # after big, which ends in 5 min
    assert abs(exp[untimed] - (exp[big] + 300)) < 1, exp  # the other GPU
    # two needs both GPUs: when one (5 min) and untimed (planned 24 h) are done.
    assert abs(exp[two] - (exp[untimed] + 24 * 3600)) < 1, exp
    assert g.job(held)["expected_start"] is None
    assert g.job(dep)["expected_start"] is None
    b = g.job(begin)
    assert b["expected_start"] == b["begin_time"], b
    q = queue_json(g)
    for j in waiting:
        assert q[j]["expected_start"] == exp[j], (q[j], exp[j])
        assert show(g, j)["ExpectedStart"] not in ("", "-"), show(g, j)
    assert "ExpectedStart" not in show(g, held)
    rows = [l.split() for l in g.run("gqueue", "--start", check=True).stdout.splitlines()[1:]]
    starts = {int(r[0]): r[4] for r in rows}
    for j in waiting:
        assert starts[j] != "-", rows
    (g.work / "go").touch()
    for job in (a, big, one, untimed, two):
        assert g.wait_state(job, timeout=30)["state"] == "CD"


def untimed_plan_of(g):
    """How long the daemon plans an untimed running job: a 1-GPU untimed job runs on the
    only GPU, a 1-GPU job waits; its expected start is the running job's planned end."""
    a = g.submit("-g", "1", wait_go("go"))
    started = g.wait_state(a, "R")["start_time"]
    b = g.submit("-g", "1", "-t", "1:00", "true")
    wait_for(lambda: g.job(b)["expected_start"] is not None, "b's expected start")
    plan = g.job(b)["expected_start"] - started
    (g.work / "go").touch()
    g.wait_state(a)
    g.wait_state(b)
    (g.work / "go").unlink()
    return plan


def test_default_time_plan_is_a_percentile_of_recent_runs(make_gflow):
    """p95 (the default): 24 h (scheduler.default_time_limit) until 20 jobs have ended,
    then the 95th percentile of their run times; the history survives a restart."""
    g = sim(make_gflow, n=1)
    assert abs(untimed_plan_of(g) - 24 * 3600) < 2
    jobs = [g.submit("sleep 0.3") for _ in range(25)]
    for j in jobs:
        assert g.wait_state(j, timeout=30)["state"] == "CD"
    plan = untimed_plan_of(g)
    assert 1 <= plan < 30, plan
    g.down()
    g.up("--simulate-gpus", 1)
    assert untimed_plan_of(g) < 30  # read back from the store


def test_default_time_plan_fixed_duration(make_gflow):
    g = sim(make_gflow, n=1, env={"GFLOW_DAEMON__DEFAULT_TIME_PLAN": "01:30:00"})
    assert abs(untimed_plan_of(g) - 5400) < 2


def test_default_time_plan_is_checked_at_load(make_gflow):
    g = make_gflow(start=False)
    conf = g.root / "bad.toml"
    for bad in ("p0", "p101", "px", "p95.5", "tomorrow", ""):
        conf.write_text(f'[daemon]\ndefault_time_plan = "{bad}"\n')
        cp = g.gflowd("-c", conf, "up")
        assert_one_line_error(cp, "gflowd", 1, "default_time_plan", "p95", "24h")
    cp = g.gflowd("up", env={**g.env, "GFLOW_DAEMON__DEFAULT_TIME_PLAN": "soon"})
    assert_one_line_error(cp, "gflowd", 1, "default_time_plan", "soon")
    conf.write_text('[daemon]\ndefault_time_plan = "p50"\n')
    g.up("-c", conf)


def test_greedy_still_one_key_away(make_gflow):
    """scheduler.backfill = false: the old greedy pass, no expected starts."""
    g = sim(make_gflow, n=1, env={"GFLOW_SCHEDULER__BACKFILL": "false"})
    a = g.submit("-g", "1", "-t", "10:00", wait_go("go"))
    g.wait_state(a, "R")
    b = g.submit("-g", "1", "-t", "1:00", "true")
    wait_for(lambda: g.job(b)["reason"] == "Resources", "b to wait")
    assert g.job(b)["expected_start"] is None
    (g.work / "go").touch()
    assert g.wait_state(b)["state"] == "CD"


def test_install_puts_gflow_replay_in_bin(tmp_path):
    dest = tmp_path / "dest"
    cp = subprocess.run(["meson", "install", "-C", str(BUILD_DIR), "--no-rebuild", "--quiet",
                         "--destdir", str(dest)], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    found = list(dest.rglob("bin/gflow-replay"))
    assert len(found) == 1, sorted(str(p) for p in dest.rglob("bin/*"))
    help_ = subprocess.run([str(found[0]), "--help"], capture_output=True, text=True, timeout=20)
    assert help_.returncode == 0 and "Installed with gflowd" in help_.stdout, help_
    assert list(dest.rglob("man1/gflow-replay.1")), "no man page"
