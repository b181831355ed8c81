"""End-to-end tests of the `gflow` umbrella (issue 29): `gflow <command>` runs the program
of that name (as gflow's multi-call binary), `gflow mcp serve` the MCP server, which a REAL
MCP client drives here (the official TypeScript SDK, tests/mcp/client.mjs, installed by
scripts/install-deps.sh), with gflow's tools and their argument shapes (triage_job,
preview_submit_jobs, submit_jobs, preview_update_job, update_job, redo_job,
get_queue_pressure, list_reservations, get_health, ...), the daemon's dry run of an
update (PATCH ?dry_run=1), and `gflow status`."""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD_DIR, REPO, as_user, binary, ensure_test_user, wait_for

MCP_DIR = REPO / "tests" / "mcp"
# gflow's 17 tools (its src/multicall/mcp/server.rs); ours add 5 of their own.
GFLOW_TOOLS = {"get_info", "get_health", "list_jobs", "get_job", "get_job_log", "get_stats",
               "get_queue_pressure", "list_reservations", "cancel_job", "hold_job",
               "release_job", "preview_submit_jobs", "submit_jobs", "preview_update_job",
               "update_job", "triage_job", "redo_job"}


def sdk_client(g, calls, user=None, env=None, cwd=None):
    """Runs tests/mcp/client.mjs: the SDK's Client spawns `gflow mcp serve`, lists the
    tools and makes the calls; returns its {"server", "tools", "results"}."""
    sdk = MCP_DIR / "node_modules" / "@modelcontextprotocol" / "sdk"
    node = shutil.which("node") or shutil.which("nodejs")
    if not node or not sdk.is_dir():
        pytest.fail("the MCP SDK client is not installed: run scripts/install-deps.sh "
                    "(nodejs, npm, and npm install in tests/mcp)")
    argv = [node, str(MCP_DIR / "client.mjs"), json.dumps(calls), binary("gflow"), "mcp",
            "serve"]
    if user:
        argv = list(user) + argv
    cp = subprocess.run(argv, env={**g.env, **(env or {})}, cwd=str(cwd or g.work),
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, f"the SDK client failed ({cp.returncode}): {cp.stderr[-3000:]}"
    return json.loads(cp.stdout)


def structured(result):
    assert result.get("isError") is False, result
    return result["structuredContent"]


def tool_error(result):
    assert result.get("isError") is True, result
    return result["content"][0]["text"]


@pytest.fixture
def sim(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 2)
    return g


# ---------------------------------------------------------------- the umbrella

def test_gflow_runs_each_program_with_its_arguments(sim):
    g = sim
    for prog in ("gbatch", "gcancel", "gctl", "gflowd", "ginfo", "gjob", "gqueue", "gstats"):
        cp = g.run("gflow", prog, "--version")
        assert cp.returncode == 0, (prog, cp.stderr)
        assert cp.stdout.startswith(prog + " "), (prog, cp.stdout)
    # The same output and exit status as the program itself.
    assert g.run("gflow", "ginfo").stdout == g.run("ginfo").stdout
    job = int(g.run("gflow", "gbatch", "--parsable", "echo", "via-gflow", check=True).stdout)
    assert g.wait_state(job)["state"] == "CD"
    assert g.log(job) == "via-gflow\n"
    out = g.run("gflow", "gqueue", "-a", "-f", "JOBID,ST", check=True).stdout
    assert f"{job}" in out and "CD" in out
    # A program's own errors and statuses come through untouched.
    direct, via = g.run("gjob", "show", "999"), g.run("gflow", "gjob", "show", "999")
    assert via.returncode == direct.returncode != 0 and via.stderr == direct.stderr
    # gflow's wrappers call `gflow __multicall <command> ...`.
    cp = g.run("gflow", "__multicall", "gqueue", "--version", check=True)
    assert cp.stdout.startswith("gqueue ")


def test_gflow_help_version_and_bad_commands(sim):
    g = sim
    for args in ((), ("--help",), ("-h",), ("help",)):
        cp = g.run("gflow", *args)
        assert cp.returncode == 0, cp.stderr
        assert "Usage: gflow <command>" in cp.stdout and "mcp serve" in cp.stdout
        assert "status" in cp.stdout
    cp = g.run("gflow", "--version", check=True)
    assert cp.stdout.startswith("gflow ") and len(cp.stdout.splitlines()) == 1
    cp = g.run("gflow", "frobnicate")
    assert cp.returncode == 2 and cp.stdout == ""
    assert cp.stderr.count("\n") == 1
    assert cp.stderr.startswith("gflow: unknown command 'frobnicate'; the commands are gbatch")
    cp = g.run("gflow", "__multicall")
    assert cp.returncode == 2 and "__multicall needs a command" in cp.stderr
    cp = g.run("gflow", "mcp")
    assert cp.returncode == 0 and "gflow mcp serve" in cp.stdout
    cp = g.run("gflow", "mcp", "start")
    assert cp.returncode == 2
    assert cp.stderr == "gflow mcp: unknown command 'start'; the command is 'gflow mcp serve'\n"
    cp = g.run("gflow", "mcp", "serve", "--help", check=True)
    assert "gflow-mcp" in cp.stdout and "Tools:" in cp.stdout
    cp = g.run("gflow", "mcp", "serve", "--bogus")
    assert cp.returncode == 2 and "unknown option --bogus" in cp.stderr


def test_gflow_finds_the_programs_beside_itself(tmp_path, sim):
    """A relocated gflow (the kit, a copy in ~/bin) runs the programs in its own
    directory, not the installed ones."""
    shutil.copy2(binary("gflow"), tmp_path / "gflow")
    fake = tmp_path / "gqueue"
    fake.write_text("#!/bin/sh\necho \"fake gqueue: $*\"\nexit 7\n")
    fake.chmod(0o755)
    cp = subprocess.run([str(tmp_path / "gflow"), "gqueue", "-a", "x y"], env=sim.env,
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 7 and cp.stdout == "fake gqueue: -a x y\n"
    # Missing there and not installed: a clear error, status 127 (as gflow's wrapper).
    cp = subprocess.run([str(tmp_path / "gflow"), "gctl", "show-gpus"], env=sim.env,
                        capture_output=True, text=True, timeout=30)
    if not Path("/usr/local/bin/gctl").exists():
        assert cp.returncode == 127 and cp.stderr.startswith("gflow: cannot run ")
        assert "gctl" in cp.stderr and cp.stderr.count("\n") == 1


def test_make_install_installs_gflow():
    cp = subprocess.run(["meson", "introspect", "--installed", str(BUILD_DIR)],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    installed = json.loads(cp.stdout)
    assert installed.get(str(BUILD_DIR / "gflow"), "").endswith("/bin/gflow"), installed
    assert installed.get(str(BUILD_DIR / "gflow-mcp"), "").endswith("/bin/gflow-mcp")
    assert any(v.endswith("man1/gflow.1") for v in installed.values())


# ---------------------------------------------------------------- MCP with the SDK

def test_mcp_serve_lists_gflows_tools_to_the_official_sdk(sim):
    out = sdk_client(sim, [["get_health", {}]])
    assert out["server"]["name"] == "gflow-mcp"
    names = {t["name"] for t in out["tools"]}
    assert len(names) >= 17 and GFLOW_TOOLS <= names, GFLOW_TOOLS - names
    by_name = {t["name"]: t for t in out["tools"]}
    # gflow's argument shapes.
    assert by_name["triage_job"]["inputSchema"]["required"] == ["job_id"]
    assert {"last_lines", "tail_lines", "max_bytes"} <= \
        set(by_name["triage_job"]["inputSchema"]["properties"])
    item = by_name["submit_jobs"]["inputSchema"]["properties"]["jobs"]["items"]["properties"]
    assert {"command", "script", "gpus", "run_dir", "depends_on_ids", "dependency_mode",
            "time_limit_secs", "memory_limit_mb", "gpu_memory_limit_mb", "param",
            "parameters", "run_name", "project", "max_retries", "notify_email"} <= set(item)
    assert by_name["preview_submit_jobs"]["inputSchema"] == by_name["submit_jobs"]["inputSchema"]
    upd = set(by_name["update_job"]["inputSchema"]["properties"])
    assert {"job_id", "clear_time_limit", "clear_conda_env", "depends_on_ids",
            "clear_max_retries"} <= upd
    assert by_name["preview_update_job"]["annotations"]["readOnlyHint"] is True
    assert by_name["redo_job"]["annotations"]["readOnlyHint"] is False
    assert {"job_id", "cascade", "clear_deps", "time_limit_secs"} <= \
        set(by_name["redo_job"]["inputSchema"]["properties"])
    health = structured(out["results"][0])
    assert health["ok"] is True and health["status"] == 200
    assert health["pid"] == sim.daemon_pid()


def test_get_health_when_the_daemon_is_down(make_gflow):
    g = make_gflow(start=False)
    out = sdk_client(g, [["get_health", {}], ["get_queue_pressure", {}]])
    health = structured(out["results"][0])
    assert health["ok"] is False and health["pid"] is None
    assert "gflowd is not running" in health["error"] or "cannot connect" in health["error"]
    assert tool_error(out["results"][1])


def test_preview_then_submit_jobs(sim):
    g = sim
    spec = {"command": "echo lr={lr} bs={bs}", "param": ["lr=0.1,0.01"],
            "parameters": {"bs": "32"}, "gpus": 1, "time_limit_secs": 600,
            "memory_limit_mb": 512, "run_name": "sweep", "priority": 20}
    bad = {"command": "true", "shared": True, "gpus": 1}
    dep_unknown = {"command": "true", "depends_on_ids": [99999]}
    out = sdk_client(g, [["preview_submit_jobs", {"jobs": [spec, bad, dep_unknown]}]])
    p = structured(out["results"][0])
    assert p["dry_run"] is True and p["valid"] is False and p["input_count"] == 3
    oks = [j for j in p["jobs"] if j["ok"]]
    assert [j["input_index"] for j in oks] == [0, 0] and p["expanded_count"] == 4
    assert sorted(j["job"]["command"] for j in oks) == \
        ["echo lr=0.01 bs=32", "echo lr=0.1 bs=32"]
    for j in oks:
        assert j["job"]["id"] is None and j["job"]["gpus"] == 1
        assert j["job"]["time_limit"] == 600 and j["job"]["memory_mb"] == 512
        assert j["job"]["priority"] == 20 and j["job"]["workdir"] == str(g.work)
    errors = {j["input_index"]: j["error"] for j in p["jobs"] if not j["ok"]}
    assert "gpu_memory_limit_mb" in errors[1]
    # The daemon's own dependency check ran (gflow's preview skips it).
    assert "99999" in errors[2]
    assert g.jobs(user="all") == [], "a preview made jobs"

    out = sdk_client(g, [["submit_jobs", {"jobs": [spec, bad]}]])
    s = structured(out["results"][0])
    assert s["submitted"] == 2 and s["failed"] == 1
    made = [r for r in s["results"] if r["ok"]]
    assert [r["index"] for r in made] == [0, 0]
    assert [r["index"] for r in s["results"] if not r["ok"]] == [1]
    for r in made:
        j = g.wait_state(r["job_id"])
        assert j["state"] == "CD", (j, g.log(r["job_id"]))
    assert sorted(g.log(r["job_id"]) for r in made) == \
        ["lr=0.01 bs=32\n", "lr=0.1 bs=32\n"]
    # gflow's 1000-job cap on one call.
    out = sdk_client(g, [["submit_jobs", {"jobs": [{"command": "true",
                                                    "param": ["i=1:1001"]}]}]])
    assert "at most 1000 jobs" in tool_error(out["results"][0])


def test_preview_update_changes_nothing_and_update_does(sim):
    g = sim
    held = g.submit("--hold", "--priority", "10", "echo", "x")
    before = g.job(held)
    out = sdk_client(g, [
        ["preview_update_job", {"job_id": held, "priority": 99, "time_limit_secs": 3600,
                                "gpus": 1}],
        ["preview_update_job", {"job_id": held, "gpus": 64}],
        ["preview_update_job", {"job_id": held, "time_limit_secs": 5,
                                "clear_time_limit": True}],
    ])
    p = structured(out["results"][0])
    assert p["dry_run"] is True and p["ok"] is True and p["error"] is None
    assert set(p["updated_fields"]) == {"priority", "time_limit", "gpus"}
    assert p["before"]["priority"] == 10 and p["after"]["priority"] == 99
    assert p["after"]["time_limit"] == 3600 and p["after"]["gpus"] == 1
    # The daemon judged it as the real update would: 64 GPUs do not exist here.
    refused = structured(out["results"][1])
    assert refused["ok"] is False and refused["after"] is None and "GPU" in refused["error"]
    assert "Cannot set and clear time_limit_secs" in tool_error(out["results"][2])
    after = g.job(held)
    assert {k: after[k] for k in ("priority", "time_limit", "gpus")} == \
        {k: before[k] for k in ("priority", "time_limit", "gpus")}

    out = sdk_client(g, [["update_job", {"job_id": held, "priority": 99,
                                         "time_limit_secs": 3600}]])
    u = structured(out["results"][0])
    assert sorted(u["updated_fields"]) == ["priority", "time_limit"]
    assert u["job"]["priority"] == 99 and u["job"]["id"] == held
    assert g.job(held)["priority"] == 99 and g.job(held)["time_limit"] == 3600

    # A finished job cannot be updated: the preview says so, the update fails.
    done = g.submit("true")
    g.wait_state(done)
    out = sdk_client(g, [["preview_update_job", {"job_id": done, "priority": 5}],
                         ["update_job", {"job_id": done, "priority": 5}],
                         ["update_job", {"job_id": 99999, "priority": 5}]])
    p = structured(out["results"][0])
    assert p["ok"] is False and f"job {done} has already ended (CD)" in p["error"]
    assert f"job {done} has already ended (CD)" in tool_error(out["results"][1])
    assert "99999" in tool_error(out["results"][2])


def test_update_dry_run_in_the_api(sim):
    """PATCH /v1/jobs/{id}?dry_run=1 runs the update's checks and changes nothing."""
    g = sim
    held = g.submit("--hold", "echo", "x")
    r = g.api("PATCH", f"/v1/jobs/{held}?dry_run=1", {"priority": 77, "max_concurrent": 3})
    assert r.status == 200, r
    body = r.json()
    assert body["dry_run"] is True
    assert {c["field"] for c in body["changes"]} == {"priority", "max_concurrent"}
    assert g.job(held)["priority"] == 10 and g.job(held)["max_concurrent"] in (None, 0)
    r = g.api("PATCH", f"/v1/jobs/{held}?dry_run=1", {"gpus": 64})
    assert r.status == 400
    r = g.api("PATCH", f"/v1/jobs/{held}?dry_run=1", {"project": "x"})
    assert r.status == 400 and "fixed at submission" in r.json()["error"]
    r = g.api("PATCH", f"/v1/jobs/{held}", {"priority": 77})
    assert r.status == 200 and "dry_run" not in r.json()
    assert g.job(held)["priority"] == 77


def test_triage_failed_job_with_log_tail_and_recent_failures(sim):
    g = sim
    older = g.submit("sh", "-c", "echo first-failure; exit 2")
    noisy = g.submit("sh", "-c",
                     "for i in $(seq 1 500); do echo line $i; done; "
                     "printf 'progress 10%%\\rprogress 100%%\\n'; "
                     "echo 'RuntimeError: CUDA out of memory' >&2; exit 1")
    for j in (older, noisy):
        assert g.wait_state(j)["state"] == "F"
    # Failure triage names the CUDA OOM from the log (issue 30): its reason reads the class.
    wait_for(lambda: g.job(noisy)["failure_class"] == "CudaOOM", "noisy's failure class")
    out = sdk_client(g, [["triage_job", {"job_id": noisy}],
                         ["triage_job", {"job_id": noisy, "tail_lines": 5, "max_bytes": 40}]])
    t = structured(out["results"][0])
    assert t["job_id"] == noisy and t["state"] == "Failed" and t["reason"] == "CudaOOM"
    assert t["failure_class"] == "CudaOOM" and t["failure_line"] == "RuntimeError: CUDA out of memory"
    assert t["exit_status"] == 1 and t["exit_status_note"] == "exited with status 1"
    excerpt = t["log_excerpt"]
    # The last 80 lines (gflow's default), progress bars as finally drawn.
    assert excerpt.splitlines()[-1] == "RuntimeError: CUDA out of memory"
    assert "progress 100%" in excerpt and "progress 10%" not in excerpt
    assert len(excerpt.splitlines()) == 80 and "line 1\n" not in excerpt
    assert any("OOM" in h for h in t["retry_hints"])
    assert any("redo_job" in h for h in t["retry_hints"])
    assert t["runtime_secs"] >= 0 and t["wait_secs"] >= 0
    assert t["log_path"].endswith(f"/{noisy}.log")
    assert "exited with status 1" in t["summary"] and "out of memory" in t["summary"]
    # What the caller's last failures looked like.
    fails = t["recent_failures"]
    assert [f["job_id"] for f in fails] == [older]
    assert fails[0]["log_tail"] == "first-failure\n" and fails[0]["reason"] == "NonZeroExitCode"
    assert "env" not in t["job"]
    short = structured(out["results"][1])
    assert len(short["log_excerpt"].encode()) <= 40 and short["log_truncated"] is True


def test_triage_pending_job_explains_the_queue(sim):
    g = sim
    blocker = g.submit("--gpus", "2", "sleep", "60")
    wait_for(lambda: g.job(blocker)["state"] == "R", "the blocker to run")
    first = g.submit("--gpus", "1", "true")
    waiting = g.submit("--gpus", "2", "true")
    held = g.submit("--hold", "true")
    out = sdk_client(g, [["triage_job", {"job_id": waiting}],
                         ["triage_job", {"job_id": held}],
                         ["get_queue_pressure", {}],
                         ["list_reservations", {}]])
    t = structured(out["results"][0])
    assert t["state"] == "Queued" and t["reason"] in ("Resources", "Priority")
    assert t["log_excerpt"] is None and t["exit_status"] is None
    q = t["queue"]
    assert q["free_gpus"] == 0 and q["total_gpus"] == 2
    assert q["jobs_ahead"] == 1 and q["gpus_asked_ahead"] == 1
    assert "asks 2 GPUs, 0 of 2 free; 1 queued job ahead" in t["summary"]
    assert any("get_queue_pressure" in h for h in t["retry_hints"])
    h = structured(out["results"][1])
    assert h["state"] == "Hold" and any("release_job" in x for x in h["retry_hints"])
    p = structured(out["results"][2])
    assert p["total_gpus"] == 2 and p["available_gpus"] == []
    assert p["running_jobs"] == 1 and p["queued_jobs"] == 2 and p["held_jobs"] == 1
    assert p["queued_requested_gpus"] == 3 and p["running_allocated_gpus"] == 2
    assert p["blocked_reasons"]["JobHeldUser"] == 1
    assert sum(p["blocked_reasons"].values()) == 3
    assert [u["name"] for u in p["users"]] == ["root"] and p["users"][0]["queued"] == 3
    assert {u["index"] for u in p["unavailable_gpus"]} == {0, 1}
    r = structured(out["results"][3])
    assert r == {"reservations": [], "count": 0}
    g.run("gcancel", blocker, first, waiting, held, check=True)


def test_redo_job_and_its_cascade(sim):
    g = sim
    bad = g.submit("sh", "-c", "exit 1")
    child = g.submit("--depends-on", str(bad), "echo", "child")
    assert g.wait_state(bad)["state"] == "F"
    assert g.wait_state(child)["state"] == "CA"
    out = sdk_client(g, [["redo_job", {"job_id": bad, "priority": 40, "cascade": True}],
                         ["redo_job", {"job_id": 99999}],
                         ["redo_job", {"job_id": bad, "depends_on": 1, "clear_deps": True}]])
    r = structured(out["results"][0])
    assert r["original_job_id"] == bad and r["new_job_id"] > child
    assert r["cascaded_count"] == 1
    assert r["cascaded_jobs"][0]["original_job_id"] == child
    assert g.job(r["new_job_id"])["priority"] == 40
    assert "99999" in tool_error(out["results"][1])
    assert "not both" in tool_error(out["results"][2])


def test_gflow_shaped_reads(sim):
    g = sim
    job = g.submit("sh", "-c", "printf 'a\\033[31mred\\033[0m\\nb\\n'")
    g.wait_state(job)
    out = sdk_client(g, [["get_job", {"job_id": job}],
                         ["get_job_log", {"job_id": job, "tail_lines": 1}],
                         ["get_info", {}],
                         ["get_stats", {}]])
    j = structured(out["results"][0])
    assert j["id"] == job and "env" not in j
    log = structured(out["results"][1])
    assert log["text"] == "b\n" and log["job_id"] == job
    log_all = sdk_client(g, [["get_job_log", {"job_id": job}]])
    assert structured(log_all["results"][0])["text"] == "ared\nb\n"
    info = structured(out["results"][2])
    assert [x["index"] for x in info["gpus"]] == [0, 1]
    assert all(x["available"] is True for x in info["gpus"])
    assert info["allowed_gpu_indices"] == [0, 1]
    assert structured(out["results"][3])["total"]["jobs"] >= 1


def test_mcp_serve_acts_as_the_user_who_runs_it(sim):
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    g = sim
    uid, gid, home = ensure_test_user()
    os.chmod(g.root, 0o755)
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    roots = g.submit("--hold", "true")
    out = sdk_client(g, [["update_job", {"job_id": roots, "priority": 1}],
                         ["triage_job", {"job_id": roots}],
                         ["submit_jobs", {"jobs": [{"command": "id -u",
                                                    "submitted_by": "root"}]}]],
                     user=as_user(uid, gid), cwd=workdir,
                     env={"HOME": home, "USER": "x", "LOGNAME": "x"})
    assert "belongs to root" in tool_error(out["results"][0])
    assert g.job(roots)["priority"] == 10
    # Reading root's job record is allowed, its log is not (the daemon decides).
    structured(out["results"][1])
    s = structured(out["results"][2])
    assert s["failed"] == 1 and "submitted_by" in s["results"][0]["error"]


# ---------------------------------------------------------------- gflow status

def test_gflow_status_with_no_jobs(sim):
    cp = sim.run("gflow", "status", check=True)
    assert cp.stdout.startswith("GPUs: 2 (simulated)\n")
    assert "Your jobs: none running or waiting" in cp.stdout
    assert "Queue (everyone): 0 waiting (0 queued, 0 held), the queued asking 0 GPUs; " \
        "2 of 2 GPUs free; 0 running jobs holding 0 GPUs" in cp.stdout
    data = json.loads(sim.run("gflow", "status", "-o", "json", check=True).stdout)
    assert data["jobs"] == [] and len(data["gpus"]) == 2
    assert data["pressure"]["available_gpus"] == [0, 1]


def test_gflow_status_shows_gpus_jobs_and_pressure(sim):
    g = sim
    run = g.submit("--gpus", "1", "--name", "trainer", "sleep", "60")
    wait_for(lambda: g.job(run)["state"] == "R", "the job to run")
    wait = g.submit("--gpus", "2", "--name", "big", "true")
    held = g.submit("--hold", "--name", "later", "true")
    cp = g.run("gflow", "status", check=True)
    lines = cp.stdout.splitlines()
    gpu = g.job(run)["gpu_ids"]
    assert any(line.split()[0] == gpu and "busy" in line and f"job {run} (root)" in line
               for line in lines[1:4]), cp.stdout
    assert "Your jobs: 1 running, 2 waiting" in cp.stdout
    mine = lines[lines.index("Your jobs: 1 running, 2 waiting"):]
    row = {line.split()[0]: line for line in mine if line.split() and line.split()[0].isdigit()}
    assert "trainer" in row[str(run)] and f"1 [{gpu}]" in row[str(run)]
    assert "big" in row[str(wait)] and "waited" in row[str(wait)]
    assert "Resources" in row[str(wait)] or "Priority" in row[str(wait)]
    assert "JobHeldUser" in row[str(held)]
    assert "2 waiting (1 queued, 1 held), the queued asking 2 GPUs; 1 of 2 GPUs free; " \
        "1 running job holding 1 GPU" in cp.stdout
    assert "Why they wait:" in cp.stdout and "JobHeldUser 1" in cp.stdout
    data = json.loads(g.run("gflow", "status", "-o", "json", check=True).stdout)
    assert [j["id"] for j in data["jobs"]] == [run, wait, held]
    assert data["jobs"][1]["reason"] == "Resources" and "wait_secs" in data["jobs"][1]
    assert data["pressure"]["queued_jobs"] == 1 and data["pressure"]["held_jobs"] == 1
    g.run("gcancel", run, wait, held, check=True)


def test_gflow_status_errors(sim, make_gflow):
    cp = sim.run("gflow", "status", "-o", "yaml")
    assert cp.returncode == 2 and "unknown output format 'yaml'" in cp.stderr
    cp = sim.run("gflow", "status", "extra")
    assert cp.returncode == 2 and "unexpected argument 'extra'" in cp.stderr
    assert "gflow status" in sim.run("gflow", "status", "--help", check=True).stdout
    down = make_gflow(start=False)
    cp = down.run("gflow", "status")
    assert cp.returncode == 1 and cp.stdout == ""
    assert "gflowd" in cp.stderr


def test_shared_tools_take_gflows_arguments(sim):
    """list_jobs, cancel_job, hold_job and release_job are gflow's names too: they take
    gflow's arguments (job_id; offset, order, detail, created_after)."""
    g = sim
    blocker = g.submit("--gpus", "2", "sleep", "60")  # so that a released job waits
    wait_for(lambda: g.job(blocker)["state"] == "R", "the blocker to run")
    ids = [g.submit("--hold", "--gpus", "1", "true") for _ in range(3)]
    out = sdk_client(g, [
        ["release_job", {"job_id": ids[0]}],
        ["hold_job", {"job_id": ids[0]}],
        ["cancel_job", {"job_id": ids[2]}],
        ["cancel_job", {}],
        ["list_jobs", {"limit": 1, "offset": 1}],
        ["list_jobs", {"order": "asc", "detail": "full", "limit": 2}],
        ["list_jobs", {"created_after": int(time.time()) + 3600}],
    ])
    res = out["results"]
    assert structured(res[0])["state"] == "PD"
    assert structured(res[1])["state"] == "H"
    assert structured(res[2])["state"] == "CA" and g.job(ids[2])["state"] == "CA"
    assert "'job_id'" in tool_error(res[3])
    page = structured(res[4])
    assert [j["id"] for j in page["jobs"]] == [ids[1]]
    assert page["has_more"] is True and page["next_offset"] == 2 and page["offset"] == 1
    full = structured(res[5])
    assert [j["id"] for j in full["jobs"]] == [blocker, ids[0]] and full["detail"] == "full"
    assert "umask" in full["jobs"][0]  # every field, not the summary's
    assert structured(res[6])["jobs"] == []
    g.run("gcancel", blocker, ids[0], ids[1], check=True)
