"""End-to-end tests of the faster `gqueue -a` (issue 10's listing goal; docs/design.md §7,
"A long listing is text to text"):

- A listing of every state takes the active jobs from the daemon's memory and the ended
  ones from the store, merged by id: ids interleaved between the two come out in order,
  with the first N, the last N, descending, a state list mixing both kinds, an id list;
  with no ended job at all the store is not needed.
- The client builds a plain table or CSV from the answer as it arrives: an answer of
  several socket reads (3,000 jobs) gives the same table as the path that keeps every row
  (-t, which for jobs without dependencies draws no tree), line for line.
"""
from conftest import parse_table, wait_for


def rows(g, *args):
    cp = g.run("gqueue", *args)
    assert cp.returncode == 0, cp.stderr
    return parse_table(cp.stdout), cp.stderr


def ids_states(table):
    return [(int(r["JOBID"]), r["ST"]) for r in table]


def mixed_jobs(g):
    """Ended and active jobs with interleaved ids: CD H F PD H CA CD H."""
    done1 = g.submit("true")
    g.wait_state(done1, "CD")
    held1 = g.submit("-H", "true")
    failed = g.submit("false")
    g.wait_state(failed, "F")
    later = g.submit("--begin", "now+5d", "true")
    held2 = g.submit("-H", "true")
    cancelled = g.submit("-H", "true")
    assert g.run("gcancel", cancelled).returncode == 0
    g.wait_state(cancelled, "CA")
    done2 = g.submit("true")
    g.wait_state(done2, "CD")
    held3 = g.submit("-H", "true")
    return [(done1, "CD"), (held1, "H"), (failed, "F"), (later, "PD"), (held2, "H"),
            (cancelled, "CA"), (done2, "CD"), (held3, "H")]


def test_every_state_comes_out_in_id_order_from_memory_and_store(gflow):
    g = gflow
    jobs = mixed_jobs(g)
    table, _ = rows(g, "-a")
    assert ids_states(table) == jobs

    table, note = rows(g, "-a", "-n", "3")
    assert ids_states(table) == jobs[:3]
    assert "Showing first 3 jobs; more were not shown" in note

    table, note = rows(g, "-a", "-n", "-3")
    assert ids_states(table) == jobs[-3:]
    assert "Showing last 3 jobs; more were not shown" in note

    table, note = rows(g, "-a", "-n", "8")
    assert ids_states(table) == jobs and note == ""

    table, _ = rows(g, "-a", "-r", "-jobid")
    assert ids_states(table) == jobs[::-1]
    table, _ = rows(g, "-a", "-r", "-jobid", "-n", "4")
    assert ids_states(table) == jobs[::-1][:4]

    table, _ = rows(g, "-s", "H,CD")
    assert ids_states(table) == [j for j in jobs if j[1] in ("H", "CD")]

    some = [jobs[1][0], jobs[2][0], jobs[5][0], jobs[7][0]]
    table, _ = rows(g, "-j", ",".join(map(str, some)))
    assert ids_states(table) == [j for j in jobs if j[0] in some]

    # The API says the same in JSON and TSV, the active jobs with their live reasons.
    api = [(j["id"], j["state"], j["reason"]) for j in g.jobs(user="all")]
    assert [(i, s) for i, s, _ in api] == jobs
    assert dict((i, r) for i, _, r in api)[jobs[3][0]] == "BeginTime"
    r = g.api("GET", "/v1/jobs?format=tsv&fields=id,state&limit=5")
    assert r.status == 200, r
    lines = r.text.splitlines()
    assert lines[0] == "id\tstate"
    assert [tuple(l.split("\t")) for l in lines[1:]] == [(str(i), s) for i, s in jobs[:5]]


def test_no_ended_job_lists_the_active_ones_alone(gflow):
    g = gflow
    held = [g.submit("-H", "true") for _ in range(3)]
    table, _ = rows(g, "-a")
    assert ids_states(table) == [(i, "H") for i in held]
    table, note = rows(g, "-a", "-n", "2")
    assert ids_states(table) == [(i, "H") for i in held[:2]]
    assert "more were not shown" in note
    table, _ = rows(g, "-c")
    assert table == []


def test_a_long_answer_read_as_it_arrives_matches_the_kept_rows(gflow):
    g = gflow
    first = g.submit("-H", "--array", "1-3000", "--name", "task", "true")
    g.wait_state(first, "H")
    wait_for(lambda: len(g.jobs(state="H", limit=3001)) == 3000, "the 3,000 held tasks")
    streamed = g.run("gqueue", "-a")
    kept = g.run("gqueue", "-a", "-t")  # keeps every row (no dependency: no tree drawn)
    assert streamed.returncode == kept.returncode == 0
    assert streamed.stdout == kept.stdout
    lines = streamed.stdout.splitlines()
    assert len(lines) == 3001 and lines[0].split()[0] == "JOBID"
    assert lines[-1].split()[:3] == [str(first + 2999), "task_3000", "H"]

    csv = g.run("gqueue", "-a", "-o", "csv", "-f", "JOBID,NAME,ST")
    assert csv.returncode == 0
    assert csv.stdout.splitlines() == ["JOBID,NAME,ST"] + [
        f"{first + k},task_{k + 1},H" for k in range(3000)]

    table, note = rows(g, "-a", "-n", "-2")
    assert [r["JOBID"] for r in table] == [str(first + 2998), str(first + 2999)]
    assert "Showing last 2 jobs; more were not shown" in note
