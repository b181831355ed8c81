"""gbatch, gjob update and gjob redo share one table of job options and one dependency
parser (src/cli/jobopts.c), through the real binaries:

- without a daemon: the same bad value gets the same one-line message from all three (a
  bad value is refused before any request), and the values that remove a field (-t 0,
  -m 0, --begin now, --signal none, -d none) are update's and redo's only;
- against a recording socket (a stand-in gflowd that answers and keeps each request):
  the three send the same spec fields for the same options, a repeated dependency once,
  @~N resolved to the same id;
- against a real daemon: update and redo take --gres and --timelimit, and a repeated
  dependency ends up once in `gjob show -o json`.
"""
import http.server
import json
import re
import socketserver
import threading

import pytest

from conftest import assert_not_running, assert_one_line_error, run_cli as run


# ---------------------------------------------------------------- without a daemon

BAD_VALUES = [
    ["-g", "65"],
    ["--gpus", "100000"],
    ["-g", "x"],
    ["--gres", "gpu:65"],
    ["--gres", "gpu:a100:2"],
    ["--gres", "mps:1"],
    ["-t", "soon"],
    ["--timelimit", "1:2:3:4"],
    ["--time-limit", "-5"],
    ["-d", "@~x"],
    ["--depends-on", "@~99999999999"],
    ["--dependency", "afterok:@~"],
    ["--depends-on-any", "3,,4"],
    ["--depends-on-all", "afterok:3"],
    ["-d", "7-5"],
    ["--dependency", "after:3"],
    ["--dependency", "afterok:1?afterany:2,3"],
    ["-d", "1-100000,100001-100002"],
    ["-p", "256"],
    ["-m", "lots"],
    ["--max-gpu-mem", "0"],
    ["--signal", "NOSUCH@10"],
    ["--begin", "tomorrowish"],
    ["--max-retries", "1001"],
    ["--gpus-per-task", "2"],
    ["--name="],
    ["--mig", "big"],
    ["--mig", "1g.10gb:0"],
    ["--mig", "1g.10gb:x"],
    ["--gres", "mig:1g"],
    ["--gres", "mig:1g.10gb:65"],
]


def usage_message(r, prog, usage):
    """The message of a one-line usage error, without '<prog>: ' and '; see ... --help'."""
    assert_one_line_error(r, prog, 2)
    text = r.stderr[len(prog) + 2:-1]
    suffix = f"; see '{usage} --help'"
    assert text.endswith(suffix), r.stderr
    return text[:-len(suffix)]


@pytest.mark.parametrize("args", BAD_VALUES, ids=" ".join)
def test_a_bad_value_gets_the_same_message_everywhere(args, env):
    submit = usage_message(run("gbatch", *args, "true", env=env), "gbatch", "gbatch")
    update = usage_message(run("gjob", "update", "1", *args, env=env), "gjob", "gjob update")
    redo = usage_message(run("gjob", "redo", "1", *args, env=env), "gjob", "gjob redo")
    assert submit == update == redo


def test_the_gpu_limit_is_the_daemons(env):
    for args in (["gbatch", "-g", "64", "true"], ["gjob", "update", "1", "--gres", "gpu:64"]):
        assert_not_running(run(*args, env=env))
    for args in (["gbatch", "--gres", "65", "true"], ["gjob", "update", "1", "-g", "65"]):
        assert_one_line_error(run(*args, env=env), args[0], 2, "at most 64")


def test_at_tilde_n_has_the_bound_of_every_id_argument(env):
    """@~N in a dependency is read like @~N anywhere (gcancel, gjob show): the core's
    parse_job_ref, its bound and its words."""
    ref = "@~99999999999"
    core = run("gcancel", ref, env=env)
    assert_one_line_error(core, "gcancel", 2, f"invalid job reference '{ref}'")
    core_msg = re.search(r"invalid job reference[^;]*", core.stderr).group(0)
    for args in (["gbatch", "-d", ref, "true"], ["gjob", "update", "1", "-d", ref]):
        r = run(*args, env=env)
        assert_one_line_error(r, args[0], 2, core_msg)


