"""gbatch as a gflow user drives it (issue 11): `gbatch new` and `gbatch completion`,
gflow's flags (-c, -P/--project, --nice, --auto-close, --notify-email, --notify-on)
stored with the job and filtered by `gqueue -P`, gflow's per-job lines for sweeps and
arrays, `--begin` as gflow reads it, obvious mistakes refused at submit, and messages
that name the flags a user typed. Every test runs the real daemon (conftest's sandbox)."""
import os
import re
import subprocess
import time
from datetime import datetime

from conftest import assert_one_line_error, binary

COMMANDS = ["gbatch", "gqueue", "gcancel", "ginfo", "gjob", "gctl", "gflowd", "gstats"]


# -- bullet 1: gbatch new, gbatch completion, subcommands never submitted

def test_new_writes_a_template_whose_directives_gbatch_applies(make_gflow):
    g = make_gflow(args=("--simulate-gpus", "2"))
    cp = g.run("gbatch", "new", "train", check=True)
    path = g.work / "train.sh"
    assert "Created template: train.sh" in cp.stdout
    assert os.access(path, os.X_OK)
    text = path.read_text()
    for d in ("--gpus=1", "--time=1:30:00", "--priority=50", "--conda-env=myenv",
              "--depends-on=123"):
        assert f"## GFLOW {d}\n" in text, d
    # Never over an existing file; NAME.sh is taken as it is.
    again = g.run("gbatch", "new", "train.sh")
    assert_one_line_error(again, "gbatch", 1, "train.sh already exists")
    g.run("gbatch", "new", "eval.sh", check=True)
    assert (g.work / "eval.sh").exists() and not (g.work / "eval.sh.sh").exists()

    # Activated as its header says, the directives are gbatch's own.
    dep = g.submit("-H", "true")
    path.write_text(text.replace("## GFLOW", "# GFLOW").replace("--depends-on=123",
                                                                f"--depends-on={dep}"))
    job = g.job(g.submit("-H", "train.sh"))
    assert (job["gpus"], job["time_limit"], job["priority"], job["conda_env"]) == \
        (1, 5400, 50, "myenv")
    assert [(d["id"], d["kind"]) for d in job["depends_on"]] == [(dep, "afterok")]
    assert (job["memory_mb"], job["project"]) == (4096, "my-project")
    # The command line wins over the template.
    assert g.job(g.submit("-H", "-p", "7", "train.sh"))["priority"] == 7


def test_subcommand_words_are_never_submitted(gflow):
    before = gflow.jobs(user="all")
    cp = gflow.run("gbatch", "-H", "new")
    assert_one_line_error(cp, "gbatch", 2, "'new' is a gbatch subcommand", "gbatch [options] -- new")
    cp = gflow.run("gbatch", "-H", "completion", "bash")
    assert cp.returncode == 2 and "subcommand" in cp.stderr
    cp = gflow.run("gbatch", "new")
    assert_one_line_error(cp, "gbatch", 2, "gbatch new NAME")
    cp = gflow.run("gbatch", "completion", "tcsh")
    assert_one_line_error(cp, "gbatch", 2, "unknown shell 'tcsh'",
                          "use bash, elvish, fish, powershell or zsh")
    assert gflow.jobs(user="all") == before
    # Written as the help says, a command of that name is submitted.
    job = gflow.job(gflow.submit("-H", "--", "new"))
    assert (job["command"], job["name"]) == ("new", f"gjob-{job['id']}")


def help_flags(argv):
    """The flags an option line of `argv --help` names (not those in the descriptions)."""
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=20).stdout
    flags = set()
    for line in out.splitlines():
        m = re.match(r"^ {1,6}(-\S.*)$", line)
        if m:
            names = re.split(r"\s{2,}", m.group(1))[0]
            flags.update(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)", names))
    return flags


