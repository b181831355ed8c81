"""Host memory (--memory: the Memory wait, refusal past the machine, OutOfMemory) and
conda environments (--conda-env, $CONDA_DEFAULT_ENV for command jobs, a missing
environment failing the job at once) through the real binaries."""
import os

from conftest import parse_show, parse_table, wait_for
from test_shim import fake_conda

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"
# 300 MiB touched against a 100 MiB limit; the sleep is what an unenforced limit waits out.
OVER_LIMIT = 'python3 -c "b = bytearray(300*1024*1024); import time; time.sleep(5)"'


def mem_total_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


def test_job_over_its_memory_ends_out_of_memory(gflow):
    job = gflow.submit("--memory", "100M", OVER_LIMIT)
    j = gflow.wait_state(job, timeout=20)
    assert (j["state"], j["reason"], j["oom"], j["memory_mb"]) == ("F", "OutOfMemory", True, 100), j
    row = parse_table(gflow.run("gqueue", "-a", "-f", "JOBID,ST,MEMORY,NODELIST(REASON)",
                                check=True).stdout)[0]
    assert row == {"JOBID": str(job), "ST": "F", "MEMORY": "100M",
                   "NODELIST(REASON)": "(OutOfMemory)"}, row
    show = parse_show(gflow.run("gjob", "show", job, check=True).stdout)[0]
    assert (show["Reason"], show["OOM"], show["MemoryLimit"]) == ("OutOfMemory", "yes", "100M"), show


def test_memory_aliases_directive_and_under_the_limit(gflow):
    ids = [gflow.submit(opt, "64M", "true") for opt in ("-m", "--mem", "--max-mem", "--max-memory")]
    ids.append(gflow.submit("--memory", "1G", "true"))
    ids.append(gflow.submit("--memory", "512", "true"))
    script = gflow.work / "job.sh"
    script.write_text("#!/bin/bash\n# GFLOW --mem=2G\necho fine\n")
    ids.append(gflow.submit(str(script)))
    got = [gflow.wait_state(i) for i in ids]
    assert [j["memory_mb"] for j in got] == [64, 64, 64, 64, 1024, 512, 2048]
    assert all(j["state"] == "CD" for j in got), got
    assert gflow.log(ids[-1]).strip() == "fine"
    # No request: 0, shown as "-".
    plain = gflow.submit("true")
    assert gflow.wait_state(plain)["memory_mb"] == 0
    rows = parse_table(gflow.run("gqueue", "-a", "-f", "JOBID,MEMORY", check=True).stdout)
    assert {r["JOBID"]: r["MEMORY"] for r in rows}[str(plain)] == "-"
    bad = gflow.run("gbatch", "--memory", "lots", "true")
    assert bad.returncode != 0 and "--memory" in bad.stderr, bad


def test_request_larger_than_the_machine_is_refused(gflow):
    total = mem_total_mb()
    cp = gflow.run("gbatch", "--memory", f"{total + 1}M", "true")
    assert cp.returncode != 0
    assert f"--memory asks for {total + 1} MiB but this machine has {total} MiB" in cp.stderr, cp
    assert gflow.jobs() == []


def test_job_waits_for_memory_held_by_running_jobs(gflow):
    total = mem_total_mb()
    big = gflow.submit("--memory", f"{total - 100}M", WAIT_GO)
    gflow.wait_state(big, "R")
    small = gflow.submit("--memory", "200M", "echo ran")
    free = gflow.submit("echo no request")  # declares nothing: never waits for memory
    assert gflow.wait_state(free)["state"] == "CD"
    wait_for(lambda: gflow.job(small)["reason"] == "Memory", "the Memory wait reason")
    assert gflow.job(small)["state"] == "PD"
    row = {r["JOBID"]: r for r in parse_table(gflow.run("gqueue", check=True).stdout)}[str(small)]
    assert row["NODELIST(REASON)"] == "(Memory)", row
    (gflow.work / "go").touch()
    assert gflow.wait_state(big)["state"] == "CD"
    j = gflow.wait_state(small)
    assert j["state"] == "CD" and gflow.log(small).strip() == "ran", j