@pytest.mark.parametrize("args", [
    ["--gres", "gpu:1"], ["--gres", "gpu"], ["--gres=2"], ["--timelimit", "10"],
    ["--time-limit=1:00:00"], ["-n", "renamed"], ["--max-gpu-memory", "1G"],
    ["--dependency", "afterany:3?afterok:4"], ["-d", "3,5-7"], ["--depends-on-all", "3,4"],
], ids=" ".join)
def test_update_and_redo_take_gbatchs_job_options(args, env):
    for sub in ("update", "redo"):
        assert_not_running(run("gjob", sub, "1", *args, env=env))


@pytest.mark.parametrize("args", [
    ["-t", "0"], ["-m", "0"], ["--begin", "now"], ["--signal", "none"], ["--signal", ""],
    ["-d", "none"], ["--dependency", ""],
], ids=repr)
def test_removing_a_field_is_for_update_and_redo(args, env):
    for sub in ("update", "redo"):
        assert_not_running(run("gjob", sub, "1", *args, env=env))
    if args[:2] == ["--begin", "now"]:
        # For gbatch "now" is simply a begin time: at once.
        assert_not_running(run("gbatch", *args, "true", env=env))
    else:
        assert_one_line_error(run("gbatch", *args, "true", env=env), "gbatch", 2)


def test_hold_is_for_submit_and_redo(env):
    r = run("gjob", "update", "1", "--hold", env=env)
    assert_one_line_error(r, "gjob", 2, "--hold is for gbatch and 'gjob redo'")
    assert_not_running(run("gjob", "redo", "1", "-H", env=env))


@pytest.mark.parametrize("cmd", [["gjob", "update", "--help"], ["gjob", "redo", "--help"]])
def test_update_help_lists_gbatchs_job_options(cmd, env):
    """The shared part of the help comes from the one table: every job option of gbatch's
    help is in update's and redo's."""
    gbatch = run("gbatch", "--help", env=env).stdout
    shared = gbatch.split("Options:")[1].split("Arrays and sweeps")[0]
    names = set(re.findall(r"--[a-z][a-z-]+", shared)) - {"--hold"}
    r = run(*cmd, env=env)
    assert r.returncode == 0 and r.stderr == "", r
    missing = [n for n in sorted(names) if n not in r.stdout]
    assert not missing, missing
    assert "--gres N, --gres gpu:N" in r.stdout and "--timelimit" in r.stdout


# ---------------------------------------------------------------- what the commands send

class _Recorder(http.server.BaseHTTPRequestHandler):
    """A stand-in gflowd: the caller's jobs are 7, 5 and 3 (so @ is 7, @~1 is 5, @~2 is
    3); every request is kept in server.requests."""
    protocol_version = "HTTP/1.1"
    JOBS = [7, 5, 3]

    def _answer(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n)) if n else None
        self.server.requests.append((self.command, self.path, body))
        if self.command == "GET" and self.path.startswith("/v1/jobs?"):
            limit = int(re.search(r"limit=(\d+)", self.path).group(1))
            self._answer(200, {"jobs": [{"id": i} for i in self.JOBS[:limit]]})
        elif self.command == "PATCH":
            self._answer(200, {"id": 7, "state": "PD", "changes": []})
        elif self.path.endswith("/redo"):
            self._answer(201, {"jobs": [{"id": 9, "name": "x", "state": "PD", "redo_of": 7}]})
        else:
            self._answer(201, {"jobs": [{"id": 9, "name": "x", "state": "PD"}]})

    do_GET = do_POST = do_PATCH = _handle

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder(env, tmp_path):
    sock = tmp_path / "rec.sock"
    server = socketserver.ThreadingUnixStreamServer(str(sock), _Recorder)
    server.daemon_threads = True
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    env["GFLOW_SOCKET"] = str(sock)
    yield server
    server.shutdown()
    server.server_close()


SPEC_FIELDS = ("depends_on", "depends_mode", "gpus", "time_limit", "name", "memory_mb")


def sent(recorder, method, path):
    """The spec fields of the one request with this method and path."""
    bodies = [b for m, p, b in recorder.requests if (m, p) == (method, path)]
    assert len(bodies) == 1, recorder.requests
    return {k: v for k, v in bodies[0].items() if k in SPEC_FIELDS}


