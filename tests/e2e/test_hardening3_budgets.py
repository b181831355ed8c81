"""Budgets of a root gflowd shared by a lab (issue 27, items 5-7): request bodies are
budgeted per user and must keep arriving, the dashboard cannot be locked by connections
that never finish their headers, and the daemon's descriptors are split into reserves
for jobs, connections and its own needs, none of which can take another's.

Each attack is made by throwaway users (we are root); everyone else must still be served."""
import http.client
import json
import os
import re
import socket
import subprocess
import time

from conftest import NOBODY, as_user, binary, ensure_user, per_worker, wait_for

OTHER_USER = per_worker("gflowtest-bud")

HEAD = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


def raw_socket(path, timeout=10):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(str(path))
    return s


def read_answer(s):
    """What the daemon sent on s until it closed or stopped (b"" when nothing)."""
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data


# A helper run as another user: opens N uploads announcing SIZE bytes each, sends a
# little of each and prints what happened to every one ("held" or the status), then
# keeps them open until its stdin closes.
UPLOADS = (
    "import socket, sys\n"
    "path, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n"
    "head = ('POST /v1/jobs HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n'\n"
    "        'Content-Length: %d\\r\\n\\r\\n' % size).encode()\n"
    "held, seen = [], []\n"
    "for _ in range(n):\n"
    "    s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(path)\n"
    "    s.sendall(head + b'{')\n"
    "    try:\n"
    "        data = s.recv(65536)\n"
    "        seen.append(data.split()[1].decode() if data else 'closed')\n"
    "    except socket.timeout:\n"
    "        seen.append('held'); held.append(s)\n"
    "print(' '.join(seen), flush=True)\n"
    "sys.stdin.read()\n"
)


# ---------------------------------------------------------------- 5. request bodies

def test_one_user_cannot_take_the_body_budget(make_gflow):
    """Nine uploads of 7 MiB from one user (the issue's attack, with the default limits):
    only the first fits in that user's share (limits.max_body_bytes_per_user), the others
    are refused with 429 naming it, and another user's 2 MiB submission still goes in."""
    uid, gid, home = ensure_user(OTHER_USER)
    g = make_gflow()
    os.chmod(g.root, 0o755)
    helper = g.root / "uploads.py"
    helper.write_text(UPLOADS)
    os.chmod(helper, 0o644)
    p = subprocess.Popen([*as_user(NOBODY), "/usr/bin/python3", str(helper), str(g.sock), "9",
                          str(7 << 20)], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, cwd="/")
    try:
        seen = p.stdout.readline().split()
        assert seen == ["held"] + ["429"] * 8, seen
        big = {"command": "true", "workdir": "/", "env": {"PAD": "x" * (2 << 20)}}
        body = json.dumps(big).encode()
        cp = subprocess.run([*as_user(uid, gid), "/usr/bin/python3", "-c", POST, str(g.sock)],
                            input=body, capture_output=True, cwd="/", timeout=30)
        assert cp.stdout.split()[:1] == [b"201"], (cp.stdout[:300], cp.stderr[-300:])
    finally:
        p.stdin.close()
        p.wait(timeout=10)


POST = (
    "import socket, sys\n"
    "body = sys.stdin.buffer.read()\n"
    "s = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(sys.argv[1])\n"
    "s.sendall(('POST /v1/jobs HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n'\n"
    "           'Content-Length: %d\\r\\nConnection: close\\r\\n\\r\\n' % len(body)).encode() + body)\n"
    "data = b''\n"
    "while True:\n"
    "    c = s.recv(65536)\n"
    "    if not c: break\n"
    "    data += c\n"
    "print(data.split()[1].decode() if data else 'closed', data[-300:])\n"
)


def test_per_user_body_refusal_names_the_setting(make_gflow):
    g = make_gflow(env={"GFLOW_LIMITS__MAX_REQUEST_BYTES": "65536",
                        "GFLOW_LIMITS__MAX_BODY_BYTES_PER_USER": "100000"})
    hold = raw_socket(g.sock)
    hold.sendall((HEAD + "Content-Length: 60000\r\n\r\n").encode() + b"{")
    s = raw_socket(g.sock)
    s.sendall((HEAD + "Content-Length: 60000\r\n\r\n").encode())
    data = read_answer(s).decode(errors="replace")
    s.close()
    assert data.split()[1:2] == ["429"], data
    err = json.loads(data.split("\r\n\r\n", 1)[1])["error"]
    assert "\n" not in err.strip()
    assert "limits.max_body_bytes_per_user" in err and "100000" in err, err
    hold.close()
    # Its own share comes back when the upload goes.
    wait_for(lambda: g.api("POST", "/v1/jobs", body={"command": "true", "workdir": "/",
                                                     "env": {"PAD": "x" * 50000}}).status == 201,
             "the user's share to come back")


