"""Issue 29, "Defaults and output": gjob show in gflow's grouped Key=Value layout (no
empty fields; -v shows them), the default job name gjob-<id> (a --name, a "# GFLOW
--name", an array's NAME_<task> and a sweep's name template kept), gstats' defaults as
gflow's (your jobs, all time) with reals in their shortest form, and plurals that agree
with their count ("first 1 job")."""
import json
import re

from conftest import parse_show, parse_show_parts

WAIT_GO = "while [ ! -e go ]; do sleep 0.02; done"

# gflow's headings, in its order, then ours.
PARTS = ["Job Details", "Parameters", "Resources", "Execution", "Dependencies", "Timing",
         "Outcome", "GPU Use", "Supervision"]
DURATION = r"\d\d+:\d\d:\d\d"  # format_duration's text
MOMENT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"  # format_time's


def sim(make_gflow, n=2):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", n)
    return g


def show_text(g, *args):
    return g.run("gjob", "show", *map(str, args), check=True).stdout


def in_order(parts):
    names = list(parts)
    assert names == [p for p in PARTS if p in names], names
    return names


# ---- gjob show ----

def test_show_groups_key_value_lines_under_gflows_headings(make_gflow):
    g = sim(make_gflow)
    done = g.submit("true")
    g.wait_state(done)
    run = g.submit("-g", "1", "-t", "10", WAIT_GO)
    g.wait_state(run, "R")
    held = g.submit("--hold", "true")

    text = show_text(g, done)
    assert text.startswith("Job Details:\n  ID=%d\n  Name=gjob-%d\n" % (done, done)), text
    for line in text.splitlines():  # nothing but headings, blank lines and '  Key=Value'
        assert (line == "" or re.fullmatch(r"[A-Z][A-Za-z ]*:", line)
                or re.fullmatch(r"  [^= ][^=]*=.*", line)), line
    d = parse_show_parts(text)[0]
    assert in_order(d) == ["Job Details", "Resources", "Execution", "Timing", "Outcome",
                           "Supervision"]
    assert d["Job Details"]["State"] == "Finished (CD)"
    assert d["Resources"] == {"GPUs": "0"}, d  # no GPUSharing, GPUsPerTask, MemoryLimit...
    assert re.fullmatch(rf"{MOMENT} \(waited {DURATION}\)", d["Timing"]["Submitted"]), d
    assert re.fullmatch(rf"{MOMENT} \(runtime {DURATION}\)", d["Timing"]["Finished"]), d
    assert "(" not in d["Timing"]["Started"] and "TimeLimit" not in d["Timing"], d
    assert d["Outcome"]["ExitCode"] == "0" and "OOM" not in d["Outcome"], d
    flat = parse_show(text)[0]
    for empty in ("EffectivePriority", "GPUsPerTask", "Project", "Nice", "MaxRetries",
                  "Attempt", "GroupID", "DependsOn", "BeginTime", "ExpectedStart", "Signal",
                  "Reason", "Requeue", "Stray", "CondaEnv"):
        assert empty not in flat, (empty, text)
    assert all(v not in ("", "-") for v in flat.values()), text

    r = parse_show_parts(show_text(g, run))[0]
    assert r["Job Details"]["State"] == "Running (R)"
    assert (r["Resources"]["GPUs"], r["Resources"]["GPUSharing"]) == ("1", "exclusive")
    assert r["Resources"]["GPUIDs"] in ("0", "1") and "GPUsPerTask" not in r["Resources"]
    assert r["Timing"]["TimeLimit"] == "00:10:00", r
    assert re.fullmatch(rf"{MOMENT} \(running {DURATION} so far\)", r["Timing"]["Started"]), r
    assert "Finished" not in r["Timing"] and "Outcome" not in r, r

    h = parse_show_parts(show_text(g, held))[0]
    assert h["Job Details"]["State"] == "Hold (H)"
    assert h["Job Details"]["Reason"] == "JobHeldUser", h
    assert "(" not in h["Timing"]["Submitted"] and "Started" not in h["Timing"], h

    # Several jobs: gflow's separator, a line of 80 '=' between blank lines.
    text = show_text(g, f"{done}-{held}")
    assert text.count("\n\n" + "=" * 80 + "\n\n") == 2, text
    assert [j["ID"] for j in parse_show(text)] == [str(done), str(run), str(held)]
    (g.work / "go").touch()
    g.run("gcancel", held, check=True)


