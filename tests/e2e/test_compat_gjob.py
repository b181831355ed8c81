"""gjob as gflow users know it (issue 11): gjob show prints every field of -o json under
gflow's names (in gflow's grouped layout since issue 29: tests/e2e/test_gflow_show.py), gjob update and redo take gflow's flags, and gjob log says when a job has
not started and --follow ends with the job's state and exit code."""
import json
import subprocess

from conftest import binary, parse_show, wait_for

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"

# Every field of `gjob show -o json` and the `gjob show` line that shows it. A field the
# daemon starts sending fails test_show_covers_every_json_field until gjob show prints it
# (src/cli/jobshow.c) and it is named here.
SHOW_LINE = {
    "id": "ID", "name": "Name", "user": "SubmittedBy", "uid": "SubmittedBy",
    "state": "State", "state_name": "State", "priority": "Priority", "nice": "Nice",
    "project": "Project", "group_id": "GroupID", "array_task": "TaskID",
    "max_concurrent": "MaxConcurrent", "max_retries": "MaxRetries", "attempt": "Attempt",
    "retry_of": "RetryOf", "retried_as": "RetriedAs", "command": "Command",
    "script": "Script", "script_path": "Script", "params": "Parameters",
    "workdir": "WorkingDir", "env": "Env", "umask": "Umask", "gpus": "GPUs",
    "shared": "GPUSharing", "gpu_memory_mb": "GPUMemoryLimit", "gpus_per_task": "GPUsPerTask",
    "gpu_ids": "GPUIDs", "gpus_detail": "GPU", "foreign_gpus": "ForeignGPUs",
    "mig_profile": "MIG", "mig_count": "MIG", "mig_devices": "MIG", "mig_detail": "MIG",
    "memory_mb": "MemoryLimit", "conda_env": "CondaEnv", "depends_on": "DependsOn",
    "depends_mode": "Mode", "auto_cancel": "AutoCancel", "dependents": "Dependents",
    "time_limit": "TimeLimit", "signal_spec": "WarnSignal", "begin_time": "BeginTime",
    "submit_time": "Submitted", "start_time": "Started", "end_time": "Finished",
    "expected_start": "ExpectedStart",
    "exit_code": "ExitCode", "signal": "Signal", "signal_name": "Signal", "oom": "OOM",
    "reason": "Reason", "cancelling": "Cancelling", "shim_pid": "ShimPID",
    "max_rss_kb": "MaxRSS", "log_path": "LogPath", "notify_email": "NotifyEmail",
    "notify_on": "NotifyOn", "auto_close": "AutoClose",
    "requeue": "Requeue", "requeue_count": "Requeued", "preempted_by": "PreemptedBy",
    "preempting": "Preempting", "pty": "Pty", "attach_socket": "Pty", "slurm_id": "SlurmJobId",
    "log_lost_bytes": "LogLost", "stray": "Stray", "slurm_note": "SlurmNote",
    # the class reads as the Reason (HostOOM beside OutOfMemory: a FailureClass line too)
    "failure_class": "Reason", "failure_line": "FailureLine",
    "cpus_per_gpu": "CPUsPerGPU", "cpus": "CPUs", "cpus_far": "CPUs",
    "effective_priority": "EffectivePriority", "priority_detail": "EffectivePriority",
    "gpu_util_mean": "GPUUtil", "gpu_util_peak": "GPUUtil", "gpu_mem_peak_mb": "GPUMemPeak",
    "energy_wh": "Energy", "gpu_idle": "GPUIdle",
}
# Lines shown only when another field is set (gflow shows the mode and auto-cancel of a
# job's dependencies only when it has some).
SHOWN_WITH = {"depends_mode": "depends_on", "auto_cancel": "depends_on"}
# Values with nothing to say, left out as gflow leaves out empty fields (gjob show -v
# prints them): the first attempt of a job without retries.
SHOWN_UNLESS = {"attempt": 1}


def sim(make_gflow, n=2):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", n)
    return g


def show_all(g, *ids):
    return parse_show(g.run("gjob", "show", *ids, check=True).stdout)


def shown_json(g, job_id):
    return json.loads(g.run("gjob", "show", "-o", "json", job_id, check=True).stdout)[0]


def assert_show_covers_json(g, job_id):
    """Every field of the job's -o json has a gjob show line, shown when the field is set."""
    data = shown_json(g, job_id)
    show = show_all(g, job_id)[0]
    unnamed = sorted(k for k in data if k not in SHOW_LINE)
    assert not unnamed, (f"fields {unnamed} of -o json: print them in gjob show "
                         "(src/cli/jobshow.c) and name their line in SHOW_LINE")
    for key, value in data.items():
        if value in (None, [], {}, False, 0, ""):
            continue
        if key in SHOWN_WITH and not data.get(SHOWN_WITH[key]):
            continue
        if key in SHOWN_UNLESS and value == SHOWN_UNLESS[key] and not data.get("max_retries"):
            continue
        line = SHOW_LINE[key]
        assert any(k == line or k.startswith(line + " ") for k in show), (key, line, show)
    return data, show


