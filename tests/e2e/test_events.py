"""GET /v1/events (Server-Sent Events): job events in order with state, reason and exit
code; GPU events; filters; Last-Event-ID resume and resync; per-user visibility; a client
that does not read is dropped while the daemon keeps serving; gqueue -w and gjob log
--follow driven by events.

The client here is a raw HTTP/1.1 reader of the Unix socket (chunked body, SSE lines),
run in this process, or through a small copying helper run as another user."""
import json
import os
import select
import socket
import subprocess
import sys
import time

import pytest

from conftest import TEST_USER, as_user, binary, ensure_test_user, wait_for, write_json_atomic
from test_gpus import fixture_of, outside_process, sim, sim_gpu  # noqa: F401

# Copies a stream's raw bytes to stdout: the test reads them as the user it ran as.
_COPY = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % sys.argv[2]).encode())
while True:
    b = s.recv(65536)
    if not b:
        break
    os.write(1, b)
"""


class Stream:
    """One GET /v1/events: its status and headers, then events as dicts
    {"id", "event", "data"} (data parsed as JSON)."""

    def __init__(self, g, path="/v1/events", headers=None, user=None):
        self.proc = None
        if user:
            self.proc = subprocess.Popen([*user, sys.executable, "-c", _COPY, str(g.sock), path],
                                         stdout=subprocess.PIPE, env=g.env)
            self.fd = self.proc.stdout.fileno()
            self.sock = None
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(str(g.sock))
            head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\n"
            for k, v in (headers or {}).items():
                head += f"{k}: {v}\r\n"
            self.sock.sendall((head + "\r\n").encode())
            self.fd = self.sock.fileno()
        self.raw = b""      # bytes not decoded yet
        self.body = b""     # the body after de-chunking, not parsed into events yet
        self.eof = False    # the connection closed
        self.ended = False  # the body ended (last chunk)
        self.status = None
        self.headers = {}
        self.error = None
        self._read_head()

    def close(self):
        if self.sock:
            self.sock.close()
        if self.proc:
            self.proc.kill()
            self.proc.wait()

    def _fill(self, deadline):
        """Reads more bytes; False once the deadline passed or the connection closed."""
        left = deadline - time.monotonic()
        if self.eof or left <= 0:
            return False
        r, _, _ = select.select([self.fd], [], [], left)
        if not r:
            return False
        b = os.read(self.fd, 65536)
        if not b:
            self.eof = True
            return False
        self.raw += b
        return True

    def _read_head(self, timeout=10):
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.raw:
            assert self._fill(deadline), f"no response head: {self.raw!r}"
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        for line in lines[1:]:
            k, v = line.split(":", 1)
            self.headers[k.strip().lower()] = v.strip()
        if self.status != 200:  # an error: a JSON body with Content-Length
            n = int(self.headers.get("content-length", "0"))
            while len(self.raw) < n:
                assert self._fill(deadline)
            self.error = json.loads(self.raw[:n])["error"]

    def _dechunk(self):
        while not self.ended and b"\r\n" in self.raw:
            size_line, rest = self.raw.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                self.ended = True
                self.raw = b""
                return
            if len(rest) < size + 2:
                return
            self.body += rest[:size]
            self.raw = rest[size + 2:]

    def _parse_one(self):
        """The next complete event of the body (comments skipped), or None."""
        while b"\n\n" in self.body:
            block, self.body = self.body.split(b"\n\n", 1)
            ev = {}
            for line in block.decode().split("\n"):
                if line.startswith(":"):
                    continue
                k, _, v = line.partition(": ")
                ev[k] = json.loads(v) if k == "data" else v
            if ev:
                return ev
        return None

    def next(self, timeout=10):
        """The next event, or None when the stream ended or the timeout passed."""
        deadline = time.monotonic() + timeout
        while True:
            self._dechunk()
            ev = self._parse_one()
            if ev or self.ended:
                return ev
            if not self._fill(deadline):
                return None

    def until(self, pred, what, timeout=10):
        """Events up to and including the first for which pred is true."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            ev = self.next(max(0.0, deadline - time.monotonic()))
            assert ev is not None, f"no event {what} in time; got {got}"
            got.append(ev)
            if pred(ev):
                return got

    def hello(self):
        ev = self.next()
        assert ev and ev["event"] == "hello", ev
        return ev


