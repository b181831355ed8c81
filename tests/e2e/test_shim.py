"""End-to-end tests of gflow-shim, the per-job supervisor, run directly (no daemon).

Each test gets its own temp dir and starts the real binary from $GFLOW_BUILD_DIR (default
<repo>/build) with the minimal environment the daemon gives it. Outcomes are awaited by
polling with a deadline; every process a test starts is stopped by pid at teardown.
"""
import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import read_pid_file, start_time
from conftest import wait_for as _wait_for

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("GFLOW_BUILD_DIR", REPO / "build"))
SHIM = BUILD_DIR / "gflow-shim"
DAEMON_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
JOB_PATH = "PATH=/usr/local/bin:/usr/bin:/bin"


def wait_for(pred, what, timeout=5.0):
    """conftest's wait_for with this file's 5 s default."""
    return _wait_for(pred, what, timeout)


class Shim:
    """One gflow-shim run in its own directory."""

    def __init__(self, tmp, cleanup, *, command=None, script=None, env=(JOB_PATH,),
                 kill_grace=5, workdir=None, log=None, extra=(), pass_fds=(), shim_env=None,
                 preexec_fn=None, exit_file=None, record_in_lock=False):
        self.dir = tmp
        self.exit_file = exit_file or tmp / "exit.json"
        self.log = log or tmp / "job.log"
        self.env_file = tmp / "job.env"
        self.env_file.write_bytes(b"".join(e.encode() + b"\0" for e in env))
        # record_in_lock: no --exit-file, as gflowd runs it: the record goes into the
        # lock file of --lock-fd.
        exit_args = [] if record_in_lock else ["--exit-file", str(self.exit_file)]
        args = [str(SHIM), "--job-id", "42", *exit_args,
                "--log", str(self.log), "--workdir", str(workdir or tmp),
                "--env-file", str(self.env_file), "--kill-grace", str(kill_grace), *extra]
        if command is not None:
            args += ["--command", command]
        if script is not None:
            args += ["--script", str(script)]
        self.proc = subprocess.Popen(args, env=shim_env or DAEMON_ENV,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, pass_fds=pass_fds,
                                     preexec_fn=preexec_fn)
        cleanup.procs.append(self.proc)
        self.stderr = ""

    def finish(self, timeout=10):
        """Waits for the shim; returns its exit status."""
        _, err = self.proc.communicate(timeout=timeout)
        self.stderr = err.decode()
        return self.proc.returncode

    def result(self):
        return json.loads(self.exit_file.read_text())

    def log_text(self):
        return self.log.read_text() if self.log.exists() else ""

    def wait_pid_file(self, name, cleanup):
        """Waits until the job has written a pid to `name`; remembers it for teardown."""
        pid = wait_for(lambda: read_pid_file(self.dir / name), f"{name} from the job")
        st = start_time(pid)
        cleanup.pids.append((pid, st))
        return pid, st


class Cleanup:
    def __init__(self):
        self.procs = []
        self.pids = []


@pytest.fixture
def cleanup():
    """Stops, by pid, whatever a test left running (only if it failed midway)."""
    c = Cleanup()
    yield c
    for pid, st in c.pids:
        if st is not None and start_time(pid) == st:
            os.kill(pid, signal.SIGKILL)
    for p in c.procs:
        if p.poll() is None:
            p.kill()
            p.wait()
            remove_job_cgroups(p.pid)


