"""End-to-end tests of the GPU parts of the command line that need no daemon.

The real binaries from $GFLOW_BUILD_DIR (default <repo>/build): gbatch's GPU options
(-g/--gpus, --gres, --shared, --gpu-memory and its aliases, --gpus-per-task) on the
command line and in '# GFLOW' directives, ginfo's and gctl's help, version and usage
errors, and the connect message when no daemon listens. Every test gets its own XDG
directories and a GFLOW_SOCKET where nothing listens, so a command that gets past its
checks ends with the connect error (exit 1) instead of a usage error (exit 2): that is
how these tests tell "accepted" from "refused" without a daemon.
"""

import pytest

from conftest import VERSION, assert_not_running, assert_one_line_error, run_cli as run


def assert_accepted(r, cmd):
    """The command line passed every check and the command went on to the daemon."""
    assert_not_running(r)


# ---- help and version -----------------------------------------------------------------


@pytest.mark.parametrize("cmd", ["ginfo", "gctl"])
@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(cmd, flag, env):
    r = run(cmd, flag, env=env)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"{cmd} {VERSION}\n", "")


HELP_MENTIONS = {
    "gbatch": ["-g, --gpus N", "--gres N, --gres gpu:N", "--shared", "--gpu-memory M",
               "--max-gpu-mem", "--max-gpu-memory", "--gpus-per-task N", "RANK",
               "CUDA_VISIBLE_DEVICES"],
    "ginfo": ["-v, --verbose", "--topology", "-o, --output", "json", "--socket", "-h, --help",
              "-V, --version", "?"],
    "gctl": ["show-gpus", "set-gpus", "gpu-process ignore --gpu G --pid P",
             "gpu-process unignore", "gpu-process list", "--socket", "-h, --help",
             "-V, --version"],
}


@pytest.mark.parametrize("cmd", sorted(HELP_MENTIONS))
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_documents_the_gpu_options(cmd, flag, env):
    r = run(cmd, flag, env=env)
    assert r.returncode == 0 and r.stderr == "", r
    for word in HELP_MENTIONS[cmd]:
        assert word in r.stdout, (cmd, word)


def test_gbatch_help_lists_gpu_directives(env):
    r = run("gbatch", "--help", env=env)
    assert "--gpus" in r.stdout.split("Script directives")[1]


@pytest.mark.parametrize("args,words", [
    (["show-gpus", "--help"], ["Usage: gctl show-gpus", "runtime", "config"]),
    (["set-gpus", "--help"], ["Usage: gctl set-gpus", "all", "0-3"]),
    (["gpu-process", "--help"], ["--gpu G", "--pid P", "list"]),
    (["gpu-process", "ignore", "--help"], ["--gpu G", "--pid P"]),
    (["help"], ["show-gpus", "set-gpus", "gpu-process"]),
])
def test_gctl_subcommand_help(args, words, env):
    r = run("gctl", *args, env=env)
    assert r.returncode == 0 and r.stderr == "", r
    for w in words:
        assert w in r.stdout, (args, w)


# ---- gbatch GPU options ---------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["--gpus", "2"], ["-g", "2"], ["-g2"], ["--gpus=0"], ["--gres", "2"], ["--gres", "gpu:2"],
    ["--gres=gpu:2"], ["--gres", "gpu"],
    ["-g", "1", "--shared", "--gpu-memory", "20G"],
    ["-g", "1", "--shared", "--max-gpu-mem", "512"],
    ["-g", "1", "--shared", "--max-gpu-memory=24G"],
    ["-g", "1", "--gpu-memory", "8192"],
    ["-g", "4", "--gpus-per-task", "1"], ["-g", "4", "--gpus-per-task", "0"],
])
def test_gbatch_good_gpu_options_are_accepted(args, env):
    assert_accepted(run("gbatch", *args, "echo", "hi", env=env), "gbatch")


