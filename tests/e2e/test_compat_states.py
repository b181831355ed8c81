"""End-to-end tests of issue 11's cancelling state and gcancel, the ginfo topology legend,
the documented exit codes, and the README quick start run as written.

- A running job that gcancel stops shows CG (Cancelling) from the request until it is
  gone: in the API's job JSON, gqueue (-s CG, -s R), gjob show, across a daemon restart;
  then CA.
- gcancel says "cancelling" for a running job it signalled, "cancelled" for one that ended
  at once; an id given twice counts once; more than 20 jobs print one summary line
  (-v: one line per job); gflow's --kill is accepted; 'completion' works as in gflow.
- ginfo --topology's legend explains exactly the codes its matrix shows.
- docs/usage.md's exit codes: 127 from a command bash cannot find is LaunchFailed, a
  command's own `exit 127` is NonZeroExitCode.
- README.md's quick start block, command by command.
"""
import os
import re
import shlex
import stat
import sys
from pathlib import Path

from conftest import (REPO, assert_not_running, assert_one_line_error, parse_show, parse_table,
                      run_cli, wait_for)

sys.path.insert(0, os.path.dirname(__file__))
from test_gpus import fixture_of, sim, sim_gpu  # noqa: E402  (the NVML simulator fixtures)

# A grace far longer than any test: the job ends because the test lets it, not because
# the daemon's SIGKILL came.
LONG_GRACE = {"GFLOW_DAEMON__KILL_GRACE_SECS": "120"}

# Traps SIGTERM, says so, and ends only once the test creates the file "release".
TRAPS_TERM = ("trap 'echo got-term; while [ ! -e release ]; do sleep 0.05; done; exit 0' TERM; "
              "echo started; while :; do sleep 0.05; done")


def gqueue_rows(g, *args):
    cp = g.run("gqueue", *args, check=True)
    return parse_table(cp.stdout) if cp.stdout.strip() and "JOBID" in cp.stdout else []


def test_a_cancelled_running_job_is_cg_until_it_has_ended(make_gflow):
    g = make_gflow(env=LONG_GRACE)
    job = g.submit("--name", "stubborn", "bash", "-c", TRAPS_TERM)
    other = g.submit("--name", "runner", "sleep", "300")
    g.wait_state(job, "R")
    g.wait_state(other, "R")
    wait_for(lambda: "started" in g.log(job), "the job to set its trap")

    cp = g.run("gcancel", job)
    assert (cp.returncode, cp.stdout) == (
        0, f"Job {job} cancelling (SIGTERM sent; CG until it has stopped).\n"), cp.stderr
    wait_for(lambda: "got-term" in g.log(job), "the job to get SIGTERM")

    # The API: state CG / Cancelling, and still cancelling.
    j = g.job(job)
    assert (j["state"], j["state_name"], j.get("cancelling")) == ("CG", "Cancelling", True), j
    assert g.job(other)["state"] == "R"
    # The listing from memory, from the database (a list with an ended state), and TSV.
    assert {x["id"]: x["state"] for x in g.jobs(state="CG")} == {job: "CG"}
    assert {x["id"]: x["state"] for x in g.jobs(state="R")} == {job: "CG", other: "R"}
    assert {x["id"]: x["state"] for x in g.jobs(state="CG,CA")} == {job: "CG"}
    tsv = g.api("GET", "/v1/jobs?state=CG,CD&format=tsv&fields=id,state,state_name").text
    assert tsv.splitlines()[1:] == [f"{job}\tCG\tCancelling"], tsv

    # gqueue: the ST and STATE columns, -s CG (only those), -s R (running ones, CG too).
    rows = {int(r["JOBID"]): r for r in gqueue_rows(g, "-f", "JOBID,ST,STATE")}
    assert (rows[job]["ST"], rows[job]["STATE"]) == ("CG", "Cancelling"), rows
    assert (rows[other]["ST"], rows[other]["STATE"]) == ("R", "Running"), rows
    assert [int(r["JOBID"]) for r in gqueue_rows(g, "-s", "CG")] == [job]
    assert [int(r["JOBID"]) for r in gqueue_rows(g, "-s", "Cancelling")] == [job]
    assert sorted(int(r["JOBID"]) for r in gqueue_rows(g, "-s", "R")) == sorted([job, other])
    assert [r["ST"] for r in gqueue_rows(g, "-a", "-j", job)] == ["CG"]
    show = parse_show(g.run("gjob", "show", job, check=True).stdout)[0]
    assert show["State"] == "Cancelling (CG)", show

    # Cancelling it again is no error and says the same.
    cp = g.run("gcancel", job)
    assert (cp.returncode, cp.stdout) == (
        0, f"Job {job} cancelling (SIGTERM sent; CG until it has stopped).\n"), cp.stderr

    # Let it end within the grace: it becomes CA (nothing stored ever said CG).
    (g.work / "release").touch()
    j = g.wait_state(job, "CA", timeout=20)
    assert (j["state_name"], j["reason"], j.get("cancelling")) == (
        "Cancelled", "CancelledByUser", None), j
    assert g.jobs(state="CG") == []
    assert [r["ST"] for r in gqueue_rows(g, "-a", "-j", job)] == ["CA"]


