"""End-to-end tests of gflow-mcp, the Model Context Protocol server (issue 14): a scripted
MCP client speaks JSON-RPC to it over its stdin/stdout, one message per line, while it
talks to the sandbox's daemon (running on two simulated GPUs). The session: initialize
(with version negotiation), notifications/initialized, tools/list, tools/call of every
tool, resources, the protocol's errors; and that it acts as the user who runs it."""
import json
import os
import queue
import subprocess
import threading

import pytest

from conftest import SANITIZER_MARKS, as_user, binary, ensure_test_user, wait_for

TIMEOUT = 20  # seconds one answer may take
TOOLS = {"list_jobs", "show_job", "submit_job", "cancel_job", "hold_job", "release_job",
         "job_log", "list_gpus", "stats",
         # gflow's own tools, with its names and argument shapes (issue 29;
         # tests/e2e/test_gflow_umbrella.py drives them with the official SDK)
         "get_health", "get_info", "get_job", "get_job_log", "get_stats", "get_queue_pressure",
         "list_reservations", "triage_job", "preview_submit_jobs", "submit_jobs",
         "preview_update_job", "update_job", "redo_job"}


class Mcp:
    """One gflow-mcp process and the client side of its session."""

    def __init__(self, g, user=None, env=None, cwd=None):
        if not os.path.exists(binary("gflow-mcp")):
            pytest.fail(f"{binary('gflow-mcp')} is missing; build with 'ninja -C build'")
        argv = [binary("gflow-mcp")]
        if user:
            argv = list(user) + argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env={**g.env, **(env or {})},
                                     cwd=str(cwd or g.work))
        self.lines = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def recv(self):
        """The next message; every line on stdout must be one JSON-RPC 2.0 message."""
        line = self.lines.get(timeout=TIMEOUT)
        assert line is not None, f"gflow-mcp closed stdout: {self.proc.stderr.read()!r}"
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        msg = json.loads(line)
        assert msg["jsonrpc"] == "2.0", msg
        return msg

    def request(self, method, params=None):
        """Sends a request and returns its response (asserting the id matches)."""
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        resp = self.recv()
        assert resp["id"] == self.next_id, resp
        return resp

    def result(self, method, params=None):
        resp = self.request(method, params)
        assert "result" in resp, resp
        return resp["result"]

    def initialize(self, version="2025-06-18"):
        r = self.result("initialize", {"protocolVersion": version, "capabilities": {},
                                       "clientInfo": {"name": "e2e", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def call(self, tool, **arguments):
        """tools/call: the result (content, structuredContent, isError)."""
        r = self.result("tools/call", {"name": tool, "arguments": arguments})
        assert r["content"][0]["type"] == "text", r
        return r

    def ok(self, tool, **arguments):
        r = self.call(tool, **arguments)
        assert r["isError"] is False, r
        return r["structuredContent"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=TIMEOUT)
        err = self.proc.stderr.read().decode(errors="replace")
        self.proc.stdout.close()
        self.proc.stderr.close()
        for bad in SANITIZER_MARKS:
            assert bad not in err, f"sanitizer report from gflow-mcp:\n{err[-4000:]}"
        return err


@pytest.fixture
def sim_gflow(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 2)
    return g


@pytest.fixture
def mcp(sim_gflow):
    m = Mcp(sim_gflow)
    yield m
    m.close()


def error_of(resp):
    assert "error" in resp and "result" not in resp, resp
    return resp["error"]["code"], resp["error"]["message"]


# ---------------------------------------------------------------- the session

def test_initialize_and_list_tools(mcp):
    r = mcp.initialize()
    assert r["protocolVersion"] == "2025-06-18"
    assert r["serverInfo"]["name"] == "gflow-mcp" and r["serverInfo"]["version"]
    assert r["capabilities"]["tools"] == {"listChanged": False}
    assert "resources" in r["capabilities"]
    # The notification got no answer: the next message is the ping's.
    assert mcp.result("ping") == {}

    tools = mcp.result("tools/list")["tools"]
    assert {t["name"] for t in tools} == TOOLS
    for t in tools:
        assert t["description"] and t["title"]
        schema = t["inputSchema"]
        assert schema["type"] == "object" and isinstance(schema["properties"], dict), t
        assert schema.get("additionalProperties") is False
    by_name = {t["name"]: t for t in tools}
    assert by_name["show_job"]["inputSchema"]["required"] == ["id"]
    assert by_name["list_jobs"]["annotations"]["readOnlyHint"] is True
    assert by_name["cancel_job"]["annotations"]["destructiveHint"] is True
    assert {"command", "script", "gpus", "time", "memory", "depends_on", "dry_run",
            "workdir"} <= set(by_name["submit_job"]["inputSchema"]["properties"])


@pytest.mark.parametrize("asked, answered", [
    ("2025-06-18", "2025-06-18"),
    ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2024-11-05"),
    ("1999-01-01", "2025-06-18"),  # unknown: the server offers its own
])
def test_version_negotiation(mcp, asked, answered):
    assert mcp.initialize(asked)["protocolVersion"] == answered


def test_protocol_errors_keep_the_server_serving(mcp):
    mcp.initialize()
    mcp.send_raw(b"{this is not json\n")
    code, msg = error_of(mcp.recv())
    assert code == -32700 and "parse error" in msg
    mcp.send_raw(b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]\n')
    assert error_of(mcp.recv())[0] == -32600
    mcp.send_raw(b'{"jsonrpc": "2.0", "id": "x"}\n')
    resp = mcp.recv()
    assert resp["id"] == "x" and error_of(resp)[0] == -32600

    code, msg = error_of(mcp.request("tools/frobnicate"))
    assert code == -32601 and "tools/frobnicate" in msg
    code, msg = error_of(mcp.request("tools/call", {"name": "no_such_tool", "arguments": {}}))
    assert code == -32602 and "no_such_tool" in msg
    code, msg = error_of(mcp.request("tools/call", {"name": "show_job", "arguments": {}}))
    assert code == -32602 and "'id' is required" in msg
    code, msg = error_of(mcp.request("tools/call", {"name": "show_job",
                                                    "arguments": {"id": "seven"}}))
    assert code == -32602 and "'id' must be an integer" in msg
    code, msg = error_of(mcp.request("tools/call", {"name": "list_jobs",
                                                    "arguments": {"colour": "red"}}))
    assert code == -32602 and "unknown argument 'colour'" in msg
    code, _ = error_of(mcp.request("initialize", {}))
    assert code == -32602

    # A line over 4 MiB is dropped unread and answered; the session goes on.
    mcp.send_raw(b'{"jsonrpc": "2.0", "id": 99, "method": "ping", "params": {"pad": "'
                 + b"x" * (5 << 20) + b'"}}\n')
    code, msg = error_of(mcp.recv())
    assert code == -32600 and "longer than" in msg
    # A notification of an unknown method is not answered either.
    mcp.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": 1}})
    assert mcp.result("ping") == {}
    assert mcp.proc.poll() is None


# ---------------------------------------------------------------- the tools

def test_submit_dry_run_then_real_list_show_and_log(mcp, sim_gflow):
    g = sim_gflow
    mcp.initialize()
    dry = mcp.ok("submit_job", command="echo hello from $GFLOW_E2E_MARK", name="greet",
                 dry_run=True, env={"GFLOW_E2E_MARK": "mcp"}, time="10")
    assert dry["dry_run"] is True and dry["jobs"][0]["name"] == "greet", dry
    assert g.jobs(user="all") == [], "a dry run made a job"

    # The daemon's validation, with its message: a request this machine can never meet.
    bad = mcp.call("submit_job", command="true", gpus=64)
    assert bad["isError"] is True
    direct = g.api("POST", "/v1/jobs", {"command": "true", "gpus": 64, "workdir": str(g.work)})
    assert direct.status == 400
    assert bad["content"][0]["text"] == direct.json()["error"]
    bad = mcp.call("submit_job", command="true", time="soon")
    assert bad["isError"] is True and "soon" in bad["content"][0]["text"]

    sub = mcp.ok("submit_job", command="echo hello from $GFLOW_E2E_MARK; pwd; umask",
                 name="greet", env={"GFLOW_E2E_MARK": "mcp"}, time="10", memory="64M")
    job_id = sub["jobs"][0]["id"]
    assert sub["dry_run"] is False
    j = g.wait_state(job_id)
    assert j["state"] == "CD", (j, g.log(job_id))
    assert j["time_limit"] == 600 and j["memory_mb"] == 64
    assert g.log(job_id) == f"hello from mcp\n{g.work}\n{j['umask']}\n"

    listed = mcp.ok("list_jobs")
    assert [x["id"] for x in listed["jobs"]] == [job_id] and listed["more"] is False
    assert listed["jobs"][0]["state"] == "CD"
    assert mcp.ok("list_jobs", state="PD,R")["jobs"] == []

    shown = mcp.ok("show_job", id=job_id)
    assert shown["id"] == job_id and shown["name"] == "greet" and shown["workdir"] == str(g.work)
    assert "env" not in shown and shown["env_vars"] > 0
    assert mcp.ok("show_job", id=job_id, include_env=True)["env"]["GFLOW_E2E_MARK"] == "mcp"

    log = mcp.call("job_log", id=job_id)
    assert log["isError"] is False
    assert log["content"][0]["text"] == g.log(job_id)
    assert log["structuredContent"]["truncated"] is False
    first = mcp.ok("job_log", id=job_id, first_lines=1)
    assert first["text"] == "hello from mcp\n"


def test_job_log_is_bounded(mcp, sim_gflow):
    g = sim_gflow
    mcp.initialize()
    # 100,000 lines of 8 bytes: 800,000 bytes.
    sub = mcp.ok("submit_job", command="seq 1000000 1099999")
    job_id = sub["jobs"][0]["id"]
    assert g.wait_state(job_id, timeout=30)["state"] == "CD"
    whole = g.log(job_id)
    assert len(whole) == 800000

    default = mcp.ok("job_log", id=job_id)  # the last 200 lines
    assert default["text"] == "".join(f"{n}\n" for n in range(1099800, 1100000))
    tail = mcp.call("job_log", id=job_id, last_lines=100000, max_bytes=1000)
    s = tail["structuredContent"]
    assert s["truncated"] is True and s["bytes"] == 1000 and s["text"] == whole[-1000:]
    assert "only the last 1000 bytes" in tail["content"][0]["text"]
    big = mcp.ok("job_log", id=job_id, last_lines=100000)
    assert big["truncated"] is True and big["text"] == whole[-65536:]
    page = mcp.ok("job_log", id=job_id, offset=16, max_bytes=21)
    assert page["text"] == "1000002\n1000003\n10000" and page["truncated"] is True
    code, msg = error_of(mcp.request("tools/call", {"name": "job_log", "arguments": {
        "id": job_id, "max_bytes": (1 << 20) + 1}}))
    assert code == -32602 and "at most 1048576" in msg
    both = mcp.call("job_log", id=job_id, first_lines=1, last_lines=1)
    assert both["isError"] is True and "one of" in both["content"][0]["text"]


def test_log_that_is_not_utf8_is_made_valid(mcp, sim_gflow):
    g = sim_gflow
    mcp.initialize()
    job = mcp.ok("submit_job", command=r"printf 'caf\303\251 \377\376 end\n'")["jobs"][0]["id"]
    assert g.wait_state(job)["state"] == "CD"
    assert (g.data / "logs" / f"{job}.log").read_bytes() == b"caf\xc3\xa9 \xff\xfe end\n"
    assert mcp.ok("job_log", id=job)["text"] == "caf\u00e9 \ufffd\ufffd end\n"
    contents = mcp.result("resources/read", {"uri": f"gflow://jobs/{job}/log"})["contents"]
    assert contents[0]["text"] == "caf\u00e9 \ufffd\ufffd end\n"


def test_cancel_hold_release(mcp, sim_gflow):
    g = sim_gflow
    mcp.initialize()
    first = mcp.ok("submit_job", command="true", hold=True)["jobs"][0]["id"]
    assert g.job(first)["state"] == "H"
    second = mcp.ok("submit_job", command="true", depends_on=[first])["jobs"][0]["id"]
    assert g.job(second)["state"] == "PD"
    assert g.job(second)["depends_on"][0]["id"] == first

    held = mcp.ok("hold_job", id=second)
    assert held["state"] == "H" and g.job(second)["state"] == "H"
    again = mcp.call("hold_job", id=second)  # H -> H: the daemon's 409, as a tool error
    assert again["isError"] is True
    assert again["content"][0]["text"] == g.api("POST", f"/v1/jobs/{second}/hold").json()["error"]
    assert mcp.ok("release_job", id=second)["state"] == "PD"

    dry = mcp.ok("cancel_job", id=first, dry_run=True)
    assert dry["dry_run"] is True
    assert [d["id"] for d in dry["dependents_cancelled"]] == [second]
    assert g.job(first)["state"] == "H"
    done = mcp.ok("cancel_job", id=first)
    assert done["state"] == "CA"
    assert g.job(first)["state"] == "CA" and g.job(second)["state"] == "CA"
    late = mcp.call("cancel_job", id=first)
    assert late["isError"] is True and "CA" in late["content"][0]["text"]


def test_unknown_job_is_a_tool_error_with_the_daemons_message(mcp, sim_gflow):
    mcp.initialize()
    r = mcp.call("show_job", id=424242)
    assert r["isError"] is True
    daemon = sim_gflow.api("GET", "/v1/jobs/424242")
    assert daemon.status == 404
    assert r["content"][0]["text"] == daemon.json()["error"]
    for tool in ("cancel_job", "job_log"):
        r = mcp.call(tool, id=424242)
        assert r["isError"] is True and "424242" in r["content"][0]["text"], r


def test_gpus_and_stats(mcp, sim_gflow):
    g = sim_gflow
    mcp.initialize()
    gpus = mcp.ok("list_gpus")
    assert gpus["simulated"] is True
    assert [x["index"] for x in gpus["gpus"]] == [0, 1]
    assert gpus == {**g.api("GET", "/v1/gpus").json(), "gpus": gpus["gpus"]}

    job = mcp.ok("submit_job", command="true")["jobs"][0]["id"]
    assert g.wait_state(job)["state"] == "CD"
    stats = mcp.ok("stats")
    assert stats["by"] == "user" and stats["total"]["completed"] == 1
    by_gpu = mcp.ok("stats", by="gpu", since=0)
    assert by_gpu["by"] == "gpu" and by_gpu["since"] is None  # 0: all time, null as gflow
    bad = mcp.call("stats", since=100, until=50)
    assert bad["isError"] is True
    assert bad["content"][0]["text"] == \
        g.api("GET", "/v1/stats?since=100.000&until=50.000").json()["error"]


def test_resources(mcp, sim_gflow):
    g = sim_gflow
    mcp.initialize()
    job = mcp.ok("submit_job", command="echo resource text", name="res")["jobs"][0]["id"]
    assert g.wait_state(job)["state"] == "CD"

    listed = mcp.result("resources/list")["resources"]
    uri = f"gflow://jobs/{job}/log"
    assert [r["uri"] for r in listed] == [uri]
    assert listed[0]["mimeType"] == "text/plain" and "res" in listed[0]["title"]
    templates = mcp.result("resources/templates/list")["resourceTemplates"]
    assert {t["uriTemplate"] for t in templates} == {"gflow://jobs/{id}/log",
                                                     "gflow://jobs/{id}"}

    contents = mcp.result("resources/read", {"uri": uri})["contents"]
    assert contents == [{"uri": uri, "mimeType": "text/plain", "text": "resource text\n"}]
    contents = mcp.result("resources/read", {"uri": f"gflow://jobs/{job}"})["contents"]
    assert json.loads(contents[0]["text"])["name"] == "res"
    assert contents[0]["mimeType"] == "application/json"

    code, msg = error_of(mcp.request("resources/read", {"uri": "gflow://jobs/424242/log"}))
    assert code == -32002 and "424242" in msg
    code, msg = error_of(mcp.request("resources/read", {"uri": "file:///etc/passwd"}))
    assert code == -32002
    code, _ = error_of(mcp.request("resources/read", {}))
    assert code == -32602


def test_without_a_daemon_tools_fail_and_the_server_stays(make_gflow):
    g = make_gflow(start=False)
    m = Mcp(g)
    try:
        m.initialize()
        r = m.call("list_jobs")
        assert r["isError"] is True
        assert str(g.sock) in r["content"][0]["text"], r
        assert m.result("ping") == {}
    finally:
        m.close()


def test_cli_help_version_and_bad_arguments(sim_gflow):
    cp = subprocess.run([binary("gflow-mcp"), "--version"], capture_output=True, text=True,
                        timeout=TIMEOUT)
    assert cp.returncode == 0 and cp.stdout.startswith("gflow-mcp ")
    cp = subprocess.run([binary("gflow-mcp"), "--help"], capture_output=True, text=True,
                        timeout=TIMEOUT)
    assert cp.returncode == 0 and "claude mcp add gflow -- gflow-mcp" in cp.stdout
    cp = subprocess.run([binary("gflow-mcp"), "--bogus"], capture_output=True, text=True,
                        timeout=TIMEOUT)
    assert cp.returncode == 2 and cp.stdout == ""
    assert cp.stderr.count("\n") == 1 and cp.stderr.startswith("gflow-mcp: unknown option")


# ---------------------------------------------------------------- identity

def test_acts_as_the_user_who_runs_it(sim_gflow):
    """Run by another user, gflow-mcp cannot cancel root's job (the daemon's refusal comes
    back as a tool error), and what it submits runs as that user."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    g = sim_gflow
    uid, gid, home = ensure_test_user()
    os.chmod(g.root, 0o755)
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    mine = g.submit("sleep 600")
    wait_for(lambda: g.job(mine)["state"] == "R", "root's job to run")

    m = Mcp(g, user=as_user(uid, gid), cwd=workdir,
            env={"HOME": home, "USER": "x", "LOGNAME": "x"})
    try:
        m.initialize()
        r = m.call("cancel_job", id=mine)
        assert r["isError"] is True
        assert r["content"][0]["text"] == \
            f"job {mine} belongs to root; only its owner or an admin may cancel it", r
        assert g.job(mine)["state"] == "R"
        # Its listing is its own jobs; root's are there with user=all.
        assert m.ok("list_jobs")["jobs"] == []
        assert [j["id"] for j in m.ok("list_jobs", user="all")["jobs"]] == [mine]
        log = m.call("job_log", id=mine)
        assert log["isError"] is True
        assert "only its owner or an admin may read its log" in log["content"][0]["text"]

        theirs = m.ok("submit_job", command="id -u; pwd")["jobs"][0]["id"]
        j = g.wait_state(theirs)
        assert j["state"] == "CD" and j["uid"] == uid, (j, g.log(theirs))
        assert m.ok("job_log", id=theirs)["text"] == f"{uid}\n{workdir}\n"
    finally:
        m.close()


def test_scripts_and_their_directives(mcp, sim_gflow):
    """A script (text or file) is submitted as gbatch submits it: its "# GFLOW" lines are
    read with gbatch's parsers, under the arguments; a bad one is gbatch's message."""
    g = sim_gflow
    mcp.initialize()
    script = ("#!/bin/bash\n# GFLOW --time 5\n# GFLOW -J from-directive --priority 7\n"
              "#GFLOW --gpus 1 --umask 027\necho script ran; umask\n")
    job = mcp.ok("submit_job", script=script, priority=20)["jobs"][0]["id"]
    j = g.wait_state(job)
    assert j["state"] == "CD", (j, g.log(job))
    assert (j["name"], j["time_limit"], j["priority"], j["gpus"], j["umask"]) == \
        ("from-directive", 300, 20, 1, "0027")  # the argument's priority wins
    assert j["script_path"] == "-" and g.log(job) == "script ran\n0027\n"

    path = g.work / "train.sh"
    path.write_text("#!/bin/bash\n# GFLOW --depends-on @\necho from file\n")
    sub = mcp.ok("submit_job", script_file="train.sh", hold=True)
    j = g.job(sub["jobs"][0]["id"])
    assert j["script_path"] == str(path) and j["name"] == f"gjob-{j['id']}" and j["state"] == "H"
    assert [d["id"] for d in j["depends_on"]] == [job]  # '@' asked the daemon: the latest

    bad = mcp.call("submit_job", script="#!/bin/sh\n# GFLOW --time soon\ntrue\n")
    assert bad["isError"] is True
    text = bad["content"][0]["text"]
    assert text.startswith("script:2: ") and "soon" in text and "directive" in text, text
    bad = mcp.call("submit_job", script="#!/bin/sh\n# GFLOW --notify-email a@b\ntrue\n")
    assert bad["isError"] is True and "--notify-email" in bad["content"][0]["text"]
    missing = mcp.call("submit_job", script_file="nope.sh")
    assert missing["isError"] is True and "nope.sh" in missing["content"][0]["text"]
    both = mcp.call("submit_job", command="true", script="true")
    assert both["isError"] is True and "exactly one" in both["content"][0]["text"]
    assert len(g.jobs(user="all")) == 2, "a refused submission made a job"
    assert mcp.result("ping") == {}


def test_show_job_cuts_a_long_script(mcp, sim_gflow):
    mcp.initialize()
    script = "#!/bin/bash\n" + "# padding line of a long script\n" * 2500 + "true\n"
    assert len(script) > 70000
    job = mcp.ok("submit_job", script=script, hold=True)["jobs"][0]["id"]
    shown = mcp.ok("show_job", id=job)
    assert shown["script"] == script[:65536] and shown["script_truncated"] is True
    assert sim_gflow.job(job)["script"] == script, "the stored script is whole"


def test_list_jobs_pages_with_before_id(mcp, sim_gflow):
    mcp.initialize()
    ids = [mcp.ok("submit_job", command="true", hold=True)["jobs"][0]["id"] for _ in range(3)]
    page = mcp.ok("list_jobs", limit=2)
    assert [j["id"] for j in page["jobs"]] == ids[:0:-1] and page["more"] is True
    page = mcp.ok("list_jobs", limit=2, before_id=page["jobs"][-1]["id"])
    assert [j["id"] for j in page["jobs"]] == [ids[0]] and page["more"] is False
    assert mcp.ok("list_jobs", before_id=1) == {"jobs": [], "count": 0, "more": False}
    held = mcp.ok("list_jobs", state="H", user="all")
    assert held["count"] == 3 and {j["state"] for j in held["jobs"]} == {"H"}


def test_a_directive_reference_that_names_no_job(mcp, sim_gflow):
    """'@' in a directive asks the daemon; when it names no job the message comes back as
    the tool's error and gflow-mcp goes on serving (it parses directives in process)."""
    mcp.initialize()
    bad = mcp.call("submit_job", script="#!/bin/sh\n# GFLOW --depends-on @~3\ntrue\n")
    assert bad["isError"] is True
    assert "have not submitted any job yet" in bad["content"][0]["text"], bad
    assert mcp.result("ping") == {}
    assert sim_gflow.jobs(user="all") == []