def job_events(events, job_id):
    return [(e["event"], e["data"]) for e in events
            if e["event"].startswith("job_") and e["data"]["id"] == job_id]


def seq_of(event_id):
    return int(event_id.rsplit("-", 1)[1])


def test_job_lifecycle_in_order_with_gpu_events(make_gflow):
    g = make_gflow(args=("--simulate-gpus", "2"))
    s = Stream(g)
    assert s.status == 200 and s.headers["content-type"] == "text/event-stream"
    hello = s.hello()
    assert hello["data"]["user"] == "root" and hello["data"]["admin"] is True
    assert hello["id"] == hello["data"]["last_event_id"]
    jid = g.submit("--gpus", "1", "sh", "-c", "sleep 0.3; exit 3")
    got = s.until(lambda e: e["event"] == "job_ended", "job_ended")
    got += s.until(lambda e: e["event"] == "gpu" and not e["data"]["busy"], "gpu freed")
    mine = job_events(got, jid)
    assert [t for t, _ in mine] == ["job_submitted", "job_started", "job_ended"], got
    assert [d["state"] for _, d in mine] == ["PD", "R", "F"]
    ended = mine[-1][1]
    assert ended["exit_code"] == 3 and ended["reason"] == "NonZeroExitCode", ended
    gpu = [e["data"] for e in got if e["event"] == "gpu"]
    assert gpu[0]["busy"] and gpu[0]["jobs"] == [jid], gpu
    assert gpu[-1]["index"] == gpu[0]["index"] and gpu[-1]["jobs"] == []
    ids = [seq_of(e["id"]) for e in got]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)  # increasing, no repeats
    s.close()


def test_outside_process_is_a_gpu_event(make_gflow, outside_process):
    fx = fixture_of([sim_gpu(0), sim_gpu(1)])
    g = sim(make_gflow, fixture=fx)
    s = Stream(g, "/v1/events?types=gpu")
    s.hello()
    p = outside_process()
    fx["gpus"][1]["processes"] = [{"pid": p.pid, "used_memory_mib": 500}]
    write_json_atomic(g.fixture_path, fx)
    ev = s.next()
    assert ev["event"] == "gpu" and ev["data"]["index"] == 1, ev
    assert ev["data"]["outside_processes"] is True and ev["data"]["busy"] is False
    fx["gpus"][1]["processes"] = []
    write_json_atomic(g.fixture_path, fx)
    ev = s.next()
    assert ev["data"] == {"index": 1, "busy": False, "jobs": [], "outside_processes": False,
                          "allowed": True}, ev
    s.close()


def test_filters(gflow):
    a = gflow.submit("--hold", "true")
    b = gflow.submit("--hold", "true")
    s = Stream(gflow, f"/v1/events?job={b}&types=job_ended")
    s.hello()
    gflow.run("gcancel", a, check=True)
    gflow.run("gcancel", b, check=True)
    ev = s.next()
    assert ev["event"] == "job_ended" and ev["data"]["id"] == b and ev["data"]["state"] == "CA"
    assert s.next(timeout=0.5) is None  # nothing about a, nothing else about b
    s.close()
    bad = Stream(gflow, "/v1/events?types=job_started,job_exploded")
    assert bad.status == 400 and "job_exploded" in bad.error and "job_started" in bad.error
    bad.close()
    assert gflow.api("POST", "/v1/events").status == 405


