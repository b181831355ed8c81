"""Users from LDAP/SSSD (issue 28, item 7): user lookups run off the event loop, with a
cache and a deadline; a lookup outage leaves a job waiting (PD, UserLookup) instead of
failing it; the systemd unit orders gflowd after nss-user-lookup.target; the statically
linked programs make no NSS call.

The directory service is tests/nss/libnss_gflowtest.c, a passwd source that answers for
the users listed in /run/gflow-nsstest/passwd, sleeps as long as /run/gflow-nsstest/slow
says and answers "unavailable" while /run/gflow-nsstest/down exists. The fixture installs
it in the library path and adds it to the passwd line of /etc/nsswitch.conf, and puts both
back afterwards. Only its own users are its business (any other name or uid is "not found"
at once), and the users of /etc/passwd are answered by "files" before it, so the tests
running meanwhile are not affected."""
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import BUILD_DIR, binary, wait_for

NSS_DIR = Path("/run/gflow-nsstest")
NSS_LIB = Path("/lib/x86_64-linux-gnu/libnss_gflowtest.so.2")
NSSWITCH = Path("/etc/nsswitch.conf")
NSS_UID = 61234
NSS_NAME = "gflownss1"
STRANGER_UID = 61999  # in no passwd source at all

STATIC_PROGRAMS = ("gbatch", "gqueue", "gjob", "gcancel", "gctl", "ginfo", "gstats", "gflow-mcp")
NSS_SYMBOLS = ("getpwuid", "getpwnam", "getpwent", "getgrgid", "getgrnam", "getgrent",
               "getgrouplist", "initgroups")