def test_status_says_how_memory_is_enforced(gflow):
    out = gflow.gflowd("status", check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("Memory:"))
    assert f"{mem_total_mb()} MiB" in line
    assert any(m in line for m in ("cgroup v2", "cgroup v1", "watchdog")), line
    st = gflow.api("GET", "/v1/status").json()["memory"]
    assert st["total_mb"] == mem_total_mb() and st["enforcement"] in line


def test_forced_enforcement_shows_in_status(make_gflow):
    g = make_gflow(env={"GFLOW_SHIM_MEMORY_METHOD": "watchdog"})
    out = g.gflowd("status", check=True).stdout
    assert "held by watchdog" in out, out
    job = g.submit("--memory", "100M", OVER_LIMIT)
    j = g.wait_state(job, timeout=20)
    assert (j["state"], j["reason"]) == ("F", "OutOfMemory"), j


# ---- conda ------------------------------------------------------------------------

def conda_env(gflow, **extra):
    conda = fake_conda(gflow.root / "conda")
    env = {"CONDA_EXE": str(conda)}
    env.update(extra)
    return env


def test_conda_env_option_activates_the_environment(gflow):
    env = conda_env(gflow)
    job = gflow.submit("--conda-env", "myenv", "echo $CONDA_DEFAULT_ENV; tool", env=env)
    j = gflow.wait_state(job)
    assert (j["state"], j["conda_env"]) == ("CD", "myenv"), j
    assert gflow.log(job).split("\n")[:2] == ["myenv", "tool from myenv"]
    show = parse_show(gflow.run("gjob", "show", job, check=True).stdout)[0]
    assert show["CondaEnv"] == "myenv"


def test_command_job_uses_the_submitting_shells_environment(gflow):
    env = conda_env(gflow, CONDA_DEFAULT_ENV="myenv")
    job = gflow.submit("tool", env=env)
    j = gflow.wait_state(job)
    assert (j["state"], j["conda_env"]) == ("CD", "myenv"), j
    assert gflow.log(job).strip() == "tool from myenv"
    # --conda-env '' opts out; a script job does not inherit it either.
    none = gflow.submit("--conda-env", "", "echo plain", env=env)
    assert gflow.wait_state(none)["conda_env"] is None
    script = gflow.work / "s.sh"
    script.write_text("#!/bin/bash\necho script\n")
    s = gflow.submit(str(script), env=env)
    assert gflow.wait_state(s)["conda_env"] is None
    # A directive names it for a script.
    script.write_text("#!/bin/bash\n# GFLOW --conda-env myenv\ntool\n")
    s = gflow.submit(str(script), env=env)
    j = gflow.wait_state(s)
    assert (j["state"], j["conda_env"]) == ("CD", "myenv"), j
    assert gflow.log(s).strip() == "tool from myenv"


def test_missing_environment_fails_the_job_with_the_reason(gflow):
    env = conda_env(gflow)
    job = gflow.submit("--conda-env", "nosuch", "echo never", env=env)
    j = gflow.wait_state(job)
    assert j["state"] == "F", j
    assert j["reason"].startswith("LaunchFailed: conda environment 'nosuch' not found"), j
    assert "never" not in gflow.log(job)
    row = parse_table(gflow.run("gqueue", "-a", "-f", "JOBID,ST", check=True).stdout)[0]
    assert row["ST"] == "F"


def test_conda_env_survives_a_restart(gflow):
    env = conda_env(gflow)
    job = gflow.submit("--hold", "--conda-env", "myenv", "tool", env=env)
    gflow.down(check=True)
    gflow.up()
    assert gflow.job(job)["conda_env"] == "myenv"
    gflow.run("gjob", "release", job, check=True)
    j = gflow.wait_state(job)
    assert j["state"] == "CD" and gflow.log(job).strip() == "tool from myenv", j
