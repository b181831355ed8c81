"""Running gflow for a lab (issue 13): `gflowd service install|uninstall|status` and the
unit it writes (checked by systemd-analyze verify), the daemon started as that unit
starts it (Type=notify readiness over a NOTIFY_SOCKET the test binds; KillMode=process:
SIGTERM stops gflowd, not its jobs), the man pages (generated from --help, rendered by
groff -ww without a warning) and bash completion of job ids, GPU indices and states
against a real daemon. Nothing is written outside temp dirs: every unit goes under
--root."""
import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD_DIR, REPO, alive, assert_one_line_error, binary, start_time, wait_for

COMMANDS = ["gbatch", "gqueue", "gjob", "gcancel", "ginfo", "gctl", "gstats", "gflowd"]


def install(gflow_or_env, root, *args, env=None):
    run_env = dict(env or {})
    return subprocess.run([binary("gflowd"), *args, "service", "install", "--root", str(root)],
                          capture_output=True, text=True, timeout=30, env=run_env)


# -- service install / uninstall / status

def test_install_writes_the_unit_once_and_says_what_to_run(env, tmp_path):
    root = tmp_path / "root"
    (tmp_path / "gflow.toml").write_text("")
    args = [binary("gflowd"), "--system", "-c", "gflow.toml", "--gpus", "0,1", "service",
            "install", "--root", str(root)]
    cp = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    unit = root / "etc/systemd/system/gflowd.service"
    text = unit.read_text()
    assert f"Wrote {unit}:\n{text}" in cp.stdout
    for line in ("Type=notify", "KillMode=process", "Delegate=yes", "Restart=on-failure",
                 "WantedBy=multi-user.target",
                 f"ExecStart={binary('gflowd')} --system -c {tmp_path}/gflow.toml --gpus 0,1 run"):
        assert f"\n{line}\n" in text, line
    # No systemd here: nothing enabled, and the commands to run are named.
    assert "systemd is not running here" in cp.stdout
    assert "  systemctl daemon-reload\n  systemctl enable --now gflowd.service\n" in cp.stdout
    # Idempotent: the same install changes nothing; another one replaces the unit.
    again = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert again.returncode == 0 and f"Unchanged: {unit}" in again.stdout
    assert "Wrote" not in again.stdout and unit.read_text() == text
    st = subprocess.run([binary("gflowd"), "--system", "service", "status", "--root", str(root)],
                        capture_output=True, text=True, env=env)
    assert st.returncode == 0, st
    assert f"Unit: {unit}\nExecStart: {binary('gflowd')} --system -c" in st.stdout
    assert "systemd: not running here" in st.stdout
    rm = subprocess.run([binary("gflowd"), "--system", "service", "uninstall", "--root",
                         str(root)], capture_output=True, text=True, env=env)
    assert rm.returncode == 0 and f"Removed {unit}" in rm.stdout and not unit.exists()
    rm = subprocess.run([binary("gflowd"), "--system", "service", "uninstall", "--root",
                         str(root)], capture_output=True, text=True, env=env)
    assert rm.returncode == 0 and "nothing to remove" in rm.stdout
    st = subprocess.run([binary("gflowd"), "--system", "service", "status", "--root", str(root)],
                        capture_output=True, text=True, env=env)
    assert st.returncode == 3 and "not installed" in st.stdout


