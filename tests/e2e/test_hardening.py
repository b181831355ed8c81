"""A root gflowd shared by a lab, tried as a hostile local user would (issue 8): no
admin runs code as another user, the socket is reachable on a fresh boot, and no user
can stall the daemon or starve the others with ids, bodies, connections, jobs or logs.
Each attack must fail with a one-line error that names the limit, and everyone else
must still be served.

The tests that switch users need root (they are in CI) and create throwaway users."""
import os
import socket
import subprocess
import threading

import pytest

from conftest import (NOBODY, TEST_USER, as_user, assert_not_running, binary, ensure_user,
                      per_worker, wait_for)

ADMIN_USER = per_worker("gflowtest-adm")
ADMIN_GROUP = per_worker("gflowtest-admins")


def one_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one line, got: {text!r}"
    return lines[0]


def raw_socket(path, timeout=10):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(str(path))
    return s


def status_of(s):
    """The status code of the response on s (read until the status line is in)."""
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split()[1]) if data.startswith(b"HTTP/") else None


# ---------------------------------------------------------------- 1. admins and jobs

def test_admin_cannot_change_what_another_users_job_runs(make_gflow, owner):
    uid, gid, home = owner
    auid, agid, ahome = ensure_user(ADMIN_USER, (ADMIN_GROUP,))
    g = make_gflow(env={"GFLOW_DAEMON__ADMIN_GROUP": ADMIN_GROUP})
    os.chmod(g.root, 0o755)
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    as_owner = as_user(uid, gid)
    owner_env = {"HOME": home, "USER": TEST_USER}
    as_admin = as_user(auid, agid)
    admin_env = {"HOME": ahome, "USER": ADMIN_USER}
    mine = g.submit("-H", "echo owner-ran", user=as_owner, cwd=workdir, env=owner_env)
    roots = g.submit("-H", "echo root-ran")
    marker = g.root / "written-by-admin"

    for job, who in ((mine, TEST_USER), (roots, "root")):
        for args in (("-c", f"id > {marker}"), ("--conda-env", "base")):
            cp = g.run("gjob", "update", job, *args, user=as_admin, cwd="/", env=admin_env)
            assert cp.returncode != 0, (job, args, cp.stdout)
            msg = one_line(cp.stderr)
            assert "only its owner may change" in msg and who in msg, msg
        # The API refuses a new environment or directory too.
        for body in ({"env": {"LD_PRELOAD": str(marker)}}, {"workdir": "/tmp"}):
            cp = g.run("/usr/bin/python3", "-c", PATCH, g.sock, str(job), repr(body),
                       user=as_admin, cwd="/")
            assert cp.stdout.split()[:2] == ["HTTP/1.1", "403"], (body, cp.stdout, cp.stderr)
        # What admins may do: priority, limits, hold and release.
        cp = g.run("gjob", "update", job, "-p", "7", "-t", "10", user=as_admin, cwd="/",
                   env=admin_env)
        assert cp.returncode == 0, cp.stderr
        cp = g.run("gjob", "release", job, user=as_admin, cwd="/", env=admin_env)
        assert cp.returncode == 0, cp.stderr
    for job, text in ((mine, "owner-ran"), (roots, "root-ran")):
        j = g.wait_state(job)
        assert (j["state"], j["priority"], j["time_limit"]) == ("CD", 7, 600), j
        assert g.log(job) == text + "\n"
    assert not marker.exists(), "an admin's change ran as the job's owner"
    # The owner may still change everything about their own job.
    held = g.submit("-H", "true", user=as_owner, cwd=workdir, env=owner_env)
    cp = g.run("gjob", "update", held, "-c", "echo changed", user=as_owner, cwd=workdir,
               env=owner_env)
    assert cp.returncode == 0, cp.stderr


PATCH = (
    "import ast, json, socket, sys\n"
    "body = json.dumps(ast.literal_eval(sys.argv[3])).encode()\n"
    "s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
    "s.sendall(b'PATCH /v1/jobs/' + sys.argv[2].encode() + b' HTTP/1.1\\r\\nHost: x\\r\\n'\n"
    "          b'Content-Type: application/json\\r\\nContent-Length: '\n"
    "          + str(len(body)).encode() + b'\\r\\n\\r\\n' + body)\n"
    "print(s.recv(65536).split(b'\\r\\n')[0].decode())\n"
)


