"""[hooks] pre / post / timeout (issue 29, "Beyond gflow"; gflow #111): the admin's
commands run by the job's shim before and after each job, as the job's user, with its
environment and workdir, their output in the job's log. A failing pre hook keeps the job
from running (F PrologFailed), a failing post hook makes it F EpilogFailed with its own
exit code kept, a hook past hooks.timeout is killed and has failed, and the post hook
runs after a cancel too. The tests that switch users need root (a throwaway user)."""
import os

import pytest

from conftest import as_user, wait_for


def hooks_env(pre=None, post=None, timeout=None, **more):
    """The daemon's environment setting the [hooks] keys (GFLOW_HOOKS__*)."""
    env = {"GFLOW_DAEMON__KILL_GRACE_SECS": "1", **more}
    if pre is not None:
        env["GFLOW_HOOKS__PRE"] = pre
    if post is not None:
        env["GFLOW_HOOKS__POST"] = post
    if timeout is not None:
        env["GFLOW_HOOKS__TIMEOUT"] = timeout
    return env


def test_hooks_run_as_the_jobs_user_with_its_variables(throwaway_user, make_gflow):
    pw = throwaway_user
    pre = ('echo "pre uid=$(id -u) gid=$(id -g) job=$GFLOW_JOB_ID hook=$GFLOW_HOOK '
           'cuda=$CUDA_VISIBLE_DEVICES mine=$MYVAR pwd=$PWD"; touch pre-was-here')
    post = 'echo "post uid=$(id -u) hook=$GFLOW_HOOK code=$GFLOW_JOB_EXIT_CODE mine=$MYVAR"'
    g = make_gflow(env=hooks_env(pre=pre, post=post), start=False)
    g.up("--simulate-gpus", 2)
    os.chmod(g.root, 0o755)
    work = g.root / "userwork"
    work.mkdir()
    os.chown(work, pw.pw_uid, pw.pw_gid)
    user = as_user(pw.pw_uid, pw.pw_gid)
    jid = g.submit("-g", "1", 'test -e pre-was-here && echo "job ran"; exit 3', user=user,
                   cwd=work, env={"MYVAR": "from-the-submitter"})
    j = g.wait_state(jid, timeout=20)
    log = g.log(jid)
    # The post hook succeeded: the job's own outcome stands.
    assert j["state"] == "F" and j["reason"] == "NonZeroExitCode" and j["exit_code"] == 3, (j, log)
    lines = log.splitlines()
    assert lines[0] == "gflow-shim: pre hook", log
    # CUDA_VISIBLE_DEVICES is the job's one GPU, as the job itself gets it.
    assert lines[1] == (f"pre uid={pw.pw_uid} gid={pw.pw_gid} job={jid} hook=pre "
                        f"cuda={j['gpu_ids']} mine=from-the-submitter pwd={work}"), (log, j)
    assert j["gpu_ids"] in ("0", "1"), j
    assert lines[2] == "job ran", log
    assert lines[3] == "gflow-shim: post hook", log
    assert lines[4] == f"post uid={pw.pw_uid} hook=post code=3 mine=from-the-submitter", log
    assert len(lines) == 5, log
    # The pre hook's file was made as the user, in the job's workdir.
    st = os.stat(work / "pre-was-here")
    assert (st.st_uid, st.st_gid) == (pw.pw_uid, pw.pw_gid)