def help_subcommands(argv):
    """The first words of the "Commands:" section of `argv --help`."""
    out = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=20).stdout
    subs, inside = set(), False
    for line in out.splitlines():
        if line.startswith("Commands:"):
            inside = True
        elif inside and not line.strip():
            inside = False
        elif inside and re.match(r"^  \S", line):
            head = re.split(r"\s{2,}|\s<|\s\[", line.strip())[0]
            for piece in head.split(","):
                subs.add(piece.split()[0])
    return subs


def complete(script, line):
    """What bash completes for line (ending in the word being completed)."""
    words = line.split(" ")
    prog = (f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); "
            f"COMP_CWORD={len(words) - 1}; _gflow_complete; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    cp = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=20)
    assert cp.returncode == 0, cp.stderr
    return set(cp.stdout.split())


def test_bash_completion_offers_every_flag_of_each_help(env):
    script = subprocess.run([binary("gbatch"), "completion", "bash"], capture_output=True,
                            text=True, check=True, env=env).stdout
    reg = subprocess.run(["bash", "-c", f"{script}\ncomplete -p gbatch gjob gflowd"],
                         capture_output=True, text=True)
    assert "-F _gflow_complete gbatch" in reg.stdout, reg
    for cmd in COMMANDS:
        flags = help_flags([binary(cmd)])
        assert flags and complete(script, f"{cmd} -") == flags, cmd
        subs = help_subcommands([binary(cmd)])
        if subs:
            assert complete(script, f"{cmd} ") == subs, cmd
    for cmd, sub in (("gjob", "show"), ("gjob", "log"), ("gjob", "release"),
                     ("gjob", "update"), ("gjob", "redo"), ("gctl", "gpu-process"),
                     ("gctl", "reserve")):
        assert complete(script, f"{cmd} {sub} -") == help_flags([binary(cmd), sub]), (cmd, sub)
    # A few prefixes as a user types them.
    assert complete(script, "gbatch --pa") == {"--param", "--param-file", "--parsable"}
    assert complete(script, "gbatch --notify-") == {"--notify-email", "--notify-on"}
    assert complete(script, "gbatch ne") == {"new"}
    assert complete(script, "gjob up") == {"update"}
    assert complete(script, "gqueue --pro") == {"--project"}
    assert complete(script, "gctl gpu-process un") == {"unignore"}
    for shell in ("zsh", "fish"):
        out = subprocess.run([binary("gbatch"), "completion", shell], capture_output=True,
                             text=True, check=True, env=env).stdout
        assert "gbatch" in out and "--notify-on" in out.replace("-l notify-on", "--notify-on")


# -- bullet 2: gflow's bookkeeping flags, stored with the job