# ---- gjob show ----

def test_show_covers_every_json_field(make_gflow):
    g = sim(make_gflow)
    done = g.submit("-J", "done", "true")
    assert g.wait_state(done)["state"] == "CD"
    blocker = g.submit("-g", "1", WAIT_GO)
    g.wait_state(blocker, "R")
    flaky = g.submit("--max-retries", "1", "exit 3")
    retried = g.wait_state(flaky)["retried_as"]
    g.wait_state(retried)
    rich = g.submit("--hold", "--array", "1-2", "--max-concurrent", "1",
                    "--dependency", f"afterok:{done},afterany:{blocker}",
                    "--max-retries", "2", "-m", "1G", "--conda-env", "env1", "-t", "10",
                    "--signal", "USR1@30", "--begin", "2099-01-01", "--umask", "027",
                    "-g", "1", "--shared", "--gpu-memory", "2G", "echo $GFLOW_ARRAY_TASK_ID")
    sweep = int(g.run("gbatch", "-H", "--parsable", "--param", "lr=0.1", "echo {lr}",
                      check=True).stdout.split()[0])
    script = g.work / "train.sh"
    script.write_text("#!/bin/bash\necho training\n")
    scripted = g.submit("--hold", script)
    noted = g.submit("--hold", "-P", "ml", "--nice", "5", "--notify-email", "a@b.c",
                     "--notify-on", "job_failed,job_started", "--auto-close", "true")
    for job in (done, blocker, flaky, retried, rich, sweep, scripted, noted):
        assert_show_covers_json(g, job)

    data, s = assert_show_covers_json(g, rich)
    assert s["SubmittedBy"].startswith(data["user"] + " (uid ")
    assert (s["GroupID"], s["TaskID"], s["MaxConcurrent"]) == (str(data["group_id"]), "1", "1")
    assert s["DependsOn"] == f"{done} (afterok: CD, met), {blocker} (afterany: R, pending)", s
    assert s["Mode"].startswith("all") and s["AutoCancel"] == "enabled"
    assert (s["MaxRetries"], s["Attempt"]) == ("2", "1 of 3")
    assert (s["GPUs"], s["GPUSharing"], s["GPUMemoryLimit"]) == ("1", "shared", "2G")
    assert (s["MemoryLimit"], s["CondaEnv"], s["Umask"]) == ("1G", "env1", "0027")
    assert (s["TimeLimit"], s["WarnSignal"]) == ("00:10:00", "USR1@30")  # gflow's form
    assert "Started" not in s and s["Submitted"] != "-"
    assert s["Env"].endswith("variables (-o json lists them)")
    b = show_all(g, blocker)[0]
    assert b["GPUIDs"] == "0" and b["GPU 0"].startswith("GPU-") and b["Dependents"] == f"{rich},{rich + 1}"
    assert show_all(g, sweep)[0]["Parameters"] == "lr=0.1"
    assert show_all(g, scripted)[0]["Script"].startswith(f"{script} (2 lines stored")
    n = show_all(g, noted)[0]
    assert (n["Project"], n["Nice"], n["NotifyEmail"], n["NotifyOn"], n["AutoClose"]) == (
        "ml", "5", "a@b.c", "job_failed,job_started", "yes"), n
    assert "Project" not in show_all(g, done)[0]
    f, r = show_all(g, flaky, retried)
    assert (f["RetriedAs"], r["RetryOf"], r["Attempt"]) == (str(retried), str(flaky), "2 of 2")

    # Several ids, ranges and @ (gflow's '1-3' and '1,2,3'), gflow's line of '=' between
    # jobs.
    out = g.run("gjob", "show", f"{done}-{blocker}", f"{flaky},{retried}", "@", check=True)
    assert out.stdout.count("\n\n" + "=" * 80 + "\n\n") == 4, out.stdout
    assert [j["ID"] for j in parse_show(out.stdout)] == [
        str(done), str(blocker), str(flaky), str(retried), str(noted)]
    (g.work / "go").touch()
    g.run("gcancel", rich, rich + 1, sweep, scripted, noted, check=True)


# ---- gjob update ----