# ---------------------------------------------------------------- 2. the socket

def test_system_socket_is_reachable_whatever_the_umask(make_gflow, owner):
    g = make_gflow(start=False)
    os.chmod(g.root, 0o755)
    run_dir = g.root / "run" / "gflow"  # does not exist yet, as /run/gflow on a fresh boot
    g.sock = run_dir / "gflowd.sock"
    g.env["GFLOW_DAEMON__SOCKET_PATH"] = g.env["GFLOW_SOCKET"] = str(g.sock)
    old = os.umask(0o077)
    try:
        g.up()
    finally:
        os.umask(old)
    assert (os.stat(run_dir).st_mode & 0o777) == 0o755
    assert (os.stat(g.sock).st_mode & 0o777) == 0o666
    nobody = as_user(NOBODY)
    cp = g.run("gqueue", user=nobody, cwd="/", env={"HOME": "/"})
    assert (cp.returncode, cp.stdout.strip()) == (0, "No jobs found."), cp.stderr

    # A socket that exists but cannot be reached: the error names it and the cause.
    os.chmod(run_dir, 0o700)
    cp = g.run("gqueue", user=nobody, cwd="/", env={"HOME": "/"})
    # The first line says it (the same from every program), the details the socket.
    assert_not_running(cp, f"socket: {g.sock} (Permission denied)",
                       first="gflowd cannot be reached: Permission denied")
    os.chmod(run_dir, 0o755)


# ---------------------------------------------------------------- 3. stalls and floods

def test_id_lists_resolve_against_existing_jobs(make_gflow):
    g = make_gflow(env={"GFLOW_LIMITS__MAX_IDS_PER_REQUEST": "5"})
    ids = [g.submit("-H", "true") for _ in range(3)]
    huge = ",".join(["1-1000000"] * 200)  # once 4 GB and 30 s, or an abort
    r = g.api("GET", f"/v1/jobs?id={huge}", timeout=20)
    assert r.status == 200, r
    assert [j["id"] for j in r.json()["jobs"]] == ids
    cp = g.run("gqueue", "-j", huge, "-f", "JOBID", check=True)
    assert cp.stdout.split()[1:] == [str(i) for i in ids]
    ids += [g.submit("-H", "true") for _ in range(3)]
    cp = g.run("gqueue", "-j", "1-1000000")
    assert cp.returncode != 0
    msg = one_line(cp.stderr)
    assert "limits.max_ids_per_request" in msg, msg
    assert g.health_ok()


def test_bodies_are_refused_before_they_are_read(make_gflow):
    g = make_gflow(env={"GFLOW_LIMITS__MAX_REQUEST_BYTES": "65536",
                        "GFLOW_LIMITS__MAX_BODY_BYTES_IN_FLIGHT": "131072"})
    head = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    # An oversized Content-Length is answered at once, with no byte of the body sent.
    s = raw_socket(g.sock)
    s.sendall((head + "Content-Length: 1000000000000\r\n\r\n").encode())
    assert status_of(s) == 413
    s.close()
    # Two uploads that never finish hold 120000 bytes; a third one does not fit.
    slow = []
    for _ in range(2):
        s = raw_socket(g.sock)
        s.sendall((head + "Content-Length: 60000\r\n\r\n").encode() + b"{" * 1000)
        slow.append(s)
    refusal = []
    wait_for(lambda: third_upload(g, head, refusal), "the third upload to be refused")
    assert "limits.max_body_bytes_in_flight" in refusal[0], refusal
    # Everything else is still served, and the space comes back when they go.
    assert g.health_ok()
    for s in slow:
        s.close()
    wait_for(lambda: g.api("POST", "/v1/jobs", body="{" * 70000).status == 413,
             "a large body to be refused for its own size again")
    r = g.api("POST", "/v1/jobs", body={"command": "true", "workdir": "/"})
    assert r.status == 201, r