def test_gflow_flags_are_stored_shown_and_filtered(gflow):
    cp = gflow.run("gbatch", "-H", "-c", "myenv", "-P", " ml ", "--nice", "30", "--auto-close",
                   "--notify-email", "a@x.org", "--notify-email", "b@x.org",
                   "--notify-on", "job_failed,job_timeout", "true", check=True)
    assert "not sent" not in cp.stderr  # they are sent now (test_notify.py)
    first = int(re.search(r"Submitted batch job (\d+)", cp.stdout).group(1))
    job = gflow.job(first)
    assert (job["conda_env"], job["project"], job["nice"], job["priority"]) == \
        ("myenv", "ml", 30, 30)
    assert (job["notify_email"], job["notify_on"], job["auto_close"]) == \
        ("a@x.org,b@x.org", ["job_failed", "job_timeout"], True)
    # --notify-email alone: gflow's default events. Nothing given: null, 0, [], false.
    cp = gflow.run("gbatch", "-H", "--parsable", "--notify-email", "c@x.org", "true", check=True)
    assert re.fullmatch(r"\d+\n", cp.stdout) and cp.stderr == "", cp
    alone = gflow.job(int(cp.stdout))
    assert alone["notify_on"] == ["job_completed", "job_failed", "job_timeout", "job_cancelled"]
    plain = gflow.job(gflow.submit("-H", "true"))
    assert (plain["project"], plain["nice"], plain["notify_email"], plain["notify_on"],
            plain["auto_close"]) == (None, 0, None, [], False)
    cp = gflow.run("gbatch", "--dry-run", "-P", "ml", "true", check=True)
    assert "  Project:   ml\n" in cp.stdout, cp.stdout
    # As directives in a script.
    script = gflow.work / "job.sh"
    script.write_text("#!/bin/bash\n# GFLOW -P vision\n# GFLOW --notify-on=job_started\n"
                      "# GFLOW --notify-email=d@x.org\n# GFLOW -c torch\ntrue\n")
    sj = gflow.job(gflow.submit("-H", "job.sh"))
    assert (sj["project"], sj["notify_on"], sj["notify_email"], sj["conda_env"]) == \
        ("vision", ["job_started"], "d@x.org", "torch")
    # gqueue -P (a list), and the PROJECT column; kept across a daemon restart.
    gflow.gflowd("restart", check=True)
    cp = gflow.run("gqueue", "-P", "ml,vision", "-f", "JOBID,PROJECT", check=True)
    rows = [line.split() for line in cp.stdout.splitlines()[1:]]
    assert rows == [[str(first), "ml"], [str(sj["id"]), "vision"]], cp.stdout
    cp = gflow.run("gqueue", "-a", "-P", "nothing", check=True)
    assert "No jobs found" in cp.stdout
    # gflow's short event names are stored as the canonical ones.
    short = gflow.job(gflow.submit("-H", "--notify-email", "e@x.org", "--notify-on",
                                   "fail,begin,timeout,end", "true"))
    assert short["notify_on"] == ["job_failed", "job_started", "job_timeout", "job_completed"]
    # Bad values: one line, exit 2, nothing submitted.
    n = len(gflow.jobs(user="all"))
    for args, needle in ((("--notify-on", "job_exploded"), "job_exploded"),
                         (("--notify-email", "nobody"), "--notify-email"),
                         (("--nice", "300"), "--nice"),
                         (("-P", "p" * 65), "--project")):
        cp = gflow.run("gbatch", *args, "true")
        assert cp.returncode == 2 and needle in cp.stderr and cp.stderr.count("\n") == 1, cp
    assert len(gflow.jobs(user="all")) == n


# -- bullet 3: gflow's lines for sweeps and arrays

def test_sweeps_and_arrays_print_gflows_lines(gflow):
    cp = gflow.run("gbatch", "-H", "--param", "x=1,2,3", "echo {x}", check=True)
    lines = cp.stdout.splitlines()
    # Each named as gflow names a job without --name: gjob-<id>.
    ids = [int(re.match(r"Submitted batch job (\d+) \(gjob-\1\)$", l).group(1)) for l in lines[:3]]
    assert ids == list(range(ids[0], ids[0] + 3))
    assert lines[3].startswith(f"Submitted 3 batch jobs {ids[0]}-{ids[2]} (group "), lines
    assert len(lines) == 4
    cp = gflow.run("gbatch", "-H", "--parsable", "--array", "1-3", "true", check=True)
    got = [int(x) for x in cp.stdout.split()]
    assert got == list(range(got[0], got[0] + 3)) and cp.stdout.count("\n") == 3
    # Past 100 jobs: the first 100 lines, then the summary with the whole range.
    cp = gflow.run("gbatch", "-H", "--array", "1-150", "true", check=True)
    lines = cp.stdout.splitlines()
    assert len(lines) == 101, len(lines)
    assert all(l.startswith("Submitted batch job ") for l in lines[:100])
    first = int(lines[0].split()[3])
    assert lines[100].startswith(f"Submitted 150 batch jobs {first}-{first + 149}"), lines[100]


# -- bullet 4: --begin as gflow reads it, echoed

