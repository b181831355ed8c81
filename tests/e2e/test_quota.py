"""Quotas (issue 12): per-user and per-project limits, gflow's [quota] keys plus
max_gpu_hours per period. A submission over max_queued_jobs is refused naming the limit;
a job over a running limit waits with reason Quota until another ends; gctl quota
set/show/clear are runtime overrides (admins), kept across a restart. On the NVML
simulator; jobs wait for a file so the test says when they end."""
import os

from conftest import as_user, assert_one_line_error, ensure_test_user, wait_for


def wait_go(name):
    return f"while [ ! -e {name} ]; do sleep 0.02; done"


def sim(make_gflow, n=4, conf=None):
    g = make_gflow(start=False)
    args = ("-c", conf) if conf else ()
    g.up(*args, "--simulate-gpus", n)
    return g


def write_conf(g, text):
    path = g.root / "gflow.toml"
    path.write_text(text)
    return path


def quota_set(g, *args, **kw):
    return g.run("gctl", "quota", "set", *args, **kw)


def status(g, **query):
    q = "&".join(f"{k}={v}" for k, v in query.items())
    r = g.api("GET", "/v1/quotas" + ("?" + q if q else ""))
    assert r.status == 200, r
    return r.json()


def subject(g, scope, name):
    for s in status(g)["subjects"]:
        if s["scope"] == scope and s["name"] == name:
            return s
    return None


def reason(g, job_id):
    return g.job(job_id)["reason"]


def test_queued_limit_refuses_at_submit_and_counts_arrays(make_gflow):
    g = sim(make_gflow)
    user = g.run("id", "-un", check=True).stdout.strip()
    quota_set(g, "--user", user, "--max-queued-jobs", 3, check=True)
    held = [g.submit("-H", "true") for _ in range(2)]
    # An array of 2 would make 4 queued jobs: refused whole, nothing queued.
    cp = g.run("gbatch", "--array", "1-2", "-H", "true")
    assert_one_line_error(cp, "gbatch", 1, f"user {user} has 2 queued jobs and this submission "
                          "adds 2, the limit max_queued_jobs is 3",
                          f"gctl quota show --user {user}")
    assert len(g.jobs(state="PD,H")) == 2
    third = g.submit("-H", "true")
    cp = g.run("gbatch", "true")
    assert_one_line_error(cp, "gbatch", 1, f"user {user} has 3 queued jobs, the limit "
                          "max_queued_jobs is 3; wait or ask an admin "
                          f"(gctl quota show --user {user})")
    assert len(g.jobs(state="PD,H")) == 3
    # Queued jobs that end (or start) make room.
    g.run("gcancel", held[0], check=True)
    g.wait_state(held[0])
    jid = g.submit("true")
    assert g.wait_state(jid)["state"] == "CD"
    assert subject(g, "user", user)["usage"]["queued_jobs"] == 2
    fourth = g.submit("-H", "true")
    # gjob redo makes a job too: refused the same way.
    cp = g.run("gjob", "redo", jid)
    assert_one_line_error(cp, "gjob", 1, f"user {user} has 3 queued jobs, the limit "
                          "max_queued_jobs is 3")
    assert len(g.jobs(state="PD,H")) == 3
    g.run("gcancel", held[1], third, fourth, check=True)


def test_running_limit_holds_job_with_reason_quota_until_another_ends(make_gflow):
    g = sim(make_gflow)
    user = g.run("id", "-un", check=True).stdout.strip()
    quota_set(g, "--user", user, "--max-running-jobs", 1, check=True)
    first = g.submit("-g", "1", wait_go("go1"))
    g.wait_state(first, "R")
    second = g.submit("-g", "1", wait_go("go2"))
    wait_for(lambda: reason(g, second) == "Quota", "the second job to wait for its quota")
    assert g.job(second)["state"] == "PD"
    cp = g.run("gqueue", "-f", "JOBID,ST,NODELIST(REASON)", check=True)
    assert "(Quota)" in cp.stdout, cp.stdout
    use = subject(g, "user", user)
    assert use["limits"]["max_running_jobs"] == 1 and use["usage"]["running_jobs"] == 1, use
    (g.work / "go1").touch()
    g.wait_state(first)
    g.wait_state(second, "R")
    (g.work / "go2").touch()
    assert g.wait_state(second)["state"] == "CD"


