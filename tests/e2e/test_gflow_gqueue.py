"""gqueue as gflow prints it (issue 29), through the real daemon on simulated GPUs:
-o json / yaml / csv in gflow's shapes (full state names, gpus as a list of ids, the time
string, gflow's CSV columns) followed by our keys, the older shapes behind -o json-v0 /
yaml-v0 / csv-v0, -g grouping the table by state (and -g ID still one submission),
TIMELIMIT as HH:MM:SS, WAIT and RUNTIME (-f and -l), and the unknown-field error listing
every field of the field table."""

import csv
import datetime
import io
import json
import re

import yaml

from conftest import assert_one_line_error, parse_table, wait_for

HMS = r"\d\d:\d\d:\d\d"
GFLOW_CSV = ["id", "name", "state", "time", "gpus", "user", "submitted_at", "reason"]
V0_CSV = ["JOBID", "NAME", "ST", "TIME", "NODES", "NODELIST(REASON)"]
RULE = "\u2500" * 60


def wait_go(name):
    return f"while [ ! -e {name} ]; do sleep 0.02; done"


def hms(secs):
    secs = int(secs)
    return f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"


def utc(t):
    return datetime.datetime.fromtimestamp(int(t), datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def the_mix(make_gflow):
    """Two simulated GPUs and a job in each state: one running on both GPUs (2 h limit,
    a project, 2G of memory), one finished, one failed, one queued behind it for a GPU,
    one held, one cancelled. Returns (g, {name: id})."""
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 2)
    ids = {}
    ids["done"] = g.submit("-J", "done", "true")
    ids["failed"] = g.submit("-J", "failed", "exit 3")
    for k in ("done", "failed"):
        g.wait_state(ids[k])
    ids["run"] = g.submit("-J", "run", "-g", "2", "-t", "2:00:00", "-P", "ml", "--memory",
                          "2G", wait_go("go"))
    g.wait_state(ids["run"], "R")
    ids["queued"] = g.submit("-J", "queued", "-g", "1", "true")
    ids["held"] = g.submit("-J", "held", "-H", "true")
    ids["cancelled"] = g.submit("-J", "cancelled", "-H", "true")
    g.run("gcancel", ids["cancelled"], check=True)
    g.wait_state(ids["cancelled"], "CA")
    return g, ids


def gqueue_doc(g, *args):
    cp = g.run("gqueue", "-a", *args, check=True)
    return json.loads(cp.stdout)


def test_json_and_yaml_as_gflow(make_gflow):
    g, ids = the_mix(make_gflow)
    doc = gqueue_doc(g, "-o", "json")
    assert set(doc) == {"jobs", "total", "timestamp"} and doc["total"] == len(ids)
    jobs = {j["id"]: j for j in doc["jobs"]}
    api = {j["id"]: j for j in g.jobs()}
    assert sorted(jobs) == sorted(ids.values())

    run = jobs[ids["run"]]
    # gflow's keys first, in gflow's order.
    assert list(run)[:10] == ["id", "name", "state", "time", "gpus", "user", "project",
                              "submitted_at", "memory_mb", "time_limit"], list(run)
    assert run["state"] == "Running" and run["gpus"] == [0, 1], run
    assert re.fullmatch(HMS, run["time"]), run
    assert run["time_limit"] == "02:00:00" and run["project"] == "ml" and run["memory_mb"] == 2048
    assert run["submitted_at"] == utc(api[ids["run"]]["submit_time"]), run
    assert "reason" not in run  # gflow: only for Queued, Hold, Cancelled
    assert run["user"] == api[ids["run"]]["user"] and run["name"] == "run"
    # Then ours, those gflow names otherwise renamed.
    assert (run["st"], run["gpu_count"], run["time_limit_secs"]) == ("R", 2, 7200), run
    assert run["state_name"] == "Running" and run["gpu_ids"] == "0,1"
    assert run["state_reason"] is None and run["command"] == wait_go("go")
    assert run["start_time"] == api[ids["run"]]["start_time"]

    states = {k: jobs[i]["state"] for k, i in ids.items()}
    assert states == {"done": "Finished", "failed": "Failed", "run": "Running",
                      "queued": "Queued", "held": "Hold", "cancelled": "Cancelled"}
    done, failed = jobs[ids["done"]], jobs[ids["failed"]]
    assert re.fullmatch(HMS, done["time"]) and done["st"] == "CD" and done["exit_code"] == 0
    assert "reason" not in failed and failed["state_reason"] == "NonZeroExitCode", failed
    queued, held = jobs[ids["queued"]], jobs[ids["held"]]
    assert queued["time"] == "-" and queued["gpus"] == [] and queued["gpu_count"] == 1
    assert queued["reason"] and "(" not in queued["reason"], queued
    assert queued["reason"] == (queued["state_reason"] or "Priority")
    assert held["reason"] == "JobHeldUser" and held["st"] == "H"
    assert jobs[ids["cancelled"]]["reason"] == "CancelledByUser"
    for k in ("done", "failed", "queued", "held", "cancelled"):
        j = jobs[ids[k]]  # gflow leaves out what a job does not have
        assert not {"project", "memory_mb", "time_limit"} & set(j), j
        assert j["time_limit_secs"] is None and j["name"] == k

    ydoc = yaml.safe_load(g.run("gqueue", "-a", "-o", "yaml", check=True).stdout)
    assert set(ydoc) == {"jobs", "total", "timestamp"} and ydoc["total"] == len(ids)
    for y in ydoc["jobs"]:
        j = jobs[y["id"]]
        assert list(y) == list(j), y
        assert {k: v for k, v in y.items() if k != "time"} == \
            {k: v for k, v in j.items() if k != "time"}