def test_update_takes_gflows_flags_and_reports_changes_as_options(make_gflow):
    g = sim(make_gflow)
    job = g.submit("--hold", "-t", "10", "-m", "1G", "--conda-env", "a", "--max-retries", "2",
                   "-g", "1", "--gpu-memory", "2G", "echo hi")
    cp = g.run("gjob", "update", job, "-e", "b", "--memory-limit", "1536M", check=True)
    assert cp.stdout == f"Job {job} updated: --memory: 1G -> 1536M, --conda-env: a -> b\n"
    cp = g.run("gjob", "update", job, "--clear-conda-env", "--clear-time-limit",
               "--clear-memory-limit", "--clear-gpu-memory-limit", "--clear-max-retries",
               "--no-auto-cancel-on-dep-failure", check=True)
    for change in ("--time: 00:10:00 -> none", "--memory: 1536M -> none",
                   "--gpu-memory: 2G -> none", "--conda-env: b -> none",
                   "--max-retries: 2 -> 0", "--auto-cancel-on-dep-failure: yes -> no"):
        assert change in cp.stdout, (change, cp.stdout)
    j = g.job(job)
    assert (j["time_limit"], j["memory_mb"], j["gpu_memory_mb"], j["conda_env"],
            j["max_retries"], j["auto_cancel"]) == (None, 0, 0, None, 0, False), j
    cp = g.run("gjob", "update", job, "--auto-cancel-on-dep-failure", "--memory", "2G",
               check=True)
    assert "--memory: none -> 2G" in cp.stdout and "--auto-cancel-on-dep-failure: no -> yes" \
        in cp.stdout, cp.stdout
    # -t 0 is "no limit" as the help says, in every form of zero.
    for zero in ("0", "0:00", "00:00:00"):
        g.run("gjob", "update", job, "-t", "1:00:00", check=True)
        cp = g.run("gjob", "update", job, "-t", zero, check=True)
        assert cp.stdout == f"Job {job} updated: --time: 01:00:00 -> none\n", (zero, cp.stdout)
    # -s/--script: gflow's short flag; the job now runs the script.
    script = g.work / "new.sh"
    script.write_text("#!/bin/bash\necho from script > out.txt\n")
    cp = g.run("gjob", "update", job, "-s", script, check=True)
    assert f"--script: none -> {script}" in cp.stdout, cp.stdout
    assert g.job(job)["script_path"] == str(script)
    # Setting and clearing the same field: refused, nothing changed.
    for args, needle in ((("-e", "x", "--clear-conda-env"), "--clear-conda-env"),
                         (("--clear-time-limit", "-t", "5"), "--clear-time-limit"),
                         (("--auto-cancel-on-dep-failure", "--no-auto-cancel-on-dep-failure"),
                          "--no-auto-cancel-on-dep-failure")):
        cp = g.run("gjob", "update", job, *args)
        assert cp.returncode == 2 and cp.stdout == "", cp
        assert cp.stderr.startswith("gjob: ") and cp.stderr.count("\n") == 1, cp.stderr
        assert needle in cp.stderr, cp.stderr
    cp = g.run("gjob", "update", job, "--script", g.work / "missing.sh")
    assert cp.returncode == 2 and "--script" in cp.stderr and "missing.sh" in cp.stderr
    assert g.job(job)["conda_env"] is None
    g.run("gjob", "release", job, check=True)
    assert g.wait_state(job)["state"] == "CD"
    assert (g.work / "out.txt").read_text() == "from script\n"


def test_update_several_ids_and_max_concurrent(gflow):
    first = int(gflow.run("gbatch", "-H", "--parsable", "--array", "1-3", "--max-concurrent", "1",
                          "true", check=True).stdout.split()[0])
    other = gflow.submit("--hold", "true")
    # Several ids at once, as gflow's '1-3' and '1,2,3' and separate arguments.
    cp = gflow.run("gjob", "update", f"{first}-{first + 1}", f"{other}", "-p", "20", check=True)
    assert cp.stdout.splitlines() == [f"Job {i} updated: --priority: 10 -> 20"
                                      for i in (first, first + 1, other)], cp.stdout
    cp = gflow.run("gjob", "update", first, "--clear-max-concurrent", check=True)
    assert cp.stdout == f"Job {first} updated: --max-concurrent: 1 -> none\n", cp.stdout
    assert gflow.job(first + 2)["max_concurrent"] == 0
    cp = gflow.run("gjob", "update", first, "--max-concurrent", "2", "--clear-max-concurrent")
    assert cp.returncode == 2 and "--clear-max-concurrent" in cp.stderr, cp.stderr
    # A running job still cannot be changed; the others in the list still are.
    running = gflow.submit(WAIT_GO)
    gflow.wait_state(running, "R")
    cp = gflow.run("gjob", "update", running, other, "-p", "30")
    assert cp.returncode == 1
    assert "only queued (PD) or held (H) jobs can be updated" in cp.stderr, cp.stderr
    assert cp.stdout == f"Job {other} updated: --priority: 20 -> 30\n", cp.stdout
    (gflow.work / "go").touch()
    gflow.run("gcancel", first, first + 1, first + 2, other, check=True)