def remove_job_cgroups(shim_pid):
    """Removes the cgroups a shim killed by the test made for its job (step 9); the
    shim removes them itself when it ends normally."""
    for controller, pattern in ((None, "gflow-job-*.{}"), ("freezer", "gflow/job-*.{}")):
        if cgroup_mount(controller) is None:
            continue
        for d in own_cgroup_dir(controller)[1].glob(pattern.format(shim_pid)):
            # What is left of the job: only its processes are in there.
            for pid in (d / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _wait_for(lambda: not d.exists() or not (d / "cgroup.procs").read_text(),
                      f"{d} to be empty", 5)
            try:
                d.rmdir()
            except FileNotFoundError:
                pass


@pytest.fixture(autouse=True)
def shim_built():
    assert SHIM.is_file() and os.access(SHIM, os.X_OK), (
        f"{SHIM} not built (set GFLOW_BUILD_DIR or build into {BUILD_DIR})")


def run(tmp_path, cleanup, **kw):
    s = Shim(tmp_path, cleanup, **kw)
    assert s.finish() == 0, s.stderr
    return s


def assert_gone(pid, st):
    assert start_time(pid) != st, f"process {pid} survived the shim"


# ---- outcomes ---------------------------------------------------------------------


def test_exit_zero_records_outcome_and_job_setting(tmp_path, cleanup):
    (tmp_path / "job.log").write_text("earlier line\n")
    cmd = ("echo out; echo err >&2; pwd; "
           "echo pgid=$(cut -d' ' -f5 /proc/$$/stat) sid=$(cut -d' ' -f6 /proc/$$/stat) pid=$$; "
           "echo stdin=$(readlink /proc/$$/fd/0); "
           "grep -E '^Sig(Blk|Ign)' /proc/self/status; "
           "yes | head -1")
    before = time.time()
    # --log-continue (a requeued job's next run): the job user's own log goes on.
    s = run(tmp_path, cleanup, command=cmd, extra=("--log-continue",))
    r = s.result()
    assert r["job_id"] == 42
    assert r["exit_code"] == 0 and r["signal"] is None
    assert r["oom"] is False and r["error"] is None
    assert before - 1 <= r["started_at"] <= r["finished_at"] <= time.time() + 1
    assert isinstance(r["max_rss_kb"], int) and r["max_rss_kb"] > 0
    log = s.log_text().splitlines()
    assert log[0] == "earlier line"  # appended, not truncated
    assert {"out", "err", str(tmp_path), "stdin=/dev/null"} <= set(log)
    ids = dict(kv.split("=") for kv in next(l for l in log if l.startswith("pgid")).split())
    assert ids["pgid"] == ids["pid"], "job is not in its own process group"
    assert ids["sid"] == str(s.proc.pid), "shim did not start its own session"
    # The job must not inherit the shim's blocked SIGCHLD/SIGTERM or ignored SIGPIPE;
    # with SIGPIPE ignored, `yes` would complain about a broken pipe.
    assert "SigBlk:\t0000000000000000" in log and "SigIgn:\t0000000000000000" in log
    assert "y" in log and "Broken pipe" not in s.log_text()
    assert not s.env_file.exists()


def test_new_log_is_private(tmp_path, cleanup):
    s = run(tmp_path, cleanup, command="true")
    assert s.log.stat().st_mode & 0o777 == 0o600


def test_exit_code_three(tmp_path, cleanup):
    r = run(tmp_path, cleanup, command="exit 3").result()
    assert r["exit_code"] == 3 and r["signal"] is None and r["error"] is None


def test_killed_by_signal(tmp_path, cleanup):
    r = run(tmp_path, cleanup, command="kill -9 $$").result()
    assert r["signal"] == 9 and r["exit_code"] is None


def test_script_with_shebang_is_executed_directly(tmp_path, cleanup):
    script = tmp_path / "job.sh"
    script.write_text('#!/bin/sh\necho "argv: $(tr "\\0" " " < /proc/$$/cmdline)"\nexit 5\n')
    script.chmod(0o700)
    s = run(tmp_path, cleanup, script=script)
    assert s.result()["exit_code"] == 5
    assert f"argv: /bin/sh {script} " in s.log_text()


def test_script_without_shebang_runs_with_bash(tmp_path, cleanup):
    script = tmp_path / "job.txt"
    script.write_text('echo "bash=${BASH_VERSION:+yes}"\n')
    script.chmod(0o600)  # bash reads it; it need not be executable
    s = run(tmp_path, cleanup, script=script)
    assert s.result()["exit_code"] == 0
    assert "bash=yes" in s.log_text()


def test_job_gets_exactly_the_env_file(tmp_path, cleanup):
    env = [JOB_PATH, "FOO=bar baz", "MULTI=line1\nline2", "EQ=a=b", "EMPTY="]
    # A marker inherited from a submitting job is replaced by this run's.
    s = run(tmp_path, cleanup, env=env + ["GFLOW_SHIM_ID=1:2"], command="env -0 > env.out",
            shim_env={**DAEMON_ENV, "SHIM_ONLY": "1"})
    assert s.result()["exit_code"] == 0
    got = dict(e.split("=", 1) for e in (tmp_path / "env.out").read_text().split("\0") if e)
    for e in env:
        k, v = e.split("=", 1)
        assert got.pop(k) == v
    # The marker that names this run of the job: the shim's pid and start time.
    pid, start = got.pop("GFLOW_SHIM_ID").split(":")
    assert int(pid) == s.proc.pid and int(start) > 0
    # bash adds PWD, SHLVL and _ itself; nothing of the shim's own environment leaks.
    assert set(got) <= {"PWD", "SHLVL", "_"}, got
    assert not s.env_file.exists(), "env file (may hold secrets) was not unlinked"


def test_plain_command_is_executed_without_a_shell(tmp_path, cleanup):
    # bash would export SHLVL and _ to the program; a direct exec passes the env file only.
    s = run(tmp_path, cleanup, command="env -0")
    assert s.result()["exit_code"] == 0
    got = dict(e.split("=", 1) for e in s.log_text().split("\0") if e)
    assert got.pop("GFLOW_SHIM_ID").startswith(f"{s.proc.pid}:")
    assert got == {"PATH": JOB_PATH.split("=", 1)[1]}


@pytest.mark.parametrize("command,code,out", [
    ("exit 4", 4, ""),                       # a builtin: falls back to the shell
    ("FOO=bar printenv FOO", 0, "bar\n"),   # an assignment word needs the shell
    ("echo a  b", 0, "a b\n"),              # words split on any run of spaces
    ("echo '*'", 0, "*\n"),                 # quoting needs the shell
    ("nosuchprogram-xyz", 127, None),        # not found: the shell says so, 127
])
def test_plain_and_shell_commands_behave_as_bash(tmp_path, cleanup, command, code, out):
    s = run(tmp_path, cleanup, command=command)
    assert s.result()["exit_code"] == code
    if out is not None:
        assert s.log_text() == out


def test_quoted_words_are_executed_without_a_shell(tmp_path, cleanup):
    # Quotes alone need no shell: `env 'A=a b' ...` is env with those words.
    s = run(tmp_path, cleanup, command="""env 'A=a b' "B=c'd" B2=x'y'"z" env -0""")
    assert s.result()["exit_code"] == 0
    got = dict(e.split("=", 1) for e in s.log_text().split("\0") if e)
    assert got.pop("GFLOW_SHIM_ID").startswith(f"{s.proc.pid}:")
    assert got == {"PATH": JOB_PATH.split("=", 1)[1], "A": "a b", "B": "c'd", "B2": "xyz"}


@pytest.mark.parametrize("command", [
    """/usr/bin/printf '%s|' 'a b' "c'd" '' x'y'"z" "a*" '$HOME' "~" a"b c"d""",
    """sh -c 'echo "$0" "$1" > out; cat out' zero 'one  two'""",
    """'/usr/bin/printf' '[%s]' "x" """,
    """/usr/bin/printf '%s|' "$HOME" a*""",     # expansions: the shell
    """'nosuch prog' x""",                       # not found, quoted: 127
    """'' x""",                                  # an empty command word: 127
    """'echo' hi""",                             # a builtin, even quoted
    """'exit' 3""",
    """ls 'no such file'""",                     # the program's own status
    """/usr/bin/printf '%s' 'abc""",             # unterminated: bash's syntax error
    """/usr/bin/printf '%s|' "a\"b" 'x'\''y'""",  # backslashes: the shell
    """true""",
    """false""",
    """true --version""",                        # the builtin, not coreutils' true
    """%1 x""",                                  # a job for bash: fg
])
def test_quoted_commands_behave_as_bash(tmp_path, cleanup, command):
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": JOB_PATH.split("=", 1)[1], "HOME": str(home)}
    want = subprocess.run(["bash", "-c", command], executable="/bin/bash", cwd=tmp_path, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    (tmp_path / "out").unlink(missing_ok=True)
    s = run(tmp_path, cleanup, command=command, env=(JOB_PATH, f"HOME={home}"))
    assert s.result()["exit_code"] == want.returncode, s.log_text()
    assert s.log_text() == want.stdout


def test_lone_true_is_the_builtin_not_a_program_on_path(tmp_path, cleanup):
    # bash runs its builtin before any `true` on PATH; so does the direct exec.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "true").write_text("#!/bin/sh\necho fake true\nexit 3\n")
    (bindir / "true").chmod(0o755)
    s = run(tmp_path, cleanup, command="true", env=(f"PATH={bindir}:/usr/bin:/bin",))
    assert s.result()["exit_code"] == 0 and s.log_text() == ""


def test_job_does_not_inherit_ignored_signals(tmp_path, cleanup):
    # Whatever the shim's starter ignored is the default again in the job.
    def ignore():
        for sig in (signal.SIGUSR2, signal.SIGQUIT, signal.SIGRTMIN + 3, signal.SIGRTMAX):
            signal.signal(sig, signal.SIG_IGN)
    s = run(tmp_path, cleanup, command="grep -E '^Sig(Ign|Blk)' /proc/self/status",
            preexec_fn=ignore)
    assert s.log_text() == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"


def test_exported_function_still_runs_through_bash(tmp_path, cleanup):
    env = [JOB_PATH, "BASH_FUNC_greet%%=() {  echo hello from function\n}"]
    s = run(tmp_path, cleanup, env=env, command="greet")
    assert s.result()["exit_code"] == 0
    assert s.log_text() == "hello from function\n"


# ---- cancellation and leftovers ---------------------------------------------------

BG_AND_SETSID = ("sleep 1000 & echo $! > bg.pid; "
                 "setsid bash -c 'echo $$ > gc.pid; exec sleep 1000' & ")


def test_sigterm_kills_group_and_setsid_grandchild(tmp_path, cleanup):
    s = Shim(tmp_path, cleanup, command=BG_AND_SETSID + "sleep 1000", kill_grace=30)
    bg = s.wait_pid_file("bg.pid", cleanup)
    gc = s.wait_pid_file("gc.pid", cleanup)
    assert os.getsid(gc[0]) == gc[0]  # really in another session
    t0 = time.monotonic()
    os.kill(s.proc.pid, signal.SIGTERM)
    assert s.finish() == 0, s.stderr
    # SIGTERM did it: nobody waited for the 30 s grace.
    assert time.monotonic() - t0 < 10
    r = s.result()
    assert r["signal"] == signal.SIGTERM and r["exit_code"] is None
    assert_gone(*bg)
    assert_gone(*gc)


def test_sigterm_ignored_gets_sigkill_after_grace_not_restarted(tmp_path, cleanup):
    s = Shim(tmp_path, cleanup, kill_grace=4,
             command="trap '' TERM; echo $$ > main.pid; sleep 1000")
    s.wait_pid_file("main.pid", cleanup)
    t0 = time.time()
    os.kill(s.proc.pid, signal.SIGTERM)
    # A second cancel 2 s later must not restart the 4 s grace (that would end after 6 s).
    wait_for(lambda: time.time() - t0 >= 2 or s.proc.poll() is not None, "2 s")
    assert s.proc.poll() is None, "job was killed before the grace ran out"
    os.kill(s.proc.pid, signal.SIGTERM)
    assert s.finish() == 0, s.stderr
    r = s.result()
    assert r["signal"] == signal.SIGKILL and r["exit_code"] is None
    # Killed 4 s after the first cancel; the bound leaves a slow machine 1.9 s.
    assert 3.9 <= r["finished_at"] - t0 < 5.9


def test_cancel_during_setup_is_not_lost(tmp_path, cleanup):
    def cancel_before_exec():
        # Pending and blocked across exec: it reaches the shim before its loop runs.
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
        os.kill(os.getpid(), signal.SIGTERM)

    s = Shim(tmp_path, cleanup, command="sleep 1000", kill_grace=30,
             preexec_fn=cancel_before_exec)
    assert s.finish() == 0, s.stderr
    assert s.result()["signal"] == signal.SIGTERM


def sigqueue(pid, sig, value):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.sigqueue(pid, sig, ctypes.c_void_p(value)) == 0, ctypes.get_errno()


@pytest.mark.parametrize("main_only", [False, True])
def test_queued_sigusr1_forwards_a_signal(tmp_path, cleanup, main_only):
    # The job (bash) and a child of it trap SIGUSR2 and record it; the daemon asks for
    # SIGUSR2 to all processes, or to the main process only (Slurm's --signal B:).
    job = ("trap 'echo main >> got' USR2; "
           "bash -c 'trap \"echo child >> got; exit\" USR2; echo $$ > child.pid; "
           "while :; do sleep 0.05; done' & "
           "while [ ! -s got ] || [ $(wc -l < got) -lt %d ]; do sleep 0.05; done; wait"
           % (1 if main_only else 2))
    s = Shim(tmp_path, cleanup, command=job, kill_grace=1)
    wait_for(lambda: read_pid_file(tmp_path / "child.pid"), "the child")
    sigqueue(s.proc.pid, signal.SIGUSR1, int(signal.SIGUSR2) | (0x100 if main_only else 0))
    wait_for(lambda: (tmp_path / "got").exists() and
             len((tmp_path / "got").read_text().split()) == (1 if main_only else 2), "the signal")
    if main_only:
        assert (tmp_path / "got").read_text().split() == ["main"]
        s.proc.send_signal(signal.SIGTERM)
    else:
        assert sorted((tmp_path / "got").read_text().split()) == ["child", "main"]
    s.finish()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_sigint_and_sighup_cancel_too(tmp_path, cleanup, sig):
    s = Shim(tmp_path, cleanup, command="echo $$ > main.pid; sleep 1000")
    s.wait_pid_file("main.pid", cleanup)
    os.kill(s.proc.pid, sig)
    assert s.finish() == 0, s.stderr
    assert s.result()["signal"] == signal.SIGTERM


def test_leftovers_killed_after_main_exits_without_waiting_for_grace(tmp_path, cleanup):
    cmd = BG_AND_SETSID + "while [ ! -s gc.pid ]; do sleep 0.01; done; exit 4"
    s = Shim(tmp_path, cleanup, command=cmd, kill_grace=30)
    t0 = time.monotonic()
    assert s.finish(timeout=15) == 0, s.stderr
    assert time.monotonic() - t0 < 10, "shim waited for the grace with nothing left"
    assert s.result()["exit_code"] == 4
    for name in ("bg.pid", "gc.pid"):
        pid = read_pid_file(tmp_path / name)
        cleanup.pids.append((pid, start_time(pid)))
        assert start_time(pid) is None, f"{name} {pid} survived the shim"


def test_leftover_ignoring_sigterm_is_sigkilled(tmp_path, cleanup):
    cmd = ("(trap '' TERM; echo $BASHPID > bg.pid; exec sleep 1000) & "
           "while [ ! -s bg.pid ]; do sleep 0.01; done; exit 0")
    s = Shim(tmp_path, cleanup, command=cmd, kill_grace=1)
    t0 = time.monotonic()
    assert s.finish() == 0, s.stderr
    elapsed = time.monotonic() - t0
    assert s.result()["exit_code"] == 0
    pid = read_pid_file(tmp_path / "bg.pid")
    cleanup.pids.append((pid, start_time(pid)))
    assert start_time(pid) is None
    assert 0.9 <= elapsed < 6


# ---- failures to start ------------------------------------------------------------


def test_missing_script_is_127(tmp_path, cleanup):
    missing = tmp_path / "nope.sh"
    s = run(tmp_path, cleanup, script=missing)
    r = s.result()
    assert r["exit_code"] == 127 and r["signal"] is None
    assert f"gflow-shim: cannot execute {missing}: No such file or directory" in s.log_text()
    assert str(missing) in r["error"]


def test_command_not_found_path_is_127(tmp_path, cleanup):
    # bash itself exits 127 here; the shim keeps the code and says why.
    r = run(tmp_path, cleanup, command="/no/such/program").result()
    assert (r["exit_code"], r["error"]) == (127, "command not found: /no/such/program")


# A command whose first word bash cannot find or execute never started: 127/126 and the
# reason in the exit file's error (the daemon then reports LaunchFailed).
@pytest.mark.parametrize("command,code,error", [
    ("nosuchprogram-xyz", 127, "command not found: nosuchprogram-xyz"),
    ("nosuchprogram-xyz --flag; echo after", 0, None),     # the job went on: its status
    ("FOO=1 'no such'/prog arg", 127, "command not found: no such/prog"),
    ("  X+=y \\\nnosuch\\ prog", 127, "command not found: nosuch prog"),
    ("./notexec.sh", 126, "not executable: ./notexec.sh"),
    ("./adir", 126, "not executable: ./adir"),
    ("nosuchprogram-xyz>out 2>&1", 127, "command not found: nosuchprogram-xyz"),
    ("plainfile", 126, "not executable: plainfile"),     # along PATH, without x bits
])
def test_command_that_cannot_start_says_why(tmp_path, cleanup, command, code, error):
    (tmp_path / "notexec.sh").write_text("#!/bin/sh\necho should not run\n")
    (tmp_path / "notexec.sh").chmod(0o644)
    (tmp_path / "adir").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "plainfile").write_text("echo should not run\n")
    s = run(tmp_path, cleanup, command=command, env=(f"{JOB_PATH}:{bin_dir}",))
    r = s.result()
    assert (r["exit_code"], r["signal"], r["error"]) == (code, None, error), s.log_text()
    assert "should not run" not in s.log_text()


# 127 or 126 from a command bash could start (a builtin, a function, a program found
# along the job's PATH) is the job's own status; so is whatever the shim cannot tell
# for sure (an expansion, BASH_ENV).
@pytest.mark.parametrize("command,extra_env", [
    ("exit 127", ()),
    ("'exit' 126", ()),
    ("sh -c 'exit 127'", ()),
    ("myprog", ()),                                      # on the job's PATH only
    ("fails127", ("BASH_FUNC_fails127%%=() {  return 127\n}",)),
    ("f() { return 127; }; f", ()),
    ("$PROG", ("PROG=nosuchprogram-xyz",)),
    ("nosuch*", ()),
    ("2>/dev/null nosuchprogram-xyz", ()),                # a redirection comes first
    ("nosuchprogram-xyz", ("BASH_ENV=/dev/null",)),
])
def test_exit_127_of_a_command_that_started_is_the_jobs_own(tmp_path, cleanup, command,
                                                              extra_env):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "myprog").write_text("#!/bin/sh\nexit 127\n")
    (bin_dir / "myprog").chmod(0o755)
    env = (f"{JOB_PATH}:{bin_dir}", *extra_env)
    s = run(tmp_path, cleanup, command=command, env=env)
    r = s.result()
    assert r["exit_code"] in (126, 127) and r["error"] is None, (r, s.log_text())


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_not_executable_is_judged_as_the_job_user(tmp_path, cleanup):
    # root could execute a file with only its owner's x bit; the job user cannot.
    shared = Path(tempfile.mkdtemp(prefix="gflow-lookup-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        prog = shared / "rootonly.sh"
        prog.write_text("#!/bin/sh\necho ran\n")
        prog.chmod(0o744)
        user = ("--uid", "65534", "--gid", "65534", "--user", "nobody", "--groups", "65534")
        s = run(tmp_path, cleanup, workdir="/", extra=user, command=f"{prog} now")
        r = s.result()
        assert (r["exit_code"], r["error"]) == (126, f"not executable: {prog}"), s.log_text()
        prog.chmod(0o755)
        s = run(tmp_path, cleanup, workdir="/", extra=user, command=f"{prog} now")
        assert (s.result()["exit_code"], s.result()["error"]) == (0, None)
    finally:
        shutil.rmtree(shared)


def test_non_executable_script_with_shebang_is_126(tmp_path, cleanup):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\necho should not run\n")
    script.chmod(0o644)
    s = run(tmp_path, cleanup, script=script)
    assert s.result()["exit_code"] == 126
    log = s.log_text()
    assert f"gflow-shim: cannot execute {script}: Permission denied" in log
    assert "should not run" not in log


def test_bad_workdir_is_125(tmp_path, cleanup):
    s = run(tmp_path, cleanup, command="echo ran", workdir=tmp_path / "missing")
    r = s.result()
    assert r["exit_code"] == 125 and "chdir" in r["error"]
    assert s.log_text().startswith("gflow-shim: cannot chdir to")
    assert "ran" not in s.log_text()


def test_log_that_cannot_be_opened_still_writes_exit_file(tmp_path, cleanup):
    s = Shim(tmp_path, cleanup, command="echo ran > ran", log=tmp_path / "no" / "job.log")
    assert s.finish() == 1
    r = s.result()
    assert r["exit_code"] == 125 and "cannot open log" in r["error"]
    assert r["signal"] is None and r["job_id"] == 42
    assert not (tmp_path / "ran").exists()
    assert not s.env_file.exists()
    assert len(s.stderr.splitlines()) == 1


def test_usage_errors(tmp_path, cleanup):
    p = subprocess.run([str(SHIM)], env=DAEMON_ENV, capture_output=True, text=True, timeout=5)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("gflow-shim: ")

    p = subprocess.run([str(SHIM), "--help"], env=DAEMON_ENV, capture_output=True, text=True,
                       timeout=5)
    assert p.returncode == 0 and p.stdout.startswith("usage: gflow-shim")

    # With the exit file known, the daemon gets its answer there too.
    exit_file = tmp_path / "exit.json"
    env_file = tmp_path / "job.env"
    env_file.write_bytes(b"SECRET=x\0")
    p = subprocess.run([str(SHIM), "--job-id", "9", "--exit-file", str(exit_file),
                        "--env-file", str(env_file), "--workdir", str(tmp_path),
                        "--kill-grace", "1", "--command", "true"],
                       env=DAEMON_ENV, capture_output=True, text=True, timeout=5)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1
    assert "--log" in p.stderr
    r = json.loads(exit_file.read_text())
    assert r["job_id"] == 9 and r["exit_code"] == 125 and "--log" in r["error"]
    assert not env_file.exists()

    for bad in (["--kill-grace", "soon"], ["--bogus"], ["--command"]):
        p = subprocess.run([str(SHIM), *bad], env=DAEMON_ENV, capture_output=True,
                           text=True, timeout=5)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, (bad, p.stderr)


# ---- several copies of the job (--tasks) -------------------------------------------

TASK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES",
             "MASTER_ADDR", "MASTER_PORT", "NVIDIA_VISIBLE_DEVICES")


def tasks(n, gpus):
    return ("--tasks", str(n), "--task-gpus", gpus)


def test_each_copy_gets_its_rank_and_gpu(tmp_path, cleanup):
    # The env file's own values of the rank variables are replaced, not duplicated.
    env = [JOB_PATH, "CUDA_VISIBLE_DEVICES=2,GPU-5f3a", "NVIDIA_VISIBLE_DEVICES=GPU-aa,GPU-bb",
           "RANK=9", "MASTER_PORT=1", "OTHER=kept"]
    cmd = ('echo "$RANK $LOCAL_RANK $WORLD_SIZE $CUDA_VISIBLE_DEVICES $MASTER_ADDR '
           '$MASTER_PORT" > rank$RANK.out; env -0 > env$RANK.out; '
           'echo "$$ $(cut -d" " -f5 /proc/$$/stat) $(pwd)" > ids$RANK.out; echo "copy $RANK"')
    s = run(tmp_path, cleanup, env=env, command=cmd, extra=tasks(2, "2,GPU-5f3a"))
    r = s.result()
    assert r["exit_code"] == 0 and r["signal"] is None and r["error"] is None
    lines = [(tmp_path / f"rank{i}.out").read_text().split() for i in (0, 1)]
    assert [l[:5] for l in lines] == [["0", "0", "2", "2", "127.0.0.1"],
                                      ["1", "1", "2", "GPU-5f3a", "127.0.0.1"]]
    assert lines[0][5] == lines[1][5] and int(lines[0][5]) > 0, "copies disagree on MASTER_PORT"
    for i in (0, 1):
        entries = [e for e in (tmp_path / f"env{i}.out").read_text().split("\0") if e]
        got = dict(e.split("=", 1) for e in entries)
        assert len(got) == len(entries), "a variable is set twice"
        assert {k: got.get(k) for k in TASK_VARS} == {
            "RANK": str(i), "LOCAL_RANK": str(i), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
            "CUDA_VISIBLE_DEVICES": ["2", "GPU-5f3a"][i], "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": lines[0][5], "NVIDIA_VISIBLE_DEVICES": "GPU-aa,GPU-bb"}
        assert got["OTHER"] == "kept"
    # One process group, led by the first copy; same workdir; one shared log.
    ids = [(tmp_path / f"ids{i}.out").read_text().split() for i in (0, 1)]
    assert ids[0][1] == ids[0][0] and ids[1][1] == ids[0][0], ids
    assert ids[0][2] == ids[1][2] == str(tmp_path)
    assert sorted(s.log_text().splitlines()) == ["copy 0", "copy 1"]


@pytest.mark.parametrize("failing_rank,failure,expect", [
    (1, "exit 3", {"exit_code": 3, "signal": None}),
    (0, "exit 3", {"exit_code": 3, "signal": None}),  # the group's leader goes first
    (1, "kill -9 $$", {"exit_code": None, "signal": 9}),
])
def test_failing_copy_stops_the_others(tmp_path, cleanup, failing_rank, failure, expect):
    cmd = (f'if [ "$RANK" = {failing_rank} ]; then '
           f'while [ ! -e go ]; do sleep 0.01; done; {failure}; fi; '
           'echo $$ > sleeper.pid; exec sleep 1000')
    s = Shim(tmp_path, cleanup, command=cmd, kill_grace=30, extra=tasks(2, "0,1"))
    sleeper = s.wait_pid_file("sleeper.pid", cleanup)
    assert s.proc.poll() is None
    t0 = time.monotonic()
    (tmp_path / "go").touch()
    assert s.finish(timeout=15) == 0, s.stderr
    # SIGTERM did it: nobody waited for the sleep, nor for the 30 s grace.
    assert time.monotonic() - t0 < 10
    r = s.result()
    # The failing copy's status, not the SIGTERM its sibling got afterwards.
    assert {k: r[k] for k in expect} == expect
    assert_gone(*sleeper)


def test_all_copies_succeed_and_peak_memory_is_the_largest(tmp_path, cleanup):
    # Only copy 1 uses much memory: the shim must not report copy 0's peak alone.
    cmd = ('echo "copy $RANK"; if [ "$RANK" = 1 ]; then '
           'exec python3 -c "b = b\'x\' * (150 << 20)"; fi; sleep 0.$RANK')
    s = run(tmp_path, cleanup, command=cmd, extra=tasks(3, "0,1,2"))
    r = s.result()
    assert r["exit_code"] == 0 and r["signal"] is None and r["error"] is None
    assert r["max_rss_kb"] >= 150 * 1024
    assert sorted(s.log_text().splitlines()) == ["copy 0", "copy 1", "copy 2"]


def test_cancel_stops_every_copy(tmp_path, cleanup):
    s = Shim(tmp_path, cleanup, command="echo $$ > copy$RANK.pid; exec sleep 1000",
             kill_grace=30, extra=tasks(2, "0,1"))
    copies = [s.wait_pid_file(f"copy{i}.pid", cleanup) for i in (0, 1)]
    os.kill(s.proc.pid, signal.SIGTERM)
    assert s.finish() == 0, s.stderr
    r = s.result()
    assert r["signal"] == signal.SIGTERM and r["exit_code"] is None
    for c in copies:
        assert_gone(*c)


def test_copies_that_cannot_start_report_one_line(tmp_path, cleanup):
    missing = tmp_path / "nope.sh"
    r = run(tmp_path, cleanup, script=missing, extra=tasks(2, "0,1")).result()
    assert r["exit_code"] == 127
    assert r["error"] == f"gflow-shim: cannot execute {missing}: No such file or directory"


@pytest.mark.parametrize("bad", [
    ("--tasks", "2"),                              # no GPUs named
    ("--tasks", "2", "--task-gpus", "0"),          # too few
    ("--tasks", "2", "--task-gpus", "0,1,2"),      # too many
    ("--task-gpus", "0,1"),                        # --tasks defaults to 1
    ("--tasks", "2", "--task-gpus", "0,"),         # empty entry
    ("--tasks", "2", "--task-gpus", "1,1"),        # one GPU twice
    ("--tasks", "0", "--task-gpus", ""),
    ("--tasks", "two", "--task-gpus", "0,1"),
    ("--tasks", "100000"),
])
def test_bad_tasks_options_are_usage_errors(tmp_path, cleanup, bad):
    s = Shim(tmp_path, cleanup, command="touch ran", extra=bad)
    assert s.finish() == 2
    assert len(s.stderr.splitlines()) == 1 and s.stderr.startswith("gflow-shim: "), s.stderr
    assert s.result()["exit_code"] == 125
    assert not (tmp_path / "ran").exists()


def test_one_task_without_gpus_is_the_plain_job(tmp_path, cleanup):
    env = [JOB_PATH, "CUDA_VISIBLE_DEVICES=3"]
    s = run(tmp_path, cleanup, env=env, command="env -0", extra=("--tasks", "1"))
    assert s.result()["exit_code"] == 0
    got = dict(e.split("=", 1) for e in s.log_text().split("\0") if e)
    assert got.pop("GFLOW_SHIM_ID").startswith(f"{s.proc.pid}:")
    assert got == {"PATH": JOB_PATH.split("=", 1)[1], "CUDA_VISIBLE_DEVICES": "3"}
    r = run(tmp_path, cleanup, command="exit 4", extra=("--tasks", "1")).result()
    assert r["exit_code"] == 4


def test_one_task_with_a_gpu_gets_rank_zero(tmp_path, cleanup):
    s = run(tmp_path, cleanup, command='echo "$RANK $WORLD_SIZE $CUDA_VISIBLE_DEVICES"',
            extra=tasks(1, "GPU-5f3a"))
    assert s.result()["exit_code"] == 0
    assert s.log_text() == "0 1 GPU-5f3a\n"


# ---- daemon hand-off --------------------------------------------------------------


def test_lock_fd_holds_pid_and_start_time(tmp_path, cleanup):
    lock_path = tmp_path / "job.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b"stale content that is longer than the new one\n")
    fcntl.flock(fd, fcntl.LOCK_EX)
    s = Shim(tmp_path, cleanup, extra=("--lock-fd", str(fd)), pass_fds=(fd,),
             command=f"test -e /proc/$$/fd/{fd} && echo lock fd leaked; "
                     "echo $$ > main.pid; while [ ! -e go ]; do sleep 0.01; done")
    os.close(fd)  # like the daemon after the fork: the shim alone holds the lock now
    s.wait_pid_file("main.pid", cleanup)
    text = lock_path.read_text()
    first, *rest = text.splitlines()
    pid, st = first.split()
    assert int(pid) == s.proc.pid and int(st) == start_time(s.proc.pid)
    # Then the job's own cgroup, where one could be made (step 9).
    assert rest == ([f"cgroup: {jobcg_dir(s)}"] if JOBCG_KIND else []), text

    def locked():
        with open(lock_path) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return False
            except BlockingIOError:
                return True
    assert locked(), "the shim does not hold the daemon's lock"
    (tmp_path / "go").touch()
    assert s.finish() == 0, s.stderr
    assert not locked(), "lock still held after the shim exited"
    assert "leaked" not in s.log_text()
    assert lock_path.read_text() == text, "a shim that succeeded wrote an error line"


def locked_file(tmp_path):
    """A lock file flock()ed as the daemon does before it starts the shim: (path, fd)."""
    path = tmp_path / "job.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return path, fd


def lock_lines(path, pid):
    """The lock file's lines after the shim pid exited, its pid line checked."""
    lines = path.read_text().split("\n")
    assert lines[-1] == "", lines  # every line ends with its newline
    got_pid, start = lines[0].split()
    assert int(got_pid) == pid and int(start) > 0, lines
    return lines[1:-1]


def test_shim_that_cannot_write_its_exit_file_says_why_in_the_lock_file(tmp_path, cleanup):
    lock_path, fd = locked_file(tmp_path)
    exit_file = tmp_path / "no" / "exit.json"
    s = Shim(tmp_path, cleanup, command="echo ran", exit_file=exit_file,
             extra=("--lock-fd", str(fd)), pass_fds=(fd,))
    os.close(fd)
    assert s.finish() == 1, s.stderr
    assert not exit_file.exists()
    why = f"cannot write {exit_file}: No such file or directory"
    # "lost": the job ran, only its outcome could not be recorded (ShimLost, not a
    # launch failure).
    assert lock_lines(lock_path, s.proc.pid) == [f"lost: {why}"]
    assert s.stderr == f"gflow-shim: job 42: {why}\n"
    assert s.log_text() == "ran\n"  # the job itself ran


def test_shim_that_fails_before_the_job_says_why_in_the_lock_file(tmp_path, cleanup):
    lock_path, fd = locked_file(tmp_path)
    exit_file = tmp_path / "no" / "exit.json"
    log = tmp_path / "nolog" / "job.log"
    s = Shim(tmp_path, cleanup, command="touch ran", exit_file=exit_file, log=log,
             extra=("--lock-fd", str(fd)), pass_fds=(fd,))
    os.close(fd)
    assert s.finish() == 1, s.stderr
    assert lock_lines(lock_path, s.proc.pid) == [
        f"error: cannot open log {log}: No such file or directory"]
    assert not (tmp_path / "ran").exists()


def lock_record(path):
    """The lock file's lines (up to the first NUL, before byte 8192) and the exit record
    the shim wrote at byte 8192 (None: none)."""
    data = path.read_bytes()
    lines = data[:8192].split(b"\0")[0].decode()
    return lines, (json.loads(data[8192:]) if len(data) > 8192 else None)


def test_exit_record_goes_into_the_lock_file_without_exit_file(tmp_path, cleanup):
    lock_path, fd = locked_file(tmp_path)
    s = Shim(tmp_path, cleanup, command="echo ran; exit 3", record_in_lock=True,
             extra=("--lock-fd", str(fd)), pass_fds=(fd,))
    os.close(fd)
    assert s.finish() == 0, s.stderr
    lines, rec = lock_record(lock_path)
    pid, st = lines.split("\n")[0].split()
    assert int(pid) == s.proc.pid and int(st) > 0
    assert not any(l.startswith(("error:", "lost:")) for l in lines.splitlines()), lines
    assert (rec["job_id"], rec["exit_code"], rec["signal"], rec["error"]) == (42, 3, None, None)
    assert rec["finished_at"] >= rec["started_at"] > 0
    assert not s.exit_file.exists()
    assert s.log_text() == "ran\n"


def test_failure_before_the_job_with_the_record_in_the_lock_file(tmp_path, cleanup):
    lock_path, fd = locked_file(tmp_path)
    log = tmp_path / "nolog" / "job.log"
    s = Shim(tmp_path, cleanup, command="touch ran", log=log, record_in_lock=True,
             extra=("--lock-fd", str(fd)), pass_fds=(fd,))
    os.close(fd)
    assert s.finish() == 1, s.stderr
    why = f"cannot open log {log}: No such file or directory"
    lines, rec = lock_record(lock_path)
    assert lines.split("\n")[1:] == [f"error: {why}", ""], lines
    assert (rec["exit_code"], rec["error"]) == (125, why)
    assert not (tmp_path / "ran").exists()


def test_shim_needs_an_exit_file_or_a_lock_fd(tmp_path, cleanup):
    s = Shim(tmp_path, cleanup, command="touch ran", record_in_lock=True)
    assert s.finish() == 2
    assert "missing --exit-file or --lock-fd" in s.stderr, s.stderr
    assert not (tmp_path / "ran").exists()


def test_usage_error_is_in_the_lock_file_and_the_exit_file(tmp_path, cleanup):
    lock_path, fd = locked_file(tmp_path)
    s = Shim(tmp_path, cleanup, command="touch ran",
             extra=("--lock-fd", str(fd), "--tasks", "0"), pass_fds=(fd,))
    os.close(fd)
    assert s.finish() == 2, s.stderr
    why = "bad --tasks '0' (1 to 256)"
    assert lock_lines(lock_path, s.proc.pid) == [f"error: {why}"]
    r = s.result()
    assert (r["exit_code"], r["error"]) == (125, why)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_runs_as_the_given_user(tmp_path, cleanup):
    s = run(tmp_path, cleanup, workdir="/",
            extra=("--uid", "65534", "--gid", "65534", "--user", "nobody", "--groups", "65534"),
            command="echo ids=$(id -u) $(id -g) $(id -G); pwd")
    assert s.result()["exit_code"] == 0
    assert "ids=65534 65534 65534" in s.log_text()
    st = s.log.stat()
    assert (st.st_uid, st.st_gid) == (65534, 65534)


def test_groups_option_sets_the_jobs_groups(tmp_path, cleanup):
    if os.geteuid() != 0:
        pytest.skip("needs a root shim")
    s = run(tmp_path, cleanup, workdir="/",
            extra=("--uid", "65534", "--gid", "65534", "--user", "nobody",
                   "--groups", "65534,4242"),
            command="echo ids=$(id -u) $(id -g) $(id -G)")
    assert s.result()["exit_code"] == 0
    assert "ids=65534 65534 65534 4242" in s.log_text()


@pytest.mark.parametrize("bad", ["", ",", "1,x", "-1", "4294967295"])
def test_bad_groups_are_usage_errors(tmp_path, cleanup, bad):
    s = Shim(tmp_path, cleanup, command="true",
             extra=("--uid", "65534", "--gid", "65534", "--user", "nobody", "--groups", bad))
    assert s.finish() == 2
    assert "bad --groups" in s.stderr


def test_groups_needs_the_user(tmp_path, cleanup):
    s = Shim(tmp_path, cleanup, command="true", extra=("--groups", "1"))
    assert s.finish() == 2
    assert "--groups needs --uid" in s.stderr


def test_the_user_needs_groups(tmp_path, cleanup):
    """The shim never looks groups up (it is static, without NSS): gflowd passes them."""
    s = Shim(tmp_path, cleanup, command="true",
             extra=("--uid", "65534", "--gid", "65534", "--user", "nobody"))
    assert s.finish() == 2
    assert "--uid needs --groups" in s.stderr


# ---- device isolation (--deny-devices, cgroup v1 devices controller) ---------------

NVIDIA_MAJOR = 195

# Opens the device node given as argv[1] and prints the errno's name (or "opened"),
# then the job's own cgroup in the devices hierarchy.
DEVICE_PROBE = r"""
import errno, sys
try:
    open(sys.argv[1], "rb").close()
    print("open=opened")
except OSError as e:
    print("open=" + errno.errorcode[e.errno])
for line in open("/proc/self/cgroup"):
    _, ctrl, path = line.rstrip("\n").split(":", 2)
    if "devices" in ctrl.split(","):
        print("cgroup=" + path)
"""


def devices_v1_mount():
    """(mount point, the cgroup its root shows) of the cgroup v1 devices hierarchy, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fstype, _, superopts = right.split()[:3]
            if fstype == "cgroup" and "devices" in superopts.split(","):
                fields = left.split()
                unescape = lambda s: s.encode().decode("unicode_escape")
                return unescape(fields[4]), unescape(fields[3])
    return None


def own_devices_cgroup():
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrl, path = line.rstrip("\n").split(":", 2)
            if "devices" in ctrl.split(","):
                return path
    return None


_DEVICES_MOUNT = devices_v1_mount()
needs_devices_cgroup = pytest.mark.skipif(
    os.geteuid() != 0 or _DEVICES_MOUNT is None,
    reason="device isolation needs root and the cgroup v1 devices controller mounted "
           f"(euid {os.geteuid()}, devices mount {_DEVICES_MOUNT})")

_job_ids = iter(range(1, 1000))


def unique_job_id():
    """A job id no other concurrent run of these tests uses: the cgroup is named after it."""
    return 10**9 + os.getpid() * 1000 + next(_job_ids)


def job_cgroup(job_id):
    """(the cgroup path the job should be in, its directory): below the shim's own
    devices cgroup, which is this test's (the shim is its child)."""
    point, root = _DEVICES_MOUNT
    own = own_devices_cgroup()
    rel = own if root == "/" else own[len(root):]
    rel = "" if rel == "/" else rel
    return f"{own.rstrip('/')}/gflow/job-{job_id}", Path(f"{point}{rel}/gflow/job-{job_id}")


def fake_gpu(directory, minor):
    """A char device node 195:minor: no driver behind it, so open() gives ENXIO/ENODEV
    unless a devices cgroup refuses it first (EPERM)."""
    path = directory / f"nvidia{minor}"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, minor))
    (directory / "probe.py").write_text(DEVICE_PROBE)
    return path


