"""Issue 27 (Hardening III), gflowd's side: job logs read safely, log directories that
others could swap files in, ids that never go back, and small API fixes.

- `gjob log` opens a job's log inside a directory the daemon holds, without following
  links, and reads it only if it is a regular file that the job's owner owns: a link
  (or a file of someone else) put where a log was prints nothing of its target.
- A log directory that others may write to without the sticky bit stops the start.
- A relative daemon.log_dir in a config file is that file's folder's.
- Job ids never go back, even when the database is put back from a backup or emptied.
- The data directory's warning tells the truth about who can reach the socket.
- PATCH of a field an update cannot change is a 400 naming it.
- A "# GFLOW" directive gbatch does not take is an error naming it.

The tests that switch users need root and create throwaway users."""
import os
import shutil
import stat

import pytest

from conftest import NOBODY, as_user, ensure_user, per_worker, wait_for

ALICE = per_worker("gflowtest-h3a")
SECRET = "TOP-SECRET-OF-ROOT"


def one_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one line, got: {text!r}"
    return lines[0]


def alice_sandbox(make_gflow, log_dir_mode=0o1777, env=None):
    """A system daemon whose log directory users may write to (as a /scratch one is),
    and alice: (g, run_as_alice)."""
    uid, gid, home = ensure_user(ALICE)
    g = make_gflow(start=False, env=env)
    os.chmod(g.root, 0o755)
    logs = g.root / "ulogs"
    logs.mkdir()
    os.chmod(logs, log_dir_mode)
    g.env["GFLOW_DAEMON__LOG_DIR"] = str(logs)
    work = g.root / "alicework"
    work.mkdir()
    os.chown(work, uid, gid)

    def as_alice(prog, *args, **kw):
        return g.run(prog, *args, user=as_user(uid, gid), cwd=work,
                     env={"HOME": home, "USER": ALICE}, **kw)
    return g, logs, as_alice, (uid, gid)


# ---------------------------------------------------------------- 1. gjob log

def test_gjob_log_never_reads_what_a_link_points_to(make_gflow):
    g, logs, as_alice, (uid, gid) = alice_sandbox(make_gflow)
    g.up()
    secret = g.root / "secret"
    secret.write_text(SECRET + "\n")
    os.chmod(secret, 0o600)

    jobs = []
    for _ in range(5):
        cp = as_alice("gbatch", "--parsable", "echo alice-output", check=True)
        jobs.append(int(cp.stdout.split()[0]))
    for j in jobs:
        assert g.wait_state(j)["state"] == "CD"
    # Her own log reads as always.
    cp = as_alice("gjob", "log", jobs[0], check=True)
    assert cp.stdout == "alice-output\n"

    link, other, fifo, hard, mine = jobs
    # A symbolic link to a root-only file, made after her job ended.
    (logs / f"{link}.log").unlink()
    cp = as_alice("ln", "-s", secret, logs / f"{link}.log", check=True)
    # A file someone else owns (as a hard link to it would be, or a leftover of an id
    # used before): root's, unreadable to her.
    (logs / f"{other}.log").unlink()
    (logs / f"{other}.log").write_text(SECRET + "\n")
    os.chmod(logs / f"{other}.log", 0o600)
    # A FIFO nobody writes to: gflowd must not wait on it.
    (logs / f"{fifo}.log").unlink()
    as_alice("mkfifo", logs / f"{fifo}.log", check=True)

    for job in (link, other, fifo):
        for who in ("alice", "root"):
            for follow in ((), ("-f",)):
                run = as_alice if who == "alice" else g.run
                cp = run("gjob", "log", *follow, job)
                assert SECRET not in cp.stdout + cp.stderr, (job, who, follow)
                assert cp.returncode != 0, (job, who, follow, cp.stdout)
                msg = one_line(cp.stderr)
                assert f"{job}.log" in msg and "not a regular file" in msg, msg
        r = g.api("GET", f"/v1/jobs/{job}/log?last=1")
        assert r.status == 403 and SECRET.encode() not in r.body, r
    # A hard link to root's file, where the kernel lets her make one.
    (logs / f"{hard}.log").unlink()
    if as_alice("ln", secret, logs / f"{hard}.log").returncode == 0:
        cp = as_alice("gjob", "log", hard)
        assert SECRET not in cp.stdout and cp.returncode != 0, cp.stdout
    # gflowd still serves everyone.
    assert g.health_ok()
    assert as_alice("gjob", "log", mine, check=True).stdout == "alice-output\n"
    assert as_alice("gjob", "log", "-f", mine, check=True).stdout.startswith("alice-output\n")


