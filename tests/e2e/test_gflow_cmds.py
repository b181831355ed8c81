"""Issue 29, "Commands" and two output items: what a gflow user types works as in gflow.

gctl quota list / remove; gjob close-sessions (a no-op that says why); gflowd up while
running (exit 0); gcancel --dry-run in gflow's tab-separated format; the connection error
of every program (its first line the same everywhere, details below); ginfo without an
NVIDIA driver pointing at --simulate-gpus; and `completion SHELL` on every program for
bash, zsh, fish, powershell and elvish (parsed by bash, zsh and fish; the other two are
not in Debian, so their structure is checked)."""
import json
import os
import re
import shutil
import socket
import subprocess

import pytest

from conftest import (NOT_RUNNING, assert_not_running, assert_one_line_error, binary,
                      run_cli, wait_for)

PROGRAMS = ["gbatch", "gqueue", "gjob", "gcancel", "gctl", "ginfo", "gstats", "gflowd",
            "gflow-mcp", "gflow"]
SHELLS = ["bash", "elvish", "fish", "powershell", "zsh"]


def wait_go(name):
    return f"while [ ! -e {name} ]; do sleep 0.02; done"


def me(g):
    return g.run("id", "-un", check=True).stdout.strip()


# -- gctl quota list / remove

LIST_HEADER = f"{'SCOPE':<15} {'NAME':<16} {'JOBS':>9} {'GPUS':>9} {'QUEUED':>9} {'GPU_HOURS':>9}"


def list_rows(out):
    """The table's rows as (scope, name, jobs, gpus, queued, gpu_hours), up to the blank
    line before the footer."""
    lines = out.splitlines()
    assert lines[0] == LIST_HEADER, out
    end = lines.index("")
    return [tuple(l.split()) for l in lines[1:end]], lines[end + 1:]


