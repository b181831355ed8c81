"""Interactive jobs (issue 14): `gbatch --pty` runs the job on a pseudo-terminal owned by
its gflow-shim, `gjob attach` connects a terminal to it. Driven through real pseudo-
terminals (Python's pty module): typing reaches the job and its echo comes back, Ctrl-b d
detaches and a later attach continues, a --read-only viewer sees but cannot type, window
size changes reach the job, the log keeps the output, a daemon restart breaks nothing,
and nobody but the job's user may attach."""
import fcntl
import os
import re
import select
import signal
import socket
import struct
import subprocess
import termios
import time

import pytest

from conftest import SANITIZER_MARKS, TEST_USER, as_user, binary, ensure_test_user, ensure_user, wait_for

# The job: a read loop on its terminal. "size" prints what `stty size` says, "quit" ends it.
LOOP = ('while IFS= read -r line; do case "$line" in size) stty size;; '
        'quit) echo bye; exit 0;; *) echo "got:$line";; esac; done')

# A second user, named per pytest-xdist worker as conftest names its own (workers never
# share, or remove, one another's users).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
OTHER_USER = f"gflowattach2-{_WORKER}" if _WORKER else "gflowattach2"


class Terminal:
    """`gjob attach ARGS` on a pseudo-terminal of its own (its controlling terminal, so that
    a window size change sends it SIGWINCH), read with deadlines."""

    def __init__(self, g, *args, user=None, env=None, rows=24, cols=80):
        self.master, slave = os.openpty()
        self.resize(rows, cols)
        argv = [binary("gjob"), "attach", *map(str, args)]
        if user:
            argv = list(user) + argv
        full_env = dict(g.env)
        full_env.update(env or {})

        def take_terminal():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                                     env=full_env, cwd=str(g.work), start_new_session=True,
                                     preexec_fn=take_terminal)
        os.close(slave)
        self.out = b""

    def resize(self, rows, cols):
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def type(self, text):
        os.write(self.master, text.encode() if isinstance(text, str) else text)

    def _read(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the program closed the terminal
            return None
        if not data:
            return None
        self.out += data
        return True

    def expect(self, pattern, timeout=10.0):
        """Waits until the output so far matches pattern (bytes regex); returns the match
        and forgets the output up to its end."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.out)
            if m:
                self.out = self.out[m.end():]
                return m
            left = deadline - time.monotonic()
            if left <= 0 or self._read(min(left, 0.2)) is None and not re.search(pattern, self.out):
                raise AssertionError(f"no {pattern!r} within {timeout}s; output: {self.out!r}")

    def quiet_for(self, seconds):
        """The output of the next `seconds` (for checking that something does not come)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._read(deadline - time.monotonic()) is not None:
            pass
        got, self.out = self.out, b""
        return got

    def wait(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        while self._read(0) is True:
            pass
        assert self.proc.poll() is not None, f"gjob attach still runs; output: {self.out!r}"
        for bad in SANITIZER_MARKS:
            assert bad.encode() not in self.out, self.out.decode(errors="replace")[-4000:]
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


@pytest.fixture
def terminals():
    made = []
    yield made
    for t in made:
        t.close()


def attach(g, terminals, *args, **kw):
    t = Terminal(g, *args, **kw)
    terminals.append(t)
    return t


def submit_loop(g, *extra):
    """A running --pty job; `gjob attach` right after the daemon says R waits for the
    shim's socket itself (test_attach_right_away)."""
    job = g.submit("--pty", *extra, LOOP)
    g.wait_state(job, ("R",))
    return job


def test_type_detach_reattach_and_log(gflow, terminals):
    g = gflow
    job = submit_loop(g)
    shown = g.job(job)
    assert shown["pty"] is True
    sock = shown["attach_socket"]
    assert sock == str(g.data / "run" / f"{job}.attach" / "sock")
    wait_for(lambda: os.path.exists(sock), "the shim's attach socket")
    show = g.run("gjob", "show", job, check=True).stdout
    assert f"  Pty=yes ('gjob attach {job}'; {sock})\n" in show
    assert oct(os.stat(sock).st_mode & 0o777) == "0o600"
    assert oct(os.stat(os.path.dirname(sock)).st_mode & 0o777) == "0o700"

    t = attach(g, terminals, job)
    t.type("hello\r")
    t.expect(rb"hello\r\n")  # the job's terminal echoes what is typed
    t.expect(rb"got:hello\r\n")
    t.type(b"\x02d")  # Ctrl-b d
    assert t.wait() == 0
    assert f"[detached from job {job}]".encode() in t.out
    assert g.job(job)["state"] == "R"

    t2 = attach(g, terminals, job)
    t2.expect(rb"got:hello\r\n")  # the recent output is replayed on attach
    t2.type("again\r")
    t2.expect(rb"got:again\r\n")
    # A lone Ctrl-b followed by another key reaches the job as typed.
    t2.type(b"\x02x\r")
    t2.expect(rb"got:\x02x\r\n")
    t2.type("quit\r")
    t2.expect(rb"bye\r\n")
    assert t2.wait() == 0
    assert f"[job {job} ended]".encode() in t2.out
    g.wait_state(job)
    assert g.job(job)["state"] == "CD"
    log = g.log(job)
    assert "got:hello" in log and "got:again" in log and "bye" in log
    assert not os.path.exists(os.path.dirname(sock))  # the shim cleans up after itself


def test_read_only_viewer_sees_but_cannot_type(gflow, terminals):
    g = gflow
    job = submit_loop(g)
    writer = attach(g, terminals, job)
    viewer = attach(g, terminals, "--read-only", job)
    writer.type("one\r")
    writer.expect(rb"got:one\r\n")
    viewer.expect(rb"got:one\r\n")
    viewer.type("sneaky\r")
    writer.type("two\r")
    writer.expect(rb"got:two\r\n")
    viewer.expect(rb"got:two\r\n")
    assert b"sneaky" not in viewer.quiet_for(0.3)
    assert "sneaky" not in g.log(job)
    # The viewer detaches with the keys as well.
    viewer.type(b"\x02d")
    assert viewer.wait() == 0
    writer.type("three\r")
    writer.expect(rb"got:three\r\n")
    writer.type("quit\r")
    assert writer.wait() == 0


def test_later_writer_takes_over_the_keyboard(gflow, terminals):
    g = gflow
    job = submit_loop(g)
    first = attach(g, terminals, job)
    first.type("a\r")
    first.expect(rb"got:a\r\n")
    second = attach(g, terminals, job)
    first.expect(rb"took over the keyboard")
    second.type("b\r")
    second.expect(rb"got:b\r\n")
    first.expect(rb"got:b\r\n")
    first.type("ignored\r")
    second.type("c\r")
    second.expect(rb"got:c\r\n")
    assert "ignored" not in g.log(job)
    # The writer leaves: the earlier read-write client gets the keyboard back.
    second.type(b"\x02d")
    assert second.wait() == 0
    first.type("d\r")
    first.expect(rb"got:d\r\n")
    first.type("quit\r")
    assert first.wait() == 0


def test_window_size_reaches_the_job(gflow, terminals):
    g = gflow
    job = submit_loop(g)
    t = attach(g, terminals, job, rows=30, cols=100)
    t.type("size\r")
    t.expect(rb"\n30 100\r\n")
    t.resize(41, 133)
    deadline = time.monotonic() + 10
    while True:
        t.type("size\r")
        m = t.expect(rb"\n(\d+ \d+)\r\n")
        if m.group(1) == b"41 133" or time.monotonic() > deadline:
            break
    assert m.group(1) == b"41 133"
    t.type("quit\r")
    assert t.wait() == 0


def test_custom_detach_keys_and_bad_ones(gflow, terminals):
    g = gflow
    job = submit_loop(g)
    t = attach(g, terminals, "--detach-keys", "ctrl-a,ctrl-q", job)
    t.type(b"\x02d" b"x\r")  # the default keys mean nothing now
    t.expect(rb"got:\x02dx\r\n")
    t.type(b"\x01\x11")
    assert t.wait() == 0
    assert b"detached" in t.out
    cp = g.run("gjob", "attach", "--detach-keys", "ctrl-", job)
    assert cp.returncode == 2
    assert "bad detach keys 'ctrl-'" in cp.stderr and len(cp.stderr.splitlines()) == 1
    cp = g.run("gjob", "attach", job, env={"GFLOW_DETACH_KEYS": "ctrl-b,,d"})
    assert cp.returncode == 2 and "bad detach keys" in cp.stderr
    g.run("gcancel", job, check=True)


def test_attach_without_a_terminal_relays_bytes(gflow):
    g = gflow
    job = submit_loop(g)
    # stdin is a pipe: bytes are relayed as they are; after its end the output still
    # comes until the job ends.
    cp = g.run("gjob", "attach", job, input="piped\nquit\n", timeout=20)
    assert cp.returncode == 0, cp.stderr
    assert "got:piped" in cp.stdout and "bye" in cp.stdout
    assert f"[job {job} ended]" in cp.stderr


def test_attach_survives_a_daemon_restart(gflow, terminals):
    g = gflow
    job = submit_loop(g)
    t = attach(g, terminals, job)
    t.type("before\r")
    t.expect(rb"got:before\r\n")
    assert g.down().returncode == 0
    wait_for(lambda: not g.sock.exists() or g.daemon_pid() is None, "gflowd down")
    t.type("while-down\r")
    t.expect(rb"got:while-down\r\n")
    g.up()
    t.type("after\r")
    t.expect(rb"got:after\r\n")
    t.type(b"\x02d")
    assert t.wait() == 0
    assert g.job(job)["state"] == "R"
    t2 = attach(g, terminals, job)  # through the restarted daemon
    t2.type("again\r")
    t2.expect(rb"got:again\r\n")
    t2.type("quit\r")
    assert t2.wait() == 0
    g.wait_state(job)
    assert g.job(job)["state"] == "CD"


def test_clear_errors(gflow):
    g = gflow
    plain = g.submit("sleep 30")
    g.wait_state(plain, ("R",))
    cp = g.run("gjob", "attach", plain)
    assert cp.returncode == 1
    assert f"job {plain} has no terminal to attach to" in cp.stderr
    assert "--pty" in cp.stderr and len(cp.stderr.splitlines()) == 1

    ended = g.submit("--pty", "echo done")
    g.wait_state(ended)
    cp = g.run("gjob", "attach", ended)
    assert cp.returncode == 1
    assert f"job {ended} has ended (CD)" in cp.stderr and len(cp.stderr.splitlines()) == 1
    assert "done" in g.log(ended)

    held = g.submit("--pty", "-H", "true")
    cp = g.run("gjob", "attach", held)
    assert cp.returncode == 1 and "not running yet" in cp.stderr

    cp = g.run("gjob", "attach")
    assert cp.returncode == 2 and "which job?" in cp.stderr
    cp = g.run("gjob", "attach", "999")
    assert cp.returncode == 1 and len(cp.stderr.splitlines()) == 1
    g.run("gcancel", plain, held, check=True)

    # --pty with one process per GPU is refused at submission.
    cp = g.run("gbatch", "--pty", "--gpus", "2", "--gpus-per-task", "1", "true")
    assert cp.returncode != 0 and "--pty" in cp.stderr


def test_only_the_jobs_user_may_attach(make_gflow, terminals):
    uid, gid, home = ensure_test_user()
    ouid, ogid, ohome = ensure_user(OTHER_USER)
    g = make_gflow()
    os.chmod(g.root, 0o755)
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    mine = {"HOME": home, "USER": TEST_USER}
    job = g.submit("--pty", LOOP, user=as_user(uid, gid), cwd=workdir, env=mine)
    g.wait_state(job, ("R",))
    sock = str(g.data / "run" / f"{job}.attach" / "sock")
    wait_for(lambda: os.path.exists(sock), "the shim's attach socket")
    st = os.stat(sock)
    assert (st.st_uid, st.st_mode & 0o777) == (uid, 0o600)

    # The other user: the daemon does not name the socket, the CLI says why.
    cp = g.run("gjob", "attach", job, user=as_user(ouid, ogid), env={"HOME": ohome})
    assert cp.returncode == 1
    assert f"permission denied: job {job} belongs to {TEST_USER}" in cp.stderr
    assert len(cp.stderr.splitlines()) == 1
    # Nor can they connect to the socket itself.
    probe = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\n"
             "try:\n s.connect(sys.argv[1])\nexcept PermissionError:\n print('denied')\n")
    cp = g.run("/usr/bin/python3", "-c", probe, sock, user=as_user(ouid, ogid))
    assert cp.stdout.strip() == "denied", cp

    # The job's user attaches; root may too (it is allowed everything).
    t = attach(g, terminals, job, user=as_user(uid, gid), env=mine)
    t.type("mine\r")
    t.expect(rb"got:mine\r\n")
    r = attach(g, terminals, "--read-only", job)
    t.type("seen\r")
    r.expect(rb"got:seen\r\n")
    t.type("quit\r")
    assert t.wait() == 0 and r.wait() == 0


def test_attach_right_away(gflow, terminals):
    """Attaching as soon as the job is R (its shim may still be opening the socket)."""
    g = gflow
    job = g.submit("--pty", LOOP)
    g.wait_state(job, ("R",))
    t = attach(g, terminals, job)
    t.type("early\r")
    t.expect(rb"got:early\r\n")
    t.type("quit\r")
    assert t.wait() == 0


def test_a_killed_shims_socket_is_removed(gflow, terminals):
    """A shim killed outright cannot clean up: the daemon removes the attach directory
    once the job has ended (ShimLost), and an attached client is told the connection is
    lost."""
    g = gflow
    job = submit_loop(g)
    sock = g.data / "run" / f"{job}.attach" / "sock"
    t = attach(g, terminals, job)
    t.type("x\r")
    t.expect(rb"got:x\r\n")
    os.kill(g.job(job)["shim_pid"], signal.SIGKILL)
    assert t.wait() == 1
    assert f"connection to job {job}'s terminal lost".encode() in t.out
    g.wait_state(job)
    assert g.job(job)["reason"].startswith("ShimLost")
    wait_for(lambda: not sock.parent.exists(), "the attach directory removed")


def test_update_and_redo_set_the_terminal(gflow, terminals):
    g = gflow
    held = g.submit("-H", LOOP)
    assert g.job(held)["pty"] is False
    cp = g.run("gjob", "update", held, "--pty", check=True)
    assert "--pty" in cp.stdout
    assert g.job(held)["pty"] is True
    g.run("gjob", "release", held, check=True)
    g.wait_state(held, ("R",))
    t = attach(g, terminals, held)
    t.type("updated\r")
    t.expect(rb"got:updated\r\n")
    t.type("quit\r")
    assert t.wait() == 0
    g.wait_state(held)
    # redo without a terminal; both at once is refused.
    cp = g.run("gjob", "redo", held, "--no-pty", "-H", check=True)
    redone = int(re.search(r"\d+", cp.stdout).group())
    assert g.job(redone)["pty"] is False
    cp = g.run("gjob", "update", redone, "--pty", "--no-pty")
    assert cp.returncode == 2 and "--pty and --no-pty cannot be used together" in cp.stderr
    g.run("gcancel", redone, check=True)


def _frame(kind, payload=b""):
    return kind + len(payload).to_bytes(4, "big") + payload


def test_a_viewer_that_does_not_read_is_dropped(gflow):
    """A client that never reads must not hold the job up: past 1 MiB behind, the shim
    drops it, and the job writes on to its end."""
    g = gflow
    job = g.submit("--pty", "while [ ! -e go ]; do sleep 0.02; done; "
                   "head -c 6000000 /dev/zero | tr '\\0' x; echo; echo finished")
    g.wait_state(job, ("R",))
    sock = g.data / "run" / f"{job}.attach" / "sock"
    wait_for(sock.exists, "the shim's attach socket")
    s = socket.socket(socket.AF_UNIX)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(str(sock))
    s.sendall(_frame(b"H", b"\x01"))
    (g.work / "go").touch()
    g.wait_state(job, timeout=60)
    assert g.job(job)["state"] == "CD"
    assert g.log(job).rstrip().endswith("finished")
    # What the client did get ends without the shim's END: it was dropped, not served.
    s.settimeout(10)
    got = b""
    while True:
        try:
            data = s.recv(1 << 20)
        except ConnectionResetError:
            break
        if not data:
            break
        got += data
    s.close()
    assert 0 < len(got) < 6000000
    assert b"finished" not in got


def test_ctrl_c_reaches_the_jobs_foreground(gflow, terminals):
    """The terminal is the job's controlling terminal: Ctrl-C typed there is SIGINT to the
    job (not to gjob attach, whose terminal is raw)."""
    g = gflow
    (g.work / "sleeper.py").write_text(
        # "ready" is printed inside the try: a Ctrl-C that lands while print is still
        # returning must reach the handler too.
        "import sys, time\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\n"
        "except KeyboardInterrupt:\n    print('interrupted', flush=True)\n    sys.exit(3)\n")
    job = g.submit("--pty", "/usr/bin/python3 sleeper.py")
    g.wait_state(job, ("R",))
    t = attach(g, terminals, job)
    t.expect(rb"ready\r\n")
    t.type(b"\x03")
    t.expect(rb"interrupted\r\n")
    assert t.wait() == 0
    g.wait_state(job)
    j = g.job(job)
    assert (j["state"], j["exit_code"]) == ("F", 3)