# ---------------------------------------------------------------- 2. the log directory

def test_log_dir_others_may_write_without_sticky_bit_is_refused(make_gflow):
    g, logs, _, _ = alice_sandbox(make_gflow, log_dir_mode=0o777)
    cp = g.gflowd("up")
    assert cp.returncode != 0, cp.stdout
    msg = one_line(cp.stderr)
    assert str(logs) in msg and "sticky" in msg and "chmod +t" in msg, msg
    assert g.lock_holder() is None
    # Group-writable is the same threat.
    os.chmod(logs, 0o770)
    cp = g.gflowd("up")
    assert cp.returncode != 0 and "sticky" in one_line(cp.stderr)
    # Sticky, or writable by the daemon's user alone: it starts.
    os.chmod(logs, 0o1777)
    g.up()
    g.down()
    os.chmod(logs, 0o755)
    g.up()


# ---------------------------------------------------------------- 3. a relative log_dir

def test_relative_log_dir_is_the_config_files_folder(make_gflow):
    g = make_gflow(start=False)
    etc = g.root / "etc"
    etc.mkdir()
    conf = etc / "gflow.toml"
    conf.write_text('[daemon]\nlog_dir = "joblogs"\n')
    g.up("-c", conf)
    job = g.submit("echo where-am-i")
    assert g.wait_state(job)["state"] == "CD"
    assert (etc / "joblogs" / f"{job}.log").read_text() == "where-am-i\n"
    assert not (g.work / "joblogs").exists()
    assert g.job(job)["log_path"] == str(etc / "joblogs" / f"{job}.log")
    assert f"{etc}/joblogs" in g.daemon_log() and "relative" in g.daemon_log()
    assert g.run("gjob", "log", job, check=True).stdout == "where-am-i\n"

    # Given in the environment, it is the directory gflowd was started in, not each
    # job's own directory.
    g.down()
    g.env["GFLOW_DAEMON__LOG_DIR"] = "envlogs"
    g.up("-c", conf)  # from g.work
    elsewhere = g.work / "sub"
    elsewhere.mkdir()
    job = g.submit("echo from-env", cwd=elsewhere)
    assert g.wait_state(job)["state"] == "CD"
    assert (g.work / "envlogs" / f"{job}.log").read_text() == "from-env\n"
    assert not (elsewhere / "envlogs").exists()


# ---------------------------------------------------------------- 4. ids

@pytest.mark.parametrize("how", ["older", "empty", "older-after-kill"])
def test_ids_never_go_back_over_a_restored_database(make_gflow, how):
    g = make_gflow()
    first = [g.submit("true") for _ in range(2)]
    for j in first:
        g.wait_state(j)
    g.down()
    db = g.data / "gflow.db"
    backup = g.root / "backup.db"
    shutil.copy(db, backup)
    g.up()
    later = [g.submit("true") for _ in range(3)]
    for j in later:
        g.wait_state(j)
    top = max(later)
    if how.endswith("after-kill"):
        g.kill_daemon()
    else:
        g.down()
    for suffix in ("", "-wal", "-shm"):
        p = g.data / f"gflow.db{suffix}"
        if p.exists():
            p.unlink()
    if how != "empty":
        shutil.copy(backup, db)
    g.up()
    new = g.submit("true")
    assert new > top, (new, top)
    assert g.wait_state(new)["state"] == "CD"
    # Once more, after a clean stop of the restored daemon.
    g.down()
    g.up()
    assert g.submit("true") > new


def test_ids_continue_exactly_after_a_clean_restart(make_gflow):
    g = make_gflow()
    a = g.submit("true")
    g.down()
    g.up()
    assert g.submit("true") == a + 1


# ---------------------------------------------------------------- 5. the socket's directory