@pytest.mark.parametrize("args,needles", [
    (["--gpus", "x"], ["invalid GPU count 'x' for --gpus"]),
    (["-g", "-1"], ["invalid GPU count '-1'"]),
    (["-g", "1.5"], ["invalid GPU count '1.5'"]),
    (["-g", "100000"], ["at most"]),
    (["--gres", "gpu:x"], ["invalid --gres 'gpu:x'", "gpu:N"]),
    (["--gres", "gpu:"], ["invalid --gres 'gpu:'"]),
    (["--gres", "x"], ["invalid --gres 'x'"]),
    (["--gres", "mps:1"], ["only GPUs"]),
    (["--gres", "gpu:a100:2"], ["GPU types are not supported"]),
    (["-g", "1", "--gpu-memory", "0"], ["--gpu-memory", "must be positive"]),
    (["-g", "1", "--max-gpu-mem", "lots"], ["--gpu-memory", "invalid memory size 'lots'"]),
    (["-g", "1", "--gpus-per-task", "2"], ["--gpus-per-task", "use 1"]),
    (["-g", "1", "--gpus-per-task", "x"], ["--gpus-per-task"]),
])
def test_gbatch_bad_gpu_values(args, needles, env):
    assert_one_line_error(run("gbatch", *args, "echo", env=env), "gbatch", 2, *needles)


def test_gbatch_shared_needs_gpu_memory(env):
    r = run("gbatch", "-g", "1", "--shared", "echo", env=env)
    assert_one_line_error(
        r, "gbatch", 2,
        "--shared needs --gpu-memory (the share of each GPU this job may use)")


@pytest.mark.parametrize("args,needle", [
    (["--shared", "--gpu-memory", "1G"], "--shared needs --gpus"),
    (["--gpu-memory", "1G"], "--gpu-memory is per GPU"),
    (["--gpus-per-task", "1"], "--gpus-per-task 1"),
    (["-g", "0", "--gpus-per-task", "1"], "needs --gpus N"),
])
def test_gbatch_gpu_options_that_need_gpus(args, needle, env):
    assert_one_line_error(run("gbatch", *args, "echo", env=env), "gbatch", 2, needle)


@pytest.mark.parametrize("flag", ["--gpus", "-g", "--gres", "--gpu-memory", "--gpus-per-task"])
def test_gbatch_gpu_option_without_value(flag, env):
    r = run("gbatch", flag, env=env)
    assert_one_line_error(r, "gbatch", 2)


def test_gbatch_shared_takes_no_value(env):
    r = run("gbatch", "--shared=yes", "echo", env=env)
    assert_one_line_error(r, "gbatch", 2, "--shared")


def test_gbatch_gpu_directives_are_accepted(env, tmp_path):
    s = tmp_path / "job.sh"
    s.write_text("#!/bin/bash\n# GFLOW --gpus 2\n# GFLOW --shared --gpu-memory=10G\n"
                 "#GFLOW --gpus-per-task 1\n# GFLOW --gres gpu:2\npython train.py\n")
    assert_accepted(run("gbatch", str(s), env=env), "gbatch")


def test_gbatch_bad_gpu_directive(env, tmp_path):
    s = tmp_path / "job.sh"
    s.write_text("#!/bin/bash\n# GFLOW --gres gpu:a100:2\necho\n")
    assert_one_line_error(run("gbatch", str(s), env=env), "gbatch", 2,
                          f"{s}:2:", "GPU types are not supported", "# GFLOW")


def test_gbatch_shared_directive_needs_gpu_memory(env, tmp_path):
    s = tmp_path / "job.sh"
    s.write_text("#!/bin/bash\n# GFLOW --shared\n# GFLOW -g 1\necho\n")
    assert_one_line_error(run("gbatch", str(s), env=env), "gbatch", 2,
                          "--shared needs --gpu-memory")


def test_gbatch_command_line_memory_completes_a_shared_directive(env, tmp_path):
    s = tmp_path / "job.sh"
    s.write_text("#!/bin/bash\n# GFLOW --shared -g 1\necho\n")
    assert_accepted(run("gbatch", "--gpu-memory", "4G", str(s), env=env), "gbatch")


def test_gbatch_command_line_gpus_win_over_directive(env, tmp_path):
    """A directive's --gpus-per-task 1 is fine when the command line sets --gpus."""
    s = tmp_path / "job.sh"
    s.write_text("#!/bin/bash\n# GFLOW --gpus 0\n# GFLOW --gpus-per-task 1\necho\n")
    assert_one_line_error(run("gbatch", str(s), env=env), "gbatch", 2, "--gpus-per-task")
    assert_accepted(run("gbatch", "-g", "2", str(s), env=env), "gbatch")