def test_the_three_commands_send_the_same_fields(recorder, env):
    opts = ["-d", "3,3", "-d", "3", "--dependency", "afterok:3:@~2,afterany:5:5",
            "--depends-on-any", "@~1,5", "--gres", "gpu:2", "--timelimit", "1:00:00",
            "-n", "x", "--max-mem", "1G"]
    want = {
        "depends_on": [{"id": 3, "kind": "afterok"}, {"id": 5, "kind": "afterany"},
                       {"id": 5, "kind": "afterok"}],
        "depends_mode": "any", "gpus": 2, "time_limit": 3600, "name": "x", "memory_mb": 1024,
    }
    r = run("gbatch", *opts, "true", env=env)
    assert r.returncode == 0, r
    assert sent(recorder, "POST", "/v1/jobs") == want
    r = run("gjob", "update", "7", *opts, env=env)
    assert r.returncode == 0, r
    assert sent(recorder, "PATCH", "/v1/jobs/7") == want
    r = run("gjob", "redo", "7", *opts, env=env)
    assert r.returncode == 0, r
    assert sent(recorder, "POST", "/v1/jobs/7/redo") == want


def test_update_removes_what_gbatch_cannot(recorder, env):
    r = run("gjob", "update", "7", "-t", "0", "-m", "0", "--signal", "none", "-d", "none",
            "--conda-env", "", env=env)
    assert r.returncode == 0, r
    body = [b for m, p, b in recorder.requests if m == "PATCH"][0]
    assert body == {"time_limit": 0, "memory_mb": 0, "signal_spec": None, "depends_on": [],
                    "conda_env": None}


# ---------------------------------------------------------------- a real daemon

def deps(gflow, job_id):
    """depends_on as `gjob show -o json` gives it, without the per-dependency status."""
    shown = json.loads(gflow.run("gjob", "show", "-o", "json", job_id, check=True).stdout)
    return [{"id": d["id"], "kind": d["kind"]} for d in shown[0]["depends_on"]]


def test_update_and_redo_take_gres_and_timelimit(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 2)
    j = g.submit("--hold", "true")
    cp = g.run("gjob", "update", j, "--gres", "gpu:1", "--timelimit", "1:30:00", check=True)
    assert "--time: none -> 01:30:00" in cp.stdout, cp.stdout
    job = g.job(j)
    assert (job["gpus"], job["time_limit"]) == (1, 5400), job
    cp = g.run("gjob", "redo", j, "--gres", "gpu:2", "--timelimit", "5", check=True)
    new = int(re.search(r"Submitted batch job (\d+)", cp.stdout).group(1))
    job = g.job(new)
    assert (job["gpus"], job["time_limit"]) == (2, 300), job
    # -t 0 (update's "no limit") removes it.
    g.run("gjob", "update", j, "-t", "0", check=True)
    assert g.job(j)["time_limit"] in (None, 0)


def test_a_repeated_dependency_is_kept_once(gflow):
    a = gflow.submit("--hold", "true")
    dry = gflow.run("gbatch", "--dry-run", "-d", f"{a},{a}", "-d", a,
                    "--dependency", f"afterok:{a}:{a}", "true", check=True)
    assert re.search(rf"Depends: +afterok:{a} \(all\)\n", dry.stdout), dry.stdout
    b = gflow.submit("--hold", "-d", f"{a},{a}", "-d", a, "--dependency", f"afterok:{a}:{a}",
                     "true")
    assert deps(gflow, b) == [{"id": a, "kind": "afterok"}]
    c = gflow.submit("--hold", "true")
    gflow.run("gjob", "update", c, "-d", f"{a},{a}", "--dependency",
              f"afterok:{a},afterany:{a}:{a}", check=True)
    assert deps(gflow, c) == [{"id": a, "kind": "afterok"}, {"id": a, "kind": "afterany"}]


def test_at_tilde_n_resolves_the_same(gflow):
    a = gflow.submit("--hold", "true")
    gflow.submit("--hold", "true")
    c = gflow.submit("--hold", "true")
    # Nothing is submitted by a dry run, so @~2 is a for both commands.
    dry = gflow.run("gbatch", "--dry-run", "-d", "@~2", "true", check=True)
    assert re.search(rf"Depends: +afterok:{a} ", dry.stdout), dry.stdout
    gflow.run("gjob", "update", c, "-d", "@~2", check=True)
    assert deps(gflow, c) == [{"id": a, "kind": "afterok"}]
    d = gflow.submit("--hold", "--dependency", "afterany:@~2", "true")
    assert deps(gflow, d) == [{"id": a, "kind": "afterany"}]
