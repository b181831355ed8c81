"""gflow parity of gctl and gflowd (issue 11): gctl show-gpus's lines, gpu-process ignore
checking the GPU, set-gpus naming a missing GPU; gflowd init, reload, -v/-q,
--gpu-poll-interval-secs, restart keeping its start options, --gpus naming missing GPUs,
--user/--system, which daemon up/down/status act on, and gflowd's one-line errors.

Every daemon is the sandbox's (conftest.py) on simulated GPUs (test_gpus.py's fixtures).
The tests run as root: a root gflowd reads /etc/gflow/gflow.toml by default, so every
test that needs a config file passes -c, and the system paths are always overridden.
"""
import json
import os
import re
import signal

from conftest import (assert_not_running, assert_one_line_error, run_cli, wait_for,
                      write_json_atomic)
from test_gpus import (fixture_of, gpus_json, gpus_reread, outside_process, sim,  # noqa: F401
                       sim_gpu, sleeper)

LINE = re.compile(r"^(\d+)\t(available|in_use)(\trestricted)?(\t.+)?$")


def show_gpus(g):
    """gctl show-gpus: the per-GPU lines as {index: [fields after the index]}, and the
    lines after them."""
    out = g.run("gctl", "show-gpus", check=True).stdout.splitlines()
    rows, rest = {}, []
    for line in out:
        m = LINE.match(line)
        if m and not rest:
            rows[int(m.group(1))] = line.split("\t")[1:]
        else:
            rest.append(line)
    return rows, rest


# ---------------------------------------------------------------- gctl

def test_show_gpus_prints_gflows_lines_then_the_source(make_gflow, outside_process):
    p = outside_process()
    fx = fixture_of([sim_gpu(i) for i in range(4)])
    fx["gpus"][2]["processes"] = [{"pid": p.pid, "used_memory_mib": 100}]
    g = sim(make_gflow, fixture=fx)
    job = sleeper(g, "-g", 1)
    busy = int(job["gpu_ids"])
    g.run("gctl", "set-gpus", ",".join(str(i) for i in range(4) if i != 3), check=True)

    rows, rest = show_gpus(g)
    assert sorted(rows) == [0, 1, 2, 3], rows
    assert rows[busy] == ["in_use", f"job {job['id']}"], rows
    assert rows[2][0] == "in_use" and f"pid {p.pid}" in rows[2][1], rows
    assert rows[3][:2] == ["available", "restricted"], rows
    free = ({0, 1} - {busy}).pop()
    assert rows[free] == ["available"], rows
    assert rest == ["Allowed GPUs: " + ",".join(str(i) for i in range(3)),
                    "Source: runtime (set at runtime with 'gctl set-gpus')"], rest

    # Where the restriction came from: the flag, then the config.
    assert g.down().returncode == 0
    g.up("--simulate-gpus", g.fixture_path, "--gpus", "0,1")
    rows, rest = show_gpus(g)
    assert rows[2][:2] == ["in_use", "restricted"], rows
    assert rows[3][:2] == ["available", "restricted"], rows
    assert rest[-1].startswith("Source: flag"), rest
    assert g.down().returncode == 0
    conf = g.root / "c.toml"
    conf.write_text('[daemon]\ngpus = "1"\n')
    g.up("-c", conf, "--simulate-gpus", g.fixture_path)
    rows, rest = show_gpus(g)
    assert [i for i, r in rows.items() if "restricted" in r] == [0, 2, 3], rows
    assert rest[-1].startswith("Source: config"), rest


def test_show_gpus_gives_the_reason_of_an_unavailable_gpu(make_gflow):
    fx = fixture_of([sim_gpu(0), sim_gpu(1, fail={"nvmlDeviceGetMemoryInfo": 15})])
    g = sim(make_gflow, fixture=fx)
    rows, _ = show_gpus(g)
    assert rows[0] == ["available"], rows
    assert rows[1] == ["in_use", "NVML: GPU is lost (nvmlDeviceGetMemoryInfo_v2)"], rows


