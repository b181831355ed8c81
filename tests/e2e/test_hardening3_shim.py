"""Issue 27, the shim's part: job logs opened safely, and a supervisor that a hung file
system cannot stop.

- A job's log is created by the shim with O_EXCL|O_NOFOLLOW relative to the log
  directory, as the job's user where others can write that directory: a user's link at
  the next job's log name cannot make a root file the job user's, and a leftover of
  another user at a reused id (a database restored from a backup starts its ids again)
  is moved aside, never appended to.
- Every filesystem call made on a user's behalf (the PATH search, the script's first
  bytes, the working directory, the log) happens in the job's own process after fork,
  never in the supervisor that other users' jobs depend on: a job whose PATH points into
  a FUSE mount that never answers leaves everyone else's jobs running, finishing and
  cancellable.

The tests need root (they switch users and mount FUSE) and make throwaway users."""
import ctypes
import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import TEST_USER, as_user, binary, ensure_user, per_worker, wait_for

OTHER_USER = per_worker("gflowtest-h3s")


def user_setup(g, uid, gid, home, name):
    """A working directory of the user's own in the sandbox, and the setpriv prefix and
    environment to run the CLI as them."""
    os.chmod(g.root, 0o755)
    work = g.root / f"work-{name}"
    work.mkdir()
    os.chown(work, uid, gid)
    return work, as_user(uid, gid), {"HOME": home, "USER": name}


def next_id(g, **kw):
    """The id the next job will get: a held job's id, plus one (the held one is
    cancelled)."""
    held = g.submit("-H", "true", **kw)
    g.run("gcancel", held, check=True, **kw)
    return held + 1


# ---------------------------------------------------------------- 1. links in the log dir

def test_link_at_the_next_log_name_does_not_give_a_root_file_away(make_gflow, owner):
    uid, gid, home = owner
    g = make_gflow(start=False)
    os.chmod(g.root, 0o755)
    logs = g.root / "ulogs"  # as /scratch/gflow-logs: anyone may write, sticky
    logs.mkdir()
    os.chmod(logs, 0o1777)
    g.env["GFLOW_DAEMON__LOG_DIR"] = str(logs)
    g.up()
    target = g.root / "root-file"
    target.write_text("root's own\n")
    os.chmod(target, 0o644)
    work, as_owner, uenv = user_setup(g, uid, gid, home, TEST_USER)
    nxt = next_id(g, user=as_owner, cwd=work, env=uenv)
    # The user plants a link where the next job's log will be.
    cp = g.run("ln", "-s", target, logs / f"{nxt}.log", user=as_owner, cwd=work)
    assert cp.returncode == 0, cp.stderr
    job = g.submit("echo user-output", user=as_owner, cwd=work, env=uenv)
    assert job == nxt
    assert g.wait_state(job)["state"] == "CD", g.job(job)
    st = os.stat(target)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o644), st
    assert target.read_text() == "root's own\n"
    # The job got a log of its own, created as its user, and the link was moved aside.
    log = logs / f"{job}.log"
    assert not log.is_symlink() and log.read_text() == "user-output\n"
    st = os.lstat(log)
    assert (st.st_uid, st.st_gid) == (uid, gid), st
    aside = [p for p in logs.iterdir() if p.name.startswith(f"{job}.log.replaced-")]
    assert len(aside) == 1 and aside[0].is_symlink(), list(logs.iterdir())
    # gjob log shows the job's own output.
    cp = g.run("gjob", "log", job, user=as_owner, cwd=work, env=uenv)
    assert cp.returncode == 0 and cp.stdout == "user-output\n", (cp.stdout, cp.stderr)


def test_leftover_log_at_a_reused_id_is_moved_aside(make_gflow, owner):
    """A restored database starts its ids again: the previous owner's log at the same id
    is moved aside and the new job's log holds only its own output, with a root daemon
    (logs only root can write) and with a user-writable sticky log directory."""
    uid, gid, home = owner
    ouid, ogid, _ = ensure_user(OTHER_USER)
    for shared in (False, True):
        g = make_gflow(start=False)
        os.chmod(g.root, 0o755)
        if shared:
            logs = g.root / "ulogs"
            logs.mkdir()
            os.chmod(logs, 0o1777)
            g.env["GFLOW_DAEMON__LOG_DIR"] = str(logs)
        else:
            logs = g.data / "logs"
        g.up()
        work, as_owner, uenv = user_setup(g, uid, gid, home, TEST_USER)
        nxt = next_id(g, user=as_owner, cwd=work, env=uenv)
        # What the other user's job of that id wrote before the restore.
        old = logs / f"{nxt}.log"
        old.write_text("the other user's secret\n")
        os.chown(old, ouid, ogid)
        os.chmod(old, 0o600)
        job = g.submit("echo mine", user=as_owner, cwd=work, env=uenv)
        assert job == nxt
        assert g.wait_state(job)["state"] == "CD", g.job(job)
        assert old.read_text() == "mine\n", shared
        st = os.stat(old)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, 0o600), st
        aside = [p for p in logs.iterdir() if p.name.startswith(f"{job}.log.replaced-")]
        assert len(aside) == 1, list(logs.iterdir())
        assert aside[0].read_text() == "the other user's secret\n"
        st = os.stat(aside[0])
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (ouid, 0o600), st
        cp = g.run("gjob", "log", job, user=as_owner, cwd=work, env=uenv)
        assert cp.stdout == "mine\n", (cp.stdout, cp.stderr)
        g.down(timeout=20)


# ---------------------------------------------------------------- 2. a hung file system

