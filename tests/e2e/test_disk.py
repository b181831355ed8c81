"""A full disk loses nothing: gflowd keeps running and serving reads while its filesystem
is full, refuses writes with 507 naming the filesystem, records the outcome of jobs that
end meanwhile (the room for their exit records is reserved before they start), undoes a
commit SQLite could not make and redoes what it had recorded itself, and resumes by itself
once there is room. Also the per-job log cap (daemon.max_log_bytes) and job logs kept
apart from the database (daemon.log_dir).

The disk tests mount a small tmpfs of their own (root only; skipped with the reason when
mounting is impossible) and unmount it afterwards."""
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import parse_show, wait_for

MiB = 1024 * 1024


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bfree * st.f_frsize


def mount_tmpfs(size_mb):
    """A tmpfs of size_mb MiB on a fresh directory; returns its path. Skips when this
    process cannot mount."""
    if os.geteuid() != 0:
        pytest.skip("mounting a test filesystem needs root")
    path = tempfile.mkdtemp(prefix="gf-disk-", dir="/tmp")
    cp = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs",
                         path], capture_output=True, text=True)
    if cp.returncode != 0:
        os.rmdir(path)
        pytest.skip(f"cannot mount a tmpfs here: {cp.stderr.strip()}")
    return path


def unmount(path):
    """Unmounts path (the sandbox's processes are gone by now) and removes it."""
    deadline = time.monotonic() + 10
    while True:
        cp = subprocess.run(["umount", path], capture_output=True, text=True)
        if cp.returncode == 0:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"cannot unmount {path}: {cp.stderr}")
        time.sleep(0.1)
    os.rmdir(path)


@pytest.fixture
def small_fs():
    """Factory: small_fs(size_mb) -> the path of a tmpfs mounted for this test. Request it
    before make_gflow, so that the sandbox (its daemon and jobs) is stopped before the
    filesystems are unmounted."""
    mounted = []

    def make(size_mb):
        path = mount_tmpfs(size_mb)
        mounted.append(path)
        return Path(path)

    yield make
    for path in reversed(mounted):
        unmount(path)


def fill(fs, leave=0):
    """Fills fs with a ballast file, leaving about `leave` bytes free; returns its path."""
    ballast = fs / f"ballast-{len(list(fs.glob('ballast-*')))}"
    size = free_bytes(fs) - leave
    assert size > 0
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    return ballast


def gbatch_status(g, *args):
    return g.run("gbatch", "--parsable", *args)


def spec(g, command, **kw):
    d = {"command": command, "workdir": str(g.work), "env": {"PATH": "/usr/bin:/bin"}}
    d.update(kw)
    return d


