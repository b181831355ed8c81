"""A root daemon's shim looks for conda and the job's environment as the job's user
(DESIGN.md §6): a CONDA_EXE or --conda-env path under a directory only root can read is
"not found", in the same words as one that does not exist, so a user learns nothing
about files they could not read. Needs root: it makes a throwaway user (removed after)."""
import os


from conftest import as_user
from test_shim import fake_conda, make_env


def test_conda_paths_only_root_can_see_are_not_found(throwaway_user, make_gflow):
    pw = throwaway_user
    g = make_gflow()
    os.chmod(g.root, 0o755)
    work = g.root / "userwork"
    work.mkdir()
    os.chown(work, pw.pw_uid, pw.pw_gid)
    public = fake_conda(g.root / "conda")
    secret = g.root / "secret"
    secret.mkdir(mode=0o700)
    hidden_conda = fake_conda(secret / "conda")
    make_env(secret / "env", "tool from the hidden env")
    user = as_user(pw.pw_uid, pw.pw_gid)

    def job(*args, conda_exe):
        env = {"CONDA_EXE": str(conda_exe), "HOME": "/nonexistent"}
        jid = g.submit(*args, user=user, cwd=work, env=env)
        return g.wait_state(jid, timeout=20)

    # An environment the user cannot see is reported as missing, like one that is.
    hidden = job("--conda-env", str(secret / "env"), "tool", conda_exe=public)
    missing = job("--conda-env", str(secret / "nosuch"), "tool", conda_exe=public)
    for j, path in ((hidden, secret / "env"), (missing, secret / "nosuch")):
        assert j["state"] == "F", j
        assert j["reason"] == (f"LaunchFailed: conda environment '{path}' not found "
                               f"(looked in {path})"), j

    # A conda the user cannot run is not found either, in the same words as a missing one.
    hidden = job("--conda-env", "myenv", "tool", conda_exe=hidden_conda)
    absent = secret / "none" / "bin" / "conda"
    missing = job("--conda-env", "myenv", "tool", conda_exe=absent)
    assert hidden["state"] == missing["state"] == "F"
    assert hidden["reason"].startswith("LaunchFailed: conda not found"), hidden
    assert (hidden["reason"].replace(str(hidden_conda), "X")
            == missing["reason"].replace(str(absent), "X")), (hidden, missing)

    # The user's own view is unchanged: the public conda and its environment work.
    ok = job("--conda-env", "myenv", "tool", conda_exe=public)
    assert ok["state"] == "CD", (ok, g.log(ok["id"]))
    assert g.log(ok["id"]).strip() == "tool from myenv"
    # Root, whose jobs run as root, does see the hidden environment.
    jid = g.submit("--conda-env", str(secret / "env"), "tool",
                   env={"CONDA_EXE": str(public)})
    j = g.wait_state(jid, timeout=20)
    assert j["state"] == "CD", (j, g.log(jid))
    assert g.log(jid).strip() == "tool from the hidden env"