def test_user_unit_goes_to_the_users_config_with_linger_advice(env, tmp_path):
    root = tmp_path / "root"
    cp = subprocess.run([binary("gflowd"), "--user", "--simulate-gpus", "my 50%.json",
                         "service", "install", "--root", str(root)],
                        capture_output=True, text=True, env=env, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    unit = root / (env["XDG_CONFIG_HOME"].lstrip("/")) / "systemd/user/gflowd.service"
    text = unit.read_text()
    # Quoted for systemd: the space, and '%' doubled (a specifier otherwise).
    assert f'ExecStart={binary("gflowd")} --user --simulate-gpus "{tmp_path}/my 50%%.json" run' \
        in text
    assert "WantedBy=default.target" in text
    assert "systemctl --user enable --now gflowd.service" in cp.stdout
    assert "loginctl enable-linger" in cp.stdout


def test_where_systemd_runs_install_enables_and_uninstall_disables(env, tmp_path):
    """systemd counts as running under --root when DIR/run/systemd/system exists; a fake
    systemctl first on PATH records what gflowd asks of it."""
    root = tmp_path / "root"
    (root / "run/systemd/system").mkdir(parents=True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    fake = bindir / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n'
                    'case "$1" in is-enabled) echo enabled ;; is-active) echo active ;; esac\n')
    fake.chmod(0o755)
    e = dict(env, PATH=f"{bindir}:{env['PATH']}")
    cp = subprocess.run([binary("gflowd"), "--system", "service", "install", "--root",
                         str(root)], capture_output=True, text=True, env=e)
    assert cp.returncode == 0, cp.stderr
    assert "Running: systemctl daemon-reload\nRunning: systemctl enable --now gflowd.service" \
        in cp.stdout
    assert "enabled and started" in cp.stdout
    st = subprocess.run([binary("gflowd"), "--system", "service", "status", "--root", str(root)],
                        capture_output=True, text=True, env=e)
    assert st.returncode == 0 and "systemd: enabled, active" in st.stdout, st.stdout
    rm = subprocess.run([binary("gflowd"), "--system", "service", "uninstall", "--root",
                         str(root)], capture_output=True, text=True, env=e)
    assert rm.returncode == 0, rm.stderr
    assert calls.read_text().splitlines() == [
        "daemon-reload", "enable --now gflowd.service", "is-enabled gflowd.service",
        "is-active gflowd.service", "disable --now gflowd.service", "daemon-reload"]
    # A systemctl that fails is reported, with its exit status.
    fake.write_text("#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    cp = subprocess.run([binary("gflowd"), "--system", "service", "install", "--root",
                         str(root)], capture_output=True, text=True, env=e)
    assert cp.returncode == 1
    assert "gflowd: 'systemctl daemon-reload' failed (exit status 1)" in cp.stderr


def test_service_command_line_mistakes(env):
    for args, needle in ((["service"], "'service' needs an action"),
                         (["service", "bogus"], "unknown service action 'bogus'"),
                         (["service", "install", "extra"], "unexpected argument 'extra'"),
                         (["--root", "/tmp/x", "up"], "--root is only for 'gflowd service'"),
                         (["service", "install", "--root", "rel"], "--root needs an absolute")):
        cp = subprocess.run([binary("gflowd"), *args], capture_output=True, text=True, env=env)
        assert_one_line_error(cp, "gflowd", 2, needle)


def test_unit_passes_systemd_analyze_verify(env, tmp_path):
    """The unit as install writes it, and the template make install installs, pass
    systemd-analyze verify, its Documentation= man pages included (found in the build
    through MANPATH)."""
    if not shutil.which("systemd-analyze"):
        pytest.fail("systemd-analyze is missing: scripts/install-deps.sh installs systemd")
    man = tmp_path / "man"
    for sec, names in (("1", [c + ".1" for c in COMMANDS]), ("5", ["gflow.toml.5"])):
        (man / f"man{sec}").mkdir(parents=True, exist_ok=True)
        for n in names:
            shutil.copy(BUILD_DIR / n, man / f"man{sec}" / n)
    (man / "man7").mkdir()
    shutil.copy(REPO / "man/gflow.7", man / "man7/gflow.7")
    e = dict(env, MANPATH=str(man), SYSTEMD_LOG_LEVEL="warning")
    Path(env["XDG_RUNTIME_DIR"]).mkdir(parents=True)  # verify --user makes its dir there
    for who in ("--system", "--user"):
        root = tmp_path / who.strip("-")
        cp = subprocess.run([binary("gflowd"), who, "service", "install", "--root", str(root)],
                            capture_output=True, text=True, env=env)
        assert cp.returncode == 0, cp.stderr
        unit = next(root.rglob("gflowd.service"))
        v = subprocess.run(["systemd-analyze", "verify", f"--{who.strip('-')}", str(unit)],
                           capture_output=True, text=True, env=e, cwd=unit.parent, timeout=60)
        assert v.returncode == 0 and v.stderr == "", (who, v.stdout, v.stderr)
    # The installed template is the same unit (only ExecStart's path and the header differ).
    template = (BUILD_DIR / "gflowd.service").read_text()
    written = (tmp_path / "system/etc/systemd/system/gflowd.service").read_text()
    body = lambda t: [l for l in t.splitlines() if not l.startswith(("#", "ExecStart="))]
    assert body(template) == body(written)
    assert "\nExecStart=" in template and "--system run\n" in template
    # A broken unit is caught (the check checks): a missing program, a bad KillMode.
    bad = tmp_path / "bad" / "gflowd.service"
    bad.parent.mkdir()
    bad.write_text(written.replace(binary("gflowd"), "/nonexistent/gflowd")
                   .replace("KillMode=process", "KillMode=proc"))
    v = subprocess.run(["systemd-analyze", "verify", str(bad)], capture_output=True, text=True,
                       env=e, cwd=bad.parent, timeout=60)
    assert "not executable" in v.stderr and "kill mode" in v.stderr, v.stderr


