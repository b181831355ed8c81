"""The REST API over the Unix socket, spoken raw (docs/api.md)."""
import socket
import time

import pytest

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"


def spec(g, **kw):
    s = {"command": "true", "workdir": str(g.work)}
    s.update(kw)
    return s


def error_of(r):
    body = r.json()
    assert set(body) == {"error"}, body
    assert body["error"] and "\n" not in body["error"].strip()
    return body["error"]


def test_health_and_status(gflow):
    r = gflow.api("GET", "/v1/health")
    assert (r.status, r.json()) == (200, {"status": "ok"})
    assert r.headers.get("Content-Type", "").startswith("application/json")
    st = gflow.api("GET", "/v1/status").json()
    assert st["pid"] == gflow.daemon_pid()
    assert st["socket"] == str(gflow.sock) and st["data_dir"] == str(gflow.data)
    assert set(st["counts"]) == {"PD", "H", "R", "CD", "F", "CA", "TO"}


def test_bad_requests_keep_daemon_serving(make_gflow):
    g = make_gflow(env={"GFLOW_DAEMON__MAX_REQUEST_BYTES": "4096"})

    r = g.api("POST", "/v1/jobs", '{"command": "true",\n  "workdir": }')
    assert r.status == 400, r
    err = error_of(r)
    assert "line 2" in err and "column" in err, err
    assert g.health_ok()

    big = spec(g, command="echo " + "x" * 10000)
    r = g.api("POST", "/v1/jobs", big)
    assert r.status == 413, r
    assert "max_request_bytes" in error_of(r)
    assert g.health_ok()

    r = g.api("GET", "/v1/nope")
    assert r.status == 404, r
    error_of(r)
    r = g.api("GET", "/v1/jobs/1/frobnicate")
    assert r.status == 404, r
    assert g.health_ok()

    r = g.api("POST", "/v1/jobs", spec(g, colour="blue"))
    assert r.status == 400 and "colour" in error_of(r), r
    r = g.api("POST", "/v1/jobs", spec(g, priority="high"))
    assert r.status == 400 and "priority" in error_of(r), r
    r = g.api("POST", "/v1/jobs", spec(g, priority=256))
    assert r.status == 400, r
    r = g.api("POST", "/v1/jobs", {"workdir": str(g.work)})
    assert r.status == 400, r
    r = g.api("POST", "/v1/jobs", spec(g, workdir="relative/dir"))
    assert r.status == 400 and "workdir" in error_of(r), r
    r = g.api("POST", "/v1/jobs", "[1, 2]")
    assert r.status == 400, r
    r = g.api("DELETE", "/v1/health")
    assert r.status == 405, r
    r = g.api("GET", "/v1/jobs/abc")
    assert r.status in (400, 404), r
    r = g.api("GET", "/v1/jobs?state=XX")
    assert r.status == 400, r
    assert g.health_ok()
    assert g.jobs(user="all") == [], "a refused request created a job"

    # A request just under the limit is accepted.
    r = g.api("POST", "/v1/jobs", spec(g, command="echo " + "y" * 3000))
    assert r.status == 201, r


