"""End-to-end tests of the command-line programs that need no daemon.

They run the real binaries from $GFLOW_BUILD_DIR (default <repo>/build): help and
version output, one-line errors with the right exit status for bad input (2 for usage
errors), and the message given when the daemon is not running. Every test gets its own
XDG directories and points GFLOW_SOCKET at a path where nothing listens, so no real
daemon or user configuration is ever touched.
"""
import socket
import subprocess

import pytest

from conftest import VERSION, assert_not_running, assert_one_line_error, run_cli as run

COMMANDS = ["gbatch", "gqueue", "gjob", "gcancel"]


# ---- --version and --help -------------------------------------------------------------


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(cmd, flag, env):
    r = run(cmd, flag, env=env)
    assert r.returncode == 0
    assert r.stdout == f"{cmd} {VERSION}\n"
    assert r.stderr == ""


HELP_MENTIONS = {
    "gbatch": [
        "-J", "-n", "--name", "--job-name", "-p", "--priority", "-t", "--time",
        "--time-limit", "-H", "--hold", "--dry-run", "--parsable", "--socket", "-h",
        "--help", "-V", "--version", "# GFLOW",
    ],
    "gqueue": [
        "-a", "--all", "-c", "--completed", "-s", "--states", "-j", "--jobs", "-u",
        "--user", "-n", "--limit", "-r", "--sort", "-f", "--format", "-o", "--output",
        "--socket", "--help", "--version", "JOBID", "NODELIST(REASON)", "EXITCODE",
        "TIMELIMIT", "SUBMIT", "PRIORITY", "USER",
    ],
    "gjob": ["show", "log", "hold", "release", "--socket", "--help", "--version", "@~N"],
    "gcancel": ["--dry-run", "--socket", "--help", "--version", "@~N"],
}


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_documents_every_option(cmd, flag, env):
    r = run(cmd, flag, env=env)
    assert r.returncode == 0
    assert r.stderr == ""
    assert "Usage" in r.stdout
    for word in HELP_MENTIONS[cmd]:
        assert word in r.stdout, f"{cmd} {flag} does not mention {word}"


@pytest.mark.parametrize(
    "sub, words",
    [
        ("show", ["--output", "json"]),
        ("log", ["--first", "--last", "--follow"]),
        ("hold", ["@"]),
        ("release", ["@"]),
        ("update", ["-s, --script", "-e NAME", "--memory-limit", "--clear-conda-env",
                    "--clear-time-limit", "--clear-memory-limit", "--clear-gpu-memory-limit",
                    "--clear-max-concurrent", "--clear-max-retries",
                    "--auto-cancel-on-dep-failure", "--no-auto-cancel-on-dep-failure"]),
        ("redo", ["-e NAME", "--clear-deps", "--cascade"]),
    ],
)
def test_gjob_subcommand_help(sub, words, env):
    r = run("gjob", sub, "--help", env=env)
    assert r.returncode == 0
    assert f"gjob {sub}" in r.stdout
    for w in words:
        assert w in r.stdout


def test_help_needs_no_daemon(env):
    # --help and --version must answer even with a broken socket setting.
    env["GFLOW_SOCKET"] = "/nonexistent/" + "x" * 200
    for cmd in COMMANDS:
        assert run(cmd, "--help", env=env).returncode == 0


# ---- gbatch: bad input ----------------------------------------------------------------


def test_gbatch_unknown_flag(env):
    r = run("gbatch", "--bogus", "echo", "hi", env=env)
    assert_one_line_error(r, "gbatch", 2, "--bogus", "gbatch --help")


def test_gbatch_unknown_short_flag(env):
    r = run("gbatch", "-x", "echo", env=env)
    assert_one_line_error(r, "gbatch", 2, "unknown option -x")
    r = run("gbatch", "--hold", "-Hx", "echo", env=env)
    assert_one_line_error(r, "gbatch", 2, "unknown option -x")


def test_gbatch_flag_given_a_value_it_does_not_take(env):
    r = run("gbatch", "--hold=yes", "echo", env=env)
    assert_one_line_error(r, "gbatch", 2, "--hold takes no value")