def test_quota_list_shows_config_and_runtime_quotas_and_remove_drops_overrides(make_gflow):
    g = make_gflow(start=False)
    user = me(g)
    conf = g.root / "gflow.toml"
    conf.write_text(f"""
[quota]
default_user = {{ max_running_gpus = 3 }}

[quota.users.{user}]
max_running_jobs = 4

[quota.projects.nlp]
max_queued_jobs = 5
""")
    g.up("-c", conf, "--simulate-gpus", 2)
    g.run("gctl", "quota", "set", "--user", user, "--max-queued-jobs", 7, check=True)
    g.run("gctl", "quota", "set", "--project", "vision", "--max-running-gpus", 1, check=True)
    g.run("gctl", "quota", "set", "--default-project", "--max-running-jobs", 9, check=True)
    running = g.submit("-P", "nlp", "-g", 1, wait_go(g.work / "go"))
    g.wait_state(running, "R")
    held = g.submit("-H", "-P", "nlp", "true")

    cp = g.run("gctl", "quota", "list")
    assert cp.returncode == 0 and cp.stderr == "", cp
    rows, footer = list_rows(cp.stdout)
    # gflow's order: users, projects, then the two fallback rows (limits only).
    assert rows == [
        ("user", user, "1/4", "1/3", "1/7", rows[0][5]),
        ("project", "nlp", "1/9", "1/-", "1/5", rows[1][5]),
        ("project", "vision", "0/9", "0/1", "0/-", "0.00/-"),
        ("default_user", "*", "-", "3", "-", "-"),
        ("default_project", "*", "9", "-", "-", "-"),
    ], cp.stdout
    assert all(re.fullmatch(r"\d+\.\d\d/-", r[5]) for r in rows[:2]), rows
    assert footer[0] == ("Cells are used/limit; `-` means unlimited. Fallback rows show the "
                         "limit only."), cp.stdout
    assert footer[1].startswith("GPU_HOURS counts the week from "), cp.stdout
    # The same as JSON: the daemon's reply.
    js = json.loads(g.run("gctl", "quota", "list", "-o", "json", check=True).stdout)
    assert {(s["scope"], s["name"]) for s in js["subjects"]} == \
        {("user", user), ("project", "nlp"), ("project", "vision")}
    assert js["default_project"]["max_running_jobs"] == 9

    # remove: the runtime override goes, gflow.toml's baseline stays.
    cp = g.run("gctl", "quota", "remove", "--user", user)
    assert (cp.returncode, cp.stdout, cp.stderr) == \
        (0, f"Removed user quota override '{user}'\n", ""), cp
    rows, _ = list_rows(g.run("gctl", "quota", "list", check=True).stdout)
    assert rows[0][:5] == ("user", user, "1/4", "1/3", "1/-"), rows
    # Nothing left to remove for that user: an error, as gflow's 404.
    cp = g.run("gctl", "quota", "remove", "--user", user)
    assert_one_line_error(cp, "gctl", 1, f"no user quota override '{user}' to remove",
                          "gctl quota list")
    cp = g.run("gctl", "quota", "remove", "--project", "vision", check=True)
    assert cp.stdout == "Removed project quota override 'vision'\n"
    cp = g.run("gctl", "quota", "remove", "--default-project", check=True)
    assert cp.stdout == "Removed default_project quota override\n"
    assert_one_line_error(g.run("gctl", "quota", "remove", "--default-user"), "gctl", 1,
                          "no default_user quota override to remove")
    rows, _ = list_rows(g.run("gctl", "quota", "list", check=True).stdout)
    assert [r[:2] for r in rows] == [("user", user), ("project", "nlp"),
                                     ("default_user", "*"), ("default_project", "*")], rows
    assert rows[3][2:] == ("-", "-", "-", "-"), rows
    (g.work / "go").touch()
    g.wait_state(running)
    g.run("gcancel", held, check=True)

    # Bad input: one line, status 2.
    for args, needle in [
        (["remove"], "needs one of --user U, --project P, --default-user or --default-project"),
        (["remove", "--user", "a", "--project", "b"], "needs one of --user U"),
        (["remove", "--user", user, "--limits", "max_running_jobs"], "'remove' drops them all"),
        (["remove", "--user", user, "extra"], "unexpected argument 'extra'"),
        (["list", "extra"], "unexpected argument 'extra' for 'gctl quota list'"),
        (["list", "--user", user], "'gctl quota show --user U'"),
        (["list", "-o", "yaml"], "unknown output format 'yaml'"),
        (["show", "-o", "json"], "-o is for 'gctl quota list'"),
        (["frob"], "use list, show, set, remove or clear"),
    ]:
        assert_one_line_error(g.run("gctl", "quota", *args), "gctl", 2, needle)


def test_quota_list_and_remove_need_admins_only_to_remove(make_gflow):
    from conftest import as_user, ensure_test_user
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 1)
    g.run("gctl", "quota", "set", "--default-user", "--max-running-jobs", 2, check=True)
    uid, gid, _ = ensure_test_user()
    os.chmod(g.root, 0o755)
    cp = g.run("gctl", "quota", "list", user=as_user(uid, gid))
    assert cp.returncode == 0, cp
    assert ("default_user", "*", "2", "-", "-", "-") in list_rows(cp.stdout)[0]
    cp = g.run("gctl", "quota", "remove", "--default-user", user=as_user(uid, gid))
    assert cp.returncode == 1 and "admin" in cp.stderr, cp


# -- gjob close-sessions