def probe_results(log_text):
    return [line for line in log_text.splitlines()
            if line.startswith(("open=", "cgroup="))]


@needs_devices_cgroup
def test_denied_gpu_cannot_be_opened_and_the_cgroup_is_removed(tmp_path, cleanup):
    dev = fake_gpu(tmp_path, 7)
    job_id = unique_job_id()
    path, directory = job_cgroup(job_id)
    s = run(tmp_path, cleanup, command=f"python3 probe.py {dev}",
            extra=("--job-id", str(job_id), "--deny-devices", "3,7"))
    assert s.result()["exit_code"] == 0, s.log_text()
    assert probe_results(s.log_text()) == ["open=EPERM", f"cgroup={path}"]
    assert "unavailable" not in s.log_text()
    assert not directory.exists(), f"{directory} left behind"


@needs_devices_cgroup
def test_without_deny_devices_the_node_answers_as_usual(tmp_path, cleanup):
    dev = fake_gpu(tmp_path, 7)
    s = run(tmp_path, cleanup, command=f"python3 probe.py {dev}")
    lines = probe_results(s.log_text())
    assert lines[0] in ("open=ENXIO", "open=ENODEV"), lines
    assert "/gflow/job-" not in lines[1]


@needs_devices_cgroup
def test_only_the_listed_minors_are_denied(tmp_path, cleanup):
    dev = fake_gpu(tmp_path, 7)
    job_id = unique_job_id()
    path, directory = job_cgroup(job_id)
    s = run(tmp_path, cleanup, command=f"python3 probe.py {dev}",
            extra=("--job-id", str(job_id), "--deny-devices", "0,6,8"))
    lines = probe_results(s.log_text())
    assert lines[0] in ("open=ENXIO", "open=ENODEV") and lines[1] == f"cgroup={path}", lines
    assert not directory.exists()