def test_last_event_id_resumes_exactly(gflow):
    first = Stream(gflow, "/v1/events?types=job_submitted,job_ended")
    seen = first.hello()["id"]
    first.close()
    watcher = Stream(gflow, "/v1/events?types=job_submitted,job_ended")
    watcher.hello()
    ids = [gflow.submit("true") for _ in range(2)]
    for j in ids:
        gflow.wait_state(j)
    live = watcher.until(lambda e: e["event"] == "job_ended" and e["data"]["id"] == ids[-1],
                         "the last end")
    live += watcher.until(lambda e: len(job_events(live + [e], ids[0])) == 2, "both ends") \
        if len(job_events(live, ids[0])) < 2 else []
    watcher.close()
    again = Stream(gflow, "/v1/events?types=job_submitted,job_ended",
                   headers={"Last-Event-ID": seen})
    hello = again.next()
    assert hello["event"] == "hello" and "id" not in hello  # resuming: no new id given
    missed = [again.next() for _ in range(len(live))]
    assert [(e["id"], e["event"], e["data"]["id"]) for e in missed] == \
        [(e["id"], e["event"], e["data"]["id"]) for e in live]
    assert again.next(timeout=0.3) is None
    again.close()


def test_unknown_or_too_old_id_gets_resync(make_gflow):
    g = make_gflow()
    s = Stream(g, headers={"Last-Event-ID": "1234abcd-7"})
    s.hello()
    ev = s.next()
    assert ev["event"] == "resync" and "run" in ev["data"]["reason"], ev
    last = ev["id"]
    s.close()
    # More events than the ring keeps (4096): an id from before them is too old.
    g.run("gbatch", "--hold", "--array", "1-4200", "true", check=True)
    s = Stream(g, headers={"Last-Event-ID": last})
    s.hello()
    ev = s.next()
    assert ev["event"] == "resync" and "no longer kept" in ev["data"]["reason"], ev
    assert seq_of(ev["id"]) >= seq_of(last) + 4200
    s.close()


def event_clients(g):
    r = g.api("GET", "/metrics")
    for line in r.text.splitlines():
        if line.startswith("gflow_event_clients "):
            return int(line.split()[1])
    raise AssertionError("no gflow_event_clients in /metrics")


def test_slow_client_dropped_daemon_keeps_serving(make_gflow):
    g = make_gflow(env={"GFLOW_LIMITS__EVENT_BUFFER_BYTES": "4096"})
    stuck = Stream(g, "/v1/events?user=all")  # reads its head, then nothing more
    late = Stream(g, "/v1/events?user=all")
    assert event_clients(g) == 2
    # One commit publishes 3000 events at once: more than either buffer takes.
    g.run("gbatch", "--hold", "--array", "1-3000", "true", check=True)
    got = late.until(lambda e: e["event"] == "resync", "resync", timeout=20)
    assert "fell" in got[-1]["data"]["reason"]
    assert late.next() is None and late.ended  # the stream ends after the resync
    late.close()
    # Meanwhile and after, the daemon answers; the stuck client is closed by itself.
    wait_for(lambda: g.health_ok() and event_clients(g) == 0, "the stuck client to be dropped",
             timeout=20, interval=0.2)
    stuck.close()
    assert "fell more than 4096 bytes behind" in g.daemon_log()


def test_visibility_per_user(make_gflow):
    uid, gid, _ = ensure_test_user()
    g = make_gflow()
    os.chmod(g.root, 0o755)
    user = as_user(uid, gid)
    own = Stream(g, user=user)
    hello = own.hello()
    assert hello["data"]["admin"] is False
    everyone = Stream(g, "/v1/events?user=all&types=job_submitted", user=user)
    everyone.hello()
    admin = Stream(g, f"/v1/events?user={TEST_USER}&types=job_submitted")
    admin.hello()
    roots = g.submit("--hold", "true")
    theirs = g.submit("--hold", "true", user=user)
    # The user's default stream: their own job only.
    ev = own.until(lambda e: e["event"] == "job_submitted", "their submission")[-1]
    assert ev["data"]["id"] == theirs and ev["data"]["user"] == TEST_USER
    # With user=all: root's job too, as GET /v1/jobs shows it (no environment or script).
    evs = [everyone.next(), everyone.next()]
    assert sorted(e["data"]["id"] for e in evs) == [roots, theirs]
    for e in evs:
        assert "env" not in e["data"] and "script" not in e["data"]
    # The admin (root) asked for that user's jobs.
    assert admin.next()["data"]["id"] == theirs
    for s in (own, everyone, admin):
        s.close()


