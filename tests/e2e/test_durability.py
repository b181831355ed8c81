"""Durability across daemon crashes and restarts: acknowledged submissions survive SIGKILL,
no job runs twice, jobs that end while the daemon is down are finalized from their exit
files, running jobs are re-adopted, and ids are never reused."""
import collections
import json
import subprocess
import threading
import time

from conftest import (TERMINAL, alive, binary, kill_pid, read_pid_file, sandbox_processes,
                      start_time, wait_for)

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"


def all_jobs(g):
    return g.jobs(user="all")


def wait_all_ended(g, timeout=30):
    def done():
        jobs = all_jobs(g)
        return jobs if all(j["state"] in TERMINAL for j in jobs) else None
    return wait_for(done, "every job to end", timeout=timeout, interval=0.05)


def test_sigkill_during_submission_burst(gflow):
    ran = gflow.root / "ran.txt"
    cmd = f'echo "$GFLOW_JOB_ID" >> {ran}'
    acked, failures = [], []
    lock = threading.Lock()

    def submitter():
        for _ in range(10):
            try:
                cp = subprocess.run([binary("gbatch"), "--parsable", cmd], cwd=gflow.work,
                                    env=gflow.env, stdin=subprocess.DEVNULL,
                                    capture_output=True, text=True, timeout=30)
            except subprocess.TimeoutExpired as e:
                with lock:
                    failures.append(f"timeout: {e}")
                return
            with lock:
                if cp.returncode == 0:
                    acked.append(int(cp.stdout))
                else:
                    failures.append(cp.stderr.strip())
                    return   # the daemon is gone; stop like a script with `set -e` would

    threads = [threading.Thread(target=submitter) for _ in range(20)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(acked) >= 40, "40 acknowledged submissions", timeout=30)
        gflow.kill_daemon()
    finally:
        for t in threads:
            t.join(timeout=60)
    n_acked = len(acked)
    assert n_acked < 200, "the daemon was killed after the burst; nothing was tested"
    assert failures, "no submission failed after SIGKILL"
    assert not any(f.startswith("timeout") for f in failures), failures
    assert len(set(acked)) == n_acked, "the same id was acknowledged twice"

    gflow.up()
    jobs = wait_all_ended(gflow)
    ids = [j["id"] for j in jobs]
    assert len(ids) == len(set(ids)), "duplicate job ids in the database"
    by_id = {j["id"]: j for j in jobs}
    missing = sorted(set(acked) - set(by_id))
    assert not missing, f"acknowledged jobs lost by the crash: {missing}"
    for i in acked:
        assert by_id[i]["state"] == "CD" and by_id[i]["exit_code"] == 0, by_id[i]

    runs = collections.Counter(int(l) for l in ran.read_text().split())
    twice = {i: n for i, n in runs.items() if n > 1}
    assert not twice, f"jobs that ran more than once: {twice}"
    assert set(runs) <= set(by_id), "a job ran that the daemon does not know"
    for i in acked:
        assert runs[i] == 1, f"acknowledged job {i} never ran"
    for j in jobs:
        if j["state"] == "CD":
            assert runs[j["id"]] == 1, j

    # Ids keep growing after the crash.
    assert gflow.submit("true") > max(ids)


def end_while_down(gflow, code):
    """A job that runs, then ends with exit code `code` while the daemon is down: its id
    and its lock file."""
    job = gflow.submit(f"{WAIT_GO}; exit {code}")
    gflow.wait_state(job, "R")
    cp = gflow.down()
    assert cp.returncode == 0, cp.stderr
    (gflow.work / "go").touch()
    return job, gflow.data / "run" / f"{job}.lock"


def test_job_finished_while_daemon_down_is_finalized(gflow):
    job, lock_file = end_while_down(gflow, 7)

    def exit_record():
        # The shim writes its exit record into the lock file, at byte 8192.
        try:
            return json.loads(lock_file.read_bytes()[8192:])
        except (FileNotFoundError, ValueError):
            return None
    rec = wait_for(exit_record, "the shim's exit record", timeout=10)
    assert not (gflow.data / "exits" / f"{job}.json").exists()
    assert rec["job_id"] == job and rec["exit_code"] == 7 and rec["signal"] is None

    gflow.up()
    j = gflow.wait_state(job, timeout=10)
    assert (j["state"], j["exit_code"], j["reason"]) == ("F", 7, "NonZeroExitCode"), j
    assert j["end_time"] >= j["start_time"]


def test_job_of_a_previous_versions_shim_is_finalized_from_its_exit_file(gflow):
    """Shims of the previous version, still running across an upgrade, write their exit
    record to exits/<id>.json and leave only their lines in the lock file: the restarted
    daemon reads the record from there."""
    job, lock_file = end_while_down(gflow, 0)
    wait_for(lambda: len(lock_file.read_bytes()) > 8192, "the shim's exit record", timeout=10)
    # Make the files what an old shim leaves: lines only in the lock file, the record
    # in its own file (an outcome this job did not have, to tell where it came from).
    lines = lock_file.read_bytes()[:8192].split(b"\0")[0]
    lock_file.write_bytes(lines)
    rec = {"job_id": job, "exit_code": 9, "signal": None, "oom": False,
           "started_at": time.time() - 1, "finished_at": time.time(), "max_rss_kb": 100,
           "error": None}
    (gflow.data / "exits" / f"{job}.json").write_text(json.dumps(rec) + "\n")

    gflow.up()
    j = gflow.wait_state(job, timeout=10)
    assert (j["state"], j["exit_code"], j["reason"]) == ("F", 9, "NonZeroExitCode"), j
    wait_for(lambda: not (gflow.data / "exits" / f"{job}.json").exists(), "exit file removed")
    assert not lock_file.exists()