def test_cg_is_kept_across_a_daemon_restart(make_gflow):
    """The cancel request is stored before the signal: a restarted daemon still shows the
    job as CG, and it ends as CA."""
    g = make_gflow(env=LONG_GRACE)
    job = g.submit("bash", "-c", TRAPS_TERM)
    g.wait_state(job, "R")
    wait_for(lambda: "started" in g.log(job), "the job to set its trap")
    g.run("gcancel", job, check=True)
    wait_for(lambda: "got-term" in g.log(job), "the job to get SIGTERM")
    assert g.down().returncode == 0
    g.up()
    j = g.job(job)
    assert (j["state"], j["state_name"]) == ("CG", "Cancelling"), j
    assert [r["ST"] for r in gqueue_rows(g, "-j", job)] == ["CG"]
    (g.work / "release").touch()
    assert g.wait_state(job, "CA", timeout=20)["reason"] == "CancelledByUser"


def test_gcancel_says_cancelled_for_a_queued_job_and_counts_a_repeated_id_once(gflow):
    held = gflow.submit("--hold", "true")
    cp = gflow.run("gcancel", held, held, f"{held},{held}")
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, f"Job {held} cancelled.\n", "")
    assert gflow.job(held)["state"] == "CA"
    # gflow's and Slurm's --kill / --cancel are accepted and change nothing.
    a, b = gflow.submit("--hold", "true"), gflow.submit("--hold", "true")
    assert gflow.run("gcancel", "--kill", a).stdout == f"Job {a} cancelled.\n"
    assert gflow.run("gcancel", "--cancel", b).stdout == f"Job {b} cancelled.\n"


def held_array(g, n):
    """Submits an array of n held jobs; their ids (consecutive)."""
    before = {j["id"] for j in g.jobs(state="H")}
    g.run("gbatch", "--hold", "--array", f"1-{n}", "true", check=True)
    ids = sorted(j["id"] for j in g.jobs(state="H") if j["id"] not in before)
    assert len(ids) == n and ids == list(range(ids[0], ids[0] + n)), ids
    return ids