@needs_devices_cgroup
def test_every_copy_and_its_children_are_denied(tmp_path, cleanup):
    dev = fake_gpu(tmp_path, 7)
    job_id = unique_job_id()
    path, directory = job_cgroup(job_id)
    # Each copy probes in a child and leaves a background process behind: the cgroup
    # can only be removed once the shim has killed those too.
    cmd = f"python3 probe.py {dev} > probe$RANK.out; sleep 30 &"
    s = run(tmp_path, cleanup, command=cmd,
            extra=("--job-id", str(job_id), "--deny-devices", "7", *tasks(2, "0,1")))
    for rank in (0, 1):
        lines = probe_results((tmp_path / f"probe{rank}.out").read_text())
        assert lines == ["open=EPERM", f"cgroup={path}"], (rank, lines)
    assert not directory.exists()


@needs_devices_cgroup
def test_job_user_is_denied_too(tmp_path, cleanup):
    # The child joins the cgroup while still root, then becomes the job user. The node
    # lives in a directory the user can reach (pytest's tmp_path is root's alone).
    shared = Path(tempfile.mkdtemp(prefix="gflow-devtest-"))
    try:
        shared.chmod(0o755)
        dev = fake_gpu(shared, 7)
        job_id = unique_job_id()
        path, directory = job_cgroup(job_id)
        s = run(tmp_path, cleanup, workdir=shared, command=f"python3 probe.py {dev}",
                extra=("--job-id", str(job_id), "--deny-devices", "7", "--uid", "65534",
                       "--gid", "65534", "--user", "nobody", "--groups", "65534"))
        assert probe_results(s.log_text()) == ["open=EPERM", f"cgroup={path}"], s.log_text()
        assert not directory.exists()
    finally:
        shutil.rmtree(shared)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="hiding the devices controller needs root and unshare(1)")