def test_ignore_refuses_a_process_that_is_not_on_that_gpu(make_gflow, outside_process):
    p = outside_process()
    stranger = outside_process()
    fx = fixture_of([sim_gpu(i) for i in range(2)])
    fx["gpus"][1]["processes"] = [{"pid": p.pid, "used_memory_mib": 100}]
    g = sim(make_gflow, fixture=fx)

    cp = g.run("gctl", "gpu-process", "ignore", "--gpu", 0, "--pid", p.pid)
    assert_one_line_error(cp, "gctl", 1, f"process {p.pid} is not on GPU 0",
                          "NVML lists it on GPU 1")
    cp = g.run("gctl", "gpu-process", "ignore", "--gpu", 0, "--pid", stranger.pid)
    assert_one_line_error(cp, "gctl", 1, f"process {stranger.pid} is not on GPU 0",
                          "on no GPU", "ginfo -v")
    assert g.api("GET", "/v1/gpus/ignored").json()["ignored"] == []
    # The right GPU is accepted.
    g.run("gctl", "gpu-process", "ignore", "--gpu", 1, "--pid", p.pid, check=True)
    assert g.api("GET", "/v1/gpus/ignored").json()["ignored"] == [{"gpu": 1, "pid": p.pid}]
    # A process that appears later is accepted once NVML has seen it.
    fx["gpus"][0]["processes"] = [{"pid": stranger.pid, "used_memory_mib": 10}]
    write_json_atomic(g.fixture_path, fx)
    gpus_reread(g)
    g.run("gctl", "gpu-process", "ignore", "--gpu", 0, "--pid", stranger.pid, check=True)


def test_set_gpus_names_the_gpu_that_does_not_exist(make_gflow):
    g = sim(make_gflow, 4)
    cp = g.run("gctl", "set-gpus", "0,7")
    assert_one_line_error(cp, "gctl", 1, "no GPU 7 on this machine", "it has 4: 0-3")
    cp = g.run("gctl", "set-gpus", "2-6")
    assert_one_line_error(cp, "gctl", 1, "no GPU 4,5,6 on this machine")
    assert g.api("GET", "/v1/gpus/allowed").json()["source"] == "all"


# ---------------------------------------------------------------- gflowd: GPUs and restart

def test_gpus_flag_names_the_missing_gpus(make_gflow):
    g = make_gflow(start=False)
    cp = g.gflowd("--simulate-gpus", 4, "--gpus", "0-5", "up")
    assert_one_line_error(cp, "gflowd", 1, "--gpus", "no GPU 4,5 on this machine",
                          "it has 4: 0-3")
    assert g.lock_holder() is None
    g.up("--simulate-gpus", 4, "--gpus", "0-3")
    assert g.api("GET", "/v1/gpus/allowed").json() == {"allowed": [0, 1, 2, 3],
                                                        "source": "flag"}


def test_restart_keeps_the_start_options_unless_new_ones_are_given(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 4, "--gpus", "1-2", "--max-running-jobs", "3",
         "--gpu-poll-interval-secs", "1")
    job = sleeper(g, "-g", 1)
    cp = g.gflowd("restart")
    assert cp.returncode == 0, cp
    assert "--simulate-gpus 4" in cp.stdout and "--gpus 1-2" in cp.stdout, cp.stdout
    info = gpus_json(g)
    assert info["simulated"] is True and len(info["gpus"]) == 4, info
    assert g.api("GET", "/v1/gpus/allowed").json() == {"allowed": [1, 2], "source": "flag"}
    assert "Max running jobs: 3" in g.gflowd("status").stdout
    assert g.job(job["id"])["state"] == "R"           # jobs survive, as always

    # A new option replaces only itself.
    cp = g.gflowd("--gpus", "0", "restart")
    assert cp.returncode == 0, cp
    assert g.api("GET", "/v1/gpus/allowed").json() == {"allowed": [0], "source": "flag"}
    assert len(gpus_json(g)["gpus"]) == 4
    assert "Max running jobs: 3" in g.gflowd("status").stdout

    # 'gctl set-gpus' replaces the --gpus of the start: a restart keeps the runtime one.
    g.run("gctl", "set-gpus", "3", check=True)
    assert g.gflowd("restart").returncode == 0
    assert g.api("GET", "/v1/gpus/allowed").json() == {"allowed": [3], "source": "runtime"}

    # 'up' after 'down' starts afresh, as before.
    assert g.down().returncode == 0
    g.up()
    assert gpus_json(g)["simulated"] is False