def begins(gflow, when):
    t0 = time.time()
    cp = gflow.run("gbatch", "-H", "--begin", when, "true", check=True)
    jid = int(re.search(r"Submitted batch job (\d+)", cp.stdout).group(1))
    at = gflow.job(jid)["begin_time"]
    shown = datetime.fromtimestamp(int(at)).strftime("%Y-%m-%d %H:%M:%S")
    assert f"Begins at {shown}\n" in cp.stdout, cp.stdout
    return at, t0


def test_begin_forms(gflow):
    for when, secs in (("now+30", 1800), ("+30", 1800), ("+30m", 1800), ("+2h", 7200),
                       ("+1d", 86400), ("now+90s", 90)):
        at, t0 = begins(gflow, when)
        assert t0 + secs - 2 <= at <= time.time() + secs + 1, when
    at, t0 = begins(gflow, "23:59")
    local = datetime.fromtimestamp(at)
    assert (local.hour, local.minute) == (23, 59) and 0 <= at - t0 <= 86400
    for when in ("2031-12-24T10:00", "2031-12-24T10:00:30", "2031-12-24 10:00"):
        at, _ = begins(gflow, when)
        want = datetime(2031, 12, 24, 10, 0, 30 if when.endswith(":30") else 0).timestamp()
        assert at == want, when
    cp = gflow.run("gbatch", "--begin", "now+3y", "true")
    assert_one_line_error(cp, "gbatch", 2, "a bare N is minutes")


# -- bullet 5: obvious mistakes refused at submit

def test_obvious_mistakes_are_refused_at_submit(gflow):
    (gflow.work / "plain.sh").write_text("#!/bin/bash\ntrue\n")  # not executable
    (gflow.work / "adir").mkdir()
    cases = [
        (("./missing.sh",), "./missing.sh: no such file"),
        (("missing.sh",), "missing.sh: no such file"),
        (("./missing.sh", "--lr", "1"), "./missing.sh: no such file"),
        (("./adir",), "./adir is a directory"),
        (("./plain.sh", "arg"), "./plain.sh is not executable"),
    ]
    for args, needle in cases:
        assert_one_line_error(gflow.run("gbatch", *args), "gbatch", 2, needle)
    assert gflow.jobs(user="all") == []
    # A script given alone is read and stored, executable or not; a single argument with
    # shell syntax is a command line, left to the shell.
    gflow.submit("-H", "./plain.sh")
    gflow.submit("-H", "./missing.sh && true")
    # A working directory that does not exist (API clients; gbatch sends its own).
    r = gflow.api("POST", "/v1/jobs", {"command": "true", "workdir": "/nonexistent/dir"})
    assert r.status == 400 and "/nonexistent/dir does not exist" in r.json()["error"], r


# -- bullet 6: messages name the flags a user typed

def test_submit_messages_name_flags_not_fields(gflow):
    def api_error(spec):
        r = gflow.api("POST", "/v1/jobs", {"command": "true", "workdir": str(gflow.work), **spec})
        assert r.status == 400, r
        return r.json()["error"]

    assert api_error({"shared": True}) == "--shared needs --gpus N"
    assert api_error({"gpu_memory_mb": 100}) == "--gpu-memory needs --gpus N"
    assert api_error({"gpus_per_task": 1}) == "--gpus-per-task needs --gpus N"
    assert api_error({"signal_spec": "USR1"}).startswith("--signal needs --time")
    for msg in (api_error({"mig_count": 2}), api_error({"depends_on": [{"id": 9999}]})):
        assert not re.search(r"\b(mig_count|mig_profile|depends_on|gpus_per_task)\b", msg), msg
    cp = gflow.run("gbatch", "--depends-on", "9999", "true")
    assert cp.returncode == 1 and cp.stderr.startswith("gbatch: --depends-on: no job 9999 "), cp
    cp = gflow.run("gbatch", "--gpus-per-task", "1", "true")
    assert_one_line_error(cp, "gbatch", 2, "--gpus-per-task 1", "--gpus N")