def test_show_verbose_prints_every_field(make_gflow):
    g = sim(make_gflow)
    job = g.submit("true")
    g.wait_state(job)
    plain = parse_show(show_text(g, job))[0]
    for flag in ("-v", "--verbose"):
        full = parse_show(show_text(g, flag, job))[0]
        assert set(plain) < set(full), (plain, full)
        for k, v in plain.items():
            assert full[k] == v, (k, plain, full)
    parts = parse_show_parts(show_text(g, "-v", job))[0]
    assert in_order(parts) == [p for p in PARTS if p != "Parameters"], parts
    assert parts["Job Details"]["EffectivePriority"] == "-"
    assert parts["Job Details"]["MaxRetries"] == "0"
    assert parts["Resources"]["GPUsPerTask"] == "0" and parts["Resources"]["MIG"] == "-"
    assert parts["Resources"]["MemoryLimit"] == "none", parts
    assert parts["Dependencies"] == {"DependsOn": "-", "Mode": "all (every dependency must "
                                     "be met)", "AutoCancel": "enabled", "Dependents": "-",
                                     "TaskID": "-"}, parts
    assert (parts["Timing"]["TimeLimit"], parts["Timing"]["BeginTime"]) == ("UNLIMITED", "-")
    assert (parts["Outcome"]["Signal"], parts["Outcome"]["OOM"]) == ("-", "no"), parts
    assert parts["Supervision"]["Requeue"] == "no", parts
    assert parts["GPU Use"] == {"GPUUtil": "-", "GPUMemPeak": "-", "Energy": "-",
                                "GPUIdle": "-"}, parts  # a CPU job: nothing known
    # -o json is unchanged by -v: the whole record either way.
    assert json.loads(g.run("gjob", "show", "-v", "-o", "json", job, check=True).stdout)[0][
        "id"] == job


def test_show_keeps_our_extras_under_their_parts(make_gflow):
    g = sim(make_gflow)
    dep = g.submit("true")
    g.wait_state(dep)
    first = g.submit("--hold", "-P", "ml", "--max-retries", "2", "--param", "lr=0.1,0.2",
                     "-d", f"afterok:{dep}", "-m", "1G", "--requeue", "echo {lr}")
    p = parse_show_parts(show_text(g, first))[0]
    assert in_order(p) == ["Job Details", "Parameters", "Resources", "Execution",
                           "Dependencies", "Timing", "Supervision"], p
    assert p["Parameters"] == {"lr": "0.1"}, p
    assert (p["Job Details"]["Project"], p["Job Details"]["MaxRetries"],
            p["Job Details"]["Attempt"]) == ("ml", "2", "1 of 3"), p
    assert p["Job Details"]["GroupID"] == str(first) and p["Job Details"]["Name"] == \
        f"gjob-{first}", p
    assert p["Resources"]["MemoryLimit"] == "1G"
    assert p["Dependencies"]["DependsOn"] == f"{dep} (afterok: CD, met)", p
    assert p["Supervision"]["Requeue"] == "yes (may be preempted)", p
    g.run("gcancel", first, first + 1, check=True)
    f = parse_show_parts(show_text(g, first))[0]
    assert f["Job Details"]["Reason"] == "CancelledByUser", f
    assert "Started" not in f["Timing"] and "(" not in f["Timing"]["Finished"], f