def test_gpu_poll_interval_flag(make_gflow, outside_process):
    """--gpu-poll-interval-secs 1 (the sandbox has no such variable): an outside process
    that appears is noticed within seconds."""
    g = make_gflow(start=False)
    g.env.pop("GFLOW_DAEMON__GPU_POLL_INTERVAL_SECS", None)
    fx = fixture_of([sim_gpu(0)])
    g.fixture_path = g.root / "gpus.json"
    write_json_atomic(g.fixture_path, fx)
    g.up("--simulate-gpus", g.fixture_path, "--gpu-poll-interval-secs", "1")
    p = outside_process()
    fx["gpus"][0]["processes"] = [{"pid": p.pid, "used_memory_mib": 10}]
    write_json_atomic(g.fixture_path, fx)
    wait_for(lambda: gpus_json(g)["gpus"][0]["state"] == "unmanaged", "the poll", timeout=5)
    cp = g.gflowd("--gpu-poll-interval-secs", "0", "status")
    assert_one_line_error(cp, "gflowd", 1, "--gpu-poll-interval-secs must be an integer > 0")


# ---------------------------------------------------------------- gflowd init and reload

def uncomment_defaults(text):
    """Every '# key = value' line of a gflowd init file, uncommented."""
    return "\n".join(re.sub(r"^# (\w+ = .+)$", r"\1", l) for l in text.splitlines()) + "\n"


def test_init_writes_a_commented_config_and_refuses_to_overwrite(make_gflow):
    g = make_gflow(start=False)
    conf = g.root / "etc" / "gflow.toml"
    cp = g.gflowd("-c", conf, "init")
    assert cp.returncode == 0 and str(conf) in cp.stdout, cp
    text = conf.read_text()
    lines = text.splitlines()
    # Every key, commented out, with its default.
    for key in ("max_running_jobs = 0", "kill_grace_secs = 10", 'log_level = "info"',
                'gpus = "all"', "gpu_poll_interval_secs = 10", "max_connections = 4000"):
        assert f"# {key}" in lines, key
    assert "[daemon]" in lines and "[limits]" in lines
    assert all(not l or l.startswith("#") or l.startswith("[") for l in lines), text
    # As written, and with every default uncommented, it is a valid config.
    g.up("-c", conf, "--simulate-gpus", 1)
    assert g.down().returncode == 0
    conf.write_text(uncomment_defaults(text))
    g.up("-c", conf, "--simulate-gpus", 1)
    assert "Max running jobs: unlimited" in g.gflowd("-c", conf, "status").stdout

    before = conf.read_text()
    cp = g.gflowd("-c", conf, "init")
    assert_one_line_error(cp, "gflowd", 1, str(conf), "already exists", "--force")
    assert conf.read_text() == before
    cp = g.gflowd("-c", conf, "--force", "init")
    assert cp.returncode == 0 and conf.read_text() == text, cp
    cp = g.gflowd("--force", "status")
    assert_one_line_error(cp, "gflowd", 2, "--force is only for 'gflowd init'")