def test_a_user_within_a_fair_share_is_not_refused_because_of_others(make_gflow):
    """Two users' uploads fill limits.max_body_bytes_in_flight (each within its own
    share); a third user's body within a fair share of the total (a third of it) still
    goes in: the newest upload of the user most over that share is cut off with 503."""
    uid, gid, home = ensure_user(OTHER_USER)
    g = make_gflow(env={"GFLOW_LIMITS__MAX_REQUEST_BYTES": "65536",
                        "GFLOW_LIMITS__MAX_BODY_BYTES_PER_USER": "131072",
                        "GFLOW_LIMITS__MAX_BODY_BYTES_IN_FLIGHT": "196608",
                        "GFLOW_LIMITS__MIN_BODY_BYTES_PER_SEC": "0"})
    os.chmod(g.root, 0o755)
    helper = g.root / "uploads.py"
    helper.write_text(UPLOADS)
    os.chmod(helper, 0o644)
    procs = []
    try:
        for user, n in ((as_user(NOBODY), "2"), (as_user(uid, gid), "1")):
            procs.append(subprocess.Popen(
                [*user, "/usr/bin/python3", str(helper), str(g.sock), n, "60000"],
                stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, cwd="/"))
            assert procs[-1].stdout.readline().split() == ["held"] * int(n)
        # 180000 of 196608 are held: root's 50 kB would not fit.
        r = g.api("POST", "/v1/jobs", body={"command": "true", "workdir": "/",
                                            "env": {"PAD": "x" * 50000}})
        assert r.status == 201, r
        assert f"uid {NOBODY}: a request body cut off to make room for uid 0" in g.daemon_log()
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=10)


def test_a_body_that_stops_arriving_is_cut_off(make_gflow):
    """A body trickled a byte at a time is closed once it falls under
    limits.min_body_bytes_per_sec over limits.body_rate_window_secs, with a 408 naming
    the setting; its share of the budget comes back."""
    g = make_gflow(env={"GFLOW_LIMITS__MAX_REQUEST_BYTES": "65536",
                        "GFLOW_LIMITS__MAX_BODY_BYTES_PER_USER": "65536",
                        "GFLOW_LIMITS__MIN_BODY_BYTES_PER_SEC": "1000",
                        "GFLOW_LIMITS__BODY_RATE_WINDOW_SECS": "2"})
    s = raw_socket(g.sock, timeout=0.3)
    s.sendall((HEAD + "Content-Length: 60000\r\n\r\n").encode() + b"{" * 100)
    start = time.monotonic()
    answer = b""
    closed = False
    while time.monotonic() - start < 15:
        try:
            # Once the answer has begun, stop sending: more bytes after the daemon has
            # closed its side would reset the connection and lose the rest of it.
            if not answer:
                s.sendall(b" ")
            chunk = s.recv(65536)
            answer += chunk
            if not chunk:
                closed = True
                break
        except socket.timeout:
            continue
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
    elapsed = time.monotonic() - start
    s.close()
    assert closed, f"a trickled body was still being read after {elapsed:.0f} s"
    assert elapsed < 10, elapsed
    assert answer.split()[1:2] == [b"408"], answer
    assert b"limits.min_body_bytes_per_sec" in answer, answer
    assert "limits.min_body_bytes_per_sec" in g.daemon_log()
    # The user's share is free again: a body as large as it fits.
    r = g.api("POST", "/v1/jobs", body={"command": "true", "workdir": "/",
                                        "env": {"PAD": "y" * 60000}})
    assert r.status == 201, r
    assert g.health_ok()


# ---------------------------------------------------------------- 6. the dashboard

URL_RE = re.compile(r"^http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]{64})$", re.M)