def test_show_bad_options(gflow):
    cp = gflow.run("gjob", "show", "--verbose=yes", "1")
    assert cp.returncode == 2 and cp.stderr.count("\n") == 1, cp
    cp = gflow.run("gjob", "show", "--help", check=True)
    assert "-v, --verbose" in cp.stdout and "Key=Value" in cp.stdout


# ---- the default name ----

def submitted_name(g, *args):
    out = g.run("gbatch", *args, check=True).stdout.splitlines()
    m = re.fullmatch(r"Submitted batch job (\d+) \((.*)\)", out[0])
    assert m, out
    return int(m.group(1)), m.group(2)


def test_default_name_is_gjob_id_and_given_names_are_kept(make_gflow):
    g = sim(make_gflow)
    job, name = submitted_name(g, "--hold", "python3 -c pass")
    assert name == f"gjob-{job}" and g.job(job)["name"] == name
    rows = g.run("gqueue", "-f", "JOBID,NAME", check=True).stdout.split()
    assert rows[2:] == [str(job), f"gjob-{job}"], rows
    assert submitted_name(g, "--hold", "--name", "train", "true")[1] == "train"
    script = g.work / "run.sh"
    script.write_text("#!/bin/bash\n# GFLOW --name from-script\ntrue\n")
    assert submitted_name(g, "--hold", script)[1] == "from-script"
    plain = g.work / "plain.sh"
    plain.write_text("#!/bin/bash\ntrue\n")
    job, name = submitted_name(g, "--hold", plain)
    assert name == f"gjob-{job}", name

    # Arrays: each task its own gjob-<id> (gflow's); with a NAME, NAME_<task>.
    cp = g.run("gbatch", "--hold", "--array", "1-3", "true", check=True)
    for line in cp.stdout.splitlines()[:3]:
        assert re.fullmatch(r"Submitted batch job (\d+) \(gjob-\1\)", line), cp.stdout
    first = int(g.run("gbatch", "--hold", "--parsable", "--array", "1-2", "-J", "arr", "true",
                      check=True).stdout.split()[0])
    assert [g.job(first + i)["name"] for i in range(2)] == ["arr_1", "arr_2"]
    # Sweeps: a name template kept; without one, gjob-<id>.
    first = int(g.run("gbatch", "--hold", "--parsable", "--param", "lr=1,2", "--name-template",
                      "lr{lr}", "echo {lr}", check=True).stdout.split()[0])
    assert [g.job(first + i)["name"] for i in range(2)] == ["lr1", "lr2"]
    first = int(g.run("gbatch", "--hold", "--parsable", "--param", "lr=1,2", "echo {lr}",
                      check=True).stdout.split()[0])
    assert [g.job(first + i)["name"] for i in range(2)] == [f"gjob-{first}", f"gjob-{first + 1}"]

    # A dry run says the name the job would get.
    nxt = first + 2
    cp = g.run("gbatch", "--dry-run", "true", check=True)
    assert f"Name:      gjob-{nxt}" in cp.stdout, cp.stdout
    assert g.submit("--hold", "true") == nxt  # nothing was taken by the dry run
    g.run("gcancel", *range(1, nxt + 1))


def test_copies_get_their_own_default_name(make_gflow):
    g = sim(make_gflow)
    # An update keeps the default name (the same id) and does not list it as a change.
    held = g.submit("--hold", "true")
    cp = g.run("gjob", "update", held, "--priority", "20", check=True)
    assert "--name" not in cp.stdout and g.job(held)["name"] == f"gjob-{held}", cp.stdout
    # A redo, a new id, gets its own; a given name is kept.
    done = g.submit("true")
    named = g.submit("-J", "mine", "true")
    g.wait_state(done)
    g.wait_state(named)
    for old, want in ((done, None), (named, "mine")):
        out = g.run("gjob", "redo", old, check=True).stdout
        m = re.match(rf"Submitted batch job (\d+) \((.*)\) \(redo of {old}\)$", out.strip())
        assert m, out
        new = int(m.group(1))
        assert m.group(2) == g.job(new)["name"] == (want or f"gjob-{new}"), (out, g.job(new))
        g.wait_state(new)
    # A retry (--max-retries) is a new job too: its own gjob-<id>.
    flaky = g.submit("--max-retries", "1", "exit 3")
    retried = g.wait_state(flaky)["retried_as"]
    assert g.job(retried)["name"] == f"gjob-{retried}"
    g.wait_state(retried)
    g.run("gcancel", held, check=True)