def test_without_the_controller_the_job_runs_and_the_log_says_why(tmp_path, cleanup):
    # A private mount namespace without any cgroup v1 devices mount: as on a pure
    # cgroup v2 host, isolation is unavailable, and the job runs anyway.
    dev = fake_gpu(tmp_path, 7)
    hide = ("grep ' - cgroup ' /proc/self/mountinfo | grep devices | cut -d' ' -f5 | "
            "while read m; do umount -l \"$m\"; done; exec \"$@\"")
    env_file, log, exit_file = tmp_path / "job.env", tmp_path / "job.log", tmp_path / "exit.json"
    env_file.write_bytes(JOB_PATH.encode() + b"\0")
    shim = [str(SHIM), "--job-id", "42", "--exit-file", str(exit_file), "--log", str(log),
            "--workdir", str(tmp_path), "--env-file", str(env_file), "--kill-grace", "5",
            "--deny-devices", "7", "--command", f"python3 probe.py {dev}"]
    args = ["unshare", "-m", "--propagation", "private", "sh", "-c", hide, "sh", *shim]
    p = subprocess.run(args, env=DAEMON_ENV, capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    log = log.read_text()
    unavailable = [ln for ln in log.splitlines() if "device isolation unavailable" in ln]
    assert unavailable == ["gflow-shim: device isolation unavailable: no cgroup v1 devices "
                           "controller is mounted (on cgroup v2 device access is controlled "
                           "by an eBPF program, which gflow does not load)"], log
    assert json.loads(exit_file.read_text())["exit_code"] == 0
    assert probe_results(log)[0] in ("open=ENXIO", "open=ENODEV"), log


def test_bad_deny_devices_are_usage_errors(tmp_path, cleanup):
    for bad in ("", "x", "1,,2", "-1", "1048576", "3 "):
        s = Shim(tmp_path, cleanup, command="true", extra=("--deny-devices", bad))
        assert s.finish() == 2, bad
        assert "--deny-devices" in s.stderr and len(s.stderr.splitlines()) == 1, s.stderr
        assert s.result()["exit_code"] == 125


# ---- the memory limit (--memory-limit) ----------------------------------------------

# 300 MiB touched (bytearray zero-fills it) against a 100 MiB limit; the sleep is what
# a limit that is not enforced would wait out (well past the tests' "promptly": 10 s).
OVER_LIMIT = 'python3 -c "b = bytearray(300*1024*1024); import time; time.sleep(20)"'
MEMORY_LINE = "gflow-shim: job exceeded its memory limit of 100 MiB ({})"
METHOD_NAMES = {"v2": "cgroup v2", "v1": "cgroup v1", "watchdog": "watchdog"}


def cgroup_mount(controller):
    """(mount point, the cgroup its root shows) of the v1 hierarchy of controller, or of
    the unified (cgroup2) hierarchy when controller is None; None if not mounted."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fstype, _, superopts = right.split()[:3]
            if (fstype == "cgroup2" if controller is None else
                    fstype == "cgroup" and controller in superopts.split(",")):
                fields = left.split()
                unescape = lambda s: s.encode().decode("unicode_escape")
                return unescape(fields[4]), unescape(fields[3])
    return None


def own_cgroup(controller):
    """This process's cgroup in the v1 hierarchy of controller, or the unified one."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, ctrl, path = line.rstrip("\n").split(":", 2)
            if (hid == "0" and ctrl == "" if controller is None else
                    controller in ctrl.split(",")):
                return path
    return None


def own_cgroup_dir(controller):
    """The directory of this process's cgroup (and so of the shim's, its child)."""
    point, root = cgroup_mount(controller)
    own = own_cgroup(controller)
    rel = own if root == "/" else own[len(root):]
    return own, Path(point + ("" if rel == "/" else rel))


def memory_v2_unavailable():
    """Why the shim cannot use cgroup v2 here, or None. It needs the memory controller
    in its cgroup's cgroup.controllers, and enabled for its children or its cgroup the
    root (a cgroup holding processes cannot enable controllers for its children)."""
    if os.geteuid() != 0:
        return "creating cgroups here needs root"
    if cgroup_mount(None) is None:
        return "no cgroup2 hierarchy is mounted"
    own, base = own_cgroup_dir(None)
    controllers = (base / "cgroup.controllers").read_text().split()
    if "memory" not in controllers:
        return (f"the memory controller is not in {base}/cgroup.controllers "
                f"({controllers}): it is bound to the cgroup v1 hierarchy on this host")
    # Only the root cgroup lacks cgroup.type (a container's "/" may be no root).
    if ((base / "cgroup.type").exists() and
            "memory" not in (base / "cgroup.subtree_control").read_text().split()):
        return (f"memory is not enabled in {base}/cgroup.subtree_control, and the shim's "
                "cgroup holds processes, so it cannot be")
    return None


def memory_v1_unavailable():
    if os.geteuid() != 0:
        return "creating cgroups here needs root"
    if cgroup_mount("memory") is None:
        return "no cgroup v1 memory controller is mounted"
    return None


MEMORY_UNAVAILABLE = {"v2": memory_v2_unavailable(), "v1": memory_v1_unavailable(),
                      "watchdog": None}
# What the shim picks on its own: the first method available.
AUTO_METHOD = next(m for m in ("v2", "v1", "watchdog") if MEMORY_UNAVAILABLE[m] is None)


def memory_job_cgroup(method, job_id, shim_pid):
    """(the cgroup path the job is in, its directory) for a cgroup method: on v2 the
    job's own cgroup (step 9), on v1 a memory cgroup of its own."""
    if method == "v2":
        own, base = own_cgroup_dir(None)
        name = f"gflow-job-{job_id}.{shim_pid}"
        return f"{own.rstrip('/')}/{name}", base / name
    own, base = own_cgroup_dir("memory")
    return f"{own.rstrip('/')}/gflow/job-{job_id}", base / "gflow" / f"job-{job_id}"


def memory_shim(tmp_path, cleanup, method, command, extra=()):
    """Starts a shim with --memory-limit 100 and the method forced (None: its own pick);
    returns (shim, job id, the method to expect, the job's cgroup path and directory)."""
    if method is not None and MEMORY_UNAVAILABLE[method]:
        pytest.skip(f"memory enforcement {method} unavailable: {MEMORY_UNAVAILABLE[method]}")
    expect = method or AUTO_METHOD
    job_id = unique_job_id()
    shim_env = dict(DAEMON_ENV)
    if method is not None:
        shim_env["GFLOW_SHIM_MEMORY_METHOD"] = method
    s = Shim(tmp_path, cleanup, command=command, shim_env=shim_env,
             extra=("--job-id", str(job_id), "--memory-limit", "100", *extra))
    path, directory = (memory_job_cgroup(expect, job_id, s.proc.pid) if expect != "watchdog"
                       else (None, None))
    return s, expect, path, directory


ALL_METHODS = [None, "v2", "v1", "watchdog"]


@pytest.mark.parametrize("method", ALL_METHODS)
def test_job_over_the_memory_limit_is_killed(tmp_path, cleanup, method):
    t0 = time.monotonic()
    s, expect, _, directory = memory_shim(tmp_path, cleanup, method, OVER_LIMIT)
    assert s.finish(timeout=30) == 0, s.stderr
    elapsed = time.monotonic() - t0
    r = s.result()
    assert (r["oom"], r["signal"], r["exit_code"]) == (True, 9, None), (r, s.log_text())
    assert r["memory_enforcement"] == METHOD_NAMES[expect]
    assert s.log_text().splitlines() == [MEMORY_LINE.format(METHOD_NAMES[expect])]
    assert elapsed < 10, f"took {elapsed:.1f}s: the limit was not enforced promptly"
    if directory is not None:
        assert not directory.exists(), f"{directory} left behind"


@pytest.mark.parametrize("method", ALL_METHODS)
def test_job_under_the_memory_limit_runs_normally_in_its_cgroup(tmp_path, cleanup, method):
    # 20 MiB and a background process left behind: the cgroup can only go once the shim
    # has stopped that too.
    cmd = ('python3 -c "b = bytearray(20*1024*1024); print(open(\'/proc/self/cgroup\').read())"'
           "; sleep 30 & echo done")
    s, expect, path, directory = memory_shim(tmp_path, cleanup, method, cmd)
    assert s.finish() == 0, s.stderr
    r = s.result()
    assert (r["oom"], r["exit_code"], r["signal"]) == (False, 0, None), (r, s.log_text())
    assert r["memory_enforcement"] == METHOD_NAMES[expect]
    log = s.log_text()
    assert "memory limit" not in log and log.rstrip().endswith("done"), log
    if expect == "v2":
        assert f"0::{path}" in log.splitlines(), log
    elif expect == "v1":
        assert any(ln.split(":", 2)[2] == path and "memory" in ln.split(":")[1].split(",")
                   for ln in log.splitlines() if ln.count(":") >= 2), log
    if directory is not None:
        assert not directory.exists(), f"{directory} left behind"


@pytest.mark.parametrize("method", ALL_METHODS)
def test_memory_limit_holds_all_copies_together(tmp_path, cleanup, method):
    # 60 MiB per copy fits the limit alone; two copies together exceed it.
    cmd = 'python3 -c "b = bytearray(60*1024*1024); import time; time.sleep(20)"'
    t0 = time.monotonic()
    s, expect, _, directory = memory_shim(tmp_path, cleanup, method, cmd,
                                          extra=tasks(2, "0,1"))
    assert s.finish(timeout=30) == 0, s.stderr
    elapsed = time.monotonic() - t0
    r = s.result()
    assert (r["oom"], r["signal"]) == (True, 9), (r, s.log_text())
    assert r["memory_enforcement"] == METHOD_NAMES[expect]
    assert s.log_text().splitlines() == [MEMORY_LINE.format(METHOD_NAMES[expect])]
    assert elapsed < 10, f"took {elapsed:.1f}s: the limit was not enforced promptly"
    if directory is not None:
        assert not directory.exists(), f"{directory} left behind"


@pytest.mark.parametrize("method", ALL_METHODS)
def test_copies_under_the_memory_limit_together_succeed(tmp_path, cleanup, method):
    cmd = 'python3 -c "b = bytearray(20*1024*1024)"; echo rank$RANK'
    s, expect, _, directory = memory_shim(tmp_path, cleanup, method, cmd,
                                          extra=tasks(2, "0,1"))
    assert s.finish() == 0, s.stderr
    r = s.result()
    assert (r["oom"], r["exit_code"]) == (False, 0), (r, s.log_text())
    assert r["memory_enforcement"] == METHOD_NAMES[expect]
    assert sorted(s.log_text().split()) == ["rank0", "rank1"], s.log_text()
    if directory is not None:
        assert not directory.exists()


def test_without_memory_limit_there_is_no_enforcement_field(tmp_path, cleanup):
    s = run(tmp_path, cleanup, command="true")
    r = s.result()
    assert r["oom"] is False and "memory_enforcement" not in r


@pytest.mark.parametrize("method", ["v2", "v1"])
def test_forced_unavailable_method_fails_the_job_with_the_reason(tmp_path, cleanup, method):
    if MEMORY_UNAVAILABLE[method] is None:
        pytest.skip(f"memory enforcement {method} is available here")
    s = Shim(tmp_path, cleanup, command="echo ran",
             shim_env={**DAEMON_ENV, "GFLOW_SHIM_MEMORY_METHOD": method},
             extra=("--memory-limit", "100"))
    assert s.finish() == 1
    r = s.result()
    assert r["exit_code"] == 125
    assert r["error"].startswith(f"memory enforcement {method} unavailable: "), r
    assert "ran" not in s.log_text()


def test_bad_memory_limits_are_usage_errors(tmp_path, cleanup):
    for bad in ("", "0", "-1", "x", "1.5", "100M", "99999999999999999"):
        s = Shim(tmp_path, cleanup, command="true", extra=("--memory-limit", bad))
        assert s.finish() == 2, bad
        assert "--memory-limit" in s.stderr and len(s.stderr.splitlines()) == 1, s.stderr
        assert s.result()["exit_code"] == 125


def test_unknown_forced_memory_method_is_refused(tmp_path, cleanup):
    s = Shim(tmp_path, cleanup, command="echo ran",
             shim_env={**DAEMON_ENV, "GFLOW_SHIM_MEMORY_METHOD": "magic"},
             extra=("--memory-limit", "100"))
    assert s.finish() == 1
    assert "GFLOW_SHIM_MEMORY_METHOD" in s.result()["error"]
    assert "ran" not in s.log_text()


# ---- the job's own cgroup (step 9) --------------------------------------------------

def jobcg_unavailable(kind):
    """Why the shim cannot give a job a cgroup of that kind here, or None."""
    mount = cgroup_mount(None if kind == "v2" else "freezer")
    if mount is None:
        return f"no {'cgroup2' if kind == 'v2' else 'cgroup v1 freezer'} hierarchy is mounted"
    _, base = own_cgroup_dir(None if kind == "v2" else "freezer")
    if os.geteuid() != 0 and not os.access(base / "cgroup.procs", os.W_OK):
        return f"{base} is not ours to manage"
    return None


JOBCG_UNAVAILABLE = {k: jobcg_unavailable(k) for k in ("v2", "v1")}
# What the shim picks on its own: v2, else v1, else none.
JOBCG_KIND = next((k for k in ("v2", "v1") if JOBCG_UNAVAILABLE[k] is None), None)


def jobcg_of(s, kind=JOBCG_KIND, job_id=42):
    """(the cgroup path, its directory) of the job a Shim runs, for a kind of cgroup."""
    if kind == "v2":
        own, base = own_cgroup_dir(None)
        name = f"gflow-job-{job_id}.{s.proc.pid}"
        return f"{own.rstrip('/')}/{name}", base / name
    own, base = own_cgroup_dir("freezer")
    name = f"gflow/job-{job_id}.{s.proc.pid}"
    return f"{own.rstrip('/')}/{name}", base / name


def jobcg_dir(s, kind=JOBCG_KIND, job_id=42):
    return jobcg_of(s, kind, job_id)[1]


def cgroup_line(text, kind):
    """The job's cgroup path in a /proc/PID/cgroup text, for a kind of hierarchy."""
    for line in text.splitlines():
        hid, ctrl, path = line.split(":", 2)
        if (hid == "0" and ctrl == "") if kind == "v2" else "freezer" in ctrl.split(","):
            return path
    return None


@pytest.mark.parametrize("kind", [None, "v2", "v1", "none"])
def test_job_lives_in_a_cgroup_of_its_own(tmp_path, cleanup, kind):
    """Every process of the job is in the job's cgroup (a setsid'ed grandchild too), the
    lock file names it for the daemon, and it is removed after the job."""
    if kind in JOBCG_UNAVAILABLE and JOBCG_UNAVAILABLE[kind]:
        pytest.skip(f"job cgroup {kind} unavailable: {JOBCG_UNAVAILABLE[kind]}")
    expect = JOBCG_KIND if kind is None else None if kind == "none" else kind
    path, fd = locked_file(tmp_path)
    shim_env = dict(DAEMON_ENV)
    if kind is not None:
        shim_env["GFLOW_SHIM_CGROUP"] = kind
    s = Shim(tmp_path, cleanup, extra=("--lock-fd", str(fd)), pass_fds=(fd,), shim_env=shim_env,
             command="cat /proc/self/cgroup > main.cg; "
                     "setsid sh -c 'cat /proc/self/cgroup > escaped.cg'; "
                     "while [ ! -e go ]; do sleep 0.01; done")
    os.close(fd)
    wait_for(lambda: (tmp_path / "escaped.cg").exists() and (tmp_path / "main.cg").exists(),
             "the job's processes to report their cgroups")
    lines = path.read_text().splitlines()
    if expect is None:
        assert lines == [f"{s.proc.pid} {start_time(s.proc.pid)}"], lines
    else:
        cg_path, directory = jobcg_of(s, expect)
        assert directory.is_dir()
        assert lines[1:] == [f"cgroup: {directory}"], lines
        for name in ("main.cg", "escaped.cg"):
            text = wait_for(lambda: (tmp_path / name).read_text(), name)
            assert cgroup_line(text, expect) == cg_path, (name, text)
    (tmp_path / "go").touch()
    assert s.finish() == 0, s.stderr
    assert s.result()["exit_code"] == 0
    if expect is not None:
        assert not directory.exists(), f"{directory} left behind"


def test_forced_unknown_cgroup_kind_fails_the_job(tmp_path, cleanup):
    s = Shim(tmp_path, cleanup, command="echo ran",
             shim_env={**DAEMON_ENV, "GFLOW_SHIM_CGROUP": "v3"})
    assert s.finish() == 1
    r = s.result()
    assert r["exit_code"] == 125 and "GFLOW_SHIM_CGROUP 'v3'" in r["error"], r
    assert "ran" not in s.log_text()


@pytest.mark.parametrize("kind", ["v2", "v1", "none"])
def test_cancel_kills_setsid_leftovers_in_every_kind_of_cgroup(tmp_path, cleanup, kind):
    """SIGTERM to the shim ends the whole job, escaping children included, with the
    TERM -> grace -> KILL escalation, whatever holds the job (cgroup.kill on v2)."""
    if kind in JOBCG_UNAVAILABLE and JOBCG_UNAVAILABLE[kind]:
        pytest.skip(f"job cgroup {kind} unavailable: {JOBCG_UNAVAILABLE[kind]}")
    s = Shim(tmp_path, cleanup, kill_grace=1, shim_env={**DAEMON_ENV, "GFLOW_SHIM_CGROUP": kind},
             command="setsid sh -c 'trap \"\" TERM; echo $$ > stubborn.pid; "
                     "while :; do sleep 0.05; done' & "
                     "echo $$ > main.pid; wait")
    stubborn = s.wait_pid_file("stubborn.pid", cleanup)
    main = s.wait_pid_file("main.pid", cleanup)
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    assert s.finish(timeout=15) == 0, s.stderr
    elapsed = time.monotonic() - t0
    assert s.result()["signal"] == signal.SIGTERM, s.result()
    assert_gone(*stubborn)
    assert_gone(*main)
    # The one that ignores SIGTERM needed the SIGKILL after the 1 s grace.
    assert 0.9 <= elapsed < 10, elapsed
    if kind != "none":
        assert not jobcg_dir(s, kind).exists()


# ---- conda environments (--conda-env) -----------------------------------------------

FAKE_CONDA = r'''#!/bin/sh
# A fake conda: only `conda shell.bash hook`, whose `conda activate` does what the
# real one does to the variables a job sees.
if [ "$1 $2" = "shell.bash hook" ]; then
    cat <<'HOOK'
conda() {
    if [ "$1" != activate ]; then
        echo "fake conda: unsupported: $*" >&2
        return 1
    fi
    case "$2" in
        base) prefix=BASE ;;
        /*) prefix="$2" ;;
        *) prefix="BASE/envs/$2" ;;
    esac
    if [ ! -d "$prefix/conda-meta" ]; then
        echo "fake conda: EnvironmentNameNotFound: $2" >&2
        return 1
    fi
    export CONDA_DEFAULT_ENV="$2" CONDA_PREFIX="$prefix" PATH="$prefix/bin:$PATH"
}
HOOK
    exit 0
fi
echo "fake conda: unsupported: $*" >&2
exit 1
'''


def make_env(prefix, tool_says):
    """A conda environment at prefix whose bin/tool prints tool_says."""
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    tool = prefix / "bin" / "tool"
    tool.write_text(f"#!/bin/sh\necho {tool_says}\n")
    tool.chmod(0o755)


def fake_conda(base):
    """A conda installation at base with the environment myenv; returns its conda."""
    # The hook text holds base as is, inside double quotes or as a case word.
    assert not set(str(base)) & set(" \t\n'\"$`\\;&|<>()*?[]"), base
    (base / "bin").mkdir(parents=True)
    (base / "conda-meta").mkdir()
    conda = base / "bin" / "conda"
    conda.write_text(FAKE_CONDA.replace("BASE", str(base)))
    conda.chmod(0o755)
    make_env(base / "envs" / "myenv", "tool from myenv")
    return conda


def conda_job(tmp_path, cleanup, name="myenv", env=None, **kw):
    """Runs a job with --conda-env name and the fake conda named by CONDA_EXE."""
    base = tmp_path / "conda"
    conda = fake_conda(base)
    if env is None:
        env = [JOB_PATH, f"CONDA_EXE={conda}", f"HOME={tmp_path / 'home'}"]
    extra = ("--conda-env", name, *kw.pop("extra", ()))
    return Shim(tmp_path, cleanup, env=env, extra=extra, **kw), base


MYENV_OUT = "myenv {base}/envs/myenv\ntool from myenv\n"


def test_conda_env_is_active_in_a_command_job(tmp_path, cleanup):
    s, base = conda_job(tmp_path, cleanup, command="echo $CONDA_DEFAULT_ENV $CONDA_PREFIX; tool")
    assert s.finish() == 0, s.stderr
    r = s.result()
    assert (r["exit_code"], r["error"]) == (0, None), (r, s.log_text())
    assert s.log_text() == MYENV_OUT.format(base=base)


def test_a_plain_command_also_runs_in_the_env(tmp_path, cleanup):
    # "tool" alone would qualify for the direct exec, which would skip the activation.
    s, _ = conda_job(tmp_path, cleanup, command="tool")
    assert s.finish() == 0, s.stderr
    assert (s.result()["exit_code"], s.log_text()) == (0, "tool from myenv\n")


@pytest.mark.parametrize("command,code,out", [
    ("exit 4", 4, ""),
    ("FOO=bar printenv FOO", 0, "bar\n"),
    ("echo \"a  b\" '$HOME' \\$x", 0, "a  b $HOME $x\n"),
    ("echo $0; false", 1, "bash\n"),
    ("nosuchprogram-xyz", 127, None),
    ("if true; then echo yes", 2, None),  # a syntax error, as bash -c reports it
])
def test_command_keeps_its_shell_semantics_under_conda(tmp_path, cleanup, command, code, out):
    s, _ = conda_job(tmp_path, cleanup, command=command)
    assert s.finish() == 0, s.stderr
    assert s.result()["exit_code"] == code, s.log_text()
    if out is not None:
        assert s.log_text() == out


@pytest.mark.parametrize("shebang", [True, False])
def test_conda_env_is_active_in_a_script_job(tmp_path, cleanup, shebang):
    script = tmp_path / "job.sh"
    body = 'echo $CONDA_DEFAULT_ENV $CONDA_PREFIX; tool\nexit 3\n'
    script.write_text(("#!/bin/sh\n" if shebang else "") + body)
    script.chmod(0o700 if shebang else 0o600)
    s, base = conda_job(tmp_path, cleanup, script=script)
    assert s.finish() == 0, s.stderr
    assert s.result()["exit_code"] == 3, s.log_text()
    assert s.log_text() == MYENV_OUT.format(base=base)


def test_relative_script_under_conda_is_the_workdir_one(tmp_path, cleanup):
    # Not a program of that name along PATH: the script in the workdir.
    (tmp_path / "tool").write_text("#!/bin/sh\necho workdir tool\n")
    (tmp_path / "tool").chmod(0o700)
    s, _ = conda_job(tmp_path, cleanup, script="tool")
    assert s.finish() == 0, s.stderr
    assert (s.result()["exit_code"], s.log_text()) == (0, "workdir tool\n")


def test_missing_script_under_conda_is_127(tmp_path, cleanup):
    s, _ = conda_job(tmp_path, cleanup, script=tmp_path / "nope.sh")
    assert s.finish() == 0, s.stderr
    assert s.result()["exit_code"] == 127


def test_command_lookup_under_conda_sees_the_environments_programs(tmp_path, cleanup):
    # The activation puts the environment's bin/ first on PATH: a program there that
    # exits 127 is the job's own; a program found nowhere was not found.
    for sub, command, error in [("a", "envonly", None),
                                ("b", "nosuchprogram-xyz", "command not found: nosuchprogram-xyz")]:
        tmp = tmp_path / sub
        tmp.mkdir()
        prefix = tmp / "other-env"
        make_env(prefix, "unused")
        (prefix / "bin" / "envonly").write_text("#!/bin/sh\nexit 127\n")
        (prefix / "bin" / "envonly").chmod(0o755)
        s, _ = conda_job(tmp, cleanup, name=str(prefix), command=command)
        assert s.finish() == 0, s.stderr
        r = s.result()
        assert (r["exit_code"], r["error"]) == (127, error), s.log_text()


def test_conda_found_in_home_miniconda3_without_conda_exe(tmp_path, cleanup):
    home = tmp_path / "home"
    base = home / "miniconda3"
    fake_conda(base)
    s = Shim(tmp_path, cleanup, env=[JOB_PATH, f"HOME={home}"],
             command="echo $CONDA_DEFAULT_ENV $CONDA_PREFIX; tool",
             extra=("--conda-env", "myenv"))
    assert s.finish() == 0, s.stderr
    assert s.result()["exit_code"] == 0, s.log_text()
    assert s.log_text() == MYENV_OUT.format(base=base)


def test_conda_exe_comes_first(tmp_path, cleanup):
    # A conda in ~/miniconda3 is not used when CONDA_EXE names another one.
    home = tmp_path / "home"
    fake_conda(home / "miniconda3")
    s, base = conda_job(tmp_path, cleanup, command="echo $CONDA_PREFIX")
    assert s.finish() == 0, s.stderr
    assert s.log_text() == f"{base}/envs/myenv\n"


@pytest.mark.parametrize("which", ["base", "path"])
def test_base_and_absolute_path_environments(tmp_path, cleanup, which):
    other = tmp_path / "elsewhere" / "proj-env"
    make_env(other, "tool from proj-env")
    base = tmp_path / "conda"
    name = "base" if which == "base" else str(other)
    s, _ = conda_job(tmp_path, cleanup, name=name, command="echo $CONDA_PREFIX")
    assert s.finish() == 0, s.stderr
    assert s.result()["exit_code"] == 0, s.log_text()
    assert s.log_text() == f"{base if which == 'base' else other}\n"


def test_missing_conda_fails_the_job_at_once(tmp_path, cleanup):
    if os.path.exists("/opt/conda/bin/conda"):
        pytest.skip("this host has a conda in /opt/conda, which the shim would find")
    home = tmp_path / "home"
    home.mkdir()
    s = Shim(tmp_path, cleanup, env=[JOB_PATH, f"HOME={home}"], command="echo ran > ran",
             extra=("--conda-env", "myenv"))
    assert s.finish() == 1
    r = s.result()
    assert r["exit_code"] == 125 and r["signal"] is None
    assert r["error"].startswith("conda not found: set CONDA_EXE"), r
    assert f"{home}/miniconda3/bin/conda" in r["error"] and "/opt/conda/bin/conda" in r["error"]
    assert s.log_text() == f"gflow-shim: {r['error']}\n"
    assert not (tmp_path / "ran").exists()
    assert not s.env_file.exists()


def test_conda_exe_that_is_not_there_is_not_conda(tmp_path, cleanup):
    if os.path.exists("/opt/conda/bin/conda"):
        pytest.skip("this host has a conda in /opt/conda, which the shim would find")
    s = Shim(tmp_path, cleanup, env=[JOB_PATH, f"CONDA_EXE={tmp_path}/no/conda"],
             command="echo ran > ran", extra=("--conda-env", "myenv"))
    assert s.finish() == 1
    r = s.result()
    assert r["exit_code"] == 125 and "conda not found" in r["error"]
    assert f"CONDA_EXE={tmp_path}/no/conda" in r["error"]
    assert not (tmp_path / "ran").exists()


def test_missing_environment_fails_the_job_at_once(tmp_path, cleanup):
    s, base = conda_job(tmp_path, cleanup, name="nosuch", command="echo ran > ran")
    assert s.finish() == 1
    r = s.result()
    assert r["exit_code"] == 125 and r["signal"] is None
    assert r["error"].startswith("conda environment 'nosuch' not found (looked in "), r
    assert f"{base}/envs/nosuch" in r["error"]
    assert s.log_text() == f"gflow-shim: {r['error']}\n"
    assert not (tmp_path / "ran").exists()


def test_environment_without_conda_meta_is_not_one(tmp_path, cleanup):
    (tmp_path / "conda" / "envs" / "broken").mkdir(parents=True)
    s, _ = conda_job(tmp_path, cleanup, name="broken", command="echo ran > ran")
    assert s.finish() == 1
    assert "conda environment 'broken' not found" in s.result()["error"]
    assert not (tmp_path / "ran").exists()


def test_environment_in_dot_conda_envs_is_found(tmp_path, cleanup):
    # The shim finds ~/.conda/envs/NAME; here the fake conda cannot activate it, which
    # shows how a failed activation ends: 125, a line in the log, the job not run.
    make_env(tmp_path / "home" / ".conda" / "envs" / "mine", "tool from mine")
    s, _ = conda_job(tmp_path, cleanup, name="mine", command="echo ran > ran")
    assert s.finish() == 0, s.stderr
    r = s.result()
    assert r["exit_code"] == 125, s.log_text()
    log = s.log_text()
    assert "EnvironmentNameNotFound: mine" in log
    assert "gflow-shim: cannot activate conda environment mine\n" in log
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("name", ["x;touch pwned", "$(touch pwned)", "`touch pwned`",
                                  "x' ; touch pwned; '", "x\" ; touch pwned; \""])
def test_environment_name_cannot_inject_shell(tmp_path, cleanup, name):
    s, _ = conda_job(tmp_path, cleanup, name=name, command="echo ran > ran")
    assert s.finish() == 1
    r = s.result()
    assert r["exit_code"] == 125 and f"conda environment '{name}' not found" in r["error"]
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "ran").exists()