def start_web(g):
    proc = subprocess.Popen([binary("gflowd"), "web", "--port", "0"], env=g.env,
                            cwd=str(g.work), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out = ""
    deadline = time.monotonic() + 10
    while not URL_RE.search(out) and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        out += line
    m = URL_RE.search(out)
    if not m:
        proc.kill()
        proc.wait()
        raise AssertionError(f"gflowd web printed no URL: {out!r}")
    return proc, int(m.group(1)), m.group(2)


def web_get(port, path, cookie=None, timeout=5):
    headers = {"Host": f"127.0.0.1:{port}"}
    if cookie:
        headers["Cookie"] = cookie
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


def test_dashboard_owner_gets_in_past_half_sent_headers(make_gflow):
    """200 connections that send half a header and wait: the owner's browser still logs
    in and gets its page within a few seconds (the oldest connection that has not shown
    the session is closed to make room, and such connections time out)."""
    g = make_gflow()
    proc, port, token = start_web(g)
    held = []
    try:
        for _ in range(200):
            s = socket.socket()
            s.settimeout(0.2)
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Half: ".encode())
            except OSError:
                pass
            held.append(s)
        start = time.monotonic()

        def login():
            try:
                status, headers, _ = web_get(port, f"/?token={token}", timeout=2)
            except OSError:
                return None
            return headers["Set-Cookie"].split(";")[0] if status == 303 else None
        cookie = wait_for(login, "the owner to log in past the half-sent headers", timeout=10)
        status, _, body = web_get(port, "/v1/health", cookie=cookie)
        assert status == 200, body
        assert time.monotonic() - start < 10
    finally:
        for s in held:
            s.close()
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


def test_dashboard_closes_silent_connections(make_gflow):
    """A connection that never finishes its headers is closed after the header timeout."""
    g = make_gflow()
    proc, port, _ = start_web(g)
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            assert s.recv(4096) == b""
        except socket.timeout:
            raise AssertionError("a half-sent header was kept open for 20 s") from None
        s.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


# ---------------------------------------------------------------- 7. descriptor reserves

HOLD = (
    "import socket, sys\n"
    "held, last = [], 'none'\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
    "    try:\n"
    "        s.sendall(b'GET /v1/health HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
    "    except BrokenPipeError:\n"
    "        pass\n"
    "    data = s.recv(65536)\n"
    "    if not data.startswith(b'HTTP/1.1 200'):\n"
    "        last = data.split()[1].decode() if data else 'closed'\n"
    "        break\n"
    "    held.append(s)\n"
    "print('held', len(held), 'next', last, flush=True)\n"
    "sys.stdin.read()\n"
)


def reserves(g):
    r = g.api("GET", "/v1/status")
    assert r.status == 200, r
    return r.json()["descriptors"]


def test_descriptor_reserves_keep_a_third_user_served(make_gflow):
    """At an open-file limit of 256, jobs fill their reserve and two users open all the
    connections they may: a third user is still served, gflowd status shows the
    reserves, and no class uses more than its own."""
    third = ensure_user(OTHER_USER)
    g = make_gflow(start=False)
    os.chmod(g.root, 0o755)
    g.run("prlimit", "--nofile=256:256", binary("gflowd"), "up", check=True)
    fds = reserves(g)
    assert fds["limit"] == 256, fds
    for cls in ("jobs", "connections", "daemon"):
        assert fds[cls]["reserved"] > 0 and fds[cls]["in_use"] >= 0, fds
    assert sum(fds[c]["reserved"] for c in ("jobs", "connections", "daemon")) <= 256, fds
    # Jobs: more than the reserve can take; some wait, the rest run.
    g.run("gbatch", "--array", "1-150", "sleep", "600", check=True)

    def full():
        f = reserves(g)
        assert f["jobs"]["in_use"] <= f["jobs"]["reserved"], f
        return f if f["jobs"]["reserved"] - f["jobs"]["in_use"] < 2 else None
    wait_for(full, "the jobs to fill their reserve", timeout=60, interval=0.1)
    assert len(g.jobs(state="PD", limit=1000)) > 0, "the reserve did not hold any job back"
    # Two users open as many connections as they may.
    holder = g.root / "holder.py"
    holder.write_text(HOLD)
    os.chmod(holder, 0o644)
    procs = []
    try:
        for user in (as_user(NOBODY), as_user(*ensure_user(per_worker("gflowtest-bud2"))[:2])):
            p = subprocess.Popen([*user, "/usr/bin/python3", str(holder), str(g.sock), "200"],
                                 stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, cwd="/")
            procs.append(p)
            line = p.stdout.readline().split()
            assert line == ["held", str(fds["user_connections"]), "next", "429"], line
        # The third user is served.
        cp = g.run("gqueue", user=as_user(third[0], third[1]), cwd="/", env={"HOME": third[2]})
        assert cp.returncode == 0, cp.stderr
        f = reserves(g)
        assert f["connections"]["in_use"] <= f["connections"]["reserved"], f
        assert f["daemon"]["in_use"] <= f["daemon"]["reserved"], f
        st = g.gflowd("status")
        assert st.returncode == 0, st.stderr
        line = [l for l in st.stdout.splitlines() if l.startswith("Descriptors:")]
        assert line, st.stdout
        assert "limit 256" in line[0] and "jobs" in line[0] and "connections" in line[0] \
            and "daemon" in line[0], line
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=10)