def test_half_sent_oversized_body_and_garbage_do_not_stall(make_gflow):
    """A client that announces a huge body and sends only part of it, one that sends
    garbage, and one that connects and says nothing do not keep others from being served."""
    g = make_gflow(env={"GFLOW_DAEMON__MAX_REQUEST_BYTES": "4096"})
    half = socket.socket(socket.AF_UNIX)
    half.connect(str(g.sock))
    idle = socket.socket(socket.AF_UNIX)
    idle.connect(str(g.sock))
    try:
        half.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000000\r\n\r\n" + b"{" * 8192)
        assert g.health_ok(), "the daemon stalled on a half-sent oversized request"
        junk = socket.socket(socket.AF_UNIX)
        junk.settimeout(10)
        junk.connect(str(g.sock))
        junk.sendall(b"GARBAGE\r\n\r\n")
        reply = junk.recv(4096)
        assert reply == b"" or reply.startswith(b"HTTP/1.1 4"), reply[:200]
        junk.close()
        job = g.submit("true")
        assert g.wait_state(job)["state"] == "CD"
    finally:
        half.close()
        idle.close()
    assert g.health_ok()


def test_batch_submit(gflow):
    r = gflow.api("POST", "/v1/jobs", {"jobs": [spec(gflow, name="one"),
                                                spec(gflow, command="exit 4", name="two"),
                                                spec(gflow, hold=True, priority=42)]})
    assert r.status == 201, r
    jobs = r.json()["jobs"]
    ids = [j["id"] for j in jobs]
    assert [j["name"] for j in jobs] == ["one", "two", f"gjob-{ids[2]}"]  # gflow's default
    assert [j["state"] for j in jobs] == ["PD", "PD", "H"]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert gflow.wait_state(ids[0])["state"] == "CD"
    assert gflow.wait_state(ids[1])["exit_code"] == 4
    held = gflow.job(ids[2])
    assert (held["state"], held["priority"]) == ("H", 42)

    # All or none: one bad spec refuses the whole batch.
    before = len(gflow.jobs())
    r = gflow.api("POST", "/v1/jobs", {"jobs": [spec(gflow), spec(gflow, bogus=1)]})
    assert r.status == 400 and "bogus" in error_of(r), r
    assert len(gflow.jobs()) == before
    r = gflow.api("POST", "/v1/jobs", {"jobs": []})
    assert r.status == 400, r

    # dry_run answers as if submitted and changes nothing.
    r = gflow.api("POST", "/v1/jobs", spec(gflow, dry_run=True, name="dry"))
    assert r.status == 200 and r.json()["jobs"][0]["name"] == "dry", r
    assert len(gflow.jobs()) == before


def test_state_conflicts_and_unknown_jobs(gflow):
    running = gflow.api("POST", "/v1/jobs", spec(gflow, command=WAIT_GO)).json()["jobs"][0]["id"]
    gflow.wait_state(running, "R")
    r = gflow.api("POST", f"/v1/jobs/{running}/hold")
    assert r.status == 409, r
    error_of(r)
    r = gflow.api("POST", f"/v1/jobs/{running}/release")
    assert r.status == 409, r
    assert gflow.job(running)["state"] == "R"

    (gflow.work / "go").touch()
    gflow.wait_state(running)
    r = gflow.api("POST", f"/v1/jobs/{running}/cancel")
    assert r.status == 409, r
    assert "CD" in error_of(r)
    assert gflow.job(running)["state"] == "CD"

    for method, path in (("GET", "/v1/jobs/999999"), ("POST", "/v1/jobs/999999/cancel"),
                         ("POST", "/v1/jobs/999999/hold"), ("GET", "/v1/jobs/999999/log")):
        r = gflow.api(method, path)
        assert r.status == 404, (method, path, r)
        error_of(r)

    held = gflow.api("POST", "/v1/jobs", spec(gflow, hold=True)).json()["jobs"][0]["id"]
    r = gflow.api("POST", f"/v1/jobs/{held}/cancel")
    assert r.status == 200 and r.json()["state"] == "CA", r
    r = gflow.api("POST", f"/v1/jobs/{held}/cancel")
    assert r.status == 409, r


def test_job_object_and_list_filters(gflow):
    a = gflow.submit("-J", "alpha", "-p", "3", "-t", "10", "echo hi")
    gflow.wait_state(a)
    b = gflow.submit("-H", "-J", "beta", "true")
    j = gflow.job(a)
    for key in ("id", "name", "user", "uid", "state", "state_name", "priority", "time_limit",
                "submit_time", "start_time", "end_time", "exit_code", "signal", "signal_name",
                "oom", "reason", "command", "script_path", "workdir", "gpus", "gpu_ids",
                "shim_pid", "max_rss_kb", "script", "env", "log_path"):
        assert key in j, key
    assert (j["state"], j["state_name"], j["priority"], j["time_limit"]) == \
        ("CD", "Finished", 3, 600)
    assert j["command"] == "echo hi" and j["workdir"] == str(gflow.work)
    assert j["log_path"].endswith(f"/logs/{a}.log")

    assert [x["id"] for x in gflow.jobs(state="H")] == [b]
    assert [x["id"] for x in gflow.jobs(state="Finished,Hold")] == [a, b]
    assert [x["id"] for x in gflow.jobs(id=f"{a}-{b}")] == [a, b]
    assert [x["id"] for x in gflow.jobs(sort="-id")] == [b, a]
    assert [x["id"] for x in gflow.jobs(limit="-1")] == [b]
    assert [x["id"] for x in gflow.jobs(since=str(time.time() + 3600))] == []

    r = gflow.api("GET", f"/v1/jobs/{a}/log")
    assert (r.status, r.body) == (200, b"hi\n")
    r = gflow.api("GET", f"/v1/jobs/{a}/log?offset=1&length=1")
    assert r.body == b"i"
    r = gflow.api("GET", f"/v1/jobs/{b}/log")
    assert (r.status, r.body) == (200, b"")


def test_keepalive_after_state_change(gflow):
    """Several requests on one connection, the first of which changes state: each is
    answered at once (gjob/gcancel with several ids work this way)."""
    held = [gflow.submit("-H", "true") for _ in range(2)]
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    s.connect(str(gflow.sock))
    buf = b""

    def roundtrip(request):
        nonlocal buf
        s.sendall(request)
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        length = int([l.split(b":")[1] for l in head.split(b"\r\n")
                      if l.lower().startswith(b"content-length:")][0])
        while len(rest) < length:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            rest += chunk
        buf = rest[length:]
        return head.split(b"\r\n")[0], rest[:length]

    try:
        for job in held:
            status, _ = roundtrip(f"POST /v1/jobs/{job}/release HTTP/1.1\r\nHost: x\r\n"
                                  f"Content-Length: 0\r\n\r\n".encode())
            assert status == b"HTTP/1.1 200 OK"
        status, body = roundtrip(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == b"HTTP/1.1 200 OK"
    except socket.timeout:
        pytest.fail("a request on a kept-alive connection was not answered within 3 s")
    finally:
        s.close()
    for job in held:
        assert gflow.wait_state(job)["state"] == "CD"


def test_route_table_answers_for_the_paths_it_has(make_gflow):
    """The route table (src/daemon/http/routes.c): a known path asked with another method
    is 405 naming every method the path has; a malformed id in a path with an id is 400
    naming the kind of id; a path the table does not have is 404. Nothing of it stops the
    daemon."""
    g = make_gflow()
    r = g.api("DELETE", "/v1/gpus/allowed")
    assert r.status == 405 and error_of(r) == "use GET or PUT for this path", r
    r = g.api("PATCH", "/v1/quotas")
    assert r.status == 405 and error_of(r) == "use GET, PUT or DELETE for this path", r
    r = g.api("GET", "/v1/jobs/cancel")
    assert r.status == 405 and error_of(r) == "use POST for this path", r
    r = g.api("PUT", "/v1/jobs/7")
    assert r.status == 405 and error_of(r) == "use GET or PATCH for this path", r
    for path in ("/v1/jobs/abc", "/v1/jobs/0", "/v1/jobs/-3", "/v1/jobs/+4", "/v1/jobs/x/log"):
        r = g.api("GET", path)
        assert r.status == 400 and error_of(r) == f"invalid job id in {path}", (path, r)
    r = g.api("POST", "/v1/reservations/soon/cancel")
    assert r.status == 400 and error_of(r) == "invalid reservation id in /v1/reservations/soon/cancel"
    r = g.api("GET", "/v1/reservations/99")
    assert r.status == 404 and "no reservation 99" in error_of(r), r
    r = g.api("GET", "/v1/jobs/7")
    assert r.status == 404 and "job 7 not found" in error_of(r), r
    for path in ("/v1/jobs/7/", "/v1/jobs/7/frobnicate", "/v1/reservationsX", "/v1"):
        r = g.api("GET", path)
        assert r.status == 404 and error_of(r).startswith("no such endpoint: GET "), (path, r)
    assert g.health_ok()