def test_close_sessions_is_a_no_op_that_says_why(env):
    for args in ([], ["-a"], ["-j", "1-3", "-s", "finished,failed", "-p", "train"],
                 ["--jobs", "1,2,3", "--state", "CD", "--pattern", "x", "--all"]):
        for word in ("close-sessions", "close"):
            r = run_cli("gjob", word, *args, env=env)
            assert (r.returncode, r.stdout) == (0, ""), (args, r)
            assert r.stderr == ("gjob close-sessions: no sessions to close: jobs here run "
                                "without tmux sessions ('gjob log ID' shows a job's output)\n")
    r = run_cli("gjob", "close-sessions", "--help", env=env)
    assert r.returncode == 0 and "Usage: gjob close-sessions" in r.stdout and "tmux" in r.stdout
    for args, needle in [
        (["-s", "bogus"], "unknown state 'bogus'"),
        (["-s", ""], "empty --state"),
        (["-j", "x"], "invalid --jobs 'x'"),
        (["-j"], "-j needs a value"),
        (["--frob"], "--frob"),
        (["7"], "unexpected argument '7'"),
    ]:
        assert_one_line_error(run_cli("gjob", "close-sessions", *args, env=env), "gjob", 2,
                              needle)


# -- gflowd up while running

def test_gflowd_up_twice_says_already_running_and_exits_0(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 1)
    pid = g.daemon_pid()
    cp = g.gflowd("up")
    assert cp.returncode == 0, cp
    lines = cp.stdout.splitlines()
    assert lines[:3] == ["gflowd is already running.",
                         "Use `gflowd reload` to hot-reload or `gflowd restart` to restart it.",
                         f"PID: {pid}"], cp.stdout
    assert lines[3].startswith("Daemon: per-user, socket ") or \
        lines[3].startswith("Daemon: system"), cp.stdout
    assert cp.stderr == ""
    assert g.daemon_pid() == pid and g.health_ok()
    # Options given to a second up are not applied, and it says so.
    cp = g.gflowd("up", "--simulate-gpus", "3")
    assert cp.returncode == 0 and "not applied" in cp.stdout and "gflowd restart" in cp.stdout
    assert len(g.api("GET", "/v1/gpus").json()["gpus"]) == 1
    assert g.daemon_pid() == pid


# -- gcancel --dry-run

def test_gcancel_dry_run_prints_gflows_lines(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 1)
    go = g.work / "go"
    running = g.submit("-g", 1, wait_go(go))
    g.wait_state(running, "R")
    queued = g.submit("-g", 1, "true")  # waits for the GPU the first job holds
    held = g.submit("-H", "true")
    child = g.submit("-d", held, "true")
    grandchild = g.submit("-d", child, "true")
    ended = g.submit("-g", 0, "true")
    g.wait_state(ended, "CD")
    missing = ended + 100

    cp = g.run("gcancel", "--dry-run", running, queued, held, ended)
    assert cp.returncode == 0, cp
    assert cp.stdout.splitlines() == [
        f"{running}\tRunning\tok",
        f"{queued}\tQueued\tok",
        f"{held}\tHold\tok",
        f"{child}\tQueued\tblocked\t{held}",
        f"{grandchild}\tQueued\tblocked\t{child}",
        f"{ended}\tFinished\tinvalid",
    ], cp.stdout
    # Why a job cannot be cancelled goes to stderr; stdout stays gflow's lines.
    assert cp.stderr == f"gcancel: job {ended} has already ended (CD); nothing to cancel\n"
    # A job that does not exist is an error (exit 1); the others are still listed.
    cp = g.run("gcancel", "--dry-run", missing, held)
    assert cp.returncode == 1, cp
    assert cp.stdout.splitlines() == [f"{held}\tHold\tok", f"{child}\tQueued\tblocked\t{held}",
                                      f"{grandchild}\tQueued\tblocked\t{child}"], cp.stdout
    assert cp.stderr.startswith(f"gcancel: job {missing} not found"), cp.stderr
    # Nothing changed.
    states = {j: g.job(j)["state"] for j in (running, queued, held, child, grandchild)}
    assert states == {running: "R", queued: "PD", held: "H", child: "PD", grandchild: "PD"}
    # Another user's job cannot be cancelled by them: invalid, with the reason.
    from conftest import as_user, ensure_test_user
    uid, gid, _ = ensure_test_user()
    os.chmod(g.root, 0o755)
    cp = g.run("gcancel", "--dry-run", held, user=as_user(uid, gid))
    assert (cp.returncode, cp.stdout) == (0, f"{held}\tHold\tinvalid\n"), cp
    assert "only its owner or an admin may cancel it" in cp.stderr
    go.touch()
    g.wait_state(running)