def test_gbatch_gpu_words_after_the_command_belong_to_the_job(env):
    assert_accepted(run("gbatch", "python", "train.py", "--gpus", "x", "--shared", env=env),
                    "gbatch")


# ---- ginfo ----------------------------------------------------------------------------


@pytest.mark.parametrize("args,needle", [
    (["--bogus"], "unknown option --bogus"),
    (["-x"], "unknown option -x"),
    (["-o", "xml"], "unknown output format 'xml'"),
    (["-o", "csv"], "unknown output format 'csv'"),
    (["-o"], "-o"),
    (["extra"], "unexpected argument 'extra'"),
    (["-v", "--topology"], "--topology"),
])
def test_ginfo_bad_input(args, needle, env):
    assert_one_line_error(run("ginfo", *args, env=env), "ginfo", 2, needle)


# ---- gctl -----------------------------------------------------------------------------


@pytest.mark.parametrize("args,needle", [
    ([], "no command given"),
    (["bogus"], "unknown command 'bogus'"),
    (["--bogus"], "unknown option --bogus"),
    (["set-gpus"], "which GPUs?"),
    (["set-gpus", "0", "1"], "takes one list"),
    (["set-gpus", "x"], "invalid GPU list 'x'"),
    (["set-gpus", "0,,1"], "empty item"),
    (["set-gpus", "3-1"], "ends before it starts"),
    (["set-gpus", "-1"], "unknown option -1"),
    (["set-gpus", "99999"], "invalid GPU list"),
    (["show-gpus", "extra"], "takes no arguments"),
    (["show-gpus", "--bogus"], "unknown option --bogus"),
    (["gpu-process"], "needs an action"),
    (["gpu-process", "kill"], "unknown gpu-process action 'kill'"),
    (["gpu-process", "ignore"], "needs --gpu G and --pid P"),
    (["gpu-process", "ignore", "--gpu", "0"], "needs --gpu G and --pid P"),
    (["gpu-process", "unignore", "--pid", "5"], "needs --gpu G and --pid P"),
    (["gpu-process", "ignore", "--gpu", "x", "--pid", "5"], "invalid value 'x' for --gpu"),
    (["gpu-process", "ignore", "--gpu", "0", "--pid", "-5"], "--pid"),
    (["gpu-process", "ignore", "--gpu", "0", "--pid", "0"], "--pid"),
    (["gpu-process", "ignore", "--bogus"], "unknown option --bogus"),
    (["gpu-process", "list", "--gpu", "0"], "takes no --gpu or --pid"),
    (["gpu-process", "list", "extra"], "unexpected argument 'extra'"),
])
def test_gctl_usage_errors(args, needle, env):
    assert_one_line_error(run("gctl", *args, env=env), "gctl", 2, needle)


@pytest.mark.parametrize("args", [
    ["set-gpus", "0,2"], ["set-gpus", "0-3"], ["set-gpus", "all"], ["show-gpus"],
    ["gpu-process", "list"], ["gpu-process", "ignore", "--gpu", "0", "--pid", "4242"],
    ["gpu-process", "unignore", "--gpu=1", "--pid=7"],
])
def test_gctl_good_commands_reach_the_daemon(args, env):
    assert_accepted(run("gctl", *args, env=env), "gctl")


# ---- no daemon ------------------------------------------------------------------------


@pytest.mark.parametrize("cmd,args", [
    ("ginfo", []), ("ginfo", ["-v"]), ("ginfo", ["--topology"]), ("ginfo", ["-o", "json"]),
    ("gctl", ["show-gpus"]),
])
def test_daemon_not_running(cmd, args, env):
    sock = env["GFLOW_SOCKET"]
    r = run(cmd, *args, env=env)
    assert_not_running(r, f"socket: {sock} (No such file or directory)")


@pytest.mark.parametrize("cmd,args", [("ginfo", []), ("gctl", ["show-gpus"])])
def test_socket_flag_wins_over_environment(cmd, args, env, tmp_path):
    other = tmp_path / "other.sock"
    r = run(cmd, "--socket", str(other), *args, env=env)
    assert_not_running(r, f"socket: {other} (")