def test_failing_pre_hook_keeps_the_job_from_running(make_gflow):
    g = make_gflow(env=hooks_env(pre='echo "no scratch space"; exit 3',
                                 post='echo "post code=[$GFLOW_JOB_EXIT_CODE]"'))
    jid = g.submit("touch job-ran")
    j = g.wait_state(jid, timeout=20)
    log = g.log(jid)
    assert j["state"] == "F", (j, log)
    assert j["reason"] == "PrologFailed: pre hook exited with status 3", j
    assert j["exit_code"] is None, j
    assert not (g.work / "job-ran").exists()
    assert log.splitlines() == [
        "gflow-shim: pre hook",
        "no scratch space",
        "gflow-shim: pre hook exited with status 3; the job is not started",
        "gflow-shim: post hook",
        "post code=[]",  # the job never ran: no exit code to give
    ], log
    # Shown as such by the CLI: gqueue's REASON and gjob show.
    cp = g.run("gqueue", "-a", "-f", "JOBID,ST,REASON", check=True)
    assert "PrologFailed" in cp.stdout, cp.stdout
    cp = g.run("gjob", "show", jid, check=True)
    assert "PrologFailed: pre hook exited with status 3" in cp.stdout, cp.stdout
    # A job depending on it (afterok) does not run either.
    dep = g.submit("--depends-on", str(jid), "true")
    assert g.wait_state(dep, ("F", "CA"), timeout=20)["reason"].startswith("DependencyFailed")


def test_failing_post_hook_is_epilog_failed_with_the_exit_code_kept(make_gflow):
    g = make_gflow(env=hooks_env(post='echo "cleanup failed" >&2; exit 4'))
    ok = g.submit("echo fine")
    bad = g.submit("exit 2")
    j = g.wait_state(ok, timeout=20)
    assert j["state"] == "F", (j, g.log(ok))
    assert j["reason"] == "EpilogFailed: post hook exited with status 4", j
    assert j["exit_code"] == 0, j
    assert g.log(ok).splitlines() == [
        "fine",
        "gflow-shim: post hook",
        "cleanup failed",
        "gflow-shim: post hook exited with status 4",
    ], g.log(ok)
    j = g.wait_state(bad, timeout=20)
    assert j["state"] == "F" and j["exit_code"] == 2, j
    assert j["reason"] == "EpilogFailed: post hook exited with status 4", j
    out = g.run("gjob", "show", bad, check=True).stdout
    assert "EpilogFailed: post hook exited with status 4" in out, out


def test_hanging_hook_is_killed_at_its_timeout(make_gflow):
    g = make_gflow(env=hooks_env(pre="echo waiting; sleep 60", timeout="1s"))
    jid = g.submit("touch job-ran")
    j = g.wait_state(jid, timeout=20)
    assert j["state"] == "F", (j, g.log(jid))
    assert j["reason"] == ("PrologFailed: pre hook timed out after 1 s (hooks.timeout) and was "
                           "killed"), j
    assert not (g.work / "job-ran").exists()
    assert "waiting\n" in g.log(jid)
    # A post hook past its timeout: EpilogFailed, the job's exit code kept.
    g2 = make_gflow(env=hooks_env(post="sleep 60 & wait", timeout="1s"))
    jid = g2.submit("true")
    j = g2.wait_state(jid, timeout=20)
    assert j["state"] == "F" and j["exit_code"] == 0, (j, g2.log(jid))
    assert j["reason"] == ("EpilogFailed: post hook timed out after 1 s (hooks.timeout) and "
                           "was killed"), j


def test_post_hook_runs_after_a_cancel(make_gflow):
    g = make_gflow(env=hooks_env(post='echo "post after code=$GFLOW_JOB_EXIT_CODE"'))
    jid = g.submit("echo started; sleep 60")
    g.wait_state(jid, "R")
    wait_for(lambda: "started" in g.log(jid), "the job to start")
    g.run("gcancel", jid, check=True)
    j = g.wait_state(jid, timeout=20)
    assert j["state"] == "CA" and j["reason"] == "CancelledByUser", j
    lines = g.log(jid).splitlines()
    assert lines[-2:] == ["gflow-shim: post hook", "post after code=143"], lines