# ---- gjob redo ----

def test_redo_with_conda_env_and_clear_deps(gflow):
    dep = gflow.submit("true")
    assert gflow.wait_state(dep)["state"] == "CD"
    old = gflow.submit("-J", "old", "-d", dep, "--conda-env", "a", "--hold", "true")
    gflow.run("gcancel", old, check=True)
    cp = gflow.run("gjob", "redo", old, "-e", "b", "--clear-deps", "--hold", check=True)
    new = int(cp.stdout.split()[3])
    assert cp.stdout == f"Submitted batch job {new} (old) (redo of {old})\n"
    j = gflow.job(new)
    assert (j["conda_env"], j["depends_on"], j["state"]) == ("b", [], "H"), j
    # Without them the old job's environment and dependencies are kept.
    cp = gflow.run("gjob", "redo", old, "--hold", check=True)
    again = gflow.job(int(cp.stdout.split()[3]))
    assert again["conda_env"] == "a" and [d["id"] for d in again["depends_on"]] == [dep]
    cp = gflow.run("gjob", "redo", old, "-e", "x", "--clear-conda-env")
    assert cp.returncode == 2 and "--clear-conda-env" in cp.stderr
    gflow.run("gcancel", new, again["id"], check=True)


# ---- gjob log ----

def test_log_of_a_job_that_has_not_started_says_so(gflow):
    blocker = gflow.submit(WAIT_GO)
    queued = gflow.submit("-d", blocker, "echo late")
    held = gflow.submit("--hold", "true")
    for job, st in ((queued, "PD"), (held, "H")):
        cp = gflow.run("gjob", "log", job)
        assert (cp.returncode, cp.stdout) == (0, ""), cp
        assert cp.stderr == f"gjob: job {job} has not started yet ({st})\n", cp.stderr
    gflow.run("gcancel", held, check=True)
    cp = gflow.run("gjob", "log", held)
    assert (cp.returncode, cp.stdout) == (0, "")
    assert cp.stderr == f"gjob: job {held} never started: CA (Cancelled), reason " \
                        "CancelledByUser\n", cp.stderr
    (gflow.work / "go").touch()
    gflow.wait_state(queued)
    assert gflow.run("gjob", "log", queued, check=True).stdout == "late\n"


def follow_and_next(g, job, flag="--follow"):
    """`gjob log FLAG JOB && echo next` in a shell, as a user chains jobs."""
    return g.run("sh", "-c", f"'{binary('gjob')}' log {flag} {job} && echo next")


def test_log_follow_ends_with_the_jobs_state_and_exit_code(gflow):
    ok = gflow.submit("echo one; sleep 0.3; echo two")
    cp = follow_and_next(gflow, ok)
    assert (cp.returncode, cp.stdout) == (0, "one\ntwo\nnext\n"), cp
    assert cp.stderr == f"gjob: job {ok} ended: CD (Finished), exit code 0\n", cp.stderr
    # A failure: its exit code, and 'next' does not run. -f alone is --follow (tail -f),
    # and @ is the latest job.
    bad = gflow.submit("echo bad; exit 5")
    cp = follow_and_next(gflow, "@", flag="-f")
    assert (cp.returncode, cp.stdout) == (5, "bad\n"), cp
    assert cp.stderr == f"gjob: job {bad} ended: F (Failed), exit code 5, reason " \
                        "NonZeroExitCode\n", cp.stderr
    # -f N before a job id is still gflow's --first N.
    assert gflow.run("gjob", "log", "-f", "1", ok, check=True).stdout == "one\n"
    # Killed by a signal: 1.
    killed = gflow.submit("kill -9 $$")
    cp = follow_and_next(gflow, killed)
    assert (cp.returncode, cp.stdout) == (1, ""), cp
    assert "ended: F (Failed), signal SIGKILL" in cp.stderr, cp.stderr


def test_log_follow_of_a_cancelled_job_exits_1(gflow):
    job = gflow.submit(f"echo started; {WAIT_GO}")
    wait_for(lambda: gflow.log(job) == "started\n", "the job to write its first line")
    follower = subprocess.Popen([binary("gjob"), "log", "--follow", str(job)], env=gflow.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        gflow.run("gcancel", job, check=True)
        out, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert (follower.returncode, out) == (1, "started\n"), (out, err)
    assert err.startswith(f"gjob: job {job} ended: CA (Cancelled)"), err
    # Following a job that never started and never will: at once, 1.
    held = gflow.submit("--hold", "true")
    gflow.run("gcancel", held, check=True)
    cp = gflow.run("gjob", "log", "--follow", held)
    assert (cp.returncode, cp.stdout) == (1, ""), cp
    assert "never started: CA (Cancelled)" in cp.stderr