def test_too_many_streams_per_user(make_gflow):
    g = make_gflow(env={"GFLOW_LIMITS__MAX_EVENT_CLIENTS_PER_USER": "2"})
    a, b = Stream(g), Stream(g)
    c = Stream(g)
    assert c.status == 429 and "max_event_clients_per_user" in c.error
    for s in (a, b, c):
        s.close()
    wait_for(lambda: event_clients(g) == 0, "the streams to close")
    d = Stream(g)
    assert d.status == 200
    d.close()


def test_hold_release_are_updates(gflow):
    s = Stream(gflow, "/v1/events?types=job_updated")
    s.hello()
    jid = gflow.submit("--hold", "true")
    gflow.run("gjob", "release", jid, check=True)
    ev = s.next()
    assert ev["event"] == "job_updated" and ev["data"]["id"] == jid
    assert ev["data"]["state"] in ("PD", "R")  # released; it may start at once
    s.close()


def test_reload_and_stop_are_daemon_events(make_gflow):
    g = make_gflow()
    s = Stream(g, "/v1/events?types=daemon")
    s.hello()
    g.gflowd("reload", check=True)
    assert s.next()["data"] == {"status": "reloaded"}
    g.down(check=True)
    got = s.until(lambda e: e["event"] == "daemon", "the daemon event")
    assert got[-1]["data"] == {"status": "stopping"}
    assert s.next() is None
    s.close()


def test_gqueue_watch_redraws_on_events(gflow):
    before = gflow.submit("--hold", "true")
    p = subprocess.Popen([binary("gqueue"), "-w", "--interval", "60"], env=gflow.env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = b""

    def wait_line_with(job_id, timeout):
        """Reads gqueue's output until a line starts with job_id."""
        nonlocal out
        deadline = time.monotonic() + timeout
        while not any(l.split()[:1] == [str(job_id).encode()] for l in out.splitlines()):
            r, _, _ = select.select([p.stdout], [], [], max(0, deadline - time.monotonic()))
            assert r, f"no line for job {job_id} in time; gqueue printed {out!r}"
            b = os.read(p.stdout.fileno(), 65536)
            assert b, f"gqueue ended; it printed {out!r}"
            out += b

    try:
        wait_line_with(before, 10)
        out = b""
        jid = gflow.submit("--hold", "true")
        # Well within the 60 s interval: the new job shows up in the next table.
        wait_line_with(jid, 10)
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_gjob_log_follow_exits_when_the_job_ends(gflow):
    jid = gflow.submit("sh", "-c", "echo one; sleep 1; echo two; exit 4")
    t0 = time.monotonic()
    p = subprocess.Popen([binary("gjob"), "log", "--follow", str(jid)], env=gflow.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # It learns the job's end from the event stream: it holds one while following.
        wait_for(lambda: event_clients(gflow) == 1, "gjob to subscribe to the job's end")
        out, err = p.communicate(timeout=20)
    finally:
        p.kill()
        p.wait()
    assert out == "one\ntwo\n", (out, err)
    assert f"job {jid} ended: F (Failed), exit code 4" in err, err
    assert p.returncode == 4
    assert time.monotonic() - t0 < 10
    wait_for(lambda: event_clients(gflow) == 0, "gjob's stream to close")