def test_existing_environment_with_a_shell_name_runs_literally(tmp_path, cleanup):
    # Past the check, the name reaches `conda activate` as one word, never as shell text.
    name = "x;touch pwned $(touch pwned2)"
    make_env(tmp_path / "conda" / "envs" / name, "tool from odd")
    s, _ = conda_job(tmp_path, cleanup, name=name, command='echo "$CONDA_DEFAULT_ENV"; tool')
    assert s.finish() == 0, s.stderr
    assert s.result()["exit_code"] == 0, s.log_text()
    assert s.log_text() == f"{name}\ntool from odd\n"
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_every_copy_activates_the_env(tmp_path, cleanup):
    s, base = conda_job(tmp_path, cleanup, extra=tasks(2, "0,1"),
                        command='echo "rank$RANK $CONDA_DEFAULT_ENV $(tool)"')
    assert s.finish() == 0, s.stderr
    assert s.result()["exit_code"] == 0, s.log_text()
    assert sorted(s.log_text().splitlines()) == ["rank0 myenv tool from myenv",
                                                 "rank1 myenv tool from myenv"]


def test_empty_conda_env_is_a_usage_error(tmp_path, cleanup):
    s = Shim(tmp_path, cleanup, command="true", extra=("--conda-env", ""))
    assert s.finish() == 2
    assert "--conda-env" in s.stderr and len(s.stderr.splitlines()) == 1
    assert s.result()["exit_code"] == 125


def test_help_mentions_conda_env():
    p = subprocess.run([str(SHIM), "--help"], env=DAEMON_ENV, capture_output=True, text=True,
                       timeout=5)
    assert p.returncode == 0 and "--conda-env NAME" in p.stdout