class HungMount:
    """A FUSE file system that never answers: /dev/fuse mounted by root with allow_other
    and never read, so that every lookup below it waits (killably) for a server that
    does not reply. close() aborts the connection (every waiter gets ENOTCONN) and
    detaches the mount; a watchdog does it after `limit` seconds whatever the test is
    doing, so that nothing can stay stuck."""

    def __init__(self, path, limit=90):
        self.path = path
        self.lock = threading.Lock()
        path.mkdir()
        self.fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        libc = ctypes.CDLL(None, use_errno=True)
        opts = f"fd={self.fd},rootmode=40000,user_id=0,group_id=0,allow_other"
        if libc.mount(b"gflowhang", str(path).encode(), b"fuse.gflowhang", 0,
                      opts.encode()) != 0:
            e = ctypes.get_errno()
            os.close(self.fd)
            pytest.skip(f"cannot mount FUSE here: {os.strerror(e)}")
        self.watchdog = threading.Timer(limit, self.close)
        self.watchdog.start()

    def close(self):
        with self.lock:
            if self.fd < 0:
                return
            os.close(self.fd)
            self.fd = -1
        self.watchdog.cancel()
        subprocess.run(["/usr/bin/umount", "-l", str(self.path)], capture_output=True,
                       timeout=10)


def test_a_hung_path_stops_only_its_own_job(make_gflow, owner):
    uid, gid, home = owner
    g = make_gflow()
    work, as_owner, uenv = user_setup(g, uid, gid, home, TEST_USER)
    # Absolute: Python's subprocess would search the PATH given to gbatch, into the mount.
    as_owner = [shutil.which("setpriv"), *as_owner[1:]]
    hung = HungMount(g.root / "hung")
    try:
        # Job A's PATH starts in the mount: looking up its program never returns.
        a = g.submit("sleep 300", user=as_owner, cwd=work,
                     env={**uenv, "PATH": f"{hung.path}/bin:/usr/bin:/bin"})
        # So does job A2's working directory (an API client's; gbatch would look at it).
        r = g.api("POST", "/v1/jobs", {"command": "sleep 300", "workdir": str(hung.path)})
        assert r.status == 201, r
        a2 = r.json()["jobs"][0]["id"]
        g.wait_state(a, "R", timeout=10)
        g.wait_state(a2, "R", timeout=10)
        # Both are stuck before their exec, in processes of their own.
        sup = g.job(a)["shim_pid"]
        assert g.job(a2)["shim_pid"] == sup

        def stuck():
            kids = Path(f"/proc/{sup}/task/{sup}/children").read_text().split()
            comms = [Path(f"/proc/{k}/comm").read_text().strip() for k in kids]
            return len(kids) == 2 and comms == ["gflow-shim"] * 2
        wait_for(stuck, "jobs A and A2 stuck in the mount before their exec", timeout=10)
        # Everyone else's jobs still run, finish and can be cancelled.
        b = g.submit("echo b-ran")
        assert g.wait_state(b, timeout=10)["state"] == "CD"
        assert g.log(b) == "b-ran\n"
        c = g.submit("sleep 300")
        g.wait_state(c, "R", timeout=10)
        g.run("gcancel", c, check=True)
        assert g.wait_state(c, timeout=10)["state"] == "CA"
        # And so can the hung jobs themselves.
        g.run("gcancel", a, a2, check=True)
        assert g.wait_state(a, timeout=15)["state"] == "CA"
        assert g.wait_state(a2, timeout=15)["state"] == "CA"
    finally:
        hung.close()



def test_a_shim_of_its_own_opens_the_log_the_same_way(tmp_path, owner):
    """A job with a shim of its own (not the supervisor's: --memory-limit, --pty, ...)
    prepares in that shim, with the same rules: a link is moved aside, never followed,
    and the log is created as the job user in a directory others may write."""
    uid, gid, _ = owner
    os.chmod(tmp_path, 0o755)
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chmod(logs, 0o1777)
    target = tmp_path / "root-file"
    target.write_text("root's own\n")
    (logs / "42.log").symlink_to(target)
    env_file = tmp_path / "job.env"
    exit_file = tmp_path / "exit.json"

    def shim(command, *extra):
        env_file.write_bytes(b"PATH=/usr/bin:/bin\0")
        return subprocess.run(
            [str(binary("gflow-shim")), "--job-id", "42", "--exit-file", str(exit_file),
             "--log", str(logs / "42.log"), "--workdir", "/", "--env-file", str(env_file),
             "--kill-grace", "5", "--uid", str(uid), "--gid", str(gid), "--user", TEST_USER,
             "--groups", str(gid), *extra, "--command", command],
            capture_output=True, text=True, timeout=30)
    cp = shim("echo mine; id -u")
    assert cp.returncode == 0, cp.stderr
    assert "moved aside" in cp.stderr, cp.stderr
    assert target.read_text() == "root's own\n" and os.stat(target).st_uid == 0
    log = logs / "42.log"
    assert not log.is_symlink() and log.read_text() == f"mine\n{uid}\n"
    assert (os.lstat(log).st_uid, os.lstat(log).st_gid) == (uid, gid)
    assert [p.is_symlink() for p in logs.iterdir() if ".replaced-" in p.name] == [True]
    # --log-continue (a requeued job's next run) appends to the job user's own log...
    cp = shim("echo again", "--log-continue")
    assert cp.returncode == 0 and "moved aside" not in cp.stderr, cp.stderr
    assert log.read_text() == f"mine\n{uid}\nagain\n"
    # ... but never to someone else's: that one is moved aside as well.
    os.chown(log, 0, 0)
    cp = shim("echo fresh", "--log-continue")
    assert cp.returncode == 0 and "moved aside" in cp.stderr, cp.stderr
    assert log.read_text() == "fresh\n" and os.lstat(log).st_uid == uid
    assert len([p for p in logs.iterdir() if ".replaced-" in p.name]) == 2