# -- the daemon as the unit runs it

def test_run_notifies_ready_after_the_socket_answers_and_sigterm_leaves_jobs(make_gflow,
                                                                            tmp_path):
    g = make_gflow(start=False)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = f"@gflow-test-notify-{os.getpid()}-{tmp_path.name}"
    notify.bind("\0" + name[1:])  # an abstract name, as systemd's /run/systemd/notify is not
    notify.settimeout(20)
    proc = subprocess.Popen([binary("gflowd"), "--simulate-gpus", "1", "run"], env=dict(
        g.env, NOTIFY_SOCKET=name), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, cwd="/")
    try:
        msg = notify.recv(4096).decode()
        # Ready only once the socket answers: it does at once when READY=1 arrives.
        assert g.health_ok()
        assert "READY=1" in msg.split("\n") and f"MAINPID={proc.pid}" in msg, msg
        assert g.daemon_pid() == proc.pid
        job = g.submit("sleep", "300")
        running = g.wait_state(job, "R")
        shim = running.get("shim_pid") or running.get("pid")
        assert shim, running
        shim_start = start_time(shim)
        proc.send_signal(signal.SIGTERM)
        stopping = notify.recv(4096).decode()
        assert "STOPPING=1" in stopping.split("\n"), stopping
        assert proc.wait(timeout=20) == 0
        # KillMode=process: the job outlives the daemon, and the next one finds it running.
        assert alive(shim, shim_start)
        g.up()
        assert g.job(job)["state"] == "R"
        g.run("gcancel", job, check=True)
        g.wait_state(job, ("CA",), timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        notify.close()


# -- man pages

def man_pages():
    return [BUILD_DIR / f"{c}.1" for c in COMMANDS] + [BUILD_DIR / "gflow.toml.5",
                                                       REPO / "man/gflow.7"]


def help_flags(argv):
    """The flags the option lines of `argv --help` name."""
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=20).stdout
    flags = set()
    for line in out.splitlines():
        m = re.match(r"^ {1,6}(-\S.*)$", line)
        if m:
            names = re.split(r"\s{2,}", m.group(1))[0]
            flags.update(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)", names))
    return flags