def test_json_v0_and_yaml_v0_keep_the_old_shape(make_gflow):
    g, ids = the_mix(make_gflow)
    api = {j["id"]: j for j in g.jobs()}
    for fmt, load in (("json-v0", json.loads), ("yaml-v0", yaml.safe_load),
                      ("JSON-V0", json.loads)):
        doc = load(g.run("gqueue", "-a", "-o", fmt, check=True).stdout)
        assert set(doc) == {"jobs", "total", "timestamp"}, fmt
        jobs = {j["id"]: j for j in doc["jobs"]}
        run = jobs[ids["run"]]
        assert (run["state"], run["gpus"], run["gpu_ids"], run["time_limit"]) == \
            ("R", 2, "0,1", 7200), run
        assert "time" not in run and "st" not in run and run["project"] == "ml"
        assert jobs[ids["failed"]]["reason"] == "NonZeroExitCode"
        assert list(run) == list(api[ids["run"]])  # the API's job object, as it is
    cp = g.run("gqueue", "-o", "json-v1")
    assert_one_line_error(cp, "gqueue", 2, "unknown output format 'json-v1'", "json-v0")
    cp = g.run("gqueue", "-o", "table-v0")
    assert_one_line_error(cp, "gqueue", 2, "unknown output format 'table-v0'")


def test_csv_as_gflow(make_gflow):
    g, ids = the_mix(make_gflow)
    api = {j["id"]: j for j in g.jobs()}
    cp = g.run("gqueue", "-a", "-o", "csv", check=True)
    rows = list(csv.reader(io.StringIO(cp.stdout)))
    assert rows[0] == GFLOW_CSV
    by_id = {int(r[0]): dict(zip(GFLOW_CSV, r)) for r in rows[1:]}
    assert sorted(by_id) == sorted(ids.values())
    run = by_id[ids["run"]]
    assert (run["name"], run["state"], run["gpus"], run["reason"]) == \
        ("run", "Running", "[0,1]", "-"), run
    assert re.fullmatch(HMS, run["time"]) and run["user"] == api[ids["run"]]["user"]
    assert run["submitted_at"] == utc(api[ids["run"]]["submit_time"])
    assert f'{ids["run"]},run,Running,' in cp.stdout and ',"[0,1]",' in cp.stdout  # quoted
    queued = by_id[ids["queued"]]
    assert (queued["state"], queued["time"], queued["gpus"]) == ("Queued", "-", "[]")
    assert queued["reason"] not in ("", "-") and "(" not in queued["reason"]
    assert by_id[ids["held"]]["reason"] == "JobHeldUser"
    assert by_id[ids["cancelled"]]["reason"] == "CancelledByUser"
    assert (by_id[ids["failed"]]["state"], by_id[ids["failed"]]["reason"]) == ("Failed", "-")
    assert by_id[ids["done"]]["state"] == "Finished"

    # With -f (or -l): those columns, under the table's headers, as before.
    cp = g.run("gqueue", "-a", "-o", "csv", "-f", "JOBID,ST,TIMELIMIT", check=True)
    rows = list(csv.reader(io.StringIO(cp.stdout)))
    assert rows[0] == ["JOBID", "ST", "TIMELIMIT"]
    assert [str(ids["run"]), "R", "02:00:00"] in rows
    for args, header in ((["-l"], "JOBID,NAME,USER,ST,WAIT,RUNTIME,TIMELIMIT,NODES"),
                         (["--start"], "JOBID,NAME,USER,ST,START_TIME,NODES")):
        cp = g.run("gqueue", "-o", "csv", *args, check=True)
        assert cp.stdout.splitlines()[0] == header + ",NODELIST(REASON)", (args, cp.stdout)
    # csv-v0: the table's columns, the old shape.
    cp = g.run("gqueue", "-a", "-o", "csv-v0", check=True)
    rows = list(csv.reader(io.StringIO(cp.stdout)))
    assert rows[0] == V0_CSV
    v0 = {int(r[0]): r for r in rows[1:]}
    assert v0[ids["run"]][2:] == ["R", v0[ids["run"]][3], "2", "0,1"]
    assert v0[ids["held"]][5] == "(JobHeldUser)"


