"""gqueue as gflow's users know it, through the real binaries: -u/--users lists and '*',
-N/--names, --since, -g/--group, -o json/yaml documents, the "Showing N of M" note, the
TIME column, state colours and cells cut to a terminal's width (on a pty), and -w/--watch
on a terminal (full-screen, q quits) and on a pipe."""

import fcntl
import json
import math
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time

import yaml

from conftest import TEST_USER, as_user, binary, ensure_test_user, parse_table, wait_for


def ids_of(cp):
    assert cp.returncode == 0, cp.stderr
    return [int(r["JOBID"]) for r in parse_table(cp.stdout)]


def spawn_pty(g, *args, cols=100, rows=30, env=None):
    """Starts gqueue ARGS with a pseudo-terminal as stdin, stdout and stderr of the given
    size; returns (process, master fd)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    full_env = dict(g.env)
    full_env.pop("COLUMNS", None)
    full_env.update(env or {})
    p = subprocess.Popen([binary("gqueue"), *map(str, args)], stdin=slave, stdout=slave,
                         stderr=slave, env=full_env, cwd=str(g.work), start_new_session=True)
    os.close(slave)
    return p, master


def read_until(master, pred, what, timeout=10.0):
    """Reads the pty until pred(text so far) holds; returns the text."""
    out = b""
    deadline = time.monotonic() + timeout
    while not pred(out.decode("utf-8", "replace")):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out waiting for {what}; got {out!r}")
        ready, _, _ = select.select([master], [], [], left)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other side closed
                chunk = b""
            if not chunk:
                if not pred(out.decode("utf-8", "replace")):
                    raise AssertionError(f"pty closed before {what}; got {out!r}")
                break
            out += chunk
    return out.decode("utf-8", "replace")


def run_pty(g, *args, **kw):
    """gqueue ARGS on a pty until it exits: (exit status, everything it wrote)."""
    p, master = spawn_pty(g, *args, **kw)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 10)
        assert ready, f"gqueue {args} wrote nothing for 10 s"
        try:
            chunk = os.read(master, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=10), out.decode("utf-8", "replace").replace("\r\n", "\n")


def display_width(s):
    """Terminal columns of s: CJK characters take two (what gqueue assumes)."""
    return sum(2 if 0x1100 <= ord(ch) <= 0x115F or 0x2E80 <= ord(ch) <= 0xA4CF or
               0xAC00 <= ord(ch) <= 0xD7A3 or 0xFF00 <= ord(ch) <= 0xFF60 else 1 for ch in s)


def test_users_lists_everyone_and_unknown_names(make_gflow):
    uid, gid, home = ensure_test_user()
    g = make_gflow()
    os.chmod(g.root, 0o755)
    workdir = g.root / "userwork"
    workdir.mkdir()
    os.chown(workdir, uid, gid)
    theirs = g.submit("-H", "true", user=as_user(uid, gid), cwd=workdir,
                      env={"HOME": home, "USER": TEST_USER})
    mine = g.submit("-H", "true")
    me = g.job(mine)["user"]

    assert ids_of(g.run("gqueue")) == [mine]
    assert ids_of(g.run("gqueue", "-u", f"{me},{TEST_USER}")) == [theirs, mine]
    assert ids_of(g.run("gqueue", "--users", TEST_USER)) == [theirs]
    assert ids_of(g.run("gqueue", "--user", TEST_USER)) == [theirs]
    assert ids_of(g.run("gqueue", "-u", "*")) == [theirs, mine]
    assert ids_of(g.run("gqueue", "-u", "all", "-f", "JOBID,USER")) == [theirs, mine]
    rows = parse_table(g.run("gqueue", "-u", f"{TEST_USER},{me}", "-f", "JOBID,USER").stdout)
    assert [r["USER"] for r in rows] == [TEST_USER, me]

    for bad in (["-u", "no-such-user-e2e"], ["-u", f"{me},no-such-user-e2e"]):
        cp = g.run("gqueue", *bad)
        assert cp.returncode == 1, cp
        assert cp.stderr.startswith("gqueue: no such user 'no-such-user-e2e'"), cp.stderr
        assert len(cp.stderr.splitlines()) == 1 and cp.stdout == ""


def test_names_group_and_since(gflow):
    a = gflow.submit("-H", "-J", "prep", "true")
    b = gflow.submit("-H", "-J", "train", "true")
    c = gflow.submit("-H", "-J", "eval", "true")
    cp = gflow.run("gbatch", "--parsable", "-H", "-J", "arr", "--array", "1-3", "true",
                   check=True)
    first = int(cp.stdout.split()[0])
    array = [first, first + 1, first + 2]
    lone = gflow.submit("-H", "-J", "prep", "true")

    assert ids_of(gflow.run("gqueue", "-N", "prep,eval")) == [a, c, lone]
    assert ids_of(gflow.run("gqueue", "--names", "train")) == [b]
    assert gflow.run("gqueue", "-N", "nothing").stdout.strip() == "No jobs found."
    assert ids_of(gflow.run("gqueue", "-N", "prep", "-n", "1")) == [a]

    assert ids_of(gflow.run("gqueue", "-g", array[0])) == array
    cp = gflow.run("gqueue", "--group", array[0], "-o", "csv", "-f", "JOBID", check=True)
    assert cp.stdout.split() == ["JOBID", *map(str, array)]
    assert ids_of(gflow.run("gqueue", "-g", lone)) == [lone]  # a job alone is its own group
    cp = gflow.run("gqueue", "-g", "x")
    assert cp.returncode == 2 and "gqueue: invalid group 'x' for -g" in cp.stderr

    everyone = [a, b, c, *array, lone]
    assert ids_of(gflow.run("gqueue", "--since", "1h")) == everyone
    assert ids_of(gflow.run("gqueue", "--since", "30m")) == everyone
    assert ids_of(gflow.run("gqueue", "--since", "2d")) == everyone
    assert ids_of(gflow.run("gqueue", "--since", "today")) == everyone
    assert ids_of(gflow.run("gqueue", "--since", "2000-01-01")) == everyone
    assert ids_of(gflow.run("gqueue", "--since", "2000-01-01T10:00")) == everyone
    cp = gflow.run("gqueue", "--since", "2099-01-01T00:00:00Z")
    assert cp.returncode == 0 and cp.stdout.strip() == "No jobs found.", cp
    # Unix seconds, as gflow takes them: the last job alone was submitted since.
    last = gflow.job(lone)["submit_time"]
    assert ids_of(gflow.run("gqueue", "--since", f"{math.floor(last * 1000) / 1000:.3f}")) == [lone]
    assert ids_of(gflow.run("gqueue", "--since", str(int(last) + 1))) == []
    for bad in ("soon", "1y", "2026-13-45"):
        cp = gflow.run("gqueue", "--since", bad)
        assert cp.returncode == 2, cp
        assert cp.stderr.startswith(f"gqueue: invalid --since '{bad}'"), cp.stderr


def test_json_and_yaml_documents(gflow):
    held = gflow.submit("-H", "-J", "yes", "true")  # a name YAML would read as a boolean
    other = gflow.submit("-H", "-J", "two words: x", "true")
    cp = gflow.run("gqueue", "-o", "json", check=True)
    doc = json.loads(cp.stdout)
    assert set(doc) == {"jobs", "total", "timestamp"}
    assert [j["id"] for j in doc["jobs"]] == [held, other] and doc["total"] == 2
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", doc["timestamp"])
    assert doc["jobs"][0]["state"] == "Hold" and doc["jobs"][0]["name"] == "yes"

    cp = gflow.run("gqueue", "-o", "yaml", check=True)
    ydoc = yaml.safe_load(cp.stdout)
    assert ydoc["total"] == 2 and isinstance(ydoc["timestamp"], str)
    assert ydoc["jobs"] == doc["jobs"]
    assert ydoc["jobs"][0]["name"] == "yes" and ydoc["jobs"][1]["name"] == "two words: x"

    cp = gflow.run("gqueue", "-s", "TO", "-o", "yaml", check=True)
    assert yaml.safe_load(cp.stdout)["jobs"] == []
    cp = gflow.run("gqueue", "-o", "xml")
    assert cp.returncode == 2 and "use table, csv, json or yaml" in cp.stderr


def test_showing_n_of_m(gflow):
    ids = [gflow.submit("-H", "true") for _ in range(5)]
    cp = gflow.run("gqueue", "-n", "2")
    assert ids_of(cp) == ids[:2]
    assert cp.stderr == "Showing first 2 of 5 jobs (use -n 0 to show all)\n"
    cp = gflow.run("gqueue", "-n", "-2")
    assert ids_of(cp) == ids[-2:]
    assert cp.stderr == "Showing last 2 of 5 jobs (use -n 0 to show all)\n"
    for shown in (["-n", "5"], ["-n", "9"], ["-n", "0"], []):
        cp = gflow.run("gqueue", *shown)
        assert ids_of(cp) == ids and cp.stderr == "", shown
    cp = gflow.run("gqueue", "-n", "2", "-r", "-gpus")  # sorted here: counted here
    assert cp.stderr.startswith("Showing first 2 of 5 jobs")
    cp = gflow.run("gqueue", "-n", "2", "-o", "csv")  # data formats stay data
    assert cp.stderr == ""

    # History is not counted (a long one would cost more than the listing): gqueue asks
    # for one job more, to know whether the limit hid any.
    done = [gflow.submit("true") for _ in range(3)]
    for j in done:
        gflow.wait_state(j)
    cp = gflow.run("gqueue", "-c", "-n", "1")
    assert ids_of(cp) == done[:1]
    assert cp.stderr == "Showing first 1 job; more were not shown (use -n 0 to show all)\n"
    cp = gflow.run("gqueue", "-a", "-n", "-3")
    assert ids_of(cp) == done
    assert cp.stderr == "Showing last 3 jobs; more were not shown (use -n 0 to show all)\n"
    for exact in (["-n", "3"], ["-n", "-3"], ["-n", "-5"]):
        cp = gflow.run("gqueue", "-c", *exact)
        assert ids_of(cp) == done and cp.stderr == "", exact
    cp = gflow.run("gqueue", "-a", "-t", "-n", "2")
    assert ids_of(cp) == ids[:2] and "Showing first 2 jobs; more" in cp.stderr
    cp = gflow.run("gqueue", "-a", "-n", "-2", "-o", "json", check=True)
    assert [j["id"] for j in json.loads(cp.stdout)["jobs"]] == done[-2:]
    cp = gflow.run("gqueue", "-a", "-n", "2", "-o", "json", check=True)
    assert [j["id"] for j in json.loads(cp.stdout)["jobs"]] == ids[:2]

    # The count gqueue asks for: from memory for active states, from the database else.
    for query, total in (("state=H", 5), ("state=PD,R", 0), ("state=CD", 3), ("", 8),
                         ("state=CD&limit=1&sort=-id", 3), (f"id={done[0]}-{done[-1]}", 3)):
        r = gflow.api("GET", f"/v1/jobs?format=count&{query}")
        assert r.status == 200 and r.json() == {"total": total}, (query, r)
    r = gflow.api("GET", "/v1/jobs?format=xml")
    assert r.status == 400 and "use json, tsv or count" in r.json()["error"]


def test_time_column_as_gflow(gflow):
    held = gflow.submit("-H", "true")
    done = gflow.submit("true")
    gflow.wait_state(done)
    rows = {int(r["JOBID"]): r for r in parse_table(gflow.run("gqueue", "-a").stdout)}
    assert rows[held]["TIME"] == "-"
    assert re.fullmatch(r"\d\d:\d\d:\d\d", rows[done]["TIME"]), rows[done]


def test_state_colours_on_a_terminal_only(gflow):
    gflow.submit("-H", "true")
    rc, out = run_pty(gflow)
    assert rc == 0, out
    assert "\x1b[1mH\x1b[0m" in out, repr(out)  # held: bold, as gflow
    rc, out = run_pty(gflow, env={"NO_COLOR": "1"})
    assert rc == 0 and "\x1b[" not in out, repr(out)
    cp = gflow.run("gqueue", check=True)
    assert "\x1b[" not in cp.stdout


def test_cells_cut_to_the_terminal_width(gflow):
    long_name = "x" * 200
    gflow.submit("-H", "-J", long_name, "true")
    gflow.submit("-H", "-J", "训练任务", "true")
    gflow.submit("-H", "-J", "abc", "true")

    # Through the terminal's own size (TIOCSWINSZ).
    rc, out = run_pty(gflow, cols=60, env={"NO_COLOR": "1"})
    assert rc == 0, out
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 4, lines
    assert all(display_width(l) <= 60 for l in lines), lines
    assert "…" in lines[1] and long_name not in out
    # Display columns: the column after NAME starts at the same column on every row.
    starts = set()
    for line in lines:
        name_end = re.search(r"^\d+\s+\S+", line) if line[0].isdigit() else None
        if name_end:
            starts.add(display_width(line[:name_end.end()]) + len(
                line[name_end.end():]) - len(line[name_end.end():].lstrip()))
    assert len(starts) == 1, lines

    # COLUMNS wins over the terminal's size.
    rc, out = run_pty(gflow, cols=200, env={"NO_COLOR": "1", "COLUMNS": "50"})
    assert rc == 0 and all(display_width(l) <= 50 for l in out.splitlines()), out

    # A wide terminal, a file: nothing is cut.
    rc, out = run_pty(gflow, cols=400, env={"NO_COLOR": "1"})
    assert long_name in out
    cp = gflow.run("gqueue", check=True)
    assert long_name in cp.stdout and "…" not in cp.stdout
    rows = parse_table(cp.stdout)
    assert [r["NAME"] for r in rows] == [long_name, "训练任务", "abc"]
    cp = gflow.run("gqueue", "-o", "json", check=True)
    assert json.loads(cp.stdout)["jobs"][0]["name"] == long_name


def test_watch_on_a_terminal(gflow):
    held = gflow.submit("-H", "-J", "watched", "true")
    p, master = spawn_pty(gflow, "-w", "--interval", "0.2")
    try:
        # Two frames drawn in place on the alternate screen.
        out = read_until(master, lambda t: t.count("\x1b[H") >= 2 and "watched" in t,
                         "two frames")
        assert "\x1b[?1049h" in out and "Every 0.2s: gqueue -w --interval 0.2" in out
        # A change shows in a later frame.
        gflow.run("gcancel", held, check=True)
        read_until(master, lambda t: "No jobs found." in t, "the frame after gcancel")
        os.write(master, b"q")
        rest = read_until(master, lambda t: "\x1b[?1049l" in t, "the main screen back")
        assert "\x1b[?25h" in rest  # the cursor is shown again
        assert p.wait(timeout=10) == 0
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)

    # Ctrl-C quits just as well, and restores the terminal.
    p, master = spawn_pty(gflow, "--watch")
    try:
        read_until(master, lambda t: "No jobs found." in t, "a frame")
        os.write(master, b"\x03")
        read_until(master, lambda t: "\x1b[?1049l" in t, "the main screen back")
        assert p.wait(timeout=10) == 0
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)


def test_watch_on_a_pipe(gflow):
    gflow.submit("-H", "-J", "piped", "true")
    p = subprocess.Popen([binary("gqueue"), "-w", "--interval", "0.1"], env=gflow.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        text = ""
        deadline = time.monotonic() + 10
        while text.count("JOBID") < 2:
            assert time.monotonic() < deadline, text
            line = p.stdout.readline().decode()
            assert line, "gqueue -w ended early"
            text += line
        assert "\x1b[" not in text and "piped" in text
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=10) == 0
    finally:
        if p.poll() is None:
            p.kill()
    cp = gflow.run("gqueue", "--interval", "5")
    assert cp.returncode == 2 and "--interval needs --watch" in cp.stderr
    cp = gflow.run("gqueue", "-w", "--interval", "0")
    assert cp.returncode == 2 and "invalid --interval '0'" in cp.stderr


def test_a_long_reason_does_not_widen_the_table(gflow):
    # A LaunchFailed reason of some 250 characters: the job's directory is gone when it
    # is released.
    gone = gflow.work / ("d" * 200)
    gone.mkdir()
    job = gflow.submit("-H", "true", cwd=gone)
    short = gflow.submit("-H", "-J", "short", "true")
    gone.rmdir()
    gflow.run("gjob", "release", job, check=True)
    j = gflow.wait_state(job)
    reason = j["reason"]
    assert reason.startswith("LaunchFailed") and len(reason) > 200, j

    rc, out = run_pty(gflow, "-a", cols=80, env={"NO_COLOR": "1"})
    assert rc == 0, out
    lines = [l for l in out.splitlines() if l.strip()]
    assert all(display_width(l) <= 80 for l in lines), lines
    failed = next(l for l in lines if l.startswith(str(job)))
    assert failed.endswith("…") and "(LaunchFailed" in failed
    assert next(l for l in lines if l.startswith(str(short))).endswith("(JobHeldUser)")

    # Whole to a file, and in -o json.
    cp = gflow.run("gqueue", "-a", "-f", "JOBID,REASON", check=True)
    assert reason in cp.stdout
    cp = gflow.run("gqueue", "-a", "-o", "json", check=True)
    assert json.loads(cp.stdout)["jobs"][0]["state_reason"] == reason  # gflow's "reason": PD H CA
