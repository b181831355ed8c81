"""Running jobs through the real daemon: exit codes, scripts, environment, logs, cancel,
hold/release, priorities, time limits, and gqueue's views."""
import csv
import io
import json
import os
import re
import shutil
import subprocess
import threading
import time

from conftest import (alive, binary, parse_show, parse_table, read_pid_file, start_time,
                      wait_for)

# A job that waits until the test creates the file `go` in the job's working directory.
WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"


def one_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one line, got: {text!r}"
    return lines[0]


# ---------------------------------------------------------------- exit codes

def test_exit_codes_and_signal(gflow):
    ok = gflow.submit("exit 0")
    three = gflow.submit("exit 3")
    killed = gflow.submit("kill -9 $$")

    j = gflow.wait_state(ok)
    assert (j["state"], j["exit_code"], j["signal"]) == ("CD", 0, None)
    assert j["start_time"] and j["end_time"] >= j["start_time"]

    j = gflow.wait_state(three)
    assert (j["state"], j["exit_code"], j["signal"]) == ("F", 3, None)
    assert j["reason"] == "NonZeroExitCode"

    j = gflow.wait_state(killed)
    assert j["state"] == "F"
    assert j["exit_code"] is None
    assert j["signal"] == 9 and j["signal_name"] == "SIGKILL"
    # Its reason: Signal, then (failure triage, issue 30) its class once its log is read.
    assert j["reason"] in ("Signal", "Killed (SIGKILL)")
    wait_for(lambda: gflow.job(killed)["failure_class"] == "Killed (SIGKILL)",
             "the killed job's failure class")
    assert gflow.job(killed)["reason"] == "Killed (SIGKILL)"

    # gqueue tells the exit code from the signal.
    rows = parse_table(gflow.run("gqueue", "-a", "-f", "JOBID,ST,EXITCODE", check=True).stdout)
    by_id = {int(r["JOBID"]): (r["ST"], r["EXITCODE"]) for r in rows}
    assert by_id == {ok: ("CD", "0"), three: ("F", "3"), killed: ("F", "SIGKILL")}

    shown = parse_show(gflow.run("gjob", "show", three, killed, check=True).stdout)
    assert len(shown) == 2
    s3, sk = shown
    assert s3["ID"] == str(three) and sk["ID"] == str(killed)
    assert s3["ExitCode"] == "3" and "Signal" not in s3
    assert s3["Reason"] == "NonZeroExitCode"
    assert "ExitCode" not in sk and "SIGKILL" in sk["Signal"]
    assert sk["Reason"] == "Killed (SIGKILL)"

    j = json.loads(gflow.run("gjob", "show", "-o", "json", killed, check=True).stdout)
    j = j[0] if isinstance(j, list) else j
    assert (j["exit_code"], j["signal_name"]) == (None, "SIGKILL")


# ---------------------------------------------------------------- scripts

SCRIPT = """#!/bin/bash
# GFLOW --name=from-directive
# GFLOW --priority 20
# GFLOW --time 1:00
echo "script ran as $GFLOW_JOB_NAME"
"""


def test_script_directives_and_command_line_wins(gflow):
    path = gflow.work / "train.sh"
    path.write_text(SCRIPT)

    a = gflow.submit("train.sh")
    j = gflow.wait_state(a)
    assert j["state"] == "CD", j
    assert j["name"] == "from-directive"
    assert j["priority"] == 20
    assert j["time_limit"] == 60
    assert j["script_path"] and j["script_path"].endswith("train.sh")
    assert j["command"] is None
    assert gflow.log(a) == "script ran as from-directive\n"

    b = gflow.submit("-p", "30", "--name", "from-cli", "-t", "2:00", "train.sh")
    j = gflow.wait_state(b)
    assert (j["name"], j["priority"], j["time_limit"]) == ("from-cli", 30, 120)
    assert gflow.log(b) == "script ran as from-cli\n"

    # Only the name given on the command line: the other directives still apply.
    c = gflow.submit("-J", "only-name", "train.sh")
    j = gflow.job(c)
    assert (j["name"], j["priority"], j["time_limit"]) == ("only-name", 20, 60)


