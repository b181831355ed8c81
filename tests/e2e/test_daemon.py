"""gflowd's own commands: up/down/status/restart, --version/--help, configuration, and the
lock file's protection against signalling a recycled pid."""
import fcntl
import os
import re
import subprocess
import time

from conftest import (REPO, alive, assert_not_running, binary, read_pid_file, start_time,
                      wait_for)


def status_fields(text):
    return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


def test_up_twice_status_down(gflow):
    pid = gflow.daemon_pid()
    assert pid and alive(pid)

    # As gflow: starting what runs is no error (issue 29).
    cp = gflow.gflowd("up")
    assert cp.returncode == 0, cp
    assert cp.stdout.startswith("gflowd is already running.\n")
    assert f"PID: {pid}" in cp.stdout
    assert gflow.daemon_pid() == pid and gflow.health_ok()

    cp = gflow.gflowd("status")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines()[0] == "Status: Running"
    f = status_fields(cp.stdout)
    for key in ("Version", "PID", "Uptime", "Jobs"):
        assert key in f, cp.stdout
    version = (REPO / "VERSION").read_text().strip()
    assert f["Version"].split()[0] == version
    assert int(f["PID"]) == pid
    assert re.fullmatch(r"\s*\d\d:\d\d:\d\d", f["Uptime"]), f["Uptime"]  # HH:MM:SS

    gflow.submit("-H", "true")
    done = gflow.submit("exit 2")
    gflow.wait_state(done)
    jobs = dict(re.findall(r"\b(PD|H|R|CD|F|CA|TO) (\d+)", gflow.gflowd("status").stdout))
    assert jobs["H"] == "1" and jobs["F"] == "1" and jobs["R"] == "0", jobs

    cp = gflow.down()
    assert cp.returncode == 0, cp.stderr
    assert not alive(pid)
    assert not gflow.sock.exists()
    cp = gflow.gflowd("status")
    assert cp.returncode != 0
    assert cp.stdout.splitlines()[0] == "Status: Not running"
    cp = gflow.down()
    assert "not running" in cp.stdout + cp.stderr


def test_restart(gflow):
    old = gflow.daemon_pid()
    job = gflow.submit("-H", "true")
    cp = gflow.gflowd("restart")
    assert cp.returncode == 0, cp.stderr
    new = gflow.daemon_pid()
    assert new and new != old and not alive(old)
    assert gflow.gflowd("status").stdout.startswith("Status: Running\n")
    assert gflow.job(job)["state"] == "H"
    gflow.down()
    # restart of a stopped daemon starts it
    cp = gflow.gflowd("restart")
    assert cp.returncode == 0, cp.stderr
    assert gflow.health_ok()


def test_version_and_help(make_gflow):
    g = make_gflow(start=False)
    version = (REPO / "VERSION").read_text().strip()
    for flag in ("--version", "-V"):
        cp = g.gflowd(flag)
        assert cp.returncode == 0
        assert cp.stdout.startswith(f"gflowd {version}")
    for flag in ("--help", "-h"):
        cp = g.gflowd(flag)
        assert cp.returncode == 0
        for word in ("up", "down", "status", "restart", "run", "--config"):
            assert word in cp.stdout
    for prog in ("gbatch", "gqueue", "gjob", "gcancel"):
        cp = g.run(prog, "--version")
        assert cp.returncode == 0 and version in cp.stdout, prog
    cp = g.gflowd("frobnicate")
    assert cp.returncode != 0 and "frobnicate" in cp.stderr
    cp = g.gflowd()
    assert cp.returncode != 0 and cp.stderr.strip()
    # Nothing was started by any of these.
    assert g.lock_holder() is None


def test_cli_says_daemon_not_running(make_gflow):
    g = make_gflow(start=False)
    for prog, args in (("gqueue", ()), ("gbatch", ("true",)), ("gcancel", ("1",)),
                       ("gjob", ("show", "1"))):
        # One first line from every program, the details below it (issue 29).
        assert_not_running(g.run(prog, *args), "socket: ")


TRAP_JOB = "trap '' TERM; echo $$ > job.pid; while true; do sleep 0.05; done"


def cancel_takes(g):
    """Seconds from gcancel to CA for a job that ignores SIGTERM (= the kill grace)."""
    job = g.submit(TRAP_JOB)
    g.wait_state(job, "R")
    wait_for(lambda: read_pid_file(g.work / "job.pid"), "job.pid")
    (g.work / "job.pid").unlink()
    t0 = time.monotonic()
    g.run("gcancel", job, check=True)
    assert g.wait_state(job, timeout=15)["state"] == "CA"
    return time.monotonic() - t0