def test_running_gpus_limit_lets_other_users_start(make_gflow):
    g = sim(make_gflow, n=4)
    uid, gid, _ = ensure_test_user()
    os.chmod(g.root, 0o755)
    os.chmod(g.work, 0o777)
    user = g.run("id", "-un", check=True).stdout.strip()
    quota_set(g, "--user", user, "--max-running-gpus", 2, check=True)
    a = g.submit("-g", "2", wait_go("go"))
    g.wait_state(a, "R")
    b = g.submit("-g", "1", wait_go("go"))
    wait_for(lambda: reason(g, b) == "Quota", "root's third GPU to be over the quota")
    # Another user's job takes the free GPUs meanwhile.
    other = g.submit("-g", "2", wait_go("go"), user=as_user(uid, gid))
    g.wait_state(other, "R")
    assert g.job(b)["state"] == "PD"
    (g.work / "go").touch()
    for j in (a, b, other):
        assert g.wait_state(j, timeout=20)["state"] == "CD"


def test_per_project_limit(make_gflow):
    g = sim(make_gflow)
    quota_set(g, "--project", "nlp", "--max-running-jobs", 1, check=True)
    a = g.submit("-P", "nlp", wait_go("go"))
    g.wait_state(a, "R")
    b = g.submit("-P", "nlp", "true")
    free = g.submit("-P", "cv", "true")  # another project is not limited
    assert g.wait_state(free)["state"] == "CD"
    wait_for(lambda: reason(g, b) == "Quota", "the second nlp job to wait for its quota")
    use = subject(g, "project", "nlp")
    assert use["usage"] == {"running_jobs": 1, "running_gpus": 0, "queued_jobs": 1,
                            "gpu_hours": 0.0}, use
    # A project's queued limit refuses at submit too.
    quota_set(g, "--project", "nlp", "--max-queued-jobs", 1, check=True)
    cp = g.run("gbatch", "-P", "nlp", "true")
    assert_one_line_error(cp, "gbatch", 1, "project nlp has 1 queued job, the limit "
                          "max_queued_jobs is 1", "gctl quota show --project nlp")
    (g.work / "go").touch()
    assert g.wait_state(b)["state"] == "CD"


def test_gctl_quota_set_show_clear_and_non_admin_refused(make_gflow):
    g = sim(make_gflow)
    cp = quota_set(g, "--user", "alice", "--max-running-gpus", 2, "--max-gpu-hours", "1.5",
                   check=True)
    assert "alice" in cp.stdout
    cp = g.run("gctl", "quota", "show", "alice", check=True)
    lines = cp.stdout.splitlines()
    assert lines[0].startswith("GPU-hours period: week (from "), lines
    row = [ln.split() for ln in lines if ln.startswith("user")]
    assert row == [["user", "alice", "0/-", "0/2", "0/-", "0.00/1.5"]], cp.stdout
    assert status(g, user="alice")["subjects"][0]["overrides"]["max_running_gpus"] == 2
    # Clear one limit, then the rest.
    g.run("gctl", "quota", "clear", "--user", "alice", "--limits", "max_gpu_hours", check=True)
    lim = status(g, user="alice")["subjects"][0]["limits"]
    assert lim["max_gpu_hours"] is None and lim["max_running_gpus"] == 2, lim
    g.run("gctl", "quota", "clear", "--user", "alice", check=True)
    assert subject(g, "user", "alice") is None
    # Defaults.
    quota_set(g, "--default-user", "--max-running-jobs", 5, check=True)
    assert status(g)["default_user"]["max_running_jobs"] == 5
    assert status(g, user="bob")["subjects"][0]["limits"]["max_running_jobs"] == 5
    # Everyone may look; only admins may change.
    uid, gid, _ = ensure_test_user()
    os.chmod(g.root, 0o755)
    me = as_user(uid, gid)
    assert g.run("gctl", "quota", "show", user=me).returncode == 0
    cp = quota_set(g, "--user", "gflowtest", "--max-running-jobs", 100, user=me)
    assert_one_line_error(cp, "gctl", 1, "only root, the daemon's user or members of "
                          "daemon.admin_group may change quotas")
    cp = g.run("gctl", "quota", "clear", "--default-user", user=me)
    assert_one_line_error(cp, "gctl", 1, "may change quotas")
    assert status(g)["default_user"]["max_running_jobs"] == 5
    # Bad input: one line, exit 2, nothing changed.
    cp = quota_set(g, "--user", "alice")
    assert_one_line_error(cp, "gctl", 2, "needs a limit")
    cp = quota_set(g, "--max-running-jobs", 1)
    assert_one_line_error(cp, "gctl", 2, "needs one of --user U, --project P")
    cp = quota_set(g, "--user", "alice", "--max-running-jobs", "-1")
    assert_one_line_error(cp, "gctl", 2, "invalid value '-1' for --max-running-jobs")
    cp = g.run("gctl", "quota", "clear", "--user", "alice", "--limits", "max_foo")
    assert_one_line_error(cp, "gctl", 1, "unknown limit 'max_foo'")
    cp = g.run("gctl", "quota", "frob")
    assert_one_line_error(cp, "gctl", 2, "unknown quota action 'frob'")