def test_full_disk_keeps_daemon_reads_and_outcomes(small_fs, make_gflow, tmp_path):
    fs = small_fs(64)
    # Logs are never cut here (0), so that the disk stays full once the filler has ended;
    # the cut of a flooding job's log is test_hardening3_hygiene's.
    g = make_gflow(make_root=lambda: str(fs), env={"GFLOW_DAEMON__LOG_KEEP_ON_FULL_DISK": "0"})
    flag = tmp_path / "go"  # outside the full filesystem
    waiter = g.submit(f"while [ ! -e {flag} ]; do sleep 0.05; done; echo waited")
    held = [g.submit("--hold", "echo held") for _ in range(3)]
    g.wait_state(waiter, "R")
    # A job fills the filesystem through its log (the cap is far above the disk's size).
    # The relay drops what the log cannot take, so the job is not blocked: it ends by
    # itself, on the full disk.
    filler = g.submit("yes spam | head -c 200M")
    wait_for(lambda: free_bytes(fs) < 1 * MiB, "the filesystem to fill up", timeout=60)
    j = g.wait_state(filler, timeout=60)
    assert (j["state"], j["exit_code"]) == ("CD", 0), j
    assert free_bytes(fs) < 1 * MiB

    # The daemon is alive and serves reads.
    assert g.health_ok()
    status = g.api("GET", "/v1/status").json()
    assert status["disk_full"] and str(fs) in status["disk_full"], status
    rows = g.run("gqueue", "-f", "JOBID,ST", check=True).stdout
    assert f"{waiter}" in rows and " R" in rows, rows
    show = parse_show(g.run("gjob", "show", filler, check=True).stdout)[0]
    assert show["State"] == "Finished (CD)", show
    log = g.run("gjob", "log", filler, check=True).stdout
    assert log.startswith("spam\nspam\n"), log[:100]
    cp = g.run("gflowd", "status", check=True)
    assert f"Disk full: the filesystem mounted at {fs}" in cp.stdout, cp.stdout

    # Writes get 507 with a message naming the filesystem and what to do.
    r = g.api("POST", "/v1/jobs", spec(g, "echo refused"))
    assert r.status == 507, r
    msg = r.json()["error"]
    assert str(fs) in msg and "full" in msg and "free some space" in msg, msg
    cp = gbatch_status(g, "echo refused")
    assert cp.returncode != 0 and "full" in cp.stderr and str(fs) in cp.stderr, cp.stderr
    cp = g.run("gjob", "release", held[0])
    assert cp.returncode != 0 and "full" in cp.stderr, cp.stderr
    # A dry run changes nothing and goes ahead.
    r = g.api("POST", "/v1/jobs", spec(g, "echo dry", dry_run=True))
    assert r.status == 200, r

    # A job that ends meanwhile keeps its outcome: exit code 0, CD (its exit record went
    # into the room reserved for it).
    flag.touch()
    j = g.wait_state(waiter, timeout=20)
    assert (j["state"], j["exit_code"]) == ("CD", 0), j
    assert free_bytes(fs) < 1 * MiB, "still full while the job ended"

    # Free the space: gflowd resumes by itself.
    os.unlink(g.data / "logs" / f"{filler}.log")

    def submitted():
        cp = gbatch_status(g, "echo after")
        return int(cp.stdout) if cp.returncode == 0 else None
    after = wait_for(submitted, "a submission to be accepted again", timeout=15, interval=0.1)
    assert g.wait_state(after, timeout=20)["state"] == "CD"
    assert g.api("GET", "/v1/status").json()["disk_full"] is None
    for h in held:
        g.run("gjob", "release", h, check=True)
    for h in held:
        assert g.wait_state(h, timeout=20)["state"] == "CD"

    # Nothing acknowledged was lost, and it survives a restart.
    def states():
        return {j["id"]: j["state"] for j in g.jobs(states="all")}
    want = {waiter: "CD", filler: "CD", after: "CD", **{h: "CD" for h in held}}
    assert states() == want
    g.down(check=True)
    g.up()
    assert states() == want


def test_lost_commit_is_undone_and_redone(small_fs, make_gflow, tmp_path):
    """A commit that does not fit the room left: SQLite rolls it back, and gflowd undoes it
    in memory instead of exiting: a submission gets 507 and is not there; a job's end
    (here with a retry whose 28 MiB script does not fit) is recorded once there is room.
    The sizes are above what SQLite's write-ahead log keeps between commits (16 MiB,
    journal_size_limit), so that these commits need new room."""
    fs = small_fs(160)
    g = make_gflow(make_root=lambda: str(fs),
                   env={"GFLOW_LIMITS__MAX_REQUEST_BYTES": str(64 * MiB),
                        "GFLOW_LIMITS__MAX_BODY_BYTES_IN_FLIGHT": str(128 * MiB)})
    flag = tmp_path / "go"
    script = g.work / "big.sh"
    script.write_text(f"#!/bin/sh\nwhile [ ! -e {flag} ]; do sleep 0.05; done\nexit 3\n"
                      + "#" * (28 * MiB) + "\n")
    job = g.submit("--max-retries", "1", str(script))
    script.unlink()
    g.wait_state(job, "R", timeout=20)
    # Once gflowd has checkpointed (when idle), its next commit cuts the log back.
    wal = g.data / "gflow.db-wal"
    small = []

    def wal_cut():
        small.append(g.submit("--hold", "true"))
        return os.path.getsize(wal) <= 16 * MiB
    wait_for(wal_cut, "the write-ahead log to be cut back", timeout=20, interval=0.5)

    # A submission whose commit does not fit: it passes the free-space check (more than
    # DISK_MIN_FREE_BYTES is left), then SQLite runs out of room and rolls it back.
    ballast = fill(fs, leave=5 * MiB)
    r = g.api("POST", "/v1/jobs", {"script": "#!/bin/sh\n" + "#" * (40 * MiB) + "\n",
                                   "workdir": str(g.work), "env": {}}, timeout=60)
    assert r.status == 507, r
    assert "full" in r.json()["error"], r
    assert g.health_ok()
    ids = [j["id"] for j in g.jobs(states="all")]
    assert sorted(ids) == sorted([job, *small]), ids

    # The job ends while its end (with its retry) cannot be recorded: it stays R and
    # gflowd keeps trying.
    flag.touch()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert g.job(job)["state"] == "R"
        assert g.health_ok()
        time.sleep(0.2)
    assert "lost a transaction" in g.daemon_log()

    # Room again: the end and the retry are recorded, the retry runs (and fails too).
    os.unlink(ballast)
    j = g.wait_state(job, timeout=20)
    assert (j["state"], j["exit_code"], j["reason"]) == ("F", 3, "NonZeroExitCode"), j
    retry = j.get("retried_as")
    assert retry, j
    r2 = g.wait_state(retry, timeout=30)
    assert (r2["state"], r2["attempt"], r2["retry_of"]) == ("F", 2, job), r2
    # Nothing else came or went: the lost submission is not there, the held jobs are.
    assert all(g.job(s)["state"] == "H" for s in small)
    assert sorted(j["id"] for j in g.jobs(states="all")) == sorted([job, *small, retry])


