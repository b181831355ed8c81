"""A job's supplementary groups (issue 10): gflowd resolves a user's groups once and
passes them to the shim (--groups), cached until /etc/group changes, so a group added to
or removed from the user shows in the next job, and a stale cache never grants a group
the user no longer has. The tests switch users and need root; they create throwaway
users and groups."""
import os
import pwd
import subprocess

import pytest

from conftest import as_user, ensure_group, per_worker

NEW_GROUP = per_worker("gflowtest-late")


def job_groups(g, uid, gid, home, workdir):
    # The job's groups are those gflowd resolved: the shim, linked statically, looks up
    # none itself.
    job = g.submit("id -G", user=as_user(uid, gid), cwd=workdir,
                   env={"HOME": home, "USER": "x"})
    assert g.wait_state(job)["state"] == "CD", g.log(job)
    return set(int(x) for x in g.log(job).split())


def test_job_groups_follow_etc_group(make_gflow, owner):
    uid, gid, home = owner
    name = pwd.getpwuid(uid).pw_name
    g = make_gflow()
    os.chmod(g.root, 0o755)
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    late = ensure_group(NEW_GROUP)
    subprocess.run(["gpasswd", "-d", name, NEW_GROUP], capture_output=True)
    try:
        before = job_groups(g, uid, gid, home, workdir)
        assert gid in before and late not in before
        # Twice: the second job is started from the daemon's cache.
        assert job_groups(g, uid, gid, home, workdir) == before
        subprocess.run(["gpasswd", "-a", name, NEW_GROUP], check=True, capture_output=True)
        assert job_groups(g, uid, gid, home, workdir) == before | {late}
        subprocess.run(["gpasswd", "-d", name, NEW_GROUP], check=True, capture_output=True)
        assert job_groups(g, uid, gid, home, workdir) == before
    finally:
        subprocess.run(["gpasswd", "-d", name, NEW_GROUP], capture_output=True)


def test_root_job_keeps_the_daemons_groups(make_gflow):
    if os.geteuid() != 0:
        pytest.skip("needs a root daemon")
    g = make_gflow()
    job = g.submit("id -u; id -g; id -G")
    assert g.wait_state(job)["state"] == "CD", g.log(job)
    got = g.log(job).split("\n")
    assert got[0] == "0" and got[1] == "0", got
    assert set(int(x) for x in got[2].split()) == set(os.getgrouplist("root", 0))
