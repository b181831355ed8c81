"""A job runs with its submitter's umask: gbatch captures it (or --umask gives one), the
daemon stores it with the job, `gjob show` and the API show it, and the shim applies it
before exec. A job stored without one (an API client that leaves it out, a job of an older
version) runs with 0077, gflowd's own."""
import os
import stat
import subprocess

from conftest import binary, parse_show


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def submit_with_umask(g, mask, *args):
    """gbatch from a shell whose umask is mask; returns the job id."""
    cmd = " ".join([f"umask {mask};", binary("gbatch"), "--parsable", *args])
    cp = subprocess.run(["sh", "-c", cmd], env=g.env, cwd=str(g.work), capture_output=True,
                        text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    return int(cp.stdout.strip())


def test_job_gets_the_submitters_umask(gflow):
    a = submit_with_umask(gflow, "022", "sh -c 'touch f022; mkdir d022'")
    b = submit_with_umask(gflow, "027", "sh -c 'touch f027'")
    # --umask wins over the shell's.
    c = submit_with_umask(gflow, "022", "--umask", "0002", "sh -c 'touch f002'")
    for jid in (a, b, c):
        assert gflow.wait_state(jid)["state"] == "CD", gflow.log(jid)
    assert mode_of(gflow.work / "f022") == 0o644
    assert mode_of(gflow.work / "d022") == 0o755
    assert mode_of(gflow.work / "f027") == 0o640
    assert mode_of(gflow.work / "f002") == 0o664
    assert gflow.job(a)["umask"] == "0022"
    assert gflow.job(c)["umask"] == "0002"
    show = parse_show(gflow.run("gjob", "show", b, check=True).stdout)[0]
    assert show["Umask"] == "0027"


def test_umask_directive_update_and_redo(gflow):
    script = gflow.work / "job.sh"
    script.write_text("#!/bin/sh\n# GFLOW --umask 077\n# GFLOW --hold\ntouch \"$1\"\n")
    jid = submit_with_umask(gflow, "022", str(script))
    assert gflow.job(jid)["umask"] == "0077"
    # The owner may change it while the job waits; a bad value is refused.
    cp = gflow.run("gjob", "update", jid, "--umask", "9")
    assert cp.returncode == 2 and "invalid umask '9'" in cp.stderr, cp.stderr
    r = gflow.api("PATCH", f"/v1/jobs/{jid}", {"umask": 18})
    assert r.status == 400 and "'umask'" in r.json()["error"], r
    cp = gflow.run("gjob", "update", jid, "--umask", "026", check=True)
    assert "umask" in cp.stdout, cp.stdout
    assert gflow.job(jid)["umask"] == "0026"
    # A redo carries the job's umask.
    gflow.run("gcancel", jid, check=True)
    gflow.wait_state(jid)
    cp = gflow.run("gjob", "redo", jid, check=True)
    redo = max(j["id"] for j in gflow.jobs(states="PD,H"))
    assert redo != jid, cp.stdout
    assert gflow.job(redo)["umask"] == "0026"


def test_job_without_umask_runs_with_0077(gflow):
    r = gflow.api("POST", "/v1/jobs", {"command": "touch old", "workdir": str(gflow.work),
                                       "env": {"PATH": "/usr/bin:/bin"}})
    assert r.status == 201, r
    jid = r.json()["jobs"][0]["id"]
    assert gflow.wait_state(jid)["state"] == "CD", gflow.log(jid)
    assert gflow.job(jid)["umask"] is None
    assert mode_of(gflow.work / "old") == 0o600
    show = parse_show(gflow.run("gjob", "show", jid, check=True).stdout)[0]
    assert "Umask" not in show  # none given: left out, as gflow leaves out empty fields
    show = parse_show(gflow.run("gjob", "show", "-v", jid, check=True).stdout)[0]
    assert show["Umask"] == "0077 (none given)"