# ---- gstats ----

def reals_are_shortest(text):
    """Every real number in JSON text (outside strings) is the shortest text that reads
    back as the same double (Python's repr is that text)."""
    no_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    reals = re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", no_strings)
    reals = [r for r in reals if "." in r or "e" in r.lower()]
    for r in reals:
        assert repr(float(r)) == r, (r, repr(float(r)))
    return reals


def test_gstats_defaults_and_rounded_json(make_gflow):
    g = sim(make_gflow)
    jobs = [g.submit("true"), g.submit("sleep 0.3"), g.submit("exit 2")]
    for j in jobs:
        g.wait_state(j)
    cp = g.run("gstats", "-o", "json", check=True)
    s = json.loads(cp.stdout)
    me = g.job(jobs[0])["user"]
    assert (s["user"], s["since"]) == (me, None), s  # gflow's: you, all time
    assert s["total"]["jobs"] == 3 and s["total"]["failed"] == 1
    assert abs(s["total"]["failure_rate"] - 1 / 3) < 1e-6
    reals = reals_are_shortest(cp.stdout)
    assert reals and not re.search(r"\d\.\d*?(?:0000000|9999999)\d", cp.stdout), cp.stdout
    table = g.run("gstats", check=True).stdout.splitlines()
    assert table[0].startswith(f"Jobs of {me}, all time (to "), table
    # The old view: everyone's, the last 7 days.
    s = json.loads(g.run("gstats", "-a", "-t", "7d", "-o", "json", check=True).stdout)
    assert s["user"] is None and s["total"]["jobs"] == 3
    assert abs(s["until"] - s["since"] - 7 * 86400) < 5, s
    out = g.run("gstats", "-a", "-t", "7d", check=True).stdout
    assert out.startswith("Jobs of everyone from "), out
    # Every -o json prints reals this way (gqueue's times too).
    reals_are_shortest(g.run("gqueue", "-a", "-o", "json", check=True).stdout)


# ---- plurals ----

def test_counts_agree_with_their_nouns(make_gflow):
    g = sim(make_gflow)
    ids = [g.submit("--hold", "true") for _ in range(3)]
    cp = g.run("gqueue", "-n", "1", check=True)
    assert re.search(r"\b1 jobs\b", cp.stderr) is None, cp.stderr
    assert "1 of 3 jobs" in cp.stderr or "first 1 job" in cp.stderr, cp.stderr
    cp = g.run("gqueue", "-n", "1", "-s", "H", check=True)
    assert re.search(r"\b1 jobs\b", cp.stderr) is None, cp.stderr
    cp = g.run("gbatch", "--dry-run", "--array", "1-1", "true", check=True)
    assert "Would submit 1 job:" in cp.stdout, cp.stdout
    cp = g.run("gbatch", "--dry-run", "--array", "1-2", "true", check=True)
    assert "Would submit 2 jobs:" in cp.stdout, cp.stdout
    grp = g.submit("--hold", "--array", "1-2", "true")
    cp = g.run("gctl", "set-limit", grp, "1", check=True)
    assert "at most 1 job runs at once" in cp.stdout, cp.stdout
    cp = g.run("gctl", "set-limit", grp, "2", check=True)
    assert "at most 2 jobs run at once" in cp.stdout, cp.stdout
    # A script of one line says "1 line".
    script = g.work / "one.sh"
    script.write_text("true\n")
    job = g.submit("--hold", script)
    assert "(1 line stored;" in parse_show(show_text(g, job))[0]["Script"]
    g.run("gcancel", *ids, grp, grp + 1, job, check=True)