def test_stdin_script_is_stored(gflow):
    path = gflow.work / "piped.sh"
    text = "#!/bin/bash\n# GFLOW --name=piped\necho piped-ok\n"
    path.write_text(text)

    # `gbatch < script` (no arguments), held so the file can be deleted before it runs.
    with open(path) as f:
        cp = subprocess.run([binary("gbatch"), "--parsable", "-H"], stdin=f, cwd=gflow.work,
                            env=gflow.env, capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    a = int(cp.stdout)
    # `gbatch -` with the script on stdin.
    b = gflow.submit("-H", "-", input=text.replace("piped", "dash"))
    path.unlink()

    for job_id, name in ((a, "piped"), (b, "dash")):
        j = gflow.job(job_id)
        assert j["state"] == "H"
        assert j["name"] == name
        assert j["script_path"] == "-"
        assert "echo " + name + "-ok" in j["script"]
        gflow.run("gjob", "release", job_id, check=True)
        j = gflow.wait_state(job_id)
        assert j["state"] == "CD", j
        assert gflow.log(job_id) == name + "-ok\n"
    # Nothing left behind in the sandbox's work dir by gbatch.
    assert list(gflow.work.iterdir()) == []


# ---------------------------------------------------------------- environment and logs

def test_job_environment_and_workdir(gflow):
    proj = gflow.work / "my project"
    proj.mkdir()
    cmd = ('echo "ID=$GFLOW_JOB_ID"; echo "NAME=$GFLOW_JOB_NAME"; '
           'echo "CVD=[${CUDA_VISIBLE_DEVICES-unset}]"; echo "ORDER=$CUDA_DEVICE_ORDER"; '
           'echo "PYU=${PYTHONUNBUFFERED-unset}"; echo "MINE=$E2E_MY_VAR"; echo "PWD=$(pwd)"')
    # The submitter's own values of the variables the daemon sets must not leak through.
    env = {"E2E_MY_VAR": "hello world", "CUDA_VISIBLE_DEVICES": "0", "GFLOW_JOB_ID": "999",
           "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    env_job = gflow.submit("-J", "envjob", cmd, cwd=proj, env=env)
    j = gflow.wait_state(env_job)
    assert j["state"] == "CD", j
    assert j["workdir"] == str(proj)
    lines = dict(l.split("=", 1) for l in gflow.log(env_job).splitlines())
    assert lines == {
        "ID": str(env_job), "NAME": "envjob", "CVD": "[]", "ORDER": "PCI_BUS_ID",
        "PYU": "1", "MINE": "hello world", "PWD": str(proj),
    }


def test_logs_first_last_and_latest(gflow):
    job = gflow.submit("seq 1 10")
    gflow.wait_state(job)
    whole = "".join(f"{i}\n" for i in range(1, 11))
    assert gflow.run("gjob", "log", job, check=True).stdout == whole
    for flag in ("--first", "-f"):
        assert gflow.run("gjob", "log", flag, "3", job, check=True).stdout == "1\n2\n3\n"
    for flag in ("--last", "-l"):
        assert gflow.run("gjob", "log", flag, "2", job, check=True).stdout == "9\n10\n"

    other = gflow.submit("echo latest")
    gflow.wait_state(other)
    assert gflow.run("gjob", "log", "@", check=True).stdout == "latest\n"
    assert gflow.run("gjob", "log", "@~1", check=True).stdout == whole

    log_file = gflow.data / "logs" / f"{job}.log"
    assert (os.stat(log_file).st_mode & 0o777) == 0o600

    cp = gflow.run("gjob", "log", "424242")
    assert cp.returncode != 0
    assert "424242" in one_line(cp.stderr)


def test_log_follow_streams_until_job_ends(gflow):
    job = gflow.submit(f"echo one; {WAIT_GO}; echo two")
    gflow.wait_state(job, "R")
    p = subprocess.Popen([binary("gjob"), "log", "--follow", str(job)], cwd=gflow.work,
                         env=gflow.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        got = []
        reader = threading.Thread(target=lambda: got.extend(iter(p.stdout.readline, b"")))
        reader.start()
        # The first line arrives while the job still runs, and follow keeps going.
        wait_for(lambda: got[:1] == [b"one\n"], "the first line through --follow", timeout=10)
        assert p.poll() is None, "follow ended while the job was still running"
        assert gflow.job(job)["state"] == "R"
        (gflow.work / "go").touch()
        assert p.wait(timeout=10) == 0, p.stderr.read()
        reader.join(timeout=5)
        assert got == [b"one\n", b"two\n"]
        assert gflow.job(job)["state"] == "CD"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# ---------------------------------------------------------------- cancel

def test_cancel_kills_process_group_and_setsid_grandchild(gflow):
    cmd = ("sleep 300 & echo $! > child.pid; setsid sleep 300 & echo $! > gc.pid; "
           "echo $$ > job.pid; wait")
    job = gflow.submit(cmd)
    gflow.wait_state(job, "R")
    pids = {}
    for name in ("job.pid", "child.pid", "gc.pid"):
        pid = wait_for(lambda: read_pid_file(gflow.work / name), name)
        pids[name] = (pid, start_time(pid))
    gc_pid, gc_start = pids["gc.pid"]
    # Wait until setsid has exec'd sleep: then the grandchild has its own session.
    wait_for(lambda: open(f"/proc/{gc_pid}/comm").read().strip() == "sleep",
             "the setsid grandchild to exec sleep")
    assert os.getsid(gc_pid) != os.getsid(pids["job.pid"][0])
    for pid, st in pids.values():
        assert alive(pid, st)

    cp = gflow.run("gcancel", job)
    assert cp.returncode == 0, cp.stderr
    assert one_line(cp.stdout) == f"Job {job} cancelling (SIGTERM sent; CG until it has stopped)."
    j = gflow.wait_state(job)
    assert j["state"] == "CA"
    assert j["reason"] == "CancelledByUser"
    for name, (pid, st) in pids.items():
        wait_for(lambda: not alive(pid, st), f"{name} ({pid}) to be killed", timeout=5)


def test_cancel_of_finished_unknown_and_dry_run(gflow):
    done = gflow.submit("true")
    gflow.wait_state(done)
    for target in (str(done), "987654"):
        cp = gflow.run("gcancel", target)
        assert cp.returncode != 0
        out = cp.stdout + cp.stderr
        assert "cancelled" not in out.lower(), out
        assert target in one_line(cp.stderr)
    assert gflow.job(done)["state"] == "CD"

    held = gflow.submit("-H", "true")
    running = gflow.submit(WAIT_GO)
    gflow.wait_state(running, "R")
    cp = gflow.run("gcancel", "--dry-run", held)
    assert cp.returncode == 0, cp.stderr
    cp = gflow.run("gcancel", "--dry-run", running)
    assert cp.returncode == 0, cp.stderr
    # A held job would become CA at once; a running one would be marked cancelling.
    assert gflow.job(held)["state"] == "H"
    assert gflow.job(running)["state"] == "R"
    r = gflow.api("POST", f"/v1/jobs/{running}/cancel?dry_run=1")
    assert r.status == 200 and not r.json().get("cancelling"), r
    (gflow.work / "go").touch()
    assert gflow.wait_state(running)["state"] == "CD"
    assert gflow.job(held)["state"] == "H"


def test_cancel_escalates_to_sigkill_after_grace(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__KILL_GRACE_SECS": "1"})
    job = g.submit("trap '' TERM; echo $$ > job.pid; while true; do sleep 0.05; done")
    pid = wait_for(lambda: read_pid_file(g.work / "job.pid"), "job.pid")
    st = start_time(pid)
    t0 = time.monotonic()
    g.run("gcancel", job, check=True)
    j = g.wait_state(job, timeout=20)
    took = time.monotonic() - t0
    assert j["state"] == "CA", j
    # The 1 s grace, not the default 10 s: the bound leaves a slow machine room.
    assert 0.9 <= took < 8, f"cancel of a SIGTERM-ignoring job took {took:.2f}s (grace 1s)"
    assert j["end_time"] - j["start_time"] >= 0.9
    wait_for(lambda: not alive(pid, st), "the job shell to be SIGKILLed", timeout=5)


# ---------------------------------------------------------------- hold / release

def test_hold_and_release(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__MAX_RUNNING_JOBS": "1"})
    held = g.submit("-H", "touch ran-held")
    j = g.job(held)
    assert (j["state"], j["reason"]) == ("H", "JobHeldUser")
    gq = parse_table(g.run("gqueue", check=True).stdout)
    assert [(r["JOBID"], r["ST"], r["NODELIST(REASON)"]) for r in gq] == \
        [(str(held), "H", "(JobHeldUser)")]

    blocker = g.submit(WAIT_GO)
    g.wait_state(blocker, "R")
    queued = g.submit("touch ran-queued")
    assert g.job(queued)["state"] == "PD"

    cp = g.run("gjob", "hold", blocker)
    assert cp.returncode != 0
    line = one_line(cp.stderr)
    assert str(blocker) in line and ("Running" in line or "(R)" in line), line
    assert g.job(blocker)["state"] == "R"

    cp = g.run("gjob", "hold", queued)
    assert (cp.returncode, cp.stdout) == (0, f"Job {queued} put on hold.\n"), cp.stderr
    assert g.job(queued)["state"] == "H"
    cp = g.run("gjob", "hold", queued)
    assert cp.returncode != 0, "holding a held job must be refused"

    cp = g.run("gjob", "release", held)
    assert (cp.returncode, cp.stdout) == (0, f"Job {held} released back to queue.\n"), cp.stderr
    cp = g.run("gjob", "release", held)
    assert cp.returncode != 0, "releasing a queued job must be refused"

    (g.work / "go").touch()
    assert g.wait_state(held)["state"] == "CD"
    assert (g.work / "ran-held").exists()
    # Still held: it never ran even though the slot was free.
    assert g.job(queued)["state"] == "H"
    assert not (g.work / "ran-queued").exists()
    g.run("gjob", "release", queued, check=True)
    assert g.wait_state(queued)["state"] == "CD"
    assert (g.work / "ran-queued").exists()


def test_several_ids_in_one_command(gflow):
    """One CLI process, several requests on one keep-alive connection (regression: the
    second request after a state change used to wait 120 s)."""
    a = gflow.submit("-H", "true")
    b = gflow.submit("-H", "true")
    c = gflow.submit("-H", "true")
    cp = gflow.run("gjob", "release", a, b, timeout=5)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == f"Job {a} released back to queue.\nJob {b} released back to queue.\n"
    cp = gflow.run("gcancel", f"{c},{c + 1000}", timeout=5)
    assert cp.returncode != 0
    assert cp.stdout == f"Job {c} cancelled.\n"
    assert str(c + 1000) in one_line(cp.stderr)
    assert gflow.job(c)["state"] == "CA"
    assert gflow.wait_state(a)["state"] == "CD" and gflow.wait_state(b)["state"] == "CD"


# ---------------------------------------------------------------- priorities

def test_priority_order_with_one_slot(make_gflow):
    g = make_gflow(args=("--max-running-jobs", "1"))
    blocker = g.submit(WAIT_GO)
    g.wait_state(blocker, "R")
    low = g.submit("-p", "5", "true")
    high = g.submit("-p", "50", "true")
    mid1 = g.submit("-p", "10", "true")
    mid2 = g.submit("-p", "10", "true")
    default = g.submit("true")                        # default priority 10, submitted last

    for job in (low, high, mid1, mid2, default):
        j = g.job(job)
        assert j["state"] == "PD" and j["reason"], j
    rows = parse_table(g.run("gqueue", "-s", "PD", check=True).stdout)
    assert len(rows) == 5
    for r in rows:
        assert re.fullmatch(r"\(\w+\)", r["NODELIST(REASON)"]), r

    (g.work / "go").touch()
    jobs = [g.wait_state(j) for j in (low, high, mid1, mid2, default)]
    assert all(j["state"] == "CD" for j in jobs), jobs
    order = [j["id"] for j in sorted(jobs, key=lambda j: j["start_time"])]
    assert order == [high, mid1, mid2, default, low]
    assert g.job(default)["priority"] == 10


# ---------------------------------------------------------------- time limits

def test_time_limit_gives_timeout(gflow):
    job = gflow.submit("--time", "0:02", "sleep 100")
    j = gflow.job(job)
    assert j["time_limit"] == 2
    j = gflow.wait_state(job, timeout=15)
    assert j["state"] == "TO", j
    assert j["reason"] == "TimeLimit"
    ran = j["end_time"] - j["start_time"]
    # Ended by the 2 s limit's timer (sleep 100 would run on): the upper bound leaves a
    # slow machine room, not a poll of several seconds.
    assert 2.0 <= ran < 5, f"ran {ran:.3f}s with a 2s limit"


def test_bad_time_is_refused(gflow):
    for bad in ("abc", "1:99", "-5", "0", "1:2:3:4", "1-", "5x", ""):
        cp = gflow.run("gbatch", "--time", bad, "true")
        assert cp.returncode != 0, bad
        line = one_line(cp.stderr)
        assert "time" in line.lower(), line
        assert cp.stdout == ""
    assert gflow.jobs() == []
    # The accepted forms (held, so nothing runs).
    for good, secs in (("90", 5400), ("1:30", 90), ("1:00:00", 3600), ("1-02:00:00", 93600)):
        assert gflow.job(gflow.submit("-H", "-t", good, "true"))["time_limit"] == secs, good


# ---------------------------------------------------------------- gqueue

def ids_of(cp):
    assert cp.returncode == 0, cp.stderr
    return [int(r["JOBID"]) for r in parse_table(cp.stdout)]


def test_gqueue_views(gflow):
    cp = gflow.run("gqueue")
    assert cp.returncode == 0 and cp.stdout.strip() == "No jobs found.", cp
    cp = gflow.run("gqueue", "-a")
    assert cp.stdout.strip() == "No jobs found."

    done = gflow.submit("-J", "bravo", "true")
    failed = gflow.submit("-J", "delta", "exit 1")
    gflow.wait_state(done)
    gflow.wait_state(failed)
    held = gflow.submit("-H", "-J", "alpha", "true")
    running = gflow.submit("-J", "charlie", WAIT_GO)
    gflow.wait_state(running, "R")
    held2 = gflow.submit("-H", "-J", "echo", "-p", "99", "true")
    everyone = [done, failed, held, running, held2]

    assert ids_of(gflow.run("gqueue")) == [held, running, held2]
    assert ids_of(gflow.run("gqueue", "-a")) == everyone
    assert ids_of(gflow.run("gqueue", "-c")) == [done, failed]
    assert ids_of(gflow.run("gqueue", "-s", "R,PD")) == [running]
    assert ids_of(gflow.run("gqueue", "-s", "Hold")) == [held, held2]
    assert ids_of(gflow.run("gqueue", "-j", f"{done},{held}-{running}")) == [done, held, running]
    assert ids_of(gflow.run("gqueue", "-a", "-n", "2")) == [done, failed]
    assert ids_of(gflow.run("gqueue", "-a", "-n", "-2")) == [running, held2]
    assert ids_of(gflow.run("gqueue", "-a", "-r", "-id")) == everyone[::-1]
    assert ids_of(gflow.run("gqueue", "-a", "-r", "name")) == [held, done, running, failed, held2]
    assert ids_of(gflow.run("gqueue", "-a", "-r", "-priority"))[0] == held2

    cp = gflow.run("gqueue", "-a", "-f", "JOBID,NAME,ST,PRIORITY", check=True)
    lines = cp.stdout.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "ST", "PRIORITY"]
    assert lines[1].split() == [str(done), "bravo", "CD", "10"]
    assert lines[5].split() == [str(held2), "echo", "H", "99"]

    cp = gflow.run("gqueue", "-a", "-o", "json", check=True)
    doc = json.loads(cp.stdout)
    data = doc["jobs"]
    assert doc["total"] == len(everyone)
    assert [j["id"] for j in data] == everyone
    assert {j["id"]: j["state"] for j in data} == {
        done: "Finished", failed: "Failed", held: "Hold", running: "Running", held2: "Hold"}
    assert {j["id"]: j["st"] for j in data} == {
        done: "CD", failed: "F", held: "H", running: "R", held2: "H"}

    cp = gflow.run("gqueue", "-a", "-o", "csv", check=True)  # gflow's columns
    rows = list(csv.reader(io.StringIO(cp.stdout)))
    assert rows[0] == ["id", "name", "state", "time", "gpus", "user", "submitted_at", "reason"]
    assert [int(r[0]) for r in rows[1:]] == everyone
    assert rows[2][1:3] == ["delta", "Failed"]
    cp = gflow.run("gqueue", "-a", "-o", "csv-v0", check=True)  # the table's columns
    rows = list(csv.reader(io.StringIO(cp.stdout)))
    assert rows[0] == ["JOBID", "NAME", "ST", "TIME", "NODES", "NODELIST(REASON)"]
    assert [int(r[0]) for r in rows[1:]] == everyone
    assert rows[2][1:3] == ["delta", "F"]

    cp = gflow.run("gqueue", "-s", "TO")
    assert cp.returncode == 0 and cp.stdout.strip() == "No jobs found."

    for bad in (["-s", "XX"], ["-o", "xml"], ["-f", "NOPE"], ["--bogus"]):
        cp = gflow.run("gqueue", *bad)
        assert cp.returncode != 0, bad
        one_line(cp.stderr)

    (gflow.work / "go").touch()
    gflow.wait_state(running)


# ---------------------------------------------------------------- failures and edge cases

def test_launch_failures_and_missing_command(make_gflow):
    g = make_gflow()
    missing = g.submit("nosuchcmd_e2e_xyz")
    (g.work / "notexec.sh").write_text("#!/bin/sh\necho ran\n")
    (g.work / "notexec.sh").chmod(0o644)
    not_exec = g.submit("./notexec.sh now")  # a command: the file alone would be a script
    # 127 from a command that was found (a builtin, a program) is the job's own status.
    builtin = g.submit("exit 127")
    own = g.submit("sh -c 'exit 127'")
    gone = g.work / "gone"
    gone.mkdir()
    no_dir = g.submit("-H", "pwd", cwd=gone)
    gone.rmdir()
    g.run("gjob", "release", no_dir, check=True)

    j = g.wait_state(missing)
    assert (j["state"], j["exit_code"], j["reason"]) == (
        "F", 127, "LaunchFailed: command not found: nosuchcmd_e2e_xyz"), j
    assert "nosuchcmd_e2e_xyz: command not found" in g.log(missing)

    j = g.wait_state(not_exec)
    assert (j["state"], j["exit_code"], j["reason"]) == (
        "F", 126, "LaunchFailed: not executable: ./notexec.sh"), j
    assert "ran" not in g.log(not_exec)

    for job in (builtin, own):
        j = g.wait_state(job)
        assert (j["state"], j["exit_code"], j["reason"]) == ("F", 127, "NonZeroExitCode"), j

    j = g.wait_state(no_dir)
    assert (j["state"], j["exit_code"]) == ("F", 125), j
    assert j["reason"].startswith("LaunchFailed") and str(gone) in j["reason"], j
    assert g.health_ok()


def test_shim_failures_without_an_exit_file_keep_their_reason(gflow):
    """A shim that cannot start the job leaves its reason in the job's lock file, and the
    daemon reports it (LaunchFailed). The exit record goes into the lock file: the
    exits directory of the shims of previous versions is not needed."""
    exits = gflow.data / "exits"
    shutil.rmtree(exits)
    exits.write_text("not a directory")
    ran = gflow.submit("echo ran")
    j = gflow.wait_state(ran)
    assert (j["state"], j["exit_code"]) == ("CD", 0), j
    assert gflow.log(ran) == "ran\n"

    logs = gflow.data / "logs"
    shutil.rmtree(logs)
    logs.write_text("not a directory")  # and no log can be opened: the job cannot start
    never = gflow.submit("echo never")
    j = gflow.wait_state(never)
    assert j["state"] == "F", j
    assert j["reason"].startswith(f"LaunchFailed: cannot open log {logs}/{never}.log"), j
    assert gflow.health_ok()


def test_time_limit_on_job_ignoring_sigterm(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__KILL_GRACE_SECS": "1"})
    job = g.submit("-t", "0:01", "trap '' TERM; echo $$ > job.pid; while true; do sleep 0.05; done")
    pid = wait_for(lambda: read_pid_file(g.work / "job.pid"), "job.pid")
    st = start_time(pid)
    j = g.wait_state(job, timeout=20)
    assert (j["state"], j["reason"]) == ("TO", "TimeLimit"), j
    assert j["signal_name"] == "SIGKILL" and j["exit_code"] is None, j
    ran = j["end_time"] - j["start_time"]
    # 1 s limit + the 1 s grace, not the default 10 s grace: room for a slow machine.
    assert 1.9 <= ran < 7, f"ran {ran:.3f}s with a 1s limit and a 1s grace"
    assert not alive(pid, st)


def test_cancel_queued_job_is_immediate(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__MAX_RUNNING_JOBS": "1"})
    blocker = g.submit(WAIT_GO)
    g.wait_state(blocker, "R")
    queued = g.submit("touch ran")
    cp = g.run("gcancel", queued)
    assert (cp.returncode, cp.stdout) == (0, f"Job {queued} cancelled.\n"), cp.stderr
    j = g.job(queued)
    assert (j["state"], j["reason"], j["start_time"]) == ("CA", "CancelledByUser", None), j
    (g.work / "go").touch()
    g.wait_state(blocker)
    assert g.job(queued)["state"] == "CA"
    assert not (g.work / "ran").exists()


def test_follow_of_finished_job_prints_log_and_returns(gflow):
    job = gflow.submit("printf 'a\\nb\\n'")
    gflow.wait_state(job)
    cp = gflow.run("gjob", "log", "--follow", job, timeout=10)
    assert (cp.returncode, cp.stdout) == (0, "a\nb\n"), cp.stderr