def test_cancel_during_the_pre_hook(make_gflow):
    g = make_gflow(env=hooks_env(pre="echo pre-started; sleep 60",
                                 post='echo "post ran"'))
    jid = g.submit("touch job-ran")
    g.wait_state(jid, "R")
    wait_for(lambda: "pre-started" in g.log(jid), "the pre hook to start")
    g.run("gcancel", jid, check=True)
    j = g.wait_state(jid, timeout=20)
    assert j["state"] == "CA" and j["reason"] == "CancelledByUser", j
    assert not (g.work / "job-ran").exists()
    assert "post ran" in g.log(jid), g.log(jid)


def test_hooks_come_from_the_config_file_and_reload(make_gflow):
    g = make_gflow(start=False)
    conf = g.root / "gflow.toml"
    conf.write_text("")
    g.up("-c", conf)
    first = g.submit("echo one")
    assert g.wait_state(first, timeout=20)["state"] == "CD"
    assert g.log(first) == "one\n"
    conf.write_text('[hooks]\npre = "echo hello from pre"\ntimeout = "5m"\n')
    out = g.gflowd("-c", conf, "reload", check=True)
    assert "hooks.pre" in out.stdout + out.stderr, out
    second = g.submit("echo two")
    assert g.wait_state(second, timeout=20)["state"] == "CD"
    assert g.log(second) == "gflow-shim: pre hook\nhello from pre\ntwo\n"
    # gflowd init lists the keys with their defaults.
    init = g.root / "init.toml"
    g.gflowd("-c", init, "init", check=True)
    text = init.read_text()
    for line in ("[hooks]", '# pre = ""', '# post = ""', '# timeout = "60s"'):
        assert line in text, text


@pytest.mark.parametrize("value, needle", [
    ('timeout = "soon"', "hooks.timeout"),
    ('pre = 3', "hooks.pre must be a string"),
    ('prolog = "x"', "unknown key 'hooks.prolog'"),
])
def test_bad_hooks_settings_are_refused(make_gflow, value, needle):
    g = make_gflow(start=False)
    conf = g.root / "gflow.toml"
    conf.write_text(f"[hooks]\n{value}\n")
    cp = g.gflowd("-c", conf, "up")
    assert cp.returncode != 0, cp
    msg = (cp.stderr + cp.stdout).strip()
    assert needle in msg, msg


def test_hooks_around_jobs_with_a_shim_of_their_own(make_gflow):
    """Copies (--gpus-per-task), a terminal (--pty) and a memory limit: each hook runs
    once, with the job's whole set of GPUs, and its output lands in the log."""
    g = make_gflow(env=hooks_env(pre='echo "pre cuda=$CUDA_VISIBLE_DEVICES"',
                                 post='echo "post code=$GFLOW_JOB_EXIT_CODE"'), start=False)
    g.up("--simulate-gpus", 2)
    copies = g.submit("-g", "2", "--gpus-per-task", "1", 'echo "rank $RANK"')
    pty = g.submit("--pty", "echo on a terminal; exit 5")
    mem = g.submit("--memory", "64M", "echo limited")
    j = g.wait_state(copies, timeout=20)
    assert j["state"] == "CD", (j, g.log(copies))
    lines = g.log(copies).splitlines()
    assert lines[:2] == ["gflow-shim: pre hook", "pre cuda=0,1"], lines
    assert sorted(lines[2:4]) == ["rank 0", "rank 1"], lines
    assert lines[4:] == ["gflow-shim: post hook", "post code=0"], lines
    j = g.wait_state(pty, timeout=20)
    assert j["state"] == "F" and j["exit_code"] == 5, (j, g.log(pty))
    text = g.log(pty).replace("\r\n", "\n")
    assert text.startswith("gflow-shim: pre hook\npre cuda=\non a terminal\n"), text
    assert text.endswith("gflow-shim: post hook\npost code=5\n"), text
    j = g.wait_state(mem, timeout=20)
    assert j["state"] == "CD", (j, g.log(mem))
    assert g.log(mem) == ("gflow-shim: pre hook\npre cuda=\nlimited\n"
                          "gflow-shim: post hook\npost code=0\n")