def test_socket_directory_warning_tells_the_truth(make_gflow, owner):
    for mode, reachable in ((0o711, True), (0o750, False)):
        g = make_gflow(start=False)
        os.chmod(g.root, 0o755)
        sock_dir = g.root / "sockdir"
        sock_dir.mkdir()
        os.chmod(sock_dir, mode)
        g.sock = sock_dir / "gflowd.sock"
        g.env["GFLOW_DAEMON__SOCKET_PATH"] = g.env["GFLOW_SOCKET"] = str(g.sock)
        g.up()
        cp = g.run("gqueue", user=as_user(NOBODY), cwd="/", env={"HOME": "/"})
        assert (cp.returncode == 0) == reachable, (mode, cp.stderr)
        warned = "cannot reach the socket" in g.daemon_log()
        assert warned == (not reachable), (oct(mode), g.daemon_log())
        if not reachable:
            line = [l for l in g.daemon_log().splitlines() if "cannot reach" in l][0]
            assert str(sock_dir) in line and "o+x" in line, line
        g.down()
    # A parent that shuts others out is named too.
    g = make_gflow(start=False)
    os.chmod(g.root, 0o700)
    sock_dir = g.root / "sockdir"
    sock_dir.mkdir(mode=0o755)
    g.sock = sock_dir / "gflowd.sock"
    g.env["GFLOW_DAEMON__SOCKET_PATH"] = g.env["GFLOW_SOCKET"] = str(g.sock)
    g.up()
    line = [l for l in g.daemon_log().splitlines() if "cannot reach" in l]
    assert line and str(g.root) in line[0], g.daemon_log()


# ---------------------------------------------------------------- 6. PATCH

@pytest.mark.parametrize("field,value", [
    ("notify_email", "a@example.org"), ("project", "other"), ("nice", 5),
    ("array", "1-3"), ("bogus", 1), ("hold", True), ("auto_close", True),
])
def test_patch_of_a_field_an_update_cannot_change_is_400_naming_it(gflow, field, value):
    job = gflow.submit("-H", "-P", "proj", "true")
    def fixed(j):
        return {k: v for k, v in j.items() if k != "priority_detail"}  # ages as time passes
    before = fixed(gflow.job(job))
    r = gflow.api("PATCH", f"/v1/jobs/{job}", {field: value})
    assert r.status == 400, r
    assert f"'{field}'" in r.json()["error"], r.json()
    assert "cannot be changed" in r.json()["error"] or "unknown" in r.json()["error"]
    assert fixed(gflow.job(job)) == before
    # Together with a field it can change: nothing is changed.
    r = gflow.api("PATCH", f"/v1/jobs/{job}", {"priority": 3, field: value})
    assert r.status == 400 and gflow.job(job)["priority"] == before["priority"], r
    # What an update may change still changes.
    r = gflow.api("PATCH", f"/v1/jobs/{job}", {"priority": 3, "name": "renamed"})
    assert r.status == 200 and len(r.json()["changes"]) == 2, r
    cp = gflow.run("gjob", "update", job, "-t", "1:00", "--gpus", "0", "-c", "echo x")
    assert cp.returncode == 0, cp.stderr


# ---------------------------------------------------------------- 7. directives

@pytest.mark.parametrize("directive", [
    "--param lr=0.1,0.2", "--param-file params.csv", "--name-template run_{lr}",
])
def test_directive_gbatch_does_not_take_is_an_error(gflow, directive):
    (gflow.work / "params.csv").write_text("lr\n0.1\n")
    script = gflow.work / "job.sh"
    script.write_text(f"#!/bin/bash\n# GFLOW --gpus 0\n# GFLOW {directive}\necho hi\n")
    cp = gflow.run("gbatch", script)
    assert cp.returncode != 0, cp.stdout
    msg = one_line(cp.stderr)
    opt = directive.split()[0]
    assert msg.startswith("gbatch: ") and opt in msg and "job.sh:3" in msg, msg
    assert gflow.jobs() == []


def test_gflow_directives_still_submit(gflow):
    """gflow's own directives (docs/gflow-compat.md) stay valid."""
    script = gflow.work / "job.sh"
    script.write_text("#!/bin/bash\n# GFLOW --gpus 0\n# GFLOW --time 10\n"
                      "# GFLOW --priority 20\n# GFLOW --memory 100M\n#GFLOW --project p1\n"
                      "echo ok\n")
    job = gflow.submit(script)
    j = gflow.job(job)
    assert (j["priority"], j["time_limit"], j["project"]) == (20, 600, "p1"), j
    assert gflow.wait_state(job)["state"] == "CD"
