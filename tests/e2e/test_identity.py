"""Identity from SO_PEERCRED: a per-user daemon refuses other uids; a root daemon runs each
job as its submitter and lets only the owner or an admin act on it.

These need root (they are in CI): they create the user 'gflowtest' when it is missing and
switch uids with setpriv."""
import grp
import os

import pytest

from conftest import NOBODY, TEST_GROUP, TEST_USER, as_user, ensure_test_user, wait_for

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"

RAW_GET = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
    "s.sendall(b'GET /v1/jobs HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
    "print(s.recv(65536).split(b'\\r\\n')[0].decode())\n"
)


@pytest.fixture
def user():
    if os.geteuid() != 0:
        pytest.skip("the identity tests switch uids with setpriv and need root")
    uid, gid, home = ensure_test_user()
    return uid, gid, home


def one_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one line, got: {text!r}"
    return lines[0]


def test_per_user_daemon_refuses_other_uids(make_gflow, user):
    uid, gid, home = user
    g = make_gflow(start=False)
    for dirpath, dirnames, filenames in os.walk(g.root):
        os.chown(dirpath, uid, gid)
    os.chmod(g.root, 0o755)
    as_test_user = as_user(uid, gid)
    user_env = {"HOME": home, "USER": TEST_USER, "LOGNAME": TEST_USER}

    cp = g.run("gflowd", "up", user=as_test_user, env=user_env)
    assert cp.returncode == 0, cp.stderr + g.daemon_log()
    st = os.stat(g.sock)
    assert st.st_uid == uid
    assert (st.st_mode & 0o777) == 0o600, "a per-user daemon's socket is private"
    status = g.api("GET", "/v1/status")
    # Even root is another uid to a per-user daemon; read the status as the owner instead.
    assert status.status == 403, status

    cp = g.run("gflowd", "status", user=as_test_user, env=user_env)
    assert cp.returncode == 0 and "Mode: per-user" in cp.stdout, cp.stdout + cp.stderr
    cp = g.run("gqueue", user=as_test_user, env=user_env)
    assert cp.returncode == 0 and cp.stdout.strip() == "No jobs found.", cp.stderr

    # Open the socket to everyone: the daemon itself must now refuse other uids.
    os.chmod(g.sock, 0o666)
    nobody = as_user(NOBODY)
    cp = g.run("/usr/bin/python3", "-c", RAW_GET, g.sock, user=nobody, cwd="/")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split()[:2] == ["HTTP/1.1", "403"], cp.stdout
    cp = g.run("gqueue", user=nobody, cwd="/", env={"HOME": "/"})
    assert cp.returncode != 0
    msg = one_line(cp.stderr)
    assert TEST_USER in msg, msg
    cp = g.run("gbatch", "true", user=nobody, cwd="/", env={"HOME": "/"})
    assert cp.returncode != 0 and TEST_USER in cp.stderr
    cp = g.run("gqueue", "-a", "-u", "all", user=as_test_user, env=user_env, check=True)
    assert cp.stdout.strip() == "No jobs found.", "a refused submission created a job"

    # The owner's jobs run as the owner.
    job = g.submit("id -u", user=as_test_user, env=user_env)
    wait_for(lambda: g.run("gqueue", "-j", job, "-f", "ST", user=as_test_user,
                           env=user_env).stdout.split()[-1] == "CD", "the job to finish")
    assert g.run("gjob", "log", job, user=as_test_user, env=user_env).stdout == f"{uid}\n"

    cp = g.run("gflowd", "down", user=as_test_user, env=user_env)
    assert cp.returncode == 0, cp.stderr
    assert g.lock_holder() is None