def test_init_for_a_per_user_daemon_writes_the_users_config(make_gflow):
    """Root with --user: $XDG_CONFIG_HOME/gflow/gflow.toml, never /etc/gflow."""
    g = make_gflow(start=False)
    cp = g.gflowd("--user", "init")
    assert cp.returncode == 0, cp
    path = g.root / "xdg-config" / "gflow" / "gflow.toml"
    assert path.exists() and str(path) in cp.stdout, cp


def test_reload_applies_the_file_without_dropping_jobs(make_gflow):
    g = make_gflow(start=False)
    conf = g.root / "c.toml"
    conf.write_text("[daemon]\nmax_running_jobs = 1\n")
    g.up("-c", conf, "--simulate-gpus", 2)
    a = g.wait_state(g.submit("sleep", 60), "R")
    b = g.submit("sleep", 60)
    assert g.wait_state(b, "PD")["reason"] == "MaxRunningJobs"

    conf.write_text('[daemon]\nmax_running_jobs = 2\nlog_level = "debug"\n'
                    'nvml_timeout_secs = 20\n')
    cp = g.gflowd("-c", conf, "reload")
    assert cp.returncode == 0, cp
    out = cp.stdout
    assert "Applied now: daemon.max_running_jobs, daemon.log_level" in out, out
    assert "Need 'gflowd restart': daemon.nvml_timeout_secs" in out, out
    assert g.wait_state(b, "R")["state"] == "R"        # the new limit counts at once
    assert g.job(a["id"])["state"] == "R"              # nothing was dropped
    assert "Max running jobs: 2" in g.gflowd("-c", conf, "status").stdout

    # SIGHUP does the same.
    conf.write_text("[daemon]\nmax_running_jobs = 3\n")
    os.kill(g.daemon_pid(), signal.SIGHUP)
    wait_for(lambda: "Max running jobs: 3" in g.gflowd("-c", conf, "status").stdout,
             "the reload after SIGHUP", timeout=5)
    assert "daemon.max_running_jobs is now 3" in g.daemon_log()

    # A broken file changes nothing and says why, from the command and from SIGHUP.
    conf.write_text("[daemon]\nmax_running_jobs = -4\n")
    cp = g.gflowd("-c", conf, "reload")
    assert_one_line_error(cp, "gflowd", 1, f"{conf}:2", "max_running_jobs", "nothing was reloaded")
    os.kill(g.daemon_pid(), signal.SIGHUP)
    wait_for(lambda: "reload refused, nothing changed" in g.daemon_log(), "the refusal",
             timeout=5)
    assert "Max running jobs: 3" in g.gflowd("status").stdout


def test_reload_is_for_admins_and_needs_a_daemon(make_gflow):
    from conftest import as_user, ensure_test_user
    g = make_gflow(start=False)
    cp = g.gflowd("reload")
    assert_not_running(cp, "named by gflowd's daemon.socket_path")
    g.up("--simulate-gpus", 1)
    uid, gid, _ = ensure_test_user()
    os.chmod(g.root, 0o755)
    cp = g.run("gflowd", "reload", user=as_user(uid, gid))
    assert cp.returncode == 1 and "admin" in cp.stderr, cp


def test_verbosity_flags(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 1, "-v")
    g.run("gqueue", check=True)
    wait_for(lambda: " debug: " in g.daemon_log(), "debug lines with -v", timeout=5)
    assert g.down().returncode == 0
    mark = len(g.daemon_log())
    g.up("--simulate-gpus", 1, "-qq")
    g.run("gqueue", check=True)
    assert g.down().returncode == 0
    later = g.daemon_log()[mark:]
    assert " info: " not in later and " debug: " not in later, later


# ---------------------------------------------------------------- which daemon