def test_config_file_is_used(make_gflow):
    g = make_gflow(start=False)
    conf = g.root / "custom.toml"
    conf.write_text("# test config\n[daemon]\nkill_grace_secs = 1\nmax_running_jobs = 3\n")
    g.up("-c", conf)
    assert "Max running jobs: 3" in g.gflowd("status").stdout
    # The file's 1 s grace, not the default 10 s (the upper bound leaves room for a slow
    # machine and still tells the two apart).
    assert 0.9 <= cancel_takes(g) < 8

    # Flags beat the file.
    g.down()
    g.up("-c", conf, "--max-running-jobs", "2")
    assert "Max running jobs: 2" in g.gflowd("status").stdout

    # A per-user daemon reads $XDG_CONFIG_HOME/gflow/gflow.toml by default (a root one
    # reads /etc/gflow/gflow.toml, which a test must not touch).
    if os.geteuid() != 0:
        g.down()
        default = g.root / "xdg-config" / "gflow" / "gflow.toml"
        default.parent.mkdir(parents=True)
        default.write_text("[daemon]\nmax_running_jobs = 7\n")
        g.up()
        assert "Max running jobs: 7" in g.gflowd("status").stdout


def test_config_errors(make_gflow):
    g = make_gflow(start=False)
    conf = g.root / "bad.toml"

    conf.write_text("[daemon]\nkill_grace_secs = 1\nbogus_key = 2\n")
    cp = g.gflowd("-c", conf, "up")
    assert cp.returncode != 0
    err = cp.stderr.strip()
    assert str(conf) in err and ":3" in err and "bogus_key" in err, err
    assert len(err.splitlines()) == 1

    conf.write_text("[daemon]\nkill_grace_secs = \"one\"\n")
    cp = g.gflowd("-c", conf, "up")
    assert cp.returncode != 0
    assert str(conf) in cp.stderr and ":2" in cp.stderr and "kill_grace_secs" in cp.stderr

    conf.write_text("[nosuchsection]\nx = 1\n")
    cp = g.gflowd("-c", conf, "up")
    assert cp.returncode != 0 and "nosuchsection" in cp.stderr

    conf.write_text("[daemon\nkill_grace_secs = 1\n")
    cp = g.gflowd("-c", conf, "up")
    assert cp.returncode != 0 and str(conf) in cp.stderr

    cp = g.gflowd("-c", g.root / "missing.toml", "up")
    assert cp.returncode != 0 and "missing.toml" in cp.stderr

    cp = g.gflowd("up", env={"GFLOW_DAEMON__KILL_GRACE_SECS": "abc"})
    assert cp.returncode != 0
    assert "GFLOW_DAEMON__KILL_GRACE_SECS" in cp.stderr and "abc" in cp.stderr

    cp = g.gflowd("up", env={"GFLOW_DAEMON__NO_SUCH_KEY": "1"})
    assert cp.returncode != 0 and "GFLOW_DAEMON__NO_SUCH_KEY" in cp.stderr

    cp = g.gflowd("--max-running-jobs", "-1", "up")
    # Named by the option typed, not by the config key it sets.
    assert cp.returncode != 0 and "--max-running-jobs must be" in cp.stderr

    # None of these left a daemon behind.
    assert g.lock_holder() is None
    assert g.gflowd("status").returncode != 0


def test_down_never_signals_a_recycled_pid(make_gflow):
    g = make_gflow(start=False)
    g.data.mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        real = start_time(sleeper.pid)
        lock = g.data / "gflowd.lock"
        lock.write_text(f"{sleeper.pid} {real + 12345}\n")

        # A stale lock file (nobody holds the lock) naming a live process.
        cp = g.down()
        assert "not running" in cp.stdout + cp.stderr
        assert g.gflowd("status").stdout.startswith("Status: Not running")
        assert sleeper.poll() is None, "gflowd down signalled an unrelated process"

        # Even while the lock is held, the wrong start time means it is not our daemon.
        with open(lock, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            cp = g.down()
            assert "not running" in cp.stdout + cp.stderr
            assert sleeper.poll() is None, "gflowd down signalled an unrelated process"
            cp = g.gflowd("restart")
            assert sleeper.poll() is None, "gflowd restart signalled an unrelated process"
            fcntl.flock(f, fcntl.LOCK_UN)
        if cp.returncode == 0:          # restart may start once the lock is free
            g.down()
        assert alive(sleeper.pid, real)

        # And a stale lock file does not keep a new daemon from starting.
        lock.write_text(f"{sleeper.pid} {real + 12345}\n")
        g.up()
        assert g.daemon_pid() != sleeper.pid
        assert g.health_ok()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_run_in_foreground(make_gflow):
    g = make_gflow(start=False)
    p = subprocess.Popen([binary("gflowd"), "run"], env=g.env, cwd=g.work,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: g.sock.exists() and g.health_ok(), "gflowd run to answer", timeout=10)
        assert g.daemon_pid() == p.pid
        job = g.submit("echo fg")
        assert g.wait_state(job)["state"] == "CD"
        p.terminate()
        assert p.wait(timeout=10) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