def groups_of(text):
    """-g's output as [(state, count, [job ids])], checking each heading's rule and
    table header."""
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"(\w+) \((\d+)\)", lines[i])
        assert m, (i, text)
        assert lines[i + 1] == RULE, text
        assert lines[i + 2].split() == V0_CSV, text
        i += 3
        ids = []
        while i < len(lines) and lines[i].strip():
            ids.append(int(lines[i].split()[0]))
            i += 1
        out.append((m.group(1), int(m.group(2)), ids))
        i += 1  # the blank line between groups
    return out


def test_group_by_state(make_gflow):
    g, ids = the_mix(make_gflow)
    cp = g.run("gqueue", "-a", "-g", check=True)
    assert groups_of(cp.stdout) == [
        ("Running", 1, [ids["run"]]), ("Queued", 1, [ids["queued"]]),
        ("Hold", 1, [ids["held"]]), ("Finished", 1, [ids["done"]]),
        ("Failed", 1, [ids["failed"]]), ("Cancelled", 1, [ids["cancelled"]])], cp.stdout
    assert "\n\nQueued (1)\n" in cp.stdout
    # The default listing, grouped; the flag in any place, --group too.
    active = [("Running", 1, [ids["run"]]), ("Queued", 1, [ids["queued"]]),
              ("Hold", 1, [ids["held"]])]
    for args in (["-g"], ["--group"], ["-g", "-n", "0"], ["-n", "0", "-g"]):
        assert groups_of(g.run("gqueue", *args, check=True).stdout) == active, args
    assert groups_of(g.run("gqueue", "-ag", check=True).stdout)[0][0] == "Running"
    assert groups_of(g.run("gqueue", "-s", "R,CD", "-g", check=True).stdout) == [
        ("Running", 1, [ids["run"]]), ("Finished", 1, [ids["done"]])]
    cp = g.run("gqueue", "-s", "TO", "-g", check=True)
    assert cp.stdout.strip() == "No jobs found."
    # Data formats stay flat lists.
    flat = gqueue_doc(g, "-o", "json")
    grouped = gqueue_doc(g, "-g", "-o", "json")
    assert [j["id"] for j in grouped["jobs"]] == [j["id"] for j in flat["jobs"]]
    cp = g.run("gqueue", "-g", "-t")
    assert_one_line_error(cp, "gqueue", 2, "-g (group by state) and -t (tree)")


def test_group_id_still_selects_a_submission(make_gflow):
    g = make_gflow()
    cp = g.run("gbatch", "--parsable", "-H", "-J", "arr", "--array", "1-2", "true", check=True)
    first = int(cp.stdout.split()[0])
    other = g.submit("-H", "-J", "other", "true")
    ids = lambda cp: [int(r["JOBID"]) for r in parse_table(cp.stdout)]  # noqa: E731
    for args in (["-g", first], ["--group", first], [f"--group={first}"], ["-a", "-g", first],
                 ["-g", first, "-a"]):
        cp = g.run("gqueue", *args, check=True)
        assert ids(cp) == [first, first + 1], (args, cp.stdout)
    assert ids(g.run("gqueue", "-g", other, check=True)) == [other]
    cp = g.run("gqueue", "-g", "x")
    assert_one_line_error(cp, "gqueue", 2, "invalid group 'x' for -g", "no id to group by state")
    cp = g.run("gqueue", "--group=0")
    assert_one_line_error(cp, "gqueue", 2, "invalid group '0' for -g")