@pytest.mark.parametrize("value", ["1x", "abc", "1:2:3:4", "-5", "", "1-2-3"])
def test_gbatch_bad_time(value, env):
    r = run("gbatch", "--time", value, "echo", "hi", env=env)
    assert_one_line_error(r, "gbatch", 2, "time limit", "HH:MM:SS")


def test_gbatch_bad_time_short_and_aliases(env):
    for flag in ["-t", "--time-limit", "--timelimit"]:
        r = run("gbatch", flag, "soon", "echo", env=env)
        assert_one_line_error(r, "gbatch", 2, "'soon'")
    r = run("gbatch", "--time=9x", "echo", env=env)
    assert_one_line_error(r, "gbatch", 2, "'9x'")


@pytest.mark.parametrize("value", ["256", "-1", "high", "1.5", ""])
def test_gbatch_priority_out_of_range(value, env):
    r = run("gbatch", "-p", value, "echo", "hi", env=env)
    assert_one_line_error(r, "gbatch", 2, "priority", "0 to 255")


@pytest.mark.parametrize("flag", ["-t", "--time", "-p", "--priority", "-J", "--name"])
def test_gbatch_option_without_value(flag, env):
    r = run("gbatch", flag, env=env)
    assert_one_line_error(r, "gbatch", 2, "needs a value", flag)


def test_gbatch_empty_name(env):
    r = run("gbatch", "--name=", "echo", env=env)
    assert_one_line_error(r, "gbatch", 2, "name")


def test_gbatch_no_command_on_empty_stdin(env):
    r = run("gbatch", env=env, stdin=subprocess.DEVNULL)
    assert_one_line_error(r, "gbatch", 2, "standard input is empty")


def test_gbatch_dash_with_empty_stdin(env):
    r = run("gbatch", "-", env=env, stdin=subprocess.DEVNULL)
    assert_one_line_error(r, "gbatch", 2, "standard input is empty")


def test_gbatch_bad_directive(env, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n# GFLOW --time 10\n# GFLOW --bogus\necho hi\n")
    r = run("gbatch", str(script), env=env)
    assert_one_line_error(r, "gbatch", 2, "job.sh:3", "--bogus", "GFLOW")


def test_gbatch_bad_directive_value(env, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#GFLOW --priority=999\necho hi\n")
    r = run("gbatch", str(script), env=env)
    assert_one_line_error(r, "gbatch", 2, "job.sh:2", "999")


def test_gbatch_directive_overridden_by_command_line(env, tmp_path):
    # A bad value in a directive is still reported (directives are always checked),
    # but a good command-line value means the submission goes ahead to the daemon.
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n# GFLOW --time 5\necho hi\n")
    r = run("gbatch", "--time", "10", str(script), env=env)
    assert_not_running(r)


def test_gbatch_binary_script_rejected(env, tmp_path):
    script = tmp_path / "blob.bin"
    script.write_bytes(b"\x7fELF\x00\x01\xff\xfe")
    r = run("gbatch", str(script), env=env)
    assert_one_line_error(r, "gbatch", 1, "blob.bin")


def test_gbatch_job_words_are_not_options(env):
    # Options end at the first word that is not one: '--bogus' belongs to the job, so
    # the command is accepted and only the missing daemon stops it.
    r = run("gbatch", "echo", "--bogus", "-t", "nonsense", env=env)
    assert_not_running(r)


# ---- gqueue: bad input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--bogus"], "--bogus"),
        (["-s", "XX"], "'XX'"),
        (["--states", "PD,nope"], "'nope'"),
        (["-f", "JOBID,FOO"], "'FOO'"),
        (["-r", "bogus"], "'bogus'"),
        (["-o", "xml"], "'xml'"),
        (["-n", "abc"], "'abc'"),
        (["-j", "1,x"], "1,x"),
        (["-j", "@~x"], "@~x"),
        (["-c", "-s", "R"], "--completed"),
        (["extra"], "'extra'"),
        (["-s"], "needs a value"),
    ],
)
def test_gqueue_bad_input(args, needle, env):
    r = run("gqueue", *args, env=env)
    assert_one_line_error(r, "gqueue", 2, needle)


# ---- gjob: bad input ------------------------------------------------------------------


def test_gjob_without_subcommand(env):
    r = run("gjob", env=env)
    assert_one_line_error(r, "gjob", 2, "show", "log", "hold", "release")