def test_lock_files_are_reused(gflow):
    """An ended job's lock file is kept as a spare (run/spare/<id>) and becomes the next
    job's, blanked (what the last shim wrote is not read as the new one's): no file is
    created or removed for it per job."""
    first = gflow.submit("true")
    assert gflow.wait_state(first)["state"] == "CD"
    spare = gflow.data / "run" / "spare" / str(first)
    wait_for(spare.exists, "the spare lock file")
    inode = spare.stat().st_ino
    assert not (gflow.data / "run" / f"{first}.lock").exists()
    second = gflow.submit(f"{WAIT_GO}; exit 3")
    gflow.wait_state(second, "R")
    lock = gflow.data / "run" / f"{second}.lock"
    assert lock.stat().st_ino == inode
    # Its shim's pid line, and no record yet (the first job's is gone).
    wait_for(lambda: lock.read_bytes()[:1] not in (b"", b"\0"), "the shim's pid line")
    assert lock.read_bytes()[8192:].strip(b"\0") == b""
    assert not spare.exists()
    (gflow.work / "go").touch()
    j = gflow.wait_state(second)
    assert (j["state"], j["exit_code"]) == ("F", 3), j
    # A restart starts with no spares.
    gflow.down()
    gflow.up()
    assert list((gflow.data / "run" / "spare").iterdir()) == []


def test_lock_file_of_another_job_is_not_taken_for_the_jobs_outcome(gflow):
    """A daemon killed after it had taken an ended job's lock file for the next job, but
    before it had blanked it (an earlier build blanked it after renaming it into place),
    left that job R with another job's lines and exit record (exit 0) in its lock file:
    its restart took them for the job's, and the job ended CD without having run (the
    flake of test_sigkill_during_submission_burst). The job is queued again and runs."""
    ran = gflow.root / "ran.txt"
    first = gflow.submit("true")
    assert gflow.wait_state(first)["state"] == "CD"
    spare = gflow.data / "run" / "spare" / str(first)
    wait_for(spare.exists, "the spare lock file")
    old = spare.read_bytes()
    assert json.loads(old[8192:].split(b"\0")[0])["job_id"] == first
    job = gflow.submit(f'{WAIT_GO}; echo "$GFLOW_JOB_ID" >> {ran}')
    gflow.wait_state(job, "R")
    # What the crash left: the job R in the database, no shim, the first job's lock file.
    cp = gflow.down()
    assert cp.returncode == 0, cp.stderr
    deadline = time.monotonic() + 10
    while procs := sandbox_processes(gflow.root):
        assert time.monotonic() < deadline, f"processes survived SIGKILL: {procs}"
        for pid, st in procs:
            kill_pid(pid, st)
        time.sleep(0.02)
    assert not ran.exists()
    (gflow.data / "run" / f"{job}.lock").write_bytes(old)

    (gflow.work / "go").touch()
    gflow.up()
    j = gflow.wait_state(job, timeout=15)
    assert (j["state"], j["exit_code"]) == ("CD", 0), j
    assert ran.read_text().split() == [str(job)]
    assert f"job {job}: its lock file still holds the exit record of another job" in \
        gflow.daemon_log()


def test_running_job_is_readopted_and_can_be_cancelled(gflow):
    job = gflow.submit("echo $$ > job.pid; sleep 300 & echo $! > child.pid; wait")
    gflow.wait_state(job, "R")
    pids = {}
    for name in ("job.pid", "child.pid"):
        pid = wait_for(lambda: read_pid_file(gflow.work / name), name)
        pids[name] = (pid, start_time(pid))
    before = gflow.job(job)

    gflow.down()
    for pid, st in pids.values():
        assert alive(pid, st), "the job did not survive the daemon's stop"
    gflow.up()
    j = gflow.job(job)
    assert j["state"] == "R", j
    assert j["start_time"] == before["start_time"] and j["shim_pid"] == before["shim_pid"]

    # Re-adopted (the daemon says so once it watches the shim again), not finalized; the
    # cancel below ending it as CancelledByUser shows it stayed so until then.
    wait_for(lambda: f"job {job} re-adopted" in gflow.daemon_log(), "the re-adoption")
    assert gflow.job(job)["state"] == "R"
    for pid, st in pids.values():
        assert alive(pid, st)

    cp = gflow.run("gcancel", job)
    assert cp.returncode == 0, cp.stderr
    j = gflow.wait_state(job, timeout=15)
    assert (j["state"], j["reason"]) == ("CA", "CancelledByUser"), j
    for name, (pid, st) in pids.items():
        wait_for(lambda: not alive(pid, st), f"{name} to be killed", timeout=5)


def test_readopted_job_end_is_noticed(gflow):
    """A re-adopted job that ends later is finalized at once with its exit code."""
    job = gflow.submit(f"{WAIT_GO}; exit 5")
    gflow.wait_state(job, "R")
    gflow.kill_daemon()
    gflow.up()
    assert gflow.job(job)["state"] == "R"
    (gflow.work / "go").touch()
    j = gflow.wait_state(job, timeout=5)
    assert (j["state"], j["exit_code"]) == ("F", 5), j


def test_ids_never_reused(gflow):
    ids = [gflow.submit("true") for _ in range(3)]
    held = gflow.submit("-H", "true")
    gflow.run("gcancel", held, check=True)
    for i in ids:
        gflow.wait_state(i)
    top = max(ids + [held])

    gflow.down()
    gflow.up()
    after_down = gflow.submit("true")
    assert after_down > top

    gflow.kill_daemon()
    gflow.up()
    after_kill = gflow.submit("true")
    assert after_kill > after_down
    ids = [j["id"] for j in all_jobs(gflow)]
    assert len(ids) == len(set(ids)) == 6
