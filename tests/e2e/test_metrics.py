"""GET /metrics (issue 13): Prometheus' text format 0.0.4, checked by a strict parser here,
with values checked against what the test did on the NVML simulator; per-GPU series under
the DCGM exporter's names with the job using the GPU; `[metrics] listen` serves it (and
nothing else) on TCP."""
import http.client
import re
import socket


NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?\}})? (\S+)$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse(text):
    """{(name, frozenset(labels)): value}, refusing anything the format does not allow: a
    sample before its family's TYPE, a family typed twice or split, a bad value, histogram
    buckets that are not cumulative or whose +Inf differs from _count."""
    assert text.endswith("\n"), "the exposition ends with a newline"
    samples, types, done, current = {}, {}, set(), None
    for line in text.splitlines():
        assert line, "no blank lines"
        if line.startswith("#"):
            parts = line.split(" ", 3)
            assert parts[1] in ("HELP", "TYPE") and len(parts) == 4, line
            if parts[1] == "TYPE":
                name, kind = parts[2], parts[3]
                assert kind in TYPES and name not in types, line
                types[name] = kind
                if current:
                    done.add(current)
                current = name
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        assert family == current and family not in done, f"{name} outside its family"
        v = float(value)  # accepts +Inf, NaN too, as the format does
        pairs = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels))
        assert (name, pairs) not in samples, f"duplicate series {line}"
        samples[(name, pairs)] = v
    for name, kind in types.items():
        if kind != "histogram":
            continue
        buckets = sorted(((float(dict(l)["le"]), v) for (n, l), v in samples.items()
                          if n == name + "_bucket"))
        assert buckets and buckets[-1][0] == float("inf"), name
        assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), name
        assert buckets[-1][1] == samples[(name + "_count", frozenset())], name
    return samples, types


def value(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


def series(samples, name):
    return {l: v for (n, l), v in samples.items() if n == name}


def test_metrics_values(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 2)
    ok = g.submit("true")
    bad = g.submit("false")
    assert g.wait_state(ok)["state"] == "CD" and g.wait_state(bad)["state"] == "F"
    run = g.submit("-g", "1", f"while [ ! -e {g.work}/go ]; do sleep 0.05; done")
    held = g.submit("-H", "true")
    gpu = int(g.wait_state(run, "R")["gpu_ids"])  # "0": one GPU
    r = g.api("GET", "/metrics")
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples, types = parse(r.body.decode())
    user = g.job(run)["user"]
    assert value(samples, "gflow_jobs", state="R", user=user) == 1
    assert value(samples, "gflow_jobs", state="H", user=user) == 1
    assert value(samples, "gflow_jobs", state="PD", user=user) == 0
    assert value(samples, "gflow_queue_depth") == 0
    assert value(samples, "gflow_jobs_finished", state="CD") == 1
    assert value(samples, "gflow_jobs_finished", state="F") == 1
    assert value(samples, "gflow_submissions_total") == 4
    assert value(samples, "gflow_job_starts_total") == 3
    assert value(samples, "gflow_job_ends_total", state="F", reason="NonZeroExitCode") == 1
    assert value(samples, "gflow_job_ends_total", state="CD", reason="") == 1
    assert types["gflow_job_wait_seconds"] == "histogram"
    assert value(samples, "gflow_job_wait_seconds_count") == 3
    assert value(samples, "gflow_job_run_seconds_count") == 2
    assert value(samples, "gflow_scheduler_pass_seconds_count") >= 1
    assert value(samples, "process_resident_memory_bytes") > 1 << 20
    assert value(samples, "process_open_fds") > 3
    # Per GPU, DCGM's names and labels, the values ginfo shows, and who uses the GPU.
    gpus = {x["index"]: x for x in g.api("GET", "/v1/gpus").json()["gpus"]}
    util = series(samples, "DCGM_FI_DEV_GPU_UTIL")
    assert len(util) == 2
    for labels in util:
        d = dict(labels)
        assert set(d) == {"gpu", "UUID", "device", "modelName", "Hostname", "gflow_job"}
        info = gpus[int(d["gpu"])]
        assert d["UUID"] == info["uuid"] and d["modelName"] == info["name"]
        assert d["Hostname"] == socket.gethostname()
        assert d["gflow_job"] == (str(run) if int(d["gpu"]) == gpu else "")
    for name, key in (("DCGM_FI_DEV_FB_FREE", "memory_free_mib"),
                      ("DCGM_FI_DEV_GPU_TEMP", "temperature_c")):
        for labels, v in series(samples, name).items():
            assert v == gpus[int(dict(labels)["gpu"])][key], (name, labels)
    (g.work / "go").touch()
    g.wait_state(run)
    g.run("gcancel", held, check=True)
    samples, _ = parse(g.api("GET", "/metrics").body.decode())
    assert value(samples, "gflow_job_ends_total", state="CA", reason="CancelledByUser") == 1
    # A user without active jobs has no gflow_jobs series any more.
    assert not [l for l in series(samples, "gflow_jobs") if ("user", user) in l]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_metrics_listen_tcp(make_gflow):
    port = free_port()
    g = make_gflow(env={"GFLOW_METRICS__LISTEN": f"127.0.0.1:{port}"})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    r = conn.getresponse()
    body = r.read().decode()
    assert r.status == 200, body
    samples, _ = parse(body)
    assert ("gflow_submissions_total", frozenset()) in samples
    # Nothing but /metrics over TCP: no caller can be identified there.
    for method, path in (("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", "/v1/status")):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request(method, path, body="{}" if method == "POST" else None)
        r = conn.getresponse()
        assert r.status == 403 and "only GET /metrics" in r.read().decode(), (method, path)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/metrics", body="")
    assert conn.getresponse().status == 405
    assert g.health_ok()


def test_metrics_listen_bad_address(make_gflow):
    for spec, needle in (("9400", "is not HOST:PORT"), ("nosuchhost.invalid:9400", "cannot use")):
        g = make_gflow(start=False, env={"GFLOW_METRICS__LISTEN": spec})
        cp = g.gflowd("up")
        assert cp.returncode != 0
        assert "metrics.listen: " in cp.stderr and needle in cp.stderr, cp.stderr