def test_root_daemon_runs_job_as_submitter(make_gflow, user):
    uid, gid, home = user
    g = make_gflow()
    assert "Mode: system" in g.gflowd("status").stdout
    os.chmod(g.root, 0o755)
    assert (os.stat(g.sock).st_mode & 0o777) == 0o666
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    as_test_user = as_user(uid, gid)
    # The submitter's HOME/USER are replaced with the password database's.
    sub_env = {"HOME": "/nonexistent-e2e", "USER": "wrong", "LOGNAME": "wrong",
               "E2E_FROM_SUBMITTER": "kept"}

    cmd = ('id -u; id -g; id -G; echo "HOME=$HOME"; echo "USER=$USER"; '
           'echo "LOGNAME=$LOGNAME"; echo "MINE=$E2E_FROM_SUBMITTER"; pwd; touch made-by-job')
    job = g.submit(cmd, user=as_test_user, cwd=workdir, env=sub_env)
    j = g.wait_state(job)
    assert j["state"] == "CD", (j, g.log(job))
    assert (j["user"], j["uid"]) == (TEST_USER, uid)

    cp = g.run("gjob", "log", job, user=as_test_user, cwd=workdir, env=sub_env)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    groups = set(os.getgrouplist(TEST_USER, gid))
    assert grp.getgrnam(TEST_GROUP).gr_gid in groups
    assert lines[0] == str(uid)
    assert lines[1] == str(gid)
    assert set(map(int, lines[2].split())) == groups
    assert lines[3:7] == [f"HOME={home}", f"USER={TEST_USER}", f"LOGNAME={TEST_USER}",
                          "MINE=kept"]
    assert lines[7] == str(workdir)
    assert os.stat(workdir / "made-by-job").st_uid == uid

    log = os.stat(g.data / "logs" / f"{job}.log")
    assert log.st_uid == uid, "the log belongs to the submitter"
    assert (log.st_mode & 0o077) == 0, "the log is not readable by others"

    # Another unprivileged user may neither cancel nor hold it, nor read its log.
    running = g.submit(WAIT_GO, user=as_test_user, cwd=workdir, env=sub_env)
    g.wait_state(running, "R")
    nobody = as_user(NOBODY)
    nobody_env = {"HOME": "/"}
    for args in (("gcancel", running), ("gjob", "hold", running), ("gjob", "log", running)):
        cp = g.run(*args, user=nobody, cwd="/", env=nobody_env)
        assert cp.returncode != 0, args
        msg = one_line(cp.stderr)
        assert "cancelled" not in (cp.stdout + msg).lower()
        assert TEST_USER in msg or "owner" in msg, msg
    assert g.job(running)["state"] == "R"

    # Only the caller's own jobs by default.
    cp = g.run("gqueue", "-f", "JOBID", check=True)
    assert cp.stdout.strip() == "No jobs found.", cp.stdout
    cp = g.run("gqueue", "-u", "all", "-f", "JOBID", check=True)
    assert str(running) in cp.stdout.split()
    cp = g.run("gqueue", "-f", "JOBID", user=as_test_user, cwd=workdir, env=sub_env, check=True)
    assert cp.stdout.split()[1:] == [str(running)]
    cp = g.run("gqueue", "-f", "JOBID", user=nobody, cwd="/", env=nobody_env, check=True)
    assert cp.stdout.strip() == "No jobs found."

    # Root (an admin) may.
    cp = g.run("gcancel", running)
    assert (cp.returncode, cp.stdout) == (0, f"Job {running} cancelling (SIGTERM sent; CG until it has stopped).\n"), cp.stderr
    j = g.wait_state(running)
    assert j["state"] == "CA", j


def test_owner_can_cancel_own_job_on_root_daemon(make_gflow, user):
    uid, gid, home = user
    g = make_gflow()
    os.chmod(g.root, 0o755)
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    as_test_user = as_user(uid, gid)
    env = {"HOME": home, "USER": TEST_USER}
    held = g.submit("-H", "true", user=as_test_user, cwd=workdir, env=env)
    running = g.submit(WAIT_GO, user=as_test_user, cwd=workdir, env=env)
    g.wait_state(running, "R")
    cp = g.run("gjob", "release", held, user=as_test_user, cwd=workdir, env=env)
    assert cp.returncode == 0, cp.stderr
    cp = g.run("gcancel", running, user=as_test_user, cwd=workdir, env=env)
    assert (cp.returncode, cp.stdout) == (0, f"Job {running} cancelling (SIGTERM sent; CG until it has stopped).\n"), cp.stderr
    assert g.wait_state(running)["state"] == "CA"
    assert g.wait_state(held)["state"] == "CD"