def test_up_down_status_say_which_daemon(make_gflow):
    g = make_gflow(start=False)
    which = f"Daemon: system (all users), socket {g.sock}, data {g.data}"
    cp = g.gflowd("status")
    assert cp.stdout.splitlines()[:2] == ["Status: Not running", which], cp.stdout
    cp = g.up("--simulate-gpus", 1)
    assert which in cp.stdout.splitlines(), cp.stdout
    assert g.gflowd("status").stdout.splitlines()[1] == which
    cp = g.down()
    assert cp.stdout.splitlines() == ["gflowd stopped.", which], cp.stdout
    cp = g.down()
    assert cp.stdout.splitlines() == ["gflowd is not running.", which], cp.stdout


def test_root_may_run_a_per_user_daemon_with_user(make_gflow):
    """Root with --user gets its own daemon under its XDG directories; the other
    commands find it first (a live per-user socket comes before the system one)."""
    g = make_gflow(start=False)
    for k in ("GFLOW_DAEMON__DATA_DIR", "GFLOW_DAEMON__SOCKET_PATH", "GFLOW_SOCKET"):
        g.env.pop(k)
    sock = g.root / "xdg-run" / "gflow" / "gflowd.sock"
    data = g.root / "xdg-data" / "gflow"
    g.data, g.sock = data, sock       # for the sandbox's clean-up and its api()
    cp = g.up("--user", "--simulate-gpus", 1)
    which = f"Daemon: per-user, socket {sock}, data {data}"
    assert which in cp.stdout.splitlines(), cp.stdout
    st = g.gflowd("--user", "status").stdout
    assert "Mode: per-user" in st and which in st, st
    jid = g.submit("true")
    assert g.wait_state(jid)["state"] == "CD"
    cp = g.gflowd("--user", "down")
    assert cp.stdout.splitlines() == ["gflowd stopped.", which], cp.stdout


def test_user_and_system_flags_are_checked(make_gflow):
    g = make_gflow(start=False)
    cp = g.gflowd("--user", "--system", "status")
    assert_one_line_error(cp, "gflowd", 2, "--user and --system exclude each other")
    from conftest import as_user, ensure_test_user
    uid, gid, _ = ensure_test_user()
    os.chmod(g.root, 0o755)
    cp = g.run("gflowd", "--system", "status", user=as_user(uid, gid))
    assert_one_line_error(cp, "gflowd", 2, "--system needs root")


def test_connection_error_names_the_socket_and_the_search(env):
    r = run_cli("gqueue", env=env)
    assert_not_running(r, f"socket: {env['GFLOW_SOCKET']} (", "named by GFLOW_SOCKET",
                       "--socket, GFLOW_SOCKET, daemon.socket_path, a live per-user socket")
    del env["GFLOW_SOCKET"]
    conf = os.path.join(env["XDG_CONFIG_HOME"], "gflow")
    os.makedirs(conf)
    sock = os.path.join(env["HOME"], "cfg.sock")
    with open(os.path.join(conf, "gflow.toml"), "w") as f:
        f.write(f'[daemon]\nsocket_path = "{sock}"\n')
    if os.geteuid() != 0:  # root reads /etc/gflow/gflow.toml, which a test must not touch
        r = run_cli("gqueue", env=env)
        assert_not_running(r, f"socket: {sock} (", "named by daemon.socket_path")
    r = run_cli("gqueue", "--socket", sock, env=env)
    assert_not_running(r, f"socket: {sock} (", "named by --socket")


# ---------------------------------------------------------------- gflowd's errors

def test_gflowd_errors_are_one_line_in_the_style_of_the_other_commands(env):
    cases = [
        (["-x", "status"], "unknown option '-x'"),
        (["--bogus", "status"], "unknown option '--bogus'"),
        (["--gpus"], "option '--gpus' needs a value"),
        (["--user=1", "status"], "option '--user' takes no value"),
        ([], "missing command"),
        (["bogus"], "unknown command 'bogus'"),
        (["status", "extra"], "unexpected argument 'extra'"),
    ]
    for args, needle in cases:
        r = run_cli("gflowd", *args, env=env)
        assert_one_line_error(r, "gflowd", 2, needle, "gflowd --help")