def test_timelimit_as_gflow(make_gflow):
    g = make_gflow()
    limits = {g.submit("-H", "-t", t, "true"): want for t, want in (
        ("2:00:00", "02:00:00"), ("90", "01:30:00"), ("1-01:00:00", "25:00:00"),
        ("0:45", "00:00:45"))}
    none = g.submit("-H", "true")
    limits[none] = "UNLIMITED"
    rows = parse_table(g.run("gqueue", "-f", "JOBID,TIMELIMIT", check=True).stdout)
    assert {int(r["JOBID"]): r["TIMELIMIT"] for r in rows} == limits
    jobs = {j["id"]: j for j in gqueue_doc(g, "-o", "json")["jobs"]}
    for jid, want in limits.items():
        assert jobs[jid].get("time_limit", "UNLIMITED") == want, jobs[jid]


def test_wait_and_runtime(make_gflow):
    g = make_gflow(start=False)
    g.up("--simulate-gpus", 1)
    done = g.submit("-J", "done", "true")
    g.wait_state(done)
    run = g.submit("-J", "run", "-g", "1", wait_go("go"))
    g.wait_state(run, "R")
    queued = g.submit("-J", "queued", "-g", "1", "true")
    held = g.submit("-J", "held", "-H", "true")
    gone = g.submit("-J", "gone", "-H", "true")
    g.run("gcancel", gone, check=True)
    g.wait_state(gone, "CA")

    cp = g.run("gqueue", "-a", "-f", "JOBID,WAIT,RUNTIME")
    assert cp.returncode == 0 and cp.stderr == "", cp
    rows = {int(r["JOBID"]): r for r in parse_table(cp.stdout)}
    assert list(parse_table(cp.stdout)[0]) == ["JOBID", "WAIT", "RUNTIME"]
    api = {j["id"]: j for j in g.jobs()}
    for jid in (done, run):
        j = api[jid]
        want = j["start_time"] - j["submit_time"]
        assert rows[jid]["WAIT"] in (hms(want), hms(want + 1)), (rows[jid], j)
        assert re.fullmatch(HMS, rows[jid]["RUNTIME"]), rows[jid]
    ended = api[done]
    assert rows[done]["RUNTIME"] == hms(ended["end_time"] - ended["start_time"])
    for jid in (queued, held):  # waiting: no run time; the wait goes on until now
        assert re.fullmatch(HMS, rows[jid]["WAIT"]) and rows[jid]["RUNTIME"] == "-", rows[jid]
    j = api[gone]  # cancelled while held: it waited until its end
    assert rows[gone]["WAIT"] == hms(j["end_time"] - j["submit_time"])
    assert rows[gone]["RUNTIME"] == "-"

    def waited():
        r = {int(x["JOBID"]): x for x in
             parse_table(g.run("gqueue", "-f", "JOBID,WAIT", check=True).stdout)}
        return r[held]["WAIT"] >= "00:00:01"
    wait_for(waited, "the held job's WAIT to count on", timeout=5, interval=0.1)

    # -l: the long format has them.
    cp = g.run("gqueue", "-l", "-a", check=True)
    rows = parse_table(cp.stdout)
    assert list(rows[0]) == ["JOBID", "NAME", "USER", "ST", "WAIT", "RUNTIME", "TIMELIMIT",
                             "NODES", "NODELIST(REASON)"]
    assert {int(r["JOBID"]) for r in rows} == {done, run, queued, held, gone}
    assert re.fullmatch(HMS, next(r for r in rows if int(r["JOBID"]) == run)["RUNTIME"])
    cp = g.run("gqueue", "-l", "-f", "JOBID")
    assert_one_line_error(cp, "gqueue", 2, "-l and -f both choose the columns")
    cp = g.run("gqueue", "-l", "--start")
    assert_one_line_error(cp, "gqueue", 2, "-l and --start both choose the columns")


def test_unknown_field_lists_every_field(make_gflow):
    g = make_gflow()
    g.submit("-H", "-J", "one", "true")
    cp = g.run("gqueue", "-f", "JOBID,NOPE")
    assert_one_line_error(cp, "gqueue", 2, "unknown field 'NOPE' in -f; use ")
    listed = cp.stderr.split("; use ", 1)[1].split("; see ", 1)[0].split(", ")
    for name in ("JOBID", "START_TIME", "SLURMID", "WAIT", "RUNTIME", "TIMELIMIT", "PROJECT",
                 "NODELIST(REASON)", "BEGIN", "MEMORY"):
        assert name in listed, listed
    assert len(listed) == len(set(listed))
    # Every field listed is one -f takes, and --help names each.
    help_text = g.run("gqueue", "--help", check=True).stdout
    for name in listed:
        cp = g.run("gqueue", "-f", name)
        assert cp.returncode == 0, (name, cp.stderr)
        assert cp.stdout.splitlines()[0].strip() == name, (name, cp.stdout)
        assert name in help_text, name