def test_overrides_survive_restart(make_gflow):
    g = sim(make_gflow)
    quota_set(g, "--project", "nlp", "--max-queued-jobs", 0, check=True)
    quota_set(g, "--default-user", "--max-gpu-hours", 10, check=True)
    assert g.down().returncode == 0
    g.up("--simulate-gpus", 4)
    st = status(g)
    assert st["default_user"]["max_gpu_hours"] == 10.0, st
    assert subject(g, "project", "nlp")["limits"]["max_queued_jobs"] == 0
    cp = g.run("gbatch", "-P", "nlp", "true")
    assert_one_line_error(cp, "gbatch", 1, "project nlp has 0 queued jobs, the limit "
                          "max_queued_jobs is 0")


def test_config_baseline_and_overrides_on_top(make_gflow):
    g = make_gflow(start=False)
    user = g.run("id", "-un", check=True).stdout.strip()
    conf = write_conf(g, f"""
[quota]
period = "day"
default_user = {{ max_running_gpus = 3 }}

[quota.users.{user}]
max_running_jobs = 1

[quota.projects.nlp]
max_queued_jobs = 5
""")
    g.up("-c", conf, "--simulate-gpus", 4)
    st = status(g, user=user)
    assert st["period"] == "day"
    lim = st["subjects"][0]["limits"]
    assert (lim["max_running_jobs"], lim["max_running_gpus"]) == (1, 3), lim
    a = g.submit(wait_go("go"))
    g.wait_state(a, "R")
    b = g.submit("true")
    wait_for(lambda: reason(g, b) == "Quota", "the baseline's max_running_jobs to hold b")
    # An override wins over the baseline, field by field.
    quota_set(g, "--user", user, "--max-running-jobs", 2, check=True)
    assert g.wait_state(b)["state"] == "CD"
    lim = status(g, user=user)["subjects"][0]["limits"]
    assert (lim["max_running_jobs"], lim["max_running_gpus"]) == (2, 3), lim
    (g.work / "go").touch()
    g.wait_state(a)
    # gflowd reload applies a changed [quota]; a changed period needs a restart.
    write_conf(g, "[quota]\nperiod = \"month\"\ndefault_user = { max_running_gpus = 1 }\n")
    out = g.gflowd("-c", conf, "reload", check=True)
    assert "quota.period" in out.stdout + out.stderr, out
    st = status(g, user=user)
    assert st["period"] == "day" and st["default_user"]["max_running_gpus"] == 1, st
    assert st["subjects"][0]["limits"]["max_running_jobs"] == 2  # the override stays
    # A bad [quota] is refused at start with the file, line and key.
    bad = write_conf(g, "[quota.users.x]\nmax_running_jobs = -1\n")
    assert g.down().returncode == 0
    cp = g.gflowd("-c", bad, "up")
    assert cp.returncode != 0
    assert f"{bad}:2: quota.users.x.max_running_jobs must be an integer >= 0" in \
        cp.stdout + cp.stderr, cp


def test_gpu_hours_limit_counts_ended_jobs_and_survives_restart(make_gflow):
    g = sim(make_gflow)
    user = g.run("id", "-un", check=True).stdout.strip()
    a = g.submit("-g", "2", "sleep 1")
    assert g.wait_state(a)["state"] == "CD"
    hours = status(g, user=user)["subjects"][0]["usage"]["gpu_hours"]
    assert 0 < hours < 0.01, hours
    # A limit below what was used: the next GPU job waits; one without GPUs runs.
    quota_set(g, "--user", user, "--max-gpu-hours", "0.0001", check=True)
    b = g.submit("-g", "1", "true")
    wait_for(lambda: reason(g, b) == "Quota", "the GPU-hours quota to hold b")
    c = g.submit("true")
    assert g.wait_state(c)["state"] == "CD"
    # The use is read back from the store at start-up.
    assert g.down().returncode == 0
    g.up("--simulate-gpus", 4)
    again = status(g, user=user)["subjects"][0]["usage"]["gpu_hours"]
    assert abs(again - hours) < 1e-6, (again, hours)
    wait_for(lambda: reason(g, b) == "Quota", "b to wait for the quota after the restart")
    g.run("gctl", "quota", "clear", "--user", user, check=True)
    assert g.wait_state(b)["state"] == "CD"


def test_quota_help_and_completion(make_gflow, env):
    from test_compat_gbatch import complete, help_flags
    from conftest import binary
    import subprocess
    script = subprocess.run([binary("gbatch"), "completion", "bash"], capture_output=True,
                            text=True, check=True, env=env).stdout
    flags = help_flags([binary("gctl"), "quota"])
    assert "--max-gpu-hours" in flags and "--default-project" in flags
    assert complete(script, "gctl quota -") == flags
    assert complete(script, "gctl quota ") == {"list", "show", "set", "remove", "clear"}
    assert complete(script, "gctl q") == {"quota"}