def test_gcancel_of_many_jobs_prints_one_summary_line_unless_verbose(gflow):
    ids = held_array(gflow, 30)
    first, last = ids[0], ids[-1]
    ended = gflow.submit("true")
    gflow.wait_state(ended, "CD")
    # 30 held jobs, one ended job, and two ids no job has: 33 ids, one summary line.
    cp = gflow.run("gcancel", f"{first}-{last}", ended, ended + 1, ended + 2)
    assert cp.returncode == 1, cp
    assert cp.stdout == (f"33 jobs ({first}-{ended + 2}): 30 cancelled, 0 cancelling "
                         f"(CG until stopped), 1 already ended, 2 not found.\n"), cp.stdout
    assert cp.stderr == ("gcancel: 3 jobs not cancelled (1 already ended, 2 not found); "
                         "'gcancel -v' lists each\n"), cp.stderr
    assert all(gflow.job(i)["state"] == "CA" for i in ids)

    # -v: a line per job, the refusals on stderr.
    more = held_array(gflow, 25)
    cp = gflow.run("gcancel", "-v", f"{more[0]}-{more[-1]}", ended)
    assert cp.returncode == 1
    assert cp.stdout.splitlines() == [f"Job {i} cancelled." for i in more]
    assert cp.stderr.count("\n") == 1 and f"job {ended} has already ended (CD)" in cp.stderr

    # A dry run prints gflow's line per job however many there are (scripts read it).
    few = held_array(gflow, 21)
    cp = gflow.run("gcancel", "--dry-run", f"{few[0]}-{few[-2]}")
    assert cp.stdout.splitlines() == [f"{i}\tHold\tok" for i in few[:-1]]
    cp = gflow.run("gcancel", "--dry-run", f"{few[0]}-{few[-1]}")
    assert (cp.returncode, cp.stdout) == (0, "".join(f"{i}\tHold\tok\n" for i in few))
    assert all(gflow.job(i)["state"] == "H" for i in few)


def test_gcancel_summary_counts_dependents_and_cancelling_jobs(make_gflow):
    g = make_gflow(env=LONG_GRACE)
    run = g.submit("bash", "-c", TRAPS_TERM)
    g.wait_state(run, "R")
    wait_for(lambda: "started" in g.log(run), "the job to set its trap")
    root = g.submit("--hold", "true")
    deps = [g.submit("--depends-on", root, "true") for _ in range(21)]
    cp = g.run("gcancel", run, root)
    assert cp.returncode == 0, cp
    assert root == run + 1
    assert cp.stdout == (f"2 jobs ({run}-{root}): 1 cancelled, 1 cancelling (CG until "
                         f"stopped), 0 already ended, 0 not found; 21 dependent jobs "
                         f"cancelled too.\n"), cp.stdout
    assert all(g.job(d)["state"] == "CA" for d in deps)
    assert g.job(run)["state"] == "CG"
    (g.work / "release").touch()
    g.wait_state(run, "CA", timeout=20)


def test_gcancel_and_ginfo_print_completion_given_first(env):
    # gflow's `gcancel completion SHELL` and `ginfo completion SHELL` (issue 29); after an
    # option the word is refused, pointing at the order.
    for prog in ("gcancel", "ginfo"):
        r = run_cli(prog, "completion", "bash", env=env)
        assert r.returncode == 0 and "complete -o default -F _gflow_complete" in r.stdout, r
        r = run_cli(prog, "-v", "completion", "bash", env=env)
        assert_one_line_error(r, prog, 2, f"'completion' comes first", f"'{prog} completion")


def test_ginfo_without_a_daemon_fails_naming_the_socket(env):
    r = run_cli("ginfo", env=env)
    assert_not_running(r, f"socket: {env['GFLOW_SOCKET']} (")


def test_ginfo_topology_legend_explains_exactly_the_codes_shown(make_gflow):
    # GPUs 0 and 1 joined by two NVLinks; 2 and 3 on the other NUMA node.
    g = sim(make_gflow, fixture=fixture_of([
        sim_gpu(0, numa_node=0, nvlink=[1, 1]),
        sim_gpu(1, numa_node=0, nvlink=[0, 0]),
        sim_gpu(2, numa_node=1),
        sim_gpu(3, numa_node=1),
    ]))
    out = g.run("ginfo", "--topology", check=True).stdout
    matrix, legend = out.split("\nLegend:\n")
    cells = {c for line in matrix.splitlines()[1:] if line.startswith("GPU")
             for c in line.split()[1:5]}
    assert cells == {"X", "NV2", "NODE", "SYS"}, matrix
    codes = [line.split()[0] for line in legend.splitlines()]
    assert codes == ["X", "NV#", "NODE", "SYS"], legend
    assert "NV#   joined by # bonded NVLinks" in legend