def test_gjob_unknown_subcommand(env):
    r = run("gjob", "frobnicate", "1", env=env)
    assert_one_line_error(r, "gjob", 2, "'frobnicate'", "show", "gjob --help")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["show"], "gjob show"),
        (["show", "abc"], "'abc'"),
        (["show", "-o", "xml", "1"], "'xml'"),
        (["hold"], "gjob hold"),
        (["release", "0"], "job ids start at 1"),
        (["log"], "gjob log"),
        (["log", "1", "2"], "one job"),
        (["log", "-f", "1", "-l", "2", "1"], "--first"),
        (["log", "--follow", "--last", "3", "1"], "--follow"),
        (["log", "--last", "many", "1"], "'many'"),
        (["log", "--bogus", "1"], "--bogus"),
        (["show", "@x"], "@x"),
    ],
)
def test_gjob_bad_input(args, needle, env):
    r = run("gjob", *args, env=env)
    assert_one_line_error(r, "gjob", 2, needle)


# ---- gcancel: bad input ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args, needle",
    [
        ([], "gcancel 42"),
        (["abc"], "'abc'"),
        (["5-3"], "5-3"),
        (["1,,2"], "empty item"),
        (["--bogus", "1"], "--bogus"),
        (["@~"], "@~"),
    ],
)
def test_gcancel_bad_input(args, needle, env):
    r = run("gcancel", *args, env=env)
    assert_one_line_error(r, "gcancel", 2, needle)


# ---- the daemon is not running ---------------------------------------------------------

OFFLINE_CALLS = [
    ("gbatch", ["echo", "hi"]),
    ("gbatch", ["--dry-run", "echo", "hi"]),
    ("gqueue", []),
    ("gqueue", ["-a", "-o", "json"]),
    ("gjob", ["show", "1"]),
    ("gjob", ["log", "1"]),
    ("gjob", ["hold", "1"]),
    ("gjob", ["release", "1-3"]),
    ("gjob", ["show", "@"]),
    ("gcancel", ["1"]),
    ("gcancel", ["--dry-run", "1,2"]),
]


@pytest.mark.parametrize("cmd, args", OFFLINE_CALLS)
def test_daemon_not_running(cmd, args, env):
    sock = env["GFLOW_SOCKET"]
    r = run(cmd, *args, env=env)
    # The same first line from every program, then the socket and why (conftest).
    assert_not_running(r, f"socket: {sock} (No such file or directory), named by GFLOW_SOCKET")


def test_socket_flag_wins_over_environment(env, tmp_path):
    other = str(tmp_path / "other.sock")
    r = run("gqueue", "--socket", other, env=env)
    assert_not_running(r, f"socket: {other} (")
    r = run("gjob", "--socket", other, "show", "1", env=env)
    assert_not_running(r, f"socket: {other} (")


def test_stale_socket_file(env, tmp_path):
    # A socket file left behind by a daemon that died: nothing accepts on it.
    path = str(tmp_path / "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()
    env["GFLOW_SOCKET"] = path
    r = run("gcancel", "7", env=env)
    assert_not_running(r, f"socket: {path} (Connection refused)")


def test_socket_path_too_long(env, tmp_path):
    env["GFLOW_SOCKET"] = str(tmp_path / ("d" * 120) / "gflowd.sock")
    r = run("gqueue", env=env)
    assert_one_line_error(r, "gqueue", 1, "too long")


def test_socket_from_configuration(env, tmp_path):
    # Without GFLOW_SOCKET the configured daemon.socket_path is used (here set through
    # its environment variable, which works for root and other users alike).
    del env["GFLOW_SOCKET"]
    path = str(tmp_path / "from-config.sock")
    env["GFLOW_DAEMON__SOCKET_PATH"] = path
    r = run("gqueue", env=env)
    assert_not_running(r, f"socket: {path} (", "daemon.socket_path")


def test_bad_configuration_is_reported(env):
    del env["GFLOW_SOCKET"]
    env["GFLOW_DAEMON__NO_SUCH_KEY"] = "1"
    r = run("gqueue", env=env)
    assert_one_line_error(r, "gqueue", 1, "GFLOW_DAEMON__NO_SUCH_KEY")