def write_atomic(path, text):
    tmp = path.with_name(path.name + ".gflowtest-tmp")
    tmp.write_text(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


@pytest.fixture
def nss_user():
    """(uid, gid, home) of NSS_NAME, a user only the gflowtest NSS module knows."""
    if os.geteuid() != 0:
        pytest.skip("installs an NSS module: needs root")
    built = BUILD_DIR / "libnss_gflowtest.so.2"
    if not built.exists():
        pytest.skip("libnss_gflowtest.so.2 is not built (a sanitizer build)")
    if not NSS_LIB.parent.is_dir():
        pytest.skip(f"no {NSS_LIB.parent}")
    original = NSSWITCH.read_text()
    home = Path(tempfile.mkdtemp(prefix="gflownss-", dir="/tmp"))
    os.chmod(home, 0o755)
    os.chown(home, NSS_UID, NSS_UID)
    try:
        NSS_DIR.mkdir(exist_ok=True)
        (NSS_DIR / "passwd").write_text(
            f"{NSS_NAME}:x:{NSS_UID}:{NSS_UID}:gflow nss test:{home}:/bin/sh\n")
        shutil.copyfile(built, NSS_LIB)
        lines = [l + " gflowtest" if l.startswith("passwd:") else l
                 for l in original.splitlines()]
        write_atomic(NSSWITCH, "\n".join(lines) + "\n")
        yield NSS_UID, NSS_UID, home
    finally:
        write_atomic(NSSWITCH, original)
        NSS_LIB.unlink(missing_ok=True)
        shutil.rmtree(NSS_DIR, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


def nss_down(on):
    p = NSS_DIR / "down"
    if on:
        p.touch()
    else:
        p.unlink(missing_ok=True)


def nss_slow(secs):
    p = NSS_DIR / "slow"
    if secs:
        p.write_text(f"{secs}\n")
    else:
        p.unlink(missing_ok=True)


def as_nss(uid, gid):
    """setpriv without --init-groups: that would look the user up itself."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


def open_to_all(g):
    """The sandbox's socket reachable by other users."""
    os.chmod(g.root, 0o755)
    return g


def submit_held(g, uid, gid, home):
    """A held job of the NSS user, submitted while its lookups answer."""
    cp = g.run("gbatch", "--parsable", "-H", "true", user=as_nss(uid, gid), cwd=home,
               env={"HOME": str(home)})
    assert cp.returncode == 0, cp.stderr
    return int(cp.stdout.split()[0])


def restart(g):
    """A daemon that has looked nobody up yet."""
    g.kill_daemon()
    g.up()


def test_outage_leaves_the_job_waiting_with_user_lookup_until_nss_is_back(make_gflow, nss_user):
    uid, gid, home = nss_user
    g = open_to_all(make_gflow())
    job = submit_held(g, uid, gid, home)
    nss_down(True)
    restart(g)
    g.run("gjob", "release", job, check=True)
    # Waits, retried with back-off, and is never failed.
    last = {}

    def waiting():
        j = last["job"] = g.job(job)
        return j["state"] == "PD" and j["reason"] == "UserLookup"
    try:
        wait_for(waiting, "the job to wait with UserLookup", timeout=10)
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen: {last.get('job')}") from None
    show = g.run("gjob", "show", job, check=True).stdout
    assert "UserLookup" in show, show
    queue = g.run("gqueue", "-u", "all", "-f", "JOBID,ST,REASON", check=True).stdout
    assert any(l.split()[:3] == [str(job), "PD", "UserLookup"] for l in queue.splitlines()), queue
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        j = g.job(job)
        assert j["state"] == "PD" and j["reason"] == "UserLookup", j
        time.sleep(0.2)
    assert "no user with uid" not in g.daemon_log()
    nss_down(False)
    j = g.wait_state(job, timeout=30)
    assert j["state"] == "CD", (j["reason"], j.get("reason_detail"), g.daemon_log()[-3000:])


def test_a_request_of_a_user_nss_cannot_answer_is_refused_clearly(make_gflow, nss_user):
    uid, gid, home = nss_user
    g = open_to_all(make_gflow())
    nss_down(True)
    cp = g.run("gbatch", "true", user=as_nss(uid, gid), cwd=home, env={"HOME": str(home)})
    assert cp.returncode != 0, cp.stdout
    lines = [l for l in cp.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and f"uid {uid}" in lines[0] and "retry" in lines[0], cp.stderr
    assert g.jobs() == [], "nothing was submitted"
    nss_down(False)
    # Looked up again after a back-off: a retry in a moment gets through.
    got = {}

    def submitted():
        got["cp"] = g.run("gbatch", "--parsable", "true", user=as_nss(uid, gid), cwd=home,
                          env={"HOME": str(home)})
        return got["cp"].returncode == 0
    wait_for(submitted, "a submission once NSS answers", timeout=20, interval=0.5)
    j = g.wait_state(int(got["cp"].stdout.split()[0]), timeout=15)
    assert j["state"] == "CD" and j["user"] == NSS_NAME, j


def test_slow_lookups_do_not_stall_other_users(make_gflow, nss_user):
    uid, gid, home = nss_user
    g = open_to_all(make_gflow())
    job = submit_held(g, uid, gid, home)
    nss_slow(4)
    restart(g)
    g.run("gjob", "release", job, check=True)
    # The NSS user's own request answers at once too (its user is being looked up).
    mine = {}
    t = threading.Thread(target=lambda: mine.update(cp=g.run(
        "gqueue", user=as_nss(uid, gid), cwd=home, env={"HOME": str(home)})))
    t.start()
    worst = 0.0
    for _ in range(5):
        t0 = time.monotonic()
        g.run("gqueue", "-a", check=True)
        other = g.submit("true")
        worst = max(worst, time.monotonic() - t0)
        time.sleep(0.3)
    t.join(30)
    assert worst < 1.5, f"gqueue + gbatch of root took {worst:.2f} s while NSS was slow"
    assert g.wait_state(other, timeout=10)["state"] == "CD"
    assert mine["cp"].returncode in (0, 1), mine["cp"]
    j = g.wait_state(job, timeout=30)
    assert j["state"] == "CD", (j["reason"], j.get("reason_detail"), g.daemon_log()[-3000:])


def test_the_unit_starts_after_nss_user_lookup(tmp_path):
    root = tmp_path / "root"
    cp = subprocess.run([binary("gflowd"), "--system", "service", "install", "--root", str(root)],
                        capture_output=True, text=True, env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert cp.returncode == 0, cp.stderr
    unit = (root / "etc/systemd/system/gflowd.service").read_text()
    after = [l for l in unit.splitlines() if l.startswith("After=")]
    wants = [l for l in unit.splitlines() if l.startswith("Wants=")]
    assert after and "nss-user-lookup.target" in after[0].split("=", 1)[1].split(), unit
    assert wants and "nss-user-lookup.target" in wants[0].split("=", 1)[1].split(), unit


def static_programs():
    out = []
    for p in STATIC_PROGRAMS:
        f = BUILD_DIR / p
        if f.exists() and "static" in subprocess.run(
                ["file", "-L", str(f)], capture_output=True, text=True).stdout:
            out.append(f)
    return out


def test_static_programs_link_no_nss_function():
    progs = static_programs()
    if not progs:
        pytest.skip("the programs are not linked statically here (a sanitizer build)")
    for f in progs:
        syms = subprocess.run(["nm", str(f)], capture_output=True, text=True, check=True).stdout
        names = {l.split()[-1] for l in syms.splitlines() if l.split()}
        bad = sorted(n for n in names if n.split("@")[0] in NSS_SYMBOLS
                     or n.split("@")[0] in {s + "_r" for s in NSS_SYMBOLS})
        assert not bad, f"{f.name} links {bad}"


def test_static_cli_without_home(make_gflow):
    if os.geteuid() != 0:
        pytest.skip("switches uids: needs root")
    g = open_to_all(make_gflow())
    bare = {k: v for k, v in g.env.items()
            if k not in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR")}
    # root: its home comes from /etc/passwd.
    cp = subprocess.run([binary("gqueue")], env=bare, capture_output=True, text=True, cwd="/")
    assert cp.returncode == 0, cp.stderr
    stranger = ["setpriv", f"--reuid={STRANGER_UID}", f"--regid={STRANGER_UID}", "--clear-groups"]
    # A uid no passwd source knows: the socket given, nothing needs a home.
    cp = subprocess.run(stranger + [binary("gqueue")], env=bare, capture_output=True, text=True,
                        cwd="/")
    assert cp.returncode == 0, cp.stderr
    # Nothing to go by: one line that says what to set.
    del bare["GFLOW_SOCKET"]
    bare = {k: v for k, v in bare.items() if not k.startswith("GFLOW_DAEMON__")}
    cp = subprocess.run(stranger + [binary("gqueue")], env=bare, capture_output=True, text=True,
                        cwd="/")
    lines = [l for l in cp.stderr.splitlines() if l.strip()]
    assert cp.returncode != 0 and len(lines) == 1, cp.stderr
    assert f"HOME is not set and uid {STRANGER_UID} is not in /etc/passwd" in lines[0], lines
    assert "set HOME" in lines[0], lines