def test_man_pages_render_without_warnings_and_name_every_flag(tmp_path):
    for page in man_pages():
        assert page.exists(), f"{page} is missing: ninja -C build makes it"
        cp = subprocess.run(["groff", "-ww", "-man", "-Tutf8", str(page)], capture_output=True,
                            timeout=30)
        assert cp.returncode == 0 and cp.stderr == b"", (page, cp.stderr.decode())
        text = subprocess.run(["man", "-l", "-Tutf8", str(page)], capture_output=True,
                              env=dict(os.environ, MANWIDTH="80"), timeout=30)
        assert text.returncode == 0 and text.stderr == b"", (page, text.stderr)
    # Generated from --help: every flag of each command and of its subcommands is there.
    for cmd in COMMANDS:
        rendered = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", str(BUILD_DIR /
                                   f"{cmd}.1")], capture_output=True, text=True).stdout
        rendered = re.sub(r"(?<=\w)-\n +(?=\w)", "-", rendered)  # hyphenated words
        flags = help_flags([binary(cmd)])
        for sub in {"gjob": ["show", "log", "release", "update", "redo"],
                    "gctl": ["gpu-process", "reserve"]}.get(cmd, []):
            flags |= help_flags([binary(cmd), sub])
            assert f"{cmd.upper()} {sub.upper()}" in rendered, (cmd, sub)
        missing = [f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])",
                                                     rendered)]
        assert flags and not missing, (cmd, missing)
        assert f"{cmd} - " in rendered.split("SYNOPSIS")[0], cmd
    # gflow.toml(5): every key 'gflowd init' writes.
    init = tmp_path / "gflow.toml"
    subprocess.run([binary("gflowd"), "init", "-c", str(init)], check=True, capture_output=True)
    keys = re.findall(r"^# ([a-z_]+) =", init.read_text(), re.M)
    toml = subprocess.run(["groff", "-man", "-Tascii", "-P-cbou", str(BUILD_DIR /
                           "gflow.toml.5")], capture_output=True, text=True).stdout
    assert keys and all(k in toml for k in keys), [k for k in keys if k not in toml]
    # gflow(7) names what a job sees (every variable jobenv.c sets).
    seven = (REPO / "man/gflow.7").read_text()
    jobenv = (REPO / "src/core/jobenv.c").read_text()
    for var in set(re.findall(r'env_add\(sb, "([A-Z_]+)"', jobenv)):
        assert var in seven, var


# -- bash completion against a real daemon

def complete(script, line, env):
    words = line.split(" ")
    prog = (f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); "
            f"COMP_CWORD={len(words) - 1}; _gflow_complete; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    cp = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=30, env=env)
    assert cp.returncode == 0, cp.stderr
    return set(cp.stdout.split())


def test_bash_completes_own_active_job_ids_gpu_indices_and_states(make_gflow, tmp_path):
    g = make_gflow(args=("--simulate-gpus", "3"))
    script = g.run("gbatch", "completion", "bash", check=True).stdout
    held = g.submit("-H", "true")
    running = g.submit("sleep", "300")
    g.wait_state(running, "R")
    done = g.submit("true")
    g.wait_state(done, "CD")
    e = dict(g.env, PATH=f"{BUILD_DIR}:{g.env['PATH']}")
    mine = {str(held), str(running)}  # active ones only: not the finished job
    assert complete(script, "gcancel ", e) == mine
    assert complete(script, f"gcancel {str(held)[0]}", e) == {i for i in mine
                                                              if i.startswith(str(held)[0])}
    assert complete(script, "gjob show ", e) == mine
    assert complete(script, f"gjob hold {held} ", e) == mine
    assert complete(script, "gqueue -j ", e) == mine
    assert complete(script, "gbatch --depends-on ", e) == mine
    assert complete(script, "gctl set-limit ", e) == mine
    # Flags and subcommands are still offered where a word asks for them.
    assert complete(script, "gjob ", e) >= {"show", "hold", "update"}
    assert complete(script, "gcancel --dr", e) == {"--dry-run"}
    # GPU indices (from ginfo -o json), states.
    assert complete(script, "gctl set-gpus ", e) == {"0", "1", "2", "all"}
    assert complete(script, "gctl gpu-process ignore --gpu ", e) == {"0", "1", "2", "all"}
    assert complete(script, "gflowd --gpus ", e) == {"0", "1", "2", "all"}
    assert complete(script, "gqueue -s C", e) == {"CG", "CD", "CA", "Cancelling", "Cancelled"}
    assert complete(script, "gqueue --states R", e) == {"R", "Running"}
    assert complete(script, "gflowd service ", e) == {"install", "uninstall", "status"}
    # Another user's jobs are not offered, and with no daemon nothing is (no error).
    other = g.submit("true", user=None)
    g.wait_state(other, "CD")
    gone = dict(e, GFLOW_SOCKET=str(tmp_path / "nowhere.sock"))
    assert complete(script, "gcancel ", gone) == set()
    g.run("gcancel", running, check=True)