def test_exit_codes_126_127_are_as_usage_md_says(gflow):
    """docs/usage.md: 127 is LaunchFailed when bash cannot find the command's first word,
    the job's own NonZeroExitCode when a command that did start exits 127."""
    missing = gflow.submit("no-such-command-e11")
    own = gflow.submit("bash", "-c", "exit 127")
    j = gflow.wait_state(missing)
    assert (j["state"], j["exit_code"], j["reason"]) == (
        "F", 127, "LaunchFailed: command not found: no-such-command-e11"), j
    j = gflow.wait_state(own)
    assert (j["state"], j["exit_code"], j["reason"]) == ("F", 127, "NonZeroExitCode"), j


# ---------------------------------------------------------------- the README quick start

def readme_quick_start():
    """The commands of README.md's quick-start block, comments and blank lines removed."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Quick start\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    return [shlex.split(line, comments=True) for line in block.splitlines()
            if shlex.split(line, comments=True)]


# Stand-ins for the user's files the quick start names. train.py with --lr 0.01 (job 4)
# and train.sh (job 5) run long, so that `gcancel 4,5` finds them active; the others end
# at once, so that eval.py (after job 1) and `gjob log @ --follow` (job 6) end.
QUICK_START_FILES = {
    "train.py": ("import sys, time\n"
                 "lr = sys.argv[sys.argv.index('--lr') + 1]\n"
                 "print(f'training with lr={lr}', flush=True)\n"
                 "if lr == '0.01':\n"
                 "    time.sleep(300)\n"),
    "eval.py": "print('evaluating the model', flush=True)\n",
    "train.sh": "#!/bin/bash\n# GFLOW --time 2:00:00\necho 'train.sh running'\nsleep 300\n",
    "run.sh": "#!/bin/bash\necho 'run.sh done'\n",
}


def test_readme_quick_start_runs_as_written(make_gflow):
    commands = readme_quick_start()
    assert commands[0] == ["gflowd", "up"] and commands[-1] == ["gflowd", "down"], commands
    g = make_gflow(start=False)
    for name, text in QUICK_START_FILES.items():
        p = g.work / name
        p.write_text(text)
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    # Substituted: the isolation of the sandbox (its own data dir and socket, set in the
    # environment by the fixture, as GFLOW_* variables a user would not set), and `python`
    # on PATH as python3, since a test machine may have only python3.
    bindir = g.root / "bin"
    bindir.mkdir()
    (bindir / "python").symlink_to("/usr/bin/python3")
    g.env["PATH"] = f"{bindir}:{g.env['PATH']}"
    # The jobs' outputs, awaited before the daemon stops (eval.py runs after job 1).
    expect = {1: "training with lr=0.1", 2: "evaluating the model", 3: "training with lr=0.1",
              6: "run.sh done"}
    for argv in commands:
        if argv == ["gflowd", "up"]:
            # Substituted: the test machine may have no NVIDIA GPU; the README's own
            # comment gives this spelling.
            argv = ["gflowd", "up", "--simulate-gpus", "4"]
            g.started = True
        if argv == ["gflowd", "down"]:
            for job, text in expect.items():
                assert g.wait_state(job, "CD", timeout=20)
                assert text in g.log(job), (job, g.log(job))
        cp = g.run(argv[0], *argv[1:], timeout=60)
        assert cp.returncode == 0, f"{shlex.join(argv)} exited {cp.returncode}:\n" \
                                   f"{cp.stdout}{cp.stderr}"
        if argv[:3] == ["gjob", "log", "@"]:
            assert "run.sh done" in cp.stdout, cp.stdout
        if argv[0] == "gcancel":
            assert re.search(r"Job 4 (cancelled|cancelling)", cp.stdout), cp.stdout
            assert re.search(r"Job 5 (cancelled|cancelling)", cp.stdout), cp.stdout