def third_upload(g, head, refusal):
    """Whether an upload of 60000 bytes is refused with 503 (its answer in refusal);
    one that is taken waits for its body, and is given up after a second."""
    s = raw_socket(g.sock, timeout=1)
    try:
        s.sendall((head + "Content-Length: 60000\r\n\r\n").encode())
        data = b""
        while b"limits." not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        return False
    finally:
        s.close()
    if data.split()[1:2] == [b"503"]:
        refusal.append(data.decode(errors="replace"))
        return True
    return False


def test_connection_limits(make_gflow, owner):
    uid, gid, home = owner
    g = make_gflow(env={"GFLOW_LIMITS__MAX_CONNECTIONS_PER_USER": "6",
                        "GFLOW_LIMITS__MAX_CONNECTIONS": "10"})
    os.chmod(g.root, 0o755)
    # nobody holds its 6 connections (from a child as nobody: SO_PEERCRED is taken at
    # connect), the 7th is refused with 429; other users are still served.
    holder = g.root / "holder.py"
    holder.write_text(HOLD)
    os.chmod(holder, 0o644)
    nobody = as_user(NOBODY)
    procs = []
    try:
        procs.append(subprocess.Popen(
            [*nobody, "/usr/bin/python3", str(holder), str(g.sock), "6"],
            stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, cwd="/"))
        assert procs[0].stdout.readline().split() == ["held", "6", "next", "429"]
        assert g.health_ok()
        cp = g.run("gqueue", user=as_user(uid, gid), cwd="/", env={"HOME": home})
        assert cp.returncode == 0, cp.stderr
        # With 4 more from the test user, the total is reached: root is refused (503).
        procs.append(subprocess.Popen(
            [*as_user(uid, gid), "/usr/bin/python3", str(holder), str(g.sock), "4"],
            stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, cwd="/"))
        line = procs[1].stdout.readline().split()
        assert line[:2] == ["held", "4"], line
        cp = g.run("gqueue")
        assert cp.returncode != 0
        msg = one_line(cp.stderr)
        assert "limits.max_connections" in msg, msg
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=10)
    wait_for(lambda: g.run("gqueue").returncode == 0, "root to be served again")