def test_log_cap_drops_the_rest_after_one_line(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__MAX_LOG_BYTES": "100000"})
    # Far more output than the cap, and a file of its own that is not capped.
    job = g.submit("sh -c 'head -c 300000 /dev/zero | tr \"\\0\" x; echo; "
                   "head -c 300000 /dev/zero > own.bin; echo done'")
    j = g.wait_state(job, timeout=20)
    assert (j["state"], j["exit_code"]) == ("CD", 0), j
    log = (g.data / "logs" / f"{job}.log").read_bytes()
    line = (b"\ngflow-shim: log truncated at 100000 bytes (daemon.max_log_bytes); "
            b"the rest of the job's output is dropped\n")
    assert log == b"x" * 100000 + line, log[-200:]
    assert os.path.getsize(g.work / "own.bin") == 300000
    # Output up to the cap is all kept, without a line.
    exact = g.submit("sh -c 'head -c 99999 /dev/zero | tr \"\\0\" y; echo'")
    assert g.wait_state(exact)["state"] == "CD"
    assert (g.data / "logs" / f"{exact}.log").read_bytes() == b"y" * 99999 + b"\n"


def test_log_dir_apart_from_the_database(small_fs, make_gflow):
    logs = small_fs(16)
    g = make_gflow(env={"GFLOW_DAEMON__LOG_DIR": str(logs / "gflow-logs")})
    job = g.submit("echo to elsewhere")
    assert g.wait_state(job)["state"] == "CD"
    assert (logs / "gflow-logs" / f"{job}.log").read_text() == "to elsewhere\n"
    assert not (g.data / "logs" / f"{job}.log").exists()
    assert g.run("gjob", "log", job, check=True).stdout == "to elsewhere\n"
    show = parse_show(g.run("gjob", "show", job, check=True).stdout)[0]
    assert show["LogPath"] == str(logs / "gflow-logs" / f"{job}.log")
    assert g.api("GET", "/v1/status").json()["log_dir"] == str(logs / "gflow-logs")

    # The log filesystem full: new jobs are refused (their output would be lost), naming
    # it; other writes go ahead (the database has room).
    held = g.submit("--hold", "echo held")
    ballast = fill(logs)
    cp = gbatch_status(g, "echo refused")
    assert cp.returncode != 0 and str(logs) in cp.stderr and "job logs" in cp.stderr, cp.stderr
    g.run("gjob", "update", held, "--priority", "20", check=True)
    assert g.job(held)["priority"] == 20
    os.unlink(ballast)

    def submitted():
        cp = gbatch_status(g, "echo again")
        return int(cp.stdout) if cp.returncode == 0 else None
    again = wait_for(submitted, "a submission to be accepted again", timeout=15, interval=0.1)
    assert g.wait_state(again)["state"] == "CD"
    assert (logs / "gflow-logs" / f"{again}.log").read_text() == "again\n"
