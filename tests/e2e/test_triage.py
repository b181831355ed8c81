"""Failure triage (issue 30): when a job fails, gflowd reads the tail of its log as the
job's user, off its loop, and names the failure (CudaOOM, NcclError, PythonException:
<type>, Segfault, CommandNotFound, Killed (SIG...), HostOOM, or a class of the admin's
[[triage.classes]]). The class is the failed job's reason (gqueue `F (CudaOOM)`, gjob
show's Reason) and gjob show has the matched line; `gjob why` explains a waiting job from
its reasons, place in the queue and expected start, and a failed one from its class and
log; MCP triage_job carries the class."""
import json
import os
import stat
import subprocess

import pytest

from conftest import as_user, binary, wait_for


def wait_class(g, jid, timeout=10):
    """Waits until failed job jid has its failure class; returns the job."""
    last = {}

    def check():
        last["job"] = g.job(jid)
        return last["job"] if last["job"].get("failure_class") else None
    try:
        return wait_for(check, f"job {jid}'s failure class", timeout=timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen: {last.get('job')}\n{g.daemon_log()}") from None


def fail_job(g, command, *args, **kw):
    jid = g.submit(*args, command, **kw)
    j = g.wait_state(jid, timeout=20)
    assert j["state"] == "F", j
    return jid


def show(g, jid):
    cp = g.run("gjob", "show", jid, check=True)
    return dict(line.strip().split("=", 1) for line in cp.stdout.splitlines() if "=" in line)


def gqueue_reason(g, jid):
    cp = g.run("gqueue", "-j", jid, "-a", "-f", "JOBID,ST,NODELIST(REASON)", check=True)
    rows = [l.split(None, 2) for l in cp.stdout.splitlines()[1:] if l.strip()]
    row = [r for r in rows if r[0] == str(jid)]
    assert row, cp.stdout
    return row[0][1], row[0][2].strip()


CUDA_OOM = ('echo "step 1"; echo "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB '
            '(GPU 0; 79.15 GiB total capacity)"; exit 1')


def test_cuda_oom_is_the_reason_in_gqueue_and_gjob_show(gflow):
    g = gflow
    jid = fail_job(g, CUDA_OOM)
    j = wait_class(g, jid)
    assert j["failure_class"] == "CudaOOM", j
    assert j["failure_line"].startswith("RuntimeError: CUDA out of memory. Tried to allocate"), j
    assert j["reason"] == "CudaOOM" and j["exit_code"] == 1, j
    st, reason = gqueue_reason(g, jid)
    assert (st, reason) == ("F", "(CudaOOM)"), (st, reason)
    s = show(g, jid)
    assert s["Reason"] == "CudaOOM", s
    assert s["FailureLine"].startswith("RuntimeError: CUDA out of memory."), s
    assert s["ExitCode"].startswith("1"), s
    # gqueue's FAILURE column: the class alone.
    cp = g.run("gqueue", "-a", "-f", "JOBID,FAILURE", check=True)
    assert cp.stdout.split() == ["JOBID", "FAILURE", str(jid), "CudaOOM"], cp.stdout


@pytest.mark.parametrize("command,cls,line", [
    ("printf 'Traceback (most recent call last):\\n  File \"t.py\", line 3, in <module>\\n"
     "    main()\\nValueError: bad learning rate\\n'; exit 1",
     "PythonException: ValueError", "ValueError: bad learning rate"),
    ("echo '[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds'; exit 1",
     "NcclError", "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective"),
    ("echo about to crash; kill -SEGV $$", "Segfault", None),
    # Not the first word: bash's own "command not found" and exit 127.
    ("true && no-such-command-gflow-triage --x", "CommandNotFound",
     "no-such-command-gflow-triage: command not found"),
    ("echo bye; kill -9 $$", "Killed (SIGKILL)", None),
    # A CUDA OOM inside a Python traceback is CudaOOM (most specific wins).
    ("printf 'Traceback (most recent call last):\\n  File \"t.py\", line 9, in step\\n"
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\\n'; exit 1",
     "CudaOOM", "torch.OutOfMemoryError: CUDA out of memory."),
])
def test_builtin_classes(gflow, command, cls, line):
    g = gflow
    jid = fail_job(g, command)
    j = wait_class(g, jid)
    assert j["failure_class"] == cls, j
    if line is None:
        assert j["failure_line"] is None, j
    else:
        assert line in j["failure_line"], j
    # The reason reads the class; the exit code and signal stay as they were recorded.
    assert j["reason"] == cls, j
    if cls in ("Segfault", "Killed (SIGKILL)"):
        assert j["signal_name"] == ("SIGSEGV" if cls == "Segfault" else "SIGKILL"), j
    if cls == "CommandNotFound":
        assert j["exit_code"] == 127, j
    assert gqueue_reason(g, jid) == ("F", f"({cls})")


def test_missing_first_word_is_command_not_found_and_keeps_launch_failed(gflow):
    g = gflow
    jid = fail_job(g, "no-such-command-gflow-triage --x")
    j = wait_class(g, jid)
    # The shim found it missing before running it: LaunchFailed says more, and stays.
    assert j["failure_class"] == "CommandNotFound", j
    assert j["failure_line"] == "command not found: no-such-command-gflow-triage", j
    assert j["reason"] == "LaunchFailed: command not found: no-such-command-gflow-triage", j


def test_config_class_wins_over_builtins_and_reload_applies(make_gflow):
    g = make_gflow(start=False)
    cfg = g.root / "gflow.toml"
    cfg.write_text('[triage]\ntail_bytes = 4096\n\n[[triage.classes]]\nname = "DiskFull"\n'
                   'pattern = "No space left on device"\n')
    g.up("-c", cfg)
    # The log holds a CUDA OOM line too: the admin's class comes first.
    jid = fail_job(g, 'echo "RuntimeError: CUDA out of memory."; '
                      'echo "OSError: [Errno 28] No space left on device"; exit 1')
    j = wait_class(g, jid)
    assert (j["failure_class"], j["reason"]) == ("DiskFull", "DiskFull"), j
    assert j["failure_line"] == "OSError: [Errno 28] No space left on device", j
    # Only the last tail_bytes are read: a CUDA OOM line far before the end is not seen.
    jid = fail_job(g, 'echo "CUDA out of memory"; head -c 9000 /dev/zero | tr "\\0" x; echo; '
                      'exit 1')
    g.wait_state(jid)
    # A reload adds a class for later failures.
    cfg.write_text('[[triage.classes]]\nname = "BadData"\npattern = "^corrupt shard [0-9]+"\n')
    cp = g.gflowd("-c", cfg, "reload")
    assert cp.returncode == 0, cp.stderr
    jid2 = fail_job(g, 'echo "corrupt shard 17"; exit 2')
    j2 = wait_class(g, jid2)
    assert (j2["failure_class"], j2["failure_line"]) == ("BadData", "corrupt shard 17"), j2
    # The earlier one was read only in its tail (4096 bytes): nothing to name it by.
    j = g.job(jid)
    assert j["failure_class"] is None and j["reason"] == "NonZeroExitCode", j


def test_bad_class_pattern_is_a_one_line_error(make_gflow):
    g = make_gflow(start=False)
    cfg = g.root / "gflow.toml"
    cfg.write_text('[[triage.classes]]\nname = "Bad"\npattern = "unclosed (paren"\n')
    cp = g.gflowd("-c", cfg, "up")
    assert cp.returncode != 0
    err = cp.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "triage.classes[1].pattern" in err and "regular expression" in err, err
    cfg.write_text('[[triage.classes]]\nname = "NoPattern"\n')
    cp = g.gflowd("-c", cfg, "up")
    assert cp.returncode != 0 and "triage.classes[1].pattern must be a string" in cp.stderr


def test_host_oom_keeps_out_of_memory_as_the_reason(gflow):
    g = gflow
    jid = g.submit("--memory", "64M", "python3 -c 'x = bytearray(1 << 30); import time; "
                   "time.sleep(5)'")
    j = g.wait_state(jid, timeout=30)
    if j["reason"] != "OutOfMemory":
        pytest.skip(f"memory limits are not enforced here: {j}")
    j = wait_class(g, jid)
    assert j["failure_class"] == "HostOOM" and j["reason"] == "OutOfMemory", j
    assert show(g, jid)["FailureClass"] == "HostOOM"


def test_log_that_is_a_link_to_a_root_only_file_is_not_read(throwaway_user, make_gflow):
    pw = throwaway_user
    g = make_gflow(start=False)
    logs = g.root / "logs"
    logs.mkdir()
    os.chmod(logs, 0o1777)  # users may replace their own logs there
    os.chmod(g.root, 0o755)
    secret = g.root / "secret.txt"
    secret.write_text("RuntimeError: CUDA out of memory. root's secret 4242\n")
    os.chmod(secret, 0o600)
    g.up(env={"GFLOW_DAEMON__LOG_DIR": str(logs)})
    g.env["GFLOW_DAEMON__LOG_DIR"] = str(logs)
    work = g.root / "userwork"
    work.mkdir()
    os.chown(work, pw.pw_uid, pw.pw_gid)
    user = as_user(pw.pw_uid, pw.pw_gid)
    jid = g.submit(f'ln -sf {secret} {logs}/$GFLOW_JOB_ID.log; exit 1', user=user, cwd=work)
    j = g.wait_state(jid, timeout=20)
    assert j["state"] == "F", j
    assert os.path.islink(logs / f"{jid}.log")
    wait_for(lambda: f"job {jid}: its log was not read for triage: {jid}.log is a symbolic "
             "link: not read" in g.daemon_log(), "the refusal in gflowd.log")
    j = g.job(jid)
    assert j["failure_class"] is None and j["failure_line"] is None, j
    assert j["reason"] == "NonZeroExitCode", j
    assert "4242" not in json.dumps(j)
    # A plain log of the user's own is read (as the user) and classified.
    jid = g.submit('echo "RuntimeError: CUDA out of memory."; exit 1', user=user, cwd=work)
    assert wait_class(g, jid)["failure_class"] == "CudaOOM"


# ---------------------------------------------------------------- gjob why

def why(g, jid, *args):
    cp = g.run("gjob", "why", *args, jid)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def test_gjob_why_pending_failed_running_finished(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 2)
    failed = fail_job(g, 'echo "loading"; echo "RuntimeError: CUDA out of memory. Tried"; '
                         'echo "last words"; exit 1')
    wait_class(g, failed)
    run = g.submit("-g", "2", "sleep 60")
    g.wait_state(run, "R")
    first = g.submit("-g", "1", "-p", "20", "sleep 1")
    second = g.submit("-g", "2", "sleep 1")
    held = g.submit("-H", "sleep 1")
    # A waiting job: its reason, its place and who is ahead, the GPUs, its expected start.
    # Backfill (the default) holds the GPUs for the first: the second waits for Priority.
    wait_for(lambda: g.job(second)["reason"] == "Priority", "job to wait for Priority")
    out = why(g, second)
    lines = out.splitlines()
    assert lines[0] == (f"Job {second} (gjob-{second}) is pending (PD): Priority (jobs ahead "
                        "of it come first; backfill holds GPUs for them)"), out
    assert f"Queue: position 2 of 2 waiting jobs; ahead of it: {first} (root, 1 GPU)" in out, out
    assert "GPUs: asks 2, 0 of 2 free" in out, out
    assert "ExpectedStart: " in out, out
    j = json.loads(why(g, second, "-o", "json"))
    assert j["state"] == "PD" and j["reason"] == "Priority", j
    assert j["queue"]["position"] == 2 and j["queue"]["jobs_ahead"] == 1, j
    assert [a["id"] for a in j["queue"]["ahead"]] == [first], j
    assert "expected_start" in j, j
    out = why(g, held)
    assert out.startswith(f"Job {held} (gjob-{held}) is held (H): JobHeldUser"), out
    assert "gjob release" in out, out
    # A failed job: the class, the matched line, a hint and the log's last lines.
    out = why(g, failed, "-n", "2")
    lines = out.splitlines()
    assert lines[0] == f"Job {failed} (gjob-{failed}) failed (F): CudaOOM", out
    assert "  FailureLine: RuntimeError: CUDA out of memory. Tried" in lines, out
    assert "  ExitCode: 1" in lines, out
    assert any(l.startswith("  Hint: the GPU ran out of memory") for l in lines), out
    assert lines[-3:] == ["  Last log lines:", "    RuntimeError: CUDA out of memory. Tried",
                          "    last words"], out
    j = json.loads(why(g, failed, "-o", "json"))
    assert (j["failure_class"], j["exit_code"]) == ("CudaOOM", 1), j
    assert j["log_tail"].endswith("last words\n"), j
    # Running and finished jobs: one line.
    out = why(g, run)
    assert out.startswith(f"Job {run} (gjob-{run}) is running (R) for ") and \
        out.rstrip().endswith("on GPUs 0,1") and len(out.splitlines()) == 1, out
    g.run("gcancel", run, check=True)
    g.wait_state(first, timeout=20)
    out = why(g, first)
    assert out.startswith(f"Job {first} (gjob-{first}) finished (CD) with exit code 0"), out
    assert len(out.splitlines()) == 1, out


def test_gjob_why_bad_input(gflow):
    g = gflow
    for args, needle in [((), "which job?"), (("1", "2"), "explains one job"),
                         (("-o", "yaml", "1"), "use table or json"),
                         (("-n", "x", "1"), "invalid line count")]:
        cp = g.run("gjob", "why", *args)
        assert cp.returncode == 2 and needle in cp.stderr, (args, cp.stderr)
        assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
    cp = g.run("gjob", "why", "999")
    assert cp.returncode == 1 and "999" in cp.stderr, cp.stderr
    cp = g.run("gjob", "completion", "bash", check=True)
    assert "why" in cp.stdout


# ---------------------------------------------------------------- MCP

def test_mcp_triage_job_shows_the_class(gflow):
    g = gflow
    jid = fail_job(g, 'printf "Traceback (most recent call last):\\n  File \\"x.py\\", line 1\\n'
                      'KeyError: \'lr\'\\n"; exit 1')
    wait_class(g, jid)
    p = subprocess.Popen([binary("gflow-mcp")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=g.env, cwd=str(g.work), text=True)
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "e2e", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "triage_job", "arguments": {"job_id": jid}}}]
    out, err = p.communicate("".join(json.dumps(m) + "\n" for m in msgs), timeout=20)
    replies = [json.loads(l) for l in out.splitlines()]
    r = [m for m in replies if m.get("id") == 2][0]["result"]
    s = r["structuredContent"]
    assert s["failure_class"] == "PythonException: KeyError", s
    assert s["failure_line"] == "KeyError: 'lr'", s
    assert s["reason"] == "PythonException: KeyError", s
    assert "its log showed: KeyError: 'lr'" in s["summary"], s
    assert any("PythonException" in h for h in s["retry_hints"]), s


def test_log_that_is_a_fifo_is_refused_without_blocking(gflow):
    g = gflow
    # The job swaps its log for a FIFO nobody writes: a read would block forever.
    jid = fail_job(g, 'rm -f "$GFLOW_E2E_LOGS/$GFLOW_JOB_ID.log"; '
                      'mkfifo "$GFLOW_E2E_LOGS/$GFLOW_JOB_ID.log"; exit 1',
                   env={"GFLOW_E2E_LOGS": str(g.data / "logs")})
    fifo = g.data / "logs" / f"{jid}.log"
    try:
        wait_for(lambda: f"job {jid}: its log was not read for triage: {jid}.log is not a "
                 "regular file: not read" in g.daemon_log(), "the refusal in gflowd.log")
    finally:
        if fifo.exists() and stat.S_ISFIFO(os.lstat(fifo).st_mode):
            fifo.unlink()  # the fixture's teardown reads every log
    j = g.job(jid)
    assert j["failure_class"] is None and j["reason"] == "NonZeroExitCode", j
    # The daemon goes on scheduling and classifying.
    jid = fail_job(g, CUDA_OOM)
    assert wait_class(g, jid)["failure_class"] == "CudaOOM"