def test_connections_stay_within_the_open_file_limit(make_gflow):
    """With few descriptors the daemon takes fewer connections (half of a 400-fd limit),
    refusing the rest with 503 instead of failing to accept them; it serves again once
    they close."""
    g = make_gflow(start=False, env={"GFLOW_LIMITS__MAX_CONNECTIONS_PER_USER": "1000"})
    g.run("prlimit", "--nofile=400:400", binary("gflowd"), "up", check=True)
    holder = g.root / "holder.py"
    holder.write_text(HOLD)
    p = subprocess.Popen(["/usr/bin/python3", str(holder), str(g.sock), "200"],
                         stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        assert p.stdout.readline().split() == ["held", "200", "next", "503"]
        cp = g.run("gqueue")
        assert cp.returncode != 0 and "limits.max_connections" in cp.stderr, cp.stderr
    finally:
        p.stdin.close()
        p.wait(timeout=10)
    wait_for(lambda: g.run("gqueue").returncode == 0, "the daemon to serve again")
    assert "at most 200 connections" in g.daemon_log()


def test_out_of_descriptors_pauses_accepting_then_serves(make_gflow):
    """No descriptor at all, not even the spare one: accepting pauses (rather than the
    pending connection waking the loop forever) and the connection is served once
    descriptors are back."""
    g = make_gflow()
    pid = g.daemon_pid()
    hard = [l for l in open(f"/proc/{pid}/limits") if l.startswith("Max open files")][0].split()[4]
    g.run("prlimit", f"--pid={pid}", f"--nofile=3:{hard}", check=True)
    try:
        s = raw_socket(g.sock)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_for(lambda: "accepting paused" in g.daemon_log(), "accepting to pause")
    finally:
        g.run("prlimit", f"--pid={pid}", f"--nofile={hard}:{hard}", check=True)
    assert status_of(s) == 200
    s.close()


HOLD = (
    "import socket, sys\n"
    "held = []\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
    "    s.sendall(b'GET /v1/health HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
    "    assert s.recv(65536).startswith(b'HTTP/1.1 200')\n"
    "    held.append(s)\n"
    "s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
    "try:\n"
    "    s.sendall(b'GET /v1/health HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
    "except BrokenPipeError:\n"
    "    pass  # refused at once: the answer is already there\n"
    "data = s.recv(65536)\n"
    "print('held', len(held), 'next', data.split()[1].decode() if data else 'closed',\n"
    "      flush=True)\n"
    "sys.stdin.read()\n"
)


def test_silent_connections_are_closed(make_gflow):
    g = make_gflow(env={"GFLOW_LIMITS__IDLE_TIMEOUT_SECS": "1"})
    s = raw_socket(g.sock, timeout=20)
    assert s.recv(1) == b"", "a connection that sent nothing was kept open"
    s.close()
    assert g.health_ok()


def test_jobs_per_request_and_per_user(make_gflow, owner):
    uid, gid, home = owner
    g = make_gflow(env={"GFLOW_LIMITS__MAX_JOBS_PER_REQUEST": "100",
                        "GFLOW_LIMITS__MAX_ACTIVE_JOBS_PER_USER": "150"})
    for args in (("--array", "1-101"), ("--param", "x=1:101")):
        cp = g.run("gbatch", "-H", *args, "echo {x}" if args[0] == "--param" else "true")
        assert cp.returncode != 0, args
        msg = one_line(cp.stderr)
        assert "101 jobs" in msg and "limits.max_jobs_per_request" in msg, msg
    cp = g.run("gqueue", "-a", "-f", "JOBID", check=True)
    assert cp.stdout.strip() == "No jobs found."

    g.run("gbatch", "-H", "--array", "1-100", "true", check=True)
    g.run("gbatch", "-H", "--array", "1-50", "true", check=True)
    cp = g.run("gbatch", "-H", "true")
    assert cp.returncode != 0
    msg = one_line(cp.stderr)
    assert "150" in msg and "limits.max_active_jobs_per_user" in msg, msg
    cp = g.run("gjob", "redo", "1")
    assert cp.returncode != 0 and "limits.max_active_jobs_per_user" in cp.stderr
    assert len(g.jobs(state="PD,H,R", limit=1000)) == 150
    # Another user is not affected; a cancelled job makes room again.
    os.chmod(g.root, 0o755)
    cp = g.run("gbatch", "-H", "true", user=as_user(uid, gid), cwd="/", env={"HOME": home})
    assert cp.returncode == 0, cp.stderr
    g.run("gcancel", "1", check=True)
    g.submit("-H", "true")


def test_log_first_and_last_are_bounded(make_gflow):
    g = make_gflow(env={"GFLOW_LIMITS__MAX_LOG_SCAN_BYTES": "1048576"})
    job = g.submit("head -c 8000000 /dev/zero | tr '\\0' x; printf '\\nend\\n'")
    assert g.wait_state(job, timeout=30)["state"] == "CD"
    # No newline in the first MiB: --first answers that MiB, not the whole log.
    cp = g.run("gjob", "log", job, "--first", "1", check=True)
    assert len(cp.stdout) == 1048576 and set(cp.stdout) == {"x"}
    # The last lines are found within the bound; more than it holds stops at it.
    cp = g.run("gjob", "log", job, "--last", "1", check=True)
    assert cp.stdout == "end\n"
    cp = g.run("gjob", "log", job, "--last", "2", check=True)
    assert len(cp.stdout) == 1048576 and cp.stdout.endswith("x\nend\n")
    assert len(g.run("gjob", "log", job, check=True).stdout) == 8000005


# ---------------------------------------------------------------- 7d. a lost answer

def test_lost_answer_says_the_change_may_have_happened(make_gflow, tmp_path):
    """A fake daemon reads each request whole and closes without answering."""
    g = make_gflow(start=False)
    path = tmp_path / "fake.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(8)
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except socket.timeout:
                continue
            with c:
                c.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += c.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                while len(body) < length:
                    body += c.recv(65536)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        env = {"GFLOW_SOCKET": str(path)}
        cp = g.run("gbatch", "true", env=env)
        assert cp.returncode != 0
        msg = one_line(cp.stderr)
        assert "may have been carried out" in msg and "gqueue" in msg, msg
        cp = g.run("gqueue", env=env)
        assert cp.returncode != 0
        assert "may have been carried out" not in one_line(cp.stderr)
    finally:
        stop.set()
        t.join(timeout=5)
        srv.close()