# -- the connection error

def test_every_program_says_gflowd_is_not_running_first(env, tmp_path):
    sock = env["GFLOW_SOCKET"]
    calls = [("gbatch", ["true"]), ("gqueue", []), ("gqueue", ["-w", "--interval", "1"]),
             ("gjob", ["show", "1"]), ("gjob", ["log", "1"]), ("gjob", ["show", "@"]),
             ("gcancel", ["1"]), ("gcancel", ["--dry-run", "1"]), ("gctl", ["show-gpus"]),
             ("gctl", ["quota", "list"]), ("ginfo", []), ("gstats", [])]
    for cmd, args in calls:
        assert_not_running(run_cli(cmd, *args, env=env),
                           f"socket: {sock} (No such file or directory), named by GFLOW_SOCKET",
                           "--socket PATH or set GFLOW_SOCKET=PATH",
                           "--socket, GFLOW_SOCKET, daemon.socket_path, a live per-user socket")
    # gflowd reload speaks to the daemon too (the socket of its configuration).
    assert_not_running(run_cli("gflowd", "--user", "reload",
                               env=dict(env, GFLOW_DAEMON__SOCKET_PATH=sock)),
                       f"socket: {sock} (No such file or directory), named by gflowd's "
                       "daemon.socket_path")
    # A socket file left behind by a daemon that died: nothing accepts on it.
    stale = str(tmp_path / "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(stale)
    s.close()
    assert_not_running(run_cli("gqueue", "--socket", stale, env=env),
                       f"socket: {stale} (Connection refused), named by --socket")
    # The assistant server hands the same text to the assistant.
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "list_jobs", "arguments": {}}}]
    r = subprocess.run([binary("gflow-mcp")], input="".join(json.dumps(m) + "\n" for m in msgs),
                       capture_output=True, text=True, env=env, timeout=20)
    result = [json.loads(l) for l in r.stdout.splitlines()][-1]["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(NOT_RUNNING + "\n  socket: "), result


# -- ginfo without a driver

def test_ginfo_without_a_driver_points_at_simulated_gpus(make_gflow):
    g = make_gflow(env={"GFLOW_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
    cp = g.run("ginfo")
    assert cp.returncode == 0, cp
    lines = cp.stdout.splitlines()
    assert lines[0].startswith("no GPUs: ") and \
        "/nonexistent/libnvidia-ml.so.1 not found (no NVIDIA driver?)" in lines[0], cp.stdout
    assert lines[1:] == [
        "To try gflow without an NVIDIA driver, run the daemon on simulated GPUs:",
        "  gflowd down; gflowd up --simulate-gpus N   (N GPUs, e.g. 2)",
    ], cp.stdout
    # The flag named is gflowd's own.
    assert "--simulate-gpus N" in g.gflowd("--help").stdout
    # On simulated GPUs the hint is not there.
    g.down()
    g.up("--simulate-gpus", 2)
    assert "--simulate-gpus" not in g.run("ginfo", check=True).stdout


# -- completion on every program

def completion(prog, *args, env):
    return run_cli(prog, "completion", *args, env=env)


def test_completion_on_every_program_for_every_shell(env):
    for shell in SHELLS:
        outs = {}
        for prog in PROGRAMS:
            r = completion(prog, shell, env=env)
            assert (r.returncode, r.stderr) == (0, ""), (prog, shell, r)
            outs[prog] = r.stdout
        # One script, which completes every program, whichever program printed it.
        assert len(set(outs.values())) == 1, shell
        for prog in PROGRAMS:
            assert prog in outs["gbatch"], (shell, prog)


def test_completion_errors_are_the_same_everywhere(env):
    for prog in PROGRAMS:
        r = completion(prog, "tcsh", env=env)
        assert (r.returncode, r.stdout) == (2, ""), (prog, r)
        assert r.stderr == (f"{prog}: unknown shell 'tcsh'; use bash, elvish, fish, powershell "
                            f"or zsh (e.g. '{prog} completion bash')\n"), r.stderr
        r = completion(prog, env=env)
        assert r.returncode == 2 and r.stderr == (
            f"{prog}: 'completion' needs a shell: bash, elvish, fish, powershell or zsh "
            f"(e.g. '{prog} completion bash')\n"), r.stderr
        r = completion(prog, "bash", "zsh", env=env)
        assert_one_line_error(r, prog, 2, "unexpected argument 'zsh'")
        r = completion(prog, "--help", env=env)
        assert r.returncode == 0 and r.stdout.startswith(f"Usage: {prog} completion SHELL"), r
        # Each program's help names it.
        assert "completion" in run_cli(prog, "--help", env=env).stdout, prog
    # Options before 'completion' are refused, pointing at the right order.
    for prog, args in [("gcancel", ["-v"]), ("ginfo", ["-v"]), ("gstats", ["-a"]),
                       ("gqueue", ["-a"]), ("gflowd", ["-v"])]:
        r = run_cli(prog, *args, "completion", "bash", env=env)
        assert_one_line_error(r, prog, 2, "'completion' comes first", f"{prog} completion")


def script(shell, env, tmp_path):
    path = tmp_path / f"gflow.{shell}"
    path.write_text(completion("gqueue", shell, env=env).stdout)
    return path


def test_completion_scripts_parse_in_their_shells(env, tmp_path):
    for shell, argv in (("bash", ["bash", "-n"]), ("zsh", ["zsh", "-n"]),
                        ("fish", ["fish", "--no-execute"])):
        if not shutil.which(argv[0]):
            pytest.fail(f"{argv[0]} is missing: scripts/install-deps.sh installs it")
        cp = subprocess.run(argv + [str(script(shell, env, tmp_path))], capture_output=True,
                            text=True, timeout=20)
        assert cp.returncode == 0 and cp.stderr == "", (shell, cp)


def test_completion_scripts_complete_in_their_shells(env, tmp_path):
    from test_compat_gbatch import complete, help_flags
    bash = completion("gjob", "bash", env=env).stdout
    shells = {"bash", "elvish", "fish", "powershell", "zsh"}
    for prog in PROGRAMS:
        assert complete(bash, f"{prog} completion ") == shells, prog
        assert complete(bash, f"{prog} completion -") == {"-h", "--help"}, prog
    assert complete(bash, "gflow-mcp -") == help_flags([binary("gflow-mcp")])
    assert "completion" in complete(bash, "gqueue ")
    assert complete(bash, "gjob close-sessions -") == \
        help_flags([binary("gjob"), "close-sessions"])
    assert complete(bash, "gjob clo") == {"close-sessions", "close"}
    assert complete(bash, "gctl quota ") == {"list", "show", "set", "remove", "clear"}
    # zsh: registered for every program (through bashcompinit), and completing.
    zsh = script("zsh", env, tmp_path)
    cp = subprocess.run(
        ["zsh", "-fc", f"source {zsh}; for p in {' '.join(PROGRAMS)}; do print -r -- "
         "\"$p=$_comps[$p]\"; done; setopt ksharrays; COMP_WORDS=(gctl quota ''); "
         "COMP_CWORD=2; _gflow_complete; print -r -- \"${COMPREPLY[*]}\""],
        capture_output=True, text=True, timeout=20, env=dict(env, HOME=str(tmp_path)))
    assert cp.returncode == 0, cp
    lines = cp.stdout.splitlines()
    assert lines[:-1] == [f"{p}=_bash_complete -o default -F _gflow_complete"
                          for p in PROGRAMS], cp.stdout
    assert set(lines[-1].split()) == {"list", "show", "set", "remove", "clear"}
    # fish
    fish = script("fish", env, tmp_path)
    for line, want in (("gqueue completion ", shells),
                       ("gctl quota ", {"list", "show", "set", "remove", "clear"}),
                       ("gflow-mcp --", {"--socket", "--help", "--version"})):
        cp = subprocess.run(["fish", "--no-config", "-c", f"source {fish}; complete -C'{line}'"],
                            capture_output=True, text=True, timeout=20,
                            env=dict(env, HOME=str(tmp_path)))
        assert cp.returncode == 0, cp
        assert {l.split("\t")[0] for l in cp.stdout.splitlines()} == want, (line, cp.stdout)


def balanced(text, pairs="{}[]()"):
    depth = {pairs[i]: 0 for i in range(0, len(pairs), 2)}
    for ch in re.sub(r"'[^']*'", "", text):  # words are quoted: their brackets do not count
        for i in range(0, len(pairs), 2):
            if ch == pairs[i]:
                depth[pairs[i]] += 1
            elif ch == pairs[i + 1]:
                depth[pairs[i]] -= 1
                assert depth[pairs[i]] >= 0, text
    return all(v == 0 for v in depth.values())


def test_powershell_and_elvish_scripts_have_clap_shape(env, tmp_path):
    from test_compat_gbatch import help_flags
    ps = completion("gctl", "powershell", env=env).stdout
    assert balanced(ps)
    names = re.search(r"Register-ArgumentCompleter -Native -CommandName @\(([^)]*)\) "
                      r"-ScriptBlock \{", ps)
    assert names and sorted(names.group(1).split(", ")) == sorted(f"'{p}'" for p in PROGRAMS)
    assert "param($wordToComplete, $commandAst, $cursorPosition)" in ps
    assert ps.rstrip().endswith("Sort-Object -Property ListItemText\n}".rstrip())

    def ps_case(key):
        m = re.search(r"\n        '" + re.escape(key) + r"' \{\n(.*?)\n            break\n", ps,
                      re.S)
        assert m, key
        words = re.findall(r"\[CompletionResult\]::new\('([^']*)', '\1', "
                           r"\[CompletionResultType\]::(\w+), '\1'\)", m.group(1))
        assert len(words) == m.group(1).count("\n") + 1, m.group(1)
        return words

    assert set(w for w, _ in ps_case("gctl;quota") if not w.startswith("-")) == \
        {"list", "show", "set", "remove", "clear"}
    assert {w for w, k in ps_case("gjob;close-sessions") if k == "ParameterName"} == \
        help_flags([binary("gjob"), "close-sessions"])
    for prog in PROGRAMS:
        assert [w for w, _ in ps_case(f"{prog};completion")] == SHELLS + ["-h", "--help"]
        assert ("completion", "ParameterValue") in ps_case(prog)

    elv = completion("ginfo", "elvish", env=env).stdout
    assert balanced(elv)
    entries = dict(re.findall(r"^    &'([^']+)'= \[((?: '[^']*')*) \]$", elv, re.M))
    assert entries["gctl;quota"].split()[:5] == ["'list'", "'show'", "'set'", "'remove'",
                                                  "'clear'"]
    for prog in PROGRAMS:
        assert entries[f"{prog};completion"].split() == [f"'{w}'" for w in
                                                         SHELLS + ["-h", "--help"]]
    progs = re.search(r"^for c \[([^]]*)\] \{$", elv, re.M)
    assert progs and sorted(progs.group(1).split()) == sorted(PROGRAMS), elv[-400:]
    assert "set edit:completion:arg-completer[$c] = $gflow-complete~" in elv
    assert "fn gflow-complete {|@words|" in elv
